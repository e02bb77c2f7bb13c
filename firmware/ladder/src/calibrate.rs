//! The harness against a server that answers at once.
//!
//! Before blaming the system, check that the measurement is not the
//! bottleneck. The ladder starts a trivial HTTP server in its own process
//! (hyper, a fixed 200), drives it with the same client code and
//! concurrency model it uses on the target, and reports the completions per
//! second it reached: the harness's ceiling on this machine. A run whose
//! ceiling is under ten times the fabric's capacity says so.
//!
//! Typists are not a throughput: they type at their own pace. Their
//! calibration runs as many typists as the largest rung, with the same
//! keystrokes, against the instant server (whose completion is valid for
//! any prompt), and reports what the harness alone adds: the suggestion
//! latency at a pause, how late keystrokes went out, and the harness's
//! CPU, which the server's (in the same process) only inflates. Every rung
//! also reports its own lateness and CPU, so a harness that falls behind
//! under the real load is seen there too.

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
use crate::typists::report::summarize;
use crate::typists::{Corpus, TypistsConfig};

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
        sources: 0,
        source: None,
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

/// The typists' harness against an instant server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TypistCalibration {
    pub typists: usize,
    pub seconds: f64,
    pub keystrokes_per_s: f64,
    pub pauses: u64,
    pub pause_p50_ms: Option<f64>,
    pub pause_p99_ms: Option<f64>,
    pub harness_lag_p99_ms: f64,
    pub harness_lag_max_ms: f64,
    /// The harness and the instant server together, as a share of one core.
    pub harness_cpu: f64,
    pub errors: u64,
}

/// Runs `cfg` (its typists, keystrokes and debounce) against an instant
/// server: `warmup`, then `duration` measured.
pub async fn calibrate_typists(
    corpus: &Arc<Corpus>,
    cfg: &TypistsConfig,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<TypistCalibration> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(hello(listener));
    let target = Target {
        addr,
        host: addr.to_string(),
        sources: 0,
        source: None,
    };
    let stats = crate::typists::run::run(&target, corpus, cfg, warmup, duration).await;
    server.abort();
    let r = summarize(&stats?);
    Ok(TypistCalibration {
        typists: r.typists,
        seconds: r.seconds,
        keystrokes_per_s: r.keystrokes_per_s,
        pauses: r.pauses,
        pause_p50_ms: r.pause_p50_ms,
        pause_p99_ms: r.pause_p99_ms,
        harness_lag_p99_ms: r.harness_lag_p99_ms,
        harness_lag_max_ms: r.harness_lag_max_ms,
        harness_cpu: r.harness_cpu,
        errors: r.errors + r.corrupted,
    })
}
