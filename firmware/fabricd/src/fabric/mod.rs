//! The fabric driver: what drives the rings once `fabric_hw::attach` has
//! assembled the hardware layer's parts.
//!
//! # Invariants
//! - One [`Driver`] owns the rings and the interrupt; the scheduler's task
//!   runs it, so nothing else submits, cancels or drains.
//! - A batch is submitted behind one doorbell, all or nothing: a request
//!   the rings refuse is answered alone, and a copy or cache sync of the
//!   buffer that fails is the fabric failing (as in a drain): the
//!   scheduler answers everything and the daemon restarts to attach
//!   afresh.
//! - The shell's fault codes are logged, each at most every 10 s.
//! - Servicing an interrupt allocates nothing: the rings drain into the
//!   scheduler's [`Events`], sized once by [`Driver::events`].
//! - [`Driver::stop`] stops the rings on the way out, before the buffer is
//!   unmapped.

mod driver;

pub use driver::{Done, Driver, DriverEvent, Events, WATCHDOG};
