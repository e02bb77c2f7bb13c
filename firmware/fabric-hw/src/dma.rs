//! Shared DDR: the buffer the rings and arenas live in.
//!
//! The buffer is physically contiguous; its physical address goes into
//! descriptors, a mapping is how the CPU reads and writes it. It comes from
//! one of two providers, and each sets its own cache rule:
//!
//! - **u-dma-buf** (`ikwzm,u-dma-buf`, an out-of-tree module the board image
//!   builds): [`DmaBuf::open`]. Opened without `O_SYNC`, so the mapping is
//!   cached, which is much faster for the arenas; the CPU copies freely and
//!   does the maintenance below.
//! - **a map of the shell's UIO device** over memory the kernel does not
//!   own (a `reserved-memory` carve-out, or anything else the shell node's
//!   `reg` names as `"buffer"`): [`DmaBuf::from_uio_map`]. Mainline needs no
//!   module for it. UIO maps physical memory uncached
//!   (`uio_mmap_physical()` sets `pgprot_noncached`: Device memory on
//!   arm64), so no cache holds the data and no maintenance is needed; but
//!   there, as in a register window, only aligned 32-bit accesses are safe,
//!   so every copy goes a word at a time through a [`Mmio`] window.
//!
//! A cached u-dma-buf mapping, unless the buffer is DMA-coherent, needs
//! explicit maintenance:
//!
//! - after the CPU writes and before the device reads: [`DmaBuf::sync_for_device`]
//!   (clean the cache lines to DDR);
//! - after the device writes and before the CPU reads: [`DmaBuf::sync_for_cpu`]
//!   (invalidate the cache lines).
//!
//! Each sync is one write of u-dma-buf's packed command (offset in bits
//! 63..32, size in bits 31..4, direction in bits 3..2, bit 0 set) to the
//! `sync_for_device` or `sync_for_cpu` attribute, so no other writer can
//! change the range between setting it and triggering it. The driver clears
//! the attribute to 0 once the maintenance is done; on a real kernel that has
//! already happened when `write()` returns, and the simulator, which answers
//! asynchronously, clears it when it has copied the range. Reading the
//! attribute back until it reads 0 works on both.
//!
//! Every range is widened to whole 64-byte cache lines. The regions of the
//! contract's layout are each written by one side only, so widening never
//! invalidates a line holding the other side's data.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::devtree::{DmaNode, DmaProvider};
use crate::mmio::{Mmio, RegisterWindow};
use crate::root::Root;
use crate::sysfs::{self, SysfsError};
use crate::uio::{UioDevice, UioError};

/// Cache-line size that every sync range is widened to.
pub const CACHE_LINE: u64 = 64;
/// How long a sync may take before the buffer is declared stuck.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a DMA buffer could not be opened, accessed or synchronised.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    #[error("opening {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error("mapping {size} bytes of {path}")]
    Map {
        path: PathBuf,
        size: u64,
        source: io::Error,
    },
    #[error("{path}: a buffer of {size} bytes does not fit this machine's address space")]
    TooLarge { path: PathBuf, size: u64 },
    #[error(transparent)]
    Uio(#[from] UioError),
    #[error("{what}: the device tree says {dt_size} bytes, the kernel mapped {mapped_size}")]
    SizeMismatch {
        what: String,
        dt_size: u64,
        mapped_size: u64,
    },
    #[error("{what}: bytes {offset}..{end} are outside the {size}-byte buffer {path}")]
    OutOfRange {
        what: &'static str,
        path: PathBuf,
        offset: u64,
        end: u64,
        size: u64,
    },
    #[error("writing sync command {command:#x} to {path}")]
    SyncWrite {
        path: PathBuf,
        command: u64,
        source: io::Error,
    },
    #[error("{path} still reads {value:#x} {waited_ms} ms after the sync was requested")]
    SyncTimeout {
        path: PathBuf,
        value: u64,
        waited_ms: u128,
    },
}

/// The direction of a cache sync, as u-dma-buf numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncDirection {
    /// The CPU wrote, the device will read.
    ToDevice = 1,
    /// The device wrote, the CPU will read.
    FromDevice = 2,
}

