//! 10,000 random descriptors over the temperatures: the RTL gives the same
//! tokens and CRCs as the Rust engine, bit for bit, its table read from DDR
//! through ports that stall their ARREADY and hold back beats at random.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;
use fabric_hw::sampling::SplitMix64;

const REQUESTS: u32 = 10_000;

fn temperature(rng: &mut SplitMix64) -> f32 {
    const FIXED: [f32; 14] = [
        0.0,
        -0.0,
        0.001,
        0.0011,
        0.1,
        0.25,
        0.5,
        0.8,
        1.0,
        1.5,
        2.0,
        5.0,
        -1.0,
        f32::NAN,
    ];
    match rng.next() % 4 {
        0 => (rng.next() % 3_000_000) as f32 / 1_000_000.0,
        1 if rng.next().is_multiple_of(8) => f32::INFINITY,
        _ => FIXED[(rng.next() % FIXED.len() as u64) as usize],
    }
}

fn prompt(rng: &mut SplitMix64, model: &Catalogued) -> Vec<u32> {
    let len = 1 + (rng.next() % 6) as usize;
    match rng.next() % 5 {
        // Text the model would write: trigram contexts it knows.
        0..=2 => {
            let start = [256, 300 + (rng.next() % 200) as u32];
            let mut p = model.generate(&start, len as u32, 1.0, rng.next(), u32::MAX);
            p.truncate(len);
            p
        }
        // Any token of the vocabulary, and now and then one beyond 16 bits.
        3 => (0..len)
            .map(|_| (rng.next() % u64::from(model.vocab())) as u32)
            .collect(),
        _ => vec![(rng.next() % 0x2_0000) as u32; len],
    }
}

#[test]
fn ten_thousand_random_descriptors_give_the_models_tokens() {
    let mut fabric = fabric_rtl::Cosim::new(16);
    fabric.set_ports(fabric_rtl::Ports {
        latency: 40,
        depth: 4,
        stall_permille: 250,
        seed: 0x5EED,
    });
    let mut h = Rig::with(fabric);
    let mut rng = SplitMix64(0x5EED);
    let models = [kjv(), fortunes()];
    let (mut tokens, start) = (0u64, h.w.lock().fabric.cycles());
    let mut tag = 1u32;
    let mut checked = 0;
    while checked < REQUESTS {
        let wave: Vec<Req> = (0..CONTEXTS)
            .map(|ctx| {
                let model = models[usize::from(ctx / PER_SLOT)];
                let mut r = Req::new(tag + u32::from(ctx), ctx, &prompt(&mut rng, model), 1);
                r.max_tokens = 1 + (rng.next() % 24) as u32;
                r.temperature = temperature(&mut rng);
                r.seed = rng.next();
                r.stop_token = if rng.next().is_multiple_of(2) {
                    256
                } else {
                    NO_STOP_TOKEN
                };
                r.stream = rng.next().is_multiple_of(4);
                r
            })
            .collect();
        h.submit(&wave);
        let tags: Vec<u32> = wave.iter().map(|r| r.tag).collect();
        let all = h.until_done(&tags, 2_000_000);
        for r in &wave {
            let model = models[usize::from(r.ctx / PER_SLOT)];
            let want = model.generate(&r.prompt, r.max_tokens, r.temperature, r.seed, r.stop_token);
            let done = done_of(&all, r.tag);
            let got = h.output_of(r.ctx, done.n_tokens);
            assert_eq!(done.status, CqeStatus::Ok, "{r:?}");
            assert_eq!(got, want, "{r:?}");
            assert_eq!(done.crc, tokens_crc(&want), "{r:?}");
            let finish = if want.last() == Some(&r.stop_token) {
                Finish::Stop
            } else {
                Finish::Length
            };
            assert_eq!(done.finish, finish, "{r:?}");
            if r.stream {
                let progress = all
                    .iter()
                    .filter(|c| c.tag == r.tag && c.kind == CqeKind::Tokens)
                    .count();
                assert_eq!(
                    progress,
                    want.len() - 1,
                    "a TOKENS entry per token but the last"
                );
            }
            tokens += u64::from(done.n_tokens);
            checked += 1;
        }
        tag += u32::from(CONTEXTS);
    }
    let cycles = h.w.lock().fabric.cycles() - start;
    eprintln!(
        "{checked} requests, {tokens} tokens, {cycles} cycles: {:.1} cycles a token",
        cycles as f64 / tokens as f64
    );
}
