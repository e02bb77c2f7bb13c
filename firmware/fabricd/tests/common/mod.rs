//! An in-process daemon over an in-process simulator, and a minimal HTTP
//! client, for the serving tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fabric_sim::{SimConfig, Simulator};
use fabricd::config::Config;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Whether the fabric is the Verilated RTL (`FABRICD_SIM_RTL=1`, with
/// fabric-sim's `rtl` feature). A test that needs what only the Rust model
/// can do (another slot count than the RTL is built with, a fault injected
/// inside the decoder) says so and stops: see docs/rtl.md.
pub fn skip_under_rtl(why: &str) -> bool {
    let rtl = std::env::var_os("FABRICD_SIM_RTL").is_some_and(|v| v == "1");
    if rtl {
        eprintln!("SKIPPED under the RTL: {why}");
    }
    rtl
}

pub fn bitstreams() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
}

/// How long a daemon may take to say it serves: attaching, the rings, the
/// first publish. Generous, for a debug build under qemu-user; only a
/// daemon that never comes up reaches it.
pub const READY_WITHIN: Duration = Duration::from_secs(120);

/// `fabricd serve` with `config` on its own task, awaited until it says it
/// serves (its own signal, not a poll of `/readyz`): its address, its stop
/// token and its task.
pub async fn serve(
    config: Config,
) -> (
    SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let listener = fabricd::serve::listen(config.listen).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let (ready, serving) = fabricd::serve::Ready::channel();
    let mut task = tokio::spawn(fabricd::serve::run_ready(
        config,
        listener,
        shutdown.clone(),
        ready,
    ));
    tokio::select! {
        r = tokio::time::timeout(READY_WITHIN, serving) => match r {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("the daemon stopped before it served: {:?}", (&mut task).await),
            Err(_) => panic!("the daemon did not serve within {READY_WITHIN:?}"),
        },
        r = &mut task => panic!("the daemon stopped before it served: {r:?}"),
    }
    (addr, shutdown, task)
}

/// `fabricd serve` with the defaults over the simulated board at `root`,
/// as a restart would find it, once it serves.
pub async fn serve_board(
    root: &Path,
) -> (
    SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    serve(Config {
        root: root.to_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        ..Default::default()
    })
    .await
}

/// How many times the shell says slot `slot` was programmed.
pub fn slot_loads(sim: &Simulator, slot: u8) -> u32 {
    let root = sim.root();
    let topo = fabric_hw::devtree::discover_live(&root.device_tree()).expect("topology");
    fabric_hw::shell::Shell::attach(&root, &topo)
        .expect("shell")
        .slot(slot)
        .loads
}

pub struct Daemon {
    pub addr: SocketAddr,
    pub sim: Simulator,
    pub shutdown: CancellationToken,
    pub task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// A simulator (kjv in slot 0, fortunes in slot 1) and a daemon on
    /// 127.0.0.1:0.
    pub async fn start(
        sim_tweak: impl FnOnce(&mut SimConfig),
        config_tweak: impl FnOnce(&mut Config),
    ) -> Daemon {
        Self::start_in(
            tempfile::tempdir().expect("tempdir"),
            sim_tweak,
            config_tweak,
        )
        .await
    }

