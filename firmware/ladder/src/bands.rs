//! Abort conditions, written down before the run.
//!
//! A TOML file of limits. Top-level keys apply to every rung; `[from.N]`
//! tables apply to rungs of N clients and more (the larger N wins);
//! `[rung.N]` tables apply to exactly N clients and win over both:
//!
//! ```toml
//! max_errors = 0            # raw errors: statuses outside the documented outcomes, resets, timeouts
//! max_corrupted = 0         # 200s whose completion is not the deterministic one
//! max_rejections = 0        # typed outcomes (overloaded, deadline_exceeded, …)
//! max_p95_ms = 2000
//! min_rps = 100
//! [from.16]
//! min_capacity_fraction = 0.99   # aggregate completions/s ÷ the fabric's capacity
//! max_p95_over_p50 = 1.15
//! max_p50_over_ideal = 1.05      # p50 ÷ max(solo, clients ÷ capacity)
//! [rung.1]
//! max_p95_ms = 50
//! ```
//!
//! Typists (`--workload typists`) have limits of their own: the suggestion
//! latency at a pause (`max_pause_p95_ms`, …), `min_pauses`, and the
//! harness's lateness in sending keystrokes (`max_harness_lag_p99_ms`).
//!
//! A mixed profile gives each request class its own target in a
//! `[class.NAME]` table, itself layered the same way (`[class.NAME.from.N]`,
//! `[class.NAME.rung.N]`, N being the rung's clients of every class);
//! top-level limits apply to every class. A profile class without a table
//! is refused before the run: its target must be written down first.
//!
//! A limit on a figure the workload does not measure (a pause percentile
//! for closed-loop clients, a throughput for typists) is refused before the
//! run, by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A figure a limit can be set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Errors,
    Corrupted,
    Rejections,
    P50Ms,
    P95Ms,
    P99Ms,
    Rps,
    CapacityFraction,
    P95OverP50,
    P50OverIdeal,
    HarnessCpu,
    LurkersClosed,
    TtftP95Ms,
    PauseP50Ms,
    PauseP95Ms,
    PauseP99Ms,
    Pauses,
    HarnessLagP99Ms,
}

/// A result that limits can be checked against. `figure` is `None` for a
/// figure this result does not have (not measured, or no lurkers).
/// `f64::INFINITY` is a value beyond any limit (a pause that got no
/// suggestion before the typist typed on).
pub trait Figures {
    fn figure(&self, f: Figure) -> Option<f64>;
}

/// What a kind of workload measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measures {
    /// Closed- and open-loop clients, a burst, a class of requests.
    Requests,
    /// Typists.
    Typists,
}

impl Measures {
    fn has(self, f: Figure) -> bool {
        use Figure::*;
        match self {
            Measures::Requests => !matches!(
                f,
                PauseP50Ms | PauseP95Ms | PauseP99Ms | Pauses | HarnessLagP99Ms
            ),
            Measures::Typists => matches!(
                f,
                Errors
                    | Corrupted
                    | Rejections
                    | HarnessCpu
                    | PauseP50Ms
                    | PauseP95Ms
                    | PauseP99Ms
                    | Pauses
                    | HarnessLagP99Ms
            ),
        }
    }
}

/// The limits for one rung; unset means unchecked.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_corrupted: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rejections: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p95_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_capacity_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p95_over_p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_p50_over_ideal: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_harness_cpu: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lurkers_closed: Option<usize>,
    /// An event stream's first token, p95.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ttft_p95_ms: Option<f64>,
    /// The suggestion latency at a typist's pause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pause_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pause_p95_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pause_p99_ms: Option<f64>,
    /// Pauses measured: fewer and a percentile says little.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_pauses: Option<u64>,
    /// How late the harness sent keystrokes, p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_harness_lag_p99_ms: Option<f64>,
}

/// Which way a limit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Max,
    Min,
}

