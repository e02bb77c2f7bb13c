//! The static shell and its PR slots: registers, rings, decoding contexts,
//! the interrupt, and what the CPU cache would hide.
//!
//! [`Fabric`] is plain state; [`Fabric::tick`] advances it to an instant and
//! says when it next needs to run. The sequencer thread calls it at least
//! every poll interval; the interrupt and watcher threads change it through
//! the same mutex.
//!
//! Memory: the device reads and writes only `dram`, its own copy of the
//! buffer. The CPU's view is the `/dev/udmabuf-fabric` file the daemon maps.
//! The two meet only through the sync attributes, the way a non-coherent
//! cache meets DDR: a descriptor the daemon wrote but did not sync for the
//! device is not seen here, and tokens the device wrote are not seen by the
//! daemon until it syncs for the CPU. A forgotten sync fails.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use fabric_hw::contract::*;
use fabric_hw::dma::{decode_sync_command, DmaBuf, SyncDirection};
use fabric_hw::mmio::{Mmio, RegisterWindow};
use fabric_hw::sampling::{Sampling, SplitMix64};
use fabric_hw::shell::Counters;

use crate::config::SimConfig;
use crate::engine::LmContext;

mod irq_line;
mod requests;
mod slots;
mod tables;
mod timing;
pub use irq_line::IrqLine;
use requests::take;
use tables::{PendingCommit, SlotTable};

/// An engine programmed into a slot: what a partial image carries
/// (contract 2.0). Its model comes later, as a table committed from DDR.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// What the module reports in SLOT_ENGINE.
    pub engine: EngineId,
    /// The overlay that programmed it, if any.
    pub overlay: Option<String>,
}

#[derive(Debug, Default)]
struct Slot {
    state: SlotState,
    loaded: Option<Loaded>,
    /// The table its engine holds.
    table: Option<SlotTable>,
    /// The last TABLE_COMMIT it acted on (SLOT_COMMITTED).
    committed: u32,
    /// A commit being read in.
    commit: Option<PendingCommit>,
    /// Tables committed and read in since power-on (SLOT_LOADS).
    loads: u32,
    quiesce: bool,
    /// Contexts holding a request.
    active: u32,
    /// Lanes decoding.
    running: usize,
    /// Accepted contexts waiting for a lane, in order.
    waiting: VecDeque<usize>,
    /// Quiesced: until when the tokens already under way are still being
    /// made (the step outstanding on the slot's channels); none after.
    draining_until: Option<Instant>,
    /// Quiesced with nothing outstanding: SLOT_SHUTDOWN reads 0x0F.
    shut: bool,
    /// A load began while a step was outstanding: what comes up cannot be
    /// trusted (slot_error::TORN), as on silicon, where the decoupler cuts
    /// the transaction off.
    torn: bool,
    /// Registers need rewriting.
    dirty: bool,
}

#[derive(Debug)]
struct Ctx {
    tag: u32,
    slot: usize,
    /// When the descriptor was accepted.
    started: Instant,
    /// Whether it has a lane (else it waits in its slot's on-chip queue).
    running: bool,
    /// When its next token is due (meaningful while running).
    next_due: Instant,
    prompt_len: u32,
    /// The context: the last two tokens (a trigram's), or the sequence and
    /// cache (a transformer's), the random stream, the sampling.
    a: u32,
    b: u32,
    lm: Option<Box<LmContext>>,
    rng: SplitMix64,
    sampling: Sampling,
    produced: u32,
    max_tokens: u32,
    stop_token: u32,
    stream: bool,
    /// Where the output goes in the buffer; `None` for an address outside
    /// it, which the device learns only when its first write fails.
    output: Option<usize>,
    crc: crc32fast::Hasher,
    hung: bool,
    corrupt: bool,
}

/// Faults a test can inject; each count is consumed by the next matching
/// event.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Requests that never finish and ignore cancels (a hung decoder).
    pub hang: u32,
    /// Interrupts that are raised (and masked) but never delivered.
    pub lose_irq: u32,
    /// Requests whose output gets a flipped token after its CRC was taken.
    pub corrupt: u32,
    /// Overlay applies that fail although writing `path` succeeded.
    pub reconfig_fail: u32,
    /// FPGA manager loads that end in `write error`.
    pub fpga_error: u32,
    /// Cache syncs for the CPU (before the host reads completions or
    /// outputs from a non-coherent buffer) answered `EINVAL`, as u-dma-buf
    /// answers a range it refuses: the host cannot trust what it would read.
    pub refuse_cpu_sync: u32,
    /// Cache syncs for the device over the submission ring (the
    /// descriptors, cleaned after the prompts) answered `EINVAL`: a submit
    /// that fails after its prompts went out.
    pub refuse_ring_sync: u32,
}

