//! Speculative typing at the edge: the completion cache and the session
//! table, which answer some requests without the queue or the fabric.
//!
//! A typing UI sends a request per keystroke; most are stale before they
//! are served. The scheduler supersedes a session's older request
//! ([`sched`](crate::sched), `sessions`); here, before a request takes a
//! queue permit:
//! - an identical deterministic request is answered from the [`cache`];
//! - a prompt that extends the session's last one with text its answer
//!   began with is answered with the rest of that answer (typed forward),
//!   or, while the last request still decodes, joins it ([`sessions`]).
//!
//! # Invariants
//! - Both stores are bounded (the cache by bytes, the session table by
//!   entries and bytes) and counted in `/metrics`; what they cannot hold,
//!   they let go, least recently used first. No input makes them grow past
//!   their bounds.
//! - An answer from here is an answer to this request's own prompt: the
//!   cache's by its key, typed forward's because the prompt plus the
//!   answer is what an earlier answer said.
//! - Each lock guards one store, is held for a lookup or an insertion and
//!   never across an await; none is taken while the other is held.
//!
//! # Layout
//! - [`cache`]: the completion cache; [`sessions`]: the session table and
//!   the remainder arithmetic; [`cadence`]: a session's typing pace, and
//!   when it counts as paused; [`lru`]: the bounded map both use.

pub mod cache;
pub mod cadence;
pub mod lru;
pub mod sessions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::config::TypingSettings;
use cache::{Cache, CacheFigures};
use sessions::{SessionFigures, Sessions};

/// What answered a completion: the `X-Fabricd-Source` header and the
/// `source` label of `fabricd_answers_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The fabric, for this request.
    Fabric,
    /// The completion cache.
    Cache,
    /// The rest of the session's last answer.
    TypedForward,
    /// The session's earlier request, joined while it decoded.
    Joined,
}

impl Source {
    pub const ALL: [Source; 4] = [
        Source::Fabric,
        Source::Cache,
        Source::TypedForward,
        Source::Joined,
    ];

    pub const fn label(self) -> &'static str {
        match self {
            Source::Fabric => "fabric",
            Source::Cache => "cache",
            Source::TypedForward => "typed-forward",
            Source::Joined => "joined",
        }
    }
}

/// The response header that says what answered.
pub const SOURCE_HEADER: &str = "x-fabricd-source";

/// What the typing features did, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub cache: CacheFigures,
    pub sessions: SessionFigures,
    /// Completions answered, by [`Source`] (in [`Source::ALL`]'s order).
    pub answers: [u64; 4],
    /// Joined requests whose answer did not fit what was typed, run again.
    pub join_misses: u64,
    /// Requests that arrived after a newer one of their session, by its
    /// `session_seq`, answered `superseded` at the edge.
    pub late: u64,
}

/// The edge's typing state.
#[derive(Debug)]
pub struct Typing {
    pub settings: TypingSettings,
    /// How the session table remembers prompts (seeded per process; the
    /// table holds a copy): kept out of its lock, as every request that
    /// takes part marks its prompt.
    hasher: foldhash::fast::RandomState,
    /// The completion cache.
    cache: Mutex<Cache>,
    /// The session table.
    sessions: Mutex<Sessions>,
    answers: [AtomicU64; 4],
    join_misses: AtomicU64,
    late: AtomicU64,
}

impl Typing {
    pub fn new(settings: TypingSettings) -> Typing {
        let hasher = foldhash::fast::RandomState::default();
        Typing {
            cache: Mutex::new(Cache::new(settings.cache_bytes)),
            sessions: Mutex::new(Sessions::new(
                settings.session_entries,
                settings.session_bytes,
                hasher.clone(),
            )),
            hasher,
            settings,
            answers: Default::default(),
            join_misses: AtomicU64::new(0),
            late: AtomicU64::new(0),
        }
    }

    /// How the session table remembers `prompt`.
    pub fn mark(&self, prompt: &str) -> sessions::PromptMark {
        sessions::PromptMark::of(&self.hasher, prompt)
    }

    /// The cache, for one lookup or insertion. A thread that panicked
    /// while holding it left it whole (every change is one call), so a
    /// poisoned lock is taken as it is.
    pub fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session table, likewise.
    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of `key`'s session that came at `now`, numbered `seq` if
    /// the client numbers them, in the client's order: its id from
    /// `next_id` and when its session counts as paused, or
    /// [`Stale`](sessions::Stale) (counted) when the session has sent a
    /// newer one already.
    pub fn order(
        &self,
        key: &crate::sched::SessionKey,
        seq: Option<u64>,
        now: std::time::Instant,
        next_id: impl FnOnce() -> crate::sched::ReqId,
    ) -> Result<sessions::Arrival, sessions::Stale> {
        let hold_max = std::time::Duration::from_millis(self.settings.hold_max_ms);
        let ordered = self.sessions().order(key, seq, now, hold_max, next_id);
        if ordered.is_err() {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
        ordered
    }

    /// A completion was answered by `source`.
    pub fn answered_by(&self, source: Source) {
        self.answers[source as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A joined request's answer did not fit: it runs again.
    pub fn join_missed(&self) {
        self.join_misses.fetch_add(1, Ordering::Relaxed);
    }

    pub fn figures(&self) -> Figures {
        let cache = self.cache().figures();
        let sessions = self.sessions().figures();
        Figures {
            cache,
            sessions,
            answers: self.answers.each_ref().map(|a| a.load(Ordering::Relaxed)),
            join_misses: self.join_misses.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
        }
    }
}