/// An open, mapped DMA buffer. Unmapped on drop.
#[derive(Debug)]
pub struct DmaBuf {
    name: String,
    /// What the mapping was made of, for errors.
    dev_path: PathBuf,
    phys_addr: u64,
    size: u64,
    memory: Memory,
}

/// How the CPU reaches the buffer.
#[derive(Debug)]
enum Memory {
    /// u-dma-buf, mapped cached: plain copies, then syncs (no-ops when the
    /// buffer is DMA-coherent).
    Cached {
        map: MmapRaw,
        coherent: bool,
        sync_for_cpu: SyncAttr,
        sync_for_device: SyncAttr,
    },
    /// Mapped uncached by the kernel: aligned 32-bit volatile accesses
    /// only, and nothing to sync.
    Uncached(Mmio),
}

#[derive(Debug)]
struct SyncAttr {
    path: PathBuf,
    file: File,
}

impl SyncAttr {
    fn open(path: PathBuf) -> Result<SyncAttr, DmaError> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| DmaError::Open {
                path: path.clone(),
                source,
            })?;
        Ok(SyncAttr { path, file })
    }

    /// Writes `command` and waits until the attribute reads 0 again.
    fn run(&self, command: u64) -> Result<(), DmaError> {
        use std::fmt::Write as _;
        // One command at a time in this process, from every mapping (the
        // rings' and the tables' each have one): u-dma-buf takes a device's
        // sync commands one at a time under its mutex, and the simulator's
        // attribute is a file in which a second writer's command would
        // overwrite the first's, its answer then taken for both. Nothing
        // the lock guards can be left half done, so a poisoned lock is
        // still good.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // On the stack: a drain syncs on every interrupt, and allocates
        // nothing. `0x`, 16 digits and a newline always fit.
        let mut text = heapless::String::<20>::new();
        let fits = writeln!(text, "{command:#x}");
        debug_assert!(fits.is_ok(), "a sync command is at most 19 bytes");
        self.file
            .write_all_at(text.as_bytes(), 0)
            .map_err(|source| DmaError::SyncWrite {
                path: self.path.clone(),
                command,
                source,
            })?;
        // The clock only once the first read says the sync is not over:
        // on a kernel it always is, and on a Cortex-A9 a clock read is a
        // system call (no vDSO clock).
        let mut start = None;
        let mut spins = 0u32;
        loop {
            let value = self.read()?;
            if value == 0 {
                return Ok(());
            }
            let waited = start.get_or_insert_with(Instant::now).elapsed();
            if waited > SYNC_TIMEOUT {
                return Err(DmaError::SyncTimeout {
                    path: self.path.clone(),
                    value,
                    waited_ms: waited.as_millis(),
                });
            }
            // On a kernel the sync is over when `write()` returns; only the
            // simulator, which answers from a thread of its own, gets here.
            // Yield first (that thread wants this core), then back off.
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    fn read(&self) -> Result<u64, DmaError> {
        let mut buf = [0u8; 32];
        let len = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|source| SysfsError::Read {
                path: self.path.clone(),
                source,
            })?;
        let text = String::from_utf8_lossy(&buf[..len]);
        // An attribute reads as one line, the whole value.
        let line = text.split('\n').next().unwrap_or_default().trim();
        sysfs::parse_u64(line).ok_or_else(|| {
            DmaError::Sysfs(SysfsError::Parse {
                path: self.path.clone(),
                expected: "a sync command value",
                found: line.to_owned(),
            })
        })
    }
}

/// Opens the buffer the device tree describes: a u-dma-buf device, or a map
/// of `shell`, the shell's UIO device. Its size must be the tree's.
pub fn open_buffer(root: &Root, node: &DmaNode, shell: &UioDevice) -> Result<DmaBuf, DmaError> {
    let buf = match &node.provider {
        DmaProvider::UDmaBuf { device_name } => DmaBuf::open(root, device_name)?,
        DmaProvider::ShellMap { index } => DmaBuf::from_uio_map(shell, *index)?,
    };
    if buf.size() != node.size {
        return Err(DmaError::SizeMismatch {
            what: format!("the DMA buffer ({}, node {})", node.describe(), node.path),
            dt_size: node.size,
            mapped_size: buf.size(),
        });
    }
    Ok(buf)
}

