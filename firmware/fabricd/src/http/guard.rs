//! A connection's guard: slow headers (slowloris), idle keep-alive, and
//! shutdown.
//!
//! hyper has a header read timeout of its own, but it arms a timer for
//! every request (an allocation, a timer-wheel insert and removal, and one
//! more turn of its poll loop), a measurable share of a request's CPU
//! (README, design notes). Here a request costs two atomic operations and
//! a clock read. The
//! connection tells its [`Watch`] when a request's header is in and when
//! hyper is done with the response; a guard task of its own sleeps until
//! the earliest moment the connection could have waited too long for a
//! header, and looks again then. The connection's task only reads a flag
//! when it runs, where a `select!` over a timer and the shutdown token
//! would poll both on every wake-up.
//!
//! The rule is hyper's: from the moment nothing is being answered (the
//! connection was handed over, or the last response was written), the next
//! request's header must be complete within the timeout; an idle keep-alive
//! connection is closed when it runs out.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::task::AtomicWaker;
// tokio's clock, so tests can run it paused; outside tests it is std's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

const GO: u8 = 0;
const DRAIN: u8 = 1;
const STOP: u8 = 2;

/// What a connection and its guard share.
#[derive(Debug)]
pub struct Watch {
    base: Instant,
    timeout: Duration,
    /// Requests whose header is in and whose response hyper still holds.
    busy: AtomicU32,
    /// When nothing was last being answered, in ns after `base`.
    idle_since_ns: AtomicU64,
    /// The guard's word: `GO`, `DRAIN` (shut down gracefully) or `STOP`.
    signal: AtomicU8,
    waker: AtomicWaker,
}

impl Watch {
    /// A connection whose first header is due within `timeout` from now.
    pub fn new(timeout: Duration) -> Arc<Watch> {
        Arc::new(Watch {
            base: Instant::now(),
            timeout,
            busy: AtomicU32::new(0),
            idle_since_ns: AtomicU64::new(0),
            signal: AtomicU8::new(GO),
            waker: AtomicWaker::new(),
        })
    }

    /// A request's header is in (hyper called the service).
    pub fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
    }

    /// hyper is done with a response (its body was dropped).
    pub fn end(&self) {
        let ns = Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        self.idle_since_ns
            .store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Release);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }

    /// `None` if the connection has waited too long for a header by `now`;
    /// otherwise when to look again.
    fn next_look(&self, now: Instant) -> Option<Instant> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return Some(now + self.timeout);
        }
        let idle = Duration::from_nanos(self.idle_since_ns.load(Ordering::Acquire));
        let due = self.base + idle + self.timeout;
        (due > now).then_some(due)
    }

    fn tell(&self, signal: u8) {
        self.signal.store(signal, Ordering::Release);
        self.waker.wake();
    }
}

impl crate::http::body::Dropped for Watch {
    fn dropped(&self) {
        self.end();
    }
}

/// Watches a connection from a task of its own until the returned handle
/// is dropped.
pub fn spawn(
    watch: Arc<Watch>,
    shutdown: CancellationToken,
    grace: Duration,
) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(async move {
        let timer = tokio::time::sleep(watch.timeout);
        tokio::pin!(timer);
        loop {
            tokio::select! {
                () = &mut timer => match watch.next_look(Instant::now()) {
                    Some(at) => timer.as_mut().reset(at),
                    None => {
                        watch.tell(STOP);
                        return;
                    }
                },
                () = shutdown.cancelled() => {
                    watch.tell(DRAIN);
                    tokio::time::sleep(grace).await;
                    watch.tell(STOP);
                    return;
                }
            }
        }
    }))
}

/// How a guarded connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended<T> {
    /// On its own, with this result.
    Done(T),
    /// Cut off: a header overdue, or the shutdown's grace ran out.
    Stopped,
}

/// Runs `conn` until it ends or the guard stops it; when the guard says
/// drain, `drain` is called once (hyper's graceful shutdown).
pub async fn run<C, T>(
    conn: Pin<&mut C>,
    watch: &Watch,
    mut drain: impl FnMut(Pin<&mut C>),
) -> Ended<T>
where
    C: Future<Output = T>,
{
    let mut conn = conn;
    let mut drained = false;
    std::future::poll_fn(|cx| {
        // Every time: a wake takes the registered waker. (Registering the
        // same waker again does not clone it.)
        watch.waker.register(cx.waker());
        match watch.signal.load(Ordering::Acquire) {
            STOP => return Poll::Ready(Ended::Stopped),
            DRAIN if !drained => {
                drained = true;
                drain(conn.as_mut());
            }
            _ => {}
        }
        conn.as_mut().poll(cx).map(Ended::Done)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_due_a_timeout_after_the_connection_went_idle() {
        let w = Watch::new(Duration::from_secs(10));
        let t0 = w.base;
        // Handed over: the first header is due 10 s later.
        assert_eq!(
            w.next_look(t0 + Duration::from_secs(3)),
            Some(t0 + Duration::from_secs(10))
        );
        assert_eq!(w.next_look(t0 + Duration::from_secs(10)), None);
        // While a request is answered, nothing is due; look again later.
        w.begin();
        let later = t0 + Duration::from_secs(60);
        assert_eq!(w.next_look(later), Some(later + Duration::from_secs(10)));
        // Its response written: the next header is due 10 s after that.
        w.end();
        let idle = w.base + Duration::from_nanos(w.idle_since_ns.load(Ordering::Acquire));
        assert!(idle >= t0);
        assert_eq!(w.next_look(idle), Some(idle + Duration::from_secs(10)));
        assert_eq!(w.next_look(idle + Duration::from_secs(10)), None);
    }

    #[test]
    fn two_requests_in_hand_keep_it_busy_until_both_are_written() {
        let w = Watch::new(Duration::from_secs(1));
        w.begin();
        w.begin();
        w.end();
        let far = w.base + Duration::from_secs(100);
        assert_eq!(w.next_look(far), Some(far + Duration::from_secs(1)));
        w.end();
        assert_eq!(w.next_look(far), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_guard_stops_an_overdue_connection_and_drains_on_shutdown() {
        // Overdue: stopped after the timeout, not before.
        let w = Watch::new(Duration::from_secs(5));
        let _g = spawn(w.clone(), CancellationToken::new(), Duration::from_secs(1));
        let start = tokio::time::Instant::now();
        let conn = std::future::pending::<()>();
        tokio::pin!(conn);
        let ended = run(conn.as_mut(), &w, |_| panic!("no shutdown here")).await;
        assert_eq!(ended, Ended::Stopped);
        assert_eq!(start.elapsed(), Duration::from_secs(5));

        // Shutdown: drained at once, stopped when the grace runs out.
        let w = Watch::new(Duration::from_secs(60));
        w.begin();
        let shutdown = CancellationToken::new();
        let _g = spawn(w.clone(), shutdown.clone(), Duration::from_secs(2));
        let start = tokio::time::Instant::now();
        let drained = std::sync::atomic::AtomicBool::new(false);
        let conn = std::future::pending::<()>();
        tokio::pin!(conn);
        let cancel = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            cancel.cancel();
        });
        let ended = run(conn.as_mut(), &w, |_| {
            drained.store(true, Ordering::Relaxed)
        })
        .await;
        assert_eq!(ended, Ended::Stopped);
        assert!(drained.load(Ordering::Relaxed));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }
}
