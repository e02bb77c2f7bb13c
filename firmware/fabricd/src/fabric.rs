//! Attaching to the fabric, and the driver that owns the rings.
//!
//! [`attach`] runs discovery (live device tree), finds and checks the shell,
//! opens the DMA buffer, initialises the rings and opens the interrupt.
//! [`Driver`] is the one owner of the rings: it submits and cancels, drains
//! completions on every interrupt, and reports them. It knows nothing about
//! HTTP, clients or fairness; the scheduler's task runs it.
//!
//! A watchdog drains the rings every [`WATCHDOG`] while requests are in
//! flight even without an interrupt, so a lost interrupt costs latency, not
//! a hung request.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fabric_hw::contract::{CqeStatus, Finish};
use fabric_hw::devtree::{self, DtError, Topology};
use fabric_hw::dma::{self, DmaBuf, DmaError};
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
    let dma = open_dma(root, &topology, &shell)?;
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
        topology.dma.describe()
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

/// The owner of the rings: submissions, cancels and resets in, completions
/// out. Its steps are synchronous, so the scheduler runs it inside its own
/// task (no channel hop or wake-up between deciding what runs and the
/// doorbell, nor between the interrupt and the request's answer);
/// [`Driver::run`] drives it on its own, for `fabricd generate`.
#[derive(Debug)]
pub struct Driver {
    shell: Arc<Shell>,
    rings: Rings,
    irq: UioIrq,
    in_flight: usize,
    watchdog: tokio::time::Interval,
    /// What a drain found, kept between drains (no allocation a wake-up).
    done: Vec<Completion>,
}

impl Driver {
    /// Must be called inside a tokio runtime (the watchdog's timer).
    pub fn new(attached: Attached) -> (Driver, Arc<Shell>, Topology) {
        let shell = attached.shell.clone();
        let mut watchdog =
            tokio::time::interval_at(tokio::time::Instant::now() + WATCHDOG, WATCHDOG);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        (
            Driver {
                shell: attached.shell,
                rings: attached.rings,
                irq: attached.irq,
                in_flight: 0,
                watchdog,
                done: Vec::new(),
            },
            shell,
            attached.topology,
        )
    }

    /// Waits until the fabric may have something to report: an interrupt,
    /// or the watchdog while requests are in flight. Cancel-safe, so it can
    /// sit in a `select!`; follow it with [`Driver::service`].
    pub async fn ready(&mut self) -> Result<(), ShellError> {
        tokio::select! {
            irq = self.irq.wait() => {
                let ev = irq.map_err(ShellError::from)?;
                if ev.coalesced > 0 {
                    log::trace!("fabric: {} interrupts coalesced", ev.coalesced);
                }
            }
            _ = self.watchdog.tick(), if self.in_flight > 0 => {}
        }
        Ok(())
    }

    /// Takes what the fabric finished into `out`, and unmasks the
    /// interrupt.
    pub fn service(&mut self, out: &mut Vec<DriverEvent>) -> Result<(), ShellError> {
        self.drain(out)?;
        self.irq.unmask().map_err(ShellError::from)
    }

    /// Runs `cmds` (emptying it), with one doorbell for all the
    /// submissions; what they cause at once (refusals, a reset's dropped
    /// requests) goes into `out`.
    pub fn execute(&mut self, cmds: &mut Vec<DriverCmd>, out: &mut Vec<DriverEvent>) {
        // Cancels and resets first, then every submission behind one
        // doorbell.
        for cmd in cmds.extract_if(.., |c| !matches!(c, DriverCmd::Submit(_))) {
            match cmd {
                DriverCmd::Submit(_) => {}
                DriverCmd::Cancel { ctx, tag } => {
                    if self.rings.running(ctx) == tag {
                        self.shell.cancel(ctx, tag);
                    }
                }
                DriverCmd::Reset { reply } => {
                    let outcome = match self.rings.reset(&self.shell) {
                        Ok(dropped) => {
                            self.in_flight = 0;
                            out.extend(dropped.into_iter().map(|(tag, ctx)| {
                                DriverEvent::Done(Done {
                                    tag,
                                    ctx,
                                    status: CqeStatus::Fault,
                                    finish: Finish::None,
                                    tokens: Vec::new(),
                                    n_tokens: 0,
                                    fabric_us: 0,
                                    intact: true,
                                })
                            }));
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
        let subs: Vec<Submission<'_>> = cmds
            .iter()
            .filter_map(|c| match c {
                DriverCmd::Submit(job) => Some(job),
                _ => None,
            })
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
            Ok(()) => self.in_flight += subs.len(),
            Err(_) => {
                // One bad request must not sink the batch: submit one by
                // one, and refuse only those that fail.
                for sub in &subs {
                    match self.rings.submit(&self.shell, std::slice::from_ref(sub)) {
                        Ok(()) => self.in_flight += 1,
                        Err(e) => {
                            log::warn!("fabric: submission refused: {e}");
                            out.push(DriverEvent::Refused {
                                tag: sub.tag,
                                ctx: sub.ctx,
                                reason: e.to_string(),
                            });
                        }
                    }
                }
            }
        }
        drop(subs);
        cmds.clear();
    }

    fn drain(&mut self, out: &mut Vec<DriverEvent>) -> Result<(), ShellError> {
        let mut done = std::mem::take(&mut self.done);
        // What was drained before a failure is still handed on.
        let report = self.rings.drain(&self.shell, &mut done);
        for c in done.drain(..) {
            out.push(match c {
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
            });
        }
        self.done = done;
        let report = report?;
        if report.event {
            out.push(DriverEvent::ShellEvent {
                fault: report.fault,
            });
        }
        Ok(())
    }

    /// Drives the fabric on its own, through channels, until the command
    /// channel closes or the fabric fails (`fabricd generate`; the daemon
    /// runs the driver inside its scheduler instead).
    pub async fn run(
        mut self,
        mut cmds: mpsc::Receiver<DriverCmd>,
        events: mpsc::Sender<DriverEvent>,
    ) -> Result<(), ShellError> {
        let mut batch = Vec::new();
        let mut out = Vec::new();
        loop {
            tokio::select! {
                r = self.ready() => {
                    r?;
                    self.service(&mut out)?;
                }
                cmd = cmds.recv() => {
                    let Some(cmd) = cmd else { return Ok(()) };
                    batch.push(cmd);
                    self.execute(&mut batch, &mut out);
                }
            }
            for ev in out.drain(..) {
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}
