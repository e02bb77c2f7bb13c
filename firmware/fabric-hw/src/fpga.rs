//! Reconfiguration through the kernel: the FPGA manager and configfs
//! device-tree overlays.
//!
//! A partial load is an overlay on the slot's fpga-region. A full load is
//! either the vendor kernel's `firmware` attribute of the manager
//! ([`FpgaManager::load`]), or, on a kernel without it (mainline), the shell
//! overlay applied again with another `firmware-name` on the base region
//! ([`Overlays::reload_shell`]): the region code programs the whole PL and
//! adds the shell's devices afresh.
//!
//! Both are synchronous on a real kernel (the error comes back from
//! `write()`), but the outcome is always read back as well: writing an
//! overlay's `path` can return success although the apply failed, and only
//! `status` tells. The simulator answers asynchronously, so read-backs poll
//! with a timeout; on a board the first read already has the answer. These
//! calls block; async callers run them on a blocking thread.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::devtree::DtNode;
use crate::root::Root;
use crate::sysfs::{self, SysfsError};

/// The configfs overlay that holds the static shell (applied at boot by
/// `S55fabricd-shell`).
pub const SHELL_OVERLAY: &str = "fabricd-shell";

/// `flags` bit of the FPGA manager: a partial bitstream.
pub const FLAG_PARTIAL: u32 = 1;
/// How often read-backs poll.
const POLL: Duration = Duration::from_millis(2);

