//! The stats task: closes windows on the wall clock's boundaries,
//! checkpoints, answers reports.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::record::{read_dir, WindowRecord, VERSION};
use super::store::{status_of, Pending, SharedStatus};
use super::window::{lock, pairs, unix_ms, window_json_with, Live, Open};
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
    /// When the open window's timer fires: its slot's end on the wall
    /// clock, as an `Instant` taken when the window opened.
    pub(super) deadline: Instant,
    /// The fleet key's id, for the records' sketches.
    pub(super) key_id: Option<u64>,
}

/// The end of the aligned slot that holds `ms`: the next multiple of
/// `window_ms` since the epoch.
pub(super) fn slot_end(ms: u64, window_ms: u64) -> u64 {
    let w = window_ms.max(1);
    (ms / w).saturating_add(1).saturating_mul(w)
}

/// Whether the window that started at `start_ms` closes at `now_ms`, and
/// if so its end and the next window's start (see [`Task::close_window`]).
pub(super) fn closing(start_ms: u64, now_ms: u64, window_ms: u64) -> Option<(u64, u64)> {
    let w = window_ms.max(1);
    let end_ms = slot_end(start_ms, w);
    let slot_start = end_ms - w;
    let now_slot = now_ms - now_ms % w;
    if (slot_start..end_ms).contains(&now_ms) {
        None
    } else if now_ms < slot_start {
        Some((end_ms, now_slot))
    } else {
        Some((end_ms, end_ms.max(now_slot)))
    }
}

/// The `Instant` at which the wall clock reads `end_ms`, as far as can be
/// told now.
pub(super) fn instant_at(end_ms: u64, now: SystemTime) -> Instant {
    Instant::now() + Duration::from_millis(end_ms.saturating_sub(unix_ms(now)))
}

impl Task {
    /// The open window as a record; `take` restarts the peaks kept outside
    /// it (in flight, connections), as closing it does.
    pub(super) fn record_of(
        &self,
        live: &Live,
        closed: bool,
        end_ms: u64,
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
            end_ms,
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
            window_ms: self.window_ms(),
            clients: open
                .sketch
                .as_ref()
                .zip(self.key_id)
                .map(|(s, id)| s.sketch(id)),
        }
    }

    pub(super) fn window_ms(&self) -> u64 {
        (self.config.window.as_millis() as u64).max(1)
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

    /// Closes the open window if the wall clock has reached its slot's
    /// end. Windows end on multiples of the window length since the Unix
    /// epoch, so every board of a fleet closes its windows together and
    /// their windows can be merged slot by slot: a closed window always
    /// ends on its slot's end, and every window but a boot's first starts
    /// on a slot's start.
    ///
    /// The timer that calls this runs on the monotonic clock, set from the
    /// wall clock when the window opened; the wall clock can step since
    /// (NTP at boot on a board without a battery-backed clock), and a timer
    /// can fire late. Early, the timer is set again for the rest. Late (or
    /// the clock stepped forward), the window still ends on its slot's end,
    /// holding what was counted until now, and the next one starts at the
    /// slot the clock is in now. Stepped back before the window's slot,
    /// it is closed now rather than held open for the difference.
    pub(super) fn close_window(&mut self) {
        let now = SystemTime::now();
        let now_ms = unix_ms(now);
        let w = self.window_ms();
        let start_ms = unix_ms(lock(&self.live).open.start);
        let Some((end_ms, next_start)) = closing(start_ms, now_ms, w) else {
            self.deadline = instant_at(slot_end(start_ms, w), now);
            return;
        };
        if now_ms < start_ms {
            log::warn!("stats: the wall clock stepped back; the open window closes now");
        }
        let record = {
            let mut live = lock(&self.live);
            let record = self.record_of(&live, true, end_ms, true);
            live.open = Open::new(
                live.open.index + 1,
                UNIX_EPOCH + Duration::from_millis(next_start),
                self.key_id.is_some(),
            );
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
        self.deadline = instant_at(slot_end(next_start, w), now);
    }

    pub(super) fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Report {
                since_ms,
                merge,
                reply,
            } => self.report(since_ms, merge, reply),
            Msg::Checkpoint { reply } => self.checkpoint(Some(reply)),
        }
    }

    pub(super) fn checkpoint(&mut self, done: Option<oneshot::Sender<()>>) {
        // A wall clock stepped forward past the window's end (NTP at boot)
        // is noticed here at the latest, not a whole window late.
        let now_ms = unix_ms(SystemTime::now());
        let start_ms = unix_ms(lock(&self.live).open.start);
        if now_ms >= slot_end(start_ms, self.window_ms()) {
            self.close_window();
        }
        let record = self.record_of(&lock(&self.live), false, now_ms, false);
        self.write(record, done);
    }

    /// Answers a report: this boot's windows come from memory, earlier
    /// boots' from the card, read on a blocking thread so a slow card
    /// stalls neither this task nor the runtime.
    pub(super) fn report(
        &self,
        since_ms: Option<u64>,
        merge: bool,
        reply: oneshot::Sender<serde_json::Value>,
    ) {
        let mut windows = self.closed.clone();
        let now_ms = unix_ms(SystemTime::now());
        windows.push(self.record_of(&lock(&self.live), false, now_ms, false));
        let key_id = self.key_id.map(|id| format!("{id:016x}"));
        let dir = self.config.dir.clone();
        let boot_id = self.boot_id;
        let window_seconds = self.config.window.as_secs_f64();
        let max_bytes = self.config.max_bytes;
        let status = self.status.clone();
        tokio::spawn(async move {
            let read = tokio::task::spawn_blocking(move || read_dir(&dir)).await;
            let (on_disk, read) = read.unwrap_or_default();
            // An earlier boot's last window was never closed, but it is
            // not open either: that boot counts no more.
            let mut all: Vec<WindowRecord> = on_disk
                .into_iter()
                .filter(|r| r.boot_id != boot_id)
                .map(|mut r| {
                    r.closed = true;
                    r
                })
                .collect();
            all.extend(windows);
            let list: Vec<_> = all
                .iter()
                .filter(|r| since_ms.is_none_or(|s| r.end_ms >= s))
                .map(|r| window_json_with(r, merge))
                .collect();
            let store = status_of(&status);
            let _ = reply.send(serde_json::json!({
                "window_seconds": window_seconds,
                "boot_id": format!("{boot_id:016x}"),
                // Windows end on multiples of window_seconds since 1970.
                "aligned": true,
                "client_key_id": key_id,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_close_on_the_clocks_boundaries_whatever_the_timer_did() {
        let w = 1_800_000;
        let t0 = 1_767_225_600_000; // 2026-01-01 00:00 UTC
                                    // The first window after a start at 00:10 is short: it ends at 00:30.
        assert_eq!(slot_end(t0 + 600_000, w), t0 + w);
        // On time, and late by less than a window: the next starts there.
        assert_eq!(closing(t0 + 600_000, t0 + w, w), Some((t0 + w, t0 + w)));
        assert_eq!(closing(t0, t0 + w + 5, w), Some((t0 + w, t0 + w)));
        // Early (the wall clock and the timer disagree): not yet.
        assert_eq!(closing(t0, t0 + w - 1, w), None);
        // The clock stepped forward by hours (NTP at boot): the window
        // still ends on its boundary; the next is the slot of now.
        assert_eq!(closing(t0, t0 + 7 * w + 17, w), Some((t0 + w, t0 + 7 * w)));
        // Stepped back before the window's slot: closed now, and the next
        // window is the slot of now.
        assert_eq!(closing(t0 + w, t0 - 17, w), Some((t0 + 2 * w, t0 - w)));
    }
}
