//! The accept loop: a permit of the connection cap each, and no more than
//! its share for one client address (a trusted proxy excepted); over
//! either, `overloaded`, unless the cap is full and an idle connection of
//! an address holding more makes room.

use std::collections::{BTreeSet, HashMap};
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
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::{serve_conn, Tenure};
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
                    tracker.spawn(serve_seated(
                        stream,
                        peer,
                        app.clone(),
                        shutdown.clone(),
                        seat,
                        permit,
                    ));
                    continue;
                }
                None => {
                    app.metrics.address_refused.fetch_add(1, Ordering::Relaxed);
                    "too many open connections from your address"
                }
            },
            Err(_) => {
                // Full: an idle connection of an address holding more than
                // this one makes room, if there is one. The connections
                // waiting for that room are as many as the idle ones told
                // to close, each about to give back its own.
                if !trusted && addresses.evict_for(peer.ip()) {
                    app.metrics
                        .connections_evicted
                        .fetch_add(1, Ordering::Relaxed);
                    tracker.spawn(seat_after_eviction(
                        stream,
                        peer,
                        app.clone(),
                        shutdown.clone(),
                        conns.clone(),
                        addresses.clone(),
                    ));
                    continue;
                }
                app.metrics
                    .connections_refused
                    .fetch_add(1, Ordering::Relaxed);
                FULL
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

/// Why a connection over the cap is refused.
const FULL: &str = "too many open connections";

/// How long a connection waits for the room an eviction makes.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Serves a connection once the room an eviction made is its, or refuses
/// it if that room does not come.
async fn seat_after_eviction(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    app: Arc<App>,
    shutdown: CancellationToken,
    conns: Arc<Semaphore>,
    addresses: Arc<Addresses>,
) {
    let seated = match tokio::time::timeout(EVICTION_WAIT, conns.acquire_owned()).await {
        Ok(Ok(permit)) => addresses.enter(peer.ip(), false).map(|seat| (seat, permit)),
        Ok(Err(_)) | Err(_) => None,
    };
    match seated {
        Some((seat, permit)) => serve_seated(stream, peer, app, shutdown, seat, permit).await,
        None => {
            app.metrics
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            refuse_conn(stream, &app, FULL, app.overloaded_to(peer.ip())).await;
        }
    }
}

/// Serves a connection that has its permit and its seat.
async fn serve_seated(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    app: Arc<App>,
    shutdown: CancellationToken,
    seat: Option<Seat>,
    permit: OwnedSemaphorePermit,
) {
    app.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
    app.stats.connections.opened();
    let tenure = seat.as_ref().map(|s| &*s.tenure);
    serve_conn(stream, peer, &app, &shutdown, tenure).await;
    app.stats.connections.closed();
    app.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
    drop(seat);
    drop(permit);
}

/// Connections held by each client address, each at most its share of the
/// cap; and, when the cap is full, which idle connection makes room.
///
/// A full cap would otherwise go to whoever came first: an address that
/// opened thousands of keep-alive connections and left them idle would
/// shut every later client out. As nginx does when it runs out of
/// connections, an idle keep-alive connection is closed to make room (it
/// holds no request; its client opens another when it needs one), and here
/// only one of the address that holds the most, and only for a connection
/// from an address holding fewer: the cap is shared out, not first come.
#[derive(Debug)]
struct Addresses {
    cap: usize,
    book: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    held: HashMap<IpAddr, Held, foldhash::fast::RandomState>,
    /// (connections, address), for the address that holds the most.
    by_count: BTreeSet<(usize, IpAddr)>,
    next_id: u64,
}

/// One address's connections.
#[derive(Debug, Default)]
struct Held {
    conns: HashMap<u64, Arc<Tenure>, foldhash::fast::RandomState>,
}

/// A connection's place in its address's count, given back when dropped.
struct Seat {
    book: Arc<Addresses>,
    ip: IpAddr,
    id: u64,
    tenure: Arc<Tenure>,
}

impl Addresses {
    fn new(cap: usize) -> Arc<Addresses> {
        Arc::new(Addresses {
            cap,
            book: Mutex::new(Book::default()),
        })
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A seat for a connection from `ip`, or `None` over its share; a
    /// trusted proxy's connection needs none (`Some(None)`).
    fn enter(self: &Arc<Self>, ip: IpAddr, trusted: bool) -> Option<Option<Seat>> {
        if trusted {
            return Some(None);
        }
        let mut book = self.book();
        let book = &mut *book;
        let held = book.held.entry(ip).or_default();
        let n = held.conns.len();
        if n >= self.cap {
            return None;
        }
        book.next_id += 1;
        let id = book.next_id;
        let tenure = Arc::new(Tenure::default());
        held.conns.insert(id, tenure.clone());
        book.by_count.remove(&(n, ip));
        book.by_count.insert((n + 1, ip));
        Some(Some(Seat {
            book: self.clone(),
            ip,
            id,
            tenure,
        }))
    }

    /// Tells an idle connection of the address holding the most to close,
    /// if that address holds more than one over what `ip` holds; true if
    /// one was told.
    fn evict_for(&self, ip: IpAddr) -> bool {
        let book = self.book();
        let mine = book.held.get(&ip).map_or(0, |h| h.conns.len());
        if mine >= self.cap {
            return false;
        }
        let Some(&(most, heavy)) = book.by_count.last() else {
            return false;
        };
        if most <= mine + 1 {
            return false;
        }
        let Some(held) = book.held.get(&heavy) else {
            return false;
        };
        held.conns.values().any(|t| t.evict())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut book = self.book.book();
        let book = &mut *book;
        let Some(held) = book.held.get_mut(&self.ip) else {
            return;
        };
        let n = held.conns.len();
        held.conns.remove(&self.id);
        book.by_count.remove(&(n, self.ip));
        if held.conns.is_empty() {
            book.held.remove(&self.ip);
        } else {
            book.by_count.insert((n - 1, self.ip));
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
