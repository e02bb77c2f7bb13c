//! The daemon's configuration: a TOML file, overridden by flags.
//!
//! Every key is optional; the defaults suit a board. `fabricd serve --help`
//! lists the flags; `docs/config.example.toml` lists every key.
//!
//! Paths on the board (`catalog`, `socket`, `data_dir`), from a flag or the
//! file, follow one rule, [`under_root`]: an absolute one is used as given,
//! a relative one is under `root`. The defaults are relative, so they move
//! with `--root` (and with `--sim`, to the simulator's root).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

/// The configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where to listen for HTTP.
    pub listen: SocketAddr,
    /// Root of the board's file system.
    pub root: PathBuf,
    /// The model catalog (default `<root>/lib/firmware/fabricd`); see
    /// [`under_root`]. Under `--sim` it is where the simulator's models
    /// come from, on this machine.
    pub catalog: Option<PathBuf>,
    /// Where configfs is mounted.
    pub configfs: String,
    /// Requests admitted at once, waiting or running; the rest are
    /// answered `overloaded`.
    pub queue_capacity: usize,
    /// Open connections at once; the rest are answered `overloaded`.
    /// Default ([`Config::max_connections`]): one per 32 KiB of the board's
    /// memory, between 1,024 and 65,536 (16,384 on a 512 MiB ZedBoard,
    /// 65,536 on a 4 GiB KV260).
    pub max_connections: Option<usize>,
    /// The share of `max_connections` one client address may hold (over
    /// it, `overloaded`). `trusted_proxies` are held to the cap only.
    pub address_share: f64,
    /// The most bytes a request's line and headers may have (431 beyond).
    pub max_header_bytes: usize,
    /// What connections still reading their headers may hold at once; a
    /// slow head that would go past it is answered `overloaded`.
    pub header_budget_bytes: usize,
    /// Requests served inside hyper at once, which holds 16 KiB of buffers
    /// for each while it waits for the answer; past this many, a
    /// completion is read and waits without them (`http::early`), for a
    /// little more CPU.
    pub hyper_waiting_max: usize,
    /// Give freed memory back to the system once load has fallen.
    pub trim_memory: bool,
    /// Threads that serve HTTP and run the scheduler. One keeps every
    /// wake-up on one core (no hand-offs between threads), and serves the
    /// fabric's few hundred requests a second many times over; blocking
    /// work (loads, the stats log) runs on threads of its own regardless.
    pub workers: usize,
    /// A request's deadline when it names none.
    pub default_deadline_ms: u64,
    /// The longest deadline a request may ask for.
    pub max_deadline_ms: u64,
    /// `max_tokens` when a request names none.
    pub default_max_tokens: u32,
    /// Largest request body.
    pub body_limit: usize,
    /// Time allowed for a request's header (slowloris) and for an idle
    /// keep-alive connection's next request.
    pub header_read_timeout_ms: u64,
    /// Time allowed for a request's body.
    pub body_read_timeout_ms: u64,
    /// How long a connection that never sends anything is kept.
    pub idle_timeout_ms: u64,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace_ms: u64,
    /// The load balancers in front of the board (addresses, or networks
    /// such as `10.0.0.0/24`). A connection from one of them is not held to
    /// `address_share`, and a request on it is the client's whose address
    /// its `X-Forwarded-For` names last (the entry the proxy added, past
    /// any other trusted proxy's); from anyone else that header is ignored,
    /// since a client can write it.
    #[serde(deserialize_with = "addresses_or_networks")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The status of `overloaded` to `trusted_proxies`: 429, or 503 for a
    /// balancer that retries a 503 on another board and not a 429 (HAProxy
    /// before 3.0; `fleet/haproxy.cfg` gives the client its 429 back).
    pub proxy_overloaded_status: u16,
    /// Replaced by `trusted_proxies`; still read, to be refused by name.
    #[serde(rename = "trust_forwarded_for")]
    pub trust_forwarded_for_replaced: Option<bool>,
    /// Where HAProxy's agent check asks how the board stands (off when
    /// absent): one line, `ready NN%` or `drain`; see `serve::agent`.
    pub agent_listen: Option<SocketAddr>,
    /// The control socket; see [`under_root`].
    pub socket: PathBuf,
    /// Where stats are kept; see [`under_root`].
    pub data_dir: PathBuf,
    /// Length of a stats window, e.g. "30m", "10s".
    pub stats_window: String,
    /// How often the open window is written to the card.
    pub stats_checkpoint: String,
    /// Size at which the stats log is rotated.
    pub stats_max_bytes: u64,
    /// A fleet-wide key for hashing clients (32 hex digits), the same on
    /// every board, so their unique clients can be combined; unset: a key
    /// drawn at each start. See `stats::sketch`.
    pub stats_client_key: Option<String>,
    /// The models the slots should hold, in slot order (`""` leaves a
    /// slot as it is). At start a slot holding another model is loaded
    /// with its own, one slot at a time while the others serve; one model
    /// in every slot is how the hot model gets the whole fabric. Under
    /// `--sim` the simulator boots with them when `[sim] boot` is empty.
    pub slot_models: Vec<String>,
    /// The simulator, for `--sim`.
    pub sim: SimSettings,
    /// Model rotation.
    pub rotation: RotationSettings,
    /// Speculative typing: supersede, the completion cache, typed forward,
    /// predictive admission, every slot of a model, interactive first.
    pub typing: TypingSettings,
}

