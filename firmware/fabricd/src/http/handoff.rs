//! A request handed to hyper: served by a hyper connection of its own
//! that is dropped, buffers and all, once its response is written. What
//! hyper read past the response (a pipelined request) is taken back from
//! it for the connection to read first next time.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::completions::whole;
use super::exchange::{Exchange, Ready};
use super::reply::overloaded_for_proxy;
use super::routes::route;
use super::App;

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
    ex.set_ready(ready);
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
                        if whole(req.into_body()).await.is_ok() {
                            ex.body_read();
                        }
                    }
                    ready.response
                }
                None => route(&app, peer, req, &ex).await,
            };
            if let Some(status) = app.overloaded_to(peer.ip()) {
                overloaded_for_proxy(&mut r, status);
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
        ex.register(cx.waker());
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
