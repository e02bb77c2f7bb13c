//! Live stats: what the board served, per window, kept on the SD card.
//!
//! # Windows
//! A window (default 30 minutes) counts: peak concurrent connections; unique
//! clients, by a keyed hash of the address with a secret drawn at boot (no
//! address is ever stored); requests by outcome; tokens in and out; peak
//! inferences in flight and the time with two or more in flight; and
//! latency percentiles from an HDR histogram, for all requests and for the
//! clean ones. A request whose life overlapped a reconfiguration of a slot
//! holding (or about to hold) its model is counted apart as `overlapped`,
//! and left out of the clean percentiles, never dropped.
//!
//! # On the hot path, briefly
//! A request's end is counted in place, under a lock held for a few
//! hundred instructions (a hash, a map entry, two histogram slots): a
//! channel to a task of its own cost more than the counting, and woke that
//! task once a request. Nothing is dropped. A task owns the rest: closing
//! windows, checkpoints, reports.
//!
//! # On disk
//! An append-only log, `stats.log` in the data directory. Each record is a
//! frame: the magic `FST1`, a little-endian u32 length, a CRC-32 of the
//! payload, and the payload (a [`WindowRecord`] encoded with `postcard`).
//! Reading scans for frames: a torn tail (a power cut mid-write) is skipped,
//! and a corrupt frame in the middle is skipped by searching for the next
//! magic, so it hides nothing after it. A record of another version is
//! skipped and counted. The open window is checkpointed (a record with
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::sched::Ending;

/// The record format version.
pub const VERSION: u16 = 1;
const MAGIC: &[u8; 4] = b"FST1";
const HEADER: usize = 12;
/// Largest record a reader accepts (a sanity bound for corrupt lengths).
const MAX_RECORD: usize = 1 << 20;
/// The log file's name.
pub const LOG: &str = "stats.log";

/// One window, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    pub version: u16,
    pub boot_id: u64,
    pub index: u64,
    pub start_ms: u64,
    pub end_ms: u64,
    pub closed: bool,
    pub peak_connections: u64,
    pub unique_clients: u64,
    pub requests: BTreeMap<String, u64>,
    pub overlapped: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub peak_in_flight: u64,
    pub two_plus_ms: u64,
    /// Latency of every request, ms: recorded (value, count) pairs.
    pub latency_all: Vec<(u64, u64)>,
    /// Latency of requests that did not overlap a reconfiguration.
    pub latency_clean: Vec<(u64, u64)>,
    /// Events lost to a full channel when requests were counted through
    /// one; always 0 since they are counted in place. Kept so records of
    /// this version read as they did.
    pub dropped_events: u64,
}

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
}

impl StatsHandle {
    /// Records a finished request; never waits on anything but the brief
    /// lock of the open window.
    pub fn record(&self, ev: RequestEvent<'_>) {
        lock(&self.live).request(&ev);
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

    /// The report `/stats` and `fabricctl stats` show.
    pub async fn report(&self, since_ms: Option<u64>) -> serde_json::Value {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Report { since_ms, reply }).await.is_err() {
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

/// What reading a log found.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct ReadReport {
    pub records: usize,
    /// Bytes skipped where no valid frame was (corruption).
    pub skipped_bytes: u64,
    /// Corrupt regions skipped.
    pub corrupt: usize,
    /// Records of another format version.
    pub other_version: usize,
    /// The file ended inside a frame (a write cut short).
    pub torn_tail: bool,
}

/// Encodes one frame.
pub fn frame(record: &WindowRecord) -> Vec<u8> {
    let payload = postcard::to_allocvec(record).unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u16,
}

/// Decodes every frame it can find in `bytes`.
pub fn parse(bytes: &[u8]) -> (Vec<WindowRecord>, ReadReport) {
    let mut out = Vec::new();
    let mut report = ReadReport::default();
    let mut at = 0;
    let mut in_garbage = false;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let valid = (|| {
            if rest.len() < HEADER || &rest[..4] != MAGIC {
                return None;
            }
            let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
            let crc = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]);
            if len > MAX_RECORD || rest.len() < HEADER + len {
                return None;
            }
            let payload = &rest[HEADER..HEADER + len];
            (crc32fast::hash(payload) == crc).then_some((len, payload))
        })();
        match valid {
            Some((len, payload)) => {
                in_garbage = false;
                at += HEADER + len;
                match postcard::from_bytes::<VersionOnly>(payload) {
                    Ok(v) if v.version == VERSION => {
                        match postcard::from_bytes::<WindowRecord>(payload) {
                            Ok(r) => {
                                report.records += 1;
                                out.push(r);
                            }
                            Err(_) => report.other_version += 1,
                        }
                    }
                    _ => report.other_version += 1,
                }
            }
            None => {
                // A frame cut off by the end of the file is a torn tail;
                // anything else is corruption: look for the next magic.
                let torn = rest.len() >= 4
                    && &rest[..4] == MAGIC
                    && rest.len() >= 8
                    && rest.len()
                        < HEADER
                            + u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize
                    && !rest[4..].windows(4).any(|w| w == MAGIC);
                if torn || (rest.len() < HEADER && MAGIC.starts_with(&rest[..rest.len().min(4)])) {
                    report.torn_tail = true;
                    report.skipped_bytes += rest.len() as u64;
                    break;
                }
                if !in_garbage {
                    report.corrupt += 1;
                    in_garbage = true;
                }
                let next = rest[1..].windows(4).position(|w| w == MAGIC).map(|p| p + 1);
                match next {
                    Some(p) => {
                        report.skipped_bytes += p as u64;
                        at += p;
                    }
                    None => {
                        report.skipped_bytes += rest.len() as u64;
                        break;
                    }
                }
            }
        }
    }
    (out, report)
}

