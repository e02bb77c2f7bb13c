//! One HTTP/1.1 keep-alive connection, on hyper's client.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpSocket, TcpStream};

/// Where the ladder points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
    /// Loopback addresses the connections come from in turn (127.1.0.1
    /// and up), as clients on as many hosts would; 0: the kernel's choice.
    pub sources: u16,
    /// The one loopback address every connection comes from, if set (a
    /// single hostile host).
    pub source: Option<Ipv4Addr>,
}

/// The next source address's number, shared by every connection.
static NEXT_SOURCE: AtomicUsize = AtomicUsize::new(0);

/// The `i`th source address: 127.1.0.1 to 127.1.0.254, 127.1.1.1, ...
pub fn source_address(i: u16) -> Ipv4Addr {
    let [hi, lo] = [i / 254, i % 254];
    Ipv4Addr::new(127, 1, hi as u8, lo as u8 + 1)
}

impl Target {
    /// Parses `http://HOST:PORT` (a trailing path is ignored). Only
    /// addresses, not names: a load test must know exactly where it goes.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url:?}: only http:// targets are supported"))?;
        let hostport = rest.split('/').next().unwrap_or_default();
        let addr: SocketAddr = hostport.parse().map_err(|_| {
            format!("{url:?}: expected http://ADDRESS:PORT with a literal IP address")
        })?;
        Ok(Target {
            addr,
            host: hostport.to_owned(),
            sources: 0,
            source: None,
        })
    }

    /// The same target, its connections coming from `sources` loopback
    /// addresses in turn; only a loopback target can be reached from them.
    pub fn from_sources(mut self, sources: u16) -> Result<Target, String> {
        if sources > 0 && !(self.addr.ip().is_loopback() && self.addr.is_ipv4()) {
            return Err(format!(
                "--sources needs a 127.x.x.x target: {} is not reachable from 127.1.0.1",
                self.addr
            ));
        }
        self.sources = sources;
        Ok(self)
    }

    /// The same target, every connection coming from `from` (a loopback
    /// address, for a loopback target).
    pub fn from_address(mut self, from: Ipv4Addr) -> Result<Target, String> {
        if !(self.addr.ip().is_loopback() && self.addr.is_ipv4() && from.is_loopback()) {
            return Err(format!(
                "a source address needs a 127.x.x.x target and source: {} from {from}",
                self.addr
            ));
        }
        self.source = Some(from);
        Ok(self)
    }

    /// A TCP connection to the target, from the next source address.
    pub async fn open(&self) -> std::io::Result<TcpStream> {
        let from = match self.source {
            Some(from) => from,
            None if self.sources == 0 => return TcpStream::connect(self.addr).await,
            None => {
                let i = NEXT_SOURCE.fetch_add(1, Ordering::Relaxed) % usize::from(self.sources);
                source_address(i as u16)
            }
        };
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(from.into(), 0))?;
        socket.connect(self.addr).await
    }
}

/// A reply.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
    /// `retry-after-ms`, when present.
    pub retry_after_ms: Option<u64>,
    /// `X-Fabricd-Source` (`fabric`, `cache`, `typed-forward`, `joined`),
    /// when present.
    pub source: Option<String>,
    /// `X-Fabricd-Predicted-Wait-Ms` of a predictive refusal, when present.
    pub predicted_wait_ms: Option<u64>,
    /// Whether the body is an event stream.
    pub event_stream: bool,
    /// From sending the request to the body's first bytes (for an event
    /// stream, its first event: the first token).
    pub first_byte: Option<Duration>,
}

/// What went wrong below HTTP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawError {
    #[error("connect: {0}")]
    Connect(String),
    #[error("connection: {0}")]
    Connection(String),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
}

/// A keep-alive connection. Dropping it closes the socket at once, even
/// with a request in flight, as a browser tab that goes away does: the
/// server then cancels what it held for it.
#[derive(Debug)]
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    io: tokio::task::AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.io.abort();
    }
}

impl Conn {
    pub async fn connect(target: &Target) -> Result<Conn, RawError> {
        let stream = target
            .open()
            .await
            .map_err(|e| RawError::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| RawError::Connect(e.to_string()))?;
        let io = tokio::spawn(async move {
            let _ = conn.await;
        })
        .abort_handle();
        Ok(Conn { sender, io })
    }

    /// Whether the connection can take another request.
    pub fn is_open(&self) -> bool {
        !self.sender.is_closed()
    }

    /// Sends one request and reads the whole reply.
    pub async fn send(
        &mut self,
        target: &Target,
        method: &str,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Reply, RawError> {
        self.send_with(target, method, path, &[], body, timeout)
            .await
    }

    /// Sends one request with extra headers and reads the whole reply.
    pub async fn send_with(
        &mut self,
        target: &Target,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        timeout: Duration,
    ) -> Result<Reply, RawError> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &target.host)
            .header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| RawError::Connection(e.to_string()))?;
        let exchange = async {
            self.sender
                .ready()
                .await
                .map_err(|e| RawError::Connection(e.to_string()))?;
            let sent = std::time::Instant::now();
            let resp = self
                .sender
                .send_request(req)
                .await
                .map_err(|e| RawError::Connection(e.to_string()))?;
            let status = resp.status().as_u16();
            let h = resp.headers();
            let header = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
            let retry_after_ms = header("retry-after-ms").and_then(|v| v.parse().ok());
            let predicted_wait_ms =
                header("x-fabricd-predicted-wait-ms").and_then(|v| v.parse().ok());
            let source = header("x-fabricd-source").map(str::to_owned);
            let event_stream =
                header("content-type").is_some_and(|v| v.starts_with("text/event-stream"));
            let mut body = resp.into_body();
            let mut bytes = Vec::new();
            let mut first_byte = None;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| RawError::Connection(e.to_string()))?;
                if let Ok(data) = frame.into_data() {
                    if first_byte.is_none() && !data.is_empty() {
                        first_byte = Some(sent.elapsed());
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Reply {
                status,
                body: Bytes::from(bytes),
                retry_after_ms,
                source,
                predicted_wait_ms,
                event_stream,
                first_byte,
            })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| RawError::Timeout(timeout))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_literal_addresses() {
        let t = Target::parse("http://127.0.0.1:8080/v1").expect("ok");
        assert_eq!(t.addr.port(), 8080);
        assert!(Target::parse("https://127.0.0.1:8080").is_err());
        assert!(Target::parse("http://board.local:8080").is_err());
    }
}
