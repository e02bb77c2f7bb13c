//! The fake board root: every file and directory the daemon looks at.
//!
//! | board path | here |
//! |---|---|
//! | `/proc/device-tree` | directories and property files written from [`base_tree`] |
//! | `/sys/class/uio/uio0/{name,version,maps/map0/*}` | text files |
//! | `/dev/uio0` | a regular file of one page: the register window, mapped `MAP_SHARED` by both sides |
//! | (the interrupt) | a `SOCK_SEQPACKET` socket at `/dev/uio0.irq` (a regular file cannot block a read) |
//! | `/sys/class/u-dma-buf/udmabuf-fabric/*` | text files; `sync_for_*` are watched |
//! | `/dev/udmabuf-fabric` | a regular file: the CPU's cached view of the buffer |
//! | `/sys/class/fpga_manager/fpga0/*` | text files; `firmware` is watched |
//! | `<configfs>/device-tree/overlays` | a directory; new overlay directories are watched |
//! | `/lib/firmware` | a directory |
//! | `/sim/faults` | not a board path: fault injection for tests |

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use fabric_hw::contract::{SHELL_COMPATIBLE, SHELL_UIO_NAME};
use fabric_hw::devtree::DtNode;
use fabric_hw::Root;

use crate::config::{SimConfig, DMA_PHYS};

/// Physical address of the shell's register window.
pub const SHELL_PHYS: u64 = 0xA000_0000;
/// The DMA buffer's device name.
pub const DMA_NAME: &str = "udmabuf-fabric";
/// Bytes of the register window file (one page on every target we build for).
pub const REG_FILE_LEN: usize = 4096;

/// The paths the simulator creates and watches.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: Root,
    pub regs: PathBuf,
    pub irq_socket: PathBuf,
    pub dma_dev: PathBuf,
    pub dma_sys: PathBuf,
    pub fpga_mgr: PathBuf,
    pub overlays: PathBuf,
    pub sim_dir: PathBuf,
}

