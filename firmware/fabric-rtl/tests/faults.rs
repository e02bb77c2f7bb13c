//! Section 6 in RTL: every fault code, each refused descriptor answered with
//! a DONE, and the shell serving the other contexts and slots meanwhile.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;

const PROMPT: [u32; 3] = [300, 301, 302];

fn fault_code(h: &Rig) -> u32 {
    h.reg(REG_FAULT_CODE.offset())
}

/// A good request on the other slot still completes.
fn others_still_served(h: &mut Rig, tag: u32) {
    h.submit(&[Req::new(tag, 9, &PROMPT, 4)]);
    let all = h.until_done(&[tag], 200_000);
    assert_eq!(done_of(&all, tag).status, CqeStatus::Ok);
}

#[test]
fn a_descriptor_with_a_bad_crc_is_refused_with_its_index() {
    let mut h = Rig::new();
    let errors = h.reg(REG_CNT_ERRORS.offset());
    // A flipped bit of the seed: every field still valid, only the CRC
    // tells.
    h.mem_write(PROMPTS, &[44, 1, 0, 0, 45, 1, 0, 0, 46, 1, 0, 0]);
    let mut raw = h.sqe(&Req::new(5, 0, &PROMPT, 4)).encode();
    raw[50] ^= 0x40;
    let index = h.sq_tail;
    h.put(&raw);
    h.ring();
    h.run(2_000);
    let all = h.drain();
    let done = all
        .iter()
        .find(|c| c.kind == CqeKind::Done)
        .expect("a DONE");
    assert_eq!(
        (done.status, done.tag, done.n_tokens),
        (CqeStatus::BadDescriptor, 0, index)
    );
    assert_eq!(fault_code(&h), FaultCode::BadDescriptorCrc as u32);
    assert_eq!(h.reg(REG_CNT_ERRORS.offset()), errors + 1);
    others_still_served(&mut h, 6);
}

#[test]
fn stale_descriptors_are_answered_stale() {
    let mut h = Rig::new();
    // An old sequence number: written for an earlier lap of the ring.
    let mut sqe = h.sqe(&Req::new(5, 0, &PROMPT, 4));
    sqe.seq = sqe.seq.wrapping_sub(SQ_ENTRIES);
    let index = h.sq_tail;
    h.put(&sqe.encode());
    // And one never written (all zero).
    h.put(&[0u8; SQE_LEN]);
    h.ring();
    h.run(4_000);
    let all = h.drain();
    let stale: Vec<u32> = all
        .iter()
        .filter(|c| c.status == CqeStatus::StaleDescriptor)
        .map(|c| c.n_tokens)
        .collect();
    assert_eq!(stale, vec![index, index + 1]);
    assert_eq!(fault_code(&h), FaultCode::StaleDescriptor as u32);
    others_still_served(&mut h, 6);
}

#[test]
fn a_busy_context_is_refused_and_keeps_its_request() {
    let mut h = Rig::new();
    h.submit(&[Req::new(10, 2, &PROMPT, 200)]);
    h.run(300);
    h.submit(&[Req::new(11, 2, &PROMPT, 4)]);
    h.run(3_000);
    let all = h.drain();
    let refused = done_of(&all, 11);
    assert_eq!(refused.status, CqeStatus::BadDescriptor);
    assert_eq!(
        refused.n_tokens, 1,
        "a bad descriptor names its SQ index (section 4)"
    );
    assert_eq!(fault_code(&h), FaultCode::ContextBusy as u32);
    let all = h.until_done(&[10], 2_000_000);
    let first = done_of(&all, 10);
    assert_eq!((first.status, first.n_tokens), (CqeStatus::Ok, 200));
}

#[test]
fn a_slot_not_ready_is_answered_not_ready() {
    let mut h = Rig::bare();
    h.load(1, true);
    assert_eq!(h.commit(1, &fortunes().table), SlotState::Ready);
    h.load(0, true);
    h.init();
    // Slot 0 holds an engine and no model.
    h.submit(&[Req::new(3, 0, &PROMPT, 4)]);
    h.run(3_000);
    let all = h.drain();
    assert_eq!(done_of(&all, 3).status, CqeStatus::SlotNotReady);
    assert_eq!(fault_code(&h), FaultCode::SlotNotReady as u32);
    // A quiesced slot takes nothing new either.
    h.set(SlotRegs::of(1).ctrl.offset(), 1);
    h.submit(&[Req::new(4, 8, &PROMPT, 4)]);
    h.run(3_000);
    let all = h.drain();
    assert_eq!(done_of(&all, 4).status, CqeStatus::SlotNotReady);
    h.set(SlotRegs::of(1).ctrl.offset(), 0);
    others_still_served(&mut h, 5);
}

#[test]
fn a_misprogrammed_ring_faults_and_runs_nothing() {
    let h = Rig::new();
    h.set(REG_CONTROL.offset(), 0);
    h.set(REG_SQ_ENTRIES.offset(), 48);
    let event = h.reg(REG_EVENT_SEQ.offset());
    h.set(REG_CONTROL.offset(), 3);
    h.run(50);
    let status = h.reg(REG_STATUS.offset());
    assert_eq!(status & 1, 0, "not RUNNING");
    assert_ne!(status & 4, 0, "FAULT");
    assert_eq!(fault_code(&h), FaultCode::RingMisprogrammed as u32);
    assert_ne!(h.reg(REG_EVENT_SEQ.offset()), event, "EVENT_SEQ bumped");
}

