//! `abuse --target http://ADDR:PORT --duration SECS [...]`: what a hostile
//! LAN does to a fabricd, all at once, for `scripts/bench-abuse` to run
//! beside a ladder rung of ordinary clients:
//!
//! - slowloris: connections that send a request head a few bytes at a
//!   time, never finishing it;
//! - half-sent heads: connections that send most of a large head at once
//!   and then wait;
//! - oversized bodies: requests declaring a body far over the limit, with
//!   `Expect: 100-continue`, one after another;
//! - a flood: connections opened past the daemon's cap, each asking once,
//!   opened again when closed.
//!
//! And, for `scripts/bench-typists`, typing sessions driven as no typist
//! drives them ([`typing`]): at machine speed, a new session every request,
//! never pausing, a new model every keystroke.
//!
//! Each attack comes from its own loopback address (127.0.0.2 and up), as
//! it would from its own host. At the end it prints, as JSON, what each
//! attack was answered: statuses counted, and closes without an answer.

#![forbid(unsafe_code)]

mod typing;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[derive(Parser, Debug)]
#[command(name = "abuse", about = "A hostile LAN's traffic against a fabricd")]
struct Args {
    /// The daemon, as http://ADDRESS:PORT.
    #[arg(long)]
    target: String,
    /// Seconds to keep at it.
    #[arg(long)]
    duration: f64,
    /// Slowloris connections.
    #[arg(long, default_value_t = 2000)]
    slowloris: usize,
    /// Connections that send a large head but its end.
    #[arg(long, default_value_t = 2000)]
    half_heads: usize,
    /// Bytes of each half-sent head.
    #[arg(long, default_value_t = 60_000)]
    half_head_bytes: usize,
    /// Clients sending oversized declared bodies, one after another.
    #[arg(long, default_value_t = 4)]
    oversized: usize,
    /// Connections of the flood.
    #[arg(long, default_value_t = 2000)]
    flood: usize,
    /// Typing sessions at machine speed (up to 2,000 keystrokes a second
    /// each).
    #[arg(long, default_value_t = 0)]
    machine_sessions: usize,
    /// Clients naming a new session in every request (200 a second each).
    #[arg(long, default_value_t = 0)]
    session_hoppers: usize,
    /// Sessions typing a keystroke every 100 ms without ever pausing.
    #[arg(long, default_value_t = 0)]
    nonstop_sessions: usize,
    /// Never-pausing sessions naming the next of `--models` at each
    /// keystroke.
    #[arg(long, default_value_t = 0)]
    model_switchers: usize,
    /// The models the typing sessions name (the first, unless switching).
    #[arg(long, value_delimiter = ',', default_value = "kjv")]
    models: Vec<String>,
}

/// What an attack was answered: a status, or `closed`, `reset`, `refused`.
#[derive(Default)]
struct Tally(Mutex<BTreeMap<String, u64>>);

impl Tally {
    fn add(&self, what: impl Into<String>) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(what.into())
            .or_default() += 1;
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!(*self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn source(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from, 0))?;
    s.connect(to).await
}

/// The status of what the server sent (`closed` if nothing before EOF,
/// `reset` on an error), reading for at most `wait`.
async fn answer(s: &mut TcpStream, wait: Duration) -> String {
    let mut buf = [0u8; 256];
    let mut got = Vec::new();
    let read = tokio::time::timeout(wait, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return "closed".to_owned(),
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if let Some(line) = got
                        .split(|&b| b == b'\n')
                        .next()
                        .filter(|_| got.contains(&b'\n'))
                    {
                        let line = String::from_utf8_lossy(line);
                        return line.split(' ').nth(1).unwrap_or("garbled").to_owned();
                    }
                }
                Err(_) => return "reset".to_owned(),
            }
        }
    })
    .await;
    read.unwrap_or_else(|_| "no answer".to_owned())
}

async fn slowloris(to: SocketAddr, host: String, until: Instant, tally: Arc<Tally>) {
    let Ok(mut s) = connect_from(source(2), to).await else {
        tally.add("refused");
        return;
    };
    let head = format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\nx-a: ");
    if s.write_all(head.as_bytes()).await.is_err() {
        tally.add("reset");
        return;
    }
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if s.write_all(b"a").await.is_err() {
            tally.add(answer(&mut s, Duration::from_secs(1)).await);
            return;
        }
    }
    tally.add("held to the end");
}

