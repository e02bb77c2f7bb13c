//! The HTTP endpoint on a hostile LAN: heads too large or too slow, bodies
//! declared too large, one address taking the connections, keep-alive
//! connections that pipeline or leave a body unread.

mod common;

use std::net::SocketAddr;

use common::{post_json, Daemon};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One response from a raw connection: its head and its body (by its
/// `content-length`), or what there was when the connection closed.
async fn response(sock: &mut TcpStream) -> (String, String) {
    responses(sock, 1).await.remove(0)
}

/// The next `n` responses, however the reads split them.
async fn responses(
    sock: &mut (impl tokio::io::AsyncRead + Unpin),
    n: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < n {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_string();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&got[end + 4..end + 4 + len]).to_string();
                got.drain(..end + 4 + len);
                out.push((head, body));
                continue;
            }
        }
        let r = tokio::time::timeout(common::READY_WITHIN, sock.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        if r == 0 {
            out.push((String::from_utf8_lossy(&got).to_string(), String::new()));
            got.clear();
            continue;
        }
        got.extend_from_slice(&buf[..r]);
    }
    out
}

/// True once the server has closed `sock` (EOF), reading and dropping
/// anything before it.
async fn closed(sock: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(common::READY_WITHIN, sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

fn completion(prompt: &str) -> String {
    let body = json!({"model": "kjv", "prompt": prompt, "max_tokens": 2}).to_string();
    format!(
        "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_body_over_the_limit_gets_413_before_100_continue() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.body_limit = 4096).await;
    let mut sock = connect(d.addr).await;
    sock.write_all(
        b"POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n\
          content-length: 10000000\r\nexpect: 100-continue\r\n\r\n",
    )
    .await
    .expect("write");
    let (head, body) = response(&mut sock).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "body_too_large");
    // The body never sent is not taken for the next request: closed.
    assert!(closed(&mut sock).await);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_the_limit_gets_431_naming_the_limit() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.max_header_bytes = 4096).await;
    let mut sock = connect(d.addr).await;
    let big = format!(
        "GET /healthz HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n",
        "a".repeat(5000)
    );
    sock.write_all(big.as_bytes()).await.expect("write");
    let (head, body) = response(&mut sock).await;
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "header_too_large");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4096")),
        "{v}"
    );
    assert!(closed(&mut sock).await);
    // A head just under the limit is served.
    let mut sock = connect(d.addr).await;
    let ok = format!(
        "GET /healthz HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n",
        "a".repeat(3900)
    );
    sock.write_all(ok.as_bytes()).await.expect("write");
    let (head, _) = response(&mut sock).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_line_without_a_version_gets_400_at_once() {
    // HTTP/0.9's `GET /`: hyper refuses it as soon as it sees the line, as
    // it did before the head reader stood in front of it (nginx, too,
    // answers 400 to a request line it cannot parse).
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| c.header_read_timeout_ms = 30_000,
    )
    .await;
    for line in ["GET /\r\n", "GET /healthz\r\n"] {
        let mut sock = connect(d.addr).await;
        sock.write_all(line.as_bytes()).await.expect("write");
        let asked = std::time::Instant::now();
        let (head, _) = response(&mut sock).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{line:?}: {head:?}");
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(30),
            "{line:?} answered only after {:?}",
            asked.elapsed()
        );
        assert!(closed(&mut sock).await);
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_past_their_budget_are_answered_overloaded_and_whole_ones_still_served() {
    // Room for two slow heads (each holds a 4 KiB first read).
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.max_header_bytes = 4096;
            c.header_budget_bytes = 8192;
        },
    )
    .await;
    // Three heads that stop short: two wait within the budget, and the
    // one the daemon reads last (whichever it is) is refused, typed.
    let mut writers = Vec::new();
    let mut readers = tokio::task::JoinSet::new();
    for i in 0..3 {
        let (mut r, mut w) = connect(d.addr).await.into_split();
        w.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n")
            .await
            .expect("write");
        writers.push(w);
        readers.spawn(async move { (i, responses(&mut r, 1).await.remove(0)) });
    }
    let (refused, (head, body)) = readers.join_next().await.expect("a reader").expect("join");
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "overloaded");
    let m = common::get(d.addr, "/metrics")
        .await
        .expect("metrics")
        .text();
    assert!(
        m.contains("fabricd_heads_refused_total 1\n"),
        "{}",
        m.lines()
            .filter(|l| l.contains("heads"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // A client whose head comes whole is served meanwhile.
    let r = post_json(
        d.addr,
        json!({"model": "kjv", "prompt": "x", "max_tokens": 2}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The waiting ones finish their heads and are served too.
    for (i, w) in writers.iter_mut().enumerate() {
        if i != refused {
            w.write_all(b"\r\n").await.expect("write");
        }
    }
    while let Some(done) = readers.join_next().await {
        let (i, (head, _)) = done.expect("join");
        assert!(head.starts_with("HTTP/1.1 200"), "head {i}: {head}");
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_no_more_than_its_share() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.max_connections = Some(8);
            c.address_share = 0.25;
        },
    )
    .await;
    // 127.0.0.1 may hold two connections.
    let mut held = common::hold_answered(d.addr, 2).await;
    let mut third = connect(d.addr).await;
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await
        .expect("write");
    let (head, body) = response(&mut third).await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(body.contains("from your address"), "{body}");
    // Another address is not held to 127.0.0.1's share.
    let mut other = common::connect_from("127.0.0.2", d.addr).await;
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await
        .expect("write");
    assert!(response(&mut other).await.0.starts_with("HTTP/1.1 200"));
    // A connection given back is the address's again.
    drop(held.pop());
    common::hold_answered(d.addr, 1).await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_serves_requests_in_turn_and_pipelined() {
    for hyper_waiting_max in [64, 0] {
        in_turn_and_pipelined(hyper_waiting_max).await;
    }
}

/// With `hyper_waiting_max` 64 each completion waits inside hyper, with 0
/// outside it (`http::early`).
async fn in_turn_and_pipelined(hyper_waiting_max: usize) {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| c.hyper_waiting_max = hyper_waiting_max,
    )
    .await;
    let mut sock = connect(d.addr).await;
    // One after another, then three in one write: each answered, in order.
    for p in ["a", "b"] {
        sock.write_all(completion(p).as_bytes())
            .await
            .expect("write");
        let (head, body) = response(&mut sock).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains("\"text_completion\""), "{body}");
    }
    let three = format!(
        "{}GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n{}",
        completion("c"),
        completion("d")
    );
    sock.write_all(three.as_bytes()).await.expect("write");
    let mut three = responses(&mut sock, 3).await.into_iter();
    let (h1, b1) = three.next().expect("first");
    let (h2, b2) = three.next().expect("second");
    let (h3, b3) = three.next().expect("third");
    for h in [&h1, &h2, &h3] {
        assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    }
    assert!(b1.contains("\"text_completion\""), "{b1}");
    assert!(b2.contains("\"ok\""), "{b2}");
    assert!(b3.contains("\"text_completion\""), "{b3}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_left_unread_closes_the_connection_rather_than_be_taken_for_a_request() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let mut sock = connect(d.addr).await;
    // A body on a path that reads none: it must not be parsed as the next
    // request (here it would be one).
    let smuggled = "GET /nowhere HTTP/1.1\r\nhost: t\r\n\r\n";
    let req = format!(
        "POST /healthz HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    );
    sock.write_all(req.as_bytes()).await.expect("write");
    let (head, _) = response(&mut sock).await;
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    let mut rest = Vec::new();
    let n = tokio::time::timeout(common::READY_WITHIN, sock.read_to_end(&mut rest))
        .await
        .expect("closed in time");
    assert!(n.is_ok());
    assert!(
        !String::from_utf8_lossy(&rest).contains("HTTP/1.1 404"),
        "the body was served as a request"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_whose_body_comes_in_pieces_is_served_and_the_connection_goes_on() {
    // Every completion waits outside hyper (`http::early`).
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.hyper_waiting_max = 0).await;
    let mut sock = connect(d.addr).await;
    let whole = completion("In the beginning");
    let (head, body) = whole.split_at(whole.find("\r\n\r\n").expect("a head") + 4);
    // The head alone, then the body a byte, the middle and the rest.
    for part in [
        head,
        &body[..1],
        &body[1..body.len() / 2],
        &body[body.len() / 2..],
    ] {
        sock.write_all(part.as_bytes()).await.expect("write");
        sock.flush().await.expect("flush");
        tokio::task::yield_now().await;
    }
    let (h, b) = response(&mut sock).await;
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    assert!(b.contains("\"text_completion\""), "{b}");
    sock.write_all(completion("And").as_bytes())
        .await
        .expect("write");
    let (h, _) = response(&mut sock).await;
    assert!(h.starts_with("HTTP/1.1 200"), "the next request: {h}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_waiting_when_the_daemon_stops_gets_a_typed_answer() {
    for hyper_waiting_max in [64, 0] {
        waiting_when_the_daemon_stops(hyper_waiting_max).await;
    }
}

/// With `hyper_waiting_max` 64 the completion waits inside hyper, with 0
/// outside it (`http::early`).
async fn waiting_when_the_daemon_stops(hyper_waiting_max: usize) {
    // A slow fabric: the request is still running when the daemon stops.
    let d = Daemon::start(
        |s| {
            s.max_output = 1024;
            s.time_scale = 4.0;
        },
        |c| {
            c.shutdown_grace_ms = 5_000;
            c.hyper_waiting_max = hyper_waiting_max;
        },
    )
    .await;
    let body = json!({"model": "kjv", "prompt": "And", "max_tokens": 1024}).to_string();
    let mut sock = connect(d.addr).await;
    sock.write_all(
        format!(
            "POST /v1/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    common::wait_for("the request to run", common::READY_WITHIN, || {
        d.sim.counters().active == 1
    })
    .await;
    d.shutdown.cancel();
    // Its answer (within the grace), or the typed word that the daemon is
    // stopping: never a close without one.
    let (head, body) = response(&mut sock).await;
    let answered = head.starts_with("HTTP/1.1 200") && body.contains("\"text_completion\"");
    let stopping = head.starts_with("HTTP/1.1 503")
        && head
            .to_ascii_lowercase()
            .contains("x-fabricd-error: shutting_down");
    assert!(
        answered || stopping,
        "hyper_waiting_max {hyper_waiting_max}: {head}\n{body}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_cap_makes_room_with_an_idle_connection_of_the_address_holding_most() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.max_connections = Some(6);
            c.address_share = 1.0;
        },
    )
    .await;
    // 127.0.0.1 holds the whole cap, idle after one request each.
    let mut held = common::hold_answered(d.addr, 6).await;
    // Its own next connection makes no room: it is refused.
    let mut seventh = connect(d.addr).await;
    seventh
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await
        .expect("write");
    let (head, body) = response(&mut seventh).await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(body.contains("too many open connections"), "{body}");
    // Another address's does, twice: an idle connection of 127.0.0.1 is
    // closed each time, and the newcomer is served (and stays, so that the
    // cap is still full for the next).
    let mut newcomers = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3"] {
        let mut other = common::connect_from(from, d.addr).await;
        other
            .write_all(completion("And").as_bytes())
            .await
            .expect("write");
        let (head, body) = response(&mut other).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{from}: {head}\n{body}");
        newcomers.push(other);
    }
    // Of 127.0.0.1's six, two were closed; the others still answer.
    let mut answered = 0;
    for s in &mut held {
        let asked = s
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
            .await;
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(common::READY_WITHIN, s.read(&mut buf))
            .await
            .expect("an answer or a close in time");
        if asked.is_ok() && matches!(read, Ok(n) if buf[..n].starts_with(b"HTTP/1.1 200")) {
            answered += 1;
        }
    }
    assert_eq!(answered, 4);
    d.stop().await;
}
