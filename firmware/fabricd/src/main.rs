//! `fabricd`: probe, generate, serve, inspect. See `fabricd --help`, and
//! the crate's `cli` module.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    fabricd::cli::main()
}
