//! Several boards' `/stats` merged into one view per window: what a fleet
//! behind a load balancer served, as `fabricctl fleet-stats` shows it.
//!
//! # What is merged, and how exactly
//! Boards close their windows on the same wall-clock boundaries (see the
//! [stats module](super)), so a window of one board and a window of another
//! that fall in the same slot (`start_ms / window_ms`) cover the same time,
//! and merge:
//! - requests by outcome, overlapped requests, tokens in and out: summed,
//!   exact.
//! - latency percentiles: from the boards' histograms added together
//!   (`hdrhistogram`'s `add`), never from their percentiles. The p95 of a
//!   fleet is not the mean of its boards' p95s. Exact to the histograms'
//!   precision (3 significant digits).
//! - peak connections, peak inferences in flight: bounds, never one
//!   figure. The boards' peaks need not have happened at the same moment,
//!   so the fleet's peak is at least the largest board's and at most their
//!   sum.
//! - unique clients: a client can reach several boards, so the boards'
//!   counts do not add up. With one `stats_client_key` on every board,
//!   their client sketches combine into an estimate of the union (standard
//!   error in the answer, within the bounds). Without it, only the bounds:
//!   at least the largest board's count, at most the sum.
//! - time with two or more inferences in flight: summed over the boards,
//!   as board-seconds.
//!
//! Each merged window names the boards that contributed, those that
//! contributed only part of the window (a board started or stopped inside
//! it, or its window is still open), and those missing from it. A window
//! that cannot be placed in a slot (written by a fabricd from before
//! windows were aligned, or with another window length in an earlier boot)
//! is left out and listed in `skipped`, with why.
//!
//! The merge is a pure function of the boards' answers; it takes no time
//! of its own, so it gives the same view of the same files whenever run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::sketch::{ClientSketch, Registers, STD_ERROR};
use super::window::{histogram, summary};

/// Latencies above this (ms) no board records; a file that has them is not
/// a board's answer.
const HIGHEST_MS: u64 = 3_600_000;

/// What is wrong with a board's answer, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("no boards given")]
    NoBoards,
    #[error("{file}: reading it: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not JSON: {source}")]
    NotJson {
        file: String,
        source: serde_json::Error,
    },
    #[error("{file}: not a board's /stats answer: {source}")]
    NotStats {
        file: String,
        source: serde_json::Error,
    },
    #[error("{file}: the board refused: {message}")]
    Refused { file: String, message: String },
    #[error("{file}: its windows are not aligned to the clock (a fabricd from before they were)")]
    NotAligned { file: String },
    #[error(
        "{file}: windows of {seconds} s, but {first} has windows of {first_seconds} s; \
         boards merge only with the same stats_window"
    )]
    DifferentLengths {
        file: String,
        seconds: f64,
        first: String,
        first_seconds: f64,
    },
    #[error(
        "{file}: window {index} has no histograms; fetch the board's /stats?merge=1 \
         (or `fabricctl stats --merge --json`)"
    )]
    NoHistograms { file: String, index: u64 },
    #[error("{file}: window {index}: {what}")]
    BadWindow {
        file: String,
        index: u64,
        what: String,
    },
    #[error("{file} and {other}: the same board's windows (boot {boot_id}) given twice")]
    Duplicate {
        file: String,
        other: String,
        boot_id: String,
    },
}

/// One board's `/stats` answer (or `fabricctl stats --json`'s, which wraps
/// it in `data`), as far as the merge reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct BoardStats {
    pub window_seconds: f64,
    #[serde(default)]
    pub aligned: bool,
    pub windows: Vec<BoardWindow>,
}

/// One window of a board, as `/stats?merge=1` shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct BoardWindow {
    pub index: u64,
    pub boot_id: String,
    pub start_ms: u64,
    pub end_ms: u64,
    pub open: bool,
    /// Null in windows of a fabricd from before windows were aligned.
    #[serde(default)]
    pub window_ms: Option<u64>,
    pub peak_connections: u64,
    pub unique_clients: u64,
    pub requests: BTreeMap<String, u64>,
    pub overlapped: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub peak_in_flight: u64,
    pub two_plus_in_flight_s: f64,
    #[serde(default)]
    pub histograms: Option<Histograms>,
    #[serde(default)]
    pub client_key_id: Option<String>,
    #[serde(default)]
    pub client_sketch: Option<Vec<(u16, u8)>>,
}

