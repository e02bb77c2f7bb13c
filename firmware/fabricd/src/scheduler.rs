//! Scheduling: a bounded queue, fair across clients, with deadlines and
//! cancellation.
//!
//! [`State`] is plain data and is tested without tokio; [`run`] is the one
//! task that owns it and the fabric's [`Driver`], reached through bounded
//! channels. Nothing here knows HTTP: requests arrive as [`Admission`]s and
//! leave through their own event channel.
//!
//! # Rules
//! - Admission is decided before anything is queued: the HTTP layer holds a
//!   permit of a semaphore sized to the queue capacity (queued + running),
//!   taken without waiting; no permit, no queueing (`overloaded`).
//! - Per model, clients take turns (round-robin over clients with waiting
//!   requests); one client's requests run in arrival order.
//! - A free decode context of a slot that holds a ready model takes the
//!   next request for that model.
//! - Every request has a deadline. A queued request past it is answered
//!   `deadline_exceeded` and dropped; a running one is answered and
//!   cancelled on the fabric, which frees its context.
//! - A cancel (the client went away, or a stop sequence matched) removes a
//!   queued request, or cancels a running one on the fabric at once.
//! - A request the fabric bounced because its slot was not ready goes back
//!   to the head of its client's queue: nothing accepted is lost.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fabric_hw::contract::{CqeStatus, Finish, SlotState};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::fabric::{Done, Driver, DriverCmd, DriverEvent, Job};
use crate::outcome::Outcome;

/// A request's id, unique for the daemon's life.
pub type ReqId = u64;

/// The scheduler's maps, looked up several times a request. Their keys are
/// ours (ids, tags, model names) or a client's address and `user`;
/// foldhash is several times faster than std's SipHash on them, and still
/// seeded per process, so a client cannot choose colliding keys.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Who asked: the fairness key. The client's address, and the request's
/// `user` if it names one (users behind one address, such as a proxy's,
/// take turns as separate clients).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientKey {
    pub ip: IpAddr,
    pub user: Option<Arc<str>>,
}

/// The sending end of a request's events. The scheduler never waits on it.
///
/// A request that hears only its end (`Finished` or `Failed`: a whole
/// response without stop sequences, most of them) has a oneshot: one
/// allocation. One that hears more (see [`Admission::announce`] and
/// [`Admission::progress`]) has an unbounded channel, for at most
/// `max_tokens` and 3 more events. `futures-channel` there rather than
/// tokio's mpsc: tokio's allocates a block of 32 slots (about 2 KiB here)
/// for every channel up front, and thousands of requests wait at once;
/// this one allocates per message.
#[derive(Debug)]
pub struct EventSender(Tx);

#[derive(Debug)]
enum Tx {
    /// Taken by the one send.
    One(Option<tokio::sync::oneshot::Sender<ReqEvent>>),
    Many(futures_channel::mpsc::UnboundedSender<ReqEvent>),
}

impl EventSender {
    /// Sends an event; fails if the request's handler has gone (or, for a
    /// request that hears only its end, if that was sent already).
    pub fn try_send(&mut self, ev: ReqEvent) -> Result<(), ReqEvent> {
        match &mut self.0 {
            Tx::One(tx) => match tx.take() {
                Some(tx) => tx.send(ev),
                None => Err(ev),
            },
            Tx::Many(tx) => tx.unbounded_send(ev).map_err(|e| e.into_inner()),
        }
    }

    pub fn is_closed(&self) -> bool {
        match &self.0 {
            Tx::One(Some(tx)) => tx.is_closed(),
            Tx::One(None) => true,
            Tx::Many(tx) => tx.is_closed(),
        }
    }
}

/// The receiving end of a request's events.
#[derive(Debug)]
pub struct Events(Rx);

#[derive(Debug)]
enum Rx {
    One(tokio::sync::oneshot::Receiver<ReqEvent>),
    Many(futures_channel::mpsc::UnboundedReceiver<ReqEvent>),
    /// The one event was taken (a oneshot must not be polled again).
    Over,
}

