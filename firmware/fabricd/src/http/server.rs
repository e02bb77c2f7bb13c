//! The accept loop: a permit of the connection cap each, and no more than
//! its share for one client address (a trusted proxy excepted); over
//! either, `overloaded`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::serve_conn;
use super::reply::Failure;
use super::App;
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
    let conns = Arc::new(Semaphore::new(app.config.max_connections()));
    let refusals = Arc::new(Semaphore::new(REFUSAL_BUDGET));
    let addresses = Addresses::new(app.config.per_address_cap());
    log::info!(
        "http: at most {} connections, {} from one address",
        app.config.max_connections(),
        app.config.per_address_cap()
    );
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
        // A load balancer speaks for many clients: it is held to the cap,
        // not to one address's share.
        let trusted = app.config.is_trusted_proxy(peer.ip());
        let refused = match conns.clone().try_acquire_owned() {
            Ok(permit) => match addresses.enter(peer.ip(), trusted) {
                Some(seat) => {
                    let app = app.clone();
                    let shutdown = shutdown.clone();
                    tracker.spawn(async move {
                        app.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
                        app.stats.connections.opened();
                        serve_conn(stream, peer, &app, &shutdown).await;
                        app.stats.connections.closed();
                        app.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                        drop(seat);
                        drop(permit);
                    });
                    continue;
                }
                None => {
                    app.metrics.address_refused.fetch_add(1, Ordering::Relaxed);
                    "too many open connections from your address"
                }
            },
            Err(_) => {
                app.metrics
                    .connections_refused
                    .fetch_add(1, Ordering::Relaxed);
                "too many open connections"
            }
        };
        if let Ok(permit) = refusals.clone().try_acquire_owned() {
            let app = app.clone();
            tracker.spawn(async move {
                refuse_conn(stream, &app, refused, app.overloaded_to(peer.ip())).await;
                drop(permit);
            });
        }
    }
}

/// Connections held by each client address, each at most its share of the
/// cap.
#[derive(Debug)]
struct Addresses {
    cap: usize,
    held: Mutex<HashMap<IpAddr, usize, foldhash::fast::RandomState>>,
}

/// A connection's place in its address's count, given back when dropped.
struct Seat {
    book: Arc<Addresses>,
    ip: IpAddr,
}

impl Addresses {
    fn new(cap: usize) -> Arc<Addresses> {
        Arc::new(Addresses {
            cap,
            held: Mutex::new(HashMap::default()),
        })
    }

    /// A seat for a connection from `ip`, or `None` over its share; a
    /// trusted proxy's connection needs none (`Some(None)`).
    fn enter(self: &Arc<Self>, ip: IpAddr, trusted: bool) -> Option<Option<Seat>> {
        if trusted {
            return Some(None);
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let n = held.entry(ip).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Some(Seat {
            book: self.clone(),
            ip,
        }))
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut held = self
            .book
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// Over a cap: read the request, answer `overloaded` for `reason`, close.
async fn refuse_conn(
    stream: TcpStream,
    app: &Arc<App>,
    reason: &'static str,
    to_proxy: Option<StatusCode>,
) {
    let retry = app.sched.published().retry_after(app.nominal_rate);
    let service = service_fn(move |_req: Request<Incoming>| async move {
        let mut r = Failure::from(Outcome::Overloaded {
            retry_after: retry,
            reason: reason.into(),
        })
        .response();
        r.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        if let Some(status) = to_proxy {
            super::reply::overloaded_for_proxy(&mut r, status);
        }
        Ok::<_, std::convert::Infallible>(r)
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(2))
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
}
