//! The image and the table: checked against the catalog, the board and the
//! shell before anything touches the fabric; the image then staged durably
//! for the kernel.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use fabric_hw::bitstream;
use fabric_hw::contract::EngineId;
use fabric_hw::devtree::Topology;
use fabric_hw::shell::ShellInfo;

use super::RotationError;
use crate::catalog::{self, gate, Catalog, CatalogModel, ImageKind};

/// An image checked and converted, ready to stage.
#[derive(Debug)]
pub(super) struct Checked {
    pub file: String,
    /// The configuration data as the manager loads it (byte-swapped).
    pub bin: Vec<u8>,
    /// SHA-256 of `bin`, for the load's report.
    pub sha256: String,
}

/// A model's table, read afresh and checked, ready to commit.
#[derive(Debug)]
pub(super) struct CheckedTable {
    pub bytes: Vec<u8>,
    pub sha256: String,
    /// What the slot must report once it holds it: the identity the table
    /// declares, and the CRC-32 its engine computes.
    pub identity: String,
    pub crc: u32,
    /// Bytes of a lane's keys and values the engine keeps after the table
    /// (a transformer's; 0 for a trigram table).
    pub kv_a_lane: u64,
}

/// Checks `model`'s image of `kind` for `slot`: the manifest's shell is
/// this shell, the image's hash is the manifest's (first: nothing else is
/// read from a file that fails it), and it passes the catalog's gate
/// against this board and shell, read afresh (the file may have changed
/// since the catalog was read).
pub(super) fn check(
    catalog: &Catalog,
    topology: &Topology,
    info: &ShellInfo,
    model: &CatalogModel,
    slot: u8,
    kind: ImageKind,
) -> Result<Checked, RotationError> {
    let shell_ver = format!("{}.{}", info.version_major, info.version_minor);
    if catalog.shell.major != info.version_major || catalog.shell.interface_id != info.interface_id
    {
        return Err(RotationError::WrongShell {
            manifest: format!(
                "{}.x, interface {:#010x}",
                catalog.shell.major, catalog.shell.interface_id
            ),
            shell: format!("{shell_ver}, interface {:#010x}", info.interface_id),
        });
    }
    let image = model
        .images
        .iter()
        .find(|i| i.slots.contains(&slot) && i.is(kind))
        .ok_or_else(|| RotationError::NotForSlot {
            model: model.name.to_string(),
            kind: kind.as_str(),
            slot,
            slots: model
                .images
                .iter()
                .filter(|i| i.is(kind))
                .flat_map(|i| i.slots.clone())
                .collect(),
        })?;
    let path = catalog.dir.join(&image.file);
    let bytes = catalog::read_checked(&path, &image.sha256)?;
    gate::check(image, &bytes, info.interface_id, Some(&topology.shell.part))?;
    let file = image.file.clone();
    let bin = bitstream::to_bin(&bytes).map_err(|source| RotationError::Bitstream {
        file: file.clone(),
        source,
    })?;
    let sha256 = catalog::sha256_hex(&bin);
    Ok(Checked { file, bin, sha256 })
}

/// Reads `model`'s table afresh (it may have changed since the catalog was
/// read) and checks it as the catalog did: its SHA-256, the table as its
/// engine would check it, and the identity and CRC the manifest gives.
pub(super) fn check_table(
    catalog: &Catalog,
    model: &CatalogModel,
) -> Result<CheckedTable, RotationError> {
    let path = catalog.dir.join(&model.table.file);
    let bytes = catalog::read_checked(&path, &model.table.sha256)?;
    let bad = |problem: String| catalog::CatalogError::Table {
        path: path.clone(),
        problem,
    };
    let table = fabric_model::committed::read(&bytes).map_err(|e| bad(e.to_string()))?;
    if table.engine_word != model.engine.encode() {
        return Err(bad(format!(
            "it is for engine {:#010x}; model {} runs on {} ({})",
            table.engine_word, model.name, model.engine_name, model.engine
        ))
        .into());
    }
    let identity = fabric_hw::shell::hex(&table.declared_identity);
    let crc = table.crc;
    if Some(&identity) != model.identity.as_ref() || crc != model.table.crc {
        return Err(bad(format!(
            "identity {identity} and CRC {crc:#010x}; the manifest says {} and {:#010x}",
            model.identity.as_deref().unwrap_or("none"),
            model.table.crc
        ))
        .into());
    }
    Ok(CheckedTable {
        sha256: model.table.sha256.clone(),
        bytes,
        identity,
        crc,
        kv_a_lane: table.kv_bytes_a_lane,
    })
}

