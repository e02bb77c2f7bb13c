//! `--rtl`: the shell and the slots are the RTL (`rtl/`), Verilated
//! (`fabric-rtl`), behind the same board files as the Rust model: the
//! register window the daemon maps, the interrupt, the DDR buffer with its
//! cache model, the FPGA manager and configfs. `fabricd` runs unchanged on
//! it.
//!
//! The daemon's register window is a file it maps, so its accesses are
//! plain loads and stores that nobody sees one by one. Every register has
//! one writer (contract section 2), which makes a mirror exact: at each tick
//! the host-written words that changed are written to the RTL as AXI4-Lite
//! writes (CONTROL last, so a ring programmed in the same tick is in place
//! when ENABLE rises), the clock runs, and every device-written word is read
//! back over AXI4-Lite into the file. What the daemon can observe is what
//! the RTL's registers held at the end of a tick.
//!
//! Time: the RTL runs as fast as Verilator goes (about a million cycles a
//! second here), but each slot's engine takes a step only when the
//! co-simulation's gate lets it (`rtl/sim/fabric_cosim.v`): one step per
//! `--decode-us` (times the time scale) of wall-clock time for each context
//! the slot decodes, so that requests take as long as the Rust model's and
//! the tests' timing (a cancel landing mid-request, a drain that gives up)
//! holds on both; with time scale 0 the gate stays open. A step held at
//! the gate is not the slot's time: the shell's watchdog does not count it.
//! The registers the RTL reports are their own, in fabric time:
//! `fabric_us` counts its 200 MHz clock.

use fabric_hw::contract::*;
use fabric_hw::dma::DmaBuf;
use fabric_hw::mmio::{Mmio, RegisterWindow};
use fabric_hw::shell::Counters;
use fabric_rtl::cosim::{self, Port};
use fabric_rtl::{Cosim, Memory};

use crate::config::SimConfig;

/// Cycles a tick runs while the fabric has work. Short, because the gate
/// opens only between ticks: a request's first step and its completion
/// each wait up to a tick, and at Verilator's speed here a tick of 2,000
/// cycles takes longer than a decode time. Each tick also mirrors the
/// registers (about 250 cycles of AXI4-Lite).
const TICK_CYCLES: u64 = 500;
/// Cycles a load's steps run, for the slot to settle.
const SETTLE_CYCLES: u64 = 200;
/// What the Verilated shell is built with (`rtl/sim/fabric_cosim.v`).
pub const LANES: u8 = 4;
pub const CONTEXTS: usize = 8;

/// The device's view of DDR as the RTL's masters reach it (the shell's, and
/// the engines' reading their tables): the simulator's `dram`, and for a
/// coherent buffer the CPU's view too.
pub(crate) struct DeviceMemory<'a> {
    pub dram: &'a mut [u8],
    pub cpu: &'a DmaBuf,
    pub coherent: bool,
    pub phys: u64,
    /// The completion ring's physical range: what is not in it (nor read)
    /// is output.
    pub completions: std::ops::Range<u64>,
    /// `Faults::corrupt`: output words still to flip on their way to DDR,
    /// after the shell took their CRC (between the decoder and the host).
    pub corrupt: &'a mut u32,
    /// `SimStats::stale_descriptors`, counted as the shell posts them.
    pub stale: &'a mut u32,
}

impl DeviceMemory<'_> {
    fn offset(&self, addr: u64) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(self.phys)?).ok()?;
        (off % 4 == 0 && off.checked_add(4)? <= self.dram.len()).then_some(off)
    }
}

impl Memory for DeviceMemory<'_> {
    fn read(&mut self, addr: u64) -> Option<u32> {
        let off = self.offset(addr)?;
        if self.coherent {
            // No cache between the two sides: the CPU's last store is there.
            self.cpu
                .read(off as u64, &mut self.dram[off..off + 4])
                .ok()?;
        }
        let b = &self.dram[off..off + 4];
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn write(&mut self, addr: u64, mut word: u32) -> bool {
        let Some(off) = self.offset(addr) else {
            return false;
        };
        if self.completions.contains(&addr) {
            // Word 2 of an entry: ctx, kind, and the status in its top byte.
            let status_word = (addr - self.completions.start) % CQE_LEN as u64 == 8;
            if status_word && word >> 24 == CqeStatus::StaleDescriptor as u32 {
                *self.stale += 1;
            }
        } else if *self.corrupt > 0 {
            *self.corrupt -= 1;
            word ^= 1;
        }
        self.dram[off..off + 4].copy_from_slice(&word.to_le_bytes());
        !self.coherent || self.cpu.write(off as u64, &self.dram[off..off + 4]).is_ok()
    }
}

