//! Running a rung of typists against a target.
//!
//! Each typist is a task that owns its [`Typist`] and its connections. A
//! keystroke due at `t` is sent at `t` however the last request is doing
//! (open loop: a slow server cannot slow the typing down), and the
//! suggestion latency at a pause counts from `t`, so the harness's own
//! lateness counts against the server, never for it; that lateness is
//! measured too. Requests go out on up to `connections` keep-alive
//! connections per typist (a browser's six for one host); more wait in
//! the typist, in order, as a browser queues them. When a typist stops,
//! the requests it still has out are dropped with their connections, so
//! the server cancels them as it would for a closed tab.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use super::keystrokes::{typist_seed, Corpus, KeystrokeModel, Keystrokes, ModelError};
use super::typist::{Answer, Request, Typist, TypistStats};
use crate::client::{Conn, Reply, Target};
use crate::rung::{cpu_time, Window};
use crate::workload::{typed_or_raw, Class};

/// How a rung of typists runs.
#[derive(Debug, Clone)]
pub struct TypistsConfig {
    pub typists: usize,
    /// Seeds the keystrokes: the same seed and rung type the same.
    pub seed: u64,
    /// The rung's place in the ladder (part of each typist's seed, so one
    /// rung does not replay the text of the last).
    pub rung: u64,
    pub keystrokes: KeystrokeModel,
    /// Send a field's request this long after its last key (0: one a key).
    pub debounce: Duration,
    /// Connections per typist.
    pub connections: usize,
    pub timeout: Duration,
    pub model: String,
    pub max_tokens: u32,
    /// Session ids begin with this (the typist's number follows).
    pub session_prefix: String,
}

/// Completions the fabric or the cache gave for each prompt, as hashes:
/// two different completions for one prompt (temperature 0) mean one is
/// corrupt.
#[derive(Debug, Default)]
pub struct Consistency {
    seen: Mutex<HashMap<u64, u64>>,
}

fn hash(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Consistency {
    /// Whether `text` agrees with what `prompt` got before.
    fn agrees(&self, prompt: &str, text: &str) -> bool {
        let (p, t) = (hash(prompt), hash(text));
        match self.seen.lock() {
            Ok(mut seen) => *seen.entry(p).or_insert(t) == t,
            // A poisoned map: a panic elsewhere, reported there.
            Err(_) => true,
        }
    }
}

/// Judges a reply to a typist's request for `prompt`.
pub fn judge(reply: &Reply, prompt: &str, consistency: &Consistency) -> Answer {
    let v: Result<Value, _> = serde_json::from_slice(&reply.body);
    match (reply.status, v) {
        (200, Ok(v)) => {
            let Some(text) = v["choices"][0]["text"].as_str() else {
                return Answer::Corrupt(format!("a 200 without text: {v}"));
            };
            // A typed-forward or joined answer is the rest of an earlier
            // completion, shorter than a fresh one: not comparable.
            let checked = matches!(reply.source.as_deref(), None | Some("fabric" | "cache"));
            if checked && !consistency.agrees(prompt, text) {
                return Answer::Corrupt(format!(
                    "{prompt:?} got {text:?} (source {}), another answer to it differed",
                    reply.source.as_deref().unwrap_or("none")
                ));
            }
            Answer::Completion {
                text: text.to_owned(),
                source: reply.source.clone(),
            }
        }
        (200, Err(e)) => Answer::Corrupt(format!("a 200 whose body is not JSON: {e}")),
        (status, Ok(v)) => match typed_or_raw(status, &v) {
            Class::Typed(kind) => Answer::Typed(kind),
            Class::Raw(s) | Class::Corrupt(s) => Answer::Raw(s),
            Class::Ok { .. } => Answer::Raw(format!("status {status}")),
        },
        (status, Err(_)) => Answer::Raw(format!(
            "status {status} with a non-JSON body: {:?}",
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(120)])
        )),
    }
}

