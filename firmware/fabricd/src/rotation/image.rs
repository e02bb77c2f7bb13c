//! The image and the table: checked against the catalog, the board and the
//! shell before anything touches the fabric; the image then staged durably
//! for the kernel.

use std::path::Path;

use fabric_hw::bitstream;
use fabric_hw::devtree::Topology;
use fabric_hw::shell::ShellInfo;
use fabric_model::table::Table;

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
    let table = Table::from_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
    if table.engine_word() != model.engine.encode() {
        return Err(bad(format!(
            "it is for engine {:#010x}; model {} runs on {} ({})",
            table.engine_word(),
            model.name,
            model.engine_name,
            model.engine
        ))
        .into());
    }
    let identity = fabric_hw::shell::hex(&table.declared_identity());
    let crc = table.crc();
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
    })
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
