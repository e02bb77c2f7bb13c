//! UIO devices: find by name, map their register windows, take their
//! interrupts.
//!
//! - A device is found by the `name` in `/sys/class/uio/uioN/name`, never by
//!   its number: numbers change when overlays come and go, so after any
//!   reconfiguration a handle must be looked up again.
//! - Map M is mapped at file offset M × page size (the page size comes from
//!   the kernel, not a constant); the registers start at the map's `offset`.
//! - The interrupt: `read()` of exactly 4 bytes returns the total event
//!   count; writing the s32 value 1 re-enables the interrupt, which
//!   `uio_pdrv_genirq` disabled in its handler.
//!
//! On a board `/dev/uioN` is a character device. The simulator cannot make a
//! regular file block until an interrupt, so there `/dev/uioN` is a Unix
//! `SOCK_SEQPACKET` socket that delivers the same 4-byte counts and takes the
//! same 4-byte unmask writes. [`UioIrq::open`] connects instead of opening
//! when it finds a socket; everything after that is the same code.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

use crate::mmio::{Mmio, MmioError};
use crate::root::Root;
use crate::sysfs::{self, SysfsError};

/// Most maps a UIO device has.
pub const MAX_MAPS: usize = 5;

/// How often [`UioDevice::irq_within`] looks again for an interrupt not
/// there yet.
const IRQ_POLL: Duration = Duration::from_millis(20);

/// Why a UIO device could not be found, mapped or waited on.
#[derive(Debug, thiserror::Error)]
pub enum UioError {
    #[error("{path}: no UIO class directory (is CONFIG_UIO set and uio_pdrv_genirq loaded with of_id=generic-uio?)")]
    NoUioClass { path: PathBuf, source: io::Error },
    #[error("no UIO device named {} under {path} (found: {found:?})", quoted(.names))]
    NotFound {
        names: Vec<String>,
        path: PathBuf,
        found: Vec<String>,
    },
    #[error("two UIO devices are named {name:?}: {first} and {second}")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{device}: has no map {index} (it has {count})")]
    NoSuchMap {
        device: PathBuf,
        index: usize,
        count: usize,
    },
    #[error("{device}: map {index} is {size:#x} bytes, the contract needs {need:#x}")]
    MapTooSmall {
        device: PathBuf,
        index: usize,
        size: u64,
        need: u64,
    },
    #[error("{device}: map {index} offset {offset:#x} is not inside a {page_size}-byte page")]
    BadMapOffset {
        device: PathBuf,
        index: usize,
        offset: u64,
        page_size: u64,
    },
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    #[error("opening {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Map(#[from] MmioError),
    #[error("asking the kernel for the page size: {0}")]
    PageSize(String),
    #[error("reading the interrupt count from {path}")]
    IrqRead { path: PathBuf, source: io::Error },
    #[error("{path}: read {len} bytes of interrupt count, expected 4")]
    IrqShortRead { path: PathBuf, len: usize },
    #[error("{path}: the interrupt source closed")]
    IrqClosed { path: PathBuf },
    #[error("unmasking the interrupt through {path}")]
    IrqWrite { path: PathBuf, source: io::Error },
}

/// `"a"`, or `"a" or "b"`.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// One map of a UIO device, from `maps/mapM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UioMapInfo {
    pub index: usize,
    pub name: Option<String>,
    /// Physical address of the block.
    pub addr: u64,
    pub size: u64,
    /// Where the block starts inside its first page.
    pub offset: u64,
}

/// A UIO device as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UioDevice {
    pub number: u32,
    pub name: String,
    pub dev_path: PathBuf,
    pub sys_path: PathBuf,
    pub maps: Vec<UioMapInfo>,
}

/// The system page size, from the kernel.
pub fn page_size() -> Result<u64, UioError> {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(size)) if size > 0 => Ok(size as u64),
        Ok(_) => Err(UioError::PageSize("sysconf returned no value".into())),
        Err(e) => Err(UioError::PageSize(e.to_string())),
    }
}

