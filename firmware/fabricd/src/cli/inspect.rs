//! `fabricd inspect`: a bitstream's header, byte order, configuration
//! stream (IDCODE, partial or full) and hash, and the catalog's engine it
//! is an image of; or a model's table: its header, the identity it declares
//! and the one it has, its CRC, and the catalog's model it is.

use std::path::PathBuf;

use anyhow::Context;
use fabric_hw::Root;

use crate::catalog::Catalog;
use fabric_hw::shell::hex;
use fabric_model::table::Table;

pub(super) fn inspect(
    file: &std::path::Path,
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    if bytes.get(..4) == Some(&fabric_model::table::MAGIC.to_le_bytes()[..]) {
        return inspect_table(file, &bytes, root, catalog, json);
    }
    let info = fabric_hw::bitstream::inspect(&bytes)
        .with_context(|| format!("{}: not a bitstream", file.display()))?;
    let sha256 = crate::catalog::sha256_hex(&bytes);
    let stream = fabric_hw::bitstream::stream::parse(&bytes);
    let device = stream
        .as_ref()
        .ok()
        .and_then(|s| fabric_hw::bitstream::idcode::by_idcode(s.idcode))
        .map(|d| d.name());
    // The catalog's engine with an image of this file's hash, if the
    // catalog is there.
    let (catalog, found) = lookup(root, catalog)?;
    let entry = found.and_then(|c| {
        c.engines.iter().find_map(|e| {
            e.images
                .iter()
                .find(|i| i.sha256 == sha256)
                .map(|i| (e.name.clone(), i.clone()))
        })
    });
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
            "catalog": entry.as_ref().map(|(e, i)| serde_json::json!({"engine": e, "image": i})),
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
        Some((engine, image)) => println!(
            "  catalog   engine {engine}, {} image {} for slots {:?}{}",
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

/// The catalog to look a file up in: its directory, and the catalog when
/// it loads (an error only when it was named).
fn lookup(
    root: &std::path::Path,
    catalog: Option<PathBuf>,
) -> anyhow::Result<(PathBuf, Option<Catalog>)> {
    let explicit = catalog.is_some();
    let dir = super::catalog_dir(&Root::new(root), catalog);
    match Catalog::load(&dir, None) {
        Ok(c) => Ok((dir, Some(c))),
        Err(e) if explicit => Err(e.into()),
        Err(_) => Ok((dir, None)),
    }
}

/// A model's table: what its header says, whether it is whole, and the
/// catalog's model it is.
fn inspect_table(
    file: &std::path::Path,
    bytes: &[u8],
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    let sha256 = crate::catalog::sha256_hex(bytes);
    let table = Table::from_bytes(bytes).with_context(|| {
        format!(
            "{}: a table (magic FTB2), but not one an engine takes",
            file.display()
        )
    })?;
    // `from_bytes` took it: it is for the one engine tables of this format
    // run on.
    let engine = fabric_model::table::ENGINE;
    let declared = hex(&table.declared_identity());
    let actual = hex(&table.identity());
    let crc = table.crc();
    let stats = table.stats();
    let (dir, found) = lookup(root, catalog)?;
    let model = found.as_ref().and_then(|c| {
        c.models
            .iter()
            .find(|m| m.table.sha256 == sha256)
            .map(|m| (m.name.to_string(), m.engine_name.to_string()))
    });
    if json {
        let v = serde_json::json!({
            "file": file,
            "bytes": bytes.len(),
            "sha256": sha256,
            "table": {
                "engine": engine.to_string(),
                "words": stats.words,
                "bigram_buckets": stats.bigram_buckets,
                "trigram_buckets": stats.trigram_buckets,
                "candidates": stats.candidates,
                "declared_identity": declared,
                "identity": actual,
                "crc": crc,
            },
            "catalog": model.as_ref().map(|(m, e)| serde_json::json!({"model": m, "engine": e})),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("{}: {} bytes, sha256 {sha256}", file.display(), bytes.len());
    println!("  format    table FTB2 for engine {engine}");
    println!(
        "  words     {}: {} bigram and {} trigram buckets, {} candidates",
        stats.words, stats.bigram_buckets, stats.trigram_buckets, stats.candidates
    );
    println!(
        "  identity  {declared}{}",
        if declared == actual {
            String::new()
        } else {
            format!(" declared, NOT its words' {actual}")
        }
    );
    println!("  crc       {crc:#010x} (what SLOT_TABLE_CRC reads once committed)");
    match model {
        Some((m, e)) => println!("  catalog   model {m} on engine {e}"),
        None => println!("  catalog   not in {}", dir.display()),
    }
    Ok(())
}
