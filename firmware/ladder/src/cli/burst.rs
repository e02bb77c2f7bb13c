//! `--burst N`: N requests released at the same instant.

use std::sync::Arc;
use std::time::Duration;

use ladder::bands::{Bands, Measures};
use ladder::calibrate::calibrate;
use ladder::client::Target;
use ladder::report::{self, RungResult};
use ladder::workload::{references, Workload};
use serde_json::json;

use super::args::Args;
use super::common::{broken, fabric, settle, write};

pub async fn run(
    args: &Args,
    sizes: &[usize],
    target: Target,
    bands: Bands,
) -> anyhow::Result<bool> {
    bands
        .refuse_unmeasured(Measures::Requests)
        .map_err(anyhow::Error::msg)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let workload = Arc::new(Workload::typing(&args.model, args.max_tokens));
    let fab = fabric(&target, &args.model).await?;
    let refs = Arc::new(references(&target, &workload, timeout).await?);
    let (capacity, service_ms) = fab.capacity(refs.prompt_tokens, args.max_tokens);
    eprintln!(
        "ladder: bursts of {} on {} at {}: {} slot(s) × {} lanes, {:.2} ms of fabric a request; capacity {:.1} completions/s",
        sizes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        args.model,
        target.addr,
        fab.slots_with_model,
        fab.lanes,
        service_ms,
        capacity,
    );
    let calibration = if args.no_calibrate {
        None
    } else {
        let c = calibrate(
            args.calibrate_clients,
            Duration::from_secs_f64(args.calibrate_secs),
        )
        .await?;
        eprintln!(
            "ladder: harness ceiling {:.0} requests/s with {} clients against an instant server: {:.1}× the fabric's capacity",
            c.rps,
            c.clients,
            c.rps / capacity
        );
        Some(c)
    };
    let mut results: Vec<RungResult> = Vec::new();
    let mut stopped = None;
    for &n in sizes {
        let stats =
            ladder::burst::run(&target, &workload, &refs, n, timeout, !args.anonymous).await;
        let mut r = report::summarize(&stats, capacity, service_ms, None);
        r.clients = n;
        r.violations = bands.check(n, &r);
        eprintln!(
            "ladder: burst of {n}: {} served in {:.2} s, {:.1} req/s ({:.1}% of capacity), p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} rejected, {} errors, {} corrupt, harness {:.0}% cpu{}",
            r.ok,
            r.seconds,
            r.rps,
            r.capacity_fraction * 100.0,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.rejections,
            r.errors,
            r.corrupted,
            r.harness_cpu * 100.0,
            broken(&r.violations),
        );
        for s in &r.samples {
            eprintln!("ladder:        e.g. {s}");
        }
        let broke = !r.violations.is_empty();
        results.push(r);
        settle(&target).await;
        if broke {
            stopped = Some(n);
            break;
        }
    }
    println!("{}", report::table(&results));
    match stopped {
        Some(n) => println!("STOPPED at a burst of {n}"),
        None => println!("every burst within its bands"),
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "label": args.label,
            "target": args.target,
            "workload": "burst",
            "model": args.model,
            "max_tokens": args.max_tokens,
            "fabric": {
                "slots_with_model": fab.slots_with_model,
                "lanes": fab.lanes,
                "service_ms": service_ms,
                "capacity_rps": capacity,
                "prompt_tokens": refs.prompt_tokens,
            },
            "calibration": calibration,
            "bands": bands,
            "rungs": results,
            "stopped_at": stopped,
        });
        write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    if let Some(path) = &args.svg {
        write(
            path,
            report::svg(
                &results,
                &format!("fabricd burst: {} × {} tokens", args.model, args.max_tokens),
            ),
        )?;
    }
    Ok(stopped.is_none())
}
