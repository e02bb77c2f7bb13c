//! The open window: what requests and reconfigurations change, and how a window is shown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::record::WindowRecord;
use super::sketch::{ClientKey, Registers};
use super::RequestEvent;
use hdrhistogram::Histogram;

pub(super) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(super) fn histogram() -> Histogram<u64> {
    // 1 ms to 1 hour, 3 significant digits: fixed, valid bounds.
    Histogram::new_with_bounds(1, 3_600_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

pub(super) fn pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

pub(super) fn from_pairs(p: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = histogram();
    for &(v, c) in p {
        let _ = h.record_n(v.max(1), c);
    }
    h
}

pub(super) fn percentiles(p: &[(u64, u64)]) -> serde_json::Value {
    summary(&from_pairs(p))
}

/// Count, p50, p95, p99 and max, as every latency in `/stats` is shown.
pub(super) fn summary(h: &Histogram<u64>) -> serde_json::Value {
    if h.is_empty() {
        return serde_json::json!({"count": 0});
    }
    serde_json::json!({
        "count": h.len(),
        "p50": h.value_at_quantile(0.5),
        "p95": h.value_at_quantile(0.95),
        "p99": h.value_at_quantile(0.99),
        "max": h.max(),
    })
}

/// A window record as `/stats` shows it.
pub fn window_json(r: &WindowRecord) -> serde_json::Value {
    window_json_with(r, false)
}

/// A window record as `/stats` shows it; with `merge`, also what a fleet
/// merge needs (`/stats?merge=1`): both latency histograms as recorded
/// (value, count) pairs, and the client sketch if there is one. Left out
/// by default, since they are most of the answer's size.
pub fn window_json_with(r: &WindowRecord, merge: bool) -> serde_json::Value {
    let mut v = serde_json::json!({
        "index": r.index,
        "boot_id": format!("{:016x}", r.boot_id),
        "start_ms": r.start_ms,
        "end_ms": r.end_ms,
        "open": !r.closed,
        "peak_connections": r.peak_connections,
        "unique_clients": r.unique_clients,
        "requests": r.requests,
        "overlapped": r.overlapped,
        "tokens_in": r.tokens_in,
        "tokens_out": r.tokens_out,
        "peak_in_flight": r.peak_in_flight,
        "two_plus_in_flight_s": r.two_plus_ms as f64 / 1000.0,
        "latency_ms": {"all": percentiles(&r.latency_all), "clean": percentiles(&r.latency_clean)},
        "dropped_events": r.dropped_events,
        // Null for records of version 1 (not aligned to the clock).
        "window_ms": (r.window_ms > 0).then_some(r.window_ms),
        "client_key_id": r.clients.as_ref().map(|c| format!("{:016x}", c.key_id)),
    });
    if merge {
        v["histograms"] = serde_json::json!({"all": r.latency_all, "clean": r.latency_clean});
        v["client_sketch"] = serde_json::json!(r.clients.as_ref().map(|c| &c.registers));
    }
    v
}

pub(super) struct Open {
    pub(super) index: u64,
    pub(super) start: SystemTime,
    /// Keyed hashes already (see [`ClientHasher::hash`]): hashed again
    /// with foldhash, not a second SipHash.
    pub(super) clients: HashSet<u64, foldhash::fast::FixedState>,
    pub(super) requests: BTreeMap<String, u64>,
    pub(super) overlapped: u64,
    pub(super) tokens_in: u64,
    pub(super) tokens_out: u64,
    pub(super) all: Histogram<u64>,
    pub(super) clean: Histogram<u64>,
    /// The client sketch, kept only with a fleet-wide key.
    pub(super) sketch: Option<Registers>,
}

impl Open {
    pub(super) fn new(index: u64, start: SystemTime, sketch: bool) -> Open {
        Open {
            index,
            start,
            clients: HashSet::default(),
            requests: BTreeMap::new(),
            overlapped: 0,
            tokens_in: 0,
            tokens_out: 0,
            all: histogram(),
            clean: histogram(),
            sketch: sketch.then(Registers::default),
        }
    }
}

/// How clients are hashed: with a key drawn at start, or with the
/// fleet-wide one (`stats_client_key`), the same on every board.
#[derive(Debug)]
pub(super) enum ClientHasher {
    /// The keyed hasher of std (SipHash with random keys, drawn per
    /// process): the same address gives the same hash within a boot and
    /// nothing that can be reversed to it.
    Boot(std::collections::hash_map::RandomState),
    Fleet(ClientKey),
}

impl ClientHasher {
    pub(super) fn hash(&self, ip: IpAddr) -> u64 {
        match self {
            ClientHasher::Boot(secret) => {
                let mut h = secret.build_hasher();
                match ip {
                    IpAddr::V4(a) => h.write(&a.octets()),
                    IpAddr::V6(a) => h.write(&a.octets()),
                }
                h.finish()
            }
            ClientHasher::Fleet(key) => key.hash(ip),
        }
    }

    /// The fleet key's public id, if there is one.
    pub(super) fn fleet_id(&self) -> Option<u64> {
        match self {
            ClientHasher::Boot(_) => None,
            ClientHasher::Fleet(key) => Some(key.id()),
        }
    }
}

#[derive(Debug)]
pub(super) struct Reconfig {
    pub(super) models: Option<Vec<Arc<str>>>,
    pub(super) start: Instant,
    pub(super) end: Option<Instant>,
}

/// What requests change: the open window's counts, and the
/// reconfigurations they may have overlapped.
pub(super) struct Live {
    pub(super) open: Open,
    pub(super) reconfigs: HashMap<u64, Reconfig>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("window", &self.open.index)
            .field("reconfigs", &self.reconfigs)
            .finish_non_exhaustive()
    }
}

pub(super) fn lock(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    // Counting cannot leave the window half-changed in a way that matters
    // (each field is a counter on its own), so a panic elsewhere while it
    // was held does not stop the counting.
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Live {
    pub(super) fn overlapped(&self, ev: &RequestEvent<'_>) -> bool {
        self.reconfigs.values().any(|r| {
            let affects = match (&r.models, ev.model) {
                (None, _) => true,
                (Some(models), Some(m)) => models.iter().any(|x| &**x == m),
                (Some(_), None) => false,
            };
            let ends = r.end.unwrap_or(ev.ended);
            affects && r.start <= ev.ended && ends >= ev.received
        })
    }

    /// Counts a request; `client` is its client's keyed hash, made before
    /// the lock was taken.
    pub(super) fn request(&mut self, ev: &RequestEvent<'_>, client: Option<u64>) {
        let overlapped = self.overlapped(ev);
        if let Some(h) = client {
            self.open.clients.insert(h);
            if let Some(s) = &mut self.open.sketch {
                s.insert(h);
            }
        }
        let label = ev.outcome.label();
        match self.open.requests.get_mut(label) {
            Some(n) => *n += 1,
            None => {
                self.open.requests.insert(label.to_owned(), 1);
            }
        }
        self.open.tokens_in += ev.tokens_in;
        self.open.tokens_out += ev.tokens_out;
        let ms = ev
            .ended
            .saturating_duration_since(ev.received)
            .as_millis()
            .max(1) as u64;
        let _ = self.open.all.record(ms);
        if overlapped {
            self.open.overlapped += 1;
        } else {
            let _ = self.open.clean.record(ms);
        }
    }
}
