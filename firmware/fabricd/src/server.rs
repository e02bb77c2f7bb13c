//! The HTTP front end: the accept loop, connections, routes and handlers.
//!
//! # Connections
//! A connection holds a permit of the connection semaphore (taken before it
//! is served, never waited for). Over the cap, a small second budget answers
//! the connection's request with `overloaded` and closes it, so a client
//! learns why; past that too, connections wait in the kernel's backlog.
//! A connection that has sent nothing yet costs a socket and a parked task,
//! not hyper's buffers: it is only handed to hyper once it is readable, and
//! closed after the idle timeout if it never is. Its [`guard`](crate::guard)
//! bounds slow headers (slowloris) and idle keep-alive, and drains it on
//! shutdown.
//!
//! # Requests
//! A completion request is parsed and validated here (a 400 names the
//! field), tokenized, checked against the fabric's limits, admitted (a
//! semaphore permit, or `overloaded` at once) and queued; the scheduler's
//! first answer decides between a typed error and a 200. After a 200 of an
//! event stream, errors go in-band. A client that goes away drops its
//! response, which cancels the request.

use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use fabric_hw::contract::Finish;
use fabric_model::tokenizer::EOS;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api;
use crate::body::{self, full, Body};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::guard;
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::sched::{self, Admission, ClientKey, Events, Handle, ReqEvent, ReqId};
use crate::text::{StopMatcher, Utf8Decoder};

/// Connections over the cap that are still answered (with `overloaded`).
const REFUSAL_BUDGET: usize = 256;

/// What every handler shares. The fabric is reached only through the
/// scheduler: its handle, and what it publishes.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub catalog: Catalog,
    pub sched: Handle,
    pub permits: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    pub next_id: AtomicU64,
    pub shutting_down: AtomicBool,
    /// Completions per second the fabric can do, from its timing registers,
    /// for `Retry-After` before any has been measured.
    pub nominal_rate: f64,
    pub stats: Arc<crate::stats::StatsHandle>,
}

/// The model name that follows rotation.
pub const DEFAULT_MODEL: &str = "default";

/// What is recorded about a request when it ends (exactly once).
#[derive(Debug, Clone)]
struct Ledger {
    model: Option<Arc<str>>,
    ip: IpAddr,
    received: Instant,
    tokens_in: u64,
}

impl App {
    /// Counts a request refused before it was admitted, and answers it.
    fn refused(&self, l: &Ledger, outcome: Outcome) -> Response<Body> {
        self.ended(l, outcome.label(), 0, 0);
        outcome.response()
    }

    /// Counts a request's end in the metrics and the stats.
    fn ended(&self, l: &Ledger, label: &'static str, tokens_out: u64, fabric_us: u32) {
        let now = Instant::now();
        self.metrics.outcome(label);
        if label == "ok" {
            self.metrics
                .tokens_in
                .fetch_add(l.tokens_in, Ordering::Relaxed);
            self.metrics
                .tokens_out
                .fetch_add(tokens_out, Ordering::Relaxed);
            self.metrics
                .latency
                .observe(now.saturating_duration_since(l.received));
            if fabric_us > 0 {
                self.metrics
                    .fabric_time
                    .observe(Duration::from_micros(fabric_us.into()));
            }
        }
        self.stats.record(crate::stats::RequestEvent {
            outcome: label,
            model: l.model.as_deref(),
            client: Some(l.ip),
            received: l.received,
            ended: now,
            tokens_in: l.tokens_in,
            tokens_out,
        });
    }
}

/// Cancels a request when dropped, unless disarmed: the client went away.
struct CancelGuard {
    id: ReqId,
    app: Arc<App>,
    ledger: Ledger,
    armed: bool,
}

impl CancelGuard {
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            self.app.sched.cancel(self.id);
            self.app.ended(&self.ledger, "cancelled", 0, 0);
        }
    }
}

