//! Running one rung: N clients for a fixed time, closed or open loop; and
//! idle lurker connections.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::client::{Conn, Reply, Target};
use crate::workload::{classify, Class, References, Workload};

/// How a rung runs.
#[derive(Debug, Clone)]
pub struct RungConfig {
    pub clients: usize,
    /// Requests completed before this much time are not measured.
    pub warmup: Duration,
    pub duration: Duration,
    pub timeout: Duration,
    /// Open loop: requests per second, due on a fixed schedule.
    pub rate: Option<f64>,
    /// Send a `user` per client, so the server's fairness sees clients.
    pub users: bool,
    /// The clients' `user` begins with this (their number follows).
    pub user_prefix: String,
}

/// What a rung saw, in its measurement window.
#[derive(Debug, Clone)]
pub struct RungStats {
    pub clients: usize,
    pub window: Duration,
    pub ok: u64,
    pub tokens: u64,
    pub typed: BTreeMap<String, u64>,
    pub raw: u64,
    pub corrupt: u64,
    /// A few failures, verbatim.
    pub samples: Vec<String>,
    /// Latency of correct completions, µs.
    pub latency: Histogram<u64>,
    /// `retry-after-ms` of overloaded answers, ms.
    pub retry_after: Histogram<u64>,
    /// Time to an event stream's first token, µs (streams only).
    pub ttft: Histogram<u64>,
    /// The harness's own CPU time over the rung, as a share of one core.
    pub harness_cpu: f64,
    pub wall: Duration,
}

impl RungStats {
    pub(crate) fn new(clients: usize) -> RungStats {
        RungStats {
            clients,
            window: Duration::ZERO,
            ok: 0,
            tokens: 0,
            typed: BTreeMap::new(),
            raw: 0,
            corrupt: 0,
            samples: Vec::new(),
            latency: histogram(),
            retry_after: histogram(),
            ttft: histogram(),
            harness_cpu: 0.0,
            wall: Duration::ZERO,
        }
    }

    pub(crate) fn record(&mut self, class: Class, latency: Duration, reply: Option<&Reply>) {
        let retry_after = reply.and_then(|r| r.retry_after_ms);
        match class {
            Class::Ok { tokens } => {
                self.ok += 1;
                self.tokens += tokens;
                let _ = self.latency.record(latency.as_micros().max(1) as u64);
                if let Some(first) = reply.filter(|r| r.event_stream).and_then(|r| r.first_byte) {
                    let _ = self.ttft.record(first.as_micros().max(1) as u64);
                }
            }
            Class::Typed(t) => {
                if t == "overloaded" {
                    if let Some(ms) = retry_after {
                        let _ = self.retry_after.record(ms.max(1));
                    }
                }
                *self.typed.entry(t).or_default() += 1;
            }
            Class::Raw(s) => {
                self.raw += 1;
                self.sample(s);
            }
            Class::Corrupt(s) => {
                self.corrupt += 1;
                self.sample(s);
            }
        }
    }

    fn sample(&mut self, s: String) {
        if self.samples.len() < 5 {
            self.samples.push(s);
        }
    }

    pub(crate) fn merge(&mut self, other: &RungStats) {
        self.ok += other.ok;
        self.tokens += other.tokens;
        for (k, v) in &other.typed {
            *self.typed.entry(k.clone()).or_default() += v;
        }
        self.raw += other.raw;
        self.corrupt += other.corrupt;
        for s in &other.samples {
            self.sample(s.clone());
        }
        let _ = self.latency.add(&other.latency);
        let _ = self.retry_after.add(&other.retry_after);
        let _ = self.ttft.add(&other.ttft);
    }

    /// Typed outcomes of any kind.
    pub fn rejections(&self) -> u64 {
        self.typed.values().sum()
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes at 3 significant digits; the bounds are constants
    // that hdrhistogram accepts.
    Histogram::new_with_bounds(1, 600_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

/// This process's CPU time so far (user and system).
pub fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000)
            };
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// A rung's measurement window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: Instant,
    pub to: Instant,
}

