//! The scheduler's state: plain data, no tokio, tested on its own.
//!
//! Its policy ([`Policy`]) says how work is ordered and admitted; the
//! typing sessions' part of it (supersede, join) is `sessions`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::{CqeStatus, SlotState};
use fabric_hw::shell::Submission;
use tokio::sync::oneshot;

use super::events::ReqEvent;
use super::held::{HeldSet, Spot};
use super::outcome::Outcome;
use super::policy::{Class, Policy, ServiceMeter};
use super::queue::ModelQueue;
use super::request::{Admission, ReqId, SessionKey};
use super::sessions::Inherited;
use super::slots::{FabricState, FabricView, ShellSlot, Slot};
use crate::fabric::{Done, DriverEvent};

/// The scheduler's maps, looked up several times a request. Their keys are
/// ours (ids, tags, model names) or a client's address and `user`;
/// foldhash is several times faster than std's SipHash on them, and still
/// seeded per process, so a client cannot choose colliding keys.
pub(super) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Room for this many entries a table keeps when it shrinks.
const KEEP: usize = 64;

/// Shrinks `map` to room for [`KEEP`] entries (or its own), if it has more.
fn shrink<K: Eq + std::hash::Hash, V>(map: &mut Map<K, V>) {
    if map.capacity() > KEEP {
        map.shrink_to(KEEP);
    }
}

#[derive(Debug)]
pub(super) struct Running {
    pub adm: Admission,
    pub ctx: u16,
    pub slot: u8,
    /// How long it waited for its context.
    pub queued: Duration,
    /// Answered already (deadline, cancel or supersede): only the context
    /// is held.
    pub answered: bool,
    /// Counted among its slot's bulk contexts.
    pub bulk: bool,
}

/// A request waiting for a context, and where.
#[derive(Debug)]
pub(super) struct Waiting {
    pub adm: Admission,
    pub class: Class,
    pub spot: Spot,
}

/// What [`State::admit`] refused, with the request handed back.
#[derive(Debug)]
pub struct Refusal {
    pub admission: Admission,
    pub outcome: Outcome,
}

/// A request that left the fabric, for the completion rate.
#[derive(Debug, Clone)]
pub struct Finished {
    pub received: Instant,
    pub outcome: Option<Outcome>,
    pub answered_before: bool,
}

impl Finished {
    fn of(r: &Running, outcome: Option<Outcome>) -> Finished {
        Finished {
            received: r.adm.request.received,
            outcome,
            answered_before: r.answered,
        }
    }
}

/// What the scheduler counts of the typing features, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TypingCounts {
    /// Superseded while waiting (or arriving after a newer one).
    pub superseded_queued: u64,
    /// Superseded while on the fabric: cancelled there.
    pub superseded_running: u64,
    /// Took over their session's decoding request.
    pub joined: u64,
    /// Refused at once as predicted to be late.
    pub predicted_late: u64,
    /// Held back until their session paused (see `held`).
    pub held: u64,
    /// Superseded while held: never in a line, never on the fabric.
    pub superseded_held: u64,
    /// Held, and run before their session paused, on a slot that had
    /// nothing else to take.
    pub held_early: u64,
}

/// A model's service meter and the contexts freed since it last ticked.
#[derive(Debug, Default)]
pub(super) struct Meter {
    pub meter: ServiceMeter,
    pub freed: u32,
}

