//! A host for the Verilated fabric: the contract's order of operations
//! (sections 5 and 7) spelled out with the contract's own types, over an
//! [`RtlWindow`], and the catalog's models as the tables it commits.

#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use fabric_hw::contract::*;
use fabric_hw::mmio::RegisterWindow;
use fabric_model::table::Table;
use fabric_rtl::cosim::Port;
use fabric_rtl::{Cosim, RtlWindow, VecMemory};

pub const BASE: u64 = 0x4000_0000;
pub const SQ_ENTRIES: u32 = 64;
pub const CQ_ENTRIES: u32 = 128;
pub const SQ: u64 = BASE;
pub const CQ: u64 = BASE + 0x1000;
pub const PROMPTS: u64 = BASE + 0x2000;
pub const OUTPUTS: u64 = BASE + 0x12000;
pub const MAX_PROMPT: u64 = 1024;
pub const MAX_OUTPUT: u64 = 256;
pub const CONTEXTS: u16 = 16;
pub const PER_SLOT: u16 = 8;
pub const LANES: u32 = 4;
/// Where the slots' tables lie: a region of REGION bytes each, from TABLES.
pub const TABLES: u64 = BASE + 0x10_0000;
pub const REGION: u64 = 0x38_0000;
/// The host's memory: the rings, prompts and outputs, then the regions.
pub const MEMORY: usize = 0x10_0000 + 2 * REGION as usize;

/// A catalog model's table, loaded once per test binary.
pub struct Catalogued {
    pub table: Table,
}

fn catalogued(file: &str) -> Catalogued {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bitstreams")
        .join(file);
    let bytes = std::fs::read(&path).expect("a catalog table");
    Catalogued {
        table: Table::from_bytes(&bytes).expect("a table"),
    }
}

impl Catalogued {
    /// Its vocabulary's size (header word 3).
    pub fn vocab(&self) -> u32 {
        self.table.words[3]
    }

    /// The tokens the engine must give: the Rust engine, read for read.
    pub fn generate(
        &self,
        prompt: &[u32],
        n: u32,
        temperature: f32,
        seed: u64,
        stop: u32,
    ) -> Vec<u32> {
        self.table
            .generate(prompt, n, temperature, seed, stop)
            .expect("the catalog's table answers every step")
    }
}

pub fn kjv() -> &'static Catalogued {
    static KJV: OnceLock<Catalogued> = OnceLock::new();
    KJV.get_or_init(|| catalogued("kjv.ftb"))
}

pub fn fortunes() -> &'static Catalogued {
    static F: OnceLock<Catalogued> = OnceLock::new();
    F.get_or_init(|| catalogued("fortunes.ftb"))
}

/// One request as a test writes it.
#[derive(Debug, Clone)]
pub struct Req {
    pub tag: u32,
    pub ctx: u16,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: u64,
    pub stop_token: u32,
    pub stream: bool,
}

impl Req {
    pub fn new(tag: u32, ctx: u16, prompt: &[u32], max_tokens: u32) -> Req {
        Req {
            tag,
            ctx,
            prompt: prompt.to_vec(),
            max_tokens,
            temperature: 0.8,
            seed: 42,
            stop_token: NO_STOP_TOKEN,
            stream: false,
        }
    }

    pub fn slot(&self) -> u8 {
        (self.ctx / PER_SLOT) as u8
    }
}

pub struct Rig {
    pub w: RtlWindow<VecMemory>,
    pub sq_tail: u32,
    pub cq_head: u32,
}

impl Rig {
    /// A fabric with the engine in both slots, kjv committed to slot 0 and
    /// fortunes to slot 1, its rings initialised.
    pub fn new() -> Rig {
        Rig::with(Cosim::new(16))
    }

    /// The same on `fabric` (its ports set as a test wants them).
    pub fn with(fabric: Cosim) -> Rig {
        let mut host = Rig::bare_with(fabric);
        host.load(0, true);
        host.load(1, true);
        assert_eq!(host.commit(0, &kjv().table), SlotState::Ready);
        assert_eq!(host.commit(1, &fortunes().table), SlotState::Ready);
        host.init();
        host
    }

    /// A fabric out of reset: no engine anywhere, rings not programmed.
    pub fn bare() -> Rig {
        Rig::bare_with(Cosim::new(16))
    }

