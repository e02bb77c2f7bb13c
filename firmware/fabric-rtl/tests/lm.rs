//! The transformer engine in RTL against `fabric_model::lm`, token for
//! token: a small model's weights committed from the engine's memory,
//! then random requests on every lane at once (prompts, temperatures,
//! seeds, stop tokens, and sequences given up part way, as a cancel
//! leaves them), each request's tokens the definition's `generate`.

#![cfg(feature = "verilated")]

use fabric_hw::sampling::{Sampling, SplitMix64};
use fabric_model::lm::{generate, Shape, Weights};
use fabric_rtl::lm::{LmAnswer, LmCommit, LmEngine, LmFault, LmPort, LmStep, LANES};

const BASE: u64 = 0x1000_0000;
const MAX_CYCLES: u64 = 20_000_000;

/// A model small enough to co-simulate many requests: heads of four, so
/// a key's head is one word and two positions share a port beat.
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

/// Bytes of one lane's keys and values (contract section 10).
fn lane_kv(s: &Shape) -> usize {
    s.layers * s.context * 2 * s.heads * (s.head() + 4)
}

struct Rig {
    engine: LmEngine,
    weights: Weights,
    /// Where each lane's prompt is written.
    prompts: u64,
    region: u32,
}

impl Rig {
    fn new(shape: Shape, seed: u64, port: LmPort) -> Rig {
        let weights = Weights::random(shape, seed);
        let words = weights.to_words();
        let region = (words.len() + LANES as usize * lane_kv(&shape) / 4) as u32;
        let prompts = BASE + u64::from(region) * 4;
        let len = u64::from(region) * 4 + u64::from(LANES) * shape.context as u64 * 4 + 64;
        let mut engine = LmEngine::new(BASE, len, port);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        engine
            .write(BASE, &bytes)
            .expect("the weights fit the memory");
        Rig {
            engine,
            weights,
            prompts,
            region,
        }
    }

    fn commit(&mut self) -> LmCommit {
        self.engine
            .commit(BASE, self.region, MAX_CYCLES)
            .expect("the commit ends")
    }
}

/// A request as the daemon sends it, and how far the client lets it go.
#[derive(Debug, Clone)]
struct Desc {
    prompt: Vec<u32>,
    n: u32,
    temperature: f32,
    seed: u64,
    stop: u32,
    /// Given up after this many tokens (a cancel), if fewer than it makes.
    cancel: Option<u32>,
}

struct Lane {
    desc: usize,
    rng: SplitMix64,
    sampling: Sampling,
    tokens: Vec<u32>,
}

fn step(rig: &mut Rig, lane: u32, first: bool, l: &mut Lane, descs: &[Desc]) {
    let d = &descs[l.desc];
    let (greedy, inv_t) = match l.sampling {
        Sampling::Greedy => (true, 0),
        Sampling::Scaled { inv_t } => (false, inv_t),
    };
    let s = LmStep {
        lane,
        first,
        prompt: rig.prompts + u64::from(lane) * rig.weights.shape.context as u64 * 4,
        len: d.prompt.len() as u32,
        draw: (l.rng.next() >> 32) as u32,
        greedy,
        inv_t,
    };
    rig.engine
        .request(&s, MAX_CYCLES)
        .expect("the engine takes a step");
}