/// Accepts connections until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let conns = Arc::new(Semaphore::new(app.config.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSAL_BUDGET));
    let mut accept_errors = 0u32;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                accept_errors = 0;
                a
            }
            Err(e) => {
                // Out of descriptors, usually: back off instead of spinning,
                // and log once per burst.
                if accept_errors == 0 {
                    log::warn!("http: accept: {e}");
                }
                accept_errors += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        app.metrics
            .connections_total
            .fetch_add(1, Ordering::Relaxed);
        match conns.clone().try_acquire_owned() {
            Ok(permit) => {
                let app = app.clone();
                let shutdown = shutdown.clone();
                tracker.spawn(async move {
                    app.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
                    app.stats.connections.opened();
                    serve_conn(stream, peer, &app, shutdown).await;
                    app.stats.connections.closed();
                    app.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                    drop(permit);
                });
            }
            Err(_) => {
                app.metrics
                    .connections_refused
                    .fetch_add(1, Ordering::Relaxed);
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    let app = app.clone();
                    tracker.spawn(async move {
                        refuse_conn(stream, &app).await;
                        drop(permit);
                    });
                }
            }
        }
    }
}

async fn serve_conn(
    stream: TcpStream,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: CancellationToken,
) {
    // Park until the client says something: a byte to peek at (or its
    // EOF). `readable()` alone can wake spuriously, which would hand an
    // idle connection to hyper and its buffers.
    let mut probe = [0u8; 1];
    tokio::select! {
        r = stream.peek(&mut probe) => if !matches!(r, Ok(n) if n > 0) { return },
        _ = tokio::time::sleep(app.config.idle_timeout()) => return,
        _ = shutdown.cancelled() => return,
    }
    // Boxed, so a parked connection's task is only as large as the wait
    // above, not hyper's connection state.
    Box::pin(serve_http(stream, peer, app, shutdown)).await;
}

async fn serve_http(
    stream: TcpStream,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: CancellationToken,
) {
    let watch = guard::Watch::new(app.config.header_read_timeout());
    let _guard = guard::spawn(watch.clone(), shutdown, app.config.shutdown_grace());
    let app2 = app.clone();
    let watch2 = watch.clone();
    let service = service_fn(move |req| {
        let app = app2.clone();
        let watch = watch2.clone();
        watch.begin();
        async move {
            let mut r = route(&app, peer, req).await;
            // Idle again once hyper is done with the response.
            r.body_mut().on_drop(watch);
            Ok::<_, std::convert::Infallible>(r)
        }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(stream), service);
    let conn = pin!(conn);
    match guard::run(conn, &watch, |c| c.graceful_shutdown()).await {
        guard::Ended::Done(Ok(())) => {}
        guard::Ended::Done(Err(e)) => log::debug!("http: {peer}: {e}"),
        guard::Ended::Stopped => {
            log::debug!("http: {peer}: header overdue, or shutdown's grace over")
        }
    }
}

/// Over the connection cap: read the request, answer `overloaded`, close.
async fn refuse_conn(stream: TcpStream, app: &Arc<App>) {
    let retry = app.sched.published().retry_after(app.nominal_rate);
    let service = service_fn(move |_req: Request<Incoming>| async move {
        let mut r = Outcome::Overloaded {
            retry_after: retry,
            reason: "too many open connections".into(),
        }
        .response();
        r.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, std::convert::Infallible>(r)
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(2))
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
}

async fn route(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let resp = match (req.uri().path(), &method) {
        ("/v1/completions", &Method::POST) => return completions(app, peer, req).await,
        ("/v1/models", &Method::GET) => models(app),
        ("/healthz", &Method::GET) => json_response(StatusCode::OK, &json!({"status": "ok"})),
        ("/readyz", &Method::GET) => readyz(app),
        ("/metrics", &Method::GET) => metrics(app).await,
        ("/stats", &Method::GET) => {
            // `?since_ms=N`: windows ending at or after N (ms since 1970).
            let since = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("since_ms=")))
                .and_then(|v| v.parse().ok());
            json_response(StatusCode::OK, &app.stats.report(since).await)
        }
        ("/v1/completions", _) => Outcome::MethodNotAllowed {
            method: method.to_string(),
            allow: "POST",
        }
        .response(),
        ("/v1/models" | "/healthz" | "/readyz" | "/metrics" | "/stats", _) => {
            Outcome::MethodNotAllowed {
                method: method.to_string(),
                allow: "GET",
            }
            .response()
        }
        (path, _) => Outcome::NotFound {
            path: path.to_owned(),
        }
        .response(),
    };
    resp
}