/// The Verilated fabric and the mirror of its registers.
pub(crate) struct RtlDevice {
    cosim: Cosim,
    /// Steps each decoding context of a slot may take a wall-clock second
    /// (one over the simulator's `--decode-us` times its time scale), so
    /// that requests take as long as the Rust model's; `None`: as fast as
    /// Verilator goes.
    steps_per_sec: Option<f64>,
    /// Lanes a slot decodes at once.
    lanes: u8,
    /// Steps earned by each slot and not yet granted.
    earned: Vec<f64>,
    last: std::time::Instant,
    slots: usize,
    /// Host-written offsets, and what the RTL was last given for each.
    host: Vec<(usize, u32)>,
    /// Device-written offsets, read back every tick.
    device: Vec<usize>,
    /// Those of them that say what the others mean (each slot's
    /// SLOT_STATE and SLOT_COMMITTED): read from the RTL before the
    /// others and written to the file after them.
    guards: Vec<usize>,
}

impl std::fmt::Debug for RtlDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RtlDevice({} cycles)", self.cosim.cycles())
    }
}

/// Why `--rtl` cannot run this configuration.
pub fn check(config: &SimConfig) -> Result<(), String> {
    let want = (cosim::SLOTS, LANES, CONTEXTS);
    let have = (config.slots, config.lanes, config.contexts_per_slot());
    if have != want {
        return Err(format!(
            "--rtl: the Verilated shell has {} slots, {} lanes and {} contexts a slot; \
             this board asks for {} slots, {} lanes and {} contexts",
            want.0, want.1, want.2, have.0, have.1, have.2
        ));
    }
    Ok(())
}

impl RtlDevice {
    pub fn new(config: &SimConfig) -> RtlDevice {
        let slots = usize::from(config.slots);
        let contexts = slots * CONTEXTS;
        let mut host: Vec<(usize, u32)> = [
            REG_SQ_BASE_LO.offset(),
            REG_SQ_BASE_HI.offset(),
            REG_SQ_ENTRIES.offset(),
            REG_CQ_BASE_LO.offset(),
            REG_CQ_BASE_HI.offset(),
            REG_CQ_ENTRIES.offset(),
            REG_SQ_TAIL.offset(),
            REG_CQ_HEAD.offset(),
            REG_EVENT_ACK.offset(),
        ]
        .into_iter()
        .chain((0..slots).map(|s| SlotRegs::of(s).ctrl.offset()))
        // A slot's table's place and size before its commit.
        .chain((0..slots).flat_map(|s| {
            let r = SlotRegs::of(s);
            [
                r.table_base_lo.offset(),
                r.table_base_hi.offset(),
                r.table_words.offset(),
                r.table_commit.offset(),
            ]
        }))
        .chain((0..contexts).map(|c| reg_ctx_cancel(c).offset()))
        .map(|o| (o, 0))
        .collect();
        // CONTROL last: ENABLE finds the rings programmed.
        host.push((REG_CONTROL.offset(), 0));
        let mut device = vec![
            REG_MAGIC.offset(),
            REG_VERSION.offset(),
            REG_CAPS.offset(),
            REG_MAX_PROMPT.offset(),
            REG_MAX_OUTPUT.offset(),
            REG_INTERFACE_ID.offset(),
            REG_PREFILL_NS.offset(),
            REG_DECODE_NS.offset(),
            REG_STATUS.offset(),
            REG_SQ_HEAD.offset(),
            REG_CQ_TAIL.offset(),
            REG_EVENT_SEQ.offset(),
            REG_FAULT_CODE.offset(),
            REG_CNT_SUBMITTED.offset(),
            REG_CNT_COMPLETED.offset(),
            REG_CNT_CANCELLED.offset(),
            REG_CNT_ACTIVE.offset(),
            REG_CNT_TOKENS.offset(),
            REG_CNT_ERRORS.offset(),
        ];
        // The host polls SLOT_COMMITTED and then reads the others, which
        // the RTL changed in the same cycle, while this mirror reads them
        // one by one as the RTL runs: SLOT_STATE and SLOT_COMMITTED are
        // read first (a commit that ends meanwhile is seen whole in the
        // next tick, not half in this one) and written last.
        let mut guards = Vec::new();
        for s in 0..slots {
            let r = SlotRegs::of(s);
            device.extend([
                r.engine.offset(),
                r.shutdown.offset(),
                r.active.offset(),
                r.loads.offset(),
                r.table_crc.offset(),
            ]);
            device.extend((0..8).map(|i| r.identity_word(i).offset()));
            guards.extend([r.state.offset(), r.committed.offset()]);
        }
        // A fixed time paces the steps; with the engines' own times the
        // RTL takes its own cycles, as fast as Verilator runs them (far
        // slower than a board's clock, so never faster than its cycles).
        let decode = config.fixed_times().map_or(0.0, |(_, d)| d.as_secs_f64());
        let steps_per_sec = (decode > 0.0).then(|| 1.0 / decode);
        let mut cosim = Cosim::new(16);
        if steps_per_sec.is_some() {
            for s in 0..slots {
                cosim.grant(s as u8, Some(0));
            }
        }
        RtlDevice {
            cosim,
            steps_per_sec,
            lanes: config.lanes,
            earned: vec![0.0; slots],
            last: std::time::Instant::now(),
            slots,
            host,
            device,
            guards,
        }
    }