impl Window {
    /// The window of a rung that starts at `start`.
    pub fn after(start: Instant, warmup: Duration, duration: Duration) -> Window {
        Window {
            from: start + warmup,
            to: start + warmup + duration,
        }
    }

    pub fn contains(&self, t: Instant) -> bool {
        t >= self.from && t <= self.to
    }
}

/// Runs a rung.
pub async fn run(
    target: &Target,
    w: &Arc<Workload>,
    refs: &Arc<References>,
    cfg: &RungConfig,
) -> RungStats {
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut total = run_in(
        target,
        w,
        refs,
        cfg,
        Window::after(start, cfg.warmup, cfg.duration),
    )
    .await;
    total.wall = start.elapsed();
    total.harness_cpu = (cpu_time() - cpu0).as_secs_f64() / total.wall.as_secs_f64().max(1e-9);
    total
}

/// Runs a rung in a given window, beside other classes of a mixed rung (the
/// harness's CPU is the caller's to measure).
pub async fn run_in(
    target: &Target,
    w: &Arc<Workload>,
    refs: &Arc<References>,
    cfg: &RungConfig,
    window: Window,
) -> RungStats {
    let window = Arc::new(window);
    let mut total = match cfg.rate {
        None => closed(target, w, refs, cfg, &window).await,
        Some(rate) => open(target, w, refs, cfg, rate, &window).await,
    };
    total.window = cfg.duration;
    total
}

