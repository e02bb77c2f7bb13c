//! A connection's life: parked while it says nothing, each request's head
//! read by [`head`](super::head), each request handed to a hyper
//! connection of its own ([`handoff`](super::handoff)) that is dropped,
//! buffers and all, once its response is written, or answered before
//! hyper ([`early`](super::early)).
//!
//! hyper keeps a connection's read and write buffers (8 KiB and more) for
//! as long as the connection lives, so a keep-alive connection that made
//! one request and then fell silent (a browser tab) held about 13 KiB.
//! Here a connection between requests is a socket, a parked task and what
//! it says below: hyper's state exists only while a request is served.
//! What hyper read past the response (a pipelined request) is taken back
//! from it and read first next time.
//!
//! The rules: a connection that never speaks is closed after the idle
//! timeout; once it has been answered, the next request's head is due
//! within the header timeout of the answer (an idle keep-alive connection
//! is closed when that runs out), and a first head within the header
//! timeout of its first byte. On shutdown, a request being served has the
//! shutdown's grace to finish; a parked connection is closed at once.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::task::AtomicWaker;
use hyper::StatusCode;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::early;
use super::exchange::Exchange;
use super::handoff::serve_one;
use super::head::{read_head, HeadError, FIRST_READ};
use super::reply::Failure;
use super::App;
use crate::sched::Outcome;

/// Serves a connection until it closes, idles out, or the daemon stops.
pub(super) async fn serve_conn(
    stream: TcpStream,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: &CancellationToken,
    tenure: Option<&Tenure>,
) {
    let mut stream = stream;
    let mut pending = BytesMut::new();
    // Made at the first request, kept for the next ones.
    let mut exchange: Option<Arc<Exchange>> = None;
    let header_timeout = app.config.header_read_timeout();
    loop {
        let due = if pending.is_empty() {
            let (wait, first) = match exchange {
                None => (app.config.idle_timeout(), true),
                Some(_) => (header_timeout, false),
            };
            let idle_since = Instant::now();
            if let Some(t) = tenure {
                t.set_parked(true);
            }
            let spoke = park(&stream, &mut pending, idle_since + wait, shutdown, tenure).await;
            if let Some(t) = tenure {
                t.set_parked(false);
            }
            if !spoke {
                return;
            }
            // A first head is due a header timeout after its first byte; a
            // next one, after the answer before it.
            if first {
                Instant::now() + header_timeout
            } else {
                idle_since + header_timeout
            }
        } else {
            Instant::now() + header_timeout
        };
        let ex = exchange.get_or_insert_with(|| Arc::new(Exchange::default()));
        // Boxed: a parked connection's task is only as large as this loop,
        // not a head's buffer or hyper's state.
        match Box::pin(turn(stream, pending, due, peer, app, shutdown, ex)).await {
            Some((s, rest)) => {
                stream = s;
                pending = rest;
            }
            None => return,
        }
    }
}

/// Waits until the client says something (true: what it said is in
/// `pending`), or the wait runs out, it closes, the daemon stops, or the
/// connection is told to make room (false).
///
/// What arrives is read here, into a buffer made only once the socket is
/// readable: a peek to see that something came, then a read of it, took
/// two system calls a request where one does.
async fn park(
    stream: &TcpStream,
    pending: &mut BytesMut,
    until: Instant,
    shutdown: &CancellationToken,
    tenure: Option<&Tenure>,
) -> bool {
    let evicted = async {
        match tenure {
            Some(t) => t.evicted().await,
            None => std::future::pending().await,
        }
    };
    let spoke = async {
        loop {
            if stream.readable().await.is_err() {
                return false;
            }
            pending.reserve(FIRST_READ);
            let room = pending.capacity() - pending.len();
            let mut read = 0;
            // A read that leaves room took all there was: its readiness is
            // cleared as a read that would block clears it, so that hyper's
            // next read (it reads while the request is served, to see the
            // client leave) waits for the socket's next event instead of
            // costing a system call to learn nothing came. A later event
            // (more bytes, the client's FIN) sets it again, and a close
            // already seen is never cleared (tokio keeps the closed states).
            let took = stream.try_io(Interest::READABLE, || {
                read = stream.try_read_buf(pending)?;
                if read > 0 && read < room {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(read)
                }
            });
            match took {
                Ok(n) => return n > 0,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && read > 0 => return true,
                // Readiness can be stale: nothing came after all, and a
                // silent connection holds no buffer.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => *pending = BytesMut::new(),
                Err(_) => return false,
            }
        }
    };
    tokio::select! {
        // A request that has come is served, whatever else is ready.
        biased;
        spoke = spoke => spoke,
        // Until a time already read: `sleep(wait)` would read the clock
        // again, a system call on an A9.
        () = tokio::time::sleep_until(until) => false,
        () = shutdown.cancelled() => false,
        () = evicted => false,
    }
}

