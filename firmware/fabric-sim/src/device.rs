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
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

use fabric_hw::contract::*;
use fabric_hw::dma::{decode_sync_command, DmaBuf, SyncDirection};
use fabric_hw::mmio::{Mmio, RegisterWindow};
use fabric_hw::sampling::{Sampling, SplitMix64};
use fabric_hw::shell::Counters;
use fabric_model::table::Reader;

use crate::config::SimConfig;
use crate::engine::{LmContext, LmNext};

mod tables;
mod timing;
use tables::{DramWords, PendingCommit, SlotTable};

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

/// The interrupt line as UIO sees it.
#[derive(Debug, Default)]
pub struct IrqLine {
    pub count: u32,
    pub masked: bool,
    pub conns: Vec<File>,
    /// When the socket was last read.
    looked: Option<Instant>,
}

/// How often unmasks are read while the line is unmasked. To UIO such a
/// write is a no-op that never fails, and the daemon's watchdog makes one
/// every drain (driver.rs, `WATCHDOG`); unread, they would fill the
/// socket (a few hundred messages of the writer's send buffer) and the
/// daemon's `write` would fail with `EAGAIN`, which silicon never does.
/// Read this often, a writer would need some hundred thousand writes a
/// second to fill it.
const UNMASKED_LOOK: Duration = Duration::from_millis(2);

impl IrqLine {
    /// Takes the unmask writes that came since the last look, without
    /// waiting. Nothing sleeps on the socket: a thread blocked in `read`
    /// would be woken by every unmask, and that wake-up is done in, and
    /// charged to, the daemon's `write` (docs/design.md, "The simulator"),
    /// which on silicon is a register write in the kernel's UIO handler.
    /// While the line is masked the sequencer looks at every tick, so an
    /// unmask takes effect within a poll interval, as a doorbell does;
    /// while it is unmasked, only every [`UNMASKED_LOOK`], so the no-op
    /// unmasks cost a few system calls a second and an idle fabric
    /// (whose ticks back off) hardly any.
    pub fn take_unmasks(&mut self, now: Instant) {
        let due = self
            .looked
            .is_none_or(|at| now.saturating_duration_since(at) >= UNMASKED_LOOK);
        if self.masked || due {
            self.looked = Some(now);
            self.read();
        }
    }

    /// Masks the line, as the kernel's handler does when it fires. Unmasks
    /// written while the line was unmasked are discarded first: to UIO they
    /// were no-ops.
    pub fn mask(&mut self) {
        self.read();
        self.masked = true;
    }

