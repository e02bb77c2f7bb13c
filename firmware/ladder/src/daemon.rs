//! What the daemon says about itself, read between and during rungs: its
//! counters (`GET /metrics`), and whether it has anything left to do.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::client::{Conn, Target};
use crate::rung::Window;

/// The daemon's counters (`…_total` samples of `GET /metrics`), by name
/// with their labels (`fabricd_requests_total{outcome="ok"}`); `None` when
/// the target has no metrics (a bare server).
pub async fn counters(target: &Target) -> Option<BTreeMap<String, f64>> {
    let text = get(target, "/metrics").await?;
    Some(parse_counters(&text))
}

async fn get(target: &Target, path: &str) -> Option<String> {
    let mut conn = Conn::connect(target).await.ok()?;
    let reply = conn
        .send(target, "GET", path, Bytes::new(), Duration::from_secs(10))
        .await
        .ok()?;
    (reply.status == 200).then(|| String::from_utf8_lossy(&reply.body).into_owned())
}

/// The `…_total` samples of Prometheus text.
pub fn parse_counters(text: &str) -> BTreeMap<String, f64> {
    gauges(text)
        .filter(|(name, _)| {
            name.split('{')
                .next()
                .is_some_and(|n| n.ends_with("_total"))
        })
        .collect()
}

fn gauges(text: &str) -> impl Iterator<Item = (String, f64)> + '_ {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
}

/// What the daemon's counters did over `window` (read at its start and
/// its end).
pub async fn counters_over(target: Target, window: Window) -> Option<BTreeMap<String, f64>> {
    tokio::time::sleep_until(window.from.into()).await;
    let before = counters(&target).await?;
    tokio::time::sleep_until(window.to.into()).await;
    let after = counters(&target).await?;
    Some(delta(&before, &after))
}

/// What changed between two readings (counters that appeared count from 0).
pub fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// Requests that reached the fabric: those it completed and those it
/// cancelled, from a [`delta`].
pub fn fabric_requests(delta: &BTreeMap<String, f64>) -> Option<f64> {
    let done = delta.get("fabricd_shell_completed_total")?;
    let cancelled = delta
        .get("fabricd_shell_cancelled_total")
        .copied()
        .unwrap_or(0.0);
    Some(done + cancelled)
}

/// Waits (at most `bound`) until the daemon has nothing queued or running,
/// so the next rung starts on an idle fabric. False if it still had work.
pub async fn quiesce(target: &Target, bound: Duration) -> bool {
    let start = Instant::now();
    loop {
        let Some(text) = get(target, "/metrics").await else {
            // Not a fabricd: nothing to wait for.
            return true;
        };
        let busy = gauges(&text)
            .filter(|(n, _)| n == "fabricd_queue_depth" || n == "fabricd_in_flight")
            .any(|(_, v)| v > 0.0);
        if !busy {
            return true;
        }
        if start.elapsed() > bound {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_their_deltas() {
        let a = parse_counters(
            "# HELP x y\n# TYPE fabricd_requests_total counter\nfabricd_requests_total{outcome=\"ok\"} 5\nfabricd_queue_depth 3\nfabricd_shell_completed_total 10\n",
        );
        assert_eq!(a.len(), 2, "{a:?}");
        let b = parse_counters(
            "fabricd_requests_total{outcome=\"ok\"} 9\nfabricd_shell_completed_total 14\nfabricd_shell_cancelled_total 3\nfabricd_cache_hits_total 2\n",
        );
        let d = delta(&a, &b);
        assert_eq!(d["fabricd_requests_total{outcome=\"ok\"}"], 4.0);
        assert_eq!(d["fabricd_cache_hits_total"], 2.0);
        assert_eq!(fabric_requests(&d), Some(7.0));
        assert_eq!(fabric_requests(&BTreeMap::new()), None);
    }
}
