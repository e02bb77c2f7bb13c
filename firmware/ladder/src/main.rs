//! `ladder --target http://ADDR:PORT …`: see `ladder --help` and the crate
//! docs.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ladder::bands::Bands;
use ladder::calibrate::{calibrate, Calibration};
use ladder::client::{Conn, Target};
use ladder::report::{self, RungResult};
use ladder::rung::{self, Lurkers, RungConfig};
use ladder::workload::{references, Workload};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(
    name = "ladder",
    version,
    about = "Load a fabricd from one client to thousands, stopping at the first rung that breaks a band"
)]
struct Args {
    /// The daemon, as http://ADDRESS:PORT.
    #[arg(long)]
    target: String,
    /// Clients per rung.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256,512,1024,2048"
    )]
    rungs: Vec<usize>,
    /// Measured seconds per rung.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds before measuring (default: long enough for the queue to fill:
    /// 1.5 × clients ÷ capacity, at least 1).
    #[arg(long)]
    warmup: Option<f64>,
    /// The abort conditions (TOML); without it nothing stops the ladder.
    #[arg(long)]
    bands: Option<PathBuf>,
    /// Idle connections held open for the whole run.
    #[arg(long, default_value_t = 0)]
    lurkers: usize,
    /// Write the results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a plot of throughput and latency against clients.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// The model to ask.
    #[arg(long, default_value = "kjv")]
    model: String,
    /// Output tokens per request (fixed length).
    #[arg(long, default_value_t = 8)]
    max_tokens: u32,
    /// Open loop: a rung's value is requests per second (due on a fixed
    /// schedule, latency counted from when due), not clients.
    #[arg(long)]
    open_loop: bool,
    /// Most connections an open-loop rung may use.
    #[arg(long, default_value_t = 4096)]
    open_loop_connections: usize,
    /// Per-request timeout, seconds (a timeout is a failure).
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Send no `user` field (all clients look alike to the server).
    #[arg(long)]
    anonymous: bool,
    /// Skip measuring the harness's own ceiling.
    #[arg(long)]
    no_calibrate: bool,
    /// Clients for the calibration.
    #[arg(long, default_value_t = 64)]
    calibrate_clients: usize,
    /// Seconds of calibration.
    #[arg(long, default_value_t = 3.0)]
    calibrate_secs: f64,
    /// A label for the results (machine, date, command).
    #[arg(long)]
    label: Option<String>,
}

/// What the daemon says about the fabric (`GET /readyz`).
#[derive(Debug, Clone)]
struct Fabric {
    lanes: f64,
    slots_with_model: f64,
    prefill_ns: f64,
    decode_ns: f64,
}