/// The scheduler's state: the slots, the queues and what runs.
#[derive(Debug)]
pub struct State {
    pub(super) policy: Policy,
    pub(super) slots: Vec<Slot>,
    fabric: FabricState,
    /// The model `default` names, once set.
    default: Option<Arc<str>>,
    pub(super) queues: Map<Arc<str>, ModelQueue>,
    /// Per model, the requests held until their sessions pause (`held`).
    pub(super) held: Map<Arc<str>, HeldSet>,
    pub(super) waiting: Map<ReqId, Waiting>,
    /// Who holds a place now, where that is not the request the place is
    /// named after (it took it over by superseding; see `queue`).
    pub(super) holders: Map<ReqId, ReqId>,
    /// By tag. A request is found here by its id only to cancel, expire or
    /// supersede it, by a scan: there are no more entries than fabric
    /// contexts, and a second map kept for that was two hash operations a
    /// request.
    pub(super) running: Map<u32, Running>,
    pub(super) deadlines: BTreeSet<(Instant, ReqId)>,
    /// Per typing session, its request not yet answered (waiting or
    /// running). An entry leaves with its request, so there are never more
    /// than admitted requests: the queue's capacity bounds the table.
    pub(super) sessions: Map<SessionKey, ReqId>,
    /// Per typing session answered at the edge (cache, typed forward)
    /// while its older request was still on its way here (the admission
    /// and the edge's word come by different channels): that session's
    /// requests below this id are stale. An entry leaves when a newer
    /// request of the session comes; at most
    /// [`MAX_FLOORS`](super::sessions::MAX_FLOORS) are kept, as
    /// each only saves the fabric a stale request's work.
    pub(super) floors: Map<SessionKey, ReqId>,
    /// Cancels for the fabric decided while admitting (a supersede), taken
    /// by the task.
    pub(super) cancels: Vec<(u16, u32)>,
    pub(super) meters: Map<Arc<str>, Meter>,
    pub(super) counts: TypingCounts,
    next_tag: u32,
    /// Expected time to load a model, for `model_loading` answers.
    load_estimate: Duration,
}

impl State {
    /// A scheduler for the shell's slots, with `contexts` decode contexts
    /// each, and none of the typing features ([`Policy::base`]).
    pub fn new(slots: Vec<ShellSlot>, contexts: usize) -> State {
        State::with_policy(slots, contexts, Policy::base(contexts))
    }

