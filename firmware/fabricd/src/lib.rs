//! fabricd: the daemon that serves completions from the FPGA fabric.
//!
//! A request comes in over HTTP ([`http`]), is validated at the edge into a
//! [`sched::Request`], waits its turn in the scheduler ([`sched`]), runs on
//! the fabric through the driver ([`fabric`]) that the scheduler's task
//! owns, and leaves with a result or a typed outcome. Rotation
//! ([`rotation`]) reflashes slots while the rest serves, telling the
//! scheduler, which owns every slot's state. [`stats`] counts what was
//! served; [`control`] is the socket `fabricctl` talks to; [`serve`] wires
//! them together and takes them down in order.
//!
//! # Layout
//! - [`http`]: connections, routes, validation, answers, and the one place
//!   an outcome becomes a status.
//! - [`sched`]: the bounded, fair queue with deadlines and cancels, and the
//!   one owner of the slots' state.
//! - [`fabric`]: the driver that owns the rings and the interrupt.
//! - [`rotation`]: loading models into PR slots while serving.
//! - [`stats`]: per-window figures, durable on the SD card, and the
//!   Prometheus metrics.
//! - [`control`]: the control socket and its protocol, shared with
//!   `fabricctl`.
//! - [`serve`]: wiring, and shutdown.
//! - [`cli`]: the command line (`main.rs` only calls it).
//! - [`typing`]: speculative typing at the edge: the completion cache and
//!   the session table.
//! - [`catalog`], [`config`], [`lock`]: the models in the firmware
//!   directory, the configuration, one process per fabric.

// No unsafe code here: the hardware is reached through fabric-hw's typed
// layer. The one exception is a call into the C library that no crate
// wraps (`serve::memory`), allowed where it is.
#![deny(unsafe_code)]

pub mod catalog;
pub mod cli;
pub mod config;
pub mod control;
pub mod fabric;
pub mod http;
pub mod lock;
pub mod rotation;
pub mod sched;
pub mod serve;
pub mod stats;
pub mod typing;
