//! The device tree: the live tree, blobs, and discovery of the fabric.
//!
//! Two sources, one model ([`DtNode`]):
//! - the live tree, `/proc/device-tree`: one directory per node, one file per
//!   property with the raw big-endian bytes. It includes overlays applied
//!   after boot, so it is the only place that says which PR overlay is live
//!   (`/sys/firmware/fdt` is the blob the kernel booted with and never shows
//!   an overlay);
//! - `.dtb`/`.dtbo` blobs, read and written in `blob.rs`, which trusts no
//!   offset or length in them.
//!
//! [`discover`] (in `discover.rs`) finds the shell, its PR slots and its DMA
//! buffer, and says precisely what it expected when something is missing.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

mod blob;
mod discover;

pub use blob::{BlobError, MAX_DEPTH};

pub use discover::{
    discover, discover_live, slot_overlay, DmaNode, DmaProvider, ShellNode, SlotNode, Topology,
};

/// Why a device tree could not be read or did not describe a fabric.
#[derive(Debug, thiserror::Error)]
pub enum DtError {
    #[error("reading the device tree at {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: not a valid flattened device tree: {source}")]
    Blob { path: PathBuf, source: BlobError },
    #[error("device tree {source_name}: no {what} (expected {expected})")]
    Missing {
        source_name: String,
        what: &'static str,
        expected: &'static str,
    },
    #[error("device tree node {node}: property {property} {problem}")]
    BadProperty {
        node: String,
        property: &'static str,
        problem: String,
    },
}

/// A device-tree node with its properties and children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DtNode {
    /// The node name with its unit address (`fpga-region@0`); empty for `/`.
    pub name: String,
    /// The full path (`/amba/fpga-region@0`).
    pub path: String,
    pub props: BTreeMap<String, Vec<u8>>,
    pub children: Vec<DtNode>,
}

impl DtNode {
    /// Reads a tree laid out as `/proc/device-tree` is.
    pub fn from_dir(dir: &Path) -> Result<DtNode, DtError> {
        Self::read_dir(dir, String::new(), "/".to_owned())
    }

    fn read_dir(dir: &Path, name: String, path: String) -> Result<DtNode, DtError> {
        let err = |source| DtError::Read {
            path: dir.to_owned(),
            source,
        };
        let mut node = DtNode {
            name,
            path,
            ..DtNode::default()
        };
        let mut entries: Vec<_> = fs::read_dir(dir)
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let entry_path = entry.path();
            if entry_path.is_dir() {
                let child_path = if node.path == "/" {
                    format!("/{file_name}")
                } else {
                    format!("{}/{file_name}", node.path)
                };
                node.children
                    .push(Self::read_dir(&entry_path, file_name, child_path)?);
            } else {
                let value = fs::read(&entry_path).map_err(|source| DtError::Read {
                    path: entry_path.clone(),
                    source,
                })?;
                node.props.insert(file_name, value);
            }
        }
        Ok(node)
    }

    /// Writes the tree as the kernel shows it under `/proc/device-tree`.
    pub fn write_dir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        for (name, value) in &self.props {
            fs::write(dir.join(name), value)?;
        }
        for child in &self.children {
            child.write_dir(&dir.join(&child.name))?;
        }
        Ok(())
    }

    /// Every node of the tree, depth first.
    pub fn walk(&self) -> Vec<&DtNode> {
        let mut out = vec![self];
        for child in &self.children {
            out.extend(child.walk());
        }
        out
    }

    /// The first node, depth first, that `pred` accepts, mutably.
    pub fn find_mut_by(&mut self, pred: &dyn Fn(&DtNode) -> bool) -> Option<&mut DtNode> {
        if pred(self) {
            return Some(self);
        }
        self.children.iter_mut().find_map(|c| c.find_mut_by(pred))
    }

    /// The node at `path`.
    pub fn find(&self, path: &str) -> Option<&DtNode> {
        self.walk().into_iter().find(|n| n.path == path)
    }

    /// The node name without its unit address.
    pub fn base_name(&self) -> &str {
        self.name.split('@').next().unwrap_or(&self.name)
    }

    /// The strings of a string-list property (`compatible`).
    pub fn strings(&self, prop: &str) -> Vec<&str> {
        match self.props.get(prop) {
            Some(v) => v
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .filter_map(|s| std::str::from_utf8(s).ok())
                .collect(),
            None => Vec::new(),
        }
    }

    /// Whether `compatible` lists `compat`.
    pub fn is_compatible(&self, compat: &str) -> bool {
        self.strings("compatible").contains(&compat)
    }

    /// A single-string property.
    pub fn string(&self, prop: &'static str) -> Result<Option<String>, DtError> {
        let Some(value) = self.props.get(prop) else {
            return Ok(None);
        };
        let trimmed = value.strip_suffix(&[0]).unwrap_or(value);
        match std::str::from_utf8(trimmed) {
            Ok(s) if !s.contains('\0') => Ok(Some(s.to_owned())),
            _ => Err(self.bad(prop, "is not a single string")),
        }
    }

    /// A `u32` property (one cell).
    pub fn u32(&self, prop: &'static str) -> Result<Option<u32>, DtError> {
        match self.props.get(prop) {
            None => Ok(None),
            Some(v) if v.len() == 4 => Ok(Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]))),
            Some(v) => Err(self.bad(
                prop,
                &format!("is {} bytes, expected one 4-byte cell", v.len()),
            )),
        }
    }

    /// A size: one or two cells.
    pub fn u64_cells(&self, prop: &'static str) -> Result<Option<u64>, DtError> {
        match self.props.get(prop) {
            None => Ok(None),
            Some(v) if v.len() == 4 => Ok(Some(u64::from(u32::from_be_bytes([
                v[0], v[1], v[2], v[3],
            ])))),
            Some(v) if v.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(v);
                Ok(Some(u64::from_be_bytes(b)))
            }
            Some(v) => Err(self.bad(
                prop,
                &format!("is {} bytes, expected one or two cells", v.len()),
            )),
        }
    }

    /// Whether a boolean (empty) property is present.
    pub fn flag(&self, prop: &str) -> bool {
        self.props.contains_key(prop)
    }

    fn bad(&self, property: &'static str, problem: &str) -> DtError {
        DtError::BadProperty {
            node: self.path.clone(),
            property,
            problem: problem.to_owned(),
        }
    }

    /// Sets a string property.
    pub fn set_string(&mut self, prop: &str, value: &str) {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.props.insert(prop.to_owned(), bytes);
    }

    /// Sets a string-list property.
    pub fn set_strings(&mut self, prop: &str, values: &[&str]) {
        let mut bytes = Vec::new();
        for v in values {
            bytes.extend_from_slice(v.as_bytes());
            bytes.push(0);
        }
        self.props.insert(prop.to_owned(), bytes);
    }

    /// Sets a property of `u32` cells.
    pub fn set_cells(&mut self, prop: &str, cells: &[u32]) {
        let bytes = cells.iter().flat_map(|c| c.to_be_bytes()).collect();
        self.props.insert(prop.to_owned(), bytes);
    }

    /// Sets an empty (boolean) property.
    pub fn set_flag(&mut self, prop: &str) {
        self.props.insert(prop.to_owned(), Vec::new());
    }

    /// Adds a child named `name` and returns it.
    pub fn add_child(&mut self, name: &str) -> &mut DtNode {
        let path = if self.path == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.path)
        };
        self.children.push(DtNode {
            name: name.to_owned(),
            path,
            ..DtNode::default()
        });
        let last = self.children.len() - 1;
        &mut self.children[last]
    }
}
