//! Every source in device-tree/ compiles with dtc; every shell overlay
//! applies to the kernel's own base tree of its boards, and discovery finds
//! the shell, the slots and the buffer in the result; the fabric found in
//! the compiled trees is the one the simulator lays out and the daemon
//! writes.
//!
//! The base trees are the kernel's own (Debian's linux-source-6.12, read at
//! test time, never committed), compiled as Buildroot compiles a board tree
//! with BR2_LINUX_KERNEL_DTB_OVERLAY_SUPPORT: the C preprocessor, then
//! `dtc -@`. Overlays are applied with `fdtoverlay`, which refuses what
//! the kernel's overlay code refuses (a label the base tree lacks).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fabric_hw::devtree::{discover, discover_live, slot_overlay, DmaProvider, DtNode, Topology};
use fabric_sim::{layout, rules, SimConfig};

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../device-tree")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let output = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn dtc(src: &Path, out: &Path) {
    let mut cmd = Command::new("dtc");
    cmd.args(["-q", "-i"])
        .arg(sources())
        .args(["-I", "dts", "-O", "dtb", "-o"])
        .arg(out)
        .arg(src);
    run(
        &mut cmd,
        &format!(
            "dtc {} (apt-get install device-tree-compiler)",
            src.display()
        ),
    );
}

fn parse(blob: &Path) -> DtNode {
    let bytes = std::fs::read(blob).expect("read blob");
    DtNode::from_blob(&bytes, blob).expect("parse blob")
}

fn compiled(src: &Path, dir: &Path) -> PathBuf {
    let name = src.file_name().and_then(|n| n.to_str()).expect("name");
    let out = dir.join(format!("{name}.dtb"));
    dtc(src, &out);
    out
}

/// The kernel's board trees: `arch/*/boot/dts/xilinx` and the bindings
/// they include, extracted once per build directory from the Debian
/// package's tarball ($FABRICD_LINUX_SOURCE to use another).
fn kernel_dts() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tarball = std::env::var_os("FABRICD_LINUX_SOURCE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/src/linux-source-6.12.tar.xz"));
        assert!(
            tarball.exists(),
            "{}: the kernel's own board trees are needed (apt-get install linux-source-6.12)",
            tarball.display()
        );
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("linux-dts");
        if !dir.join(".done").exists() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("mkdir");
            run(
                Command::new("tar")
                    .arg("-xJf")
                    .arg(&tarball)
                    .arg("-C")
                    .arg(&dir)
                    .args(["--strip-components=1", "--wildcards"])
                    .args([
                        "*/arch/arm/boot/dts/xilinx/*",
                        "*/arch/arm64/boot/dts/xilinx/*",
                        "*/include/dt-bindings/*",
                        // dt-bindings/input/linux-event-codes.h links here.
                        "*/include/uapi/linux/input-event-codes.h",
                    ]),
                "extracting the kernel's device trees",
            );
            std::fs::write(dir.join(".done"), "").expect("mark");
        }
        dir
    })
}

/// A kernel board tree compiled as Buildroot does for a board with overlay
/// support: preprocessed, then `dtc -@` (its `__symbols__`).
fn base_tree(arch: &str, board: &str, dir: &Path) -> PathBuf {
    let k = kernel_dts();
    let dts_dir = k.join(format!("arch/{arch}/boot/dts/xilinx"));
    let pre = run(
        Command::new("cpp")
            .args([
                "-nostdinc",
                "-undef",
                "-D__DTS__",
                "-x",
                "assembler-with-cpp",
            ])
            .arg("-I")
            .arg(k.join("include"))
            .arg("-I")
            .arg(&dts_dir)
            .arg(dts_dir.join(format!("{board}.dts"))),
        "cpp",
    );
    let src = dir.join(format!("{board}.pp.dts"));
    std::fs::write(&src, pre.stdout).expect("write");
    let out = dir.join(format!("{board}.dtb"));
    run(
        Command::new("dtc")
            .args(["-q", "-@", "-I", "dts", "-O", "dtb", "-o"])
            .arg(&out)
            .arg(&src),
        &format!("dtc -@ {board}"),
    );
    out
}

