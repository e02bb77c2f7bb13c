//! The accept loop and connections: a permit each, parked until they speak, guarded against slow headers and idle keep-alive.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::reply::Failure;
use super::routes::route;
use super::{guard, App};
use crate::sched::Outcome;

/// Connections over the cap that are still answered (with `overloaded`).
pub(super) const REFUSAL_BUDGET: usize = 256;

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
        let mut r = Failure::from(Outcome::Overloaded {
            retry_after: retry,
            reason: "too many open connections".into(),
        })
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
