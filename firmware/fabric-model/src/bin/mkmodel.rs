//! Builds a model (its table, as a slot's engine reads it from DDR) and its
//! tokenizer from a corpus.
//!
//! The corpus is UTF-8 text with one document per record, records separated
//! by a line holding only the separator (default `%`, as in fortune files).
//! `scripts/build-models` prepares the corpora and writes the manifest.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::corpus::{records, vocabulary};
use fabric_model::ngram::{Model, Pruning};
use fabric_model::table::Table;
use fabric_model::tokenizer::FIRST_PIECE;

#[derive(Parser, Debug)]
#[command(about = "Build a fabricd model table and tokenizer from a corpus")]
struct Args {
    /// Model name.
    #[arg(long)]
    name: String,
    /// The corpus file.
    #[arg(long)]
    corpus: PathBuf,
    /// Record separator line.
    #[arg(long, default_value = "%")]
    separator: String,
    /// Pieces in the vocabulary besides bytes and end-of-text.
    #[arg(long, default_value_t = 16000)]
    pieces: usize,
    /// Output table (`.ftb`: little-endian words, contract section 9).
    #[arg(long)]
    out: PathBuf,
    /// Output tokenizer.
    #[arg(long)]
    tokenizer_out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let text = match std::fs::read_to_string(&args.corpus) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mkmodel: reading {}: {e}", args.corpus.display());
            return ExitCode::FAILURE;
        }
    };
    let docs = records(&text, &args.separator);
    let tokenizer = vocabulary(docs.iter().copied(), args.pieces);
    let encoded: Vec<Vec<u32>> = docs.iter().map(|d| tokenizer.encode(d)).collect();
    let model = Model::train(
        &args.name,
        tokenizer.vocab_size(),
        &encoded,
        Pruning::default(),
    );
    let table = match Table::build(&model) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mkmodel: {}: {e}", args.name);
            return ExitCode::FAILURE;
        }
    };
    let outputs = [
        (args.out.clone(), table.to_bytes()),
        (args.tokenizer_out.clone(), tokenizer.to_bytes()),
    ];
    for (path, bytes) in &outputs {
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("mkmodel: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    let tokens: usize = encoded.iter().map(Vec::len).sum();
    eprintln!(
        "mkmodel: {}: {} documents, {} tokens, vocabulary {} ({} pieces), table {} words",
        args.name,
        docs.len(),
        tokens,
        tokenizer.vocab_size(),
        tokenizer.vocab_size() - FIRST_PIECE,
        table.words.len()
    );
    ExitCode::SUCCESS
}
