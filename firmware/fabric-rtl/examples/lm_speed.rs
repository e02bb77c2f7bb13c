//! What a token of a transformer costs the RTL in fabric cycles (issue 31,
//! item 6). `scripts/bench-rtl-lm` runs it in a release build and writes
//! the report.
//!
//! The engine (`rtl/engine/lm`) is Verilated alone behind its HP port's
//! model, as `tests/lm.rs` drives it, the weights committed from the
//! port's memory. For a batch of 1 and for every lane, that many greedy
//! requests with prompts of the same length start together, so the lanes
//! move through rounds in step; a round's cycles are those between the
//! answers of one round and of the next, after the first (each round from
//! then on feeds every lane its last token and draws the next). The
//! port's counters give the beats a round reads and the writes it makes.
//!
//! Every request's tokens are checked against `fabric_model::lm::generate`
//! afterwards, so a fast wrong engine cannot pass for a fast one.
//!
//! Options (all optional): `--weights FILE` (bitstreams/kjv-lm.flm),
//! `--prompt N` (8 tokens), `--tokens N` (16), `--latency N` (64 cycles
//! from a burst's address to its first beat).

#[path = "../tests/lm_rig/mod.rs"]
mod lm_rig;

use std::time::Instant;

use fabric_model::lm::Weights;
use fabric_rtl::lm::{LmCommit, LmPort, LANES};
use lm_rig::{expected, serve_watched, Desc, Rig};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

macro_rules! bail {
    ($($t:tt)*) => { return Err(format!($($t)*).into()) };
}

#[derive(Debug, Clone)]
struct Opts {
    weights: String,
    prompt: u32,
    tokens: u32,
    latency: u32,
}

impl Opts {
    fn parse() -> Result<Opts> {
        let mut o = Opts {
            weights: "bitstreams/kjv-lm.flm".into(),
            prompt: 8,
            tokens: 16,
            latency: 64,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} wants a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
            match flag.as_str() {
                "--weights" => o.weights = value,
                "--prompt" => o.prompt = value.parse().map_err(|e| bad(&e))?,
                "--tokens" => o.tokens = value.parse().map_err(|e| bad(&e))?,
                "--latency" => o.latency = value.parse().map_err(|e| bad(&e))?,
                _ => bail!("unknown option {flag}"),
            }
        }
        if o.prompt == 0 || o.tokens < 3 {
            bail!("--prompt is at least 1 and --tokens at least 3 (two decode rounds to time)");
        }
        Ok(o)
    }
}

/// The engine's counters at an answer.
#[derive(Debug, Clone, Copy)]
struct At {
    cycles: u64,
    beats: u64,
    writes: u64,
}

/// One batch: `lanes` greedy requests started together.
fn batch(w: &Weights, o: &Opts, lanes: u32) -> Result<()> {
    let shape = w.shape;
    if (o.prompt + o.tokens) as usize >= shape.context {
        bail!(
            "a prompt of {} and {} tokens do not fit a context of {}",
            o.prompt,
            o.tokens,
            shape.context
        );
    }
    let descs: Vec<Desc> = (0..lanes)
        .map(|k| Desc {
            // Tokens spread over the vocabulary, another run for each lane.
            prompt: (0..o.prompt)
                .map(|i| (u64::from(k * 7919 + i * 104_729) % shape.vocab as u64) as u32)
                .collect(),
            n: o.tokens,
            temperature: 0.0,
            seed: u64::from(k),
            stop: u32::MAX,
            cancel: None,
        })
        .collect();
    let mut rig = Rig::new(
        w.clone(),
        LmPort {
            latency: o.latency,
            stall_permille: 0,
            seed: 1,
        },
    );
    // The first answer comes after a round a prompt token, and a round of
    // kjv-lm at a batch of 8 is a million cycles or more.
    rig.wait = rig.wait.max(4_000_000 * (u64::from(o.prompt) + 2));
    let before = rig.engine.cycles();
    if !matches!(rig.commit(), LmCommit::Taken { .. }) {
        bail!("the engine did not take the weights");
    }
    let commit = rig.engine.cycles() - before;
    let start = rig.engine.cycles();
    let wall = Instant::now();
    let mut seen: Vec<At> = Vec::new();
    let got = serve_watched(&mut rig, &descs, lanes, |e, _| {
        let (beats, writes) = e.traffic();
        seen.push(At {
            cycles: e.cycles(),
            beats,
            writes,
        });
    });
    let wall = wall.elapsed().as_secs_f64();
    for (d, g) in descs.iter().zip(&got) {
        let want = expected(w, d);
        if *g != want {
            bail!("batch {lanes}: the RTL gave {g:?} for {d:?}; the definition {want:?}");
        }
    }
    // The last answer of each round: every lane answers once a round.
    let rounds: Vec<At> = seen
        .chunks(lanes as usize)
        .map(|c| c[c.len() - 1])
        .collect();
    let (first, last) = (rounds[0], rounds[rounds.len() - 1]);
    let n = (rounds.len() - 1) as u64;
    let total = seen.last().map_or(0, |a| a.cycles) - start;
    println!("batch {lanes}");
    println!("  commit_cycles {commit}");
    println!(
        "  first_token_cycles {} (end-of-text and {} prompt tokens)",
        first.cycles - start,
        o.prompt
    );
    println!(
        "  decode_round_cycles {:.1}",
        (last.cycles - first.cycles) as f64 / n as f64
    );
    println!(
        "  decode_round_beats {:.1}",
        (last.beats - first.beats) as f64 / n as f64
    );
    println!(
        "  decode_round_writes {:.1}",
        (last.writes - first.writes) as f64 / n as f64
    );
    println!("  decode_rounds {n}");
    println!("  tokens {}", got.iter().map(Vec::len).sum::<usize>());
    println!("  cycles {total}");
    println!("  cosim_cycles_per_s {:.0}", total as f64 / wall);
    println!("  tokens_equal_the_definition true");
    Ok(())
}

fn main() -> Result<()> {
    let o = Opts::parse()?;
    let bytes = std::fs::read(&o.weights).map_err(|e| format!("{}: {e}", o.weights))?;
    let w = Weights::from_bytes(&bytes).map_err(|e| format!("{}: {e}", o.weights))?;
    let s = w.shape;
    println!("# fabric-rtl lm_speed");
    println!("weights {}", o.weights);
    println!(
        "shape vocab {} dim {} layers {} heads {} hidden {} context {}",
        s.vocab, s.dim, s.layers, s.heads, s.hidden, s.context
    );
    println!("weight_bytes {}", bytes.len());
    println!("weight_bytes_a_step {}", 4 * s.words_a_step());
    println!("port_bits 64");
    println!("lanes {LANES}");
    println!("ddr_read_latency_cycles {}", o.latency);
    println!("prompt_tokens {}", o.prompt);
    println!("tokens {}", o.tokens);
    for lanes in [1, LANES] {
        batch(&w, &o, lanes)?;
    }
    Ok(())
}
