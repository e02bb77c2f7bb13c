//! A completion served before hyper is made for it: its head parsed here,
//! its body read onto the head's buffer, its answer waited for, and only
//! then a hyper connection made, handed the request's own bytes and the
//! answer, to write it.
//!
//! A hyper connection allocates a read and a write buffer of 8 KiB each
//! when it starts, and keeps them while its service waits. A completion
//! waits its turn in the queue for seconds when the fabric is busy, so
//! 2,048 waiting clients held 32 MiB of buffers that nothing used. Waiting
//! here, a request holds its own bytes (a few hundred) and its admission;
//! hyper's buffers exist only while the answer is written.
//!
//! A completion comes here only once `hyper_waiting_max` requests are
//! already being served inside hyper: the second parse and the copies
//! cost CPU that a request answered at once need not pay. And only a
//! request whose framing is beyond doubt: `POST
//! /v1/completions` with one `Content-Length` within the body limit and no
//! `Transfer-Encoding`, `Expect` or `Upgrade`. Anything else, and any head
//! httparse (hyper's own parser) does not take whole, goes to hyper as it
//! is, so hyper stays the one judge of what HTTP means; the request's
//! bytes handed to it later are the ones parsed here.

use std::future::{poll_fn, Future};
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Frame, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Version};
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::body::Body;
use super::completions::completions;
use super::exchange::{Exchange, Ready};
use super::handoff::serve_one;
use super::head::MAX_HEADERS;
use super::App;

/// The path served here.
const PATH: &str = "/v1/completions";

/// A completion's head, parsed, and where its body lies in the buffer.
#[derive(Debug)]
pub struct Plan {
    head: Request<()>,
    head_len: usize,
    body_len: usize,
}

impl Plan {
    /// The head as parsed (its body not yet read).
    pub fn head(&self) -> &Request<()> {
        &self.head
    }

    /// The head's length in bytes, blank line included: the body follows.
    pub fn head_len(&self) -> usize {
        self.head_len
    }

    /// The body's length, from its one `Content-Length`.
    pub fn body_len(&self) -> usize {
        self.body_len
    }
}

/// The plan for the request at the start of `buf` (a whole head), if it is
/// a completion this module serves.
pub fn plan(buf: &[u8], body_limit: usize) -> Option<Plan> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) | Err(_) => return None,
    };
    if req.method != Some("POST") || req.path != Some(PATH) {
        return None;
    }
    let version = match req.version {
        Some(1) => Version::HTTP_11,
        Some(0) => Version::HTTP_10,
        _ => return None,
    };
    let mut body_len = None;
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(PATH)
        .version(version);
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        match name.as_str() {
            "transfer-encoding" | "expect" | "upgrade" => return None,
            "content-length" => {
                let digits = std::str::from_utf8(h.value).ok()?;
                if body_len.is_some()
                    || digits.is_empty()
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                body_len = Some(digits.parse::<usize>().ok()?);
            }
            _ => {}
        }
        builder = builder.header(name, HeaderValue::from_bytes(h.value).ok()?);
    }
    let body_len = body_len.filter(|&n| n <= body_limit)?;
    let head = builder.body(()).ok()?;
    Some(Plan {
        head,
        head_len,
        body_len,
    })
}

/// Serves the completion `plan` found at the start of `buf`: its answer,
/// then hyper to write it. The stream and what came after the request, if
/// the connection goes on.
pub(super) async fn serve(
    stream: TcpStream,
    mut buf: BytesMut,
    plan: Plan,
    peer: SocketAddr,
    app: &Arc<App>,
    shutdown: &CancellationToken,
    ex: &Arc<Exchange>,
) -> Option<(TcpStream, BytesMut)> {
    let end = plan.head_len + plan.body_len;
    // What the connection's last request left (its body read, say) is not
    // this one's: the watch below waits for this body.
    ex.reset();
    let response = {
        let body = Arriving {
            stream: &stream,
            buf: &mut buf,
            from: plan.head_len,
            to: end,
        };
        let answer = pin!(completions(app, peer, plan.head.map(|()| body), ex));
        watch(answer, &stream, ex, app, shutdown).await?
    };
    let ready = Ready {
        response,
        body_read: buf.len() >= end,
    };
    serve_one(stream, buf, peer, app, shutdown, ex, Some(ready)).await
}

