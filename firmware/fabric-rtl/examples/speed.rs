//! How fast the co-simulation runs and what a token costs the RTL in
//! fabric cycles (issue 22, item 8). `scripts/bench-rtl` runs it in a
//! release build and writes the report.
//!
//! It drives the fabric through the tests' own host (`tests/common`: kjv in
//! slot 0, fortunes in slot 1, the rings of section 5), and measures three
//! things:
//!
//! 1. **Cycles a token, one request alone.** One request on an idle
//!    fabric, the clock stepped one cycle at a time from the doorbell until
//!    its DONE entry is whole in memory (its CRC checks: the entry's last
//!    word is written last), so no idle cycle is counted. A request of 1
//!    token and one of `--long` tokens with the same prompt and seed give
//!    the cost of a token (the difference over the extra tokens) and of a
//!    request (what is left: descriptor, prompt, DONE).
//! 2. **Cycles a token under load.** Every context (16) kept busy with
//!    requests of `--tokens` tokens: the clock runs `--chunk` cycles at a
//!    time, and as soon as a DONE is whole in memory the host drains the
//!    ring and gives that context its next request. Fabric cycles over
//!    tokens is the fabric's cost of a token with every lane of both slots
//!    in use; each context waits at most a chunk for its next request.
//! 3. **Co-simulation speed.** Fabric cycles per second of wall time over
//!    the whole of (2), the host's work included, and inside the clock's
//!    runs alone; completions per second of wall time.
//!
//! Every completion of (2) is checked afterwards against the Rust model
//! (tokens and CRC), so a fast wrong fabric cannot pass for a fast one.
//!
//! Options (all optional): `--tokens N` (32), `--completions N` (1600),
//! `--chunk N` (64), `--long N` (256), `--temperature T` (0.8),
//! `--latency N` (the DDR model's read latency in cycles, 16 as the tests').

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use fabric_hw::contract::*;
use fabric_rtl::{Cosim, RtlWindow, VecMemory};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

macro_rules! bail {
    ($($t:tt)*) => { return Err(format!($($t)*).into()) };
}

#[derive(Debug, Clone, Copy)]
struct Opts {
    tokens: u32,
    completions: u64,
    chunk: u64,
    long: u32,
    temperature: f32,
    latency: u32,
}

impl Opts {
    fn parse() -> Result<Opts> {
        let mut o = Opts {
            tokens: 32,
            completions: 1600,
            chunk: 64,
            long: 256,
            temperature: 0.8,
            latency: 16,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} wants a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
            match flag.as_str() {
                "--tokens" => o.tokens = value.parse().map_err(|e| bad(&e))?,
                "--completions" => o.completions = value.parse().map_err(|e| bad(&e))?,
                "--chunk" => o.chunk = value.parse().map_err(|e| bad(&e))?,
                "--long" => o.long = value.parse().map_err(|e| bad(&e))?,
                "--temperature" => o.temperature = value.parse().map_err(|e| bad(&e))?,
                "--latency" => o.latency = value.parse().map_err(|e| bad(&e))?,
                _ => bail!("unknown option {flag}"),
            }
        }
        let out = MAX_OUTPUT as u32;
        if !(1..=out).contains(&o.tokens) || !(2..=out).contains(&o.long) {
            bail!("--tokens and --long are 1..={out} (--long at least 2)");
        }
        if o.chunk == 0 {
            bail!("--chunk is at least 1");
        }
        Ok(o)
    }
}

/// The entry is whole in memory a few cycles before CQ_TAIL says so (the
/// shell moves it on the write's response): let the register catch up
/// before the host reads it.
fn settle(h: &Rig) {
    h.run(8);
}

fn cycles(h: &Rig) -> u64 {
    h.w.lock().fabric.cycles()
}

/// Beats both engines have read from DDR: their tables' traffic.
fn engine_beats(h: &Rig) -> u64 {
    let b = h.w.lock();
    (0..2).map(|s| b.fabric.engine_beats(s)).sum()
}

/// A prompt the model itself would write, so the trigram contexts are
/// ones it knows (as most of a real prompt's are).
fn prompt_for(model: &Catalogued, k: u64) -> Vec<u32> {
    let start = [256, 300 + (k % 200) as u32];
    let mut p = model.generate(&start, 4, 1.0, k, NO_STOP_TOKEN);
    p.truncate(4);
    p
}

