//! `fabricd inspect`: a bitstream's header, byte order and hash, and its catalog entry.

use std::path::PathBuf;

use anyhow::Context;
use fabric_hw::Root;

use crate::catalog::Catalog;

pub(super) fn inspect(
    file: &std::path::Path,
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let info = fabric_hw::bitstream::inspect(&bytes)
        .with_context(|| format!("{}: not a bitstream", file.display()))?;
    let sha256 = crate::catalog::sha256_hex(&bytes);
    // The catalog entry with this file's hash, if the catalog is there.
    let explicit = catalog.is_some();
    let catalog = super::catalog_dir(&Root::new(root), catalog);
    let entry = match Catalog::load(&catalog) {
        Ok(c) => c.models.iter().find_map(|m| {
            m.images
                .iter()
                .find(|i| i.sha256 == sha256)
                .map(|i| (m.name.clone(), i.clone()))
        }),
        Err(e) if explicit => return Err(e.into()),
        Err(_) => None,
    };
    if json {
        let v = serde_json::json!({
            "file": file,
            "bytes": bytes.len(),
            "sha256": sha256,
            "image": info,
            "user_id": info.header.as_ref().and_then(|h| h.user_id()),
            "partial": info.header.as_ref().map(|h| h.is_partial()),
            "catalog": entry.as_ref().map(|(m, i)| serde_json::json!({"model": m, "image": i})),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("{}: {} bytes, sha256 {sha256}", file.display(), bytes.len());
    match &info.header {
        Some(h) => {
            println!("  format    .bit, header of {} bytes", h.data_offset);
            println!("  design    {}", h.design_name());
            println!("  part      {}", h.part);
            println!("  built     {} {}", h.date, h.time);
            println!(
                "  user id   {}",
                h.user_id()
                    .map_or_else(|| "none".into(), |u| format!("{u:#010x}"))
            );
            println!(
                "  kind      {}",
                if h.is_partial() {
                    "partial (a PR slot's module)"
                } else {
                    "full (the whole device)"
                }
            );
        }
        None => println!("  format    .bin (no header)"),
    }
    println!(
        "  data      {} bytes at offset {}, sync word at +{}",
        info.data_len, info.data_offset, info.sync_offset
    );
    println!(
        "  order     {}",
        match info.order {
            fabric_hw::bitstream::ByteOrder::Natural => "natural (as in a .bit: AA 99 55 66)",
            fabric_hw::bitstream::ByteOrder::Swapped =>
                "byte-swapped 32-bit words (a .bin as the Zynq-7000 manager loads it)",
        }
    );
    match entry {
        Some((model, image)) => println!(
            "  catalog   model {model}, {} image {} for slots {:?}",
            image.kind, image.file, image.slots
        ),
        None => println!("  catalog   not in {}", catalog.display()),
    }
    Ok(())
}
