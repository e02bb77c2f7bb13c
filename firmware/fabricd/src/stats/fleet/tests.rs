//! The merge against inputs whose merged figures are known by hand.

use super::*;
use crate::stats::sketch::ClientKey;
use serde_json::{json, Value};

const W: u64 = 60_000;
/// A slot's start: 2026-01-01 00:00 UTC, a multiple of a minute.
const T0: u64 = 1_767_225_600_000;

fn window(boot: &str, slot: u64, hist: Value, extra: Value) -> Value {
    let mut w = json!({
        "index": slot,
        "boot_id": boot,
        "start_ms": T0 + slot * W,
        "end_ms": T0 + (slot + 1) * W,
        "open": false,
        "window_ms": W,
        "peak_connections": 10,
        "unique_clients": 3,
        "requests": {"ok": 100},
        "overlapped": 1,
        "tokens_in": 300,
        "tokens_out": 1600,
        "peak_in_flight": 2,
        "two_plus_in_flight_s": 1.5,
        "histograms": {"all": hist, "clean": hist},
        "client_key_id": null,
        "client_sketch": null,
    });
    if let (Some(w), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            w.insert(k.clone(), v.clone());
        }
    }
    w
}

fn board(name: &str, windows: Vec<Value>) -> Board {
    let answer = json!({"window_seconds": W as f64 / 1000.0, "aligned": true, "windows": windows});
    Board::from_json(name, answer.to_string().as_bytes()).expect("a board's answer")
}

fn lat(w: &FleetWindow) -> (u64, u64, u64, u64) {
    let a = &w.latency_ms["all"];
    let n = |k: &str| a[k].as_u64().unwrap_or(u64::MAX);
    (n("count"), n("p50"), n("p95"), n("p99"))
}

/// Three boards whose percentiles are known: merged, the latencies are
/// 60×10 ms, 30×20 ms, 6×300 ms, 4×900 ms, so p50 = 10, p95 = 300,
/// p99 = 900. The boards' own p50/p95/p99 are 10/10/10, 20/20/20 and
/// 300/900/900: averaged, 110/310/310; weighted by count, p50 = 42. A merge
/// that averaged in any way fails here.
fn three_boards() -> Vec<Board> {
    vec![
        board("a", vec![window("a1", 0, json!([[10, 60]]), json!({}))]),
        board("b", vec![window("b1", 0, json!([[20, 30]]), json!({}))]),
        board(
            "c",
            vec![window("c1", 0, json!([[300, 6], [900, 4]]), json!({}))],
        ),
    ]
}

#[test]
fn percentiles_come_from_the_merged_histograms_not_the_boards_percentiles() {
    let boards = three_boards();
    // The boards' own percentiles are what the doc above says.
    let own: Vec<_> = boards
        .iter()
        .map(|b| {
            let m = merge(std::slice::from_ref(b)).expect("one board");
            let (_, p50, p95, p99) = lat(&m.windows[0]);
            (p50, p95, p99)
        })
        .collect();
    assert_eq!(own, vec![(10, 10, 10), (20, 20, 20), (300, 900, 900)]);
    let v = merge(&boards).expect("merge");
    assert_eq!(v.windows.len(), 1);
    let w = &v.windows[0];
    assert_eq!(lat(w), (100, 10, 300, 900));
    assert_eq!(w.latency_ms["all"]["max"], 900);
    assert_eq!(w.latency_ms["clean"]["p95"], 300);
    assert_eq!((w.start_ms, w.end_ms), (T0, T0 + W));
}

#[test]
fn counts_are_summed_and_peaks_are_bounds() {
    let mut boards = three_boards();
    boards[1] = board(
        "b",
        vec![window(
            "b1",
            0,
            json!([[20, 30]]),
            json!({"peak_connections": 25, "requests": {"ok": 30, "overloaded": 4}}),
        )],
    );
    let w = merge(&boards).expect("merge").windows.remove(0);
    assert_eq!(
        w.requests,
        BTreeMap::from([("ok".into(), 230), ("overloaded".into(), 4)])
    );
    assert_eq!(w.requests_total, 234);
    assert_eq!((w.overlapped, w.tokens_in, w.tokens_out), (3, 900, 4800));
    assert_eq!(
        w.peak_connections,
        Bounds {
            at_least: 25,
            at_most: 45
        }
    );
    assert_eq!(
        w.peak_in_flight,
        Bounds {
            at_least: 2,
            at_most: 6
        }
    );
    assert!((w.two_plus_in_flight_board_s - 4.5).abs() < 1e-9);
    assert_eq!(w.boards, vec!["a", "b", "c"]);
    assert!(w.missing.is_empty() && w.partial.is_empty());
}

#[test]
fn a_missing_board_is_named_and_the_rest_merge() {
    let mut boards = three_boards();
    // Board b has slot 1 only; a and c have slots 0 and 1.
    boards[1] = board("b", vec![window("b1", 1, json!([[20, 30]]), json!({}))]);
    boards[0].stats.windows.push(
        board("a", vec![window("a1", 1, json!([[10, 5]]), json!({}))])
            .stats
            .windows
            .remove(0),
    );
    boards[2].stats.windows.push(
        board("c", vec![window("c1", 1, json!([[30, 5]]), json!({}))])
            .stats
            .windows
            .remove(0),
    );
    let v = merge(&boards).expect("merge");
    assert_eq!(v.windows.len(), 2);
    let (w0, w1) = (&v.windows[0], &v.windows[1]);
    assert_eq!(w0.boards, vec!["a", "c"]);
    assert_eq!(w0.missing, vec!["b"]);
    // Without b: 60×10 ms and 6×300, 4×900: p50 10, p95 900 (rank 67 of 70).
    assert_eq!(lat(w0), (70, 10, 900, 900));
    assert_eq!(w1.boards, vec!["a", "b", "c"]);
    assert!(w1.missing.is_empty());
    assert_eq!(lat(w1), (40, 20, 30, 30));
}