/// Runs every request, up to LANES at once, as the shell would: a lane's
/// next step once its last is answered, a new sequence on a lane as soon
/// as it is free. Returns each request's tokens.
fn serve(rig: &mut Rig, descs: &[Desc]) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); descs.len()];
    let mut lanes: Vec<Option<Lane>> = (0..LANES).map(|_| None).collect();
    let mut next = 0;
    loop {
        for (i, slot) in lanes.iter_mut().enumerate() {
            if slot.is_none() && next < descs.len() {
                let d = &descs[next];
                let at = rig.prompts + i as u64 * rig.weights.shape.context as u64 * 4;
                let bytes: Vec<u8> = d.prompt.iter().flat_map(|t| t.to_le_bytes()).collect();
                rig.engine.write(at, &bytes).expect("the prompt fits");
                let mut l = Lane {
                    desc: next,
                    rng: SplitMix64(d.seed),
                    sampling: Sampling::from_f32(d.temperature),
                    tokens: Vec::new(),
                };
                step(rig, i as u32, true, &mut l, descs);
                *slot = Some(l);
                next += 1;
            }
        }
        if lanes.iter().all(Option::is_none) {
            return out;
        }
        let LmAnswer { lane, token, fault } = rig.engine.answer(MAX_CYCLES).expect("an answer");
        let l = lanes[lane as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("an answer for idle lane {lane}"));
        let d = &descs[l.desc];
        let done = match fault {
            LmFault::None => {
                l.tokens.push(token);
                token == d.stop
                    || l.tokens.len() == d.n as usize
                    || d.cancel.is_some_and(|c| l.tokens.len() == c as usize)
            }
            LmFault::Full => true,
            other => panic!("request {} ({d:?}): fault {other:?}", l.desc),
        };
        if done {
            let l = lanes[lane as usize].take().expect("the lane is busy");
            out[l.desc] = l.tokens;
        } else {
            step(rig, lane, false, l, descs);
        }
    }
}

fn random_descs(shape: &Shape, n: usize, seed: u64) -> Vec<Desc> {
    let mut rng = SplitMix64(seed);
    let temps = [0.0f32, 0.5, 0.8, 1.0, 1.7];
    (0..n)
        .map(|_| {
            let plen = 1 + (rng.next() % 6) as usize;
            let prompt = (0..plen)
                .map(|_| (rng.next() % shape.vocab as u64) as u32)
                .collect();
            let n = 1 + (rng.next() % 8) as u32;
            let stop = if rng.next().is_multiple_of(3) {
                (rng.next() % shape.vocab as u64) as u32
            } else {
                u32::MAX
            };
            let cancel = rng
                .next()
                .is_multiple_of(5)
                .then(|| 1 + (rng.next() % 3) as u32);
            Desc {
                prompt,
                n,
                temperature: temps[(rng.next() % temps.len() as u64) as usize],
                seed: rng.next(),
                stop,
                cancel,
            }
        })
        .collect()
}

fn expected(w: &Weights, d: &Desc) -> Vec<u32> {
    let mut t = generate(w, &d.prompt, d.n, d.temperature, d.seed, d.stop)
        .expect("the prompt is in the vocabulary");
    if let Some(c) = d.cancel {
        t.truncate(c as usize);
    }
    t
}

fn quiet() -> LmPort {
    LmPort {
        latency: 24,
        stall_permille: 0,
        seed: 1,
    }
}

#[test]
fn a_commit_reports_the_weights_crc_and_identity() {
    let mut rig = Rig::new(tiny(4), 7, quiet());
    let words = rig.weights.to_words();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(
        rig.commit(),
        LmCommit::Taken {
            crc: crc32fast::hash(&bytes),
            identity: rig.weights.identity,
        }
    );
}

#[test]
fn one_greedy_request_is_the_definitions() {
    let mut rig = Rig::new(tiny(4), 7, quiet());
    assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
    let d = Desc {
        prompt: vec![5, 77, 299],
        n: 6,
        temperature: 0.0,
        seed: 3,
        stop: u32::MAX,
        cancel: None,
    };
    let got = serve(&mut rig, std::slice::from_ref(&d));
    assert_eq!(got[0], expected(&rig.weights, &d));
}

#[test]
fn random_requests_on_every_lane_are_the_definitions() {
    for (heads, seed) in [(4, 11u64), (1, 12)] {
        let shape = tiny(heads);
        let mut rig = Rig::new(
            shape,
            seed,
            LmPort {
                latency: 40,
                stall_permille: 200,
                seed,
            },
        );
        assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
        let descs = random_descs(&shape, 500, seed * 1000);
        let got = serve(&mut rig, &descs);
        for (i, d) in descs.iter().enumerate() {
            assert_eq!(
                got[i],
                expected(&rig.weights, d),
                "request {i} of heads {heads}: {d:?}"
            );
        }
        eprintln!(
            "heads {heads}: {} cycles, {:?} beats and writes",
            rig.engine.cycles(),
            rig.engine.traffic()
        );
    }
}