    /// Grants each slot the steps the time since the last tick earned it:
    /// a step per decode time for each context it decodes (its active
    /// contexts, at most its lanes), as the Rust model makes a token per
    /// decode time for each running request. A lone request therefore
    /// takes the model's time, not a quarter of it.
    ///
    /// Grants land only at ticks, `TICK_CYCLES` of RTL apart: what a slot
    /// earned and was not granted carries to the next tick, or every token
    /// would also wait out the rest of the tick its step came due in. What
    /// carries is bounded (a step a decoding context) and an idle slot
    /// banks nothing: its next request would otherwise start with a run of
    /// instant tokens, and a cancel would land late.
    fn pace(&mut self, regs: &Mmio) {
        let now = std::time::Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        let Some(per_context) = self.steps_per_sec else {
            return;
        };
        for s in 0..self.slots {
            let active = SlotRegs::of(s).active.get(regs);
            let decoding = u64::from(active.min(u32::from(self.lanes)));
            if decoding == 0 {
                self.earned[s] = 0.0;
                continue;
            }
            // A tick can take longer than a decode time (Verilator's
            // speed): then a context earns more than one step a tick, and
            // takes them one after another within it.
            let per_tick = (elapsed * per_context).ceil().max(1.0) as u64;
            let most = decoding * per_tick;
            let earned = self.earned[s] + elapsed * per_context * decoding as f64;
            let held = self.cosim.credits(s as u8).unwrap_or(most);
            let n = (earned.floor() as u64).min(most.saturating_sub(held));
            self.earned[s] = (earned - n as f64).min(most as f64);
            if n > 0 {
                self.cosim.grant(s as u8, Some(n));
            }
        }
    }

    /// Power-on (and the end of a full reconfiguration): every register to
    /// its reset value, in the RTL and in the file.
    pub fn power_on(&mut self, mem: &mut DeviceMemory<'_>, regs: &Mmio) {
        self.cosim.reset(mem);
        for (_, last) in self.host.iter_mut() {
            *last = 0;
        }
        self.mirror_out(mem, regs);
    }

    /// Forwards the host's writes, runs the clock, mirrors the device's
    /// registers; returns whether the fabric has work in hand.
    pub fn tick(&mut self, mem: &mut DeviceMemory<'_>, regs: &Mmio) -> bool {
        self.mirror_in(mem, regs);
        self.pace(regs);
        self.cosim.run(mem, TICK_CYCLES);
        self.mirror_out(mem, regs)
    }