fn model_of(ctx: u16) -> &'static Catalogued {
    if ctx < PER_SLOT {
        kjv()
    } else {
        fortunes()
    }
}

/// Fabric cycles from the doorbell of one request on an idle fabric to its
/// DONE entry whole in memory.
fn alone(h: &mut Rig, req: &Req) -> Result<(u64, Cqe)> {
    let Some((took, all)) = h.alone(req, 10_000_000) else {
        bail!("no completion for {req:?} in 10M cycles");
    };
    let done = *all
        .iter()
        .find(|c| c.tag == req.tag && c.kind == CqeKind::Done)
        .ok_or_else(|| format!("no DONE for {req:?}: {all:?}"))?;
    if done.status != CqeStatus::Ok {
        bail!("{req:?} ended {:?}", done.status);
    }
    Ok((took, done))
}

fn latency(h: &mut Rig, o: &Opts) -> Result<()> {
    println!("## alone (one request on an idle fabric, stepped a cycle at a time)");
    println!(
        "model temperature requests short_tokens long_tokens cycles_short cycles_long cycles_per_token cycles_per_request"
    );
    let mut tag = 1_000_000u32;
    for (name, ctx) in [("kjv", 0u16), ("fortunes", PER_SLOT)] {
        for temperature in [0.0f32, o.temperature] {
            let (mut short, mut long, mut n) = (0u64, 0u64, 0u64);
            for k in 0..8u64 {
                let mut r = Req::new(tag, ctx, &prompt_for(model_of(ctx), 1000 + k), 1);
                r.temperature = temperature;
                r.seed = 0x5EED + k;
                let (c1, _) = alone(h, &r)?;
                r.tag += 1;
                r.max_tokens = o.long;
                let (cl, done) = alone(h, &r)?;
                if done.n_tokens != o.long {
                    bail!("{r:?} gave {} tokens", done.n_tokens);
                }
                tag += 2;
                short += c1;
                long += cl;
                n += 1;
            }
            let per_token = (long - short) as f64 / (n * u64::from(o.long - 1)) as f64;
            let per_request = short as f64 / n as f64 - per_token;
            println!(
                "{name} {temperature} {n} 1 {} {:.1} {:.1} {per_token:.1} {per_request:.1}",
                o.long,
                short as f64 / n as f64,
                long as f64 / n as f64,
            );
        }
    }
    Ok(())
}

/// One completion of the loaded run, kept to be checked after the clock
/// stops.
#[derive(Debug)]
struct Answer {
    req: Req,
    done: Cqe,
    tokens: Vec<u32>,
}

fn next_request(tag: &mut u32, ctx: u16, o: &Opts) -> Req {
    *tag += 1;
    let k = u64::from(*tag);
    let mut r = Req::new(*tag, ctx, &prompt_for(model_of(ctx), k), o.tokens);
    r.temperature = o.temperature;
    r.seed = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    r
}

