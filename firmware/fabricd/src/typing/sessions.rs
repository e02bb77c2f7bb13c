//! The session table: what each typing session last asked and was told,
//! for typed forward.
//!
//! A session's entry is either its request still unanswered (`Pending`:
//! the prompt the fabric is working on, which a newer request may join) or
//! its last answer (`Answered`: the prompt and the text the client was
//! shown, with where each token of it ends). A newer prompt that is the
//! entry's prompt plus text the answer began with (the user typed what was
//! suggested) is answered with the rest of that answer, if at least
//! `min_tokens` of it are left.
//!
//! Prompts are not kept, only their length and a hash (seeded per process):
//! a newer prompt extends an older one when its first bytes hash the same.
//! The table is bounded by entries and by bytes; the least recently used
//! sessions go first.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_model::Tokenizer;

use super::cadence::Cadence;
use super::lru::Lru;
use crate::http::text::Utf8Decoder;
use crate::sched::{ReqId, SessionKey};

/// A prompt, as the table remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptMark {
    len: usize,
    hash: u64,
}

impl PromptMark {
    pub fn of(hasher: &foldhash::fast::RandomState, prompt: &str) -> PromptMark {
        PromptMark {
            len: prompt.len(),
            hash: hasher.hash_one(prompt.as_bytes()),
        }
    }
}

/// What must be the same for one request's answer to do for another's:
/// the model, the temperature and the stop token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compat {
    pub model: Arc<str>,
    pub temperature_bits: u32,
    pub stop_token: u32,
}

/// Text the client was shown, and the byte offset where each of the
/// tokens that made it ends (ascending; a token's text that ends in the
/// middle of a character ends where the character does).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown {
    pub text: String,
    pub cuts: Vec<u32>,
    /// Whether it ended at `max_tokens` (`length`) rather than a stop.
    pub length: bool,
}

impl Shown {
    /// The text of `tokens` with the cut after each, as the answer decodes
    /// it, clipped to `shown` bytes (the answer's own stop sequences may
    /// have cut it shorter).
    pub fn of_tokens(tokenizer: &Tokenizer, tokens: &[u32], length: bool) -> Shown {
        let mut d = Utf8Decoder::default();
        let mut text = String::new();
        let mut cuts = Vec::with_capacity(tokens.len());
        for &t in tokens
            .iter()
            .filter(|&&t| t != fabric_model::tokenizer::EOS)
        {
            d.push_token(tokenizer.token_text(t), tokenizer.token_bytes(t), &mut text);
            cuts.push(text.len() as u32);
        }
        d.finish(&mut text);
        if let Some(last) = cuts.last_mut() {
            *last = text.len() as u32;
        }
        Shown { text, cuts, length }
    }

    /// Cut to its first `len` bytes (a char boundary).
    pub fn clip(&mut self, len: usize) {
        if len >= self.text.len() {
            return;
        }
        self.text.truncate(len);
        self.cuts.retain(|&c| (c as usize) < len);
        self.cuts.push(len as u32);
        self.length = false;
    }

    /// What is left of it after `typed` (which it must begin with): at
    /// least `min_tokens` tokens, at most `max_tokens` (then it ends at
    /// `length`). The tokens a typed prefix ends inside count as left.
    pub fn rest(&self, typed: &str, min_tokens: u32, max_tokens: u32) -> Option<Shown> {
        if !self.text.starts_with(typed) {
            return None;
        }
        let start = typed.len() as u32;
        let first = self.cuts.partition_point(|&c| c <= start);
        let left = self.cuts.len() - first;
        if left == 0 || left < min_tokens as usize {
            return None;
        }
        let take = left.min(max_tokens as usize);
        let end = self.cuts[first + take - 1];
        Some(Shown {
            text: self.text[start as usize..end as usize].to_owned(),
            cuts: self.cuts[first..first + take]
                .iter()
                .map(|c| c - start)
                .collect(),
            length: self.length || take < left,
        })
    }

    fn bytes(&self) -> usize {
        self.text.len() + 4 * self.cuts.len()
    }
}

#[derive(Debug)]
enum Entry {
    Pending {
        id: ReqId,
        /// The prompt the fabric works on (for a join, the joined one's).
        base: PromptMark,
        /// Whether a newer request may join it (it hears only its end).
        joinable: bool,
        compat: Compat,
    },
    Answered {
        prompt: PromptMark,
        shown: Shown,
        compat: Compat,
        epoch: u64,
    },
}

