//! The routes, and the endpoints that only read what the scheduler and the stats publish.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::body::{full, json_bytes, Body};
use super::completions::completions;
use super::exchange::Exchange;
use super::reply::Failure;
use super::App;

pub(super) async fn route(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
    ex: &Exchange,
) -> Response<Body> {
    let method = req.method().clone();
    let resp = match (req.uri().path(), &method) {
        ("/v1/completions", &Method::POST) => return completions(app, peer, req, ex).await,
        ("/", &Method::GET) => super::page::page(),
        ("/v1/models", &Method::GET) => models(app),
        ("/healthz", &Method::GET) => json_response(StatusCode::OK, &json!({"status": "ok"})),
        ("/readyz", &Method::GET) => readyz(app),
        ("/metrics", &Method::GET) => metrics(app).await,
        ("/stats", &Method::GET) => {
            // `?since_ms=N`: windows ending at or after N (ms since 1970);
            // `?merge=1`: with what a fleet merge needs (stats::fleet).
            let query = req.uri().query().unwrap_or("");
            let since = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("since_ms="))
                .and_then(|v| v.parse().ok());
            let merge = query.split('&').any(|kv| kv == "merge=1");
            json_response(StatusCode::OK, &app.stats.report(since, merge).await)
        }
        ("/v1/completions", _) => Failure::MethodNotAllowed {
            method: method.to_string(),
            allow: "POST",
        }
        .response(),
        ("/" | "/v1/models" | "/healthz" | "/readyz" | "/metrics" | "/stats", _) => {
            Failure::MethodNotAllowed {
                method: method.to_string(),
                allow: "GET",
            }
            .response()
        }
        (path, _) => Failure::NotFound {
            path: path.to_owned(),
        }
        .response(),
    };
    resp
}

pub(super) fn json_response<T: serde::Serialize>(status: StatusCode, v: &T) -> Response<Body> {
    let mut bytes = Vec::with_capacity(256);
    if serde_json::to_writer(&mut bytes, v).is_err() {
        // Only a map with non-string keys fails; none of ours has one.
        bytes.clear();
    }
    bytes.push(b'\n');
    json_bytes(status, bytes)
}

pub(super) fn models(app: &App) -> Response<Body> {
    let view = app.sched.published().view();
    let slots = &view.slots;
    let data: Vec<_> = app
        .catalog
        .models
        .iter()
        .map(|m| {
            let in_slots: Vec<_> = slots
                .iter()
                .filter(|s| s.model.as_deref() == Some(&*m.name))
                .map(|s| json!({"slot": s.index, "state": s.state.as_str(), "accepting": s.accepting}))
                .collect();
            json!({
                "id": m.name,
                "object": "model",
                "created": 0,
                "owned_by": "fabricd",
                "description": m.description,
                "slots": in_slots,
                "usable": m.problem.is_none(),
                "problem": m.problem.as_ref().map(|p| p.to_string()),
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

pub(super) fn readyz(app: &App) -> Response<Body> {
    let published = app.sched.published();
    let view = published.view();
    let mut models = serde_json::Map::new();
    for s in &view.slots {
        if let Some(m) = &s.model {
            let state = if s.state == fabric_hw::contract::SlotState::Ready && s.accepting {
                "ready"
            } else {
                s.state.as_str()
            };
            let entry = models.entry(m.to_string()).or_insert(json!("loading"));
            if state == "ready" || entry == "loading" {
                *entry = json!(state);
            }
        }
    }
    let ready = !app.shutting_down.load(Ordering::Relaxed) && models.values().any(|v| v == "ready");
    let info = &published.info;
    let body = json!({
        "ready": ready,
        "drained": app.board_drain.is_on(),
        "fabric": {
            "state": view.state,
            "slots": info.slots,
            "lanes": info.lanes,
            "contexts_per_slot": info.contexts_per_slot,
            "prefill_ns": info.prefill_ns,
            "decode_ns": info.decode_ns,
            "max_prompt": info.max_prompt,
            "max_output": info.max_output,
        },
        "models": models,
        "slots": view.slots,
        "queue_depth": published.queued.load(Ordering::Relaxed),
    });
    json_response(
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        &body,
    )
}

pub(super) async fn metrics(app: &App) -> Response<Body> {
    let counters = app.sched.control().counters().await;
    let published = app.sched.published();
    let text = app.metrics.render(
        published.queued.load(Ordering::Relaxed),
        published.in_flight.load(Ordering::Relaxed),
        &published.view().slots,
        counters,
        (published.typing_counts(), app.typing.figures()),
    );
    let mut r = Response::new(full(text));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
