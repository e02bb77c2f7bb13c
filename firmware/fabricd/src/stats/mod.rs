//! Live stats: what the board served, per window, kept on the SD card.
//!
//! # Windows
//! Windows are aligned to the wall clock: each ends on a multiple of the
//! window length since the Unix epoch (with 30 minutes, on :00 and :30 UTC),
//! so the first window after a start is short, and every board of a fleet
//! closes its windows together; [`fleet`] merges them slot by slot. A
//! window records its length, and its slot is `start_ms / window_ms`.
//!
//! A window (default 30 minutes) counts: peak concurrent connections; unique
//! clients, by a keyed hash of the address (no address is ever stored) with
//! a secret drawn at boot, or with the fleet-wide `stats_client_key`, which
//! also keeps a sketch of them that boards can combine (see [`sketch`]);
//! requests by outcome; tokens in and out; peak
//! inferences in flight and the time with two or more in flight; and
//! latency percentiles from an HDR histogram, for all requests and for the
//! clean ones. A request whose life overlapped a reconfiguration of a slot
//! holding (or about to hold) its model is counted apart as `overlapped`,
//! and left out of the clean percentiles, never dropped.
//!
//! # On the hot path, briefly
//! A request's end is counted in place, under a lock held briefly (a hash,
//! a map entry, two histogram slots): a channel to a task of its own cost
//! more than the counting, and woke that task once a request. Nothing is dropped. A task owns the rest: closing
//! windows, checkpoints, reports.
//!
//! # On disk
//! An append-only log, `stats.log` in the data directory. Each record is a
//! frame: the magic `FST1`, a little-endian u32 length, a CRC-32 of the
//! payload, and the payload (a [`WindowRecord`] encoded with `postcard`).
//! Reading scans for frames: a torn tail (a power cut mid-write) is skipped,
//! and a corrupt frame in the middle is skipped by searching for the next
//! magic, so it hides nothing after it. Records of version 1 (before
//! windows were aligned) are read and brought up to the current version,
//! with no window length and no client sketch; a record of an unknown
//! version is skipped and counted. The open window is checkpointed (a record with
//! `closed = false`; the last record of a window wins), so a crash loses at
//! most one checkpoint interval.
//!
//! fsync policy: every record is followed by `fdatasync`; the directory is
//! synced after a rotation. Writing happens on a thread of its own, so a
//! slow card never stalls the runtime that serves requests. A power cut therefore loses at most the open
//! window's counts since its last checkpoint (the checkpoint interval,
//! default 60 s), and a torn record, which reading skips.
//!
//! Rotation: when the log passes its size limit it becomes `stats.log.1`
//! (replacing the previous one) and a new log starts, so the card holds at
//! most twice the limit.
//!
//! A data partition that is full or read-only costs durability, not
//! service: the error is logged (once per kind), shown in `/stats`, and the
//! write is retried at the next checkpoint.
//!
//! # Layout
//! - this module: the handle requests are counted through, and the start.
//! - `record`: the log's frame format, and reading it back.
//! - `window`: the open window's counts and how a window is shown.
//! - [`sketch`]: the unique-client sketch and the fleet-wide client key.
//! - [`fleet`]: several boards' `/stats` merged into one view per window.
//! - `store`: the log on the card, on a writer thread of its own.
//! - `task`: closing windows, checkpoints, reports.
//! - [`metrics`]: the Prometheus counters and histograms of `/metrics`.
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use crate::sched::Ending;
use store::{writer, SharedStatus, Store, StoreStatus};
use task::{instant_at, slot_end, Task};
use window::{lock, unix_ms, ClientHasher, Live, Open, Reconfig};

pub mod fleet;
pub mod metrics;
mod record;
pub mod sketch;
mod store;
mod task;
mod window;

pub use record::{frame, latest, parse, read_dir, ReadReport, WindowRecord, LOG, VERSION};
pub use sketch::{ClientKey, ClientSketch};
pub use window::{window_json, window_json_with};

/// What one request contributes.
#[derive(Debug, Clone)]
pub struct RequestEvent<'a> {
    pub outcome: Ending,
    pub model: Option<&'a str>,
    pub client: Option<IpAddr>,
    pub received: Instant,
    pub ended: Instant,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