/// Tables checked before, kept while their files stay as they were, so
/// that switching back to a model need not check its table again: reading,
/// hashing and parsing a table of a few megabytes is most of a switch on a
/// board's Cortex-A9. A file is as it was when its device, inode, size and
/// modification and change times are (a table written or replaced since
/// is read afresh, as git's index trusts a file's stat), and the catalog
/// still expects what it was checked against. At most `budget` bytes are
/// kept; the tables least recently checked go first.
#[derive(Debug)]
pub(super) struct CheckedTables {
    budget: usize,
    kept: Mutex<Vec<Kept>>,
}

#[derive(Debug)]
struct Kept {
    path: PathBuf,
    stamp: Stamp,
    engine: EngineId,
    table: Arc<CheckedTable>,
}

/// What a file's metadata says of its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

impl CheckedTables {
    pub fn new(budget: usize) -> CheckedTables {
        CheckedTables {
            budget,
            kept: Mutex::new(Vec::new()),
        }
    }

    /// `model`'s table checked: the one kept if its file is as it was,
    /// else read afresh and checked (`check_table`), and kept.
    pub fn check(
        &self,
        catalog: &Catalog,
        model: &CatalogModel,
    ) -> Result<Arc<CheckedTable>, RotationError> {
        let path = catalog.dir.join(&model.table.file);
        // Before the read: a file written while it is read is read afresh
        // next time.
        let stamp = Stamp::of(&path);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = kept.iter().position(|k| {
            k.path == path
                && Some(k.stamp) == stamp
                && k.engine == model.engine
                && k.table.sha256 == model.table.sha256
                && k.table.crc == model.table.crc
                && Some(&k.table.identity) == model.identity.as_ref()
        }) {
            let k = kept.remove(at);
            let table = k.table.clone();
            kept.push(k);
            return Ok(table);
        }
        kept.retain(|k| k.path != path);
        drop(kept);
        let table = Arc::new(check_table(catalog, model)?);
        let Some(stamp) = stamp else {
            return Ok(table);
        };
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| k.path != path);
        kept.push(Kept {
            path,
            stamp,
            engine: model.engine,
            table: table.clone(),
        });
        let mut total: usize = kept.iter().map(|k| k.table.bytes.len()).sum();
        while total > self.budget && !kept.is_empty() {
            total -= kept.remove(0).table.bytes.len();
        }
        Ok(table)
    }
}

/// Writes `bytes` to `path` durably: a temporary file, synced, renamed.
pub(super) fn stage(path: &Path, bytes: &[u8]) -> Result<(), RotationError> {
    let err = |source| RotationError::Stage {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(bytes).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped catalog, copied into `dir` to be changed.
    fn catalog_in(dir: &Path) -> Catalog {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams");
        for entry in std::fs::read_dir(shipped).expect("read") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        }
        Catalog::load(dir, None).expect("catalog")
    }

    #[test]
    fn a_table_checked_before_is_kept_until_its_file_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let tables = CheckedTables::new(64 << 20);
        let first = tables.check(&cat, &kjv).expect("checked");
        let again = tables.check(&cat, &kjv).expect("checked");
        assert!(Arc::ptr_eq(&first, &again), "the unchanged table is kept");

        // Rewritten in place, the same length: read afresh, and refused.
        let path = dir.path().join(&kjv.table.file);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).expect("write");
        let err = tables.check(&cat, &kjv).expect_err("changed");
        assert!(err.to_string().contains("manifest expects"), "{err}");

        // Put back: read afresh, and kept again.
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).expect("write");
        let back = tables.check(&cat, &kjv).expect("checked");
        assert!(!Arc::ptr_eq(&first, &back), "read afresh");
        assert_eq!(back.bytes, first.bytes);
    }

    #[test]
    fn tables_past_the_budget_are_let_go_least_recent_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let fortunes = cat.get("fortunes").expect("fortunes").clone();
        let both = (kjv.table.bytes + fortunes.table.bytes) as usize;
        let tables = CheckedTables::new(both - 1);
        let k1 = tables.check(&cat, &kjv).expect("kjv");
        let f1 = tables.check(&cat, &fortunes).expect("fortunes");
        let f2 = tables.check(&cat, &fortunes).expect("fortunes");
        assert!(Arc::ptr_eq(&f1, &f2), "the newest is kept");
        let k2 = tables.check(&cat, &kjv).expect("kjv");
        assert!(!Arc::ptr_eq(&k1, &k2), "the oldest was let go");

        let tables = CheckedTables::new(both);
        let k1 = tables.check(&cat, &kjv).expect("kjv");
        tables.check(&cat, &fortunes).expect("fortunes");
        let k2 = tables.check(&cat, &kjv).expect("kjv");
        assert!(Arc::ptr_eq(&k1, &k2), "both fit");
    }
}
