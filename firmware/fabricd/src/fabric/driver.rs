//! The driver: the one owner of the rings and the interrupt.
//!
//! It submits and cancels, drains completions on every interrupt, and
//! reports them; it knows nothing about HTTP, clients or fairness. Its
//! steps are synchronous, and the scheduler's task runs it.
//!
//! A watchdog drains the rings every [`WATCHDOG`] while requests are in
//! flight even without an interrupt, so a lost interrupt costs latency, not
//! a hung request. A decoder that hangs never answers; the scheduler's
//! deadline answers its request (contract section 6: only a hung fabric
//! needs the host's own timeout).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::{CqeStatus, FaultCode, Finish};
use fabric_hw::devtree::Topology;
use fabric_hw::shell::{Completion, Rings, Shell, ShellError, Submission};
use fabric_hw::uio::UioIrq;
use fabric_hw::Attached;

/// How often the rings are drained without an interrupt while work is in
/// flight.
pub const WATCHDOG: Duration = Duration::from_millis(100);

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

/// How often a fault code of the shell is logged at most: a stuck fault
/// must not flood syslog on an SD card.
const FAULT_LOG_EVERY: Duration = Duration::from_secs(10);

/// The shell's fault codes, logged at most once per [`FAULT_LOG_EVERY`]
/// each, with a count of those not logged.
#[derive(Debug, Default)]
struct FaultLog {
    /// Per code: when it was last logged, and how often it came since.
    seen: Vec<(u32, Instant, u64)>,
}

impl FaultLog {
    fn report(&mut self, code: u32, now: Instant) {
        let name = match FaultCode::from_u32(code) {
            Some(c) => format!("{c:?}"),
            None => format!("unknown code {code}"),
        };
        match self.seen.iter_mut().find(|(c, _, _)| *c == code) {
            Some((_, last, quiet)) if now.saturating_duration_since(*last) < FAULT_LOG_EVERY => {
                *quiet += 1;
            }
            Some((_, last, quiet)) => {
                log::warn!(
                    "fabric: the shell reports fault {name} ({} more since the last report)",
                    quiet
                );
                *last = now;
                *quiet = 0;
            }
            None => {
                log::warn!("fabric: the shell reports fault {name}");
                self.seen.push((code, now, 0));
            }
        }
    }
}

/// The owner of the rings: submissions, cancels and resets in, completions
/// out. Its steps are synchronous, so the scheduler runs it inside its own
/// task (no channel hop or wake-up between deciding what runs and the
/// doorbell, nor between the interrupt and the request's answer).
#[derive(Debug)]
pub struct Driver {
    shell: Arc<Shell>,
    rings: Rings,
    irq: UioIrq,
    in_flight: usize,
    watchdog: tokio::time::Interval,
    /// What a drain found, kept between drains (no allocation a wake-up).
    done: Vec<Completion>,
    faults: FaultLog,
}

impl Driver {
    /// Must be called inside a tokio runtime (the watchdog's timer).
    pub fn new(attached: Attached) -> (Driver, Topology) {
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
                faults: FaultLog::default(),
            },
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

    /// The shell, shared with what reads it or writes host-owned control
    /// words (slot quiesce).
    pub fn shell(&self) -> &Arc<Shell> {
        &self.shell
    }

    /// Asks the fabric to stop the request `tag` in `ctx`, if it still
    /// runs there.
    pub fn cancel(&mut self, ctx: u16, tag: u32) {
        if self.rings.running(ctx) == tag {
            self.shell.cancel(ctx, tag);
        }
    }

    /// Initialises the rings again (after a full reconfiguration reset
    /// the shell); every request the fabric held is answered in `out` as a
    /// fault.
    pub fn reset(&mut self, out: &mut Vec<DriverEvent>) -> Result<(), ShellError> {
        let dropped = self.rings.reset(&self.shell)?;
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
            log::warn!(
                "fabric: unmasking after the reset: {}",
                fabric_hw::Chain(&e)
            );
        }
        Ok(())
    }

    /// Submits a batch behind one doorbell. A request the rings refuse
    /// (invalid, its context busy, the ring full) is answered alone with
    /// [`DriverEvent::Refused`] and the rest still go in; a DMA error is
    /// the fabric failing, and is returned.
    pub fn submit(
        &mut self,
        subs: &[Submission<'_>],
        out: &mut Vec<DriverEvent>,
    ) -> Result<(), ShellError> {
        match self.rings.submit(&self.shell, subs) {
            Ok(()) => {
                self.in_flight += subs.len();
                return Ok(());
            }
            Err(e @ ShellError::Dma(_)) => return Err(e),
            Err(_) => {}
        }
        // `submit` is all or nothing, so nothing of the batch went in: one
        // by one now, refusing only those that fail.
        for sub in subs {
            match self.rings.submit(&self.shell, std::slice::from_ref(sub)) {
                Ok(()) => self.in_flight += 1,
                Err(e @ ShellError::Dma(_)) => return Err(e),
                Err(e) => {
                    let reason = fabric_hw::Chain(&e).to_string();
                    log::warn!("fabric: submission refused: {reason}");
                    out.push(DriverEvent::Refused {
                        tag: sub.tag,
                        ctx: sub.ctx,
                        reason,
                    });
                }
            }
        }
        Ok(())
    }

    /// Stops the rings on the way out (contract section 5: CONTROL = 0,
    /// then STATUS.RUNNING = 0), so the fabric writes nothing more into
    /// the buffer that is unmapped next. Consumes the driver: nothing
    /// drives the rings after this.
    pub fn stop(mut self) -> Result<(), ShellError> {
        let dropped = self.rings.stop(&self.shell)?;
        if !dropped.is_empty() {
            log::warn!(
                "fabric: {} request(s) were still on the fabric when the rings stopped",
                dropped.len()
            );
        }
        log::info!("fabric: rings stopped");
        Ok(())
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
            if let Some(code) = report.fault {
                self.faults.report(code, Instant::now());
            }
            out.push(DriverEvent::ShellEvent {
                fault: report.fault,
            });
        }
        Ok(())
    }
}
