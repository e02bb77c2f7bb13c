//! Live stats: windows that match what was sent, overlapped requests
//! counted apart, a durable log that survives torn and corrupt writes, and
//! a daemon that keeps serving when the card misbehaves; windows aligned to
//! the wall clock, and two boards merged by `fabricctl fleet-stats`.
//!
//! Windows end on the wall clock's boundaries, so one can close in the
//! middle of any test: what a test sent is counted over this boot's
//! windows, never in the open one alone.

mod common;

use std::time::{Duration, Instant};

use common::{control_at, get, metric_in, post_json, small_completion, wait_for, Daemon};
use fabricd::stats;
use serde_json::json;

async fn stats_now(d: &Daemon) -> serde_json::Value {
    get(d.addr, "/stats").await.expect("/stats").json()
}

/// This boot's windows (the open one among them).
fn this_boot(s: &serde_json::Value) -> Vec<serde_json::Value> {
    s["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .filter(|w| w["boot_id"] == s["boot_id"])
        .cloned()
        .collect()
}

/// A figure summed over this boot's windows.
fn total(s: &serde_json::Value, f: impl Fn(&serde_json::Value) -> &serde_json::Value) -> u64 {
    this_boot(s)
        .iter()
        .map(|w| f(w).as_u64().unwrap_or(0))
        .sum()
}

/// A latency histogram of this boot's windows merged (from `?merge=1`).
fn merged(s: &serde_json::Value, which: &str) -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000, 3).expect("bounds");
    for w in this_boot(s) {
        for p in w["histograms"][which].as_array().expect("histograms") {
            h.record_n(p[0].as_u64().expect("value"), p[1].as_u64().expect("count"))
                .expect("in bounds");
        }
    }
    h
}