impl Band {
    /// Every limit that is set: its name, figure, direction and value.
    fn limits(&self) -> Vec<(&'static str, Figure, Bound, f64)> {
        use Bound::*;
        use Figure::*;
        let all = [
            ("errors", Errors, Max, self.max_errors.map(|x| x as f64)),
            (
                "corrupted",
                Corrupted,
                Max,
                self.max_corrupted.map(|x| x as f64),
            ),
            (
                "rejections",
                Rejections,
                Max,
                self.max_rejections.map(|x| x as f64),
            ),
            ("p50_ms", P50Ms, Max, self.max_p50_ms),
            ("p95_ms", P95Ms, Max, self.max_p95_ms),
            ("p99_ms", P99Ms, Max, self.max_p99_ms),
            ("p95/p50", P95OverP50, Max, self.max_p95_over_p50),
            ("p50/ideal", P50OverIdeal, Max, self.max_p50_over_ideal),
            ("harness_cpu", HarnessCpu, Max, self.max_harness_cpu),
            (
                "lurkers_closed",
                LurkersClosed,
                Max,
                self.max_lurkers_closed.map(|x| x as f64),
            ),
            ("ttft_p95_ms", TtftP95Ms, Max, self.max_ttft_p95_ms),
            ("pause_p50_ms", PauseP50Ms, Max, self.max_pause_p50_ms),
            ("pause_p95_ms", PauseP95Ms, Max, self.max_pause_p95_ms),
            ("pause_p99_ms", PauseP99Ms, Max, self.max_pause_p99_ms),
            (
                "harness_lag_p99_ms",
                HarnessLagP99Ms,
                Max,
                self.max_harness_lag_p99_ms,
            ),
            ("rps", Rps, Min, self.min_rps),
            (
                "capacity_fraction",
                CapacityFraction,
                Min,
                self.min_capacity_fraction,
            ),
            ("pauses", Pauses, Min, self.min_pauses.map(|x| x as f64)),
        ];
        all.into_iter()
            .filter_map(|(n, f, b, v)| v.map(|v| (n, f, b, v)))
            .collect()
    }

    fn overlay(&mut self, o: &Band) {
        macro_rules! take {
            ($($f:ident),*) => { $( if o.$f.is_some() { self.$f = o.$f; } )* };
        }
        take!(
            max_errors,
            max_corrupted,
            max_rejections,
            max_p50_ms,
            max_p95_ms,
            max_p99_ms,
            min_rps,
            min_capacity_fraction,
            max_p95_over_p50,
            max_p50_over_ideal,
            max_harness_cpu,
            max_lurkers_closed,
            max_ttft_p95_ms,
            max_pause_p50_ms,
            max_pause_p95_ms,
            max_pause_p99_ms,
            min_pauses,
            max_harness_lag_p99_ms
        );
    }

    /// Every condition `r` breaks.
    pub fn check(&self, r: &impl Figures) -> Vec<Violation> {
        let mut v = Vec::new();
        for (name, figure, bound, limit) in self.limits() {
            let value = match r.figure(figure) {
                Some(value) => value,
                // No lurkers: nothing to hold open.
                None if figure == Figure::LurkersClosed => continue,
                // Refused before the run where the workload is known; a
                // class can still lack one (a TTFT without a stream).
                None => f64::NAN,
            };
            let broken = match bound {
                _ if value.is_nan() => true,
                Bound::Max => value > limit,
                Bound::Min => value < limit,
            };
            if broken {
                let op = if bound == Bound::Max { "<=" } else { ">=" };
                v.push(Violation {
                    condition: format!("{name} {op} {limit}"),
                    limit,
                    value,
                });
            }
        }
        v
    }

    fn unmeasured(&self, kind: Measures) -> Vec<&'static str> {
        self.limits()
            .into_iter()
            .filter(|(_, f, _, _)| !kind.has(*f))
            .map(|(n, ..)| n)
            .collect()
    }
}

/// The bands file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bands {
    #[serde(flatten)]
    pub all: Band,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub from: BTreeMap<String, Band>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rung: BTreeMap<String, Band>,
    /// A mixed profile's targets, by class name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub class: BTreeMap<String, Bands>,
}

/// A broken band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub condition: String,
    pub limit: f64,
    /// What was measured: `NaN` when the figure was not measured (`null`
    /// in JSON), infinite for a pause that got no suggestion at all.
    pub value: f64,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_nan() {
            write!(f, "{} (limit {}, not measured)", self.condition, self.limit)
        } else if self.value.is_infinite() {
            write!(
                f,
                "{} (limit {}, measured: no suggestion before typing went on)",
                self.condition, self.limit
            )
        } else {
            write!(
                f,
                "{} (limit {}, measured {:.3})",
                self.condition, self.limit, self.value
            )
        }
    }
}

