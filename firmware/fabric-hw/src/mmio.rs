//! Register windows: aligned 32-bit volatile access to device memory.
//!
//! UIO maps a register block uncached (Device memory on arm64). There, only
//! aligned accesses of the register's width are safe: `memcpy` or a slice copy
//! has caused bus errors. So a window offers exactly two operations,
//! [`RegisterWindow::read32`] and [`RegisterWindow::write32`], and the typed
//! layer in [`crate::contract`] is the only caller of either.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// The two operations a register window offers.
///
/// Offsets are byte offsets; they must be 4-aligned and inside the window. The
/// typed registers of [`crate::contract`] guarantee both, and a window checks
/// its size against the contract when the shell is attached, so a violation is
/// a bug in this crate and panics.
pub trait RegisterWindow: Send + Sync {
    /// Reads the 32-bit register at `offset`.
    fn read32(&self, offset: usize) -> u32;
    /// Writes the 32-bit register at `offset`.
    fn write32(&self, offset: usize, value: u32);
    /// The window's length in bytes.
    fn len(&self) -> usize;
    /// Whether the window is empty (it never is once mapped).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a register window could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum MmioError {
    #[error("mapping {len} bytes of {path} at file offset {file_offset:#x}")]
    Map {
        path: PathBuf,
        file_offset: u64,
        len: usize,
        source: std::io::Error,
    },
    #[error("{path}: register block offset {start:#x} is not 4-byte aligned")]
    Misaligned { path: PathBuf, start: usize },
}

/// An owned, shared mapping of a register window. Unmapped on drop.
#[derive(Debug)]
pub struct Mmio {
    map: MmapRaw,
    /// Where the register block starts inside the mapping (UIO's map
    /// `offset`, for blocks that are not page aligned).
    start: usize,
    len: usize,
}

impl Mmio {
    /// Maps `len` bytes of registers that start `start` bytes into the page
    /// at `file_offset` of `file` (UIO map M lives at file offset M × page
    /// size).
    pub fn map(
        file: &File,
        path: &Path,
        file_offset: u64,
        start: usize,
        len: usize,
    ) -> Result<Self, MmioError> {
        if !start.is_multiple_of(4) {
            return Err(MmioError::Misaligned {
                path: path.to_owned(),
                start,
            });
        }
        let map_len = start + len;
        let map = MmapOptions::new()
            .offset(file_offset)
            .len(map_len)
            .map_raw(file)
            .map_err(|source| MmioError::Map {
                path: path.to_owned(),
                file_offset,
                len: map_len,
                source,
            })?;
        Ok(Mmio { map, start, len })
    }

    fn register(&self, offset: usize) -> *mut u32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.len,
            "register offset {offset:#x} outside a {}-byte window",
            self.len
        );
        // The pointer arithmetic stays inside the mapping (checked above);
        // `wrapping_add` keeps it free of `unsafe`.
        self.map
            .as_mut_ptr()
            .wrapping_add(self.start + offset)
            .cast::<u32>()
    }
}

impl RegisterWindow for Mmio {
    fn read32(&self, offset: usize) -> u32 {
        let reg = self.register(offset);
        // SAFETY: `register` checked that `offset` is 4-aligned and inside the
        // window, and `start` is 4-aligned, so `reg` is an aligned u32 inside
        // a mapping that lives as long as `self`. The device (or the
        // simulator) changes the word behind our back, so the read must be
        // volatile; an aligned 32-bit access is single-copy atomic.
        u32::from_le(unsafe { std::ptr::read_volatile(reg) })
    }

    fn write32(&self, offset: usize, value: u32) {
        let reg = self.register(offset);
        // SAFETY: as in `read32`: aligned, in bounds, and alive as long as
        // `self`; volatile because the write is a side effect on the device.
        unsafe { std::ptr::write_volatile(reg, value.to_le()) }
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// A register window in ordinary memory, for unit tests of code that drives
/// registers.
#[derive(Debug)]
pub struct MemWindow {
    words: Vec<AtomicU32>,
}

impl MemWindow {
    /// A zeroed window of `len` bytes.
    pub fn new(len: usize) -> Self {
        MemWindow {
            words: (0..len.div_ceil(4)).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl RegisterWindow for MemWindow {
    fn read32(&self, offset: usize) -> u32 {
        assert!(
            offset.is_multiple_of(4),
            "unaligned register offset {offset:#x}"
        );
        self.words[offset / 4].load(Ordering::SeqCst)
    }

    fn write32(&self, offset: usize, value: u32) {
        assert!(
            offset.is_multiple_of(4),
            "unaligned register offset {offset:#x}"
        );
        self.words[offset / 4].store(value, Ordering::SeqCst)
    }

    fn len(&self) -> usize {
        self.words.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn two_mappings_of_one_file_see_each_other() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("regs");
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        file.write_all(&[0u8; 8192]).expect("fill");
        // Map the second page, with the block 0x10 bytes into it.
        let a = Mmio::map(&file, &path, 4096, 0x10, 0x100).expect("map a");
        let b = Mmio::map(&file, &path, 4096, 0x10, 0x100).expect("map b");
        a.write32(0x8, 0xdead_beef);
        assert_eq!(b.read32(0x8), 0xdead_beef);
        drop(a);
        let raw = std::fs::read(&path).expect("read back");
        assert_eq!(
            &raw[4096 + 0x18..4096 + 0x1c],
            &0xdead_beef_u32.to_le_bytes()
        );
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn access_past_the_window_is_refused() {
        let window = MemWindow::new(16);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("regs");
        std::fs::write(&path, [0u8; 4096]).expect("write");
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let mmio = Mmio::map(&file, &path, 0, 0, window.len()).expect("map");
        mmio.read32(16);
    }
}
