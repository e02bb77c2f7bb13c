//! Model rotation through partial (and full) reconfiguration while the
//! board keeps serving.

mod common;

use std::time::{Duration, Instant};

use common::{control, control_at, get, post_json, serve_board, slot_loads, slots, Daemon};
use fabric_sim::device::Faults;
use serde_json::json;

fn req(model: &str, tokens: u32) -> serde_json::Value {
    json!({"model": model, "prompt": "And God said", "max_tokens": tokens, "seed": 3, "ignore_eos": true})
}

fn loads(d: &Daemon, slot: u8) -> u32 {
    slot_loads(&d.sim, slot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_before_break_keeps_the_other_slot_serving() {
    // Partial reconfiguration at 2 MB/s: a 1 MB image darkens its slot for
    // about half a second (a reflash: the slot runs the engine already).
    let d = Daemon::start(|s| s.pr_bytes_per_sec = 2_000_000, |_| {}).await;
    assert_eq!(
        slots(d.addr).await,
        vec![
            ("kjv".into(), "ready".into()),
            ("fortunes".into(), "ready".into())
        ]
    );
    let loads0 = loads(&d, 0);
    // Clients hammer kjv (slot 0) while slot 1 is reflashed with kjv.
    let addr = d.addr;
    let stop = Instant::now() + Duration::from_millis(1500);
    let hammer: Vec<_> = (0..6)
        .map(|_| {
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                while Instant::now() < stop {
                    let status = post_json(addr, req("kjv", 8)).await.status;
                    statuses.push((status, Instant::now()));
                }
                statuses
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let load_began = Instant::now();
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    let load_ended = Instant::now();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["data"]["report"]["method"], "partial", "{r}");
    assert_eq!(r["data"]["report"]["replaced"], "fortunes");
    assert!(
        r["data"]["report"]["reconfigure_ms"].as_u64().expect("ms") >= 300,
        "{r}"
    );
    let mut during = 0;
    for h in hammer {
        for (status, at) in h.await.expect("join") {
            assert_eq!(status, 200, "slot 0 must keep serving kjv throughout");
            during += usize::from(load_began < at && at < load_ended);
        }
    }
    assert!(during > 0, "nothing was served while slot 1 was reloaded");
    assert_eq!(loads(&d, 0), loads0, "slot 0 was never touched");
    assert_eq!(slots(d.addr).await[1], ("kjv".into(), "ready".into()));
    // fortunes is in no slot now: a typed answer, not a hang.
    let r = post_json(d.addr, req("fortunes", 4)).await;
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (503, "model_not_loaded")
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_flips_default_and_switches_the_idle_slot() {
    let d = Daemon::start(
        |s| s.pr_bytes_per_sec = 4_000_000,
        |c| c.rotation.models = vec!["kjv".into(), "fortunes".into()],
    )
    .await;
    // At start `default` is the first ready slot's model.
    let a = post_json(d.addr, req("default", 6)).await;
    let k = post_json(d.addr, req("kjv", 6)).await;
    assert_eq!(a.json()["model"], "kjv");
    assert_eq!(
        a.json()["choices"][0]["text"],
        k.json()["choices"][0]["text"]
    );
    // fortunes is already loaded: rotating only flips routing.
    let r = control(&d, json!({"cmd": "rotate"})).await;
    assert_eq!(r["data"]["report"]["method"], "flip", "{r}");
    assert_eq!(
        post_json(d.addr, req("default", 6)).await.json()["model"],
        "fortunes"
    );
    // Back to kjv, then load fortunes again: the slot holding the current
    // model is never the one picked, and the idle one runs the engine, so
    // its table alone goes in.
    let r = control(&d, json!({"cmd": "rotate"})).await;
    assert_eq!(r["data"]["report"]["model"], "kjv");
    let r = control(&d, json!({"cmd": "load", "model": "fortunes"})).await;
    assert_eq!(r["data"]["report"]["method"], "switch", "{r}");
    assert_eq!(r["data"]["report"]["slot"], 1, "the slot not holding kjv");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slot_requests_wait_or_hear_the_model_is_loading() {
    if common::skip_under_rtl("the Verilated shell is built with two slots") {
        return;
    }
    // One slot; a switch to fortunes reads its 2.4 MB table at 2 MB/s,
    // about a second.
    let d = Daemon::start(
        |s| {
            s.slots = 1;
            s.load = vec!["0=trigram-v2.bit".into()];
            s.table_bytes_per_sec = 2_000_000;
        },
        |_| {},
    )
    .await;
    let addr = d.addr;
    let ctl = tokio::spawn({
        let root = d.dir.path().to_owned();
        async move { control_at(&root, json!({"cmd": "load", "model": "fortunes"})).await }
    });
    wait_for_loading(addr).await;
    // A request that can wait for the load does.
    let patient = tokio::spawn(async move {
        let mut body = req("fortunes", 4);
        body["deadline_ms"] = json!(20_000);
        post_json(addr, body).await
    });
    // One that cannot is told so at once, with Retry-After.
    let mut hurried = req("fortunes", 4);
    hurried["deadline_ms"] = json!(100);
    // Told at admission, not at its deadline: `model_loading`, where
    // waiting out the 100 ms would have answered `deadline_exceeded`.
    let r = post_json(addr, hurried).await;
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (503, "model_loading"),
        "{}",
        r.text()
    );
    assert!(r.headers.contains_key("retry-after") && r.headers.contains_key("retry-after-ms"));
    // /readyz says what is loading, for a load balancer.
    let ready = get(addr, "/readyz").await.expect("readyz").json();
    assert_eq!(ready["models"]["fortunes"], "loading", "{ready}");
    assert_eq!(ctl.await.expect("join")["ok"], true);
    let p = patient.await.expect("join");
    assert_eq!(p.status, 200, "{}", p.text());
    assert_eq!(p.json()["model"], "fortunes");
    d.stop().await;
}

async fn wait_for_loading(addr: std::net::SocketAddr) {
    let start = Instant::now();
    loop {
        if slots(addr)
            .await
            .iter()
            .any(|(_, state)| state == "loading")
        {
            return;
        }
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "the load never started"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_bitstream_is_refused_before_anything_is_flashed() {
    let d = Daemon::start(|_| {}, |_| {}).await;
    let loads1 = loads(&d, 1);
    // The file changes on the card after the daemon read the catalog.
    let path = d.dir.path().join("lib/firmware/fabricd/trigram-v2.bit");
    let mut bytes = std::fs::read(&path).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, bytes).expect("write");
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["type"], "bad_image");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("trigram-v2.bit") && msg.contains("manifest expects"),
        "{msg}"
    );
    assert_eq!(loads(&d, 1), loads1, "nothing was flashed");
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    assert!(!d
        .dir
        .path()
        .join("sys/kernel/config/device-tree/overlays/fabricd-slot1")
        .exists());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_rolls_back_and_loses_nothing_queued() {
    let d = Daemon::start(|s| s.pr_bytes_per_sec = 4_000_000, |_| {}).await;
    d.sim.inject(Faults {
        reconfig_fail: 1,
        ..Faults::default()
    });
    // Requests for fortunes keep coming while its slot is reloaded and the
    // load fails.
    let addr = d.addr;
    let clients: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20 * i)).await;
                post_json(addr, json!({"model": "fortunes", "prompt": "A", "max_tokens": 4, "seed": i, "deadline_ms": 20000})).await
            })
        })
        .collect();
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "reflash": true}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["type"], "load_failed_rolled_back");
    assert!(
        r["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("slot 1 is back on fortunes"),
        "{r}"
    );
    for c in clients {
        let reply = c.await.expect("join");
        assert!(
            reply.status == 200 || reply.error_type() == "model_not_loaded",
            "every request gets a result or a typed outcome: {} {}",
            reply.status,
            reply.text()
        );
    }
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    assert_eq!(post_json(d.addr, req("fortunes", 3)).await.status, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_for_another_part_or_by_path_are_refused() {
    // The simulated XC7Z020 would refuse to boot the K26 images (their
    // IDCODE is not its own): its slots start empty.
    let d = Daemon::start(
        |s| {
            s.part = "xc7z020clg400-1".into();
            s.load.clear();
        },
        |_| {},
    )
    .await;
    let r = control(&d, json!({"cmd": "load", "model": "kjv", "slot": 1})).await;
    assert_eq!(r["error"]["type"], "wrong_part", "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .expect("msg")
        .contains("xc7z020clg400-1"));
    for name in [
        "../kjv",
        "kjv/../../etc/passwd",
        "/lib/firmware/fabricd/kjv.bit",
    ] {
        let r = control(&d, json!({"cmd": "load", "model": name})).await;
        assert_eq!(r["error"]["type"], "bad_model_name", "{name}: {r}");
    }
    let r = control(&d, json!({"cmd": "load", "model": "kjv", "slot": 7})).await;
    assert_eq!(r["error"]["type"], "no_such_slot");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_finds_the_loaded_models_without_reflashing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sc = fabric_sim::SimConfig::for_root(dir.path());
    sc.firmware = Some(common::bitstreams());
    sc.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
    sc.pr_bytes_per_sec = 4_000_000;
    let sim = fabric_sim::Simulator::start(sc).expect("sim");
    let (addr, stop, task) = serve_board(dir.path()).await;
    // Load fortunes into slot 0 through a PR overlay, then stop the daemon.
    let r = control_at(
        dir.path(),
        json!({"cmd": "load", "model": "fortunes", "slot": 0, "reflash": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let text = post_json(addr, req("fortunes", 6)).await.json()["choices"][0]["text"].clone();
    stop.cancel();
    task.await.expect("join").expect("clean stop");
    let c = sim.counters();
    let loads_before: Vec<u32> = (0..2).map(|s| slot_loads(&sim, s)).collect();
    // A new daemon finds fortunes in both slots, serves, and flashes nothing.
    let (addr, stop, task) = serve_board(dir.path()).await;
    assert_eq!(
        slots(addr).await,
        vec![
            ("fortunes".into(), "ready".into()),
            ("fortunes".into(), "ready".into())
        ]
    );
    let again = post_json(addr, req("fortunes", 6)).await;
    assert_eq!(again.json()["choices"][0]["text"], text);
    assert_eq!(
        (0..2).map(|s| slot_loads(&sim, s)).collect::<Vec<_>>(),
        loads_before
    );
    assert!(sim.counters().completed > c.completed);
    assert!(
        dir.path()
            .join("sys/kernel/config/device-tree/overlays/fabricd-slot0")
            .exists(),
        "the live overlay stays"
    );
    stop.cancel();
    task.await.expect("join").expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_device_that_moves_is_found_again_by_name() {
    // A full reconfiguration after which the kernel brings the shell's UIO
    // device back as uio1: the daemon must not keep using uio0.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sc = fabric_sim::SimConfig::for_root(dir.path());
    sc.firmware = Some(common::bitstreams());
    sc.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
    sc.no_configfs = true;
    sc.renumber_uio = true;
    sc.time_scale = 0.04; // the 25 s dark period becomes 1 s
    let sim = fabric_sim::Simulator::start(sc).expect("sim");
    let (_addr, _stop, task) = serve_board(dir.path()).await;
    let status = control_at(dir.path(), json!({"cmd": "status"})).await;
    let device = status["data"]["fabric"]["device"].as_str().expect("device");
    assert!(device.ends_with("/dev/uio0"), "{status}");
    // The load succeeds, says the device moved, and the daemon stops to
    // attach again, without touching the old handle.
    let r = control_at(
        dir.path(),
        json!({"cmd": "load", "model": "fortunes", "full": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let why = r["data"]["report"]["restart"].as_str().expect("restart");
    assert!(
        why.contains("/dev/uio0 to ") && why.contains("/dev/uio1"),
        "{why}"
    );
    let err = task.await.expect("join").expect_err("stops to restart");
    assert!(
        err.downcast_ref::<fabricd::serve::RestartRequired>()
            .is_some(),
        "{err:#}"
    );
    // The full image's power-on reset: no commits yet, no model anywhere.
    assert_eq!(
        (0..2).map(|s| slot_loads(&sim, s)).collect::<Vec<_>>(),
        [0, 0]
    );
    // Started again, it finds the shell under its new name and puts the
    // model the load was for into slot 0, and what slot 1 held back into
    // it: one table commit each, nothing reflashed.
    let (addr, stop, task) = serve_board(dir.path()).await;
    let status = control_at(dir.path(), json!({"cmd": "status"})).await;
    let device = status["data"]["fabric"]["device"].as_str().expect("device");
    assert!(device.ends_with("/dev/uio1"), "{status}");
    assert_eq!(slots(addr).await[0], ("fortunes".into(), "ready".into()));
    let r = post_json(addr, req("fortunes", 4)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        slots(addr).await,
        vec![
            ("fortunes".into(), "ready".into()),
            ("fortunes".into(), "ready".into())
        ]
    );
    assert_eq!(
        (0..2).map(|s| slot_loads(&sim, s)).collect::<Vec<_>>(),
        [1, 1]
    );
    stop.cancel();
    task.await.expect("join").expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_reconfiguration_darkens_everything_but_the_daemon_answers() {
    // A kernel without configfs overlays: loads go through the FPGA
    // manager, and the whole fabric is dark for the (scaled) 25 s.
    let d = Daemon::start(
        |s| {
            s.no_configfs = true;
            s.time_scale = 0.04; // 25 s become 1 s
        },
        |_| {},
    )
    .await;
    let addr = d.addr;
    let ctl = tokio::spawn({
        let path = d.dir.path().to_owned();
        // The slot's engine programmed again: without overlays, only the
        // full image can.
        async move {
            control_at(
                &path,
                json!({"cmd": "load", "model": "fortunes", "reflash": true}),
            )
            .await
        }
    });
    // While dark, health answers and readiness says so: answers come back
    // during the reconfiguration, not only after it.
    let mut answered_dark = 0;
    while !ctl.is_finished() {
        let health = get(addr, "/healthz").await.expect("healthz").status;
        let r = get(addr, "/readyz").await.expect("readyz").json();
        if r["fabric"]["state"] == "dark" {
            assert_eq!(health, 200);
            answered_dark += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = ctl.await.expect("join");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["data"]["report"]["method"], "full");
    assert!(
        answered_dark >= 2,
        "health and readiness answered while the fabric was dark ({answered_dark} times)"
    );
    // After it, the rings were initialised again and the new model serves.
    assert_eq!(slots(addr).await[0], ("fortunes".into(), "ready".into()));
    let r = post_json(addr, req("fortunes", 4)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_load_over_a_decoding_request_waits_for_the_slot_to_shut_down() {
    // Tokens of 50 ms: the request decodes for several seconds; the drain
    // gives up after 100 ms and the load is forced over it. The shell must
    // then be asked to stop and waited for (SLOT_SHUTDOWN 0x0F) before the
    // kernel cuts the slot off: a token under way when the decoupler closes
    // is a transaction lost, and the slot comes up torn.
    let d = Daemon::start(
        |s| {
            s.pr_bytes_per_sec = 8_000_000;
            s.decode_us = Some(50_000);
        },
        |c| c.rotation.drain_timeout_ms = 100,
    )
    .await;
    let addr = d.addr;
    let long = tokio::spawn(async move { post_json(addr, req("fortunes", 256)).await });
    let start = Instant::now();
    while d.sim.counters().active == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the request never started"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r = control(
        &d,
        json!({"cmd": "load", "model": "kjv", "slot": 1, "force": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(slots(d.addr).await[1], ("kjv".into(), "ready".into()));
    // The request it was forced over gets a typed answer, not a hang.
    let reply = tokio::time::timeout(Duration::from_secs(10), long)
        .await
        .expect("an answer")
        .expect("join");
    assert!(reply.status >= 500, "{} {}", reply.status, reply.text());
    assert!(!reply.error_type().is_empty(), "a typed outcome");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_table_is_refused_before_anything_is_committed() {
    let d = Daemon::start(|_| {}, |_| {}).await;
    // kjv's table checked once already (a switch there and back), so the
    // one kept from then must not stand in for the file changed since.
    for model in ["kjv", "fortunes"] {
        let r = control(&d, json!({"cmd": "load", "model": model, "slot": 1})).await;
        assert_eq!(r["data"]["report"]["method"], "switch", "{r}");
    }
    let loads1 = loads(&d, 1);
    // The table changes on the card after the daemon read the catalog.
    let path = d.dir.path().join("lib/firmware/fabricd/kjv.ftb");
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, bytes).expect("write");
    let r = control(&d, json!({"cmd": "load", "model": "kjv", "slot": 1})).await;
    assert_eq!(r["error"]["type"], "bad_image", "{r}");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("kjv.ftb") && msg.contains("manifest expects"),
        "{msg}"
    );
    assert_eq!(loads(&d, 1), loads1, "nothing was committed");
    assert_eq!(slots(d.addr).await[1], ("fortunes".into(), "ready".into()));
    assert_eq!(post_json(d.addr, req("fortunes", 3)).await.status, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_cycle_brings_back_the_models_the_slots_last_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let boot = |dir: &std::path::Path| {
        let mut sc = fabric_sim::SimConfig::for_root(dir);
        sc.firmware = Some(common::bitstreams());
        sc.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
        fabric_sim::Simulator::start(sc).expect("sim")
    };
    let sim = boot(dir.path());
    let (addr, stop, task) = serve_board(dir.path()).await;
    // A fresh board gets the catalog's models in turn; the operator then
    // puts fortunes in slot 0 too.
    assert_eq!(
        slots(addr).await,
        vec![
            ("kjv".into(), "ready".into()),
            ("fortunes".into(), "ready".into())
        ]
    );
    let r = control_at(
        dir.path(),
        json!({"cmd": "load", "model": "fortunes", "slot": 0}),
    )
    .await;
    assert_eq!(r["data"]["report"]["method"], "switch", "{r}");
    stop.cancel();
    task.await.expect("join").expect("clean stop");
    // Power off and on: DDR and the fabric lose the tables, the boot image
    // puts the engines back.
    drop(sim);
    let sim = boot(dir.path());
    assert_eq!(slot_loads(&sim, 0), 0, "a fresh fabric");
    let (addr, stop, task) = serve_board(dir.path()).await;
    assert_eq!(
        slots(addr).await,
        vec![
            ("fortunes".into(), "ready".into()),
            ("fortunes".into(), "ready".into())
        ]
    );
    assert_eq!(post_json(addr, req("fortunes", 3)).await.status, 200);
    stop.cancel();
    task.await.expect("join").expect("clean stop");
}
