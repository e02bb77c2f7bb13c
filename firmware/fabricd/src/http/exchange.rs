//! What passes between a connection and the hyper that serves its
//! request: an answer made before hyper ([`Ready`]), and what hyper has
//! done with its requests and responses ([`Exchange`]), which the
//! connection reads to know whether it can go on.
//!
//! It lies below everything on a request's path: the connection, the
//! early reader, the hand-off to hyper, the routes and the handlers all
//! hold the same `Exchange`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use futures_util::task::AtomicWaker;
use hyper::body::{Body as _, Incoming};
use hyper::header::CONNECTION;
use hyper::{Request, Response, Version};

use super::body::{Body, Dropped};

/// A request's answer made before hyper (by [`early`]), for hyper to write.
#[derive(Debug)]
pub(super) struct Ready {
    pub(super) response: Response<Body>,
    /// The request's body was read whole: hyper reads it again from memory.
    pub(super) body_read: bool,
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

    /// The answer hyper writes to the next request it reads.
    pub(super) fn set_ready(&self, ready: Option<Ready>) {
        *self.ready.lock().unwrap_or_else(PoisonError::into_inner) = ready;
    }

    /// Woken when a response is done with.
    pub(super) fn register(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }

    pub(super) fn take_ready(&self) -> Option<Ready> {
        self.ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(super) fn begin(&self, req: &Request<Incoming>) {
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

    pub(super) fn answered(&self) -> bool {
        self.answered.load(Ordering::Acquire) > 0
    }

    /// Every response is out, the last body was read and the client did
    /// not ask to close: the connection can wait for its next request.
    pub(super) fn reusable(&self) -> bool {
        let begun = self.begun.load(Ordering::Acquire);
        begun > 0
            && self.answered.load(Ordering::Acquire) == begun
            && self.body_done.load(Ordering::Acquire)
            && !self.closing.load(Ordering::Acquire)
    }
}

impl Dropped for Exchange {
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
