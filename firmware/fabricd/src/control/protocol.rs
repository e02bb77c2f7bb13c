//! The control protocol, defined once for the daemon and `fabricctl`: one
//! JSON object per line each way. A request names its command in `cmd`;
//! the answer is `{"ok": true, "data": …}` or `{"ok": false, "error":
//! {"type", "message"}}`. Fields a command does not take are ignored, as
//! they always were.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A command, as `fabricctl` sends it and the daemon reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Command {
    /// The daemon, the fabric and its slots.
    Status,
    /// The catalog, and which slot holds what.
    Models,
    /// Served requests per window, those ending at or after `since_ms`.
    Stats {
        #[serde(default)]
        since_ms: Option<u64>,
        /// With each window's histograms and client sketch, for
        /// `fabricctl fleet-stats`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        merge: bool,
    },
    /// Write the open stats window to the card now.
    Checkpoint,
    /// Load `model` into `slot` (or the slot the policy picks).
    Load {
        model: String,
        #[serde(default)]
        slot: Option<u8>,
        #[serde(default)]
        force: bool,
        /// A full reconfiguration, even where partial loads work.
        #[serde(default)]
        full: bool,
        /// The slot's engine image programmed again even where the slot
        /// runs the model's engine (a load is otherwise a table switch).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reflash: bool,
    },
    /// Load the next model of the schedule.
    Rotate,
    /// Stop starting work in a slot and wait for what runs there; or, with
    /// `board` (and no slot), tell the balancer to send the board no new
    /// work. One of the two, so that a misspelt `slot` is refused rather
    /// than taken for the board.
    Drain {
        #[serde(default)]
        slot: Option<u8>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        board: bool,
    },
    /// Let a drained slot, or with `board` the drained board, take work
    /// again.
    Resume {
        #[serde(default)]
        slot: Option<u8>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        board: bool,
    },
}

/// Every command's name, for an answer to one that is not.
pub const COMMANDS: &str = "status, models, stats, checkpoint, load, rotate, drain, resume";

/// A refused command: a stable type and a message for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
        }
    }
}

impl Command {
    /// Reads a request line: a typed command, or a refusal that says what
    /// is wrong with it (`bad_request`, or `unknown_command`).
    pub fn parse(line: &[u8]) -> Result<Command, Refusal> {
        let req: Value = match serde_json::from_slice(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Err(Refusal::new("bad_request", "a request is a JSON object")),
            Err(e) => return Err(Refusal::new("bad_request", format!("not JSON: {e}"))),
        };
        let Some(cmd) = req["cmd"].as_str() else {
            return Err(Refusal::new("bad_request", "the request names no \"cmd\""));
        };
        if !COMMANDS.split(", ").any(|c| c == cmd) {
            return Err(Refusal::new(
                "unknown_command",
                format!("no command {cmd:?} ({COMMANDS})"),
            ));
        }
        serde_json::from_value(req.clone())
            .map_err(|e| Refusal::new("bad_request", format!("{cmd}: {e}")))
    }

    /// The command's name.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Status => "status",
            Command::Models => "models",
            Command::Stats { .. } => "stats",
            Command::Checkpoint => "checkpoint",
            Command::Load { .. } => "load",
            Command::Rotate => "rotate",
            Command::Drain { .. } => "drain",
            Command::Resume { .. } => "resume",
        }
    }

    /// The request line `fabricctl` sends.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// An answer line's JSON.
pub fn answer(result: &Result<Value, Refusal>) -> Value {
    match result {
        Ok(data) => json!({"ok": true, "data": data}),
        Err(r) => json!({"ok": false, "error": {"type": r.kind, "message": r.message}}),
    }
}

/// An answer as `fabricctl` reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Done(Value),
    Refused { kind: String, message: String },
}

impl Answer {
    /// Reads an answer line.
    pub fn parse(line: &str) -> Result<Answer, String> {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("the daemon's answer is not JSON: {e}"))?;
        match v["ok"].as_bool() {
            Some(true) => Ok(Answer::Done(v["data"].clone())),
            Some(false) => Ok(Answer::Refused {
                kind: v["error"]["type"].as_str().unwrap_or("error").to_owned(),
                message: v["error"]["message"]
                    .as_str()
                    .unwrap_or("no message")
                    .to_owned(),
            }),
            None => Err(format!("the daemon's answer has no \"ok\": {v}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_fabricctl_writes_the_daemon_reads() {
        for cmd in [
            Command::Status,
            Command::Models,
            Command::Stats {
                since_ms: Some(5),
                merge: false,
            },
            Command::Stats {
                since_ms: None,
                merge: true,
            },
            Command::Checkpoint,
            Command::Load {
                model: "kjv".into(),
                slot: Some(1),
                force: true,
                full: false,
                reflash: true,
            },
            Command::Load {
                model: "kjv".into(),
                slot: None,
                force: false,
                full: true,
                reflash: false,
            },
            Command::Rotate,
            Command::Drain {
                slot: Some(0),
                board: false,
            },
            Command::Resume {
                slot: Some(1),
                board: false,
            },
            Command::Drain {
                slot: None,
                board: true,
            },
            Command::Resume {
                slot: None,
                board: true,
            },
        ] {
            assert_eq!(Command::parse(&cmd.to_line()), Ok(cmd.clone()));
            assert!(COMMANDS.contains(cmd.name()));
        }
    }

    #[test]
    fn a_bad_request_says_what_is_wrong() {
        let kind = |line: &str| Command::parse(line.as_bytes()).map_err(|r| (r.kind, r.message));
        assert_eq!(kind("nonsense").map_err(|e| e.0), Err("bad_request"));
        assert_eq!(kind("[1]").map_err(|e| e.0), Err("bad_request"));
        assert_eq!(kind("{\"x\":1}").map_err(|e| e.0), Err("bad_request"));
        assert_eq!(
            kind("{\"cmd\":\"nope\"}").map_err(|e| e.0),
            Err("unknown_command")
        );
        let (k, m) = kind("{\"cmd\":\"load\"}").expect_err("no model");
        assert_eq!(k, "bad_request");
        assert!(m.contains("model"), "{m}");
        let (k, m) = kind("{\"cmd\":\"drain\",\"slot\":\"x\"}").expect_err("not a slot");
        assert_eq!(k, "bad_request");
        assert!(m.contains("drain"), "{m}");
        let (_, m) = kind("{\"cmd\":\"load\",\"model\":\"kjv\",\"slot\":300}").expect_err("u8");
        assert!(m.contains("300"), "{m}");
    }

    #[test]
    fn answers_round_trip() {
        let ok = answer(&Ok(json!({"n": 1})));
        assert_eq!(
            Answer::parse(&ok.to_string()),
            Ok(Answer::Done(json!({"n": 1})))
        );
        let no = answer(&Err(Refusal::new("slot_busy", "busy")));
        assert_eq!(
            Answer::parse(&no.to_string()),
            Ok(Answer::Refused {
                kind: "slot_busy".into(),
                message: "busy".into()
            })
        );
    }
}
