//! What the real kernel enforces, as rules the simulator applies.
//!
//! Each rule names the kernel function it follows (Linux 6.12), and each
//! was either found by the real-kernel rig (`scripts/kernel-test`) or read
//! in the kernel's source and then seen there. A simulator that accepts
//! what the kernel refuses hides the daemon's mistakes instead of finding
//! them, so where the kernel fails quietly (a region that never probed),
//! the simulator fails quietly the same way.

use std::path::{Component, Path};

use fabric_hw::devtree::DtNode;

/// The strings `/sys/class/fpga_manager/*/state` can read
/// (`state_str[]` in drivers/fpga/fpga-mgr.c).
pub const MANAGER_STATES: &[&str] = &[
    "unknown",
    "power off",
    "power up",
    "reset",
    "firmware request",
    "firmware request error",
    "parse header",
    "parse header error",
    "write init",
    "write init error",
    "write",
    "write error",
    "write complete",
    "write complete error",
    "operating",
];

/// Compatibles that an FPGA bridge driver binds, among the bridges a
/// Xilinx board uses (drivers/fpga/xilinx-pr-decoupler.c).
pub const BRIDGE_COMPATIBLES: &[&str] = &[
    "xlnx,pr-decoupler",
    "xlnx,pr-decoupler-1.00",
    "xlnx,dfx-axi-shutdown-manager",
    "xlnx,dfx-axi-shutdown-manager-1.00",
];

/// A string property by a name known only at run time (a label in
/// `__symbols__`).
pub fn string_prop(node: &DtNode, name: &str) -> Option<String> {
    let v = node.props.get(name)?;
    let v = v.strip_suffix(&[0]).unwrap_or(v);
    String::from_utf8(v.to_vec()).ok()
}

/// The node whose `phandle` is `handle`.
pub fn by_phandle(tree: &DtNode, handle: u32) -> Option<&DtNode> {
    tree.walk()
        .into_iter()
        .find(|n| n.u32("phandle").ok().flatten() == Some(handle))
}

/// The cells of a phandle-list property (`fpga-bridges`, `fpga-mgr`).
fn phandles(node: &DtNode, prop: &str) -> Vec<u32> {
    node.props
        .get(prop)
        .map(|v| {
            v.chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
        .unwrap_or_default()
}

/// A region's FPGA manager, as `of_fpga_region_get_mgr()`
/// (drivers/fpga/of-fpga-region.c) finds it: the `fpga-mgr` of the region
/// or of the nearest ancestor that is itself an `fpga-region`. `None`
/// means `of_fpga_region_probe()` defers for good: the region never
/// registers, and an overlay targeting it is applied by the OF core while
/// nothing is programmed.
pub fn region_manager<'t>(tree: &'t DtNode, region_path: &str) -> Option<&'t DtNode> {
    let mut path = region_path.to_owned();
    loop {
        let node = tree.find(&path)?;
        if node.is_compatible("fpga-region") {
            if let Some(&handle) = phandles(node, "fpga-mgr").first() {
                return by_phandle(tree, handle);
            }
        }
        if path == "/" {
            return None;
        }
        path = match path.rsplit_once('/') {
            Some(("", _)) | None => "/".to_owned(),
            Some((parent, _)) => parent.to_owned(),
        };
    }
}

/// A region's bridges, as `of_fpga_region_get_bridges()` gets them: each
/// `fpga-bridges` phandle must name a node a bridge driver has bound, or
/// the region cannot be programmed (`-ENODEV`, and the overlay fails).
/// Returns the bridges' paths.
pub fn region_bridges(tree: &DtNode, region: &DtNode) -> Result<Vec<String>, String> {
    phandles(region, "fpga-bridges")
        .into_iter()
        .map(|h| match by_phandle(tree, h) {
            Some(b) if BRIDGE_COMPATIBLES.iter().any(|c| b.is_compatible(c)) => Ok(b.path.clone()),
            Some(b) => Err(format!(
                "{}: fpga-bridges names {}, which no bridge driver binds",
                region.path, b.path
            )),
            None => Err(format!(
                "{}: fpga-bridges names phandle {h:#x}, which no node has",
                region.path
            )),
        })
        .collect()
}

