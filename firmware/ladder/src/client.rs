//! One HTTP/1.1 keep-alive connection, on hyper's client.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Where the ladder points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
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
        })
    }
}

/// A reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
    /// `retry-after-ms`, when present.
    pub retry_after_ms: Option<u64>,
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

/// A keep-alive connection.
#[derive(Debug)]
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    pub async fn connect(target: &Target) -> Result<Conn, RawError> {
        let stream = TcpStream::connect(target.addr)
            .await
            .map_err(|e| RawError::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| RawError::Connect(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender })
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
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &target.host)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(|e| RawError::Connection(e.to_string()))?;
        let exchange = async {
            self.sender
                .ready()
                .await
                .map_err(|e| RawError::Connection(e.to_string()))?;
            let resp = self
                .sender
                .send_request(req)
                .await
                .map_err(|e| RawError::Connection(e.to_string()))?;
            let status = resp.status().as_u16();
            let retry_after_ms = resp
                .headers()
                .get("retry-after-ms")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| RawError::Connection(e.to_string()))?
                .to_bytes();
            Ok(Reply {
                status,
                body,
                retry_after_ms,
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
