//! The log on the card, written by a thread of its own.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::record::{frame, read_dir, ReadReport, WindowRecord, LOG};
use tokio::sync::{mpsc, oneshot};

/// What the writer thread last reported about the log, for `/stats`.
#[derive(Debug, Clone, Default)]
pub(super) struct StoreStatus {
    pub(super) path: PathBuf,
    pub(super) error: Option<String>,
    pub(super) size: u64,
    pub(super) startup: ReadReport,
    /// Records handed to the writer and not yet on the card.
    pub(super) pending: u64,
}

pub(super) type SharedStatus = Arc<Mutex<StoreStatus>>;

pub(super) fn status_of(shared: &SharedStatus) -> StoreStatus {
    shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// A record for the writer, and who waits for it to be on the card.
pub(super) struct Pending {
    pub(super) record: WindowRecord,
    pub(super) done: Option<oneshot::Sender<()>>,
}

/// The log on the card. It lives on its own thread (see [`writer`]): an
/// `fdatasync` on an SD card can take tens of milliseconds, or seconds on a
/// worn card, and must never stall a runtime worker that serves requests.
pub(super) struct Store {
    pub(super) dir: PathBuf,
    pub(super) max_bytes: u64,
    pub(super) file: Option<File>,
    pub(super) size: u64,
    pub(super) error: Option<String>,
    pub(super) logged: HashSet<io::ErrorKind>,
}

impl Store {
    pub(super) fn open(dir: &Path, max_bytes: u64) -> (Store, ReadReport) {
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

    pub(super) fn path(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    pub(super) fn ensure_open(&mut self) -> io::Result<()> {
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

    pub(super) fn rotate(&mut self) -> io::Result<()> {
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

    pub(super) fn append(&mut self, record: &WindowRecord) {
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

    pub(super) fn fail(&mut self, e: &io::Error, what: &str) {
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
pub(super) fn writer(
    mut store: Store,
    status: SharedStatus,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) {
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
