//! A model's queues: per class, clients take turns, and each client's
//! places are first in, first out.
//!
//! A queue holds *places*, not requests: a place is named by the id of the
//! request that first took it, and the [`State`](super::State) says which
//! request holds it now. A request that supersedes its session's waiting
//! one takes over its place, so a typist who keeps typing keeps its place
//! in line instead of going to the back at every keystroke. Places whose
//! request has gone (cancelled, expired, superseded by a request of another
//! queue) are skipped when they come up; `live` counts the ones still held.

use std::collections::{HashMap, VecDeque};

use super::policy::Class;
use super::request::{ClientKey, ReqId};

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A place in a client's line: the id it is named by, and its number in
/// that line (for how far from the head it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    pub id: ReqId,
    pub seq: u64,
}

#[derive(Debug, Default)]
struct Line {
    /// Clients with places, in turn order.
    turns: VecDeque<ClientKey>,
    per_client: Map<ClientKey, VecDeque<Place>>,
    /// Places whose request is still waiting.
    live: usize,
    next_seq: u64,
}

/// One model's queues, one per [`Class`].
#[derive(Debug, Default)]
pub(super) struct ModelQueue {
    lines: [Line; 2],
}

impl ModelQueue {
    /// Takes a new place for `id` at the back of its client's line, or
    /// (`front`) at the head, where a request that already had its turn
    /// goes.
    pub fn push(&mut self, class: Class, client: &ClientKey, id: ReqId, front: bool) -> Place {
        let line = &mut self.lines[class as usize];
        line.next_seq += 1;
        let list = line.per_client.entry(client.clone()).or_default();
        let place = Place {
            id,
            // At the head: numbered before the one there now.
            seq: match (front, list.front()) {
                (true, Some(head)) => head.seq.saturating_sub(1),
                _ => line.next_seq,
            },
        };
        if list.is_empty() {
            if front {
                line.turns.push_front(client.clone());
            } else {
                line.turns.push_back(client.clone());
            }
        }
        if front {
            list.push_front(place);
        } else {
            list.push_back(place);
        }
        line.live += 1;
        place
    }

    /// The next place in turn order that `held` says is still held; the
    /// places it says are empty are dropped on the way. A client whose
    /// head places are empty keeps its turn for the next one.
    pub fn pop(&mut self, class: Class, mut held: impl FnMut(Place) -> bool) -> Option<Place> {
        let line = &mut self.lines[class as usize];
        while let Some(client) = line.turns.pop_front() {
            let Some(list) = line.per_client.get_mut(&client) else {
                continue;
            };
            while let Some(place) = list.pop_front() {
                if !held(place) {
                    continue;
                }
                if list.is_empty() {
                    line.per_client.remove(&client);
                } else {
                    line.turns.push_back(client);
                }
                return Some(place);
            }
            line.per_client.remove(&client);
        }
        None
    }

    /// The place at the head of the class, without taking it.
    pub fn peek(&self, class: Class) -> Option<Place> {
        let line = &self.lines[class as usize];
        let client = line.turns.front()?;
        line.per_client.get(client)?.front().copied()
    }

    /// A waiting request left the class (taken to run, or answered).
    pub fn left(&mut self, class: Class) {
        let line = &mut self.lines[class as usize];
        line.live = line.live.saturating_sub(1);
    }

    /// A request took over a place whose holder had left (superseded in
    /// place): the place is held again.
    pub fn held(&mut self, class: Class) {
        self.lines[class as usize].live += 1;
    }

    /// Gives back the room past `keep` entries that a burst grew the lines
    /// to.
    pub fn shrink(&mut self, keep: usize) {
        for line in &mut self.lines {
            if line.turns.capacity() > keep {
                line.turns.shrink_to(keep);
            }
            if line.per_client.capacity() > keep {
                line.per_client.shrink_to(keep);
            }
        }
    }

    /// The most room one of the lines' tables has.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.lines
            .iter()
            .map(|l| l.turns.capacity().max(l.per_client.capacity()))
            .max()
            .unwrap_or(0)
    }

    /// Requests waiting in the class.
    pub fn live(&self, class: Class) -> usize {
        self.lines[class as usize].live
    }

    /// About how many requests of the class go before `place` of `client`:
    /// its distance from the head of its client's line, and for every
    /// other client with places at most one more turn than that, never more
    /// than the class holds. O(1): the lines are not walked, so places
    /// whose request has gone still count (an overestimate).
    pub fn ahead(&self, class: Class, client: &ClientKey, place: Option<Place>) -> usize {
        let line = &self.lines[class as usize];
        let list = line.per_client.get(client);
        let mine = match (place, list.and_then(|l| l.front())) {
            (Some(p), Some(head)) => p.seq.saturating_sub(head.seq) as usize,
            // A new place goes at the back of its client's line.
            _ => list.map_or(0, VecDeque::len),
        };
        let others = line
            .turns
            .len()
            .saturating_sub(usize::from(list.is_some_and(|l| !l.is_empty())));
        let bound = line.live.saturating_sub(usize::from(place.is_some()));
        (mine + (mine + 1) * others).min(bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use std::sync::Arc;

    fn client(name: &str) -> ClientKey {
        ClientKey {
            ip: IpAddr::from([127, 0, 0, 1]),
            user: Some(Arc::from(name)),
        }
    }

    #[test]
    fn clients_take_turns_and_the_head_goes_first() {
        let mut q = ModelQueue::default();
        let (a, b) = (client("a"), client("b"));
        q.push(Class::Interactive, &a, 1, false);
        q.push(Class::Interactive, &a, 2, false);
        q.push(Class::Interactive, &b, 3, false);
        q.push(Class::Interactive, &a, 4, true);
        let order: Vec<_> = std::iter::from_fn(|| q.pop(Class::Interactive, |_| true))
            .map(|p| p.id)
            .collect();
        assert_eq!(order, [4, 3, 1, 2]);
        assert!(q.pop(Class::Bulk, |_| true).is_none());
        // An empty place at a client's head: it keeps its turn.
        q.push(Class::Interactive, &a, 5, false);
        q.push(Class::Interactive, &a, 6, false);
        q.push(Class::Interactive, &b, 7, false);
        let next = q.pop(Class::Interactive, |p| p.id != 5).map(|p| p.id);
        assert_eq!(next, Some(6));
    }

    #[test]
    fn ahead_counts_the_own_line_and_a_turn_of_each_other_client() {
        let mut q = ModelQueue::default();
        let (a, b, c) = (client("a"), client("b"), client("c"));
        let p1 = q.push(Class::Interactive, &a, 1, false);
        let p2 = q.push(Class::Interactive, &a, 2, false);
        q.push(Class::Interactive, &b, 3, false);
        q.push(Class::Interactive, &b, 4, false);
        q.push(Class::Interactive, &b, 5, false);
        assert_eq!(q.ahead(Class::Interactive, &a, Some(p1)), 1);
        assert_eq!(q.ahead(Class::Interactive, &a, Some(p2)), 3);
        // A new client: one turn of each of the two ahead of it.
        assert_eq!(q.ahead(Class::Interactive, &c, None), 2);
        // A new place of a: behind its two, and up to three of b's.
        assert_eq!(q.ahead(Class::Interactive, &a, None), 5);
        assert_eq!(q.ahead(Class::Bulk, &a, None), 0);
    }
}