impl Paths {
    /// Writes a sysfs or configfs value the daemon reads by path (`state`,
    /// `status`), atomically as a kernel attribute reads: a read sees the
    /// whole old value or the whole new one, never an empty or cut line.
    /// The new text goes into a file of its own in `/sim` (not a directory
    /// the daemon lists), which is renamed over the attribute.
    pub fn write_value(&self, path: &Path, text: &str) -> io::Result<()> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.sim_dir.join(format!(
            ".value-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::write(&tmp, text)?;
        fs::rename(&tmp, path).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }

    pub fn new(config: &SimConfig) -> Paths {
        let root = Root::new(&config.root).with_configfs(&config.configfs);
        Paths {
            regs: root.dev("uio0"),
            irq_socket: root.dev("uio0.irq"),
            dma_dev: root.dev(DMA_NAME),
            dma_sys: root.udmabuf_class().join(DMA_NAME),
            fpga_mgr: root.fpga_manager(0),
            overlays: root.overlays(),
            sim_dir: root.path("/sim"),
            root,
        }
    }
}

/// The path of the base FPGA region, as the KV260's base tree has it
/// (zynqmp.dtsi: `fpga_full: fpga-region`).
pub const BASE_REGION: &str = "/fpga-region";

/// The device-tree path of slot `s`'s region: a child of the base region,
/// as `device-tree/fabricd-shell-kv260.dtso` puts it, so that it finds its
/// manager (`rules::region_manager`).
pub fn region_path(s: u8) -> String {
    format!("{BASE_REGION}/fpga-region-slot{s}")
}

/// The base device tree of the simulated board, as the kernel shows it
/// once the shell overlay is applied: a KV260-like base tree with the
/// shell under its base FPGA region. `device-tree/sim-board.dts` is the
/// same tree in source form.
pub fn base_tree(config: &SimConfig) -> DtNode {
    const GIC: u32 = 1;
    const PCAP: u32 = 2;
    const FPGA_FULL: u32 = 3;
    let mut root = DtNode {
        path: "/".into(),
        ..DtNode::default()
    };
    root.set_string("model", "fabricd simulated board");
    root.set_strings("compatible", &["fabricd,sim", "xlnx,zynqmp"]);
    root.set_cells("#address-cells", &[2]);
    root.set_cells("#size-cells", &[2]);
    let gic = root.add_child("interrupt-controller");
    gic.set_strings("compatible", &["arm,gic-400"]);
    gic.set_flag("interrupt-controller");
    gic.set_cells("#interrupt-cells", &[3]);
    gic.set_cells("#address-cells", &[0]);
    gic.set_cells("phandle", &[GIC]);
    let pcap = root.add_child("pcap");
    pcap.set_strings("compatible", &["xlnx,zynqmp-pcap-fpga"]);
    pcap.set_cells("phandle", &[PCAP]);
    let fpga_full = root.add_child(BASE_REGION.trim_start_matches('/'));
    fpga_full.set_strings("compatible", &["fpga-region"]);
    fpga_full.set_cells("fpga-mgr", &[PCAP]);
    fpga_full.set_cells("#address-cells", &[2]);
    fpga_full.set_cells("#size-cells", &[2]);
    fpga_full.set_flag("ranges");
    fpga_full.set_cells("phandle", &[FPGA_FULL]);
    fpga_full.set_string("firmware-name", "fabricd/shell/shell.bin");
    let shell = fpga_full.add_child(&format!("{SHELL_UIO_NAME}@{SHELL_PHYS:x}"));
    shell.set_strings("compatible", &[SHELL_COMPATIBLE, "generic-uio"]);
    if config.uio_buffer {
        let (hi, lo) = ((DMA_PHYS >> 32) as u32, DMA_PHYS as u32);
        let size = config.dma_size;
        shell.set_cells(
            "reg",
            &[
                0,
                SHELL_PHYS as u32,
                0,
                0x1000,
                hi,
                lo,
                (size >> 32) as u32,
                size as u32,
            ],
        );
        shell.set_strings("reg-names", &["registers", "buffer"]);
    } else {
        shell.set_cells("reg", &[0, SHELL_PHYS as u32, 0, 0x1000]);
    }
    shell.set_cells("interrupt-parent", &[GIC]);
    shell.set_cells("interrupts", &[0, 89, 4]);
    shell.set_string("fabricd,part", &config.part);
    shell.set_cells("fabricd,interface-id", &[config.interface_id]);
    for s in 0..config.slots {
        let addr = SHELL_PHYS + 0x10000 * (u64::from(s) + 1);
        let decoupler = fpga_full.add_child(&format!("pr-decoupler@{addr:x}"));
        decoupler.set_strings(
            "compatible",
            &["xlnx,pr-decoupler-1.00", "xlnx,pr-decoupler"],
        );
        decoupler.set_cells("reg", &[0, addr as u32, 0, 0x1000]);
        decoupler.set_cells("phandle", &[0x10 + u32::from(s)]);
    }
    for s in 0..config.slots {
        let region = fpga_full.add_child(&format!("fpga-region-slot{s}"));
        region.set_strings("compatible", &["fpga-region"]);
        region.set_cells("fabricd,slot", &[u32::from(s)]);
        region.set_cells("fpga-bridges", &[0x10 + u32::from(s)]);
        region.set_cells("#address-cells", &[2]);
        region.set_cells("#size-cells", &[2]);
        region.set_flag("ranges");
    }
    if !config.uio_buffer {
        let dma = fpga_full.add_child(DMA_NAME);
        dma.set_strings("compatible", &["ikwzm,u-dma-buf"]);
        dma.set_string("device-name", DMA_NAME);
        dma.set_cells(
            "size",
            &[(config.dma_size >> 32) as u32, config.dma_size as u32],
        );
        if config.dma_coherent {
            dma.set_flag("dma-coherent");
        }
    }
    // The base tree was built with -@ (as BR2_LINUX_KERNEL_DTB_OVERLAY_SUPPORT
    // does), so overlays can refer to its labels.
    let symbols = root.add_child("__symbols__");
    symbols.set_string("gic", "/interrupt-controller");
    symbols.set_string("zynqmp_pcap", "/pcap");
    symbols.set_string("fpga_full", BASE_REGION);
    root
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, text)
}

