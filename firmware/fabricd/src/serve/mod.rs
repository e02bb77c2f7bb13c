//! `fabricd serve`: wires the fabric, the driver, the scheduler and the HTTP
//! server together, and takes them down in order.
//!
//! # Shutdown (SIGTERM or SIGINT)
//! 1. Stop accepting connections; `/readyz` says not ready; new requests on
//!    open connections get `shutting_down`.
//! 2. Let in-flight and queued requests finish, for at most the grace
//!    period; then answer whatever is left with `shutting_down`.
//! 3. Quiesce the fabric: stop the rings (CONTROL = 0) so nothing is
//!    written into buffers we are about to unmap.
//! 4. Stop the simulator if we started it; exit 0.

use fabric_hw::contract::SlotState;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fabric_hw::shell::RingConfig;
use fabric_hw::Root;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::control::Admin;
use crate::fabric::Driver;
use crate::http::{self as server, App};
use crate::rotation::Rotator;
use crate::sched;
use crate::stats::metrics::Metrics;
use std::time::Instant;

#[cfg(feature = "sim")]
pub use sim::{default_sim_catalog, start_sim, SimChild};

pub mod agent;
mod memory;
pub use memory::tune_malloc;
#[cfg(feature = "sim")]
mod sim;

/// Raises the open-file limit to its hard limit: 12,000 connections need
/// more than the usual 1,024.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                log::warn!("serve: raising the open-file limit from {soft} to {hard}: {e}");
            }
        }
        if hard < 16_384 {
            log::warn!("serve: the open-file limit is {hard}; 2,048 clients and 10,000 idle connections need more");
        }
    }
}

/// Runs the daemon until `shutdown` fires.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    run_ready(config, listener, shutdown, Ready::default()).await
}

/// Told once the daemon serves: the fabric attached, the scheduler
/// publishing the slots, the control socket bound and connections
/// accepted. Dropped unsent if the start failed.
#[derive(Debug, Default)]
pub struct Ready(Option<tokio::sync::oneshot::Sender<()>>);

impl Ready {
    /// A signal, and what awaits it.
    pub fn channel() -> (Ready, tokio::sync::oneshot::Receiver<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (Ready(Some(tx)), rx)
    }

