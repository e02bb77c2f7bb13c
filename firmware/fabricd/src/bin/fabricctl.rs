//! `fabricctl`: control a running fabricd over its Unix socket (over SSH on
//! a board). `fabricctl --help` lists the commands; `--json` prints what the
//! daemon answered, for scripts. Any refusal exits non-zero with the
//! daemon's message.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use fabricd::control::protocol::{self, Answer};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(name = "fabricctl", version, about = "Control a running fabricd")]
struct Cli {
    /// The daemon's control socket.
    #[arg(long, global = true, default_value = "/run/fabricd.sock")]
    socket: PathBuf,
    /// Print the daemon's answer as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The daemon, the fabric and its slots.
    Status,
    /// The catalog, and which slot holds what.
    Models,
    /// Load a model into a slot: its table alone where the slot runs the
    /// model's engine, else the engine's image first (partial
    /// reconfiguration).
    Load {
        model: String,
        #[arg(long)]
        slot: Option<u8>,
        /// Load even if the slot's requests have not finished within the
        /// drain timeout (they get a typed `model_not_loaded` answer).
        #[arg(long)]
        force: bool,
        /// A full reconfiguration: the model's full image (shell and slot
        /// 0) for the whole fabric, which is dark meanwhile; every slot is
        /// drained first.
        #[arg(long, conflicts_with = "slot")]
        full: bool,
        /// Program the slot's engine image again even where the slot runs
        /// the model's engine.
        #[arg(long, conflicts_with = "full")]
        reflash: bool,
    },
    /// Load the next model of the configured rotation schedule.
    Rotate,
    /// Stop starting work in a slot and wait for what runs there; or with
    /// --board, the whole board, for the load balancer (its agent check
    /// answers `drain`; the board still serves what arrives).
    Drain {
        #[arg(required_unless_present = "board", conflicts_with = "board")]
        slot: Option<u8>,
        #[arg(long)]
        board: bool,
    },
    /// Let a drained slot, or with --board the drained board, take work
    /// again.
    Resume {
        #[arg(required_unless_present = "board", conflicts_with = "board")]
        slot: Option<u8>,
        #[arg(long)]
        board: bool,
    },
    /// Served requests per window; the open window included.
    Stats {
        /// Windows ending after TIME: seconds since 1970, an RFC 3339 UTC
        /// time (2026-11-30T14:00:00Z), or an age such as 2h or 30m.
        #[arg(long)]
        since: Option<String>,
        /// Read the stats log in DIR instead of asking the daemon (works
        /// while it is stopped; the open window is as of its last
        /// checkpoint).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// With each window's latency histograms and client sketch: what
        /// `fleet-stats` needs (with --json).
        #[arg(long)]
        merge: bool,
    },
    /// Several boards' stats merged into one view per window. Each FILE is
    /// a board's `/stats?merge=1` answer (or `fabricctl stats --merge
    /// --json`), `-` for standard input; fetch them with curl.
    FleetStats {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

fn parse_since(text: &str) -> Result<u64, String> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t = text.trim();
    if let Some(unit) = t.chars().last().filter(|c| c.is_ascii_alphabetic()) {
        let n: f64 = t[..t.len() - 1]
            .parse()
            .map_err(|_| format!("{t:?}: not an age like 2h"))?;
        let secs = match unit {
            's' => n,
            'm' => n * 60.0,
            'h' => n * 3600.0,
            'd' => n * 86_400.0,
            _ => return Err(format!("{t:?}: an age takes s, m, h or d")),
        };
        return Ok(now_ms.saturating_sub((secs * 1000.0) as u64));
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(secs * 1000);
    }
    parse_rfc3339(t).ok_or_else(|| format!("{t:?}: not seconds, an age, or YYYY-MM-DDTHH:MM:SSZ"))
}

/// `YYYY-MM-DDTHH:MM[:SS]Z` (UTC) to milliseconds since 1970.
fn parse_rfc3339(t: &str) -> Option<u64> {
    let t = t.strip_suffix('Z').unwrap_or(t);
    let (date, time) = t.split_once('T').unwrap_or((t, "00:00:00"));
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let h: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || h.len() < 2 {
        return None;
    }
    let days = days_from_civil(d[0], d[1], d[2]);
    let secs = days * 86_400 + h[0] * 3600 + h[1] * 60 + h.get(2).copied().unwrap_or(0);
    u64::try_from(secs).ok().map(|s| s * 1000)
}

// Howard Hinnant's algorithms: civil dates to days since 1970 and back.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn utc(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

fn ask(socket: &PathBuf, cmd: &protocol::Command) -> Result<Answer, String> {
    let mut stream = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot reach fabricd at {}: {e} (is it running? is --socket right?)",
            socket.display()
        )
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(600)));
    stream
        .write_all(&cmd.to_line())
        .map_err(|e| format!("writing to {}: {e}", socket.display()))?;
    let mut reply = String::new();
    BufReader::new(&stream)
        .read_line(&mut reply)
        .map_err(|e| format!("reading from {}: {e}", socket.display()))?;
    Answer::parse(&reply)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cmd = match &cli.command {
        Command::Status => protocol::Command::Status,
        Command::Models => protocol::Command::Models,
        Command::Load {
            model,
            slot,
            force,
            full,
            reflash,
        } => protocol::Command::Load {
            model: model.clone(),
            slot: *slot,
            force: *force,
            full: *full,
            reflash: *reflash,
        },
        Command::Rotate => protocol::Command::Rotate,
        Command::Drain { slot, board } => protocol::Command::Drain {
            slot: *slot,
            board: *board,
        },
        Command::Resume { slot, board } => protocol::Command::Resume {
            slot: *slot,
            board: *board,
        },
        Command::Stats { since, merge, .. } => {
            let since_ms = match since.as_deref().map(parse_since).transpose() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("fabricctl: --since {e}");
                    return ExitCode::from(2);
                }
            };
            protocol::Command::Stats {
                since_ms,
                merge: *merge,
            }
        }
        // Files only: fabricctl has no HTTP client, and needs no daemon.
        Command::FleetStats { files } => return fleet_stats(files, cli.json),
    };
    let answer = match (&cli.command, &cmd) {
        (Command::Stats { dir: Some(dir), .. }, protocol::Command::Stats { since_ms, merge }) => {
            Ok(Answer::Done(offline_stats(dir, *since_ms, *merge)))
        }
        _ => ask(&cli.socket, &cmd),
    };
    let answer = match answer {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fabricctl: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&match &answer {
                Answer::Done(data) => json!({"ok": true, "data": data}),
                Answer::Refused { kind, message } => {
                    json!({"ok": false, "error": {"type": kind, "message": message}})
                }
            })
            .unwrap_or_default()
        );
    }
    match answer {
        Answer::Refused { kind, message } => {
            eprintln!("fabricctl: refused ({kind}): {message}");
            ExitCode::FAILURE
        }
        Answer::Done(data) => {
            if !cli.json {
                print_human(&cli.command, &data);
            }
            ExitCode::SUCCESS
        }
    }
}

