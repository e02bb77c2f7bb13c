//! Flattened device-tree blobs (`.dtb`, `.dtbo`): reading and writing.
//!
//! The format (devicetree specification v0.4, chapter 5): a header of ten
//! big-endian u32s, a memory reservation map, the structure block (tokens:
//! `BEGIN_NODE` and its NUL-terminated name, `PROP` with its length, the
//! offset of its name in the strings block and its value, `END_NODE`,
//! `NOP`, `END`; each padded to 4 bytes) and the strings block.
//!
//! A blob comes from the card or from the kernel, so the reader trusts
//! nothing in it: every offset and length is checked against the blob
//! before it is used, nesting is bounded, and anything malformed is a
//! [`BlobError`] naming the byte where it was found. (The `fdt` crate, used
//! before, asserted on a malformed structure block: fuzzing found that a
//! corrupt blob took the daemon down.)
//!
//! # Why not `vm-fdt`
//! rust-vmm's `vm-fdt` writes blobs, and only writes them: the reader,
//! most of this file, would stay. Its writer would cost more than its 60
//! lines here. It refuses node names that start with anything but a
//! letter (0.3.0's `node_name_valid`), and an overlay is made of such
//! nodes: `__overlay__`, `__fixups__`, which rotation writes for every slot
//! load. It also refuses names this reader accepts (any UTF-8), so a tree
//! read from a blob would no longer always write back, and the fuzz target
//! `device_tree` holds that it does.

use std::collections::BTreeMap;
use std::path::Path;

use super::{DtError, DtNode};

const FDT_MAGIC: u32 = 0xd00d_feed;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;
/// The header as version 17 has it (version 16's lacks `size_dt_struct`).
const HEADER: usize = 40;
/// The version written, and the oldest read: 17 has carried the structure
/// block's size since 2007, and `dtc` writes it.
const VERSION: u32 = 17;
/// Deepest nesting read, as the kernel's `unflatten_dt_nodes()` allows
/// (`FDT_MAX_DEPTH` in drivers/of/fdt.c).
pub const MAX_DEPTH: usize = 64;

/// What is wrong with a blob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    #[error("{len} bytes, shorter than the {HEADER}-byte header")]
    Short { len: usize },
    #[error("magic {found:#010x}, not {FDT_MAGIC:#010x}")]
    Magic { found: u32 },
    #[error(
        "version {version} (compatible back to {last_compatible}); this reads version {VERSION}"
    )]
    Version { version: u32, last_compatible: u32 },
    #[error("the {block} ({start} + {len} bytes) runs past the {total}-byte blob")]
    Block {
        block: &'static str,
        start: u64,
        len: u64,
        total: usize,
    },
    #[error("the header says {declared} bytes, but the blob is {actual}")]
    TotalSize { declared: u32, actual: usize },
    #[error("structure block byte {at}: {problem}")]
    Structure { at: usize, problem: String },
    #[error("structure block byte {at}: nodes nested deeper than {MAX_DEPTH}")]
    TooDeep { at: usize },
}

impl DtNode {
    /// Parses a `.dtb` or `.dtbo` blob; `path` goes into errors.
    pub fn from_blob(bytes: &[u8], path: &Path) -> Result<DtNode, DtError> {
        parse(bytes).map_err(|source| DtError::Blob {
            path: path.to_owned(),
            source,
        })
    }