    fn fire(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// [`run`], telling `ready` once it serves.
pub async fn run_ready(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
    mut ready: Ready,
) -> anyhow::Result<()> {
    config.validate()?;
    raise_fd_limit();
    let root = Root::new(&config.root).with_configfs(&config.configfs);
    let _lock = crate::lock::FabricLock::take(root.base())?;
    let attached = {
        let root = root.clone();
        tokio::task::block_in_place(|| fabric_hw::attach(&root, RingConfig::default()))?
    };
    let (driver, topology, tables) = Driver::new(attached);
    let shell = driver.shell().clone();
    let info = shell.info().clone();
    // Read once the board is known, so that every image is checked against
    // its part and its shell, and one that fails is listed as unusable.
    let board = crate::catalog::Board {
        part: topology.shell.part.clone(),
        interface_id: info.interface_id,
    };
    let catalog = Arc::new(tokio::task::block_in_place(|| {
        Catalog::load(&config.catalog_dir(), Some(&board))
    })?);
    let (stats, stats_task) = crate::stats::start(config.stats());
    let scheduler = sched::spawn(
        driver,
        catalog.clone(),
        config.queue_capacity,
        stats.in_flight.clone(),
        &config.typing,
    );
    let mut sched_task = scheduler.task;
    let sched_stop = scheduler.stop;
    let restart = crate::rotation::RestartHandle::new(shutdown.clone());
    let rotator = Arc::new(Rotator::new(
        root.clone(),
        catalog.clone(),
        shell.clone(),
        Arc::new(tables),
        topology,
        scheduler.handle.control().clone(),
        stats.clone(),
        config.rotation(),
        restart.clone(),
    ));
    // A restart finds the models the fabric kept running: nothing is
    // reflashed.
    let boot_views = scheduler.handle.published().view().slots.clone();
    for v in &boot_views {
        log::info!(
            "serve: slot {} {} {}",
            v.index,
            v.state.as_str(),
            v.model.as_deref().unwrap_or("-")
        );
    }
    let metrics = Arc::new(Metrics::default());
    let board_drain = Arc::new(agent::BoardDrain::default());
    // The nominal rate, before any completion was measured: every slot busy
    // with typical speculative-typing requests.
    let nominal_rate = (info.slot_rate(16, 8) * info.slots as f64).min(1e6);
    let app = Arc::new(App {
        config: config.clone(),
        catalog: (*catalog).clone(),
        sched: scheduler.handle,
        permits: Arc::new(Semaphore::new(config.queue_capacity)),
        metrics,
        next_id: AtomicU64::new(1),
        shutting_down: AtomicBool::new(false),
        nominal_rate,
        stats: stats.clone(),
        typing: crate::typing::Typing::new(config.typing.clone()),
        heads: crate::http::head::HeadLimits::new(
            config.max_header_bytes,
            config.header_budget_bytes,
        ),
        board_drain: board_drain.clone(),
        hyper_waiting: std::sync::atomic::AtomicUsize::new(0),
    });
    let admin_stop = CancellationToken::new();
    let socket = config.socket_path();
    let control_task = match crate::control::bind(&socket) {
        Ok(listener) => {
            log::info!("serve: control socket {}", socket.display());
            let admin = Arc::new(Admin {
                sched: app.sched.control().clone(),
                catalog: catalog.clone(),
                metrics: app.metrics.clone(),
                stats: stats.clone(),
                rotator: rotator.clone(),
                board_drain: board_drain.clone(),
                agent_listening: config.agent_listen.is_some(),
                started: Instant::now(),
            });
            Some(tokio::spawn(crate::control::serve(
                listener,
                admin,
                admin_stop.clone(),
            )))
        }
        Err(e) => {
            // Serving matters more than control: log it and go on.
            log::error!("serve: no control socket: {}", fabric_hw::Chain(&e));
            None
        }
    };
    let agent_stop = CancellationToken::new();
    let agent_task = match config.agent_listen {
        Some(addr) => match TcpListener::bind(addr).await {
            Ok(listener) => {
                log::info!("serve: agent check on {addr}");
                Some(tokio::spawn(agent::serve(
                    listener,
                    agent_reading(app.clone()),
                    agent_stop.clone(),
                )))
            }
            Err(e) => {
                // The balancer's health check still sees the board: log it
                // and go on serving.
                log::error!("serve: no agent check on {addr}: {e}");
                None
            }
        },
        None => None,
    };
    let tracker = TaskTracker::new();
    let accept_stop = CancellationToken::new();
    let server_task = tokio::spawn(server::serve(
        listener,
        app.clone(),
        accept_stop.clone(),
        tracker.clone(),
    ));
    let trimmer = config.trim_memory.then(|| {
        let app = app.clone();
        let capacity = config.queue_capacity as u64;
        tokio::spawn(memory::give_back(
            move || {
                let open = app.metrics.connections_open.load(Ordering::Relaxed);
                let admitted = capacity.saturating_sub(app.permits.available_permits() as u64);
                u64::try_from(open).unwrap_or(0) + admitted
            },
            accept_stop.clone(),
        ))
    });
    let schedule = config.rotation_interval().map(|every| {
        let rotator = rotator.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                match rotator.rotate().await {
                    Ok(r) => log::info!(
                        "serve: scheduled rotation loaded {} into slot {}",
                        r.model,
                        r.slot
                    ),
                    Err(e) => log::error!("serve: scheduled rotation: {}", fabric_hw::Chain(&e)),
                }
            }
        })
    });
    // The slots the configuration wants (one model in every slot, say),
    // and a slot that holds an engine but no model (a board just booted:
    // its full image carries the engines, not the models) gets what it
    // last held, or the catalog's models in turn. Those empty slots are filled before the
    // daemon says it serves (a commit takes milliseconds, and a fresh
    // board would otherwise answer its first callers "no model"); a slot
    // that must be reprogrammed is loaded afterwards, one at a time, while
    // the others serve.
    let mut want = config.slot_models.clone();
    let usable: Vec<String> = catalog
        .models
        .iter()
        .filter(|m| m.problem.is_none())
        .map(|m| m.name.to_string())
        .collect();
    let mut empty = Vec::new();
    for v in &boot_views {
        let i = usize::from(v.index);
        if v.state != SlotState::NoModel {
            continue;
        }
        empty.push(i);
        if want.get(i).is_none_or(String::is_empty) {
            // What the slot last held (the plan on the card), else the
            // catalog's models in turn.
            let model = rotator
                .planned(v.index)
                .or_else(|| (!usable.is_empty()).then(|| usable[i % usable.len()].clone()));
            if let Some(model) = model {
                want.resize(want.len().max(i + 1), String::new());
                want[i] = model;
            }
        }
    }
    let hold = |rotator: Arc<Rotator>, slot: usize, model: String| async move {
        let Ok(slot) = u8::try_from(slot) else { return };
        match rotator.hold(slot, &model).await {
            Ok(None) => {}
            Ok(Some(r)) => log::info!(
                "serve: slot {slot} now holds {model} ({}, {} ms)",
                r.method,
                r.total_ms
            ),
            Err(e) => log::error!(
                "serve: slot {slot} should hold {model}: {}",
                fabric_hw::Chain(&e)
            ),
        }
    };
    for &slot in &empty {
        if let Some(model) = want.get(slot).filter(|m| !m.is_empty()) {
            hold(rotator.clone(), slot, model.clone()).await;
        }
    }
    let later: Vec<(usize, String)> = want
        .into_iter()
        .enumerate()
        .filter(|(slot, model)| !model.is_empty() && !empty.contains(slot))
        .collect();
    let holding = (!later.is_empty()).then(|| {
        let rotator = rotator.clone();
        tokio::spawn(async move {
            for (slot, model) in later {
                hold(rotator.clone(), slot, model).await;
            }
        })
    });
    ready.fire();
    log::info!("serve: ready");

    // The scheduler ends on its own only when the fabric failed under it
    // (a ring, a cache sync or the interrupt): it has answered what it held
    // with `fabric_error`. What it owned is in an unknown state, so fabricd
    // stops and the board's supervisor starts it again, to attach afresh.
    let mut ended = None;
    tokio::select! {
        _ = shutdown.cancelled() => {}
        d = &mut sched_task => {
            ended = Some(d);
            log::error!("serve: the fabric failed; fabricd restarts to attach to it again");
            // The connections and the accept loop stop on this token.
            shutdown.cancel();
        }
    }
    let scheduler_ended = ended.is_some();
    log::info!("serve: shutting down");
    app.shutting_down.store(true, Ordering::Relaxed);
    accept_stop.cancel();
    admin_stop.cancel();
    if let Some(t) = schedule {
        t.abort();
    }
    if let Some(t) = holding {
        t.abort();
    }
    let _ = server_task.await;
    if let Some(t) = trimmer {
        let _ = t.await;
    }
    // The connections saw the same token: hyper finishes the request in
    // flight on each and closes it.
    tracker.close();
    let grace = config.shutdown_grace();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        log::warn!("serve: requests still running after {grace:?}; answering them shutting_down");
    }
    if let Some(t) = control_task {
        let _ = t.await;
    }
    // Until here the agent answered `drain`; it holds the app, which must
    // go for the scheduler to see admission closed.
    agent_stop.cancel();
    if let Some(t) = agent_task {
        let _ = t.await;
    }
    drop(rotator);
    drop(app);
    // The scheduler ends once admission is closed and nothing is left, or
    // when told to at the end of the grace period, answering what is left.
    let ended = match ended {
        Some(d) => d,
        None => match tokio::time::timeout(Duration::from_secs(1), &mut sched_task).await {
            Ok(d) => d,
            Err(_) => {
                log::warn!(
                    "serve: the scheduler did not drain; answering what is left shutting_down"
                );
                sched_stop.cancel();
                (&mut sched_task).await
            }
        },
    };
    let driver = match ended {
        Ok(driver) => Some(driver),
        Err(e) => {
            log::error!("serve: the scheduler task failed: {e}");
            None
        }
    };
    // The open stats window is written whole.
    stats.checkpoint().await;
    drop(stats);
    let _ = tokio::time::timeout(Duration::from_secs(2), stats_task).await;
    let _ = std::fs::remove_file(&socket);
    if restart.requested() {
        // The shell's device moved: the handle held here is invalid and is
        // not touched again.
        log::info!("serve: stopped to attach to the shell again");
        return Err(RestartRequired.into());
    }
    // Quiesce: stop the rings so the fabric writes nothing more into the
    // buffer we unmap on exit.
    if let Some(driver) = driver {
        if shell.magic_ok() {
            if let Err(e) = tokio::task::block_in_place(|| driver.stop()) {
                log::error!("serve: stopping the rings: {}", fabric_hw::Chain(&e));
            }
        }
    }
    if scheduler_ended {
        log::info!("serve: stopped to attach to the fabric again");
        return Err(RestartRequired.into());
    }
    log::info!("serve: stopped");
    Ok(())
}