/// A typist's connections.
#[derive(Debug)]
struct Pool {
    slots: Arc<Semaphore>,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    fn take(&self) -> Option<Conn> {
        self.idle.lock().ok()?.pop()
    }

    fn give(&self, c: Conn) {
        if c.is_open() {
            if let Ok(mut idle) = self.idle.lock() {
                idle.push(c);
            }
        }
    }
}

struct Answered {
    seq: u64,
    prompt: String,
    answer: Answer,
}

/// Runs a rung of typists: `warmup`, then `duration` measured. The harness's
/// CPU is measured over the whole rung, the daemon's counters over the
/// window.
pub async fn run(
    target: &Target,
    corpus: &Arc<Corpus>,
    cfg: &TypistsConfig,
    warmup: Duration,
    duration: Duration,
) -> Result<TypistStats, ModelError> {
    let cpu0 = cpu_time();
    let start = Instant::now();
    let window = Window::after(start, warmup, duration);
    let daemon = tokio::spawn(crate::daemon::counters_over(target.clone(), window));
    let mut stats = run_in(target, corpus, cfg, start, window).await?;
    stats.daemon = daemon.await.ok().flatten();
    stats.wall = start.elapsed();
    stats.harness_cpu = (cpu_time() - cpu0).as_secs_f64() / stats.wall.as_secs_f64().max(1e-9);
    Ok(stats)
}

/// Runs a rung of typists starting at `start`, counting in `window`,
/// beside other classes of a mixed rung (whose daemon counters are the
/// rung's, not a class's).
pub async fn run_in(
    target: &Target,
    corpus: &Arc<Corpus>,
    cfg: &TypistsConfig,
    start: Instant,
    window: Window,
) -> Result<TypistStats, ModelError> {
    // Refused here, once, rather than in every typist.
    Keystrokes::new(corpus.clone(), cfg.keystrokes.clone(), 0)?;
    let consistency = Arc::new(Consistency::default());
    let cfg = Arc::new(cfg.clone());
    let mut typists = JoinSet::new();
    for i in 0..cfg.typists {
        typists.spawn(typist(
            target.clone(),
            corpus.clone(),
            cfg.clone(),
            i,
            start,
            window,
            consistency.clone(),
        ));
    }
    let mut total = TypistStats::new(cfg.typists);
    while let Some(done) = typists.join_next().await {
        match done {
            Ok(s) => total.merge(&s),
            Err(e) => {
                total.raw += 1;
                total.sample(format!("typist task failed: {e}"));
            }
        }
    }
    total.window = window.to - window.from;
    Ok(total)
}