async fn from(d: &Daemon, ip: &str, model: &str, seed: u64) -> u16 {
    use bytes::Bytes;
    use http_body_util::Full;
    let body = json!({"model": model, "prompt": "And God said", "max_tokens": 5, "seed": seed, "ignore_eos": true});
    let req = hyper::Request::post("/v1/completions")
        .header("host", "t")
        .header("content-type", "application/json")
        .header("x-forwarded-for", ip)
        .body(Full::new(Bytes::from(
            serde_json::to_vec(&body).expect("json"),
        )))
        .expect("request");
    common::request(d.addr, req).await.expect("reply").status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_matches_the_window_and_sets_the_reconfiguration_apart() {
    let d = Daemon::start(
        |s| s.pr_bytes_per_sec = 1_000_000,
        |c| {
            c.trusted_proxies = vec!["127.0.0.1/32".parse().expect("a network")];
            c.stats_window = "1h".into();
        },
    )
    .await;
    let prompt_tokens = 3; // "And God said" in kjv's and fortunes' tokenizers
                           // Phase 1: three clients, clean.
    for (i, ip) in ["10.0.0.1", "10.0.0.2", "10.0.0.3"].iter().enumerate() {
        for k in 0..4 {
            assert_eq!(from(&d, ip, "kjv", (i * 10 + k) as u64).await, 200);
        }
    }
    assert_eq!(from(&d, "10.0.0.1", "fortunes", 1).await, 200);
    assert_eq!(from(&d, "10.0.0.2", "fortunes", 2).await, 200);
    // Phase 2: slot 1 (fortunes) is reflashed (its engine image programmed
    // again, about a second at 1 MB/s); two fortunes requests wait
    // it out (overlapped), three kjv requests do not need that slot.
    let ctl = tokio::spawn({
        let root = d.dir.path().to_owned();
        async move {
            control_at(
                &root,
                json!({"cmd": "load", "model": "fortunes", "slot": 1, "reflash": true}),
            )
            .await
        }
    });
    let start = Instant::now();
    loop {
        let r = get(d.addr, "/readyz").await.expect("readyz").json();
        if r["slots"][1]["state"] == "loading" {
            break;
        }
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "the load never started"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let addr = d.addr;
    let handles: Vec<_> = (0..2u64)
        .map(|k| {
            tokio::spawn(async move {
                let body = json!({"model": "fortunes", "prompt": "And God said", "max_tokens": 5, "seed": 100 + k, "ignore_eos": true});
                post_json(addr, body).await.status
            })
        })
        .collect();
    // Once the scheduler holds both, they wait until the load ends, and the
    // load has not ended while `/readyz` still says so: the time between
    // is a floor under their latency, whatever else the machine is doing.
    let held = loop {
        let text = get(addr, "/metrics").await.expect("metrics").text();
        if metric_in(&text, "fabricd_queue_depth") + metric_in(&text, "fabricd_in_flight") >= 2.0 {
            break Instant::now();
        }
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "the two fortunes requests never reached the scheduler"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let mut still_loading = held;
    let mut kjv = 0..3;
    loop {
        let asked = Instant::now();
        let r = get(d.addr, "/readyz").await.expect("readyz").json();
        if r["slots"][1]["state"] != "loading" {
            break;
        }
        still_loading = asked;
        // The kjv requests go in while the slot is being loaded.
        if let Some(k) = kjv.next() {
            assert_eq!(from(&d, "10.0.0.3", "kjv", 200 + k).await, 200);
        } else {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    for k in kjv {
        assert_eq!(from(&d, "10.0.0.3", "kjv", 200 + k).await, 200);
    }
    let waited_ms = still_loading.saturating_duration_since(held).as_millis() as u64;
    for h in handles {
        assert_eq!(h.await.expect("join"), 200);
    }
    assert_eq!(ctl.await.expect("join")["ok"], true);
    // Phase 3: clean again.
    assert_eq!(from(&d, "10.0.0.1", "fortunes", 7).await, 200);
    assert_eq!(from(&d, "10.0.0.2", "fortunes", 8).await, 200);
    let s = get(d.addr, "/stats?merge=1").await.expect("/stats").json();
    assert_eq!(total(&s, |w| &w["requests"]["ok"]), 21, "{s}");
    assert_eq!(total(&s, |w| &w["overlapped"]), 2, "{s}");
    // The two waiting requests came from 127.0.0.1 (no X-Forwarded-For).
    let windows = this_boot(&s);
    if let [w] = windows.as_slice() {
        assert_eq!(w["unique_clients"], 4, "{w}");
    } else {
        // A window boundary fell inside the test: each window's count is
        // exact, so together they bound the 4.
        let most = windows
            .iter()
            .map(|w| w["unique_clients"].as_u64().unwrap_or(0));
        assert!(
            most.clone().max() <= Some(4) && most.sum::<u64>() >= 4,
            "{s}"
        );
    }
    assert_eq!(total(&s, |w| &w["tokens_in"]), 21 * prompt_tokens, "{s}");
    assert_eq!(total(&s, |w| &w["tokens_out"]), 21 * 5, "{s}");
    let (all, clean) = (merged(&s, "all"), merged(&s, "clean"));
    assert_eq!((all.len(), clean.len()), (21, 19));
    // The overlapped ones waited out the reflash, and the all-requests
    // histogram holds that wait. (The clean one's tail is this machine's
    // noise, so nothing is asserted of it beyond its count.)
    assert!(
        all.max() >= waited_ms,
        "the longest request took {} ms; two waited at least {waited_ms} ms",
        all.max()
    );
    assert!(windows
        .iter()
        .any(|w| w["peak_in_flight"].as_u64() >= Some(1)));
    assert!(windows
        .iter()
        .any(|w| w["peak_connections"].as_u64() >= Some(1)));
    // fabricctl shows the same window.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .arg("--socket")
        .arg(d.dir.path().join("run/fabricd.sock"))
        .args(["stats", "--json"])
        .output()
        .expect("fabricctl");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(total(&v["data"], |w| &w["requests"]["ok"]), 21);
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .arg("--socket")
        .arg(d.dir.path().join("run/fabricd.sock"))
        .arg("stats")
        .output()
        .expect("fabricctl");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("(open)") && text.contains("window (UTC)"),
        "{text}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_close_and_reach_the_card() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.stats_window = "300ms".into();
            c.stats_checkpoint = "100ms".into();
        },
    )
    .await;
    for k in 0..5 {
        assert_eq!(small_completion(d.addr, "x", k).await, 200);
    }
    let dir = d.dir.path().join("data/fabricd");
    wait_for("a closed window on the card", common::READY_WITHIN, || {
        stats::read_dir(&dir).0.iter().any(|w| w.closed)
    })
    .await;
    let _root = d.stop().await;
    let (windows, report) = stats::read_dir(&dir);
    assert_eq!(report.corrupt, 0);
    assert!(!report.torn_tail);
    let served: u64 = windows
        .iter()
        .map(|w| w.requests.get("ok").copied().unwrap_or(0))
        .sum();
    assert_eq!(
        served, 5,
        "every request in exactly one window: {windows:?}"
    );
    // Aligned to the wall clock: every window but the first starts on a
    // multiple of its length, and every closed one ends on one.
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(w.window_ms, 300, "{w:?}");
        if i > 0 {
            assert_eq!(w.start_ms % 300, 0, "{w:?}");
        }
        if w.closed {
            assert_eq!(w.end_ms % 300, 0, "{w:?}");
            assert_eq!(w.slot_end_ms(), Some(w.end_ms), "{w:?}");
        }
    }
    // Offline reading, as over SSH with the daemon stopped.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .args(["stats", "--json", "--dir"])
        .arg(&dir)
        .output()
        .expect("fabricctl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let total: u64 = v["data"]["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .map(|w| w["requests"]["ok"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(total, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_and_corrupt_logs_lose_nothing_earlier_and_the_daemon_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data/fabricd");
    std::fs::create_dir_all(&data).expect("mkdir");
    let rec = |index: u64| stats::WindowRecord {
        version: stats::VERSION,
        boot_id: 1,
        index,
        start_ms: 1_000 * index,
        end_ms: 1_000 * index + 900,
        closed: true,
        peak_connections: 1,
        unique_clients: 1,
        requests: [("ok".to_owned(), 10 + index)].into_iter().collect(),
        overlapped: 0,
        tokens_in: 1,
        tokens_out: 1,
        peak_in_flight: 1,
        two_plus_ms: 0,
        latency_all: vec![(17, 10)],
        latency_clean: vec![(17, 10)],
        dropped_events: 0,
        window_ms: 1_000,
        clients: None,
    };
    // Four records; the third corrupted in the middle; a fifth torn off.
    let mut bytes = Vec::new();
    for i in 0..4 {
        let mut f = stats::frame(&rec(i));
        if i == 2 {
            let mid = f.len() / 2;
            f[mid] ^= 0x55;
        }
        bytes.extend(f);
    }
    let fifth = stats::frame(&rec(4));
    bytes.extend_from_slice(&fifth[..fifth.len() - 7]);
    std::fs::write(data.join(stats::LOG), &bytes).expect("write");
    let size_before = bytes.len() as u64;
    let d = Daemon::start_in(dir, |s| s.time_scale = 0.05, |_| {}).await;
    let s = stats_now(&d).await;
    let old: Vec<u64> = s["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .filter(|w| w["open"] == false)
        .map(|w| w["index"].as_u64().expect("index"))
        .collect();
    assert_eq!(
        old,
        vec![0, 1, 3],
        "the corrupt one is skipped, none after it hidden: {s}"
    );
    assert_eq!(s["storage"]["at_start"]["corrupt"], 1);
    assert_eq!(s["storage"]["at_start"]["torn_tail"], true);
    assert_eq!(small_completion(d.addr, "x", 0).await, 200);
    d.stats_checkpoint().await;
    let len = std::fs::metadata(d.dir.path().join("data/fabricd").join(stats::LOG))
        .expect("meta")
        .len();
    assert!(len > size_before, "records are appended, nothing rewritten");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_other_versions_are_reported_not_fatal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data/fabricd");
    std::fs::create_dir_all(&data).expect("mkdir");
    let mut other = stats::frame(&stats::WindowRecord {
        version: 99,
        boot_id: 5,
        index: 0,
        start_ms: 0,
        end_ms: 1,
        closed: true,
        peak_connections: 0,
        unique_clients: 0,
        requests: Default::default(),
        overlapped: 0,
        tokens_in: 0,
        tokens_out: 0,
        peak_in_flight: 0,
        two_plus_ms: 0,
        latency_all: vec![],
        latency_clean: vec![],
        dropped_events: 0,
        window_ms: 1,
        clients: None,
    });
    other.splice(
        0..0,
        b"#!/bin/sh garbage that is not ours\n".iter().copied(),
    );
    std::fs::write(data.join(stats::LOG), &other).expect("write");
    let d = Daemon::start_in(dir, |s| s.time_scale = 0.05, |_| {}).await;
    let s = stats_now(&d).await;
    assert_eq!(s["storage"]["at_start"]["other_version"], 1, "{s}");
    assert_eq!(s["storage"]["at_start"]["corrupt"], 1, "{s}");
    assert_eq!(s["storage"]["ok"], true);
    assert_eq!(small_completion(d.addr, "x", 0).await, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_card_costs_durability_not_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data/fabricd");
    std::fs::create_dir_all(&data).expect("mkdir");
    // Every write to the log fails with ENOSPC.
    std::os::unix::fs::symlink("/dev/full", data.join(stats::LOG)).expect("symlink");
    let d = Daemon::start_in(
        dir,
        |s| s.time_scale = 0.05,
        |c| c.stats_checkpoint = "50ms".into(),
    )
    .await;
    assert_eq!(small_completion(d.addr, "x", 0).await, 200);
    d.stats_checkpoint().await;
    let s = stats_now(&d).await;
    assert_eq!(s["storage"]["ok"], false, "{s}");
    assert!(
        s["storage"]["error"]
            .as_str()
            .expect("error")
            .contains("No space left"),
        "{s}"
    );
    // The window is still counted, in memory.
    assert_eq!(total(&s, |w| &w["requests"]["ok"]), 1);
    assert_eq!(small_completion(d.addr, "y", 0).await, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_data_dir_costs_durability_not_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The data directory's path is taken by a file: nothing can be created.
    std::fs::create_dir_all(dir.path().join("data")).expect("mkdir");
    std::fs::write(dir.path().join("data/fabricd"), "not a directory").expect("file");
    let d = Daemon::start_in(dir, |s| s.time_scale = 0.05, |_| {}).await;
    assert_eq!(small_completion(d.addr, "x", 0).await, 200);
    d.stats_checkpoint().await;
    let s = stats_now(&d).await;
    assert_eq!(s["storage"]["ok"], false, "{s}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_past_its_limit_is_rotated_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data/fabricd");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join(stats::LOG), vec![0u8; 20_000]).expect("write");
    let d = Daemon::start_in(dir, |s| s.time_scale = 0.05, |c| c.stats_max_bytes = 8192).await;
    d.stats_checkpoint().await;
    let data = d.dir.path().join("data/fabricd");
    assert_eq!(
        std::fs::metadata(data.join(format!("{}.1", stats::LOG)))
            .expect("rotated")
            .len(),
        20_000
    );
    assert!(std::fs::metadata(data.join(stats::LOG)).expect("new").len() < 8192);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_drops_nothing_with_2048_clients() {
    // Every one of them is served, so the count is exact. Predictive
    // admission is off: under qemu-user, where everything is many times
    // slower, it refused about a quarter of them as predicted late (typed;
    // tested in tests/typing.rs), though without it all are served in time.
    let d = Daemon::start(
        |s| s.time_scale = 0.002,
        |c| {
            c.queue_capacity = 4096;
            c.typing.predictive_admission = false;
        },
    )
    .await;
    let addr = d.addr;
    let clients: Vec<_> = (0..2048u64)
        .map(|k| tokio::spawn(async move { small_completion(addr, "x", k).await }))
        .collect();
    let mut ok = 0;
    for c in clients {
        if c.await.expect("join") == 200 {
            ok += 1;
        }
    }
    assert_eq!(ok, 2048);
    let s = stats_now(&d).await;
    assert_eq!(total(&s, |w| &w["requests"]["ok"]), 2048);
    let peak = this_boot(&s)
        .iter()
        .filter_map(|w| w["peak_connections"].as_u64())
        .max();
    assert!(peak > Some(100), "{s}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_boards_merge_in_fabricctl_fleet_stats() {
    let key = "00112233445566778899aabbccddeeff";
    let board = || {
        Daemon::start(
            |s| s.time_scale = 0.05,
            |c| {
                c.trusted_proxies = vec!["127.0.0.1/32".parse().expect("a network")];
                c.stats_window = "1h".into();
                c.stats_client_key = Some(key.into());
            },
        )
    };
    let (a, b) = (board().await, board().await);
    // a serves clients 1..=3, b clients 2..=5: 5 clients in all, not 7.
    for n in 1..=3 {
        assert_eq!(from(&a, &format!("10.0.0.{n}"), "kjv", n).await, 200);
    }
    for n in 2..=5 {
        assert_eq!(from(&b, &format!("10.0.0.{n}"), "kjv", n).await, 200);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // a's answer as curl fetches it; b's through the control socket.
    let a_json = dir.path().join("a.json");
    let body = get(a.addr, "/stats?merge=1").await.expect("/stats").text();
    std::fs::write(&a_json, body).expect("write");
    let fabricctl = || std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"));
    let out = fabricctl()
        .arg("--socket")
        .arg(b.dir.path().join("run/fabricd.sock"))
        .args(["stats", "--merge", "--json"])
        .output()
        .expect("fabricctl");
    assert!(out.status.success());
    let b_json = dir.path().join("b.json");
    std::fs::write(&b_json, &out.stdout).expect("write");
    let out = fabricctl()
        .args(["--json", "fleet-stats"])
        .args([&a_json, &b_json])
        .output()
        .expect("fabricctl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let windows = v["windows"].as_array().expect("windows");
    let sum = |k: &str| -> u64 { windows.iter().filter_map(|w| w[k].as_u64()).sum() };
    assert_eq!(sum("requests_total"), 7, "{v}");
    assert_eq!(sum("tokens_out"), 7 * 5, "{v}");
    let count: u64 = windows
        .iter()
        .filter_map(|w| w["latency_ms"]["all"]["count"].as_u64())
        .sum();
    assert_eq!(count, 7, "{v}");
    if let [w] = windows.as_slice() {
        // No hour boundary fell inside the test.
        assert_eq!(w["unique_clients"]["estimate"], 5, "{w}");
        assert_eq!(w["unique_clients"]["at_least"], 4, "{w}");
        assert_eq!(w["unique_clients"]["at_most"], 7, "{w}");
        assert_eq!(w["boards"].as_array().map(Vec::len), Some(2), "{w}");
        assert_eq!(w["open"], true);
    }
    // The table, and a bad file named in a typed error.
    let table = fabricctl()
        .arg("fleet-stats")
        .args([&a_json, &b_json])
        .output()
        .expect("fabricctl");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("2 board(s)") && text.contains("window (UTC)"),
        "{text}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "<html>502 Bad Gateway</html>").expect("write");
    let out = fabricctl()
        .arg("fleet-stats")
        .args([&a_json, &bad])
        .output()
        .expect("fabricctl");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("not JSON"),
        "{err}"
    );
    // Without ?merge=1 there is nothing to merge percentiles from.
    let plain = dir.path().join("plain.json");
    let body = get(a.addr, "/stats").await.expect("/stats").text();
    std::fs::write(&plain, body).expect("write");
    let out = fabricctl()
        .args(["fleet-stats"])
        .arg(&plain)
        .output()
        .expect("fabricctl");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("merge=1"));
    a.stop().await;
    b.stop().await;
}