fn json_response<T: serde::Serialize>(status: StatusCode, v: &T) -> Response<Body> {
    let mut bytes = Vec::with_capacity(256);
    if serde_json::to_writer(&mut bytes, v).is_err() {
        // Only a map with non-string keys fails; none of ours has one.
        bytes.clear();
    }
    bytes.push(b'\n');
    json_bytes(status, bytes)
}

/// A response with a JSON body already written (and its newline).
fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn models(app: &App) -> Response<Body> {
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

fn readyz(app: &App) -> Response<Body> {
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

async fn metrics(app: &App) -> Response<Body> {
    let counters = app.sched.control().counters().await;
    let published = app.sched.published();
    let text = app.metrics.render(
        published.queued.load(Ordering::Relaxed),
        published.in_flight.load(Ordering::Relaxed),
        &published.view().slots,
        counters,
    );
    let mut r = Response::new(full(text));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn read_body(app: &App, body: Incoming, received: Instant) -> Result<Bytes, Outcome> {
    let limit = app.config.body_limit;
    let collected = tokio::time::timeout_at(
        (received + app.config.body_read_timeout()).into(),
        whole(Limited::new(body, limit)),
    )
    .await;
    match collected {
        Err(_) => Err(Outcome::Invalid {
            param: None,
            code: "body_timeout",
            message: format!(
                "the request body did not arrive within {} ms",
                app.config.body_read_timeout_ms
            ),
        }),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(Outcome::BodyTooLarge { limit })
        }
        Ok(Err(e)) => Err(Outcome::Invalid {
            param: None,
            code: "body_error",
            message: format!("reading the request body: {e}"),
        }),
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

/// A body's bytes. Usually one frame, taken as it is (`collect` would
/// first put even that one in a list); more are joined.
async fn whole<B>(body: B) -> Result<Bytes, B::Error>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = pin!(body);
    let mut first: Option<Bytes> = None;
    let mut joined = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        // Trailers carry nothing a completion needs.
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if first.is_none() && joined.is_empty() {
            first = Some(data);
            continue;
        }
        if let Some(f) = first.take() {
            joined.extend_from_slice(&f);
        }
        joined.extend_from_slice(&data);
    }
    Ok(first.unwrap_or_else(|| joined.freeze()))
}

async fn completions(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let mut ledger = Ledger {
        model: None,
        ip: client_ip(app, peer, req.headers()),
        received: Instant::now(),
        tokens_in: 0,
    };
    // Boxed: admission's state (the body, the parsed request) is freed once
    // it is done, so a request waiting its turn holds only what it needs
    // to wait (the route's future lives as long as the request). Boxed in
    // a statement of its own: a temporary in a `match` scrutinee lives to
    // the end of the match, across the await, and the unboxed future's
    // 1.8 KB stayed in this one's state, which hyper moves into place for
    // every request (the route's future went from 4.2 KB to 1.7 KB).
    let admission = match check_head(app, req.headers()) {
        // Only the body goes on: the request's head is freed now, and the
        // futures below do not carry it (under 1 KB, the box comes from
        // malloc's per-thread cache).
        Ok(header_deadline) => Box::pin(start_completion(
            app,
            req.into_body(),
            header_deadline,
            &mut ledger,
        )),
        Err(outcome) => return app.refused(&ledger, outcome),
    };
    let started = match admission.await {
        Ok(started) => started,
        Err(outcome) => return app.refused(&ledger, outcome),
    };
    if started.req.stream {
        stream_response(app, started)
    } else {
        whole_response(app, started).await
    }
}

/// An admitted request, whose client going away cancels it.
struct Started {
    req: Prepared,
    guard: CancelGuard,
}

impl Started {
    /// Ends the request (once): disarms the cancel and records it.
    fn end(&mut self, app: &App, label: &'static str, tokens_out: usize, fabric_us: u32) {
        if self.guard.armed {
            self.guard.disarm();
            app.ended(&self.guard.ledger, label, tokens_out as u64, fabric_us);
        }
    }
}

/// Checks a completion's head: the daemon is not shutting down, the body
/// is JSON, and the deadline header (returned) is a number.
fn check_head(app: &App, headers: &hyper::HeaderMap) -> Result<Option<u64>, Outcome> {
    if app.shutting_down.load(Ordering::Relaxed) {
        return Err(Outcome::ShuttingDown);
    }
    if let Some(ct) = headers.get(CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("");
        let essence = ct.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(Outcome::UnsupportedMediaType {
                found: ct.to_owned(),
            });
        }
    }
    headers
        .get("x-deadline-ms")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .ok_or_else(|| {
                    Outcome::invalid(
                        "x-deadline-ms",
                        "the X-Deadline-Ms header must be a positive integer",
                    )
                })
        })
        .transpose()
}