    /// The same, with a policy.
    pub fn with_policy(slots: Vec<ShellSlot>, contexts: usize, policy: Policy) -> State {
        State {
            policy,
            slots: slots.into_iter().map(|s| Slot::new(s, contexts)).collect(),
            fabric: FabricState::Attached,
            default: None,
            queues: Map::default(),
            held: Map::default(),
            waiting: Map::default(),
            holders: Map::default(),
            running: Map::default(),
            deadlines: BTreeSet::new(),
            sessions: Map::default(),
            floors: Map::default(),
            cancels: Vec::new(),
            meters: Map::default(),
            counts: TypingCounts::default(),
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

    /// What the typing features did so far.
    pub fn typing_counts(&self) -> TypingCounts {
        self.counts
    }

    /// What is published about the fabric.
    pub fn view(&self) -> FabricView {
        FabricView {
            state: self.fabric,
            slots: self.slots.iter().map(Slot::view).collect(),
            default: self.default.clone(),
        }
    }

    /// Free contexts across slots that take work.
    pub fn free_contexts(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.accepting && s.state() == SlotState::Ready)
            .map(|s| s.free.len())
            .sum()
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.iter().next().map(|(t, _)| *t)
    }

    /// Whether slot `i` serves its model: with `every_slot` off, only the
    /// lowest-numbered slot that holds it ready and takes work does.
    pub(super) fn serves(&self, i: usize) -> bool {
        if self.policy.every_slot {
            return true;
        }
        let Some(model) = self.slots[i].model() else {
            return false;
        };
        !self.slots[..i]
            .iter()
            .any(|s| s.model() == Some(model) && s.accepting && s.state() == SlotState::Ready)
    }

    /// Queues a request, or says why not. A request its session made stale
    /// already is answered `superseded` here (and `Ok` returned).
    pub fn admit(&mut self, mut adm: Admission, now: Instant) -> Result<(), Box<Refusal>> {
        if adm.events.is_closed() {
            // The client went away before its admission got here (its
            // cancel may even have overtaken it): nothing to queue.
            return Ok(());
        }
        let model = adm.request.model.clone();
        let serving = || {
            self.slots
                .iter()
                .filter(|s| s.model() == Some(&model))
                .map(Slot::state)
        };
        let refuse = |adm: Admission, outcome: Outcome| {
            Err(Box::new(Refusal {
                admission: adm,
                outcome,
            }))
        };
        if serving().next().is_none() {
            let outcome = Outcome::ModelNotLoaded {
                model: model.to_string(),
            };
            return refuse(adm, outcome);
        }
        let ready = serving().any(|s| s == SlotState::Ready);
        if !ready && now + self.load_estimate > adm.request.deadline {
            // Only loading slots, and the load outlasts the deadline: say so
            // now rather than at the deadline.
            let outcome = Outcome::ModelLoading {
                model: model.to_string(),
                retry_after: self.load_estimate,
            };
            return refuse(adm, outcome);
        }
        if !ready && !serving().any(|s| s == SlotState::Loading) {
            let outcome = Outcome::ModelNotLoaded {
                model: model.to_string(),
            };
            return refuse(adm, outcome);
        }
        // Its session: the older request is stale now (or this one is).
        let mut inherited = None;
        if adm.request.session.is_some() {
            match self.take_session(adm) {
                None => return Ok(()),
                Some((a, place)) => {
                    adm = a;
                    inherited = place;
                }
            }
        }
        let class = self.policy.class(&adm.request.params);
        // It keeps the superseded one's place if it waits in the same line.
        let inherited = inherited.filter(|i| i.model == model && i.class == class);
        // Held, it runs when its session pauses, or earlier on a fabric
        // with room: no wait to predict.
        let hold = self.hold_until(&adm.request, now);
        if self.policy.predictive && hold.is_none() {
            if let Some(wait) = self.predicted_wait(&adm, class, inherited.as_ref()) {
                let own = self
                    .policy
                    .service_time(adm.request.prompt.len(), &adm.request.params);
                if now + wait + own > adm.request.deadline {
                    self.counts.predicted_late += 1;
                    let outcome = Outcome::PredictedLate {
                        predicted_wait: wait,
                        deadline: adm.request.timeout,
                    };
                    return refuse(adm, outcome);
                }
            }
        }
        self.deadlines.insert((adm.request.deadline, adm.id));
        if adm.request.announce {
            let _ = adm.events.try_send(ReqEvent::Queued);
        }
        if let Some(key) = &adm.request.session {
            self.sessions.insert(key.clone(), adm.id);
        }
        if let Some(until) = hold {
            // A place it inherited is left empty, and skipped.
            self.hold(adm, class, until);
            return Ok(());
        }
        match inherited {
            Some(i) => {
                self.holders.insert(i.place.id, adm.id);
                if let Some(q) = self.queues.get_mut(&model) {
                    q.held(class);
                }
                self.waiting.insert(
                    adm.id,
                    Waiting {
                        adm,
                        class,
                        spot: Spot::Line(i.place),
                    },
                );
            }
            None => {
                let front = adm.request.front;
                self.enqueue(adm, class, front);
            }
        }
        Ok(())
    }

    /// About how long a request of `class` would wait for a context: `None`
    /// if one would take it at once. From the requests ahead of it and the
    /// model's service rate, measured at capacity, or else the fabric's
    /// nominal rate for requests like this one.
    fn predicted_wait(
        &self,
        adm: &Admission,
        class: Class,
        inherited: Option<&Inherited>,
    ) -> Option<Duration> {
        let r = &adm.request;
        let (client, place) = match inherited {
            Some(i) => (&i.client, Some(i.place)),
            None => (&r.client, None),
        };
        let mut ahead = 0;
        if let Some(q) = self.queues.get(&r.model) {
            ahead = q.ahead(class, client, place);
            if class == Class::Bulk {
                ahead += q.live(Class::Interactive);
            }
        }
        let mut free = 0;
        let mut slots = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if s.model() != Some(&r.model) || s.state() != SlotState::Ready || !self.serves(i) {
                continue;
            }
            slots += 1;
            if !s.accepting {
                continue;
            }
            free += match class {
                Class::Bulk if self.policy.interactive_first => s
                    .free
                    .len()
                    .min(self.policy.bulk_contexts.saturating_sub(s.bulk)),
                _ => s.free.len(),
            };
        }
        if ahead < free {
            return None;
        }
        let rate = self
            .meters
            .get(&r.model)
            .and_then(|m| m.meter.rate())
            .unwrap_or_else(|| {
                let t = self.policy.service_time(r.prompt.len(), &r.params);
                (slots.max(1) * self.policy.lanes) as f64 / t.as_secs_f64().max(1e-6)
            });
        let wait = (ahead + 1 - free) as f64 / rate.max(1e-3);
        Some(Duration::from_secs_f64(wait.min(3600.0)))
    }

