//! The trigram engine's cycles (`rtl/engine/fabric_engine.v` in a slot,
//! `rtl/slot/fabric_slot.v`), for the simulator to charge (issue 31, item
//! 7). Measured, not counted: a step probes the table's hashed contexts
//! and walks a context's continuations, so its cycles depend on what the
//! table holds; these are the co-simulated RTL's on the catalog's kjv and
//! fortunes at [`DDR_LATENCY`], one request alone on an idle fabric, and
//! fabric-rtl's `trigram_cycles` test holds them to it.
//!
//! The engine takes one step at a time for every lane of its slot.

/// Cycles of DDR read latency the figures are taken at.
pub const DDR_LATENCY: u32 = 64;

/// A greedy step: one token.
pub const STEP_GREEDY: u64 = 166;

/// A sampled step, the larger of the two models' (the draw walks every
/// continuation of the context, and fortunes' contexts have fewer).
pub const STEP_SAMPLED: u64 = 189;

/// What a request costs beyond its steps: its descriptor read and checked,
/// the prompt's last two tokens read, its DONE entry written (the largest
/// of both models' greedy and sampled figures; greedy's are 268).
pub const FIRST: u64 = 308;
