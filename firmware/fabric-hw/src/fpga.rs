//! Reconfiguration through the kernel: the FPGA manager and configfs
//! device-tree overlays.
//!
//! Both are synchronous on a real kernel (the error comes back from
//! `write()`), but the outcome is always read back as well: writing an
//! overlay's `path` can return success although the apply failed, and only
//! `status` tells. The simulator answers asynchronously, so read-backs poll
//! with a timeout; on a board the first read already has the answer. These
//! calls block; async callers run them on a blocking thread.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::root::Root;
use crate::sysfs::{self, SysfsError};

/// `flags` bit of the FPGA manager: a partial bitstream.
pub const FLAG_PARTIAL: u32 = 1;
/// How often read-backs poll.
const POLL: Duration = Duration::from_millis(2);

/// Why a reconfiguration step failed.
#[derive(Debug, thiserror::Error)]
pub enum FpgaError {
    #[error("{path}: no FPGA manager ({source}); is CONFIG_FPGA_MGR set?")]
    NoManager { path: PathBuf, source: io::Error },
    #[error("{path}: this kernel's FPGA manager has no `firmware` attribute (mainline cannot start a load from userspace; linux-xlnx can)")]
    NoFirmwareAttr { path: PathBuf },
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    #[error("the FPGA manager at {path} reports {state:?} after loading {firmware:?}")]
    LoadFailed {
        path: PathBuf,
        firmware: String,
        state: String,
    },
    #[error("{path}: no configfs overlay directory ({source}); is configfs mounted there and CONFIG_OF_OVERLAY (with the configfs patch) set?")]
    NoOverlays { path: PathBuf, source: io::Error },
    #[error("creating overlay {path}: {source}")]
    OverlayCreate { path: PathBuf, source: io::Error },
    #[error("removing overlay {path}: {source}")]
    OverlayRemove { path: PathBuf, source: io::Error },
    #[error("overlay {name}: applying {dtbo:?} failed: status reads {status:?}")]
    OverlayNotApplied {
        name: String,
        dtbo: String,
        status: String,
    },
    #[error("{what} at {path}: no answer within {waited_ms} ms")]
    Timeout {
        what: &'static str,
        path: PathBuf,
        waited_ms: u128,
    },
}

/// `/sys/class/fpga_manager/fpgaN`.
#[derive(Debug, Clone)]
pub struct FpgaManager {
    dir: PathBuf,
}

impl FpgaManager {
    /// Opens manager `n`.
    pub fn open(root: &Root, n: u32) -> Result<FpgaManager, FpgaError> {
        let dir = root.fpga_manager(n);
        fs::metadata(dir.join("state")).map_err(|source| FpgaError::NoManager {
            path: dir.clone(),
            source,
        })?;
        Ok(FpgaManager { dir })
    }

    /// The manager's `name`.
    pub fn name(&self) -> Result<String, FpgaError> {
        Ok(sysfs::read_string(&self.dir.join("name"))?)
    }

    /// The manager's `state` (`operating`, `write error`, `unknown`, …).
    pub fn state(&self) -> Result<String, FpgaError> {
        Ok(sysfs::read_string(&self.dir.join("state"))?)
    }

    /// Loads `firmware` (a name under `/lib/firmware`) with `flags`, then
    /// waits until the manager reports `operating` again.
    pub fn load(&self, firmware: &str, flags: u32, timeout: Duration) -> Result<(), FpgaError> {
        let attr = self.dir.join("firmware");
        if !attr.exists() {
            return Err(FpgaError::NoFirmwareAttr {
                path: self.dir.clone(),
            });
        }
        sysfs::write(&self.dir.join("flags"), &format!("{flags:x}"))?;
        sysfs::write(&attr, firmware)?;
        let start = Instant::now();
        loop {
            let state = self.state()?;
            match state.as_str() {
                "operating" => return Ok(()),
                s if s.contains("error") || s == "unknown" => {
                    return Err(FpgaError::LoadFailed {
                        path: self.dir.clone(),
                        firmware: firmware.to_owned(),
                        state,
                    })
                }
                _ => {}
            }
            if start.elapsed() > timeout {
                return Err(FpgaError::Timeout {
                    what: "fpga manager load",
                    path: self.dir.clone(),
                    waited_ms: start.elapsed().as_millis(),
                });
            }
            std::thread::sleep(POLL);
        }
    }
}

