//! `fabric_model::ngram::cycles`, the trigram engine's cycles the simulator
//! charges, against the Verilated shell and engine: one request alone on
//! an idle fabric at the figures' DDR latency, the clock stepped a cycle at
//! a time from the doorbell until its DONE entry is whole in memory, as
//! `examples/speed.rs` measures them. Requests of 1 and of `LONG` tokens
//! with the same prompt and seed give a step (the difference over the
//! extra tokens) and what a request costs beyond its steps.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;
use fabric_model::ngram::cycles::{DDR_LATENCY, FIRST, STEP_GREEDY, STEP_SAMPLED};
use fabric_rtl::Cosim;

/// Tokens of the long request of each pair.
const LONG: u32 = 65;
/// Pairs a model and a temperature are measured over.
const PAIRS: u64 = 6;

/// Fabric cycles from the doorbell of `req` on an idle fabric to its DONE
/// entry whole in memory.
fn alone(h: &mut Rig, req: &Req) -> u64 {
    let (took, all) = h
        .alone(req, 2_000_000)
        .unwrap_or_else(|| panic!("no completion for {req:?}"));
    let done = done_of(&all, req.tag);
    assert_eq!(done.status, CqeStatus::Ok, "{req:?}");
    assert_eq!(done.n_tokens, req.max_tokens, "{req:?}");
    took
}

/// A step's cycles and a request's beyond its steps, averaged over
/// `PAIRS` prompts and seeds, for the model in `ctx`'s slot.
fn measure(h: &mut Rig, ctx: u16, temperature: f32, tag: &mut u32) -> (f64, f64) {
    let model = if ctx < PER_SLOT { kjv() } else { fortunes() };
    let (mut short, mut long) = (0u64, 0u64);
    for k in 0..PAIRS {
        // A prompt the model itself would write, so its contexts are ones
        // the table knows, as most of a real prompt's are.
        let mut prompt = model.generate(&[256, 300 + k as u32 * 7], 4, 1.0, k, NO_STOP_TOKEN);
        prompt.truncate(4);
        let mut r = Req::new(*tag, ctx, &prompt, 1);
        r.temperature = temperature;
        r.seed = 0x5EED + k;
        short += alone(h, &r);
        r.tag += 1;
        r.max_tokens = LONG;
        long += alone(h, &r);
        *tag += 2;
    }
    let step = (long - short) as f64 / (PAIRS * u64::from(LONG - 1)) as f64;
    (step, short as f64 / PAIRS as f64 - step)
}

#[test]
fn the_simulators_trigram_cycles_are_the_rtls() {
    let mut h = Rig::with(Cosim::new(DDR_LATENCY));
    let mut tag = 1;
    let mut sampled_max = 0f64;
    let mut beyond_max = 0f64;
    for ctx in [0, PER_SLOT] {
        let (greedy, beyond) = measure(&mut h, ctx, 0.0, &mut tag);
        eprintln!("context {ctx}, greedy: a step {greedy:.1} cycles, a request {beyond:.1} beyond");
        // A greedy step reads the same probes whatever the draw.
        assert!(
            (greedy - STEP_GREEDY as f64).abs() <= 0.5,
            "context {ctx}: a greedy step takes {greedy:.1} cycles, the simulator charges {STEP_GREEDY}"
        );
        beyond_max = beyond_max.max(beyond);
        let (sampled, beyond) = measure(&mut h, ctx, 0.8, &mut tag);
        eprintln!(
            "context {ctx}, sampled: a step {sampled:.1} cycles, a request {beyond:.1} beyond"
        );
        sampled_max = sampled_max.max(sampled);
        beyond_max = beyond_max.max(beyond);
    }
    // The simulator charges the slower model's sampled step and request
    // for both: within two cycles of the RTL's (a draw's walk depends on
    // the prompts), never under it by more than rounding.
    assert!(
        sampled_max <= STEP_SAMPLED as f64 + 0.5 && sampled_max >= STEP_SAMPLED as f64 - 2.0,
        "a sampled step takes at most {sampled_max:.1} cycles, the simulator charges {STEP_SAMPLED}"
    );
    assert!(
        (beyond_max - FIRST as f64).abs() <= 8.0,
        "a request takes {beyond_max:.1} cycles beyond its steps, the simulator charges {FIRST}"
    );
}