impl Faults {
    /// Adds `more` to the counts still to inject.
    pub fn add(&mut self, more: Faults) {
        self.hang += more.hang;
        self.lose_irq += more.lose_irq;
        self.corrupt += more.corrupt;
        self.reconfig_fail += more.reconfig_fail;
        self.fpga_error += more.fpga_error;
        self.refuse_cpu_sync += more.refuse_cpu_sync;
        self.refuse_ring_sync += more.refuse_ring_sync;
    }
}

/// Device-side counters beyond the registers, for tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SimStats {
    pub irqs_sent: u32,
    pub irqs_lost: u32,
    pub syncs_for_device: u64,
    pub syncs_for_cpu: u64,
    pub stale_descriptors: u32,
    /// The most requests decoding at once, on lanes of every slot: how
    /// much of the fabric a load used, in the fabric's own count.
    pub peak_decoding: u32,
}

#[derive(Debug)]
struct Ring {
    base: usize,
    entries: u32,
}

/// The whole fabric.
#[derive(Debug)]
pub struct Fabric {
    config: SimConfig,
    regs: Mmio,
    dram: Vec<u8>,
    /// The CPU's view: the same file the daemon maps.
    cpu_view: DmaBuf,
    slots: Vec<Slot>,
    ctxs: Vec<Option<Ctx>>,
    enabled: bool,
    sq: Option<Ring>,
    cq: Option<Ring>,
    sq_head: u32,
    cq_tail: u32,
    pending: VecDeque<Cqe>,
    event_seq: u32,
    counters: Counters,
    /// What the counter registers hold, to skip rewriting them.
    written_counters: Counters,
    pub irq: IrqLine,
    pub faults: Faults,
    pub stats: SimStats,
    /// Until when the whole fabric is dark (full reconfiguration).
    dark_until: Option<Instant>,
    /// The engine a full reconfiguration will leave in every slot.
    after_dark: Option<Option<Loaded>>,
    /// `--rtl`: the Verilated RTL does what this model does otherwise.
    #[cfg(feature = "rtl")]
    rtl: Option<crate::rtl::RtlDevice>,
}

impl Fabric {
    /// A powered-on fabric over the register file and the CPU view.
    pub fn new(config: SimConfig, regs: Mmio, cpu_view: DmaBuf) -> Fabric {
        let contexts = usize::from(config.slots) * config.contexts_per_slot();
        let mut f = Fabric {
            dram: vec![0u8; config.dma_size as usize],
            regs,
            cpu_view,
            slots: (0..config.slots).map(|_| Slot::default()).collect(),
            ctxs: (0..contexts).map(|_| None).collect(),
            enabled: false,
            sq: None,
            cq: None,
            sq_head: 0,
            cq_tail: 0,
            pending: VecDeque::new(),
            event_seq: 0,
            counters: Counters::default(),
            written_counters: Counters::default(),
            irq: IrqLine::default(),
            faults: Faults::default(),
            stats: SimStats::default(),
            dark_until: None,
            after_dark: None,
            #[cfg(feature = "rtl")]
            rtl: config.rtl.then(|| crate::rtl::RtlDevice::new(&config)),
            config,
        };
        f.power_on();
        f
    }

