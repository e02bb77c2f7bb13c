//! How the rest of the daemon reaches the scheduler's task: a [`Handle`]
//! for the edge, a [`Control`] for rotation and the control socket, and
//! what it [`Published`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fabric_hw::shell::{Counters, ShellInfo};
use tokio::sync::{mpsc, oneshot};

use super::request::{Admission, ReqId, SessionKey};
use super::slots::FabricView;
use super::state::{State, TypingCounts};

/// What the scheduler publishes: figures read on every request, and the
/// fabric's view, replaced whole when it changes. The HTTP side reads the
/// fabric only through this.
#[derive(Debug)]
pub struct Published {
    pub queued: AtomicUsize,
    pub in_flight: AtomicUsize,
    /// Completions per second, an exponentially weighted average (f64 bits).
    pub(super) rate: AtomicU64,
    /// Moves whenever a slot's model or image changes (a load begins or
    /// ends, the shell says so): what was computed for the models before
    /// (the completion cache) is stale.
    epoch: AtomicU64,
    /// [`TypingCounts`], as last published.
    superseded_queued: AtomicU64,
    superseded_running: AtomicU64,
    joined: AtomicU64,
    predicted_late: AtomicU64,
    held: AtomicU64,
    superseded_held: AtomicU64,
    held_early: AtomicU64,
    view: Mutex<Arc<FabricView>>,
    /// What the shell reported when it was attached.
    pub info: ShellInfo,
    /// The shell's UIO device.
    pub device: PathBuf,
}

impl Published {
    pub(super) fn new(info: ShellInfo, device: PathBuf, view: FabricView) -> Published {
        Published {
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            rate: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            superseded_queued: AtomicU64::new(0),
            superseded_running: AtomicU64::new(0),
            joined: AtomicU64::new(0),
            predicted_late: AtomicU64::new(0),
            held: AtomicU64::new(0),
            superseded_held: AtomicU64::new(0),
            held_early: AtomicU64::new(0),
            view: Mutex::new(Arc::new(view)),
            info,
            device,
        }
    }

    /// Completions per second lately.
    pub fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    /// The slots' models' generation: see the field.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// What the typing features did, as last published.
    pub fn typing_counts(&self) -> TypingCounts {
        TypingCounts {
            superseded_queued: self.superseded_queued.load(Ordering::Relaxed),
            superseded_running: self.superseded_running.load(Ordering::Relaxed),
            joined: self.joined.load(Ordering::Relaxed),
            predicted_late: self.predicted_late.load(Ordering::Relaxed),
            held: self.held.load(Ordering::Relaxed),
            superseded_held: self.superseded_held.load(Ordering::Relaxed),
            held_early: self.held_early.load(Ordering::Relaxed),
        }
    }

    /// The fabric and its slots, as last published.
    pub fn view(&self) -> Arc<FabricView> {
        self.view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How long a new request would wait for the queue ahead of it.
    pub fn retry_after(&self, fallback_rate: f64) -> Duration {
        let ahead =
            self.queued.load(Ordering::Relaxed) + self.in_flight.load(Ordering::Relaxed) + 1;
        let rate = if self.rate() > 0.1 {
            self.rate()
        } else {
            fallback_rate.max(0.1)
        };
        Duration::from_secs_f64((ahead as f64 / rate).clamp(0.01, 60.0))
    }

    pub(super) fn publish(&self, state: &State) {
        self.queued.store(state.queued(), Ordering::Relaxed);
        self.in_flight.store(state.in_flight(), Ordering::Relaxed);
        let c = state.typing_counts();
        self.superseded_queued
            .store(c.superseded_queued, Ordering::Relaxed);
        self.superseded_running
            .store(c.superseded_running, Ordering::Relaxed);
        self.joined.store(c.joined, Ordering::Relaxed);
        self.predicted_late
            .store(c.predicted_late, Ordering::Relaxed);
        self.held.store(c.held, Ordering::Relaxed);
        self.superseded_held
            .store(c.superseded_held, Ordering::Relaxed);
        self.held_early.store(c.held_early, Ordering::Relaxed);
    }

    /// The slots change only on commands and shell events; copying them
    /// (with their identities) on every event would cost allocations a request.
    pub(super) fn publish_view(&self, state: &State) {
        let view = state.view();
        let mut guard = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if **guard != view {
            let models = |v: &FabricView| {
                v.slots
                    .iter()
                    .map(|s| (s.model.clone(), s.identity.clone()))
                    .collect::<Vec<_>>()
            };
            if models(&guard) != models(&view) {
                // Before the new view is seen: whoever sees it also sees
                // the epoch move.
                self.epoch.fetch_add(1, Ordering::Release);
            }
            *guard = Arc::new(view);
        }
    }
}

/// What the scheduler is told besides admissions and cancels: the slot
/// changes of a load, in the order a load makes them. Each is applied and
/// published before its reply, so a caller that heard back knows `/readyz`
/// shows it.
#[derive(Debug)]
pub(super) enum Command {
    Drain {
        slot: u8,
        drained: oneshot::Sender<()>,
    },
    Resume {
        slot: u8,
        done: oneshot::Sender<()>,
    },
    BeginLoad {
        slots: Vec<u8>,
        model: Arc<str>,
        estimate: Duration,
        done: oneshot::Sender<()>,
    },
    EndLoad {
        slots: Vec<u8>,
        loaded: bool,
        done: oneshot::Sender<()>,
    },
    Dark {
        done: oneshot::Sender<()>,
    },
    Reset {
        reply: oneshot::Sender<Result<(), String>>,
    },
    Detach {
        done: oneshot::Sender<()>,
    },
    SetDefault {
        model: Arc<str>,
        slot: Option<u8>,
        done: oneshot::Sender<()>,
    },
    Counters {
        reply: oneshot::Sender<Option<Counters>>,
    },
}

/// A request taken back by the edge.
#[derive(Debug)]
pub(super) enum Withdraw {
    /// Its client went away, or a stop sequence matched.
    Cancel(ReqId),
    /// Its session moved on without the scheduler.
    Supersede { session: SessionKey, by: ReqId },
}

/// How the edge reaches the scheduler: admissions and cancels, and what it
/// publishes.
#[derive(Debug, Clone)]
pub struct Handle {
    pub(super) admit: mpsc::Sender<Admission>,
    /// Cancels and supersedes are bounded by the admitted requests (each
    /// is the subject of at most one of each), which the admission
    /// semaphore bounds: unbounded here cannot grow past it.
    pub(super) cancel: mpsc::UnboundedSender<Withdraw>,
    pub(super) control: Control,
}

impl Handle {
    /// Hands an admission over; gives it back if the scheduler has stopped.
    ///
    /// The channel nearly always has room, and `try_send` needs no future.
    /// Only a full channel waits, in a boxed `send`: unboxed, its future
    /// (the admission again, and the semaphore's wait) would make every
    /// request's future a kilobyte larger, and futures are moved whole.
    pub async fn admit(&self, adm: Admission) -> Result<(), Admission> {
        // The match ends before the await: a result held across it would
        // keep an admission's room in the future a second time.
        let adm = match self.admit.try_send(adm) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(adm)) => return Err(adm),
            Err(mpsc::error::TrySendError::Full(adm)) => adm,
        };
        Box::pin(self.admit.send(adm)).await.map_err(|e| e.0)
    }

    /// The client no longer wants request `id`.
    pub fn cancel(&self, id: ReqId) {
        let _ = self.cancel.send(Withdraw::Cancel(id));
    }

    /// Request `by` of `session` was answered at the edge (cache, typed
    /// forward): the session's older unanswered request is stale.
    pub fn supersede(&self, session: SessionKey, by: ReqId) {
        let _ = self.cancel.send(Withdraw::Supersede { session, by });
    }

    pub fn published(&self) -> &Published {
        &self.control.published
    }

    /// The slot and fabric commands, for rotation and the control socket.
    pub fn control(&self) -> &Control {
        &self.control
    }
}

