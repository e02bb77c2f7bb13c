//! `ladder --target http://ADDR:PORT …`: see `ladder --help` and the crate
//! docs.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args = cli::args::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ladder: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ladder: {e:#}");
            ExitCode::from(2)
        }
    }
}