    /// The RTL, the device's view of DDR and the register file, borrowed
    /// together.
    #[cfg(feature = "rtl")]
    fn with_rtl<T>(
        &mut self,
        f: impl FnOnce(&mut crate::rtl::RtlDevice, &mut crate::rtl::DeviceMemory<'_>, &Mmio) -> T,
    ) -> Option<T> {
        let rtl = self.rtl.as_mut()?;
        let r: &dyn RegisterWindow = &self.regs;
        let cq_base = u64::from(REG_CQ_BASE_LO.get(r)) | (u64::from(REG_CQ_BASE_HI.get(r)) << 32);
        let cq_len = u64::from(REG_CQ_ENTRIES.get(r)) * CQE_LEN as u64;
        let mut mem = crate::rtl::DeviceMemory {
            dram: &mut self.dram,
            cpu: &self.cpu_view,
            coherent: self.config.dma_coherent,
            phys: self.config.dma_phys,
            completions: cq_base..cq_base.saturating_add(cq_len),
            corrupt: &mut self.faults.corrupt,
            stale: &mut self.stats.stale_descriptors,
        };
        Some(f(rtl, &mut mem, &self.regs))
    }

    fn r(&self) -> &dyn RegisterWindow {
        &self.regs
    }

    /// Every register to its reset value.
    fn power_on(&mut self) {
        for off in (0..REG_FILE_WORDS).map(|w| w * 4) {
            self.regs.write32(off, 0);
        }
        let (major, minor) = self.config.version();
        let c = &self.config;
        let r = &self.regs;
        REG_MAGIC.device_write(r, c.shell_magic);
        REG_VERSION.device_write(r, (u32::from(major) << 16) | u32::from(minor));
        REG_CAPS.device_write(
            r,
            u32::from(c.slots & 0xF)
                | (u32::from(c.lanes) << 4)
                | ((c.contexts_per_slot() as u32) << 12),
        );
        REG_MAX_PROMPT.device_write(r, c.max_prompt);
        REG_MAX_OUTPUT.device_write(r, c.max_output);
        REG_INTERFACE_ID.device_write(r, c.interface_id);
        self.enabled = false;
        self.sq = None;
        self.cq = None;
        self.sq_head = 0;
        self.cq_tail = 0;
        self.pending.clear();
        self.event_seq = 0;
        self.counters = Counters::default();
        self.written_counters = Counters::default();
        for c in self.ctxs.iter_mut() {
            *c = None;
        }
        for s in 0..self.slots.len() {
            // TABLE_COMMIT reads 0 again; so do SLOT_COMMITTED and
            // SLOT_LOADS.
            self.slots[s].committed = 0;
            self.slots[s].loads = 0;
            self.slots[s].commit = None;
            self.write_slot(s);
        }
        #[cfg(feature = "rtl")]
        self.with_rtl(|rtl, mem, regs| rtl.power_on(mem, regs));
    }

    fn bump_event(&mut self) {
        self.event_seq = self.event_seq.wrapping_add(1);
        REG_EVENT_SEQ.device_write(&self.regs, self.event_seq);
    }

    fn fault(&mut self, code: FaultCode) {
        REG_FAULT_CODE.device_write(&self.regs, code as u32);
        self.counters.errors = self.counters.errors.wrapping_add(1);
        self.bump_event();
    }

    fn write_counters(&mut self) {
        if self.counters == self.written_counters {
            return;
        }
        self.written_counters = self.counters;
        let r = &self.regs;
        REG_CNT_SUBMITTED.device_write(r, self.counters.submitted);
        REG_CNT_COMPLETED.device_write(r, self.counters.completed);
        REG_CNT_CANCELLED.device_write(r, self.counters.cancelled);
        REG_CNT_ACTIVE.device_write(r, self.counters.active);
        REG_CNT_TOKENS.device_write(r, self.counters.tokens);
        REG_CNT_ERRORS.device_write(r, self.counters.errors);
    }

    /// The shell's counters.
    pub fn counters(&self) -> Counters {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            return crate::rtl::counters(&self.regs);
        }
        self.counters
    }

    /// Starts a full reconfiguration: dark for `dark` (the whole PL is
    /// being reprogrammed: every register reads 0, MAGIC too; only the
    /// kernel knows a load runs), then `image`'s engine in every slot.
    pub fn go_dark(&mut self, dark: Duration, image: Option<Loaded>) {
        for c in self.ctxs.iter_mut() {
            *c = None;
        }
        for off in (0..REG_FILE_WORDS).map(|w| w * 4) {
            self.regs.write32(off, 0);
        }
        self.enabled = false;
        self.dark_until = Some(Instant::now() + dark);
        self.after_dark = Some(image);
    }

    /// Whether a full reconfiguration is running.
    pub fn is_dark(&self) -> bool {
        self.dark_until.is_some()
    }

    // ---- DMA -------------------------------------------------------------