    fn bare_with(fabric: Cosim) -> Rig {
        Rig {
            w: RtlWindow::new(fabric, VecMemory::new(BASE, MEMORY)),
            sq_tail: 0,
            cq_head: 0,
        }
    }

    pub fn reg(&self, reg: usize) -> u32 {
        self.w.read32(reg)
    }

    pub fn set(&self, reg: usize, value: u32) {
        self.w.write32(reg, value)
    }

    pub fn run(&self, cycles: u64) {
        self.w.run(cycles)
    }

    /// Paces slot `slot` through the co-simulation's gate: `Some(n)` lets
    /// it take `n` more steps, `None` lifts the limit.
    pub fn gate(&self, slot: u8, steps: Option<u64>) {
        self.w.lock().fabric.grant(slot, steps);
    }

    pub fn decouple(&self, slot: u8, on: bool) {
        let mut b = self.w.lock();
        let fabric_rtl::window::Board { fabric, memory } = &mut *b;
        fabric.write(memory, Port::Decoupler(slot), 0, u32::from(on));
    }

    /// A partial load of the engine into `slot`, the kernel's way:
    /// decouple, program, couple; `decouple: false` programs a coupled slot.
    pub fn load(&self, slot: u8, decouple: bool) {
        self.w
            .lock()
            .fabric
            .set_transformer(slot, false)
            .expect("a slot");
        self.program(slot, decouple, false);
    }

    /// The same with an image of no module: the slot left a greybox.
    pub fn empty(&self, slot: u8) {
        self.program(slot, true, true);
    }

    /// A partial load of the transformer's module into `slot`
    /// (`rtl/slot/fabric_slot_lm.v`), decoupled.
    pub fn load_transformer(&self, slot: u8) {
        self.w
            .lock()
            .fabric
            .set_transformer(slot, true)
            .expect("a slot");
        self.program(slot, true, false);
    }

    fn program(&self, slot: u8, decouple: bool, greybox: bool) {
        if decouple {
            self.decouple(slot, true);
        }
        {
            let mut b = self.w.lock();
            let fabric_rtl::window::Board { fabric, memory } = &mut *b;
            fabric.set_programming(slot, true).expect("a slot");
            fabric.run(memory, 64);
            fabric.set_greybox(slot, greybox).expect("a slot");
            fabric.run(memory, 64);
            fabric.set_programming(slot, false).expect("a slot");
        }
        if decouple {
            self.decouple(slot, false);
        }
        // As the daemon reads a load back: until the slot says what it now
        // holds (its port may first have beats owed from before to drop).
        self.run(200);
        let mut waited = 200;
        while decouple && self.slot_state(usize::from(slot)) == SlotState::Loading {
            assert!(
                waited < 1_000_000,
                "slot {slot} still loading after {waited} cycles"
            );
            self.run(200);
            waited += 200;
        }
    }

    /// Where slot `slot`'s table region lies.
    pub fn region(slot: u8) -> u64 {
        TABLES + u64::from(slot) * REGION
    }

    /// Section 7, "Committing a table", whole: quiesce, wait for the slot to
    /// shut down, write `table` into the slot's region, commit it, wait
    /// for SLOT_COMMITTED, let the slot serve again. Returns the state it
    /// came to.
    pub fn commit(&self, slot: u8, table: &Table) -> SlotState {
        self.commit_raw(
            slot,
            &table.to_bytes(),
            Rig::region(slot),
            (REGION / 4) as u32,
            true,
        )
    }

    /// Commits `words` (a transformer's weights, say) to `slot`, its whole
    /// region given, as [`Rig::commit`] does a table.
    pub fn commit_words(&self, slot: u8, words: &[u32]) -> SlotState {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.commit_raw(slot, &bytes, Rig::region(slot), (REGION / 4) as u32, true)
    }

