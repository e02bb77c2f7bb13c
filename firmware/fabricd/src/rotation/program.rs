//! The program step: staging what the kernel reads, the kernel's own step
//! (an overlay for a partial load, the FPGA manager for a full one), the
//! read-back of the engine the shell then reports, and the table's commit
//! that puts the model in. Each runs on a blocking thread: the kernel's
//! writes block for the whole load, a commit for the table's read.

use std::path::Path;
use std::time::{Duration, Instant};

use fabric_hw::contract::{EngineId, SlotState};
use fabric_hw::devtree::slot_overlay;
use fabric_hw::fpga::{FpgaError, FpgaManager, Overlays};
use fabric_hw::root::FIRMWARE_SUBDIR;
use fabric_hw::shell::Shell;
use fabric_hw::tables::Tables;
use fabric_hw::Root;

use super::image::{stage, Checked, CheckedTable};
use super::{RotationConfig, RotationError, Rotator, OVERLAY_PREFIX};

/// How long a slot may take to report the new module once the kernel says
/// the partial load is done.
const PARTIAL_READBACK: Duration = Duration::from_secs(2);

impl Rotator {
    /// A partial load of `checked` (an image of `engine`) into `slot`
    /// (steps 2 and 4 to 6 of the order in [`super`]): stage, quiesce, the
    /// kernel's step, read back the engine. The slot stays quiesced, for
    /// the table's commit.
    pub(super) async fn program_partial(
        &self,
        slot: u8,
        checked: &Checked,
        engine: EngineId,
    ) -> Result<(), RotationError> {
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
        let firmware = format!("{FIRMWARE_SUBDIR}/staged/{bin_name}");
        let dtbo = format!("{FIRMWARE_SUBDIR}/staged/{dtbo_name}");
        tokio::task::block_in_place(|| {
            stage(&staged.join(&bin_name), &checked.bin)?;
            stage(
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
        blocking(move || {
            shell
                .quiesce(slot, quiesce)
                .map_err(|source| RotationError::Quiesce { slot, source })?;
            apply_partial(&overlays, slot, &dtbo, apply)
                .map_err(|source| RotationError::Reconfigure { slot, source })?;
            read_back(&shell, slot, engine, PARTIAL_READBACK)
        })
        .await
    }

    /// Commits `table` into `slot`, whose engine runs it ([`commit_table`]).
    /// Returns how long the commit took.
    pub(super) async fn program_table(
        &self,
        slot: u8,
        table: CheckedTable,
        engine: EngineId,
    ) -> Result<Duration, RotationError> {
        let shell = self.shell.clone();
        let tables = self.tables.clone();
        let config = self.config.clone();
        blocking_value(move || commit_table(&shell, &tables, slot, &table, engine, &config)).await
    }

    /// A full load of `checked` (`engine` in every slot): stage, the
    /// kernel's step, read back slot 0's engine once the shell is back from
    /// its power-on reset.
    pub(super) async fn program_full(
        &self,
        path: FullPath,
        checked: &Checked,
        engine: EngineId,
    ) -> Result<(), RotationError> {
        let name = "full.bin";
        tokio::task::block_in_place(|| stage(&self.staged_dir().join(name), &checked.bin))?;
        let firmware = format!("{FIRMWARE_SUBDIR}/staged/{name}");
        let timeout = self.config.full_timeout;
        let shell = self.shell.clone();
        let root = self.root.clone();
        let staged_dtbo = self.staged_dir().join("shell-full.dtbo");
        blocking(move || {
            load_full(&path, &root, &firmware, &staged_dtbo, timeout)
                .map_err(|source| RotationError::Reconfigure { slot: 0, source })?;
            read_back(&shell, 0, engine, timeout)
        })
        .await
    }
}

/// The kernel's step of a partial load: the slot's previous overlay out,
/// the new one in (configfs; `apply` reads `status` back).
fn apply_partial(
    overlays: &Overlays,
    slot: u8,
    dtbo: &str,
    timeout: Duration,
) -> Result<(), FpgaError> {
    let name = format!("{OVERLAY_PREFIX}{slot}");
    if overlays.list().unwrap_or_default().contains(&name) {
        overlays.remove(&name)?;
    }
    overlays.apply(&name, dtbo, timeout)
}

/// How this kernel loads a full image.
#[derive(Debug)]
pub(super) enum FullPath {
    /// The FPGA manager's `firmware` attribute, `flags` 0 (linux-xlnx).
    Manager(FpgaManager),
    /// The shell overlay applied again on the base region with the new
    /// image, the slots' overlays removed first (mainline).
    Region(Overlays),
}

/// The kernel's step of a full load.
fn load_full(
    path: &FullPath,
    root: &Root,
    firmware: &str,
    staged_dtbo: &Path,
    timeout: Duration,
) -> Result<(), FpgaError> {
    match path {
        FullPath::Manager(manager) => manager.load(firmware, 0, timeout),
        FullPath::Region(overlays) => {
            let mut slots: Vec<String> = overlays
                .list()?
                .into_iter()
                .filter(|n| n.starts_with(OVERLAY_PREFIX))
                .collect();
            // The newest first: the OF core removes overlays only from the top.
            slots.reverse();
            overlays.reload_shell(root, &slots, firmware, staged_dtbo, timeout)
        }
    }
}

/// Waits until the shell reports the new module in `slot`: back from any
/// power-on reset (MAGIC right), the slot holding `engine` with no model
/// yet. On a kernel the load is over when its write returns; the simulator
/// answers later; reading back works on both.
fn read_back(
    shell: &Shell,
    slot: u8,
    engine: EngineId,
    timeout: Duration,
) -> Result<(), RotationError> {
    let start = Instant::now();
    loop {
        if shell.magic_ok() {
            let s = shell.slot(slot);
            if s.state == SlotState::NoModel && s.engine == Some(engine) {
                return Ok(());
            }
            if start.elapsed() > timeout || matches!(s.state, SlotState::Error(_)) {
                return Err(RotationError::Readback {
                    slot,
                    state: format!("{:?}", s.state),
                    found: format!(
                        "engine {}",
                        s.engine.map_or("none".into(), |e| e.to_string())
                    ),
                    expected: format!("no model yet, engine {engine}"),
                });
            }
        } else if start.elapsed() > timeout {
            return Err(RotationError::Dark);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

async fn blocking(
    f: impl FnOnce() -> Result<(), RotationError> + Send + 'static,
) -> Result<(), RotationError> {
    blocking_value(f).await
}

async fn blocking_value<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RotationError> + Send + 'static,
) -> Result<T, RotationError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RotationError::Internal(format!("the load task failed: {e}")))?
}

/// Commits `table` into `slot`, whose engine runs it (contract section 7,
/// "Committing a table"): quiesce (a no-op after a partial load, which left
/// it so), write and commit, then the slot's report checked against the
/// catalog: its engine, the CRC its engine computed, the identity the table
/// declares. The slot stays quiesced: the caller lets it serve again.
/// Returns how long the commit took.
pub(super) fn commit_table(
    shell: &Shell,
    tables: &Tables,
    slot: u8,
    table: &CheckedTable,
    engine: EngineId,
    config: &RotationConfig,
) -> Result<Duration, RotationError> {
    shell
        .quiesce(slot, config.quiesce_timeout)
        .map_err(|source| RotationError::Quiesce { slot, source })?;
    let kv = table.kv_a_lane * shell.info().lanes as u64;
    let got = tables.commit(shell, slot, &table.bytes, kv, config.commit_timeout)?;
    if got.engine != Some(engine) || got.crc != table.crc || got.identity != table.identity {
        return Err(RotationError::Readback {
            slot,
            state: "ready".into(),
            found: format!(
                "engine {}, table CRC {:#010x}, identity {}",
                got.engine.map_or("none".into(), |e| e.to_string()),
                got.crc,
                got.identity
            ),
            expected: format!(
                "engine {engine}, table CRC {:#010x}, identity {}",
                table.crc, table.identity
            ),
        });
    }
    Ok(got.took)
}