/// How the board stands, for the agent check: from what the scheduler
/// publishes.
fn agent_reading(app: Arc<App>) -> impl Fn() -> agent::Reading {
    move || {
        let published = app.sched.published();
        let view = published.view();
        let per_slot = published.info.contexts_per_slot;
        let taking = view
            .slots
            .iter()
            .filter(|s| {
                s.model.is_some() && s.state == fabric_hw::contract::SlotState::Ready && s.accepting
            })
            .count();
        agent::Reading {
            shutting_down: app.shutting_down.load(Ordering::Relaxed),
            drained: app.board_drain.is_on(),
            reconfiguring: view.state == sched::FabricState::Dark,
            model_ready: taking > 0,
            ready_contexts: taking * per_slot,
            contexts: published.info.slots * per_slot,
        }
    }
}

/// `run` stopped so that a new start attaches to the fabric again: a
/// reconfiguration moved the shell's UIO device, or the fabric failed under
/// the scheduler. `fabricd serve` exits with [`RestartRequired::EXIT_CODE`];
/// the board's init script starts it again.
#[derive(Debug, thiserror::Error)]
#[error("the fabric must be attached again (the shell's UIO device moved with a reconfiguration, or the fabric failed); start fabricd again to attach to it")]
pub struct RestartRequired;

impl RestartRequired {
    /// `EX_TEMPFAIL`: try again.
    pub const EXIT_CODE: u8 = 75;
}

/// Binds the HTTP listener with a backlog for thousands of connections
/// arriving at once (tokio's default is 1,024; the kernel caps it at
/// `net.core.somaxconn`).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(8192)
}

/// Resolves once SIGTERM or SIGINT arrives.
pub async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => log::info!("serve: SIGTERM"),
                _ = int.recv() => log::info!("serve: SIGINT"),
            }
        }
        _ => {
            log::error!("serve: cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await;
        }
    }
}
