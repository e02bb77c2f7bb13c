//! The stats log's frames, as the daemon reads `stats.log` back at start
//! (`fabricd::stats::parse`) and shows its windows in `/stats`
//! (`window_json`).
//!
//! Beyond not panicking: the report counts what was returned and skips no
//! more than the input; every record read is one the daemon could have
//! written, which framed again reads back alone and the same.
#![no_main]

use fabricd::stats::{frame, latest, parse, window_json, ReadReport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let (records, report) = parse(bytes);
    assert_eq!(report.records, records.len());
    assert!(report.skipped_bytes <= bytes.len() as u64);
    for r in &records {
        let (back, rep) = parse(&frame(r));
        assert_eq!(back.as_slice(), std::slice::from_ref(r));
        assert_eq!(
            rep,
            ReadReport {
                records: 1,
                ..ReadReport::default()
            }
        );
        let _ = window_json(r).to_string();
    }
    let n = records.len();
    assert!(latest(records).len() <= n);
});