impl Bands {
    /// Parses a bands file, refusing tables whose key is not a number and
    /// class tables inside class tables.
    pub fn parse(text: &str) -> Result<Bands, String> {
        let b: Bands = toml::from_str(text).map_err(|e| e.to_string())?;
        b.check_keys()?;
        for (name, c) in &b.class {
            if !c.class.is_empty() {
                return Err(format!("[class.{name}]: a class has no classes"));
            }
            c.check_keys().map_err(|e| format!("[class.{name}]: {e}"))?;
        }
        Ok(b)
    }

    fn check_keys(&self) -> Result<(), String> {
        for k in self.from.keys().chain(self.rung.keys()) {
            k.parse::<usize>().map_err(|_| {
                format!("[from.{k}] / [rung.{k}]: {k:?} is not a number of clients")
            })?;
        }
        Ok(())
    }

    /// The band for a rung of `clients`.
    pub fn for_rung(&self, clients: usize) -> Band {
        let mut band = self.all.clone();
        let mut froms: Vec<(usize, &Band)> = self
            .from
            .iter()
            .filter_map(|(k, b)| k.parse().ok().map(|n| (n, b)))
            .filter(|(n, _)| *n <= clients)
            .collect();
        froms.sort_by_key(|(n, _)| *n);
        for (_, b) in froms {
            band.overlay(b);
        }
        if let Some(b) = self.rung.get(&clients.to_string()) {
            band.overlay(b);
        }
        band
    }

    /// The band for class `name` at a rung of `clients`: the top-level
    /// limits, then the class's own.
    pub fn for_class(&self, name: &str, clients: usize) -> Band {
        let mut band = self.for_rung(clients);
        if let Some(c) = self.class.get(name) {
            band.overlay(&c.for_rung(clients));
        }
        band
    }

    /// Every condition the rung of `clients` breaks.
    pub fn check(&self, clients: usize, r: &impl Figures) -> Vec<Violation> {
        self.for_rung(clients).check(r)
    }

    fn tables(&self) -> impl Iterator<Item = &Band> {
        std::iter::once(&self.all)
            .chain(self.from.values())
            .chain(self.rung.values())
    }

    /// Refuses, before the run, limits on figures that `kind` does not
    /// measure, and class tables (there are no classes outside a profile).
    pub fn refuse_unmeasured(&self, kind: Measures) -> Result<(), String> {
        if let Some(name) = self.class.keys().next() {
            return Err(format!(
                "[class.{name}]: class targets need a mixed profile (--profile)"
            ));
        }
        unmeasured(self.tables(), kind, "")
    }

    /// Refuses, before a mixed run, a class without its own target, a
    /// target for a class the profile does not have, and limits a class
    /// does not measure (top-level limits apply to every class).
    pub fn refuse_for_profile(&self, classes: &[(String, Measures)]) -> Result<(), String> {
        for (name, kind) in classes {
            let Some(c) = self.class.get(name) else {
                return Err(format!(
                    "class {name:?} has no [class.{name}] target in the bands file: write it before the run"
                ));
            };
            unmeasured(
                self.tables(),
                *kind,
                &format!(" (applied to class {name:?})"),
            )?;
            unmeasured(c.tables(), *kind, &format!(" in [class.{name}]"))?;
        }
        if let Some(name) = self
            .class
            .keys()
            .find(|n| !classes.iter().any(|(c, _)| c == *n))
        {
            return Err(format!("[class.{name}]: the profile has no class {name:?}"));
        }
        Ok(())
    }
}

