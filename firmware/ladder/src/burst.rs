//! A burst: N requests released at the same instant.
//!
//! Each of the N clients opens its own connection first (a few hundred at
//! a time), then all wait at one barrier; when the last arrives every
//! request is sent at once. Each answer is judged as the closed loop's are
//! (against the reference completion for its prompt and seed), latency
//! counts from the release, and the throughput is the completions over the
//! time from the release to the last answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;

use crate::client::{Conn, Target};
use crate::rung::{cpu_time, RungStats};
use crate::workload::{classify, Class, References, Workload};

/// Releases `n` requests at once; every answer is measured (no window).
/// A client whose connection failed counts as a failure.
pub async fn run(
    target: &Target,
    w: &Arc<Workload>,
    refs: &Arc<References>,
    n: usize,
    timeout: Duration,
    users: bool,
) -> RungStats {
    let mut total = RungStats::new(n);
    let mut conns = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let batch = left.min(250);
        let opened: Vec<_> = (0..batch)
            .map(|_| {
                let target = target.clone();
                tokio::spawn(async move { Conn::connect(&target).await })
            })
            .collect();
        for o in opened {
            match o.await {
                Ok(Ok(c)) => conns.push(c),
                Ok(Err(e)) => total.record(Class::Raw(e.to_string()), Duration::ZERO, None),
                Err(e) => total.record(
                    Class::Raw(format!("connect task failed: {e}")),
                    Duration::ZERO,
                    None,
                ),
            }
        }
        left -= batch;
    }
    let barrier = Arc::new(Barrier::new(conns.len() + 1));
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(client, mut conn)| {
            let (target, w, refs, barrier) =
                (target.clone(), w.clone(), refs.clone(), barrier.clone());
            let user = users.then(|| format!("burst-{client}"));
            let key = w.key(client, 0);
            let body = w.body(key, user.as_deref());
            tokio::spawn(async move {
                barrier.wait().await;
                let result = conn
                    .send(&target, "POST", "/v1/completions", body, timeout)
                    .await;
                let done = Instant::now();
                match result {
                    Ok(reply) => (classify(&reply, key, &refs, &w), Some(reply), done),
                    Err(e) => (Class::Raw(e.to_string()), None, done),
                }
            })
        })
        .collect();
    barrier.wait().await;
    let released = Instant::now();
    let cpu0 = cpu_time();
    let mut last = released;
    for t in tasks {
        match t.await {
            Ok((class, reply, done)) => {
                last = last.max(done);
                total.record(
                    class,
                    done.saturating_duration_since(released),
                    reply.as_ref(),
                );
            }
            Err(e) => total.record(
                Class::Raw(format!("client task failed: {e}")),
                Duration::ZERO,
                None,
            ),
        }
    }
    total.window = last - released;
    total.wall = total.window;
    total.harness_cpu = (cpu_time() - cpu0).as_secs_f64() / total.window.as_secs_f64().max(1e-9);
    total
}