/// Lays the root out. Anything left from an earlier run is replaced, except
/// `/lib/firmware`, which belongs to the daemon.
pub fn create(config: &SimConfig, paths: &Paths) -> io::Result<()> {
    let root = &paths.root;
    for dir in [
        "/proc/device-tree",
        "/sys/class/uio",
        "/sys/class/u-dma-buf",
        "/sys/class/fpga_manager",
        "/sim",
    ] {
        let p = root.path(dir);
        if p.exists() {
            fs::remove_dir_all(&p)?;
        }
    }
    if paths.overlays.exists() {
        // Overlay directories of a previous run: the board has rebooted.
        fs::remove_dir_all(&paths.overlays)?;
    }
    for p in [&paths.regs, &paths.irq_socket, &paths.dma_dev] {
        if p.exists() {
            fs::remove_file(p)?;
        }
    }
    base_tree(config).write_dir(&root.device_tree())?;
    fs::create_dir_all(root.path("/dev"))?;
    fs::write(&paths.regs, vec![0u8; REG_FILE_LEN])?;
    if config.uio_buffer {
        let page = fabric_hw::uio::page_size().map_err(|e| io::Error::other(e.to_string()))?;
        // The buffer is the shell's second map: UIO serves map M at file
        // offset M × page size, so here it is the file's bytes from one
        // page on.
        fs::File::options()
            .write(true)
            .open(&paths.regs)?
            .set_len(page + config.dma_size)?;
    } else {
        create_udmabuf(config, paths)?;
    }
    create_manager(config, paths)?;
    fs::create_dir_all(root.firmware_dir())?;
    if !config.no_configfs {
        fs::create_dir_all(&paths.overlays)?;
        // The shell came in through configfs, as S55fabricd-shell applies
        // it at boot: its overlay is there, applied, and so is its file.
        let dir = paths.overlays.join(SHELL_OVERLAY);
        write(&dir.join("path"), &format!("{SHELL_DTBO}\n"))?;
        write(&dir.join("status"), "applied\n")?;
        write(&dir.join("dtbo"), "")?;
        let dtbo = root.firmware_dir().join(SHELL_DTBO);
        fs::create_dir_all(dtbo.parent().unwrap_or(Path::new("/")))?;
        fs::write(dtbo, shell_overlay(config).to_blob())?;
    }
    if let Some(src) = &config.firmware {
        let dst = root.our_firmware_dir();
        fs::create_dir_all(&dst)?;
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                fs::copy(entry.path(), dst.join(entry.file_name()))?;
            }
        }
    }
    write(&paths.sim_dir.join("faults"), "")?;
    Ok(())
}

