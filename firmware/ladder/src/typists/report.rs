//! Typists' results: a rung summarized, the table, and the SVG that puts
//! runs side by side (the features off and on, the model on both slots).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use serde_json::Value;

use super::typist::TypistStats;
use crate::bands::{Figure, Figures, Violation};
use crate::report::{axes, escape, series, svg_head};

/// One rung of typists, summarized.
#[derive(Debug, Clone, Serialize)]
pub struct TypistResult {
    pub typists: usize,
    pub seconds: f64,
    pub keystrokes: u64,
    pub keystrokes_per_s: f64,
    /// Requests sent per keystroke (under 1 with a debounce).
    pub requests: u64,
    pub requests_per_keystroke: f64,
    /// Requests that reached the fabric (the shell's completed and
    /// cancelled counters over the window), when the daemon has them.
    pub fabric_requests: Option<f64>,
    pub fabric_requests_per_keystroke: Option<f64>,
    /// Answers received, of every kind.
    pub answers: u64,
    pub completions: u64,
    /// Completions discarded: stale for the field when they came.
    pub stale: u64,
    pub superseded: u64,
    /// Superseded answers ÷ answers.
    pub superseded_share: f64,
    /// Completions by `X-Fabricd-Source` (`none`: no header).
    pub sources: BTreeMap<String, u64>,
    pub cache_hits: u64,
    pub typed_forward_hits: u64,
    pub joined: u64,
    /// Typed outcomes by type, `superseded` included.
    pub typed: BTreeMap<String, u64>,
    /// Typed outcomes other than `superseded` (which a typing UI expects).
    pub rejections: u64,
    pub errors: u64,
    pub corrupted: u64,
    pub samples: Vec<String>,
    pub pauses: u64,
    /// Pauses where a valid suggestion was already held.
    pub pauses_held: u64,
    /// Pauses that got no suggestion before typing went on.
    pub pauses_missed: u64,
    /// Suggestion latency at a pause; `null`: the percentile falls among
    /// the missed pauses (later than the pause itself, over 1 s).
    pub pause_p50_ms: Option<f64>,
    pub pause_p95_ms: Option<f64>,
    pub pause_p99_ms: Option<f64>,
    pub harness_cpu: f64,
    pub harness_lag_p99_ms: f64,
    pub harness_lag_max_ms: f64,
    /// The daemon's counters over the window.
    pub daemon: Option<BTreeMap<String, f64>>,
    /// Per keystroke, what kept a request off the fabric, by mechanism
    /// ([`OFF_FABRIC`]): answered at the edge (cache, typed forward,
    /// joined), superseded before a context (held, queued, late). With
    /// the requests a keystroke that reached the fabric and those not
    /// sent (a client's debounce) they make one.
    pub off_fabric: BTreeMap<String, f64>,
    pub violations: Vec<Violation>,
}

/// The mechanisms that keep a keystroke's request off the fabric, and the
/// daemon's counter of each (over the rung's window).
pub const OFF_FABRIC: [(&str, &str); 6] = [
    ("cache", "fabricd_answers_total{source=\"cache\"}"),
    (
        "typed forward",
        "fabricd_answers_total{source=\"typed-forward\"}",
    ),
    ("joined", "fabricd_answers_total{source=\"joined\"}"),
    ("held", "fabricd_superseded_total{state=\"held\"}"),
    ("queued", "fabricd_superseded_total{state=\"queued\"}"),
    ("late", "fabricd_superseded_total{state=\"late\"}"),
];

impl Figures for TypistResult {
    fn figure(&self, f: Figure) -> Option<f64> {
        let pause = |p: Option<f64>| {
            if self.pauses == 0 {
                None
            } else {
                Some(p.unwrap_or(f64::INFINITY))
            }
        };
        match f {
            Figure::Errors => Some(self.errors as f64),
            Figure::Corrupted => Some(self.corrupted as f64),
            Figure::Rejections => Some(self.rejections as f64),
            Figure::HarnessCpu => Some(self.harness_cpu),
            Figure::PauseP50Ms => pause(self.pause_p50_ms),
            Figure::PauseP95Ms => pause(self.pause_p95_ms),
            Figure::PauseP99Ms => pause(self.pause_p99_ms),
            Figure::Pauses => Some(self.pauses as f64),
            Figure::HarnessLagP99Ms => Some(self.harness_lag_p99_ms),
            _ => None,
        }
    }
}