/// The stats report from the files alone.
fn offline_stats(dir: &std::path::Path, since_ms: Option<u64>, merge: bool) -> Value {
    let (records, read) = fabricd::stats::read_dir(dir);
    let windows: Vec<Value> = records
        .iter()
        .filter(|r| since_ms.is_none_or(|s| r.end_ms >= s))
        .map(|r| fabricd::stats::window_json_with(r, merge))
        .collect();
    // The window length of the latest records, which a merge needs; the
    // log does not hold the daemon's configuration.
    let window_ms = records
        .iter()
        .rev()
        .find_map(|r| (r.window_ms > 0).then_some(r.window_ms));
    json!({
        "window_seconds": window_ms.map(|ms| ms as f64 / 1000.0),
        "aligned": window_ms.is_some(),
        "storage": {"path": dir.join(fabricd::stats::LOG), "ok": true, "error": null, "now": read},
        "windows": windows,
    })
}

/// `fabricctl fleet-stats FILE...`: the merge, printed as JSON (`--json`)
/// or as a table.
fn fleet_stats(files: &[PathBuf], json_out: bool) -> ExitCode {
    let view = match fabricd::stats::fleet::merge_files(files) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fabricctl: fleet-stats: {e}");
            return ExitCode::from(2);
        }
    };
    let text = if json_out {
        serde_json::to_string_pretty(&view).unwrap_or_default() + "\n"
    } else {
        fleet_table(&view)
    };
    // Written once, and a closed pipe (`| head`) is not an error to report.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