impl UioDevice {
    /// Every UIO device under the root, in number order.
    pub fn list(root: &Root) -> Result<Vec<UioDevice>, UioError> {
        let class = root.uio_class();
        let entries = fs::read_dir(&class).map_err(|source| UioError::NoUioClass {
            path: class.clone(),
            source,
        })?;
        let mut devices = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| UioError::NoUioClass {
                path: class.clone(),
                source,
            })?;
            let file_name = entry.file_name();
            let Some(number) = file_name
                .to_str()
                .and_then(|n| n.strip_prefix("uio"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            devices.push(Self::load(root, &entry.path(), number)?);
        }
        devices.sort_by_key(|d| d.number);
        Ok(devices)
    }

    /// The one device named `name`.
    pub fn find(root: &Root, name: &str) -> Result<UioDevice, UioError> {
        let mut found = None;
        let mut names = Vec::new();
        for device in Self::list(root)? {
            if device.name == name {
                if let Some(first) = &found {
                    let first: &UioDevice = first;
                    return Err(UioError::Duplicate {
                        name: name.to_owned(),
                        first: first.sys_path.clone(),
                        second: device.sys_path,
                    });
                }
                found = Some(device);
            } else {
                names.push(device.name);
            }
        }
        found.ok_or_else(|| UioError::NotFound {
            names: vec![name.to_owned()],
            path: root.uio_class(),
            found: names,
        })
    }

    /// The one device with the first of `names` that any device has (the
    /// names a kernel may give one device: see
    /// [`crate::devtree::ShellNode::uio_names`]).
    pub fn find_any(root: &Root, names: &[String]) -> Result<UioDevice, UioError> {
        for name in names {
            match Self::find(root, name) {
                Err(UioError::NotFound { .. }) => {}
                found => return found,
            }
        }
        Err(UioError::NotFound {
            names: names.to_vec(),
            path: root.uio_class(),
            found: Self::list(root)?.into_iter().map(|d| d.name).collect(),
        })
    }

    fn load(root: &Root, sys_path: &Path, number: u32) -> Result<UioDevice, UioError> {
        let name = sysfs::read_string(&sys_path.join("name"))?;
        let mut maps = Vec::new();
        for index in 0..MAX_MAPS {
            let dir = sys_path.join("maps").join(format!("map{index}"));
            if !dir.is_dir() {
                break;
            }
            let map_name = match sysfs::read_string(&dir.join("name")) {
                Ok(n) if !n.is_empty() => Some(n),
                _ => None,
            };
            maps.push(UioMapInfo {
                index,
                name: map_name,
                addr: sysfs::read_u64(&dir.join("addr"))?,
                size: sysfs::read_u64(&dir.join("size"))?,
                offset: sysfs::read_u64(&dir.join("offset"))?,
            });
        }
        Ok(UioDevice {
            number,
            name,
            dev_path: root.dev(&format!("uio{number}")),
            sys_path: sys_path.to_owned(),
            maps,
        })
    }

