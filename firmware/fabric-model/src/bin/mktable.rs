//! Writes a model image's table as the fabric's engine reads it, for
//! `$readmemh` (the RTL co-simulation and synthesis, and the Vivado flow's
//! slot modules), and prints its size: `words=N` and the identity the slot
//! will report in `SLOT_HASH`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::image;
use fabric_model::table::Table;

#[derive(Parser, Debug)]
#[command(about = "Write a fabricd model image's engine table as $readmemh hex")]
struct Args {
    /// The model image (`.bit` or `.bin`).
    input: PathBuf,
    /// Where to write the hex.
    output: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mktable: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let name = args.input.display();
    let bytes = std::fs::read(&args.input).map_err(|e| format!("reading {name}: {e}"))?;
    let loaded = image::load(&bytes).map_err(|e| format!("{name}: {e}"))?;
    let table = Table::build(&loaded.model).map_err(|e| format!("{name}: {e}"))?;
    std::fs::write(&args.output, table.to_hex())
        .map_err(|e| format!("writing {}: {e}", args.output.display()))?;
    let s = table.stats();
    let id: String = table
        .identity()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!(
        "words={} bigram_entries={} trigram_entries={} candidates={} identity={id}",
        s.words, s.bigram_entries, s.trigram_entries, s.candidates
    );
    Ok(())
}
