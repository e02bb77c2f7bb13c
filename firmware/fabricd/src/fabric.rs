//! Attaching to the fabric, and the driver task that owns the rings.
//!
//! [`attach`] runs discovery (live device tree), finds and checks the shell,
//! opens the DMA buffer, initialises the rings and opens the interrupt.
//! [`Driver::run`] is the one task that touches the rings: it takes
//! submissions and cancels from a bounded channel, drains completions on
//! every interrupt, and reports them on another bounded channel. It knows
//! nothing about HTTP, clients or fairness.
//!
//! A watchdog drains the rings every [`WATCHDOG`] while requests are in
//! flight even without an interrupt, so a lost interrupt costs latency, not
//! a hung request.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fabric_hw::contract::{CqeStatus, Finish};
use fabric_hw::devtree::{self, DtError, Topology};
use fabric_hw::dma::{DmaBuf, DmaError};
use fabric_hw::shell::{Completion, RingConfig, Rings, Shell, ShellError, ShellInfo, Submission};
use fabric_hw::uio::{UioError, UioIrq};
use fabric_hw::Root;
use tokio::sync::mpsc;

/// How often the rings are drained without an interrupt while work is in
/// flight.
pub const WATCHDOG: Duration = Duration::from_millis(100);

/// Why the fabric could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no fabric found: {0}")]
    DeviceTree(#[from] DtError),
    #[error(transparent)]
    Shell(#[from] ShellError),
    #[error(transparent)]
    Dma(#[from] DmaError),
    #[error(transparent)]
    Uio(#[from] UioError),
    #[error("the device tree says the DMA buffer {name} is {dt_size} bytes, its sysfs size is {sysfs_size}")]
    DmaSize {
        name: String,
        dt_size: u64,
        sysfs_size: u64,
    },
    #[error("looking for the fabric under {root}: {source}")]
    NoRoot {
        root: PathBuf,
        source: std::io::Error,
    },
}

/// What `probe` reports, without disturbing a running daemon.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    pub topology: TopologyReport,
    pub shell: ShellInfo,
    pub uio: String,
    pub slots: Vec<fabric_hw::shell::SlotStatus>,
    pub counters: fabric_hw::shell::Counters,
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

fn open_dma(root: &Root, topo: &Topology) -> Result<DmaBuf, AttachError> {
    let dma = DmaBuf::open(root, &topo.dma.device_name)?;
    if dma.size() != topo.dma.size {
        return Err(AttachError::DmaSize {
            name: topo.dma.device_name.clone(),
            dt_size: topo.dma.size,
            sysfs_size: dma.size(),
        });
    }
    Ok(dma)
}

/// Reads everything about the fabric without touching its control
/// registers.
pub fn probe(root: &Root) -> Result<Probe, AttachError> {
    let topo = discover(root)?;
    let shell = Shell::attach(root, &topo)?;
    let dma = open_dma(root, &topo)?;
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

/// An attached fabric, ready to drive.
#[derive(Debug)]
pub struct Attached {
    pub topology: Topology,
    pub shell: Arc<Shell>,
    pub rings: Rings,
    pub irq: UioIrq,
}

/// Attaches: discovery, shell checks, DMA buffer, ring initialisation,
/// interrupt. Must run inside a tokio runtime (for the interrupt); the ring
/// initialisation blocks for at most the enable timeout.
pub fn attach(root: &Root, rings: RingConfig) -> Result<Attached, AttachError> {
    let topology = discover(root)?;
    let shell = Arc::new(Shell::attach(root, &topology)?);
    let dma = open_dma(root, &topology)?;
    let irq = shell.device().irq()?;
    let rings = Rings::init(&shell, dma, rings)?;
    // The kernel leaves the interrupt masked if the previous daemon died
    // between an interrupt and its unmask.
    irq.unmask()?;
    log::info!(
        "fabric: shell {}.{} at {}, {} slots × {} lanes, DMA {}",
        shell.info().version_major,
        shell.info().version_minor,
        shell.device().dev_path.display(),
        shell.info().slots,
        shell.info().lanes,
        topology.dma.device_name
    );
    Ok(Attached {
        topology,
        shell,
        rings,
        irq,
    })
}

/// A request for the fabric.
#[derive(Debug, Clone)]
pub struct Job {
    pub tag: u32,
    pub ctx: u16,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: u64,
    pub stop_token: u32,
    pub stream: bool,
}

/// What the driver is asked to do.
#[derive(Debug)]
pub enum DriverCmd {
    Submit(Job),
    Cancel {
        ctx: u16,
        tag: u32,
    },
    /// Initialise the rings again (after a full reconfiguration reset the
    /// shell); every request the fabric held is answered as a fault.
    Reset {
        reply: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
}

/// How a request ended on the fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub tag: u32,
    pub ctx: u16,
    pub status: CqeStatus,
    pub finish: Finish,
    /// Tokens not reported by an earlier [`DriverEvent::Tokens`].
    pub tokens: Vec<u32>,
    pub n_tokens: u32,
    pub fabric_us: u32,
    /// False when the output CRC did not match.
    pub intact: bool,
}

/// What the driver reports.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverEvent {
    Tokens {
        tag: u32,
        tokens: Vec<u32>,
    },
    Done(Done),
    /// A submission the rings refused before the device saw it.
    Refused {
        tag: u32,
        ctx: u16,
        reason: String,
    },
    /// The shell reported a slot change or fault (EVENT_SEQ moved).
    ShellEvent {
        fault: Option<u32>,
    },
}

/// The task that owns the rings.
#[derive(Debug)]
pub struct Driver {
    shell: Arc<Shell>,
    rings: Rings,
    irq: UioIrq,
    in_flight: usize,
}

impl Driver {
    pub fn new(attached: Attached) -> (Driver, Arc<Shell>, Topology) {
        let shell = attached.shell.clone();
        (
            Driver {
                shell: attached.shell,
                rings: attached.rings,
                irq: attached.irq,
                in_flight: 0,
            },
            shell,
            attached.topology,
        )
    }

    /// Runs until the command channel closes or the fabric fails.
    pub async fn run(
        mut self,
        mut cmds: mpsc::Receiver<DriverCmd>,
        events: mpsc::Sender<DriverEvent>,
    ) -> Result<(), ShellError> {
        let mut batch = Vec::new();
        let mut watchdog =
            tokio::time::interval_at(tokio::time::Instant::now() + WATCHDOG, WATCHDOG);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                irq = self.irq.wait() => {
                    let ev = irq.map_err(ShellError::from)?;
                    if ev.coalesced > 0 {
                        log::trace!("fabric: {} interrupts coalesced", ev.coalesced);
                    }
                    self.drain(&events).await?;
                    self.irq.unmask().map_err(ShellError::from)?;
                }
                cmd = cmds.recv() => {
                    let Some(cmd) = cmd else { return Ok(()) };
                    batch.push(cmd);
                    // Take whatever else is queued: one doorbell for all.
                    while batch.len() < 64 {
                        match cmds.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    self.execute(&mut batch, &events).await;
                }
                _ = watchdog.tick(), if self.in_flight > 0 => {
                    self.drain(&events).await?;
                    self.irq.unmask().map_err(ShellError::from)?;
                }
            }
        }
    }

    async fn execute(&mut self, batch: &mut Vec<DriverCmd>, events: &mpsc::Sender<DriverEvent>) {
        let mut jobs = Vec::new();
        for cmd in batch.drain(..) {
            match cmd {
                DriverCmd::Submit(job) => jobs.push(job),
                DriverCmd::Cancel { ctx, tag } => {
                    if self.rings.running(ctx) == tag {
                        self.shell.cancel(ctx, tag);
                    }
                }
                DriverCmd::Reset { reply } => {
                    let outcome = match self.rings.reset(&self.shell) {
                        Ok(dropped) => {
                            self.in_flight = 0;
                            for (tag, ctx) in dropped {
                                let done = Done {
                                    tag,
                                    ctx,
                                    status: CqeStatus::Fault,
                                    finish: Finish::None,
                                    tokens: Vec::new(),
                                    n_tokens: 0,
                                    fabric_us: 0,
                                    intact: true,
                                };
                                let _ = events.send(DriverEvent::Done(done)).await;
                            }
                            if let Err(e) = self.irq.unmask() {
                                log::warn!("fabric: unmasking after the reset: {e}");
                            }
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    let _ = reply.send(outcome);
                }
            }
        }
        if jobs.is_empty() {
            return;
        }
        let subs: Vec<Submission<'_>> = jobs
            .iter()
            .map(|j| Submission {
                tag: j.tag,
                ctx: j.ctx,
                prompt: &j.prompt,
                max_tokens: j.max_tokens,
                temperature: j.temperature,
                seed: j.seed,
                stop_token: j.stop_token,
                stream: j.stream,
            })
            .collect();
        match self.rings.submit(&self.shell, &subs) {
            Ok(()) => self.in_flight += jobs.len(),
            Err(_) => {
                // One bad request must not sink the batch: submit one by
                // one, and refuse only those that fail.
                for sub in &subs {
                    match self.rings.submit(&self.shell, std::slice::from_ref(sub)) {
                        Ok(()) => self.in_flight += 1,
                        Err(e) => {
                            let _ = events
                                .send(DriverEvent::Refused {
                                    tag: sub.tag,
                                    ctx: sub.ctx,
                                    reason: e.to_string(),
                                })
                                .await;
                        }
                    }
                }
            }
        }
    }

    async fn drain(&mut self, events: &mpsc::Sender<DriverEvent>) -> Result<(), ShellError> {
        let mut out = Vec::new();
        let report = self.rings.drain(&self.shell, &mut out)?;
        for c in out {
            let ev = match c {
                Completion::Tokens { tag, tokens, .. } => DriverEvent::Tokens { tag, tokens },
                Completion::Done {
                    tag,
                    ctx,
                    status,
                    finish,
                    tokens,
                    n_tokens,
                    fabric_us,
                    intact,
                } => {
                    self.in_flight = self.in_flight.saturating_sub(1);
                    DriverEvent::Done(Done {
                        tag,
                        ctx,
                        status,
                        finish,
                        tokens,
                        n_tokens,
                        fabric_us,
                        intact,
                    })
                }
            };
            if events.send(ev).await.is_err() {
                return Ok(());
            }
        }
        if report.event {
            let _ = events
                .send(DriverEvent::ShellEvent {
                    fault: report.fault,
                })
                .await;
        }
        Ok(())
    }
}
