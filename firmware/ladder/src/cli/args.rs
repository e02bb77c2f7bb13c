//! The command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// What a rung's clients do (without `--burst` or `--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadKind {
    /// Clients that send a request and wait for its answer (or, with
    /// --open-loop, requests due on a schedule): a rung's value is clients.
    Requests,
    /// A speculative-typing page's traffic: a rung's value is simultaneous
    /// typists, each sending a request per keystroke.
    Typists,
}

#[derive(Parser, Debug)]
#[command(
    name = "ladder",
    version,
    about = "Load a fabricd from one client to thousands, stopping at the first rung that breaks a band"
)]
pub struct Args {
    /// The daemon, as http://ADDRESS:PORT.
    #[arg(long)]
    pub target: String,
    /// What the clients do.
    #[arg(long, value_enum, default_value = "requests")]
    pub workload: WorkloadKind,
    /// Clients per rung (typists, with --workload typists; all classes
    /// together, with --profile).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256,512,1024,2048"
    )]
    pub rungs: Vec<usize>,
    /// N requests released at the same instant, each on its own
    /// connection, instead of a ladder (several: one burst each, in turn).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["profile", "open_loop", "lurkers"])]
    pub burst: Option<Vec<usize>>,
    /// A mixed profile (TOML): weighted request classes sharing each rung,
    /// each with its own target in the bands file (`[class.NAME]`).
    #[arg(long, conflicts_with_all = ["open_loop", "lurkers"])]
    pub profile: Option<PathBuf>,
    /// Measured seconds per rung.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds before measuring (default: for clients, long enough for the
    /// queue to fill: 1.5 × clients ÷ capacity, at least 1; for typists and
    /// profiles, every typist started and 2 s more).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// The abort conditions (TOML); without it nothing stops the ladder.
    #[arg(long)]
    pub bands: Option<PathBuf>,
    /// Idle connections held open for the whole run.
    #[arg(long, default_value_t = 0)]
    pub lurkers: usize,
    /// Each lurker first fetches `/healthz` and then stays silent on its
    /// kept-alive connection, as a browser tab that loaded a page does.
    #[arg(long, requires = "lurkers")]
    pub lurker_request: bool,
    /// Clients and lurkers connect from this many loopback addresses in
    /// turn (127.1.0.1 and up), as from as many hosts, so that a daemon's
    /// share per address is what a LAN would meet; 0: all from one.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub sources: u16,
    /// Write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a plot of the results (for typists: pause-suggestion latency
    /// and fabric requests per keystroke against typists).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Typists: an earlier run's JSON whose curve goes in the SVG beside
    /// this one (repeatable).
    #[arg(long)]
    pub compare: Vec<PathBuf>,
    /// The model to ask.
    #[arg(long, default_value = "kjv")]
    pub model: String,
    /// Output tokens per request (fixed length for clients; at most, for
    /// typists, as a typing UI asks).
    #[arg(long, default_value_t = 8)]
    pub max_tokens: u32,
    /// Open loop: a rung's value is requests per second (due on a fixed
    /// schedule, latency counted from when due), not clients.
    #[arg(long)]
    pub open_loop: bool,
    /// Most connections an open-loop rung may use.
    #[arg(long, default_value_t = 4096)]
    pub open_loop_connections: usize,
    /// Per-request timeout, seconds (a timeout is a failure).
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// Send no `user` field (all clients look alike to the server).
    #[arg(long)]
    pub anonymous: bool,
    /// Skip measuring the harness's own ceiling.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Clients for the calibration.
    #[arg(long, default_value_t = 64)]
    pub calibrate_clients: usize,
    /// Typists for the calibration (default: the largest rung).
    #[arg(long)]
    pub calibrate_typists: Option<usize>,
    /// Seconds of calibration (typists: at least 5).
    #[arg(long, default_value_t = 3.0)]
    pub calibrate_secs: f64,
    /// A label for the results (machine, date, command).
    #[arg(long)]
    pub label: Option<String>,
    /// Typists: the text they type, one passage a line (default: the Book
    /// of Genesis, King James Version, built in).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Typists: send a field's request only once its keys have stopped for
    /// this long (0: a request every keystroke).
    #[arg(long, default_value_t = 0)]
    pub debounce_ms: u64,
    /// Typists: seeds the keystrokes (the same seed types the same keys at
    /// the same moments, run after run).
    #[arg(long, default_value_t = 1)]
    pub typing_seed: u64,
    /// Typists: the median interval between keystrokes, ms (log-normal).
    #[arg(long, default_value_t = 180)]
    pub keystroke_median_ms: u64,
    /// Typists: the interval's shape (the standard deviation of its
    /// logarithm).
    #[arg(long, default_value_t = 0.45)]
    pub keystroke_sigma: f64,
    /// Typists: the median pause, ms (log-normal, σ 0.4, 1 to 6 s).
    #[arg(long, default_value_t = 2000)]
    pub pause_median_ms: u64,
    /// Typists: the chance of a pause after a word (always after a
    /// sentence; half the time after , ; :).
    #[arg(long, default_value_t = 0.15)]
    pub pause_after_word: f64,
    /// Typists: connections each may hold (a browser's six for one host).
    #[arg(long, default_value_t = 6)]
    pub connections_per_typist: usize,
}