/// A window's latency histograms: recorded (value ms, count) pairs.
#[derive(Debug, Clone, Deserialize)]
pub struct Histograms {
    pub all: Vec<(u64, u64)>,
    pub clean: Vec<(u64, u64)>,
}

/// A board's answer and the name it goes by in the view.
#[derive(Debug, Clone)]
pub struct Board {
    pub name: String,
    pub stats: BoardStats,
}

impl Board {
    /// Reads a board's answer from JSON text; `name` (the file) is what
    /// errors and the view call it.
    pub fn from_json(name: &str, text: &[u8]) -> Result<Board, FleetError> {
        let file = name.to_owned();
        let mut v: serde_json::Value =
            serde_json::from_slice(text).map_err(|source| FleetError::NotJson {
                file: file.clone(),
                source,
            })?;
        // `fabricctl stats --json` wraps the answer: {"ok", "data"|"error"}.
        if v.get("ok").is_some() {
            if v["ok"] != true {
                let message = v["error"]["message"]
                    .as_str()
                    .unwrap_or("no message")
                    .to_owned();
                return Err(FleetError::Refused { file, message });
            }
            v = v["data"].take();
        }
        let stats: BoardStats =
            serde_json::from_value(v).map_err(|source| FleetError::NotStats {
                file: file.clone(),
                source,
            })?;
        if !stats.aligned {
            return Err(FleetError::NotAligned { file });
        }
        if !(stats.window_seconds.is_finite() && stats.window_seconds >= 0.001) {
            return Err(FleetError::BadWindow {
                file,
                index: 0,
                what: format!("window_seconds {} is not a length", stats.window_seconds),
            });
        }
        Ok(Board { name: file, stats })
    }

    /// Reads a board's answer from a file, `-` for standard input.
    pub fn read(path: &Path) -> Result<Board, FleetError> {
        let name = if path == Path::new("-") {
            "stdin".to_owned()
        } else {
            path.display().to_string()
        };
        let text = if path == Path::new("-") {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
        } else {
            std::fs::read(path)
        }
        .map_err(|source| FleetError::Read {
            file: name.clone(),
            source,
        })?;
        Board::from_json(&name, &text)
    }
}

/// The fleet's view: one merged window per slot, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct FleetView {
    pub window_seconds: f64,
    pub boards: Vec<String>,
    pub windows: Vec<FleetWindow>,
    pub skipped: Vec<Skipped>,
}

/// A window left out of the merge, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub board: String,
    pub boot_id: String,
    pub index: u64,
    pub why: String,
}

/// A figure known only between two bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bounds {
    pub at_least: u64,
    pub at_most: u64,
}

/// Unique clients of the fleet in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Uniques {
    pub at_least: u64,
    pub at_most: u64,
    /// From the boards' client sketches, when every contribution has one
    /// made with the same key; kept within the bounds.
    pub estimate: Option<u64>,
    /// The estimate's relative standard error.
    pub std_error: Option<f64>,
    /// How the figure was reached, for a person.
    pub how: String,
}

/// One slot's merged window.
#[derive(Debug, Clone, Serialize)]
pub struct FleetWindow {
    pub start_ms: u64,
    pub end_ms: u64,
    /// A contributing window is still open.
    pub open: bool,
    pub boards: Vec<String>,
    /// Boards that contributed only part of the window.
    pub partial: Vec<String>,
    /// Boards given that have no window here.
    pub missing: Vec<String>,
    pub requests: BTreeMap<String, u64>,
    pub requests_total: u64,
    pub overlapped: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub peak_connections: Bounds,
    pub peak_in_flight: Bounds,
    pub two_plus_in_flight_board_s: f64,
    pub unique_clients: Uniques,
    /// Percentiles of the merged histograms, as `/stats` shows a board's.
    pub latency_ms: serde_json::Value,
}

/// A window's client key id and sketch registers, as a board showed them.
type SketchOf<'a> = (Option<&'a str>, Option<&'a Vec<(u16, u8)>>);

/// A board's windows in one slot (more than one when it restarted there).
struct Part<'a> {
    board: &'a str,
    w: &'a BoardWindow,
}

