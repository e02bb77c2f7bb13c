//! `--workload typists`: a rung's value is simultaneous typists.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ladder::bands::{Bands, Measures};
use ladder::calibrate::{calibrate_typists, TypistCalibration};
use ladder::client::Target;
use ladder::typists::report::{self, pause_ms, Curve, TypistResult};
use ladder::typists::{Corpus, KeystrokeModel, TypistsConfig};
use serde_json::json;

use super::args::Args;
use super::common::{broken, fabric, print_end, settle, write};

/// The corpus `--corpus` names, or the built-in one, and its name.
pub fn corpus(args: &Args) -> anyhow::Result<(Arc<Corpus>, String)> {
    let (c, name) = match &args.corpus {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let c = Corpus::parse(&text).with_context(|| p.display().to_string())?;
            (c, p.display().to_string())
        }
        None => (
            Corpus::kjv_genesis()?,
            "built in: Genesis, King James Version".to_owned(),
        ),
    };
    Ok((Arc::new(c), name))
}

/// The keystroke model the arguments describe.
pub fn keystrokes(args: &Args) -> anyhow::Result<KeystrokeModel> {
    let m = KeystrokeModel {
        interval_median: Duration::from_millis(args.keystroke_median_ms),
        interval_sigma: args.keystroke_sigma,
        pause_median: Duration::from_millis(args.pause_median_ms),
        pause_after_word: args.pause_after_word,
        ..KeystrokeModel::default()
    };
    m.validate()?;
    Ok(m)
}

/// The keystroke model as the results record it.
pub fn describe(m: &KeystrokeModel, debounce_ms: u64) -> serde_json::Value {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    json!({
        "interval": {
            "distribution": "log-normal",
            "median_ms": ms(m.interval_median),
            "sigma": m.interval_sigma,
            "min_ms": ms(m.interval_min),
            "max_ms": ms(m.interval_max),
        },
        "pause": {
            "distribution": "log-normal",
            "median_ms": ms(m.pause_median),
            "sigma": m.pause_sigma,
            "min_ms": ms(m.pause_min),
            "max_ms": ms(m.pause_max),
            "after_word": m.pause_after_word,
            "after_clause": m.pause_after_clause,
            "after_sentence": 1.0,
            "after_passage": 1.0,
        },
        "start_spread_ms": ms(m.start_spread),
        "debounce_ms": debounce_ms,
        "request": "one per keystroke (or per debounce), temperature 0, with the typist's session",
    })
}

/// The default warm-up: every typist started, and 2 s more.
pub fn warmup(args: &Args, m: &KeystrokeModel) -> Duration {
    args.warmup
        .map_or(m.start_spread + Duration::from_secs(2), |w| {
            Duration::from_secs_f64(w)
        })
}

/// A line for a rung.
pub fn line(what: &str, r: &TypistResult) -> String {
    format!(
        "{what}: {:.0} keys/s, {:.2} req/key, fabric {} req/key, {:.1}% superseded, {} stale, {} cache, {} typed-forward, {} joined; pause p50 {} ms, p95 {} ms, p99 {} ms ({} pauses, {} held, {} missed); {} rejected, {} errors, {} corrupt; harness {:.0}% cpu, lag p99 {:.1} ms{}",
        r.keystrokes_per_s,
        r.requests_per_keystroke,
        r.fabric_requests_per_keystroke
            .map_or("-".to_owned(), |f| format!("{f:.2}")),
        r.superseded_share * 100.0,
        r.stale,
        r.cache_hits,
        r.typed_forward_hits,
        r.joined,
        pause_ms(r.pause_p50_ms),
        pause_ms(r.pause_p95_ms),
        pause_ms(r.pause_p99_ms),
        r.pauses,
        r.pauses_held,
        r.pauses_missed,
        r.rejections,
        r.errors,
        r.corrupted,
        r.harness_cpu * 100.0,
        r.harness_lag_p99_ms,
        broken(&r.violations),
    )
}

/// The typists' calibration, said.
pub fn say_calibration(c: &TypistCalibration) {
    let slow = c.pause_p99_ms.is_none_or(|p| p > 50.0)
        || c.harness_lag_p99_ms > 20.0
        || c.harness_cpu > 0.8
        || c.errors > 0;
    eprintln!(
        "ladder: the harness alone, {} typists against an instant server: {:.0} keys/s, pause p50 {} ms, p99 {} ms, keystrokes late by {:.1} ms at p99 ({:.1} ms at most), {:.0}% of a core with the server{}",
        c.typists,
        c.keystrokes_per_s,
        pause_ms(c.pause_p50_ms),
        pause_ms(c.pause_p99_ms),
        c.harness_lag_p99_ms,
        c.harness_lag_max_ms,
        c.harness_cpu * 100.0,
        if slow {
            " — OVER 50 ms, 20 ms late or 80% of a core: this harness may be the bottleneck"
        } else {
            ""
        }
    );
}

