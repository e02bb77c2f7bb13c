//! The HTTP endpoint over the simulated fabric: results, typed outcomes,
//! bad input, cancellation, connection limits.

mod common;

use std::time::Duration;

use common::{get, post_json, post_raw, small_completion, wait_for, Daemon};
use fabric_sim::device::Faults;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Reads one answer from a raw connection: from its status line to the end
/// of its JSON body (which ends in a newline).
async fn read_answer(sock: &mut tokio::net::TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"}\n") {
        let n = tokio::time::timeout(common::READY_WITHIN, sock.read(&mut buf))
            .await
            .expect("an answer")
            .expect("read");
        assert!(
            n > 0,
            "closed before the answer: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn long(model: &str, tokens: u32) -> serde_json::Value {
    json!({"model": model, "prompt": "In the beginning", "max_tokens": tokens, "seed": 1, "ignore_eos": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_with_usage_and_is_deterministic() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let body = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 12, "seed": 9});
    let a = post_json(d.addr, body.clone()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["model"], "kjv");
    let text = v["choices"][0]["text"].as_str().expect("text").to_owned();
    assert!(!text.is_empty());
    assert!(["length", "stop"].contains(&v["choices"][0]["finish_reason"].as_str().unwrap_or("")));
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    let b = post_json(d.addr, body).await;
    assert_eq!(b.json()["choices"][0]["text"], text.as_str());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_server_sent_events_ending_in_done() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let whole = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 10, "seed": 4}),
    )
    .await;
    let streamed = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 10, "seed": 4, "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    let text = streamed.text();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let mut joined = String::new();
    let mut last = serde_json::Value::Null;
    for line in text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
    {
        let v: serde_json::Value = serde_json::from_str(line).expect("chunk json");
        joined.push_str(v["choices"][0]["text"].as_str().unwrap_or(""));
        last = v;
    }
    assert_eq!(
        joined,
        whole.json()["choices"][0]["text"].as_str().expect("text")
    );
    assert!(last["choices"][0]["finish_reason"].is_string());
    assert_eq!(last["usage"]["prompt_tokens"], 3);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_sequences_cut_the_text_and_free_the_context() {
    // Real time: the 1,024 tokens would take about 2 s, where the daemon
    // notices a stop within a few tokens natively and about 170 under
    // qemu-user: the cancel lands first, measured in tokens (below).
    let d = Daemon::start(|s| s.max_output = 1024, |_| {}).await;
    let free = post_json(d.addr, json!({"model": "kjv", "prompt": "And God said", "max_tokens": 40, "seed": 2, "ignore_eos": true})).await;
    let text = free.json()["choices"][0]["text"]
        .as_str()
        .expect("text")
        .to_owned();
    // Stop at the first space after the first word.
    let stop = " ";
    let cut = &text[..text[1..].find(stop).expect("a space") + 1];
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 1024, "seed": 2, "ignore_eos": true, "stop": [stop]}),
    )
    .await;
    let v = r.json();
    assert_eq!(v["choices"][0]["text"], cut);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    wait_for(
        "the cut request's context to be freed",
        common::READY_WITHIN,
        || d.sim.counters().active == 0,
    )
    .await;
    // Freed by a cancel, not by running to its end: the fabric made well
    // under its 1,024 tokens (40 were the first request's).
    let c = d.sim.counters();
    assert_eq!(c.cancelled, 1, "{c:?}");
    assert!(c.tokens < 40 + 512, "{c:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_the_surplus_is_overloaded() {
    const K: usize = 8;
    const M: usize = 5;
    // A fabric that takes a minute a token: nothing admitted finishes, so
    // no permit comes back while the K + M requests arrive, however long
    // that takes.
    let d = Daemon::start(|s| s.decode_us = Some(60_000_000), |c| c.queue_capacity = K).await;
    let addr = d.addr;
    let (tx, mut answers) = tokio::sync::mpsc::unbounded_channel();
    let clients: Vec<_> = (0..K + M)
        .map(|_| {
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(post_json(addr, long("kjv", 2)).await);
            })
        })
        .collect();
    // The surplus is answered at once...
    for _ in 0..M {
        let r = answers.recv().await.expect("an answer");
        assert_eq!(r.status, 429, "{}", r.text());
        assert_eq!(r.error_type(), "overloaded");
        let ms: u64 = r.headers["retry-after-ms"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("number");
        assert!(ms > 0);
        let secs: u64 = r.headers["retry-after"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("number");
        assert!(secs >= 1);
    }
    // ...and exactly K are the scheduler's, waiting or on the fabric (as
    // it publishes them once it has taken them in).
    let start = std::time::Instant::now();
    loop {
        let text = get(addr, "/metrics").await.expect("metrics").text();
        let gauge = |name: &str| -> usize {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
                .unwrap_or(0)
        };
        let held = gauge("fabricd_queue_depth") + gauge("fabricd_in_flight");
        assert!(held <= K, "{held} admitted:\n{text}");
        if held == K {
            break;
        }
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "only {held} admitted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(answers.try_recv().is_err(), "no admitted one was answered");
    // Their clients go away, which cancels them.
    for c in clients {
        c.abort();
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_many_requests_does_not_starve_another_through_http() {
    // One decode context: requests run one at a time, in the order the
    // scheduler picks them. 100 tokens take about 190 ms.
    let d = Daemon::start(
        |s| {
            s.lanes = 1;
            s.contexts = 1;
        },
        |c| c.shutdown_grace_ms = 100,
    )
    .await;
    let addr = d.addr;
    let flood_done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for seed in 0..20 {
        let done = flood_done.clone();
        tokio::spawn(async move {
            let mut body = long("kjv", 100);
            body["user"] = json!("flood");
            body["seed"] = json!(seed);
            if post_json(addr, body).await.status == 200 {
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
    }
    // Once the flood waits in the queue (as the scheduler publishes it)...
    wait_for_metric(addr, "fabricd_queue_depth", |v| v >= 10.0).await;
    // ...a lone request from another client runs after at most the one
    // running and the one next in the flood's turn, not after the flood.
    let before = flood_done.load(std::sync::atomic::Ordering::SeqCst);
    let mut lone = long("kjv", 4);
    lone["user"] = json!("lone");
    let r = post_json(addr, lone).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let overtook = flood_done.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(
        overtook <= 2,
        "{overtook} of the flood's requests finished while the lone one waited"
    );
    d.stop().await;
}

/// Polls `/metrics` until the gauge `name` satisfies `ok`.
async fn wait_for_metric(addr: std::net::SocketAddr, name: &str, ok: impl Fn(f64) -> bool) {
    let start = std::time::Instant::now();
    loop {
        let text = get(addr, "/metrics").await.expect("metrics").text();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok());
        if value.is_some_and(&ok) {
            return;
        }
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "{name} never got there: {value:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_gives_deadline_exceeded_and_frees_the_fabric() {
    // The short request below must wait behind long ones on the fabric:
    // interactive-first would leave it a lane of its own (its own test is
    // in tests/typing.rs), so it is off here.
    let d = Daemon::start(|_| {}, |c| c.typing.interactive_first = false).await;
    // Running past its deadline.
    let mut body = long("kjv", 200);
    body["deadline_ms"] = json!(60);
    let r = post_json(d.addr, body).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.error_type(), "deadline_exceeded");
    assert_eq!(r.headers["x-should-retry"], "false");
    wait_for("the fabric to cancel it", common::READY_WITHIN, || {
        d.sim.counters().cancelled == 1
    })
    .await;
    // Queued past its deadline: fill slot 0's four contexts first.
    let addr = d.addr;
    let fill: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { post_json(addr, long("kjv", 100)).await }))
        .collect();
    wait_for("four running", common::READY_WITHIN, || {
        d.sim.counters().active == 4
    })
    .await;
    let mut body = long("kjv", 5);
    body["deadline_ms"] = json!(30);
    let r = post_json(d.addr, body).await;
    assert_eq!(r.status, 504);
    for f in fill {
        assert_eq!(f.await.expect("join").status, 200);
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fabric_that_fails_answers_fabric_error_and_restarts_the_daemon() {
    let mut d = Daemon::start(|s| s.dma_coherent = false, |_| {}).await;
    // The cache sync before the completion ring is read is refused, as
    // u-dma-buf refuses a range: nothing the driver would read can be
    // trusted, so the fabric has failed.
    d.sim.inject(Faults {
        refuse_cpu_sync: 1,
        ..Faults::default()
    });
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 4}),
    )
    .await;
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (502, "fabric_error"),
        "{}",
        r.text()
    );
    // The daemon stops by itself, to be started again (the board's
    // supervisor does it) and attach afresh.
    let task = d.task.take().expect("task");
    let err = tokio::time::timeout(common::READY_WITHIN, task)
        .await
        .expect("serve stops within 10 s")
        .expect("join")
        .expect_err("stops to restart");
    assert!(
        err.downcast_ref::<fabricd::serve::RestartRequired>()
            .is_some(),
        "{err:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_frees_its_context_at_once() {
    // Waiting inside hyper (64), and outside it (0: `http::early`).
    for hyper_waiting_max in [64, 0] {
        disconnect_frees_its_context(hyper_waiting_max).await;
    }
}

async fn disconnect_frees_its_context(hyper_waiting_max: usize) {
    // A slow fabric (1,024 tokens take about 8 s) so that a machine busy
    // with the other tests cannot let the request finish before the daemon
    // notices the client left; the check below counts tokens, not time.
    let d = Daemon::start(
        |s| {
            s.max_output = 1024;
            s.time_scale = 4.0;
        },
        |c| c.hyper_waiting_max = hyper_waiting_max,
    )
    .await;
    for stream in [false, true] {
        let before = d.sim.counters().cancelled;
        let mut body = long("kjv", 1024);
        body["stream"] = json!(stream);
        let bytes = serde_json::to_vec(&body).expect("json");
        let mut sock = tokio::net::TcpStream::connect(d.addr)
            .await
            .expect("connect");
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            bytes.len()
        );
        sock.write_all(head.as_bytes()).await.expect("write");
        sock.write_all(&bytes).await.expect("write");
        wait_for("the request to run", common::READY_WITHIN, || {
            d.sim.counters().active == 1
        })
        .await;
        let tokens_at_drop = d.sim.counters().tokens;
        drop(sock);
        wait_for("the context to be freed", common::READY_WITHIN, || {
            d.sim.counters().active == 0
        })
        .await;
        let c = d.sim.counters();
        assert_eq!(
            c.cancelled,
            before + 1,
            "stream={stream}, hyper_waiting_max {hyper_waiting_max}: the request ended without a cancel ({c:?})"
        );
        // Cancelled, not completed, and measured in the fabric's own
        // progress rather than the wall clock: the fabric made a quarter of
        // the 1,024 tokens at most after the client left. (Under qemu the
        // daemon takes about 170 tokens' time to notice, natively a few.)
        let after = d.sim.counters().tokens - tokens_at_drop;
        assert!(
            after < 256,
            "stream={stream}, hyper_waiting_max {hyper_waiting_max}: {after} tokens after the drop"
        );
    }
    let m = get(d.addr, "/metrics").await.expect("metrics").text();
    assert!(
        m.contains("fabricd_requests_total{outcome=\"cancelled\"} 2"),
        "{m}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_gets_its_typed_answer() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.body_limit = 4096).await;
    let a = d.addr;
    let cases: Vec<(common::Reply, u16, &str)> = vec![
        (
            post_raw(a, "application/json", b"{nope".to_vec()).await,
            400,
            "invalid_json",
        ),
        (
            post_raw(a, "application/json", b"{\"model\":\"\xff\"}".to_vec()).await,
            400,
            "invalid_utf8",
        ),
        (
            post_raw(a, "application/json", vec![b' '; 5000]).await,
            413,
            "body_too_large",
        ),
        (
            post_raw(a, "text/plain", b"{}".to_vec()).await,
            415,
            "unsupported_media_type",
        ),
        (
            post_json(a, json!({"model": "nope", "prompt": "x"})).await,
            404,
            "model_not_found",
        ),
        (
            post_json(a, json!({"model": "kjv", "prompt": ""})).await,
            400,
            "invalid_value",
        ),
        (
            post_json(a, json!({"model": "kjv", "prompt": "x ".repeat(1100)})).await,
            400,
            "invalid_value",
        ),
        (
            post_json(a, json!({"model": "kjv", "prompt": "x", "max_tokens": 0})).await,
            400,
            "invalid_value",
        ),
        (
            post_json(
                a,
                json!({"model": "kjv", "prompt": "x", "max_tokens": 100000}),
            )
            .await,
            400,
            "invalid_value",
        ),
        (
            post_json(a, json!({"prompt": "x"})).await,
            400,
            "missing_required_parameter",
        ),
    ];
    for (i, (r, status, code)) in cases.iter().enumerate() {
        assert_eq!(r.status, *status, "case {i}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], *code, "case {i}: {}", r.text());
        assert!(r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let params: Vec<_> = cases
        .iter()
        .map(|(r, _, _)| r.json()["error"]["param"].clone())
        .collect();
    assert_eq!(params[4], "model");
    assert_eq!(params[5], "prompt");
    assert_eq!(params[6], "prompt");
    assert_eq!(params[7], "max_tokens");
    assert_eq!(params[8], "max_tokens");
    let r = get(a, "/v2/nothing").await.expect("404");
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (404, Some("unknown_url"))
    );
    let r = get(a, "/v1/completions").await.expect("405");
    assert_eq!(r.status, 405);
    assert_eq!(r.headers["allow"], "POST");
    // And it still serves everyone else.
    assert_eq!(small_completion(a, "x", 0).await, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_health_readiness_and_metrics() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let m = get(d.addr, "/v1/models").await.expect("models").json();
    let ids: Vec<_> = m["data"]
        .as_array()
        .expect("list")
        .iter()
        .map(|x| x["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("kjv"), json!("fortunes"), json!("kjv-lm")]);
    assert_eq!(m["data"][0]["slots"][0]["state"], "ready");
    assert_eq!(get(d.addr, "/healthz").await.expect("health").status, 200);
    let r = get(d.addr, "/readyz").await.expect("ready").json();
    assert_eq!(r["ready"], true);
    assert_eq!(r["models"]["kjv"], "ready");
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "x", "max_tokens": 3, "seed": 1, "ignore_eos": true}),
    )
    .await;
    assert_eq!(r.status, 200);
    let prompt_tokens = r.json()["usage"]["prompt_tokens"].as_u64().expect("usage");
    // Refused: counted by outcome, its tokens not among those served.
    let refused = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "x", "max_tokens": 0}),
    )
    .await;
    assert_eq!(refused.status, 400);
    let text = get(d.addr, "/metrics").await.expect("metrics").text();
    let tokens_in = format!("fabricd_tokens_total{{direction=\"in\"}} {prompt_tokens}");
    for needle in [
        "fabricd_queue_depth 0",
        "fabricd_requests_total{outcome=\"ok\"} 1",
        &tokens_in,
        "fabricd_tokens_total{direction=\"out\"} 3",
        "fabricd_request_duration_seconds_count 1",
        "fabricd_slot_state{slot=\"0\",model=\"kjv\"} 2",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_answers_overloaded() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.max_connections = Some(2);
            c.address_share = 1.0;
        },
    )
    .await;
    // Two keep-alive connections take the cap.
    let held = common::hold_answered(d.addr, 2).await;
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "x", "max_tokens": 2}),
    )
    .await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.error_type(), "overloaded");
    assert_eq!(r.headers["connection"], "close");
    drop(held);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_are_cut_off() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.header_read_timeout_ms = 300).await;
    let mut sock = tokio::net::TcpStream::connect(d.addr)
        .await
        .expect("connect");
    sock.write_all(b"POST /v1/completions HTTP/1.1\r\nhost: t\r\n")
        .await
        .expect("write");
    let start = std::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(common::READY_WITHIN, sock.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server must close a connection that never finishes its header"
    );
    assert!(start.elapsed() >= Duration::from_millis(250));
    // Meanwhile others are served.
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "x", "max_tokens": 2}),
    )
    .await;
    assert_eq!(r.status, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_is_not_cut_and_an_idle_keep_alive_is() {
    // 80 tokens at 5 ms each: the answer takes over a second, far past the
    // 300 ms allowed for a header, which must not count while it runs.
    let d = Daemon::start(
        |s| s.decode_us = Some(5_000),
        |c| c.header_read_timeout_ms = 300,
    )
    .await;
    let mut sock = tokio::net::TcpStream::connect(d.addr)
        .await
        .expect("connect");
    let body = long("kjv", 80).to_string();
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let start = std::time::Instant::now();
    sock.write_all(req.as_bytes()).await.expect("write");
    // The whole answer, on a connection kept alive.
    let text = read_answer(&mut sock).await;
    assert!(
        start.elapsed() >= Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let mut buf = [0u8; 16];
    // Then idle: closed once no header has come for the timeout.
    let idle = std::time::Instant::now();
    let n = tokio::time::timeout(common::READY_WITHIN, sock.read(&mut buf))
        .await
        .expect("the server must close an idle keep-alive connection")
        .expect("read");
    assert_eq!(n, 0);
    assert!(
        idle.elapsed() >= Duration::from_millis(250),
        "{:?}",
        idle.elapsed()
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_coming_gets_body_timeout_on_a_reused_connection() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.body_read_timeout_ms = 1000).await;
    let mut sock = tokio::net::TcpStream::connect(d.addr)
        .await
        .expect("connect");
    let body = json!({"model": "kjv", "prompt": "In the", "max_tokens": 2}).to_string();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    // Two requests whose bodies come in two parts, 100 ms apart: on time,
    // on one keep-alive connection.
    for _ in 0..2 {
        sock.write_all(head.as_bytes()).await.expect("write");
        sock.write_all(&body.as_bytes()[..5]).await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        sock.write_all(&body.as_bytes()[5..]).await.expect("write");
        let a = read_answer(&mut sock).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    }
    // A third whose body stops halfway: its typed answer comes once the
    // timeout has run from its own header, not from an earlier request's.
    let start = std::time::Instant::now();
    sock.write_all(head.as_bytes()).await.expect("write");
    sock.write_all(&body.as_bytes()[..5]).await.expect("write");
    let a = read_answer(&mut sock).await;
    assert!(a.starts_with("HTTP/1.1 400"), "{a}");
    assert!(a.contains("\"body_timeout\""), "{a}");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    // Everyone else is served meanwhile and after.
    let other = json!({"model": "kjv", "prompt": "x", "max_tokens": 2});
    assert_eq!(post_json(d.addr, other).await.status, 200);
    d.stop().await;
}
