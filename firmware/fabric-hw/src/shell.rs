//! The driver of the static shell: attach, and read and write what the
//! shell says about itself, its slots and counters; the rings are
//! [`crate::rings`].
//!
//! [`Shell`] is the register window and what it says about itself; it is
//! shared (`Arc`) by everything that only reads registers or writes
//! host-owned control words. [`Rings`] owns the DDR buffer and the ring
//! state; exactly one task drives it. The interrupt ([`crate::uio::UioIrq`])
//! is kept apart so that task can wait on it and on its command channel at
//! once.
//!
//! The order of operations is the contract's section 5; the functions below
//! say where each step is.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::contract::*;
use crate::devtree::Topology;
use crate::dma::DmaError;
use crate::mmio::RegisterWindow;
use crate::root::Root;
use crate::uio::{UioDevice, UioError};

pub use crate::rings::{
    ring_ranges, Completion, DrainReport, Drained, Layout, Params, RingConfig, Rings, Span,
    Submission,
};

/// Why the shell could not be attached or driven.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error(transparent)]
    Uio(#[from] UioError),
    #[error(transparent)]
    Dma(#[from] DmaError),
    #[error("{device}: register MAGIC reads {found:#010x}, expected {MAGIC:#010x} (\"FABR\"): this is not a fabricd shell, or the fabric is not configured")]
    BadMagic { device: PathBuf, found: u32 },
    #[error("{device}: register VERSION reads {major}.{minor}; this daemon speaks major version {VERSION_MAJOR}")]
    Version {
        device: PathBuf,
        major: u16,
        minor: u16,
    },
    #[error("{device}: register CAPS reads {value:#x}: {problem}")]
    Caps {
        device: PathBuf,
        value: u32,
        problem: String,
    },
    #[error("the device tree describes {device_tree} PR slots, the shell's CAPS register {shell}")]
    SlotCount { device_tree: usize, shell: usize },
    #[error("waiting for {register} to read {expected}: still {found:#x} after {waited_ms} ms")]
    Timeout {
        register: &'static str,
        expected: &'static str,
        found: u32,
        waited_ms: u128,
    },
    #[error("{path}: the DMA buffer has {have} bytes, the ring layout needs {need}")]
    BufferTooSmall { path: String, have: u64, need: u64 },
    #[error("submission for tag {tag}: {field} is {value}, the fabric allows {limit}")]
    Invalid {
        tag: u32,
        field: &'static str,
        value: u64,
        limit: String,
    },
    #[error("submission for tag {tag}: context {ctx} is still running tag {running}")]
    ContextBusy { tag: u32, ctx: u16, running: u32 },
    #[error("the submission ring is full ({entries} entries in flight)")]
    RingFull { entries: u32 },
    #[error("completion ring index {index}")]
    Completion { index: u32, source: DescriptorError },
    #[error(
        "completion ring index {index}: tag {tag} in context {ctx}, which is running tag {running}"
    )]
    UnknownTag {
        index: u32,
        tag: u32,
        ctx: u16,
        running: u32,
    },
    #[error("completion ring index {index}: context {ctx} announces {n_tokens} tokens, more than the {cap} it was given")]
    TooManyTokens {
        index: u32,
        ctx: u16,
        n_tokens: u32,
        cap: u32,
    },
}

/// What the shell says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShellInfo {
    pub version_major: u16,
    pub version_minor: u16,
    pub slots: usize,
    /// Requests a slot computes at once.
    pub lanes: usize,
    /// Requests a slot holds at once: `lanes` decoding, the rest accepted
    /// and waiting on-chip for a lane, so a lane never idles while the host
    /// turns a completion into the next submission.
    pub contexts_per_slot: usize,
    pub max_prompt: u32,
    pub max_output: u32,
    pub interface_id: u32,
    pub prefill_ns: u32,
    pub decode_ns: u32,
}

impl ShellInfo {
    /// Contexts across all slots.
    pub fn contexts(&self) -> usize {
        self.slots * self.contexts_per_slot
    }

    /// The slot that context `ctx` belongs to.
    pub fn slot_of(&self, ctx: u16) -> u8 {
        (usize::from(ctx) / self.contexts_per_slot) as u8
    }

    /// Completions per second one slot can do for requests of this shape.
    pub fn slot_rate(&self, prompt_tokens: u32, output_tokens: u32) -> f64 {
        let t = self
            .service_time(prompt_tokens, output_tokens)
            .as_secs_f64();
        if t > 0.0 {
            self.lanes as f64 / t
        } else {
            f64::INFINITY
        }
    }

