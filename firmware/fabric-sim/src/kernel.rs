//! The device side on a real kernel (`fabric-sim --kernel`): the same
//! fabric, reached the way silicon is, inside the real-kernel rig
//! (`scripts/kernel-test`).
//!
//! There the daemon runs on a real Linux kernel and everything it touches
//! is a kernel object: UIO maps the shell's register window and the DMA
//! buffer, `uio_pdrv_genirq` handles the interrupt, configfs, the
//! fpga-region code and the PR decoupler driver reconfigure. This side
//! plays the PL behind them, through physical memory (`/dev/mem`, or a file
//! laid out as physical memory in tests):
//!
//! - the shell's register window and the buffer are memory the kernel does
//!   not own (QEMU RAM past the rig's `mem=512M`), which UIO maps for the
//!   daemon and this side maps here;
//! - the interrupt is the GIC's: while the shell's interrupt condition
//!   holds, the SPI is kept pending through the distributor's set-pending
//!   register unless it is pending or active already, and its pending state
//!   is cleared when the condition drops, as a level-sensitive line would
//!   (the GIC architecture, IHI 0048, 4.3.7); the kernel's own handler and
//!   `uio_pdrv_genirq` take it from there;
//! - a reconfiguration arrives as the kernel did it: the image the FPGA
//!   manager was given comes through the configuration port (the rig's
//!   `zynq_pcap_qemu` module, whose header gives the layout), and a
//!   partial image goes to the one slot whose PR decoupler the region code
//!   has set (`xlnx,pr-decoupler`: 1 decouples). A partial image with no
//!   slot decoupled, or more than one, is refused, as is an image that is
//!   not a model; the manager then fails the load.
//!
//! Until the first full image the fabric is unconfigured: the register
//! window reads zero.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fabric_hw::contract::SlotState;
use fabric_hw::dma::DmaBuf;
use fabric_hw::mmio::{Mmio, RegisterWindow};
use fabric_hw::shell::Counters;

use crate::config::SimConfig;
use crate::device::{Fabric, Loaded};
use crate::SimError;

/// The configuration port's words (see `tests/kernel/modules/zynq_pcap_qemu.c`).
const PORT_MAGIC: usize = 0x00;
const PORT_SEQ: usize = 0x04;
const PORT_FLAGS: usize = 0x08;
const PORT_LEN: usize = 0x0c;
const PORT_DONE: usize = 0x10;
const PORT_RESULT: usize = 0x14;
const PORT_DATA: usize = 0x1000;
const MAGIC: u32 = 0x4746_4346;
/// `FPGA_MGR_PARTIAL_RECONFIG`.
const FLAG_PARTIAL: u32 = 1;

/// Why the configuration logic refused an image (the port's RESULT word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Refusal {
    /// The image is not a model this fabric can run.
    BadImage = 1,
    /// A partial image, but no PR region is decoupled: it would overwrite
    /// logic that is serving.
    NoRegionDecoupled = 2,
    /// A partial image, but more than one region is decoupled.
    RegionsAmbiguous = 3,
    /// The image claims more bytes than the port holds.
    TooLong = 4,
}

/// GIC distributor registers (IHI 0048B, 4.3): set-pending, clear-pending,
/// set-active, one bit per interrupt id, 32 to a word.
const GICD_ISPENDR: usize = 0x200;
const GICD_ICPENDR: usize = 0x280;
const GICD_ISACTIVER: usize = 0x300;

/// Where the PL's pieces are in physical memory.
#[derive(Debug, Clone)]
pub struct Map {
    pub mem: PathBuf,
    pub shell: u64,
    pub decouplers: Vec<u64>,
    pub port: u64,
    pub port_size: u64,
    pub buffer: u64,
    pub gic_dist: u64,
    pub irq: u32,
}

impl Map {
    /// The map `--kernel`'s arguments give.
    pub fn of(pl: &crate::config::PlArgs) -> Map {
        Map {
            mem: pl.mem.clone(),
            shell: pl.shell_addr,
            decouplers: pl.decoupler_addr.clone(),
            port: pl.port_addr,
            port_size: pl.port_size,
            buffer: pl.buffer_addr,
            gic_dist: pl.gic_dist,
            irq: pl.irq,
        }
    }
}