impl Events {
    /// The next event; `None` once the scheduler dropped the request.
    /// Cancel-safe, so it can sit in a `select!`.
    pub async fn recv(&mut self) -> Option<ReqEvent> {
        use futures_core::Stream;
        std::future::poll_fn(|cx| match &mut self.0 {
            Rx::One(rx) => std::future::Future::poll(std::pin::Pin::new(rx), cx).map(|r| {
                self.0 = Rx::Over;
                r.ok()
            }),
            Rx::Many(rx) => std::pin::Pin::new(rx).poll_next(cx),
            Rx::Over => std::task::Poll::Ready(None),
        })
        .await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<ReqEvent> {
        match &mut self.0 {
            Rx::One(rx) => {
                let ev = rx.try_recv().ok()?;
                self.0 = Rx::Over;
                Some(ev)
            }
            Rx::Many(rx) => rx.try_recv().ok(),
            Rx::Over => None,
        }
    }
}

/// A request's event channel: for its end only, or (`more`) for every
/// event it asked to hear.
pub fn events(more: bool) -> (EventSender, Events) {
    if more {
        let (tx, rx) = futures_channel::mpsc::unbounded();
        (EventSender(Tx::Many(tx)), Events(Rx::Many(rx)))
    } else {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (EventSender(Tx::One(Some(tx))), Events(Rx::One(rx)))
    }
}

/// A validated request the HTTP layer hands over.
#[derive(Debug)]
pub struct Admission {
    pub id: ReqId,
    pub model: Arc<str>,
    pub client: ClientKey,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: u64,
    /// Whether the fabric should report tokens as they come (streaming, or
    /// stop sequences to watch for).
    pub progress: bool,
    /// Whether the request hears `Queued` and `Started` (a stream must know
    /// it was admitted before its 200 goes out). A whole response only
    /// needs its end: one wake-up a request instead of three.
    pub announce: bool,
    pub stop_token: u32,
    pub deadline: Instant,
    pub timeout: Duration,
    pub received: Instant,
    pub events: EventSender,
    pub permit: Option<OwnedSemaphorePermit>,
}

/// What a request hears back.
#[derive(Debug, Clone, PartialEq)]
pub enum ReqEvent {
    /// It was admitted into the queue (the answer will be a result or a
    /// typed outcome; a 200 may be sent). Only if it asked to be announced.
    Queued,
    /// It reached the fabric. Only if it asked to be announced.
    Started { slot: u8, queued: Duration },
    /// More output tokens.
    Tokens(Vec<u32>),
    /// The fabric finished it.
    Finished {
        finish: Finish,
        tokens: Vec<u32>,
        n_tokens: u32,
        fabric_us: u32,
        /// Where it ran, and how long it waited for a context.
        slot: u8,
        queued: Duration,
    },
    /// It ended without a result.
    Failed(Outcome),
}

/// A slot as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotView {
    pub index: u8,
    pub state: SlotState,
    pub model: Option<Arc<str>>,
    pub hash: String,
    /// Whether new work may start here (false while draining for a load).
    pub accepting: bool,
}

#[derive(Debug)]
struct Slot {
    view: SlotView,
    free: Vec<u16>,
    lanes: usize,
}

#[derive(Debug)]
struct Running {
    adm: Admission,
    ctx: u16,
    slot: u8,
    /// How long it waited for its context.
    queued: Duration,
    /// Answered already (deadline or cancel): only the context is held.
    answered: bool,
}

#[derive(Debug, Default)]
struct ModelQueue {
    /// Clients with waiting requests, in turn order.
    turns: VecDeque<ClientKey>,
    per_client: Map<ClientKey, VecDeque<ReqId>>,
}

/// What [`State::admit`] refused, with the request handed back.
#[derive(Debug)]
pub struct Refusal {
    pub admission: Admission,
    pub outcome: Outcome,
}

/// The scheduler's state.
#[derive(Debug)]
pub struct State {
    slots: Vec<Slot>,
    queues: Map<Arc<str>, ModelQueue>,
    waiting: Map<ReqId, Admission>,
    /// By tag. A request is found here by its id only to cancel or expire
    /// it, by a scan: there are no more entries than fabric contexts, and
    /// a second map kept for that was two hash operations a request.
    running: Map<u32, Running>,
    deadlines: BTreeSet<(Instant, ReqId)>,
    next_tag: u32,
    /// Expected time to load a model, for `model_loading` answers.
    pub load_estimate: Duration,
}

impl State {
    /// A scheduler for slots with `lanes` contexts each.
    pub fn new(views: Vec<SlotView>, lanes: usize) -> State {
        let slots = views
            .into_iter()
            .map(|view| {
                let base = u16::from(view.index) * lanes as u16;
                Slot {
                    free: (base..base + lanes as u16).rev().collect(),
                    lanes,
                    view,
                }
            })
            .collect();
        State {
            slots,
            queues: Map::default(),
            waiting: Map::default(),
            running: Map::default(),
            deadlines: BTreeSet::new(),
            next_tag: 1,
            load_estimate: Duration::from_secs(5),
        }
    }

    /// Requests waiting for a context.
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// Requests on the fabric (including answered ones still holding a
    /// context until the fabric confirms the cancel).
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    /// The slots.
    pub fn slots(&self) -> Vec<SlotView> {
        self.slots.iter().map(|s| s.view.clone()).collect()
    }