    /// The same, in a root the test prepared.
    pub async fn start_in(
        dir: tempfile::TempDir,
        sim_tweak: impl FnOnce(&mut SimConfig),
        config_tweak: impl FnOnce(&mut Config),
    ) -> Daemon {
        let mut sc = SimConfig::for_root(dir.path());
        sc.firmware = Some(bitstreams());
        sc.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
        sc.time_scale = 1.0;
        sim_tweak(&mut sc);
        let sim = Simulator::start(sc).expect("simulator");
        let mut config = Config {
            root: dir.path().to_owned(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            ..Config::default()
        };
        config_tweak(&mut config);
        let (addr, shutdown, task) = serve(config).await;
        Daemon {
            addr,
            sim,
            shutdown,
            task: Some(task),
            dir,
        }
    }

    /// Has the daemon write its open stats window to the card now.
    pub async fn stats_checkpoint(&self) {
        let r = control(self, serde_json::json!({"cmd": "checkpoint"})).await;
        assert_eq!(r["ok"], true, "{r}");
    }

    /// Stops the daemon cleanly; the root stays for inspection.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.shutdown.cancel();
        if let Some(t) = self.task.take() {
            t.await.expect("join").expect("serve ended cleanly");
        }
        self.dir
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn error_type(&self) -> String {
        self.json()["error"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A metric without labels, read from `/metrics`.
pub async fn metric(addr: SocketAddr, name: &str) -> f64 {
    metric_in(&get(addr, "/metrics").await.expect("metrics").text(), name)
}

/// A metric without labels in a `/metrics` text already read.
pub fn metric_in(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in:\n{text}"))
}

/// One request on a fresh connection.
pub async fn request(addr: SocketAddr, req: Request<Full<Bytes>>) -> hyper::Result<Reply> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let resp = sender.send_request(req).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    })
}

pub async fn get(addr: SocketAddr, path: &str) -> hyper::Result<Reply> {
    let req = Request::get(path)
        .header("host", "test")
        .body(Full::new(Bytes::new()))
        .expect("request");
    request(addr, req).await
}

pub async fn post_json(addr: SocketAddr, body: serde_json::Value) -> Reply {
    post_raw(
        addr,
        "application/json",
        serde_json::to_vec(&body).expect("json"),
    )
    .await
}

/// A two-token completion of kjv: the request the tests use to check that
/// the daemon still serves. Returns the status.
pub async fn small_completion(addr: SocketAddr, prompt: &str, seed: u64) -> u16 {
    post_json(
        addr,
        serde_json::json!({"model": "kjv", "prompt": prompt, "max_tokens": 2, "seed": seed}),
    )
    .await
    .status
}

pub async fn post_raw(addr: SocketAddr, content_type: &str, body: Vec<u8>) -> Reply {
    let req = Request::post("/v1/completions")
        .header("host", "test")
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    request(addr, req).await.expect("response")
}

/// Polls `cond` until it holds, or fails the test after `timeout`.
pub async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One control-socket exchange.
pub async fn control(d: &Daemon, req: serde_json::Value) -> serde_json::Value {
    control_at(d.dir.path(), req).await
}

/// One exchange with the control socket of the daemon whose board root is
/// `root`.
pub async fn control_at(root: &Path, req: serde_json::Value) -> serde_json::Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = tokio::net::UnixStream::connect(root.join("run/fabricd.sock"))
        .await
        .expect("control socket");
    let (r, mut w) = stream.into_split();
    let mut line = serde_json::to_vec(&req).expect("json");
    line.push(b'\n');
    w.write_all(&line).await.expect("write");
    let mut lines = BufReader::new(r).lines();
    let reply = lines.next_line().await.expect("read").expect("a line");
    serde_json::from_str(&reply).expect("reply json")
}

/// The slots as `/readyz` shows them: (model, state) per slot.
pub async fn slots(addr: SocketAddr) -> Vec<(String, String)> {
    let v = get(addr, "/readyz").await.expect("readyz").json();
    v["slots"]
        .as_array()
        .expect("slots")
        .iter()
        .map(|s| {
            (
                s["model"].as_str().unwrap_or("").to_owned(),
                s["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// A connection to `to` from the loopback address `from` (127.0.0.2, say):
/// another client, or a proxy, on this one machine.
pub async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("addr"))
        .unwrap_or_else(|e| panic!("bind {from}: {e}"));
    socket.connect(to).await.expect("connect")
}

/// `n` keep-alive connections, each answered one `GET /healthz`, so each
/// surely holds its place under the daemon's caps. One refused meanwhile
/// (a readiness probe's connection may still be closing) is opened again.
pub async fn hold_answered(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut held = Vec::new();
    let start = Instant::now();
    while held.len() < n {
        assert!(
            start.elapsed() < READY_WITHIN,
            "could not hold {n} connections"
        );
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 1024];
        let n = s.read(&mut buf).await.expect("read");
        if buf[..n].starts_with(b"HTTP/1.1 200") {
            held.push(s);
        }
    }
    held
}
