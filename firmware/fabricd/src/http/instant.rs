//! The typing features at the edge: answers that need no fabric time for
//! this request (the cache, typed forward, a joined request's rest), and
//! what an answer leaves behind for them (a cache entry, the session's
//! last answer).
//!
//! Every successful completion says what answered it in
//! [`SOURCE_HEADER`](crate::typing::SOURCE_HEADER): `fabric`, `cache`,
//! `typed-forward` or `joined`.

use std::sync::Arc;

use bytes::Bytes;
use fabric_hw::contract::Finish;
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::body::{full, json_bytes, Body};
use super::ledger::{Ledger, Prepared, Started, Ticket};
use super::response::{self, sse, unix_at};
use super::text::{Assembler, StopMatcher};
use super::App;
use crate::sched::{self, Admission, Ending, Outcome, ReqId, SessionKey};
use crate::typing::cache::Cached;
use crate::typing::sessions::{Lookup, PromptMark, Sessions, Shown};
use crate::typing::{Source, SOURCE_HEADER};

/// A completion answered at the edge, ready to send.
pub(super) struct Instant {
    source: Source,
    id: ReqId,
    model: Arc<str>,
    text: String,
    completion_tokens: usize,
    finish: &'static str,
    stream: bool,
    include_usage: bool,
    prompt_tokens: usize,
}

/// What the typing features make of a request before its admission.
pub(super) enum Looked {
    /// Answered.
    Answered(Box<Instant>),
    /// To be sent to join its session's request `target`, which works on
    /// `base`; `typed` is the rest of its own prompt.
    Join {
        target: ReqId,
        base: PromptMark,
        typed: String,
    },
    /// To be admitted as usual; its ticket is in `prepared`.
    Admit,
}

/// The cache, then typed forward, for `prepared` (whose `prompt` it is).
pub(super) fn lookup(
    app: &App,
    prepared: &mut Prepared,
    ticket: Ticket,
    prompt: &str,
) -> Result<Looked, Outcome> {
    let settings = &app.typing.settings;
    if let Some(key) = &ticket.cache_key {
        let hit = app.typing.cache().get(key, ticket.epoch);
        if let Some(hit) = hit {
            let answer = from_cache(app, prepared, &ticket, &hit);
            return Ok(Looked::Answered(Box::new(answer)));
        }
    }
    let mut looked = Looked::Admit;
    if let (true, Some(key)) = (settings.typed_forward, &ticket.session) {
        // Only a whole answer without stop sequences joins: a stream would
        // have to replay what the joined request streamed before, and stop
        // sequences are watched for as tokens come, which a joined answer
        // does not hear.
        let joinable = settings.supersede && !prepared.stream && prepared.stop.is_empty();
        let found = app.typing.sessions().lookup(
            key,
            prompt,
            &ticket.compat,
            joinable,
            ticket.epoch,
            settings.typed_forward_min_tokens,
            prepared.max_tokens,
        );
        match found {
            Lookup::Forward(rest) => {
                let answer = answer_with(app, prepared, &ticket, rest, Source::TypedForward);
                return Ok(Looked::Answered(Box::new(answer)));
            }
            Lookup::Join {
                target,
                base,
                typed,
            } => {
                looked = Looked::Join {
                    target,
                    base,
                    typed,
                }
            }
            Lookup::None => {}
        }
    }
    prepared.ticket = Some(Box::new(ticket));
    Ok(looked)
}

/// The cached tokens, through this request's stop sequences.
fn from_cache(app: &App, p: &Prepared, ticket: &Ticket, hit: &Cached) -> Instant {
    let mut asm = Assembler::new(p.tokenizer.clone(), p.stop.clone());
    let mut text = String::new();
    asm.push(&hit.tokens, &mut text);
    asm.finish(&mut text);
    let stopped = asm.stops.stopped();
    let length = hit.finish == Finish::Length && !stopped;
    let mut shown = Shown::of_tokens(&p.tokenizer, &hit.tokens, length);
    shown.clip(text.len());
    remember_at_edge(app, p.id, ticket, shown);
    Instant {
        source: Source::Cache,
        id: p.id,
        model: p.model.clone(),
        text,
        completion_tokens: asm.tokens,
        finish: response::finish_reason(!length, length),
        stream: p.stream,
        include_usage: p.include_usage,
        prompt_tokens: p.prompt_tokens,
    }
}

