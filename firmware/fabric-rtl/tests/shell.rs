//! The shell in RTL against the contract: registers, requests, tokens.

#![cfg(feature = "verilated")]

mod common;

use common::*;
use fabric_hw::contract::*;

#[test]
fn the_shell_reports_the_contract() {
    let h = Rig::bare();
    assert_eq!(h.reg(REG_MAGIC.offset()), MAGIC);
    assert_eq!(h.reg(REG_VERSION.offset()) >> 16, u32::from(VERSION_MAJOR));
    let caps = h.reg(REG_CAPS.offset());
    assert_eq!(caps & 0xF, 2, "SLOTS");
    assert_eq!((caps >> 4) & 0xFF, LANES, "LANES");
    assert_eq!((caps >> 12) & 0xFF, u32::from(PER_SLOT), "CONTEXTS");
    assert_eq!(h.reg(REG_INTERFACE_ID.offset()), SHELL_INTERFACE_ID);
    // Nothing loaded: both slots empty, no engine.
    assert_eq!(h.slot_state(0), SlotState::Empty);
    assert_eq!(h.slot_state(1), SlotState::Empty);
    assert_eq!(h.reg(SlotRegs::of(0).engine.offset()), 0);
    // An engine loaded: no model until a table is committed.
    h.load(1, true);
    assert_eq!(h.slot_state(1), SlotState::NoModel);
    assert_eq!(
        h.reg(SlotRegs::of(1).engine.offset()),
        EngineId::TRIGRAM_V2.encode()
    );
    assert_eq!(SlotRegs::of(1).read_identity(&h.w), [0u8; 32]);
}

#[test]
fn a_request_gives_the_models_tokens_and_crc() {
    let mut h = Rig::new();
    assert_eq!(h.slot_state(0), SlotState::Ready);
    assert_eq!(
        SlotRegs::of(0).read_identity(&h.w),
        kjv().table.identity(),
        "SLOT_IDENTITY is the identity the table declares"
    );
    assert_eq!(
        h.reg(SlotRegs::of(0).table_crc.offset()),
        kjv().table.crc(),
        "SLOT_TABLE_CRC is the CRC of the table the engine read"
    );
    let prompt = [300, 301, 302, 303];
    let mut req = Req::new(7, 1, &prompt, 24);
    req.temperature = 0.8;
    h.submit(&[req.clone()]);
    let all = h.until_done(&[7], 200_000);
    let done = done_of(&all, 7);
    let want = kjv().generate(&prompt, 24, 0.8, 42, NO_STOP_TOKEN);
    assert_eq!(done.status, CqeStatus::Ok);
    assert_eq!(done.n_tokens, 24);
    let got = h.output_of(1, done.n_tokens);
    assert_eq!(got, want);
    assert_eq!(done.crc, tokens_crc(&want));
    assert_eq!(done.finish, Finish::Length);
}
