//! The open window: what requests and reconfigurations change, and how a window is shown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::record::WindowRecord;
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
    let h = from_pairs(p);
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
    serde_json::json!({
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
    })
}

pub(super) struct Open {
    pub(super) index: u64,
    pub(super) start: SystemTime,
    /// Keyed hashes already (see [`Live::client_hash`]): hashed again
    /// with foldhash, not a second SipHash.
    pub(super) clients: HashSet<u64, foldhash::fast::FixedState>,
    pub(super) requests: BTreeMap<String, u64>,
    pub(super) overlapped: u64,
    pub(super) tokens_in: u64,
    pub(super) tokens_out: u64,
    pub(super) all: Histogram<u64>,
    pub(super) clean: Histogram<u64>,
}

impl Open {
    pub(super) fn new(index: u64, start: SystemTime) -> Open {
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
    pub(super) secret: std::collections::hash_map::RandomState,
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
    pub(super) fn client_hash(&self, ip: IpAddr) -> u64 {
        // The keyed hasher of std (SipHash with random keys, drawn per
        // process): the same address gives the same hash within a boot and
        // nothing that can be reversed to it.
        let mut h = self.secret.build_hasher();
        match ip {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => h.write(&a.octets()),
        }
        h.finish()
    }

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

    pub(super) fn request(&mut self, ev: &RequestEvent<'_>) {
        let overlapped = self.overlapped(ev);
        if let Some(ip) = ev.client {
            let h = self.client_hash(ip);
            self.open.clients.insert(h);
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
