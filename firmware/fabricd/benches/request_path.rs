//! The request path, measured: a whole completion through HTTP, validation,
//! the scheduler, the rings and the simulated fabric at zero service time
//! (a coherent buffer, so no cache sync is a round trip to the
//! simulator's thread). It reuses the tests' daemon and client, so what is
//! measured is what the tests run. `cargo bench -p fabricd`; the
//! comparison with bare hyper is `scripts/bench-serve`'s.

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{criterion_group, criterion_main, Criterion};

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
