//! Behind a load balancer: HAProxy's agent check answered from the
//! daemon's own state, and a trusted proxy's connections not held to one
//! address's share.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{control, get, post_json, Daemon, READY_WITHIN};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A port nobody listens on now, for the agent.
fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// What the agent answers one check, as HAProxy asks: connect, read the
/// line, see it closed.
async fn agent_says(agent: SocketAddr) -> String {
    let mut s = TcpStream::connect(agent)
        .await
        .expect("connect to the agent");
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut line))
        .await
        .expect("the agent answers and closes")
        .expect("read");
    line
}

async fn status(d: &Daemon) -> serde_json::Value {
    let r = control(d, json!({"cmd": "status"})).await;
    assert_eq!(r["ok"], true, "{r}");
    r["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_check_follows_the_daemons_state() {
    let agent = free_port();
    let d = Daemon::start(
        |s| {
            s.time_scale = 2.0;
            s.max_output = 1024;
            s.pr_bytes_per_sec = 1_000_000;
        },
        |c| c.agent_listen = Some(agent),
    )
    .await;
    // Idle, every context free: the whole weight.
    assert_eq!(agent_says(agent).await, "ready 100%\n");

    // Load is not capacity: with three long requests running, the weight
    // stays whole (HAProxy's leastconn counts what is in flight itself).
    let long =
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 1024, "ignore_eos": true});
    let running: Vec<_> = (0..3)
        .map(|_| tokio::spawn(post_json(d.addr, long.clone())))
        .collect();
    tokio::time::timeout(READY_WITHIN, async {
        while status(&d).await["in_flight"].as_u64().expect("in_flight") < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a request running");
    assert_eq!(agent_says(agent).await, "ready 100%\n");
    for r in running {
        assert_eq!(r.await.expect("join").status, 200);
    }

    // One of the two slots drained: half the capacity, half the weight.
    let r = control(&d, json!({"cmd": "drain", "slot": 1})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(agent_says(agent).await, "ready 50%\n");
    let r = control(&d, json!({"cmd": "resume", "slot": 1})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(agent_says(agent).await, "ready 100%\n");

    // Drained by the operator: the balancer is told, and the board still
    // serves what reaches it.
    // Neither a slot nor the board: refused, not taken for the board.
    let r = control(&d, json!({"cmd": "drain", "slto": 1})).await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(agent_says(agent).await, "ready 100%\n");
    let r = control(&d, json!({"cmd": "drain", "board": true})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(agent_says(agent).await, "drain\n");
    assert_eq!(status(&d).await["drained"], true);
    let ready = get(d.addr, "/readyz").await.expect("readyz");
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["drained"], true);
    assert_eq!(
        common::small_completion(d.addr, "And God said", 1).await,
        200
    );
    let r = control(&d, json!({"cmd": "resume", "board": true})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(agent_says(agent).await, "ready 100%\n");

    // A load into one slot: the board is not drained (the other slot
    // serves, and a drain would move its typing sessions away), but weighs
    // half while the slot is away.
    let ctl = tokio::spawn({
        let root = d.dir.path().to_owned();
        async move {
            common::control_at(
                &root,
                json!({"cmd": "load", "model": "fortunes", "slot": 0}),
            )
            .await
        }
    });
    let mut halved_while_loading = 0;
    while !ctl.is_finished() {
        let line = agent_says(agent).await;
        assert!(
            line == "ready 100%\n" || line == "ready 50%\n",
            "{line:?} during a slot's load"
        );
        if line == "ready 50%\n" {
            halved_while_loading += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r = ctl.await.expect("join");
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        halved_while_loading > 0,
        "the weight never halved during the load"
    );
    assert_eq!(agent_says(agent).await, "ready 100%\n");

    // Shutting down with a request still running: drain until it is done.
    // (Both slots hold fortunes now.)
    let mut long = long;
    long["model"] = json!("fortunes");
    let last = tokio::spawn(post_json(d.addr, long.clone()));
    tokio::time::timeout(READY_WITHIN, async {
        while status(&d).await["in_flight"].as_u64().expect("in_flight") < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the last request running");
    d.shutdown.cancel();
    let mut drains = 0;
    while !last.is_finished() {
        match TcpStream::connect(agent).await {
            Ok(mut s) => {
                let mut line = String::new();
                // The daemon hears the stop a moment after it is given;
                // from its first drain on, it says nothing else.
                if s.read_to_string(&mut line).await.is_ok() && !last.is_finished() {
                    if line == "drain\n" {
                        drains += 1;
                    } else {
                        assert_eq!(drains, 0, "{line:?} after a drain");
                    }
                }
            }
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(last.await.expect("join").status, 200);
    assert!(drains > 0, "the agent never said drain while shutting down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_reconfiguration_drains_the_board_while_the_fabric_is_dark() {
    // A kernel without configfs overlays: a load that programs a slot's
    // engine goes through the FPGA manager, and the whole fabric is dark
    // for the (scaled) 25 s.
    let agent = free_port();
    let d = Daemon::start(
        |s| {
            s.no_configfs = true;
            s.time_scale = 0.04;
        },
        |c| c.agent_listen = Some(agent),
    )
    .await;
    assert_eq!(agent_says(agent).await, "ready 100%\n");
    let ctl = tokio::spawn({
        let root = d.dir.path().to_owned();
        async move {
            common::control_at(
                &root,
                json!({"cmd": "load", "model": "fortunes", "reflash": true}),
            )
            .await
        }
    });
    let mut drained_while_dark = 0;
    while !ctl.is_finished() {
        let line = agent_says(agent).await;
        if line == "drain\n" && !ctl.is_finished() {
            drained_while_dark += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r = ctl.await.expect("join");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["data"]["report"]["method"], "full", "{r}");
    assert!(
        drained_while_dark > 0,
        "the agent never said drain while the fabric was dark"
    );
    assert_ne!(agent_says(agent).await, "drain\n");
    d.stop().await;
}

/// A connection from `from` that was answered one `GET /healthz`.
async fn answered_from(from: &str, to: SocketAddr) -> (TcpStream, String) {
    let mut s = common::connect_from(from, to).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await
        .expect("write");
    let mut buf = vec![0u8; 1024];
    let n = s.read(&mut buf).await.expect("read");
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    (s, head)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_is_held_to_the_cap_not_to_one_addresss_share() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.max_connections = Some(12);
            c.address_share = 0.25;
            c.trusted_proxies = vec!["127.0.0.2/32".parse().expect("a network")];
        },
    )
    .await;
    // The proxy holds six, past a client's share (0.25 of 12 is three).
    let mut held = Vec::new();
    for _ in 0..6 {
        let (s, head) = answered_from("127.0.0.2", d.addr).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    // Anyone else is still held to the share.
    held.extend(common::hold_answered(d.addr, 3).await);
    let (_third, head) = answered_from("127.0.0.1", d.addr).await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(head.contains("from your address"), "{head}");
    drop(held);
    d.stop().await;
}

/// One completion request from `from`, on a connection of its own: the
/// response's head.
async fn completion_from(from: &str, to: SocketAddr, body: &serde_json::Value) -> String {
    let mut s = common::connect_from(from, to).await;
    let body = serde_json::to_vec(body).expect("json");
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("write");
    s.write_all(&body).await.expect("write");
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.expect("read");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_reaches_a_trusted_proxy_as_the_status_it_retries() {
    let d = Daemon::start(
        |s| {
            s.time_scale = 2.0;
            s.max_output = 1024;
        },
        |c| {
            c.queue_capacity = 1;
            c.trusted_proxies = vec!["127.0.0.2/32".parse().expect("a network")];
            c.proxy_overloaded_status = 503;
        },
    )
    .await;
    let long =
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 1024, "ignore_eos": true});
    let running = tokio::spawn(post_json(d.addr, long.clone()));
    tokio::time::timeout(READY_WITHIN, async {
        while status(&d).await["in_flight"].as_u64().expect("in_flight") < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the one admitted request running");
    let small = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 2});
    // The proxy hears 503, which HAProxy 2.6 retries on another board,
    // with the type it turns back into the client's 429.
    let to_proxy = completion_from("127.0.0.2", d.addr, &small).await;
    assert!(to_proxy.starts_with("HTTP/1.1 503"), "{to_proxy}");
    assert!(
        to_proxy.contains("x-fabricd-error: overloaded"),
        "{to_proxy}"
    );
    // Anyone else hears the 429 of the API.
    let to_client = completion_from("127.0.0.1", d.addr, &small).await;
    assert!(to_client.starts_with("HTTP/1.1 429"), "{to_client}");
    assert!(
        to_client.contains("x-fabricd-error: overloaded"),
        "{to_client}"
    );
    assert_eq!(running.await.expect("join").status, 200);
    d.stop().await;
}