/// One request: its head, then hyper. The stream and what was read past
/// the response, if the connection goes on.
pub(super) async fn turn(
    stream: TcpStream,
    mut buf: BytesMut,
    due: Instant,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: &CancellationToken,
    ex: &Arc<Exchange>,
) -> Option<(TcpStream, BytesMut)> {
    let head = tokio::select! {
        r = read_head(&stream, &mut buf, &app.heads, due) => r,
        // A head still coming when the daemon stops is not waited for.
        () = shutdown.cancelled() => return None,
    };
    let refusal = match head {
        Ok(()) => None,
        Err(HeadError::Closed) => return None,
        Err(HeadError::Overdue) => {
            log::debug!("http: {peer}: header overdue");
            return None;
        }
        Err(HeadError::TooLarge) => Some(Failure::HeaderTooLarge {
            limit: app.heads.max_bytes,
        }),
        Err(HeadError::OverBudget) => {
            app.metrics
                .heads_refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(Failure::from(Outcome::Overloaded {
                retry_after: Duration::from_secs(1),
                reason: "too many connections are sending their request headers slowly".into(),
            }))
        }
    };
    if let Some(f) = refusal {
        // The head's buffer (up to the head limit) is not kept while the
        // refusal lingers: 2,000 heads too large held 32 MiB for it.
        drop(buf);
        refuse(stream, &f, app.overloaded_to(peer.ip())).await;
        return None;
    }
    // Up to `hyper_waiting_max` requests at once are served inside hyper
    // (its buffers for a few cost nothing); past that, a completion waits
    // outside it. The seat is taken here, before hyper, so that a burst
    // of arrivals cannot all find it free.
    let seat = InHyper::take(app);
    if seat.is_none() {
        if let Some(plan) = early::plan(&buf, app.config.body_limit) {
            // Boxed: its future is twice `serve_one`'s, and `turn`'s own is
            // moved into a box every request, so unboxed every request
            // would copy it for a path taken only under load.
            return Box::pin(early::serve(stream, buf, plan, peer, app, shutdown, ex)).await;
        }
    }
    let served = serve_one(stream, buf, peer, app, shutdown, ex, None).await;
    drop(seat);
    served
}

/// Writes a refusal that hyper never saw and closes, reading (and
/// dropping) what the client still sends for a moment, so that the close
/// does not reset the connection before the client has read the answer.
pub(super) async fn refuse(mut stream: TcpStream, f: &Failure, to_proxy: Option<StatusCode>) {
    let wire = f.wire(to_proxy);
    let linger = async {
        stream.write_all(&wire).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 512];
        loop {
            stream.readable().await?;
            match stream.try_read(&mut sink) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    };
    let _: Result<io::Result<()>, _> = tokio::time::timeout(Duration::from_secs(2), linger).await;
}

/// One of the `hyper_waiting_max` seats for a request served inside hyper,
/// given back when dropped (a future dropped unfinished too).
struct InHyper<'a>(&'a AtomicUsize);

impl<'a> InHyper<'a> {
    fn take(app: &'a App) -> Option<InHyper<'a>> {
        let n = app.hyper_waiting.fetch_add(1, Ordering::AcqRel);
        let seat = InHyper(&app.hyper_waiting);
        (n < app.config.hyper_waiting_max).then_some(seat)
    }
}

impl Drop for InHyper<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether a connection is idle between requests, and its word to close.
#[derive(Debug, Default)]
pub(super) struct Tenure {
    parked: AtomicBool,
    evicted: AtomicBool,
    waker: AtomicWaker,
}

impl Tenure {
    /// The connection waits for its next request (true) or not.
    pub(super) fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Release);
    }

    /// Told to close, if idle and not told already; true if told now.
    pub(super) fn evict(&self) -> bool {
        if !self.parked.load(Ordering::Acquire) {
            return false;
        }
        if self.evicted.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.waker.wake();
        true
    }

    /// Ready once the connection is told to close.
    pub(super) async fn evicted(&self) {
        std::future::poll_fn(|cx| {
            self.waker.register(cx.waker());
            if self.evicted.load(Ordering::Acquire) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }
}
