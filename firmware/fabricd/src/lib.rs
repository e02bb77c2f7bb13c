//! fabricd: the daemon that serves completions from the FPGA fabric.
//!
//! # Layout
//! - [`catalog`]: the models in the firmware directory, checked by SHA-256.
//! - [`fabric`]: attaching to the fabric and the driver task that owns the
//!   rings.
//! - [`lock`]: one process drives the fabric at a time.

#![forbid(unsafe_code)]

pub mod catalog;
pub mod fabric;
pub mod lock;