    fn mirror_in(&mut self, mem: &mut DeviceMemory<'_>, regs: &Mmio) {
        for (offset, last) in self.host.iter_mut() {
            let now = regs.read32(*offset);
            if now != *last {
                self.cosim.write(mem, Port::Shell, *offset as u32, now);
                *last = now;
            }
        }
    }

    /// Copies every device-written register into the file; returns whether
    /// anything is in hand (a context active, a descriptor or completion
    /// pending, a slot settling or reading a table in).
    fn mirror_out(&mut self, mem: &mut DeviceMemory<'_>, regs: &Mmio) -> bool {
        // Each read is an AXI4-Lite transaction, and the clock runs
        // through it: read in the reverse of the order they are written
        // (SLOT_COMMITTED before SLOT_STATE), so that each register a
        // host reads after another is at least as new as it.
        let mut guards: Vec<(usize, u32)> = self
            .guards
            .iter()
            .rev()
            .map(|&o| (o, self.cosim.read(mem, Port::Shell, o as u32)))
            .collect();
        guards.reverse();
        for &offset in &self.device {
            let v = self.cosim.read(mem, Port::Shell, offset as u32);
            regs.write32(offset, v);
        }
        for (offset, v) in guards {
            regs.write32(offset, v);
        }
        let r: &dyn RegisterWindow = regs;
        let active = REG_CNT_ACTIVE.get(r) != 0;
        let fetching = REG_SQ_TAIL.get(r) != REG_SQ_HEAD.get(r);
        let loading = (0..self.slots)
            .any(|s| SlotState::decode(SlotRegs::of(s).state.read(r)) == SlotState::Loading);
        active || fetching || loading
    }

    /// A partial load begins: the kernel decouples the region and the
    /// configuration port starts writing it (its outputs are garbage now).
    pub fn begin_load(&mut self, mem: &mut DeviceMemory<'_>, regs: &Mmio, slot: usize) {
        self.mirror_in(mem, regs);
        self.cosim.write(mem, Port::Decoupler(slot as u8), 0, 1);
        // In range: `slot` is one of the fabric's.
        let _ = self.cosim.set_programming(slot as u8, true);
        self.cosim.run(mem, SETTLE_CYCLES);
        self.mirror_out(mem, regs);
    }

    /// The load ends: the region holds the engine (or nothing: a greybox),
    /// the kernel couples it again, and the shell reads what the slot now
    /// holds. The transformer's image configures its module
    /// (`rtl/slot/fabric_slot_lm.v`); any other, the trigram engine's.
    pub fn end_load(
        &mut self,
        mem: &mut DeviceMemory<'_>,
        regs: &Mmio,
        slot: usize,
        engine: Option<EngineId>,
        coupled: bool,
    ) {
        // In range: `slot` is one of the fabric's.
        let _ = self
            .cosim
            .set_transformer(slot as u8, engine == Some(EngineId::TRANSFORMER_V1));
        let _ = self.cosim.set_greybox(slot as u8, engine.is_none());
        let _ = self.cosim.set_programming(slot as u8, false);
        if coupled {
            self.cosim.write(mem, Port::Decoupler(slot as u8), 0, 0);
        }
        self.cosim.run(mem, SETTLE_CYCLES);
        self.mirror_out(mem, regs);
    }

    /// Whether the region of `slot` is decoupled.
    pub fn decoupled(&self, slot: usize) -> bool {
        self.cosim.decoupled(slot as u8)
    }

    /// The interrupt line.
    pub fn irq(&self) -> bool {
        self.cosim.irq()
    }
}

/// The shell's counters as the file holds them.
pub(crate) fn counters(regs: &Mmio) -> Counters {
    let r: &dyn RegisterWindow = regs;
    Counters {
        submitted: REG_CNT_SUBMITTED.get(r),
        completed: REG_CNT_COMPLETED.get(r),
        cancelled: REG_CNT_CANCELLED.get(r),
        active: REG_CNT_ACTIVE.get(r),
        tokens: REG_CNT_TOKENS.get(r),
        errors: REG_CNT_ERRORS.get(r),
    }
}
