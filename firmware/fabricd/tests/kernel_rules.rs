//! The daemon against a simulator that keeps the real kernel's rules
//! (`fabric_sim::rules`): where the kernel would program nothing or refuse
//! an overlay, the load fails with a typed answer and nothing is lost.

mod common;

use common::{control, control_at, post_json, serve_board, slot_loads, slots, Daemon};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_that_finds_no_manager_programs_nothing_and_the_load_says_so() {
    let d = Daemon::start(|s| s.pr_bytes_per_sec = 4_000_000, |_| {}).await;
    let before = slot_loads(&d.sim, 1);
    // The tree as it was before the regions moved under the base region:
    // no region above the slot's names a manager, so the kernel's region
    // never probed. The overlay will read "applied"; nothing programs.
    std::fs::remove_file(d.dir.path().join("proc/device-tree/fpga-region/fpga-mgr"))
        .expect("remove fpga-mgr");
    // A reflash: the slot runs the engine, so a plain load would only
    // switch tables, with no overlay.
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    assert_eq!(
        r["ok"], false,
        "a load that programmed nothing is not reported: {r}"
    );
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("slot 1") && msg.contains("expected no model yet"),
        "the read-back names what the slot holds: {msg}"
    );
    // The read-back found the slot still serving (a programmed engine
    // would hold no model): the only load counted is the rollback's commit
    // of the table it held, rewritten in case the load had touched it.
    assert_eq!(
        slot_loads(&d.sim, 1),
        before + 1,
        "nothing but the rollback's commit"
    );
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    let reply = post_json(
        d.addr,
        json!({"model": "fortunes", "prompt": "A", "max_tokens": 3, "seed": 1}),
    )
    .await;
    assert_eq!(reply.status, 200, "the slot kept serving: {}", reply.text());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_whose_bridge_no_driver_binds_is_refused_by_name() {
    let d = Daemon::start(|s| s.pr_bytes_per_sec = 4_000_000, |_| {}).await;
    let before = slot_loads(&d.sim, 1);
    // Slot 1's decoupler is a node no bridge driver binds: the region
    // cannot get its bridges and the kernel fails the overlay.
    std::fs::remove_file(
        d.dir
            .path()
            .join("proc/device-tree/fpga-region/pr-decoupler@a0020000/compatible"),
    )
    .expect("remove compatible");
    // A reflash: the slot runs the engine, so a plain load would only
    // switch tables, with no overlay.
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("fabricd-slot1") && msg.contains("unapplied") && msg.contains("FPGA manager"),
        "the overlay and what the kernel said are named: {msg}"
    );
    assert_eq!(
        slot_loads(&d.sim, 1),
        before + 1,
        "nothing but the rollback's commit"
    );
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_load_on_a_mainline_kernel_applies_the_shell_overlay_again() {
    // A mainline FPGA manager has no `firmware` attribute: the full image
    // goes in by applying the shell's overlay again with it on the base
    // region, once the slots' overlays are out of the way; the shell's
    // devices come back afresh, and the daemon restarts to attach to them.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sc = fabric_sim::SimConfig::for_root(dir.path());
    sc.firmware = Some(common::bitstreams());
    sc.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
    sc.mainline = true;
    sc.pr_bytes_per_sec = 4_000_000;
    sc.time_scale = 0.04; // the 25 s dark period becomes 1 s
    let sim = fabric_sim::Simulator::start(sc).expect("sim");
    let root = dir.path();
    assert!(!root.join("sys/class/fpga_manager/fpga0/firmware").exists());
    let (_addr, _stop, task) = serve_board(root).await;
    // A slot's overlay on top of the shell's first.
    let r = control_at(
        root,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let r = control_at(
        root,
        json!({"cmd": "load", "model": "fortunes", "full": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["data"]["report"]["method"], "full");
    let why = r["data"]["report"]["restart"].as_str().expect("restart");
    assert!(why.contains("shell overlay was applied again"), "{why}");
    let err = task.await.expect("join").expect_err("stops to restart");
    assert!(
        err.downcast_ref::<fabricd::serve::RestartRequired>()
            .is_some(),
        "{err:#}"
    );
    let overlays = root.join("sys/kernel/config/device-tree/overlays");
    assert_eq!(
        std::fs::read_to_string(overlays.join("fabricd-shell/path"))
            .expect("the shell's overlay")
            .trim(),
        "fabricd/staged/shell-full.dtbo"
    );
    assert!(
        !overlays.join("fabricd-slot1").exists(),
        "slot overlays go first"
    );
    // Started again, it attaches to the new devices and puts the model the
    // load was for into slot 0, and kjv, which slot 1 held, back into slot
    // 1. (It stops by itself after the next full load.)
    let (addr, _, task) = serve_board(root).await;
    assert_eq!(
        slots(addr).await,
        vec![
            ("fortunes".into(), "ready".into()),
            ("kjv".into(), "ready".into())
        ]
    );
    let reply = post_json(
        addr,
        json!({"model": "fortunes", "prompt": "A", "max_tokens": 3, "seed": 1}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    // Again: the overlay in effect is the staged one, so the next is staged
    // beside it and the old file stays for a rollback.
    let r = control_at(root, json!({"cmd": "load", "model": "kjv", "full": true})).await;
    assert_eq!(r["ok"], true, "{r}");
    task.await.expect("join").expect_err("stops to restart");
    assert_eq!(
        std::fs::read_to_string(overlays.join("fabricd-shell/path"))
            .expect("the shell's overlay")
            .trim(),
        "fabricd/staged/shell-full.next.dtbo"
    );
    let (addr, stop, task) = serve_board(root).await;
    assert_eq!(slots(addr).await[0], ("kjv".into(), "ready".into()));
    stop.cancel();
    task.await.expect("join").expect("clean stop");
    drop(sim);
}