#[derive(Debug)]
enum Msg {
    Report {
        since_ms: Option<u64>,
        /// With what a fleet merge needs (histograms, client sketches).
        merge: bool,
        reply: oneshot::Sender<serde_json::Value>,
    },
    Checkpoint {
        reply: oneshot::Sender<()>,
    },
}

/// Inferences in flight over time: peak and time with two or more. The
/// scheduler updates it on every start and finish.
#[derive(Debug, Default)]
pub struct InFlight {
    inner: Mutex<InFlightState>,
}

#[derive(Debug, Default)]
struct InFlightState {
    current: u64,
    peak: u64,
    two_since: Option<Instant>,
    two_plus: Duration,
}

impl InFlight {
    /// The number in flight is now `n`.
    pub fn set(&self, n: u64, now: Instant) {
        let mut s = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if n == s.current {
            return;
        }
        s.current = n;
        s.peak = s.peak.max(n);
        match (n >= 2, s.two_since) {
            (true, None) => s.two_since = Some(now),
            (false, Some(since)) => {
                s.two_plus += now.saturating_duration_since(since);
                s.two_since = None;
            }
            _ => {}
        }
    }

    /// Peak and time at two-plus since the last take, which restarts both.
    fn take(&self, now: Instant) -> (u64, Duration) {
        let mut s = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(since) = s.two_since {
            s.two_plus += now.saturating_duration_since(since);
            s.two_since = Some(now);
        }
        let out = (s.peak, s.two_plus);
        s.peak = s.current;
        s.two_plus = Duration::ZERO;
        out
    }

    fn peek(&self, now: Instant) -> (u64, Duration) {
        let s = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let extra = s
            .two_since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        (s.peak, s.two_plus + extra)
    }
}

/// Open connections and their peak, updated by the accept loop.
#[derive(Debug, Default)]
pub struct Connections {
    open: AtomicI64,
    peak: AtomicI64,
}

impl Connections {
    pub fn opened(&self) {
        let n = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(n, Ordering::Relaxed);
    }

    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    fn take_peak(&self) -> u64 {
        let now = self.open.load(Ordering::Relaxed);
        self.peak.swap(now, Ordering::Relaxed).max(0) as u64
    }

    fn peek_peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed).max(0) as u64
    }
}

/// Settings of the stats task.
#[derive(Debug, Clone)]
pub struct StatsConfig {
    pub dir: PathBuf,
    pub window: Duration,
    pub checkpoint: Duration,
    pub max_bytes: u64,
    /// The fleet-wide client key (`stats_client_key`); `None`: a key of
    /// this process's own, and no client sketch.
    pub client_key: Option<ClientKey>,
}

/// The handle handlers record through.
#[derive(Debug)]
pub struct StatsHandle {
    /// Reports and checkpoints, to the task.
    tx: mpsc::Sender<Msg>,
    live: Arc<Mutex<Live>>,
    pub connections: Arc<Connections>,
    pub in_flight: Arc<InFlight>,
    next_reconfig: AtomicU64,
    /// Fixed at start; outside the window's lock, so the hash (SHA-256
    /// with a fleet key) is not made while holding it.
    hasher: ClientHasher,
}

impl StatsHandle {
    /// Records a finished request; never waits on anything but the brief
    /// lock of the open window.
    pub fn record(&self, ev: RequestEvent<'_>) {
        let client = ev.client.map(|ip| self.hasher.hash(ip));
        lock(&self.live).request(&ev, client);
    }

    /// A reconfiguration starts; `models` are those it disturbs (`None`:
    /// all). Returns an id for [`StatsHandle::reconfig_end`].
    pub fn reconfig_start(&self, models: Option<Vec<Arc<str>>>) -> u64 {
        let id = self.next_reconfig.fetch_add(1, Ordering::Relaxed);
        lock(&self.live).reconfigs.insert(
            id,
            Reconfig {
                models,
                start: Instant::now(),
                end: None,
            },
        );
        id
    }

    /// The reconfiguration `id` is over.
    pub fn reconfig_end(&self, id: u64) {
        if let Some(r) = lock(&self.live).reconfigs.get_mut(&id) {
            r.end = Some(Instant::now());
        }
    }

