//! The transformer engine (contract section 10) in a slot of the simulated
//! fabric: its weights committed from DDR as a table is, its tokens those
//! of `fabric_model::lm` to the bit, its contexts kept apart, and every
//! wrong commit or request answered by the slot's state or the request's
//! status while the other slot serves.

mod common;

use common::{bare_host, sim, table, Host, ENGINE};
use fabric_hw::contract::*;
use fabric_hw::shell::{Completion, Params, Submission};
use fabric_hw::tables::TableError;
use fabric_model::lm::{generate, Shape, Weights};

/// Slot 1's first context, with the default contexts per slot.
const SLOT1: u16 = 8;

fn model() -> Weights {
    Weights::random(
        Shape {
            vocab: 320,
            dim: 32,
            layers: 2,
            heads: 2,
            hidden: 64,
            context: 24,
        },
        11,
    )
}

fn bytes(w: &Weights) -> Vec<u8> {
    w.to_words().iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A simulator with the trigram engine in slot 0 (kjv committed) and the
/// transformer's in slot 1 (`w` committed).
async fn with_transformer(dir: &std::path::Path, w: &Weights) -> (fabric_sim::Simulator, Host) {
    let sim = sim(dir, |c| {
        c.load = vec![format!("0={ENGINE}"), "1=transformer-v1.bit".into()];
    });
    let h = bare_host(&sim);
    h.commit(0, "kjv").expect("kjv commits to slot 0");
    let c = h
        .commit_bytes(1, &bytes(w))
        .expect("the weights commit to slot 1");
    assert_eq!(c.engine, Some(EngineId::TRANSFORMER_V1));
    (sim, h)
}

fn submission(tag: u32, ctx: u16, prompt: &[u32], n: u32, seed: u64) -> Submission<'_> {
    Submission {
        tag,
        ctx,
        prompt,
        params: Params {
            max_tokens: n,
            temperature: 0.9,
            seed,
            stop_token: NO_STOP_TOKEN,
            stream: false,
        },
    }
}

/// What a request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    tokens: Vec<u32>,
    status: CqeStatus,
    finish: Finish,
}

/// Runs requests at once; their outcomes in the order given.
async fn run_all(h: &mut Host, subs: &[Submission<'_>]) -> Vec<Outcome> {
    use std::collections::HashMap;
    h.rings.submit(&h.shell, subs).expect("submit");
    let mut tokens: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut done: HashMap<u32, (CqeStatus, Finish)> = HashMap::new();
    let mut batch = h.rings.drained();
    while done.len() < subs.len() {
        tokio::time::timeout(std::time::Duration::from_secs(20), h.irq.wait())
            .await
            .expect("an interrupt within 20 s")
            .expect("interrupt");
        batch.clear();
        h.rings.drain(&h.shell, &mut batch).expect("drain");
        h.irq.unmask().expect("unmask");
        for (c, t) in batch.iter() {
            let tag = match c {
                Completion::Tokens { tag, .. } => *tag,
                Completion::Done {
                    tag,
                    status,
                    finish,
                    ..
                } => {
                    done.insert(*tag, (*status, *finish));
                    *tag
                }
            };
            tokens.entry(tag).or_default().extend_from_slice(t);
        }
    }
    subs.iter()
        .map(|s| Outcome {
            tokens: tokens.remove(&s.tag).unwrap_or_default(),
            status: done[&s.tag].0,
            finish: done[&s.tag].1,
        })
        .collect()
}

fn ok(tokens: Vec<u32>, finish: Finish) -> Outcome {
    Outcome {
        tokens,
        status: CqeStatus::Ok,
        finish,
    }
}

#[tokio::test]
async fn a_transformer_slot_gives_the_definitions_tokens_context_by_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = model();
    let (_sim, mut h) = with_transformer(dir.path(), &w).await;
    let prompts: [&[u32]; 4] = [&[300, 301, 302], &[5], &[256], &[319, 0, 256, 17, 42]];
    // Four requests on four of slot 1's contexts at once, sharing its
    // lanes step by step: each gets its own sequence's tokens.
    let subs: Vec<Submission> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| submission(10 + i as u32, SLOT1 + i as u16, p, 8, 100 + i as u64))
        .collect();
    let got = run_all(&mut h, &subs).await;
    for (i, p) in prompts.iter().enumerate() {
        let want = generate(&w, p, 8, 0.9, 100 + i as u64, NO_STOP_TOKEN).expect("reference");
        assert_eq!(got[i], ok(want, Finish::Length), "request {i}");
    }
    // And slot 0's trigram engine served beside it.
    let kjv = fabric_model::table::Table::from_bytes(&table("kjv")).expect("kjv");
    let prompt = [300, 301, 302, 303];
    let got = run_all(&mut h, &[submission(20, 0, &prompt, 6, 42)]).await;
    let want = kjv
        .generate(&prompt, 6, 0.9, 42, NO_STOP_TOKEN)
        .expect("the table answers");
    assert_eq!(got[0], ok(want, Finish::Length));
}

