//! The one task that owns the scheduler's [`State`] and the fabric's
//! [`Driver`], and the handles that reach it through bounded channels.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fabric_hw::shell::{Counters, ShellInfo, Submission};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::events::ReqEvent;
use super::outcome::Outcome;
use super::request::{Admission, ReqId};
use super::slots::{FabricState, FabricView, ShellSlot};
use super::state::State;
use crate::catalog::Catalog;
use crate::fabric::{Driver, DriverEvent};
use crate::stats::InFlight;

/// What the scheduler publishes: figures read on every request, and the
/// fabric's view, replaced whole when it changes. The HTTP side reads the
/// fabric only through this.
#[derive(Debug)]
pub struct Published {
    pub queued: AtomicUsize,
    pub in_flight: AtomicUsize,
    /// Completions per second, an exponentially weighted average (f64 bits).
    rate: AtomicU64,
    view: Mutex<Arc<FabricView>>,
    /// What the shell reported when it was attached.
    pub info: ShellInfo,
    /// The shell's UIO device.
    pub device: PathBuf,
}

impl Published {
    fn new(info: ShellInfo, device: PathBuf, view: FabricView) -> Published {
        Published {
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            rate: AtomicU64::new(0),
            view: Mutex::new(Arc::new(view)),
            info,
            device,
        }
    }

    /// Completions per second lately.
    pub fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
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

    fn publish(&self, state: &State) {
        self.queued.store(state.queued(), Ordering::Relaxed);
        self.in_flight.store(state.in_flight(), Ordering::Relaxed);
    }

    /// The slots change only on commands and shell events; copying them
    /// (with their hashes) on every event would cost allocations a request.
    fn publish_view(&self, state: &State) {
        let view = state.view();
        let mut guard = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if **guard != view {
            *guard = Arc::new(view);
        }
    }
}

/// What the scheduler is told besides admissions and cancels: the slot
/// changes of a load, in the order a load makes them. Each is applied and
/// published before its reply, so a caller that heard back knows `/readyz`
/// shows it.
#[derive(Debug)]
enum Command {
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

/// How the edge reaches the scheduler: admissions and cancels, and what it
/// publishes.
#[derive(Debug, Clone)]
pub struct Handle {
    admit: mpsc::Sender<Admission>,
    /// Cancels are bounded by the admitted requests (each sends at most
    /// one), which the admission semaphore bounds: unbounded here cannot
    /// grow past it.
    cancel: mpsc::UnboundedSender<ReqId>,
    control: Control,
}

impl Handle {
    /// Hands an admission over; gives it back if the scheduler has stopped.
    pub async fn admit(&self, adm: Admission) -> Result<(), Admission> {
        self.admit.send(adm).await.map_err(|e| e.0)
    }

    /// The client no longer wants request `id`.
    pub fn cancel(&self, id: ReqId) {
        let _ = self.cancel.send(id);
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
    commands: mpsc::Sender<Command>,
    published: Arc<Published>,
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

/// A running scheduler: its handle, its task (which gives the driver back
/// when it ends) and its stop token.
#[derive(Debug)]
pub struct Scheduler {
    pub handle: Handle,
    pub task: tokio::task::JoinHandle<Driver>,
    /// Fires when shutdown's grace is over: whatever is left is answered
    /// `shutting_down` and the task ends.
    pub stop: CancellationToken,
}

/// Starts the scheduler's task with the driver it runs: the slots as the
/// shell shows them now, named from `catalog`. `queue` is the admission
/// channel's size (the queue capacity).
pub fn spawn(
    driver: Driver,
    catalog: Arc<Catalog>,
    queue: usize,
    in_flight: Arc<InFlight>,
) -> Scheduler {
    let shell = driver.shell().clone();
    let info = shell.info().clone();
    let name_of = |hash: &str| catalog.by_hash(hash).map(|m| m.name.clone());
    let slots = shell
        .slots()
        .into_iter()
        .map(|s| ShellSlot::read(s, name_of))
        .collect();
    let state = State::new(slots, info.contexts_per_slot);
    let published = Arc::new(Published::new(
        info,
        shell.device().dev_path.clone(),
        state.view(),
    ));
    let (admit, admit_rx) = mpsc::channel(queue.max(1));
    let (cancel, cancel_rx) = mpsc::unbounded_channel();
    let (commands, commands_rx) = mpsc::channel(64);
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(
        state,
        Inputs {
            admit: admit_rx,
            cancel: cancel_rx,
            commands: commands_rx,
            stop: stop.clone(),
        },
        driver,
        catalog,
        published.clone(),
        in_flight,
    ));
    Scheduler {
        handle: Handle {
            admit,
            cancel,
            control: Control {
                commands,
                published,
            },
        },
        task,
        stop,
    }
}

struct Inputs {
    admit: mpsc::Receiver<Admission>,
    cancel: mpsc::UnboundedReceiver<ReqId>,
    commands: mpsc::Receiver<Command>,
    stop: CancellationToken,
}

/// Messages taken in one go after the one that woke the scheduler.
const BATCH: usize = 64;

/// What the task keeps besides the state.
struct Task {
    driver: Driver,
    catalog: Arc<Catalog>,
    published: Arc<Published>,
    /// The shell's device moved: never touch it again.
    detached: bool,
}

impl Task {
    /// Reads the slots from the shell, unless it is dark or gone.
    fn refresh(&self, state: &mut State) {
        if self.detached || state.fabric() != FabricState::Attached {
            return;
        }
        let shell = self.driver.shell();
        if !shell.magic_ok() || shell.is_dark() {
            return;
        }
        let name_of = |hash: &str| self.catalog.by_hash(hash).map(|m| m.name.clone());
        let slots = shell
            .slots()
            .into_iter()
            .map(|s| ShellSlot::read(s, name_of))
            .collect();
        state.refresh(slots);
    }