/// The latest record of each window, oldest first.
pub fn latest(records: Vec<WindowRecord>) -> Vec<WindowRecord> {
    let mut by_key: BTreeMap<(u64, u64), WindowRecord> = BTreeMap::new();
    let mut order: Vec<(u64, u64)> = Vec::new();
    for r in records {
        let key = (r.boot_id, r.index);
        if !by_key.contains_key(&key) {
            order.push(key);
        }
        by_key.insert(key, r);
    }
    let mut out: Vec<WindowRecord> = order
        .into_iter()
        .filter_map(|k| by_key.remove(&k))
        .collect();
    out.sort_by_key(|r| (r.start_ms, r.index));
    out
}

/// Reads the rotated log and the current one.
pub fn read_dir(dir: &Path) -> (Vec<WindowRecord>, ReadReport) {
    let mut all = Vec::new();
    let mut total = ReadReport::default();
    for name in [format!("{LOG}.1"), LOG.to_owned()] {
        let path = dir.join(&name);
        // Only a regular file is a log (a device in its place would never
        // end, or never be ours).
        if !fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Ok(bytes) = fs::read(&path) {
            let (records, r) = parse(&bytes);
            all.extend(records);
            total.records += r.records;
            total.skipped_bytes += r.skipped_bytes;
            total.corrupt += r.corrupt;
            total.other_version += r.other_version;
            total.torn_tail |= r.torn_tail;
        }
    }
    (latest(all), total)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn histogram() -> Histogram<u64> {
    // 1 ms to 1 hour, 3 significant digits: fixed, valid bounds.
    Histogram::new_with_bounds(1, 3_600_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

fn pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn from_pairs(p: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = histogram();
    for &(v, c) in p {
        let _ = h.record_n(v.max(1), c);
    }
    h
}

fn percentiles(p: &[(u64, u64)]) -> serde_json::Value {
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

struct Open {
    index: u64,
    start: SystemTime,
    /// Keyed hashes already (see [`Live::client_hash`]): hashed again
    /// with foldhash, not a second SipHash.
    clients: HashSet<u64, foldhash::fast::FixedState>,
    requests: BTreeMap<String, u64>,
    overlapped: u64,
    tokens_in: u64,
    tokens_out: u64,
    all: Histogram<u64>,
    clean: Histogram<u64>,
}

impl Open {
    fn new(index: u64, start: SystemTime) -> Open {
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
struct Reconfig {
    models: Option<Vec<Arc<str>>>,
    start: Instant,
    end: Option<Instant>,
}

/// What the writer thread last reported about the log, for `/stats`.
#[derive(Debug, Clone, Default)]
struct StoreStatus {
    path: PathBuf,
    error: Option<String>,
    size: u64,
    startup: ReadReport,
    /// Records handed to the writer and not yet on the card.
    pending: u64,
}

type SharedStatus = Arc<Mutex<StoreStatus>>;

fn status_of(shared: &SharedStatus) -> StoreStatus {
    shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// A record for the writer, and who waits for it to be on the card.
struct Pending {
    record: WindowRecord,
    done: Option<oneshot::Sender<()>>,
}

/// The log on the card. It lives on its own thread (see [`writer`]): an
/// `fdatasync` on an SD card can take tens of milliseconds, or seconds on a
/// worn card, and must never stall a runtime worker that serves requests.
struct Store {
    dir: PathBuf,
    max_bytes: u64,
    file: Option<File>,
    size: u64,
    error: Option<String>,
    logged: HashSet<io::ErrorKind>,
}

impl Store {
    fn open(dir: &Path, max_bytes: u64) -> (Store, ReadReport) {
        let (_, startup) = read_dir(dir);
        if startup.corrupt > 0 || startup.torn_tail || startup.other_version > 0 {
            log::warn!(
                "stats: {}: skipped {} corrupt region(s), {} record(s) of another version{}; every intact record is kept",
                dir.join(LOG).display(),
                startup.corrupt,
                startup.other_version,
                if startup.torn_tail { ", and a torn tail" } else { "" }
            );
        }
        let mut s = Store {
            dir: dir.to_owned(),
            max_bytes,
            file: None,
            size: 0,
            error: None,
            logged: HashSet::new(),
        };
        if let Err(e) = s.ensure_open() {
            s.fail(&e, "opening");
        }
        (s, startup)
    }

    fn path(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    fn ensure_open(&mut self) -> io::Result<()> {
        if self.file.is_some() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path())?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        if self.size > self.max_bytes {
            self.rotate()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        fs::rename(self.path(), self.dir.join(format!("{LOG}.1")))?;
        File::open(&self.dir)?.sync_all()?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path())?;
        self.size = 0;
        self.file = Some(file);
        log::info!(
            "stats: rotated {} (over {} bytes)",
            self.path().display(),
            self.max_bytes
        );
        Ok(())
    }

    fn append(&mut self, record: &WindowRecord) {
        let bytes = frame(record);
        let result = (|| -> io::Result<()> {
            self.ensure_open()?;
            if self.size + bytes.len() as u64 > self.max_bytes && self.size > 0 {
                self.rotate()?;
            }
            let file = self
                .file
                .as_mut()
                .ok_or_else(|| io::Error::other("no log file"))?;
            file.write_all(&bytes)?;
            file.sync_data()?;
            self.size += bytes.len() as u64;
            Ok(())
        })();
        match result {
            Ok(()) => {
                if self.error.take().is_some() {
                    log::info!("stats: {} is writable again", self.path().display());
                    self.logged.clear();
                }
            }
            Err(e) => {
                // A half-written frame is skipped by readers; reopen so the
                // next one starts clean.
                self.file = None;
                self.fail(&e, "writing");
            }
        }
    }

    fn fail(&mut self, e: &io::Error, what: &str) {
        let msg = format!("{what} {}: {e}", self.path().display());
        if self.logged.insert(e.kind()) {
            log::error!("stats: {msg}; serving goes on, stats stay in memory until it works");
        }
        self.error = Some(msg);
    }
}

/// The writer thread: opens the log, then appends what it is sent.
///
/// The queue is unbounded but cannot grow fast: the stats task sends one
/// record per checkpoint interval and one per window. If the card stalls,
/// the writer coalesces what queued meanwhile, keeping only the last record
/// of each window (later records of a window supersede earlier ones, as on
/// disk), so a stall of any length costs one write per window.
fn writer(mut store: Store, status: SharedStatus, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let publish = |store: &Store, pending: u64| {
        let mut s = status.lock().unwrap_or_else(PoisonError::into_inner);
        s.error.clone_from(&store.error);
        s.size = store.size;
        s.pending = pending;
    };
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let mut waiting = Vec::new();
        let mut latest: Vec<WindowRecord> = Vec::new();
        for w in batch {
            waiting.extend(w.done);
            match latest
                .iter_mut()
                .find(|r| r.boot_id == w.record.boot_id && r.index == w.record.index)
            {
                Some(r) => *r = w.record,
                None => latest.push(w.record),
            }
        }
        let mut left = latest.len() as u64;
        for record in &latest {
            publish(&store, left);
            store.append(record);
            left -= 1;
        }
        publish(&store, 0);
        for done in waiting {
            let _ = done.send(());
        }
    }
}

/// What requests change: the open window's counts, and the
/// reconfigurations they may have overlapped.
struct Live {
    secret: std::collections::hash_map::RandomState,
    open: Open,
    reconfigs: HashMap<u64, Reconfig>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("window", &self.open.index)
            .field("reconfigs", &self.reconfigs)
            .finish_non_exhaustive()
    }
}

fn lock(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    // Counting cannot leave the window half-changed in a way that matters
    // (each field is a counter on its own), so a panic elsewhere while it
    // was held does not stop the counting.
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Live {
    fn client_hash(&self, ip: IpAddr) -> u64 {
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

    fn overlapped(&self, ev: &RequestEvent<'_>) -> bool {
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

    fn request(&mut self, ev: &RequestEvent<'_>) {
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

struct Task {
    config: StatsConfig,
    boot_id: u64,
    live: Arc<Mutex<Live>>,
    closed: Vec<WindowRecord>,
    writes: mpsc::UnboundedSender<Pending>,
    status: SharedStatus,
    connections: Arc<Connections>,
    in_flight: Arc<InFlight>,
    window_started: Instant,
}

impl Task {
    /// The open window as a record; `take` restarts the peaks kept outside
    /// it (in flight, connections), as closing it does.
    fn record_of(&self, live: &Live, closed: bool, now: SystemTime, take: bool) -> WindowRecord {
        let t = Instant::now();
        let (peak_in_flight, two_plus) = if take {
            self.in_flight.take(t)
        } else {
            self.in_flight.peek(t)
        };
        let peak_connections = if take {
            self.connections.take_peak()
        } else {
            self.connections.peek_peak()
        };
        let open = &live.open;
        WindowRecord {
            version: VERSION,
            boot_id: self.boot_id,
            index: open.index,
            start_ms: unix_ms(open.start),
            end_ms: unix_ms(now),
            closed,
            peak_connections,
            unique_clients: open.clients.len() as u64,
            requests: open.requests.clone(),
            overlapped: open.overlapped,
            tokens_in: open.tokens_in,
            tokens_out: open.tokens_out,
            peak_in_flight,
            two_plus_ms: two_plus.as_millis() as u64,
            latency_all: pairs(&open.all),
            latency_clean: pairs(&open.clean),
            dropped_events: 0,
        }
    }

    fn write(&self, record: WindowRecord, done: Option<oneshot::Sender<()>>) {
        // The writer only stops when this task drops the sender; if it
        // died anyway (a panic), the record stays in memory and /stats
        // shows the log as failing.
        if self.writes.send(Pending { record, done }).is_err() {
            let mut s = self.status.lock().unwrap_or_else(PoisonError::into_inner);
            s.error = Some("the stats writer thread has stopped".into());
        }
    }

    fn close_window(&mut self) {
        let now = SystemTime::now();
        let record = {
            let mut live = lock(&self.live);
            let record = self.record_of(&live, true, now, true);
            live.open = Open::new(live.open.index + 1, now);
            // Reconfigurations that ended an hour ago are history.
            live.reconfigs.retain(|_, r| {
                r.end
                    .is_none_or(|e| e + Duration::from_secs(3600) > Instant::now())
            });
            record
        };
        self.write(record.clone(), None);
        self.closed.push(record);
        // Keep a day of windows in memory for /stats; the log has the rest.
        let keep = (86_400 / self.config.window.as_secs().max(1)).max(16) as usize;
        if self.closed.len() > keep {
            self.closed.drain(..self.closed.len() - keep);
        }
        self.window_started = Instant::now();
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Report { since_ms, reply } => self.report(since_ms, reply),
            Msg::Checkpoint { reply } => self.checkpoint(Some(reply)),
        }
    }

    fn checkpoint(&mut self, done: Option<oneshot::Sender<()>>) {
        let record = self.record_of(&lock(&self.live), false, SystemTime::now(), false);
        self.write(record, done);
    }

    /// Answers a report: this boot's windows come from memory, earlier
    /// boots' from the card, read on a blocking thread so a slow card
    /// stalls neither this task nor the runtime.
    fn report(&self, since_ms: Option<u64>, reply: oneshot::Sender<serde_json::Value>) {
        let mut windows = self.closed.clone();
        windows.push(self.record_of(&lock(&self.live), false, SystemTime::now(), false));
        let dir = self.config.dir.clone();
        let boot_id = self.boot_id;
        let window_seconds = self.config.window.as_secs_f64();
        let max_bytes = self.config.max_bytes;
        let status = self.status.clone();
        tokio::spawn(async move {
            let read = tokio::task::spawn_blocking(move || read_dir(&dir)).await;
            let (on_disk, read) = read.unwrap_or_default();
            let mut all: Vec<WindowRecord> = on_disk
                .into_iter()
                .filter(|r| r.boot_id != boot_id)
                .collect();
            all.extend(windows);
            let list: Vec<_> = all
                .iter()
                .filter(|r| since_ms.is_none_or(|s| r.end_ms >= s))
                .map(window_json)
                .collect();
            let store = status_of(&status);
            let _ = reply.send(serde_json::json!({
                "window_seconds": window_seconds,
                "boot_id": format!("{boot_id:016x}"),
                "storage": {
                    "path": store.path,
                    "ok": store.error.is_none(),
                    "error": store.error,
                    "bytes": store.size,
                    "pending_records": store.pending,
                    "max_bytes": max_bytes,
                    "at_start": store.startup,
                    "now": read,
                },
                "windows": list,
            }));
        });
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
    let live = Arc::new(Mutex::new(Live {
        secret,
        open: Open::new(0, SystemTime::now()),
        reconfigs: HashMap::new(),
    }));
    let mut task = Task {
        boot_id,
        live: live.clone(),
        closed: Vec::new(),
        writes,
        status,
        connections: connections.clone(),
        in_flight: in_flight.clone(),
        window_started: Instant::now(),
        config,
    };
    let handle = Arc::new(StatsHandle {
        tx,
        live,
        connections,
        in_flight,
        next_reconfig: AtomicU64::new(1),
    });
    let join = tokio::spawn(async move {
        let mut checkpoint = tokio::time::interval(task.config.checkpoint);
        checkpoint.tick().await;
        // One timer for the window's end, moved only when the window
        // changes: a new one per message would cost a timer-wheel insert
        // and removal per request.
        let window_timer = tokio::time::sleep_until(task.window_started.into());
        tokio::pin!(window_timer);
        loop {
            let window_end = (task.window_started + task.config.window).into();
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

    fn record(index: u64, closed: bool) -> WindowRecord {
        WindowRecord {
            version: VERSION,
            boot_id: 7,
            index,
            start_ms: 1000 * index,
            end_ms: 1000 * index + 999,
            closed,
            peak_connections: 3,
            unique_clients: 2,
            requests: BTreeMap::from([("ok".to_owned(), 10)]),
            overlapped: 1,
            tokens_in: 40,
            tokens_out: 80,
            peak_in_flight: 2,
            two_plus_ms: 15,
            latency_all: vec![(17, 9), (25_000, 1)],
            latency_clean: vec![(17, 9)],
            dropped_events: 0,
        }
    }

    #[test]
    fn frames_round_trip_and_later_checkpoints_win() {
        let mut bytes = Vec::new();
        bytes.extend(frame(&record(0, false)));
        bytes.extend(frame(&record(0, true)));
        bytes.extend(frame(&record(1, false)));
        let (recs, rep) = parse(&bytes);
        assert_eq!(rep.records, 3);
        let l = latest(recs);
        assert_eq!(l.len(), 2);
        assert!(l[0].closed);
        assert!(!l[1].closed);
    }

    #[test]
    fn a_torn_tail_is_skipped_and_the_rest_kept() {
        let mut bytes = frame(&record(0, true));
        let second = frame(&record(1, true));
        for cut in 1..second.len() {
            let mut b = bytes.clone();
            b.extend_from_slice(&second[..cut]);
            let (recs, rep) = parse(&b);
            assert_eq!(recs.len(), 1, "cut at {cut}");
            assert!(rep.torn_tail || rep.corrupt > 0, "cut at {cut}: {rep:?}");
        }
        bytes.extend(second);
        assert_eq!(parse(&bytes).0.len(), 2);
    }

    #[test]
    fn a_corrupt_record_hides_nothing_after_it() {
        let a = frame(&record(0, true));
        let mut b = frame(&record(1, true));
        let c = frame(&record(2, true));
        let mid = b.len() / 2;
        b[mid] ^= 0xff;
        let bytes = [a, b, c].concat();
        let (recs, rep) = parse(&bytes);
        let idx: Vec<u64> = recs.iter().map(|r| r.index).collect();
        assert_eq!(idx, vec![0, 2]);
        assert_eq!(rep.corrupt, 1);
    }

    #[test]
    fn garbage_and_other_versions_are_reported_not_fatal() {
        let (recs, rep) = parse(b"this is not a stats log at all");
        assert!(recs.is_empty());
        assert_eq!(rep.corrupt, 1);
        let mut other = record(0, true);
        other.version = 9;
        let bytes = [frame(&other), frame(&record(1, true))].concat();
        let (recs, rep) = parse(&bytes);
        assert_eq!(recs.len(), 1);
        assert_eq!(rep.other_version, 1);
        assert_eq!(parse(&[]).0.len(), 0);
    }

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
