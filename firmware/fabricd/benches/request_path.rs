//! The request path, measured: a whole completion through HTTP, validation,
//! the scheduler, the rings and the simulated fabric at zero service time
//! (a coherent buffer, so no cache sync is a round trip to the
//! simulator's thread). It reuses the tests' daemon and client, so what is
//! measured is what the tests run. `cargo bench -p fabricd`; the
//! comparison with bare hyper is `scripts/bench-serve`'s.
//!
//! Before the timings it counts allocations a request over
//! [`COUNTED`] requests, and those of a `GET /healthz` for the share of
//! the client and the HTTP front alone.

#[path = "../tests/common/mod.rs"]
mod common;

use std::alloc::System;

use criterion::{criterion_group, criterion_main, Criterion};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

/// Every allocation of the process is counted: a request crosses the
/// client's task, the daemon's worker and the simulator's threads, so a
/// per-thread counter would miss part of the path. `stats_alloc` wraps the
/// system allocator with relaxed atomic counters, no lock and no backtrace
/// (`dhat` takes a global lock on every allocation even when not
/// profiling), so the timings below stay the path's.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Requests counted, after as many to warm every reused buffer.
const COUNTED: u32 = 1000;

fn per_request(stats: stats_alloc::Stats, n: u32) -> String {
    let n = f64::from(n);
    format!(
        "{:.1} allocations ({:.1} reallocations), {:.0} bytes",
        stats.allocations as f64 / n,
        stats.reallocations as f64 / n,
        stats.bytes_allocated as f64 / n,
    )
}

fn request_path(c: &mut Criterion) {
    // One worker, as the daemon runs by default.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let d = rt.block_on(common::Daemon::start(
        |s| {
            s.time_scale = 0.0;
            s.dma_coherent = true;
        },
        // The same seeded request every time: the completion cache would
        // answer it at the edge. The path measured is the fabric's.
        |c| c.typing.cache = false,
    ));
    let addr = d.addr;
    let body = serde_json::json!({
        "model": "kjv", "prompt": "And God said", "max_tokens": 8, "seed": 1
    });
    let completions = |n| {
        rt.block_on(async {
            for _ in 0..n {
                let r = common::post_json(addr, body.clone()).await;
                assert_eq!(r.status, 200, "{}", r.text());
            }
        })
    };
    completions(COUNTED);
    let region = Region::new(GLOBAL);
    completions(COUNTED);
    let path = region.change();
    let healthz = |n| {
        rt.block_on(async {
            for _ in 0..n {
                let r = common::get(addr, "/healthz").await.expect("healthz");
                assert_eq!(r.status, 200, "{}", r.text());
            }
        })
    };
    healthz(COUNTED);
    let region = Region::new(GLOBAL);
    healthz(COUNTED);
    let front = region.change();
    println!(
        "allocations a request over {COUNTED}, the whole process (client, daemon, simulator):\n  \
         a completion of 8 tokens: {}\n  GET /healthz: {}",
        per_request(path, COUNTED),
        per_request(front, COUNTED),
    );
    c.bench_function("a completion of 8 tokens, fresh connection", |b| {
        b.to_async(&rt).iter(|| async {
            let r = common::post_json(addr, body.clone()).await;
            assert_eq!(r.status, 200, "{}", r.text());
        })
    });
    rt.block_on(d.stop());
}

criterion_group!(benches, request_path);
criterion_main!(benches);
