//! The HTTP front end: the accept loop, connections, routes and handlers.
//!
//! # Connections
//! A connection holds a permit of the connection semaphore (taken before it
//! is served, never waited for). Over the cap, a small second budget answers
//! the connection's request with `overloaded` and closes it, so a client
//! learns why; past that too, connections wait in the kernel's backlog.
//! One client address holds at most its share of the cap.
//! A connection between requests costs a socket and a parked task, not
//! hyper's buffers: each request's head is read by [`head`] (bounded in
//! size, time, and, for slow ones, a shared memory budget) and served by a
//! hyper connection that lives only until its response is written
//! (`conn`). A completion is read, admitted and answered before that hyper
//! is made (`early`), so a request waiting its turn holds its own bytes,
//! not hyper's 16 KiB of buffers.
//!
//! # Requests
//! A completion request is parsed and validated here (a 400 names the
//! field), tokenized, checked against the fabric's limits, admitted (a
//! semaphore permit, or `overloaded` at once) and queued; the scheduler's
//! first answer decides between a typed error and a 200. After a 200 of an
//! event stream, errors go in-band. A client that goes away drops its
//! response, which cancels the request.
//!
//! # Invariants
//! - Every request ends in exactly one result or typed outcome, counted
//!   once under its [`Ending`](crate::sched::Ending) (`completions`'s
//!   ledger); never a bare 500, a reset or a hang.
//! - Input becomes a validated [`sched::Request`](crate::sched::Request)
//!   before the scheduler sees it; errors name the field.
//! - [`reply::status`] is the one place an outcome becomes a status.
//! - The fabric is read only through what the scheduler publishes; this
//!   layer holds no part of the hardware layer.
//!
//! # Layout
//! The files read down a request's path, and a file names only those
//! below it (`tests/layering.rs` holds them to it; `docs/design.md` draws
//! it):
//! - `server`: the accept loop, the caps; `conn`: a connection's life,
//!   idle keep-alive and shutdown; `early`: a completion answered before
//!   hyper; `handoff`: a request served by a hyper of its own.
//! - `routes`: the routes and the read-only endpoints.
//! - `completions`: a completion from its head to its admission;
//!   `validate`: the edge's validation; `answer`: tokens to one body or an
//!   event stream; `instant`: the typing features at the edge (answers from
//!   the cache, typed forward and joins, and what an answer leaves for
//!   them).
//! - Below them all: `ledger`: an admitted request's record and its end;
//!   `exchange`: what a connection and its hyper share; `page`: the typing
//!   page at `/`; [`reply`]: outcomes as statuses and error bodies;
//!   [`body`]: response bodies; [`text`]: tokens to text; [`response`]: the
//!   completion's JSON; [`request`]: the body's shape; [`head`]: request
//!   heads and their budget.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::sched::Handle;
use crate::stats::metrics::Metrics;

mod answer;
pub mod body;
mod completions;
mod conn;
pub mod early;
mod exchange;
mod handoff;
pub mod head;
mod instant;
mod ledger;
mod page;
pub mod reply;
pub mod request;
pub mod response;
mod routes;
mod server;
#[cfg(test)]
mod sizes;
pub mod text;
mod validate;

pub use server::serve;

/// What every handler shares. The fabric is reached only through the
/// scheduler: its handle, and what it publishes.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub catalog: Catalog,
    pub sched: Handle,
    pub permits: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    pub next_id: AtomicU64,
    pub shutting_down: AtomicBool,
    /// Completions per second the fabric can do, from its timing registers,
    /// for `Retry-After` before any has been measured.
    pub nominal_rate: f64,
    pub stats: Arc<crate::stats::StatsHandle>,
    /// The typing features' state at the edge: the cache, the session
    /// table.
    pub typing: crate::typing::Typing,
    /// Limits on request heads, and the memory slow ones may hold.
    pub heads: head::HeadLimits,
    /// The operator's drain of the board, which `/readyz` reports.
    pub board_drain: Arc<crate::serve::agent::BoardDrain>,
    /// Requests being served inside hyper (against `hyper_waiting_max`).
    pub hyper_waiting: std::sync::atomic::AtomicUsize,
}

impl App {
    /// The status `overloaded` takes to `peer`: `Some` for a trusted proxy
    /// when `proxy_overloaded_status` says other than 429 (see
    /// [`reply::overloaded_for_proxy`]). The one place that decides it, for
    /// every path an `overloaded` leaves by.
    pub(crate) fn overloaded_to(&self, peer: std::net::IpAddr) -> Option<hyper::StatusCode> {
        let status = self.config.proxy_overloaded_status;
        if status == 429 || !self.config.is_trusted_proxy(peer) {
            return None;
        }
        hyper::StatusCode::from_u16(status).ok()
    }
}

/// The model name that follows rotation.
pub const DEFAULT_MODEL: &str = "default";
