//! Model rotation: loading a model into a PR slot while the board keeps
//! serving.
//!
//! # A partial load, in order
//! 1. Checks, before anything touches the fabric: the model is named in the
//!    catalog (never a path), its image's SHA-256 matches the manifest, the
//!    `.bit` header names this board's part, its `UserID` is the shell's
//!    interface id, it is a partial image built for this slot, and the
//!    manifest's shell major version is the shell's. Any failure refuses
//!    the load; nothing was staged or flashed.
//! 2. Stage: the byte-swapped `.bin` and the slot's overlay `.dtbo` under
//!    `/lib/firmware/fabricd/staged/`, written to a temporary name, synced,
//!    and renamed.
//! 3. Drain: the scheduler stops starting work in the slot, and the load
//!    waits (bounded) until nothing runs there; a busy slot is refused
//!    unless forced. Requests for the model being replaced go to another
//!    slot that holds it, or wait.
//! 4. Quiesce: SLOT_CTRL.QUIESCE, then SLOT_SHUTDOWN polled until 0x0F.
//! 5. Remove the slot's previous overlay, apply the new one through
//!    configfs, and read its `status` back.
//! 6. Read the slot back: SLOT_STATE ready and SLOT_HASH equal to the staged
//!    image's SHA-256. Clear QUIESCE; the slot takes work again.
//!
//! A failure after step 3 rolls back: the previous model is staged and
//! applied again the same way. Queued requests are never dropped: they run
//! when their model is ready again, or get a typed answer.
//!
//! With two or more slots the new model goes into a slot that is not
//! serving the only copy of a model in use (an empty slot first, then the
//! least recently loaded), so the model being replaced keeps serving until
//! the new one is ready: make before break.
//!
//! # Full reconfiguration
//! Where the kernel has no configfs overlays, a load goes through the FPGA
//! manager (`firmware`, `flags` = 0): the whole fabric is dark for the
//! duration, every slot is drained first, and the rings are initialised
//! again afterwards.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fabric_hw::bitstream::{self, BitstreamError};
use fabric_hw::contract::SlotState;
use fabric_hw::devtree::{slot_overlay, Topology};
use fabric_hw::fpga::{FpgaError, FpgaManager, Overlays};
use fabric_hw::shell::{Shell, ShellError};
use fabric_hw::Root;
use tokio::sync::{mpsc, oneshot};

use crate::catalog::{self, Catalog, CatalogError, CatalogModel};
use crate::scheduler::{Control, SlotView};
use crate::stats::StatsHandle;

/// Overlay names this daemon owns: `fabricd-slot<N>`.
pub const OVERLAY_PREFIX: &str = "fabricd-slot";

/// Why a load was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    #[error("{0:?} is not a model name (letters, digits, -, _ and . only; models are named, never addressed by path)")]
    BadName(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("model {model} cannot be loaded: {problem}")]
    Unusable {
        model: String,
        problem: CatalogError,
    },
    #[error("there is no slot {slot} (the shell has {slots})")]
    NoSuchSlot { slot: u8, slots: usize },
    #[error(
        "model {model} has no {kind} image for slot {slot} (its images are for slots {slots:?})"
    )]
    NotForSlot {
        model: String,
        kind: &'static str,
        slot: u8,
        slots: Vec<u8>,
    },
    #[error("{file}: built for part {part:?}, this board is {board:?}")]
    WrongPart {
        file: String,
        part: String,
        board: String,
    },
    #[error("{file}: UserID {found} is not the shell's interface id {shell:#010x}: it was built for another shell")]
    WrongInterface {
        file: String,
        found: String,
        shell: u32,
    },
    #[error("{file}: a {found} image where a {wanted} one is needed")]
    WrongKind {
        file: String,
        found: &'static str,
        wanted: &'static str,
    },
    #[error("the catalog is for shell {manifest}, the fabric runs shell {shell}")]
    WrongShell { manifest: String, shell: String },
    #[error("{file}: {source}")]
    Bitstream {
        file: String,
        source: BitstreamError,
    },
    #[error(
        "slot {slot} still runs {running} request(s) after {waited_ms} ms; retry, or force it"
    )]
    Busy {
        slot: u8,
        running: usize,
        waited_ms: u128,
    },
    #[error("another load is in progress")]
    AlreadyLoading,
    #[error("staging {path}: {source}")]
    Stage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("quiescing slot {slot}: {source}")]
    Quiesce { slot: u8, source: ShellError },
    #[error("slot {slot}: {source}")]
    Reconfigure { slot: u8, source: FpgaError },
    #[error("slot {slot} reads {state} with image {found} after the load; expected ready with {expected}")]
    Readback {
        slot: u8,
        state: String,
        found: String,
        expected: String,
    },
    #[error("{error}; {restored}")]
    RolledBack {
        error: Box<RotationError>,
        restored: String,
    },
    #[error("no rotation schedule is configured ([rotation] models in the configuration)")]
    NoSchedule,
    #[error("the fabric is dark (a full reconfiguration is running)")]
    Dark,
    #[error("{0}")]
    Internal(String),
}

