//! The image and the table: checked against the catalog, the board and the
//! shell before anything touches the fabric; the image then staged durably
//! for the kernel.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

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
    /// Read again under a verdict kept from an earlier check
    /// ([`CheckedTables`]), not hashed and parsed this time.
    pub kept: bool,
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
        kept: false,
    })
}

/// What checking a table found, kept while its file stays as it was, so
/// that switching back to a model need not hash and parse its table again:
/// hashing a table of a few megabytes is most of a switch on a board's
/// Cortex-A9. A file is as it was when its device, inode, size and
/// modification and change times are (a table written or replaced since is
/// checked afresh, as git's index trusts a file's stat), and the catalog
/// still expects what it was checked against.
///
/// The bytes are not kept: a switch back reads them again, and their CRC-32
/// (far cheaper than the hash) must be the one the check found, or the
/// table is checked afresh and refused. A table kept whole was 4.9 MB of
/// the idle daemon's heap, and of the hostile LAN's peak over its 64 MiB
/// (results/ab-2026-12-07.md). The engine checks the same CRC again once
/// the table is in DDR ([`super::program::commit_table`]).
#[derive(Debug, Default)]
pub(super) struct CheckedTables {
    kept: Mutex<Vec<Kept>>,
}

/// The most verdicts kept: far more tables than a catalog holds.
const KEPT: usize = 64;

#[derive(Debug)]
struct Kept {
    path: PathBuf,
    stamp: Stamp,
    engine: EngineId,
    sha256: String,
    identity: String,
    crc: u32,
    kv_a_lane: u64,
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
    /// `model`'s table checked: read again under the verdict kept if its
    /// file is as it was and its CRC-32 still the one found, else read
    /// afresh and checked ([`check_table`]), and the verdict kept.
    pub fn check(
        &self,
        catalog: &Catalog,
        model: &CatalogModel,
    ) -> Result<CheckedTable, RotationError> {
        let path = catalog.dir.join(&model.table.file);
        // Before the read: a file written while it is read is checked
        // afresh next time.
        let stamp = Stamp::of(&path);
        if let Some(table) = self.again(&path, stamp, model) {
            return Ok(table);
        }
        let table = check_table(catalog, model)?;
        let Some(stamp) = stamp else {
            return Ok(table);
        };
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| k.path != path);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Kept {
            path,
            stamp,
            engine: model.engine,
            sha256: table.sha256.clone(),
            identity: table.identity.clone(),
            crc: table.crc,
            kv_a_lane: table.kv_a_lane,
        });
        Ok(table)
    }

    /// The table read again under a verdict kept for `path`, if there is
    /// one for the file as `stamp` says it is, for what `model` expects,
    /// and the bytes read still have the CRC found. Any other verdict for
    /// the path is let go.
    fn again(
        &self,
        path: &Path,
        stamp: Option<Stamp>,
        model: &CatalogModel,
    ) -> Option<CheckedTable> {
        let (sha256, identity, crc, kv_a_lane) = {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            let at = kept.iter().position(|k| k.path == path)?;
            let k = kept.remove(at);
            let stands = Some(k.stamp) == stamp
                && k.engine == model.engine
                && k.sha256 == model.table.sha256
                && k.crc == model.table.crc
                && Some(&k.identity) == model.identity.as_ref();
            if !stands {
                return None;
            }
            let found = (k.sha256.clone(), k.identity.clone(), k.crc, k.kv_a_lane);
            // The newest last: the first to go past KEPT is the oldest.
            kept.push(k);
            found
        };
        let bytes = std::fs::read(path).ok()?;
        if crc32fast::hash(&bytes) != crc {
            log::warn!(
                "rotation: {} changed with its metadata unchanged; checking it afresh",
                path.display()
            );
            self.forget(path);
            return None;
        }
        Some(CheckedTable {
            bytes,
            sha256,
            identity,
            crc,
            kv_a_lane,
            kept: true,
        })
    }

    fn forget(&self, path: &Path) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| k.path != path);
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
    fn a_verdict_is_kept_until_the_tables_file_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let tables = CheckedTables::default();
        let first = tables.check(&cat, &kjv).expect("checked");
        assert!(!first.kept, "checked the first time");
        let again = tables.check(&cat, &kjv).expect("checked");
        assert!(again.kept, "the unchanged file's verdict is kept");
        assert_eq!(again.bytes, first.bytes, "and its bytes read again");
        assert_eq!(
            (&again.sha256, &again.identity, again.crc, again.kv_a_lane),
            (&first.sha256, &first.identity, first.crc, first.kv_a_lane)
        );

        // Rewritten in place, the same length: checked afresh, and refused.
        let path = dir.path().join(&kjv.table.file);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).expect("write");
        let err = tables.check(&cat, &kjv).expect_err("changed");
        assert!(err.to_string().contains("manifest expects"), "{err}");

        // Put back: checked afresh, and kept again.
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).expect("write");
        let back = tables.check(&cat, &kjv).expect("checked");
        assert!(!back.kept, "checked afresh");
        assert!(tables.check(&cat, &kjv).expect("checked").kept);
    }

    #[test]
    fn a_table_changed_behind_unchanged_metadata_is_checked_afresh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let tables = CheckedTables::default();
        tables.check(&cat, &kjv).expect("checked");
        // A bit flips on the card where the file's metadata cannot show it
        // (here: the verdict's stamp brought up to date by hand).
        let path = dir.path().join(&kjv.table.file);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[100] ^= 0x10;
        std::fs::write(&path, &bytes).expect("write");
        {
            let mut kept = tables.kept.lock().expect("lock");
            kept[0].stamp = Stamp::of(&path).expect("stamp");
        }
        let err = tables.check(&cat, &kjv).expect_err("changed");
        assert!(err.to_string().contains("manifest expects"), "{err}");
    }

    #[test]
    fn a_verdict_for_what_the_catalog_no_longer_expects_is_let_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let tables = CheckedTables::default();
        tables.check(&cat, &kjv).expect("checked");
        let mut other = kjv.clone();
        other.table.sha256 = "00".repeat(32);
        let err = tables.check(&cat, &other).expect_err("another hash");
        assert!(err.to_string().contains("manifest expects"), "{err}");
        assert!(!tables.check(&cat, &kjv).expect("checked").kept);
    }

    #[test]
    fn verdicts_past_the_most_kept_are_let_go_oldest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = catalog_in(dir.path());
        let kjv = cat.get("kjv").expect("kjv").clone();
        let fortunes = cat.get("fortunes").expect("fortunes").clone();
        let tables = CheckedTables::default();
        tables.check(&cat, &kjv).expect("kjv");
        tables.check(&cat, &fortunes).expect("fortunes");
        // Copies of fortunes' table under other names fill the rest, and
        // one more: kjv's verdict, the oldest, goes first.
        for i in 0..KEPT - 1 {
            let name = format!("copy{i}.ftb");
            std::fs::copy(
                dir.path().join(&fortunes.table.file),
                dir.path().join(&name),
            )
            .expect("copy");
            let mut copy = fortunes.clone();
            copy.table.file = name;
            tables.check(&cat, &copy).expect("copy");
        }
        assert_eq!(tables.kept.lock().expect("lock").len(), KEPT);
        assert!(tables.check(&cat, &fortunes).expect("fortunes").kept);
        assert!(!tables.check(&cat, &kjv).expect("kjv").kept, "let go");
    }
}
