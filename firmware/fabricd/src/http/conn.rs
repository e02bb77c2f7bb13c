//! A connection's life: parked while it says nothing, each request's head
//! read by [`head`](super::head), each request served by a hyper
//! connection of its own that is dropped, buffers and all, once its
//! response is written.
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

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures_util::task::AtomicWaker;
use hyper::body::{Body as _, Incoming};
use hyper::header::CONNECTION;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::body::Body;
use super::early;
use super::head::{read_head, HeadError};
use super::reply::Failure;
use super::routes::route;
use super::server::Tenure;
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
            let spoke = park(&stream, wait, shutdown, tenure).await;
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

/// Waits until the client says something (true), or the wait runs out, it
/// closes, the daemon stops, or the connection is told to make room
/// (false).
async fn park(
    stream: &TcpStream,
    wait: Duration,
    shutdown: &CancellationToken,
    tenure: Option<&Tenure>,
) -> bool {
    // A byte to peek at (or EOF): `readable()` alone can wake spuriously.
    let mut probe = [0u8; 1];
    let evicted = async {
        match tenure {
            Some(t) => t.evicted().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        // A request that has come is served, whatever else is ready.
        biased;
        r = stream.peek(&mut probe) => matches!(r, Ok(n) if n > 0),
        () = tokio::time::sleep(wait) => false,
        () = shutdown.cancelled() => false,
        () = evicted => false,
    }
}

/// One request: its head, then hyper. The stream and what was read past
/// the response, if the connection goes on.
async fn turn(
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
            return early::serve(stream, buf, plan, peer, app, shutdown, ex).await;
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

/// A request's answer made before hyper (by [`early`]), for hyper to write.
#[derive(Debug)]
pub(super) struct Ready {
    pub(super) response: Response<Body>,
    /// The request's body was read whole: hyper reads it again from memory.
    pub(super) body_read: bool,
}

/// Serves the request at the start of `buf` (and any that hyper reads
/// behind it before the response is out) with a hyper connection of its
/// own. With `ready`, the request was answered already: hyper writes that
/// answer.
pub(super) async fn serve_one(
    stream: TcpStream,
    buf: BytesMut,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: &CancellationToken,
    ex: &Arc<Exchange>,
    ready: Option<Ready>,
) -> Option<(TcpStream, BytesMut)> {
    ex.reset();
    let replay = ready.is_some();
    *ex.ready.lock().unwrap_or_else(PoisonError::into_inner) = ready;
    let app2 = app.clone();
    let ex2 = ex.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        ex2.begin(&req);
        let app = app2.clone();
        let ex = ex2.clone();
        let ready = ex2.take_ready();
        async move {
            let mut r = match ready {
                Some(ready) => {
                    if ready.body_read {
                        // In memory: hyper's reading it is what lets the
                        // connection go on to the next request.
                        if super::completions::whole(req.into_body()).await.is_ok() {
                            ex.body_read();
                        }
                    }
                    ready.response
                }
                None => route(&app, peer, req, &ex).await,
            };
            if let Some(status) = app.overloaded_to(peer.ip()) {
                super::reply::overloaded_for_proxy(&mut r, status);
            }
            // Told when hyper is done with the response.
            r.body_mut().on_drop(ex);
            Ok::<_, Infallible>(r)
        }
    });
    // The head (and what came with it) in a block of its own size: the
    // reading buffer's room would otherwise stay with the request while it
    // waits its turn.
    let io = TokioIo::new(Prefixed {
        pre: bytes::Bytes::copy_from_slice(&buf),
        stream,
    });
    drop(buf);
    let mut conn = http1::Builder::new()
        .keep_alive(true)
        // The head is whole in memory already (and no larger than the
        // head limit); hyper's buffer only has to take it.
        .max_buf_size((app.heads.max_bytes * 2).max(16 << 10))
        .serve_connection(io, service);
    let mut stopping = pin!(shutdown.cancelled());
    let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
    let mut draining = false;
    let ended = std::future::poll_fn(|cx| {
        ex.waker.register(cx.waker());
        if grace.is_none() && stopping.as_mut().poll(cx).is_ready() {
            grace = Some(Box::pin(tokio::time::sleep(app.config.shutdown_grace())));
            // A hyper told to stop before it read the request never reads
            // it: a ready answer is written first, then hyper stops below.
            if !replay {
                draining = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
        }
        if let Some(g) = grace.as_mut() {
            if g.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        loop {
            if let Poll::Ready(r) = Pin::new(&mut conn).poll(cx) {
                return Poll::Ready(Some(r));
            }
            // The response is out (or going): let hyper finish it and stop,
            // rather than wait for the next request with its buffers.
            if !draining && ex.answered() {
                draining = true;
                Pin::new(&mut conn).graceful_shutdown();
                continue;
            }
            return Poll::Pending;
        }
    })
    .await;
    match ended {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            log::debug!("http: {peer}: {e}");
            return None;
        }
        None => {
            log::debug!("http: {peer}: shutdown's grace over");
            return None;
        }
    }
    if !ex.reusable() || shutdown.is_cancelled() {
        return None;
    }
    let parts = conn.into_parts();
    let Prefixed { pre, stream } = parts.io.into_inner();
    // hyper read `read_buf` after it had taken all of `pre` it took.
    let mut rest = BytesMut::with_capacity(parts.read_buf.len() + pre.len());
    rest.extend_from_slice(&parts.read_buf);
    rest.extend_from_slice(&pre);
    Some((stream, rest))
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

/// What a connection's current hyper knows of its requests, shared with
/// the service and the response bodies.
#[derive(Debug, Default)]
pub(super) struct Exchange {
    /// Requests hyper handed to the service.
    begun: AtomicU32,
    /// Responses hyper is done with.
    answered: AtomicU32,
    /// The last request's body was read to its end (or it had none): the
    /// next bytes on the connection are the next request.
    body_done: AtomicBool,
    /// The client asked for the connection to close after the response.
    closing: AtomicBool,
    /// The answer to the next request hyper reads, made before hyper.
    ready: Mutex<Option<Ready>>,
    waker: AtomicWaker,
}

impl Exchange {
    pub(super) fn reset(&self) {
        self.begun.store(0, Ordering::Relaxed);
        self.answered.store(0, Ordering::Relaxed);
        self.body_done.store(false, Ordering::Relaxed);
        self.closing.store(false, Ordering::Relaxed);
    }

    fn take_ready(&self) -> Option<Ready> {
        self.ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn begin(&self, req: &Request<Incoming>) {
        self.begun.fetch_add(1, Ordering::AcqRel);
        self.body_done
            .store(req.body().is_end_stream(), Ordering::Release);
        if wants_close(req) {
            self.closing.store(true, Ordering::Release);
        }
    }

    /// The request's body has been read to its end.
    pub(super) fn body_read(&self) {
        self.body_done.store(true, Ordering::Release);
    }

    /// The request's body has been read to its end (or it had none).
    pub(super) fn body_is_read(&self) -> bool {
        self.body_done.load(Ordering::Acquire)
    }

    fn answered(&self) -> bool {
        self.answered.load(Ordering::Acquire) > 0
    }

    /// Every response is out, the last body was read and the client did
    /// not ask to close: the connection can wait for its next request.
    fn reusable(&self) -> bool {
        let begun = self.begun.load(Ordering::Acquire);
        begun > 0
            && self.answered.load(Ordering::Acquire) == begun
            && self.body_done.load(Ordering::Acquire)
            && !self.closing.load(Ordering::Acquire)
    }
}

impl super::body::Dropped for Exchange {
    fn dropped(&self) {
        self.answered.fetch_add(1, Ordering::AcqRel);
        self.waker.wake();
    }
}

/// `Connection: close`, or HTTP/1.0 without `Connection: keep-alive`.
fn wants_close(req: &Request<Incoming>) -> bool {
    let has = |token: &str| {
        req.headers().get_all(CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has("close") || (req.version() == Version::HTTP_10 && !has("keep-alive"))
}

/// A stream with bytes already read from it in front. Its shutdown does
/// nothing: the connection outlives each hyper that serves it, and is
/// closed when dropped.
struct Prefixed {
    pre: bytes::Bytes,
    stream: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.pre.is_empty() {
            let n = self.pre.len().min(buf.remaining());
            buf.put_slice(&self.pre[..n]);
            self.pre.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