    /// Queues at the back of its client's line, or (`front`) at the head:
    /// a request the fabric bounced is next in line again.
    pub(super) fn enqueue(&mut self, adm: Admission, class: Class, front: bool) {
        let r = &adm.request;
        let q = self.queues.entry(r.model.clone()).or_default();
        let place = q.push(class, &r.client, adm.id, front);
        let spot = Spot::Line(place);
        self.waiting.insert(adm.id, Waiting { adm, class, spot });
    }

    /// Takes a waiting request out (to answer it): its deadline, its place
    /// in the count and its session go with it.
    pub(super) fn take_waiting(&mut self, id: ReqId) -> Option<Waiting> {
        let w = self.waiting.remove(&id)?;
        self.deadlines.remove(&(w.adm.request.deadline, id));
        match w.spot {
            Spot::Line(_) => {
                if let Some(q) = self.queues.get_mut(&w.adm.request.model) {
                    q.left(w.class);
                }
            }
            Spot::Held(until) => self.unhold(&w.adm.request.model, until, id),
        }
        self.forget(&w.adm);
        Some(w)
    }

    /// Its session no longer waits on `adm` (answered, or gone).
    pub(super) fn forget(&mut self, adm: &Admission) {
        if let Some(key) = &adm.request.session {
            if self.sessions.get(key) == Some(&adm.id) {
                self.sessions.remove(key);
            }
        }
    }

    /// The next waiting request for `model` that a slot may start: a bulk
    /// one only if `bulk_ok`, interactive ones first unless the bulk one
    /// at the head has waited past the ageing.
    fn pop(&mut self, model: &Arc<str>, bulk_ok: bool, now: Instant) -> Option<Waiting> {
        let aged = bulk_ok && self.bulk_aged(model, now);
        let order: &[Class] = match (aged, bulk_ok) {
            (true, _) => &[Class::Bulk, Class::Interactive],
            (false, true) => &[Class::Interactive, Class::Bulk],
            (false, false) => &[Class::Interactive],
        };
        order.iter().find_map(|&c| self.pop_class(model, c))
    }

    /// Whether the bulk request at the head of `model`'s line has waited
    /// past the ageing.
    fn bulk_aged(&self, model: &Arc<str>, now: Instant) -> bool {
        let Some(place) = self.queues.get(model).and_then(|q| q.peek(Class::Bulk)) else {
            return false;
        };
        let holder = self.holders.get(&place.id).copied().unwrap_or(place.id);
        self.waiting.get(&holder).is_some_and(|w| {
            now.saturating_duration_since(w.adm.request.received) >= self.policy.ageing
        })
    }