/// The PL, mapped.
struct Pl {
    regs: Option<Mmio>,
    buffer: Option<DmaBuf>,
    decouplers: Vec<Mmio>,
    port: Mmio,
    gic: Mmio,
    /// The interrupt's bit in its distributor word.
    irq_word: usize,
    irq_bit: u32,
}

fn map(file: &File, path: &Path, phys: u64, len: usize, page: u64) -> Result<Mmio, SimError> {
    let base = phys & !(page - 1);
    Mmio::map(file, path, base, (phys - base) as usize, len)
        .map_err(|e| SimError::Map(format!("{phys:#x}: {}", fabric_hw::Chain(&e))))
}

impl Pl {
    fn open(config: &SimConfig, m: &Map) -> Result<Pl, SimError> {
        let page = fabric_hw::uio::page_size().map_err(|e| SimError::Map(e.to_string()))?;
        let file = File::options()
            .read(true)
            .write(true)
            .open(&m.mem)
            .map_err(|e| SimError::Map(format!("{}: {e}", m.mem.display())))?;
        let port_len = usize::try_from(m.port_size)
            .map_err(|_| SimError::Config("--port-size does not fit".into()))?;
        let buf_len = usize::try_from(config.dma_size)
            .map_err(|_| SimError::Config("--dma-size does not fit".into()))?;
        let regs = map(
            &file,
            &m.mem,
            m.shell,
            fabric_hw::contract::WINDOW_LEN,
            page,
        )?;
        let buffer = DmaBuf::uncached(
            "buffer".into(),
            m.mem.clone(),
            m.buffer,
            map(&file, &m.mem, m.buffer, buf_len, page)?,
        );
        let decouplers = m
            .decouplers
            .iter()
            .map(|&a| map(&file, &m.mem, a, 4, page))
            .collect::<Result<Vec<_>, _>>()?;
        if decouplers.len() != usize::from(config.slots) {
            return Err(SimError::Config(format!(
                "{} --decoupler addresses for {} slots",
                decouplers.len(),
                config.slots
            )));
        }
        let gic = map(&file, &m.mem, m.gic_dist, 0x400, page)?;
        let port = map(&file, &m.mem, m.port, port_len, page)?;
        Ok(Pl {
            regs: Some(regs),
            buffer: Some(buffer),
            decouplers,
            port,
            gic,
            irq_word: (m.irq / 32) as usize * 4,
            irq_bit: 1 << (m.irq % 32),
        })
    }

    fn decoupled(&self) -> Vec<bool> {
        self.decouplers
            .iter()
            .map(|d| d.read32(0) & 1 == 1)
            .collect()
    }

    /// Drives the interrupt line from the shell's condition.
    fn irq(&self, level: bool) -> bool {
        let pending = self.gic.read32(GICD_ISPENDR + self.irq_word) & self.irq_bit != 0;
        let active = self.gic.read32(GICD_ISACTIVER + self.irq_word) & self.irq_bit != 0;
        if level && !pending && !active {
            self.gic.write32(GICD_ISPENDR + self.irq_word, self.irq_bit);
            return true;
        }
        if !level && pending {
            self.gic.write32(GICD_ICPENDR + self.irq_word, self.irq_bit);
        }
        false
    }
}

/// An image taken from the port, being configured.
struct Configuring {
    seq: u32,
    /// The slot, for a partial image; `None` for a full one.
    slot: Option<usize>,
    loaded: Loaded,
    done_at: Instant,
}

/// The device side. [`Device::step`] does one round of everything.
pub struct Device {
    config: SimConfig,
    pl: Pl,
    fabric: Option<Fabric>,
    /// The last SEQ taken from the port.
    taken: u32,
    configuring: Option<Configuring>,
    decoupled: Vec<bool>,
    pub irqs_raised: u64,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("configured", &self.fabric.is_some())
            .field("taken", &self.taken)
            .finish()
    }
}