pub async fn run(args: &Args, target: Target, bands: Bands) -> anyhow::Result<bool> {
    bands
        .refuse_unmeasured(Measures::Typists)
        .map_err(anyhow::Error::msg)?;
    let (corpus, corpus_name) = corpus(args)?;
    let model = keystrokes(args)?;
    let fab = fabric(&target, &args.model).await?;
    let (capacity, service_ms) = fab.capacity(0.0, args.max_tokens);
    eprintln!(
        "ladder: typists on {} at {}: {} slot(s) × {} lanes, about {:.1} ms of fabric a request of {} tokens (capacity about {:.0}/s); corpus {} ({} passages, {} places to start)",
        args.model,
        target.addr,
        fab.slots_with_model,
        fab.lanes,
        service_ms,
        args.max_tokens,
        capacity,
        corpus_name,
        corpus.passages(),
        corpus.starting_points(),
    );
    let base = TypistsConfig {
        typists: 0,
        seed: args.typing_seed,
        rung: 0,
        keystrokes: model.clone(),
        debounce: Duration::from_millis(args.debounce_ms),
        connections: args.connections_per_typist,
        timeout: Duration::from_secs_f64(args.timeout),
        model: args.model.clone(),
        max_tokens: args.max_tokens,
        session_prefix: String::new(),
    };
    let warmup = warmup(args, &model);
    let calibration = if args.no_calibrate {
        None
    } else {
        let n = args
            .calibrate_typists
            .or_else(|| args.rungs.iter().copied().max())
            .unwrap_or(1);
        let cfg = TypistsConfig {
            typists: n,
            rung: u64::MAX,
            session_prefix: "calibrate-".to_owned(),
            ..base.clone()
        };
        let c = calibrate_typists(
            &corpus,
            &cfg,
            warmup,
            Duration::from_secs_f64(args.calibrate_secs.max(5.0)),
        )
        .await?;
        say_calibration(&c);
        Some(c)
    };
    let mut results: Vec<TypistResult> = Vec::new();
    let mut stopped = None;
    for (i, &n) in args.rungs.iter().enumerate() {
        let cfg = TypistsConfig {
            typists: n,
            rung: i as u64,
            session_prefix: format!("ladder-r{i}-t"),
            ..base.clone()
        };
        let stats = ladder::typists::run::run(
            &target,
            &corpus,
            &cfg,
            warmup,
            Duration::from_secs_f64(args.duration),
        )
        .await?;
        let mut r = report::summarize(&stats);
        r.violations = bands.check(n, &r);
        eprintln!("ladder: {}", line(&format!("{n:>5} typists"), &r));
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
    let budget = bands.all.max_pause_p95_ms.unwrap_or(1000.0);
    let label = args.label.clone().unwrap_or_else(|| "this run".to_owned());
    let this = Curve::of(&label, &results);
    print_end(
        stopped,
        results.last().map_or(&[][..], |r| &r.violations[..]),
    );
    // The last rung of the unbroken run from the first: the run's typist count.
    let within = results
        .iter()
        .take_while(|r| r.violations.is_empty())
        .map(|r| r.typists)
        .last();
    let count = |v: Option<f64>| v.map_or("no".to_owned(), |t| format!("{t:.0}"));
    println!(
        "within its bands up to {} typists; pause-suggestion p95 within {budget:.0} ms up to {}",
        count(within.map(|t| t as f64)),
        count(this.held_up_to(budget)),
    );
    if let Some(path) = &args.json {
        let doc = json!({
            "label": args.label,
            "target": args.target,
            "workload": "typists",
            "model": args.model,
            "max_tokens": args.max_tokens,
            "duration_s": args.duration,
            "warmup_s": warmup.as_secs_f64(),
            "typing_seed": args.typing_seed,
            "connections_per_typist": args.connections_per_typist,
            "corpus": {"name": corpus_name, "passages": corpus.passages(), "starting_points": corpus.starting_points()},
            "keystroke_model": describe(&model, args.debounce_ms),
            "fabric": {
                "slots_with_model": fab.slots_with_model,
                "lanes": fab.lanes,
                "prefill_ns": fab.prefill_ns,
                "decode_ns": fab.decode_ns,
                "capacity_rps_at_max_tokens": capacity,
            },
            "calibration": calibration,
            "bands": bands,
            "budget_ms": budget,
            "rungs": results,
            "stopped_at": stopped,
            "within_bands_up_to": within,
            "p95_within_budget_up_to": this.held_up_to(budget),
        });
        write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    if let Some(path) = &args.svg {
        let mut curves = Vec::new();
        for p in &args.compare {
            curves.push(curve_from(p)?);
        }
        curves.push(this);
        let title = format!(
            "fabricd typists: {} × up to {} tokens{}",
            args.model,
            args.max_tokens,
            args.label
                .as_ref()
                .map(|l| format!(" — {l}"))
                .unwrap_or_default()
        );
        write(path, report::svg(&curves, &title, budget))?;
    }
    Ok(stopped.is_none())
}

fn curve_from(p: &Path) -> anyhow::Result<Curve> {
    let text = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", p.display()))?;
    Curve::from_json(&doc, None).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}
