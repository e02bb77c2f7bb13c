//! The results: a table per rung, JSON, and an SVG plot.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::bands::{Figure, Figures, Violation};
use crate::rung::RungStats;

/// The appliance's figures this project grew from (per-user p50/p95 in ms,
/// by concurrent clients), for comparison.
pub const APPLIANCE: [(usize, f64, f64); 5] = [
    (1, 17.0, 30.0),
    (100, 450.0, 545.0),
    (500, 2000.0, 2400.0),
    (1000, 3800.0, 4400.0),
    (2000, 6300.0, 9400.0),
];

/// One rung, summarized.
#[derive(Debug, Clone, Serialize)]
pub struct RungResult {
    pub clients: usize,
    pub seconds: f64,
    pub ok: u64,
    pub rps: f64,
    pub tokens_per_s: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub typed: BTreeMap<String, u64>,
    pub rejections: u64,
    pub errors: u64,
    pub corrupted: u64,
    pub samples: Vec<String>,
    pub capacity_rps: f64,
    pub capacity_fraction: f64,
    pub ideal_p50_ms: f64,
    pub p50_over_ideal: f64,
    pub p95_over_p50: f64,
    pub harness_cpu: f64,
    pub lurkers_open: Option<usize>,
    /// Lurkers the server closed, or that never connected.
    pub lurkers_closed: Option<usize>,
    pub retry_after_p50_ms: Option<f64>,
    /// An event stream's first token (streams only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_p95_ms: Option<f64>,
    pub violations: Vec<Violation>,
}

impl Figures for RungResult {
    fn figure(&self, f: Figure) -> Option<f64> {
        Some(match f {
            Figure::Errors => self.errors as f64,
            Figure::Corrupted => self.corrupted as f64,
            Figure::Rejections => self.rejections as f64,
            Figure::P50Ms => self.p50_ms,
            Figure::P95Ms => self.p95_ms,
            Figure::P99Ms => self.p99_ms,
            Figure::Rps => self.rps,
            Figure::CapacityFraction => self.capacity_fraction,
            Figure::P95OverP50 => self.p95_over_p50,
            Figure::P50OverIdeal => self.p50_over_ideal,
            Figure::HarnessCpu => self.harness_cpu,
            Figure::LurkersClosed => self.lurkers_closed? as f64,
            Figure::TtftP95Ms => self.ttft_p95_ms?,
            Figure::PauseP50Ms
            | Figure::PauseP95Ms
            | Figure::PauseP99Ms
            | Figure::Pauses
            | Figure::HarnessLagP99Ms => return None,
        })
    }
}

/// Summarizes a rung. `service_ms` is the fabric's own time for one
/// request; `capacity` its completions per second for this workload.
pub fn summarize(
    s: &RungStats,
    capacity: f64,
    service_ms: f64,
    lurkers: Option<(usize, usize)>,
) -> RungResult {
    let q = |p: f64| s.latency.value_at_quantile(p) as f64 / 1000.0;
    let secs = s.window.as_secs_f64().max(1e-9);
    let rps = s.ok as f64 / secs;
    let (p50, p95) = (q(0.5), q(0.95));
    // Little's law for a closed loop: N clients each waiting R with the
    // fabric completing C per second gives R = N / C once saturated.
    let ideal = service_ms.max(s.clients as f64 / capacity.max(1e-9) * 1000.0);
    RungResult {
        clients: s.clients,
        seconds: secs,
        ok: s.ok,
        rps,
        tokens_per_s: s.tokens as f64 / secs,
        p50_ms: p50,
        p95_ms: p95,
        p99_ms: q(0.99),
        max_ms: s.latency.max() as f64 / 1000.0,
        typed: s.typed.clone(),
        rejections: s.rejections(),
        errors: s.raw,
        corrupted: s.corrupt,
        samples: s.samples.clone(),
        capacity_rps: capacity,
        capacity_fraction: rps / capacity.max(1e-9),
        ideal_p50_ms: ideal,
        p50_over_ideal: if s.ok > 0 { p50 / ideal } else { 0.0 },
        p95_over_p50: if p50 > 0.0 { p95 / p50 } else { 0.0 },
        harness_cpu: s.harness_cpu,
        lurkers_open: lurkers.map(|(open, _)| open),
        lurkers_closed: lurkers.map(|(open, wanted)| wanted.saturating_sub(open)),
        retry_after_p50_ms: (!s.retry_after.is_empty())
            .then(|| s.retry_after.value_at_quantile(0.5) as f64),
        ttft_p50_ms: (!s.ttft.is_empty()).then(|| s.ttft.value_at_quantile(0.5) as f64 / 1000.0),
        ttft_p95_ms: (!s.ttft.is_empty()).then(|| s.ttft.value_at_quantile(0.95) as f64 / 1000.0),
        violations: Vec::new(),
    }
}

/// The table, one row a rung.
pub fn table(rungs: &[RungResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| clients | req/s | tok/s | cap % | p50 ms | p95 ms | p99 ms | ideal p50 | p50/ideal | p95/p50 | rejected | errors | corrupt | harness cpu | lurkers |"
    );
    let _ = writeln!(
        out,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rungs {
        let rejected = if r.typed.is_empty() {
            "0".to_owned()
        } else {
            r.typed
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} | {} | {} | {} | {:.0}% | {} |",
            r.clients,
            r.rps,
            r.tokens_per_s,
            r.capacity_fraction * 100.0,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            r.ideal_p50_ms,
            r.p50_over_ideal,
            r.p95_over_p50,
            rejected,
            r.errors,
            r.corrupted,
            r.harness_cpu * 100.0,
            r.lurkers_open.map_or("-".to_owned(), |n| n.to_string()),
        );
    }
    out
}