/// Summarizes a rung of typists.
pub fn summarize(s: &TypistStats) -> TypistResult {
    let secs = s.window.as_secs_f64().max(1e-9);
    let per_key = |n: f64| n / (s.keystrokes.max(1) as f64);
    let fabric = s.daemon.as_ref().and_then(crate::daemon::fabric_requests);
    let superseded = s.typed.get("superseded").copied().unwrap_or(0);
    let answers = s.answers();
    let source = |k: &str| s.sources.get(k).copied().unwrap_or(0);
    let lag = |q: f64| s.lag.value_at_quantile(q) as f64 / 1000.0;
    let off_fabric = s
        .daemon
        .iter()
        .flat_map(|d| {
            OFF_FABRIC.iter().map(|(what, counter)| {
                (
                    what.to_string(),
                    per_key(d.get(*counter).copied().unwrap_or(0.0)),
                )
            })
        })
        .collect();
    TypistResult {
        typists: s.typists,
        seconds: secs,
        keystrokes: s.keystrokes,
        keystrokes_per_s: s.keystrokes as f64 / secs,
        requests: s.requests,
        requests_per_keystroke: per_key(s.requests as f64),
        fabric_requests: fabric,
        fabric_requests_per_keystroke: fabric.map(per_key),
        answers,
        completions: s.completions,
        stale: s.stale,
        superseded,
        superseded_share: superseded as f64 / answers.max(1) as f64,
        sources: s.sources.clone(),
        cache_hits: source("cache"),
        typed_forward_hits: source("typed-forward"),
        joined: source("joined"),
        typed: s.typed.clone(),
        rejections: s.typed.values().sum::<u64>() - superseded,
        errors: s.raw,
        corrupted: s.corrupt,
        samples: s.samples.clone(),
        pauses: s.pauses,
        pauses_held: s.pauses_held,
        pauses_missed: s.pauses_missed,
        pause_p50_ms: s.pause_quantile_ms(0.50),
        pause_p95_ms: s.pause_quantile_ms(0.95),
        pause_p99_ms: s.pause_quantile_ms(0.99),
        harness_cpu: s.harness_cpu,
        harness_lag_p99_ms: lag(0.99),
        harness_lag_max_ms: s.lag.max() as f64 / 1000.0,
        daemon: s.daemon.clone(),
        off_fabric,
        violations: Vec::new(),
    }
}

/// The off-fabric shares as a table cell: the whole, then each mechanism
/// that kept any off (`-` without the daemon's counters).
fn off_fabric_cell(r: &TypistResult) -> String {
    if r.off_fabric.is_empty() {
        return "-".to_owned();
    }
    let whole: f64 = r.off_fabric.values().sum();
    let parts: Vec<String> = OFF_FABRIC
        .iter()
        .filter_map(|(what, _)| {
            let v = r.off_fabric.get(*what).copied().unwrap_or(0.0);
            (v >= 0.0005).then(|| format!("{what} {:.0}%", v * 100.0))
        })
        .collect();
    format!("{:.0}% ({})", whole * 100.0, parts.join(", "))
}

/// A pause percentile for a table: `missed` when it falls among the
/// pauses that got nothing.
pub fn pause_ms(v: Option<f64>) -> String {
    v.map_or("missed".to_owned(), |v| format!("{v:.1}"))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.digits$}"))
}

/// The table, one row a rung.
pub fn table(rungs: &[TypistResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| typists | keys/s | req/key | fabric req/key | off the fabric, a key | superseded | stale | cache | typed fwd | joined | pauses | held | missed | pause p50 ms | pause p95 ms | pause p99 ms | rejected | errors | corrupt | harness cpu | lag p99 ms |"
    );
    let _ = writeln!(
        out,
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rungs {
        let rejected = r
            .typed
            .iter()
            .filter(|(k, _)| *k != "superseded")
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>();
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.2} | {} | {} | {:.1}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0}% | {:.1} |",
            r.typists,
            r.keystrokes_per_s,
            r.requests_per_keystroke,
            opt(r.fabric_requests_per_keystroke, 2),
            off_fabric_cell(r),
            r.superseded_share * 100.0,
            r.stale,
            r.cache_hits,
            r.typed_forward_hits,
            r.joined,
            r.pauses,
            r.pauses_held,
            r.pauses_missed,
            pause_ms(r.pause_p50_ms),
            pause_ms(r.pause_p95_ms),
            pause_ms(r.pause_p99_ms),
            if rejected.is_empty() { "0".to_owned() } else { rejected.join(", ") },
            r.errors,
            r.corrupted,
            r.harness_cpu * 100.0,
            r.harness_lag_p99_ms,
        );
    }
    out
}

/// One run's curve.
#[derive(Debug, Clone)]
pub struct Curve {
    pub label: String,
    pub points: Vec<Point>,
}