async fn fabric(target: &Target, model: &str) -> anyhow::Result<Fabric> {
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

fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ladder: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ladder: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<bool> {
    raise_fd_limit();
    let target = Target::parse(&args.target).map_err(anyhow::Error::msg)?;
    let bands = match &args.bands {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Bands::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => Bands::default(),
    };
    let timeout = Duration::from_secs_f64(args.timeout);
    let workload = Arc::new(Workload::typing(&args.model, args.max_tokens));
    let fab = fabric(&target, &args.model).await?;
    let refs = Arc::new(references(&target, &workload, timeout).await?);
    let service_ms =
        (fab.prefill_ns * refs.prompt_tokens + fab.decode_ns * f64::from(args.max_tokens)) / 1e6;
    let capacity = if service_ms > 0.0 {
        fab.lanes * fab.slots_with_model / (service_ms / 1000.0)
    } else {
        f64::INFINITY
    };
    eprintln!(
        "ladder: {} on {}: {} slot(s) × {} lanes, {:.1} prompt + {} output tokens = {:.2} ms of fabric a request; capacity {:.1} completions/s; solo {:.2} ms end to end",
        args.model,
        target.addr,
        fab.slots_with_model,
        fab.lanes,
        refs.prompt_tokens,
        args.max_tokens,
        service_ms,
        capacity,
        refs.solo.as_secs_f64() * 1e3
    );
    let calibration: Option<Calibration> = if args.no_calibrate {
        None
    } else {
        let c = calibrate(
            args.calibrate_clients,
            Duration::from_secs_f64(args.calibrate_secs),
        )
        .await?;
        let ratio = c.rps / capacity;
        eprintln!(
            "ladder: harness ceiling {:.0} requests/s with {} clients against an instant server: {:.1}× the fabric's capacity{}",
            c.rps,
            c.clients,
            ratio,
            if ratio < 10.0 { " — UNDER 10×: this harness may be the bottleneck" } else { "" }
        );
        Some(c)
    };
    let lurkers = if args.lurkers > 0 {
        let l = Lurkers::open(&target, args.lurkers).await;
        eprintln!(
            "ladder: {} lurkers open ({} failed to connect)",
            l.len(),
            l.failed
        );
        Some(l)
    } else {
        None
    };
    let mut results: Vec<RungResult> = Vec::new();
    let mut stopped = None;
    for &n in &args.rungs {
        let warmup = args.warmup.unwrap_or_else(|| {
            let fill = if args.open_loop {
                1.0
            } else {
                1.5 * n as f64 / capacity
            };
            fill.clamp(1.0, 30.0)
        });
        let cfg = RungConfig {
            clients: if args.open_loop {
                args.open_loop_connections
            } else {
                n
            },
            warmup: Duration::from_secs_f64(warmup),
            duration: Duration::from_secs_f64(args.duration),
            timeout,
            rate: args.open_loop.then_some(n as f64),
            users: !args.anonymous,
        };
        let stats = rung::run(&target, &workload, &refs, &cfg).await;
        let mut r = report::summarize(
            &stats,
            capacity,
            service_ms,
            lurkers.as_ref().map(|l| (l.still_open(), args.lurkers)),
        );
        r.clients = n;
        r.violations = bands.check(&r);
        eprintln!(
            "ladder: {n:>5} {}: {:.1} req/s ({:.1}% of capacity), p50 {:.1} ms, p95 {:.1} ms, {} rejected, {} errors, {} corrupt, harness {:.0}% cpu{}",
            if args.open_loop { "req/s" } else { "clients" },
            r.rps,
            r.capacity_fraction * 100.0,
            r.p50_ms,
            r.p95_ms,
            r.rejections,
            r.errors,
            r.corrupted,
            r.harness_cpu * 100.0,
            if r.violations.is_empty() { String::new() } else { format!(" — BAND BROKEN: {}", r.violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")) }
        );
        for s in &r.samples {
            eprintln!("ladder:        e.g. {s}");
        }
        let broke = !r.violations.is_empty();
        results.push(r);
        if broke {
            stopped = Some(n);
            break;
        }
    }
    println!("{}", report::table(&results));
    match stopped {
        Some(n) => println!(
            "STOPPED at {n}: {}",
            results
                .last()
                .map(|r| r
                    .violations
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "))
                .unwrap_or_default()
        ),
        None => println!("every rung within its bands"),
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "label": args.label,
            "target": args.target,
            "model": args.model,
            "max_tokens": args.max_tokens,
            "mode": if args.open_loop { "open" } else { "closed" },
            "duration_s": args.duration,
            "lurkers": args.lurkers,
            "fabric": {
                "slots_with_model": fab.slots_with_model,
                "lanes": fab.lanes,
                "prefill_ns": fab.prefill_ns,
                "decode_ns": fab.decode_ns,
                "service_ms": service_ms,
                "capacity_rps": capacity,
                "prompt_tokens": refs.prompt_tokens,
                "solo_ms": refs.solo.as_secs_f64() * 1e3,
            },
            "calibration": calibration.as_ref().map(|c| json!({
                "clients": c.clients, "seconds": c.seconds, "rps": c.rps,
                "ratio_to_capacity": c.rps / capacity,
            })),
            "bands": bands,
            "rungs": results,
            "stopped_at": stopped,
            "appliance": report::APPLIANCE.iter().map(|(c, p50, p95)| json!({"clients": c, "p50_ms": p50, "p95_ms": p95})).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "fabricd ladder: {} × {} tokens, capacity {:.0}/s{}",
            args.model,
            args.max_tokens,
            capacity,
            args.label
                .as_ref()
                .map(|l| format!(" — {l}"))
                .unwrap_or_default()
        );
        std::fs::write(path, report::svg(&results, &title))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(stopped.is_none())
}
