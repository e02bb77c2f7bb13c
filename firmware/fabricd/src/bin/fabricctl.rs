//! `fabricctl`: control a running fabricd over its Unix socket.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    eprintln!("fabricctl: not implemented yet");
    std::process::ExitCode::FAILURE
}
