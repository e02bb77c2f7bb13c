//! Discovery: the shell, its PR slots and its DMA buffer in a device tree.

use std::path::Path;

use super::{DtError, DtNode};
use crate::contract::{MAX_SLOTS, SHELL_COMPATIBLE};

/// The static shell's node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellNode {
    pub path: String,
    /// The names `uio_pdrv_genirq` may give the shell's UIO device, to try
    /// in order: `linux,uio-name` alone when the node sets it; else the node
    /// name with its unit address (`fabric-shell@43c00000`: Linux 6.12
    /// names it `%pfwP`, seen on the real-kernel rig) and then without it
    /// (`%pOFn`, older kernels).
    pub uio_names: Vec<String>,
    /// The FPGA part the design was built for.
    pub part: String,
    /// The static region's interface id; partial images must match it.
    pub interface_id: u32,
}

/// A PR slot's `fpga-region` node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotNode {
    pub index: u8,
    pub path: String,
    /// `firmware-name`, when an overlay has programmed the region.
    pub firmware_name: Option<String>,
    pub partial: bool,
}

/// The DMA buffer, as the device tree describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaNode {
    /// The node that describes it: the u-dma-buf node, or the shell's.
    pub path: String,
    pub provider: DmaProvider,
    pub size: u64,
}

/// Where the DMA buffer comes from (see [`crate::dma`] for each one's cache
/// rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DmaProvider {
    /// A u-dma-buf node: `/dev/<device_name>`.
    UDmaBuf { device_name: String },
    /// A map of the shell's UIO device: the shell's `reg` entry named
    /// `"buffer"` in `reg-names`, which is UIO map `index`.
    ShellMap { index: usize },
}

impl DmaNode {
    /// A short description for logs and `fabricd probe`.
    pub fn describe(&self) -> String {
        match &self.provider {
            DmaProvider::UDmaBuf { device_name } => format!("u-dma-buf {device_name}"),
            DmaProvider::ShellMap { index } => format!("the shell's UIO map {index} (\"buffer\")"),
        }
    }
}

/// What the device tree says about the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub shell: ShellNode,
    pub slots: Vec<SlotNode>,
    pub dma: DmaNode,
}

