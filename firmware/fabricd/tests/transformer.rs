//! The transformer served by the daemon (contract section 10): listed as
//! one, loaded into a slot by partial reconfiguration, its completions the
//! integer definition's to the token, and a request its context cannot hold
//! refused by name before it reaches the fabric.

mod common;

use bytes::Bytes;
use common::{bitstreams, control, get, post_json, request, Daemon};
use fabric_hw::contract::NO_STOP_TOKEN;
use fabric_model::lm::{generate, Weights};
use fabric_model::Tokenizer;
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transformer_is_listed_loaded_and_served_as_its_definition_gives() {
    let d = Daemon::start(|_| {}, |_| {}).await;
    let models = get(d.addr, "/v1/models").await.expect("models").json();
    let lm = models["data"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|m| m["id"] == "kjv-lm")
        .expect("kjv-lm is listed")
        .clone();
    assert!(
        lm["description"]
            .as_str()
            .is_some_and(|s| s.contains("transformer")),
        "{lm}"
    );
    // Slot 1 holds the trigram engine: the load reflashes it.
    let r = control(&d, json!({"cmd": "load", "model": "kjv-lm", "slot": 1})).await;
    assert_eq!(r["ok"], true, "{r}");

    let prompt = "In the beginning God created the";
    let reply = post_json(
        d.addr,
        json!({"model": "kjv-lm", "prompt": prompt, "max_tokens": 12, "temperature": 0}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let weights = Weights::from_bytes(
        &std::fs::read(bitstreams().join("kjv-lm.flm")).expect("the committed weights"),
    )
    .expect("weights");
    let tok = Tokenizer::from_bytes(
        &std::fs::read(bitstreams().join("kjv-lm.tok")).expect("the committed tokenizer"),
    )
    .expect("tokenizer");
    let want =
        generate(&weights, &tok.encode(prompt), 12, 0.0, 0, NO_STOP_TOKEN).expect("reference");
    assert_eq!(
        reply.json()["choices"][0]["text"],
        tok.decode(&want),
        "the fabric's tokens are the definition's"
    );

    // Streamed at a temperature, the chunks make the definition's text too.
    let streamed = post_json(
        d.addr,
        json!({"model": "kjv-lm", "prompt": prompt, "max_tokens": 10, "temperature": 0.8,
               "seed": 3, "stream": true}),
    )
    .await;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    let joined: String = streamed
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("chunk json");
            v["choices"][0]["text"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    let want =
        generate(&weights, &tok.encode(prompt), 10, 0.8, 3, NO_STOP_TOKEN).expect("reference");
    assert_eq!(joined, tok.decode(&want), "streamed");
    // The stats: slot 1's state names it, and its 22 tokens are counted.
    let metrics = get(d.addr, "/metrics").await.expect("metrics").text();
    assert!(
        metrics.contains("fabricd_slot_state{slot=\"1\",model=\"kjv-lm\"}"),
        "{metrics}"
    );
    let out: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("fabricd_tokens_total{direction=\"out\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("fabricd_tokens_total out");
    assert!(out >= 22, "{out} tokens out");

    // The context holds the prompt and max_tokens together.
    let context = weights.shape.context;
    let n = tok.encode(prompt).len();
    let over = post_json(
        d.addr,
        json!({"model": "kjv-lm", "prompt": prompt, "max_tokens": context - n + 1}),
    )
    .await;
    assert_eq!(over.status, 400, "{}", over.text());
    assert_eq!(
        over.json()["error"]["param"],
        "max_tokens",
        "{}",
        over.text()
    );
    let fits = json!({"model": "kjv-lm", "prompt": prompt, "max_tokens": context - n});
    if std::env::var_os("FABRICD_SIM_RTL").is_some_and(|v| v == "1") {
        // Under the RTL every token streams all the weights through the
        // cosimulated port, and the whole context takes minutes: here the
        // request must be admitted (run until its deadline, not refused);
        // the native run checks its answer, and fabric-rtl's lm_slot test
        // fills a context in the RTL.
        let req = Request::post("/v1/completions")
            .header("host", "test")
            .header("content-type", "application/json")
            .header("x-deadline-ms", "3000")
            .body(Full::new(Bytes::from(fits.to_string())))
            .expect("request");
        let r = request(d.addr, req).await.expect("response");
        assert!(
            r.status == 200
                || (r.status == 504 && r.json()["error"]["type"] == "deadline_exceeded"),
            "{} {}",
            r.status,
            r.text()
        );
    } else {
        let fits = post_json(d.addr, fits).await;
        assert_eq!(fits.status, 200, "{}", fits.text());
    }
    let long = "and ".repeat(context);
    let over = post_json(d.addr, json!({"model": "kjv-lm", "prompt": long})).await;
    assert_eq!(over.status, 400, "{}", over.text());
    assert_eq!(over.json()["error"]["param"], "prompt", "{}", over.text());
    d.stop().await;
}
