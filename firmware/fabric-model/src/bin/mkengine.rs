//! Builds an engine's images for a part: the partial image a PR slot is
//! loaded with, and optionally a full-device image (the shell, and the
//! engine in every slot) for kernels that reconfigure only through the FPGA
//! manager. A model is not in them: the daemon commits it from DDR.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_hw::contract::{self, EngineId};
use fabric_model::image::{self, ImageSpec};

#[derive(Parser, Debug)]
#[command(about = "Build a fabricd engine's bitstreams")]
struct Args {
    /// The engine's kind (1: word trigram).
    #[arg(long, default_value_t = EngineId::TRIGRAM_V2.kind)]
    kind: u16,
    /// The engine's version (the table format it reads).
    #[arg(long, default_value_t = EngineId::TRIGRAM_V2.version)]
    version: u16,
    /// Engine name (the design name's suffix).
    #[arg(long, default_value = "trigram_v2")]
    name: String,
    /// The FPGA part written into the header.
    #[arg(long, default_value = "xck26-sfvc784-2LV-c")]
    part: String,
    /// The shell interface id written as UserID (default: the shell `rtl/`
    /// builds, 0x5EED0002).
    #[arg(long, value_parser = parse_hex)]
    interface_id: Option<u32>,
    /// Header date (fixed, so builds are reproducible).
    #[arg(long, default_value = "2026/12/04")]
    date: String,
    /// Output partial `.bit`.
    #[arg(long)]
    out: PathBuf,
    /// Also write a full-device image.
    #[arg(long)]
    full_out: Option<PathBuf>,
}

fn parse_hex(s: &str) -> Result<u32, String> {
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u32::from_str_radix(hex, 16).map_err(|e| format!("{s:?}: {e}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let engine = EngineId {
        kind: args.kind,
        version: args.version,
    };
    let build = |design: String, partial: bool| {
        image::build_bit(
            engine,
            &ImageSpec {
                design: &design,
                part: &args.part,
                interface_id: args.interface_id.unwrap_or(contract::SHELL_INTERFACE_ID),
                partial,
                date: &args.date,
                time: "00:00:00",
            },
        )
    };
    let mut outputs = Vec::new();
    match build(format!("fabricd_rm_{}", args.name), true) {
        Ok(b) => outputs.push((args.out.clone(), b)),
        Err(e) => {
            eprintln!("mkengine: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(full) = &args.full_out {
        match build(format!("fabricd_full_{}", args.name), false) {
            Ok(b) => outputs.push((full.clone(), b)),
            Err(e) => {
                eprintln!("mkengine: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    for (path, bytes) in &outputs {
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("mkengine: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!("mkengine: {engine} for {}", args.part);
    ExitCode::SUCCESS
}
