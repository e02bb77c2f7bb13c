//! Scheduling: a bounded queue, fair across clients, with deadlines and
//! cancellation, and the one owner of the slots' state.
//!
//! [`State`] is plain data and is tested without tokio; one task
//! ([`spawn`]) owns it and the fabric's [`Driver`](crate::fabric::Driver),
//! reached through bounded channels: a [`Handle`] for the edge (admit,
//! cancel) and a [`Control`] for rotation and the control socket (drain,
//! resume, loads). Nothing here knows HTTP: requests arrive validated
//! ([`Request`]), and leave through their own event channel with a result
//! or a domain [`Outcome`].
//!
//! # Invariants
//! - Admission is decided before anything is queued: the edge holds a
//!   permit of a semaphore sized to the queue capacity (queued + running),
//!   taken without waiting; no permit, no queueing (`overloaded`).
//! - Every admitted request is answered exactly once: a result, or an
//!   outcome (a deadline, a cancel, a refusal, the fabric failing, the
//!   daemon stopping). A request the fabric bounced because its slot was
//!   not ready goes back to the head of its client's queue: nothing
//!   accepted is lost.
//! - Contexts are conserved: a context is free, or held by exactly one
//!   running request until the fabric says it is done (a cancelled or
//!   expired request keeps its context until then).
//! - Per model and class (interactive, bulk: see `policy`), clients take
//!   turns (round-robin over clients with waiting requests); one client's
//!   requests of a class run in arrival order. Interactive requests go
//!   first unless a bulk one has waited past the ageing; bulk requests
//!   never hold the lanes a slot reserves for interactive ones.
//! - A typing session has at most one request unanswered: a newer one
//!   supersedes it, taking its place in line or its decoding (`sessions`).
//! - A typing session's request waits out of line until its session
//!   pauses, and runs before then only on a slot with nothing else to take
//!   (`held`); it is in line by its deadline less its service time.
//! - A request predicted to finish past its deadline is refused before it
//!   queues, from what waits ahead of it and the model's service rate
//!   measured at capacity (`policy`).
//! - A slot's state has one owner, this task: what the shell holds (read
//!   from its registers when the shell signals a change, after a load and
//!   after a reset), whether it takes work, what is being loaded into it
//!   and when it was loaded. A drain is answered by a message when the
//!   slot's last request leaves. [`Published`] is how everyone else sees
//!   it, replaced whole on each change.

mod events;
mod handle;
mod held;
mod outcome;
mod policy;
#[cfg(test)]
mod props;
mod queue;
mod request;
mod sessions;
mod slots;
mod state;
mod task;
#[cfg(test)]
mod typing_tests;

pub use events::{events, EventSender, Events, ReqEvent};
pub use handle::{Control, Handle, Published};
pub use outcome::{Ending, Outcome};
pub use policy::Policy;
pub use request::{Admission, ClientKey, ReqId, Request, SessionKey};
pub use slots::{FabricState, FabricView, ShellSlot, SlotView};
pub use state::{Finished, Refusal, State, TypingCounts};
pub use task::{spawn, Scheduler};