impl Device {
    /// Maps the PL; the fabric stays unconfigured until a full image.
    pub fn open(config: SimConfig, map: &Map) -> Result<Device, SimError> {
        config.device()?;
        let pl = Pl::open(&config, map)?;
        // Whatever the port held before this side started was answered by
        // no one; start from the manager's current number.
        let taken = if pl.port.read32(PORT_MAGIC) == MAGIC {
            pl.port.read32(PORT_SEQ)
        } else {
            0
        };
        let decoupled = pl.decoupled();
        Ok(Device {
            config,
            pl,
            fabric: None,
            taken,
            configuring: None,
            decoupled,
            irqs_raised: 0,
        })
    }

    /// Whether the shell is configured and powered on.
    pub fn configured(&self) -> bool {
        self.fabric.as_ref().is_some_and(|f| !f.is_dark())
    }

    /// Slot `s`'s state, once configured.
    pub fn slot_state(&self, s: usize) -> Option<SlotState> {
        self.fabric.as_ref().map(|f| f.slot_state(s))
    }

    /// The shell's counters, once configured.
    pub fn counters(&self) -> Option<Counters> {
        self.fabric.as_ref().map(Fabric::counters)
    }

    /// One round: the port, the decouplers, the sequencer, the interrupt.
    /// Returns when the fabric next has work due.
    pub fn step(&mut self, now: Instant) -> Option<Instant> {
        self.take_image(now);
        self.watch_decouplers();
        self.finish_configuring(now);
        let mut next = self.configuring.as_ref().map(|c| c.done_at);
        if let Some(f) = self.fabric.as_mut() {
            let due = f.tick(now);
            next = match (next, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.pl.irq(f.irq_level()) {
                self.irqs_raised += 1;
            }
        }
        next
    }

    fn answer(&mut self, seq: u32, result: Result<(), Refusal>) {
        let code = match result {
            Ok(()) => 0,
            Err(r) => {
                log::warn!("fabric-sim: image {seq} refused: {r:?}");
                r as u32
            }
        };
        self.pl.port.write32(PORT_RESULT, code);
        self.pl.port.write32(PORT_DONE, seq);
    }

    fn take_image(&mut self, now: Instant) {
        if self.configuring.is_some() || self.pl.port.read32(PORT_MAGIC) != MAGIC {
            return;
        }
        let seq = self.pl.port.read32(PORT_SEQ);
        if seq == self.taken {
            return;
        }
        self.taken = seq;
        let flags = self.pl.port.read32(PORT_FLAGS);
        let len = self.pl.port.read32(PORT_LEN) as usize;
        if len > self.pl.port.len() - PORT_DATA {
            return self.answer(seq, Err(Refusal::TooLong));
        }
        let mut bytes = vec![0u8; len];
        for (i, chunk) in bytes.chunks_mut(4).enumerate() {
            let word = self.pl.port.read32(PORT_DATA + i * 4).to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        let partial = flags & FLAG_PARTIAL != 0;
        let decoupled = self.pl.decoupled();
        let slot = if partial {
            let mut slots = (0..decoupled.len()).filter(|&s| decoupled[s]);
            match (slots.next(), slots.next()) {
                (Some(s), None) => Some(s),
                (None, _) => return self.answer(seq, Err(Refusal::NoRegionDecoupled)),
                (Some(_), Some(_)) => return self.answer(seq, Err(Refusal::RegionsAmbiguous)),
            }
        } else {
            None
        };
        let loaded = match crate::reconfig::decode(&self.config, &bytes, None) {
            Ok(l) => l,
            Err(e) => {
                log::warn!("fabric-sim: image {seq} ({len} bytes): {e}");
                // The configuration port refuses it: the region, decoupled
                // by the kernel, stays so and reads loading.
                if let (Some(s), Some(f)) = (slot, self.fabric.as_mut()) {
                    f.set_slot(s, None, SlotState::Loading);
                }
                return self.answer(seq, Err(Refusal::BadImage));
            }
        };
        let took = match slot {
            Some(s) => {
                log::info!(
                    "fabric-sim: image {seq}: partial, {len} bytes, engine {} into slot {s} (decouplers {decoupled:?})",
                    loaded.engine
                );
                if let Some(f) = self.fabric.as_mut() {
                    f.set_slot(s, None, SlotState::Loading);
                }
                self.config.scaled(Duration::from_secs_f64(
                    len as f64 / self.config.pr_bytes_per_sec.max(1) as f64,
                ))
            }
            None => {
                let dark = self
                    .config
                    .scaled(Duration::from_secs_f64(self.config.full_reconfig_secs));
                log::info!(
                    "fabric-sim: image {seq}: full, {len} bytes, engine {} in every slot; dark for {dark:?}",
                    loaded.engine
                );
                self.full(dark, loaded.clone());
                dark
            }
        };
        self.configuring = Some(Configuring {
            seq,
            slot,
            loaded,
            done_at: now + took,
        });
    }

    /// A full image: the whole PL is configured again, the shell from
    /// power-on, the decouplers (static logic) reset to coupled.
    fn full(&mut self, dark: Duration, image: Loaded) {
        for d in &self.pl.decouplers {
            d.write32(0, 0);
        }
        self.decoupled = self.pl.decoupled();
        if self.fabric.is_none() {
            let (Some(regs), Some(buffer)) = (self.pl.regs.take(), self.pl.buffer.take()) else {
                return;
            };
            self.fabric = Some(Fabric::new(self.config.clone(), regs, buffer));
        }
        if let Some(f) = self.fabric.as_mut() {
            f.go_dark(dark, Some(image));
        }
    }

    fn finish_configuring(&mut self, now: Instant) {
        let Some(c) = self.configuring.take_if(|c| now >= c.done_at) else {
            return;
        };
        match (c.slot, self.fabric.as_mut()) {
            (Some(s), Some(f)) => {
                log::info!(
                    "fabric-sim: slot {s} configured with engine {}",
                    c.loaded.engine
                );
                f.set_slot(s, Some(c.loaded), SlotState::NoModel);
            }
            // A partial image into an unconfigured device configures
            // nothing: there is no shell around the region.
            (Some(_), None) => return self.answer(c.seq, Err(Refusal::NoRegionDecoupled)),
            (None, Some(f)) if f.is_dark() => {
                // The full image is in once the shell is powered on.
                let _ = f.tick(now);
                if f.is_dark() {
                    self.configuring = Some(c);
                    return;
                }
                log::info!("fabric-sim: the shell is up");
            }
            (None, _) => {}
        }
        self.answer(c.seq, Ok(()));
    }

    /// A region the kernel decouples is cut off from the shell: what ran
    /// there ends, and the slot reads empty until an image configures it.
    fn watch_decouplers(&mut self) {
        let now = self.pl.decoupled();
        for (s, (&was, &is)) in self.decoupled.iter().zip(&now).enumerate() {
            if was == is {
                continue;
            }
            log::info!(
                "fabric-sim: slot {s} {}",
                if is { "decoupled" } else { "coupled" }
            );
            let loading = self.configuring.as_ref().is_some_and(|c| c.slot == Some(s));
            if is && !loading {
                if let Some(f) = self.fabric.as_mut() {
                    if !f.is_dark() {
                        f.set_slot(s, None, SlotState::Empty);
                    }
                }
            }
        }
        self.decoupled = now;
    }
}

/// Runs the device side until `stop` is set.
pub fn run(config: SimConfig, map: &Map, stop: &AtomicBool) -> Result<(), SimError> {
    let mut device = Device::open(config.clone(), map)?;
    log::info!(
        "fabric-sim: the PL through {}: shell at {:#x}, buffer at {:#x}, configuration port at {:#x}, IRQ {}",
        map.mem.display(),
        map.shell,
        map.buffer,
        map.port,
        map.irq
    );
    let poll = Duration::from_micros(config.poll_us.max(1));
    while !stop.load(Ordering::Relaxed) {
        let next = device.step(Instant::now());
        let wait = next
            .map(|n| n.saturating_duration_since(Instant::now()))
            .unwrap_or(poll)
            .min(poll);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}
