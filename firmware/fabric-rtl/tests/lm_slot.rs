//! The transformer engine in a slot (`rtl/slot/fabric_slot_lm.v`) behind
//! the shell, as the daemon drives it: its weights committed as a table
//! is (section 7), requests on every context of the slot at once through
//! the rings, the shell handing the engine a step for every lane and the
//! engine batching them, each request's tokens `fabric_model::lm`'s, with
//! the trigram engine serving the other slot meanwhile. A context full,
//! a prompt token outside the vocabulary and a cancel end as section 10
//! says, and the other contexts go on.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;
use fabric_model::lm::{generate, Shape, Weights};
use fabric_model::tokenizer::EOS;

/// A model small enough to co-simulate many requests.
fn tiny() -> Weights {
    Weights::random(
        Shape {
            vocab: 300,
            dim: 16,
            layers: 2,
            heads: 4,
            hidden: 32,
            context: 24,
        },
        11,
    )
}

/// The transformer in slot 0 holding `w`, the trigram engine in slot 1
/// holding fortunes, the rings initialised.
fn rig(w: &Weights) -> Rig {
    let mut h = Rig::bare();
    h.load_transformer(0);
    h.load(1, true);
    assert_eq!(h.commit_words(0, &w.to_words()), SlotState::Ready);
    assert_eq!(h.commit(1, &fortunes().table), SlotState::Ready);
    assert_eq!(
        EngineId::decode(SlotRegs::of(0).engine.get(&h.w)),
        Some(EngineId::TRANSFORMER_V1)
    );
    // What the commit read: the weights' CRC, the identity they declare.
    assert_eq!(
        h.reg(SlotRegs::of(0).table_crc.offset()),
        crc32fast::hash(&bytes(&w.to_words()))
    );
    assert_eq!(SlotRegs::of(0).read_identity(&h.w), w.identity);
    h.init();
    h
}

fn lm_req(tag: u32, ctx: u16, prompt: &[u32], n: u32, temperature: f32, seed: u64) -> Req {
    Req {
        temperature,
        seed,
        ..Req::new(tag, ctx, prompt, n)
    }
}

fn want(w: &Weights, r: &Req) -> Vec<u32> {
    generate(
        w,
        &r.prompt,
        r.max_tokens,
        r.temperature,
        r.seed,
        r.stop_token,
    )
    .expect("the prompt is in the vocabulary")
}

/// xorshift64*: the requests, repeatable.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn every_context_of_the_slot_at_once_gets_the_definitions_tokens() {
    let w = tiny();
    let mut h = rig(&w);
    let mut rng = 5u64;
    let mut tag = 1;
    // Three waves of eight: more contexts than the shell's four lanes, so
    // lanes are given again to new sequences, which must start afresh.
    for _wave in 0..3 {
        let mut reqs = Vec::new();
        for ctx in 0..PER_SLOT {
            let len = 1 + (next(&mut rng) % 6) as usize;
            let prompt: Vec<u32> = (0..len).map(|_| (next(&mut rng) % 300) as u32).collect();
            let n = 1 + (next(&mut rng) % 10) as u32;
            let temperature = [0.0, 0.7, 1.0, 1.5][(next(&mut rng) % 4) as usize];
            let mut r = lm_req(tag, ctx, &prompt, n, temperature, next(&mut rng));
            if next(&mut rng).is_multiple_of(4) {
                r.stop_token = (next(&mut rng) % 300) as u32;
            }
            reqs.push(r);
            tag += 1;
        }
        // The trigram slot beside it.
        reqs.push(Req::new(tag, PER_SLOT, &[300, 301, 302], 6));
        let trigram_tag = tag;
        tag += 1;
        h.submit(&reqs);
        let tags: Vec<u32> = reqs.iter().map(|r| r.tag).collect();
        let all = h.until_done(&tags, 20_000_000);
        for r in &reqs[..usize::from(PER_SLOT)] {
            let done = done_of(&all, r.tag);
            let want = want(&w, r);
            assert_eq!(done.status, CqeStatus::Ok, "{r:?}");
            assert_eq!(h.output_of(r.ctx, done.n_tokens), want, "{r:?}");
            assert_eq!(done.crc, crc32fast::hash(&bytes(&want)), "{r:?}");
            let finish = if want.last() == Some(&r.stop_token) {
                Finish::Stop
            } else {
                Finish::Length
            };
            assert_eq!(done.finish, finish, "{r:?}");
        }
        let done = done_of(&all, trigram_tag);
        let want = fortunes().generate(&[300, 301, 302], 6, 0.8, 42, NO_STOP_TOKEN);
        assert_eq!(
            (done.status, h.output_of(PER_SLOT, 6)),
            (CqeStatus::Ok, want)
        );
    }
}

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|t| t.to_le_bytes()).collect()
}

