//! Model rotation: loading a model into a PR slot while the board keeps
//! serving.
//!
//! A model is a table its engine reads from DDR (contract 2.0). Where the
//! slot already runs the model's engine, loading the model is a **switch**:
//! drain, quiesce, commit the table, check what the slot reports; no
//! reconfiguration, and the other slots serve throughout. Otherwise the
//! engine's partial image goes in first (below), then the table.
//!
//! # A partial load, in order
//! 1. Checks, before anything touches the fabric: the model is named in the
//!    catalog (never a path) and usable, its image's SHA-256 matches the
//!    manifest, the image passes the catalog's gate against this board
//!    (`catalog::gate`: the IDCODE in its configuration stream, the
//!    manifest's part and the `.bit` header's name this board's part; its
//!    `UserID` is the shell's interface id; the manifest, the header and
//!    the stream agree that it is partial), it is built for this slot, and
//!    the manifest's shell major version is the shell's. Any failure
//!    refuses the load; nothing was staged or flashed.
//! 2. Stage: the byte-swapped `.bin` and the slot's overlay `.dtbo` under
//!    `/lib/firmware/fabricd/staged/`, written to a temporary name, synced,
//!    and renamed.
//! 3. Drain: the scheduler shows the slot loading the new model, stops
//!    starting work there, and tells the load when the slot's last request
//!    has left; past the drain timeout a busy slot is refused unless
//!    forced. Requests for the model being replaced go to another slot
//!    that holds it, or get a typed answer; requests for the new one may
//!    wait for it.
//! 4. Quiesce: SLOT_CTRL.QUIESCE, then SLOT_SHUTDOWN polled until 0x0F.
//! 5. Remove the slot's previous overlay, apply the new one through
//!    configfs, and read its `status` back.
//! 6. Read the slot back: SLOT_STATE no model, SLOT_ENGINE the model's
//!    engine.
//! 7. Commit the table (`fabric_hw::tables`): written into the slot's
//!    region, cleaned from the cache, committed; the slot reads it in.
//!    SLOT_STATE ready, SLOT_TABLE_CRC and SLOT_IDENTITY the catalog's.
//!    Clear QUIESCE; the slot takes work again.
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
//! Where the kernel has no configfs overlays, or when asked (`fabricctl
//! load --full`), a load programs the whole fabric with the model's full
//! image: through the FPGA manager's `firmware` attribute where the kernel
//! has it (linux-xlnx), else by applying the shell overlay again with the
//! new image on the base region (mainline), which adds the shell's devices
//! afresh, so the daemon restarts to attach to them. The whole fabric is
//! dark for the
//! duration, every slot is drained first, and the rings are initialised
//! again afterwards.
//!
//! # Layout
//! - [`policy`]: which slot a load goes into, and the schedule.
//! - `image`: checking an image and staging it.
//! - `program`: the partial and full program steps, each with its kernel
//!   step behind one small function, and the read-back they share.
//!
//! The slots' state is the scheduler's: a load tells it what changes (a
//! load begins, drain, the fabric goes dark, the load ends) through
//! [`sched::Control`](crate::sched::Control), and reads the slots from
//! what it publishes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fabric_hw::contract::SlotState;
use fabric_hw::devtree::Topology;
use fabric_hw::fpga::{FpgaManager, Overlays};
use fabric_hw::shell::Shell;
use fabric_hw::tables::Tables;
use fabric_hw::Root;

use crate::catalog::{self, Catalog, CatalogModel, ImageKind};
use crate::sched::{Control, SlotView};
use crate::stats::StatsHandle;

mod image;
mod plan;
pub mod policy;
mod program;

pub use crate::catalog::gate::part_matches;

mod error;
pub use error::{
    LoadReport, Program, RestartHandle, RotationConfig, RotationError, OVERLAY_PREFIX,
};

/// Puts `model` into `slot`, which runs its engine, with no daemon around
/// (`fabricd generate` on a board just booted): its table checked against
/// the catalog, committed, the slot serving again. Blocks for the commit.
pub fn commit_model(
    shell: &Shell,
    tables: &Tables,
    catalog: &Catalog,
    model: &CatalogModel,
    slot: u8,
    config: &RotationConfig,
) -> Result<Duration, RotationError> {
    let table = image::check_table(catalog, model)?;
    let r = program::commit_table(shell, tables, slot, &table, model.engine, config);
    shell.set_quiesce(slot, false);
    r
}