/// The speculative-typing features, each switchable (so a benchmark can
/// run one workload with them off and on), and their bounds. All on by
/// default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TypingSettings {
    /// A newer request of a typing session answers the older one
    /// `superseded` (409) at once, queued or running on the fabric.
    pub supersede: bool,
    /// Identical deterministic requests are answered from a cache bounded
    /// by `cache_bytes`, without a queue permit or the fabric.
    pub cache: bool,
    /// A prompt that is the session's last one plus text its completion
    /// began with is answered with the rest of that completion at once, or
    /// joins that request while it decodes.
    pub typed_forward: bool,
    /// A request whose predicted finish, from the measured service rate
    /// and what waits ahead of it, is past its deadline is refused at once.
    pub predictive_admission: bool,
    /// Every slot that holds a request's model serves it; off, only the
    /// lowest-numbered ready one does.
    pub every_slot: bool,
    /// Short requests go first and always find a decode lane: long ones
    /// hold at most `lanes - reserved_lanes` contexts of a slot.
    pub interactive_first: bool,
    /// Bytes the completion cache may hold (entries and their keys).
    pub cache_bytes: usize,
    /// Sessions remembered for typed forward (the least recently used go).
    pub session_entries: usize,
    /// Bytes the remembered sessions may hold.
    pub session_bytes: usize,
    /// Tokens of the earlier completion that must be left after what was
    /// typed for typed forward to answer with them.
    pub typed_forward_min_tokens: u32,
    /// A request of at most this many `max_tokens` is interactive.
    pub interactive_max_tokens: u32,
    /// Decode lanes of each slot that long requests leave to short ones.
    pub reserved_lanes: u32,
    /// A long request that has waited this long goes before short ones
    /// (so a stream of short ones cannot starve it).
    pub bulk_ageing_ms: u64,
    /// A typing session's newest request is held back behind those of
    /// sessions that have paused until its own session pauses (three of
    /// its typing gaps with no newer request), and runs before then only
    /// on fabric that would otherwise idle: a keystroke that follows
    /// supersedes it before it costs fabric time. Only with `supersede`
    /// (without it, a held request would only wait).
    pub hold: bool,
    /// The longest a request is held back (a slow typist's three gaps are
    /// cut to this).
    pub hold_max_ms: u64,
}

impl Default for TypingSettings {
    fn default() -> Self {
        TypingSettings {
            supersede: true,
            cache: true,
            typed_forward: true,
            predictive_admission: true,
            every_slot: true,
            interactive_first: true,
            cache_bytes: 1 << 20,
            session_entries: 4096,
            session_bytes: 4 << 20,
            typed_forward_min_tokens: 2,
            interactive_max_tokens: 32,
            reserved_lanes: 1,
            bulk_ageing_ms: 2000,
            hold: true,
            hold_max_ms: 450,
        }
    }
}