#[test]
fn a_context_that_fills_ends_as_at_max_tokens_and_a_bad_token_faults_alone() {
    let w = tiny();
    let mut h = rig(&w);
    // 20 of the 24 positions taken by end-of-text and the prompt: four
    // tokens fit, not the ten asked for.
    let long: Vec<u32> = (0..19).map(|i| 3 * i + 1).collect();
    let full = lm_req(1, 0, &long, 10, 0.0, 1);
    let bad = lm_req(2, 1, &[5, 300, 6], 4, 0.0, 1);
    let fine = lm_req(3, 2, &[7, 8], 5, 1.0, 9);
    h.submit(&[full.clone(), bad, fine.clone()]);
    let all = h.until_done(&[1, 2, 3], 20_000_000);

    let done = done_of(&all, 1);
    let made = want(&w, &full);
    assert_eq!(made.len(), 24 - 20 + 1, "what the definition makes");
    assert_eq!(
        (done.status, done.finish, done.n_tokens),
        (CqeStatus::Ok, Finish::Length, made.len() as u32)
    );
    assert_eq!(h.output_of(0, done.n_tokens), made);

    let done = done_of(&all, 2);
    assert_eq!((done.status, done.n_tokens), (CqeStatus::Fault, 0));
    assert_eq!(
        h.reg(REG_FAULT_CODE.offset()),
        FaultCode::DecoderFault as u32
    );

    let done = done_of(&all, 3);
    assert_eq!(done.status, CqeStatus::Ok);
    assert_eq!(h.output_of(2, done.n_tokens), want(&w, &fine));
    assert_eq!(
        h.slot_state(0),
        SlotState::Ready,
        "the slot goes on serving"
    );
}

#[test]
fn a_cancel_ends_a_request_with_its_tokens_so_far_and_the_lane_serves_again() {
    let w = tiny();
    let mut h = rig(&w);
    let mut long = lm_req(1, 0, &[EOS, 10, 11], 20, 1.0, 3);
    long.stream = true;
    let other = lm_req(2, 1, &[12], 20, 0.0, 4);
    h.submit(&[long.clone(), other.clone()]);
    // Run until the first tokens are out (streamed), then cancel the first.
    let mut seen = Vec::new();
    let mut waited = 0;
    while seen.iter().filter(|c: &&Cqe| c.tag == 1).count() < 3 {
        h.run(2000);
        waited += 2000;
        assert!(waited < 5_000_000, "no tokens: {seen:?}");
        seen.extend(h.drain());
    }
    h.set(reg_ctx_cancel(0).offset(), 1);
    seen.extend(h.until_done(&[1, 2], 20_000_000));
    let done = done_of(&seen, 1);
    assert_eq!(done.status, CqeStatus::Cancelled);
    let full = want(&w, &long);
    let got = h.output_of(0, done.n_tokens);
    assert!(done.n_tokens < 20, "cancelled before its end");
    assert_eq!(got[..], full[..got.len()], "its tokens so far");
    assert_eq!(h.output_of(1, 20), want(&w, &other));
    // The lane again, a new sequence from position 0.
    h.set(reg_ctx_cancel(0).offset(), 0);
    let again = lm_req(3, 0, &[13, 14], 6, 0.7, 5);
    h.submit(std::slice::from_ref(&again));
    let all = h.until_done(&[3], 20_000_000);
    assert_eq!(done_of(&all, 3).status, CqeStatus::Ok);
    assert_eq!(h.output_of(0, 6), want(&w, &again));
}
