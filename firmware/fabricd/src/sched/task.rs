//! The one task that owns the scheduler's [`State`] and the fabric's
//! [`Driver`], and the handles that reach it through bounded channels.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::shell::Submission;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::events::ReqEvent;
use super::handle::{Command, Control, Handle, Published, Withdraw};
use super::outcome::Outcome;
use super::policy::Policy;
use super::request::Admission;
use super::slots::{FabricState, ShellSlot};
use super::state::State;
use crate::catalog::Catalog;
use crate::fabric::{Driver, DriverEvent, Events};
use crate::stats::InFlight;

/// A running scheduler: its handle, its task (which gives the driver back
/// when it ends) and its stop token.
#[derive(Debug)]
pub struct Scheduler {
    pub handle: Handle,
    /// Boxed: tokio moves a task's `Poll<Output>` by value on every poll
    /// (twice, through its panic guard), and the driver is about 8.6 KB
    /// (its rings' per-context state, held inline): unboxed, that was
    /// 34 KB of copying a request, the largest single cost of a keystroke
    /// under callgrind (`results/arm-cost-2026-12-06-run2.md`).
    pub task: tokio::task::JoinHandle<Box<Driver>>,
    /// Fires when shutdown's grace is over: whatever is left is answered
    /// `shutting_down` and the task ends.
    pub stop: CancellationToken,
}

/// Starts the scheduler's task with the driver it runs: the slots as the
/// shell shows them now, named from `catalog`. `queue` is the admission
/// channel's size (the queue capacity); `typing` the features' settings.
pub fn spawn(
    driver: Driver,
    catalog: Arc<Catalog>,
    queue: usize,
    in_flight: Arc<InFlight>,
    typing: &crate::config::TypingSettings,
) -> Scheduler {
    let shell = driver.shell().clone();
    let info = shell.info().clone();
    let name_of = |hash: &str| catalog.by_identity(hash).map(|m| m.name.clone());
    let slots = shell
        .slots()
        .into_iter()
        .map(|s| ShellSlot::read(s, name_of))
        .collect();
    let state = State::with_policy(slots, info.contexts_per_slot, Policy::new(typing, &info));
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
    cancel: mpsc::UnboundedReceiver<Withdraw>,
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
        if !shell.magic_ok() {
            return;
        }
        let name_of = |hash: &str| self.catalog.by_identity(hash).map(|m| m.name.clone());
        let slots = shell
            .slots()
            .into_iter()
            .map(|s| ShellSlot::read(s, name_of))
            .collect();
        state.refresh(slots);
    }

    fn command(&mut self, state: &mut State, cmd: Command, fabric: &mut Events) {
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
                    self.driver
                        .reset(fabric)
                        .map_err(|e| fabric_hw::Chain(&e).to_string())
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
) -> Box<Driver> {
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
    let mut fabric = task.driver.events();
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
            Some(w) = ch.cancel.recv() => match w {
                Withdraw::Cancel(id) => cancels.extend(state.cancel(id)),
                Withdraw::Supersede { session, by } => state.supersede_session(&session, by),
            },
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
        // Supersedes decided while admitting cancel on the fabric too.
        state.take_cancels(&mut cancels);
        for (ctx, tag) in cancels.drain(..) {
            task.driver.cancel(ctx, tag);
        }
        // What the fabric reported frees contexts for what waits; what the
        // driver answers at once (a refusal) may free more.
        let mut shell_changed = false;
        let failure = loop {
            for ev in fabric.iter() {
                shell_changed |= matches!(ev, DriverEvent::ShellEvent { .. });
                if let Some(f) = state.on_driver(ev) {
                    if f.outcome.is_none() && !f.answered_before {
                        completions += 1;
                    }
                }
            }
            fabric.clear();
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
        state.tick(now);
        let rate = meter.tick(now, completions);
        published.rate.store(rate.to_bits(), Ordering::Relaxed);
        published.publish(&state);
        in_flight.set(state.in_flight() as u64, now);
        if !admitting && state.queued() == 0 && state.in_flight() == 0 {
            break None;
        }
    };
    if let Some(e) = failed {
        let e = fabric_hw::Chain(&e);
        log::error!("scheduler: the fabric failed ({e}); answering every request");
        state.fail_all(&Outcome::FabricError {
            message: format!("the fabric failed: {e}"),
        });
        published.publish(&state);
    }
    Box::new(task.driver)
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