    /// The fabric's own time for one request, from its timing registers.
    pub fn service_time(&self, prompt_tokens: u32, output_tokens: u32) -> Duration {
        Duration::from_nanos(
            u64::from(self.prefill_ns) * u64::from(prompt_tokens)
                + u64::from(self.decode_ns) * u64::from(output_tokens),
        )
    }
}

/// One slot's registers, decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotStatus {
    pub index: u8,
    pub state: SlotState,
    /// The engine its module reports; none for an empty slot.
    pub engine: Option<EngineId>,
    /// The identity its table declares (SHA-256, hex); all zeros with no
    /// table.
    pub identity: String,
    /// The CRC-32 the engine computed over the table as it read it in.
    pub table_crc: u32,
    /// The last table commit the slot acted on.
    pub committed: u32,
    pub loads: u32,
    pub active: u32,
    pub quiesced: bool,
}

/// The shell's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Counters {
    pub submitted: u32,
    pub completed: u32,
    pub cancelled: u32,
    pub active: u32,
    pub tokens: u32,
    pub errors: u32,
}

/// The attached static shell.
#[derive(Debug)]
pub struct Shell {
    regs: Box<dyn RegisterWindow>,
    device: UioDevice,
    info: ShellInfo,
}

impl std::fmt::Debug for dyn RegisterWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegisterWindow({} bytes)", self.len())
    }
}

impl Shell {
    /// Finds the shell's UIO device, maps its registers and checks MAGIC,
    /// VERSION and CAPS against the contract and the device tree.
    pub fn attach(root: &Root, topo: &Topology) -> Result<Shell, ShellError> {
        let device = UioDevice::find_any(root, &topo.shell.uio_names)?;
        let regs = device.map(0, WINDOW_LEN as u64)?;
        let shell = Shell::from_window(Box::new(regs), device)?;
        if shell.info.slots != topo.slots.len() {
            return Err(ShellError::SlotCount {
                device_tree: topo.slots.len(),
                shell: shell.info.slots,
            });
        }
        Ok(shell)
    }

