//! The transformer engine Verilated alone, driven as the shell drives it:
//! weights written and committed, then requests on every lane at once, a
//! lane's next step as soon as its last is answered. Shared by the tests
//! (`tests/lm.rs`, `tests/lm_kjv.rs`) and the speed example
//! (`examples/lm_speed.rs`).

#![allow(dead_code)]

use fabric_hw::sampling::{Sampling, SplitMix64};
use fabric_model::lm::{generate, Shape, Weights};
use fabric_rtl::lm::{LmAnswer, LmCommit, LmEngine, LmFault, LmPort, LmStep, LANES};

pub const BASE: u64 = 0x1000_0000;
pub const MAX_CYCLES: u64 = 20_000_000;

/// Bytes of one lane's keys and values (contract section 10).
pub fn lane_kv(s: &Shape) -> usize {
    s.kv_bytes_a_lane() as usize
}

pub struct Rig {
    pub engine: LmEngine,
    pub weights: Weights,
    /// Where each lane's prompt is written.
    pub prompts: u64,
    pub region: u32,
    /// The cycles a commit, a step's acceptance or an answer may take
    /// ([`MAX_CYCLES`] unless a test's rounds are longer).
    pub wait: u64,
}

impl Rig {
    /// `weights` written at `BASE`, in a region just large enough for them
    /// and every lane's keys and values; the prompts after it.
    pub fn new(weights: Weights, port: LmPort) -> Rig {
        let shape = weights.shape;
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
            wait: MAX_CYCLES,
        }
    }

    pub fn commit(&mut self) -> LmCommit {
        self.engine
            .commit(BASE, self.region, self.wait)
            .expect("the commit ends")
    }

    fn prompt_at(&self, lane: u32) -> u64 {
        self.prompts + u64::from(lane) * self.weights.shape.context as u64 * 4
    }
}

/// A request as the daemon sends it, and how far the client lets it go.
#[derive(Debug, Clone)]
pub struct Desc {
    pub prompt: Vec<u32>,
    pub n: u32,
    pub temperature: f32,
    pub seed: u64,
    pub stop: u32,
    /// Given up after this many tokens (a cancel), if fewer than it makes.
    pub cancel: Option<u32>,
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
        prompt: rig.prompt_at(lane),
        len: d.prompt.len() as u32,
        draw: (l.rng.next() >> 32) as u32,
        greedy,
        inv_t,
    };
    rig.engine
        .request(&s, rig.wait)
        .expect("the engine takes a step");
}

/// Runs every request, up to LANES at once, as the shell would: a lane's
/// next step once its last is answered, a new sequence on a lane as soon
/// as it is free. Returns each request's tokens.
pub fn serve(rig: &mut Rig, descs: &[Desc]) -> Vec<Vec<u32>> {
    serve_watched(rig, descs, LANES, |_, _| {})
}

/// [`serve`] on the first `lanes` lanes, `seen` told of every answer as
/// it comes (the engine's counters then at the answer's cycle).
pub fn serve_watched(
    rig: &mut Rig,
    descs: &[Desc],
    lanes: u32,
    mut seen: impl FnMut(&LmEngine, &LmAnswer),
) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); descs.len()];
    let mut busy: Vec<Option<Lane>> = (0..lanes.min(LANES)).map(|_| None).collect();
    let mut next = 0;
    loop {
        for (i, slot) in busy.iter_mut().enumerate() {
            if slot.is_none() && next < descs.len() {
                let d = &descs[next];
                let bytes: Vec<u8> = d.prompt.iter().flat_map(|t| t.to_le_bytes()).collect();
                let at = rig.prompt_at(i as u32);
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
        if busy.iter().all(Option::is_none) {
            return out;
        }
        let a = rig.engine.answer(rig.wait).expect("an answer");
        seen(&rig.engine, &a);
        let LmAnswer { lane, token, fault } = a;
        let l = busy
            .get_mut(lane as usize)
            .and_then(Option::as_mut)
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
            let l = busy[lane as usize].take().expect("the lane is busy");
            out[l.desc] = l.tokens;
        } else {
            step(rig, lane, false, l, descs);
        }
    }
}

/// `n` random requests: prompts of 1 to `max_prompt` tokens, up to
/// `max_tokens` tokens, five temperatures, a stop token one time in three,
/// a cancel one time in five.
pub fn random_descs(
    shape: &Shape,
    n: usize,
    max_prompt: u64,
    max_tokens: u64,
    seed: u64,
) -> Vec<Desc> {
    let mut rng = SplitMix64(seed);
    let temps = [0.0f32, 0.5, 0.8, 1.0, 1.7];
    (0..n)
        .map(|_| {
            let plen = 1 + (rng.next() % max_prompt) as usize;
            let prompt = (0..plen)
                .map(|_| (rng.next() % shape.vocab as u64) as u32)
                .collect();
            let n = 1 + (rng.next() % max_tokens) as u32;
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

/// The tokens the definition gives `d`, cut where its cancel cuts them.
pub fn expected(w: &Weights, d: &Desc) -> Vec<u32> {
    let mut t = generate(w, &d.prompt, d.n, d.temperature, d.seed, d.stop)
        .expect("the prompt is in the vocabulary");
    if let Some(c) = d.cancel {
        t.truncate(c as usize);
    }
    t
}