fn fdtoverlay(base: &Path, overlays: &[&Path], out: &Path) -> Result<(), String> {
    let output = Command::new("fdtoverlay")
        .arg("-i")
        .arg(base)
        .arg("-o")
        .arg(out)
        .args(overlays)
        .output()
        .expect("fdtoverlay runs (apt-get install device-tree-compiler)");
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Applies `overlay` to the board's tree, lays the result out as
/// `/proc/device-tree` and discovers the fabric in it; then applies the
/// daemon's own slot overlays for the regions it found and discovers again.
fn board_with(arch: &str, board: &str, overlay: &Path) -> (Topology, Topology, DtNode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = base_tree(arch, board, dir.path());
    let dtbo = compiled(overlay, dir.path());
    let combined = dir.path().join("combined.dtb");
    fdtoverlay(&base, &[&dtbo], &combined).unwrap_or_else(|e| {
        panic!(
            "{} does not apply to the kernel's {board}: {e}",
            overlay.display()
        )
    });
    let live = dir.path().join("proc-device-tree");
    let tree = parse(&combined);
    tree.write_dir(&live).expect("lay out");
    let topo = discover_live(&live).expect("discover");

    let mut slot_dtbos = Vec::new();
    for slot in &topo.slots {
        let ov = slot_overlay(
            &slot.path,
            &format!("fabricd/staged/slot{}.bin", slot.index),
        );
        let path = dir.path().join(format!("slot{}.dtbo", slot.index));
        std::fs::write(&path, ov.to_blob()).expect("write");
        slot_dtbos.push(path);
    }
    let loaded = dir.path().join("loaded.dtb");
    let refs: Vec<&Path> = slot_dtbos.iter().map(PathBuf::as_path).collect();
    fdtoverlay(&combined, &refs, &loaded)
        .unwrap_or_else(|e| panic!("the daemon's slot overlays on {board}: {e}"));
    let live2 = dir.path().join("proc-device-tree-loaded");
    parse(&loaded).write_dir(&live2).expect("lay out");
    let after = discover_live(&live2).expect("discover after loads");
    (topo, after, tree)
}

fn check_board(arch: &str, board: &str, overlay: &Path, part: &str, buffer: DmaProvider) {
    let (topo, after, tree) = board_with(arch, board, overlay);
    assert_eq!(topo.shell.part, part, "{board}");
    assert_eq!(
        topo.shell.interface_id,
        fabric_hw::contract::SHELL_INTERFACE_ID,
        "{board}"
    );
    assert_eq!(topo.slots.len(), 2, "{board}");
    assert_eq!(topo.dma.provider, buffer, "{board}");
    assert_eq!(topo.dma.size, 0x100_0000, "{board}");
    for slot in &topo.slots {
        // The kernel's region code finds a manager for every slot: the base
        // region's, through the slot's parent.
        let mgr = rules::region_manager(&tree, &slot.path)
            .unwrap_or_else(|| panic!("{board}: region {} finds no manager", slot.path));
        assert!(
            mgr.is_compatible("xlnx,zynq-devcfg-1.0") || mgr.is_compatible("xlnx,zynqmp-pcap-fpga"),
            "{board}: {} is managed by {}",
            slot.path,
            mgr.path
        );
        let region = tree.find(&slot.path).expect("region");
        assert_eq!(
            rules::region_bridges(&tree, region).expect("bridges").len(),
            1
        );
        assert!(slot.firmware_name.is_none());
    }
    // The shell's UIO device gets the name discovery tries first.
    let shell = tree.find(&topo.shell.path).expect("shell node");
    assert_eq!(rules::uio_name(shell), topo.shell.uio_names[0]);
    for slot in &after.slots {
        assert_eq!(
            slot.firmware_name.as_deref(),
            Some(format!("fabricd/staged/slot{}.bin", slot.index).as_str()),
            "{board}"
        );
        assert!(slot.partial);
    }
}

fn udmabuf() -> DmaProvider {
    DmaProvider::UDmaBuf {
        device_name: "udmabuf-fabric".into(),
    }
}

#[test]
fn the_kv260_overlay_applies_to_the_kernels_k26_tree() {
    check_board(
        "arm64",
        "zynqmp-smk-k26-revA",
        &sources().join("fabricd-shell-kv260.dtso"),
        "xck26-sfvc784-2LV-c",
        udmabuf(),
    );
}

#[test]
fn the_zed_overlay_applies_to_the_kernels_zed_tree() {
    check_board(
        "arm",
        "zynq-zed",
        &sources().join("fabricd-shell-zed.dtso"),
        "xc7z020clg484-1",
        udmabuf(),
    );
}

#[test]
fn the_zc706_overlay_applies_to_the_kernels_zc706_tree() {
    check_board(
        "arm",
        "zynq-zc706",
        &sources().join("fabricd-shell-zc706.dtso"),
        "xc7z045ffg900-2",
        udmabuf(),
    );
}

#[test]
fn the_rigs_overlay_gives_the_buffer_as_a_shell_map() {
    check_board(
        "arm",
        "zynq-zed",
        &repo().join("tests/kernel/shell-rig.dtso"),
        "xc7z020clg484-1",
        DmaProvider::ShellMap { index: 1 },
    );
}

#[test]
fn an_overlay_for_another_board_does_not_apply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let zed = base_tree("arm", "zynq-zed", dir.path());
    let kv260 = compiled(&sources().join("fabricd-shell-kv260.dtso"), dir.path());
    let err = fdtoverlay(&zed, &[&kv260], &dir.path().join("x.dtb")).expect_err("wrong board");
    assert!(err.contains("FDT_ERR_NOTFOUND"), "{err}");
    // Nor does one onto a base tree built without -@: no __symbols__.
    let plain = dir.path().join("plain.dtb");
    run(
        Command::new("dtc")
            .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
            .arg(&plain)
            .arg(dir.path().join("zynq-zed.pp.dts")),
        "dtc",
    );
    let shell = compiled(&sources().join("fabricd-shell-zed.dtso"), dir.path());
    assert!(fdtoverlay(&plain, &[&shell], &dir.path().join("y.dtb")).is_err());
}

