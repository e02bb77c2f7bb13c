//! One typist as plain state: the field's text, the suggestion it holds,
//! the pause it waits in, and what it counted. The runner feeds it
//! keystrokes, debounce deadlines and answers; nothing here waits.
//!
//! # Invariants
//! - A suggestion is held only while it is valid for the field: the field
//!   is its prompt, or its prompt followed by the start of its completion
//!   with something left to suggest. Anything else is stale and discarded.
//! - A newer request's answer is never replaced by an older one's.
//! - Every pause keystroke in the window is counted once: held (a valid
//!   suggestion already there), answered (the time until one arrived), or
//!   missed (typing went on, or the run ended, first).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::keystrokes::Key;
use crate::rung::{histogram, Window};

/// What a typist made of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A completion, and where it came from (`X-Fabricd-Source`).
    Completion {
        text: String,
        source: Option<String>,
    },
    /// A documented typed outcome (`superseded`, `overloaded`, …): the
    /// typing UI shows nothing.
    Typed(String),
    /// Not a documented answer: a failure.
    Raw(String),
    /// A 200 that cannot be right.
    Corrupt(String),
}

/// A request to send: the field's text as the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub seq: u64,
    pub prompt: String,
}

/// What typists counted in the measurement window.
#[derive(Debug, Clone)]
pub struct TypistStats {
    pub typists: usize,
    pub window: Duration,
    pub keystrokes: u64,
    pub requests: u64,
    /// Completions received.
    pub completions: u64,
    /// Completions discarded: not valid for the field when they came, or
    /// older than the one shown.
    pub stale: u64,
    /// Completions by `X-Fabricd-Source` (`none` without the header).
    pub sources: BTreeMap<String, u64>,
    pub typed: BTreeMap<String, u64>,
    pub raw: u64,
    pub corrupt: u64,
    pub samples: Vec<String>,
    pub pauses: u64,
    /// Pauses where a valid suggestion was already held (latency 0).
    pub pauses_held: u64,
    /// Pauses where typing went on before a valid suggestion came.
    pub pauses_missed: u64,
    /// Suggestion latency of the pauses that got one, µs.
    pub pause_latency: Histogram<u64>,
    /// How late the harness sent keystrokes, µs.
    pub lag: Histogram<u64>,
    /// The harness's CPU over the rung, as a share of one core.
    pub harness_cpu: f64,
    pub wall: Duration,
    /// The daemon's counters over the window (`GET /metrics`), when it has
    /// them.
    pub daemon: Option<BTreeMap<String, f64>>,
}

impl TypistStats {
    pub fn new(typists: usize) -> TypistStats {
        TypistStats {
            typists,
            window: Duration::ZERO,
            keystrokes: 0,
            requests: 0,
            completions: 0,
            stale: 0,
            sources: BTreeMap::new(),
            typed: BTreeMap::new(),
            raw: 0,
            corrupt: 0,
            samples: Vec::new(),
            pauses: 0,
            pauses_held: 0,
            pauses_missed: 0,
            pause_latency: histogram(),
            lag: histogram(),
            harness_cpu: 0.0,
            wall: Duration::ZERO,
            daemon: None,
        }
    }

    pub(crate) fn sample(&mut self, s: String) {
        if self.samples.len() < 5 {
            self.samples.push(s);
        }
    }