#[test]
fn windows_of_different_lengths_are_refused_naming_the_file() {
    let boards = three_boards();
    let answer = json!({"window_seconds": 1800.0, "aligned": true, "windows": []});
    let long = Board::from_json("boards/d.json", answer.to_string().as_bytes()).expect("board");
    let e = merge(&[boards[0].clone(), long]).expect_err("refused");
    assert!(matches!(e, FleetError::DifferentLengths { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("boards/d.json") && text.contains("1800") && text.contains("60"),
        "{text}"
    );
}

#[test]
fn bad_input_is_a_typed_error_naming_the_file() {
    let e = Board::from_json("x.json", b"{not json").expect_err("not json");
    assert!(matches!(e, FleetError::NotJson { ref file, .. } if file == "x.json"));
    let e = Board::from_json("y.json", br#"{"windows": 3}"#).expect_err("not stats");
    assert!(matches!(e, FleetError::NotStats { .. }), "{e}");
    let old = json!({"window_seconds": 60.0, "windows": []});
    let e = Board::from_json("old.json", old.to_string().as_bytes()).expect_err("unaligned");
    assert!(matches!(e, FleetError::NotAligned { .. }), "{e}");
    let refused = json!({"ok": false, "error": {"type": "x", "message": "no socket"}});
    let e = Board::from_json("r.json", refused.to_string().as_bytes()).expect_err("refused");
    assert!(e.to_string().contains("no socket"), "{e}");
    // Fetched without ?merge=1: no histograms to merge.
    let mut w = window("z1", 0, json!([]), json!({}));
    if let Some(o) = w.as_object_mut() {
        o.remove("histograms");
    }
    let e = merge(&[board("z.json", vec![w])]).expect_err("no histograms");
    assert!(
        e.to_string().contains("z.json") && e.to_string().contains("merge=1"),
        "{e}"
    );
    let w = window("q1", 0, json!([[0, 1]]), json!({}));
    let e = merge(&[board("q.json", vec![w])]).expect_err("bad value");
    assert!(matches!(e, FleetError::BadWindow { .. }), "{e}");
    let e = merge(&[three_boards()[0].clone(), three_boards()[0].clone()]).expect_err("twice");
    assert!(matches!(e, FleetError::Duplicate { .. }), "{e}");
    assert!(matches!(merge(&[]), Err(FleetError::NoBoards)));
}

#[test]
fn unaligned_and_other_length_windows_are_skipped_with_why() {
    let mut old = window("a0", 0, json!([[10, 1]]), json!({"window_ms": null}));
    old["start_ms"] = json!(T0 - 5 * W + 17);
    let other = window("a0", 1, json!([[10, 1]]), json!({"window_ms": 1_800_000}));
    let now = window("a1", 2, json!([[10, 1]]), json!({"open": true}));
    let v = merge(&[board("a", vec![old, other, now])]).expect("merge");
    assert_eq!(v.windows.len(), 1);
    assert!(v.windows[0].open);
    assert_eq!(v.windows[0].partial, vec!["a"]);
    let why: Vec<&str> = v.skipped.iter().map(|s| s.why.as_str()).collect();
    assert_eq!(why.len(), 2);
    assert!(
        why[0].contains("aligned") && why[1].contains("1800"),
        "{why:?}"
    );
}

fn sketch_of(key: &ClientKey, clients: std::ops::RangeInclusive<u32>) -> Value {
    let mut r = Registers::default();
    for n in clients {
        r.insert(key.hash(std::net::IpAddr::V4(n.into())));
    }
    json!(r.sketch(key.id()).registers)
}

#[test]
fn uniques_are_a_sketch_estimate_with_one_key_and_bounds_without() {
    let key = ClientKey::from_hex("00112233445566778899aabbccddeeff").expect("key");
    let id = format!("{:016x}", key.id());
    // a saw clients 1..=3, b saw 2..=5: 5 in all, not 7.
    let a = window(
        "a1",
        0,
        json!([[10, 1]]),
        json!({"unique_clients": 3, "client_key_id": id, "client_sketch": sketch_of(&key, 1..=3)}),
    );
    let b = window(
        "b1",
        0,
        json!([[10, 1]]),
        json!({"unique_clients": 4, "client_key_id": id, "client_sketch": sketch_of(&key, 2..=5)}),
    );
    let v = merge(&[board("a", vec![a.clone()]), board("b", vec![b.clone()])]).expect("merge");
    let u = &v.windows[0].unique_clients;
    assert_eq!((u.at_least, u.at_most, u.estimate), (4, 7, Some(5)));
    assert_eq!(u.std_error, Some(STD_ERROR));
    // Without a shared key: the range only, and it says so.
    let mut b_own = b.clone();
    b_own["client_key_id"] = json!("0123456789abcdef");
    for (x, y) in [
        (a.clone(), b_own),
        (
            window("a1", 0, json!([[10, 1]]), json!({"unique_clients": 3})),
            window("b1", 0, json!([[10, 1]]), json!({"unique_clients": 4})),
        ),
    ] {
        let v = merge(&[board("a", vec![x]), board("b", vec![y])]).expect("merge");
        let u = &v.windows[0].unique_clients;
        assert_eq!((u.at_least, u.at_most, u.estimate), (4, 7, None));
        assert!(u.how.contains("stats_client_key"), "{}", u.how);
    }
}