    /// Free contexts across ready, accepting slots.
    pub fn free_contexts(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.view.accepting && s.view.state == SlotState::Ready)
            .map(|s| s.free.len())
            .sum()
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.iter().next().map(|(t, _)| *t)
    }

    /// Queues a request, or says why not.
    pub fn admit(&mut self, mut adm: Admission, now: Instant) -> Result<(), Box<Refusal>> {
        if adm.events.is_closed() {
            // The client went away before its admission got here (its
            // cancel may even have overtaken it): nothing to queue.
            return Ok(());
        }
        let serving = || {
            self.slots
                .iter()
                .filter(|s| s.view.model.as_ref() == Some(&adm.model))
                .map(|s| s.view.state)
        };
        if serving().next().is_none() {
            let outcome = Outcome::ModelNotLoaded {
                model: adm.model.to_string(),
            };
            return Err(Box::new(Refusal {
                admission: adm,
                outcome,
            }));
        }
        let ready = serving().any(|s| s == SlotState::Ready);
        if !ready && now + self.load_estimate > adm.deadline {
            // Only loading slots, and the load outlasts the deadline: say so
            // now rather than at the deadline.
            let outcome = Outcome::ModelLoading {
                model: adm.model.to_string(),
                retry_after: self.load_estimate,
            };
            return Err(Box::new(Refusal {
                admission: adm,
                outcome,
            }));
        }
        if !ready && !serving().any(|s| s == SlotState::Loading) {
            let outcome = Outcome::ModelNotLoaded {
                model: adm.model.to_string(),
            };
            return Err(Box::new(Refusal {
                admission: adm,
                outcome,
            }));
        }
        self.deadlines.insert((adm.deadline, adm.id));
        if adm.announce {
            let _ = adm.events.try_send(ReqEvent::Queued);
        }
        self.enqueue_back(adm);
        Ok(())
    }

    fn enqueue_back(&mut self, adm: Admission) {
        let q = self.queues.entry(adm.model.clone()).or_default();
        let list = q.per_client.entry(adm.client.clone()).or_default();
        if list.is_empty() {
            q.turns.push_back(adm.client.clone());
        }
        list.push_back(adm.id);
        self.waiting.insert(adm.id, adm);
    }

    fn enqueue_front(&mut self, adm: Admission) {
        let q = self.queues.entry(adm.model.clone()).or_default();
        let list = q.per_client.entry(adm.client.clone()).or_default();
        if list.is_empty() {
            q.turns.push_front(adm.client.clone());
        }
        list.push_front(adm.id);
        self.waiting.insert(adm.id, adm);
    }

    /// The next waiting request for `model`, in turn order.
    fn pop(&mut self, model: &Arc<str>) -> Option<Admission> {
        let q = self.queues.get_mut(model)?;
        while let Some(client) = q.turns.pop_front() {
            let Some(list) = q.per_client.get_mut(&client) else {
                continue;
            };
            while let Some(id) = list.pop_front() {
                if let Some(adm) = self.waiting.remove(&id) {
                    if adm.events.is_closed() {
                        // Its client went away and the cancel is still on
                        // its way: it never reaches the fabric.
                        self.deadlines.remove(&(adm.deadline, id));
                        continue;
                    }
                    if list.is_empty() {
                        q.per_client.remove(&client);
                    } else {
                        q.turns.push_back(client);
                    }
                    return Some(adm);
                }
                // Cancelled or expired while waiting: skip.
            }
            q.per_client.remove(&client);
        }
        None
    }

    fn tag(&mut self) -> u32 {
        loop {
            let t = self.next_tag;
            self.next_tag = self.next_tag.wrapping_add(1).max(1);
            if !self.running.contains_key(&t) {
                return t;
            }
        }
    }

    /// Starts what can start now (the tests' form of [`State::dispatch_into`]).
    #[cfg(test)]
    fn dispatch(&mut self, now: Instant) -> Vec<DriverCmd> {
        let mut cmds = Vec::new();
        self.dispatch_into(now, &mut cmds);
        cmds
    }

    /// Starts what can start now: adds its submissions to `cmds`.
    pub fn dispatch_into(&mut self, now: Instant, cmds: &mut Vec<DriverCmd>) {
        for i in 0..self.slots.len() {
            loop {
                let slot = &self.slots[i];
                if !slot.view.accepting
                    || slot.view.state != SlotState::Ready
                    || slot.free.is_empty()
                {
                    break;
                }
                let Some(model) = slot.view.model.clone() else {
                    break;
                };
                let Some(mut adm) = self.pop(&model) else {
                    break;
                };
                let slot = &mut self.slots[i];
                let Some(ctx) = slot.free.pop() else { break };
                let index = slot.view.index;
                let tag = self.tag();
                let queued = now.saturating_duration_since(adm.received);
                if adm.announce {
                    let _ = adm.events.try_send(ReqEvent::Started {
                        slot: index,
                        queued,
                    });
                }
                cmds.push(DriverCmd::Submit(Job {
                    tag,
                    ctx,
                    prompt: adm.prompt.clone(),
                    params: fabric_hw::shell::Params {
                        max_tokens: adm.max_tokens,
                        temperature: adm.temperature,
                        seed: adm.seed,
                        stop_token: adm.stop_token,
                        stream: adm.progress,
                    },
                }));
                self.running.insert(
                    tag,
                    Running {
                        adm,
                        ctx,
                        slot: index,
                        queued,
                        answered: false,
                    },
                );
            }
        }
    }

    /// The client no longer wants request `id`.
    pub fn cancel(&mut self, id: ReqId) -> Option<DriverCmd> {
        if let Some(adm) = self.waiting.remove(&id) {
            self.deadlines.remove(&(adm.deadline, id));
            return None;
        }
        let (&tag, r) = self.running.iter_mut().find(|(_, r)| r.adm.id == id)?;
        if !r.answered {
            r.answered = true;
            self.deadlines.remove(&(r.adm.deadline, id));
        }
        Some(DriverCmd::Cancel { ctx: r.ctx, tag })
    }

    /// Answers every request whose deadline is at or before `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<DriverCmd> {
        let mut cmds = Vec::new();
        while let Some(&(when, id)) = self.deadlines.iter().next() {
            if when > now {
                break;
            }
            self.deadlines.remove(&(when, id));
            if let Some(mut adm) = self.waiting.remove(&id) {
                let _ = adm
                    .events
                    .try_send(ReqEvent::Failed(Outcome::DeadlineExceeded {
                        deadline: adm.timeout,
                    }));
                continue;
            }
            if let Some((&tag, r)) = self.running.iter_mut().find(|(_, r)| r.adm.id == id) {
                if !r.answered {
                    r.answered = true;
                    let _ = r
                        .adm
                        .events
                        .try_send(ReqEvent::Failed(Outcome::DeadlineExceeded {
                            deadline: r.adm.timeout,
                        }));
                    cmds.push(DriverCmd::Cancel { ctx: r.ctx, tag });
                }
            }
        }
        cmds
    }

    fn release(&mut self, tag: u32) -> Option<Running> {
        let r = self.running.remove(&tag)?;
        self.deadlines.remove(&(r.adm.deadline, r.adm.id));
        if let Some(slot) = self.slots.iter_mut().find(|s| s.view.index == r.slot) {
            slot.free.push(r.ctx);
        }
        Some(r)
    }

    /// Takes in what the driver reported. Returns the request's admission
    /// time and outcome label for finished requests, for metrics.
    pub fn on_driver(&mut self, ev: DriverEvent) -> Option<Finished> {
        match ev {
            DriverEvent::Tokens { tag, tokens } => {
                if let Some(r) = self.running.get_mut(&tag) {
                    // Only a request that asked for progress hears it (one
                    // that did not has a channel for its end alone).
                    if !r.answered && r.adm.progress {
                        let _ = r.adm.events.try_send(ReqEvent::Tokens(tokens));
                    }
                }
                None
            }
            DriverEvent::Done(done) => self.done(done),
            DriverEvent::Refused { tag, reason, .. } => {
                let mut r = self.release(tag)?;
                let outcome = Outcome::FabricError { message: reason };
                if !r.answered {
                    let _ = r.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
                }
                Some(Finished::of(&r, Some(outcome)))
            }
            DriverEvent::ShellEvent { .. } => None,
        }
    }

    fn done(&mut self, d: Done) -> Option<Finished> {
        let mut r = self.release(d.tag)?;
        if r.answered {
            return Some(Finished::of(&r, None));
        }
        let outcome = match d.status {
            CqeStatus::Ok if d.intact => {
                let _ = r.adm.events.try_send(ReqEvent::Finished {
                    finish: d.finish,
                    tokens: d.tokens,
                    n_tokens: d.n_tokens,
                    fabric_us: d.fabric_us,
                    slot: r.slot,
                    queued: r.queued,
                });
                return Some(Finished::of(&r, None));
            }
            CqeStatus::Ok => Outcome::FabricError {
                message:
                    "the output failed its CRC check (corrupted between the decoder and the host)"
                        .into(),
            },
            CqeStatus::SlotNotReady => {
                // Never ran: back to the head of its client's queue.
                let adm = r.adm;
                self.deadlines.insert((adm.deadline, adm.id));
                self.enqueue_front(adm);
                return None;
            }
            CqeStatus::Cancelled => Outcome::FabricError {
                message: "the fabric cancelled the request".into(),
            },
            other => Outcome::FabricError {
                message: format!("the fabric ended the request with status {other:?}"),
            },
        };
        log::warn!(
            "scheduler: request {} (tag {}, context {}): {}",
            r.adm.id,
            d.tag,
            d.ctx,
            outcome.message()
        );
        let _ = r.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
        Some(Finished::of(&r, Some(outcome)))
    }

    /// Replaces what the slots hold. Contexts of slots that went away are
    /// forgotten once their requests finish.
    pub fn set_slots(&mut self, views: Vec<SlotView>) {
        for mut view in views {
            if let Some(slot) = self.slots.iter_mut().find(|s| s.view.index == view.index) {
                // Draining is the scheduler's own state, not the shell's.
                view.accepting = slot.view.accepting;
                slot.view = view;
            }
        }
        // A model no slot holds or is loading any more (a load failed, a
        // slot was emptied) will not run: answer its waiting requests now.
        let servable: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|s| matches!(s.view.state, SlotState::Ready | SlotState::Loading))
            .filter_map(|s| s.view.model.clone())
            .collect();
        let stranded: Vec<ReqId> = self
            .waiting
            .iter()
            .filter(|(_, a)| !servable.contains(&a.model))
            .map(|(id, _)| *id)
            .collect();
        for id in stranded {
            if let Some(mut adm) = self.waiting.remove(&id) {
                self.deadlines.remove(&(adm.deadline, id));
                let _ = adm
                    .events
                    .try_send(ReqEvent::Failed(Outcome::ModelNotLoaded {
                        model: adm.model.to_string(),
                    }));
            }
        }
    }

    /// Stops or resumes starting work in a slot.
    pub fn set_accepting(&mut self, index: u8, accepting: bool) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.view.index == index) {
            slot.view.accepting = accepting;
        }
    }

    /// Requests running in a slot.
    pub fn running_in(&self, index: u8) -> usize {
        self.running.values().filter(|r| r.slot == index).count()
    }

    /// Lanes per slot.
    pub fn lanes(&self) -> usize {
        self.slots.first().map_or(0, |s| s.lanes)
    }

    /// Answers everything (the fabric is gone, or we are shutting down).
    pub fn fail_all(&mut self, outcome: &Outcome) {
        for (_, mut adm) in self.waiting.drain() {
            let _ = adm.events.try_send(ReqEvent::Failed(outcome.clone()));
        }
        for (_, mut r) in self.running.drain() {
            if !r.answered {
                let _ = r.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
            }
        }
        self.queues.clear();
        self.deadlines.clear();
    }
}

