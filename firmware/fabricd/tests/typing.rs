//! Speculative typing through HTTP, over the simulated fabric: supersede
//! (of a queued and of a running request, and by the client's own order
//! when requests arrive out of it), the completion cache, typed
//! forward and joins, predictive admission, one model on both slots,
//! interactive first, and bad input. What the fabric did is read from its
//! own counters (submitted, cancelled, decoding at once), never from a
//! clock.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{metric, post_json, wait_for, Daemon, Reply};
use http_body_util::Full;
use hyper::Request;
use serde_json::{json, Value};

/// A completion with extra headers.
async fn post_with(addr: SocketAddr, body: &Value, headers: &[(&str, &str)]) -> Reply {
    let mut req = Request::post("/v1/completions")
        .header("host", "test")
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(
            serde_json::to_vec(body).expect("json"),
        )))
        .expect("request");
    common::request(addr, req).await.expect("response")
}

fn text(r: &Reply) -> String {
    r.json()["choices"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {}", r.text()))
        .to_owned()
}

fn source(r: &Reply) -> &str {
    r.headers
        .get("x-fabricd-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// A value of `/metrics`.
fn assert_superseded(r: &Reply) {
    assert_eq!(r.status, 409, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(e["type"], "superseded", "{}", r.text());
    assert_eq!(e["code"], "superseded");
    assert!(e["param"].is_null());
    assert_eq!(r.headers["x-should-retry"], "false");
}

/// A daemon with one context, held by a long request of another client
/// (abort the handle to let it go): what a typist sends next waits.
async fn held() -> (Daemon, tokio::task::JoinHandle<Reply>) {
    held_with(|_| {}).await
}

/// [`held`], with the daemon's configuration changed by `config`.
async fn held_with(
    config: impl FnOnce(&mut fabricd::config::Config),
) -> (Daemon, tokio::task::JoinHandle<Reply>) {
    let d = Daemon::start(
        |s| {
            s.lanes = 1;
            s.contexts = 1;
            s.max_output = 1024;
        },
        config,
    )
    .await;
    let addr = d.addr;
    let hold = json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 1024,
                      "ignore_eos": true, "user": "other"});
    let holder = tokio::spawn(async move { post_json(addr, hold).await });
    wait_for("the holder to run", common::READY_WITHIN, || {
        d.sim.counters().active == 1
    })
    .await;
    (d, holder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_request_of_a_session_supersedes_a_queued_one_and_a_running_one() {
    let (d, holder) = held().await;
    let addr = d.addr;
    // The typist's first keystroke waits (session in the header)...
    let first = json!({"model": "kjv", "prompt": "And God", "max_tokens": 8, "user": "typist"});
    let waiting =
        tokio::spawn(async move { post_with(addr, &first, &[("x-session-id", "typist-1")]).await });
    // The queue depth shows it before the next keystroke comes.
    let start = std::time::Instant::now();
    while metric(addr, "fabricd_queue_depth").await < 1.0 {
        assert!(start.elapsed() < common::READY_WITHIN, "never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ...and the next one (session in the body, which wins) supersedes it.
    let second = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 8,
                        "session": "typist-1", "user": "typist"});
    let newer =
        tokio::spawn(
            async move { post_with(addr, &second, &[("x-session-id", "someone-else")]).await },
        );
    let r = waiting.await.expect("join");
    assert_superseded(&r);
    // The superseded one never reached the fabric.
    assert_eq!(d.sim.counters().submitted, 1);
    assert_eq!(
        metric(addr, "fabricd_superseded_total{state=\"queued\"}").await,
        1.0
    );
    // Let the holder go: the newer keystroke runs and is answered.
    holder.abort();
    let r = newer.await.expect("join");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(source(&r), "fabric");

    // Running: a long keystroke request on the fabric, then a newer one.
    let before = d.sim.counters();
    let long = json!({"model": "kjv", "prompt": "In the", "max_tokens": 1024, "ignore_eos": true,
                      "session": "typist-2"});
    let running = tokio::spawn(async move { post_json(addr, long).await });
    wait_for("it to run", common::READY_WITHIN, || {
        let c = d.sim.counters();
        c.submitted == before.submitted + 1 && c.active == 1
    })
    .await;
    let next = json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 4,
                      "session": "typist-2"});
    let r = post_json(addr, next).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_superseded(&running.await.expect("join"));
    // The fabric's own count: the running one was cancelled there.
    wait_for("the fabric to cancel it", common::READY_WITHIN, || {
        d.sim.counters().cancelled == before.cancelled + 1
    })
    .await;
    assert_eq!(
        metric(addr, "fabricd_superseded_total{state=\"running\"}").await,
        1.0
    );

    // A stream already started hears it in-band, and ends.
    let stream = json!({"model": "kjv", "prompt": "In the", "max_tokens": 1024, "ignore_eos": true,
                        "session": "typist-3", "stream": true});
    let before = d.sim.counters();
    let streaming = tokio::spawn(async move { post_json(addr, stream).await });
    wait_for("the stream to run", common::READY_WITHIN, || {
        let c = d.sim.counters();
        c.submitted == before.submitted + 1 && c.active == 1
    })
    .await;
    let next = json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 2,
                      "session": "typist-3"});
    assert_eq!(post_json(addr, next).await.status, 200);
    let r = streaming.await.expect("join");
    assert_eq!(r.status, 200);
    let body = r.text();
    let last = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .expect("events");
    let err: Value = serde_json::from_str(last).expect("json");
    assert_eq!(err["error"]["type"], "superseded", "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
    assert_eq!(
        metric(addr, "fabricd_requests_total{outcome=\"superseded\"}").await,
        3.0
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_arrives_after_a_newer_one_of_its_session_is_the_stale_one() {
    let (d, holder) = held().await;
    let addr = d.addr;
    // The second keystroke's request arrives first (another connection
    // was quicker) and waits...
    let second = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 8,
                        "session": "t", "session_seq": 2});
    let newer = tokio::spawn(async move { post_json(addr, second).await });
    let start = std::time::Instant::now();
    while metric(addr, "fabricd_queue_depth").await < 1.0 {
        assert!(start.elapsed() < common::READY_WITHIN, "never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ...then the first keystroke's: it is the stale one, answered at
    // once, and the newer one keeps its place.
    let first = json!({"model": "kjv", "prompt": "And God", "max_tokens": 8});
    let r = post_with(
        addr,
        &first,
        &[("x-session-id", "t"), ("x-session-seq", "1")],
    )
    .await;
    assert_superseded(&r);
    // The same number again is no newer.
    let again = json!({"model": "kjv", "prompt": "And God sa", "max_tokens": 8,
                       "session": "t", "session_seq": 2});
    assert_superseded(&post_json(addr, again).await);
    assert_eq!(
        metric(addr, "fabricd_superseded_total{state=\"late\"}").await,
        2.0
    );
    assert_eq!(metric(addr, "fabricd_queue_depth").await, 1.0);
    assert_eq!(d.sim.counters().submitted, 1);
    assert!(
        !newer.is_finished(),
        "the newest keystroke was answered early"
    );
    holder.abort();
    let r = newer.await.expect("join");
    assert_eq!(r.status, 200, "{}", r.text());

    // A number needs a session, and fits a JavaScript number.
    for (body, headers) in [
        (
            json!({"model": "kjv", "prompt": "x", "session_seq": 1}),
            vec![],
        ),
        (
            json!({"model": "kjv", "prompt": "x", "session": "t", "session_seq": 1u64 << 53}),
            vec![],
        ),
        (
            json!({"model": "kjv", "prompt": "x", "session": "t", "session_seq": -1}),
            vec![],
        ),
        (
            json!({"model": "kjv", "prompt": "x", "session": "t"}),
            vec![("x-session-seq", "soon")],
        ),
    ] {
        let r = post_with(addr, &body, &headers).await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.json()["error"]["param"], "session_seq", "{}", r.text());
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_hit_never_reaches_the_fabric() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let greedy =
        json!({"model": "kjv", "prompt": "And God said", "max_tokens": 8, "temperature": 0});
    let a = post_json(d.addr, greedy.clone()).await;
    assert_eq!((a.status, source(&a)), (200, "fabric"), "{}", a.text());
    let submitted = d.sim.counters().submitted;
    // Identical and deterministic: from the cache, as a stream too.
    let b = post_json(d.addr, greedy.clone()).await;
    assert_eq!((b.status, source(&b)), (200, "cache"), "{}", b.text());
    assert_eq!(text(&b), text(&a));
    assert_eq!(b.json()["usage"], a.json()["usage"]);
    let mut streamed = greedy.clone();
    streamed["stream"] = json!(true);
    let s = post_json(d.addr, streamed).await;
    assert_eq!((s.status, source(&s)), (200, "cache"));
    assert!(s.text().ends_with("data: [DONE]\n\n"), "{}", s.text());
    assert!(s
        .text()
        .contains(&serde_json::to_string(&text(&a)).expect("json")));
    // A fixed seed is deterministic too; a random one is not.
    let seeded = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 8, "seed": 3});
    assert_eq!(source(&post_json(d.addr, seeded.clone()).await), "fabric");
    assert_eq!(source(&post_json(d.addr, seeded).await), "cache");
    let random = json!({"model": "kjv", "prompt": "And God said", "max_tokens": 8});
    assert_eq!(source(&post_json(d.addr, random.clone()).await), "fabric");
    assert_eq!(source(&post_json(d.addr, random).await), "fabric");
    assert_eq!(
        d.sim.counters().submitted,
        submitted + 3,
        "the cache's answers never reached the fabric"
    );
    assert_eq!(metric(d.addr, "fabricd_cache_hits_total").await, 3.0);
    assert!(metric(d.addr, "fabricd_cache_entries").await >= 2.0);
    assert!(metric(d.addr, "fabricd_cache_bytes").await > 0.0);
    assert_eq!(
        metric(d.addr, "fabricd_answers_total{source=\"cache\"}").await,
        3.0
    );
    d.stop().await;

    // Switched off, the same request reaches the fabric every time.
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.typing.cache = false).await;
    for _ in 0..2 {
        assert_eq!(source(&post_json(d.addr, greedy.clone()).await), "fabric");
    }
    assert_eq!(d.sim.counters().submitted, 2);
    d.stop().await;
}

