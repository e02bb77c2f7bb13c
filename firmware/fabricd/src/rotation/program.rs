//! The program step: staging what the kernel reads, the kernel's own step
//! (an overlay for a partial load, the FPGA manager for a full one), and
//! one read-back of the shell that both share. Each runs on a blocking
//! thread: the kernel's writes block for the whole load.

use std::path::Path;
use std::time::{Duration, Instant};

use fabric_hw::contract::SlotState;
use fabric_hw::devtree::slot_overlay;
use fabric_hw::fpga::{FpgaError, FpgaManager, Overlays};
use fabric_hw::root::FIRMWARE_SUBDIR;
use fabric_hw::shell::Shell;
use fabric_hw::Root;

use super::image::{stage, Checked};
use super::{RotationError, Rotator, OVERLAY_PREFIX};

/// How long a slot may take to report the new module once the kernel says
/// the partial load is done.
const PARTIAL_READBACK: Duration = Duration::from_secs(2);

impl Rotator {
    /// A partial load of `checked` into `slot` (steps 2 and 4 to 6 of the
    /// order in [`super`]): stage, quiesce, the kernel's step, read back.
    pub(super) async fn program_partial(
        &self,
        slot: u8,
        checked: &Checked,
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
        let expected = checked.identity.clone();
        blocking(move || {
            shell
                .quiesce(slot, quiesce)
                .map_err(|source| RotationError::Quiesce { slot, source })?;
            apply_partial(&overlays, slot, &dtbo, apply)
                .map_err(|source| RotationError::Reconfigure { slot, source })?;
            read_back(&shell, slot, &expected, PARTIAL_READBACK)
        })
        .await
    }

    /// A full load of `checked`: stage, the kernel's step, read back slot 0
    /// once the shell is back from its power-on reset.
    pub(super) async fn program_full(
        &self,
        path: FullPath,
        checked: &Checked,
    ) -> Result<(), RotationError> {
        let name = "full.bin";
        tokio::task::block_in_place(|| stage(&self.staged_dir().join(name), &checked.bin))?;
        let firmware = format!("{FIRMWARE_SUBDIR}/staged/{name}");
        let timeout = self.config.full_timeout;
        let shell = self.shell.clone();
        let expected = checked.identity.clone();
        let root = self.root.clone();
        let staged_dtbo = self.staged_dir().join("shell-full.dtbo");
        blocking(move || {
            load_full(&path, &root, &firmware, &staged_dtbo, timeout)
                .map_err(|source| RotationError::Reconfigure { slot: 0, source })?;
            read_back(&shell, 0, &expected, timeout)
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
/// power-on reset (MAGIC right, not dark), the slot ready, its hash the
/// staged image's. On a kernel the load is over when its write returns;
/// the simulator answers later; reading back works on both.
fn read_back(
    shell: &Shell,
    slot: u8,
    expected: &str,
    timeout: Duration,
) -> Result<(), RotationError> {
    let start = Instant::now();
    loop {
        if shell.magic_ok() && !shell.is_dark() {
            let s = shell.slot(slot);
            if s.state == SlotState::Ready && s.hash == expected {
                return Ok(());
            }
            if start.elapsed() > timeout || matches!(s.state, SlotState::Error(_)) {
                return Err(RotationError::Readback {
                    slot,
                    state: format!("{:?}", s.state),
                    found: s.hash,
                    expected: expected.to_owned(),
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
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RotationError::Internal(format!("the load task failed: {e}")))?
}
