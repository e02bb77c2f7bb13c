//! Device-tree blobs (`.dtb`, `.dtbo`): `fabric_hw::devtree::DtNode::from_blob`,
//! then what the daemon does with a tree: discovery of the fabric, and the
//! shell overlay rewritten with another firmware (`fpga::with_firmware`).
//!
//! Beyond not panicking: a tree read from a blob is written by `to_blob` to
//! a blob that reads back as the same tree; every error names the blob.
#![no_main]

use std::path::Path;

use fabric_hw::devtree::{discover, DtNode};
use fabric_hw::fpga::with_firmware;
use libfuzzer_sys::fuzz_target;

const FIRMWARE: &str = "fabricd/staged/slot0.bin";

fuzz_target!(|blob: &[u8]| {
    let path = Path::new("fuzz.dtb");
    let tree = match DtNode::from_blob(blob, path) {
        Ok(tree) => tree,
        Err(e) => {
            assert!(e.to_string().contains("fuzz.dtb"), "{e}");
            return;
        }
    };
    let back = DtNode::from_blob(&tree.to_blob(), path).expect("a written tree reads back");
    assert_eq!(back, tree);
    if let Err(e) = discover(&tree, "fuzz.dtb") {
        assert!(!e.to_string().is_empty());
    }
    match with_firmware(blob, path, FIRMWARE) {
        Ok(out) => {
            let rewritten = DtNode::from_blob(&out, path).expect("a rewritten overlay reads back");
            assert!(rewritten.walk().iter().any(|n| n.name == "__overlay__"
                && n.string("firmware-name").ok().flatten().as_deref() == Some(FIRMWARE)));
        }
        Err(e) => assert!(e.to_string().contains("fuzz.dtb"), "{e}"),
    }
});
