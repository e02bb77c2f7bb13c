//! The control socket's lines: a request line as the daemon reads it
//! (`fabricd::control::Command::parse`) and an answer line as `fabricctl`
//! reads it (`Answer::parse`).
//!
//! Beyond not panicking: a command that parses is written by `to_line` to
//! a line that parses to the same command; a refusal is `bad_request` or
//! `unknown_command` with a message, and its answer line reads back in
//! `fabricctl` as that refusal.
#![no_main]

use fabricd::control::protocol::{answer, COMMANDS};
use fabricd::control::{Answer, Command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    match Command::parse(line) {
        Ok(cmd) => {
            assert_eq!(Command::parse(&cmd.to_line()).as_ref(), Ok(&cmd));
            assert!(COMMANDS.split(", ").any(|c| c == cmd.name()));
        }
        Err(refusal) => {
            assert!(matches!(refusal.kind, "bad_request" | "unknown_command"));
            assert!(!refusal.message.is_empty());
            let line = answer(&Err(refusal.clone())).to_string();
            assert_eq!(
                Answer::parse(&line),
                Ok(Answer::Refused {
                    kind: refusal.kind.to_owned(),
                    message: refusal.message,
                })
            );
        }
    }
    if let Ok(text) = std::str::from_utf8(line) {
        if let Err(message) = Answer::parse(text) {
            assert!(!message.is_empty());
        }
    }
});
