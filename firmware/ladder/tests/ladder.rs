//! The ladder binary against a daemon over the simulated fabric.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fabric_sim::{SimConfig, Simulator};
use fabricd::config::Config;
use tokio_util::sync::CancellationToken;

fn bitstreams() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
}

struct Setup {
    sim: Simulator,
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn daemon() -> Setup {
    daemon_with(&["0=trigram-v2.bit"], |_| {}).await
}

/// The same without the completion cache: the clients' and the burst's
/// requests are 64 deterministic ones, repeated, which the cache would
/// answer without the fabric these tests measure.
async fn fabric_only() -> Setup {
    daemon_with(&["0=trigram-v2.bit"], |c| c.typing.cache = false).await
}

/// A daemon over a fabric whose slots boot with `load`, its configuration
/// changed by `tune`.
async fn daemon_with(load: &[&str], tune: impl FnOnce(&mut Config)) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sc = SimConfig::for_root(dir.path());
    sc.firmware = Some(bitstreams());
    sc.load = load.iter().map(|l| (*l).to_owned()).collect();
    // Real time: 259 completions/s, which the debug-built daemon of the
    // tests keeps up with.
    sc.time_scale = 1.0;
    let sim = Simulator::start(sc).expect("simulator");
    let mut config = Config {
        root: dir.path().to_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        ..Config::default()
    };
    tune(&mut config);
    let listener = fabricd::serve::listen(config.listen).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let (ready, serving) = fabricd::serve::Ready::channel();
    let task = tokio::spawn(fabricd::serve::run_ready(
        config,
        listener,
        shutdown.clone(),
        ready,
    ));
    // The daemon's own word that it serves, with a bound that only a
    // daemon that never comes up reaches (a debug build under qemu-user
    // takes seconds).
    match tokio::time::timeout(Duration::from_secs(120), serving).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => panic!("the daemon stopped before it served: {:?}", task.await),
        Err(_) => panic!("the daemon did not serve within 120 s"),
    }
    Setup {
        sim,
        addr,
        shutdown,
        _dir: dir,
    }
}

