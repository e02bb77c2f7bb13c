//! The harness against a server that answers at once.
//!
//! Before blaming the system, check that the measurement is not the
//! bottleneck. The ladder starts a trivial HTTP server in its own process
//! (hyper, a fixed 200), drives it with the same client code and
//! concurrency model it uses on the target, and reports the completions per
//! second it reached: the harness's ceiling on this machine. A run whose
//! ceiling is under ten times the fabric's capacity says so.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::client::{Conn, Target};

/// The bare hyper server that answers every request at once with a small
/// completion-shaped body: the physical limit of the HTTP stack on this
/// machine, for comparisons.
pub async fn hello(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let svc = service_fn(|_req| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                    br#"{"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}}"#,
                ))))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The harness's ceiling.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Calibration {
    pub clients: usize,
    pub seconds: f64,
    pub requests: u64,
    pub rps: f64,
}

/// Runs `clients` closed-loop clients against an instant server for
/// `duration`.
pub async fn calibrate(clients: usize, duration: Duration) -> anyhow::Result<Calibration> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(hello(listener));
    let target = Arc::new(Target {
        addr,
        host: addr.to_string(),
    });
    let end = Instant::now() + duration;
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                let Ok(mut conn) = Conn::connect(&target).await else {
                    return 0;
                };
                let body = Bytes::from_static(br#"{"model":"x","prompt":"y"}"#);
                while Instant::now() < end {
                    if conn
                        .send(
                            &target,
                            "POST",
                            "/v1/completions",
                            body.clone(),
                            Duration::from_secs(5),
                        )
                        .await
                        .is_ok()
                    {
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    let mut requests = 0;
    for t in tasks {
        requests += t.await.unwrap_or(0);
    }
    let seconds = start.elapsed().as_secs_f64();
    server.abort();
    Ok(Calibration {
        clients,
        seconds,
        requests,
        rps: requests as f64 / seconds,
    })
}