impl TypingSettings {
    /// Whether requests are held until their session pauses: a request is
    /// held so that a newer one of its session can supersede it, so only
    /// with `supersede` (without it, holding would only delay it).
    pub fn holds(&self) -> bool {
        self.hold && self.supersede
    }

    /// The daemon as it was before these features, for the benchmark's
    /// baseline. `every_slot` stays on: the scheduler always served a
    /// model from every slot holding it, and a baseline with half the
    /// fabric would credit the features with capacity.
    pub fn all_off() -> TypingSettings {
        TypingSettings {
            supersede: false,
            cache: false,
            typed_forward: false,
            predictive_admission: false,
            every_slot: true,
            interactive_first: false,
            hold: false,
            ..TypingSettings::default()
        }
    }
}

/// Model rotation settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RotationSettings {
    /// The schedule: `fabricctl rotate` (and the interval, if set) loads
    /// the model after the newest one in this list.
    pub models: Vec<String>,
    /// Rotate on this interval ("1h"); none: only on command.
    pub interval: Option<String>,
    /// How long a load waits for its slot's requests to finish.
    pub drain_timeout_ms: u64,
    /// How long a load may take.
    pub apply_timeout_ms: u64,
}

impl Default for RotationSettings {
    fn default() -> Self {
        RotationSettings {
            models: Vec::new(),
            interval: None,
            drain_timeout_ms: 30_000,
            apply_timeout_ms: 120_000,
        }
    }
}

/// Settings of the simulator that `--sim` starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimSettings {
    pub time_scale: f64,
    pub slots: u8,
    pub lanes: u8,
    /// Models to boot the slots with, in slot order (default: the catalog's
    /// first models).
    pub boot: Vec<String>,
    pub extra_args: Vec<String>,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            time_scale: 1.0,
            slots: 2,
            lanes: 4,
            boot: Vec::new(),
            extra_args: Vec::new(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            root: PathBuf::from("/"),
            catalog: None,
            configfs: "/sys/kernel/config".into(),
            queue_capacity: 2048,
            max_connections: None,
            address_share: 0.25,
            max_header_bytes: 16 << 10,
            header_budget_bytes: 4 << 20,
            hyper_waiting_max: 64,
            trim_memory: true,
            workers: 1,
            default_deadline_ms: 30_000,
            max_deadline_ms: 600_000,
            default_max_tokens: 16,
            body_limit: 1 << 20,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            shutdown_grace_ms: 10_000,
            trusted_proxies: Vec::new(),
            proxy_overloaded_status: 429,
            trust_forwarded_for_replaced: None,
            agent_listen: None,
            socket: PathBuf::from("run/fabricd.sock"),
            data_dir: PathBuf::from("data/fabricd"),
            stats_window: "30m".into(),
            stats_checkpoint: "60s".into(),
            stats_max_bytes: 8 << 20,
            stats_client_key: None,
            slot_models: Vec::new(),
            sim: SimSettings::default(),
            rotation: RotationSettings::default(),
            typing: TypingSettings::default(),
        }
    }
}

impl Config {
    /// Whether `ip` is one of the `trusted_proxies`.
    pub fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.trusted_proxies.iter().any(|n| n.contains(&ip))
    }
}

/// `trusted_proxies`: each entry an address (`10.0.0.2`, one host) or a
/// network (`10.0.0.0/24`).
fn addresses_or_networks<'de, D>(d: D) -> Result<Vec<ipnet::IpNet>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let entries = Vec::<String>::deserialize(d)?;
    entries
        .iter()
        .map(|e| {
            e.parse::<ipnet::IpNet>()
                .or_else(|_| e.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "trusted_proxies: {e:?} is neither an address nor a network such as 10.0.0.0/24"
                    ))
                })
        })
        .collect()
}

