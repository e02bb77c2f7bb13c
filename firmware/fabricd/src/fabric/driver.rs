//! The driver: the one owner of the rings and the interrupt.
//!
//! It submits and cancels, drains completions on every interrupt, and
//! reports them; it knows nothing about HTTP, clients or fairness. Its
//! steps are synchronous, and the scheduler's task runs it.
//!
//! Servicing an interrupt allocates nothing: the rings drain into the
//! [`Events`] the scheduler keeps, whose buffers are sized by
//! [`Driver::events`] for the most one drain can find, and the events lend
//! their tokens. Whoever hands tokens on copies them
//! (`tests/driver_allocs.rs` counts).
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
use fabric_hw::shell::{Completion, Drained, Rings, Shell, ShellError, Submission};
use fabric_hw::tables::Tables;
use fabric_hw::uio::UioIrq;
use fabric_hw::Attached;

/// How often the rings are drained without an interrupt while work is in
/// flight.
pub const WATCHDOG: Duration = Duration::from_millis(100);

/// How a request ended on the fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct Done<'a> {
    pub tag: u32,
    pub ctx: u16,
    pub status: CqeStatus,
    pub finish: Finish,
    /// Tokens not reported by an earlier [`DriverEvent::Tokens`].
    pub tokens: &'a [u32],
    pub n_tokens: u32,
    pub fabric_us: u32,
    /// False when the output CRC did not match.
    pub intact: bool,
}

/// What the driver reports, lent by [`Events::iter`].
#[derive(Debug, Clone, PartialEq)]
pub enum DriverEvent<'a> {
    Tokens {
        tag: u32,
        tokens: &'a [u32],
    },
    Done(Done<'a>),
    /// A submission the rings refused before the device saw it.
    Refused {
        tag: u32,
        ctx: u16,
        reason: &'a str,
    },
    /// The shell reported a slot change or fault (EVENT_SEQ moved).
    ShellEvent {
        fault: Option<u32>,
    },
}

/// What the driver reported, in order, and the tokens it read. The
/// scheduler keeps one, passes it to every call that reports, takes the
/// events in with [`Events::iter`] and then clears it; its buffers keep
/// their room.
#[derive(Debug, Default)]
pub struct Events {
    entries: Vec<Entry>,
    /// The tokens of the completions in `entries`, and the completions of
    /// the drain under way.
    drained: Drained,
}

#[derive(Debug)]
enum Entry {
    /// Its tokens are in `Events::drained`.
    Fabric(Completion),
    Refused {
        tag: u32,
        ctx: u16,
        reason: String,
    },
    /// A request the fabric dropped when the rings were reset.
    Dropped {
        tag: u32,
        ctx: u16,
    },
    ShellEvent {
        fault: Option<u32>,
    },
}

impl Events {
    /// Each event, in the order the driver reported them.
    pub fn iter(&self) -> impl Iterator<Item = DriverEvent<'_>> {
        self.entries.iter().map(|e| match e {
            Entry::Fabric(Completion::Tokens { tag, tokens, .. }) => DriverEvent::Tokens {
                tag: *tag,
                tokens: self.drained.tokens(*tokens),
            },
            Entry::Fabric(Completion::Done {
                tag,
                ctx,
                status,
                finish,
                tokens,
                n_tokens,
                fabric_us,
                intact,
            }) => DriverEvent::Done(Done {
                tag: *tag,
                ctx: *ctx,
                status: *status,
                finish: *finish,
                tokens: self.drained.tokens(*tokens),
                n_tokens: *n_tokens,
                fabric_us: *fabric_us,
                intact: *intact,
            }),
            Entry::Refused { tag, ctx, reason } => DriverEvent::Refused {
                tag: *tag,
                ctx: *ctx,
                reason,
            },
            // The fabric lost it: a fault.
            Entry::Dropped { tag, ctx } => DriverEvent::Done(Done {
                tag: *tag,
                ctx: *ctx,
                status: CqeStatus::Fault,
                finish: Finish::None,
                tokens: &[],
                n_tokens: 0,
                fabric_us: 0,
                intact: true,
            }),
            Entry::ShellEvent { fault } => DriverEvent::ShellEvent { fault: *fault },
        })
    }

    /// Whether nothing was reported since the last [`Events::clear`].
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every event, keeping the room.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.drained.clear();
    }
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
        // Named only when logged: a fault held quiet costs no allocation.
        let name = || match FaultCode::from_u32(code) {
            Some(c) => format!("{c:?}"),
            None => format!("unknown code {code}"),
        };
        match self.seen.iter_mut().find(|(c, _, _)| *c == code) {
            Some((_, last, quiet)) if now.saturating_duration_since(*last) < FAULT_LOG_EVERY => {
                *quiet += 1;
            }
            Some((_, last, quiet)) => {
                log::warn!(
                    "fabric: the shell reports fault {} ({} more since the last report)",
                    name(),
                    quiet
                );
                *last = now;
                *quiet = 0;
            }
            None => {
                log::warn!("fabric: the shell reports fault {}", name());
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
    faults: FaultLog,
}

impl Driver {
    /// Must be called inside a tokio runtime (the watchdog's timer).
    pub fn new(attached: Attached) -> (Driver, Topology, Tables) {
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
                faults: FaultLog::default(),
            },
            attached.topology,
            attached.tables,
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

    /// An [`Events`] with room for what servicing one interrupt can
    /// report (every completion entry, each context's whole output, a
    /// shell event) and for every context dropped by a reset: servicing
    /// into it never allocates.
    pub fn events(&self) -> Events {
        let contexts = self.rings.info().contexts();
        let drained = self.rings.drained();
        Events {
            entries: Vec::with_capacity(drained.completions.capacity() + contexts + 1),
            drained,
        }
    }

    /// Takes what the fabric finished into `out`, and unmasks the
    /// interrupt.
    pub fn service(&mut self, out: &mut Events) -> Result<(), ShellError> {
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
    pub fn reset(&mut self, out: &mut Events) -> Result<(), ShellError> {
        let dropped = self.rings.reset(&self.shell)?;
        self.in_flight = 0;
        out.entries.extend(
            dropped
                .into_iter()
                .map(|(tag, ctx)| Entry::Dropped { tag, ctx }),
        );
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
    pub fn submit(&mut self, subs: &[Submission<'_>], out: &mut Events) -> Result<(), ShellError> {
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
                    out.entries.push(Entry::Refused {
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

    fn drain(&mut self, out: &mut Events) -> Result<(), ShellError> {
        // What was drained before a failure is still handed on.
        let report = self.rings.drain(&self.shell, &mut out.drained);
        for c in out.drained.completions.drain(..) {
            if matches!(c, Completion::Done { .. }) {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            out.entries.push(Entry::Fabric(c));
        }
        let report = report?;
        if report.event {
            if let Some(code) = report.fault {
                self.faults.report(code, Instant::now());
            }
            out.entries.push(Entry::ShellEvent {
                fault: report.fault,
            });
        }
        Ok(())
    }
}