impl RotationError {
    /// The type string fabricctl shows.
    pub fn kind(&self) -> &'static str {
        match self {
            RotationError::BadName(_) => "bad_model_name",
            RotationError::Catalog(CatalogError::UnknownModel { .. }) => "unknown_model",
            RotationError::Catalog(_) | RotationError::Unusable { .. } => "bad_image",
            RotationError::NoSuchSlot { .. } => "no_such_slot",
            RotationError::NotForSlot { .. } => "wrong_slot",
            RotationError::WrongPart { .. } => "wrong_part",
            RotationError::WrongInterface { .. } | RotationError::WrongShell { .. } => {
                "wrong_shell"
            }
            RotationError::WrongKind { .. } | RotationError::Bitstream { .. } => "bad_image",
            RotationError::Busy { .. } => "slot_busy",
            RotationError::AlreadyLoading => "busy",
            RotationError::Stage { .. } => "staging_failed",
            RotationError::Quiesce { .. } => "quiesce_failed",
            RotationError::Reconfigure { .. } | RotationError::Readback { .. } => "load_failed",
            RotationError::RolledBack { .. } => "load_failed_rolled_back",
            RotationError::NoSchedule => "no_schedule",
            RotationError::Dark => "fabric_dark",
            RotationError::Internal(_) => "internal",
        }
    }
}

/// Timeouts and the schedule.
#[derive(Debug, Clone)]
pub struct RotationConfig {
    pub drain_timeout: Duration,
    pub quiesce_timeout: Duration,
    pub apply_timeout: Duration,
    pub full_timeout: Duration,
    pub schedule: Vec<String>,
}

impl Default for RotationConfig {
    fn default() -> Self {
        RotationConfig {
            drain_timeout: Duration::from_secs(30),
            quiesce_timeout: Duration::from_secs(2),
            apply_timeout: Duration::from_secs(120),
            full_timeout: Duration::from_secs(300),
            schedule: Vec::new(),
        }
    }
}

/// How a load asks the daemon to restart: after a reconfiguration the
/// shell's UIO device came back under another number, so every handle to
/// the old one is invalid. A restart attaches to the new one without
/// reflashing anything (see `serve`), which is simpler and better tested
/// than swapping every handle in place.
#[derive(Debug, Clone, Default)]
pub struct RestartHandle {
    shutdown: Option<tokio_util::sync::CancellationToken>,
    requested: Arc<std::sync::atomic::AtomicBool>,
}

impl RestartHandle {
    /// A handle that stops the daemon through `shutdown`.
    pub fn new(shutdown: tokio_util::sync::CancellationToken) -> RestartHandle {
        RestartHandle {
            shutdown: Some(shutdown),
            requested: Arc::default(),
        }
    }

    fn request(&self) {
        self.requested
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(s) = &self.shutdown {
            s.cancel();
        }
    }

    /// Whether a restart was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a finished load reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub model: String,
    pub slot: u8,
    pub replaced: Option<String>,
    pub method: &'static str,
    pub staged_sha256: String,
    pub drain_ms: u128,
    pub reconfigure_ms: u128,
    pub total_ms: u128,
    /// Set when the shell's UIO device moved and the daemon restarts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
}

/// Whether a `.bit` header's part names this board's part. Vivado writes
/// parts with or without the `xc` prefix and the speed grade
/// (`7z020clg484` for `xc7z020clg484-1`).
pub fn part_matches(header: &str, board: &str) -> bool {
    let norm = |p: &str| {
        let p = p.trim().to_ascii_lowercase();
        p.strip_prefix("xc").map(str::to_owned).unwrap_or(p)
    };
    let (h, b) = (norm(header), norm(board));
    !h.is_empty() && (h == b || b.starts_with(&format!("{h}-")))
}