/// `rest` of an earlier answer, through this request's stop sequences.
fn answer_with(app: &App, p: &Prepared, ticket: &Ticket, rest: Shown, source: Source) -> Instant {
    let (shown, finish) = through_stops(&p.stop, rest);
    let text = shown.text.clone();
    let completion_tokens = shown.cuts.len();
    remember_at_edge(app, p.id, ticket, shown);
    Instant {
        source,
        id: p.id,
        model: p.model.clone(),
        text,
        completion_tokens,
        finish,
        stream: p.stream,
        include_usage: p.include_usage,
        prompt_tokens: p.prompt_tokens,
    }
}

/// `shown` cut at the first of `stops`, and its finish reason.
fn through_stops(stops: &[String], mut shown: Shown) -> (Shown, &'static str) {
    let mut m = StopMatcher::new(stops.to_vec());
    let mut out = String::with_capacity(shown.text.len());
    m.push(&shown.text, &mut out);
    if m.stopped() {
        shown.clip(out.len());
    }
    let finish = response::finish_reason(m.stopped(), shown.length);
    (shown, finish)
}

/// Request `id` was answered `shown` at the edge: the session's last
/// answer now, and its older request (if one is still out) is stale.
fn remember_at_edge(app: &App, id: ReqId, ticket: &Ticket, shown: Shown) {
    let Some(key) = &ticket.session else {
        return;
    };
    let pending = {
        let mut sessions = app.typing.sessions();
        let pending = sessions.pending(key);
        last_answer(&mut sessions, key, id, ticket, shown, true);
        pending
    };
    if pending.is_some() && app.typing.settings.supersede {
        app.sched.supersede(key.clone(), id);
    }
}

/// Request `id` of `key` was answered `shown` (`at_edge`: without the
/// fabric): the session's last answer, unless a newer request came.
fn last_answer(
    sessions: &mut Sessions,
    key: &SessionKey,
    id: ReqId,
    ticket: &Ticket,
    shown: Shown,
    at_edge: bool,
) {
    sessions.answered(
        key.clone(),
        id,
        ticket.prompt,
        shown,
        ticket.compat.clone(),
        ticket.epoch,
        at_edge,
    );
}

/// What a request answered by the fabric leaves for the next ones: the
/// cache entry (only if the fabric ran it to its end, `whole`) and the
/// session's last answer (`text`, as shown; `all` holds every token).
pub(super) fn remember(
    app: &App,
    p: &Prepared,
    all: &[u32],
    finish: Finish,
    text: &str,
    whole: bool,
) {
    let Some(ticket) = &p.ticket else {
        return;
    };
    if let (true, Some(key)) = (whole, &ticket.cache_key) {
        let value = Cached {
            tokens: all.into(),
            finish,
        };
        app.typing.cache().insert(key.clone(), value, ticket.epoch);
    }
    if let Some(key) = &ticket.session {
        let mut shown = Shown::of_tokens(&p.tokenizer, all, finish == Finish::Length);
        shown.clip(text.len());
        last_answer(&mut app.typing.sessions(), key, p.id, ticket, shown, false);
    }
}

/// A joined request's answer: the joined request's output `all` (for its
/// own prompt), less what this one typed on. `None` if it does not begin
/// with that, or too little is left: the request must run on its own.
pub(super) fn joined_answer(
    app: &App,
    p: &Prepared,
    all: &[u32],
    finish: Finish,
) -> Option<(String, usize, &'static str)> {
    let ticket = p.ticket.as_ref()?;
    let joining = ticket.join.as_ref()?;
    let whole = Shown::of_tokens(&p.tokenizer, all, finish == Finish::Length);
    let rest = whole.rest(
        &joining.typed,
        app.typing.settings.typed_forward_min_tokens,
        p.max_tokens,
    )?;
    let (shown, reason) = through_stops(&p.stop, rest);
    let text = shown.text.clone();
    let tokens = shown.cuts.len();
    if let Some(key) = &ticket.session {
        last_answer(&mut app.typing.sessions(), key, p.id, ticket, shown, false);
    }
    Some((text, tokens, reason))
}