/// Merges the boards' answers into one view per aligned window.
pub fn merge(boards: &[Board]) -> Result<FleetView, FleetError> {
    let first = boards.first().ok_or(FleetError::NoBoards)?;
    let seconds = first.stats.window_seconds;
    let window_ms = (seconds * 1000.0).round() as u64;
    let mut seen_boots: BTreeMap<&str, &str> = BTreeMap::new();
    let mut slots: BTreeMap<u64, Vec<Part<'_>>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for b in boards {
        if (b.stats.window_seconds * 1000.0).round() as u64 != window_ms {
            return Err(FleetError::DifferentLengths {
                file: b.name.clone(),
                seconds: b.stats.window_seconds,
                first: first.name.clone(),
                first_seconds: seconds,
            });
        }
        let mut boots: BTreeSet<&str> = BTreeSet::new();
        for w in &b.stats.windows {
            boots.insert(&w.boot_id);
            let skip = |why: &str| Skipped {
                board: b.name.clone(),
                boot_id: w.boot_id.clone(),
                index: w.index,
                why: why.to_owned(),
            };
            match w.window_ms {
                None => {
                    skipped.push(skip("written before windows were aligned to the clock"));
                    continue;
                }
                Some(ms) if ms != window_ms => {
                    skipped.push(skip(&format!(
                        "a window of {} s (an earlier boot's stats_window)",
                        ms as f64 / 1000.0
                    )));
                    continue;
                }
                Some(_) => {}
            }
            check(&b.name, w)?;
            let slot = w.start_ms / window_ms;
            slots
                .entry(slot)
                .or_default()
                .push(Part { board: &b.name, w });
        }
        for boot in boots {
            if let Some(other) = seen_boots.insert(boot, &b.name) {
                return Err(FleetError::Duplicate {
                    file: b.name.clone(),
                    other: other.to_owned(),
                    boot_id: boot.to_owned(),
                });
            }
        }
    }
    let names: Vec<String> = boards.iter().map(|b| b.name.clone()).collect();
    let windows = slots
        .into_iter()
        .map(|(slot, parts)| merge_slot(slot, window_ms, &parts, &names))
        .collect();
    Ok(FleetView {
        window_seconds: seconds,
        boards: names,
        windows,
        skipped,
    })
}

/// Refuses a window that no board could have written, before any of it is
/// counted.
fn check(file: &str, w: &BoardWindow) -> Result<(), FleetError> {
    let bad = |what: String| FleetError::BadWindow {
        file: file.to_owned(),
        index: w.index,
        what,
    };
    let h = w.histograms.as_ref().ok_or(FleetError::NoHistograms {
        file: file.to_owned(),
        index: w.index,
    })?;
    for (name, pairs) in [("all", &h.all), ("clean", &h.clean)] {
        if let Some((v, _)) = pairs.iter().find(|(v, _)| *v == 0 || *v > HIGHEST_MS) {
            return Err(bad(format!(
                "histogram {name}: {v} ms is outside 1..={HIGHEST_MS}"
            )));
        }
    }
    if let Some(regs) = &w.client_sketch {
        let key_id = w.client_key_id.as_deref().unwrap_or("");
        let id = u64::from_str_radix(key_id, 16)
            .map_err(|_| bad(format!("client_key_id {key_id:?} is not a key id")))?;
        let sketch = ClientSketch {
            key_id: id,
            registers: regs.clone(),
        };
        if Registers::from_sketch(&sketch).is_none() {
            return Err(bad("client_sketch has a register out of range".into()));
        }
    }
    if !(w.two_plus_in_flight_s.is_finite() && w.two_plus_in_flight_s >= 0.0) {
        return Err(bad("two_plus_in_flight_s is not a time".into()));
    }
    Ok(())
}