    /// Reads what the daemon wrote: an unmask unmasks; a closed connection
    /// is dropped.
    fn read(&mut self) {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 4];
        self.conns.retain(|conn| loop {
            match recv(conn.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                Ok(4) => {
                    if i32::from_ne_bytes(buf) == 1 {
                        self.masked = false;
                    }
                }
                Ok(0) => {
                    log::info!("fabric-sim: daemon detached from the interrupt");
                    return false;
                }
                Ok(n) => log::warn!("irq socket: {n}-byte write ignored (UIO takes exactly 4)"),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return true,
                Err(e) => {
                    log::warn!("irq socket: {e}; dropping the connection");
                    return false;
                }
            }
        });
    }
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

    /// `set_slot` for the RTL: the load's steps as the kernel and the
    /// configuration port take them.
    #[cfg(feature = "rtl")]
    fn rtl_set_slot(&mut self, s: usize, loaded: Option<Loaded>, state: SlotState) {
        let engine = loaded.as_ref().map(|l| l.engine);
        self.slots[s].loaded = loaded;
        self.with_rtl(|rtl, mem, regs| {
            if !rtl.decoupled(s) {
                rtl.begin_load(mem, regs, s);
            }
            match state {
                SlotState::Loading => {}
                // An engine's image, or none (a greybox): the shell reads
                // which from SLOT_ENGINE.
                _ => rtl.end_load(mem, regs, s, engine, true),
            }
        });
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

    /// Programs slot `s` directly (a boot image, or the end of a load):
    /// `loaded`, an engine with no model (`NoModel`), or none (`Empty`); or
    /// the load's start (`Loading`), or its failure. The engine's table is
    /// gone either way. A load's start while a step or a table read is
    /// outstanding tears the slot: the load then ends in `Error(TORN)`.
    pub fn set_slot(&mut self, s: usize, loaded: Option<Loaded>, mut state: SlotState) {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            return self.rtl_set_slot(s, loaded, state);
        }
        let now = Instant::now();
        let outstanding =
            (!self.slots[s].shut && self.slot_decoding(s, now)) || self.slots[s].commit.is_some();
        self.abort_slot(s);
        let slot = &mut self.slots[s];
        // A commit under way has been acted on: the slot comes up torn, and
        // the commit is not taken up again after the load.
        if let Some(p) = slot.commit.take() {
            slot.committed = p.value;
        }
        match state {
            SlotState::Loading => {
                if outstanding {
                    log::warn!("fabric-sim: slot {s} reprogrammed with a step or a table read outstanding: torn");
                }
                slot.torn = outstanding;
            }
            SlotState::NoModel | SlotState::Ready if slot.torn => {
                state = SlotState::Error(slot_error::TORN);
            }
            _ => {}
        }
        if matches!(state, SlotState::NoModel | SlotState::Ready) {
            slot.torn = false;
            if loaded.is_none() {
                state = SlotState::Empty;
            }
        }
        slot.loaded = loaded;
        slot.table = None;
        slot.commit = None;
        slot.state = state;
        self.write_slot(s);
        self.bump_event();
    }

    /// The overlay that programmed slot `s`.
    pub fn slot_overlay(&self, s: usize) -> Option<String> {
        self.slots[s]
            .loaded
            .as_ref()
            .and_then(|l| l.overlay.clone())
    }

    /// Slot `s`'s state.
    pub fn slot_state(&self, s: usize) -> SlotState {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            return SlotState::decode(SlotRegs::of(s).state.read(&self.regs));
        }
        self.slots[s].state
    }

    /// The number of slots.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Whether a token of slot `s` is under way at `now`: a running
    /// context whose next token is not yet made, and that the slot, if
    /// quiesced, still lets finish.
    fn slot_decoding(&self, s: usize, now: Instant) -> bool {
        let until = self.slots[s].draining_until;
        self.ctxs.iter().flatten().any(|c| {
            c.slot == s
                && c.running
                && !c.hung
                && c.next_due > now
                && until.is_none_or(|u| c.next_due <= u)
        })
    }

    /// Ends every request running in slot `s` with a fault (its logic is
    /// about to be replaced).
    fn abort_slot(&mut self, s: usize) {
        let now = Instant::now();
        for i in 0..self.ctxs.len() {
            if self.ctxs[i].as_ref().is_some_and(|c| c.slot == s) {
                self.finish(i, CqeStatus::Fault, Finish::None, now);
            }
        }
    }

    fn write_slot(&mut self, s: usize) {
        self.write_times();
        let regs = SlotRegs::of(s);
        let slot = &self.slots[s];
        let (identity, crc) = slot
            .table
            .as_ref()
            .map_or(([0u8; 32], 0), |t| (t.identity, t.crc));
        // What a commit reports before SLOT_COMMITTED, which the host
        // polls and then reads the rest: written last (the RTL changes
        // them all in one cycle; this file is read while it is written).
        regs.engine.device_write(
            &self.regs,
            slot.loaded.as_ref().map_or(0, |l| l.engine.encode()),
        );
        regs.loads.device_write(&self.regs, slot.loads);
        regs.active.device_write(&self.regs, slot.active);
        regs.table_crc.device_write(&self.regs, crc);
        for (i, chunk) in identity.chunks_exact(4).enumerate() {
            regs.identity_word(i).device_write(
                &self.regs,
                u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
            );
        }
        regs.shutdown.device_write(
            &self.regs,
            match (slot.quiesce, slot.shut) {
                (false, _) => 0,
                (true, true) => SHUTDOWN_DONE,
                (true, false) => SHUTDOWN_DRAINING,
            },
        );
        regs.state.device_write(&self.regs, slot.state.encode());
        regs.committed.device_write(&self.regs, slot.committed);
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

    /// QUIESCE stops the slot starting work, the way the DFX AXI Shutdown
    /// Manager blocks new transactions: the tokens under way are finished
    /// and the slot's contexts keep their requests, paused. Cleared, they
    /// go on.
    fn slot_control(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            let regs = SlotRegs::of(s);
            let quiesce = regs.ctrl.read(self.r()).is_set(SLOT_CTRL::QUIESCE);
            if self.slots[s].quiesce == quiesce {
                continue;
            }
            self.slots[s].quiesce = quiesce;
            self.slots[s].dirty = true;
            if quiesce {
                self.slots[s].draining_until = self
                    .ctxs
                    .iter()
                    .flatten()
                    .filter(|c| c.slot == s && c.running && !c.hung)
                    .map(|c| c.next_due)
                    .max();
            } else {
                self.slots[s].draining_until = None;
                for i in 0..self.ctxs.len() {
                    let Some(c) = &self.ctxs[i] else { continue };
                    if c.slot == s && c.running && c.next_due < now {
                        let step = self.next_token_time(c);
                        if let Some(c) = self.ctxs[i].as_mut() {
                            c.next_due = now + step;
                        }
                    }
                }
            }
        }
    }

    /// Whether each quiesced slot has finished what was under way: no step
    /// and no table read outstanding.
    fn shutdowns(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            let shut = self.slots[s].quiesce
                && !self.slot_decoding(s, now)
                && self.slots[s].commit.is_none();
            if self.slots[s].shut != shut {
                self.slots[s].shut = shut;
                self.slots[s].dirty = true;
            }
        }
    }

    /// Rewrites the registers of slots that changed.
    fn flush_slots(&mut self) {
        for s in 0..self.slots.len() {
            if std::mem::take(&mut self.slots[s].dirty) {
                self.write_slot(s);
            }
        }
    }

    fn fetch(&mut self, now: Instant) {
        let Some(sq) = &self.sq else { return };
        let (base, entries) = (sq.base, sq.entries);
        let tail = REG_SQ_TAIL.get(self.r());
        let mut fetched = false;
        while self.sq_head != tail && tail.wrapping_sub(self.sq_head) <= entries {
            let seq = self.sq_head;
            let at = base + (seq % entries) as usize * SQE_LEN;
            self.coherent_in(at, at + SQE_LEN);
            let mut raw = [0u8; SQE_LEN];
            raw.copy_from_slice(&self.dram[at..at + SQE_LEN]);
            self.sq_head = self.sq_head.wrapping_add(1);
            fetched = true;
            match Sqe::decode(&raw, seq) {
                Ok(sqe) => self.accept(sqe, seq, now),
                Err(DescriptorError::Stale { .. }) => {
                    self.stats.stale_descriptors += 1;
                    log::warn!("SQ index {seq}: stale descriptor (the host did not sync it for the device)");
                    self.refuse(seq, CqeStatus::StaleDescriptor, FaultCode::StaleDescriptor);
                }
                Err(e) => {
                    log::warn!("SQ index {seq}: {e}");
                    self.refuse(seq, CqeStatus::BadDescriptor, FaultCode::BadDescriptorCrc);
                }
            }
        }
        if fetched {
            REG_SQ_HEAD.device_write(&self.regs, self.sq_head);
        }
    }

    fn refuse(&mut self, seq: u32, status: CqeStatus, code: FaultCode) {
        self.fault(code);
        self.pending.push_back(Cqe {
            seq: 0,
            tag: 0,
            ctx: 0,
            kind: CqeKind::Done,
            status,
            n_tokens: seq,
            crc: 0,
            fabric_us: 0,
            finish: Finish::None,
        });
    }

    /// Refuses an intact descriptor with a DONE carrying its tag; a bad
    /// descriptor's (status 2) also carries its SQ index in `n_tokens`, as
    /// every one of status 2 does (contract section 4).
    fn done_now(&mut self, sqe: &Sqe, status: CqeStatus, code: FaultCode) {
        self.fault(code);
        let n_tokens = if status == CqeStatus::BadDescriptor {
            sqe.seq
        } else {
            0
        };
        self.pending.push_back(Cqe {
            seq: 0,
            tag: sqe.tag,
            ctx: sqe.ctx,
            kind: CqeKind::Done,
            status,
            n_tokens,
            crc: 0,
            fabric_us: 0,
            finish: Finish::None,
        });
    }

    fn accept(&mut self, sqe: Sqe, seq: u32, now: Instant) {
        let c = &self.config;
        let per_slot = c.contexts_per_slot();
        let ctx = usize::from(sqe.ctx);
        let slot = usize::from(sqe.slot);
        let valid = sqe.opcode == OP_GENERATE
            && sqe.tag != 0
            && ctx < self.ctxs.len()
            && slot < self.slots.len()
            && ctx / per_slot == slot
            && (1..=c.max_prompt).contains(&sqe.prompt_len)
            && (1..=c.max_output).contains(&sqe.max_tokens)
            && sqe.output_cap >= sqe.max_tokens;
        let prompt_at = self.dram_offset(sqe.prompt_addr, u64::from(sqe.prompt_len) * 4);
        // The output is not checked here: a device sees a bad address only
        // when its write fails (contract 1.1, section 6).
        let output_at = self.dram_offset(sqe.output_addr, u64::from(sqe.output_cap) * 4);
        let (Some(prompt_at), true) = (prompt_at, valid) else {
            log::warn!(
                "SQ index {seq}: descriptor for tag {} is out of bounds or malformed",
                sqe.tag
            );
            self.refuse(seq, CqeStatus::BadDescriptor, FaultCode::BadDescriptorCrc);
            return;
        };
        if self.ctxs[ctx].is_some() {
            self.done_now(&sqe, CqeStatus::BadDescriptor, FaultCode::ContextBusy);
            return;
        }
        let s = &self.slots[slot];
        if !matches!(
            (&s.table, s.state, s.quiesce),
            (Some(_), SlotState::Ready, false)
        ) {
            self.done_now(&sqe, CqeStatus::SlotNotReady, FaultCode::SlotNotReady);
            return;
        }
        let len = sqe.prompt_len as usize;
        self.coherent_in(prompt_at, prompt_at + len * 4);
        let prompt: Vec<u32> = (0..len).map(|i| self.dram_u32(prompt_at + i * 4)).collect();
        let hung = take(&mut self.faults.hang);
        let corrupt = take(&mut self.faults.corrupt);
        self.ctxs[ctx] = Some(Ctx {
            tag: sqe.tag,
            slot,
            started: now,
            running: false,
            next_due: now,
            prompt_len: sqe.prompt_len,
            // Section 8: the prompt's last two tokens, end-of-text before it.
            a: if prompt.len() >= 2 {
                prompt[prompt.len() - 2]
            } else {
                fabric_model::tokenizer::EOS
            },
            b: prompt
                .last()
                .copied()
                .unwrap_or(fabric_model::tokenizer::EOS),
            lm: self.slots[slot]
                .table
                .as_ref()
                .and_then(|t| t.lm.clone())
                .map(|w| Box::new(LmContext::new(w, &prompt))),
            rng: SplitMix64(sqe.seed),
            sampling: Sampling::from_f32(sqe.temperature),
            produced: 0,
            max_tokens: sqe.max_tokens,
            stop_token: sqe.stop_token,
            stream: sqe.flags & FLAG_STREAM != 0,
            output: output_at,
            crc: crc32fast::Hasher::new(),
            hung,
            corrupt,
        });
        self.slots[slot].active += 1;
        self.slots[slot].dirty = true;
        self.slots[slot].waiting.push_back(ctx);
        self.counters.submitted = self.counters.submitted.wrapping_add(1);
        self.counters.active += 1;
        self.start_waiting(slot, now);
    }

    /// Gives free lanes of `slot` to its waiting contexts, in order.
    fn start_waiting(&mut self, slot: usize, now: Instant) {
        let lanes = usize::from(self.config.lanes);
        while self.slots[slot].running < lanes {
            let Some(i) = self.slots[slot].waiting.pop_front() else {
                break;
            };
            if self.ctxs[i].is_none() {
                continue;
            }
            self.slots[slot].running += 1;
            let first = self.ctxs[i].as_ref().map(|c| self.first_token_time(c));
            if let (Some(c), Some(first)) = (self.ctxs[i].as_mut(), first) {
                // A lane freed at `now` (the instant the previous request's
                // last token was due) starts this one then, unless it
                // arrived later: back to back, as hardware would.
                let start = now.max(c.started);
                c.running = true;
                c.next_due = start + first;
                let decoding: usize = self.slots.iter().map(|s| s.running).sum();
                self.stats.peak_decoding = self.stats.peak_decoding.max(decoding as u32);
            }
        }
    }

    fn cancels(&mut self, now: Instant) {
        for i in 0..self.ctxs.len() {
            let Some(c) = &self.ctxs[i] else { continue };
            if c.hung {
                continue;
            }
            if reg_ctx_cancel(i).get(self.r()) == c.tag {
                self.finish(i, CqeStatus::Cancelled, Finish::None, now);
            }
        }
    }

    fn advance(&mut self, now: Instant) {
        for i in 0..self.ctxs.len() {
            while let Some(c) = self.ctxs[i].as_mut() {
                if c.hung || !c.running || c.next_due > now {
                    break;
                }
                // A quiesced slot makes only the tokens already under way.
                let slot = &self.slots[c.slot];
                if slot.quiesce && slot.draining_until.is_none_or(|u| c.next_due > u) {
                    break;
                }
                let Some(output) = c.output else {
                    // The first write to the output fails: a bus error.
                    let due = c.next_due;
                    self.fault(FaultCode::DecoderFault);
                    self.finish(i, CqeStatus::Fault, Finish::None, due);
                    break;
                };
                let Some(table) = self.slots[c.slot].table.as_ref() else {
                    // Unreachable: a slot loses its table only as its
                    // contexts end (a load or a commit aborts them).
                    break;
                };
                let token = if let Some(lm) = c.lm.as_mut() {
                    match lm.next(c.rng.next(), c.sampling) {
                        LmNext::Token(t) => t,
                        LmNext::Full => {
                            let due = c.next_due;
                            self.finish(i, CqeStatus::Ok, Finish::Length, due);
                            break;
                        }
                        LmNext::BadToken(t) => {
                            let due = c.next_due;
                            log::warn!(
                                "fabric-sim: tag {}: prompt token {t} is outside the vocabulary",
                                c.tag
                            );
                            self.fault(FaultCode::DecoderFault);
                            self.finish(i, CqeStatus::Fault, Finish::None, due);
                            break;
                        }
                    }
                } else {
                    let words = DramWords {
                        table,
                        dram: &self.dram,
                        cpu: self.config.dma_coherent.then_some(&self.cpu_view),
                    };
                    match words.step(c.a, c.b, c.rng.next(), c.sampling) {
                        Ok(t) => t,
                        Err(e) => {
                            // A table read that failed: the request ends as a
                            // fault, and the slot is in error until loaded
                            // again.
                            let (due, slot) = (c.next_due, c.slot);
                            log::warn!("fabric-sim: slot {slot}: {e}");
                            self.fault(FaultCode::TableRead);
                            self.finish(i, CqeStatus::Fault, Finish::None, due);
                            self.slots[slot].state = SlotState::Error(slot_error::TABLE_READ);
                            self.slots[slot].dirty = true;
                            self.bump_event();
                            break;
                        }
                    }
                };
                (c.a, c.b) = (c.b, token);
                let at = output + c.produced as usize * 4;
                c.crc.update(&token.to_le_bytes());
                c.produced += 1;
                let due = c.next_due;
                let (produced, stream, tag) = (c.produced, c.stream, c.tag);
                let done = if token == c.stop_token {
                    Some(Finish::Stop)
                } else if c.produced >= c.max_tokens {
                    Some(Finish::Length)
                } else {
                    None
                };
                if done.is_none() {
                    // The next token: the engine's time for it, with the
                    // lanes decoding now.
                    let step = self.ctxs[i].as_ref().map(|c| self.next_token_time(c));
                    if let (Some(c), Some(step)) = (self.ctxs[i].as_mut(), step) {
                        c.next_due = due + step;
                    }
                }
                self.dram[at..at + 4].copy_from_slice(&token.to_le_bytes());
                self.coherent_out(at, at + 4);
                self.counters.tokens = self.counters.tokens.wrapping_add(1);
                match done {
                    Some(finish) => {
                        self.finish(i, CqeStatus::Ok, finish, due);
                        break;
                    }
                    None if stream => self.pending.push_back(Cqe {
                        seq: 0,
                        tag,
                        ctx: i as u16,
                        kind: CqeKind::Tokens,
                        status: CqeStatus::Ok,
                        n_tokens: produced,
                        crc: 0,
                        fabric_us: 0,
                        finish: Finish::None,
                    }),
                    None => {}
                }
            }
        }
    }

    fn finish(&mut self, i: usize, status: CqeStatus, finish: Finish, now: Instant) {
        let Some(c) = self.ctxs[i].take() else { return };
        let crc = c.crc.finalize();
        if c.corrupt && c.produced > 0 {
            // Flip a bit of the first token after the CRC was taken: the
            // host must notice.
            if let Some(at) = c.output {
                self.dram[at] ^= 0x01;
                self.coherent_out(at, at + 4);
            }
        }
        let slot = &mut self.slots[c.slot];
        slot.active = slot.active.saturating_sub(1);
        if c.running {
            slot.running = slot.running.saturating_sub(1);
        } else {
            slot.waiting.retain(|&w| w != i);
        }
        self.counters.active = self.counters.active.saturating_sub(1);
        match status {
            CqeStatus::Ok => self.counters.completed = self.counters.completed.wrapping_add(1),
            CqeStatus::Cancelled => {
                self.counters.cancelled = self.counters.cancelled.wrapping_add(1)
            }
            _ => self.counters.errors = self.counters.errors.wrapping_add(1),
        }
        self.pending.push_back(Cqe {
            seq: 0,
            tag: c.tag,
            ctx: i as u16,
            kind: CqeKind::Done,
            status,
            n_tokens: c.produced,
            crc,
            fabric_us: now
                .saturating_duration_since(c.started)
                .as_micros()
                .min(u32::MAX.into()) as u32,
            finish,
        });
        self.write_slot(c.slot);
        self.start_waiting(c.slot, now);
    }

    fn post_pending(&mut self) {
        let Some(cq) = &self.cq else { return };
        let (base, entries) = (cq.base, cq.entries);
        let head = REG_CQ_HEAD.get(self.r());
        let mut posted = false;
        while let Some(mut cqe) = self.pending.pop_front() {
            if self.cq_tail.wrapping_sub(head) >= entries {
                // Full: the device waits for the host to consume.
                self.pending.push_front(cqe);
                break;
            }
            cqe.seq = self.cq_tail;
            let at = base + (self.cq_tail % entries) as usize * CQE_LEN;
            self.dram[at..at + CQE_LEN].copy_from_slice(&cqe.encode());
            self.coherent_out(at, at + CQE_LEN);
            self.cq_tail = self.cq_tail.wrapping_add(1);
            posted = true;
        }
        if posted {
            REG_CQ_TAIL.device_write(&self.regs, self.cq_tail);
        }
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

fn take(counter: &mut u32) -> bool {
    if *counter > 0 {
        *counter -= 1;
        true
    } else {
        false
    }
}