#[test]
fn out_of_range_fields_are_bad_descriptors() {
    let mut h = Rig::new();
    let mut reqs = Vec::new();
    let mut long = Req::new(20, 0, &PROMPT, 4);
    long.prompt = vec![300; 1025];
    reqs.push(long);
    reqs.push(Req::new(21, 1, &PROMPT, 257));
    reqs.push(Req::new(22, 2, &PROMPT, 0));
    // A context of the other slot than the descriptor names.
    let mut wrong_slot = Req::new(23, 3, &PROMPT, 4);
    wrong_slot.ctx = 12;
    reqs.push(wrong_slot);
    let first = h.sq_tail;
    for r in &reqs {
        let prompt: Vec<u8> = r.prompt.iter().flat_map(|t| t.to_le_bytes()).collect();
        let prompt = &prompt[..prompt.len().min(4096)];
        h.mem_write(PROMPTS + u64::from(r.ctx) * MAX_PROMPT * 4, prompt);
        let mut sqe = h.sqe(r);
        if r.tag == 23 {
            sqe.slot = 0;
        }
        h.put(&sqe.encode());
    }
    h.ring();
    h.run(10_000);
    let all = h.drain();
    let bad: Vec<u32> = all
        .iter()
        .filter(|c| c.status == CqeStatus::BadDescriptor)
        .map(|c| c.n_tokens)
        .collect();
    assert_eq!(bad, (first..first + 4).collect::<Vec<_>>());
    others_still_served(&mut h, 24);
}

#[test]
fn a_prompt_outside_memory_is_a_bad_descriptor() {
    let mut h = Rig::new();
    let mut sqe = h.sqe(&Req::new(30, 0, &PROMPT, 4));
    sqe.prompt_addr = 0x8000_0000;
    let index = h.sq_tail;
    h.put(&sqe.encode());
    h.ring();
    h.run(3_000);
    let all = h.drain();
    let done = all
        .iter()
        .find(|c| c.kind == CqeKind::Done)
        .expect("a DONE");
    assert_eq!(
        (done.status, done.n_tokens),
        (CqeStatus::BadDescriptor, index)
    );
    others_still_served(&mut h, 31);
}

#[test]
fn output_outside_memory_ends_the_request_as_a_decoder_fault() {
    let mut h = Rig::new();
    let mut sqe = h.sqe(&Req::new(40, 0, &PROMPT, 4));
    sqe.output_addr = 0x8000_0000;
    h.mem_write(PROMPTS, &[44, 1, 0, 0, 45, 1, 0, 0, 46, 1, 0, 0]);
    h.put(&sqe.encode());
    h.ring();
    let all = h.until_done(&[40], 100_000);
    assert_eq!(done_of(&all, 40).status, CqeStatus::Fault);
    assert_eq!(fault_code(&h), FaultCode::DecoderFault as u32);
    others_still_served(&mut h, 41);
}

#[test]
fn a_cancel_ends_a_running_request_and_a_queued_one_at_once() {
    let mut h = Rig::new();
    // Eight requests for slot 0's four lanes: four run, four wait on chip.
    let reqs: Vec<Req> = (0..8)
        .map(|c| Req::new(100 + c, c as u16, &PROMPT, 256))
        .collect();
    h.submit(&reqs);
    h.run(5_000);
    assert_eq!(h.reg(SlotRegs::of(0).active.offset()), 8);
    h.set(reg_ctx_cancel(0).offset(), 100);
    h.set(reg_ctx_cancel(7).offset(), 107);
    h.run(2_000);
    let all = h.drain();
    let running = done_of(&all, 100);
    let queued = done_of(&all, 107);
    assert_eq!(running.status, CqeStatus::Cancelled);
    assert!(
        running.n_tokens > 0 && running.n_tokens < 256,
        "{running:?}"
    );
    assert_eq!((queued.status, queued.n_tokens), (CqeStatus::Cancelled, 0));
    // The output so far is the model's, and its CRC covers it.
    let want = kjv().generate(&PROMPT, running.n_tokens, 0.8, 42, NO_STOP_TOKEN);
    assert_eq!(h.output_of(0, running.n_tokens), want);
    assert_eq!(running.crc, tokens_crc(&want));
    let rest: Vec<u32> = (101..107).collect();
    let all = h.until_done(&rest, 10_000_000);
    for t in rest {
        assert_eq!(done_of(&all, t).n_tokens, 256);
    }
}

#[test]
fn the_interrupt_is_the_contracts_equation() {
    let mut h = Rig::new();
    let irq = |h: &Rig| h.w.lock().fabric.irq();
    h.run(10);
    assert!(!irq(&h), "nothing posted, every event acknowledged");
    h.submit(&[Req::new(1, 0, &PROMPT, 2)]);
    h.run(3_000);
    assert!(irq(&h), "CQ_TAIL != CQ_HEAD");
    let tail = h.reg(REG_CQ_TAIL.offset());
    h.set(REG_CQ_HEAD.offset(), tail);
    h.run(5);
    assert!(!irq(&h), "all consumed");
    // An event alone raises it: a fault.
    let mut raw = h.sqe(&Req::new(2, 0, &PROMPT, 2)).encode();
    raw[9] ^= 1;
    h.put(&raw);
    h.ring();
    h.run(3_000);
    let tail = h.reg(REG_CQ_TAIL.offset());
    h.set(REG_CQ_HEAD.offset(), tail);
    h.run(5);
    assert!(irq(&h), "EVENT_SEQ != EVENT_ACK");
    let seq = h.reg(REG_EVENT_SEQ.offset());
    h.set(REG_EVENT_ACK.offset(), seq);
    h.run(5);
    assert!(!irq(&h), "acknowledged");
    // IRQ_ENABLE clear: the level stays low whatever is pending.
    h.set(REG_CONTROL.offset(), 1);
    h.set(REG_EVENT_ACK.offset(), seq.wrapping_sub(1));
    h.run(5);
    assert!(!irq(&h), "IRQ_ENABLE off");
}