    fn command(&mut self, state: &mut State, cmd: Command, fabric: &mut Vec<DriverEvent>) {
        let now = Instant::now();
        match cmd {
            Command::Drain { slot, drained } => {
                let now_drained = state.drain(slot, drained);
                self.published.publish_view(state);
                if let Some(tx) = now_drained {
                    let _ = tx.send(());
                }
            }
            Command::Resume { slot, done } => {
                state.resume(slot);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::BeginLoad {
                slots,
                model,
                estimate,
                done,
            } => {
                state.begin_load(&slots, model, estimate);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::EndLoad {
                slots,
                loaded,
                done,
            } => {
                self.refresh(state);
                state.end_load(&slots, loaded, now);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::Dark { done } => {
                state.set_fabric(FabricState::Dark);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::Reset { reply } => {
                let result = if self.detached {
                    Err("the shell's device moved".to_owned())
                } else {
                    self.driver.reset(fabric).map_err(|e| e.to_string())
                };
                if result.is_ok() {
                    state.set_fabric(FabricState::Attached);
                    self.refresh(state);
                }
                self.published.publish_view(state);
                let _ = reply.send(result);
            }
            Command::Detach { done } => {
                self.detached = true;
                state.set_fabric(FabricState::Dark);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::SetDefault { model, slot, done } => {
                state.set_default(model, slot, now);
                self.published.publish_view(state);
                let _ = done.send(());
            }
            Command::Counters { reply } => {
                let shell = self.driver.shell();
                let readable =
                    !self.detached && state.fabric() == FabricState::Attached && shell.magic_ok();
                let _ = reply.send(readable.then(|| shell.counters()));
            }
        }
    }
}

/// Runs the scheduler, and the fabric's driver with it, until the
/// admission channel closes and nothing is left, the stop token fires, or
/// the fabric fails. Returns the driver, for its `stop()`.
async fn run(
    mut state: State,
    mut ch: Inputs,
    driver: Driver,
    catalog: Arc<Catalog>,
    published: Arc<Published>,
    in_flight: Arc<InFlight>,
) -> Driver {
    let mut task = Task {
        driver,
        catalog,
        published,
        detached: false,
    };
    let published = task.published.clone();
    let mut meter = RateMeter {
        window_start: Instant::now(),
        count: 0,
        ewma: 0.0,
    };
    let mut started = Vec::new();
    let mut cancels = Vec::new();
    let mut fabric = Vec::new();
    let mut admitting = true;
    let one_thread = tokio::runtime::Handle::current().metrics().num_workers() == 1;
    published.publish(&state);
    published.publish_view(&state);
    // One timer for the earliest deadline, moved only when that changes: a
    // new one each turn of the loop would cost a timer-wheel insert and
    // removal per wake-up.
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    let failed = loop {
        let deadline = state.next_deadline();
        if let Some(t) = deadline {
            let t = tokio::time::Instant::from_std(t);
            // Re-armed after it fired too, so it can never be ready for a
            // deadline that has not come.
            if timer.deadline() != t || timer.is_elapsed() {
                timer.as_mut().reset(t);
            }
        }
        let mut completions = 0;
        let mut admitted = None;
        tokio::select! {
            adm = ch.admit.recv(), if admitting => match adm {
                Some(adm) => admitted = Some(adm),
                None => admitting = false,
            },
            Some(id) = ch.cancel.recv() => cancels.extend(state.cancel(id)),
            Some(cmd) = ch.commands.recv() => task.command(&mut state, cmd, &mut fabric),
            r = task.driver.ready() => {
                if let Err(e) = r.and_then(|()| task.driver.service(&mut fabric)) {
                    break Some(e);
                }
            },
            _ = &mut timer, if deadline.is_some() => state.expire(Instant::now(), &mut cancels),
            _ = ch.stop.cancelled() => {
                state.fail_all(&Outcome::ShuttingDown);
                published.publish(&state);
                break None;
            }
        }
        if admitted.is_some() && one_thread {
            // Woken by an admission: let the connections that are ready to
            // run go first, so the admissions they send are taken in this
            // turn. A task another wakes runs next on its thread, so
            // without this the scheduler took one admission a turn under
            // load (each a select, a doorbell and a publish). Alone, it
            // resumes at once. With more threads, a task that yields wakes
            // an idle one to steal it, which costs more than the turns it
            // saves.
            tokio::task::yield_now().await;
        }
        let now = Instant::now();
        if let Some(adm) = admitted {
            take_admission(&mut state, adm, now);
        }
        // Take what else has arrived before dispatching: under load, one
        // dispatch, one doorbell and one publish serve a burst of
        // admissions, not each of them.
        if admitting {
            for _ in 0..BATCH {
                let Ok(adm) = ch.admit.try_recv() else { break };
                take_admission(&mut state, adm, now);
            }
        }
        for (ctx, tag) in cancels.drain(..) {
            task.driver.cancel(ctx, tag);
        }
        // What the fabric reported frees contexts for what waits; what the
        // driver answers at once (a refusal) may free more.
        let mut shell_changed = false;
        let failure = loop {
            for ev in fabric.drain(..) {
                shell_changed |= matches!(ev, DriverEvent::ShellEvent { .. });
                if let Some(f) = state.on_driver(ev) {
                    if f.outcome.is_none() && !f.answered_before {
                        completions += 1;
                    }
                }
            }
            state.dispatch(now, &mut started);
            if started.is_empty() {
                break None;
            }
            let batch: Vec<Submission<'_>> = started
                .iter()
                .filter_map(|&t| state.submission(t))
                .collect();
            let result = task.driver.submit(&batch, &mut fabric);
            drop(batch);
            started.clear();
            if let Err(e) = result {
                break Some(e);
            }
            if fabric.is_empty() {
                break None;
            }
        };
        if let Some(e) = failure {
            break Some(e);
        }
        if shell_changed {
            // The shell signalled a change (EVENT_SEQ moved): its slots
            // are read again, and published.
            task.refresh(&mut state);
            task.published.publish_view(&state);
        }
        let rate = meter.tick(now, completions);
        published.rate.store(rate.to_bits(), Ordering::Relaxed);
        published.publish(&state);
        in_flight.set(state.in_flight() as u64, now);
        if !admitting && state.queued() == 0 && state.in_flight() == 0 {
            break None;
        }
    };
    if let Some(e) = failed {
        log::error!("scheduler: the fabric failed ({e}); answering every request");
        state.fail_all(&Outcome::FabricError {
            message: format!("the fabric failed: {e}"),
        });
        published.publish(&state);
    }
    task.driver
}

fn take_admission(state: &mut State, adm: Admission, now: Instant) {
    if let Err(mut refusal) = state.admit(adm, now) {
        let _ = refusal
            .admission
            .events
            .try_send(ReqEvent::Failed(refusal.outcome));
    }
}

/// Measures completions per second.
#[derive(Debug)]
struct RateMeter {
    window_start: Instant,
    count: u32,
    ewma: f64,
}

impl RateMeter {
    fn tick(&mut self, now: Instant, completions: u32) -> f64 {
        self.count += completions;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= Duration::from_millis(500) {
            let r = f64::from(self.count) / elapsed.as_secs_f64();
            self.ewma = if self.ewma == 0.0 {
                r
            } else {
                0.7 * self.ewma + 0.3 * r
            };
            self.count = 0;
            self.window_start = now;
        }
        self.ewma
    }
}