fn merge_slot(slot: u64, window_ms: u64, parts: &[Part<'_>], names: &[String]) -> FleetWindow {
    // Saturating: the slot comes from a file, which may be crafted.
    let start_ms = slot.saturating_mul(window_ms);
    let end_ms = start_ms.saturating_add(window_ms);
    let mut boards: Vec<String> = Vec::new();
    let mut partial: BTreeSet<String> = BTreeSet::new();
    let mut requests: BTreeMap<String, u64> = BTreeMap::new();
    let (mut overlapped, mut tokens_in, mut tokens_out) = (0u64, 0u64, 0u64);
    let mut two_plus = 0.0;
    let mut all = histogram();
    let mut clean = histogram();
    // Per board: its largest peak, and its unique count, in this slot. A
    // board's windows in one slot (a restart inside it) do not overlap in
    // time, so the largest of its peaks is its peak.
    let mut per_board: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    let mut sketches: Vec<SketchOf<'_>> = Vec::new();
    let mut open = false;
    for p in parts {
        let w = p.w;
        if !boards.iter().any(|b| b == p.board) {
            boards.push(p.board.to_owned());
        }
        if w.open || w.start_ms > start_ms || w.end_ms < end_ms {
            partial.insert(p.board.to_owned());
        }
        open |= w.open;
        for (k, n) in &w.requests {
            let e = requests.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*n);
        }
        overlapped = overlapped.saturating_add(w.overlapped);
        tokens_in = tokens_in.saturating_add(w.tokens_in);
        tokens_out = tokens_out.saturating_add(w.tokens_out);
        two_plus += w.two_plus_in_flight_s;
        if let Some(h) = &w.histograms {
            add(&mut all, &h.all);
            add(&mut clean, &h.clean);
        }
        let e = per_board.entry(p.board).or_insert((0, 0, 0));
        e.0 = e.0.max(w.peak_connections);
        e.1 = e.1.max(w.peak_in_flight);
        // Two windows of one board in a slot may share clients: summed,
        // their counts are a bound, which is all a sum is here.
        e.2 = e.2.saturating_add(w.unique_clients);
        sketches.push((w.client_key_id.as_deref(), w.client_sketch.as_ref()));
    }
    let bounds = |f: fn(&(u64, u64, u64)) -> u64| Bounds {
        at_least: per_board.values().map(f).max().unwrap_or(0),
        at_most: per_board
            .values()
            .map(f)
            .fold(0u64, |a, b| a.saturating_add(b)),
    };
    let peak_connections = bounds(|t| t.0);
    let peak_in_flight = bounds(|t| t.1);
    let at_most = per_board.values().fold(0u64, |a, t| a.saturating_add(t.2));
    // Each window's own count is exact, so the largest is a lower bound.
    let at_least = parts.iter().map(|p| p.w.unique_clients).max().unwrap_or(0);
    let unique_clients = uniques(at_least, at_most, &sketches);
    let missing = names
        .iter()
        .filter(|n| !boards.contains(n))
        .cloned()
        .collect();
    FleetWindow {
        start_ms,
        end_ms,
        open,
        boards,
        partial: partial.into_iter().collect(),
        missing,
        requests_total: requests.values().fold(0u64, |a, &n| a.saturating_add(n)),
        requests,
        overlapped,
        tokens_in,
        tokens_out,
        peak_connections,
        peak_in_flight,
        two_plus_in_flight_board_s: two_plus,
        unique_clients,
        latency_ms: serde_json::json!({"all": summary(&all), "clean": summary(&clean)}),
    }
}

/// Adds a board's histogram to the fleet's: `hdrhistogram`'s `add`, so the
/// counts of the same latency from every board fall in the same bucket.
fn add(into: &mut Histogram<u64>, pairs: &[(u64, u64)]) {
    let mut h = histogram();
    for &(v, c) in pairs {
        // Values were checked to be within the bounds (see `check`).
        let _ = h.record_n(v, c);
    }
    let _ = into.add(&h);
}

fn uniques(at_least: u64, at_most: u64, sketches: &[SketchOf<'_>]) -> Uniques {
    let first_key = sketches.first().and_then(|s| s.0);
    let shared = first_key.is_some()
        && sketches
            .iter()
            .all(|(k, regs)| *k == first_key && regs.is_some());
    if !shared {
        let how = if sketches.iter().any(|(k, _)| k.is_some()) {
            "bounds only: the boards' client keys differ (or some have none); \
             set the same stats_client_key on every board"
        } else {
            "bounds only: each board hashes clients with a key of its own; \
             set the same stats_client_key on every board for an estimate"
        };
        return Uniques {
            at_least,
            at_most,
            estimate: None,
            std_error: None,
            how: how.to_owned(),
        };
    }
    let mut union = Registers::default();
    for (_, regs) in sketches {
        let sketch = ClientSketch {
            key_id: 0,
            registers: regs.cloned().unwrap_or_default(),
        };
        if let Some(r) = Registers::from_sketch(&sketch) {
            union.merge(&r);
        }
    }
    Uniques {
        at_least,
        at_most,
        estimate: Some(union.estimate().clamp(at_least, at_most.max(at_least))),
        std_error: Some(STD_ERROR),
        how: "estimate: the union of the boards' client sketches (same key)".to_owned(),
    }
}

/// Reads every file and merges them: `fabricctl fleet-stats`.
pub fn merge_files(paths: &[PathBuf]) -> Result<FleetView, FleetError> {
    let boards = paths
        .iter()
        .map(|p| Board::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    merge(&boards)
}

#[cfg(test)]
mod tests;