/// Loads models into slots.
pub struct Rotator {
    root: Root,
    catalog: Arc<Catalog>,
    /// For what a load does to the shell itself: quiesce a slot, read it
    /// back. The slots' state is the scheduler's.
    shell: Arc<Shell>,
    /// The slots' table regions, and their commit.
    tables: Arc<Tables>,
    /// What checking each table found, for switches back to its model.
    checked: image::CheckedTables,
    topology: Topology,
    sched: Control,
    stats: Arc<StatsHandle>,
    config: RotationConfig,
    overlays: Option<Overlays>,
    manager: Option<FpgaManager>,
    /// One load (or drain) at a time.
    busy: tokio::sync::Mutex<()>,
    /// Bytes per second of recent partial loads, for estimates.
    rate: Mutex<f64>,
    restart: RestartHandle,
    /// Which model each slot was last given.
    plan: plan::Plan,
}

impl std::fmt::Debug for Rotator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rotator({})", self.root.base().display())
    }
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
        tables: Arc<Tables>,
        topology: Topology,
        sched: Control,
        stats: Arc<StatsHandle>,
        config: RotationConfig,
        restart: RestartHandle,
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
                        log::error!("rotation: {}", fabric_hw::Chain(&e));
                    }
                }
            }
        } else {
            log::info!(
                "rotation: no configfs overlays under {}; loads use full reconfiguration",
                root.overlays().display()
            );
        }
        let plan = plan::Plan::open(config.plan.clone());
        Rotator {
            root,
            catalog,
            shell,
            tables,
            checked: image::CheckedTables::default(),
            topology,
            sched,
            stats,
            config,
            overlays,
            manager,
            busy: tokio::sync::Mutex::new(()),
            rate: Mutex::new(400_000.0),
            restart,
            plan,
        }
    }

    /// The model `slot` was last given, if the catalog can still load it:
    /// what a slot that lost its table (a power cycle, a full
    /// reconfiguration) should hold again.
    pub fn planned(&self, slot: u8) -> Option<String> {
        self.plan
            .get(slot)
            .filter(|m| self.catalog.get(m).is_ok_and(|e| e.problem.is_none()))
    }

    /// Records that `slot` now holds `model`; a plan that cannot be written
    /// costs the next boot its memory of the slot, not this load.
    fn remember(&self, slot: u8, model: &str) {
        if let Err(e) = self.plan.set(slot, model) {
            log::error!(
                "rotation: recording that slot {slot} holds {model}: {}",
                fabric_hw::Chain(&e)
            );
        }
    }

    /// The slots as the scheduler last published them.
    fn views(&self) -> Vec<SlotView> {
        self.sched.published().view().slots.clone()
    }

    /// The model requests for `default` go to.
    pub fn current(&self) -> Option<Arc<str>> {
        self.sched.published().view().default_model()
    }

    /// After a reconfiguration: the shell's UIO device, found again by
    /// name. If it is not the one the daemon holds, every handle to the old
    /// one is invalid: the daemon must not touch it again, and restarts.
    /// Returns why, if so.
    async fn device_moved(&self) -> Option<String> {
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
                Err(e) => format!(
                    "the shell's UIO device is gone after the reconfiguration ({})",
                    fabric_hw::Chain(&e)
                ),
            };
        let why = format!("{why}; every handle to the old one is invalid, so fabricd restarts to attach again (nothing is reflashed)");
        log::error!("rotation: {why}");
        self.sched.detach().await;
        self.restart.request();
        Some(why)
    }

    /// Loads the next model of the schedule, and points `default` at it.
    /// A model already ready in a slot is not flashed again: routing flips.
    pub async fn rotate(&self) -> Result<LoadReport, RotationError> {
        let current = self.current();
        let next = policy::next_in_schedule(&self.config.schedule, current.as_ref())?;
        if let Some(v) = self
            .views()
            .into_iter()
            .find(|v| v.state == SlotState::Ready && v.model.as_deref() == Some(next.as_str()))
        {
            let replaced = current.map(|m| m.to_string());
            self.sched
                .set_default(Arc::from(next.as_str()), Some(v.index))
                .await;
            log::info!(
                "rotation: default is now {next} (already in slot {})",
                v.index
            );
            return Ok(LoadReport {
                model: next,
                slot: v.index,
                replaced,
                method: "flip",
                staged_sha256: String::new(),
                drain_ms: 0,
                reconfigure_ms: 0,
                table_ms: 0,
                total_ms: 0,
                restart: None,
            });
        }
        self.load(&next, None, false, Program::AsNeeded).await
    }

    /// Drains a slot and leaves it out of service until a load or `resume`.
    pub async fn drain(&self, slot: u8) -> Result<Duration, RotationError> {
        self.slot_exists(slot)?;
        let _busy = self
            .busy
            .try_lock()
            .map_err(|_| RotationError::AlreadyLoading)?;
        self.drain_slots(&[slot], false).await
    }

    /// Puts a drained slot back in service.
    pub async fn resume(&self, slot: u8) -> Result<(), RotationError> {
        self.slot_exists(slot)?;
        self.sched.resume(slot).await;
        Ok(())
    }

    fn slot_exists(&self, slot: u8) -> Result<(), RotationError> {
        let slots = self.shell.info().slots;
        if usize::from(slot) >= slots {
            return Err(RotationError::NoSuchSlot { slot, slots });
        }
        Ok(())
    }

    /// Stops starting work in `slots` and waits until the scheduler says
    /// the last request there has left, at most the drain timeout; then a
    /// busy slot is refused (and takes work again), or with `force` loaded
    /// over. Returns how long it took.
    async fn drain_slots(&self, slots: &[u8], force: bool) -> Result<Duration, RotationError> {
        let start = Instant::now();
        let mut waits = Vec::new();
        for &s in slots {
            if let Some(rx) = self.sched.drain(s).await {
                waits.push((s, rx));
            }
        }
        let deadline = tokio::time::Instant::from_std(start + self.config.drain_timeout);
        for (slot, rx) in waits {
            if tokio::time::timeout_at(deadline, rx).await.is_ok() {
                continue;
            }
            if force {
                log::warn!("rotation: slot {slot}: forcing the load over its running request(s)");
                continue;
            }
            for &s in slots {
                self.sched.resume(s).await;
            }
            return Err(RotationError::Busy {
                slot,
                waited_ms: start.elapsed().as_millis(),
            });
        }
        Ok(start.elapsed())
    }

    /// Makes `slot` hold `model` (the configuration's `slot_models`):
    /// nothing if it does already, else a load into that slot. `None` when
    /// nothing was loaded.
    pub async fn hold(&self, slot: u8, model: &str) -> Result<Option<LoadReport>, RotationError> {
        self.slot_exists(slot)?;
        let holds = self.views().iter().any(|v| {
            v.index == slot && v.state == SlotState::Ready && v.model.as_deref() == Some(model)
        });
        if holds {
            return Ok(None);
        }
        // Filling a slot leaves routing as it is: `default` stays the
        // first slot's model, not whichever slot was filled last.
        self.load_routed(model, Some(slot), false, Program::AsNeeded, false)
            .await
            .map(Some)
    }

    /// Loads `model` into `slot` (or the slot make-before-break picks), or
    /// into the whole fabric ([`Program::Fabric`], or where a slot must be
    /// programmed and there are no overlays). `default` becomes the model.
    pub async fn load(
        &self,
        model: &str,
        slot: Option<u8>,
        force: bool,
        program: Program,
    ) -> Result<LoadReport, RotationError> {
        self.load_routed(model, slot, force, program, true).await
    }

    async fn load_routed(
        &self,
        model: &str,
        slot: Option<u8>,
        force: bool,
        program: Program,
        route: bool,
    ) -> Result<LoadReport, RotationError> {
        if !catalog::valid_model_name(model) {
            return Err(RotationError::BadName(model.to_owned()));
        }
        let entry = self.catalog.get(model)?.clone();
        if let Some(s) = slot {
            self.slot_exists(s)?;
        }
        if let Some(problem) = &entry.problem {
            return Err(RotationError::Unusable {
                model: model.to_owned(),
                problem: problem.clone(),
            });
        }
        if !self.shell.magic_ok() {
            return Err(RotationError::Dark);
        }
        let _busy = self
            .busy
            .try_lock()
            .map_err(|_| RotationError::AlreadyLoading)?;
        if program == Program::Fabric {
            return self.load_full(&entry, force).await;
        }
        let slot = slot.unwrap_or_else(|| {
            policy::pick_slot(&self.views(), &entry.name, self.current().as_ref())
        });
        let reflash = program == Program::Slot || !self.runs_engine(slot, &entry);
        if reflash && self.overlays.is_none() {
            // No overlays: a slot's engine goes in only with the whole
            // fabric's image.
            return self.load_full(&entry, force).await;
        }
        self.load_partial(&entry, slot, force, reflash, route).await
    }

    fn check(
        &self,
        model: &CatalogModel,
        slot: u8,
        kind: ImageKind,
    ) -> Result<image::Checked, RotationError> {
        // Reading, checking and converting the image blocks: off the
        // thread that serves requests.
        tokio::task::block_in_place(|| {
            image::check(
                &self.catalog,
                &self.topology,
                self.shell.info(),
                model,
                slot,
                kind,
            )
        })
    }

    fn staged_dir(&self) -> PathBuf {
        self.root.our_firmware_dir().join("staged")
    }

    fn estimate(&self, bytes: usize) -> Duration {
        let rate = *self.rate.lock().unwrap_or_else(PoisonError::into_inner);
        Duration::from_secs_f64(bytes as f64 / rate.max(1.0)) + Duration::from_millis(200)
    }

    /// Whether `slot` runs `entry`'s engine: a switch puts the model in
    /// with a table commit alone.
    fn runs_engine(&self, slot: u8, entry: &CatalogModel) -> bool {
        let here = self.shell.slot(slot);
        here.engine == Some(entry.engine)
            && matches!(
                here.state,
                SlotState::Ready
                    | SlotState::NoModel
                    | SlotState::Error(fabric_hw::contract::slot_error::BAD_TABLE)
                    | SlotState::Error(fabric_hw::contract::slot_error::TABLE_READ)
            )
    }

    /// Puts `entry` into the drained `slot`: its engine's partial image
    /// first unless the slot runs it, then its table. Returns the method,
    /// what was staged or committed (SHA-256), and how long the
    /// reconfiguration and the commit took.
    async fn put(
        &self,
        slot: u8,
        entry: &CatalogModel,
        table: image::CheckedTable,
        image: Option<&image::Checked>,
    ) -> Result<(&'static str, Duration, Duration), RotationError> {
        let t = Instant::now();
        let method = match image {
            Some(checked) => {
                self.program_partial(slot, checked, entry.engine).await?;
                *self.rate.lock().unwrap_or_else(PoisonError::into_inner) =
                    checked.bin.len() as f64 / t.elapsed().as_secs_f64().max(1e-3);
                "partial"
            }
            None => "switch",
        };
        let reconfigure = t.elapsed();
        let commit = self.program_table(slot, table, entry.engine).await?;
        Ok((method, reconfigure, commit))
    }

    /// A load into one slot: its engine's partial image first if
    /// `reflash`, then the table; `route` makes the model `default`.
    async fn load_partial(
        &self,
        entry: &CatalogModel,
        slot: u8,
        force: bool,
        reflash: bool,
        route: bool,
    ) -> Result<LoadReport, RotationError> {
        let start = Instant::now();
        let table = tokio::task::block_in_place(|| self.checked.check(&self.catalog, entry))?;
        let staged = table.sha256.clone();
        let checked = match reflash {
            true => Some(self.check(entry, slot, ImageKind::Partial)?),
            false => None,
        };
        let previous = self
            .views()
            .into_iter()
            .find(|v| v.index == slot)
            .and_then(|v| v.model);
        let replaced = previous.as_deref().map(str::to_owned);
        let table_file = match table.kept {
            true => format!("{}, its file as checked before", entry.table.file),
            false => entry.table.file.to_string(),
        };
        log::info!(
            "rotation: loading {} into slot {slot} ({}){}",
            entry.name,
            match &checked {
                Some(c) => format!("{}, then {table_file}", c.file),
                None => format!("a switch: its engine is there; {table_file}"),
            },
            replaced
                .as_deref()
                .map(|r| format!(", replacing {r}"))
                .unwrap_or_default()
        );
        let new_name: Arc<str> = entry.name.clone();
        let estimate = checked
            .as_ref()
            .map_or(Duration::from_millis(200), |c| self.estimate(c.bin.len()));
        self.sched
            .begin_load(vec![slot], new_name.clone(), estimate)
            .await;
        let drained = match self.drain_slots(&[slot], force).await {
            Ok(d) => d,
            Err(e) => {
                self.sched.end_load(vec![slot], false).await;
                return Err(e);
            }
        };
        let disturbed: Vec<Arc<str>> = previous
            .iter()
            .cloned()
            .chain(std::iter::once(new_name.clone()))
            .collect();
        let reconfig_id = self.stats.reconfig_start(Some(disturbed));
        let result = self.put(slot, entry, table, checked.as_ref()).await;
        let outcome = match result {
            Ok(done) => Ok(done),
            Err(error) => {
                log::error!(
                    "rotation: loading {} into slot {slot} failed: {}",
                    entry.name,
                    fabric_hw::Chain(&error)
                );
                let restored = match &previous {
                    Some(prev) => match self.restore(slot, prev).await {
                        Ok(()) => format!("slot {slot} is back on {prev}"),
                        Err(e) => {
                            let e = fabric_hw::Chain(&e);
                            log::error!(
                                "rotation: restoring {prev} into slot {slot} failed too: {e}"
                            );
                            format!(
                                "restoring {prev} failed too ({e}); slot {slot} is out of service"
                            )
                        }
                    },
                    None => format!("slot {slot} holds no model"),
                };
                Err(RotationError::RolledBack {
                    error: Box::new(error),
                    restored,
                })
            }
        };
        self.shell.set_quiesce(slot, false);
        let restart = self.device_moved().await;
        self.sched.end_load(vec![slot], outcome.is_ok()).await;
        self.stats.reconfig_end(reconfig_id);
        let (method, reconfigure, commit) = outcome?;
        self.remember(slot, &entry.name);
        if route {
            self.sched.set_default(new_name, None).await;
        }
        log::info!(
            "rotation: slot {slot} runs {} ({method}: drain {:.0} ms, reconfiguration {:.0} ms, table {:.0} ms)",
            entry.name,
            drained.as_secs_f64() * 1e3,
            reconfigure.as_secs_f64() * 1e3,
            commit.as_secs_f64() * 1e3
        );
        Ok(LoadReport {
            model: entry.name.to_string(),
            slot,
            replaced,
            method,
            staged_sha256: checked.map_or(staged, |c| c.sha256),
            drain_ms: drained.as_millis(),
            reconfigure_ms: reconfigure.as_millis(),
            table_ms: commit.as_millis(),
            total_ms: start.elapsed().as_millis(),
            restart,
        })
    }

    async fn restore(&self, slot: u8, model: &str) -> Result<(), RotationError> {
        let entry = self.catalog.get(model)?.clone();
        let table = tokio::task::block_in_place(|| self.checked.check(&self.catalog, &entry))?;
        let checked = match self.runs_engine(slot, &entry) {
            true => None,
            false => Some(self.check(&entry, slot, ImageKind::Partial)?),
        };
        let estimate = checked
            .as_ref()
            .map_or(Duration::from_millis(200), |c| self.estimate(c.bin.len()));
        self.sched
            .begin_load(vec![slot], Arc::from(model), estimate)
            .await;
        self.put(slot, &entry, table, checked.as_ref())
            .await
            .map(|_| ())
    }

    async fn load_full(
        &self,
        entry: &CatalogModel,
        force: bool,
    ) -> Result<LoadReport, RotationError> {
        let start = Instant::now();
        let path = match (&self.manager, &self.overlays) {
            (Some(m), _) if m.loads_firmware() => program::FullPath::Manager(m.clone()),
            (_, Some(ov)) => program::FullPath::Region(ov.clone()),
            _ => {
                return Err(RotationError::Internal(
                    "this kernel cannot load a full image: its FPGA manager has no firmware attribute (a vendor patch) and there are no configfs overlays".into(),
                ))
            }
        };
        let through_region = matches!(path, program::FullPath::Region(_));
        let checked = self.check(entry, 0, ImageKind::Full)?;
        let table = tokio::task::block_in_place(|| self.checked.check(&self.catalog, entry))?;
        let slots: Vec<u8> = (0..self.shell.info().slots as u8).collect();
        let views = self.views();
        let replaced = views
            .first()
            .and_then(|v| v.model.as_deref().map(str::to_owned));
        // What each slot held, to hold again: the plan's, where it knows.
        let held: Vec<Option<String>> = views
            .iter()
            .map(|v| {
                self.planned(v.index)
                    .or_else(|| v.model.as_deref().map(str::to_owned))
            })
            .collect();
        log::info!(
            "rotation: full reconfiguration with {} ({}); the whole fabric goes dark",
            entry.name,
            checked.file
        );
        self.sched
            .begin_load(slots.clone(), entry.name.clone(), self.config.full_timeout)
            .await;
        let drained = match self.drain_slots(&slots, force).await {
            Ok(d) => d,
            Err(e) => {
                self.sched.end_load(slots, false).await;
                return Err(e);
            }
        };
        let reconfig_id = self.stats.reconfig_start(None);
        self.sched.dark().await;
        let t = Instant::now();
        let result = self.program_full(path, &checked, entry.engine).await;
        let reconfigure = t.elapsed();
        let mut restart = None;
        let mut table_time = Duration::ZERO;
        if result.is_ok() && through_region {
            // The region code removed the shell's devices and added them
            // again: every handle to the old ones is invalid, whatever
            // number the UIO device came back under.
            let why = "the shell overlay was applied again, so the region code added the shell's devices afresh; every handle to the old ones is invalid, so fabricd restarts to attach again (nothing is reflashed)".to_owned();
            log::info!("rotation: {why}");
            self.sched.detach().await;
            self.restart.request();
            restart = Some(why);
        } else if result.is_ok() {
            // The shell came back from power-on reset: rings again, on the
            // device found by name; if it moved, the old handles are
            // invalid and the restart attaches to the new one.
            restart = self.device_moved().await;
            if restart.is_none() {
                if let Err(e) = self.sched.reset().await {
                    log::error!("rotation: initialising the rings after the load: {e}");
                }
            }
        }
        // The engine is in every slot, no model yet: the model's table into
        // slot 0, and into each other slot the model it held before (a
        // restarting daemon fills the slots from the plan as it starts).
        if result.is_ok() {
            self.remember(0, &entry.name);
            for (slot, model) in held.iter().enumerate().skip(1) {
                if let Some(model) = model {
                    self.remember(slot as u8, model);
                }
            }
        }
        let result = match result {
            Ok(()) if restart.is_none() => match self.program_table(0, table, entry.engine).await {
                Ok(took) => {
                    table_time = took;
                    self.shell.set_quiesce(0, false);
                    self.refill(&held).await;
                    Ok(())
                }
                Err(e) => Err(e),
            },
            other => other,
        };
        self.sched.end_load(slots, result.is_ok()).await;
        self.stats.reconfig_end(reconfig_id);
        result?;
        self.sched.set_default(entry.name.clone(), Some(0)).await;
        Ok(LoadReport {
            model: entry.name.to_string(),
            slot: 0,
            replaced,
            method: "full",
            staged_sha256: checked.sha256,
            drain_ms: drained.as_millis(),
            reconfigure_ms: reconfigure.as_millis(),
            table_ms: table_time.as_millis(),
            total_ms: start.elapsed().as_millis(),
            restart,
        })
    }

    /// After a full load: commits into every slot but 0 the model it held
    /// before, where the catalog has it. A slot that cannot take its model
    /// is logged and left with none; slot 0's load stands.
    async fn refill(&self, held: &[Option<String>]) {
        for (slot, model) in held.iter().enumerate().skip(1) {
            let (Ok(slot), Some(model)) = (u8::try_from(slot), model) else {
                continue;
            };
            let entry = match self.catalog.get(model) {
                Ok(e) if e.problem.is_none() && self.runs_engine(slot, e) => e.clone(),
                _ => continue,
            };
            let put = async {
                let table =
                    tokio::task::block_in_place(|| self.checked.check(&self.catalog, &entry))?;
                self.program_table(slot, table, entry.engine).await
            };
            match put.await {
                Ok(took) => log::info!(
                    "rotation: slot {slot} holds {model} again ({:.0} ms)",
                    took.as_secs_f64() * 1e3
                ),
                Err(e) => log::error!(
                    "rotation: slot {slot} could not take {model} again: {}",
                    fabric_hw::Chain(&e)
                ),
            }
            self.shell.set_quiesce(slot, false);
        }
    }
}