/// Finds the shell, the PR slots and the DMA buffer in `tree`; `source_name`
/// (a path) goes into errors.
pub fn discover(tree: &DtNode, source_name: &str) -> Result<Topology, DtError> {
    let missing = |what, expected| DtError::Missing {
        source_name: source_name.to_owned(),
        what,
        expected,
    };
    let nodes = tree.walk();

    let shell = nodes
        .iter()
        .find(|n| n.is_compatible(SHELL_COMPATIBLE))
        .ok_or_else(|| {
            missing(
                "shell node",
                "a node with compatible = \"fabricd,shell-1.0\", \"generic-uio\"",
            )
        })?;
    if !shell.is_compatible("generic-uio") {
        return Err(DtError::BadProperty {
            node: shell.path.clone(),
            property: "compatible",
            problem: "lacks \"generic-uio\", so uio_pdrv_genirq will not bind it".into(),
        });
    }
    let uio_names = match shell.string("linux,uio-name")? {
        Some(name) => vec![name],
        None => {
            let full = shell.path.rsplit('/').next().unwrap_or_default();
            let mut names = vec![full.to_owned()];
            if shell.base_name() != full {
                names.push(shell.base_name().to_owned());
            }
            names
        }
    };
    let part = shell.string("fabricd,part")?.ok_or_else(|| {
        shell.bad(
            "fabricd,part",
            "is missing (the FPGA part, e.g. \"xczu5ev-sfvc784-2-i\")",
        )
    })?;
    let interface_id = shell.u32("fabricd,interface-id")?.ok_or_else(|| {
        shell.bad(
            "fabricd,interface-id",
            "is missing (the static region's interface id)",
        )
    })?;

    let mut slots = Vec::new();
    for node in nodes.iter().filter(|n| n.is_compatible("fpga-region")) {
        let Some(index) = node.u32("fabricd,slot")? else {
            continue; // the full-device region, or a region that is not ours
        };
        if index as usize >= MAX_SLOTS {
            return Err(node.bad(
                "fabricd,slot",
                &format!("is {index}, the contract allows at most {MAX_SLOTS} slots"),
            ));
        }
        slots.push(SlotNode {
            index: index as u8,
            path: node.path.clone(),
            firmware_name: node.string("firmware-name")?,
            partial: node.flag("partial-fpga-config"),
        });
    }
    if slots.is_empty() {
        return Err(missing(
            "PR slot",
            "fpga-region nodes with a fabricd,slot property",
        ));
    }
    slots.sort_by_key(|s| s.index);
    for (i, slot) in slots.iter().enumerate() {
        if usize::from(slot.index) != i {
            return Err(DtError::BadProperty {
                node: slot.path.clone(),
                property: "fabricd,slot",
                problem: format!(
                    "is {}, but slots must be numbered 0..{} without gaps or repeats",
                    slot.index,
                    slots.len()
                ),
            });
        }
    }

    let dma = match shell_buffer(tree, shell)? {
        Some(node) => node,
        None => {
            let dma = nodes
                .iter()
                .find(|n| n.is_compatible("ikwzm,u-dma-buf"))
                .ok_or_else(|| {
                    missing(
                        "DMA buffer",
                        "a node with compatible = \"ikwzm,u-dma-buf\", or a shell reg entry named \"buffer\" in reg-names",
                    )
                })?;
            let device_name = dma
                .string("device-name")?
                .ok_or_else(|| dma.bad("device-name", "is missing"))?;
            let size = dma
                .u64_cells("size")?
                .ok_or_else(|| dma.bad("size", "is missing"))?;
            DmaNode {
                path: dma.path.clone(),
                provider: DmaProvider::UDmaBuf { device_name },
                size,
            }
        }
    };

    Ok(Topology {
        shell: ShellNode {
            path: shell.path.clone(),
            uio_names,
            part,
            interface_id,
        },
        slots,
        dma,
    })
}

/// The buffer as a map of the shell's UIO device, when the shell's
/// `reg-names` names one `"buffer"`. uio_pdrv_genirq makes one map per
/// `reg` entry, in order, so the entry's index is the map's; the register
/// window must stay map 0, so `reg-names` must start with `"registers"`.
fn shell_buffer(tree: &DtNode, shell: &DtNode) -> Result<Option<DmaNode>, DtError> {
    let names = shell.strings("reg-names");
    let Some(index) = names.iter().position(|n| *n == "buffer") else {
        return Ok(None);
    };
    if names.first() != Some(&"registers") {
        return Err(shell.bad(
            "reg-names",
            &format!(
                "is {names:?}: the register window must be the first entry, named \"registers\" (UIO map 0)"
            ),
        ));
    }
    let reg = reg_entries(tree, shell)?;
    let (_, size) = *reg.get(index).ok_or_else(|| {
        shell.bad(
            "reg",
            &format!(
                "has {} entries, but reg-names names entry {index} \"buffer\"",
                reg.len()
            ),
        )
    })?;
    Ok(Some(DmaNode {
        path: shell.path.clone(),
        provider: DmaProvider::ShellMap { index },
        size,
    }))
}

/// A node's `reg` as (address, size) pairs, in the cells its parent
/// declares (`#address-cells` 2 and `#size-cells` 1 when it declares none,
/// as the devicetree specification says).
fn reg_entries(tree: &DtNode, node: &DtNode) -> Result<Vec<(u64, u64)>, DtError> {
    let parent_path = match node.path.rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((p, _)) => p,
    };
    let parent = tree.find(parent_path);
    let cells = |prop: &'static str, default: usize| -> Result<usize, DtError> {
        match parent.map(|p| p.u32(prop)).transpose()?.flatten() {
            Some(n @ 1..=2) => Ok(n as usize),
            None => Ok(default),
            Some(n) => Err(DtError::BadProperty {
                node: parent_path.to_owned(),
                property: prop,
                problem: format!("is {n}; fabricd reads addresses and sizes of 1 or 2 cells"),
            }),
        }
    };
    let (ac, sc) = (cells("#address-cells", 2)?, cells("#size-cells", 1)?);
    let raw = node.props.get("reg").map(Vec::as_slice).unwrap_or_default();
    let entry = (ac + sc) * 4;
    if raw.is_empty() || !raw.len().is_multiple_of(entry) {
        return Err(node.bad(
            "reg",
            &format!(
                "is {} bytes, not a whole number of ({ac} + {sc})-cell entries",
                raw.len()
            ),
        ));
    }
    let value = |b: &[u8]| {
        b.chunks_exact(4).fold(0u64, |v, c| {
            (v << 32) | u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        })
    };
    Ok(raw
        .chunks_exact(entry)
        .map(|e| (value(&e[..ac * 4]), value(&e[ac * 4..])))
        .collect())
}