/// What the table says about a new request of a session.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing to go on.
    None,
    /// The answer, from the last one: the rest of it after what was typed.
    Forward(Shown),
    /// Join the session's request `target`, which works on `base`, the
    /// start of this prompt; `typed` is the rest of this prompt.
    Join {
        target: ReqId,
        base: PromptMark,
        typed: String,
    },
}

/// What the table holds, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionFigures {
    pub entries: usize,
    pub bytes: usize,
    pub evictions: u64,
}

/// The session table.
#[derive(Debug)]
pub struct Sessions {
    lru: Lru<SessionKey, Entry>,
    /// When each session's requests came, and the highest `session_seq`
    /// it has sent: kept apart from `lru`, whose entry a session's answers
    /// replace. The two share the byte budget (a quarter of it here), and
    /// each holds at most `max_entries`.
    clocks: Lru<SessionKey, Clock>,
    hasher: foldhash::fast::RandomState,
}

/// A session's clock: its cadence, and its highest `session_seq`.
#[derive(Debug)]
struct Clock {
    cadence: Cadence,
    seq: Option<u64>,
}

/// A session silent this long whose next request is numbered lower than
/// its last has started again (a client restarted under the same session
/// id, counting from its first number): its numbers are taken afresh. A
/// request that lost a race to a newer one of its session on another
/// connection comes milliseconds behind it, never this long.
pub const RESTART_AFTER: Duration = Duration::from_secs(10);

/// A request of a session, taken in the client's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub id: ReqId,
    /// How long after it the session counts as paused, if it has typed.
    pub pause_after: Option<Duration>,
}

/// A request whose `session_seq` is not above one its session already
/// sent: the client has asked for something newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

impl Sessions {
    pub fn new(
        max_entries: usize,
        max_bytes: usize,
        hasher: foldhash::fast::RandomState,
    ) -> Sessions {
        let seq_bytes = max_bytes / 4;
        Sessions {
            lru: Lru::new(max_bytes - seq_bytes, max_entries),
            clocks: Lru::new(seq_bytes, max_entries),
            hasher,
        }
    }

    /// Takes a request of `key` that came at `now`, numbered `seq` in
    /// the client's order if the client numbers them: it is given an id
    /// by `next_id` (under this table's lock, so requests that number
    /// themselves get ids in their own order, whatever order their
    /// connections deliver them in), or is [`Stale`]. With the id comes
    /// how long after it the session counts as paused (at most
    /// `hold_max`; see [`cadence`](super::cadence)). A session the table
    /// has let go starts again from its next number.
    pub fn order(
        &mut self,
        key: &SessionKey,
        seq: Option<u64>,
        now: Instant,
        hold_max: Duration,
        next_id: impl FnOnce() -> ReqId,
    ) -> Result<Arrival, Stale> {
        let clock = match self.clocks.get_mut(key) {
            Some(c) => {
                if let Some(seq) = seq {
                    let restarted = c
                        .cadence
                        .since_last(now)
                        .is_some_and(|silent| silent >= RESTART_AFTER);
                    if c.seq.is_some_and(|last| last >= seq) && !restarted {
                        return Err(Stale);
                    }
                    c.seq = Some(seq);
                }
                c.cadence.arrive(now);
                c.cadence
            }
            None => {
                let cadence = Cadence::new(now);
                let bytes = key.id.len() + std::mem::size_of::<Clock>();
                self.clocks
                    .insert(key.clone(), Clock { cadence, seq }, bytes);
                cadence
            }
        };
        Ok(Arrival {
            id: next_id(),
            pause_after: clock.pause_after(hold_max),
        })
    }

    /// How the table remembers `prompt`.
    pub fn mark(&self, prompt: &str) -> PromptMark {
        PromptMark::of(&self.hasher, prompt)
    }

