//! The daemon against a simulator that keeps the real kernel's rules
//! (`fabric_sim::rules`): where the kernel would program nothing or refuse
//! an overlay, the load fails with a typed answer and nothing is lost.

mod common;

use common::{control, post_json, slots, Daemon};
use serde_json::json;

fn slot_loads(d: &Daemon, slot: u8) -> u32 {
    let root = d.sim.root();
    let topo = fabric_hw::devtree::discover_live(&root.device_tree()).expect("topology");
    fabric_hw::shell::Shell::attach(&root, &topo)
        .expect("shell")
        .slot(slot)
        .loads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_that_finds_no_manager_programs_nothing_and_the_load_says_so() {
    let d = Daemon::start(|s| s.pr_bytes_per_sec = 4_000_000, |_| {}).await;
    let before = slot_loads(&d, 1);
    // The tree as it was before the regions moved under the base region:
    // no region above the slot's names a manager, so the kernel's region
    // never probed. The overlay will read "applied"; nothing programs.
    std::fs::remove_file(d.dir.path().join("proc/device-tree/fpga-region/fpga-mgr"))
        .expect("remove fpga-mgr");
    let r = control(&d, json!({"cmd": "load", "model": "kjv", "slot": 1})).await;
    assert_eq!(
        r["ok"], false,
        "a load that programmed nothing is not reported: {r}"
    );
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("slot 1") && msg.contains("expected ready with"),
        "the read-back names what the slot holds: {msg}"
    );
    assert_eq!(slot_loads(&d, 1), before, "the fabric was never programmed");
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
    let before = slot_loads(&d, 1);
    // Slot 1's decoupler is a node no bridge driver binds: the region
    // cannot get its bridges and the kernel fails the overlay.
    std::fs::remove_file(
        d.dir
            .path()
            .join("proc/device-tree/fpga-region/pr-decoupler@a0020000/compatible"),
    )
    .expect("remove compatible");
    let r = control(&d, json!({"cmd": "load", "model": "kjv", "slot": 1})).await;
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("fabricd-slot1") && msg.contains("unapplied") && msg.contains("FPGA manager"),
        "the overlay and what the kernel said are named: {msg}"
    );
    assert_eq!(slot_loads(&d, 1), before);
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    d.stop().await;
}
