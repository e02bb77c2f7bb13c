//! The fabric simulator: a Zynq board's static shell and PR slots, behind
//! the same kernel interfaces the daemon uses on silicon.
//!
//! It replaces the fabric, never the driver: the daemon maps the same
//! register window, reads the same sysfs attributes, writes the same u-dma-buf
//! sync commands, configfs overlays and FPGA-manager files, and takes the same
//! 4-byte interrupt counts. See [`layout`] for the files.
//!
//! # Layout
//! - [`config`]: the command line.
//! - [`layout`]: the fake root and the simulated board's device tree.
//! - [`device`]: the shell: registers, rings, decode contexts, interrupt.
//! - `irq`: the interrupt socket (`/dev/uio0.irq`).
//! - `watch`: inotify on the sync attributes, overlays, FPGA manager and
//!   fault file.
//! - `reconfig`: partial (overlay) and full (FPGA manager) loads.
//! - [`rules`]: what the real kernel enforces, each rule naming its kernel
//!   function; reconfiguration and layout follow them.
//! - [`kernel`]: `--kernel`, the same fabric behind a real kernel's objects,
//!   in the real-kernel rig.
//! - `rtl` (feature `rtl`): `--rtl`, the shell and slots as the Verilated
//!   RTL instead of [`device`]'s Rust model, behind the same files.
//!
//! # Threads
//! The sequencer thread runs [`device::Fabric::tick`] at least every poll
//! interval, and takes the daemon's unmask writes then. The interrupt thread
//! accepts the daemon's connections; the watcher thread serves syncs and starts
//! reconfigurations, each on a thread of its own so the sequencer and the
//! other slots keep running. All of them share one mutex around the fabric;
//! nothing blocks while holding it.

#![forbid(unsafe_code)]

pub mod config;
pub mod device;
mod engine;
mod irq;
pub mod kernel;
pub mod layout;
mod reconfig;
#[cfg(feature = "rtl")]
mod rtl;
pub mod rules;
mod watch;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

pub use config::SimConfig;
use device::{Fabric, Faults, SimStats};
use fabric_hw::contract::{SlotState, WINDOW_LEN};
use fabric_hw::dma::DmaBuf;
use fabric_hw::mmio::Mmio;
use fabric_hw::shell::Counters;
use fabric_hw::Root;
use layout::Paths;

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("laying out the board root at {path}")]
    Layout {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("mapping the simulated hardware: {0}")]
    Map(String),
    #[error("--load {arg:?}: {problem}")]
    Load { arg: String, problem: String },
    #[error("the interrupt socket at {path}")]
    Irq {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("watching the board's files: {0}")]
    Watch(std::io::Error),
    #[error("{0}")]
    Config(String),
}

pub(crate) struct Shared {
    pub fabric: Mutex<Fabric>,
    /// Threads waiting for `fabric` in [`Shared::lock`]: the sequencer,
    /// busy, lets them in before it takes the lock again.
    waiting: AtomicU32,
    pub stop: AtomicBool,
    /// Fast polls still to do: a sync for the device usually precedes a
    /// doorbell by microseconds.
    pub burst: std::sync::atomic::AtomicU32,
    pub sequencer: OnceLock<Thread>,
    /// Whether the shell's overlay is in the live tree (the base region
    /// holds it).
    pub shell_in_tree: AtomicBool,
    /// The shell's UIO number now (see `--renumber-uio`).
    pub uio_number: std::sync::atomic::AtomicU32,
    pub paths: Paths,
    pub config: SimConfig,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Fabric> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let guard = self.fabric.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }

    /// Lets a thread waiting for the lock take it before the caller, who
    /// just let it go, takes it again. std's mutex is not fair: a busy
    /// sequencer takes it back at once, and under the RTL in a debug build
    /// on a loaded machine, a sync waiting behind it went unanswered past
    /// the daemon's 2 s bound (`fabricd serve` then exits). Bounded: a
    /// waiter not scheduled within a few thousand yields waits a turn.
    fn let_waiters_in(&self) {
        for _ in 0..4096 {
            if self.waiting.load(Ordering::Relaxed) == 0 {
                return;
            }
            thread::yield_now();
        }
    }

    /// Lets the sequencer run now rather than at its next poll.
    pub fn wake(&self) {
        if let Some(t) = self.sequencer.get() {
            t.unpark();
        }
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A running simulator. Stops when dropped.
pub struct Simulator {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Simulator({})", self.shared.paths.root.base().display())
    }
}