    pub fn merge(&mut self, o: &TypistStats) {
        self.keystrokes += o.keystrokes;
        self.requests += o.requests;
        self.completions += o.completions;
        self.stale += o.stale;
        for (k, v) in &o.sources {
            *self.sources.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.typed {
            *self.typed.entry(k.clone()).or_default() += v;
        }
        self.raw += o.raw;
        self.corrupt += o.corrupt;
        for s in &o.samples {
            self.sample(s.clone());
        }
        self.pauses += o.pauses;
        self.pauses_held += o.pauses_held;
        self.pauses_missed += o.pauses_missed;
        let _ = self.pause_latency.add(&o.pause_latency);
        let _ = self.lag.add(&o.lag);
    }

    /// Answers of any kind received.
    pub fn answers(&self) -> u64 {
        self.completions + self.typed.values().sum::<u64>() + self.raw + self.corrupt
    }

    /// The pause latency at quantile `q`, in ms, counting missed pauses as
    /// later than any answer: `None` when the quantile falls among them.
    pub fn pause_quantile_ms(&self, q: f64) -> Option<f64> {
        let answered = self.pause_latency.len();
        let all = answered + self.pauses_missed;
        if all == 0 {
            return Some(0.0);
        }
        let rank = (q * all as f64).ceil().max(1.0);
        if rank > answered as f64 {
            return None;
        }
        let v = self.pause_latency.value_at_quantile(rank / answered as f64);
        Some(v as f64 / 1000.0)
    }
}

#[derive(Debug, Clone)]
struct Held {
    seq: u64,
    prompt_len: usize,
    /// The prompt and its completion.
    full: String,
}

impl Held {
    /// Whether this suggestion is valid for `text`: `text` is its prompt,
    /// or its prompt and the start of its completion with something left.
    fn covers(&self, text: &str) -> bool {
        text.len() >= self.prompt_len
            && self.full.starts_with(text)
            && (text.len() == self.prompt_len || !self.full[text.len()..].trim().is_empty())
    }
}

#[derive(Debug, Clone, Copy)]
struct Pause {
    at: Instant,
    in_window: bool,
}

/// One typist.
#[derive(Debug)]
pub struct Typist {
    window: Window,
    debounce: Duration,
    text: String,
    held: Option<Held>,
    seq: u64,
    due_send: Option<Instant>,
    pause: Option<Pause>,
    pub stats: TypistStats,
}

impl Typist {
    pub fn new(window: Window, debounce: Duration) -> Typist {
        Typist {
            window,
            debounce,
            text: String::new(),
            held: None,
            seq: 0,
            due_send: None,
            pause: None,
            stats: TypistStats::new(1),
        }
    }

    /// The field's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The suggestion shown: what is left of the held completion.
    pub fn suggestion(&self) -> Option<&str> {
        self.held.as_ref().map(|h| &h.full[self.text.len()..])
    }

    /// When a debounced request is due.
    pub fn due_send(&self) -> Option<Instant> {
        self.due_send
    }

    /// A key pressed at `at` (when it was due): a request now, or one due
    /// after the debounce.
    pub fn key(&mut self, at: Instant, key: &Key) -> Option<Request> {
        let in_window = self.window.contains(at);
        // Typing goes on: a pause still waiting got nothing in time.
        self.miss_pause();
        if key.clear {
            self.text.clear();
            self.held = None;
        }
        self.text.push(key.ch);
        if in_window {
            self.stats.keystrokes += 1;
        }
        if self.held.as_ref().is_some_and(|h| !h.covers(&self.text)) {
            self.held = None;
        }
        if key.pause {
            if self.held.is_some() {
                if in_window {
                    self.stats.pauses += 1;
                    self.stats.pauses_held += 1;
                    let _ = self.stats.pause_latency.record(0);
                }
            } else {
                self.pause = Some(Pause { at, in_window });
            }
        }
        self.due_send = None;
        if self.text.trim().is_empty() {
            return None;
        }
        if self.debounce.is_zero() {
            return Some(self.send(at));
        }
        self.due_send = Some(at + self.debounce);
        None
    }

    /// The debounce ran out at `now` with no key since: the request.
    pub fn flush(&mut self, now: Instant) -> Option<Request> {
        match self.due_send {
            Some(due) if now >= due => {
                self.due_send = None;
                Some(self.send(now))
            }
            _ => None,
        }
    }

    fn send(&mut self, now: Instant) -> Request {
        self.seq += 1;
        if self.window.contains(now) {
            self.stats.requests += 1;
        }
        Request {
            seq: self.seq,
            prompt: self.text.clone(),
        }
    }

