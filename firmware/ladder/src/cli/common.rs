//! What every workload's run needs: the target's fabric, the bands file,
//! the file-descriptor limit, and the daemon left idle between rungs.

use std::time::Duration;

use anyhow::Context;
use ladder::bands::Bands;
use ladder::client::{Conn, Target};

use super::args::Args;

/// What the daemon says about the fabric (`GET /readyz`).
#[derive(Debug, Clone)]
pub struct Fabric {
    pub lanes: f64,
    pub slots_with_model: f64,
    pub prefill_ns: f64,
    pub decode_ns: f64,
}

impl Fabric {
    /// Completions per second for requests of `prompt_tokens` and
    /// `max_tokens`, and the fabric's time for one, ms.
    pub fn capacity(&self, prompt_tokens: f64, max_tokens: u32) -> (f64, f64) {
        let service_ms =
            (self.prefill_ns * prompt_tokens + self.decode_ns * f64::from(max_tokens)) / 1e6;
        let capacity = if service_ms > 0.0 {
            self.lanes * self.slots_with_model / (service_ms / 1000.0)
        } else {
            f64::INFINITY
        };
        (capacity, service_ms)
    }
}

pub async fn fabric(target: &Target, model: &str) -> anyhow::Result<Fabric> {
    // Wait (bounded) for the target to say it is ready.
    let start = std::time::Instant::now();
    let v: serde_json::Value = loop {
        let reply = match Conn::connect(target).await {
            Ok(mut conn) => conn
                .send(
                    target,
                    "GET",
                    "/readyz",
                    bytes::Bytes::new(),
                    Duration::from_secs(10),
                )
                .await
                .ok(),
            Err(_) => None,
        };
        let waited = start.elapsed() > Duration::from_secs(30);
        match reply {
            Some(r) => {
                let v: serde_json::Value =
                    serde_json::from_slice(&r.body).context("/readyz is not JSON")?;
                if r.status == 200 || waited {
                    break v;
                }
            }
            None if waited => anyhow::bail!("{} does not answer GET /readyz", target.addr),
            None => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let f = &v["fabric"];
    let slots = v["slots"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["model"] == model && s["state"] == "ready")
                .count()
        })
        .unwrap_or(0);
    if slots == 0 {
        anyhow::bail!("no ready slot holds {model:?} (GET /readyz: {v})");
    }
    Ok(Fabric {
        lanes: f["lanes"].as_f64().context("/readyz has no fabric.lanes")?,
        slots_with_model: slots as f64,
        prefill_ns: f["prefill_ns"].as_f64().unwrap_or(0.0),
        decode_ns: f["decode_ns"].as_f64().unwrap_or(0.0),
    })
}

pub fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// The bands file, or none.
pub fn bands(args: &Args) -> anyhow::Result<Bands> {
    match &args.bands {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Bands::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
        }
        None => Ok(Bands::default()),
    }
}

/// Lets the daemon finish (or cancel) what a rung left before the next.
pub async fn settle(target: &Target) {
    if !ladder::daemon::quiesce(target, Duration::from_secs(60)).await {
        eprintln!("ladder: the daemon still had requests queued or running 60 s after the rung");
    }
}

/// A rung's violations, for a line.
pub fn broken(v: &[ladder::bands::Violation]) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!(
            " — BAND BROKEN: {}",
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    }
}

/// How the ladder ended: the rung it stopped at, with what broke there
/// (`last`, the violations of the last rung run), or every rung held.
pub fn print_end(stopped: Option<usize>, last: &[ladder::bands::Violation]) {
    match stopped {
        Some(n) => println!(
            "STOPPED at {n}: {}",
            last.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        None => println!("every rung within its bands"),
    }
}

/// Writes `bytes` to `path`.
pub fn write(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