/// One rung of a curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub typists: f64,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub fabric_per_key: Option<f64>,
    pub superseded: f64,
}

impl Curve {
    pub fn of(label: &str, rungs: &[TypistResult]) -> Curve {
        Curve {
            label: label.to_owned(),
            points: rungs
                .iter()
                .map(|r| Point {
                    typists: r.typists as f64,
                    p50: r.pause_p50_ms,
                    p95: r.pause_p95_ms,
                    fabric_per_key: r.fabric_requests_per_keystroke,
                    superseded: r.superseded_share,
                })
                .collect(),
        }
    }

    /// A curve from an earlier run's JSON (`--json` of `--workload
    /// typists`), labelled `label` or else the run's own label.
    pub fn from_json(doc: &Value, label: Option<&str>) -> Result<Curve, String> {
        if doc["workload"] != "typists" {
            return Err(format!("not a typists run (workload {})", doc["workload"]));
        }
        let rungs = doc["rungs"].as_array().ok_or("no rungs")?;
        let points = rungs
            .iter()
            .map(|r| {
                Ok(Point {
                    typists: r["typists"].as_f64().ok_or("a rung without typists")?,
                    p50: r["pause_p50_ms"].as_f64(),
                    p95: r["pause_p95_ms"].as_f64(),
                    fabric_per_key: r["fabric_requests_per_keystroke"].as_f64(),
                    superseded: r["superseded_share"].as_f64().unwrap_or(0.0),
                })
            })
            .collect::<Result<Vec<_>, &str>>()?;
        Ok(Curve {
            label: label
                .map(str::to_owned)
                .or_else(|| doc["label"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "earlier run".to_owned()),
            points,
        })
    }

    /// The most typists of a rung whose pause p95 kept within `budget_ms`,
    /// with every rung before it within it too.
    pub fn held_up_to(&self, budget_ms: f64) -> Option<f64> {
        self.points
            .iter()
            .take_while(|p| p.p95.is_some_and(|v| v <= budget_ms))
            .map(|p| p.typists)
            .last()
    }
}

const COLORS: [&str; 4] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];

