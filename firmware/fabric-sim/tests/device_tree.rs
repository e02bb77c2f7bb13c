//! Every source in device-tree/ compiles with dtc, and the fabric found in
//! the compiled trees is the one the simulator lays out and the daemon
//! writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use fabric_hw::devtree::{discover, discover_live, slot_overlay, DtNode};
use fabric_sim::{layout, SimConfig};

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../device-tree")
}

fn dtc(src: &Path, out: &Path) {
    let overlay = src.extension().is_some_and(|e| e == "dtso");
    let mut cmd = Command::new("dtc");
    if overlay {
        cmd.arg("-@");
    }
    let output = cmd
        .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
        .arg(out)
        .arg(src)
        .output()
        .expect("dtc runs (apt-get install device-tree-compiler)");
    assert!(
        output.status.success(),
        "dtc {}: {}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn compiled(name: &str, dir: &Path) -> DtNode {
    let src = sources().join(name);
    let out = dir.join(format!("{name}.dtb"));
    dtc(&src, &out);
    let blob = std::fs::read(&out).expect("read blob");
    DtNode::from_blob(&blob, &out).expect("parse blob")
}

#[test]
fn every_source_compiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut count = 0;
    for entry in std::fs::read_dir(sources()).expect("device-tree/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "dts" || e == "dtso") {
            let blob = compiled(
                path.file_name().and_then(|n| n.to_str()).expect("name"),
                dir.path(),
            );
            assert!(!blob.walk().is_empty());
            count += 1;
        }
    }
    assert!(count >= 4, "found only {count} sources");
}

#[test]
fn the_simulated_board_matches_its_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let from_source =
        discover(&compiled("sim-board.dts", dir.path()), "sim-board.dts").expect("discover source");
    let config = SimConfig::for_root(dir.path().join("root"));
    let live = dir.path().join("live");
    layout::base_tree(&config)
        .write_dir(&live)
        .expect("write live tree");
    let from_sim = discover_live(&live).expect("discover sim");
    assert_eq!(from_source, from_sim);
}

#[test]
fn the_shell_overlay_describes_the_same_fabric() {
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = compiled("fabricd-shell.dtso", dir.path());
    let topo = discover(&overlay, "fabricd-shell.dtso").expect("discover overlay");
    assert_eq!(topo.slots.len(), 2);
    assert_eq!(topo.shell.uio_name, "fabric-shell");
    assert_eq!(topo.dma.device_name, layout::DMA_NAME);
    let config = SimConfig::for_root(dir.path());
    assert_eq!(topo.shell.part, config.part);
    assert_eq!(topo.shell.interface_id, config.interface_id);
}

#[test]
fn generated_slot_overlays_match_their_sources() {
    let dir = tempfile::tempdir().expect("tempdir");
    for s in 0..2u8 {
        let source = compiled(&format!("slot{s}.dtso"), dir.path());
        let generated = slot_overlay(
            &layout::region_path(s),
            &format!("fabricd/staged/slot{s}.bin"),
        );
        let pick = |t: &DtNode| t.find("/fragment@0").cloned().expect("fragment");
        assert_eq!(pick(&source), pick(&generated), "slot {s}");
    }
}