/// Words copied at a time by [`DmaBuf::write_u32s`] and
/// [`DmaBuf::read_u32s`].
const WORDS_CHUNK: usize = 64;

impl DmaBuf {
    /// Opens and maps the buffer whose device name is `name`
    /// (`/dev/<name>`, `/sys/class/u-dma-buf/<name>`).
    pub fn open(root: &Root, name: &str) -> Result<DmaBuf, DmaError> {
        let sys = root.udmabuf_class().join(name);
        let phys_addr = sysfs::read_u64(&sys.join("phys_addr"))?;
        let size = sysfs::read_u64(&sys.join("size"))?;
        // Kernels before 4.20 lack `dma_coherent`; treat them as non-coherent,
        // which is always safe.
        let coherent = match sysfs::read_u64(&sys.join("dma_coherent")) {
            Ok(v) => v != 0,
            Err(SysfsError::Read { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        let dev_path = root.dev(name);
        let len = usize::try_from(size).map_err(|_| DmaError::TooLarge {
            path: dev_path.clone(),
            size,
        })?;
        // Opened without O_SYNC: the mapping is cached and we do the
        // maintenance, which is much faster for the arenas than uncached
        // access.
        let file = File::options()
            .read(true)
            .write(true)
            .open(&dev_path)
            .map_err(|source| DmaError::Open {
                path: dev_path.clone(),
                source,
            })?;
        let map = MmapOptions::new()
            .len(len)
            .map_raw(&file)
            .map_err(|source| DmaError::Map {
                path: dev_path.clone(),
                size,
                source,
            })?;
        Ok(DmaBuf {
            name: name.to_owned(),
            dev_path,
            phys_addr,
            size,
            memory: Memory::Cached {
                map,
                coherent,
                sync_for_cpu: SyncAttr::open(sys.join("sync_for_cpu"))?,
                sync_for_device: SyncAttr::open(sys.join("sync_for_device"))?,
            },
        })
    }

    /// Maps map `index` of UIO device `device` (the shell's map named
    /// `"buffer"`) as the buffer: its physical address and size are the
    /// map's, from sysfs.
    pub fn from_uio_map(device: &UioDevice, index: usize) -> Result<DmaBuf, DmaError> {
        let info = device.maps.get(index).ok_or(UioError::NoSuchMap {
            device: device.sys_path.clone(),
            index,
            count: device.maps.len(),
        })?;
        // UIO rounds a map's size up to whole pages from the block's start;
        // the block itself is what follows `offset`.
        let size = info.size.saturating_sub(info.offset);
        let window = device.map(index, size)?;
        let name = info
            .name
            .clone()
            .unwrap_or_else(|| format!("{}/map{index}", device.name));
        Ok(DmaBuf::uncached(
            name,
            device.dev_path.clone(),
            info.addr + info.offset,
            window,
        ))
    }

    /// A buffer over a window that is already mapped uncached at physical
    /// address `phys_addr` (the simulator's view of DDR through `/dev/mem`).
    pub fn uncached(name: String, dev_path: PathBuf, phys_addr: u64, window: Mmio) -> DmaBuf {
        DmaBuf {
            name,
            dev_path,
            phys_addr,
            size: window.len() as u64,
            memory: Memory::Uncached(window),
        }
    }

    /// The buffer's name (`udmabuf-fabric`, or the UIO map's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bus address of byte 0, for descriptors.
    pub fn phys_addr(&self) -> u64 {
        self.phys_addr
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether no cache maintenance is needed: hardware keeps the caches
    /// coherent, or the mapping is uncached. Syncs are no-ops then.
    pub fn is_coherent(&self) -> bool {
        match &self.memory {
            Memory::Cached { coherent, .. } => *coherent,
            Memory::Uncached(_) => true,
        }
    }

    fn range(&self, what: &'static str, offset: u64, len: usize) -> Result<usize, DmaError> {
        let end = offset.saturating_add(len as u64);
        if end > self.size {
            return Err(DmaError::OutOfRange {
                what,
                path: self.dev_path.clone(),
                offset,
                end,
                size: self.size,
            });
        }
        // In range of a mapping of `size` bytes, so it fits usize.
        Ok(offset as usize)
    }

    /// Copies `data` into the buffer at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let at = self.range("write", offset, data.len())?;
        match &self.memory {
            Memory::Cached { map, .. } => {
                // SAFETY: `range` checked that `at..at + data.len()` lies
                // inside the mapping, which lives as long as `self`. This is
                // normal memory, so a plain copy is fine; the contract gives
                // the host sole ownership of the regions it writes, so no
                // one else writes them meanwhile.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        map.as_mut_ptr().add(at),
                        data.len(),
                    );
                }
            }
            Memory::Uncached(w) => words::write(w, at, data),
        }
        Ok(())
    }

    /// Copies bytes out of the buffer at `offset` into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), DmaError> {
        let at = self.range("read", offset, out.len())?;
        match &self.memory {
            Memory::Cached { map, .. } => {
                // SAFETY: as in `write`: in bounds, alive, and `out` cannot
                // overlap the mapping because it is a unique borrow of other
                // memory.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        map.as_ptr().add(at),
                        out.as_mut_ptr(),
                        out.len(),
                    );
                }
            }
            Memory::Uncached(w) => words::read(w, at, out),
        }
        Ok(())
    }

    /// Writes little-endian `u32` words at `offset`.
    pub fn write_u32s(&self, offset: u64, words: &[u32]) -> Result<(), DmaError> {
        if let Memory::Uncached(w) = &self.memory {
            let at = self.range("write", offset, words.len() * 4)?;
            words::write_u32s(w, at, words);
            return Ok(());
        }
        // Through a stack buffer: no allocation per prompt.
        let mut buf = [0u8; WORDS_CHUNK * 4];
        for (i, chunk) in words.chunks(WORDS_CHUNK).enumerate() {
            for (b, w) in buf.chunks_exact_mut(4).zip(chunk) {
                b.copy_from_slice(&w.to_le_bytes());
            }
            let at = offset + (i * WORDS_CHUNK * 4) as u64;
            self.write(at, &buf[..chunk.len() * 4])?;
        }
        Ok(())
    }

    /// Reads little-endian `u32` words at `offset`.
    pub fn read_u32s(&self, offset: u64, out: &mut [u32]) -> Result<(), DmaError> {
        if let Memory::Uncached(w) = &self.memory {
            let at = self.range("read", offset, out.len() * 4)?;
            words::read_u32s(w, at, out);
            return Ok(());
        }
        let mut buf = [0u8; WORDS_CHUNK * 4];
        for (i, chunk) in out.chunks_mut(WORDS_CHUNK).enumerate() {
            let bytes = &mut buf[..chunk.len() * 4];
            self.read(offset + (i * WORDS_CHUNK * 4) as u64, bytes)?;
            for (w, b) in chunk.iter_mut().zip(bytes.chunks_exact(4)) {
                *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        Ok(())
    }

    /// Cleans the CPU cache for `offset..offset + len` so the device reads
    /// what the CPU wrote.
    pub fn sync_for_device(&self, offset: u64, len: u64) -> Result<(), DmaError> {
        match &self.memory {
            Memory::Cached {
                coherent: false,
                sync_for_device,
                ..
            } if len > 0 => {
                sync_for_device.run(self.command(offset, len, SyncDirection::ToDevice)?)
            }
            _ => Ok(()),
        }
    }

    /// Invalidates the CPU cache for `offset..offset + len` so the CPU reads
    /// what the device wrote.
    pub fn sync_for_cpu(&self, offset: u64, len: u64) -> Result<(), DmaError> {
        match &self.memory {
            Memory::Cached {
                coherent: false,
                sync_for_cpu,
                ..
            } if len > 0 => {
                sync_for_cpu.run(self.command(offset, len, SyncDirection::FromDevice)?)
            }
            _ => Ok(()),
        }
    }

    fn command(&self, offset: u64, len: u64, dir: SyncDirection) -> Result<u64, DmaError> {
        let start = offset & !(CACHE_LINE - 1);
        let end = offset.saturating_add(len).saturating_add(CACHE_LINE - 1) & !(CACHE_LINE - 1);
        let end = end.min(self.size);
        // The packed command holds a 32-bit offset and a 28-bit size field.
        if end > self.size || start > u64::from(u32::MAX) || end - start > 0xFFFF_FFF0 {
            return Err(DmaError::OutOfRange {
                what: "cache sync",
                path: self.dev_path.clone(),
                offset,
                end: offset.saturating_add(len),
                size: self.size,
            });
        }
        Ok(encode_sync_command(start, end - start, dir))
    }
}

/// Copies through an uncached window, where only aligned 32-bit accesses are
/// safe. A byte range that starts or ends inside a word reads that word and
/// writes it back whole; the contract's regions are word aligned and each
/// has one writer, so the merged bytes are the writer's own.
mod words {
    use crate::mmio::RegisterWindow;

    pub fn write(w: &dyn RegisterWindow, at: usize, data: &[u8]) {
        let mut pos = at;
        let mut rest = data;
        while !rest.is_empty() {
            let word = pos & !3;
            let skip = pos - word;
            let take = (4 - skip).min(rest.len());
            let value = if skip == 0 && take == 4 {
                u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]])
            } else {
                let mut bytes = w.read32(word).to_le_bytes();
                bytes[skip..skip + take].copy_from_slice(&rest[..take]);
                u32::from_le_bytes(bytes)
            };
            w.write32(word, value);
            pos += take;
            rest = &rest[take..];
        }
    }

    pub fn read(w: &dyn RegisterWindow, at: usize, out: &mut [u8]) {
        let mut pos = at;
        let mut done = 0;
        while done < out.len() {
            let word = pos & !3;
            let skip = pos - word;
            let take = (4 - skip).min(out.len() - done);
            let bytes = w.read32(word).to_le_bytes();
            out[done..done + take].copy_from_slice(&bytes[skip..skip + take]);
            pos += take;
            done += take;
        }
    }

    pub fn write_u32s(w: &dyn RegisterWindow, at: usize, words: &[u32]) {
        if at.is_multiple_of(4) {
            for (i, v) in words.iter().enumerate() {
                w.write32(at + i * 4, *v);
            }
        } else {
            for (i, v) in words.iter().enumerate() {
                write(w, at + i * 4, &v.to_le_bytes());
            }
        }
    }

    pub fn read_u32s(w: &dyn RegisterWindow, at: usize, out: &mut [u32]) {
        for (i, v) in out.iter_mut().enumerate() {
            *v = if at.is_multiple_of(4) {
                w.read32(at + i * 4)
            } else {
                let mut b = [0u8; 4];
                read(w, at + i * 4, &mut b);
                u32::from_le_bytes(b)
            };
        }
    }
}