/// Pause-suggestion latency and fabric requests per keystroke against
/// typists, one curve a run, with the budget.
pub fn svg(curves: &[Curve], title: &str, budget_ms: f64) -> String {
    // A legend line a curve: two to a line overlapped once labels grew.
    let (w, h) = (900.0, 704.0 + 16.0 * curves.len() as f64);
    let (left, right) = (80.0, 860.0);
    let max_typists = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.typists))
        .fold(10.0, f64::max);
    let x = |t: f64| left + (right - left) * t / max_typists;
    let mut s = svg_head(w, h, title);

    // Top: the suggestion latency at a pause, log scale; missed above.
    let (t0, t1) = (70.0, 390.0);
    let missed_y = t0 - 14.0;
    let (lmin, lmax) = (1.0f64, 20_000.0f64);
    let yl = |v: f64| {
        t1 - (t1 - t0) * (v.clamp(lmin, lmax).log10() - lmin.log10())
            / (lmax.log10() - lmin.log10())
    };
    axes(
        &mut s,
        left,
        right,
        t0,
        t1,
        "suggestion latency at a pause, ms (log)",
    );
    let mut tick = 1.0;
    while tick <= lmax {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 6.0,
            yl(tick) + 4.0,
            tick
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{right}" y1="{0}" y2="{0}" stroke="#eee"/>"##,
            yl(tick)
        );
        tick *= 10.0;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" x2="{right}" y1="{0}" y2="{0}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{right}" y="{1}" text-anchor="end" fill="#d62728">budget {budget_ms:.0} ms</text>"##,
        yl(budget_ms),
        yl(budget_ms) - 6.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="{}" fill="#555">▲ above the chart: the percentile got no suggestion before typing went on</text>"##,
        missed_y - 8.0
    );
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let y = |v: Option<f64>| v.map_or(missed_y, yl);
        let p95: Vec<_> = c.points.iter().map(|p| (x(p.typists), y(p.p95))).collect();
        let p50: Vec<_> = c.points.iter().map(|p| (x(p.typists), y(p.p50))).collect();
        series(&mut s, &p95, color, false);
        series(&mut s, &p50, color, true);
    }

    // Bottom: fabric requests per keystroke.
    let (b0, b1) = (450.0, 640.0);
    let fmax = curves
        .iter()
        .flat_map(|c| c.points.iter().filter_map(|p| p.fabric_per_key))
        .fold(1.0, f64::max)
        * 1.15;
    let yf = |v: f64| b1 - (b1 - b0) * v / fmax;
    axes(&mut s, left, right, b0, b1, "fabric requests per keystroke");
    for i in 0..=4 {
        let v = fmax * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{:.2}</text>"#,
            left - 6.0,
            yf(v) + 4.0,
            v
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{right}" y1="{0}" y2="{0}" stroke="#eee"/>"##,
            yf(v)
        );
    }
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<_> = c
            .points
            .iter()
            .filter_map(|p| p.fabric_per_key.map(|f| (x(p.typists), yf(f))))
            .collect();
        series(&mut s, &pts, color, false);
    }

    // X axis labels (both plots).
    let step = nice_step(max_typists / 8.0);
    let mut t = 0.0;
    while t <= max_typists + 1e-9 {
        for y in [t1, b1] {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
                x(t),
                y + 16.0,
                t
            );
        }
        t += step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">simultaneous typists</text>"#,
        w / 2.0,
        b1 + 36.0
    );
    // Legend.
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let ly = 690.0 + 16.0 * i as f64;
        let lx = left;
        let held = c
            .held_up_to(budget_ms)
            .map_or("none".to_owned(), |t| format!("{t:.0}"));
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/>"#,
            lx + 18.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{} (p95 solid, p50 dashed; within budget up to {held})</text>"#,
            lx + 24.0,
            ly + 4.0,
            escape(&c.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.max(1.0).log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(typists: f64, p95: Option<f64>) -> Point {
        Point {
            typists,
            p50: p95.map(|v| v / 2.0),
            p95,
            fabric_per_key: Some(1.0),
            superseded: 0.0,
        }
    }

    #[test]
    fn a_curve_holds_up_to_its_last_rung_within_the_budget() {
        let c = Curve {
            label: "on".into(),
            points: vec![
                point(50.0, Some(100.0)),
                point(100.0, Some(900.0)),
                point(150.0, None),
                point(200.0, Some(500.0)),
            ],
        };
        assert_eq!(c.held_up_to(1000.0), Some(100.0));
        assert_eq!(c.held_up_to(50.0), None);
        let plot = svg(&[c.clone(), c], "t & <t>", 1000.0);
        assert!(plot.starts_with("<svg") && plot.contains("polyline"));
        assert!(plot.contains("t &amp; &lt;t&gt;"));
        assert!(plot.contains("within budget up to 100"));
    }

    #[test]
    fn a_curve_reads_back_from_a_runs_json() {
        let doc = serde_json::json!({
            "workload": "typists",
            "label": "off",
            "rungs": [
                {"typists": 50, "pause_p50_ms": 10.0, "pause_p95_ms": 40.0, "fabric_requests_per_keystroke": 1.0, "superseded_share": 0.0},
                {"typists": 100, "pause_p50_ms": null, "pause_p95_ms": null, "fabric_requests_per_keystroke": null, "superseded_share": 0.0}
            ]
        });
        let c = Curve::from_json(&doc, None).expect("curve");
        assert_eq!(c.label, "off");
        assert_eq!(
            c.points[1],
            Point {
                typists: 100.0,
                p50: None,
                p95: None,
                fabric_per_key: None,
                superseded: 0.0
            }
        );
        assert_eq!(c.held_up_to(1000.0), Some(50.0));
        assert!(Curve::from_json(&serde_json::json!({"workload": "closed"}), None).is_err());
    }

    #[test]
    fn what_kept_keystrokes_off_the_fabric_is_read_from_the_daemons_counters() {
        let mut s = TypistStats::new(10);
        s.keystrokes = 200;
        s.daemon = Some(BTreeMap::from([
            ("fabricd_superseded_total{state=\"held\"}".to_owned(), 100.0),
            (
                "fabricd_superseded_total{state=\"queued\"}".to_owned(),
                20.0,
            ),
            ("fabricd_answers_total{source=\"cache\"}".to_owned(), 10.0),
            ("fabricd_shell_completed_total".to_owned(), 70.0),
        ]));
        let r = summarize(&s);
        assert_eq!(r.off_fabric["held"], 0.5);
        assert_eq!(r.off_fabric["queued"], 0.1);
        assert_eq!(r.off_fabric["typed forward"], 0.0);
        assert_eq!(r.fabric_requests_per_keystroke, Some(0.35));
        assert_eq!(off_fabric_cell(&r), "65% (cache 5%, held 50%, queued 10%)");
        // A bare server has no counters: nothing to say.
        assert_eq!(off_fabric_cell(&summarize(&TypistStats::new(1))), "-");
    }
}