    fn pop_class(&mut self, model: &Arc<str>, class: Class) -> Option<Waiting> {
        // Clients that went away while their request waited, the cancel
        // still on its way: dropped here, so it never reaches the fabric.
        let mut gone = Vec::new();
        // Places found empty, whose holder entry goes with them.
        let mut dropped = Vec::new();
        let (holders, waiting) = (&self.holders, &self.waiting);
        let place = self.queues.get_mut(model)?.pop(class, |place| {
            let holder = holders.get(&place.id).copied().unwrap_or(place.id);
            // Cancelled, expired or superseded elsewhere: the place is
            // empty.
            let held = match waiting.get(&holder) {
                Some(w) if w.spot == Spot::Line(place) && w.adm.events.is_closed() => {
                    gone.push(holder);
                    false
                }
                Some(w) => w.spot == Spot::Line(place),
                None => false,
            };
            if !held {
                dropped.push(place.id);
            }
            held
        });
        for id in gone {
            self.take_waiting(id);
        }
        for id in dropped {
            self.holders.remove(&id);
        }
        let place = place?;
        let holder = self.holders.remove(&place.id).unwrap_or(place.id);
        let w = self.waiting.remove(&holder)?;
        if let Some(q) = self.queues.get_mut(model) {
            q.left(class);
        }
        Some(w)
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

    /// Starts what can start now: each started request's tag goes into
    /// `started`, for [`State::submission`].
    pub fn dispatch(&mut self, now: Instant, started: &mut Vec<u32>) {
        if self.fabric != FabricState::Attached {
            return;
        }
        self.release_paused(now);
        for i in 0..self.slots.len() {
            if !self.serves(i) {
                continue;
            }
            while self.slots[i].takes_work() {
                let Some(model) = self.slots[i].model().cloned() else {
                    break;
                };
                let bulk_ok = !self.policy.interactive_first
                    || self.slots[i].bulk < self.policy.bulk_contexts;
                // What its line holds first; a held request only on a slot
                // that would otherwise take nothing.
                let Some(w) = self
                    .pop(&model, bulk_ok, now)
                    .or_else(|| self.take_held(&model, bulk_ok))
                else {
                    break;
                };
                let mut adm = w.adm;
                let bulk = w.class == Class::Bulk;
                let slot = &mut self.slots[i];
                let Some(ctx) = slot.free.pop() else { break };
                if bulk {
                    slot.bulk += 1;
                }
                let index = slot.index();
                let tag = self.tag();
                let queued = now.saturating_duration_since(adm.request.received);
                if adm.request.announce {
                    let _ = adm.events.try_send(ReqEvent::Started {
                        slot: index,
                        queued,
                    });
                }
                self.running.insert(
                    tag,
                    Running {
                        adm,
                        ctx,
                        slot: index,
                        queued,
                        answered: false,
                        bulk,
                    },
                );
                started.push(tag);
            }
        }
    }

    /// What the rings are given for the request started as `tag`: its own
    /// prompt and parameters, borrowed.
    pub fn submission(&self, tag: u32) -> Option<Submission<'_>> {
        let r = self.running.get(&tag)?;
        Some(r.adm.request.submission(tag, r.ctx))
    }

    /// The client no longer wants request `id`: a running one's `(ctx,
    /// tag)` to cancel on the fabric.
    pub fn cancel(&mut self, id: ReqId) -> Option<(u16, u32)> {
        if self.take_waiting(id).is_some() {
            return None;
        }
        let (&tag, r) = self.running.iter_mut().find(|(_, r)| r.adm.id == id)?;
        let ctx = r.ctx;
        if !r.answered {
            r.answered = true;
            self.deadlines.remove(&(r.adm.request.deadline, id));
            if let Some(key) = &r.adm.request.session {
                if self.sessions.get(key) == Some(&id) {
                    self.sessions.remove(key);
                }
            }
        }
        Some((ctx, tag))
    }

    /// Cancels for the fabric decided outside [`State::cancel`] and
    /// [`State::expire`] (a request superseded while running).
    pub fn take_cancels(&mut self, into: &mut Vec<(u16, u32)>) {
        into.append(&mut self.cancels);
    }