async fn half_head(to: SocketAddr, host: String, bytes: usize, until: Instant, tally: Arc<Tally>) {
    let Ok(mut s) = connect_from(source(3), to).await else {
        tally.add("refused");
        return;
    };
    let mut head = format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\nx-a: ").into_bytes();
    head.resize(bytes, b'a');
    if s.write_all(&head).await.is_err() {
        tally.add(answer(&mut s, Duration::from_secs(1)).await);
        return;
    }
    let left = until.saturating_duration_since(Instant::now());
    let a = answer(&mut s, left).await;
    tally.add(if a == "no answer" {
        "held to the end".to_owned()
    } else {
        a
    });
}

async fn oversized(to: SocketAddr, host: String, until: Instant, tally: Arc<Tally>) {
    while Instant::now() < until {
        let Ok(mut s) = connect_from(source(4), to).await else {
            tally.add("refused");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let req = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
             content-length: 100000000\r\nexpect: 100-continue\r\n\r\n"
        );
        if s.write_all(req.as_bytes()).await.is_err() {
            tally.add("reset");
            continue;
        }
        tally.add(answer(&mut s, Duration::from_secs(5)).await);
        // A few a second each: an attack, not a benchmark of the harness.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn flood(to: SocketAddr, host: String, until: Instant, tally: Arc<Tally>) {
    while Instant::now() < until {
        let Ok(mut s) = connect_from(source(5), to).await else {
            tally.add("refused");
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let req = format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n");
        if s.write_all(req.as_bytes()).await.is_err() {
            tally.add("reset");
            continue;
        }
        let a = answer(&mut s, Duration::from_secs(5)).await;
        let served = a == "200";
        tally.add(a);
        if served {
            // Served: hold the connection (keep-alive) to the end.
            let left = until.saturating_duration_since(Instant::now());
            let mut buf = [0u8; 64];
            let _ = tokio::time::timeout(left, s.read(&mut buf)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let target = match ladder::client::Target::parse(&args.target) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("abuse: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map(
        |(_, hard)| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard)
        },
    );
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("abuse: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let until = Instant::now() + Duration::from_secs_f64(args.duration.max(0.0));
        let kinds = ["slowloris", "half_heads", "oversized", "flood"];
        let tallies: Vec<Arc<Tally>> = kinds.iter().map(|_| Arc::default()).collect();
        let mut tasks = tokio::task::JoinSet::new();
        let (to, host) = (target.addr, target.host.clone());
        for _ in 0..args.slowloris {
            tasks.spawn(slowloris(to, host.clone(), until, tallies[0].clone()));
        }
        for _ in 0..args.half_heads {
            tasks.spawn(half_head(
                to,
                host.clone(),
                args.half_head_bytes,
                until,
                tallies[1].clone(),
            ));
        }
        for _ in 0..args.oversized {
            tasks.spawn(oversized(to, host.clone(), until, tallies[2].clone()));
        }
        for _ in 0..args.flood {
            tasks.spawn(flood(to, host.clone(), until, tallies[3].clone()));
        }
        let attacks = typing::Attacks {
            machine: args.machine_sessions,
            hoppers: args.session_hoppers,
            nonstop: args.nonstop_sessions,
            switchers: args.model_switchers,
            models: args.models.clone(),
        };
        let typed = typing::run(&target, &attacks, until).await;
        while tasks.join_next().await.is_some() {}
        let typed = match typed {
            Ok(t) => t,
            Err(e) => {
                eprintln!("abuse: {e}");
                return ExitCode::from(2);
            }
        };
        let report: serde_json::Map<String, serde_json::Value> = kinds
            .iter()
            .copied()
            .zip(tallies.iter())
            .chain(typed.iter().map(|(k, t)| (*k, t)))
            .map(|(k, t)| (k.to_owned(), t.json()))
            .collect();
        println!("{}", serde_json::Value::Object(report));
        ExitCode::SUCCESS
    })
}
