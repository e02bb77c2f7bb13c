//! An admitted request's record, from validation to its end: what
//! answering it needs ([`Prepared`], with its part in the typing features,
//! [`Ticket`]), what is recorded when it ends ([`Ledger`], counted exactly
//! once by [`App::ended`]), and the guard that cancels it when its client
//! goes away ([`Started`]).
//!
//! It lies below the handlers that share it: validation makes a
//! `Prepared`, the admission a `Started`, and the answers (from the
//! fabric or at the edge) end it.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Response;

use super::body::Body;
use super::reply::Failure;
use super::App;
use crate::sched::{self, Ending, Events, ReqId, SessionKey};
use crate::typing::cache::CacheKey;
use crate::typing::sessions::{Compat, PromptMark};

/// What answering an admitted request needs.
pub(super) struct Prepared {
    pub(super) id: ReqId,
    pub(super) model: Arc<str>,
    pub(super) tokenizer: Arc<fabric_model::Tokenizer>,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) stop: Vec<String>,
    pub(super) prompt_tokens: usize,
    pub(super) max_tokens: u32,
    pub(super) events: Events,
    /// What the typing features need when it ends; boxed, as most requests
    /// have none.
    pub(super) ticket: Option<Box<Ticket>>,
}

/// A request's part in the typing features: its session, its prompt as
/// the session table remembers it, its cache key, and the join it was
/// sent on.
pub(super) struct Ticket {
    pub(super) session: Option<SessionKey>,
    pub(super) prompt: PromptMark,
    pub(super) compat: Compat,
    pub(super) cache_key: Option<CacheKey>,
    /// The slots' models when it was admitted.
    pub(super) epoch: u64,
    pub(super) join: Option<Joining>,
}

/// A request sent to join its session's decoding request.
pub(super) struct Joining {
    /// The part of its prompt after the joined request's.
    pub(super) typed: String,
    /// Itself, to queue on its own if the joined answer does not fit.
    pub(super) retry: sched::Request,
}

impl Prepared {
    /// It ended without an answer: its session has nothing to go on.
    pub(super) fn failed(&self, app: &App) {
        if let Some(key) = self.ticket.as_ref().and_then(|t| t.session.as_ref()) {
            app.typing.sessions().failed(key, self.id);
        }
    }
}

/// What is recorded about a request when it ends (exactly once).
#[derive(Debug, Clone)]
pub(super) struct Ledger {
    pub(super) model: Option<Arc<str>>,
    pub(super) ip: IpAddr,
    pub(super) received: Instant,
    pub(super) tokens_in: u64,
}

impl App {
    /// Counts a request refused before it was admitted, and answers it.
    pub(super) fn refused(&self, l: &Ledger, failure: Failure) -> Response<Body> {
        self.ended(l, failure.ending(), 0, 0);
        failure.response()
    }

    /// Counts a request's end in the metrics and the stats.
    pub(super) fn ended(&self, l: &Ledger, ending: Ending, tokens_out: u64, fabric_us: u32) {
        let now = Instant::now();
        self.metrics.outcome(ending);
        if ending == Ending::Ok {
            self.metrics
                .tokens_in
                .fetch_add(l.tokens_in, Ordering::Relaxed);
            self.metrics
                .tokens_out
                .fetch_add(tokens_out, Ordering::Relaxed);
            self.metrics
                .latency
                .observe(now.saturating_duration_since(l.received));
            if fabric_us > 0 {
                self.metrics
                    .fabric_time
                    .observe(Duration::from_micros(fabric_us.into()));
            }
        }
        self.stats.record(crate::stats::RequestEvent {
            outcome: ending,
            model: l.model.as_deref(),
            client: Some(l.ip),
            received: l.received,
            ended: now,
            tokens_in: l.tokens_in,
            tokens_out,
        });
    }
}

/// Cancels a request when dropped, unless disarmed: the client went away.
pub(super) struct CancelGuard {
    pub(super) id: ReqId,
    pub(super) app: Arc<App>,
    pub(super) ledger: Ledger,
    pub(super) armed: bool,
}

impl CancelGuard {
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            self.app.sched.cancel(self.id);
            self.app.ended(&self.ledger, Ending::Cancelled, 0, 0);
        }
    }
}

/// An admitted request, whose client going away cancels it.
pub(super) struct Started {
    pub(super) req: Prepared,
    pub(super) guard: CancelGuard,
}

impl Started {
    /// Ends the request (once): disarms the cancel and records it.
    pub(super) fn end(&mut self, app: &App, ending: Ending, tokens_out: usize, fabric_us: u32) {
        if self.guard.armed {
            self.guard.disarm();
            app.ended(&self.guard.ledger, ending, tokens_out as u64, fabric_us);
        }
    }
}