/// `<configfs>/device-tree/overlays`.
#[derive(Debug, Clone)]
pub struct Overlays {
    dir: PathBuf,
}

impl Overlays {
    /// Opens the overlay directory under the root's configfs mount point.
    pub fn open(root: &Root) -> Result<Overlays, FpgaError> {
        let dir = root.overlays();
        fs::metadata(&dir).map_err(|source| FpgaError::NoOverlays {
            path: dir.clone(),
            source,
        })?;
        Ok(Overlays { dir })
    }

    /// The names of the overlays present.
    pub fn list(&self) -> Result<Vec<String>, FpgaError> {
        let entries = fs::read_dir(&self.dir).map_err(|source| FpgaError::NoOverlays {
            path: self.dir.clone(),
            source,
        })?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// An overlay's `status`.
    pub fn status(&self, name: &str) -> Result<String, FpgaError> {
        Ok(sysfs::read_string(&self.dir.join(name).join("status"))?)
    }

    /// Applies `dtbo` (a name under `/lib/firmware`) as overlay `name` and
    /// reads `status` back. On failure the overlay directory is removed, so
    /// nothing half-applied stays behind.
    pub fn apply(&self, name: &str, dtbo: &str, timeout: Duration) -> Result<(), FpgaError> {
        let dir = self.dir.join(name);
        fs::create_dir(&dir).map_err(|source| FpgaError::OverlayCreate {
            path: dir.clone(),
            source,
        })?;
        let result = self.apply_in(&dir, name, dtbo, timeout);
        if result.is_err() {
            if let Err(e) = self.remove(name) {
                log::warn!("overlay {name}: cleaning up after a failed apply: {e}");
            }
        }
        result
    }

    fn apply_in(
        &self,
        dir: &std::path::Path,
        name: &str,
        dtbo: &str,
        timeout: Duration,
    ) -> Result<(), FpgaError> {
        let start = Instant::now();
        let path_attr = dir.join("path");
        // configfs creates the attributes with the directory; the simulator
        // a moment later.
        while !path_attr.exists() {
            if start.elapsed() > timeout {
                return Err(FpgaError::Timeout {
                    what: "overlay attributes",
                    path: dir.to_owned(),
                    waited_ms: start.elapsed().as_millis(),
                });
            }
            std::thread::sleep(POLL);
        }
        sysfs::write(&path_attr, dtbo)?;
        loop {
            let status = sysfs::read_string(&dir.join("status")).unwrap_or_default();
            match status.as_str() {
                "applied" => return Ok(()),
                "" => {}
                _ => {
                    return Err(FpgaError::OverlayNotApplied {
                        name: name.to_owned(),
                        dtbo: dtbo.to_owned(),
                        status,
                    })
                }
            }
            if start.elapsed() > timeout {
                return Err(FpgaError::Timeout {
                    what: "overlay status",
                    path: dir.to_owned(),
                    waited_ms: start.elapsed().as_millis(),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Removes overlay `name` (`rmdir`). The kernel then disables the
    /// region's bridges: an emptied PR region stays decoupled.
    pub fn remove(&self, name: &str) -> Result<(), FpgaError> {
        let dir = self.dir.join(name);
        remove_overlay_dir(&dir).map_err(|source| FpgaError::OverlayRemove { path: dir, source })
    }
}

/// `rmdir` on configfs removes an overlay with its attributes. The
/// simulator's overlay directories are ordinary ones, whose attribute files
/// must go first; on configfs those unlinks fail harmlessly (EPERM).
fn remove_overlay_dir(dir: &std::path::Path) -> io::Result<()> {
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            if let Ok(entries) = fs::read_dir(dir) {
                for entry in entries.flatten() {
                    let _ = fs::remove_file(entry.path());
                }
            }
            fs::remove_dir(dir)
        }
    }
}
