//! The daemon against the fabric's faults and on its way out: its own
//! watchdog, its own timeout for a hung decoder, and the rings stopped at
//! shutdown.

mod common;

use common::{get, post_json, Daemon};
use fabric_sim::device::Faults;
use serde_json::json;

/// Whether the shell's rings run, read through a second, read-only attach
/// of the shell (as `fabricd probe` does).
fn rings_running(d: &Daemon) -> bool {
    let root = d.sim.root();
    let topo = fabric_hw::devtree::discover_live(&root.device_tree()).expect("topology");
    fabric_hw::shell::Shell::attach(&root, &topo)
        .expect("shell")
        .rings_running()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_answers_a_request_whose_interrupt_was_lost() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    // The completion's interrupt is raised, masked and never delivered:
    // only the daemon's watchdog, draining without one, finds the answer.
    d.sim.inject(Faults {
        lose_irq: 1,
        ..Faults::default()
    });
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 4, "seed": 1,
               "deadline_ms": 20_000}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(d.sim.stats().irqs_lost, 1, "the interrupt was lost");
    // And interrupts flow again: the drain unmasked the line.
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "And", "max_tokens": 2, "deadline_ms": 20_000}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_decoder_is_answered_by_the_deadline_and_the_rest_keep_serving() {
    if common::skip_under_rtl(
        "a request that hangs alone while its slot serves the rest is the Rust model's fault \
         injection; the RTL's engine is one per slot, and its watchdog ends a hung step as a fault",
    ) {
        return;
    }
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.shutdown_grace_ms = 200).await;
    // A decoder that never finishes and ignores its cancel: only the
    // host's own timeout answers its request (contract section 6).
    d.sim.inject(Faults {
        hang: 1,
        ..Faults::default()
    });
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 4, "deadline_ms": 300}),
    )
    .await;
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (504, "deadline_exceeded"),
        "{}",
        r.text()
    );
    // The hung context stays held (the fabric never gave it back), and
    // the slot's other contexts serve.
    for seed in 0..6 {
        let r = post_json(
            d.addr,
            json!({"model": "kjv", "prompt": "And", "max_tokens": 2, "seed": seed}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let m = get(d.addr, "/metrics").await.expect("metrics").text();
    assert!(m.contains("fabricd_in_flight 1\n"), "{m}");
    assert_eq!(d.sim.counters().active, 1);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_the_rings() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "And", "max_tokens": 2}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(rings_running(&d), "the daemon runs the rings");
    let sim = d.sim.root();
    let topo = fabric_hw::devtree::discover_live(&sim.device_tree()).expect("topology");
    let shell = fabric_hw::shell::Shell::attach(&sim, &topo).expect("shell");
    let Daemon {
        sim: simulator,
        shutdown,
        task,
        dir,
        ..
    } = d;
    shutdown.cancel();
    task.expect("task")
        .await
        .expect("join")
        .expect("serve ended cleanly");
    // Stopped before the buffer was unmapped: the fabric writes nothing
    // more into it.
    assert!(
        !shell.rings_running(),
        "the rings still run after the daemon stopped"
    );
    drop((simulator, dir));
}