impl Simulator {
    /// Lays out the root and starts the fabric.
    pub fn start(mut config: SimConfig) -> Result<Simulator, SimError> {
        config.device()?;
        if std::env::var_os("FABRICD_SIM_RTL").is_some_and(|v| v == "1") {
            config.rtl = true;
        }
        if config.rtl {
            #[cfg(feature = "rtl")]
            rtl::check(&config).map_err(SimError::Config)?;
            #[cfg(not(feature = "rtl"))]
            return Err(SimError::Config(
                "--rtl: this fabric-sim was built without the `rtl` feature (cargo build --features rtl, with Verilator installed)".into(),
            ));
        }
        if config.slots == 0 || usize::from(config.slots) > fabric_hw::contract::MAX_SLOTS {
            return Err(SimError::Config(format!(
                "--slots must be 1..={}",
                fabric_hw::contract::MAX_SLOTS
            )));
        }
        let cps = config.contexts_per_slot();
        if cps < usize::from(config.lanes) || cps > fabric_hw::contract::MAX_CONTEXTS {
            return Err(SimError::Config(format!(
                "--contexts must be between --lanes and {}",
                fabric_hw::contract::MAX_CONTEXTS
            )));
        }
        if config.lanes == 0 || usize::from(config.lanes) > fabric_hw::contract::MAX_LANES {
            return Err(SimError::Config(format!(
                "--lanes must be 1..={}",
                fabric_hw::contract::MAX_LANES
            )));
        }
        let paths = Paths::new(&config);
        layout::create(&config, &paths).map_err(|source| SimError::Layout {
            path: config.root.clone(),
            source,
        })?;
        let regs_file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&paths.regs)
            .map_err(|e| SimError::Map(format!("{}: {e}", paths.regs.display())))?;
        let regs = Mmio::map(&regs_file, &paths.regs, 0, 0, WINDOW_LEN)
            .map_err(|e| SimError::Map(fabric_hw::Chain(&e).to_string()))?;
        let cpu_view = if config.uio_buffer {
            // Uncached: no cache stands between the two sides.
            config.dma_coherent = true;
            let page = fabric_hw::uio::page_size()
                .map_err(|e| SimError::Map(fabric_hw::Chain(&e).to_string()))?;
            let len = usize::try_from(config.dma_size)
                .map_err(|_| SimError::Config("--dma-size does not fit".into()))?;
            let window = Mmio::map(&regs_file, &paths.regs, page, 0, len)
                .map_err(|e| SimError::Map(fabric_hw::Chain(&e).to_string()))?;
            DmaBuf::uncached(
                "buffer".into(),
                paths.regs.clone(),
                config::DMA_PHYS,
                window,
            )
        } else {
            DmaBuf::open(&paths.root, layout::DMA_NAME)
                .map_err(|e| SimError::Map(fabric_hw::Chain(&e).to_string()))?
        };
        let mut fabric = Fabric::new(config.clone(), regs, cpu_view);
        for arg in &config.load {
            let (slot, loaded) = reconfig::boot_image(&config, arg)?;
            fabric.set_slot(slot, Some(loaded), SlotState::NoModel);
        }
        let shared = Arc::new(Shared {
            fabric: Mutex::new(fabric),
            waiting: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            burst: std::sync::atomic::AtomicU32::new(0),
            sequencer: OnceLock::new(),
            uio_number: std::sync::atomic::AtomicU32::new(0),
            shell_in_tree: AtomicBool::new(!config.no_configfs),
            paths: paths.clone(),
            config,
        });
        let listener = irq::bind_socket(&paths.irq_socket).map_err(|source| SimError::Irq {
            path: paths.irq_socket.clone(),
            source,
        })?;
        // The device shows in sysfs only now that its interrupt exists.
        layout::create_uio(&shared.config, &paths).map_err(|source| SimError::Layout {
            path: paths.root.uio_class(),
            source,
        })?;
        let watcher = watch::Watcher::new(&shared).map_err(SimError::Watch)?;
        let mut threads = Vec::new();
        let s = shared.clone();
        let seq = thread::Builder::new()
            .name("sequencer".into())
            .spawn(move || sequencer(&s))
            .map_err(SimError::Watch)?;
        let _ = shared.sequencer.set(seq.thread().clone());
        threads.push(seq);
        let s = shared.clone();
        threads.push(
            thread::Builder::new()
                .name("irq".into())
                .spawn(move || irq::serve(&s, listener))
                .map_err(SimError::Watch)?,
        );
        let s = shared.clone();
        threads.push(
            thread::Builder::new()
                .name("watch".into())
                .spawn(move || watcher.run(&s))
                .map_err(SimError::Watch)?,
        );
        // Tell whoever started us that the board is up.
        std::fs::write(
            paths.sim_dir.join("ready"),
            format!("{}\n", std::process::id()),
        )
        .map_err(|source| SimError::Layout {
            path: paths.sim_dir.clone(),
            source,
        })?;
        log::info!(
            "fabric-sim: {} slots × {} lanes at {}, time scale {}",
            shared.config.slots,
            shared.config.lanes,
            paths.root.base().display(),
            shared.config.time_scale
        );
        Ok(Simulator { shared, threads })
    }

    /// The board root the simulator laid out.
    pub fn root(&self) -> Root {
        self.shared.paths.root.clone()
    }

    /// The shell's counters.
    pub fn counters(&self) -> Counters {
        self.shared.lock().counters()
    }

    /// Device-side figures (interrupts, syncs, stale descriptors).
    pub fn stats(&self) -> SimStats {
        self.shared.lock().stats
    }

    /// The state of slot `s`.
    pub fn slot_state(&self, s: usize) -> SlotState {
        self.shared.lock().slot_state(s)
    }

    /// Adds faults to inject.
    pub fn inject(&self, faults: Faults) {
        self.shared.lock().faults.add(faults);
    }

    /// Stops every thread and closes the interrupt connections.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake();
        irq::close_all(&self.shared);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn sequencer(shared: &Shared) {
    set_timer_slack();
    // The sequencer looks at the doorbells at least this often: every poll
    // interval while work is about, backing off when the fabric is idle.
    let hot = Duration::from_micros(shared.config.poll_us.max(1));
    let warm = hot * 8;
    let idle = hot * 40;
    let mut last_busy = Instant::now();
    while !shared.stopping() {
        let now = Instant::now();
        let (next, busy) = {
            let mut f = shared.lock();
            f.irq.take_unmasks(now);
            let next = f.tick(now);
            f.deliver_irq();
            (next, next.is_some() || f.counters().active > 0)
        };
        shared.let_waiters_in();
        if busy {
            last_busy = now;
        }
        let quiet = now.saturating_duration_since(last_busy);
        let mut poll = if quiet < Duration::from_millis(100) {
            hot
        } else if quiet < Duration::from_secs(2) {
            warm
        } else {
            idle
        };
        if shared
            .burst
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
            .is_ok()
        {
            poll = Duration::from_micros(10);
            last_busy = now;
        }
        let wait = next
            .map(|n| n.saturating_duration_since(Instant::now()))
            .unwrap_or(poll)
            .min(poll);
        if !wait.is_zero() {
            thread::park_timeout(wait);
        }
    }
}