/// Reads, checks and admits a request: queued, or a typed refusal.
async fn start_completion(
    app: &Arc<App>,
    body: Incoming,
    header_deadline: Option<u64>,
    ledger: &mut Ledger,
) -> Result<Started, Outcome> {
    // A block of its own: the body and what borrows it are gone before the
    // admission waits (a local keeps its room in the future's state to the
    // end of its scope, moved out or not).
    let (sent, mut ready) = {
        let bytes = read_body(app, body, ledger.received).await?;
        let (adm, ready) = prepare(app, &bytes, header_deadline, ledger)?;
        (app.sched.admit(adm), ready)
    };
    if sent.await.is_err() {
        return Err(Outcome::ShuttingDown);
    }
    // A stream waits for the scheduler's first word (queued, or a typed
    // refusal) before its 200 goes out. A whole response hears a refusal
    // as its one and only event, and answers it the same way.
    if ready.stream {
        match ready.events.recv().await {
            Some(ReqEvent::Queued) => {}
            Some(ReqEvent::Failed(o)) => return Err(o),
            _ => return Err(Outcome::ShuttingDown),
        }
    }
    // From here a client that goes away cancels the request (a cancel for
    // a request the scheduler refused finds nothing, and does nothing).
    let guard = CancelGuard {
        id: ready.id,
        app: app.clone(),
        ledger: ledger.clone(),
        armed: true,
    };
    Ok(Started { req: ready, guard })
}

/// What answering an admitted request needs.
struct Prepared {
    id: ReqId,
    model: Arc<str>,
    tokenizer: Arc<fabric_model::Tokenizer>,
    stream: bool,
    include_usage: bool,
    stop: Vec<String>,
    prompt_tokens: usize,
    events: Events,
}

