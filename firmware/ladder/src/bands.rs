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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::RungResult;

/// The limits for one rung; unset means unchecked.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    pub max_errors: Option<u64>,
    pub max_corrupted: Option<u64>,
    pub max_rejections: Option<u64>,
    pub max_p50_ms: Option<f64>,
    pub max_p95_ms: Option<f64>,
    pub max_p99_ms: Option<f64>,
    pub min_rps: Option<f64>,
    pub min_capacity_fraction: Option<f64>,
    pub max_p95_over_p50: Option<f64>,
    pub max_p50_over_ideal: Option<f64>,
    pub max_harness_cpu: Option<f64>,
    pub max_lurkers_closed: Option<usize>,
}

impl Band {
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
            max_lurkers_closed
        );
    }
}

/// The bands file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bands {
    #[serde(flatten)]
    pub all: Band,
    #[serde(default)]
    pub from: BTreeMap<String, Band>,
    #[serde(default)]
    pub rung: BTreeMap<String, Band>,
}

/// A broken band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub condition: String,
    pub limit: f64,
    pub value: f64,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (limit {}, measured {:.3})",
            self.condition, self.limit, self.value
        )
    }
}

impl Bands {
    /// Parses a bands file, refusing tables whose key is not a number.
    pub fn parse(text: &str) -> Result<Bands, String> {
        let b: Bands = toml::from_str(text).map_err(|e| e.to_string())?;
        for k in b.from.keys().chain(b.rung.keys()) {
            k.parse::<usize>().map_err(|_| {
                format!("[from.{k}] / [rung.{k}]: {k:?} is not a number of clients")
            })?;
        }
        Ok(b)
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

    /// Every condition the rung breaks.
    pub fn check(&self, r: &RungResult) -> Vec<Violation> {
        let b = self.for_rung(r.clients);
        let mut v = Vec::new();
        let mut max = |name: &str, limit: Option<f64>, value: f64| {
            if let Some(l) = limit {
                if value > l {
                    v.push(Violation {
                        condition: format!("{name} <= {l}"),
                        limit: l,
                        value,
                    });
                }
            }
        };
        max("errors", b.max_errors.map(|x| x as f64), r.errors as f64);
        max(
            "corrupted",
            b.max_corrupted.map(|x| x as f64),
            r.corrupted as f64,
        );
        max(
            "rejections",
            b.max_rejections.map(|x| x as f64),
            r.rejections as f64,
        );
        max("p50_ms", b.max_p50_ms, r.p50_ms);
        max("p95_ms", b.max_p95_ms, r.p95_ms);
        max("p99_ms", b.max_p99_ms, r.p99_ms);
        max("p95/p50", b.max_p95_over_p50, r.p95_over_p50);
        max("p50/ideal", b.max_p50_over_ideal, r.p50_over_ideal);
        max("harness_cpu", b.max_harness_cpu, r.harness_cpu);
        let mut min = |name: &str, limit: Option<f64>, value: f64| {
            if let Some(l) = limit {
                if value < l {
                    v.push(Violation {
                        condition: format!("{name} >= {l}"),
                        limit: l,
                        value,
                    });
                }
            }
        };
        min("rps", b.min_rps, r.rps);
        min(
            "capacity_fraction",
            b.min_capacity_fraction,
            r.capacity_fraction,
        );
        if let (Some(closed), Some(l)) = (r.lurkers_closed, b.max_lurkers_closed) {
            if closed > l {
                v.push(Violation {
                    condition: format!("lurkers_closed <= {l}"),
                    limit: l as f64,
                    value: closed as f64,
                });
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