#[test]
fn every_source_compiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut count = 0;
    for entry in std::fs::read_dir(sources()).expect("device-tree/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "dts" || e == "dtso") {
            assert!(!parse(&compiled(&path, dir.path())).walk().is_empty());
            count += 1;
        }
    }
    assert!(count >= 6, "found only {count} sources");
}

#[test]
fn the_simulated_board_matches_its_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = compiled(&sources().join("sim-board.dts"), dir.path());
    let from_source = discover(&parse(&source), "sim-board.dts").expect("discover source");
    let config = SimConfig::for_root(dir.path().join("root"));
    let live = dir.path().join("live");
    let tree = layout::base_tree(&config);
    tree.write_dir(&live).expect("write live tree");
    let from_sim = discover_live(&live).expect("discover sim");
    assert_eq!(from_source, from_sim);
    // And it keeps the kernel's rules: every slot finds the manager.
    for slot in &from_sim.slots {
        assert!(rules::region_manager(&tree, &slot.path).is_some());
    }
}

#[test]
fn generated_slot_overlays_match_their_sources() {
    let dir = tempfile::tempdir().expect("tempdir");
    for s in 0..2u8 {
        let source = parse(&compiled(
            &sources().join(format!("slot{s}.dtso")),
            dir.path(),
        ));
        let generated = slot_overlay(
            &layout::region_path(s),
            &format!("fabricd/staged/slot{s}.bin"),
        );
        let pick = |t: &DtNode| t.find("/fragment@0").cloned().expect("fragment");
        assert_eq!(pick(&source), pick(&generated), "slot {s}");
    }
}