/// The default 50 µs timer slack would double a 50 µs poll.
fn set_timer_slack() {
    if let Err(e) = nix::sys::prctl::set_timerslack(1_000) {
        log::debug!("prctl(PR_SET_TIMERSLACK): {e}");
    }
}

/// `fabric-sim`'s main: runs until SIGINT or SIGTERM.
pub fn run(mut config: SimConfig) -> std::process::ExitCode {
    config.resolve_root();
    use nix::sys::signal::{SigSet, Signal};
    // Block the signals before any thread starts, so every thread inherits
    // the mask and only `wait` below receives them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    if let Err(e) = signals.thread_block() {
        eprintln!("fabric-sim: blocking signals: {e}");
        return std::process::ExitCode::FAILURE;
    }
    if config.die_with_parent {
        // SIGTERM when the parent dies, even by SIGKILL; and if it died
        // before we asked, go now.
        if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
            eprintln!("fabric-sim: prctl(PR_SET_PDEATHSIG): {e}");
        }
        if nix::unistd::getppid() == nix::unistd::Pid::from_raw(1) {
            return std::process::ExitCode::SUCCESS;
        }
    }
    if config.kernel {
        return run_kernel(config, signals);
    }
    let sim = match Simulator::start(config) {
        Ok(sim) => sim,
        Err(e) => {
            eprintln!("fabric-sim: {}", fabric_hw::Chain(&e));
            return std::process::ExitCode::FAILURE;
        }
    };
    match signals.wait() {
        Ok(sig) => log::info!("fabric-sim: {sig:?}, stopping"),
        Err(e) => log::warn!("fabric-sim: waiting for a signal: {e}"),
    }
    sim.stop();
    std::process::ExitCode::SUCCESS
}