/// A typist's keystroke that comes while the fabric is busy is held back
/// until its session pauses; the next keystroke supersedes it there, and
/// it never reaches the fabric. Only the last of three is decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_keystroke_superseded_never_reaches_the_fabric() {
    let (d, holder) = held().await;
    let addr = d.addr;
    let submitted = d.sim.counters().submitted;
    let mut keys = Vec::new();
    for (seq, prompt) in [(1, "And God"), (2, "And God s"), (3, "And God sa")] {
        let body = json!({"model": "kjv", "prompt": prompt, "max_tokens": 8,
                          "session": "typist", "session_seq": seq, "user": "typist"});
        keys.push(tokio::spawn(async move { post_json(addr, body).await }));
        // The typist's pace, 200 ms a key: its session counts as paused
        // 450 ms (the default bound) after each.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut answers = Vec::new();
    for k in keys {
        answers.push(k.await.expect("join"));
    }
    // The first went in line (its session had no pace yet), the second
    // was held and took it out of line, the third superseded the second
    // while it was held.
    assert_superseded(&answers[0]);
    assert_superseded(&answers[1]);
    assert_eq!((answers[2].status, source(&answers[2])), (200, "fabric"));
    assert_eq!(
        d.sim.counters().submitted,
        submitted + 1,
        "only the last keystroke reached the fabric"
    );
    assert_eq!(metric(addr, "fabricd_held_total").await, 2.0);
    assert_eq!(
        metric(addr, "fabricd_superseded_total{state=\"held\"}").await,
        1.0
    );
    assert_eq!(
        metric(addr, "fabricd_superseded_total{state=\"queued\"}").await,
        1.0
    );
    assert_eq!(holder.await.expect("join").status, 200);
    d.stop().await;
}

