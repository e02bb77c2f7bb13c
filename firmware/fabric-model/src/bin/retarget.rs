//! Rewrites a model image for another FPGA part: the `.bit` header's part
//! and the configuration stream's IDCODE, which the device checks (the
//! simulated fabric's models are the same on every part; only the header
//! and the IDCODE say which device the image is for). With
//! `--bin` it writes the byte-swapped `.bin` the Zynq managers load
//! instead (a shell image that `S55fabricd-shell` loads at boot, say).
//! `scripts/build-models --retarget` builds another board's catalog with it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_hw::bitstream;
use fabric_model::image::{self, ImageSpec};

#[derive(Parser, Debug)]
#[command(about = "Rewrite a fabricd model image's header for another FPGA part")]
struct Args {
    /// The FPGA part to write into the header (e.g. xc7z020clg484-1).
    #[arg(long)]
    part: String,
    /// Write the byte-swapped `.bin` (no header) instead of a `.bit`.
    #[arg(long)]
    bin: bool,
    /// The `.bit` to read.
    input: PathBuf,
    /// Where to write the result.
    output: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("retarget: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let bytes =
        std::fs::read(&args.input).map_err(|e| format!("reading {}: {e}", args.input.display()))?;
    let header =
        bitstream::parse_header(&bytes).map_err(|e| format!("{}: {e}", args.input.display()))?;
    let (config, payload) =
        image::payload(&bytes).map_err(|e| format!("{}: {e}", args.input.display()))?;
    // The design field is kept as it is (name, PARTIAL, UserID, version):
    // only the part changes.
    let spec = ImageSpec {
        design: "",
        part: &args.part,
        interface_id: header.user_id().unwrap_or_default(),
        partial: !config.starts_up,
        date: &header.date,
        time: &header.time,
    };
    let rebuilt = image::build_bit_from_payload(&payload, &spec)
        .map_err(|e| format!("{}: {e}", args.input.display()))?;
    let data = &rebuilt[bitstream::parse_header(&rebuilt)
        .map_err(|e| format!("rebuilding {}: {e}", args.input.display()))?
        .data_offset..];
    let out = bitstream::write_bit(&header.design, &args.part, &header.date, &header.time, data);
    let out = if args.bin {
        bitstream::to_bin(&out).map_err(|e| format!("{}: {e}", args.input.display()))?
    } else {
        out
    };
    std::fs::write(&args.output, out).map_err(|e| format!("writing {}: {e}", args.output.display()))
}