/// `--kernel`: the device side runs on a thread of its own until a signal.
fn run_kernel(mut config: SimConfig, signals: nix::sys::signal::SigSet) -> std::process::ExitCode {
    // UIO maps the buffer uncached: no cache stands between the two sides.
    config.dma_coherent = true;
    config.dma_phys = config.pl.buffer_addr;
    let map = kernel::Map::of(&config.pl);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let device = thread::spawn(move || kernel::run(config, &map, &s));
    let waiter = stop.clone();
    thread::spawn(move || {
        match signals.wait() {
            Ok(sig) => log::info!("fabric-sim: {sig:?}, stopping"),
            Err(e) => log::warn!("fabric-sim: waiting for a signal: {e}"),
        }
        waiter.store(true, Ordering::Relaxed);
    });
    match device.join() {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("fabric-sim: {}", fabric_hw::Chain(&e));
            std::process::ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("fabric-sim: the device thread panicked");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The file the simulator writes once the board is up (its pid).
pub fn ready_file(root: &Root) -> std::path::PathBuf {
    root.path("/sim/ready")
}

/// Injects faults through the root's fault file (`/sim/faults`), for a
/// simulator running in another process. Lines are `KIND COUNT`.
pub fn fault_file(root: &Root) -> std::path::PathBuf {
    root.path("/sim/faults")
}

/// Parses a fault file's text.
pub fn parse_faults(text: &str) -> Result<Faults, String> {
    let mut f = Faults::default();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (kind, count) = line.split_once(char::is_whitespace).unwrap_or((line, "1"));
        let n: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("fault {kind:?}: count {count:?} is not a number"))?;
        match kind {
            "hang" => f.hang += n,
            "lose-irq" => f.lose_irq += n,
            "corrupt" => f.corrupt += n,
            "reconfig-fail" => f.reconfig_fail += n,
            "fpga-error" => f.fpga_error += n,
            "refuse-cpu-sync" => f.refuse_cpu_sync += n,
            "refuse-ring-sync" => f.refuse_ring_sync += n,
            other => {
                return Err(format!(
                    "unknown fault {other:?} (hang, lose-irq, corrupt, reconfig-fail, fpga-error, refuse-cpu-sync, refuse-ring-sync)"
                ))
            }
        }
    }
    Ok(f)
}