/// The cache's key holds every parameter that changes the tokens: a
/// request that differs from a cached one in only one of them reaches the
/// fabric and gets its own answer, and the cached one is still a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_differing_in_any_parameter_is_not_answered_from_the_cache() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let base = json!({
        "model": "kjv", "prompt": "And God said", "max_tokens": 8,
        "temperature": 0.8, "seed": 5
    });
    let first = post_json(d.addr, base.clone()).await;
    assert_eq!(
        (first.status, source(&first)),
        (200, "fabric"),
        "{}",
        first.text()
    );
    let again = post_json(d.addr, base.clone()).await;
    assert_eq!(
        source(&again),
        "cache",
        "the control: the same request is a hit"
    );
    for (field, value) in [
        ("temperature", json!(1.7)),
        ("seed", json!(6)),
        ("max_tokens", json!(12)),
        ("ignore_eos", json!(true)),
        ("model", json!("fortunes")),
        ("prompt", json!("And God saw")),
    ] {
        let mut other = base.clone();
        other[field] = value;
        let fresh = post_json(d.addr, other.clone()).await;
        assert_eq!(
            (fresh.status, source(&fresh)),
            (200, "fabric"),
            "differing in {field} only, answered from the cache: {}",
            fresh.text()
        );
        // Its own answer is cached under its own key.
        assert_eq!(source(&post_json(d.addr, other).await), "cache", "{field}");
    }
    assert_eq!(source(&post_json(d.addr, base).await), "cache");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_forward_answers_the_rest_without_the_fabric() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let prompt = "And God said";
    let first = json!({"model": "kjv", "prompt": prompt, "max_tokens": 8, "temperature": 0,
                       "ignore_eos": true, "session": "t1"});
    let a = post_json(d.addr, first).await;
    assert_eq!((a.status, source(&a)), (200, "fabric"), "{}", a.text());
    let suggestion = text(&a);
    // The user types the suggestion's first word and part of the second.
    let word_end = suggestion[1..]
        .find(' ')
        .map_or(suggestion.len(), |i| i + 1);
    let typed = &suggestion[..(word_end + 2).min(suggestion.len() - 1)];
    let submitted = d.sim.counters().submitted;
    let next = json!({"model": "kjv", "prompt": format!("{prompt}{typed}"), "max_tokens": 8,
                      "temperature": 0, "ignore_eos": true, "session": "t1"});
    let b = post_json(d.addr, next).await;
    assert_eq!(
        (b.status, source(&b)),
        (200, "typed-forward"),
        "{}",
        b.text()
    );
    assert_eq!(text(&b), suggestion[typed.len()..]);
    assert_eq!(d.sim.counters().submitted, submitted, "no fabric");
    // Another session's prompt is not answered from this one's.
    let other = json!({"model": "kjv", "prompt": format!("{prompt}{typed}"), "max_tokens": 8,
                       "temperature": 1, "session": "t2"});
    assert_eq!(source(&post_json(d.addr, other).await), "fabric");
    assert_eq!(metric(d.addr, "fabricd_typed_forward_total").await, 1.0);
    d.stop().await;

    // Switched off: the fabric answers.
    let d = Daemon::start(|s| s.time_scale = 0.05, |c| c.typing.typed_forward = false).await;
    let first = json!({"model": "kjv", "prompt": prompt, "max_tokens": 8, "temperature": 0,
                       "ignore_eos": true, "session": "t1"});
    assert_eq!(text(&post_json(d.addr, first).await), suggestion);
    let next = json!({"model": "kjv", "prompt": format!("{prompt}{typed}"), "max_tokens": 8,
                      "temperature": 0, "ignore_eos": true, "session": "t1"});
    assert_eq!(source(&post_json(d.addr, next).await), "fabric");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_on_while_the_request_decodes_joins_it() {
    // 5 ms a token: 256 tokens decode for over a second. The cache is off,
    // so the reference answer below does not answer the session's request.
    let d = Daemon::start(|s| s.decode_us = Some(5_000), |c| c.typing.cache = false).await;
    let addr = d.addr;
    let prompt = "In the beginning";
    let body = |p: String, session: Option<&str>| {
        let mut v = json!({"model": "kjv", "prompt": p, "max_tokens": 256, "temperature": 0,
                           "ignore_eos": true});
        if let Some(s) = session {
            v["session"] = json!(s);
        }
        v
    };
    let reference = text(&post_json(addr, body(prompt.into(), None)).await);
    let typed = &reference[..reference[1..].find(' ').expect("a word") + 1];
    let before = d.sim.counters();
    let b1 = body(prompt.into(), Some("j"));
    let first = tokio::spawn(async move { post_json(addr, b1).await });
    wait_for("it to decode", common::READY_WITHIN, || {
        let c = d.sim.counters();
        c.submitted == before.submitted + 1 && c.active == 1
    })
    .await;
    let r = post_json(addr, body(format!("{prompt}{typed}"), Some("j"))).await;
    assert_eq!((r.status, source(&r)), (200, "joined"), "{}", r.text());
    assert_eq!(text(&r), reference[typed.len()..]);
    assert_superseded(&first.await.expect("join"));
    let c = d.sim.counters();
    assert_eq!(
        c.submitted,
        before.submitted + 1,
        "one request on the fabric"
    );
    assert_eq!(c.cancelled, before.cancelled, "nothing cancelled");
    assert_eq!(metric(addr, "fabricd_joins_total").await, 1.0);

    // A request with stop sequences does not join (they are watched for
    // as tokens come, which a join does not hear): it supersedes.
    let before = d.sim.counters();
    let b1 = body(prompt.into(), Some("k"));
    let first = tokio::spawn(async move { post_json(addr, b1).await });
    wait_for("it to decode", common::READY_WITHIN, || {
        let c = d.sim.counters();
        c.submitted == before.submitted + 1 && c.active == 1
    })
    .await;
    let mut b2 = body(format!("{prompt}{typed}"), Some("k"));
    b2["stop"] = json!([" "]);
    let r = post_json(addr, b2).await;
    assert_eq!((r.status, source(&r)), (200, "fabric"), "{}", r.text());
    assert!(!text(&r).contains(' '), "not cut at its stop: {}", r.text());
    assert_superseded(&first.await.expect("join"));
    assert_eq!(metric(addr, "fabricd_joins_total").await, 1.0);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_predicted_late_is_refused_at_once() {
    // One context, a minute a token: nothing finishes while the test runs.
    let d = Daemon::start(
        |s| {
            s.lanes = 1;
            s.contexts = 1;
            s.decode_us = Some(60_000_000);
        },
        |_| {},
    )
    .await;
    let addr = d.addr;
    let mut held = Vec::new();
    // Deadlines long enough for them to wait their turn.
    for user in ["a", "b"] {
        let body = json!({"model": "kjv", "prompt": "x", "max_tokens": 2, "user": user,
                          "deadline_ms": 600_000});
        held.push(tokio::spawn(async move { post_json(addr, body).await }));
    }
    wait_for("one to run", common::READY_WITHIN, || {
        d.sim.counters().active == 1
    })
    .await;
    let start = std::time::Instant::now();
    while metric(addr, "fabricd_queue_depth").await < 1.0 {
        assert!(start.elapsed() < common::READY_WITHIN, "never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let late = json!({"model": "kjv", "prompt": "x", "max_tokens": 2, "user": "c",
                      "deadline_ms": 1000});
    let r = post_json(addr, late).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.error_type(), "deadline_exceeded");
    assert_eq!(r.json()["error"]["code"], "predicted_late");
    assert_eq!(r.headers["x-should-retry"], "false");
    let wait: u64 = r.headers["x-fabricd-predicted-wait-ms"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("ms");
    assert!(wait > 1000, "{wait}");
    let message = r.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(message.contains(&format!("{wait} ms")), "{message}");
    // At once: the two ahead of it are still unanswered, and it never
    // reached the fabric.
    assert!(held.iter().all(|h| !h.is_finished()));
    assert_eq!(d.sim.counters().submitted, 1);
    assert_eq!(metric(addr, "fabricd_predictive_refusals_total").await, 1.0);
    for h in held {
        h.abort();
    }
    d.stop().await;
}

/// Sixteen requests at once for kjv: the slots that ran them, and the most
/// the fabric decoded at once.
async fn burst(d: &Daemon) -> (Vec<u64>, u32) {
    let addr = d.addr;
    let runs: Vec<_> = (0..16)
        .map(|i| {
            let body = json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 32,
                              "ignore_eos": true, "user": format!("u{i}")});
            tokio::spawn(async move { post_json(addr, body).await })
        })
        .collect();
    let mut slots = Vec::new();
    for r in runs {
        let r = r.await.expect("join");
        assert_eq!(r.status, 200, "{}", r.text());
        slots.push(r.json()["fabric"]["slot"].as_u64().expect("slot"));
    }
    slots.sort_unstable();
    slots.dedup();
    (slots, d.sim.stats().peak_decoding)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_model_held_in_both_slots_is_served_by_both() {
    // The configuration wants kjv in both slots (a board boots with
    // none, and would otherwise get kjv and fortunes).
    let d = Daemon::start(|_| {}, |c| c.slot_models = vec!["kjv".into(), "kjv".into()]).await;
    let start = std::time::Instant::now();
    while common::slots(d.addr).await
        != [
            ("kjv".to_owned(), "ready".to_owned()),
            ("kjv".to_owned(), "ready".to_owned()),
        ]
    {
        assert!(
            start.elapsed() < common::READY_WITHIN,
            "slot 1 never held kjv"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (slots, peak) = burst(&d).await;
    assert_eq!(slots, [0, 1], "both slots served kjv");
    // The fabric's own count: more at once than one slot's four lanes.
    assert!(peak > 4, "at most {peak} decoding at once");
    d.stop().await;

    // With every_slot off, only the first slot holding it serves it.
    let d = Daemon::start(
        |_| {},
        |c| {
            c.typing.every_slot = false;
            c.slot_models = vec!["kjv".into(), "kjv".into()];
        },
    )
    .await;
    let (slots, peak) = burst(&d).await;
    assert_eq!((slots, peak <= 4), (vec![0], true), "peak {peak}");
    d.stop().await;
}

/// Three long streaming completions hold slot 0 (two lanes, two contexts),
/// then one short request comes: how many long ones ended before the short
/// one did. A long one takes seconds on the slowed fabric, so a short one
/// that is not stuck behind it ends first however busy the machine is.
async fn short_behind_long(d: &Daemon) -> usize {
    let addr = d.addr;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let longs: Vec<_> = (0..3)
        .map(|i| {
            let done = done.clone();
            let body = json!({"model": "kjv", "prompt": "In the beginning", "max_tokens": 256,
                              "ignore_eos": true, "stream": true, "user": format!("long{i}")});
            tokio::spawn(async move {
                let r = post_json(addr, body).await;
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                r
            })
        })
        .collect();
    // Once the fabric decodes long ones on both lanes, or all the lanes
    // the policy lets them have...
    wait_for("the long ones to run", common::READY_WITHIN, || {
        d.sim.counters().active >= 1
    })
    .await;
    let start = std::time::Instant::now();
    while metric(addr, "fabricd_queue_depth").await < 1.0 {
        assert!(start.elapsed() < common::READY_WITHIN, "nothing waits");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ...the short one comes.
    let short = json!({"model": "kjv", "prompt": "And God", "max_tokens": 4, "user": "typist"});
    let r = post_json(addr, short).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let before = done.load(std::sync::atomic::Ordering::SeqCst);
    for l in longs {
        assert_eq!(l.await.expect("join").status, 200);
    }
    before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_request_is_not_stuck_behind_long_streams() {
    // Two lanes and two contexts a slot, a fabric four times slower than
    // real (a long completion takes about 2 s); kjv in slot 0 only.
    let sim = |s: &mut fabric_sim::SimConfig| {
        s.lanes = 2;
        s.contexts = 2;
        s.time_scale = 4.0;
    };
    let d = Daemon::start(sim, |_| {}).await;
    assert_eq!(short_behind_long(&d).await, 0, "no long one ended first");
    d.stop().await;
    // Without the policy the short one waits for long ones to end.
    let d = Daemon::start(sim, |c| c.typing.interactive_first = false).await;
    assert!(short_behind_long(&d).await >= 1);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sessions_floods_and_cache_busting_get_typed_answers_within_bounds() {
    let d = Daemon::start(
        |s| s.time_scale = 0.05,
        |c| {
            c.queue_capacity = 4096;
            c.typing.cache_bytes = 16 * 1024;
            c.typing.session_entries = 64;
            c.typing.session_bytes = 16 * 1024;
        },
    )
    .await;
    let addr = d.addr;
    let base = json!({"model": "kjv", "prompt": "x", "max_tokens": 2});
    for bad in [
        json!(""),
        json!("s".repeat(129)),
        json!("s".repeat(512 * 1024)),
        json!(7),
        json!(["a"]),
    ] {
        let mut body = base.clone();
        body["session"] = bad.clone();
        let r = post_json(addr, body).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        assert_eq!(r.json()["error"]["param"], "session", "{bad}");
    }
    // (Under the 16 KiB head limit, so the session check is what answers.)
    for bad in ["", &"h".repeat(129), &"h".repeat(8 * 1024)] {
        let r = post_with(addr, &base, &[("x-session-id", bad)]).await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.json()["error"]["param"], "session");
    }
    let r = {
        let req = Request::post("/v1/completions")
            .header("host", "test")
            .header("content-type", "application/json")
            .header(
                "x-session-id",
                hyper::header::HeaderValue::from_bytes(b"caf\xe9").expect("value"),
            )
            .body(Full::new(Bytes::from(base.to_string())))
            .expect("request");
        common::request(addr, req).await.expect("response")
    };
    assert_eq!(
        (r.status, r.json()["error"]["param"].clone()),
        (400, json!("session"))
    );
    // One session id shared by 2,048 clients at once (one address, so one
    // session): a flood of supersedes. Each is answered, 200 or
    // superseded; long enough on the fabric that they overlap.
    let flood: Vec<_> = (0..2048)
        .map(|i| {
            let body = json!({"model": "kjv", "prompt": format!("flood {i}"), "max_tokens": 64,
                              "ignore_eos": true, "session": "shared"});
            tokio::spawn(async move { post_json(addr, body).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for f in flood {
        statuses.push(f.await.expect("join").status);
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let superseded = statuses.iter().filter(|s| **s == 409).count();
    assert_eq!(ok + superseded, statuses.len(), "{statuses:?}");
    assert!(
        ok >= 1 && superseded > 0,
        "{ok} ok, {superseded} superseded"
    );
    // Each 409 is counted once: superseded where it was (held, queued or
    // running), or (a prompt that extends the one decoding, "flood 12"
    // after "flood 1") joined.
    let counted = metric(addr, "fabricd_superseded_total{state=\"held\"}").await
        + metric(addr, "fabricd_superseded_total{state=\"queued\"}").await
        + metric(addr, "fabricd_superseded_total{state=\"running\"}").await
        + metric(addr, "fabricd_joins_total").await;
    assert_eq!(counted, superseded as f64);
    // Cache-busting prompts and thousands of sessions: the stores stay
    // within their bounds.
    for i in 0..300 {
        let body = json!({"model": "kjv", "prompt": format!("bust {i}"), "max_tokens": 2,
                          "temperature": 0, "session": format!("s{i}")});
        assert_eq!(post_json(addr, body).await.status, 200);
    }
    assert!(metric(addr, "fabricd_cache_bytes").await <= 16.0 * 1024.0);
    assert!(metric(addr, "fabricd_cache_evictions_total").await > 0.0);
    assert!(metric(addr, "fabricd_sessions").await <= 64.0);
    assert!(metric(addr, "fabricd_session_bytes").await <= 16.0 * 1024.0);
    // And everyone else is served.
    assert_eq!(common::small_completion(addr, "x", 0).await, 200);
    d.stop().await;
}

/// A session that names the other model at every keystroke, while one
/// model's slot is busy: every keystroke gets a typed answer (its text, or
/// `superseded`), every text is its own model's for its prompt, the
/// newest keystroke is answered, and the session is one entry of the
/// table. Then a session that types what each answer suggested, in the
/// other model each time: nothing is typed forward across models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_changing_model_every_keystroke_gets_each_models_own_answers() {
    // No cache: each reference below is decoded, not this test's own
    // answers read back.
    let (d, holder) = held_with(|c| c.typing.cache = false).await;
    let addr = d.addr;
    let model = |i: usize| {
        if i.is_multiple_of(2) {
            "kjv"
        } else {
            "fortunes"
        }
    };
    let prompt = |i: usize| format!("And the {}", &"light and darkness"[..i + 1]);
    let mut keys = Vec::new();
    for i in 0..13 {
        let body = json!({"model": model(i), "prompt": prompt(i), "max_tokens": 6,
                          "temperature": 0, "session": "switcher", "session_seq": i,
                          "user": "switcher"});
        keys.push(tokio::spawn(async move { post_json(addr, body).await }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // The busy slot frees: what waits for it runs.
    holder.abort();
    let mut answers = Vec::new();
    for k in keys {
        answers.push(k.await.expect("join"));
    }
    assert_eq!(answers[12].status, 200, "{}", answers[12].text());
    for (i, r) in answers.iter().enumerate() {
        if r.status != 200 {
            assert_superseded(r);
            continue;
        }
        assert_eq!(r.json()["model"], model(i), "keystroke {i}: {}", r.text());
        let reference = post_json(
            addr,
            json!({"model": model(i), "prompt": prompt(i), "max_tokens": 6, "temperature": 0}),
        )
        .await;
        assert_eq!(reference.status, 200, "{}", reference.text());
        assert_eq!(
            text(r),
            text(&reference),
            "keystroke {i} ({}) got another model's text",
            model(i)
        );
    }
    assert!(metric(addr, "fabricd_sessions").await <= 1.0);
    // One keystroke at a time, each typing what the last suggested, in
    // the other model: no answer of one model is typed forward into the
    // other's.
    let mut typed = "And God".to_owned();
    for i in 0..8 {
        let body = json!({"model": model(i), "prompt": typed, "max_tokens": 6, "temperature": 0,
                          "session": "follower", "session_seq": i, "user": "follower"});
        let r = post_json(addr, body).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let reference = post_json(
            addr,
            json!({"model": model(i), "prompt": typed, "max_tokens": 6, "temperature": 0}),
        )
        .await;
        assert_eq!(
            text(&r),
            text(&reference),
            "keystroke {i} ({}, {:?} from {:?}) got another model's text",
            model(i),
            source(&r),
            typed
        );
        let next = text(&r).chars().next().unwrap_or(' ');
        typed.push(next);
    }
    d.stop().await;
}