/// The default connection cap for a board with `mem` bytes of memory: a
/// connection between requests costs a few KiB of the daemon and of the
/// kernel's socket memory, so one per 32 KiB leaves the board most of it.
pub fn connections_for_memory(mem: Option<u64>) -> usize {
    let Some(mem) = mem else { return 16_384 };
    usize::try_from(mem / (32 << 10))
        .unwrap_or(usize::MAX)
        .clamp(1024, 65_536)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

impl Config {
    /// The connection cap: as set, or from the board's memory.
    pub fn max_connections(&self) -> usize {
        self.max_connections
            .unwrap_or_else(|| connections_for_memory(mem_total()))
    }

    /// The most connections one address may hold.
    pub fn per_address_cap(&self) -> usize {
        ((self.max_connections() as f64 * self.address_share).ceil() as usize).max(1)
    }
}

/// A path option on the board: an absolute `path` as given, a relative one
/// under `root`. One rule for every such option, from a flag or the file,
/// so that `--socket R/run/x.sock --root R` is `R/run/x.sock`, not under
/// `R` twice, and `--catalog` means what `--socket` does.
pub fn under_root(root: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        root.join(path)
    }
}

/// Parses "30m", "10s", "1h", "250ms" or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (num, unit) = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((t, "s"), |i| (&t[..i], &t[i..]));
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