    /// The answer to request `seq` (whose prompt was `prompt`), come at
    /// `now`.
    pub fn answer(&mut self, now: Instant, seq: u64, prompt: &str, answer: Answer) {
        let in_window = self.window.contains(now);
        match answer {
            Answer::Completion { text, source } => {
                if in_window {
                    self.stats.completions += 1;
                    *self
                        .stats
                        .sources
                        .entry(source.unwrap_or_else(|| "none".to_owned()))
                        .or_default() += 1;
                }
                let held = Held {
                    seq,
                    prompt_len: prompt.len(),
                    full: format!("{prompt}{text}"),
                };
                let newer = self.held.as_ref().is_none_or(|h| seq > h.seq);
                if newer && held.covers(&self.text) {
                    self.held = Some(held);
                    if let Some(p) = self.pause.take() {
                        if p.in_window {
                            self.stats.pauses += 1;
                            let us = now.saturating_duration_since(p.at).as_micros();
                            let _ = self.stats.pause_latency.record((us as u64).max(1));
                        }
                    }
                } else if in_window {
                    self.stats.stale += 1;
                }
            }
            Answer::Typed(kind) => {
                if in_window {
                    *self.stats.typed.entry(kind).or_default() += 1;
                }
            }
            Answer::Raw(s) => {
                if in_window {
                    self.stats.raw += 1;
                    self.stats.sample(s);
                }
            }
            Answer::Corrupt(s) => {
                if in_window {
                    self.stats.corrupt += 1;
                    self.stats.sample(s);
                }
            }
        }
    }

    /// The harness sent the key due at `due` late by `lag`.
    pub fn lag(&mut self, due: Instant, lag: Duration) {
        if self.window.contains(due) {
            let _ = self.stats.lag.record((lag.as_micros() as u64).max(1));
        }
    }

    /// The typist stops (the run is over): a pause still waiting missed.
    pub fn stop(&mut self) {
        self.miss_pause();
    }