    /// The same with a table's bytes, where and with the region's words the
    /// test says, quiesced first or not; the state the slot came to.
    pub fn commit_raw(
        &self,
        slot: u8,
        bytes: &[u8],
        at: u64,
        words: u32,
        quiesce: bool,
    ) -> SlotState {
        let regs = SlotRegs::of(usize::from(slot));
        if quiesce {
            regs.ctrl.write(&self.w, SLOT_CTRL::QUIESCE::SET);
            let mut waited = 0;
            while regs.shutdown.get(&self.w) != SHUTDOWN_DONE {
                assert!(waited < 2_000_000, "slot {slot} never shut down");
                self.run(100);
                waited += 100;
            }
        }
        if at >= BASE && at + bytes.len() as u64 <= BASE + MEMORY as u64 {
            self.mem_write(at, bytes);
        }
        regs.table_base_lo.set(&self.w, at as u32);
        regs.table_base_hi.set(&self.w, (at >> 32) as u32);
        regs.table_words.set(&self.w, words);
        let commit = regs.committed.get(&self.w).wrapping_add(1);
        regs.table_commit.set(&self.w, commit);
        let mut waited = 0u64;
        while regs.committed.get(&self.w) != commit {
            assert!(
                waited < 20_000_000,
                "slot {slot} never acted on commit {commit}"
            );
            self.run(2000);
            waited += 2000;
        }
        if quiesce {
            regs.ctrl.write(&self.w, SLOT_CTRL::QUIESCE::CLEAR);
        }
        self.run(20);
        self.slot_state(usize::from(slot))
    }

    /// Section 5, "Initialise".
    pub fn init(&mut self) {
        self.set(REG_CONTROL.offset(), 0);
        self.set(REG_SQ_BASE_LO.offset(), SQ as u32);
        self.set(REG_SQ_BASE_HI.offset(), (SQ >> 32) as u32);
        self.set(REG_SQ_ENTRIES.offset(), SQ_ENTRIES);
        self.set(REG_CQ_BASE_LO.offset(), CQ as u32);
        self.set(REG_CQ_BASE_HI.offset(), (CQ >> 32) as u32);
        self.set(REG_CQ_ENTRIES.offset(), CQ_ENTRIES);
        self.set(REG_SQ_TAIL.offset(), 0);
        self.set(REG_CQ_HEAD.offset(), 0);
        let seq = self.reg(REG_EVENT_SEQ.offset());
        self.set(REG_EVENT_ACK.offset(), seq);
        for c in 0..usize::from(CONTEXTS) {
            self.set(reg_ctx_cancel(c).offset(), 0);
        }
        self.set(REG_CONTROL.offset(), 3);
        self.sq_tail = 0;
        self.cq_head = 0;
        assert_eq!(self.reg(REG_STATUS.offset()) & 1, 1, "RUNNING after ENABLE");
    }

    pub fn mem_write(&self, addr: u64, bytes: &[u8]) {
        let mut b = self.w.lock();
        let off = (addr - BASE) as usize;
        b.memory.bytes[off..off + bytes.len()].copy_from_slice(bytes);
    }

    pub fn mem_u32(&self, addr: u64) -> u32 {
        let b = self.w.lock();
        let off = (addr - BASE) as usize;
        u32::from_le_bytes(b.memory.bytes[off..off + 4].try_into().expect("4 bytes"))
    }

    pub fn output_of(&self, ctx: u16, n: u32) -> Vec<u32> {
        let at = OUTPUTS + u64::from(ctx) * MAX_OUTPUT * 4;
        (0..u64::from(n))
            .map(|i| self.mem_u32(at + 4 * i))
            .collect()
    }

    /// The descriptor of `req` as the host would write it.
    pub fn sqe(&self, req: &Req) -> Sqe {
        Sqe {
            seq: self.sq_tail,
            opcode: OP_GENERATE,
            slot: req.slot(),
            flags: u8::from(req.stream),
            tag: req.tag,
            ctx: req.ctx,
            prompt_addr: PROMPTS + u64::from(req.ctx) * MAX_PROMPT * 4,
            prompt_len: req.prompt.len() as u32,
            max_tokens: req.max_tokens,
            output_addr: OUTPUTS + u64::from(req.ctx) * MAX_OUTPUT * 4,
            output_cap: MAX_OUTPUT as u32,
            temperature: req.temperature,
            seed: req.seed,
            stop_token: req.stop_token,
        }
    }

    /// Writes a descriptor's bytes into the next ring entry (no doorbell).
    pub fn put(&mut self, bytes: &[u8; SQE_LEN]) {
        let at = SQ + u64::from(self.sq_tail % SQ_ENTRIES) * SQE_LEN as u64;
        self.mem_write(at, bytes);
        self.sq_tail = self.sq_tail.wrapping_add(1);
    }

