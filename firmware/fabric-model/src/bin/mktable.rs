//! Prints what a model's table (`.ftb`, or a transformer's weights, `.flm`)
//! holds: its size, the identity it
//! declares (what a slot holding it reports in `SLOT_IDENTITY`, checked
//! against the SHA-256 it should be) and its CRC-32 (what the slot's engine
//! computes reading it in, `SLOT_TABLE_CRC`), as `scripts/build-models`
//! writes them into the manifest.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::table::Table;

#[derive(Parser, Debug)]
#[command(about = "Print a fabricd model table's size, identity and CRC")]
struct Args {
    /// The table (`.ftb`).
    input: PathBuf,
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
    if bytes.get(..4) == Some(&fabric_model::lm::weights::MAGIC.to_le_bytes()[..]) {
        // Transformer weights: reading them checks the identity they declare.
        let c = fabric_model::committed::read(&bytes).map_err(|e| format!("{name}: {e}"))?;
        let id: String = c.identity.iter().map(|b| format!("{b:02x}")).collect();
        println!("words={} crc={:#010x} identity={id}", c.words, c.crc);
        return Ok(());
    }
    let table = Table::from_bytes(&bytes).map_err(|e| format!("{name}: {e}"))?;
    if table.declared_identity() != table.identity() {
        return Err(format!(
            "{name}: the identity it declares is not the SHA-256 of its words"
        ));
    }
    let s = table.stats();
    let id: String = table
        .identity()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!(
        "words={} bigram_buckets={} trigram_buckets={} candidates={} crc={:#010x} identity={id}",
        s.words,
        s.bigram_buckets,
        s.trigram_buckets,
        s.candidates,
        table.crc()
    );
    Ok(())
}
