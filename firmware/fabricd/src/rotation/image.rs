//! The image: checked against the catalog, the board and the shell before
//! anything touches the fabric, then staged durably for the kernel.

use std::path::Path;

use fabric_hw::bitstream;
use fabric_hw::devtree::Topology;
use fabric_hw::shell::ShellInfo;

use super::RotationError;
use crate::catalog::{self, Catalog, CatalogModel};

/// An image checked and converted, ready to stage.
#[derive(Debug)]
pub(super) struct Checked {
    pub file: String,
    /// The configuration data as the manager loads it (byte-swapped).
    pub bin: Vec<u8>,
    /// SHA-256 of `bin`: what the shell reports once the image is in.
    pub sha256: String,
}

/// Whether a `.bit` header's part names this board's part. Vivado writes
/// parts with or without the `xc` prefix and the speed grade
/// (`7z020clg484` for `xc7z020clg484-1`).
pub fn part_matches(header: &str, board: &str) -> bool {
    let norm = |p: &str| {
        let p = p.trim().to_ascii_lowercase();
        p.strip_prefix("xc").map(str::to_owned).unwrap_or(p)
    };
    let (h, b) = (norm(header), norm(board));
    !h.is_empty() && (h == b || b.starts_with(&format!("{h}-")))
}

/// Checks `model`'s image for `slot` (a partial one, or with `partial`
/// false the full one): the manifest's shell is this shell, the image's
/// hash is the manifest's (first: nothing else is read from a file that
/// fails it), its header names this board's part and the shell's
/// interface id, and it is of the kind wanted.
pub(super) fn check(
    catalog: &Catalog,
    topology: &Topology,
    info: &ShellInfo,
    model: &CatalogModel,
    slot: u8,
    partial: bool,
) -> Result<Checked, RotationError> {
    let kind = if partial { "partial" } else { "full" };
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
        .find(|i| i.slots.contains(&slot) && (i.kind == "full") != partial)
        .ok_or_else(|| RotationError::NotForSlot {
            model: model.name.to_string(),
            kind,
            slot,
            slots: model
                .images
                .iter()
                .filter(|i| (i.kind == "full") != partial)
                .flat_map(|i| i.slots.clone())
                .collect(),
        })?;
    let path = catalog.dir.join(&image.file);
    let bytes = catalog::read_checked(&path, &image.sha256)?;
    let file = image.file.clone();
    let info_img = bitstream::inspect(&bytes).map_err(|source| RotationError::Bitstream {
        file: file.clone(),
        source,
    })?;
    if let Some(h) = &info_img.header {
        if !part_matches(&h.part, &topology.shell.part) {
            return Err(RotationError::WrongPart {
                file,
                part: h.part.clone(),
                board: topology.shell.part.clone(),
            });
        }
        if h.user_id() != Some(info.interface_id) {
            return Err(RotationError::WrongInterface {
                file,
                found: h.attribute("UserID").unwrap_or("none").to_owned(),
                shell: info.interface_id,
            });
        }
        if h.is_partial() != partial {
            return Err(RotationError::WrongKind {
                file,
                found: if h.is_partial() { "partial" } else { "full" },
                wanted: kind,
            });
        }
    }
    let bin = bitstream::to_bin(&bytes).map_err(|source| RotationError::Bitstream {
        file: file.clone(),
        source,
    })?;
    let sha256 = catalog::sha256_hex(&bin);
    Ok(Checked { file, bin, sha256 })
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

    #[test]
    fn parts_match_with_or_without_prefix_and_grade() {
        assert!(part_matches("xck26-sfvc784-2LV-c", "xck26-sfvc784-2LV-c"));
        assert!(part_matches("7z020clg484", "xc7z020clg484-1"));
        assert!(part_matches("xc7z045ffg900-2", "xc7z045ffg900-2"));
        assert!(!part_matches("7z020clg400", "xc7z020clg484-1"));
        assert!(!part_matches("xczu5ev-sfvc784-2-i", "xck26-sfvc784-2LV-c"));
        assert!(!part_matches("", "xck26"));
    }
}