async fn typist(
    target: Target,
    corpus: Arc<Corpus>,
    cfg: Arc<TypistsConfig>,
    i: usize,
    start: Instant,
    window: Window,
    consistency: Arc<Consistency>,
) -> TypistStats {
    let seed = typist_seed(cfg.seed, cfg.rung, i as u64);
    let mut keys = match Keystrokes::new(corpus, cfg.keystrokes.clone(), seed) {
        Ok(k) => k,
        Err(e) => {
            let mut s = TypistStats::new(1);
            s.raw += 1;
            s.sample(e.to_string());
            return s;
        }
    };
    let mut t = Typist::new(window, cfg.debounce);
    let session = format!("{}{i}", cfg.session_prefix);
    let pool = Arc::new(Pool {
        slots: Arc::new(Semaphore::new(cfg.connections.max(1))),
        idle: Mutex::new(Vec::new()),
    });
    let (tx, mut rx) = mpsc::channel::<Answered>(cfg.connections.max(1) * 4 + 16);
    let mut requests = JoinSet::new();
    let mut next = start + keys.start_delay();
    let send = |requests: &mut JoinSet<()>, r: Request| {
        let body = Bytes::from(
            serde_json::to_vec(&json!({
                "model": cfg.model,
                "prompt": r.prompt,
                "max_tokens": cfg.max_tokens,
                "temperature": 0,
                "session": session,
                // Its requests go out on several connections: the daemon
                // orders them by this, not by when they arrive.
                "session_seq": r.seq,
                "user": session,
            }))
            .unwrap_or_default(),
        );
        requests.spawn(request(
            target.clone(),
            pool.clone(),
            body,
            r,
            tx.clone(),
            cfg.timeout,
            consistency.clone(),
        ));
    };
    loop {
        let due_send = t.due_send();
        tokio::select! {
            biased;
            Some(a) = rx.recv() => t.answer(Instant::now(), a.seq, &a.prompt, a.answer),
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            () = sleep_until(due_send), if due_send.is_some() => {
                if let Some(r) = t.flush(Instant::now()) {
                    send(&mut requests, r);
                }
            }
            () = tokio::time::sleep_until(next.into()) => {
                if next > window.to {
                    t.stop();
                    break;
                }
                t.lag(next, Instant::now().saturating_duration_since(next));
                let key = keys.next_key();
                if let Some(r) = t.key(next, &key) {
                    send(&mut requests, r);
                }
                next += key.gap;
            }
        }
    }
    // Dropping `requests` drops what is still out, and its connections.
    t.stats
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

async fn request(
    target: Target,
    pool: Arc<Pool>,
    body: Bytes,
    r: Request,
    tx: mpsc::Sender<Answered>,
    timeout: Duration,
    consistency: Arc<Consistency>,
) {
    let answer = async {
        let Ok(_slot) = pool.slots.acquire().await else {
            return Answer::Raw("the typist's connections are gone".into());
        };
        let mut conn = match pool.take() {
            Some(c) if c.is_open() => c,
            _ => match Conn::connect(&target).await {
                Ok(c) => c,
                Err(e) => return Answer::Raw(e.to_string()),
            },
        };
        match conn
            .send(&target, "POST", "/v1/completions", body, timeout)
            .await
        {
            Ok(reply) => {
                pool.give(conn);
                judge(&reply, &r.prompt, &consistency)
            }
            Err(e) => Answer::Raw(e.to_string()),
        }
    }
    .await;
    let _ = tx
        .send(Answered {
            seq: r.seq,
            prompt: r.prompt,
            answer,
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str, source: Option<&str>) -> Reply {
        Reply {
            status,
            body: Bytes::from(body.to_owned()),
            source: source.map(str::to_owned),
            ..Reply::default()
        }
    }

    #[test]
    fn answers_are_judged_and_a_second_text_for_a_prompt_is_corrupt() {
        let c = Consistency::default();
        let ok = r#"{"choices":[{"text":" said"}]}"#;
        assert_eq!(
            judge(&reply(200, ok, Some("fabric")), "And God", &c),
            Answer::Completion {
                text: " said".into(),
                source: Some("fabric".into())
            }
        );
        // The cache must give what the fabric gave.
        assert!(matches!(
            judge(&reply(200, ok, Some("cache")), "And God", &c),
            Answer::Completion { .. }
        ));
        let other = r#"{"choices":[{"text":" saw"}]}"#;
        assert!(matches!(
            judge(&reply(200, other, Some("cache")), "And God", &c),
            Answer::Corrupt(_)
        ));
        // The rest of an earlier completion is not held to a fresh one.
        assert!(matches!(
            judge(&reply(200, other, Some("typed-forward")), "And God", &c),
            Answer::Completion { .. }
        ));
        let superseded = r#"{"error":{"type":"superseded","code":"superseded","message":"x"}}"#;
        assert_eq!(
            judge(&reply(409, superseded, None), "x", &c),
            Answer::Typed("superseded".into())
        );
        assert!(matches!(
            judge(&reply(500, "oops", None), "x", &c),
            Answer::Raw(_)
        ));
        assert!(matches!(
            judge(&reply(200, "{}", None), "x", &c),
            Answer::Corrupt(_)
        ));
    }
}
