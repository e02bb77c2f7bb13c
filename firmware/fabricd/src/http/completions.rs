//! A completion request from its head to its admission: checked, read, validated, admitted; cancelled when its client goes away.

use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, Response};

use super::answer::{stream_response, whole_response};
use super::body::Body;
use super::conn::Exchange;
use super::instant::{instant_response, Instant as Answered};
use super::reply::Failure;
use super::validate::{client_ip, validate, Edge, Prepared};
use super::App;
use crate::sched::{Ending, Outcome, ReqEvent, ReqId};

/// What is recorded about a request when it ends (exactly once).
#[derive(Debug, Clone)]
pub(super) struct Ledger {
    pub(super) model: Option<Arc<str>>,
    pub(super) ip: IpAddr,
    pub(super) received: Instant,
    pub(super) tokens_in: u64,
}

impl App {
    /// Counts a request refused before it was admitted, and answers it.
    pub(super) fn refused(&self, l: &Ledger, failure: Failure) -> Response<Body> {
        self.ended(l, failure.ending(), 0, 0);
        failure.response()
    }

    /// Counts a request's end in the metrics and the stats.
    pub(super) fn ended(&self, l: &Ledger, ending: Ending, tokens_out: u64, fabric_us: u32) {
        let now = Instant::now();
        self.metrics.outcome(ending);
        if ending == Ending::Ok {
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
            outcome: ending,
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
pub(super) struct CancelGuard {
    pub(super) id: ReqId,
    pub(super) app: Arc<App>,
    pub(super) ledger: Ledger,
    pub(super) armed: bool,
}

impl CancelGuard {
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            self.app.sched.cancel(self.id);
            self.app.ended(&self.ledger, Ending::Cancelled, 0, 0);
        }
    }
}

pub(super) async fn read_body<B: RequestBody>(
    app: &App,
    body: B,
    received: Instant,
) -> Result<Bytes, Failure> {
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
        }
        .into()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(Failure::BodyTooLarge { limit })
        }
        Ok(Err(e)) => Err(Outcome::Invalid {
            param: None,
            code: "body_error",
            message: format!("reading the request body: {e}"),
        }
        .into()),
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

/// A body's bytes. Usually one frame, taken as it is (`collect` would
/// first put even that one in a list); more are joined.
pub(super) async fn whole<B>(body: B) -> Result<Bytes, B::Error>
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

/// A request's body as hyper gives it, or as [`early`](super::early)
/// reads it before hyper.
pub(super) trait RequestBody:
    hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
{
}

impl<B> RequestBody for B where
    B: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
{
}

pub(super) async fn completions<B: RequestBody>(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<B>,
    ex: &Exchange,
) -> Response<Body> {
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
    // the end of the match, across the await, so the unboxed future would
    // sit inside this one, which hyper moves into place for every request
    // (docs/design.md's design notes have the sizes).
    let admission = match check_head(app, req.headers()) {
        // Only the body goes on: the request's head is freed now, and the
        // futures below do not carry it (small enough that the box comes
        // from malloc's per-thread cache).
        Ok(head) => Box::pin(start_completion(
            app,
            req.into_body(),
            head,
            &mut ledger,
            ex,
        )),
        Err(outcome) => return app.refused(&ledger, outcome),
    };
    let started = match admission.await {
        Ok(Began::Queued(started)) => started,
        Ok(Began::Answered(answer)) => return instant_response(app, &ledger, *answer),
        Err(outcome) => return app.refused(&ledger, outcome),
    };
    if started.req.stream {
        stream_response(app, started)
    } else {
        whole_response(app, started).await
    }
}

/// How a request's admission went, short of a refusal.
pub(super) enum Began {
    /// Queued: the scheduler answers it.
    Queued(Started),
    /// Answered at the edge already (cache, typed forward).
    Answered(Box<Answered>),
}

/// What a completion's head says besides its body: the deadline header
/// and the session header.
#[derive(Debug, Default)]
pub(super) struct Head {
    pub(super) deadline_ms: Option<u64>,
    pub(super) session: Option<String>,
    pub(super) session_seq: Option<u64>,
}

/// An admitted request, whose client going away cancels it.
pub(super) struct Started {
    pub(super) req: Prepared,
    pub(super) guard: CancelGuard,
}

impl Started {
    /// Ends the request (once): disarms the cancel and records it.
    pub(super) fn end(&mut self, app: &App, ending: Ending, tokens_out: usize, fabric_us: u32) {
        if self.guard.armed {
            self.guard.disarm();
            app.ended(&self.guard.ledger, ending, tokens_out as u64, fabric_us);
        }
    }
}