    /// The tree as a flattened device tree blob (version 17), as `dtc`
    /// writes it: a header, an empty reservation map, the structure block
    /// and the strings block.
    pub fn to_blob(&self) -> Vec<u8> {
        fn pad(buf: &mut Vec<u8>) {
            while !buf.len().is_multiple_of(4) {
                buf.push(0);
            }
        }
        fn emit(
            node: &DtNode,
            st: &mut Vec<u8>,
            strings: &mut Vec<u8>,
            offsets: &mut BTreeMap<String, u32>,
        ) {
            st.extend_from_slice(&BEGIN_NODE.to_be_bytes());
            st.extend_from_slice(node.name.as_bytes());
            st.push(0);
            pad(st);
            for (name, value) in &node.props {
                let off = *offsets.entry(name.clone()).or_insert_with(|| {
                    let off = strings.len() as u32;
                    strings.extend_from_slice(name.as_bytes());
                    strings.push(0);
                    off
                });
                st.extend_from_slice(&PROP.to_be_bytes());
                st.extend_from_slice(&(value.len() as u32).to_be_bytes());
                st.extend_from_slice(&off.to_be_bytes());
                st.extend_from_slice(value);
                pad(st);
            }
            for child in &node.children {
                emit(child, st, strings, offsets);
            }
            st.extend_from_slice(&END_NODE.to_be_bytes());
        }
        let mut st = Vec::new();
        let mut strings = Vec::new();
        emit(self, &mut st, &mut strings, &mut BTreeMap::new());
        st.extend_from_slice(&END.to_be_bytes());
        let rsvmap = HEADER as u32; // 8-aligned
        let off_struct = rsvmap + 16;
        let off_strings = off_struct + st.len() as u32;
        let total = off_strings + strings.len() as u32;
        let mut out = Vec::with_capacity(total as usize);
        for word in [
            FDT_MAGIC,
            total,
            off_struct,
            off_strings,
            rsvmap,
            VERSION,
            16,
            0,
            strings.len() as u32,
            st.len() as u32,
        ] {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.extend_from_slice(&[0u8; 16]);
        out.extend_from_slice(&st);
        out.extend_from_slice(&strings);
        out
    }
}

/// The big-endian u32 at `at`, if the slice has it.
fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The block at `start`, `len` bytes, within the blob's `total` bytes.
fn block<'a>(
    bytes: &'a [u8],
    name: &'static str,
    start: u32,
    len: u32,
) -> Result<&'a [u8], BlobError> {
    let (start64, len64) = (u64::from(start), u64::from(len));
    let err = BlobError::Block {
        block: name,
        start: start64,
        len: len64,
        total: bytes.len(),
    };
    let start = usize::try_from(start).map_err(|_| err.clone())?;
    let end = start.checked_add(usize::try_from(len).map_err(|_| err.clone())?);
    end.and_then(|end| bytes.get(start..end)).ok_or(err)
}

fn parse(bytes: &[u8]) -> Result<DtNode, BlobError> {
    let word = |i: usize| be32(bytes, 4 * i).ok_or(BlobError::Short { len: bytes.len() });
    let magic = word(0)?;
    if magic != FDT_MAGIC {
        return Err(BlobError::Magic { found: magic });
    }
    if bytes.len() < HEADER {
        return Err(BlobError::Short { len: bytes.len() });
    }
    let (total, off_struct, off_strings) = (word(1)?, word(2)?, word(3)?);
    let (version, last_compatible) = (word(5)?, word(6)?);
    let (size_strings, size_struct) = (word(8)?, word(9)?);
    if version < VERSION || last_compatible > VERSION {
        return Err(BlobError::Version {
            version,
            last_compatible,
        });
    }
    // The blob may be followed by padding (a file rounded up), never cut.
    let blob = bytes
        .get(..usize::try_from(total).unwrap_or(usize::MAX))
        .ok_or(BlobError::TotalSize {
            declared: total,
            actual: bytes.len(),
        })?;
    let structure = block(blob, "structure block", off_struct, size_struct)?;
    let strings = block(blob, "strings block", off_strings, size_strings)?;
    Walk {
        st: structure,
        strings,
        at: 0,
    }
    .tree()
}

/// A walk of the structure block.
struct Walk<'a> {
    st: &'a [u8],
    strings: &'a [u8],
    /// The next token's offset in the structure block.
    at: usize,
}

