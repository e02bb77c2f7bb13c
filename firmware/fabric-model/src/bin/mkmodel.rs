//! Builds a model image and its tokenizer from a corpus.
//!
//! The corpus is UTF-8 text with one document per record, records separated
//! by a line holding only the separator (default `%`, as in fortune files).
//! `scripts/build-models` prepares the corpora and writes the manifest.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::image::{self, ImageSpec};
use fabric_model::ngram::{Model, Pruning};
use fabric_model::tokenizer::{pre_tokenize, Tokenizer, FIRST_PIECE};

#[derive(Parser, Debug)]
#[command(about = "Build a fabricd model bitstream and tokenizer from a corpus")]
struct Args {
    /// Model name (also the design name's suffix).
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
    /// The FPGA part written into the header.
    #[arg(long, default_value = "xck26-sfvc784-2LV-c")]
    part: String,
    /// The shell interface id written as UserID.
    #[arg(long, default_value = "0x5EED0001", value_parser = parse_hex)]
    interface_id: u32,
    /// Header date (fixed, so builds are reproducible).
    #[arg(long, default_value = "2026/11/30")]
    date: String,
    /// Output `.bit`.
    #[arg(long)]
    out: PathBuf,
    /// Output tokenizer.
    #[arg(long)]
    tokenizer_out: PathBuf,
    /// Also write a full-device image (shell and model, for kernels that
    /// reconfigure only through the FPGA manager).
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
    let text = match std::fs::read_to_string(&args.corpus) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mkmodel: reading {}: {e}", args.corpus.display());
            return ExitCode::FAILURE;
        }
    };
    let docs: Vec<&str> = text
        .split(&format!("\n{}\n", args.separator))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let mut freq: HashMap<&str, u64> = HashMap::new();
    for d in &docs {
        for p in pre_tokenize(d) {
            if p.len() > 1 {
                *freq.entry(p).or_default() += 1;
            }
        }
    }
    let mut pieces: Vec<(&str, u64)> = freq.into_iter().filter(|(_, c)| *c >= 2).collect();
    pieces.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    pieces.truncate(args.pieces);
    pieces.sort_by(|a, b| a.0.cmp(b.0));
    let tokenizer = Tokenizer::new(pieces.iter().map(|(p, _)| p.as_bytes().to_vec()).collect());
    let encoded: Vec<Vec<u32>> = docs.iter().map(|d| tokenizer.encode(d)).collect();
    let model = Model::train(
        &args.name,
        tokenizer.vocab_size(),
        &encoded,
        Pruning::default(),
    );
    let build = |design: String, partial: bool| {
        image::build_bit(
            &model,
            &ImageSpec {
                design: &design,
                part: &args.part,
                interface_id: args.interface_id,
                partial,
                date: &args.date,
                time: "00:00:00",
            },
        )
    };
    let bit = match build(format!("fabricd_rm_{}", args.name), true) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mkmodel: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut outputs = vec![
        (args.out.clone(), bit),
        (args.tokenizer_out.clone(), tokenizer.to_bytes()),
    ];
    if let Some(full) = &args.full_out {
        match build(format!("fabricd_full_{}", args.name), false) {
            Ok(b) => outputs.push((full.clone(), b)),
            Err(e) => {
                eprintln!("mkmodel: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    for (path, bytes) in &outputs {
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("mkmodel: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    let tokens: usize = encoded.iter().map(Vec::len).sum();
    eprintln!(
        "mkmodel: {}: {} documents, {} tokens, vocabulary {} ({} pieces), image {} bytes",
        args.name,
        docs.len(),
        tokens,
        tokenizer.vocab_size(),
        tokenizer.vocab_size() - FIRST_PIECE,
        std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0)
    );
    ExitCode::SUCCESS
}
