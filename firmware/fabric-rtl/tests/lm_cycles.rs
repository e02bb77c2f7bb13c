//! `fabric_model::lm::cycles` against the Verilated transformer engine
//! (`rtl/engine/lm`): a commit, the rounds that feed the prompts, and
//! decode rounds at batches of 4, 3, 2 and 1, early and late in the
//! context, at port latencies of 24, 64 and 128 cycles, on models with
//! random weights: two tiny ones (heads of 4 and 16, rows shorter than
//! the scaler's 11 cycles) and a medium one (heads of 64 as kjv-lm's, its
//! key and value writes waiting on the port, rows port-bound).
//!
//! The tolerance is the model's own: a commit is exact, and a round's
//! RTL cycles are at least the model's and at most one more for each lane
//! (its token's embedding scale) and each prompt token read, the reads
//! whose alignment the model cannot know. That is within 0.05% on every
//! round here. Every token is checked against the definition as well.

#![cfg(feature = "verilated")]

mod lm_rig;

use fabric_model::lm::cycles::{commit_cycles, step_cycles, LaneStep};
use fabric_model::lm::{Shape, Weights};
use fabric_rtl::lm::{LmCommit, LmFault, LmPort};
use lm_rig::{expected, serve_watched, Desc, Rig, MAX_CYCLES};

/// A decode round the RTL ran: its lanes and its cycles.
#[derive(Debug)]
struct Round {
    lanes: Vec<LaneStep>,
    cycles: u64,
}

#[derive(Debug)]
struct Run {
    commit: u64,
    /// From the first request to the first answer.
    first: u64,
    rounds: Vec<Round>,
}

/// Greedy requests with prompts of `prompt` tokens started together on
/// lanes 0.., request `i` making `tokens[i]` tokens, a lane's next step
/// asked for as soon as its last is answered (`lm_rig::serve_watched`,
/// waiting as long as kjv-lm's long prompts need); every token checked
/// against the definition. A round's cycles are those from the last answer
/// of the round before to its own last (what follows an answer is the
/// same every round, so this is the model's `S_IDLE` to `S_IDLE`). A
/// round's lanes answer in lane order, and after the first round that
/// answers every lane of a round draws (lane 0 is a round ahead of the
/// others at most), so the answers give each round's lanes: a lane's
/// `j`th token was drawn feeding position `prompt + j - 1`, its first
/// after the prompt's last token, read from DDR.
fn run(w: &Weights, latency: u32, prompt: u32, tokens: &[u32]) -> Run {
    let shape = w.shape;
    let descs: Vec<Desc> = tokens
        .iter()
        .enumerate()
        .map(|(k, &n)| Desc {
            prompt: (0..prompt)
                .map(|i| (u64::from(i) * 104_729 + k as u64 * 7919) as u32 % shape.vocab as u32)
                .collect(),
            n,
            temperature: 0.0,
            seed: k as u64,
            stop: u32::MAX,
            cancel: None,
        })
        .collect();
    let port = LmPort {
        latency,
        stall_permille: 0,
        seed: 1,
    };
    let mut rig = Rig::new(w.clone(), port);
    // A round of kjv-lm at batch 8 is about a million cycles, and the
    // first answer comes after a round a prompt token.
    rig.wait = MAX_CYCLES.max(4_000_000 * (u64::from(prompt) + 2));
    let before = rig.engine.cycles();
    assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
    let commit = rig.engine.cycles() - before;
    let start = rig.engine.cycles();
    // Each answer's lane and step, grouped by round, with the round's
    // last answer's cycle.
    let mut answered = vec![0usize; descs.len()];
    let mut groups: Vec<(u64, Vec<(u32, LaneStep)>)> = Vec::new();
    let got = serve_watched(&mut rig, &descs, descs.len() as u32, |engine, a| {
        assert_eq!(a.fault, LmFault::None, "lane {}", a.lane);
        let j = &mut answered[a.lane as usize];
        *j += 1;
        let s = LaneStep {
            lane: a.lane as usize,
            position: prompt as usize + *j - 1,
            from_prompt: *j == 1,
            draws: true,
        };
        let new_round = groups
            .last()
            .and_then(|(_, g)| g.last())
            .is_none_or(|&(last, _)| a.lane <= last);
        if new_round {
            groups.push((0, Vec::new()));
        }
        if let Some(g) = groups.last_mut() {
            g.0 = engine.cycles();
            g.1.push((a.lane, s));
        }
    });
    for (d, g) in descs.iter().zip(&got) {
        assert_eq!(*g, expected(w, d), "{shape:?}: {d:?}");
    }
    let rounds = groups
        .windows(2)
        .map(|p| Round {
            lanes: p[1].1.iter().map(|&(_, s)| s).collect(),
            cycles: p[1].0 - p[0].0,
        })
        .collect();
    Run {
        commit,
        first: groups.first().map_or(0, |g| g.0) - start,
        rounds,
    }
}

/// The rounds before the first answer, as the engine runs them: lane 0's
/// request is taken alone, the others' join the next round, so lane 0 is
/// a position ahead; end-of-text first, then the prompt read from DDR.
fn prefill(prompt: usize, lanes: usize) -> Vec<Vec<LaneStep>> {
    (0..=prompt)
        .map(|r| {
            let mut round = vec![LaneStep {
                lane: 0,
                position: r,
                from_prompt: r >= 1,
                draws: r == prompt,
            }];
            if r >= 1 {
                round.extend((1..lanes).map(|lane| LaneStep {
                    lane,
                    position: r - 1,
                    from_prompt: r >= 2,
                    draws: false,
                }));
            }
            round
        })
        .collect()
}

