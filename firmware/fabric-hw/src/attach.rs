//! Attaching to the fabric: the one way the daemon, `fabricd generate` and
//! the simulator's tests assemble this crate's parts.
//!
//! In order: discovery in the live device tree, the shell's UIO device and
//! its checks (MAGIC, VERSION, CAPS against the tree), the DMA buffer (its
//! size checked against the tree), the interrupt, and the rings'
//! initialisation (contract section 5), after which the interrupt is
//! unmasked. [`probe`] does the reading half only, and touches no control
//! register, so it can run beside a daemon.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::devtree::{self, DtError, Topology};
use crate::dma::{self, DmaBuf, DmaError};
use crate::shell::{Counters, RingConfig, Rings, Shell, ShellError, ShellInfo, SlotStatus};
use crate::tables::{TableError, Tables};
use crate::uio::{UioError, UioIrq};
use crate::Root;

/// How long attaching waits for the shell's interrupt once its registers
/// are found: the kernel makes a UIO device's node a moment after its sysfs
/// directory, and a daemon started at boot can look in between.
const IRQ_APPEARS_WITHIN: Duration = Duration::from_secs(5);

/// Why the fabric could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no fabric found")]
    DeviceTree(#[from] DtError),
    #[error(transparent)]
    Shell(#[from] ShellError),
    #[error(transparent)]
    Dma(#[from] DmaError),
    #[error(transparent)]
    Uio(#[from] UioError),
    #[error(transparent)]
    Tables(#[from] TableError),
    #[error("looking for the fabric under {root}")]
    NoRoot {
        root: PathBuf,
        source: std::io::Error,
    },
}

/// An attached fabric, ready to drive: one task owns the rings and the
/// interrupt; the shell is shared for what only reads registers or writes
/// host-owned control words (slot quiesce, cancels); the slots' table
/// regions are whoever loads models' (a mapping of the buffer of their own).
#[derive(Debug)]
pub struct Attached {
    pub topology: Topology,
    pub shell: Arc<Shell>,
    pub rings: Rings,
    pub irq: UioIrq,
    pub tables: Tables,
}

/// What `probe` reports, without disturbing a running daemon.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    pub topology: TopologyReport,
    pub shell: ShellInfo,
    pub uio: String,
    pub slots: Vec<SlotStatus>,
    pub counters: Counters,
    pub dma: DmaReport,
}

/// The device-tree findings, for printing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TopologyReport {
    pub shell_node: String,
    pub part: String,
    pub interface_id: u32,
    pub regions: Vec<String>,
}

/// The DMA buffer, for printing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DmaReport {
    pub name: String,
    pub phys_addr: u64,
    pub size: u64,
    pub coherent: bool,
}

fn discover(root: &Root) -> Result<Topology, AttachError> {
    let dt = root.device_tree();
    std::fs::metadata(&dt).map_err(|source| AttachError::NoRoot {
        root: dt.clone(),
        source,
    })?;
    Ok(devtree::discover_live(&dt)?)
}

fn open_dma(root: &Root, topo: &Topology, shell: &Shell) -> Result<DmaBuf, AttachError> {
    Ok(dma::open_buffer(root, &topo.dma, shell.device())?)
}

/// Reads everything about the fabric without touching its control
/// registers.
pub fn probe(root: &Root) -> Result<Probe, AttachError> {
    let topo = discover(root)?;
    let shell = Shell::attach(root, &topo)?;
    let dma = open_dma(root, &topo, &shell)?;
    Ok(Probe {
        topology: TopologyReport {
            shell_node: topo.shell.path.clone(),
            part: topo.shell.part.clone(),
            interface_id: topo.shell.interface_id,
            regions: topo.slots.iter().map(|s| s.path.clone()).collect(),
        },
        shell: shell.info().clone(),
        uio: format!(
            "{} ({})",
            shell.device().dev_path.display(),
            shell.device().name
        ),
        slots: shell.slots(),
        counters: shell.counters(),
        dma: DmaReport {
            name: dma.name().to_owned(),
            phys_addr: dma.phys_addr(),
            size: dma.size(),
            coherent: dma.is_coherent(),
        },
    })
}

/// Attaches: discovery, shell checks, DMA buffer, interrupt, ring
/// initialisation. Must run inside a tokio runtime (the interrupt is an
/// `AsyncFd`); the ring initialisation blocks for at most the enable
/// timeout.
pub fn attach(root: &Root, rings: RingConfig) -> Result<Attached, AttachError> {
    let topology = discover(root)?;
    let shell = Arc::new(Shell::attach(root, &topology)?);
    let dma = open_dma(root, &topology, &shell)?;
    let irq = shell.device().irq_within(IRQ_APPEARS_WITHIN)?;
    let rings = Rings::init(&shell, dma, rings)?;
    // The slots' tables take the buffer after the rings and arenas.
    let tables = Tables::new(
        open_dma(root, &topology, &shell)?,
        rings.layout().end,
        shell.info().slots,
    )?;
    // The kernel leaves the interrupt masked if the previous driver died
    // between an interrupt and its unmask.
    irq.unmask()?;
    log::info!(
        "fabric: shell {}.{} at {}, {} slots × {} lanes, DMA {}",
        shell.info().version_major,
        shell.info().version_minor,
        shell.device().dev_path.display(),
        shell.info().slots,
        shell.info().lanes,
        topology.dma.describe()
    );
    Ok(Attached {
        topology,
        shell,
        rings,
        irq,
        tables,
    })
}