/// Why a reconfiguration step failed.
#[derive(Debug, thiserror::Error)]
pub enum FpgaError {
    #[error("{path}: no FPGA manager (is CONFIG_FPGA_MGR set?)")]
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
    #[error("{path}: no configfs overlay directory (is configfs mounted there and CONFIG_OF_OVERLAY, with the configfs patch, set?)")]
    NoOverlays { path: PathBuf, source: io::Error },
    #[error("creating overlay {path}")]
    OverlayCreate { path: PathBuf, source: io::Error },
    #[error("removing overlay {path}")]
    OverlayRemove { path: PathBuf, source: io::Error },
    #[error("overlay {name}: applying {dtbo:?} failed: status reads {status:?}; the FPGA manager's state reads {manager:?} (the kernel log says why)")]
    OverlayNotApplied {
        name: String,
        dtbo: String,
        status: String,
        /// The manager's `state`, or why it could not be read.
        manager: String,
    },
    #[error("no shell overlay {name:?} under {dir}: the shell was not loaded through configfs (S55fabricd-shell), so it cannot be loaded again that way")]
    NoShellOverlay { name: &'static str, dir: PathBuf },
    #[error("the shell overlay {dtbo}: {problem}")]
    ShellOverlay { dtbo: PathBuf, problem: String },
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

    /// Whether userspace can start a load here: linux-xlnx's `firmware`
    /// attribute (mainline has none).
    pub fn loads_firmware(&self) -> bool {
        self.dir.join("firmware").exists()
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
    /// The FPGA manager the regions load through, for its `state` when an
    /// overlay fails.
    manager: PathBuf,
}

impl Overlays {
    /// Opens the overlay directory under the root's configfs mount point.
    pub fn open(root: &Root) -> Result<Overlays, FpgaError> {
        let dir = root.overlays();
        fs::metadata(&dir).map_err(|source| FpgaError::NoOverlays {
            path: dir.clone(),
            source,
        })?;
        Ok(Overlays {
            dir,
            manager: root.fpga_manager(0),
        })
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
                log::warn!(
                    "overlay {name}: cleaning up after a failed apply: {}",
                    crate::Chain(&e)
                );
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
                        manager: sysfs::read_string(&self.manager.join("state"))
                            .unwrap_or_else(|e| crate::Chain(&e).to_string()),
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

    /// A full reconfiguration through the base FPGA region: the shell
    /// overlay that is applied now (its `path`, under `root`'s firmware
    /// directory) is written again to `staged` (absolute) with
    /// `firmware-name` set to `firmware`, and applied in its place once the
    /// overlays in `first` (the slots', applied on top of it) are removed.
    /// The kernel programs the whole PL through the region and adds the
    /// shell's devices afresh: every handle to the old ones is invalid.
    /// If the new overlay does not apply, the old one is applied again.
    pub fn reload_shell(
        &self,
        root: &Root,
        first: &[String],
        firmware: &str,
        staged: &Path,
        timeout: Duration,
    ) -> Result<(), FpgaError> {
        let dir = self.dir.join(SHELL_OVERLAY);
        let path_attr = dir.join("path");
        if !path_attr.exists() {
            return Err(FpgaError::NoShellOverlay {
                name: SHELL_OVERLAY,
                dir: self.dir.clone(),
            });
        }
        let applied = sysfs::read_string(&path_attr)?;
        let template = root.firmware_dir().join(&applied);
        let bad = |problem: String| FpgaError::ShellOverlay {
            dtbo: template.clone(),
            problem,
        };
        let blob = fs::read(&template).map_err(|e| bad(e.to_string()))?;
        let rewritten = with_firmware(&blob, &template, firmware)?;
        // After one full load the overlay in effect is the staged one: stage
        // the next beside it, so the old file stays for a rollback.
        let alternate;
        let staged = if template == staged {
            alternate = staged.with_extension("next.dtbo");
            alternate.as_path()
        } else {
            staged
        };
        let staged_name = staged
            .strip_prefix(root.firmware_dir())
            .map_err(|_| {
                bad(format!(
                    "{} is not under the firmware directory",
                    staged.display()
                ))
            })?
            .to_string_lossy()
            .into_owned();
        let tmp = staged.with_extension("tmp");
        fs::write(&tmp, rewritten)
            .and_then(|()| fs::rename(&tmp, staged))
            .map_err(|e| bad(format!("staging {}: {e}", staged.display())))?;
        for name in first {
            self.remove(name)?;
        }
        self.remove(SHELL_OVERLAY)?;
        log::info!(
            "overlay {SHELL_OVERLAY}: applying {staged_name} (the whole PL, with {firmware})"
        );
        match self.apply(SHELL_OVERLAY, &staged_name, timeout) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Err(again) = self.apply(SHELL_OVERLAY, &applied, timeout) {
                    log::error!("the shell overlay {applied}, applied again after a failed full load: {again}");
                }
                Err(e)
            }
        }
    }

    /// Removes overlay `name` (`rmdir`). The kernel then disables the
    /// region's bridges: an emptied PR region stays decoupled.
    pub fn remove(&self, name: &str) -> Result<(), FpgaError> {
        let dir = self.dir.join(name);
        remove_overlay_dir(&dir).map_err(|source| FpgaError::OverlayRemove { path: dir, source })
    }
}

/// The shell overlay `blob` (read from `path`) with the `firmware-name` of
/// the fragment that programs the base region set to `firmware`; its
/// fragments, fix-ups and everything else unchanged.
pub fn with_firmware(blob: &[u8], path: &Path, firmware: &str) -> Result<Vec<u8>, FpgaError> {
    let bad = |problem: String| FpgaError::ShellOverlay {
        dtbo: path.to_owned(),
        problem,
    };
    let mut tree = DtNode::from_blob(blob, path).map_err(|e| bad(crate::Chain(&e).to_string()))?;
    tree.find_mut_by(&|n| n.name == "__overlay__" && n.props.contains_key("firmware-name"))
        .ok_or_else(|| bad("no fragment names a firmware-name: it programs nothing".into()))?
        .set_string("firmware-name", firmware);
    Ok(tree.to_blob())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_overlay_is_rewritten_with_another_firmware_only() {
        let mut ov = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        let frag = ov.add_child("fragment@0");
        frag.set_cells("target", &[0xffff_ffff]);
        let body = frag.add_child("__overlay__");
        body.set_string("firmware-name", "fabricd/shell/shell.bin");
        body.add_child("fabric-shell@43c00000")
            .set_strings("compatible", &["fabricd,shell-1.0", "generic-uio"]);
        ov.add_child("__fixups__")
            .set_string("fpga_full", "/fragment@0:target:0");
        let blob = ov.to_blob();
        let out = with_firmware(&blob, Path::new("shell.dtbo"), "fabricd/staged/full.bin")
            .expect("rewrite");
        let mut back = DtNode::from_blob(&out, Path::new("out")).expect("parse");
        let body = back.find("/fragment@0/__overlay__").expect("body");
        assert_eq!(
            body.string("firmware-name").expect("string").as_deref(),
            Some("fabricd/staged/full.bin")
        );
        // Everything else as it was.
        back.find_mut_by(&|n| n.name == "__overlay__")
            .expect("body")
            .set_string("firmware-name", "fabricd/shell/shell.bin");
        assert_eq!(back, ov);

        let mut none = ov.clone();
        none.find_mut_by(&|n| n.name == "__overlay__")
            .expect("body")
            .props
            .remove("firmware-name");
        let err = with_firmware(&none.to_blob(), Path::new("x.dtbo"), "f").expect_err("nothing");
        assert!(err.to_string().contains("programs nothing"), "{err}");
    }
}
