//! Response bodies: a whole buffer, or a channel of chunks (event streams).
//!
//! One concrete type rather than a boxed `dyn Body`: no allocation a
//! response, and a word to whoever asked when hyper is done with the body
//! (see [`Body::on_drop`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

/// The body of every response.
#[derive(Debug)]
pub struct Body {
    kind: Kind,
    /// Told when the body is dropped: hyper drops a body once it has
    /// written all of it (or given up on the connection).
    on_drop: Option<Arc<dyn Dropped>>,
}

/// What wants to know when a body is dropped.
pub trait Dropped: Send + Sync + std::fmt::Debug {
    fn dropped(&self);
}

#[derive(Debug)]
enum Kind {
    /// Taken when polled.
    Full(Option<Bytes>),
    /// Fed by a channel; the stream ends when the sender is dropped. When
    /// the client goes away, hyper drops the body, and the sender's
    /// `closed()` fires: that is how a stream learns to cancel.
    Channel(mpsc::Receiver<Bytes>),
}

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    let bytes = bytes.into();
    Body {
        kind: Kind::Full((!bytes.is_empty()).then_some(bytes)),
        on_drop: None,
    }
}

/// A response with a JSON body already written (and its newline).
pub fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A streaming body and the sender that feeds it.
pub fn channel(capacity: usize) -> (mpsc::Sender<Bytes>, Body) {
    let (tx, rx) = mpsc::channel(capacity);
    (
        tx,
        Body {
            kind: Kind::Channel(rx),
            on_drop: None,
        },
    )
}

impl Body {
    /// Tells `to` when the body is dropped: written out, or abandoned.
    pub fn on_drop(&mut self, to: Arc<dyn Dropped>) {
        self.on_drop = Some(to);
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Some(to) = self.on_drop.take() {
            to.dropped();
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Channel(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Channel(_) => SizeHint::default(),
        }
    }
}