/// How rotation and the control socket change slots: each method returns
/// once the scheduler has applied and published the change (or has
/// stopped).
#[derive(Debug, Clone)]
pub struct Control {
    pub(super) commands: mpsc::Sender<Command>,
    pub(super) published: Arc<Published>,
}

impl Control {
    async fn ask<T>(&self, cmd: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(cmd(tx)).await.ok()?;
        rx.await.ok()
    }

    pub fn published(&self) -> &Published {
        &self.published
    }

    /// Stops starting work in `slot`; the receiver hears once the slot's
    /// last running request has left (a message, never a poll). `None`
    /// once the scheduler has stopped.
    pub async fn drain(&self, slot: u8) -> Option<oneshot::Receiver<()>> {
        let (drained, rx) = oneshot::channel();
        self.commands
            .send(Command::Drain { slot, drained })
            .await
            .ok()?;
        Some(rx)
    }

    /// Starts work in `slot` again.
    pub async fn resume(&self, slot: u8) {
        self.ask(|done| Command::Resume { slot, done }).await;
    }

    /// A load of `model` into `slots` begins: they show it loading, take no
    /// new work, and requests for it may wait about `estimate`.
    pub async fn begin_load(&self, slots: Vec<u8>, model: Arc<str>, estimate: Duration) {
        self.ask(|done| Command::BeginLoad {
            slots,
            model,
            estimate,
            done,
        })
        .await;
    }

    /// The load into `slots` ended: the scheduler reads them from the shell
    /// again, and they take work.
    pub async fn end_load(&self, slots: Vec<u8>, loaded: bool) {
        self.ask(|done| Command::EndLoad {
            slots,
            loaded,
            done,
        })
        .await;
    }

    /// The fabric goes dark (a full reconfiguration): nothing starts and
    /// the shell is not read until [`Control::reset`].
    pub async fn dark(&self) {
        self.ask(|done| Command::Dark { done }).await;
    }

    /// Initialises the rings again after a full reconfiguration; every
    /// request the fabric held is answered as a fault.
    pub async fn reset(&self) -> Result<(), String> {
        self.ask(|reply| Command::Reset { reply })
            .await
            .unwrap_or_else(|| Err("the scheduler has stopped".into()))
    }

    /// The shell's device moved: the scheduler never touches the old one
    /// again (the daemon restarts to attach to the new one).
    pub async fn detach(&self) {
        self.ask(|done| Command::Detach { done }).await;
    }

    /// Routes `default` to `model`, which `slot` holds.
    pub async fn set_default(&self, model: Arc<str>, slot: Option<u8>) {
        self.ask(|done| Command::SetDefault { model, slot, done })
            .await;
    }

    /// The shell's counters, read by the scheduler (`None` while dark or
    /// once it has stopped).
    pub async fn counters(&self) -> Option<Counters> {
        self.ask(|reply| Command::Counters { reply })
            .await
            .flatten()
    }
}