/// Every label an overlay refers to must be in the live tree's
/// `__symbols__`, or `of_resolve_phandles()` (drivers/of/resolver.c)
/// refuses the overlay before anything is applied. Returns the labels.
pub fn resolve_fixups(overlay: &DtNode, live: &DtNode) -> Result<Vec<String>, String> {
    let Some(fixups) = overlay.find("/__fixups__") else {
        return Ok(Vec::new());
    };
    let symbols = live.find("/__symbols__");
    let mut labels = Vec::new();
    for label in fixups.props.keys() {
        if !symbols.is_some_and(|s| s.props.contains_key(label)) {
            return Err(format!(
                "the overlay refers to label {label:?}, which the live tree's __symbols__ lacks (a base tree built without -@, or for another board)"
            ));
        }
        labels.push(label.clone());
    }
    Ok(labels)
}

/// The name `uio_pdrv_genirq_probe()` gives a device with no
/// `linux,uio-name`: the node name with its unit address (`%pfwP`).
pub fn uio_name(node: &DtNode) -> String {
    match node.string("linux,uio-name") {
        Ok(Some(name)) => name,
        _ => node.name.clone(),
    }
}

/// A firmware name, as `request_firmware()` takes it: relative to the
/// firmware search path (`/lib/firmware`), without `..`.
pub fn firmware_relative(name: &str) -> Result<&Path, String> {
    let rel = Path::new(name.trim());
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!(
            "firmware name {name:?} is not a plain path relative to the firmware search path"
        ));
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(nested: bool) -> DtNode {
        let mut root = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        let pcap = root.add_child("pcap");
        pcap.set_cells("phandle", &[1]);
        let full = root.add_child("fpga-full");
        full.set_strings("compatible", &["fpga-region"]);
        full.set_cells("fpga-mgr", &[1]);
        let dec = full.add_child("pr-decoupler@0");
        dec.set_strings("compatible", &["xlnx,pr-decoupler"]);
        dec.set_cells("phandle", &[2]);
        let parent = if nested { full } else { &mut root };
        let slot = parent.add_child("fpga-region-slot0");
        slot.set_strings("compatible", &["fpga-region"]);
        slot.set_cells("fpga-bridges", &[2]);
        root
    }

    #[test]
    fn a_region_finds_its_manager_only_through_itself_or_an_ancestor_region() {
        let nested = tree(true);
        let mgr = region_manager(&nested, "/fpga-full/fpga-region-slot0").expect("manager");
        assert_eq!(mgr.path, "/pcap");
        // At the root with no fpga-mgr: the region never probes.
        let flat = tree(false);
        assert!(region_manager(&flat, "/fpga-region-slot0").is_none());
        // An ancestor that is not a region does not count.
        let mut other = tree(false);
        let bus = other.add_child("amba");
        let r = bus.add_child("r");
        r.set_strings("compatible", &["fpga-region"]);
        bus.set_cells("fpga-mgr", &[1]);
        assert!(region_manager(&other, "/amba/r").is_none());
    }

    #[test]
    fn bridges_must_be_nodes_a_bridge_driver_binds() {
        let mut t = tree(true);
        let slot = t
            .find("/fpga-full/fpga-region-slot0")
            .expect("slot")
            .clone();
        assert_eq!(
            region_bridges(&t, &slot).expect("bridges"),
            ["/fpga-full/pr-decoupler@0"]
        );
        let mut bad = slot.clone();
        bad.set_cells("fpga-bridges", &[1]);
        let err = region_bridges(&t, &bad).expect_err("the manager is no bridge");
        assert!(err.contains("no bridge driver"), "{err}");
        bad.set_cells("fpga-bridges", &[9]);
        assert!(region_bridges(&t, &bad).is_err());
        t.children.clear();
    }

    #[test]
    fn overlay_labels_must_be_in_the_live_symbols() {
        let mut overlay = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        overlay
            .add_child("__fixups__")
            .set_string("fpga_full", "/fragment@0:target:0");
        let mut live = tree(true);
        assert!(resolve_fixups(&overlay, &live).is_err());
        live.add_child("__symbols__")
            .set_string("fpga_full", "/fpga-full");
        assert_eq!(
            resolve_fixups(&overlay, &live).expect("resolves"),
            ["fpga_full"]
        );
    }

    #[test]
    fn firmware_names_are_relative() {
        assert!(firmware_relative("fabricd/staged/slot0.bin").is_ok());
        for bad in ["/lib/firmware/x.bin", "../x.bin", "", "a/../../b"] {
            assert!(firmware_relative(bad).is_err(), "{bad}");
        }
    }
}