    /// The part of `prompt` after `base`, if `prompt` begins with it.
    fn after<'p>(&self, base: PromptMark, prompt: &'p str) -> Option<&'p str> {
        let head = prompt.get(..base.len)?;
        (self.mark(head) == base).then(|| &prompt[base.len..])
    }

    /// What to do with a request of `key` for `prompt`. `joinable`: it may
    /// join (it hears only its end); `epoch`: the slots' models now.
    #[allow(clippy::too_many_arguments)]
    pub fn lookup(
        &mut self,
        key: &SessionKey,
        prompt: &str,
        compat: &Compat,
        joinable: bool,
        epoch: u64,
        min_tokens: u32,
        max_tokens: u32,
    ) -> Lookup {
        let Some(entry) = self.lru.peek(key) else {
            return Lookup::None;
        };
        let found = match entry {
            Entry::Answered {
                prompt: mark,
                shown,
                compat: c,
                epoch: e,
            } if c == compat && *e == epoch => self
                .after(*mark, prompt)
                .and_then(|typed| shown.rest(typed, min_tokens, max_tokens))
                .map(Lookup::Forward),
            Entry::Pending {
                id,
                base,
                joinable: true,
                compat: c,
            } if joinable && c == compat => self.after(*base, prompt).map(|typed| Lookup::Join {
                target: *id,
                base: *base,
                typed: typed.to_owned(),
            }),
            _ => None,
        };
        match found {
            Some(l) => {
                // A use: it stays longer.
                self.lru.get_mut(key);
                l
            }
            None => Lookup::None,
        }
    }

    /// The session's unanswered request, if the table knows one.
    pub fn pending(&self, key: &SessionKey) -> Option<ReqId> {
        match self.lru.peek(key)? {
            Entry::Pending { id, .. } => Some(*id),
            Entry::Answered { .. } => None,
        }
    }

    /// Request `id` of `key`, working on `base`, was admitted.
    pub fn admitted(
        &mut self,
        key: SessionKey,
        id: ReqId,
        base: PromptMark,
        joinable: bool,
        compat: Compat,
    ) {
        // A newer request of the session got here first (on another
        // connection): its entry stays.
        if matches!(self.lru.peek(&key), Some(Entry::Pending { id: p, .. }) if *p > id) {
            return;
        }
        let bytes = key.id.len() + compat.model.len();
        let entry = Entry::Pending {
            id,
            base,
            joinable,
            compat,
        };
        self.lru.insert(key, entry, bytes);
    }

    /// Request `id` of `key`, for `prompt`, was answered `shown`: kept if
    /// no newer request of the session has come since (`at_edge`: it was
    /// answered without the fabric, and is the newest by construction).
    #[allow(clippy::too_many_arguments)]
    pub fn answered(
        &mut self,
        key: SessionKey,
        id: ReqId,
        prompt: PromptMark,
        shown: Shown,
        compat: Compat,
        epoch: u64,
        at_edge: bool,
    ) {
        let newest = match self.lru.peek(&key) {
            Some(Entry::Pending { id: p, .. }) => *p == id || (at_edge && *p < id),
            Some(Entry::Answered { .. }) | None => at_edge,
        };
        if !newest {
            return;
        }
        let bytes = key.id.len() + compat.model.len() + shown.bytes();
        let entry = Entry::Answered {
            prompt,
            shown,
            compat,
            epoch,
        };
        self.lru.insert(key, entry, bytes);
    }

    /// Request `id` of `key` ended without an answer: the session has
    /// nothing to go on.
    pub fn failed(&mut self, key: &SessionKey, id: ReqId) {
        if self.pending(key) == Some(id) {
            self.lru.remove(key);
        }
    }

    pub fn figures(&self) -> SessionFigures {
        SessionFigures {
            entries: self.lru.len(),
            bytes: self.lru.bytes() + self.clocks.bytes(),
            evictions: self.lru.evicted() + self.clocks.evicted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn key(id: &str) -> SessionKey {
        SessionKey {
            ip: IpAddr::from([127, 0, 0, 1]),
            id: Arc::from(id),
        }
    }

    fn compat() -> Compat {
        Compat {
            model: Arc::from("kjv"),
            temperature_bits: 0,
            stop_token: 256,
        }
    }

    fn shown(words: &[&str]) -> Shown {
        let mut s = Shown::default();
        for w in words {
            s.text.push_str(w);
            s.cuts.push(s.text.len() as u32);
        }
        s
    }

    #[test]
    fn the_rest_after_what_was_typed() {
        let s = shown(&[" the", " earth", " was", " without"]);
        // Typed a whole word and part of the next: the word typed into is
        // still a token left.
        let r = s.rest(" the ea", 1, 16).expect("rest");
        assert_eq!(r.text, "rth was without");
        assert_eq!(r.cuts, [3, 7, 15]);
        assert!(!r.length);
        // Capped at max_tokens: it ends at length.
        let r = s.rest(" the", 1, 2).expect("rest");
        assert_eq!((r.text.as_str(), r.length), (" earth was", true));
        // Too little left, or something else typed.
        assert!(s.rest(" the earth was", 2, 16).is_none());
        assert!(s.rest(" the earth was without", 1, 16).is_none());
        assert!(s.rest(" a", 1, 16).is_none());
    }

    #[test]
    fn a_session_types_forward_into_its_answer_or_joins_its_request() {
        let mut t = Sessions::new(16, 1 << 20, Default::default());
        let k = key("s1");
        let p1 = "In the beginning God created";
        let m1 = t.mark(p1);
        t.admitted(k.clone(), 1, m1, true, compat());
        // Typed on while 1 decodes: join it.
        assert_eq!(
            t.lookup(
                &k,
                "In the beginning God created the",
                &compat(),
                true,
                0,
                2,
                8
            ),
            Lookup::Join {
                target: 1,
                base: m1,
                typed: " the".into()
            }
        );
        // A different start, another model, or a stream: nothing.
        assert_eq!(
            t.lookup(&k, "In the end", &compat(), true, 0, 2, 8),
            Lookup::None
        );
        assert_eq!(t.lookup(&k, p1, &compat(), false, 0, 2, 8), Lookup::None);
        t.answered(
            k.clone(),
            1,
            t.mark(p1),
            shown(&[" the", " heaven", " and", " the", " earth"]),
            compat(),
            0,
            false,
        );
        let got = t.lookup(
            &k,
            "In the beginning God created the hea",
            &compat(),
            true,
            0,
            2,
            8,
        );
        let Lookup::Forward(rest) = got else {
            panic!("{got:?}")
        };
        assert_eq!(rest.text, "ven and the earth");
        // Under other models (the epoch moved): nothing.
        assert_eq!(
            t.lookup(
                &k,
                "In the beginning God created the",
                &compat(),
                true,
                1,
                2,
                8
            ),
            Lookup::None
        );
        // An older request's answer does not replace a newer one's.
        t.admitted(k.clone(), 3, t.mark("x"), true, compat());
        t.answered(
            k.clone(),
            2,
            t.mark("y"),
            shown(&["a", "b"]),
            compat(),
            0,
            false,
        );
        assert_eq!(t.pending(&k), Some(3));
        t.failed(&k, 3);
        assert_eq!(t.pending(&k), None);
    }

    #[test]
    fn the_table_is_bounded_by_entries_and_bytes() {
        let mut t = Sessions::new(100, 64 * 1024, Default::default());
        for i in 0..10_000 {
            let k = key(&format!("{i:0128}"));
            let m = t.mark("p");
            let at = Instant::now();
            let got = t.order(&k, Some(7), at, Duration::from_millis(600), || i);
            assert_eq!(got.map(|a| a.id), Ok(i));
            t.answered(k, i, m, shown(&[&"w".repeat(200)]), compat(), 0, true);
        }
        let f = t.figures();
        assert!(f.entries <= 100 && f.bytes <= 64 * 1024, "{f:?}");
        assert!(f.evictions >= 9_900, "{f:?}");
    }

    #[test]
    fn requests_are_taken_in_the_clients_order_and_teach_the_sessions_pace() {
        let mut t = Sessions::new(16, 1 << 20, Default::default());
        let (k, u) = (key("numbered"), key("unnumbered"));
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let max = Duration::from_millis(600);
        let first = t.order(&k, Some(1), t0, max, || 1);
        assert_eq!(
            first,
            Ok(Arrival {
                id: 1,
                pause_after: None
            })
        );
        let second = t.order(&k, Some(2), at(150), max, || 2).expect("in order");
        assert_eq!(second.pause_after, Some(Duration::from_millis(450)));
        // Not above the last number: stale, and no id is taken.
        assert_eq!(t.order(&k, Some(2), at(200), max, || 3), Err(Stale));
        // After a silence the client counts from 1 again (it restarted
        // under the same session id): a new run, not stale; then its own
        // order holds again.
        let restart = at(150) + RESTART_AFTER;
        let again = t.order(&k, Some(1), restart, max, || 6);
        assert_eq!(again.map(|a| a.id), Ok(6));
        assert_eq!(
            t.order(&k, Some(1), restart + Duration::from_millis(5), max, || 7),
            Err(Stale)
        );
        // A session that does not number its requests learns its pace too.
        t.order(&u, None, t0, max, || 4).expect("no number");
        let next = t.order(&u, None, at(400), max, || 5).expect("no number");
        assert_eq!(next.pause_after, Some(max));
    }
}