    /// The report `/stats` and `fabricctl stats` show; with `merge`, each
    /// window carries its histograms and client sketch for a fleet merge.
    pub async fn report(&self, since_ms: Option<u64>, merge: bool) -> serde_json::Value {
        let (reply, rx) = oneshot::channel();
        let msg = Msg::Report {
            since_ms,
            merge,
            reply,
        };
        if self.tx.send(msg).await.is_err() {
            return serde_json::json!({"error": "the stats task has stopped"});
        }
        rx.await
            .unwrap_or_else(|_| serde_json::json!({"error": "the stats task has stopped"}))
    }

    /// Writes a checkpoint of the open window now (for shutdown and tests).
    pub async fn checkpoint(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Checkpoint { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Starts the stats task and its writer thread.
pub fn start(config: StatsConfig) -> (Arc<StatsHandle>, tokio::task::JoinHandle<()>) {
    // Reports and checkpoints only: a few at a time.
    let (tx, mut rx) = mpsc::channel(64);
    let connections = Arc::new(Connections::default());
    let in_flight = Arc::new(InFlight::default());
    let secret = std::collections::hash_map::RandomState::new();
    let boot_id = {
        let mut h = secret.build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    // Opening reads the log once, before serving starts; every later disk
    // access is on the writer thread or a blocking thread.
    let (store, startup) = Store::open(&config.dir, config.max_bytes);
    let status: SharedStatus = Arc::new(Mutex::new(StoreStatus {
        path: store.path(),
        error: store.error.clone(),
        size: store.size,
        startup,
        pending: 0,
    }));
    let (writes, write_rx) = mpsc::unbounded_channel();
    let spawned = {
        let status = status.clone();
        std::thread::Builder::new()
            .name("stats-writer".into())
            .spawn(move || writer(store, status, write_rx))
    };
    if let Err(e) = spawned {
        let msg = format!("starting the stats writer thread: {e}");
        log::error!("stats: {msg}; stats stay in memory");
        status.lock().unwrap_or_else(PoisonError::into_inner).error = Some(msg);
    }
    let hasher = match config.client_key.clone() {
        Some(key) => ClientHasher::Fleet(key),
        None => ClientHasher::Boot(secret),
    };
    let key_id = hasher.fleet_id();
    let started = SystemTime::now();
    let live = Arc::new(Mutex::new(Live {
        open: Open::new(0, started, key_id.is_some()),
        reconfigs: HashMap::new(),
    }));
    let window_ms = (config.window.as_millis() as u64).max(1);
    let mut task = Task {
        boot_id,
        live: live.clone(),
        closed: Vec::new(),
        writes,
        status,
        connections: connections.clone(),
        in_flight: in_flight.clone(),
        deadline: instant_at(slot_end(unix_ms(started), window_ms), started),
        key_id,
        config,
    };
    let handle = Arc::new(StatsHandle {
        tx,
        live,
        connections,
        in_flight,
        next_reconfig: AtomicU64::new(1),
        hasher,
    });
    let join = tokio::spawn(async move {
        let mut checkpoint = tokio::time::interval(task.config.checkpoint);
        checkpoint.tick().await;
        // One timer for the window's end, moved only when the window
        // changes: a new one per message would cost a timer-wheel insert
        // and removal per request.
        let window_timer = tokio::time::sleep_until(task.deadline.into());
        tokio::pin!(window_timer);
        loop {
            let window_end = task.deadline.into();
            if window_timer.deadline() != window_end || window_timer.is_elapsed() {
                window_timer.as_mut().reset(window_end);
            }
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => task.take(msg),
                    None => {
                        // Shutting down: the open window is written whole,
                        // and this task ends once it is on the card.
                        let (done, written) = oneshot::channel();
                        task.checkpoint(Some(done));
                        let _ = written.await;
                        return;
                    }
                },
                _ = &mut window_timer => task.close_window(),
                _ = checkpoint.tick() => task.checkpoint(None),
            }
        }
    });
    (handle, join)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_time_at_two_or_more() {
        let f = InFlight::default();
        let t = Instant::now();
        f.set(1, t);
        f.set(2, t + Duration::from_millis(10));
        f.set(3, t + Duration::from_millis(15));
        f.set(1, t + Duration::from_millis(40));
        let (peak, two) = f.take(t + Duration::from_millis(50));
        assert_eq!(peak, 3);
        assert_eq!(two, Duration::from_millis(30));
        let (peak, two) = f.take(t + Duration::from_millis(60));
        assert_eq!((peak, two), (1, Duration::ZERO));
    }
}