    /// Answers every request whose deadline is at or before `now`; the
    /// running ones' `(ctx, tag)` go into `cancels`.
    pub fn expire(&mut self, now: Instant, cancels: &mut Vec<(u16, u32)>) {
        while let Some(&(when, id)) = self.deadlines.iter().next() {
            if when > now {
                break;
            }
            self.deadlines.remove(&(when, id));
            if let Some(mut w) = self.take_waiting(id) {
                let _ = w
                    .adm
                    .events
                    .try_send(ReqEvent::Failed(Outcome::DeadlineExceeded {
                        deadline: w.adm.request.timeout,
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
                            deadline: r.adm.request.timeout,
                        }));
                    cancels.push((r.ctx, tag));
                    if let Some(key) = &r.adm.request.session {
                        if self.sessions.get(key) == Some(&id) {
                            self.sessions.remove(key);
                        }
                    }
                }
            }
        }
    }

    fn release(&mut self, tag: u32) -> Option<Running> {
        let r = self.running.remove(&tag)?;
        self.deadlines.remove(&(r.adm.request.deadline, r.adm.id));
        self.forget(&r.adm);
        self.meters
            .entry(r.adm.request.model.clone())
            .or_default()
            .freed += 1;
        let still = self.running_in(r.slot);
        if let Some(slot) = self.slots.iter_mut().find(|s| s.index() == r.slot) {
            slot.free.push(r.ctx);
            if r.bulk {
                slot.bulk = slot.bulk.saturating_sub(1);
            }
            if still == 0 {
                // The slot's last request left: a drain waiting on it is
                // over.
                for tx in slot.drained.drain(..) {
                    let _ = tx.send(());
                }
            }
        }
        Some(r)
    }

    /// Feeds each model's service meter what happened since the last tick
    /// (the task ticks once a turn).
    pub fn tick(&mut self, now: Instant) {
        for (model, m) in &mut self.meters {
            let saturated = self
                .queues
                .get(model)
                .is_some_and(|q| q.live(Class::Interactive) + q.live(Class::Bulk) > 0);
            m.meter.tick(now, std::mem::take(&mut m.freed), saturated);
        }
        // Nothing waits: the tables give back the room a burst grew them
        // to (hash tables and deques never shrink by themselves, so 2,048
        // waiting requests left over a megabyte behind them).
        if self.waiting.is_empty() {
            shrink(&mut self.waiting);
            shrink(&mut self.holders);
            shrink(&mut self.sessions);
            for q in self.queues.values_mut() {
                q.shrink(KEEP);
            }
        }
    }

    /// Takes in what the driver reported. Returns how a request that left
    /// the fabric ended. Tokens are copied here, where they are handed to
    /// the request: the driver's buffers are its own.
    pub fn on_driver(&mut self, ev: DriverEvent<'_>) -> Option<Finished> {
        match ev {
            DriverEvent::Tokens { tag, tokens } => {
                if let Some(r) = self.running.get_mut(&tag) {
                    // Only a request that asked for progress hears it (one
                    // that did not has a channel for its end alone).
                    if !r.answered && r.adm.request.params.stream {
                        let _ = r.adm.events.try_send(ReqEvent::Tokens(tokens.to_vec()));
                    }
                }
                None
            }
            DriverEvent::Done(done) => self.done(done),
            DriverEvent::Refused { tag, reason, .. } => {
                let mut r = self.release(tag)?;
                let outcome = Outcome::FabricError {
                    message: reason.to_owned(),
                };
                if !r.answered {
                    let _ = r.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
                }
                Some(Finished::of(&r, Some(outcome)))
            }
            // The slots are read again by the task, which owns the shell.
            DriverEvent::ShellEvent { .. } => None,
        }
    }

    fn done(&mut self, d: Done<'_>) -> Option<Finished> {
        let mut r = self.release(d.tag)?;
        if r.answered {
            return Some(Finished::of(&r, None));
        }
        let outcome = match d.status {
            CqeStatus::Ok if d.intact => {
                let _ = r.adm.events.try_send(ReqEvent::Finished {
                    finish: d.finish,
                    tokens: d.tokens.to_vec(),
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
                // Never ran: back to the head of its client's line, still
                // its session's request.
                let adm = r.adm;
                self.deadlines.insert((adm.request.deadline, adm.id));
                if let Some(key) = &adm.request.session {
                    self.sessions.entry(key.clone()).or_insert(adm.id);
                }
                let class = self.policy.class(&adm.request.params);
                self.enqueue(adm, class, true);
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

    /// Takes in what the shell says the slots hold now. What the daemon
    /// keeps about each (draining, loading, loaded at) stays. Waiting
    /// requests for a model no slot holds or is loading any more (a load
    /// failed, a slot was emptied) will not run: they are answered now.
    pub fn refresh(&mut self, shell: Vec<ShellSlot>) {
        for s in shell {
            if let Some(slot) = self.slots.iter_mut().find(|x| x.index() == s.index) {
                slot.shell = s;
            }
        }
        self.strand();
    }

    fn strand(&mut self) {
        let servable: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|s| matches!(s.state(), SlotState::Ready | SlotState::Loading))
            .filter_map(|s| s.model().cloned())
            .collect();
        let stranded: Vec<ReqId> = self
            .waiting
            .iter()
            .filter(|(_, w)| !servable.contains(&w.adm.request.model))
            .map(|(id, _)| *id)
            .collect();
        for id in stranded {
            if let Some(mut w) = self.take_waiting(id) {
                let _ = w
                    .adm
                    .events
                    .try_send(ReqEvent::Failed(Outcome::ModelNotLoaded {
                        model: w.adm.request.model.to_string(),
                    }));
            }
        }
    }

    fn slot_mut(&mut self, index: u8) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.index() == index)
    }

    /// Stops starting work in `slot`; `drained` hears once nothing runs
    /// there. If nothing does now, it is handed back, to be told once the
    /// change is published.
    pub fn drain(
        &mut self,
        index: u8,
        drained: oneshot::Sender<()>,
    ) -> Option<oneshot::Sender<()>> {
        let running = self.running_in(index);
        match self.slot_mut(index) {
            Some(slot) => {
                slot.accepting = false;
                if running == 0 {
                    return Some(drained);
                }
                slot.drained.push(drained);
                None
            }
            // No such slot: nothing runs there.
            None => Some(drained),
        }
    }

    /// Starts work in `slot` again.
    pub fn resume(&mut self, index: u8) {
        if let Some(slot) = self.slot_mut(index) {
            slot.accepting = true;
            // Whoever waited for a drain that was given up hears nothing.
            slot.drained.clear();
        }
    }

    /// A load of `model` into `slots` begins: they show it loading, and a
    /// request for it may wait about `estimate`.
    pub fn begin_load(&mut self, slots: &[u8], model: Arc<str>, estimate: Duration) {
        self.load_estimate = estimate;
        for &i in slots {
            if let Some(slot) = self.slot_mut(i) {
                slot.loading = Some(model.clone());
            }
        }
        self.strand();
    }

    /// A load into `slots` ended (`loaded` when it succeeded, at `now`):
    /// they show what the shell holds again, and take work.
    pub fn end_load(&mut self, slots: &[u8], loaded: bool, now: Instant) {
        for &i in slots {
            if let Some(slot) = self.slot_mut(i) {
                slot.loading = None;
                if loaded {
                    slot.loaded_at = Some(now);
                }
            }
            self.resume(i);
        }
        self.strand();
    }

    /// Whether the fabric can be driven; while dark nothing starts, and
    /// the shell is not read.
    pub fn set_fabric(&mut self, state: FabricState) {
        self.fabric = state;
    }

    pub fn fabric(&self) -> FabricState {
        self.fabric
    }

    /// Routes `default` to `model`; `slot` holds it (a rotation that only
    /// flips counts as that slot's load).
    pub fn set_default(&mut self, model: Arc<str>, slot: Option<u8>, now: Instant) {
        self.default = Some(model);
        if let Some(s) = slot.and_then(|i| self.slot_mut(i)) {
            s.loaded_at = Some(now);
        }
    }

    /// Requests running in a slot.
    pub fn running_in(&self, index: u8) -> usize {
        self.running.values().filter(|r| r.slot == index).count()
    }

    /// Answers everything (the fabric is gone, or we are shutting down).
    pub fn fail_all(&mut self, outcome: &Outcome) {
        for (_, mut w) in self.waiting.drain() {
            let _ = w.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
        }
        for (_, mut r) in self.running.drain() {
            if !r.answered {
                let _ = r.adm.events.try_send(ReqEvent::Failed(outcome.clone()));
            }
        }
        for slot in &mut self.slots {
            for tx in slot.drained.drain(..) {
                let _ = tx.send(());
            }
        }
        self.queues.clear();
        self.held.clear();
        self.holders.clear();
        self.sessions.clear();
        self.floors.clear();
        self.deadlines.clear();
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
pub(super) mod tests;