/// An image checked and converted, ready to stage.
struct Checked {
    file: String,
    bin: Vec<u8>,
    sha256: String,
}

/// Loads models into slots.
pub struct Rotator {
    root: Root,
    catalog: Arc<Catalog>,
    shell: Arc<Shell>,
    topology: Topology,
    control: mpsc::Sender<Control>,
    stats: Arc<StatsHandle>,
    config: RotationConfig,
    overlays: Option<Overlays>,
    manager: Option<FpgaManager>,
    busy: tokio::sync::Mutex<()>,
    /// Held from reading the slots to sending them, so that the scheduler
    /// takes views in the order they were read: a periodic refresh read
    /// before a load ended cannot land after the load's own.
    publishing: tokio::sync::Mutex<()>,
    /// Slot → the model being loaded into it.
    loading: Mutex<HashMap<u8, Arc<str>>>,
    /// Slot → when it was last loaded (for least-recently-loaded choice).
    loaded_at: Mutex<HashMap<u8, Instant>>,
    /// Bytes per second of recent partial loads, for estimates.
    rate: Mutex<f64>,
    /// The model `default` names (see [`Rotator::current`]).
    current: Mutex<Option<Arc<str>>>,
    restart: RestartHandle,
}

impl std::fmt::Debug for Rotator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rotator({})", self.root.base().display())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Rotator {
    /// A rotator; removes overlay directories a crashed daemon left
    /// half-applied (ours only; an applied one is a slot's live model and
    /// stays).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        root: Root,
        catalog: Arc<Catalog>,
        shell: Arc<Shell>,
        topology: Topology,
        control: mpsc::Sender<Control>,
        stats: Arc<StatsHandle>,
        config: RotationConfig,
    ) -> Rotator {
        let overlays = Overlays::open(&root).ok();
        let manager = FpgaManager::open(&root, 0).ok();
        if let Some(ov) = &overlays {
            for name in ov.list().unwrap_or_default() {
                if !name.starts_with(OVERLAY_PREFIX) {
                    continue;
                }
                let status = ov.status(&name).unwrap_or_default();
                if status != "applied" {
                    log::warn!(
                        "rotation: removing overlay {name} left {status:?} by an earlier run"
                    );
                    if let Err(e) = ov.remove(&name) {
                        log::error!("rotation: {e}");
                    }
                }
            }
        } else {
            log::info!(
                "rotation: no configfs overlays under {}; loads use full reconfiguration",
                root.overlays().display()
            );
        }
        Rotator {
            root,
            catalog,
            shell,
            topology,
            control,
            stats,
            config,
            overlays,
            manager,
            busy: tokio::sync::Mutex::new(()),
            publishing: tokio::sync::Mutex::new(()),
            loading: Mutex::new(HashMap::new()),
            loaded_at: Mutex::new(HashMap::new()),
            rate: Mutex::new(400_000.0),
            current: Mutex::new(None),
            restart: RestartHandle::default(),
        }
    }

    /// Has the daemon restart (through `restart`) when a reconfiguration
    /// moves the shell's UIO device.
    pub fn with_restart(mut self, restart: RestartHandle) -> Rotator {
        self.restart = restart;
        self
    }

    /// After a reconfiguration: the shell's UIO device, found again by
    /// name. If it is not the one the daemon holds, every handle to the old
    /// one is invalid: the daemon must not touch it again, and restarts.
    /// Returns why, if so.
    fn device_moved(&self) -> Option<String> {
        let held = self.shell.device();
        let why =
            match fabric_hw::uio::UioDevice::find_any(&self.root, &self.topology.shell.uio_names) {
                Ok(now)
                    if now.number == held.number
                        && now.dev_path == held.dev_path
                        && now.maps == held.maps =>
                {
                    return None
                }
                Ok(now) => format!(
                    "the shell's UIO device moved from {} to {} with the reconfiguration",
                    held.dev_path.display(),
                    now.dev_path.display()
                ),
                Err(e) => format!("the shell's UIO device is gone after the reconfiguration ({e})"),
            };
        let why = format!("{why}; every handle to the old one is invalid, so fabricd restarts to attach again (nothing is reflashed)");
        log::error!("rotation: {why}");
        self.restart.request();
        Some(why)
    }

    /// The slots as the scheduler should see them: the shell's state and
    /// hash, named from the catalog, with loads in progress shown as
    /// loading the model that is coming.
    pub fn views(&self) -> Vec<SlotView> {
        let loading = lock(&self.loading).clone();
        self.shell
            .slots()
            .into_iter()
            .map(|s| {
                let mut model = match s.state {
                    SlotState::Empty => None,
                    _ => self.catalog.by_hash(&s.hash).map(|m| m.name.clone()),
                };
                let mut state = s.state;
                if let Some(m) = loading.get(&s.index) {
                    model = Some(m.clone());
                    state = SlotState::Loading;
                }
                SlotView {
                    index: s.index,
                    state,
                    model,
                    hash: s.hash,
                    accepting: true,
                }
            })
            .collect()
    }

    /// What the configured schedule loads next.
    fn next_in_schedule(&self) -> Result<String, RotationError> {
        let schedule = &self.config.schedule;
        if schedule.is_empty() {
            return Err(RotationError::NoSchedule);
        }
        // The current (default) model decides where the schedule stands.
        let next = match self
            .current()
            .and_then(|m| schedule.iter().position(|s| **s == *m))
        {
            Some(i) => schedule[(i + 1) % schedule.len()].clone(),
            None => schedule[0].clone(),
        };
        Ok(next)
    }

    /// Loads the next model of the schedule, and points `default` at it.
    /// A model already ready in a slot is not flashed again: routing flips.
    pub async fn rotate(&self) -> Result<LoadReport, RotationError> {
        let next = self.next_in_schedule()?;
        if let Some(v) = self
            .views()
            .into_iter()
            .find(|v| v.state == SlotState::Ready && v.model.as_deref() == Some(next.as_str()))
        {
            let replaced = self.current().map(|m| m.to_string());
            *lock(&self.current) = Some(Arc::from(next.as_str()));
            lock(&self.loaded_at).insert(v.index, Instant::now());
            log::info!(
                "rotation: default is now {next} (already in slot {})",
                v.index
            );
            return Ok(LoadReport {
                model: next,
                slot: v.index,
                replaced,
                method: "flip",
                staged_sha256: v.hash,
                drain_ms: 0,
                reconfigure_ms: 0,
                total_ms: 0,
                restart: None,
            });
        }
        self.load(&next, None, false).await
    }

    /// Where a load goes when no slot is named: an empty slot; else a slot
    /// whose model is loaded elsewhere too, or is the one being loaded;
    /// else the least recently loaded slot that does not hold the current
    /// (default) model. The model being replaced serves until the new one
    /// is ready, and `default` never loses its only slot.
    fn pick_slot(&self, model: &str) -> u8 {
        let views = self.views();
        if let Some(v) = views.iter().find(|v| v.model.is_none()) {
            return v.index;
        }
        let count = |m: &Arc<str>| views.iter().filter(|v| v.model.as_ref() == Some(m)).count();
        if let Some(v) = views.iter().find(|v| {
            v.model
                .as_ref()
                .is_some_and(|m| count(m) > 1 || &**m == model)
        }) {
            return v.index;
        }
        let current = self.current();
        let at = lock(&self.loaded_at).clone();
        views
            .iter()
            .min_by_key(|v| {
                (
                    v.model.is_some() && v.model == current,
                    at.get(&v.index).copied(),
                    v.index,
                )
            })
            .map_or(0, |v| v.index)
    }

    /// The model requests for `default` go to: the one loaded most
    /// recently, or at start the first ready slot's.
    pub fn current(&self) -> Option<Arc<str>> {
        if let Some(m) = lock(&self.current).clone() {
            return Some(m);
        }
        self.views()
            .into_iter()
            .find(|v| v.state == SlotState::Ready && v.model.is_some())
            .and_then(|v| v.model)
    }

    fn check(
        &self,
        model: &CatalogModel,
        slot: u8,
        partial: bool,
    ) -> Result<Checked, RotationError> {
        let kind = if partial { "partial" } else { "full" };
        let info = self.shell.info();
        let shell_ver = format!("{}.{}", info.version_major, info.version_minor);
        if self.catalog.shell.major != info.version_major
            || self.catalog.shell.interface_id != info.interface_id
        {
            return Err(RotationError::WrongShell {
                manifest: format!(
                    "{}.x, interface {:#010x}",
                    self.catalog.shell.major, self.catalog.shell.interface_id
                ),
                shell: format!("{shell_ver}, interface {:#010x}", info.interface_id),
            });
        }
        let image = model
            .images
            .iter()
            .find(|i| i.slots.contains(&slot) && (i.kind == "full") != partial)
            .ok_or_else(|| RotationError::NotForSlot {
                model: model.name.to_string(),
                kind,
                slot,
                slots: model
                    .images
                    .iter()
                    .filter(|i| (i.kind == "full") != partial)
                    .flat_map(|i| i.slots.clone())
                    .collect(),
            })?;
        let path = self.catalog.dir.join(&image.file);
        // The hash first: nothing else is read from a file that fails it.
        let bytes = catalog::read_checked(&path, &image.sha256)?;
        let file = image.file.clone();
        let info_img = bitstream::inspect(&bytes).map_err(|source| RotationError::Bitstream {
            file: file.clone(),
            source,
        })?;
        if let Some(h) = &info_img.header {
            if !part_matches(&h.part, &self.topology.shell.part) {
                return Err(RotationError::WrongPart {
                    file,
                    part: h.part.clone(),
                    board: self.topology.shell.part.clone(),
                });
            }
            if h.user_id() != Some(info.interface_id) {
                return Err(RotationError::WrongInterface {
                    file,
                    found: h.attribute("UserID").unwrap_or("none").to_owned(),
                    shell: info.interface_id,
                });
            }
            if h.is_partial() != partial {
                return Err(RotationError::WrongKind {
                    file,
                    found: if h.is_partial() { "partial" } else { "full" },
                    wanted: kind,
                });
            }
        }
        let bin = bitstream::to_bin(&bytes).map_err(|source| RotationError::Bitstream {
            file: file.clone(),
            source,
        })?;
        let sha256 = catalog::sha256_hex(&bin);
        Ok(Checked { file, bin, sha256 })
    }

    fn staged_dir(&self) -> PathBuf {
        self.root.our_firmware_dir().join("staged")
    }

    /// Writes `bytes` to `path` durably: a temporary file, synced, renamed.
    fn stage(path: &Path, bytes: &[u8]) -> Result<(), RotationError> {
        let err = |source| RotationError::Stage {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(err)?;
            f.write_all(bytes).map_err(err)?;
            f.sync_all().map_err(err)?;
        }
        std::fs::rename(&tmp, path).map_err(err)?;
        Ok(())
    }

    async fn running_in(&self, slot: u8) -> usize {
        let (reply, rx) = oneshot::channel();
        if self
            .control
            .send(Control::RunningIn { slot, reply })
            .await
            .is_err()
        {
            return 0;
        }
        rx.await.unwrap_or(0)
    }

    async fn accepting(&self, slot: u8, accepting: bool) {
        let _ = self
            .control
            .send(Control::Accepting { slot, accepting })
            .await;
        self.settled().await;
    }

    /// Tells the scheduler the slots as they are now, and waits until
    /// `/readyz` shows them. Loads call it at each step; the daemon also
    /// calls it periodically, for anything else the shell reports. Returns
    /// false once the scheduler has stopped.
    pub async fn publish(&self) -> bool {
        if !self.shell.magic_ok() {
            return true;
        }
        {
            let _order = self.publishing.lock().await;
            if self
                .control
                .send(Control::Slots(self.views()))
                .await
                .is_err()
            {
                return false;
            }
        }
        self.settled().await;
        true
    }

    /// Waits until the scheduler has applied and published what was sent
    /// before: a load's reply must not reach its caller before `/readyz`
    /// shows the slot it describes.
    async fn settled(&self) {
        let (reply, rx) = oneshot::channel();
        if self.control.send(Control::Settled { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops starting work in `slot` and waits (bounded) until nothing runs
    /// there. Returns how long it took.
    async fn drain_slot(&self, slot: u8, force: bool) -> Result<Duration, RotationError> {
        let start = Instant::now();
        self.accepting(slot, false).await;
        loop {
            let running = self.running_in(slot).await;
            if running == 0 {
                return Ok(start.elapsed());
            }
            if start.elapsed() > self.config.drain_timeout {
                if force {
                    log::warn!(
                        "rotation: slot {slot}: forcing the load over {running} running request(s)"
                    );
                    return Ok(start.elapsed());
                }
                self.accepting(slot, true).await;
                return Err(RotationError::Busy {
                    slot,
                    running,
                    waited_ms: start.elapsed().as_millis(),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Drains a slot and leaves it out of service until a load or `resume`.
    pub async fn drain(&self, slot: u8) -> Result<Duration, RotationError> {
        self.slot_exists(slot)?;
        let _busy = self
            .busy
            .try_lock()
            .map_err(|_| RotationError::AlreadyLoading)?;
        self.drain_slot(slot, false).await
    }

    /// Puts a drained slot back in service.
    pub async fn resume(&self, slot: u8) -> Result<(), RotationError> {
        self.slot_exists(slot)?;
        self.accepting(slot, true).await;
        Ok(())
    }

    fn slot_exists(&self, slot: u8) -> Result<(), RotationError> {
        let slots = self.shell.info().slots;
        if usize::from(slot) >= slots {
            return Err(RotationError::NoSuchSlot { slot, slots });
        }
        Ok(())
    }

    /// Loads `model` into `slot` (or the slot make-before-break picks).
    pub async fn load(
        &self,
        model: &str,
        slot: Option<u8>,
        force: bool,
    ) -> Result<LoadReport, RotationError> {
        if !catalog::valid_model_name(model) {
            return Err(RotationError::BadName(model.to_owned()));
        }
        let entry = self.catalog.get(model)?.clone();
        if let Some(problem) = &entry.problem {
            return Err(RotationError::Unusable {
                model: model.to_owned(),
                problem: problem.clone(),
            });
        }
        if let Some(s) = slot {
            self.slot_exists(s)?;
        }
        if !self.shell.magic_ok() {
            return Err(RotationError::Dark);
        }
        let _busy = self
            .busy
            .try_lock()
            .map_err(|_| RotationError::AlreadyLoading)?;
        match self.overlays.is_some() {
            true => self.load_partial(&entry, slot, force).await,
            false => self.load_full(&entry, force).await,
        }
    }

    async fn load_partial(
        &self,
        entry: &CatalogModel,
        slot: Option<u8>,
        force: bool,
    ) -> Result<LoadReport, RotationError> {
        let start = Instant::now();
        let slot = slot.unwrap_or_else(|| self.pick_slot(&entry.name));
        // Reading, checking and converting the image blocks: off the
        // thread that serves requests (here and below).
        let checked = tokio::task::block_in_place(|| self.check(entry, slot, true))?;
        let previous = self
            .views()
            .into_iter()
            .find(|v| v.index == slot)
            .and_then(|v| v.model);
        let replaced = previous.as_deref().map(str::to_owned);
        log::info!(
            "rotation: loading {} ({}) into slot {slot}{}",
            entry.name,
            checked.file,
            replaced
                .as_deref()
                .map(|r| format!(", replacing {r}"))
                .unwrap_or_default()
        );
        let new_name: Arc<str> = entry.name.clone();
        lock(&self.loading).insert(slot, new_name.clone());
        let estimate =
            Duration::from_secs_f64(checked.bin.len() as f64 / lock(&self.rate).max(1.0));
        let _ = self
            .control
            .send(Control::LoadEstimate(estimate + Duration::from_millis(200)))
            .await;
        self.publish().await;
        let drained = match self.drain_slot(slot, force).await {
            Ok(d) => d,
            Err(e) => {
                lock(&self.loading).remove(&slot);
                self.publish().await;
                return Err(e);
            }
        };
        let disturbed: Vec<Arc<str>> = previous
            .iter()
            .cloned()
            .chain(std::iter::once(new_name.clone()))
            .collect();
        let reconfig_id = self.stats.reconfig_start(Some(disturbed));
        let t = Instant::now();
        let result = self.program(slot, &checked).await;
        let reconfigure = t.elapsed();
        let outcome = match result {
            Ok(()) => {
                *lock(&self.rate) = checked.bin.len() as f64 / reconfigure.as_secs_f64().max(1e-3);
                lock(&self.loaded_at).insert(slot, Instant::now());
                Ok(())
            }
            Err(error) => {
                log::error!(
                    "rotation: loading {} into slot {slot} failed: {error}",
                    entry.name
                );
                let restored = match &previous {
                    Some(prev) => {
                        match self.restore(slot, prev).await {
                            Ok(()) => format!("slot {slot} is back on {prev}"),
                            Err(e) => {
                                log::error!(
                                    "rotation: restoring {prev} into slot {slot} failed too: {e}"
                                );
                                format!("restoring {prev} failed too ({e}); slot {slot} is out of service")
                            }
                        }
                    }
                    None => format!("slot {slot} stays empty"),
                };
                Err(RotationError::RolledBack {
                    error: Box::new(error),
                    restored,
                })
            }
        };
        lock(&self.loading).remove(&slot);
        self.shell.set_quiesce(slot, false);
        self.publish().await;
        self.accepting(slot, true).await;
        self.stats.reconfig_end(reconfig_id);
        outcome?;
        *lock(&self.current) = Some(new_name.clone());
        log::info!(
            "rotation: slot {slot} runs {} (drain {:.0} ms, reconfiguration {:.0} ms)",
            entry.name,
            drained.as_secs_f64() * 1e3,
            reconfigure.as_secs_f64() * 1e3
        );
        Ok(LoadReport {
            model: entry.name.to_string(),
            slot,
            replaced,
            method: "partial",
            staged_sha256: checked.sha256,
            drain_ms: drained.as_millis(),
            reconfigure_ms: reconfigure.as_millis(),
            total_ms: start.elapsed().as_millis(),
            restart: self.device_moved(),
        })
    }

    async fn restore(&self, slot: u8, model: &str) -> Result<(), RotationError> {
        let entry = self.catalog.get(model)?.clone();
        let checked = tokio::task::block_in_place(|| self.check(&entry, slot, true))?;
        lock(&self.loading).insert(slot, Arc::from(model));
        self.program(slot, &checked).await
    }

    /// Steps 2 and 4 to 6 of a partial load.
    async fn program(&self, slot: u8, checked: &Checked) -> Result<(), RotationError> {
        let staged = self.staged_dir();
        let bin_name = format!("slot{slot}.bin");
        let dtbo_name = format!("slot{slot}.dtbo");
        let region = self
            .topology
            .slots
            .iter()
            .find(|s| s.index == slot)
            .map(|s| s.path.clone())
            .ok_or(RotationError::NoSuchSlot {
                slot,
                slots: self.topology.slots.len(),
            })?;
        let firmware = format!("{}/staged/{bin_name}", fabric_hw::root::FIRMWARE_SUBDIR);
        let dtbo = format!("{}/staged/{dtbo_name}", fabric_hw::root::FIRMWARE_SUBDIR);
        tokio::task::block_in_place(|| {
            Self::stage(&staged.join(&bin_name), &checked.bin)?;
            Self::stage(
                &staged.join(&dtbo_name),
                &slot_overlay(&region, &firmware).to_blob(),
            )
        })?;
        let shell = self.shell.clone();
        let overlays = self
            .overlays
            .clone()
            .ok_or(RotationError::Internal("no overlays".into()))?;
        let (quiesce, apply) = (self.config.quiesce_timeout, self.config.apply_timeout);
        let name = format!("{OVERLAY_PREFIX}{slot}");
        let expected = checked.sha256.clone();
        tokio::task::spawn_blocking(move || -> Result<(), RotationError> {
            shell
                .quiesce(slot, quiesce)
                .map_err(|source| RotationError::Quiesce { slot, source })?;
            if overlays.list().unwrap_or_default().contains(&name) {
                overlays
                    .remove(&name)
                    .map_err(|source| RotationError::Reconfigure { slot, source })?;
            }
            overlays
                .apply(&name, &dtbo, apply)
                .map_err(|source| RotationError::Reconfigure { slot, source })?;
            // The shell reports the new module once it is in: state and the
            // hash of what it streamed, checked against what we staged.
            let start = Instant::now();
            loop {
                let s = shell.slot(slot);
                if s.state == SlotState::Ready && s.hash == expected {
                    return Ok(());
                }
                if start.elapsed() > Duration::from_secs(2)
                    || matches!(s.state, SlotState::Error(_))
                {
                    return Err(RotationError::Readback {
                        slot,
                        state: format!("{:?}", s.state),
                        found: s.hash,
                        expected,
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .await
        .map_err(|e| RotationError::Internal(format!("the load task failed: {e}")))?
    }

    async fn load_full(
        &self,
        entry: &CatalogModel,
        force: bool,
    ) -> Result<LoadReport, RotationError> {
        let start = Instant::now();
        let manager = self.manager.clone().ok_or(RotationError::Internal(
            "neither configfs overlays nor an FPGA manager: this kernel cannot reconfigure".into(),
        ))?;
        let checked = tokio::task::block_in_place(|| self.check(entry, 0, false))?;
        let slots = self.shell.info().slots as u8;
        let replaced = self
            .views()
            .first()
            .and_then(|v| v.model.as_deref().map(str::to_owned));
        log::info!(
            "rotation: full reconfiguration with {} ({}); the whole fabric goes dark",
            entry.name,
            checked.file
        );
        for s in 0..slots {
            lock(&self.loading).insert(s, entry.name.clone());
        }
        self.publish().await;
        let mut drained = Duration::ZERO;
        for s in 0..slots {
            match self.drain_slot(s, force).await {
                Ok(d) => drained = drained.max(d),
                Err(e) => {
                    lock(&self.loading).clear();
                    for r in 0..slots {
                        self.accepting(r, true).await;
                    }
                    self.publish().await;
                    return Err(e);
                }
            }
        }
        let reconfig_id = self.stats.reconfig_start(None);
        let name = "full.bin";
        tokio::task::block_in_place(|| Self::stage(&self.staged_dir().join(name), &checked.bin))?;
        let firmware = format!("{}/staged/{name}", fabric_hw::root::FIRMWARE_SUBDIR);
        let t = Instant::now();
        let timeout = self.config.full_timeout;
        let shell = self.shell.clone();
        let expected = checked.sha256.clone();
        let result = tokio::task::spawn_blocking(move || -> Result<(), RotationError> {
            manager
                .load(&firmware, 0, timeout)
                .map_err(|source| RotationError::Reconfigure { slot: 0, source })?;
            // On a kernel the write returns when the load is over; the
            // simulator answers later. Either way the load is over once the
            // shell is back (MAGIC, not dark) and reports the new image.
            let start = Instant::now();
            loop {
                if shell.magic_ok() && !shell.is_dark() {
                    let s = shell.slot(0);
                    if s.state == SlotState::Ready && s.hash == expected {
                        return Ok(());
                    }
                    if start.elapsed() > timeout {
                        return Err(RotationError::Readback {
                            slot: 0,
                            state: format!("{:?}", s.state),
                            found: s.hash,
                            expected,
                        });
                    }
                } else if start.elapsed() > timeout {
                    return Err(RotationError::Dark);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .await
        .map_err(|e| RotationError::Internal(format!("the load task failed: {e}")))?;
        let reconfigure = t.elapsed();
        let mut restart = None;
        if result.is_ok() {
            // The shell came back from power-on reset: rings again, on the
            // device found by name; if it moved, the old handles are
            // invalid and the restart attaches to the new one.
            restart = self.device_moved();
            if restart.is_none() {
                let (reply, rx) = oneshot::channel();
                if self.control.send(Control::Reset { reply }).await.is_ok() {
                    let _ = rx.await;
                }
            }
        }
        lock(&self.loading).clear();
        self.publish().await;
        for s in 0..slots {
            self.accepting(s, true).await;
        }
        self.stats.reconfig_end(reconfig_id);
        result?;
        lock(&self.loaded_at).insert(0, Instant::now());
        *lock(&self.current) = Some(entry.name.clone());
        Ok(LoadReport {
            model: entry.name.to_string(),
            slot: 0,
            replaced,
            method: "full",
            staged_sha256: checked.sha256,
            drain_ms: drained.as_millis(),
            reconfigure_ms: reconfigure.as_millis(),
            total_ms: start.elapsed().as_millis(),
            restart,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_match_with_or_without_prefix_and_grade() {
        assert!(part_matches("xck26-sfvc784-2LV-c", "xck26-sfvc784-2LV-c"));
        assert!(part_matches("7z020clg484", "xc7z020clg484-1"));
        assert!(part_matches("xc7z045ffg900-2", "xc7z045ffg900-2"));
        assert!(!part_matches("7z020clg400", "xc7z020clg484-1"));
        assert!(!part_matches("xczu5ev-sfvc784-2-i", "xck26-sfvc784-2LV-c"));
        assert!(!part_matches("", "xck26"));
    }
}