fn fleet_table(v: &fabricd::stats::fleet::FleetView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} board(s): {}; windows of {} s",
        v.boards.len(),
        v.boards.join(", "),
        v.window_seconds
    );
    let _ = writeln!(
        out,
        "{:<19} {:>7} {:>8} {:>5} {:>9} {:>9} {:>11}  {:>17}  {:>14}  boards",
        "window (UTC)",
        "ok",
        "requests",
        "ovlp",
        "tok in",
        "tok out",
        "conns peak",
        "p50/p95/p99 ms",
        "unique clients"
    );
    for w in &v.windows {
        let l = &w.latency_ms["all"];
        let lat = if l["count"].as_u64().unwrap_or(0) == 0 {
            "-".to_owned()
        } else {
            format!("{}/{}/{}", l["p50"], l["p95"], l["p99"])
        };
        let u = &w.unique_clients;
        let uniques = match u.estimate {
            Some(e) => format!("~{e}"),
            None => format!("{}..{}", u.at_least, u.at_most),
        };
        let mut notes = Vec::new();
        if !w.missing.is_empty() {
            notes.push(format!("missing {}", w.missing.join(",")));
        }
        if !w.partial.is_empty() {
            notes.push(format!("part {}", w.partial.join(",")));
        }
        let _ = writeln!(
            out,
            "{:<19} {:>7} {:>8} {:>5} {:>9} {:>9} {:>11}  {:>17}  {:>14}  {}/{}{}{}",
            utc(w.start_ms),
            w.requests.get("ok").copied().unwrap_or(0),
            w.requests_total,
            w.overlapped,
            w.tokens_in,
            w.tokens_out,
            format!(
                "{}..{}",
                w.peak_connections.at_least, w.peak_connections.at_most
            ),
            lat,
            uniques,
            w.boards.len(),
            v.boards.len(),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            },
            if w.open { "  (open)" } else { "" }
        );
    }
    for s in &v.skipped {
        let _ = writeln!(
            out,
            "skipped: {} window {} (boot {}): {}",
            s.board, s.index, s.boot_id, s.why
        );
    }
    let _ = writeln!(
        out,
        "peaks are bounds (the boards' peaks need not coincide); ~N: an estimate \
         from the boards' client sketches, A..B: bounds"
    );
    out
}

