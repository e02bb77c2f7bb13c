//! Answering an admitted request: tokens to text through the stop sequences, as one body or an event stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fabric_hw::contract::Finish;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::body::{self, json_bytes, Body};
use super::instant::{joined_answer, remember, run_alone, set_source};
use super::ledger::Started;
use super::reply::Failure;
use super::response::{self, sse, unix_at};
use super::text::Assembler;
use super::App;
use crate::sched::{Ending, Outcome, ReqEvent};
use crate::typing::Source;

pub(super) async fn whole_response(app: &Arc<App>, mut s: Started) -> Response<Body> {
    let mut asm = Assembler::new(s.req.tokenizer.clone(), std::mem::take(&mut s.req.stop));
    // Room for a typical answer, so it is not regrown token by token.
    let mut text = String::with_capacity(256);
    let mut slot = None;
    let mut queued = Duration::ZERO;
    // Every token, for the typing features (only if it takes part).
    let mut all = Vec::new();
    let keep = s.req.ticket.is_some();
    let mut joined = false;
    let (finish, fabric_us, source) = loop {
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
            Some(ReqEvent::Joined { slot: sl }) => {
                joined = true;
                slot = Some(sl);
            }
            Some(ReqEvent::Tokens(t)) => {
                if keep {
                    all.extend_from_slice(&t);
                }
                asm.push(&t, &mut text);
                if asm.stops.stopped() {
                    // Stop sequence: free the context now.
                    app.sched.cancel(s.req.id);
                    remember(app, &s.req, &all, Finish::Stop, &text, false);
                    break (Finish::Stop, 0, Source::Fabric);
                }
            }
            Some(ReqEvent::Finished {
                finish,
                tokens,
                fabric_us,
                slot: sl,
                queued: q,
                ..
            }) if joined => {
                slot = Some(sl);
                queued = q;
                match joined_answer(app, &s.req, &tokens, finish) {
                    Some((rest, n, reason)) => {
                        s.end(app, Ending::Ok, n, fabric_us);
                        app.typing.answered_by(Source::Joined);
                        let mut r = completion(&s, &rest, reason, n, slot, queued, fabric_us);
                        set_source(&mut r, Source::Joined);
                        return r;
                    }
                    None => {
                        // Not what was typed: run on its own. Rare, and its
                        // future is most of this one's size: boxed, so the
                        // common answer is not moved at that size.
                        if let Err(o) = Box::pin(run_alone(app, &mut s)).await {
                            s.end(app, o.ending(), 0, 0);
                            s.req.failed(app);
                            return Failure::from(o).response();
                        }
                        joined = false;
                    }
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
                if keep {
                    all.extend_from_slice(&tokens);
                }
                asm.push(&tokens, &mut text);
                asm.finish(&mut text);
                let finish = if asm.stops.stopped() {
                    Finish::Stop
                } else {
                    finish
                };
                remember(app, &s.req, &all, finish, &text, true);
                break (finish, fabric_us, Source::Fabric);
            }
            Some(ReqEvent::Failed(o)) => {
                s.end(app, o.ending(), 0, 0);
                s.req.failed(app);
                return Failure::from(o).response();
            }
            None => {
                s.end(app, Ending::ShuttingDown, 0, 0);
                return Failure::from(Outcome::ShuttingDown).response();
            }
        }
    };
    let finish = response::finish_reason(finish == Finish::Stop, finish == Finish::Length);
    s.end(app, Ending::Ok, asm.tokens, fabric_us);
    app.typing.answered_by(source);
    let mut r = completion(&s, &text, finish, asm.tokens, slot, queued, fabric_us);
    set_source(&mut r, source);
    r
}

