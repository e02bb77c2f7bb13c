//! The fabric's RTL (`rtl/`), Verilated and linked in process.
//!
//! The pattern is chipsalliance/caliptra-sw's `hw/verilated`: a thin
//! Verilog top (`rtl/sim/fabric_cosim.v`), a C interface over the Verilated
//! model (`rtl/sim/cosim.cpp`: an opaque handle, plain calls, the clock
//! stepped cycle by cycle), a static library built by `build.rs` behind the
//! `verilated` feature, and the one trait the simulator, the RTL and the
//! board all implement: [`fabric_hw::mmio::RegisterWindow`]. [`RtlWindow`]
//! makes every `read32`/`write32` an AXI4-Lite transaction on the shell's
//! port, so the driver's code runs against the hardware description as it
//! is.
//!
//! # Layout
//! - [`cosim`]: the Verilated fabric: register ports, the clock, the DDR
//!   behind the shell's AXI4 master and the engines' ([`Memory`]: the
//!   tables the engines read lie in it, as on a board), how the engines'
//!   ports answer ([`Ports`]), the interrupt line, and a slot's
//!   configuration (an engine or none, the decoupler, the garbage a
//!   half-programmed slot drives).
//! - [`lm`]: the transformer engine alone, its port answered from a
//!   memory of its own, checked against `fabric_model::lm`.
//! - [`window`]: the fabric and its memory behind one lock, as a register
//!   window.
//!
//! Without the `verilated` feature the crate holds nothing: the rest of the
//! workspace builds without Verilator.

#[cfg(feature = "verilated")]
pub mod cosim;
#[cfg(feature = "verilated")]
pub mod lm;
#[cfg(feature = "verilated")]
pub mod window;

#[cfg(feature = "verilated")]
pub use cosim::{Cosim, Memory, Port, Ports, VecMemory};
#[cfg(feature = "verilated")]
pub use window::RtlWindow;