/// u-dma-buf's packed sync command.
pub fn encode_sync_command(offset: u64, size: u64, dir: SyncDirection) -> u64 {
    (offset << 32) | (size & 0xFFFF_FFF0) | ((dir as u64) << 2) | 1
}

/// The fields of a packed sync command: `(offset, size, direction)`.
pub fn decode_sync_command(command: u64) -> Option<(u64, u64, SyncDirection)> {
    if command & 1 == 0 {
        return None;
    }
    let dir = match (command >> 2) & 3 {
        1 => SyncDirection::ToDevice,
        2 => SyncDirection::FromDevice,
        _ => return None,
    };
    Some((command >> 32, command & 0xFFFF_FFF0, dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_udmabuf(root: &Root, name: &str, size: u64, coherent: bool) {
        let sys = root.udmabuf_class().join(name);
        fs::create_dir_all(&sys).expect("mkdir");
        fs::write(sys.join("phys_addr"), "0x000000003f000000\n").expect("phys");
        fs::write(sys.join("size"), format!("{size}\n")).expect("size");
        fs::write(
            sys.join("dma_coherent"),
            if coherent { "1\n" } else { "0\n" },
        )
        .expect("coh");
        fs::write(sys.join("sync_for_cpu"), "0\n").expect("cpu");
        fs::write(sys.join("sync_for_device"), "0\n").expect("dev");
        fs::create_dir_all(root.path("/dev")).expect("dev dir");
        fs::write(root.dev(name), vec![0u8; size as usize]).expect("dev file");
    }

    #[test]
    fn reads_sysfs_and_maps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_udmabuf(&root, "udmabuf-fabric", 1 << 16, true);
        let buf = DmaBuf::open(&root, "udmabuf-fabric").expect("open");
        assert_eq!(buf.phys_addr(), 0x3f00_0000);
        assert_eq!(buf.size(), 1 << 16);
        buf.write_u32s(128, &[1, 2, 0xdead_beef]).expect("write");
        let mut out = [0u32; 3];
        buf.read_u32s(128, &mut out).expect("read");
        assert_eq!(out, [1, 2, 0xdead_beef]);
        // Longer than the copy buffer, in little-endian bytes.
        let words: Vec<u32> = (0..150u32).map(|i| i * 0x0101_0101 + 7).collect();
        buf.write_u32s(1024, &words).expect("write");
        let mut back = vec![0u32; words.len()];
        buf.read_u32s(1024, &mut back).expect("read");
        assert_eq!(back, words);
        let mut bytes = [0u8; 8];
        buf.read(1024 + 149 * 4, &mut bytes).expect("read bytes");
        assert_eq!(bytes[..4], (149u32 * 0x0101_0101 + 7).to_le_bytes());
        // Coherent: syncs are no-ops, so they succeed without a peer.
        buf.sync_for_device(0, 64).expect("coherent sync");
        assert!(matches!(
            buf.write((1 << 16) - 2, &[0; 4]),
            Err(DmaError::OutOfRange { .. })
        ));
    }

    #[test]
    fn a_sync_nobody_answers_times_out_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_udmabuf(&root, "udmabuf-fabric", 4096, false);
        let buf = DmaBuf::open(&root, "udmabuf-fabric").expect("open");
        let err = buf.sync_for_cpu(100, 10).expect_err("no simulator");
        let text = err.to_string();
        assert!(text.contains("sync_for_cpu"), "{text}");
        // The command asked for whole cache lines: 64..128.
        let written = fs::read_to_string(root.udmabuf_class().join("udmabuf-fabric/sync_for_cpu"))
            .expect("read");
        let cmd = sysfs::parse_u64(&written).expect("number");
        assert_eq!(
            decode_sync_command(cmd),
            Some((64, 64, SyncDirection::FromDevice))
        );
    }

    #[test]
    fn a_sync_value_is_its_attributes_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sync_for_cpu");
        fs::write(&path, "0\n").expect("write");
        let attr = SyncAttr::open(path.clone()).expect("open");
        let read = |text: &str| {
            fs::write(&path, text).expect("write");
            attr.read()
        };
        // Done, a command still pending, done after one (the simulator's
        // answer, its digits zeroed in place).
        assert_eq!(read("0\n").expect("zero"), 0);
        assert_eq!(read("0x1000\n").expect("pending"), 0x1000);
        assert_eq!(read("0x0000\n").expect("zero"), 0);
        // Anything that is not a number is an error naming the file and
        // what it held: a kernel attribute never reads cut or empty.
        for bad in ["", "0x\n", "EINVAL\n", "\n"] {
            let err = read(bad).expect_err("not a number");
            let text = err.to_string();
            assert!(text.contains("sync_for_cpu"), "{bad:?}: {text}");
        }
        let text = read("EINVAL\n").expect_err("EINVAL").to_string();
        assert!(text.contains("EINVAL"), "{text}");
    }

    #[test]
    fn packed_commands_round_trip() {
        let cmd = encode_sync_command(0x1_0000, 0x2000, SyncDirection::ToDevice);
        assert_eq!(cmd, 0x0001_0000_0000_2005);
        assert_eq!(
            decode_sync_command(cmd),
            Some((0x1_0000, 0x2000, SyncDirection::ToDevice))
        );
        assert_eq!(decode_sync_command(0), None);
    }
}