/// A whole completion's response.
fn completion(
    s: &Started,
    text: &str,
    finish: &str,
    tokens: usize,
    slot: Option<u8>,
    queued: Duration,
    fabric_us: u32,
) -> Response<Body> {
    let id = response::CompletionId::new(s.req.id);
    let body = response::completion_body(
        id.as_str(),
        unix_at(s.guard.ledger.received),
        &s.req.model,
        text,
        finish,
        response::Usage::new(s.req.prompt_tokens, tokens),
        response::FabricInfo {
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

pub(super) fn stream_response(app: &Arc<App>, s: Started) -> Response<Body> {
    let (tx, body) = body::channel(32);
    let app = app.clone();
    tokio::spawn(pump(app, s, tx));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    // Streams never join: only the fabric answers one that gets here.
    set_source(&mut r, Source::Fabric);
    r
}

/// Feeds one event stream; ends (and cancels) when the client goes away.
pub(super) async fn pump(app: Arc<App>, mut s: Started, tx: mpsc::Sender<Bytes>) {
    let id = response::CompletionId::new(s.req.id);
    let created = unix_at(s.guard.ledger.received);
    let mut asm = Assembler::new(s.req.tokenizer.clone(), std::mem::take(&mut s.req.stop));
    let mut keepalive = tokio::time::interval(Duration::from_secs(15));
    keepalive.tick().await;
    let send = |tx: &mpsc::Sender<Bytes>, b: Bytes| {
        let tx = tx.clone();
        async move { tx.send(b).await.is_ok() }
    };
    // A chunk of text, if there is any to send.
    let model = s.req.model.clone();
    let keep = s.req.ticket.is_some();
    let mut all = Vec::new();
    let mut shown = String::new();
    let chunk = |text: &str| {
        (!text.is_empty()).then(|| {
            sse(&response::chunk_body(
                id.as_str(),
                created,
                &model,
                text,
                None,
            ))
        })
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
            Some(ReqEvent::Queued | ReqEvent::Joined { .. }) => {}
            Some(ReqEvent::Tokens(t)) => {
                let mut text = String::new();
                asm.push(&t, &mut text);
                if keep {
                    all.extend_from_slice(&t);
                    shown.push_str(&text);
                }
                let stopped = asm.stops.stopped();
                if let Some(b) = chunk(&text) {
                    if !send(&tx, b).await {
                        return;
                    }
                }
                if stopped {
                    app.sched.cancel(s.req.id);
                    remember(&app, &s.req, &all, Finish::Stop, &shown, false);
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
                if keep {
                    all.extend_from_slice(&tokens);
                    shown.push_str(&text);
                    let finish = if asm.stops.stopped() {
                        Finish::Stop
                    } else {
                        finish
                    };
                    remember(&app, &s.req, &all, finish, &shown, true);
                }
                if let Some(b) = chunk(&text) {
                    if !send(&tx, b).await {
                        return;
                    }
                }
                let reason = response::finish_reason(
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
                s.end(&app, o.ending(), 0, 0);
                s.req.failed(&app);
                let _ = send(&tx, Failure::from(o).sse()).await;
                return;
            }
            None => {
                s.end(&app, Ending::ShuttingDown, 0, 0);
                let _ = send(&tx, Failure::from(Outcome::ShuttingDown).sse()).await;
                return;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn finish_stream(
    app: &App,
    s: &mut Started,
    tx: &mpsc::Sender<Bytes>,
    id: &str,
    created: u64,
    reason: &str,
    tokens: usize,
    fabric_us: u32,
) {
    let mut last = response::chunk_body(id, created, &s.req.model, "", Some(reason));
    if s.req.include_usage {
        last.usage = Some(response::Usage::new(s.req.prompt_tokens, tokens));
    }
    let ok = tx.send(sse(&last)).await.is_ok()
        && tx
            .send(Bytes::from_static(b"data: [DONE]\n\n"))
            .await
            .is_ok();
    // A client gone before [DONE] did not get its result.
    s.end(
        app,
        if ok { Ending::Ok } else { Ending::Cancelled },
        tokens,
        fabric_us,
    );
    if ok {
        app.typing.answered_by(Source::Fabric);
    }
}
