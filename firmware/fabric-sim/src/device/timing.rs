//! How long a slot's engine takes, in its own cycles at the fabric's clock
//! (issue 31, item 7), unless `--decode-us`/`--prefill-us` fix one time for
//! every engine.
//!
//! - The trigram engine (`rtl/engine/fabric_engine.v`) takes one step at a
//!   time for every lane of its slot, so a lane waits for the others'
//!   steps: a token of each of the `b` lanes decoding costs `b` steps. A
//!   step's cycles are the co-simulated RTL's at 64 cycles of DDR latency
//!   ([`fabric_model::ngram::cycles`], held to the RTL by fabric-rtl's
//!   `trigram_cycles` test), and a request's first step some three
//!   hundred more (its descriptor's checks, the prompt's last two tokens,
//!   its DONE entry).
//! - The transformer (`rtl/engine/lm`) batches: a round feeds every lane
//!   decoding one token, so a lane's token costs a round of all of them,
//!   [`fabric_model::lm::cycles::round_cycles`] (counted for the engine's
//!   eight-lane build, whose scaler holds a row narrower than 88 columns
//!   four cycles longer than the slot's four-lane one; kjv-lm has none);
//!   a request's first token comes after a round for end-of-text and one
//!   for each prompt token.
//!
//! The registers PREFILL_NS and DECODE_NS report the slowest slot at a
//! full batch (a transformer's prompt token is a round; a trigram's is
//! free, the engine reading only its last two), each slot with its model,
//! or before one is committed the largest model its engine takes.

use std::time::Duration;

use fabric_hw::contract::{EngineId, REG_DECODE_NS, REG_PREFILL_NS};
use fabric_hw::sampling::Sampling;
use fabric_model::lm::{cycles, Shape};
use fabric_model::ngram::cycles as trigram;

use super::{Ctx, Fabric};

/// Cycles of DDR read latency both engines' figures are taken at: the
/// trigram engine's were measured at it.
const DDR_LATENCY: u32 = trigram::DDR_LATENCY;

/// The largest model the transformer engine takes (`rtl/engine/lm/
/// fabric_lm.v`'s MAX_ parameters): the time a slot with no model yet
/// reports.
const LM_LARGEST: Shape = Shape {
    vocab: 4608,
    dim: 256,
    layers: 8,
    heads: 4,
    hidden: 1024,
    context: 256,
};

impl Fabric {
    fn cycles(&self, cycles: u64) -> Duration {
        let hz = self.config.clock_hz();
        self.config.scaled(Duration::from_nanos(
            cycles.saturating_mul(1_000_000_000) / hz,
        ))
    }

    /// A transformer slot's model, if the slot holds the engine; the
    /// largest it takes before one is committed.
    fn lm_shape(&self, slot: usize) -> Option<Shape> {
        let s = &self.slots[slot];
        if s.loaded.as_ref()?.engine != EngineId::TRANSFORMER_V1 {
            return None;
        }
        Some(
            s.table
                .as_ref()
                .and_then(|t| t.lm.as_ref())
                .map_or(LM_LARGEST, |w| w.shape),
        )
    }

    /// A round of `slot`'s transformer with `lanes` lanes at `position`.
    fn lm_round(&self, shape: &Shape, lanes: usize, position: usize) -> u64 {
        cycles::round_cycles(shape, &vec![position; lanes.max(1)], DDR_LATENCY)
    }

    /// From a lane's start to its request's first token.
    pub(super) fn first_token_time(&self, c: &Ctx) -> Duration {
        if let Some((prefill, decode)) = self.config.fixed_times() {
            return prefill * c.prompt_len + decode;
        }
        let lanes = self.slots[c.slot].running;
        match self.lm_shape(c.slot) {
            Some(shape) => {
                let rounds: u64 = (0..=c.prompt_len as usize)
                    .map(|p| self.lm_round(&shape, lanes, p))
                    .sum();
                self.cycles(rounds)
            }
            None => self.cycles(trigram::FIRST + trigram_step(c.sampling) * lanes.max(1) as u64),
        }
    }

    /// From a lane's token to its next.
    pub(super) fn next_token_time(&self, c: &Ctx) -> Duration {
        if let Some((_, decode)) = self.config.fixed_times() {
            return decode;
        }
        let lanes = self.slots[c.slot].running;
        match self.lm_shape(c.slot) {
            Some(shape) => {
                let position = c.lm.as_ref().map_or(0, |l| l.position());
                self.cycles(self.lm_round(&shape, lanes, position))
            }
            None => self.cycles(trigram_step(c.sampling) * lanes.max(1) as u64),
        }
    }

    /// What PREFILL_NS and DECODE_NS report: (a prompt token, an output
    /// token) of the slowest slot at a full batch.
    pub(super) fn reported_times(&self) -> (Duration, Duration) {
        if let Some(fixed) = self.config.fixed_times() {
            return fixed;
        }
        let lanes = usize::from(self.config.lanes);
        let mut worst = (Duration::ZERO, Duration::ZERO);
        for s in 0..self.slots.len() {
            let (prefill, decode) = match self.lm_shape(s) {
                Some(shape) => {
                    let round = self.cycles(self.lm_round(&shape, lanes, shape.context / 2));
                    (round, round)
                }
                None if self.slots[s].loaded.is_some() => (
                    Duration::ZERO,
                    self.cycles(trigram::STEP_SAMPLED * lanes.max(1) as u64),
                ),
                None => continue,
            };
            worst = (worst.0.max(prefill), worst.1.max(decode));
        }
        worst
    }
}

impl Fabric {
    /// PREFILL_NS and DECODE_NS, as [`Fabric::reported_times`] gives them.
    pub(super) fn write_times(&self) {
        let (prefill, decode) = self.reported_times();
        let ns = |t: Duration| t.as_nanos().min(u32::MAX.into()) as u32;
        REG_PREFILL_NS.device_write(&self.regs, ns(prefill));
        REG_DECODE_NS.device_write(&self.regs, ns(decode));
    }
}

fn trigram_step(sampling: Sampling) -> u64 {
    match sampling {
        Sampling::Greedy => trigram::STEP_GREEDY,
        Sampling::Scaled { .. } => trigram::STEP_SAMPLED,
    }
}
