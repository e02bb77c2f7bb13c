//! `fabricd inspect`: a bitstream's header, byte order, configuration
//! stream (IDCODE, partial or full) and hash, and its catalog entry.

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
    let stream = fabric_hw::bitstream::stream::parse(&bytes);
    let device = stream
        .as_ref()
        .ok()
        .and_then(|s| fabric_hw::bitstream::idcode::by_idcode(s.idcode))
        .map(|d| d.name());
    // The catalog entry with this file's hash, if the catalog is there.
    let explicit = catalog.is_some();
    let catalog = super::catalog_dir(&Root::new(root), catalog);
    let entry = match Catalog::load(&catalog, None) {
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
            "stream": stream.as_ref().ok(),
            "stream_error": stream.as_ref().err().map(ToString::to_string),
            "device": device,
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
    match &stream {
        Ok(s) => {
            println!(
                "  idcode    {:#010x} ({})",
                s.idcode,
                device.unwrap_or("a part fabricd does not know")
            );
            println!(
                "  stream    {}",
                if s.starts_up {
                    "full (issues START, the startup sequence)"
                } else {
                    "partial (no START)"
                }
            );
        }
        Err(e) => println!("  stream    unreadable: {e}"),
    }
    match entry {
        Some((model, image)) => println!(
            "  catalog   model {model}, {} image {} for slots {:?}{}",
            image
                .kind
                .as_ref()
                .map_or_else(Clone::clone, |k| k.to_string()),
            image.file,
            image.slots,
            image
                .problem
                .as_ref()
                .map(|p| format!(", UNUSABLE: {p}"))
                .unwrap_or_default()
        ),
        None => println!("  catalog   not in {}", catalog.display()),
    }
    Ok(())
}
