//! Typing sessions driven as no typist drives them, each kind from its own
//! loopback address (one hostile host apiece):
//!
//! - machine speed: a session's keystrokes back to back on eight
//!   connections, up to two thousand a second;
//! - session hoppers: a new session id for every request, so thousands of
//!   sessions from one address within seconds;
//! - never pausing: a keystroke every 100 ms, forever;
//! - model switchers: the same, but each keystroke names the next model.
//!
//! What each was answered is tallied as the status and the error's `type`
//! (`409 superseded`, `429 predicted_late`, ...); an error without a typed
//! body is tallied `untyped`, a request without an answer `no answer`.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ladder::client::{Conn, RawError, Reply, Target};
use serde_json::json;
use tokio::task::JoinSet;

use super::Tally;

/// The text typed: ASCII, so any prefix is a prompt.
const TEXT: &str = "In the beginning God created the heaven and the earth. And the earth \
                    was without form, and void; and darkness was upon the face of the deep. \
                    And the Spirit of God moved upon the face of the waters.";

/// Keystroke `n`'s prompt: the text up to a point that moves on with `n`.
fn prompt(n: u64) -> &'static str {
    let span = (TEXT.len() - 8) as u64;
    &TEXT[..8 + (n % span) as usize]
}

/// What a typing attack's request was answered, as tallied.
fn outcome(r: &Result<Reply, RawError>) -> String {
    match r {
        Ok(reply) if reply.status == 200 => "200".to_owned(),
        Ok(reply) => {
            let kind = serde_json::from_slice::<serde_json::Value>(&reply.body)
                .ok()
                .and_then(|v| v["error"]["type"].as_str().map(str::to_owned));
            format!("{} {}", reply.status, kind.as_deref().unwrap_or("untyped"))
        }
        Err(RawError::Timeout(_)) => "no answer".to_owned(),
        Err(_) => "connection lost".to_owned(),
    }
}

/// One connection of a hostile host, opened again when it closes.
struct Link {
    target: Target,
    conn: Option<Conn>,
}

impl Link {
    fn new(target: &Target) -> Link {
        Link {
            target: target.clone(),
            conn: None,
        }
    }

    async fn post(&mut self, body: serde_json::Value, tally: &Tally) {
        if !self.conn.as_ref().is_some_and(Conn::is_open) {
            match Conn::connect(&self.target).await {
                Ok(c) => self.conn = Some(c),
                Err(_) => {
                    tally.add("refused");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let body = Bytes::from(body.to_string());
        let r = conn
            .send(
                &self.target,
                "POST",
                "/v1/completions",
                body,
                Duration::from_secs(10),
            )
            .await;
        tally.add(outcome(&r));
    }
}

/// How many sessions of each kind, and the models they name.
#[derive(Debug, Clone)]
pub struct Attacks {
    pub machine: usize,
    pub hoppers: usize,
    pub nonstop: usize,
    pub switchers: usize,
    pub models: Vec<String>,
}

/// A kind of hostile typing session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    MachineSpeed,
    SessionHopper,
    NeverPausing,
    ModelSwitcher,
}

impl Kind {
    /// Its name in the report.
    fn name(self) -> &'static str {
        match self {
            Kind::MachineSpeed => "machine_speed",
            Kind::SessionHopper => "session_hoppers",
            Kind::NeverPausing => "never_pausing",
            Kind::ModelSwitcher => "model_switchers",
        }
    }

    /// The loopback address it comes from, as from a host of its own.
    fn source(self) -> Ipv4Addr {
        let host = match self {
            Kind::MachineSpeed => 6,
            Kind::SessionHopper => 7,
            Kind::NeverPausing => 8,
            Kind::ModelSwitcher => 9,
        };
        Ipv4Addr::new(127, 0, 0, host)
    }
}

impl Attacks {
    /// The kinds asked for, with how many sessions of each.
    fn kinds(&self) -> Vec<(Kind, usize)> {
        [
            (Kind::MachineSpeed, self.machine),
            (Kind::SessionHopper, self.hoppers),
            (Kind::NeverPausing, self.nonstop),
            (Kind::ModelSwitcher, self.switchers),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// Runs the attacks until `until`; each kind's tally, by name.
pub async fn run(
    target: &Target,
    attacks: &Attacks,
    until: Instant,
) -> Result<Vec<(&'static str, Arc<Tally>)>, String> {
    let mut tasks = JoinSet::new();
    let mut tallies = Vec::new();
    let model = attacks
        .models
        .first()
        .cloned()
        .ok_or("--models names none")?;
    for (kind, sessions) in attacks.kinds() {
        let from = target.clone().from_address(kind.source())?;
        let tally = Arc::new(Tally::default());
        tallies.push((kind.name(), tally.clone()));
        for i in 0..sessions {
            let session = format!("{}-{i}", kind.name());
            match kind {
                Kind::MachineSpeed => {
                    let seq = Arc::new(AtomicU64::new(0));
                    for _ in 0..8 {
                        tasks.spawn(machine(
                            Link::new(&from),
                            session.clone(),
                            model.clone(),
                            seq.clone(),
                            until,
                            tally.clone(),
                        ));
                    }
                }
                Kind::SessionHopper => {
                    tasks.spawn(hopper(
                        Link::new(&from),
                        session,
                        model.clone(),
                        until,
                        tally.clone(),
                    ));
                }
                Kind::NeverPausing | Kind::ModelSwitcher => {
                    let models = if kind == Kind::ModelSwitcher {
                        attacks.models.clone()
                    } else {
                        vec![model.clone()]
                    };
                    // Two connections in turn: a keystroke's answer (most
                    // often `superseded` by the next) is back before the
                    // connection's next keystroke.
                    let start = Instant::now();
                    for lane in 0..2 {
                        tasks.spawn(steady(
                            Link::new(&from),
                            session.clone(),
                            models.clone(),
                            (start, lane),
                            until,
                            tally.clone(),
                        ));
                    }
                }
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    Ok(tallies)
}

/// One of a machine-speed session's eight connections: a keystroke, its
/// answer, 4 ms, the next.
async fn machine(
    mut link: Link,
    session: String,
    model: String,
    seq: Arc<AtomicU64>,
    until: Instant,
    tally: Arc<Tally>,
) {
    while Instant::now() < until {
        let n = seq.fetch_add(1, Ordering::Relaxed);
        let body = json!({"model": model, "prompt": prompt(n), "max_tokens": 8,
                          "session": session, "session_seq": n, "user": session});
        link.post(body, &tally).await;
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
}

/// A client that names a new session in every request, 200 a second.
async fn hopper(mut link: Link, name: String, model: String, until: Instant, tally: Arc<Tally>) {
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let body = json!({"model": model, "prompt": prompt(n), "max_tokens": 8,
                          "session": format!("{name}-{n}"), "user": name});
        link.post(body, &tally).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every other keystroke of a session typing one every 100 ms without a
/// pause (`lane` 0 or 1 of two connections), each naming the next of
/// `models`.
async fn steady(
    mut link: Link,
    session: String,
    models: Vec<String>,
    (start, lane): (Instant, u64),
    until: Instant,
    tally: Arc<Tally>,
) {
    let period = Duration::from_millis(100);
    let mut n = lane;
    loop {
        let at = start + period * u32::try_from(n).unwrap_or(u32::MAX);
        if at >= until {
            return;
        }
        tokio::time::sleep_until(at.into()).await;
        let model = &models[n as usize % models.len()];
        let body = json!({"model": model, "prompt": prompt(n), "max_tokens": 8,
                          "session": session, "session_seq": n, "user": session});
        link.post(body, &tally).await;
        n += 2;
    }
}