/// Checks a completion's head: the daemon is not shutting down, the body
/// is JSON, the deadline header is a number, the session header a session
/// id and the sequence header a sequence number (all returned).
pub(super) fn check_head(app: &App, headers: &hyper::HeaderMap) -> Result<Head, Failure> {
    if app.shutting_down.load(Ordering::Relaxed) {
        return Err(Outcome::ShuttingDown.into());
    }
    // Refused before the body is asked for, so before hyper sends `100
    // Continue` to a client that waits for it.
    if let Some(len) = headers.get(CONTENT_LENGTH) {
        let len = len.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok());
        let limit = app.config.body_limit;
        if len.is_some_and(|len| len > limit as u64) {
            return Err(Failure::BodyTooLarge { limit });
        }
    }
    if let Some(ct) = headers.get(CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("");
        let essence = ct.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(Failure::UnsupportedMediaType {
                found: ct.to_owned(),
            });
        }
    }
    let deadline_ms = headers
        .get("x-deadline-ms")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .ok_or_else(|| {
                    Failure::from(Outcome::invalid(
                        "x-deadline-ms",
                        "the X-Deadline-Ms header must be a positive integer",
                    ))
                })
        })
        .transpose()?;
    let session = match headers.get("x-session-id") {
        None => None,
        Some(v) => {
            let id = v.to_str().map_err(|_| {
                Outcome::invalid(
                    "session",
                    "the X-Session-Id header must be visible ASCII (a session id of 1 to 128 bytes)",
                )
            })?;
            super::request::check_session(Some(id))?;
            Some(id.to_owned())
        }
    };
    let session_seq = headers
        .get("x-session-seq")
        .map(|v| {
            let seq = v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Outcome::invalid(
                        "session_seq",
                        "the X-Session-Seq header must be a non-negative integer",
                    )
                })?;
            super::request::check_session_seq(Some(seq))?;
            Ok::<_, Failure>(seq)
        })
        .transpose()?;
    Ok(Head {
        deadline_ms,
        session,
        session_seq,
    })
}

/// Reads, checks and admits a request: queued, answered at the edge, or a
/// typed refusal.
pub(super) async fn start_completion<B: RequestBody>(
    app: &Arc<App>,
    body: B,
    head: Head,
    ledger: &mut Ledger,
    ex: &Exchange,
) -> Result<Began, Failure> {
    // A block of its own: the body and what borrows it are gone before the
    // admission waits (a local keeps its room in the future's state to the
    // end of its scope, moved out or not).
    let (sent, ready) = {
        let bytes = read_body(app, body, ledger.received).await?;
        ex.body_read();
        match validate(app, &bytes, &head, ledger)? {
            Edge::Admit(adm, ready) => (app.sched.admit(adm), ready),
            Edge::Answered(answer) => return Ok(Began::Answered(answer)),
        }
    };
    queued(app, sent, ready, ledger).await.map(Began::Queued)
}

/// Waits for an admission to be taken, and for a stream, for the
/// scheduler's first word.
pub(super) async fn queued(
    app: &Arc<App>,
    sent: impl std::future::Future<Output = Result<(), crate::sched::Admission>>,
    mut ready: Prepared,
    ledger: &Ledger,
) -> Result<Started, Failure> {
    if sent.await.is_err() {
        return Err(Outcome::ShuttingDown.into());
    }
    // Admitted: from here a client that goes away cancels the request,
    // also while a stream waits for the scheduler's first word (a client
    // that left then would otherwise leave its request to run to the end).
    let mut guard = CancelGuard {
        id: ready.id,
        app: app.clone(),
        ledger: ledger.clone(),
        armed: true,
    };
    // A stream waits for the scheduler's first word (queued, or a typed
    // refusal) before its 200 goes out. A whole response hears a refusal
    // as its one and only event, and answers it the same way. A refusal
    // is counted by whoever answers it, not as a cancel.
    if ready.stream {
        match ready.events.recv().await {
            Some(ReqEvent::Queued) => {}
            Some(ReqEvent::Failed(o)) => {
                guard.disarm();
                ready.failed(app);
                return Err(o.into());
            }
            _ => {
                guard.disarm();
                return Err(Outcome::ShuttingDown.into());
            }
        }
    }
    Ok(Started { req: ready, guard })
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
}