    fn miss_pause(&mut self) {
        if let Some(p) = self.pause.take() {
            if p.in_window {
                self.stats.pauses += 1;
                self.stats.pauses_missed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ch: char, pause: bool) -> Key {
        Key {
            clear: false,
            ch,
            pause,
            gap: Duration::from_millis(200),
        }
    }

    /// Within the histogram's three significant digits.
    fn near(v: Option<f64>, want: f64) -> bool {
        v.is_some_and(|v| (v - want).abs() <= want * 1e-3)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn completion(text: &str) -> Answer {
        Answer::Completion {
            text: text.into(),
            source: Some("fabric".into()),
        }
    }

    struct Clock(Instant);

    impl Clock {
        fn at(&self, ms_: u64) -> Instant {
            self.0 + ms(ms_)
        }
    }

    fn typist(debounce: u64) -> (Typist, Clock) {
        let t0 = Instant::now();
        let window = Window {
            from: t0,
            to: t0 + Duration::from_secs(3600),
        };
        (Typist::new(window, ms(debounce)), Clock(t0))
    }

    #[test]
    fn a_suggestion_at_a_pause_is_timed_from_the_keystroke() {
        let (mut t, c) = typist(0);
        let r1 = t.key(c.at(0), &key('A', false)).expect("a request a key");
        let r2 = t.key(c.at(200), &key('n', true)).expect("a request a key");
        assert_eq!((r1.prompt.as_str(), r2.prompt.as_str()), ("A", "An"));
        // The answer for "A" is stale: the field says "An".
        t.answer(c.at(250), r1.seq, "A", completion(" apple"));
        assert_eq!(t.suggestion(), None);
        assert_eq!(t.stats.stale, 1);
        t.answer(c.at(500), r2.seq, "An", completion("d God said"));
        assert_eq!(t.suggestion(), Some("d God said"));
        assert_eq!(t.stats.pauses, 1);
        assert!(near(t.stats.pause_quantile_ms(0.5), 300.0));
        assert_eq!(t.stats.requests, 2);
        assert_eq!(t.stats.keystrokes, 2);
        assert_eq!(t.stats.sources["fabric"], 2);
    }

    #[test]
    fn typing_into_the_suggestion_keeps_it_and_a_pause_there_is_held() {
        let (mut t, c) = typist(0);
        let r = t.key(c.at(0), &key('A', false)).expect("request");
        t.answer(c.at(50), r.seq, "A", completion("nd God"));
        t.key(c.at(200), &key('n', false));
        assert_eq!(t.suggestion(), Some("d God"));
        t.key(c.at(400), &key('d', true));
        assert_eq!(t.suggestion(), Some(" God"));
        assert_eq!((t.stats.pauses, t.stats.pauses_held), (1, 1));
        assert_eq!(t.stats.pause_quantile_ms(0.99), Some(0.0));
        // Typing away from it drops it.
        t.key(c.at(600), &key('y', false));
        assert_eq!(t.suggestion(), None);
    }

    #[test]
    fn an_older_answer_never_replaces_a_newer_one() {
        let (mut t, c) = typist(0);
        let r1 = t.key(c.at(0), &key('A', false)).expect("request");
        let r2 = t.key(c.at(100), &key('n', false)).expect("request");
        t.answer(c.at(150), r2.seq, "An", completion("d God"));
        // Valid for "An" too ("A" + "nd the"), but older than what is shown.
        t.answer(c.at(160), r1.seq, "A", completion("nd the"));
        assert_eq!(t.suggestion(), Some("d God"));
        assert_eq!(t.stats.stale, 1);
    }

    #[test]
    fn a_pause_that_gets_nothing_before_typing_goes_on_is_missed() {
        let (mut t, c) = typist(0);
        let r = t.key(c.at(0), &key('A', true)).expect("request");
        t.answer(c.at(100), r.seq, "A", Answer::Typed("overloaded".into()));
        let r2 = t.key(c.at(1500), &key('n', true)).expect("request");
        t.answer(c.at(1600), r2.seq, "An", Answer::Typed("superseded".into()));
        t.stop();
        assert_eq!((t.stats.pauses, t.stats.pauses_missed), (2, 2));
        assert_eq!(t.stats.pause_quantile_ms(0.5), None);
        assert_eq!(t.stats.typed["overloaded"], 1);
        assert_eq!(t.stats.typed["superseded"], 1);
        assert_eq!(t.stats.answers(), 2);
    }

    #[test]
    fn missed_pauses_count_as_later_than_any_answer() {
        let (mut t, _) = typist(0);
        for v in 1..=90u64 {
            t.stats.pause_latency.record(v * 1000).expect("record");
        }
        t.stats.pauses_missed = 10;
        assert!(near(t.stats.pause_quantile_ms(0.5), 50.0));
        assert!(near(t.stats.pause_quantile_ms(0.90), 90.0));
        assert_eq!(t.stats.pause_quantile_ms(0.95), None);
    }

    #[test]
    fn a_debounce_sends_one_request_for_a_run_of_quick_keys() {
        let (mut t, c) = typist(300);
        assert_eq!(t.key(c.at(0), &key('A', false)), None);
        assert_eq!(t.key(c.at(100), &key('n', false)), None);
        assert_eq!(t.flush(c.at(200)), None, "not due yet");
        assert_eq!(t.due_send(), Some(c.at(400)));
        let r = t.flush(c.at(400)).expect("due");
        assert_eq!(r.prompt, "An");
        assert_eq!(t.flush(c.at(500)), None, "sent once");
        assert_eq!(t.stats.requests, 1);
        assert_eq!(t.stats.keystrokes, 2);
    }

    #[test]
    fn a_cleared_field_drops_its_suggestion_and_blank_text_asks_nothing() {
        let (mut t, c) = typist(0);
        let r = t.key(c.at(0), &key('A', false)).expect("request");
        t.answer(c.at(10), r.seq, "A", completion("nd"));
        let clear = Key {
            clear: true,
            ch: ' ',
            pause: false,
            gap: ms(100),
        };
        assert_eq!(t.key(c.at(100), &clear), None);
        assert_eq!(t.text(), " ");
        assert_eq!(t.suggestion(), None);
    }

    #[test]
    fn nothing_outside_the_window_is_counted() {
        let t0 = Instant::now();
        let window = Window {
            from: t0 + Duration::from_secs(10),
            to: t0 + Duration::from_secs(20),
        };
        let mut t = Typist::new(window, Duration::ZERO);
        let r = t.key(t0, &key('A', true)).expect("request");
        t.answer(t0 + ms(100), r.seq, "A", completion("nd"));
        t.lag(t0, ms(5));
        assert_eq!(t.stats.keystrokes + t.stats.requests + t.stats.pauses, 0);
        assert_eq!(t.stats.completions, 0);
        assert!(t.stats.lag.is_empty());
    }
}
