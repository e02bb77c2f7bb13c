//! `hello --listen ADDR`: a bare hyper server that answers every request at
//! once, as a separate process: the physical limit of the HTTP stack, for
//! `scripts/bench-serve` to compare fabricd's full request path against.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let addr = match (args.next().as_deref(), args.next()) {
        (Some("--listen"), Some(a)) => a,
        _ => {
            eprintln!("usage: hello --listen ADDR:PORT");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
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