/// The shell's UIO device in sysfs, as uio_pdrv_genirq registers it once
/// the shell overlay has added its node. Made last, once the device node
/// and its interrupt exist: on a real kernel `uio_register_device()` makes
/// the device whole (its node and its interrupt) before its uevent says it
/// is there, and the daemon finds the shell through this directory.
pub fn create_uio(config: &SimConfig, paths: &Paths) -> io::Result<()> {
    let uio = paths.root.uio_class().join("uio0");
    // uio_pdrv_genirq names the device after its node, with the unit
    // address (`%pfwP` in Linux 6.12's uio_pdrv_genirq_probe()), and each
    // map after its reg-names entry, else the node.
    write(
        &uio.join("name"),
        &format!("{SHELL_UIO_NAME}@{SHELL_PHYS:x}\n"),
    )?;
    write(&uio.join("version"), "devicetree\n")?;
    write(&uio.join("event"), "0\n")?;
    let map = uio.join("maps/map0");
    let regs_name = match config.uio_buffer {
        true => "registers".to_owned(),
        false => format!("{SHELL_UIO_NAME}@{SHELL_PHYS:x}"),
    };
    write(&map.join("name"), &format!("{regs_name}\n"))?;
    write(&map.join("addr"), &format!("0x{SHELL_PHYS:016x}\n"))?;
    write(&map.join("size"), &format!("0x{:016x}\n", REG_FILE_LEN))?;
    write(&map.join("offset"), "0x0\n")?;
    if config.uio_buffer {
        let map = uio.join("maps/map1");
        write(&map.join("name"), "buffer\n")?;
        write(&map.join("addr"), &format!("0x{DMA_PHYS:016x}\n"))?;
        write(&map.join("size"), &format!("0x{:016x}\n", config.dma_size))?;
        write(&map.join("offset"), "0x0\n")?;
    }
    Ok(())
}

/// The overlay S55fabricd-shell applied to load the shell: the base
/// region's `firmware-name` and the shell's nodes, as
/// `device-tree/fabricd-shell-kv260.dtso` adds them.
pub fn shell_overlay(config: &SimConfig) -> DtNode {
    let base = base_tree(config);
    let mut root = DtNode {
        path: "/".into(),
        ..DtNode::default()
    };
    let fragment = root.add_child("fragment@0");
    fragment.set_string("target-path", BASE_REGION);
    let body = fragment.add_child("__overlay__");
    if let Some(region) = base.find(BASE_REGION) {
        if let Some(fw) = region.props.get("firmware-name") {
            body.props.insert("firmware-name".into(), fw.clone());
        }
        body.children = region.children.clone();
    }
    root
}

/// The overlay that loaded the shell, and its file under `/lib/firmware`.
pub const SHELL_OVERLAY: &str = fabric_hw::fpga::SHELL_OVERLAY;
pub const SHELL_DTBO: &str = "fabricd/shell/shell.dtbo";

fn create_udmabuf(config: &SimConfig, paths: &Paths) -> io::Result<()> {
    let sys = &paths.dma_sys;
    write(&sys.join("driver_version"), "5.0.0-sim\n")?;
    write(&sys.join("phys_addr"), &format!("0x{DMA_PHYS:016x}\n"))?;
    write(&sys.join("size"), &format!("{}\n", config.dma_size))?;
    write(&sys.join("sync_mode"), "1\n")?;
    write(&sys.join("sync_offset"), "0x0\n")?;
    write(&sys.join("sync_size"), &format!("{}\n", config.dma_size))?;
    write(&sys.join("sync_direction"), "0\n")?;
    write(&sys.join("sync_owner"), "0\n")?;
    write(&sys.join("sync_for_cpu"), "0\n")?;
    write(&sys.join("sync_for_device"), "0\n")?;
    write(
        &sys.join("dma_coherent"),
        if config.dma_coherent { "1\n" } else { "0\n" },
    )?;
    let dma = fs::File::create(&paths.dma_dev)?;
    dma.set_len(config.dma_size)
}

fn create_manager(config: &SimConfig, paths: &Paths) -> io::Result<()> {
    let mgr = &paths.fpga_mgr;
    write(
        &mgr.join("name"),
        "Xilinx ZynqMP FPGA Manager (simulated)\n",
    )?;
    write(&mgr.join("state"), "operating\n")?;
    write(&mgr.join("status"), "\n")?;
    if config.mainline {
        // Mainline's manager has `name`, `state` and `status` only.
        return Ok(());
    }
    // linux-xlnx's: userspace can start a load.
    write(&mgr.join("flags"), "0\n")?;
    write(&mgr.join("firmware"), "")
}

/// Whether `name` is a plain file name.
pub fn plain(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}