/// A joined request whose answer did not fit runs on its own, at the head
/// of its client's line (it has had its turn): a new admission, whose
/// events `s` now hears. `Err` if it cannot be queued.
pub(super) async fn run_alone(app: &Arc<App>, s: &mut Started) -> Result<(), Outcome> {
    app.typing.join_missed();
    let Some(mut retry) = s
        .req
        .ticket
        .as_mut()
        .and_then(|t| t.join.take())
        .map(|j| j.retry)
    else {
        return Err(Outcome::FabricError {
            message: "a joined request lost its own".into(),
        });
    };
    let Ok(permit) = app.permits.clone().try_acquire_owned() else {
        return Err(Outcome::Overloaded {
            retry_after: app.sched.published().retry_after(app.nominal_rate),
            reason: format!("the queue is full ({} requests)", app.config.queue_capacity),
        });
    };
    // It keeps its id, its place in its session's order: if a newer
    // request of the session came while it was joined, the retry is the
    // stale one (the session table keeps the newest pending request).
    let id = s.req.id;
    if let Some(key) = s.req.ticket.as_ref().and_then(|t| t.session.as_ref()) {
        if app.typing.settings.supersede
            && app.typing.sessions().pending(key).is_some_and(|p| p > id)
        {
            return Err(Outcome::Superseded);
        }
    }
    retry.join = None;
    retry.front = true;
    let (tx, events) = sched::events(retry.params.stream);
    if let Some(ticket) = &s.req.ticket {
        if let Some(key) = &ticket.session {
            app.typing.sessions().admitted(
                key.clone(),
                id,
                ticket.prompt,
                !retry.params.stream,
                ticket.compat.clone(),
            );
        }
    }
    let adm = Admission {
        id,
        request: retry,
        events: tx,
        permit: Some(permit),
    };
    if app.sched.admit(adm).await.is_err() {
        return Err(Outcome::ShuttingDown);
    }
    s.req.events = events;
    Ok(())
}

/// Sends a completion answered at the edge, counted as the request's end.
pub(super) fn instant_response(app: &App, ledger: &Ledger, a: Instant) -> Response<Body> {
    app.ended(ledger, Ending::Ok, a.completion_tokens as u64, 0);
    app.typing.answered_by(a.source);
    let id = response::CompletionId::new(a.id);
    let created = unix_at(ledger.received);
    let usage = response::Usage::new(a.prompt_tokens, a.completion_tokens);
    let mut r = if a.stream {
        // One chunk with the text, the last with the reason, and [DONE].
        let mut out = Vec::with_capacity(512 + a.text.len());
        if !a.text.is_empty() {
            let chunk = response::chunk_body(id.as_str(), created, &a.model, &a.text, None);
            out.extend_from_slice(&sse(&chunk));
        }
        let mut last = response::chunk_body(id.as_str(), created, &a.model, "", Some(a.finish));
        if a.include_usage {
            last.usage = Some(usage);
        }
        out.extend_from_slice(&sse(&last));
        out.extend_from_slice(b"data: [DONE]\n\n");
        let mut r = Response::new(full(Bytes::from(out)));
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        r
    } else {
        let body = response::completion_body(
            id.as_str(),
            created,
            &a.model,
            &a.text,
            a.finish,
            usage,
            response::FabricInfo {
                slot: None,
                queue_ms: 0.0,
                fabric_us: 0,
            },
        );
        let mut bytes = Vec::with_capacity(384 + a.text.len());
        body.write_json(&mut bytes);
        bytes.push(b'\n');
        json_bytes(StatusCode::OK, bytes)
    };
    set_source(&mut r, a.source);
    r
}

/// The header named once: inserted by `&str`, its name was parsed and
/// copied into an allocation of its own for every response.
static SOURCE: HeaderName = HeaderName::from_static(SOURCE_HEADER);

/// Marks a successful completion with what answered it.
pub(super) fn set_source(r: &mut Response<Body>, source: Source) {
    r.headers_mut()
        .insert(&SOURCE, HeaderValue::from_static(source.label()));
}