    /// Performs a u-dma-buf sync command written by the CPU. Returns false
    /// for a command that u-dma-buf would refuse.
    pub fn sync(&mut self, command: u64, for_device: bool) -> bool {
        let Some((offset, size, dir)) = decode_sync_command(command) else {
            return false;
        };
        if !for_device && take(&mut self.faults.refuse_cpu_sync) {
            return false;
        }
        let (start, end) = (offset as usize, (offset + size) as usize);
        if end > self.dram.len() || start > end {
            return false;
        }
        let on_sq = self
            .submission_ring()
            .is_some_and(|(base, len)| start < base + len && end > base);
        if for_device && on_sq && take(&mut self.faults.refuse_ring_sync) {
            return false;
        }
        if for_device {
            self.stats.syncs_for_device += 1;
            // A clean makes the CPU's writes visible in DDR, whatever the
            // direction says.
            self.cpu_view
                .read(start as u64, &mut self.dram[start..end])
                .is_ok()
        } else {
            self.stats.syncs_for_cpu += 1;
            // Invalidating a to-device range discards nothing the device
            // wrote, so there is nothing to copy.
            dir == SyncDirection::ToDevice
                || self
                    .cpu_view
                    .write(start as u64, &self.dram[start..end])
                    .is_ok()
        }
    }

