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
    daemon_with(&["0=kjv.bit"], |_| {}).await
}

/// The same without the completion cache: the clients' and the burst's
/// requests are 64 deterministic ones, repeated, which the cache would
/// answer without the fabric these tests measure.
async fn fabric_only() -> Setup {
    daemon_with(&["0=kjv.bit"], |c| c.typing.cache = false).await
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
