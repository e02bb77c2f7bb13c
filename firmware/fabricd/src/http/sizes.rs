//! The request path's futures stay small.
//!
//! A future is moved whole: into its box, into hyper's slot for the
//! service's, out of a `match`. Every byte of it is copied on every
//! request, and a box larger than glibc's per-thread cache takes (1,032
//! bytes) takes `malloc`'s slow path. Nothing warns when one grows: a
//! variable held across an await, or a rare branch's future awaited in
//! place, adds its size to every request's. The route's future had grown
//! back from the 1.7 KB docs/design.md records to 2.9 KB, and a completion's
//! admission from 720 bytes to 2.4 KB, before results/arm-cost-2026-12-07.md
//! found them in a keystroke's copies.
//!
//! Each size is read from the future's type, through a function that is
//! never called: no daemon is needed.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use hyper::body::Incoming;
use hyper::Request;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::completions::start_completion;
use super::conn::turn;
use super::exchange::Exchange;
use super::ledger::Ledger;
use super::routes::route;
use super::validate::Head;
use super::App;
use crate::sched::{Admission, Handle};

/// glibc's per-thread cache serves requests up to this size
/// (`tcache_max_bytes` on a 64-bit build; less on 32 bits, where every
/// future here is smaller too).
const TCACHE_MAX: usize = 1032;

/// The size of the future `f` would return, without calling it.
fn output_size<A, F: FnOnce(A) -> Fut, Fut: Future>(_: &F) -> usize {
    std::mem::size_of::<Fut>()
}

#[test]
fn the_request_paths_futures_stay_small() {
    // Boxed once a request: within the per-thread cache.
    let start = |(app, body, head, ledger, ex): (
        &'static Arc<App>,
        Incoming,
        Head,
        &'static mut Ledger,
        &'static Exchange,
    )| start_completion(app, body, head, ledger, ex);
    let start = output_size(&start);
    assert!(
        start <= TCACHE_MAX,
        "start_completion's future is {start} bytes"
    );

    // Awaited in place inside `start_completion`: the admission once, not
    // the channel's wait (boxed, on a full channel only) beside it.
    let admit = |(handle, adm): (&'static Handle, Admission)| handle.admit(adm);
    let admit = output_size(&admit);
    let admission = std::mem::size_of::<Admission>();
    assert!(
        admit <= admission + 64,
        "Handle::admit's future is {admit} bytes for an admission of {admission}"
    );

    // Moved into hyper's slot for the service's future, twice a request.
    let route = |(app, peer, req, ex): (
        &'static Arc<App>,
        SocketAddr,
        Request<Incoming>,
        &'static Exchange,
    )| route(app, peer, req, ex);
    let route = output_size(&route);
    assert!(route <= 2048, "route's future is {route} bytes");

    // Boxed once a request, holding the path to hyper's (the early path,
    // taken only under load, is boxed apart).
    #[allow(clippy::type_complexity)]
    let turn = |(stream, buf, due, peer, app, shutdown, ex): (
        TcpStream,
        BytesMut,
        Instant,
        SocketAddr,
        &'static Arc<App>,
        &'static CancellationToken,
        &'static Arc<Exchange>,
    )| turn(stream, buf, due, peer, app, shutdown, ex);
    let turn = output_size(&turn);
    assert!(turn <= 2048, "turn's future is {turn} bytes");
}