    /// Maps map `index`, refusing one smaller than `need` bytes.
    pub fn map(&self, index: usize, need: u64) -> Result<Mmio, UioError> {
        let info = self.maps.get(index).ok_or(UioError::NoSuchMap {
            device: self.sys_path.clone(),
            index,
            count: self.maps.len(),
        })?;
        if info.size < need {
            return Err(UioError::MapTooSmall {
                device: self.sys_path.clone(),
                index,
                size: info.size,
                need,
            });
        }
        let page = page_size()?;
        if info.offset >= page || info.offset % 4 != 0 {
            return Err(UioError::BadMapOffset {
                device: self.sys_path.clone(),
                index,
                offset: info.offset,
                page_size: page,
            });
        }
        let file = File::options()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_SYNC | nix::libc::O_CLOEXEC)
            .open(&self.dev_path)
            .map_err(|source| UioError::Open {
                path: self.dev_path.clone(),
                source,
            })?;
        // `need` fits in usize: it is at most the contract's window, and the
        // size check above bounds the mapping by what sysfs reported.
        let len = usize::try_from(need).map_err(|_| UioError::MapTooSmall {
            device: self.sys_path.clone(),
            index,
            size: info.size,
            need,
        })?;
        Ok(Mmio::map(
            &file,
            &self.dev_path,
            index as u64 * page,
            info.offset as usize,
            len,
        )?)
    }

    /// Opens the device's interrupt.
    pub fn irq(&self) -> Result<UioIrq, UioError> {
        UioIrq::open(&self.dev_path)
    }

    /// Opens the device's interrupt, waiting up to `within` for it to
    /// appear (logged once): a device found in sysfs a moment before its
    /// node is made (devtmpfs, or udev renaming it) is not yet a reason to
    /// stop. Any other failure, or still nothing by then, is returned.
    pub fn irq_within(&self, within: Duration) -> Result<UioIrq, UioError> {
        let deadline = Instant::now() + within;
        let mut waiting = false;
        loop {
            match self.irq() {
                Err(UioError::Open { path, source })
                    if matches!(
                        source.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                    ) && Instant::now() < deadline =>
                {
                    if !waiting {
                        log::info!(
                            "uio: waiting up to {within:?} for the interrupt at {}: {source}",
                            path.display()
                        );
                        waiting = true;
                    }
                    std::thread::sleep(IRQ_POLL);
                }
                Ok(irq) => {
                    if waiting {
                        log::info!("uio: the interrupt at {} is there", irq.path.display());
                    }
                    return Ok(irq);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// An interrupt event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqEvent {
    /// The kernel's total event count.
    pub count: u32,
    /// Events that fired between this read and the previous one beyond the
    /// one reported (coalesced while masked).
    pub coalesced: u32,
}

/// The interrupt of a UIO device, waited on with tokio.
#[derive(Debug)]
pub struct UioIrq {
    fd: AsyncFd<File>,
    path: PathBuf,
    last: Option<u32>,
}

impl UioIrq {
    /// Opens the interrupt of the UIO device node `dev_path`. Needs a tokio
    /// runtime with I/O enabled.
    ///
    /// On a board `dev_path` is a character device and is opened as it is.
    /// On the simulated fabric it is a regular file (the register window,
    /// which `mmap` needs), and the interrupt is the `SOCK_SEQPACKET` socket
    /// beside it, `<dev_path>.irq`, which carries the same 4-byte counts and
    /// unmask writes. That is the only difference between the two.
    pub fn open(dev_path: &Path) -> Result<UioIrq, UioError> {
        let meta = fs::metadata(dev_path).map_err(|source| UioError::Open {
            path: dev_path.to_owned(),
            source,
        })?;
        let (path, file) = if meta.file_type().is_file() {
            let mut sock = dev_path.as_os_str().to_owned();
            sock.push(".irq");
            let sock = PathBuf::from(sock);
            let fd = connect_seqpacket(&sock).map_err(|source| UioError::Open {
                path: sock.clone(),
                source,
            })?;
            (sock, File::from(fd))
        } else {
            let file = File::options()
                .read(true)
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
                .open(dev_path)
                .map_err(|source| UioError::Open {
                    path: dev_path.to_owned(),
                    source,
                })?;
            (dev_path.to_owned(), file)
        };
        // SAFETY: `file` owns its descriptor and moves into the `AsyncFd`,
        // which keeps it open (and never replaces it) until it is dropped.
        let fd = unsafe { AsyncFd::register(file) }.map_err(|e| UioError::Open {
            path: path.clone(),
            source: e.into_parts().1,
        })?;
        Ok(UioIrq {
            fd,
            path,
            last: None,
        })
    }

    /// Waits for the next interrupt and returns the event count.
    pub async fn wait(&mut self) -> Result<IrqEvent, UioError> {
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|source| UioError::IrqRead {
                    path: self.path.clone(),
                    source,
                })?;
            let mut buf = [0u8; 4];
            match guard.try_io(|inner| inner.get_ref().read(&mut buf)) {
                Ok(Ok(4)) => {
                    let count = i32::from_ne_bytes(buf) as u32;
                    let coalesced = match self.last {
                        Some(last) => count.wrapping_sub(last).saturating_sub(1),
                        None => 0,
                    };
                    self.last = Some(count);
                    return Ok(IrqEvent { count, coalesced });
                }
                Ok(Ok(0)) => {
                    return Err(UioError::IrqClosed {
                        path: self.path.clone(),
                    })
                }
                Ok(Ok(len)) => {
                    return Err(UioError::IrqShortRead {
                        path: self.path.clone(),
                        len,
                    })
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(source)) => {
                    return Err(UioError::IrqRead {
                        path: self.path.clone(),
                        source,
                    })
                }
                Err(_would_block) => continue,
            }
        }
    }

    /// Re-enables the interrupt (writes the s32 value 1). Call it after the
    /// device's own interrupt condition has been handled.
    pub fn unmask(&self) -> Result<(), UioError> {
        let one = 1i32.to_ne_bytes();
        let written = self
            .fd
            .get_ref()
            .write(&one)
            .map_err(|source| UioError::IrqWrite {
                path: self.path.clone(),
                source,
            })?;
        if written != 4 {
            return Err(UioError::IrqWrite {
                path: self.path.clone(),
                source: io::Error::new(io::ErrorKind::WriteZero, "short write"),
            });
        }
        Ok(())
    }
}

fn connect_seqpacket(path: &Path) -> io::Result<OwnedFd> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr)?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_uio(root: &Root, number: u32, name: &str, maps: &[(u64, u64, u64)]) {
        let sys = root.uio_class().join(format!("uio{number}"));
        fs::create_dir_all(&sys).expect("mkdir");
        fs::write(sys.join("name"), format!("{name}\n")).expect("name");
        for (i, (addr, size, offset)) in maps.iter().enumerate() {
            let dir = sys.join("maps").join(format!("map{i}"));
            fs::create_dir_all(&dir).expect("map dir");
            fs::write(dir.join("addr"), format!("{addr:#x}\n")).expect("addr");
            fs::write(dir.join("size"), format!("{size:#x}\n")).expect("size");
            fs::write(dir.join("offset"), format!("{offset:#x}\n")).expect("offset");
        }
        fs::create_dir_all(root.path("/dev")).expect("dev");
        let page = page_size().expect("page") as usize;
        fs::write(
            root.dev(&format!("uio{number}")),
            vec![0u8; page * maps.len().max(1)],
        )
        .expect("dev file");
    }

    #[test]
    fn finds_by_name_not_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_uio(&root, 0, "eth-dma", &[(0x4000_0000, 0x1000, 0)]);
        fake_uio(
            &root,
            3,
            "fabric-shell",
            &[(0xA000_0000, 0x1000, 0), (0xA001_0000, 0x100, 0x20)],
        );
        let dev = UioDevice::find(&root, "fabric-shell").expect("found");
        assert_eq!(dev.number, 3);
        assert_eq!(dev.maps.len(), 2);
        assert_eq!(dev.maps[1].addr, 0xA001_0000);
        assert_eq!(dev.maps[1].offset, 0x20);
        assert_eq!(dev.dev_path, root.dev("uio3"));
        let err = UioDevice::find(&root, "fabric-rm0").expect_err("absent");
        let text = err.to_string();
        assert!(
            text.contains("fabric-rm0") && text.contains("eth-dma"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_class_says_what_to_enable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = UioDevice::find(&Root::new(dir.path()), "x").expect_err("no class");
        assert!(err.to_string().contains("uio_pdrv_genirq"), "{err}");
    }

    #[test]
    fn malformed_sysfs_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_uio(&root, 1, "fabric-shell", &[(0xA000_0000, 0x1000, 0)]);
        fs::write(root.uio_class().join("uio1/maps/map0/size"), "big\n").expect("write");
        let err = UioDevice::find(&root, "fabric-shell").expect_err("bad size");
        assert!(err.to_string().contains("map0/size"), "{err}");
    }

    #[test]
    fn duplicates_and_small_maps_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_uio(&root, 0, "fabric-shell", &[(0xA000_0000, 0x400, 0)]);
        let dev = UioDevice::find(&root, "fabric-shell").expect("found");
        let err = dev.map(0, 0x800).expect_err("too small");
        assert!(matches!(
            err,
            UioError::MapTooSmall {
                size: 0x400,
                need: 0x800,
                ..
            }
        ));
        assert!(matches!(
            dev.map(2, 4),
            Err(UioError::NoSuchMap { count: 1, .. })
        ));
        fake_uio(&root, 1, "fabric-shell", &[(0xB000_0000, 0x1000, 0)]);
        assert!(matches!(
            UioDevice::find(&root, "fabric-shell"),
            Err(UioError::Duplicate { .. })
        ));
    }

    #[test]
    fn map_m_lives_at_m_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_uio(
            &root,
            0,
            "fabric-shell",
            &[(0xA000_0000, 0x1000, 0), (0xA001_0000, 0x100, 0x40)],
        );
        let page = page_size().expect("page") as usize;
        let mut raw = vec![0u8; page * 2];
        raw[page + 0x40..page + 0x44].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        fs::write(root.dev("uio0"), &raw).expect("write");
        let dev = UioDevice::find(&root, "fabric-shell").expect("found");
        let map = dev.map(1, 0x100).expect("map 1");
        use crate::mmio::RegisterWindow;
        assert_eq!(map.read32(0), 0x1234_5678);
    }

    #[tokio::test]
    async fn interrupts_over_a_seqpacket_socket() {
        use nix::sys::socket::{
            accept, bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
        };
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("tempdir");
        let dev = dir.path().join("uio0");
        fs::write(&dev, [0u8; 4096]).expect("register file");
        let path = dir.path().join("uio0.irq");
        let listener = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .expect("socket");
        bind(listener.as_raw_fd(), &UnixAddr::new(&path).expect("addr")).expect("bind");
        listen(&listener, Backlog::new(4).expect("backlog")).expect("listen");
        let mut irq = UioIrq::open(&dev).expect("connect");
        let mut device = File::from(accept(&listener).expect("accept"));
        device.write_all(&5i32.to_ne_bytes()).expect("fire");
        assert_eq!(irq.wait().await.expect("wait").count, 5);
        irq.unmask().expect("unmask");
        let mut buf = [0u8; 4];
        device.read_exact(&mut buf).expect("unmask arrives");
        assert_eq!(i32::from_ne_bytes(buf), 1);
        device.write_all(&8i32.to_ne_bytes()).expect("fire");
        let ev = irq.wait().await.expect("wait");
        assert_eq!((ev.count, ev.coalesced), (8, 2));
        drop(device);
        assert!(matches!(irq.wait().await, Err(UioError::IrqClosed { .. })));
    }

    #[tokio::test]
    async fn an_interrupt_that_comes_late_is_waited_for_and_one_that_never_comes_is_named() {
        use nix::sys::socket::{
            bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
        };
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        fake_uio(&root, 0, "fabric-shell", &[(0xA000_0000, 0x1000, 0)]);
        fs::write(root.dev("uio0"), [0u8; 4096]).expect("register file");
        let dev = UioDevice::find(&root, "fabric-shell").expect("found");
        // Nothing comes: the wait ends, naming what was missing.
        match dev.irq_within(Duration::from_millis(50)) {
            Err(UioError::Open { path, source }) => {
                assert!(path.ends_with("uio0.irq"), "{}", path.display());
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        // It comes while the daemon waits.
        let path = root.dev("uio0.irq");
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let listener = socket(
                AddressFamily::Unix,
                SockType::SeqPacket,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .expect("socket");
            bind(listener.as_raw_fd(), &UnixAddr::new(&path).expect("addr")).expect("bind");
            listen(&listener, Backlog::new(4).expect("backlog")).expect("listen");
            listener
        });
        let irq = dev.irq_within(Duration::from_secs(30)).expect("waited for");
        assert!(irq.path.ends_with("uio0.irq"));
        drop(late.join().expect("join"));
    }
}