impl Config {
    /// Reads a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    /// Checks values that no type can.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: &str| ConfigError::Invalid {
            key,
            reason: reason.to_owned(),
        };
        if self.queue_capacity == 0 {
            return Err(invalid("queue_capacity", "must be at least 1"));
        }
        if ![429, 503].contains(&self.proxy_overloaded_status) {
            return Err(invalid("proxy_overloaded_status", "must be 429 or 503"));
        }
        if self.trust_forwarded_for_replaced.is_some() {
            return Err(invalid(
                "trust_forwarded_for",
                "is replaced by trusted_proxies, the addresses of the proxies whose \
                 X-Forwarded-For is believed, e.g. trusted_proxies = [\"10.0.0.2\"]",
            ));
        }
        if self.max_connections == Some(0) {
            return Err(invalid("max_connections", "must be at least 1"));
        }
        if !(self.address_share > 0.0 && self.address_share <= 1.0) {
            return Err(invalid("address_share", "must be above 0 and at most 1"));
        }
        if !(1024..=(1 << 20)).contains(&self.max_header_bytes) {
            return Err(invalid(
                "max_header_bytes",
                "must be between 1024 and 1048576",
            ));
        }
        if self.header_budget_bytes < self.max_header_bytes {
            return Err(invalid(
                "header_budget_bytes",
                "must be at least max_header_bytes",
            ));
        }
        if !(1..=64).contains(&self.workers) {
            return Err(invalid("workers", "must be between 1 and 64"));
        }
        if self.default_deadline_ms == 0 || self.default_deadline_ms > self.max_deadline_ms {
            return Err(invalid(
                "default_deadline_ms",
                "must be between 1 and max_deadline_ms",
            ));
        }
        if self.default_max_tokens == 0 {
            return Err(invalid("default_max_tokens", "must be at least 1"));
        }
        if parse_duration(&self.stats_window).is_none() {
            return Err(invalid(
                "stats_window",
                "must be a duration such as 30m, 10s or 1h",
            ));
        }
        if parse_duration(&self.stats_checkpoint).is_none() {
            return Err(invalid(
                "stats_checkpoint",
                "must be a duration such as 60s",
            ));
        }
        if self.stats_max_bytes < 4096 {
            return Err(invalid("stats_max_bytes", "must be at least 4096"));
        }
        if let Some(k) = &self.stats_client_key {
            if crate::stats::ClientKey::from_hex(k).is_none() {
                return Err(invalid("stats_client_key", "must be 32 hex digits"));
            }
        }
        if let Some(i) = &self.rotation.interval {
            if parse_duration(i).is_none() {
                return Err(invalid(
                    "rotation.interval",
                    "must be a duration such as 6h or 30m",
                ));
            }
        }
        if self.typing.session_entries == 0 {
            return Err(invalid("typing.session_entries", "must be at least 1"));
        }
        if self.typing.hold_max_ms > 10_000 {
            return Err(invalid(
                "typing.hold_max_ms",
                "must be at most 10000: a held request waits for its session's pause, and a longer hold is a slower suggestion",
            ));
        }
        if self.typing.interactive_max_tokens == 0 {
            return Err(invalid(
                "typing.interactive_max_tokens",
                "must be at least 1",
            ));
        }
        if let Some(m) = self
            .slot_models
            .iter()
            .find(|m| !m.is_empty() && !crate::catalog::valid_model_name(m))
        {
            return Err(ConfigError::Invalid {
                key: "slot_models",
                reason: format!("{m:?} is not a model name"),
            });
        }
        if !(0.0..=1000.0).contains(&self.sim.time_scale) {
            return Err(invalid("sim.time_scale", "must be in 0..=1000"));
        }
        Ok(())
    }

    /// The rotation settings.
    pub fn rotation(&self) -> crate::rotation::RotationConfig {
        crate::rotation::RotationConfig {
            drain_timeout: Duration::from_millis(self.rotation.drain_timeout_ms),
            apply_timeout: Duration::from_millis(self.rotation.apply_timeout_ms),
            schedule: self.rotation.models.clone(),
            plan: Some(self.data_path().join("slots.json")),
            ..crate::rotation::RotationConfig::default()
        }
    }

    /// The rotation interval, if the schedule runs by itself.
    pub fn rotation_interval(&self) -> Option<Duration> {
        self.rotation.interval.as_deref().and_then(parse_duration)
    }

    /// The stats directory: `data_dir` by [`under_root`].
    pub fn data_path(&self) -> PathBuf {
        under_root(&self.root, &self.data_dir)
    }

    /// The control socket: `socket` by [`under_root`].
    pub fn socket_path(&self) -> PathBuf {
        under_root(&self.root, &self.socket)
    }

    /// The stats settings.
    pub fn stats(&self) -> crate::stats::StatsConfig {
        crate::stats::StatsConfig {
            dir: self.data_path(),
            window: parse_duration(&self.stats_window).unwrap_or(Duration::from_secs(1800)),
            checkpoint: parse_duration(&self.stats_checkpoint).unwrap_or(Duration::from_secs(60)),
            max_bytes: self.stats_max_bytes,
            client_key: self
                .stats_client_key
                .as_deref()
                .and_then(crate::stats::ClientKey::from_hex),
        }
    }

    /// The catalog directory: `catalog` by [`under_root`], or the board's.
    pub fn catalog_dir(&self) -> PathBuf {
        match &self.catalog {
            Some(c) => under_root(&self.root, c),
            None => fabric_hw::Root::new(&self.root).our_firmware_dir(),
        }
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }
    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("0s"), None);
    }

    #[test]
    fn the_documented_example_is_every_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.example.toml");
        let parsed = Config::load(&path).expect("docs/config.example.toml parses");
        parsed.validate().expect("and is valid");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", Config::default()));
    }

    #[test]
    fn board_paths_are_as_given_when_absolute_and_under_the_root_when_relative() {
        let root = Path::new("/tmp/board");
        let c = Config {
            root: root.to_owned(),
            socket: root.join("run/x.sock"),
            data_dir: "stats".into(),
            catalog: Some("models".into()),
            ..Config::default()
        };
        assert_eq!(c.socket_path(), Path::new("/tmp/board/run/x.sock"));
        assert_eq!(c.data_path(), Path::new("/tmp/board/stats"));
        assert_eq!(c.catalog_dir(), Path::new("/tmp/board/models"));
        let c = Config {
            root: root.to_owned(),
            socket: "/run/y.sock".into(),
            data_dir: "/srv/stats".into(),
            catalog: Some("/srv/models".into()),
            ..Config::default()
        };
        assert_eq!(c.socket_path(), Path::new("/run/y.sock"));
        assert_eq!(c.data_path(), Path::new("/srv/stats"));
        assert_eq!(c.catalog_dir(), Path::new("/srv/models"));
        // The defaults follow the root; on a board (root /) they are the
        // board's paths.
        let c = Config {
            root: root.to_owned(),
            ..Config::default()
        };
        assert_eq!(c.socket_path(), Path::new("/tmp/board/run/fabricd.sock"));
        assert_eq!(c.data_path(), Path::new("/tmp/board/data/fabricd"));
        assert_eq!(
            c.catalog_dir(),
            Path::new("/tmp/board/lib/firmware/fabricd")
        );
        let board = Config::default();
        assert_eq!(board.socket_path(), Path::new("/run/fabricd.sock"));
        assert_eq!(board.data_path(), Path::new("/data/fabricd"));
    }

    #[test]
    fn a_bad_rotation_interval_is_named() {
        let mut c = Config::default();
        c.rotation.interval = Some("every so often".into());
        let err = c.validate().expect_err("refused");
        assert!(err.to_string().starts_with("rotation.interval:"), "{err}");
    }

    #[test]
    fn worker_counts_out_of_range_are_named() {
        for workers in [0, 65] {
            let c = Config {
                workers,
                ..Config::default()
            };
            let err = c.validate().expect_err("refused");
            assert!(err.to_string().starts_with("workers:"), "{err}");
        }
        let c = Config {
            workers: 4,
            ..Config::default()
        };
        c.validate().expect("4 workers");
    }

    #[test]
    fn a_file_overrides_defaults_and_typos_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fabricd.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:9000\"\nqueue_capacity = 64\n[sim]\ntime_scale = 0.5\n",
        )
        .expect("write");
        let c = Config::load(&path).expect("load");
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.queue_capacity, 64);
        assert_eq!(c.sim.time_scale, 0.5);
        assert_eq!(c.default_max_tokens, 16);
        std::fs::write(&path, "queue_capacty = 64\n").expect("write");
        let err = Config::load(&path).expect_err("typo");
        assert!(err.to_string().contains("queue_capacty"), "{err}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks_and_the_old_key_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fabricd.toml");
        std::fs::write(
            &path,
            "trusted_proxies = [\"10.0.0.2\", \"192.168.7.0/24\", \"::1\"]\n",
        )
        .expect("write");
        let c = Config::load(&path).expect("load");
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert!(c.is_trusted_proxy(ip("10.0.0.2")));
        assert!(!c.is_trusted_proxy(ip("10.0.0.3")));
        assert!(c.is_trusted_proxy(ip("192.168.7.200")));
        assert!(c.is_trusted_proxy(ip("::1")));
        // An IPv4 peer on a dual-stack socket is the same address.
        assert!(c.is_trusted_proxy(ip("::ffff:10.0.0.2")));
        std::fs::write(&path, "trusted_proxies = [\"10.0.0.300\"]\n").expect("write");
        let err = Config::load(&path).expect_err("not an address");
        assert!(
            err.to_string().contains("\"10.0.0.300\" is neither"),
            "{err}"
        );
        std::fs::write(&path, "trust_forwarded_for = true\n").expect("write");
        let err = Config::load(&path)
            .expect("read")
            .validate()
            .expect_err("replaced");
        assert!(err.to_string().contains("trusted_proxies"), "{err}");
    }

    #[test]
    fn the_connection_cap_follows_the_boards_memory() {
        const MIB: u64 = 1 << 20;
        assert_eq!(connections_for_memory(Some(512 * MIB)), 16_384);
        assert_eq!(connections_for_memory(Some(4096 * MIB)), 65_536);
        assert_eq!(connections_for_memory(Some(16 * MIB)), 1024);
        assert_eq!(connections_for_memory(None), 16_384);
        let c = Config {
            max_connections: Some(16_384),
            address_share: 0.25,
            ..Config::default()
        };
        assert_eq!(c.per_address_cap(), 4096);
    }
}
