//! `--profile FILE`: weighted request classes sharing each rung, each
//! judged against its own target.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladder::bands::Bands;
use ladder::client::Target;
use ladder::profile::{Kind, Profile};
use ladder::report::{self, RungResult};
use ladder::rung::{self, cpu_time, RungConfig, Window};
use ladder::typists::report::TypistResult;
use ladder::typists::{Corpus, TypistsConfig};
use ladder::workload::{references, References, Workload};
use serde_json::json;

use super::args::Args;
use super::common::{broken, fabric, settle, write};
use super::typists;

/// How one class runs.
enum Plan {
    Typists(Box<TypistsConfig>),
    Requests {
        w: Arc<Workload>,
        refs: Arc<References>,
        capacity: f64,
        service_ms: f64,
    },
}

/// One class's rung.
enum Outcome {
    Typists(TypistResult),
    Requests(RungResult),
}

impl Outcome {
    fn violations(&self) -> &[ladder::bands::Violation] {
        match self {
            Outcome::Typists(r) => &r.violations,
            Outcome::Requests(r) => &r.violations,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            Outcome::Typists(r) => json!(r),
            Outcome::Requests(r) => json!(r),
        }
    }
}

pub async fn run(
    args: &Args,
    profile_path: &Path,
    target: Target,
    bands: Bands,
) -> anyhow::Result<bool> {
    let profile = Profile::load(profile_path)?;
    if args.bands.is_none() {
        anyhow::bail!(
            "a profile needs a bands file (--bands) with a target for each class, written before the run"
        );
    }
    bands
        .refuse_for_profile(&profile.kinds())
        .map_err(anyhow::Error::msg)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let (corpus, _) = typists::corpus(args)?;
    let keystrokes = typists::keystrokes(args)?;
    let warmup = typists::warmup(args, &keystrokes);
    let mut plans = Vec::new();
    for c in &profile.classes {
        let model = c.model.clone().unwrap_or_else(|| args.model.clone());
        let max_tokens = c.max_tokens.unwrap_or(args.max_tokens);
        let fab = fabric(&target, &model).await?;
        let plan = match c.kind {
            Kind::Typists => Plan::Typists(Box::new(TypistsConfig {
                typists: 0,
                seed: args.typing_seed,
                rung: 0,
                keystrokes: keystrokes.clone(),
                debounce: Duration::from_millis(c.debounce_ms.unwrap_or(args.debounce_ms)),
                connections: args.connections_per_typist,
                timeout,
                model: model.clone(),
                max_tokens,
                session_prefix: String::new(),
            })),
            Kind::Requests => {
                let mut w = Workload::typing(&model, max_tokens);
                w.stream = c.stream;
                // Long answers get fewer references: each is asked alone first.
                w.seeds = u64::from((128 / max_tokens).clamp(1, 8));
                let refs = references(&target, &w, timeout).await?;
                let (capacity, service_ms) = fab.capacity(refs.prompt_tokens, max_tokens);
                Plan::Requests {
                    w: Arc::new(w),
                    refs: Arc::new(refs),
                    capacity,
                    service_ms,
                }
            }
        };
        eprintln!(
            "ladder: class {} ({:?}, weight {}): {model}, up to {max_tokens} tokens{}; {} slot(s) hold it",
            c.name,
            c.kind,
            c.weight,
            if c.stream { ", streamed" } else { "" },
            fab.slots_with_model,
        );
        plans.push(plan);
    }
    let mut rungs = Vec::new();
    let mut by_class: Vec<Vec<(usize, Outcome)>> =
        profile.classes.iter().map(|_| Vec::new()).collect();
    let mut stopped = None;
    for (i, &n) in args.rungs.iter().enumerate() {
        let split = profile.split(n);
        let cpu0 = cpu_time();
        let start = Instant::now();
        let window = Window::after(start, warmup, Duration::from_secs_f64(args.duration));
        let daemon = tokio::spawn(ladder::daemon::counters_over(target.clone(), window));
        let mut tasks = Vec::new();
        for ((c, plan), &k) in profile.classes.iter().zip(&plans).zip(&split) {
            if k == 0 {
                tasks.push(None);
                continue;
            }
            let target = target.clone();
            let task = match plan {
                Plan::Typists(base) => {
                    let cfg = TypistsConfig {
                        typists: k,
                        rung: i as u64,
                        session_prefix: format!("{}-r{i}-t", c.name),
                        ..(**base).clone()
                    };
                    let corpus: Arc<Corpus> = corpus.clone();
                    tokio::spawn(async move {
                        ladder::typists::run::run_in(&target, &corpus, &cfg, start, window)
                            .await
                            .map(Ok)
                    })
                }
                Plan::Requests { w, refs, .. } => {
                    let cfg = RungConfig {
                        clients: k,
                        warmup,
                        duration: window.to - window.from,
                        timeout,
                        rate: None,
                        users: !args.anonymous,
                        user_prefix: format!("{}-", c.name),
                    };
                    let (w, refs) = (w.clone(), refs.clone());
                    tokio::spawn(async move {
                        Ok(Err(rung::run_in(&target, &w, &refs, &cfg, window).await))
                    })
                }
            };
            tasks.push(Some(task));
        }
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(match t {
                Some(t) => Some(t.await??),
                None => None,
            });
        }
        let daemon = daemon.await.ok().flatten();
        let wall = start.elapsed();
        let cpu = (cpu_time() - cpu0).as_secs_f64() / wall.as_secs_f64().max(1e-9);
        let mut classes = Vec::new();
        let mut broke = false;
        for (ci, ((c, plan), outcome)) in
            profile.classes.iter().zip(&plans).zip(outcomes).enumerate()
        {
            let Some(outcome) = outcome else { continue };
            let band = bands.for_class(&c.name, n);
            let k = split[ci];
            let o = match (outcome, plan) {
                (Ok(mut s), _) => {
                    s.harness_cpu = cpu;
                    s.wall = wall;
                    let mut r = ladder::typists::report::summarize(&s);
                    r.violations = band.check(&r);
                    eprintln!(
                        "ladder: {n:>5} clients, {}",
                        typists::line(&format!("{} × {k} typists", c.name), &r)
                    );
                    Outcome::Typists(r)
                }
                (
                    Err(mut s),
                    Plan::Requests {
                        capacity,
                        service_ms,
                        ..
                    },
                ) => {
                    s.harness_cpu = cpu;
                    s.wall = wall;
                    let mut r = report::summarize(&s, *capacity, *service_ms, None);
                    r.clients = k;
                    r.violations = band.check(&r);
                    eprintln!(
                        "ladder: {n:>5} clients, {} × {k}: {:.1} req/s, p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms{}, {} rejected, {} errors, {} corrupt{}",
                        c.name,
                        r.rps,
                        r.p50_ms,
                        r.p95_ms,
                        r.p99_ms,
                        r.ttft_p95_ms
                            .map_or(String::new(), |t| format!(", first token p95 {t:.1} ms")),
                        r.rejections,
                        r.errors,
                        r.corrupted,
                        broken(&r.violations),
                    );
                    Outcome::Requests(r)
                }
                (Err(_), Plan::Typists(_)) => continue,
            };
            let samples = match &o {
                Outcome::Typists(r) => &r.samples,
                Outcome::Requests(r) => &r.samples,
            };
            for s in samples {
                eprintln!("ladder:        e.g. {s}");
            }
            broke |= !o.violations().is_empty();
            classes.push(json!({
                "name": c.name,
                "kind": c.kind,
                "clients": k,
                "result": o.to_json(),
            }));
            by_class[ci].push((n, o));
        }
        rungs.push(json!({
            "clients": n,
            "split": split,
            "harness_cpu": cpu,
            "daemon": daemon,
            "classes": classes,
        }));
        settle(&target).await;
        if broke {
            stopped = Some(n);
            break;
        }
    }
    for (c, outcomes) in profile.classes.iter().zip(&by_class) {
        println!("## {} ({:?})\n", c.name, c.kind);
        match c.kind {
            Kind::Typists => {
                let rs: Vec<TypistResult> = outcomes
                    .iter()
                    .filter_map(|(_, o)| match o {
                        Outcome::Typists(r) => Some(r.clone()),
                        Outcome::Requests(_) => None,
                    })
                    .collect();
                println!("{}", ladder::typists::report::table(&rs));
            }
            Kind::Requests => {
                let rs: Vec<RungResult> = outcomes
                    .iter()
                    .filter_map(|(_, o)| match o {
                        Outcome::Requests(r) => Some(r.clone()),
                        Outcome::Typists(_) => None,
                    })
                    .collect();
                println!("{}", report::table(&rs));
            }
        }
        for (n, o) in outcomes {
            for v in o.violations() {
                println!("MISSED at {n} clients: {} {v}", c.name);
            }
        }
    }
    match stopped {
        Some(n) => println!("STOPPED at {n}: a class missed its target"),
        None => println!("every class within its target at every rung"),
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "label": args.label,
            "target": args.target,
            "workload": "mixed",
            "profile": {"file": profile_path.display().to_string(), "classes": profile.classes},
            "duration_s": args.duration,
            "warmup_s": warmup.as_secs_f64(),
            "keystroke_model": typists::describe(&keystrokes, args.debounce_ms),
            "bands": bands,
            "rungs": rungs,
            "stopped_at": stopped,
        });
        write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(stopped.is_none())
}
