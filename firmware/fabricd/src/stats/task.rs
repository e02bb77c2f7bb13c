//! The stats task: closes windows, checkpoints, answers reports.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use super::record::{read_dir, WindowRecord, VERSION};
use super::store::{status_of, Pending, SharedStatus};
use super::window::{lock, pairs, unix_ms, window_json, Live, Open};
use super::{Connections, InFlight, Msg, StatsConfig};
use tokio::sync::{mpsc, oneshot};

pub(super) struct Task {
    pub(super) config: StatsConfig,
    pub(super) boot_id: u64,
    pub(super) live: Arc<Mutex<Live>>,
    pub(super) closed: Vec<WindowRecord>,
    pub(super) writes: mpsc::UnboundedSender<Pending>,
    pub(super) status: SharedStatus,
    pub(super) connections: Arc<Connections>,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) window_started: Instant,
}

impl Task {
    /// The open window as a record; `take` restarts the peaks kept outside
    /// it (in flight, connections), as closing it does.
    pub(super) fn record_of(
        &self,
        live: &Live,
        closed: bool,
        now: SystemTime,
        take: bool,
    ) -> WindowRecord {
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

    pub(super) fn write(&self, record: WindowRecord, done: Option<oneshot::Sender<()>>) {
        // The writer only stops when this task drops the sender; if it
        // died anyway (a panic), the record stays in memory and /stats
        // shows the log as failing.
        if self.writes.send(Pending { record, done }).is_err() {
            let mut s = self.status.lock().unwrap_or_else(PoisonError::into_inner);
            s.error = Some("the stats writer thread has stopped".into());
        }
    }

    pub(super) fn close_window(&mut self) {
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

    pub(super) fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Report { since_ms, reply } => self.report(since_ms, reply),
            Msg::Checkpoint { reply } => self.checkpoint(Some(reply)),
        }
    }

    pub(super) fn checkpoint(&mut self, done: Option<oneshot::Sender<()>>) {
        let record = self.record_of(&lock(&self.live), false, SystemTime::now(), false);
        self.write(record, done);
    }

    /// Answers a report: this boot's windows come from memory, earlier
    /// boots' from the card, read on a blocking thread so a slow card
    /// stalls neither this task nor the runtime.
    pub(super) fn report(&self, since_ms: Option<u64>, reply: oneshot::Sender<serde_json::Value>) {
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