fn ladder(addr: std::net::SocketAddr, args: &[&str], json: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ladder"))
        .env("RUST_LOG", "warn")
        .arg("--target")
        .arg(format!("http://{addr}"))
        .arg("--json")
        .arg(json)
        .args(args)
        .output()
        .expect("run the ladder")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_ladder_measures_every_rung() {
    let s = fabric_only().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("ladder.json");
    let svg = dir.path().join("ladder.svg");
    let bands = dir.path().join("bands.toml");
    std::fs::write(
        &bands,
        "max_errors = 0\nmax_corrupted = 0\nmax_rejections = 0\n",
    )
    .expect("bands");
    let out = tokio::task::spawn_blocking({
        let (json, svg, bands) = (json.clone(), svg.clone(), bands.clone());
        move || {
            ladder(
                s.addr,
                &[
                    "--rungs",
                    "1,4,16",
                    "--duration",
                    "1",
                    "--warmup",
                    "0.3",
                    "--lurkers",
                    "20",
                    "--calibrate-secs",
                    "0.5",
                    "--bands",
                    bands.to_str().expect("utf8"),
                    "--svg",
                    svg.to_str().expect("utf8"),
                ],
                &json,
            )
        }
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    let rungs = v["rungs"].as_array().expect("rungs");
    assert_eq!(rungs.len(), 3);
    for r in rungs {
        assert!(r["ok"].as_u64().expect("ok") > 0, "{r}");
        assert_eq!(r["errors"], 0);
        assert_eq!(r["corrupted"], 0);
        assert_eq!(r["lurkers_open"], 20);
        assert!(r["p95_ms"].as_f64().expect("p95") >= r["p50_ms"].as_f64().expect("p50"));
    }
    // Sixteen clients run on more than one of the fabric's four lanes at
    // once, in the fabric's own count: a scheduler that serialised requests
    // would never have two decoding together. (Throughput is the full
    // ladder's figure, in results/; here it would race the machine.)
    assert!(
        s.sim.stats().peak_decoding > 1,
        "requests decoded one at a time: {:?}",
        s.sim.stats()
    );
    assert!(
        v["calibration"]["rps"].as_f64().expect("rps")
            > v["fabric"]["capacity_rps"].as_f64().expect("cap")
    );
    assert!(v["stopped_at"].is_null());
    let plot = std::fs::read_to_string(&svg).expect("svg");
    assert!(plot.starts_with("<svg") && plot.contains("polyline"));
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_band_stops_the_ladder_at_its_rung() {
    let s = daemon().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("ladder.json");
    let bands = dir.path().join("bands.toml");
    std::fs::write(&bands, "max_errors = 0\n[rung.2]\nmax_p95_ms = 0.001\n").expect("bands");
    let out = tokio::task::spawn_blocking({
        let (json, bands) = (json.clone(), bands.clone());
        move || {
            ladder(
                s.addr,
                &[
                    "--rungs",
                    "1,2,4",
                    "--duration",
                    "0.5",
                    "--warmup",
                    "0.2",
                    "--no-calibrate",
                    "--bands",
                    bands.to_str().expect("utf8"),
                ],
                &json,
            )
        }
    })
    .await
    .expect("join");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("STOPPED at 2: p95_ms <= 0.001"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    assert_eq!(
        v["rungs"].as_array().expect("rungs").len(),
        2,
        "the rung after the broken one never ran"
    );
    assert_eq!(v["stopped_at"], 2);
    assert_eq!(
        v["rungs"][1]["violations"][0]["condition"],
        "p95_ms <= 0.001"
    );
    s.shutdown.cancel();
}

/// Runs the ladder with `args` on a blocking thread, writing `files` (name,
/// text) into a temporary directory first; `{dir}` in an argument is that
/// directory. Returns the output and the JSON it wrote (if any).
async fn ladder_run(
    addr: std::net::SocketAddr,
    files: &[(&str, &str)],
    args: &[&str],
) -> (std::process::Output, Option<serde_json::Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write a file");
    }
    let json = dir.path().join("out.json");
    let d = dir.path().to_str().expect("utf8").to_owned();
    let args: Vec<String> = args.iter().map(|a| a.replace("{dir}", &d)).collect();
    let out = tokio::task::spawn_blocking({
        let json = json.clone();
        move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ladder(addr, &args, &json)
        }
    })
    .await
    .expect("join");
    let v = std::fs::read(&json)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("the ladder writes JSON"));
    (out, v)
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typists_send_a_request_a_keystroke_and_measure_their_pauses() {
    let s = daemon().await;
    let (out, v) = ladder_run(
        s.addr,
        &[("bands.toml", "max_errors = 0\nmax_corrupted = 0\n")],
        &[
            "--workload",
            "typists",
            "--rungs",
            "4,12",
            "--duration",
            "3",
            "--warmup",
            "2.5",
            "--calibrate-typists",
            "12",
            "--calibrate-secs",
            "5",
            "--bands",
            "{dir}/bands.toml",
            "--svg",
            "{dir}/typists.svg",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    let v = v.expect("json");
    assert_eq!(v["workload"], "typists");
    assert_eq!(v["keystroke_model"]["interval"]["median_ms"], 180.0);
    let rungs = v["rungs"].as_array().expect("rungs");
    assert_eq!(rungs.len(), 2);
    let mut pauses = 0;
    for r in rungs {
        let keys = r["keystrokes"].as_u64().expect("keystrokes");
        assert!(keys > 0, "{r}");
        // No debounce: every keystroke of the window sent its request.
        assert_eq!(r["requests"].as_u64(), Some(keys), "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["corrupted"], 0, "{r}");
        // Every completion is counted under its source (today's daemon
        // sends none: "none").
        let by_source: u64 = r["sources"]
            .as_object()
            .expect("sources")
            .values()
            .map(|n| n.as_u64().expect("count"))
            .sum();
        assert_eq!(Some(by_source), r["completions"].as_u64(), "{r}");
        // The daemon's own count of what reached the fabric.
        assert!(
            r["fabric_requests"].as_f64().expect("fabric requests") > 0.0,
            "{r}"
        );
        let p = r["pauses"].as_u64().expect("pauses");
        let accounted =
            r["pauses_held"].as_u64().expect("held") + r["pauses_missed"].as_u64().expect("missed");
        assert!(accounted <= p, "{r}");
        pauses += p;
    }
    assert!(pauses > 0, "the seed's typists pause in the window");
    // The harness against an instant server, at the calibration's size.
    assert_eq!(v["calibration"]["typists"], 12);
    assert_eq!(v["calibration"]["errors"], 0);
    assert!(v["calibration"]["pauses"].as_u64().expect("pauses") > 0);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounce_sends_fewer_requests_than_keystrokes() {
    let s = daemon().await;
    let (out, v) = ladder_run(
        s.addr,
        &[],
        &[
            "--workload",
            "typists",
            "--rungs",
            "8",
            "--duration",
            "3",
            "--warmup",
            "2.5",
            "--debounce-ms",
            "400",
            "--no-calibrate",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    let v = v.expect("json");
    assert_eq!(v["keystroke_model"]["debounce_ms"], 400);
    let r = &v["rungs"][0];
    let keys = r["keystrokes"].as_u64().expect("keystrokes");
    let requests = r["requests"].as_u64().expect("requests");
    assert!(keys > 0 && requests < keys, "{r}");
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_a_workload_does_not_measure_are_refused_before_the_run() {
    // Nothing listens on port 9: the refusal comes before any connection.
    let addr: std::net::SocketAddr = "127.0.0.1:9".parse().expect("addr");
    let (out, _) = ladder_run(
        addr,
        &[("bands.toml", "max_errors = 0\nmin_rps = 100\n")],
        &["--workload", "typists", "--bands", "{dir}/bands.toml"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("rps"), "{}", said(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_released_at_once_and_every_answer_is_checked() {
    let s = fabric_only().await;
    let (out, v) = ladder_run(
        s.addr,
        &[(
            "bands.toml",
            "max_errors = 0\nmax_corrupted = 0\nmax_rejections = 0\n",
        )],
        &[
            "--burst",
            "48",
            "--no-calibrate",
            "--bands",
            "{dir}/bands.toml",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    let v = v.expect("json");
    assert_eq!(v["workload"], "burst");
    assert_eq!(v["rungs"][0]["clients"], 48);
    assert_eq!(v["rungs"][0]["ok"], 48, "{}", v["rungs"][0]);
    // Released together: the fabric had several decoding at once.
    assert!(s.sim.stats().peak_decoding > 1, "{:?}", s.sim.stats());
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_larger_than_the_queue_breaks_its_band() {
    let s = daemon_with(&["0=trigram-v2.bit"], |c| {
        c.queue_capacity = 8;
        c.typing.cache = false;
    })
    .await;
    let (out, v) = ladder_run(
        s.addr,
        &[("bands.toml", "max_errors = 0\nmax_rejections = 0\n")],
        &[
            "--burst",
            "48",
            "--no-calibrate",
            "--bands",
            "{dir}/bands.toml",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("STOPPED at a burst of 48"),
        "{}",
        said(&out)
    );
    let r = &v.expect("json")["rungs"][0];
    // What the queue could not hold was told so, typed; nothing failed.
    assert!(
        r["typed"]["overloaded"].as_u64().expect("overloaded") > 0,
        "{r}"
    );
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["violations"][0]["condition"], "rejections <= 0");
    s.shutdown.cancel();
}

const PROFILE: &str = r#"
[[class]]
name = "typists"
kind = "typists"
weight = 2
[[class]]
name = "other"
kind = "requests"
weight = 1
model = "fortunes"
max_tokens = 4
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_that_misses_its_target_fails_the_rung() {
    let s = daemon_with(&["0=trigram-v2.bit", "1=trigram-v2.bit"], |_| {}).await;
    let (out, v) = ladder_run(
        s.addr,
        &[
            ("profile.toml", PROFILE),
            (
                "bands.toml",
                "max_errors = 0\n[class.typists]\nmax_corrupted = 0\n[class.other]\nmax_p95_ms = 0.001\n",
            ),
        ],
        &[
            "--profile",
            "{dir}/profile.toml",
            "--bands",
            "{dir}/bands.toml",
            "--rungs",
            "6,12",
            "--duration",
            "2",
            "--warmup",
            "2.5",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("MISSED at 6 clients: other p95_ms <= 0.001"),
        "{text}"
    );
    let v = v.expect("json");
    assert_eq!(v["workload"], "mixed");
    let rungs = v["rungs"].as_array().expect("rungs");
    assert_eq!(rungs.len(), 1, "the rung after the miss never ran");
    assert_eq!(rungs[0]["split"], serde_json::json!([4, 2]));
    let classes = rungs[0]["classes"].as_array().expect("classes");
    assert_eq!(classes[0]["name"], "typists");
    assert_eq!(classes[0]["result"]["violations"], serde_json::json!([]));
    assert!(classes[0]["result"]["keystrokes"].as_u64().expect("keys") > 0);
    assert_eq!(classes[1]["name"], "other");
    assert!(classes[1]["result"]["ok"].as_u64().expect("ok") > 0);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_class_without_a_target_is_refused_before_the_run() {
    let addr: std::net::SocketAddr = "127.0.0.1:9".parse().expect("addr");
    let (out, _) = ladder_run(
        addr,
        &[
            ("profile.toml", PROFILE),
            ("bands.toml", "[class.typists]\nmax_errors = 0\n"),
        ],
        &[
            "--profile",
            "{dir}/profile.toml",
            "--bands",
            "{dir}/bands.toml",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("[class.other]"), "{}", said(&out));
}