fn unmeasured<'a>(
    tables: impl Iterator<Item = &'a Band>,
    kind: Measures,
    context: &str,
) -> Result<(), String> {
    let mut names: Vec<&str> = tables.flat_map(|t| t.unmeasured(kind)).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        Ok(())
    } else {
        let what = match kind {
            Measures::Requests => "requests",
            Measures::Typists => "typists",
        };
        Err(format!(
            "limits on figures that {what} do not measure{context}: {}",
            names.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(Vec<(Figure, f64)>);

    impl Figures for Fake {
        fn figure(&self, f: Figure) -> Option<f64> {
            self.0.iter().find(|(g, _)| *g == f).map(|(_, v)| *v)
        }
    }

    #[test]
    fn from_and_rung_tables_layer() {
        let b = Bands::parse("max_errors = 0\nmax_p95_ms = 100\n[from.16]\nmax_p95_ms = 1000\n[from.64]\nmax_p95_ms = 5000\n[rung.64]\nmax_errors = 2\n")
            .expect("parse");
        assert_eq!(b.for_rung(8).max_p95_ms, Some(100.0));
        assert_eq!(b.for_rung(32).max_p95_ms, Some(1000.0));
        assert_eq!(b.for_rung(64).max_p95_ms, Some(5000.0));
        assert_eq!(b.for_rung(64).max_errors, Some(2));
        assert_eq!(b.for_rung(128).max_errors, Some(0));
    }

    #[test]
    fn typos_and_bad_keys_are_refused() {
        assert!(Bands::parse("max_erors = 0").is_err());
        assert!(Bands::parse("[rung.many]\nmax_errors = 0").is_err());
        assert!(Bands::parse("[class.a.rung.many]\nmax_errors = 0").is_err());
        assert!(Bands::parse("[class.a.class.b]\nmax_errors = 0").is_err());
    }

    #[test]
    fn limits_break_in_their_direction_and_a_missing_figure_breaks_them() {
        let b = Bands::parse(
            "max_errors = 0\nmin_pauses = 20\nmax_pause_p95_ms = 1000\nmax_lurkers_closed = 0\n",
        )
        .expect("parse");
        let ok = Fake(vec![
            (Figure::Errors, 0.0),
            (Figure::Pauses, 20.0),
            (Figure::PauseP95Ms, 1000.0),
        ]);
        assert_eq!(b.check(1, &ok), vec![], "limits are inclusive; no lurkers");
        let bad = Fake(vec![
            (Figure::Errors, 1.0),
            (Figure::Pauses, 19.0),
            (Figure::PauseP95Ms, f64::INFINITY),
        ]);
        let v = b.check(1, &bad);
        let names: Vec<_> = v.iter().map(|v| v.condition.as_str()).collect();
        assert_eq!(
            names,
            ["errors <= 0", "pause_p95_ms <= 1000", "pauses >= 20"]
        );
        assert!(v[1].to_string().contains("no suggestion"), "{}", v[1]);
        let missing = Fake(vec![(Figure::Errors, 0.0), (Figure::Pauses, 50.0)]);
        let v = b.check(1, &missing);
        assert_eq!(v.len(), 1);
        assert!(v[0].to_string().contains("not measured"), "{}", v[0]);
    }

    #[test]
    fn limits_on_figures_a_workload_does_not_measure_are_refused() {
        let b = Bands::parse("max_errors = 0\n[from.8]\nmin_rps = 10\n").expect("parse");
        assert!(b.refuse_unmeasured(Measures::Requests).is_ok());
        let e = b
            .refuse_unmeasured(Measures::Typists)
            .expect_err("typists have no rps");
        assert!(e.contains("rps"), "{e}");
        let t = Bands::parse("max_pause_p95_ms = 1000\n").expect("parse");
        assert!(t.refuse_unmeasured(Measures::Requests).is_err());
        assert!(t.refuse_unmeasured(Measures::Typists).is_ok());
    }

    #[test]
    fn every_class_of_a_profile_needs_its_own_target() {
        let b = Bands::parse(
            "max_errors = 0\n[class.typists]\nmax_pause_p95_ms = 1000\n[class.other]\nmax_p95_ms = 500\n[class.other.from.100]\nmax_p95_ms = 800\n",
        )
        .expect("parse");
        let classes = vec![
            ("typists".to_owned(), Measures::Typists),
            ("other".to_owned(), Measures::Requests),
        ];
        assert!(b.refuse_for_profile(&classes).is_ok());
        assert_eq!(b.for_class("other", 50).max_p95_ms, Some(500.0));
        assert_eq!(b.for_class("other", 100).max_p95_ms, Some(800.0));
        assert_eq!(b.for_class("other", 100).max_errors, Some(0));
        let e = b
            .refuse_for_profile(&[("typists".to_owned(), Measures::Typists)])
            .expect_err("a target for a class the profile lacks");
        assert!(e.contains("other"), "{e}");
        let e = b
            .refuse_for_profile(&[
                ("typists".to_owned(), Measures::Typists),
                ("other".to_owned(), Measures::Requests),
                ("streams".to_owned(), Measures::Requests),
            ])
            .expect_err("a class without a target");
        assert!(e.contains("streams"), "{e}");
        let e = b
            .refuse_for_profile(&[
                ("typists".to_owned(), Measures::Requests),
                ("other".to_owned(), Measures::Requests),
            ])
            .expect_err("pause limits on a class of requests");
        assert!(e.contains("pause_p95_ms"), "{e}");
        assert!(b.refuse_unmeasured(Measures::Requests).is_err());
    }
}
