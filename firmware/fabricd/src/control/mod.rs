//! The control socket: what `fabricctl` talks to over SSH.
//!
//! A Unix stream socket (default `/run/fabricd.sock`), mode 0600 so only
//! the daemon's owner can use it.
//!
//! # Invariants
//! - The protocol is defined once, in [`protocol`], and shared with
//!   `fabricctl`: one JSON object per line each way, a typed [`Command`]
//!   in, an answer or a typed refusal out.
//! - A malformed or oversized line gets a typed refusal and the connection
//!   stays usable.
//! - Commands change slots only through rotation, which asks the
//!   scheduler; they read the fabric only from what it publishes.
//!
//! # Layout
//! - [`protocol`]: the commands and answers.
//! - `socket`: binding and serving the socket.
//! - `commands`: what each command does in the daemon.

mod commands;
pub mod protocol;
mod socket;

pub use commands::Admin;
pub use protocol::{Answer, Command, Refusal};
pub use socket::{bind, serve, Commands, ControlError, MAX_LINE};