/// The overlay that programs PR slot region `region_path` with
/// `firmware_name` (relative to `/lib/firmware`): a fragment targeting the
/// region by path, with `firmware-name` and `partial-fpga-config`. The
/// region's `fpga-bridges` (the PR decoupler) are in the base tree already.
pub fn slot_overlay(region_path: &str, firmware_name: &str) -> DtNode {
    let mut root = DtNode {
        path: "/".into(),
        ..DtNode::default()
    };
    let fragment = root.add_child("fragment@0");
    fragment.set_string("target-path", region_path);
    let overlay = fragment.add_child("__overlay__");
    overlay.set_string("firmware-name", firmware_name);
    overlay.set_flag("partial-fpga-config");
    overlay.set_cells("region-unfreeze-timeout-us", &[4]);
    overlay.set_cells("region-freeze-timeout-us", &[4]);
    root
}

/// Reads the live tree under `dir` (normally `/proc/device-tree`) and
/// discovers the fabric in it.
pub fn discover_live(dir: &Path) -> Result<Topology, DtError> {
    let tree = DtNode::from_dir(dir)?;
    discover(&tree, &dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample_tree(slots: u32) -> DtNode {
        let mut root = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        root.set_string("model", "test board");
        let amba = root.add_child("amba_pl@0");
        let shell = amba.add_child("fabric-shell@a0000000");
        shell.set_strings("compatible", &[SHELL_COMPATIBLE, "generic-uio"]);
        shell.set_string("fabricd,part", "xczu5ev-sfvc784-2-i");
        shell.set_cells("fabricd,interface-id", &[0x5eed_0001]);
        for s in 0..slots {
            let region = amba.add_child(&format!("fpga-region@{s}"));
            region.set_strings("compatible", &["fpga-region"]);
            region.set_cells("fabricd,slot", &[s]);
        }
        let dma = amba.add_child("udmabuf@0");
        dma.set_strings("compatible", &["ikwzm,u-dma-buf"]);
        dma.set_string("device-name", "udmabuf-fabric");
        dma.set_cells("size", &[0x0040_0000]);
        root
    }

    #[test]
    fn discovers_through_a_written_live_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        sample_tree(2).write_dir(dir.path()).expect("write");
        let topo = discover_live(dir.path()).expect("discover");
        assert_eq!(
            topo.shell.uio_names,
            ["fabric-shell@a0000000", "fabric-shell"]
        );
        assert_eq!(topo.shell.path, "/amba_pl@0/fabric-shell@a0000000");
        assert_eq!(topo.shell.interface_id, 0x5eed_0001);
        assert_eq!(topo.slots.len(), 2);
        assert_eq!(topo.slots[1].path, "/amba_pl@0/fpga-region@1");
        assert_eq!(
            topo.dma.provider,
            DmaProvider::UDmaBuf {
                device_name: "udmabuf-fabric".into()
            }
        );
        assert_eq!(topo.dma.size, 0x40_0000);
    }

    #[test]
    fn a_shell_map_named_buffer_is_the_buffer() {
        let mut tree = sample_tree(2);
        let amba = &mut tree.children[0];
        amba.set_cells("#address-cells", &[1]);
        amba.set_cells("#size-cells", &[1]);
        amba.children.retain(|n| !n.name.starts_with("udmabuf"));
        let shell = &mut amba.children[0];
        shell.set_cells("reg", &[0x43c0_0000, 0x1000, 0x4800_0000, 0x40_0000]);
        shell.set_strings("reg-names", &["registers", "buffer"]);
        let topo = discover(&tree, "t").expect("discover");
        assert_eq!(topo.dma.provider, DmaProvider::ShellMap { index: 1 });
        assert_eq!(topo.dma.size, 0x40_0000);
        assert_eq!(topo.dma.path, topo.shell.path);

        // Two-cell addresses, one-cell sizes: the default.
        let amba = &mut tree.children[0];
        amba.props.remove("#address-cells");
        amba.props.remove("#size-cells");
        amba.children[0].set_cells("reg", &[0, 0xa000_0000, 0x1000, 0x8, 0, 0x20_0000]);
        assert_eq!(discover(&tree, "t").expect("discover").dma.size, 0x20_0000);

        // The registers must stay map 0, and reg must have the entry.
        let shell = &mut tree.children[0].children[0];
        shell.set_strings("reg-names", &["buffer", "registers"]);
        let err = discover(&tree, "t").expect_err("buffer first");
        assert!(err.to_string().contains("\"registers\""), "{err}");
        let shell = &mut tree.children[0].children[0];
        shell.set_strings("reg-names", &["registers", "x", "buffer"]);
        let err = discover(&tree, "t").expect_err("no third entry");
        assert!(err.to_string().contains("entry 2"), "{err}");
    }

    #[test]
    fn blobs_round_trip_through_the_blob_reader() {
        let tree = sample_tree(3);
        let blob = tree.to_blob();
        let back = DtNode::from_blob(&blob, Path::new("mem")).expect("parse");
        assert_eq!(back, tree);
        let ov = slot_overlay("/amba_pl@0/fpga-region@1", "fabricd/staged/slot1.bin");
        let back = DtNode::from_blob(&ov.to_blob(), Path::new("mem")).expect("overlay");
        let node = back.find("/fragment@0/__overlay__").expect("overlay node");
        assert_eq!(
            node.string("firmware-name").expect("ok").as_deref(),
            Some("fabricd/staged/slot1.bin")
        );
        assert!(node.flag("partial-fpga-config"));
    }

    #[test]
    fn garbage_blobs_are_refused() {
        assert!(DtNode::from_blob(b"not a device tree", Path::new("x.dtb")).is_err());
        let mut blob = sample_tree(1).to_blob();
        blob.truncate(blob.len() / 2);
        let err = DtNode::from_blob(&blob, Path::new("half.dtb")).expect_err("truncated");
        assert!(err.to_string().contains("half.dtb"), "{err}");
    }

    #[test]
    fn uio_name_property_wins() {
        let mut tree = sample_tree(1);
        let shell = tree.children[0]
            .children
            .iter_mut()
            .find(|n| n.name.starts_with("fabric-shell"))
            .expect("shell");
        shell.set_string("linux,uio-name", "shell0");
        assert_eq!(
            discover(&tree, "t").expect("ok").shell.uio_names,
            ["shell0"]
        );
    }

    #[test]
    fn missing_pieces_are_named() {
        let mut tree = sample_tree(1);
        tree.children[0]
            .children
            .retain(|n| !n.name.starts_with("udmabuf"));
        let err = discover(&tree, "/proc/device-tree").expect_err("no dma");
        assert!(err.to_string().contains("ikwzm,u-dma-buf"), "{err}");

        let tree = DtNode::default();
        let err = discover(&tree, "/proc/device-tree").expect_err("nothing");
        assert!(err.to_string().contains("fabricd,shell-1.0"), "{err}");

        let mut tree = sample_tree(2);
        tree.children[0].children[2].set_cells("fabricd,slot", &[0]);
        let err = discover(&tree, "t").expect_err("duplicate slot");
        assert!(err.to_string().contains("without gaps or repeats"), "{err}");

        let mut tree = sample_tree(1);
        tree.children[0].children[0]
            .props
            .insert("fabricd,interface-id".into(), vec![1, 2]);
        let err = discover(&tree, "t").expect_err("short cell");
        assert!(err.to_string().contains("fabricd,interface-id"), "{err}");
    }
}
