//! Held requests: a typing session's newest request waits apart from the
//! queue until its session pauses.
//!
//! A typing page sends a request on every keystroke, and the next
//! keystroke, a few hundred milliseconds later, makes it stale. What the
//! typist waits for is the answer after the last keystroke before a
//! pause. So a request of a session that is typing (the edge says how long
//! after it the session counts as paused:
//! [`Request::pause_after`](super::Request), from
//! `typing::cadence`) is not put in its model's line at once. It is
//! *held*, and:
//! - a newer request of its session supersedes it there, before it cost
//!   any fabric time (`fabricd_superseded_total{state="held"}`);
//! - once its session has paused, it goes to the back of its client's
//!   line like any other, ahead of every request still held;
//! - a slot that would otherwise take nothing takes the held request
//!   nearest to its pause (`fabricd_held_ran_early_total`): holding never
//!   leaves the fabric idle, and on an idle fabric it adds no latency;
//! - it is in the line no later than its deadline less its own service
//!   time, so holding never makes it late.
//!
//! # Invariants
//! - A waiting request is in exactly one spot ([`Spot`]): a place in its
//!   model's line, or the held set of its model under the time it is
//!   released; [`State::take_waiting`] takes it out of either.
//! - Held requests count as queued (`fabricd_queue_depth`), hold their
//!   queue permit, and keep their deadline and session as queued ones do.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use super::policy::Class;
use super::queue::Place;
use super::request::{Admission, ReqId, Request};
use super::state::{State, Waiting};

/// Where a waiting request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spot {
    /// In its model's line, at this place.
    Line(Place),
    /// Held until this time, when its session counts as paused.
    Held(Instant),
}

/// A model's held requests, by the time each is released.
pub(super) type HeldSet = BTreeSet<(Instant, ReqId)>;

impl State {
    /// When `r`, admitted at `now`, goes into its line if it is to be
    /// held: its session's pause, or its deadline less its service
    /// time if that is sooner. `None`: it goes into its line now.
    pub(super) fn hold_until(&self, r: &Request, now: Instant) -> Option<Instant> {
        if !self.policy.hold || r.session.is_none() || r.front {
            return None;
        }
        let pause = r.received + r.pause_after?;
        let own = self.policy.service_time(r.prompt.len(), &r.params);
        let latest = r.deadline.checked_sub(own)?;
        let until = pause.min(latest);
        (until > now).then_some(until)
    }

    /// Holds `adm` until `until`.
    pub(super) fn hold(&mut self, adm: Admission, class: Class, until: Instant) {
        let id = adm.id;
        self.held
            .entry(adm.request.model.clone())
            .or_default()
            .insert((until, id));
        self.counts.held += 1;
        self.waiting.insert(
            id,
            Waiting {
                adm,
                class,
                spot: Spot::Held(until),
            },
        );
    }

    /// Takes `id`, held until `until`, out of its model's held set.
    pub(super) fn unhold(&mut self, model: &Arc<str>, until: Instant, id: ReqId) {
        if let Some(set) = self.held.get_mut(model) {
            set.remove(&(until, id));
            if set.is_empty() {
                self.held.remove(model);
            }
        }
    }

    /// Puts every held request whose session has paused by `now` at the
    /// back of its client's line.
    pub(super) fn release_paused(&mut self, now: Instant) {
        for (model, set) in &mut self.held {
            while let Some(&(until, id)) = set.first() {
                if until > now {
                    break;
                }
                set.pop_first();
                let Some(w) = self.waiting.get_mut(&id) else {
                    continue;
                };
                let r = &w.adm.request;
                let place = self
                    .queues
                    .entry(model.clone())
                    .or_default()
                    .push(w.class, &r.client, id, false);
                w.spot = Spot::Line(place);
            }
        }
        self.held.retain(|_, set| !set.is_empty());
    }

    /// The held request of `model` nearest to its session's pause, for a
    /// slot that has nothing else to take (a bulk one only if `bulk_ok`).
    /// Requests whose clients went away are dropped on the way.
    pub(super) fn take_held(&mut self, model: &Arc<str>, bulk_ok: bool) -> Option<Waiting> {
        loop {
            let &(until, id) = self.held.get(model)?.first()?;
            let Some(w) = self.waiting.get(&id) else {
                self.unhold(model, until, id);
                continue;
            };
            if w.adm.events.is_closed() {
                self.take_waiting(id);
                continue;
            }
            if w.class == Class::Bulk && !bulk_ok {
                return None;
            }
            self.unhold(model, until, id);
            self.counts.held_early += 1;
            return self.waiting.remove(&id);
        }
    }
}
