//! Prometheus metrics: counters and histograms kept in atomics, rendered as
//! text on `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::sched::{Ending, SlotView, TypingCounts};
use crate::typing::{Figures, Source};

const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A latency histogram. Each observation counts in its own bucket only
/// (one atomic add, not one per bucket above it); the cumulative counts
/// Prometheus wants are summed when rendered.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations in (previous bound, this bound]; past the last bound
    /// they are only in `count`.
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&le| secs <= le) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        // The count first: read after the buckets, it could fall below
        // their sum while requests are observed.
        let count = self.count.load(Ordering::Relaxed);
        let mut below = 0;
        for (b, le) in self.buckets.iter().zip(BUCKETS) {
            below += b.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", below.min(count));
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// The daemon's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    outcomes: [AtomicU64; Ending::ALL.len()],
    pub latency: Histogram,
    pub queue_wait: Histogram,
    pub fabric_time: Histogram,
    pub tokens_in: AtomicU64,
    pub tokens_out: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    /// Idle connections closed to make room under a full cap.
    pub connections_evicted: AtomicU64,
    /// Connections refused because their address holds its share already.
    pub address_refused: AtomicU64,
    /// Connections whose head would have waited past the heads' budget.
    pub heads_refused: AtomicU64,
}

impl Metrics {
    /// Counts how one request ended.
    pub fn outcome(&self, ending: Ending) {
        self.outcomes[ending.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests that ended so.
    pub fn count(&self, ending: Ending) -> u64 {
        self.outcomes[ending.index()].load(Ordering::Relaxed)
    }

    /// The Prometheus text: these metrics, the scheduler's figures and
    /// slots, the typing features' (the scheduler's counts, the edge's
    /// figures) and the shell's counters.
    pub fn render(
        &self,
        queued: usize,
        in_flight: usize,
        slots: &[SlotView],
        shell: Option<fabric_hw::shell::Counters>,
        typing: (TypingCounts, Figures),
    ) -> String {
        let mut out = String::with_capacity(4096);
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(
            &mut out,
            "fabricd_queue_depth",
            "Requests waiting for a decode context.",
            queued as f64,
        );
        gauge(
            &mut out,
            "fabricd_in_flight",
            "Requests on the fabric.",
            in_flight as f64,
        );
        gauge(
            &mut out,
            "fabricd_connections_open",
            "Open client connections.",
            self.connections_open.load(Ordering::Relaxed) as f64,
        );
        let _ = writeln!(out, "# HELP fabricd_requests_total Requests by outcome.\n# TYPE fabricd_requests_total counter");
        for (ending, c) in Ending::ALL.iter().zip(&self.outcomes) {
            let _ = writeln!(
                out,
                "fabricd_requests_total{{outcome=\"{}\"}} {}",
                ending.label(),
                c.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP fabricd_tokens_total Tokens of completed requests, by direction.\n# TYPE fabricd_tokens_total counter"
        );
        let _ = writeln!(
            out,
            "fabricd_tokens_total{{direction=\"in\"}} {}",
            self.tokens_in.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "fabricd_tokens_total{{direction=\"out\"}} {}",
            self.tokens_out.load(Ordering::Relaxed)
        );
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        counter(
            &mut out,
            "fabricd_connections_total",
            "Connections accepted.",
            self.connections_total.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "fabricd_connections_refused_total",
            "Connections over the cap, answered overloaded.",
            self.connections_refused.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "fabricd_connections_evicted_total",
            "Idle keep-alive connections closed to make room under a full cap for an address holding fewer.",
            self.connections_evicted.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "fabricd_connections_address_refused_total",
            "Connections refused because their address held its share of the cap.",
            self.address_refused.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "fabricd_heads_refused_total",
            "Connections answered overloaded because slow request heads held the whole header budget.",
            self.heads_refused.load(Ordering::Relaxed),
        );
        render_typing(&mut out, typing.0, &typing.1);
        self.latency.render(
            &mut out,
            "fabricd_request_duration_seconds",
            "Time from request to last byte, completions only.",
        );
        self.queue_wait.render(
            &mut out,
            "fabricd_queue_wait_seconds",
            "Time from admission to the fabric.",
        );
        self.fabric_time.render(
            &mut out,
            "fabricd_fabric_time_seconds",
            "Time on the fabric, as the shell measured it.",
        );
        let _ = writeln!(
            out,
            "# HELP fabricd_slot_state Slot state (0 empty, 1 loading, 2 ready, 3 error, 4 an engine with no model), by slot and model.\n# TYPE fabricd_slot_state gauge"
        );
        for s in slots {
            let _ = writeln!(
                out,
                "fabricd_slot_state{{slot=\"{}\",model=\"{}\"}} {}",
                s.index,
                s.model.as_deref().unwrap_or(""),
                s.state.encode() & 0xF
            );
        }
        let loading = slots
            .iter()
            .filter(|s| s.state == fabric_hw::contract::SlotState::Loading)
            .count();
        gauge(
            &mut out,
            "fabricd_reconfiguring",
            "Slots being reconfigured now.",
            loading as f64,
        );
        if let Some(c) = shell {
            counter(
                &mut out,
                "fabricd_shell_completed_total",
                "Requests the shell completed.",
                c.completed.into(),
            );
            counter(
                &mut out,
                "fabricd_shell_cancelled_total",
                "Requests the shell cancelled.",
                c.cancelled.into(),
            );
            counter(
                &mut out,
                "fabricd_shell_errors_total",
                "Descriptors the shell refused or faulted.",
                c.errors.into(),
            );
            gauge(
                &mut out,
                "fabricd_shell_active",
                "Contexts decoding now, per the shell.",
                c.active.into(),
            );
        }
        out
    }
}

/// The typing features' metrics (docs/metrics.md, "Speculative typing").
fn render_typing(out: &mut String, s: TypingCounts, f: &Figures) {
    let mut one = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    };
    one(
        "fabricd_cache_hits_total",
        "counter",
        "Requests answered from the completion cache.",
        f.cache.hits,
    );
    one(
        "fabricd_cache_misses_total",
        "counter",
        "Deterministic requests the completion cache did not hold.",
        f.cache.misses,
    );
    one(
        "fabricd_cache_entries",
        "gauge",
        "Answers in the completion cache.",
        f.cache.entries as u64,
    );
    one(
        "fabricd_cache_bytes",
        "gauge",
        "Bytes the completion cache holds, against cache_bytes.",
        f.cache.bytes as u64,
    );
    one(
        "fabricd_cache_evictions_total",
        "counter",
        "Cache entries let go to stay within cache_bytes.",
        f.cache.evictions,
    );
    one(
        "fabricd_cache_invalidations_total",
        "counter",
        "Times the cache was emptied because a slot's model changed.",
        f.cache.invalidations,
    );
    one(
        "fabricd_typed_forward_total",
        "counter",
        "Requests answered with the rest of their session's last answer.",
        f.answers[Source::TypedForward as usize],
    );
    one(
        "fabricd_joins_total",
        "counter",
        "Requests that took over their session's request while it decoded.",
        s.joined,
    );
    one(
        "fabricd_join_misses_total",
        "counter",
        "Joined requests whose answer did not fit what was typed, run on their own.",
        f.join_misses,
    );
    one(
        "fabricd_predictive_refusals_total",
        "counter",
        "Requests refused at once as predicted to finish past their deadline.",
        s.predicted_late,
    );
    one(
        "fabricd_held_total",
        "counter",
        "Typing sessions' requests held back until their session paused.",
        s.held,
    );
    one(
        "fabricd_held_ran_early_total",
        "counter",
        "Held requests run before their session paused, on a slot with nothing else to take.",
        s.held_early,
    );
    one(
        "fabricd_sessions",
        "gauge",
        "Typing sessions in the session table.",
        f.sessions.entries as u64,
    );
    one(
        "fabricd_session_bytes",
        "gauge",
        "Bytes the session table holds, against session_bytes.",
        f.sessions.bytes as u64,
    );
    one(
        "fabricd_session_evictions_total",
        "counter",
        "Sessions let go to stay within session_entries and session_bytes.",
        f.sessions.evictions,
    );
    let _ = writeln!(
        out,
        "# HELP fabricd_superseded_total Requests superseded by a newer one of their session, by where they were (held: held back until its session paused, so never on the fabric; late: it arrived after a newer one, by session_seq).\n# TYPE fabricd_superseded_total counter"
    );
    let _ = writeln!(
        out,
        "fabricd_superseded_total{{state=\"queued\"}} {}",
        s.superseded_queued
    );
    let _ = writeln!(
        out,
        "fabricd_superseded_total{{state=\"running\"}} {}",
        s.superseded_running
    );
    let _ = writeln!(
        out,
        "fabricd_superseded_total{{state=\"held\"}} {}",
        s.superseded_held
    );
    let _ = writeln!(out, "fabricd_superseded_total{{state=\"late\"}} {}", f.late);
    let _ = writeln!(
        out,
        "# HELP fabricd_answers_total Completions answered, by what answered them (X-Fabricd-Source).\n# TYPE fabricd_answers_total counter"
    );
    for (source, n) in Source::ALL.iter().zip(f.answers) {
        let _ = writeln!(
            out,
            "fabricd_answers_total{{source=\"{}\"}} {n}",
            source.label()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.outcome(Ending::Ok);
        m.outcome(Ending::Overloaded);
        m.latency.observe(Duration::from_millis(20));
        let typing = (
            TypingCounts {
                superseded_running: 2,
                ..TypingCounts::default()
            },
            Figures {
                answers: [5, 1, 0, 0],
                ..Figures::default()
            },
        );
        let text = m.render(3, 4, &[], None, typing);
        assert!(text.contains("fabricd_superseded_total{state=\"running\"} 2\n"));
        assert!(text.contains("fabricd_answers_total{source=\"cache\"} 1\n"));
        assert!(text.contains("fabricd_cache_bytes 0\n"));
        assert!(text.contains("fabricd_requests_total{outcome=\"ok\"} 1"));
        assert!(text.contains("fabricd_queue_depth 3"));
        assert!(text.contains("fabricd_request_duration_seconds_bucket{le=\"0.025\"} 1"));
        assert!(text.contains("fabricd_request_duration_seconds_bucket{le=\"0.01\"} 0"));
        assert_eq!(m.count(Ending::Overloaded), 1);
    }

    #[test]
    fn histogram_buckets_render_cumulative() {
        let h = Histogram::default();
        for ms in [2, 20, 20, 70_000] {
            h.observe(Duration::from_millis(ms));
        }
        let mut text = String::new();
        h.render(&mut text, "t", "test");
        for (le, n) in [
            ("0.001", 0),
            ("0.005", 1),
            ("0.01", 1),
            ("0.025", 3),
            ("60", 3),
            ("+Inf", 4),
        ] {
            let line = format!("t_bucket{{le=\"{le}\"}} {n}\n");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert!(text.contains("t_count 4\n"), "{text}");
    }
}