#[tokio::test]
async fn a_request_past_the_context_ends_at_its_end_and_a_bad_token_faults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = model();
    let (_sim, mut h) = with_transformer(dir.path(), &w).await;
    // End-of-text and 4 prompt tokens take 5 of 24 positions: 20 tokens
    // are drawn (the last is never fed), then the context is full.
    let prompt = [1, 2, 3, 4];
    let got = run_all(&mut h, &[submission(1, SLOT1, &prompt, 40, 7)]).await;
    let want = generate(&w, &prompt, 40, 0.9, 7, NO_STOP_TOKEN).expect("reference");
    assert_eq!(want.len(), 20);
    assert_eq!(got[0], ok(want, Finish::Length));
    // A prompt token outside the vocabulary: a decoder fault, no tokens,
    // and the slot serves the next request.
    let got = run_all(&mut h, &[submission(2, SLOT1, &[3, 320], 4, 7)]).await;
    assert_eq!(
        got[0],
        Outcome {
            tokens: vec![],
            status: CqeStatus::Fault,
            finish: Finish::None
        }
    );
    let got = run_all(&mut h, &[submission(3, SLOT1, &[3], 4, 7)]).await;
    let want = generate(&w, &[3], 4, 0.9, 7, NO_STOP_TOKEN).expect("reference");
    assert_eq!(got[0], ok(want, Finish::Length));
}

#[tokio::test]
async fn weights_for_the_wrong_engine_or_corrupt_leave_the_slot_in_error_until_good_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = model();
    let (_sim, mut h) = with_transformer(dir.path(), &w).await;
    let good = bytes(&w);
    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    // Weights that are not what they declare are taken, as the RTL engine
    // takes them (it reports the identity declared and the CRC of what it
    // read); the host refuses them by that CRC, against the catalog's.
    let c = h
        .commit_bytes(1, &corrupt)
        .expect("the engine takes what it reads");
    let declared: String = w.identity.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(c.identity, declared, "the identity declared");
    assert_eq!(c.crc, crc32fast::hash(&corrupt));
    assert_ne!(c.crc, crc32fast::hash(&good));
    for (what, slot, bad) in [
        ("a trigram table in the transformer's slot", 1, table("kjv")),
        ("weights in the trigram's slot", 0, good.clone()),
    ] {
        let err = h.commit_bytes(slot, &bad).expect_err(what);
        assert!(
            matches!(
                err,
                TableError::Failed {
                    state: SlotState::Error(slot_error::BAD_TABLE),
                    ..
                }
            ),
            "{what}: {err}"
        );
    }
    // Both slots are in error; good ones put them back.
    h.commit(0, "kjv").expect("kjv again");
    h.commit_bytes(1, &good).expect("the weights again");
    let got = run_all(&mut h, &[submission(1, SLOT1, &[9], 5, 3)]).await;
    let want = generate(&w, &[9], 5, 0.9, 3, NO_STOP_TOKEN).expect("reference");
    assert_eq!(got[0], ok(want, Finish::Length));
}

/// A slot's region holds the weights and, after them, every lane's keys
/// and values (contract section 10). Weights whose lanes' keys and values
/// would run past the region are refused by the daemon's side before a
/// word is written, and the slot keeps serving what it held; and a daemon
/// that left no room for them is refused by the device, as the RTL engine
/// refuses them, not served into memory past its region.
#[tokio::test]
async fn weights_whose_keys_and_values_overrun_the_region_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = model();
    let (_sim, mut h) = with_transformer(dir.path(), &w).await;
    // A long context: small weights, a lane's keys and values of 2.6 MB.
    let long = Weights::random(
        Shape {
            vocab: 320,
            dim: 32,
            layers: 8,
            heads: 2,
            hidden: 64,
            context: 4096,
        },
        12,
    );
    let long_bytes = bytes(&long);
    let kv = long.shape.kv_bytes_a_lane() * h.shell.info().lanes as u64;
    let region = h.tables.region_bytes();
    assert!(
        (long_bytes.len() as u64) < region && long_bytes.len() as u64 + kv > region,
        "the weights ({} bytes) fit the region ({region}) and their keys and values ({kv}) do not",
        long_bytes.len()
    );

    let err = h.commit_bytes(1, &long_bytes).expect_err("no room");
    assert!(
        matches!(err, TableError::RegionTooSmall { slot: 1, kv: k, .. } if k == kv),
        "{err}"
    );
    assert!(err.to_string().contains("keys and values"), "{err}");
    let got = run_all(&mut h, &[submission(1, SLOT1, &[9], 5, 3)]).await;
    let want = generate(&w, &[9], 5, 0.9, 3, NO_STOP_TOKEN).expect("reference");
    assert_eq!(
        got[0],
        ok(want, Finish::Length),
        "the slot serves what it held"
    );

    let err = h
        .commit_with_kv(1, &long_bytes, 0)
        .expect_err("the device refuses");
    assert!(
        matches!(
            err,
            TableError::Failed {
                state: SlotState::Error(slot_error::BAD_TABLE),
                ..
            }
        ),
        "{err}"
    );
    h.commit_bytes(1, &bytes(&w)).expect("the weights again");
}
