//! `fabricd probe` and `fabricd generate` against the simulator running in
//! its own process, as on a board where the fabric outlives the daemon.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

fn fabricd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fabricd"));
    c.env("RUST_LOG", "warn");
    c
}

fn bitstreams() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
}

/// `fabricd sim` in a child process; killed on drop.
struct SimProcess {
    child: Child,
}

impl SimProcess {
    fn start(root: &Path, extra: &[&str]) -> SimProcess {
        let child = fabricd()
            .arg("sim")
            .arg("--root")
            .arg(root)
            .arg("--firmware")
            .arg(bitstreams())
            .args([
                "--load",
                "0=kjv.bit",
                "--load",
                "1=fortunes.bit",
                "--time-scale",
                "0.05",
            ])
            .args(extra)
            .spawn()
            .expect("spawn the simulator");
        let ready = root.join("sim/ready");
        let start = Instant::now();
        while !ready.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the simulator did not come up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        SimProcess { child }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run fabricd")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn probe_shows_the_shell_slots_and_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _sim = SimProcess::start(dir.path(), &[]);
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("shell     v1.0"), "{stdout}");
    assert!(stdout.contains("2 slots × 4 lanes"), "{stdout}");
    assert!(stdout.contains("slot 0    ready    kjv"), "{stdout}");
    assert!(stdout.contains("slot 1    ready    fortunes"), "{stdout}");
    assert!(
        stdout.contains("udmabuf-fabric: 4096 KiB at 0x870000000"),
        "{stdout}"
    );
    let json = run(fabricd()
        .arg("probe")
        .arg("--json")
        .arg("--root")
        .arg(dir.path()));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["shell"]["lanes"], 4);
    assert_eq!(v["slots"][1]["state"], "ready");
}

#[test]
fn generate_is_deterministic_per_seed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _sim = SimProcess::start(dir.path(), &[]);
    let gen = |seed: &str, model: &str| {
        let out = run(fabricd()
            .arg("generate")
            .arg("--root")
            .arg(dir.path())
            .args([
                "--model",
                model,
                "--prompt",
                "And God said",
                "--max-tokens",
                "24",
                "--seed",
                seed,
            ]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let a = gen("7", "kjv");
    assert!(
        a.starts_with("And God said") && a.len() > "And God said".len() + 10,
        "{a}"
    );
    assert_eq!(a, gen("7", "kjv"));
    let others: Vec<String> = ["8", "9", "10"].iter().map(|s| gen(s, "kjv")).collect();
    assert!(
        others.iter().any(|o| *o != a),
        "different seeds should differ somewhere"
    );
    assert_ne!(
        gen("7", "fortunes"),
        a,
        "a different model writes different text"
    );
    // Unknown model: named, with the known ones.
    let out = run(fabricd()
        .arg("generate")
        .arg("--root")
        .arg(dir.path())
        .args(["--model", "nope", "--prompt", "x"]));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("\"nope\"") && err.contains("kjv"), "{err}");
}

#[test]
fn without_a_fabric_probe_names_the_path_it_looked_at() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}/proc/device-tree", dir.path().display())),
        "{err}"
    );
    // A device tree without the shell says what it expected.
    std::fs::create_dir_all(dir.path().join("proc/device-tree/cpus")).expect("mkdir");
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    let err = text(&out.stderr);
    assert!(err.contains("fabricd,shell-1.0"), "{err}");
}

#[test]
fn a_foreign_or_newer_shell_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimProcess::start(dir.path(), &["--shell-magic", "0xdeadbeef"]);
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("MAGIC reads 0xdeadbeef") && err.contains("FABR"),
        "{err}"
    );
    drop(sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let _sim = SimProcess::start(dir.path(), &["--shell-version", "2.3"]);
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("VERSION reads 2.3") && err.contains("major version 1"),
        "{err}"
    );
}

#[test]
fn a_missing_uio_device_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimProcess::start(dir.path(), &[]);
    drop(sim);
    std::fs::remove_dir_all(dir.path().join("sys/class/uio/uio0")).expect("remove");
    let out = run(fabricd().arg("probe").arg("--root").arg(dir.path()));
    let err = text(&out.stderr);
    assert!(
        err.contains("no UIO device named \"fabric-shell\""),
        "{err}"
    );
}

#[test]
fn only_one_process_drives_the_fabric() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _sim = SimProcess::start(dir.path(), &[]);
    let _held = fabricd::lock::FabricLock::take(dir.path()).expect("take the lock");
    let out = run(fabricd()
        .arg("generate")
        .arg("--root")
        .arg(dir.path())
        .args(["--prompt", "x"]));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already driving"),
        "{}",
        text(&out.stderr)
    );
}
