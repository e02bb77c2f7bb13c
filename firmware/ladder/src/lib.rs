//! The ladder: load from one client to thousands, with abort conditions
//! written down before the run.
//!
//! Each rung runs N clients for a fixed time. In the closed-loop mode each
//! client has its own keep-alive connection and sends its next request when
//! the last one is answered; in the open-loop mode requests are due at a
//! constant rate and latency counts from when a request was due, so a
//! stalled server cannot hide behind a slowed-down client (coordinated
//! omission). Idle "lurker" connections can be held open alongside.
//!
//! Every response is checked: a typed outcome is counted by its type; a
//! status outside the documented outcomes, a reset, a timeout, or a body
//! that is not the deterministic completion for its prompt and seed is a
//! failure. The first rung that breaks a band stops the ladder.
//!
//! Besides clients that wait for their answers, the ladder runs the
//! traffic of a speculative-typing page ([`typists`]: a rung's value is
//! simultaneous typists), a [`burst`] of requests released at the same
//! instant, and mixed [`profile`]s of weighted request classes, each with
//! its own target.
//!
//! # Layout
//! - [`client`]: one HTTP/1.1 connection, a request, a classified reply.
//! - [`workload`]: what the clients send, and the reference completions.
//! - [`rung`]: running a rung (closed or open loop), and lurkers.
//! - [`typists`]: the keystroke model, typists, their results.
//! - [`burst`]: N requests released at once.
//! - [`profile`]: mixed profiles, a rung of every class at once.
//! - [`bands`]: the abort conditions (and a target per class).
//! - [`report`]: the table, JSON and SVG.
//! - [`calibrate`]: the harness measured against a server that answers at
//!   once, for clients and for typists.
//! - [`daemon`]: the daemon's counters and quiet between rungs.

#![forbid(unsafe_code)]

pub mod bands;
pub mod burst;
pub mod calibrate;
pub mod client;
pub mod daemon;
pub mod profile;
pub mod report;
pub mod rung;
pub mod typists;
pub mod workload;
