//! The fabric's time from its engines' cycles at the board's clock (issue
//! 31, item 7): what PREFILL_NS and DECODE_NS report, and how long a
//! request takes, for the trigram engine and the transformer; and the
//! fixed times a test or `--decode-us` asks for instead.

mod common;

use std::time::{Duration, Instant};

use common::{bare_host, host, sim, until_done, PROMPT};
use fabric_hw::contract::*;
use fabric_hw::shell::{Completion, Params, Submission};
use fabric_model::lm::{cycles, Shape, Weights};
use fabric_model::ngram::cycles::{FIRST, STEP_GREEDY, STEP_SAMPLED};

/// The engines' own times, at `mhz` (or the part's clock).
fn engine_times(c: &mut fabric_sim::SimConfig, mhz: Option<u32>) {
    c.prefill_us = None;
    c.decode_us = None;
    c.clock_mhz = mhz;
    c.time_scale = 1.0;
}

#[tokio::test]
async fn the_trigram_engine_reports_its_cycles_at_the_boards_clock() {
    // Four lanes share the engine a step at a time: a lane's token is four
    // steps of at most STEP_SAMPLED cycles; a prompt token costs nothing
    // (the engine reads only the prompt's last two).
    let step = u32::try_from(STEP_SAMPLED).expect("a step's cycles");
    for (mhz, want_ns) in [(None, 4 * step * 5), (Some(100), 4 * step * 10)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = sim(dir.path(), |c| engine_times(c, mhz));
        let h = host(&sim).await;
        assert_eq!(
            (REG_PREFILL_NS.get(&h.regs), REG_DECODE_NS.get(&h.regs)),
            (0, want_ns),
            "at {mhz:?} MHz (None: the K26's 200)"
        );
    }
    // Fixed times, as the tests' boards have them, are reported as given.
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |c| c.time_scale = 1.0);
    let h = host(&sim).await;
    assert_eq!(
        (REG_PREFILL_NS.get(&h.regs), REG_DECODE_NS.get(&h.regs)),
        (50_000, 1_900_000)
    );
}

#[tokio::test]
async fn a_lone_trigram_request_takes_its_steps() {
    // Slowed 2,000 times so that wall time can see it: a greedy step of
    // 166 cycles at 200 MHz is then 1.66 ms, and 64 tokens alone on the
    // slot (a lane to themselves) at least 64 steps and the first's extra.
    const SCALE: f64 = 2000.0;
    const TOKENS: u32 = 64;
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |c| {
        engine_times(c, None);
        c.time_scale = SCALE;
    });
    let mut h = host(&sim).await;
    let sub = Submission {
        tag: 1,
        ctx: 0,
        prompt: &PROMPT,
        params: Params {
            max_tokens: TOKENS,
            temperature: 0.0,
            seed: 1,
            stop_token: NO_STOP_TOKEN,
            stream: false,
        },
    };
    let start = Instant::now();
    h.rings.submit(&h.shell, &[sub]).expect("submit");
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 1).await;
    let took = start.elapsed();
    assert!(matches!(
        all.completions.last(),
        Some(Completion::Done { intact: true, .. })
    ));
    let cycles = FIRST + STEP_GREEDY * u64::from(TOKENS);
    let least = Duration::from_nanos(cycles * 5).mul_f64(SCALE);
    // The device cannot finish before its cycles; and far sooner than the
    // fixed 1.9 ms a token (243 s at this scale) it would take without them.
    assert!(took >= least, "{took:?}, its cycles {least:?}");
    assert!(took < least * 10, "{took:?}, its cycles {least:?}");
}

#[tokio::test]
async fn the_transformer_reports_a_round_of_its_model() {
    let shape = Shape {
        vocab: 320,
        dim: 32,
        layers: 2,
        heads: 2,
        hidden: 64,
        context: 24,
    };
    let w = Weights::random(shape, 5);
    let bytes: Vec<u8> = w.to_words().iter().flat_map(|v| v.to_le_bytes()).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |c| {
        engine_times(c, None);
        c.load = vec![
            format!("0={}", common::ENGINE),
            "1=transformer-v1.bit".into(),
        ];
    });
    let h = bare_host(&sim);
    h.commit(0, "kjv").expect("kjv commits to slot 0");
    // Before its weights, the slot reports the largest model its engine
    // takes; after, a round of its own at mid-context with every lane.
    let before = REG_DECODE_NS.get(&h.regs);
    h.commit_bytes(1, &bytes).expect("the weights commit");
    let round = cycles::round_cycles(&shape, &[shape.context / 2; 4], 64);
    let want = u32::try_from(round * 5).expect("ns in a u32");
    assert_eq!(
        (REG_PREFILL_NS.get(&h.regs), REG_DECODE_NS.get(&h.regs)),
        (want, want),
        "a round of {round} cycles at 200 MHz"
    );
    assert!(
        before > want,
        "the largest model's round ({before} ns) is longer"
    );
}