fn log2(x: f64) -> f64 {
    x.max(1.0).log2()
}

/// Throughput and latency against clients, with the capacity, the queueing
/// ideal and the appliance's figures for comparison.
/// An SVG document's opening: its size, a white page and `title` on top.
pub fn svg_head(w: f64, h: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">{}</text>"#,
        w / 2.0,
        escape(title)
    );
    s
}

pub fn svg(rungs: &[RungResult], title: &str) -> String {
    let (w, h) = (900.0, 700.0);
    let (left, right) = (80.0, 860.0);
    let max_clients = rungs.iter().map(|r| r.clients).max().unwrap_or(1).max(2000) as f64;
    let x = |c: f64| left + (right - left) * log2(c) / log2(max_clients);
    let mut s = svg_head(w, h, title);

    // Top: throughput.
    let (t0, t1) = (50.0, 300.0);
    let cap = rungs.iter().map(|r| r.capacity_rps).fold(0.0, f64::max);
    let ymax = rungs.iter().map(|r| r.rps).fold(cap, f64::max) * 1.15 + 1.0;
    let yt = |v: f64| t1 - (t1 - t0) * v / ymax;
    axes(&mut s, left, right, t0, t1, "completions / s");
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{:.0}</text>"#,
            left - 6.0,
            yt(v) + 4.0,
            v
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{right}" y1="{0}" y2="{0}" stroke="#eee"/>"##,
            yt(v)
        );
    }
    if cap > 0.0 {
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{right}" y1="{0}" y2="{0}" stroke="#888" stroke-dasharray="6 4"/><text x="{right}" y="{1}" text-anchor="end" fill="#555">fabric capacity {cap:.0}/s</text>"##,
            yt(cap),
            yt(cap) - 6.0
        );
    }
    let pts: Vec<(f64, f64)> = rungs
        .iter()
        .map(|r| (x(r.clients as f64), yt(r.rps)))
        .collect();
    series(&mut s, &pts, "#1f77b4", false);

    // Bottom: latency, log scale.
    let (b0, b1) = (360.0, 640.0);
    let lat_max = rungs
        .iter()
        .map(|r| r.p99_ms.max(r.ideal_p50_ms))
        .chain(APPLIANCE.iter().map(|a| a.2))
        .fold(10.0, f64::max)
        * 1.5;
    let lat_min = rungs
        .iter()
        .map(|r| r.p50_ms)
        .filter(|v| *v > 0.0)
        .fold(10.0, f64::min)
        / 1.5;
    let yl = |v: f64| {
        b1 - (b1 - b0) * (v.max(lat_min).log10() - lat_min.log10())
            / (lat_max.log10() - lat_min.log10())
    };
    axes(&mut s, left, right, b0, b1, "latency per request, ms (log)");
    let mut tick = 10f64.powf(lat_min.log10().floor());
    while tick <= lat_max {
        if tick >= lat_min {
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
        }
        tick *= 10.0;
    }
    let p50: Vec<_> = rungs
        .iter()
        .map(|r| (x(r.clients as f64), yl(r.p50_ms)))
        .collect();
    let p95: Vec<_> = rungs
        .iter()
        .map(|r| (x(r.clients as f64), yl(r.p95_ms)))
        .collect();
    let ideal: Vec<_> = rungs
        .iter()
        .map(|r| (x(r.clients as f64), yl(r.ideal_p50_ms)))
        .collect();
    series(&mut s, &ideal, "#888", true);
    series(&mut s, &p50, "#2ca02c", false);
    series(&mut s, &p95, "#d62728", false);
    for (c, a50, a95) in APPLIANCE {
        let cx = x(c as f64);
        let _ = writeln!(
            s,
            r##"<rect x="{}" y="{}" width="7" height="7" fill="none" stroke="#2ca02c"/>"##,
            cx - 3.5,
            yl(a50) - 3.5
        );
        let _ = writeln!(
            s,
            r##"<rect x="{}" y="{}" width="7" height="7" fill="none" stroke="#d62728"/>"##,
            cx - 3.5,
            yl(a95) - 3.5
        );
    }
    // X axis labels (both plots).
    let mut c = 1.0;
    while c <= max_clients {
        for y in [t1, b1] {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
                x(c),
                y + 16.0,
                c
            );
        }
        c *= 4.0;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">concurrent clients (log scale)</text>"#,
        w / 2.0,
        b1 + 36.0
    );
    // Legend.
    let legend = [
        ("#1f77b4", "completions/s"),
        ("#2ca02c", "p50"),
        ("#d62728", "p95"),
        ("#888", "queueing ideal: max(service, clients ÷ capacity)"),
    ];
    for (i, (color, label)) in legend.iter().enumerate() {
        let ly = 676.0;
        let lx = left + 200.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/>"#,
            lx + 18.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 24.0,
            ly + 4.0,
            escape(label)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{right}" y="{}" text-anchor="end" fill="#555">squares: the appliance's p50/p95</text>"##,
        b0 - 8.0
    );
    s.push_str("</svg>\n");
    s
}

pub(crate) fn axes(s: &mut String, left: f64, right: f64, top: f64, bottom: f64, label: &str) {
    let _ = writeln!(
        s,
        r#"<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{0}" transform="rotate(-90 16 {0})" text-anchor="middle">{1}</text>"#,
        (top + bottom) / 2.0,
        escape(label)
    );
}

pub(crate) fn series(s: &mut String, pts: &[(f64, f64)], color: &str, dashed: bool) {
    if pts.is_empty() {
        return;
    }
    let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let dash = if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
        path.join(" ")
    );
    if !dashed {
        for (x, y) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
            );
        }
    }
}

pub(crate) fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
