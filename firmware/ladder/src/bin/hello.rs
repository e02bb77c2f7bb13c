//! `hello --listen ADDR [--workers N]`: a bare hyper server that answers
//! every request at once, as a separate process: the physical limit of the
//! HTTP stack, for `scripts/bench-serve` to compare fabricd's full request
//! path against, on as many runtime threads as fabricd (default 1).

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (addr, workers) = match args.as_slice() {
        [l, a] if l == "--listen" => (a.clone(), Some(1)),
        [l, a, w, n] if l == "--listen" && w == "--workers" => (a.clone(), n.parse().ok()),
        _ => (String::new(), None),
    };
    let Some(workers) = workers.filter(|&w: &usize| w >= 1) else {
        eprintln!("usage: hello --listen ADDR:PORT [--workers N]");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hello: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => {
                eprintln!("hello: listening on {addr}");
                ladder::calibrate::hello(l).await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hello: {addr}: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