/// Waits for `answer`. Gives up (None) when the client goes away, which
/// drops the answer and so cancels the request, or when the daemon stops
/// and its shutdown grace runs out.
///
/// Once the body is read, the socket says nothing until the answer is out
/// unless the client closed it (EOF or an error), or pipelined its next
/// request (bytes, which stop the watch: they are the next turn's).
async fn watch<F: Future<Output = Response<Body>>>(
    mut answer: Pin<&mut F>,
    stream: &TcpStream,
    ex: &Exchange,
    app: &App,
    shutdown: &CancellationToken,
) -> Option<Response<Body>> {
    let mut stopping = pin!(shutdown.cancelled());
    let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
    let mut watching = true;
    poll_fn(|cx| {
        if let Poll::Ready(r) = answer.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        if grace.is_none() && stopping.as_mut().poll(cx).is_ready() {
            grace = Some(Box::pin(tokio::time::sleep(app.config.shutdown_grace())));
        }
        if let Some(g) = grace.as_mut() {
            if g.as_mut().poll(cx).is_ready() {
                log::debug!("http: shutdown's grace over before a completion's answer");
                return Poll::Ready(None);
            }
        }
        if watching && ex.body_is_read() {
            let mut probe = [MaybeUninit::uninit(); 1];
            let mut probe = ReadBuf::uninit(&mut probe);
            match stream.poll_peek(cx, &mut probe) {
                Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(None),
                Poll::Ready(Ok(_)) => watching = false,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

/// A request body still arriving: read onto the end of its head's buffer,
/// so that hyper can later be handed the request whole, and given as one
/// frame once all of it is there.
struct Arriving<'a> {
    stream: &'a TcpStream,
    buf: &'a mut BytesMut,
    /// Where the body starts in `buf`, and ends; equal once given.
    from: usize,
    to: usize,
}

impl hyper::body::Body for Arriving<'_> {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.from == this.to {
            return Poll::Ready(None);
        }
        while this.buf.len() < this.to {
            ready!(this.stream.poll_read_ready(cx))?;
            this.buf.reserve(this.to - this.buf.len());
            match this.stream.try_read_buf(this.buf) {
                Ok(0) => return Poll::Ready(Some(Err(io::ErrorKind::UnexpectedEof.into()))),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
        // The buffer waits with the request: no larger than what it holds
        // (the head's first read took room for 4 KiB).
        if this.buf.capacity() > this.buf.len() {
            *this.buf = BytesMut::from(&this.buf[..]);
        }
        let data = Bytes::copy_from_slice(&this.buf[this.from..this.to]);
        this.from = this.to;
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.from == self.to
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.to - self.from) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1 << 20;

    fn head(lines: &str) -> String {
        format!("POST /v1/completions HTTP/1.1\r\nhost: t\r\n{lines}\r\n")
    }

    #[test]
    fn a_plain_completion_is_planned_with_its_head_and_body_length() {
        let text =
            head("content-type: application/json\r\ncontent-length: 12\r\n") + "{\"prompt\":1}";
        let plan = plan(text.as_bytes(), LIMIT).expect("a plan");
        assert_eq!(plan.head_len, text.len() - 12);
        assert_eq!(plan.body_len, 12);
        assert_eq!(plan.head.headers()["content-type"], "application/json");
        assert_eq!(plan.head.version(), Version::HTTP_11);
    }

    #[test]
    fn anything_whose_framing_hyper_should_judge_is_left_to_it() {
        for (why, text) in [
            (
                "another path",
                "POST /v1/models HTTP/1.1\r\ncontent-length: 2\r\n\r\n".to_owned(),
            ),
            (
                "a query",
                "POST /v1/completions?x=1 HTTP/1.1\r\ncontent-length: 2\r\n\r\n".to_owned(),
            ),
            (
                "another method",
                "PUT /v1/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n".to_owned(),
            ),
            ("no length", head("")),
            ("chunked", head("transfer-encoding: chunked\r\n")),
            (
                "chunked and a length",
                head("content-length: 2\r\ntransfer-encoding: chunked\r\n"),
            ),
            (
                "two lengths",
                head("content-length: 2\r\ncontent-length: 2\r\n"),
            ),
            ("a list of lengths", head("content-length: 2, 2\r\n")),
            ("a signed length", head("content-length: +2\r\n")),
            (
                "a length past the limit",
                head(&format!("content-length: {}\r\n", LIMIT + 1)),
            ),
            (
                "a length past usize",
                head("content-length: 99999999999999999999999\r\n"),
            ),
            (
                "expect",
                head("content-length: 2\r\nexpect: 100-continue\r\n"),
            ),
            (
                "upgrade",
                head("content-length: 2\r\nupgrade: websocket\r\n"),
            ),
            (
                "a bad header",
                head("content-length: 2\r\nbad header: x\r\n"),
            ),
            (
                "a partial head",
                "POST /v1/completions HTTP/1.1\r\ncontent-length: 2\r\n".to_owned(),
            ),
        ] {
            assert!(plan(text.as_bytes(), LIMIT).is_none(), "{why}: {text:?}");
        }
        let many: String = (0..MAX_HEADERS).map(|i| format!("x-{i}: y\r\n")).collect();
        assert!(
            plan(
                head(&format!("content-length: 2\r\n{many}")).as_bytes(),
                LIMIT
            )
            .is_none(),
            "more headers than hyper takes"
        );
    }

    #[test]
    fn http_1_0_is_planned_too() {
        let text = "POST /v1/completions HTTP/1.0\r\ncontent-length: 0\r\n\r\n";
        let plan = plan(text.as_bytes(), LIMIT).expect("a plan");
        assert_eq!(plan.head.version(), Version::HTTP_10);
        assert_eq!(plan.body_len, 0);
    }
}