fn loaded(h: &mut Rig, o: &Opts) -> Result<()> {
    // Prompts are generated before the clock starts: the host's model is
    // not what is being timed.
    let mut tag = 0u32;
    let mut inflight: Vec<Req> = (0..CONTEXTS)
        .map(|c| next_request(&mut tag, c, o))
        .collect();
    let mut answers: Vec<Answer> = Vec::new();
    let (mut tokens, mut in_run) = (0u64, Duration::ZERO);
    let (c0, t0) = (cycles(h), Instant::now());
    let beats0 = engine_beats(h);
    let (mut run_cycles, mut done_us) = (0u64, 0u64);
    h.submit(&inflight);
    while (answers.len() as u64) < o.completions {
        let t = Instant::now();
        h.run(o.chunk);
        in_run += t.elapsed();
        run_cycles += o.chunk;
        if !h.entry_ready() {
            if run_cycles > 1_000_000_000 {
                bail!("the fabric stopped answering");
            }
            continue;
        }
        settle(h);
        let mut next = Vec::new();
        for done in h.drain() {
            if done.kind != CqeKind::Done {
                continue;
            }
            let at = inflight
                .iter()
                .position(|r| r.tag == done.tag)
                .ok_or_else(|| format!("a DONE for no request: {done:?}"))?;
            let req = inflight.swap_remove(at);
            tokens += u64::from(done.n_tokens);
            done_us += u64::from(done.fabric_us);
            answers.push(Answer {
                tokens: h.output_of(req.ctx, done.n_tokens),
                done,
                req: req.clone(),
            });
            next.push(next_request(&mut tag, req.ctx, o));
        }
        if !next.is_empty() {
            h.submit(&next);
            inflight.extend(next);
        }
    }
    let (fabric, wall) = (cycles(h) - c0, t0.elapsed());
    let beats = engine_beats(h) - beats0;
    let n = answers.len() as u64;
    for a in &answers {
        let want = model_of(a.req.ctx).generate(
            &a.req.prompt,
            a.req.max_tokens,
            a.req.temperature,
            a.req.seed,
            a.req.stop_token,
        );
        if a.done.status != CqeStatus::Ok || a.tokens != want || a.done.crc != tokens_crc(&want) {
            bail!(
                "{:?}: {:?} gave {:?}, the model {want:?}",
                a.req,
                a.done,
                a.tokens
            );
        }
    }
    println!("## loaded ({CONTEXTS} contexts busy, {LANES} lanes a slot, 2 slots)");
    println!("tokens_per_request {}", o.tokens);
    println!("temperature {}", o.temperature);
    println!("chunk_cycles {}", o.chunk);
    println!("completions {n}");
    println!("tokens {tokens}");
    println!("fabric_cycles {fabric}");
    println!("wall_s {:.3}", wall.as_secs_f64());
    println!("wall_in_clock_s {:.3}", in_run.as_secs_f64());
    println!("cycles_per_s {:.0}", fabric as f64 / wall.as_secs_f64());
    println!(
        "cycles_per_s_in_clock {:.0}",
        run_cycles as f64 / in_run.as_secs_f64()
    );
    println!("completions_per_s {:.1}", n as f64 / wall.as_secs_f64());
    println!(
        "tokens_per_wall_s {:.0}",
        tokens as f64 / wall.as_secs_f64()
    );
    println!(
        "fabric_cycles_per_token {:.2}",
        fabric as f64 / tokens as f64
    );
    println!(
        "fabric_cycles_per_completion {:.1}",
        fabric as f64 / n as f64
    );
    println!("mean_done_fabric_us {:.2}", done_us as f64 / n as f64);
    println!(
        "table_bytes_per_token {:.1}",
        beats as f64 * 8.0 / tokens as f64
    );
    println!("checked_against_model {n}");
    Ok(())
}

/// A fabric out of reset whose DDR answers reads after `latency` cycles.
fn rig(latency: u32) -> Rig {
    Rig {
        w: RtlWindow::new(Cosim::new(latency), VecMemory::new(BASE, MEMORY)),
        sq_tail: 0,
        cq_head: 0,
    }
}

/// The bare clock: the Verilated model with nothing loaded and nothing to
/// do. (One model a process: dropping a second `Cosim` while the first
/// lives hung in Verilator 5.006's scope teardown, `scopeErase`.)
fn idle(h: &Rig) {
    let n = 2_000_000;
    let t = Instant::now();
    h.run(n);
    println!("## idle clock");
    println!(
        "idle_cycles_per_s {:.0}",
        n as f64 / t.elapsed().as_secs_f64()
    );
}

fn main() -> Result<()> {
    let o = Opts::parse()?;
    println!("# fabric-rtl speed");
    println!("ddr_read_latency_cycles {}", o.latency);
    println!("clock_mhz_of_the_cosim {}", fabric_rtl::cosim::CLOCK_MHZ);
    let t = Instant::now();
    let mut h = rig(o.latency);
    idle(&h);
    h.load(0, true);
    h.load(1, true);
    let commit = h.w.lock().fabric.cycles();
    if h.commit(0, &kjv().table) != SlotState::Ready
        || h.commit(1, &fortunes().table) != SlotState::Ready
    {
        bail!("the catalog's tables did not commit");
    }
    println!(
        "commit_cycles_both_tables {} ({} words)",
        h.w.lock().fabric.cycles() - commit,
        kjv().table.words.len() + fortunes().table.words.len()
    );
    h.init();
    println!("setup_s {:.1}", t.elapsed().as_secs_f64());
    latency(&mut h, &o)?;
    loaded(&mut h, &o)?;
    Ok(())
}
