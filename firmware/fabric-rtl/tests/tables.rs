//! Section 7, "Committing a table", in RTL: what a commit reads and
//! reports, every refusal and every bad table answered by the slot's state
//! and FAULT_CODE, reads that fail (past the table's end, a bus error) at
//! commit and at a step, and a decoupling under a commit's reads.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;
use fabric_model::table::Table;

const PROMPT: [u32; 3] = [300, 301, 302];

/// `table` with word `at` set to `value`.
fn with_word(table: &Table, at: usize, value: u32) -> Vec<u8> {
    let mut words = table.words.clone();
    words[at] = value;
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn region_words() -> u32 {
    (REGION / 4) as u32
}

/// One request on slot 0's first context: its DONE.
fn one(h: &mut Rig, tag: u32, ctx: u16) -> Cqe {
    h.submit(&[Req::new(tag, ctx, &PROMPT, 6)]);
    let all = h.until_done(&[tag], 2_000_000);
    done_of(&all, tag)
}

#[test]
fn a_commit_reads_the_table_in_and_reports_its_crc_and_declared_identity() {
    let mut h = Rig::new();
    // A word of the candidates changed: the CRC is what the engine read;
    // the identity, what the table declares (not computed).
    let mut changed = fortunes().table.clone();
    let last = changed.words.len() - 1;
    changed.words[last] ^= 1 << 16;
    let loads = h.reg(SlotRegs::of(0).loads.offset());
    assert_eq!(h.commit(0, &changed), SlotState::Ready);
    assert_eq!(h.reg(SlotRegs::of(0).table_crc.offset()), changed.crc());
    assert_ne!(changed.crc(), fortunes().table.crc());
    assert_eq!(
        SlotRegs::of(0).read_identity(&h.w),
        fortunes().table.declared_identity()
    );
    assert_eq!(h.reg(SlotRegs::of(0).loads.offset()), loads + 1);
    assert_eq!(h.reg(SlotRegs::of(0).committed.offset()), 2);
    let done = one(&mut h, 1, 0);
    assert_eq!(done.status, CqeStatus::Ok);
}

#[test]
fn a_commit_to_a_slot_not_quiesced_is_refused_and_it_keeps_serving() {
    let mut h = Rig::new();
    let regs = SlotRegs::of(0);
    let (loads, crc) = (h.reg(regs.loads.offset()), h.reg(regs.table_crc.offset()));
    // Nothing written: the region is the serving engine's (the host's
    // side refuses before writing, fabric_hw::tables).
    let state = h.commit_raw(0, &[], Rig::region(0), region_words(), false);
    assert_eq!(state, SlotState::Ready, "it keeps what it held");
    assert_eq!(
        (h.reg(regs.loads.offset()), h.reg(regs.table_crc.offset())),
        (loads, crc)
    );
    assert_eq!(
        h.reg(REG_FAULT_CODE.offset()),
        FaultCode::CommitRefused as u32
    );
    assert_eq!(h.reg(regs.committed.offset()), 2, "acted on: refused");
    // Still kjv: the Rust engine with kjv's table gives the same tokens.
    let done = one(&mut h, 1, 0);
    let want = kjv().generate(&PROMPT, 6, 0.8, 42, NO_STOP_TOKEN);
    assert_eq!((done.status, h.output_of(0, 6)), (CqeStatus::Ok, want));
}

#[test]
fn a_table_not_for_the_engine_leaves_the_slot_in_error_until_a_good_one() {
    let mut h = Rig::new();
    let t = &fortunes().table;
    let sizes = t.words[7];
    for (what, bytes) in [
        ("a bad magic", with_word(t, 0, 0x4654_4231)),
        (
            "another engine's",
            with_word(
                t,
                1,
                EngineId {
                    kind: 1,
                    version: 3,
                }
                .encode(),
            ),
        ),
        (
            "longer than its region",
            with_word(t, 2, region_words() + 1),
        ),
        ("shorter than its header", with_word(t, 2, 15)),
        (
            "an index of 2^25 home buckets",
            with_word(t, 7, (sizes & !0xFF) | 25),
        ),
        (
            "more unigrams than a buffer holds",
            with_word(t, 7, (sizes & 0xFFFF) | (513 << 16)),
        ),
    ] {
        let state = h.commit_raw(0, &bytes, Rig::region(0), region_words(), true);
        assert_eq!(state, SlotState::Error(slot_error::BAD_TABLE), "{what}");
        assert_eq!(one(&mut h, 1, 0).status, CqeStatus::SlotNotReady, "{what}");
    }
    // The other slot served throughout; a good table puts slot 0 back.
    assert_eq!(one(&mut h, 2, PER_SLOT).status, CqeStatus::Ok);
    assert_eq!(h.commit(0, t), SlotState::Ready);
    let done = one(&mut h, 3, 0);
    let want = fortunes().generate(&PROMPT, 6, 0.8, 42, NO_STOP_TOKEN);
    assert_eq!((done.status, h.output_of(0, 6)), (CqeStatus::Ok, want));
}

#[test]
fn a_commit_whose_reads_fail_is_a_table_read_error() {
    let h = Rig::new();
    let bytes = kjv().table.to_bytes();
    // A region too small for a header, and a table outside DDR (the
    // interconnect's decode error).
    for (what, at, words) in [
        ("a region of 15 words", Rig::region(0), 15),
        ("a base outside memory", 0x10_0000_0000, region_words()),
    ] {
        let state = h.commit_raw(0, &bytes, at, words, true);
        assert_eq!(state, SlotState::Error(slot_error::TABLE_READ), "{what}");
        assert_eq!(
            h.reg(REG_FAULT_CODE.offset()),
            FaultCode::TableRead as u32,
            "{what}"
        );
    }
    assert_eq!(h.commit(0, &kjv().table), SlotState::Ready);
}

#[test]
fn a_step_that_reads_past_the_table_or_hits_a_bus_error_faults_its_request() {
    let mut h = Rig::new();
    let t = &kjv().table;
    // The trigram and bigram indexes said to start past the table's end:
    // the commit takes it, the first lookup cannot.
    let words = t.words.len() as u32;
    let mut past = t.clone();
    past.words[5] = words + 64;
    past.words[6] = words + 64;
    assert_eq!(h.commit(0, &past), SlotState::Ready);
    let done = one(&mut h, 1, 0);
    assert_eq!((done.status, done.n_tokens), (CqeStatus::Fault, 0));
    assert_eq!(h.reg(REG_FAULT_CODE.offset()), FaultCode::TableRead as u32);
    assert_eq!(h.slot_state(0), SlotState::Error(slot_error::TABLE_READ));
    assert_eq!(
        one(&mut h, 2, PER_SLOT).status,
        CqeStatus::Ok,
        "slot 1 serves on"
    );
    // A good table, then DDR gone from under it: the step's reads answer
    // with a decode error.
    assert_eq!(h.commit(0, t), SlotState::Ready);
    h.w.lock()
        .memory
        .bytes
        .truncate((TABLES - BASE) as usize + 4096);
    let done = one(&mut h, 3, 0);
    assert_eq!(done.status, CqeStatus::Fault);
    assert_eq!(h.slot_state(0), SlotState::Error(slot_error::TABLE_READ));
}

#[test]
fn a_decoupling_under_a_commits_reads_tears_the_slot_and_the_port_is_drained() {
    let h = Rig::new();
    let regs = SlotRegs::of(0);
    regs.ctrl.write(&h.w, SLOT_CTRL::QUIESCE::SET);
    h.run(2_000);
    assert_eq!(regs.shutdown.get(&h.w), SHUTDOWN_DONE);
    h.mem_write(Rig::region(0), &fortunes().table.to_bytes());
    regs.table_base_lo.set(&h.w, Rig::region(0) as u32);
    regs.table_base_hi.set(&h.w, (Rig::region(0) >> 32) as u32);
    regs.table_words.set(&h.w, region_words());
    regs.table_commit.set(&h.w, regs.committed.get(&h.w) + 1);
    h.run(5_000);
    assert_eq!(h.slot_state(0), SlotState::Loading, "reading the table in");
    assert_eq!(
        regs.shutdown.get(&h.w),
        SHUTDOWN_DRAINING,
        "the engine's reads are outstanding"
    );
    // The kernel decouples anyway: the reads are cut off, the slot torn,
    // and the commit acted on (not taken up again after the load).
    let commit = regs.table_commit.get(&h.w);
    h.load(0, true);
    assert_eq!(h.slot_state(0), SlotState::Error(slot_error::TORN));
    assert_eq!(regs.committed.get(&h.w), commit);
    h.run(100_000);
    assert_eq!(h.slot_state(0), SlotState::Error(slot_error::TORN));
    // Loaded again properly and committed, it serves.
    regs.ctrl.write(&h.w, SLOT_CTRL::QUIESCE::CLEAR);
    h.load(0, true);
    assert_eq!(h.slot_state(0), SlotState::NoModel);
    assert_eq!(h.commit(0, &fortunes().table), SlotState::Ready);
}