async fn closed(
    target: &Target,
    w: &Arc<Workload>,
    refs: &Arc<References>,
    cfg: &RungConfig,
    window: &Arc<Window>,
) -> RungStats {
    let tasks: Vec<_> = (0..cfg.clients)
        .map(|client| {
            let (target, w, refs, window, cfg) = (
                target.clone(),
                w.clone(),
                refs.clone(),
                window.clone(),
                cfg.clone(),
            );
            tokio::spawn(async move {
                let mut stats = RungStats::new(1);
                let user = cfg.users.then(|| format!("{}{client}", cfg.user_prefix));
                let mut conn: Option<Conn> = None;
                let mut i = 0u64;
                while Instant::now() < window.to {
                    let key = w.key(client, i);
                    i += 1;
                    let t0 = Instant::now();
                    if conn.as_ref().is_none_or(|c| !c.is_open()) {
                        match Conn::connect(&target).await {
                            Ok(c) => conn = Some(c),
                            Err(e) => {
                                if window.contains(Instant::now()) {
                                    stats.record(Class::Raw(e.to_string()), t0.elapsed(), None);
                                }
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                        }
                    }
                    let Some(c) = conn.as_mut() else { continue };
                    let result = c
                        .send(
                            &target,
                            "POST",
                            "/v1/completions",
                            w.body(key, user.as_deref()),
                            cfg.timeout,
                        )
                        .await;
                    let done = Instant::now();
                    let (class, reply) = match result {
                        Ok(reply) => (classify(&reply, key, &refs, &w), Some(reply)),
                        Err(e) => {
                            conn = None;
                            (Class::Raw(e.to_string()), None)
                        }
                    };
                    let retry = reply.as_ref().and_then(|r| r.retry_after_ms);
                    if window.contains(done) {
                        stats.record(class.clone(), done - t0, reply.as_ref());
                    }
                    if let (Class::Typed(_), Some(ms)) = (&class, retry) {
                        // Honour Retry-After, as a client should.
                        tokio::time::sleep(Duration::from_millis(ms.min(5_000))).await;
                    }
                }
                stats
            })
        })
        .collect();
    let mut total = RungStats::new(cfg.clients);
    for t in tasks {
        match t.await {
            Ok(s) => total.merge(&s),
            Err(e) => total.record(
                Class::Raw(format!("client task failed: {e}")),
                Duration::ZERO,
                None,
            ),
        }
    }
    total
}

async fn open(
    target: &Target,
    w: &Arc<Workload>,
    refs: &Arc<References>,
    cfg: &RungConfig,
    rate: f64,
    window: &Arc<Window>,
) -> RungStats {
    let pool: Arc<Mutex<Vec<Conn>>> = Arc::new(Mutex::new(Vec::new()));
    let limit = Arc::new(tokio::sync::Semaphore::new(cfg.clients.max(1)));
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let start = Instant::now();
    let mut tasks = Vec::new();
    let mut k = 0u64;
    loop {
        let due = start + interval.mul_f64(k as f64);
        if due > window.to {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let (target, w, refs, window, pool, limit, timeout) = (
            target.clone(),
            w.clone(),
            refs.clone(),
            window.clone(),
            pool.clone(),
            limit.clone(),
            cfg.timeout,
        );
        let key = w.key(k as usize, k);
        tasks.push(tokio::spawn(async move {
            let mut stats = RungStats::new(1);
            // Latency counts from when the request was due, whatever it
            // waits for here.
            let Ok(_permit) = limit.acquire_owned().await else {
                return stats;
            };
            let pooled = pool.lock().await.pop();
            let conn = match pooled {
                Some(c) if c.is_open() => Ok(c),
                _ => Conn::connect(&target).await,
            };
            let (class, reply) = match conn {
                Ok(mut c) => match c
                    .send(
                        &target,
                        "POST",
                        "/v1/completions",
                        w.body(key, None),
                        timeout,
                    )
                    .await
                {
                    Ok(reply) => {
                        pool.lock().await.push(c);
                        (classify(&reply, key, &refs, &w), Some(reply))
                    }
                    Err(e) => (Class::Raw(e.to_string()), None),
                },
                Err(e) => (Class::Raw(e.to_string()), None),
            };
            let done = Instant::now();
            if window.contains(done) {
                stats.record(class, done.saturating_duration_since(due), reply.as_ref());
            }
            stats
        }));
        k += 1;
    }
    let mut total = RungStats::new(cfg.clients);
    for t in tasks {
        if let Ok(s) = t.await {
            total.merge(&s);
        }
    }
    total
}

/// Idle connections held open alongside the load.
#[derive(Debug)]
pub struct Lurkers {
    conns: Vec<TcpStream>,
    pub failed: usize,
}

impl Lurkers {
    /// Opens `n` connections, a few hundred at a time; with `request`,
    /// each is answered one `GET /healthz` before it falls silent (one that
    /// is not counts as failed).
    pub async fn open(target: &Target, n: usize, request: bool) -> Lurkers {
        let mut conns = Vec::with_capacity(n);
        let mut failed = 0;
        let mut left = n;
        while left > 0 {
            let batch = left.min(250);
            let opened: Vec<_> = (0..batch)
                .map(|_| {
                    let target = target.clone();
                    tokio::spawn(async move {
                        let host = &target.host;
                        let mut s = target.open().await?;
                        if request {
                            healthz(&mut s, host).await?;
                        }
                        Ok::<_, std::io::Error>(s)
                    })
                })
                .collect();
            for o in opened {
                match o.await {
                    Ok(Ok(s)) => conns.push(s),
                    _ => failed += 1,
                }
            }
            left -= batch;
        }
        Lurkers { conns, failed }
    }

    /// How many are still open (the server has not closed them).
    pub fn still_open(&self) -> usize {
        let mut buf = [0u8; 1];
        self.conns
            .iter()
            .filter(|s| match s.try_read(&mut buf) {
                Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                Ok(_) => false,
            })
            .count()
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }
}

/// One `GET /healthz` on `s`, read to the end of its body.
async fn healthz(s: &mut TcpStream, host: &str) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
        .await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        if !head.starts_with("http/1.1 200") {
            return Err(std::io::Error::other(format!("/healthz answered {head}")));
        }
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if got.len() >= end + 4 + len {
            return Ok(());
        }
    }
}