impl Walk<'_> {
    fn bad(&self, at: usize, problem: impl Into<String>) -> BlobError {
        BlobError::Structure {
            at,
            problem: problem.into(),
        }
    }

    /// The next token other than `NOP`, and its offset.
    fn token(&mut self) -> Result<(u32, usize), BlobError> {
        loop {
            let at = self.at;
            let token = be32(self.st, at)
                .ok_or_else(|| self.bad(at, "the structure block ends inside the tree"))?;
            self.at += 4;
            if token != NOP {
                return Ok((token, at));
            }
        }
    }

    /// Moves past `len` bytes and the padding to the next token.
    fn skip(&mut self, len: usize) -> Result<(), BlobError> {
        let end = self
            .at
            .checked_add(len)
            .and_then(|e| e.checked_next_multiple_of(4))
            .filter(|&e| e <= self.st.len())
            .ok_or_else(|| self.bad(self.at, format!("{len} bytes run past the block")))?;
        self.at = end;
        Ok(())
    }

    /// The tree: the root node, then `END`.
    fn tree(mut self) -> Result<DtNode, BlobError> {
        let (token, at) = self.token()?;
        if token != BEGIN_NODE {
            return Err(self.bad(at, format!("token {token}, not the root's BEGIN_NODE")));
        }
        // The root's name is empty in every blob dtc writes; whatever it
        // is, the root is `/`.
        self.name()?;
        // The node being read, and its ancestors (the root first): a loop
        // rather than recursion, so a blob's nesting costs no stack.
        let mut node = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        let mut open: Vec<DtNode> = Vec::new();
        loop {
            let (token, at) = self.token()?;
            match token {
                PROP => {
                    let len = be32(self.st, self.at)
                        .ok_or_else(|| self.bad(at, "the block ends inside a property"))?;
                    let nameoff = be32(self.st, self.at + 4)
                        .ok_or_else(|| self.bad(at, "the block ends inside a property"))?;
                    self.at += 8;
                    let name = self.string(nameoff, at)?.to_owned();
                    let len = len as usize;
                    let start = self.at;
                    self.skip(len)?;
                    node.props
                        .insert(name, self.st[start..start + len].to_vec());
                }
                BEGIN_NODE => {
                    // The root is depth 1; the new node would be one below
                    // the current one.
                    if open.len() + 2 > MAX_DEPTH {
                        return Err(BlobError::TooDeep { at });
                    }
                    let name = self.name()?;
                    let path = if node.path == "/" {
                        format!("/{name}")
                    } else {
                        format!("{}/{name}", node.path)
                    };
                    open.push(std::mem::replace(
                        &mut node,
                        DtNode {
                            name,
                            path,
                            ..DtNode::default()
                        },
                    ));
                }
                END_NODE => match open.pop() {
                    Some(parent) => {
                        let child = std::mem::replace(&mut node, parent);
                        node.children.push(child);
                    }
                    None => break,
                },
                END => return Err(self.bad(at, "END inside a node")),
                other => return Err(self.bad(at, format!("unknown token {other:#x}"))),
            }
        }
        let (token, at) = self.token()?;
        if token != END {
            return Err(self.bad(at, format!("token {token} after the root node, not END")));
        }
        Ok(node)
    }

    /// A node's name: NUL-terminated UTF-8, then padding.
    fn name(&mut self) -> Result<String, BlobError> {
        let start = self.at;
        let rest = &self.st[start.min(self.st.len())..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.bad(start, "a node name runs past the block"))?;
        let name = std::str::from_utf8(&rest[..len])
            .map_err(|_| self.bad(start, "a node name is not UTF-8"))?
            .to_owned();
        self.skip(len + 1)?;
        Ok(name)
    }

    /// The property name at `off` in the strings block.
    fn string(&self, off: u32, at: usize) -> Result<&str, BlobError> {
        let rest = usize::try_from(off)
            .ok()
            .and_then(|off| self.strings.get(off..))
            .ok_or_else(|| self.bad(at, format!("name offset {off} is past the strings block")))?;
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.bad(at, "a property name runs past the strings block"))?;
        std::str::from_utf8(&rest[..len]).map_err(|_| self.bad(at, "a property name is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> DtNode {
        let mut root = DtNode {
            path: "/".into(),
            ..DtNode::default()
        };
        root.set_string("model", "test board");
        let amba = root.add_child("amba_pl@0");
        amba.set_cells("#address-cells", &[1]);
        let region = amba.add_child("fpga-region@0");
        region.set_strings("compatible", &["fpga-region"]);
        region.set_flag("partial-fpga-config");
        root.add_child("chosen")
            .set_string("bootargs", "console=ttyPS0");
        root
    }

    /// Offsets of every `token` in a blob's structure block (written by
    /// `to_blob`, so at 4-byte steps from byte 56).
    fn tokens(blob: &[u8], token: u32) -> Vec<usize> {
        (56..blob.len() - 3)
            .step_by(4)
            .filter(|&i| be32(blob, i) == Some(token))
            .collect()
    }

    fn err(blob: &[u8]) -> BlobError {
        parse(blob).expect_err("malformed")
    }

    #[test]
    fn a_child_without_its_end_node_is_an_error_not_a_panic() {
        // Found by fuzzing (fuzz/corpus/device_tree/crash-fdt-bad-node.dtb):
        // the fdt crate asserted that a child's END_NODE was there.
        let mut blob = sample().to_blob();
        let ends = tokens(&blob, END_NODE);
        let first = ends[0];
        blob[first..first + 4].copy_from_slice(&0x60u32.to_be_bytes());
        let e = err(&blob);
        assert!(
            matches!(&e, BlobError::Structure { problem, .. } if problem.contains("0x60")),
            "{e}"
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let blob = sample().to_blob();
        for cut in 0..blob.len() {
            assert!(parse(&blob[..cut]).is_err(), "cut at {cut}");
        }
        // Padding after the blob is not part of it.
        let mut padded = blob.clone();
        padded.extend_from_slice(&[0; 64]);
        assert_eq!(parse(&padded), parse(&blob));
    }

    #[test]
    fn header_fields_are_checked_before_use() {
        let blob = sample().to_blob();
        let with = |word: usize, value: u32| {
            let mut b = blob.clone();
            b[4 * word..4 * word + 4].copy_from_slice(&value.to_be_bytes());
            b
        };
        assert!(matches!(err(&with(0, 0x1234)), BlobError::Magic { .. }));
        assert!(matches!(
            err(&with(1, u32::MAX)),
            BlobError::TotalSize { .. }
        ));
        assert!(matches!(
            err(&with(2, u32::MAX - 2)),
            BlobError::Block { .. }
        ));
        assert!(matches!(err(&with(3, 1 << 20)), BlobError::Block { .. }));
        assert!(matches!(err(&with(5, 16)), BlobError::Version { .. }));
        assert!(matches!(err(&with(9, u32::MAX)), BlobError::Block { .. }));
        // A property's name offset past the strings block.
        let mut b = blob.clone();
        let prop = tokens(&blob, PROP)[0];
        b[prop + 8..prop + 12].copy_from_slice(&u32::MAX.to_be_bytes());
        let e = err(&b);
        assert!(e.to_string().contains("past the strings block"), "{e}");
        // A property's length past the structure block.
        let mut b = blob.clone();
        b[prop + 4..prop + 8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(err(&b), BlobError::Structure { .. }));
    }

    #[test]
    fn nesting_is_bounded_as_the_kernel_bounds_it() {
        let nested = |depth: usize| {
            let mut root = DtNode {
                path: "/".into(),
                ..DtNode::default()
            };
            let mut node = &mut root;
            for _ in 1..depth {
                node = node.add_child("n");
            }
            root.to_blob()
        };
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        assert!(matches!(
            err(&nested(MAX_DEPTH + 1)),
            BlobError::TooDeep { .. }
        ));
    }

    proptest! {
        #[test]
        fn a_corrupt_blob_is_an_error_or_a_tree_that_round_trips(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
        ) {
            let mut blob = sample().to_blob();
            for (at, byte) in edits {
                let i = at.index(blob.len());
                blob[i] = byte;
            }
            if let Ok(tree) = parse(&blob) {
                prop_assert_eq!(parse(&tree.to_blob()), Ok(tree));
            }
        }
    }
}
