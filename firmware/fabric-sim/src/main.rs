//! `fabric-sim --root DIR [--time-scale X] …`: see `fabric-sim --help`.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    fabric_sim::run(<fabric_sim::SimConfig as clap::Parser>::parse())
}
