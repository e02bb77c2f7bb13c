//! The live tree's property files (`/proc/device-tree`): what
//! `DtNode::from_dir` reads is each file's raw bytes, and what parses them
//! is the property accessors and discovery (`fabric_hw::devtree::discover`,
//! as `discover_live` calls it).
//!
//! The input is a live tree packed as records: a file's path under the tree
//! (`/`-separated; the last part is the property, the others its nodes), a
//! NUL, a big-endian u16 length and the file's bytes. Decoding that is the
//! harness's, not under test: a record that runs out ends the tree. The
//! tree is built in memory as `from_dir` would build it, not written to
//! disk, so a run is not the file system's speed.
//!
//! Beyond not panicking: a discovery that succeeds names a shell node with
//! a UIO name and slots numbered 0..n, each a `fpga-region` node of the
//! tree; an error says what is wrong.
#![no_main]

use fabric_hw::devtree::{discover, DtNode};
use libfuzzer_sys::fuzz_target;

/// Properties the daemon reads, each through its accessor.
const STRINGS: &[&str] = &[
    "firmware-name",
    "device-name",
    "fabricd,part",
    "linux,uio-name",
];
const CELLS: &[&str] = &[
    "fabricd,slot",
    "fabricd,interface-id",
    "#address-cells",
    "#size-cells",
];

fuzz_target!(|input: &[u8]| {
    let tree = unpack(input);
    for node in tree.walk() {
        for &p in STRINGS {
            let _ = node.string(p);
        }
        for &p in CELLS {
            let _ = node.u32(p);
        }
        let _ = node.u64_cells("size");
        let _ = node.strings("compatible");
    }
    match discover(&tree, "/proc/device-tree") {
        Ok(topo) => {
            assert!(!topo.shell.uio_names.is_empty());
            assert!(!topo.slots.is_empty());
            for (i, slot) in topo.slots.iter().enumerate() {
                assert_eq!(usize::from(slot.index), i);
                let node = tree.find(&slot.path).expect("a slot is a node of the tree");
                assert!(node.is_compatible("fpga-region"));
            }
            assert!(tree.find(&topo.shell.path).is_some());
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});

/// The tree the records describe.
fn unpack(mut input: &[u8]) -> DtNode {
    let mut root = DtNode {
        path: "/".into(),
        ..DtNode::default()
    };
    while let Some(nul) = input.iter().position(|&b| b == 0) {
        let Ok(path) = std::str::from_utf8(&input[..nul]) else {
            break;
        };
        let Some(&[hi, lo]) = input.get(nul + 1..nul + 3) else {
            break;
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        let Some(value) = input.get(nul + 3..nul + 3 + len) else {
            break;
        };
        input = &input[nul + 3 + len..];
        // A directory entry's name: never empty, `.` or `..`.
        let mut parts: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != "." && *p != "..")
            .collect();
        let Some(prop) = parts.pop() else {
            continue;
        };
        let mut node = &mut root;
        for part in parts {
            node = match node.children.iter().position(|c| c.name == part) {
                Some(i) => &mut node.children[i],
                None => node.add_child(part),
            };
        }
        node.props.insert(prop.to_owned(), value.to_vec());
    }
    root
}
