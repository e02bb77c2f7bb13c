//! The log's format: a frame per window record, and reading them back whatever the card did to them.

use std::collections::BTreeMap;
use std::fs::{self};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::sketch::ClientSketch;

/// The record format version. Version 2 added the window's length (windows
/// aligned to the wall clock) and the client sketch; records of version 1
/// are still read (see [`WindowRecordV1`]).
pub const VERSION: u16 = 2;
pub(super) const MAGIC: &[u8; 4] = b"FST1";
pub(super) const HEADER: usize = 12;
/// Largest record a reader accepts (a sanity bound for corrupt lengths).
pub(super) const MAX_RECORD: usize = 1 << 20;
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
    /// Since version 2: the configured window length, ms. Windows end on a
    /// multiple of it since the Unix epoch (the first after a start is
    /// short), so a window's slot is `start_ms / window_ms`. 0 in records
    /// of version 1, whose windows ran from the daemon's start.
    pub window_ms: u64,
    /// Since version 2: the client sketch, kept only when a fleet-wide
    /// client key is configured (a per-boot key's sketch combines with
    /// nothing).
    pub clients: Option<ClientSketch>,
}

impl WindowRecord {
    /// The end of the aligned slot this window belongs to, if it is one
    /// (records of version 1 are not).
    pub fn slot_end_ms(&self) -> Option<u64> {
        (self.window_ms > 0).then(|| super::task::slot_end(self.start_ms, self.window_ms))
    }
}

/// A record of version 1, as it was written: postcard is not
/// self-describing, so an older layout is decoded with its own type and
/// brought up to the current one.
#[derive(Deserialize)]
pub(super) struct WindowRecordV1 {
    /// Always 1; read only to keep the fields in their places.
    _version: u16,
    boot_id: u64,
    index: u64,
    start_ms: u64,
    end_ms: u64,
    closed: bool,
    peak_connections: u64,
    unique_clients: u64,
    requests: BTreeMap<String, u64>,
    overlapped: u64,
    tokens_in: u64,
    tokens_out: u64,
    peak_in_flight: u64,
    two_plus_ms: u64,
    latency_all: Vec<(u64, u64)>,
    latency_clean: Vec<(u64, u64)>,
    dropped_events: u64,
}

impl From<WindowRecordV1> for WindowRecord {
    fn from(r: WindowRecordV1) -> WindowRecord {
        // Brought up to this version as a whole, so framing it again
        // writes the current format and reads back the same.
        WindowRecord {
            version: VERSION,
            boot_id: r.boot_id,
            index: r.index,
            start_ms: r.start_ms,
            end_ms: r.end_ms,
            closed: r.closed,
            peak_connections: r.peak_connections,
            unique_clients: r.unique_clients,
            requests: r.requests,
            overlapped: r.overlapped,
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            peak_in_flight: r.peak_in_flight,
            two_plus_ms: r.two_plus_ms,
            latency_all: r.latency_all,
            latency_clean: r.latency_clean,
            dropped_events: r.dropped_events,
            window_ms: 0,
            clients: None,
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
pub(super) struct VersionOnly {
    pub(super) version: u16,
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
                let decoded = match postcard::from_bytes::<VersionOnly>(payload) {
                    Ok(v) if v.version == VERSION => {
                        postcard::from_bytes::<WindowRecord>(payload).ok()
                    }
                    Ok(v) if v.version == 1 => postcard::from_bytes::<WindowRecordV1>(payload)
                        .ok()
                        .map(WindowRecord::from),
                    _ => None,
                };
                match decoded {
                    Some(r) => {
                        report.records += 1;
                        out.push(r);
                    }
                    None => report.other_version += 1,
                }
            }
            None => {
                // A frame cut off by the end of the file is a torn tail;
                // anything else is corruption: look for the next magic.
                // In u64: on the 32-bit Zynq, HEADER plus a corrupt length
                // near u32::MAX overflows usize.
                let torn = rest.len() >= 8
                    && &rest[..4] == MAGIC
                    && (rest.len() as u64)
                        < HEADER as u64
                            + u64::from(u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]))
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
            window_ms: 1000,
            clients: Some(ClientSketch {
                key_id: 5,
                registers: vec![(3, 1), (4000, 7)],
            }),
        }
    }

    /// Version 1's layout, written as the daemon wrote it before version 2.
    #[derive(Serialize)]
    struct V1<'a> {
        version: u16,
        boot_id: u64,
        index: u64,
        start_ms: u64,
        end_ms: u64,
        closed: bool,
        peak_connections: u64,
        unique_clients: u64,
        requests: &'a BTreeMap<String, u64>,
        overlapped: u64,
        tokens_in: u64,
        tokens_out: u64,
        peak_in_flight: u64,
        two_plus_ms: u64,
        latency_all: &'a [(u64, u64)],
        latency_clean: &'a [(u64, u64)],
        dropped_events: u64,
    }

    fn v1_frame(r: &WindowRecord) -> Vec<u8> {
        let payload = postcard::to_allocvec(&V1 {
            version: 1,
            boot_id: r.boot_id,
            index: r.index,
            start_ms: r.start_ms,
            end_ms: r.end_ms,
            closed: r.closed,
            peak_connections: r.peak_connections,
            unique_clients: r.unique_clients,
            requests: &r.requests,
            overlapped: r.overlapped,
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            peak_in_flight: r.peak_in_flight,
            two_plus_ms: r.two_plus_ms,
            latency_all: &r.latency_all,
            latency_clean: &r.latency_clean,
            dropped_events: r.dropped_events,
        })
        .expect("encode");
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    #[test]
    fn version_1_records_are_still_read_and_come_up_to_this_version() {
        let old = record(0, true);
        let bytes = [v1_frame(&old), frame(&record(1, true))].concat();
        let (recs, rep) = parse(&bytes);
        assert_eq!(rep.records, 2, "{rep:?}");
        assert_eq!(rep.other_version, 0);
        let up = &recs[0];
        assert_eq!(up.version, VERSION);
        assert_eq!((up.window_ms, &up.clients), (0, &None));
        assert_eq!(up.slot_end_ms(), None);
        assert_eq!(up.latency_all, old.latency_all);
        assert_eq!(up.requests, old.requests);
        // Framed again, it is a record of this version and reads the same.
        assert_eq!(parse(&frame(up)).0, vec![up.clone()]);
        assert_eq!(recs[1], record(1, true));
        assert_eq!(recs[1].slot_end_ms(), Some(2000));
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
    fn a_length_near_u32_max_is_a_torn_tail_on_32_bit_too() {
        // HEADER + u32::MAX overflowed usize on the Zynq-7000 (found in
        // review beside the fuzzing; cross-test runs this on armv7).
        let mut bytes = frame(&record(0, true));
        let cut = bytes.len();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        let (recs, rep) = parse(&bytes);
        assert_eq!(recs.len(), 1);
        assert!(rep.torn_tail, "{rep:?}");
        assert_eq!(rep.skipped_bytes, (bytes.len() - cut) as u64);
    }
}