/// Parses and checks a body against the model and the fabric, and makes
/// its admission (its queue permit taken, or `overloaded` now).
fn prepare(
    app: &Arc<App>,
    bytes: &[u8],
    header_deadline: Option<u64>,
    ledger: &mut Ledger,
) -> Result<(Admission, Prepared), Outcome> {
    let received = ledger.received;
    let request = api::parse_completion(bytes)?;
    // `default` follows rotation: the model loaded most recently.
    let current;
    let name: &str = if request.model == DEFAULT_MODEL {
        current = app
            .sched
            .published()
            .view()
            .default_model()
            .ok_or_else(|| Outcome::ModelNotLoaded {
                model: DEFAULT_MODEL.into(),
            })?;
        &current
    } else {
        &request.model
    };
    let model = app.catalog.get(name).map_err(|_| Outcome::ModelNotFound {
        model: request.model.to_string(),
        known: app
            .catalog
            .models
            .iter()
            .map(|m| m.name.to_string())
            .collect(),
    })?;
    let tokenizer = model
        .tokenizer
        .clone()
        .ok_or_else(|| Outcome::ModelNotLoaded {
            model: model.name.to_string(),
        })?;
    // A waiting request keeps only the prompt's tokens.
    let prompt = tokenizer.encode(&request.prompt);
    let info = &app.sched.published().info;
    let model_name = model.name.clone();
    ledger.model = Some(model_name.clone());
    ledger.tokens_in = prompt.len() as u64;
    if prompt.len() > info.max_prompt as usize {
        return Err(Outcome::invalid(
            "prompt",
            format!(
                "the prompt is {} tokens; the fabric takes at most {}",
                prompt.len(),
                info.max_prompt
            ),
        ));
    }
    let max_tokens = request
        .max_tokens
        .unwrap_or(app.config.default_max_tokens.min(info.max_output));
    if max_tokens > info.max_output {
        return Err(Outcome::invalid(
            "max_tokens",
            format!(
                "max_tokens {max_tokens} is beyond the fabric's limit of {}",
                info.max_output
            ),
        ));
    }
    let timeout_ms = request
        .deadline_ms
        .or(header_deadline)
        .unwrap_or(app.config.default_deadline_ms)
        .min(app.config.max_deadline_ms);
    let timeout = Duration::from_millis(timeout_ms);
    let client = ClientKey {
        ip: ledger.ip,
        user: request
            .user
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(Arc::from),
    };
    // Admission: a permit now, or overloaded now.
    let Ok(permit) = app.permits.clone().try_acquire_owned() else {
        return Err(Outcome::Overloaded {
            retry_after: app.sched.published().retry_after(app.nominal_rate),
            reason: format!("the queue is full ({} requests)", app.config.queue_capacity),
        });
    };
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    // Tokens as they come: a stream, or stop sequences to watch for.
    let progress = request.stream || !request.stop.is_empty();
    let (tx, events) = sched::events(progress);
    let adm = Admission {
        id,
        request: sched::Request {
            model: model_name.clone(),
            client,
            prompt,
            params: fabric_hw::shell::Params {
                max_tokens,
                temperature: request.temperature,
                seed: request.seed.unwrap_or_else(|| random_seed(id)),
                stop_token: if request.ignore_eos {
                    fabric_hw::contract::NO_STOP_TOKEN
                } else {
                    EOS
                },
                stream: progress,
            },
            // A stream must know before its 200; with stop sequences the
            // answer may end before `Finished`, so it learns its slot early.
            announce: progress,
            deadline: received + timeout,
            timeout,
            received,
        },
        events: tx,
        permit: Some(permit),
    };
    let prepared = Prepared {
        id,
        model: model_name,
        tokenizer,
        stream: request.stream,
        include_usage: request.include_usage,
        stop: request.stop,
        prompt_tokens: adm.request.prompt.len(),
        events,
    };
    Ok((adm, prepared))
}

/// The client's address: the peer, or the first `X-Forwarded-For` entry
/// behind a trusted proxy.
fn client_ip(app: &App, peer: SocketAddr, headers: &hyper::HeaderMap) -> IpAddr {
    if app.config.trust_forwarded_for {
        if let Some(fwd) = headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.trim().parse::<IpAddr>().ok())
        {
            return fwd;
        }
    }
    peer.ip()
}

