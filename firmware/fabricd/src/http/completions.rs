//! A completion request from its head to its admission: checked, read, validated, admitted; cancelled when its client goes away.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::{Request, Response};

use super::answer::{stream_response, whole_response};
use super::body::Body;
use super::exchange::Exchange;
use super::instant::{instant_response, Instant as Answered};
use super::ledger::{CancelGuard, Ledger, Prepared, Started};
use super::reply::Failure;
use super::validate::{check_head, client_ip, validate, Edge, Head};
use super::App;
use crate::sched::{Outcome, ReqEvent};

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
    let (adm, ready) = {
        let bytes = read_body(app, body, ledger.received).await?;
        ex.body_read();
        match validate(app, &bytes, &head, ledger)? {
            Edge::Admit(adm, ready) => (adm, ready),
            Edge::Answered(answer) => return Ok(Began::Answered(answer)),
        }
    };
    if app.sched.admit(adm).await.is_err() {
        return Err(Outcome::ShuttingDown.into());
    }
    queued(app, ready, ledger).await.map(Began::Queued)
}

/// A request whose admission the scheduler has taken: for a stream, waits
/// for the scheduler's first word.
async fn queued(app: &Arc<App>, mut ready: Prepared, ledger: &Ledger) -> Result<Started, Failure> {
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