/// A request that left the fabric, for metrics.
#[derive(Debug, Clone)]
pub struct Finished {
    pub received: Instant,
    pub outcome: Option<Outcome>,
    pub answered_before: bool,
}

impl Finished {
    fn of(r: &Running, outcome: Option<Outcome>) -> Finished {
        Finished {
            received: r.adm.received,
            outcome,
            answered_before: r.answered,
        }
    }
}

/// Figures the scheduler publishes for the HTTP layer.
#[derive(Debug, Default)]
pub struct Published {
    pub queued: AtomicUsize,
    pub in_flight: AtomicUsize,
    /// Completions per second, an exponentially weighted average (f64 bits).
    pub rate: AtomicU64,
    pub slots: Mutex<Vec<SlotView>>,
}

impl Published {
    /// Completions per second lately.
    pub fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    /// The slots as last published.
    pub fn slots(&self) -> Vec<SlotView> {
        self.slots
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

/// What the scheduler task is told besides admissions and cancels.
#[derive(Debug)]
pub enum Control {
    /// Re-read slot states from the shell.
    Slots(Vec<SlotView>),
    /// Stop (false) or resume (true) starting work in a slot.
    Accepting { slot: u8, accepting: bool },
    /// Reply with the number of requests running in a slot.
    RunningIn {
        slot: u8,
        reply: tokio::sync::oneshot::Sender<usize>,
    },
    /// How long a load in progress is expected to take.
    LoadEstimate(Duration),
    /// Initialise the rings again (after a full reconfiguration reset the
    /// shell); every request the fabric held is answered as a fault.
    Reset {
        reply: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// Reply once every message sent before this one has been applied and
    /// published, so that what the rotation tells its caller is what
    /// `/readyz` already shows.
    Settled {
        reply: tokio::sync::oneshot::Sender<()>,
    },
}

/// The channels of the scheduler task.
#[derive(Debug)]
pub struct Channels {
    pub admit: mpsc::Receiver<Admission>,
    /// Cancels are bounded by the admitted requests (each sends at most
    /// one), which the semaphore bounds: unbounded here cannot grow past it.
    pub cancel: mpsc::UnboundedReceiver<ReqId>,
    pub control: mpsc::Receiver<Control>,
    /// Fires when shutdown's grace is over: whatever is left is answered
    /// `shutting_down` and the task ends.
    pub stop: tokio_util::sync::CancellationToken,
}

/// Runs the scheduler, and the fabric's driver with it, until the
/// admission channel closes and nothing is left, or the fabric fails.
pub async fn run(
    mut state: State,
    mut ch: Channels,
    mut driver: Driver,
    published: Arc<Published>,
    in_flight: Arc<crate::stats::InFlight>,
) -> Driver {
    let mut meter = RateMeter {
        window_start: Instant::now(),
        count: 0,
        ewma: 0.0,
    };
    let mut cmds = Vec::new();
    let mut fabric = Vec::new();
    let mut admitting = true;
    let one_thread = tokio::runtime::Handle::current().metrics().num_workers() == 1;
    publish(&state, &published);
    publish_slots(&state, &published);
    // One timer for the earliest deadline, moved only when that changes: a
    // new one each turn of the loop would cost a timer-wheel insert and
    // removal per wake-up.
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    loop {
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
        let mut slots_changed = false;
        let mut admitted = None;
        tokio::select! {
            adm = ch.admit.recv(), if admitting => match adm {
                Some(adm) => admitted = Some(adm),
                None => admitting = false,
            },
            Some(id) = ch.cancel.recv() => cmds.extend(state.cancel(id)),
            Some(c) = ch.control.recv() => match c {
                Control::Slots(views) => {
                    state.set_slots(views);
                    slots_changed = true;
                }
                Control::Accepting { slot, accepting } => {
                    state.set_accepting(slot, accepting);
                    slots_changed = true;
                }
                Control::RunningIn { slot, reply } => { let _ = reply.send(state.running_in(slot)); }
                Control::LoadEstimate(d) => state.load_estimate = d,
                Control::Reset { reply } => cmds.push(DriverCmd::Reset { reply }),
                // Each turn publishes before the next message is read, and
                // the channel is in order: the slot changes sent before
                // this one are visible now.
                Control::Settled { reply } => { let _ = reply.send(()); }
            },
            r = driver.ready() => {
                if let Err(e) = r.and_then(|()| driver.service(&mut fabric)) {
                    log::error!("scheduler: the fabric failed ({e}); answering every request");
                    state.fail_all(&Outcome::FabricError { message: format!("the fabric failed: {e}") });
                    publish(&state, &published);
                    return driver;
                }
            },
            _ = &mut timer, if deadline.is_some() => cmds.extend(state.expire(Instant::now())),
            _ = ch.stop.cancelled() => {
                state.fail_all(&Outcome::ShuttingDown);
                publish(&state, &published);
                return driver;
            }
        }
        if admitted.is_some() && one_thread {
            // Woken by an admission: let the connections that are ready to
            // run go first, so the admissions they send are taken in this
            // turn. A task another wakes runs next on its thread, so
            // without this the scheduler took one admission a turn under
            // load (0.8 turns a request, each a select, a doorbell and a
            // publish). Alone, it resumes at once. With more threads, a
            // task that yields wakes an idle one to steal it, which costs
            // more than the turns it saves.
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
        // What the fabric reported frees contexts for what waits; what the
        // driver answers at once (a refusal, a reset) may free more.
        loop {
            for ev in fabric.drain(..) {
                completions += take_driver_event(&mut state, ev);
            }
            state.dispatch_into(now, &mut cmds);
            if cmds.is_empty() {
                break;
            }
            if let Err(e) = driver.execute(&mut cmds, &mut fabric) {
                log::error!("scheduler: the fabric failed ({e}); answering every request");
                state.fail_all(&Outcome::FabricError {
                    message: format!("the fabric failed: {e}"),
                });
                publish(&state, &published);
                return driver;
            }
            if fabric.is_empty() {
                break;
            }
        }
        let rate = meter.tick(now, completions);
        published.rate.store(rate.to_bits(), Ordering::Relaxed);
        publish(&state, &published);
        if slots_changed {
            publish_slots(&state, &published);
        }
        in_flight.set(state.in_flight() as u64, now);
        if !admitting && state.queued() == 0 && state.in_flight() == 0 {
            return driver;
        }
    }
}

/// Messages taken in one go after the one that woke the scheduler.
const BATCH: usize = 64;

fn take_admission(state: &mut State, adm: Admission, now: Instant) {
    if let Err(mut refusal) = state.admit(adm, now) {
        let _ = refusal
            .admission
            .events
            .try_send(ReqEvent::Failed(refusal.outcome));
    }
}

/// Returns 1 for a request the fabric completed normally.
fn take_driver_event(state: &mut State, ev: DriverEvent) -> u32 {
    match state.on_driver(ev) {
        Some(f) if f.outcome.is_none() && !f.answered_before => 1,
        _ => 0,
    }
}

fn publish(state: &State, published: &Published) {
    published.queued.store(state.queued(), Ordering::Relaxed);
    published
        .in_flight
        .store(state.in_flight(), Ordering::Relaxed);
}

/// The slots change only on control messages; copying them (with their
/// hashes) on every event would cost allocations per request.
fn publish_slots(state: &State, published: &Published) {
    let slots = state.slots();
    let mut guard = published
        .slots
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if *guard != slots {
        *guard = slots;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(models: &[&str]) -> Vec<SlotView> {
        models
            .iter()
            .enumerate()
            .map(|(i, m)| SlotView {
                index: i as u8,
                state: SlotState::Ready,
                model: Some(Arc::from(*m)),
                hash: String::new(),
                accepting: true,
            })
            .collect()
    }

    fn adm(id: ReqId, client: &str, model: &str, now: Instant) -> (Admission, Events) {
        let (tx, rx) = events(true);
        (
            Admission {
                id,
                model: Arc::from(model),
                client: ClientKey {
                    ip: IpAddr::from([127, 0, 0, 1]),
                    user: Some(Arc::from(client)),
                },
                prompt: vec![1, 2],
                max_tokens: 4,
                temperature: 0.0,
                seed: 0,
                progress: false,
                announce: true,
                stop_token: 256,
                deadline: now + Duration::from_secs(10),
                timeout: Duration::from_secs(10),
                received: now,
                events: tx,
                permit: None,
            },
            rx,
        )
    }

    fn submitted(cmds: &[DriverCmd]) -> Vec<(u32, u16)> {
        cmds.iter()
            .filter_map(|c| match c {
                DriverCmd::Submit(j) => Some((j.tag, j.ctx)),
                _ => None,
            })
            .collect()
    }

    fn done(tag: u32, ctx: u16) -> DriverEvent {
        DriverEvent::Done(Done {
            tag,
            ctx,
            status: CqeStatus::Ok,
            finish: Finish::Length,
            tokens: vec![7],
            n_tokens: 1,
            fabric_us: 10,
            intact: true,
        })
    }

    #[test]
    fn a_single_request_is_not_starved_by_a_flood() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 1);
        let mut rxs = Vec::new();
        for i in 0..500 {
            let (a, rx) = adm(i, "flood", "m", now);
            s.admit(a, now).expect("admit");
            rxs.push(rx);
        }
        let (a, mut lone_rx) = adm(1000, "lone", "m", now);
        s.admit(a, now).expect("admit");
        // One context: the flood's first request runs, then the lone one.
        let first = submitted(&s.dispatch(now));
        assert_eq!(first.len(), 1);
        s.on_driver(done(first[0].0, first[0].1));
        let second = submitted(&s.dispatch(now));
        assert_eq!(second.len(), 1);
        assert_eq!(lone_rx.try_recv(), Some(ReqEvent::Queued));
        assert!(matches!(lone_rx.try_recv(), Some(ReqEvent::Started { .. })));
    }

    #[test]
    fn within_a_client_order_is_kept() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 1);
        let mut rxs = Vec::new();
        for i in 0..3 {
            let (a, rx) = adm(i, "c", "m", now);
            s.admit(a, now).expect("admit");
            rxs.push(rx);
        }
        for (expected, rx) in rxs.iter_mut().enumerate() {
            let cmds = s.dispatch(now);
            let (tag, ctx) = submitted(&cmds)[0];
            assert_eq!(rx.try_recv(), Some(ReqEvent::Queued));
            assert!(
                matches!(rx.try_recv(), Some(ReqEvent::Started { .. })),
                "request {expected} next"
            );
            s.on_driver(done(tag, ctx));
        }
    }

    #[test]
    fn deadlines_answer_queued_and_cancel_running() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 1);
        let (mut a, mut rx_run) = adm(1, "a", "m", now);
        a.deadline = now + Duration::from_millis(5);
        s.admit(a, now).expect("admit");
        let (mut b, mut rx_wait) = adm(2, "b", "m", now);
        b.deadline = now + Duration::from_millis(5);
        s.admit(b, now).expect("admit");
        let (tag, ctx) = submitted(&s.dispatch(now))[0];
        let later = now + Duration::from_millis(6);
        let cmds = s.expire(later);
        assert!(
            matches!(cmds.as_slice(), [DriverCmd::Cancel { tag: t, ctx: c }] if *t == tag && *c == ctx)
        );
        assert_eq!(rx_run.try_recv(), Some(ReqEvent::Queued));
        assert!(matches!(rx_run.try_recv(), Some(ReqEvent::Started { .. })));
        assert!(matches!(
            rx_run.try_recv(),
            Some(ReqEvent::Failed(Outcome::DeadlineExceeded { .. }))
        ));
        assert_eq!(rx_wait.try_recv(), Some(ReqEvent::Queued));
        assert!(matches!(
            rx_wait.try_recv(),
            Some(ReqEvent::Failed(Outcome::DeadlineExceeded { .. }))
        ));
        assert_eq!(s.queued(), 0);
        // The context stays held until the fabric confirms the cancel.
        assert_eq!(s.free_contexts(), 0);
        s.on_driver(DriverEvent::Done(Done {
            status: CqeStatus::Cancelled,
            ..match done(tag, ctx) {
                DriverEvent::Done(d) => d,
                _ => unreachable!(),
            }
        }));
        assert_eq!(s.free_contexts(), 1);
        assert!(rx_run.try_recv().is_none(), "no second answer");
    }

    #[test]
    fn a_cancelled_request_frees_its_context() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 2);
        let (a, _rx) = adm(1, "a", "m", now);
        s.admit(a, now).expect("admit");
        let (tag, ctx) = submitted(&s.dispatch(now))[0];
        assert!(matches!(s.cancel(1), Some(DriverCmd::Cancel { tag: t, .. }) if t == tag));
        s.on_driver(done(tag, ctx));
        assert_eq!(s.free_contexts(), 2);
        // A queued one is just dropped.
        let (a, _rx) = adm(2, "a", "m", now);
        let (b, _rx2) = adm(3, "a", "m", now);
        let mut s = State::new(views(&["m"]), 1);
        s.admit(a, now).expect("admit");
        s.admit(b, now).expect("admit");
        s.dispatch(now);
        assert!(s.cancel(3).is_none());
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn a_request_whose_client_went_away_never_reaches_the_fabric() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 1);
        // Gone before its admission arrived (its cancel overtook it).
        let (a, ra) = adm(1, "a", "m", now);
        drop(ra);
        assert!(s.cancel(1).is_none());
        s.admit(a, now).expect("admit");
        assert_eq!(s.queued(), 0);
        // Gone while it waited: skipped, the next one gets the context.
        let (b, rb) = adm(2, "a", "m", now);
        let (c, _rc) = adm(3, "b", "m", now);
        s.admit(b, now).expect("admit");
        s.admit(c, now).expect("admit");
        drop(rb);
        let cmds = s.dispatch(now);
        assert_eq!(submitted(&cmds).len(), 1);
        assert_eq!(
            s.running.values().map(|r| r.adm.id).collect::<Vec<_>>(),
            [3]
        );
        assert_eq!(s.next_deadline(), Some(now + Duration::from_secs(10)));
        assert_eq!(s.deadlines.len(), 1, "the skipped one's deadline is gone");
    }

    #[test]
    fn each_model_goes_to_its_slot_and_unloaded_ones_are_refused() {
        let now = Instant::now();
        let mut s = State::new(views(&["kjv", "fortunes"]), 2);
        let (a, _ra) = adm(1, "x", "fortunes", now);
        s.admit(a, now).expect("admit");
        let cmds = s.dispatch(now);
        assert_eq!(submitted(&cmds)[0].1 / 2, 1, "a context of slot 1");
        let (b, _rb) = adm(2, "x", "other", now);
        let refusal = s.admit(b, now).expect_err("not loaded");
        assert!(matches!(refusal.outcome, Outcome::ModelNotLoaded { .. }));
    }

    #[test]
    fn bounced_requests_go_back_to_the_head() {
        let now = Instant::now();
        let mut s = State::new(views(&["m"]), 1);
        let (a, mut ra) = adm(1, "a", "m", now);
        let (b, _rb) = adm(2, "a", "m", now);
        s.admit(a, now).expect("admit");
        s.admit(b, now).expect("admit");
        let (tag, ctx) = submitted(&s.dispatch(now))[0];
        let mut d = match done(tag, ctx) {
            DriverEvent::Done(d) => d,
            _ => unreachable!(),
        };
        d.status = CqeStatus::SlotNotReady;
        s.on_driver(DriverEvent::Done(d));
        assert_eq!(s.queued(), 2);
        assert_eq!(ra.try_recv(), Some(ReqEvent::Queued));
        assert!(matches!(ra.try_recv(), Some(ReqEvent::Started { .. })));
        s.dispatch(now);
        assert!(
            matches!(ra.try_recv(), Some(ReqEvent::Started { .. })),
            "request 1 runs again first"
        );
    }
}
