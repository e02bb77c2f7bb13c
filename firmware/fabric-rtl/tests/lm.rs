//! The transformer engine in RTL against `fabric_model::lm`, token for
//! token: a small model's weights committed from the engine's memory,
//! then random requests on every lane at once (prompts, temperatures,
//! seeds, stop tokens, and sequences given up part way, as a cancel
//! leaves them), each request's tokens the definition's `generate`.

#![cfg(feature = "verilated")]

mod lm_rig;

use fabric_model::lm::{Shape, Weights};
use fabric_rtl::lm::{LmCommit, LmPort, LANES};
use lm_rig::{expected, lane_kv, random_descs, serve, serve_watched, Desc, Rig, BASE};

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

fn tiny_rig(heads: usize, seed: u64, port: LmPort) -> Rig {
    Rig::new(Weights::random(tiny(heads), seed), port)
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
    let mut rig = tiny_rig(4, 7, quiet());
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
    let mut rig = tiny_rig(4, 7, quiet());
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
        let mut rig = tiny_rig(
            heads,
            seed,
            LmPort {
                latency: 40,
                stall_permille: 200,
                seed,
            },
        );
        assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
        let descs = random_descs(&shape, 500, 6, 8, seed * 1000);
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

/// The contract's promise that a context's keys and values are its own,
/// held by the port: every other lane's block answers SLVERR, so a step
/// of lane 0 that read one would fault its request.
#[test]
fn a_context_reads_only_its_own_keys_and_values() {
    let shape = tiny(4);
    let mut rig = tiny_rig(4, 21, quiet());
    let kv_base = BASE + 4 * rig.weights.to_words().len() as u64;
    let block = lane_kv(&shape) as u64;
    rig.engine
        .fail(kv_base + block..kv_base + u64::from(LANES) * block);
    assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
    let descs = random_descs(&shape, 20, 6, 8, 2100);
    let got = serve_watched(&mut rig, &descs, 1, |_, _| {});
    for (i, d) in descs.iter().enumerate() {
        assert_eq!(got[i], expected(&rig.weights, d), "request {i}: {d:?}");
    }
}

/// The engine works out where every matrix and every lane's keys and
/// values lie from the header's shape, and refuses a header whose shape
/// disagrees with its length, or a region too small for the weights and
/// every lane's keys and values; a refusal leaves it ready for the next.
#[test]
fn a_commit_refuses_a_shape_its_words_or_region_disagree_with() {
    let mut rig = tiny_rig(4, 9, quiet());
    let words = rig.weights.to_words();
    let put = |rig: &mut Rig, i: usize, w: u32| {
        rig.engine
            .write(BASE + 4 * i as u64, &w.to_le_bytes())
            .expect("the header is in the memory");
    };
    // A region a word short of the lanes' keys and values.
    let short = rig
        .engine
        .commit(BASE, rig.region - 1, lm_rig::MAX_CYCLES)
        .expect("the commit ends");
    assert_eq!(short, LmCommit::Refused, "a region a word short");
    // The length a word more than the shape's.
    put(&mut rig, 2, words[2] + 1);
    assert_eq!(rig.commit(), LmCommit::Refused, "a length a word long");
    put(&mut rig, 2, words[2]);
    // A layer more than the words hold.
    put(&mut rig, 5, words[5] + 1);
    assert_eq!(rig.commit(), LmCommit::Refused, "a layer more");
    put(&mut rig, 5, words[5]);
    // A vocabulary a token larger.
    put(&mut rig, 3, words[3] + 1);
    assert_eq!(rig.commit(), LmCommit::Refused, "a token more");
    put(&mut rig, 3, words[3]);
    assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
}