fn random_seed(id: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Tokens to text, through the stop sequences.
struct Assembler {
    tokenizer: Arc<fabric_model::Tokenizer>,
    utf8: Utf8Decoder,
    stops: StopMatcher,
    tokens: usize,
    /// Scratch, kept between pushes: the text before the stop sequences.
    text: String,
}

impl Assembler {
    fn new(tokenizer: Arc<fabric_model::Tokenizer>, stops: Vec<String>) -> Assembler {
        Assembler {
            tokenizer,
            utf8: Utf8Decoder::default(),
            stops: StopMatcher::new(stops),
            tokens: 0,
            text: String::new(),
        }
    }

    /// Appends the text of `tokens` that can go out now to `out`.
    fn push(&mut self, tokens: &[u32], out: &mut String) {
        if self.stops.stopped() {
            return;
        }
        self.tokens += tokens.len();
        // Without stop sequences the text goes straight out.
        let text = if self.stops.passes_through() {
            &mut *out
        } else {
            self.text.clear();
            &mut self.text
        };
        for &t in tokens.iter().filter(|&&t| t != EOS) {
            let tok = &self.tokenizer;
            self.utf8
                .push_token(tok.token_text(t), tok.token_bytes(t), text);
        }
        if !self.stops.passes_through() {
            self.stops.push(&self.text, out);
        }
    }

    /// Appends what was held back, at the end.
    fn finish(&mut self, out: &mut String) {
        if self.stops.stopped() {
            return;
        }
        self.text.clear();
        self.utf8.finish(&mut self.text);
        self.stops.push(&self.text, out);
        if !self.stops.stopped() {
            self.stops.finish(out);
        }
    }
}

async fn whole_response(app: &Arc<App>, mut s: Started) -> Response<Body> {
    let mut asm = Assembler::new(s.req.tokenizer.clone(), std::mem::take(&mut s.req.stop));
    // Room for a typical answer, so it is not regrown token by token.
    let mut text = String::with_capacity(256);
    let mut slot = None;
    let mut queued = Duration::ZERO;
    let (finish, fabric_us) = loop {
        match s.req.events.recv().await {
            // Only requests with stop sequences hear these (see `announce`).
            Some(ReqEvent::Queued) => {}
            Some(ReqEvent::Started {
                slot: sl,
                queued: q,
            }) => {
                slot = Some(sl);
                queued = q;
                app.metrics.queue_wait.observe(q);
            }
            Some(ReqEvent::Tokens(t)) => {
                asm.push(&t, &mut text);
                if asm.stops.stopped() {
                    // Stop sequence: free the context now.
                    app.sched.cancel(s.req.id);
                    break (Finish::Stop, 0);
                }
            }
            Some(ReqEvent::Finished {
                finish,
                tokens,
                fabric_us,
                slot: sl,
                queued: q,
                ..
            }) => {
                if slot.is_none() {
                    app.metrics.queue_wait.observe(q);
                }
                slot = Some(sl);
                queued = q;
                asm.push(&tokens, &mut text);
                asm.finish(&mut text);
                let finish = if asm.stops.stopped() {
                    Finish::Stop
                } else {
                    finish
                };
                break (finish, fabric_us);
            }
            Some(ReqEvent::Failed(o)) => {
                s.end(app, o.label(), 0, 0);
                return o.response();
            }
            None => {
                s.end(app, Outcome::ShuttingDown.label(), 0, 0);
                return Outcome::ShuttingDown.response();
            }
        }
    };
    let finish = api::finish_reason(finish == Finish::Stop, finish == Finish::Length);
    s.end(app, "ok", asm.tokens, fabric_us);
    let id = api::CompletionId::new(s.req.id);
    let body = api::completion_body(
        id.as_str(),
        unix_now(),
        &s.req.model,
        &text,
        finish,
        api::Usage::new(s.req.prompt_tokens, asm.tokens),
        api::FabricInfo {
            slot,
            queue_ms: queued.as_secs_f64() * 1e3,
            fabric_us,
        },
    );
    let mut bytes = Vec::with_capacity(384 + text.len());
    body.write_json(&mut bytes);
    bytes.push(b'\n');
    json_bytes(StatusCode::OK, bytes)
}

fn stream_response(app: &Arc<App>, s: Started) -> Response<Body> {
    let (tx, body) = body::channel(32);
    let app = app.clone();
    tokio::spawn(pump(app, s, tx));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn sse(c: &api::Completion<'_>) -> Bytes {
    let mut out = Vec::with_capacity(256 + c.choices[0].text.len());
    out.extend_from_slice(b"data: ");
    c.write_json(&mut out);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Feeds one event stream; ends (and cancels) when the client goes away.
async fn pump(app: Arc<App>, mut s: Started, tx: mpsc::Sender<Bytes>) {
    let id = api::CompletionId::new(s.req.id);
    let created = unix_now();
    let mut asm = Assembler::new(s.req.tokenizer.clone(), std::mem::take(&mut s.req.stop));
    let mut keepalive = tokio::time::interval(Duration::from_secs(15));
    keepalive.tick().await;
    let send = |tx: &mpsc::Sender<Bytes>, b: Bytes| {
        let tx = tx.clone();
        async move { tx.send(b).await.is_ok() }
    };
    // A chunk of text, if there is any to send.
    let model = s.req.model.clone();
    let chunk = |text: &str| {
        (!text.is_empty()).then(|| sse(&api::chunk_body(id.as_str(), created, &model, text, None)))
    };
    loop {
        let ev = tokio::select! {
            ev = s.req.events.recv() => ev,
            _ = tx.closed() => return, // the guard cancels
            _ = keepalive.tick() => {
                if !send(&tx, Bytes::from_static(b": keep-alive\n\n")).await { return }
                continue;
            }
        };
        match ev {
            Some(ReqEvent::Started { queued, .. }) => app.metrics.queue_wait.observe(queued),
            Some(ReqEvent::Queued) => {}
            Some(ReqEvent::Tokens(t)) => {
                let mut text = String::new();
                asm.push(&t, &mut text);
                let stopped = asm.stops.stopped();
                if let Some(b) = chunk(&text) {
                    if !send(&tx, b).await {
                        return;
                    }
                }
                if stopped {
                    app.sched.cancel(s.req.id);
                    finish_stream(
                        &app,
                        &mut s,
                        &tx,
                        id.as_str(),
                        created,
                        "stop",
                        asm.tokens,
                        0,
                    )
                    .await;
                    return;
                }
            }
            Some(ReqEvent::Finished {
                finish,
                tokens,
                fabric_us,
                ..
            }) => {
                let mut text = String::new();
                asm.push(&tokens, &mut text);
                asm.finish(&mut text);
                if let Some(b) = chunk(&text) {
                    if !send(&tx, b).await {
                        return;
                    }
                }
                let reason = api::finish_reason(
                    finish == Finish::Stop || asm.stops.stopped(),
                    finish == Finish::Length,
                );
                finish_stream(
                    &app,
                    &mut s,
                    &tx,
                    id.as_str(),
                    created,
                    reason,
                    asm.tokens,
                    fabric_us,
                )
                .await;
                return;
            }
            Some(ReqEvent::Failed(o)) => {
                s.end(&app, o.label(), 0, 0);
                let _ = send(&tx, o.sse()).await;
                return;
            }
            None => {
                s.end(&app, Outcome::ShuttingDown.label(), 0, 0);
                let _ = send(&tx, Outcome::ShuttingDown.sse()).await;
                return;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn finish_stream(
    app: &App,
    s: &mut Started,
    tx: &mpsc::Sender<Bytes>,
    id: &str,
    created: u64,
    reason: &str,
    tokens: usize,
    fabric_us: u32,
) {
    let mut last = api::chunk_body(id, created, &s.req.model, "", Some(reason));
    if s.req.include_usage {
        last.usage = Some(api::Usage::new(s.req.prompt_tokens, tokens));
    }
    let ok = tx.send(sse(&last)).await.is_ok()
        && tx
            .send(Bytes::from_static(b"data: [DONE]\n\n"))
            .await
            .is_ok();
    // A client gone before [DONE] did not get its result.
    s.end(app, if ok { "ok" } else { "cancelled" }, tokens, fabric_us);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::task::{Context, Poll};

    /// A body that yields the given frames, then ends.
    struct Frames(VecDeque<&'static str>);

    impl hyper::body::Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            let next = self.0.pop_front();
            Poll::Ready(
                next.map(|s| Ok(hyper::body::Frame::data(Bytes::from_static(s.as_bytes())))),
            )
        }
    }

    #[tokio::test]
    async fn a_body_is_whole_in_one_frame_or_many() {
        for (frames, expected) in [
            (vec![], ""),
            (vec!["{\"a\":1}"], "{\"a\":1}"),
            (vec!["{\"a\"", "", ":1", "}"], "{\"a\":1}"),
            (vec!["", "x"], "x"),
        ] {
            let got = whole(Frames(frames.clone().into()))
                .await
                .expect("infallible");
            assert_eq!(got, expected.as_bytes(), "{frames:?}");
        }
    }

    #[test]
    fn the_assembler_cuts_at_stops_and_skips_end_of_text() {
        let tok = Arc::new(fabric_model::Tokenizer::new(vec![
            b" world".to_vec(),
            b"\n".to_vec(),
        ]));
        let hello: Vec<u32> = b"hello".iter().map(|&b| u32::from(b)).collect();
        let mut a = Assembler::new(tok.clone(), vec!["\n".into()]);
        let mut pushed = |tokens: &[u32]| {
            let mut out = String::new();
            a.push(tokens, &mut out);
            out
        };
        assert_eq!(pushed(&hello), "hello");
        assert_eq!(pushed(&[257, EOS]), " world");
        assert_eq!(pushed(&[258, 257]), "");
        assert!(a.stops.stopped());
    }
}
