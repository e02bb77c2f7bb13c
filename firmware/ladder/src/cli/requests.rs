//! Clients that wait for their answers, or requests due on a schedule.

use std::sync::Arc;
use std::time::Duration;

use ladder::bands::{Bands, Measures};
use ladder::calibrate::{calibrate, Calibration};
use ladder::client::Target;
use ladder::report::{self, RungResult};
use ladder::rung::{self, Lurkers, RungConfig};
use ladder::workload::{references, Workload};
use serde_json::json;

use super::args::Args;
use super::common::{broken, fabric, print_end, write};

/// Clients that wait for their answers (or an open loop): the ladder as
/// before typists.
pub async fn run(args: &Args, target: Target, bands: Bands) -> anyhow::Result<bool> {
    bands
        .refuse_unmeasured(Measures::Requests)
        .map_err(anyhow::Error::msg)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let workload = Arc::new(Workload::typing(&args.model, args.max_tokens));
    let fab = fabric(&target, &args.model).await?;
    let refs = Arc::new(references(&target, &workload, timeout).await?);
    let (capacity, service_ms) = fab.capacity(refs.prompt_tokens, args.max_tokens);
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
        let l = Lurkers::open(&target, args.lurkers, args.lurker_request).await;
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
            user_prefix: "ladder-".to_owned(),
        };
        let stats = rung::run(&target, &workload, &refs, &cfg).await;
        let mut r = report::summarize(
            &stats,
            capacity,
            service_ms,
            lurkers.as_ref().map(|l| (l.still_open(), args.lurkers)),
        );
        r.clients = n;
        r.violations = bands.check(n, &r);
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
            broken(&r.violations)
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
    print_end(
        stopped,
        results.last().map_or(&[][..], |r| &r.violations[..]),
    );
    if let Some(path) = &args.json {
        let doc = json!({
            "label": args.label,
            "workload": "requests",
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
        write(path, serde_json::to_vec_pretty(&doc)?)?;
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
        write(path, report::svg(&results, &title))?;
    }
    Ok(stopped.is_none())
}
