//! Section 7 in RTL: a partial load of the engine through the decoupler
//! and a commit of a model while the other slot serves; a load without
//! the decoupler, or with a step outstanding, caught; the shutdown status
//! of a quiesced slot.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;

const PROMPT: [u32; 3] = [300, 301, 302];

fn shutdown(h: &Rig, slot: usize) -> u32 {
    h.reg(SlotRegs::of(slot).shutdown.offset())
}

#[test]
fn a_load_through_the_decoupler_and_a_commit_swap_the_model_while_the_other_slot_serves() {
    let mut h = Rig::new();
    let loads = h.reg(SlotRegs::of(0).loads.offset());
    let event = h.reg(REG_EVENT_SEQ.offset());
    let busy: Vec<Req> = (8..12)
        .map(|c| Req::new(50 + c, c as u16, &PROMPT, 64))
        .collect();
    h.submit(&busy);
    h.run(1_000);
    h.load(0, true);
    assert_eq!(h.slot_state(0), SlotState::NoModel);
    assert!(
        h.reg(REG_EVENT_SEQ.offset()).wrapping_sub(event) >= 2,
        "loading, then no model"
    );
    assert_eq!(h.commit(0, &fortunes().table), SlotState::Ready);
    assert_eq!(h.reg(SlotRegs::of(0).loads.offset()), loads + 1);
    assert_eq!(
        SlotRegs::of(0).read_identity(&h.w),
        fortunes().table.identity()
    );
    let tags: Vec<u32> = busy.iter().map(|r| r.tag).collect();
    let all = h.until_done(&tags, 2_000_000);
    for r in &busy {
        let done = done_of(&all, r.tag);
        let want = fortunes().generate(&PROMPT, 64, 0.8, 42, NO_STOP_TOKEN);
        assert_eq!(
            (done.status, h.output_of(r.ctx, done.n_tokens)),
            (CqeStatus::Ok, want)
        );
    }
    // Slot 0 now speaks fortunes.
    h.submit(&[Req::new(70, 0, &PROMPT, 8)]);
    let all = h.until_done(&[70], 200_000);
    let done = done_of(&all, 70);
    let want = fortunes().generate(&PROMPT, 8, 0.8, 42, NO_STOP_TOKEN);
    assert_eq!(h.output_of(0, done.n_tokens), want);
}

#[test]
fn a_load_without_the_decoupler_is_caught_by_the_shell() {
    let mut h = Rig::new();
    h.submit(&[Req::new(1, 0, &PROMPT, 256), Req::new(2, 8, &PROMPT, 32)]);
    h.run(2_000);
    h.load(0, false);
    assert_eq!(
        h.slot_state(0),
        SlotState::Error(slot_error::TORN),
        "torn: answers nobody asked for"
    );
    let all = h.until_done(&[1, 2], 2_000_000);
    assert_eq!(done_of(&all, 1).status, CqeStatus::Fault);
    assert_eq!(
        done_of(&all, 2).status,
        CqeStatus::Ok,
        "the other slot kept serving"
    );
    // Nothing more is started there until a proper load.
    h.submit(&[Req::new(3, 1, &PROMPT, 4)]);
    let all = h.until_done(&[3], 100_000);
    assert_eq!(done_of(&all, 3).status, CqeStatus::SlotNotReady);
    h.load(0, true);
    assert_eq!(h.slot_state(0), SlotState::NoModel);
    assert_eq!(h.commit(0, &kjv().table), SlotState::Ready);
}