fn print_human(cmd: &Command, d: &Value) {
    match cmd {
        Command::Status => {
            println!(
                "fabricd {} up {:.0} s, fabric {}",
                d["version"].as_str().unwrap_or("?"),
                d["uptime_s"].as_f64().unwrap_or(0.0),
                d["fabric"]["state"].as_str().unwrap_or("?")
            );
            println!(
                "queue {} waiting, {} on the fabric, {} connections",
                d["queue_depth"], d["in_flight"], d["connections"]
            );
            print_slots(&d["slots"]);
        }
        Command::Models => {
            for m in d["models"].as_array().into_iter().flatten() {
                let slots: Vec<String> = m["slots"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| format!("slot {} {}", s["slot"], s["state"].as_str().unwrap_or("?")))
                    .collect();
                println!(
                    "{:<12} {:<10} {}{}",
                    m["id"].as_str().unwrap_or("?"),
                    if m["usable"] == true {
                        "usable"
                    } else {
                        "UNUSABLE"
                    },
                    if slots.is_empty() {
                        "not loaded".to_owned()
                    } else {
                        slots.join(", ")
                    },
                    m["problem"]
                        .as_str()
                        .map(|p| format!("  ({p})"))
                        .unwrap_or_default()
                );
                // Every unusable image with its own reason, past the one
                // the model's line gives.
                for i in m["images"].as_array().into_iter().flatten() {
                    if let Some(p) = i["problem"].as_str().filter(|p| m["problem"] != *p) {
                        println!(
                            "  image {} ({}) UNUSABLE  ({p})",
                            i["file"].as_str().unwrap_or("?"),
                            i["kind"].as_str().unwrap_or("?")
                        );
                    }
                }
            }
        }
        Command::Load { .. } | Command::Rotate | Command::Drain { .. } | Command::Resume { .. } => {
            println!("{}", d["message"].as_str().unwrap_or("done"));
            if d["slots"].is_array() {
                print_slots(&d["slots"]);
            }
        }
        Command::Stats { .. } => print_stats(d),
        Command::FleetStats { .. } => {}
    }
}

fn print_slots(slots: &Value) {
    for s in slots.as_array().into_iter().flatten() {
        println!(
            "slot {}  {:<8} {:<12} {}",
            s["index"],
            s["state"].as_str().unwrap_or("?"),
            s["model"].as_str().unwrap_or("-"),
            if s["accepting"] == false {
                "draining"
            } else {
                ""
            }
        );
    }
}

fn print_stats(d: &Value) {
    let storage = &d["storage"];
    if storage["ok"] != true {
        println!(
            "storage: {}",
            storage["error"].as_str().unwrap_or("failing")
        );
    }
    println!(
        "{:<19} {:>6} {:>5} {:>6} {:>7} {:>8} {:>5} {:>9} {:>9} {:>6} {:>7}  {:>17}  {:>17}",
        "window (UTC)",
        "length",
        "conns",
        "unique",
        "ok",
        "requests",
        "ovlp",
        "tok in",
        "tok out",
        "peak",
        "2+ s",
        "p50/p95/p99 ms",
        "clean p50/p95/p99"
    );
    for w in d["windows"].as_array().into_iter().flatten() {
        let start = w["start_ms"].as_u64().unwrap_or(0);
        let end = w["end_ms"].as_u64().unwrap_or(start);
        let total: u64 = w["requests"]
            .as_object()
            .map_or(0, |o| o.values().filter_map(Value::as_u64).sum());
        let lat = |l: &Value| {
            if l["count"].as_u64().unwrap_or(0) == 0 {
                "-".to_owned()
            } else {
                format!("{}/{}/{}", l["p50"], l["p95"], l["p99"])
            }
        };
        println!(
            "{:<19} {:>5}s {:>5} {:>6} {:>7} {:>8} {:>5} {:>9} {:>9} {:>6} {:>7.1}  {:>17}  {:>17}{}",
            utc(start),
            (end.saturating_sub(start)) / 1000,
            w["peak_connections"],
            w["unique_clients"],
            w["requests"]["ok"].as_u64().unwrap_or(0),
            total,
            w["overlapped"],
            w["tokens_in"],
            w["tokens_out"],
            w["peak_in_flight"],
            w["two_plus_in_flight_s"].as_f64().unwrap_or(0.0),
            lat(&w["latency_ms"]["all"]),
            lat(&w["latency_ms"]["clean"]),
            if w["open"] == true { "  (open)" } else { "" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_rfc3339("1970-01-02T00:00:00Z"), Some(86_400_000));
        assert_eq!(
            parse_rfc3339("2026-11-30T14:30:00Z").map(utc).as_deref(),
            Some("2026-11-30 14:30:00")
        );
        assert_eq!(parse_since("1700000000"), Ok(1_700_000_000_000));
        assert!(parse_since("2h").is_ok());
        assert!(parse_since("yesterday").is_err());
        assert_eq!(utc(0), "1970-01-01 00:00:00");
    }
}
