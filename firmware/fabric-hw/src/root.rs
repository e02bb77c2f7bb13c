//! One configurable root for every kernel path.
//!
//! On a board the root is `/`. Tests and the simulator use a directory laid
//! out like one. The configfs mount point is separate because some systems
//! mount configfs at `/configfs` instead of `/sys/kernel/config`.

use std::path::{Path, PathBuf};

/// The directory under `/lib/firmware` that holds our bitstreams, overlays and
/// staged images. Xilinx's `fpgautil` deletes what it loads from
/// `/lib/firmware` itself, so we keep ours apart.
pub const FIRMWARE_SUBDIR: &str = "fabricd";

/// Where the kernel interfaces of a (real or simulated) board live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
    configfs: PathBuf,
}

impl Root {
    /// A root at `base`, with configfs at `base/sys/kernel/config`.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        let base = base.into();
        let configfs = join(&base, "/sys/kernel/config");
        Root { base, configfs }
    }

    /// Use `mount_point` (an absolute path on the board, such as `/configfs`)
    /// as the configfs mount point.
    pub fn with_configfs(mut self, mount_point: &str) -> Self {
        self.configfs = join(&self.base, mount_point);
        self
    }

    /// The root directory itself.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// `abs` (an absolute path on the board) under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        join(&self.base, abs)
    }

    /// `/sys/class/uio`.
    pub fn uio_class(&self) -> PathBuf {
        self.path("/sys/class/uio")
    }

    /// `/dev/<name>`.
    pub fn dev(&self, name: &str) -> PathBuf {
        self.path("/dev").join(name)
    }

    /// `/sys/class/u-dma-buf`.
    pub fn udmabuf_class(&self) -> PathBuf {
        self.path("/sys/class/u-dma-buf")
    }

    /// The live device tree, overlays included: `/proc/device-tree`.
    pub fn device_tree(&self) -> PathBuf {
        self.path("/proc/device-tree")
    }

    /// `/lib/firmware`, the directory the kernel loads firmware from.
    pub fn firmware_dir(&self) -> PathBuf {
        self.path("/lib/firmware")
    }

    /// `/lib/firmware/fabricd`.
    pub fn our_firmware_dir(&self) -> PathBuf {
        self.firmware_dir().join(FIRMWARE_SUBDIR)
    }

    /// `/sys/class/fpga_manager/fpga<n>`.
    pub fn fpga_manager(&self, n: u32) -> PathBuf {
        self.path("/sys/class/fpga_manager")
            .join(format!("fpga{n}"))
    }

    /// The configfs mount point.
    pub fn configfs(&self) -> &Path {
        &self.configfs
    }

    /// `<configfs>/device-tree/overlays`.
    pub fn overlays(&self) -> PathBuf {
        self.configfs.join("device-tree/overlays")
    }
}

fn join(base: &Path, abs: &str) -> PathBuf {
    base.join(abs.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_hang_off_the_root() {
        let root = Root::new("/tmp/board");
        assert_eq!(root.uio_class(), Path::new("/tmp/board/sys/class/uio"));
        assert_eq!(root.dev("uio3"), Path::new("/tmp/board/dev/uio3"));
        assert_eq!(
            root.overlays(),
            Path::new("/tmp/board/sys/kernel/config/device-tree/overlays")
        );
        let root = root.with_configfs("/configfs");
        assert_eq!(
            root.overlays(),
            Path::new("/tmp/board/configfs/device-tree/overlays")
        );
        assert_eq!(Root::new("/").dev("uio0"), Path::new("/dev/uio0"));
    }
}