    /// Checks an already mapped window.
    pub fn from_window(
        regs: Box<dyn RegisterWindow>,
        device: UioDevice,
    ) -> Result<Shell, ShellError> {
        let path = device.sys_path.clone();
        let magic = REG_MAGIC.get(&*regs);
        if magic != MAGIC {
            return Err(ShellError::BadMagic {
                device: path,
                found: magic,
            });
        }
        let version = REG_VERSION.read(&*regs);
        let major = version.read(VERSION::MAJOR) as u16;
        let minor = version.read(VERSION::MINOR) as u16;
        if major != VERSION_MAJOR {
            return Err(ShellError::Version {
                device: path,
                major,
                minor,
            });
        }
        let caps = REG_CAPS.read(&*regs);
        let slots = caps.read(CAPS::SLOTS) as usize;
        let lanes = caps.read(CAPS::LANES) as usize;
        // CONTEXTS reads 0 on a shell without an on-chip queue: one context
        // per lane.
        let contexts_per_slot = match caps.read(CAPS::CONTEXTS) as usize {
            0 => lanes,
            n => n,
        };
        let caps_err = |problem: String| ShellError::Caps {
            device: path.clone(),
            value: caps.get(),
            problem,
        };
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(caps_err(format!(
                "SLOTS is {slots}, the contract allows 1..={MAX_SLOTS}"
            )));
        }
        if !(1..=MAX_LANES).contains(&lanes) {
            return Err(caps_err(format!(
                "LANES is {lanes}, the contract allows 1..={MAX_LANES}"
            )));
        }
        if !(lanes..=MAX_CONTEXTS).contains(&contexts_per_slot) {
            return Err(caps_err(format!(
                "CONTEXTS is {contexts_per_slot}, the contract allows LANES ({lanes})..={MAX_CONTEXTS}"
            )));
        }
        let info = ShellInfo {
            version_major: major,
            version_minor: minor,
            slots,
            lanes,
            contexts_per_slot,
            max_prompt: REG_MAX_PROMPT.get(&*regs),
            max_output: REG_MAX_OUTPUT.get(&*regs),
            interface_id: REG_INTERFACE_ID.get(&*regs),
            prefill_ns: REG_PREFILL_NS.get(&*regs),
            decode_ns: REG_DECODE_NS.get(&*regs),
        };
        if info.max_prompt == 0 || info.max_output == 0 {
            return Err(caps_err(format!(
                "MAX_PROMPT is {} and MAX_OUTPUT {}; both must be at least 1",
                info.max_prompt, info.max_output
            )));
        }
        Ok(Shell { regs, device, info })
    }

    /// What the shell reported at attach time.
    pub fn info(&self) -> &ShellInfo {
        &self.info
    }

    /// The UIO device the shell was found at.
    pub fn device(&self) -> &UioDevice {
        &self.device
    }

    /// The register window: the rings' and this layer's alone. Code outside
    /// the layer asks the shell for what it means (slots, counters,
    /// cancels) rather than poking offsets.
    pub(crate) fn regs(&self) -> &dyn RegisterWindow {
        &*self.regs
    }

    /// Whether the rings run (STATUS.RUNNING): set from a driver's
    /// initialisation until its [`Rings::stop`].
    pub fn rings_running(&self) -> bool {
        REG_STATUS.read(self.regs()).is_set(STATUS::RUNNING)
    }

    /// Whether MAGIC still reads right: false while a full reconfiguration
    /// darkens the fabric (the kernel knows when one runs; the shell, being
    /// reprogrammed, cannot say) or after it was reconfigured with something
    /// else.
    pub fn magic_ok(&self) -> bool {
        REG_MAGIC.get(self.regs()) == MAGIC
    }

    /// Slot `index`, decoded.
    pub fn slot(&self, index: u8) -> SlotStatus {
        let regs = SlotRegs::of(usize::from(index));
        let identity = regs.read_identity(self.regs());
        SlotStatus {
            index,
            state: SlotState::decode(regs.state.read(self.regs())),
            engine: EngineId::decode(regs.engine.get(self.regs())),
            identity: hex(&identity),
            table_crc: regs.table_crc.get(self.regs()),
            committed: regs.committed.get(self.regs()),
            loads: regs.loads.get(self.regs()),
            active: regs.active.get(self.regs()),
            quiesced: regs.shutdown.get(self.regs()) == SHUTDOWN_DONE,
        }
    }

    /// Every slot.
    pub fn slots(&self) -> Vec<SlotStatus> {
        (0..self.info.slots as u8).map(|i| self.slot(i)).collect()
    }

    /// The shell's counters.
    pub fn counters(&self) -> Counters {
        let r = self.regs();
        Counters {
            submitted: REG_CNT_SUBMITTED.get(r),
            completed: REG_CNT_COMPLETED.get(r),
            cancelled: REG_CNT_CANCELLED.get(r),
            active: REG_CNT_ACTIVE.get(r),
            tokens: REG_CNT_TOKENS.get(r),
            errors: REG_CNT_ERRORS.get(r),
        }
    }

    /// Asks the device to stop the request `tag` running in `ctx`.
    pub fn cancel(&self, ctx: u16, tag: u32) {
        reg_ctx_cancel(usize::from(ctx)).set(self.regs(), tag);
    }

    /// Sets or clears QUIESCE of a slot.
    pub fn set_quiesce(&self, slot: u8, on: bool) {
        let regs = SlotRegs::of(usize::from(slot));
        regs.ctrl.set(self.regs(), u32::from(on));
    }

    /// Quiesces a slot and waits (bounded) until SLOT_SHUTDOWN reads 0x0F:
    /// the kernel's decoupler driver does not wait for outstanding
    /// transactions, so we do.
    pub fn quiesce(&self, slot: u8, timeout: Duration) -> Result<(), ShellError> {
        self.set_quiesce(slot, true);
        let regs = SlotRegs::of(usize::from(slot));
        wait_reg(
            self.regs(),
            regs.shutdown.offset(),
            "SLOT_SHUTDOWN",
            "0x0F",
            timeout,
            |v| v == SHUTDOWN_DONE,
        )
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn wait_reg(
    regs: &dyn RegisterWindow,
    offset: usize,
    register: &'static str,
    expected: &'static str,
    timeout: Duration,
    done: impl Fn(u32) -> bool,
) -> Result<(), ShellError> {
    let start = Instant::now();
    loop {
        let value = regs.read32(offset);
        if done(value) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(ShellError::Timeout {
                register,
                expected,
                found: value,
                waited_ms: start.elapsed().as_millis(),
            });
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