/// `tests/lm.rs`'s: a row of 16 weights is 2 beats, shorter than the
/// scaler's 11 cycles, which bound every product.
fn tiny(heads: usize) -> Shape {
    Shape {
        vocab: 300,
        dim: 16,
        layers: 2,
        heads,
        hidden: 32,
        context: 24,
    }
}

/// Rows of 16 and 32 beats, port-bound as kjv-lm's are, and two heads of
/// 64 as kjv-lm's (17 writes a key, past the 8 the write master lets
/// wait). A head is 4, 16 or 64 wide (a power of four): a width of 64
/// with two heads would have heads of 32, which the engine refuses.
fn medium() -> Shape {
    Shape {
        vocab: 1000,
        dim: 128,
        layers: 2,
        heads: 2,
        hidden: 256,
        context: 128,
    }
}

/// One cycle for each read whose alignment the model takes as a beat's.
fn slack(lanes: &[LaneStep]) -> u64 {
    lanes.iter().map(|l| 1 + u64::from(l.from_prompt)).sum()
}

fn assert_close(what: &str, rtl: u64, model: u64, slack: u64) {
    let err = 100.0 * (model as f64 - rtl as f64) / rtl as f64;
    eprintln!("  {what}: rtl {rtl} model {model} ({err:+.4}%)");
    assert!(
        model <= rtl && rtl <= model + slack,
        "{what}: the RTL took {rtl} cycles, the model says {model} (within {slack} below)"
    );
}

/// Runs requests with `prompt`-token prompts making `tokens[i]` tokens
/// each, and checks every cycle count the run gives against the model:
/// the commit, the first answer, and each decode round. Returns the
/// batches the decode rounds had.
fn check(name: &str, w: &Weights, latency: u32, prompt: u32, tokens: &[u32]) -> Vec<usize> {
    let shape = w.shape;
    eprintln!("{name}, latency {latency}, prompt {prompt}: {shape:?}");
    let r = run(w, latency, prompt, tokens);
    assert_eq!(
        r.commit,
        commit_cycles(&shape, latency),
        "{name}: the commit"
    );
    let rounds = prefill(prompt as usize, tokens.len());
    let model: u64 = rounds.iter().map(|l| step_cycles(&shape, l, latency)).sum();
    // The first answer is taken two cycles before the round after it
    // would start, the request a cycle before its round.
    let slack_first = rounds.iter().map(|l| slack(l)).sum();
    assert_close("to the first answer", r.first, model - 1, slack_first);
    for round in &r.rounds {
        let pos: Vec<usize> = round.lanes.iter().map(|l| l.position).collect();
        let model = step_cycles(&shape, &round.lanes, latency);
        let what = format!("batch {} at positions {pos:?}", pos.len());
        assert_close(&what, round.cycles, model, slack(&round.lanes));
    }
    r.rounds.iter().map(|r| r.lanes.len()).collect()
}

/// Lane 0 makes 2 tokens, the others 3, 5 and 7 (6 where the context is
/// short): rounds of 4 lanes, then 3, 2 and 1.
fn batches_4_to_1(name: &str, shape: Shape, latency: u32, prompt: u32, last: u32) {
    let batches = check(
        name,
        &Weights::random(shape, 7),
        latency,
        prompt,
        &[2, 3, 5, last],
    );
    for b in [4, 2, 1] {
        assert!(
            batches.contains(&b),
            "{name}: no round of {b} lanes in {batches:?}"
        );
    }
}

#[test]
fn tiny_models_early_and_late_in_the_context() {
    for heads in [4, 1] {
        let name = format!("tiny, heads of {}", 16 / heads);
        batches_4_to_1(&name, tiny(heads), 64, 2, 7);
        batches_4_to_1(&name, tiny(heads), 64, 17, 6);
    }
}

#[test]
fn a_medium_model_early_and_late_in_the_context() {
    batches_4_to_1("medium", medium(), 64, 3, 7);
    batches_4_to_1("medium", medium(), 64, 96, 7);
}

/// At 24 cycles the port is quicker than every wait; at 128 a matrix's
/// eight bursts in flight no longer cover the latency (the port, not the
/// row, bounds a product) and a head's value writes wait for its key's.
#[test]
fn other_latencies() {
    batches_4_to_1("medium", medium(), 24, 3, 7);
    batches_4_to_1("medium", medium(), 128, 3, 7);
    batches_4_to_1("medium", medium(), 128, 96, 7);
    batches_4_to_1("tiny, heads of 16", tiny(1), 128, 2, 7);
}

/// kjv-lm itself late in its context (`bitstreams/kjv-lm.flm`, 120-token
/// prompts: positions 121 to 123), alone and eight at once: about 200
/// million cycles, two minutes of a core in a release build (`cargo test
/// --release -p fabric-rtl --features verilated --test lm_cycles --
/// --ignored`). results/rtl-lm-speed-2026-12-07-run2.md measured
/// positions 9 to 23; `fabric_model::lm::cycles`'s own tests check those.
#[test]
#[ignore = "two minutes in a release build"]
fn kjv_lm_late_in_the_context() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bitstreams/kjv-lm.flm");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let w = Weights::from_bytes(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    check("kjv-lm alone", &w, 64, 120, &[4]);
    check("kjv-lm, eight lanes", &w, 64, 120, &[4; 8]);
}
