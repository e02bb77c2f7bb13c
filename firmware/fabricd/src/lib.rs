//! fabricd: the daemon that serves completions from the FPGA fabric.
//!
//! # Layout
//! - [`catalog`]: the models in the firmware directory, checked by SHA-256.
//! - [`fabric`]: attaching to the fabric, and the driver that owns the
//!   rings (run inside the scheduler's task).
//! - [`lock`]: one process drives the fabric at a time.
//! - [`config`]: the TOML configuration and its flags.
//! - [`api`]: the OpenAI completions request and response shapes.
//! - [`outcome`]: every typed outcome, and the one place they become HTTP.
//! - [`sched`]: the bounded, fair queue with deadlines and cancels, and the
//!   one owner of the slots' state.
//! - [`server`]: connections, routes, handlers, event streams.
//! - [`text`]: tokens to text: UTF-8 and stop sequences.
//! - [`metrics`]: Prometheus counters and histograms.
//! - [`stats`]: per-window figures, durable on the SD card.
//! - [`rotation`]: loading models into PR slots while serving.
//! - [`control`]: the Unix socket `fabricctl` talks to.
//! - [`serve`]: wiring it together, and shutdown.

#![forbid(unsafe_code)]

pub mod catalog;
pub mod config;
pub mod control;
pub mod fabric;
pub mod http;
pub mod lock;
pub mod metrics;
pub mod rotation;
pub mod sched;
pub mod serve;
pub mod stats;