    /// Where the submission ring lies in the buffer (offset and length):
    /// the model's, or with the RTL as the host programmed it.
    fn submission_ring(&self) -> Option<(usize, usize)> {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            let r = self.r();
            let base = u64::from(REG_SQ_BASE_LO.get(r)) | (u64::from(REG_SQ_BASE_HI.get(r)) << 32);
            let len = u64::from(REG_SQ_ENTRIES.get(r)) * SQE_LEN as u64;
            return self.dram_offset(base, len).map(|at| (at, len as usize));
        }
        self.sq
            .as_ref()
            .map(|sq| (sq.base, sq.entries as usize * SQE_LEN))
    }

    /// Copies the whole CPU view into DRAM (a coherent buffer has no cache
    /// to sync; `tick` calls this before the device reads).
    fn coherent_in(&mut self, start: usize, end: usize) {
        if self.config.dma_coherent {
            // In bounds: callers checked the range against the buffer.
            let _ = self.cpu_view.read(start as u64, &mut self.dram[start..end]);
        }
    }

    fn coherent_out(&mut self, start: usize, end: usize) {
        if self.config.dma_coherent {
            let _ = self.cpu_view.write(start as u64, &self.dram[start..end]);
        }
    }

    fn dram_offset(&self, phys: u64, len: u64) -> Option<usize> {
        let off = phys.checked_sub(self.config.dma_phys)?;
        let end = off.checked_add(len)?;
        (end <= self.dram.len() as u64).then_some(off as usize)
    }

    fn dram_u32(&self, at: usize) -> u32 {
        u32::from_le_bytes([
            self.dram[at],
            self.dram[at + 1],
            self.dram[at + 2],
            self.dram[at + 3],
        ])
    }

    // ---- the sequencer ------------------------------------------------------

    /// Advances the fabric to `now`; returns when it next has work due.
    pub fn tick(&mut self, now: Instant) -> Option<Instant> {
        if let Some(until) = self.dark_until {
            if now < until {
                return Some(until);
            }
            self.dark_until = None;
            self.power_on();
            if let Some(Some(image)) = self.after_dark.take() {
                for s in 0..self.slots.len() {
                    self.set_slot(s, Some(image.clone()), SlotState::NoModel);
                }
            }
        }
        #[cfg(feature = "rtl")]
        if let Some(busy) = self.with_rtl(|rtl, mem, regs| rtl.tick(mem, regs)) {
            return busy.then_some(now);
        }
        self.control();
        self.slot_control(now);
        self.shutdowns(now);
        self.commits(now);
        if self.enabled {
            self.fetch(now);
            self.cancels(now);
            self.advance(now);
            self.post_pending();
        }
        self.shutdowns(now);
        self.flush_slots();
        self.write_counters();
        let slots = &self.slots;
        // A table being read in goes on at the next tick, at once.
        if slots
            .iter()
            .any(|s| s.commit.as_ref().is_some_and(|p| p.reading.is_some()))
        {
            return Some(now);
        }
        self.ctxs
            .iter()
            .flatten()
            .filter(|c| {
                let slot = &slots[c.slot];
                // Paused by QUIESCE: nothing due until it is cleared.
                let paused = slot.quiesce && slot.draining_until.is_none_or(|u| c.next_due > u);
                !c.hung && !paused
            })
            .map(|c| c.next_due)
            .min()
    }

    fn control(&mut self) {
        let control = REG_CONTROL.read(self.r());
        let want = control.is_set(CONTROL::ENABLE);
        if want && !self.enabled {
            self.start_rings();
        } else if !want && self.enabled {
            self.enabled = false;
            for c in self.ctxs.iter_mut() {
                *c = None;
            }
            for s in self.slots.iter_mut() {
                s.active = 0;
                s.running = 0;
                s.waiting.clear();
                s.dirty = true;
            }
            self.pending.clear();
            self.counters.active = 0;
            REG_STATUS.device_write(&self.regs, 0);
        }
    }

    fn start_rings(&mut self) {
        let r = self.r();
        let sq_addr = u64::from(REG_SQ_BASE_LO.get(r)) | (u64::from(REG_SQ_BASE_HI.get(r)) << 32);
        let cq_addr = u64::from(REG_CQ_BASE_LO.get(r)) | (u64::from(REG_CQ_BASE_HI.get(r)) << 32);
        let sq_entries = REG_SQ_ENTRIES.get(r);
        let cq_entries = REG_CQ_ENTRIES.get(r);
        let ok = |n: u32| n.is_power_of_two() && (2..=4096).contains(&n);
        let sq = self.dram_offset(sq_addr, u64::from(sq_entries) * SQE_LEN as u64);
        let cq = self.dram_offset(cq_addr, u64::from(cq_entries) * CQE_LEN as u64);
        match (sq, cq) {
            (Some(sq), Some(cq)) if ok(sq_entries) && ok(cq_entries) => {
                self.sq = Some(Ring {
                    base: sq,
                    entries: sq_entries,
                });
                self.cq = Some(Ring {
                    base: cq,
                    entries: cq_entries,
                });
            }
            _ => {
                log::warn!("ring programming refused: SQ {sq_addr:#x}×{sq_entries}, CQ {cq_addr:#x}×{cq_entries}");
                self.fault(FaultCode::RingMisprogrammed);
                REG_STATUS.device_write(&self.regs, 1 << 2);
                return;
            }
        }
        for c in self.ctxs.iter_mut() {
            *c = None;
        }
        for s in self.slots.iter_mut() {
            s.active = 0;
            s.running = 0;
            s.waiting.clear();
            s.dirty = true;
        }
        self.counters.active = 0;
        self.pending.clear();
        self.sq_head = 0;
        self.cq_tail = 0;
        REG_SQ_HEAD.device_write(&self.regs, 0);
        REG_CQ_TAIL.device_write(&self.regs, 0);
        self.enabled = true;
        REG_STATUS.device_write(&self.regs, 1);
    }

    // ---- the interrupt -------------------------------------------------------

    /// Whether the interrupt condition holds.
    pub fn irq_level(&self) -> bool {
        #[cfg(feature = "rtl")]
        if let Some(rtl) = &self.rtl {
            return rtl.irq();
        }
        let r = self.r();
        let control = REG_CONTROL.read(r);
        self.enabled
            && control.is_set(CONTROL::IRQ_ENABLE)
            && (self.cq_tail != REG_CQ_HEAD.get(r) || self.event_seq != REG_EVENT_ACK.get(r))
    }

    /// Raises the interrupt if its condition holds and UIO has it unmasked.
    pub fn deliver_irq(&mut self) {
        if self.irq.masked || !self.irq_level() {
            return;
        }
        self.irq.count = self.irq.count.wrapping_add(1);
        self.irq.mask();
        if take(&mut self.faults.lose_irq) {
            self.stats.irqs_lost += 1;
            return;
        }
        self.stats.irqs_sent += 1;
        let bytes = (self.irq.count as i32).to_ne_bytes();
        self.irq
            .conns
            .retain_mut(|conn| conn.write_all(&bytes).is_ok());
    }
}

/// Words in the register file that `power_on` clears.
const REG_FILE_WORDS: usize = WINDOW_LEN / 4;