#[test]
fn a_quiesced_slot_reads_shut_down_only_once_its_step_is_answered() {
    let mut h = Rig::new();
    h.submit(&[Req::new(1, 0, &PROMPT, 256)]);
    h.run(2_000);
    assert_eq!(shutdown(&h, 0), 0, "not requested");
    // The slot's next step waits at the co-simulation's gate: outstanding
    // until the slot takes it and answers.
    h.gate(0, Some(0));
    h.run(2_000);
    h.set(SlotRegs::of(0).ctrl.offset(), 1);
    for _ in 0..10 {
        assert_eq!(shutdown(&h, 0), 0x05, "requested, a step still outstanding");
    }
    h.gate(0, Some(1));
    let mut seen = Vec::new();
    for _ in 0..100 {
        let v = shutdown(&h, 0);
        seen.push(v);
        if v == SHUTDOWN_DONE {
            break;
        }
    }
    assert_eq!(seen.last(), Some(&SHUTDOWN_DONE), "{seen:?}");
    h.gate(0, None);
    // Quiesced: the request is held, not lost, and no step starts. The
    // answered step's token is the shell's to write (its own DMA, not the
    // slot's): it may land after SLOT_SHUTDOWN reads done, and is the last.
    let tokens = h.reg(REG_CNT_TOKENS.offset());
    h.run(20_000);
    let after = h.reg(REG_CNT_TOKENS.offset());
    assert!(after - tokens <= 1, "{tokens} then {after}");
    h.run(20_000);
    assert_eq!(h.reg(REG_CNT_TOKENS.offset()), after);
    assert_eq!(h.reg(SlotRegs::of(0).active.offset()), 1);
    h.set(SlotRegs::of(0).ctrl.offset(), 0);
    let all = h.until_done(&[1], 2_000_000);
    assert_eq!(done_of(&all, 1).n_tokens, 256);
}

#[test]
fn a_load_with_a_step_outstanding_is_caught() {
    let mut h = Rig::new();
    h.submit(&[Req::new(1, 0, &PROMPT, 256)]);
    h.run(2_000);
    // A step outstanding (held at the co-simulation's gate), and the
    // kernel's decoupler driver does not wait: decouple at once.
    h.gate(0, Some(0));
    h.run(2_000);
    h.set(SlotRegs::of(0).ctrl.offset(), 1);
    assert_eq!(shutdown(&h, 0), 0x05, "a step outstanding");
    h.load(0, true);
    assert_eq!(h.slot_state(0), SlotState::Error(slot_error::TORN));
    let all = h.until_done(&[1], 100_000);
    assert_eq!(done_of(&all, 1).status, CqeStatus::Fault);
    assert_eq!(
        h.reg(REG_FAULT_CODE.offset()),
        FaultCode::DecoderFault as u32
    );
}

#[test]
fn a_quiesced_load_ends_the_slots_requests_as_faults_and_comes_up_with_no_model() {
    let mut h = Rig::new();
    h.submit(&[Req::new(1, 0, &PROMPT, 256), Req::new(2, 1, &PROMPT, 256)]);
    h.run(2_000);
    h.set(SlotRegs::of(0).ctrl.offset(), 1);
    while shutdown(&h, 0) != SHUTDOWN_DONE {}
    h.load(0, true);
    h.set(SlotRegs::of(0).ctrl.offset(), 0);
    assert_eq!(h.slot_state(0), SlotState::NoModel);
    let all = h.until_done(&[1, 2], 100_000);
    assert_eq!(done_of(&all, 1).status, CqeStatus::Fault);
    assert_eq!(done_of(&all, 2).status, CqeStatus::Fault);
}

#[test]
fn a_greybox_reads_empty_and_takes_no_commit() {
    let h = Rig::new();
    h.empty(1);
    assert_eq!(h.slot_state(1), SlotState::Empty);
    assert_eq!(h.reg(SlotRegs::of(1).engine.offset()), 0);
    let before = h.reg(SlotRegs::of(1).loads.offset());
    assert_eq!(h.commit(1, &fortunes().table), SlotState::Empty);
    assert_eq!(h.reg(SlotRegs::of(1).loads.offset()), before);
    assert_eq!(
        h.reg(REG_FAULT_CODE.offset()),
        FaultCode::CommitRefused as u32
    );
}