    /// Section 5, "Submit", for each request, then one doorbell.
    pub fn submit(&mut self, reqs: &[Req]) {
        for req in reqs {
            let prompt: Vec<u8> = req.prompt.iter().flat_map(|t| t.to_le_bytes()).collect();
            self.mem_write(PROMPTS + u64::from(req.ctx) * MAX_PROMPT * 4, &prompt);
            let sqe = self.sqe(req).encode();
            self.put(&sqe);
        }
        self.ring();
    }

    pub fn ring(&self) {
        self.set(REG_SQ_TAIL.offset(), self.sq_tail);
    }

    /// Section 5, "Complete": every entry posted so far, checked.
    pub fn drain(&mut self) -> Vec<Cqe> {
        let tail = self.reg(REG_CQ_TAIL.offset());
        let mut out = Vec::new();
        while self.cq_head != tail {
            let at = CQ + u64::from(self.cq_head % CQ_ENTRIES) * CQE_LEN as u64;
            let mut raw = [0u8; CQE_LEN];
            {
                let b = self.w.lock();
                let off = (at - BASE) as usize;
                raw.copy_from_slice(&b.memory.bytes[off..off + CQE_LEN]);
            }
            out.push(Cqe::decode(&raw, self.cq_head).expect("a well-formed completion entry"));
            self.cq_head = self.cq_head.wrapping_add(1);
        }
        self.set(REG_CQ_HEAD.offset(), self.cq_head);
        let seq = self.reg(REG_EVENT_SEQ.offset());
        self.set(REG_EVENT_ACK.offset(), seq);
        out
    }

    /// Runs and drains until a DONE for every tag in `tags`, at most
    /// `cycles` of fabric time; returns everything drained.
    pub fn until_done(&mut self, tags: &[u32], cycles: u64) -> Vec<Cqe> {
        let mut all = Vec::new();
        let mut spent = 0;
        loop {
            all.extend(self.drain());
            let done = tags
                .iter()
                .all(|t| all.iter().any(|c| c.kind == CqeKind::Done && c.tag == *t));
            if done {
                return all;
            }
            assert!(
                spent < cycles,
                "no DONE for every tag of {tags:?} within {cycles} cycles: {all:?}"
            );
            self.run(500);
            spent += 500;
        }
    }

    pub fn slot_state(&self, slot: usize) -> SlotState {
        SlotState::decode(SlotRegs::of(slot).state.read(&self.w))
    }

    /// Whether the entry at the completion ring's head is whole in memory
    /// (its CRC checks: the entry's last word is written last).
    pub fn entry_ready(&self) -> bool {
        let at = CQ + u64::from(self.cq_head % CQ_ENTRIES) * CQE_LEN as u64;
        let off = (at - BASE) as usize;
        let b = self.w.lock();
        let mut raw = [0u8; CQE_LEN];
        raw.copy_from_slice(&b.memory.bytes[off..off + CQE_LEN]);
        Cqe::decode(&raw, self.cq_head).is_ok()
    }

    /// Submits `req` alone on an idle fabric and steps the clock a cycle
    /// at a time from the doorbell until its entry is whole in memory, so
    /// no idle cycle is counted: the fabric cycles it took, or `None` past
    /// `limit`. Then lets CQ_TAIL catch up (the shell moves it on the
    /// write's response, a few cycles later) and drains the ring.
    pub fn alone(&mut self, req: &Req, limit: u64) -> Option<(u64, Vec<Cqe>)> {
        let prompt: Vec<u8> = req.prompt.iter().flat_map(|t| t.to_le_bytes()).collect();
        self.mem_write(PROMPTS + u64::from(req.ctx) * MAX_PROMPT * 4, &prompt);
        let sqe = self.sqe(req).encode();
        self.put(&sqe);
        let start = self.w.lock().fabric.cycles();
        self.ring();
        let mut spent = 0u64;
        while !self.entry_ready() {
            if spent > limit {
                return None;
            }
            self.run(1);
            spent += 1;
        }
        let took = self.w.lock().fabric.cycles() - start;
        self.run(8);
        Some((took, self.drain()))
    }
}

/// The DONE entry of `tag`.
pub fn done_of(all: &[Cqe], tag: u32) -> Cqe {
    *all.iter()
        .find(|c| c.kind == CqeKind::Done && c.tag == tag)
        .unwrap_or_else(|| panic!("no DONE for tag {tag} in {all:?}"))
}
