//! Typing sessions in the scheduler: a newer request of a session
//! supersedes the older one, or takes over its decoding.
//!
//! # Invariants
//! - A session maps to its one request not yet answered, if any
//!   ([`State::sessions`](super::State)); the entry leaves with that
//!   request, so the table never holds more than the admitted requests.
//! - A request is answered `superseded` exactly once, by the newer request
//!   of its session that replaced it: waiting, it leaves the queue and the
//!   newer one takes its place (same model and class); running, it is
//!   cancelled on the fabric at once and keeps its context until the
//!   fabric confirms, as any cancel.
//! - Ids say which is newer: a request that arrives after a newer one of
//!   its session (two connections racing on two threads) is the stale one.
//! - A join moves a decoding request's answer to the newer request: the
//!   older one hears `superseded`, the fabric's work goes on, and the newer
//!   one hears `Joined` and then that request's end. Only a request that
//!   hears just its end joins (no tokens on the way to replay).

use std::sync::Arc;

use super::events::ReqEvent;
use super::held::Spot;
use super::outcome::Outcome;
use super::policy::Class;
use super::queue::Place;
use super::request::{Admission, ClientKey, ReqId, SessionKey};
use super::state::State;

/// Most sessions [`State::floors`] keeps at once.
pub(super) const MAX_FLOORS: usize = 1024;

/// The place a waiting request left when superseded, for the request that
/// replaced it.
#[derive(Debug)]
pub(super) struct Inherited {
    pub model: Arc<str>,
    pub class: Class,
    pub place: Place,
    /// Whose line the place is in.
    pub client: ClientKey,
}

impl State {
    /// What `adm`'s session makes of it: answered now (stale, or joined:
    /// `None`), or to be queued, with the place of the request it
    /// superseded, if that one was waiting.
    pub(super) fn take_session(
        &mut self,
        mut adm: Admission,
    ) -> Option<(Admission, Option<Inherited>)> {
        let Some(key) = adm.request.session.clone() else {
            return Some((adm, None));
        };
        if let Some(&floor) = self.floors.get(&key) {
            if adm.id < floor {
                // The edge answered a newer request of its session first.
                self.counts.superseded_queued += 1;
                let _ = adm.events.try_send(ReqEvent::Failed(Outcome::Superseded));
                return None;
            }
            self.floors.remove(&key);
        }
        let Some(&owner) = self.sessions.get(&key) else {
            return Some((adm, None));
        };
        if !self.policy.supersede {
            return Some((adm, None));
        }
        if owner > adm.id {
            // A newer request of its session got here first.
            self.counts.superseded_queued += 1;
            let _ = adm.events.try_send(ReqEvent::Failed(Outcome::Superseded));
            return None;
        }
        if adm.request.join == Some(owner) {
            match self.transfer(owner, adm) {
                None => return None,
                Some(back) => adm = back,
            }
        }
        let inherited = self.supersede(owner);
        Some((adm, inherited))
    }

    /// Answers `owner` `superseded`: out of the queue (its place is
    /// returned), or cancelled on the fabric.
    pub(super) fn supersede(&mut self, owner: ReqId) -> Option<Inherited> {
        if let Some(mut w) = self.take_waiting(owner) {
            let _ = w.adm.events.try_send(ReqEvent::Failed(Outcome::Superseded));
            let Spot::Line(place) = w.spot else {
                // Held: it never had a place.
                self.counts.superseded_held += 1;
                return None;
            };
            self.counts.superseded_queued += 1;
            return Some(Inherited {
                model: w.adm.request.model.clone(),
                class: w.class,
                place,
                client: w.adm.request.client.clone(),
            });
        }
        let (&tag, r) = self
            .running
            .iter_mut()
            .find(|(_, r)| r.adm.id == owner && !r.answered)?;
        r.answered = true;
        let _ = r.adm.events.try_send(ReqEvent::Failed(Outcome::Superseded));
        self.deadlines.remove(&(r.adm.request.deadline, owner));
        self.cancels.push((r.ctx, tag));
        self.counts.superseded_running += 1;
        if let Some(key) = &r.adm.request.session {
            if self.sessions.get(key) == Some(&owner) {
                self.sessions.remove(key);
            }
        }
        None
    }

    /// `adm` takes over `owner`'s decoding, if `owner` is decoding a
    /// request of the same model that hears only its end; else it is
    /// handed back.
    fn transfer(&mut self, owner: ReqId, adm: Admission) -> Option<Admission> {
        let Some(r) = self.running.values_mut().find(|r| {
            r.adm.id == owner
                && !r.answered
                && !r.adm.request.params.stream
                && r.adm.request.model == adm.request.model
        }) else {
            return Some(adm);
        };
        let Admission {
            id,
            request,
            events,
            // The running request's own permit stays with it: one request
            // on the fabric, one permit.
            permit: _,
        } = adm;
        let old = std::mem::replace(&mut r.adm.id, id);
        let mut old_events = std::mem::replace(&mut r.adm.events, events);
        let _ = old_events.try_send(ReqEvent::Failed(Outcome::Superseded));
        let base = &mut r.adm.request;
        self.deadlines.remove(&(base.deadline, old));
        // From now on it ends as the newer request would: by its deadline,
        // its client going away, or a newer request of the session.
        base.deadline = request.deadline;
        base.timeout = request.timeout;
        base.announce = false;
        base.client = request.client;
        base.session = request.session;
        self.deadlines.insert((base.deadline, id));
        let _ = r.adm.events.try_send(ReqEvent::Joined { slot: r.slot });
        if let Some(key) = &r.adm.request.session {
            self.sessions.insert(key.clone(), id);
        }
        self.counts.joined += 1;
        None
    }

    /// A request of session `key` was answered without the scheduler (from
    /// the cache, or typed forward) as request `by`: the session's older
    /// request, if one is still unanswered, is stale.
    pub fn supersede_session(&mut self, key: &SessionKey, by: ReqId) {
        if !self.policy.supersede {
            return;
        }
        match self.sessions.get(key) {
            Some(&owner) if owner < by => {
                self.sessions.remove(key);
                self.supersede(owner);
            }
            Some(_) => {}
            None => {
                // Its older request may not be here yet.
                if self.floors.len() >= MAX_FLOORS && !self.floors.contains_key(key) {
                    self.floors.clear();
                }
                let floor = self.floors.entry(key.clone()).or_insert(by);
                *floor = (*floor).max(by);
            }
        }
    }
}
