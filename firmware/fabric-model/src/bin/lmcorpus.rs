//! Writes a corpus as the token streams a language model trains and is
//! measured on, with the split fixed here, before any training.
//!
//! Document `i` (in the corpus's order) is held out when `i % 20 == 10`:
//! every twentieth verse or fortune, spread over the whole corpus. The
//! vocabulary is built from the training documents alone, so no held-out
//! word is a piece because it was held out. Out: `NAME.tok`, `train.u16`
//! and `heldout.u16` (token ids, little-endian, each document followed by
//! end-of-text; the training stream also starts with one) and `split.json`
//! (documents, tokens, UTF-8 bytes and words between white space of each
//! side; a document's bytes and words count one more, for its end-of-text,
//! which every model also predicts).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::corpus::{records, vocabulary};
use fabric_model::tokenizer::EOS;

/// One document in this many is held out.
const HOLD_OUT_EVERY: usize = 20;
/// Which one of them.
const HOLD_OUT_AT: usize = 10;

#[derive(Parser, Debug)]
#[command(about = "Write a corpus's training and held-out token streams")]
struct Args {
    /// The tokenizer's name (NAME.tok).
    #[arg(long)]
    name: String,
    /// The corpus file (records as `mkmodel` reads them).
    #[arg(long)]
    corpus: PathBuf,
    /// Record separator line.
    #[arg(long, default_value = "%")]
    separator: String,
    /// Pieces in the vocabulary besides bytes and end-of-text.
    #[arg(long)]
    pieces: usize,
    /// Where the files go.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lmcorpus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.corpus)
        .map_err(|e| format!("reading {}: {e}", args.corpus.display()))?;
    let docs = records(&text, &args.separator);
    let (mut held, mut train): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for (i, d) in docs.iter().enumerate() {
        if i % HOLD_OUT_EVERY == HOLD_OUT_AT {
            held.push(d);
        } else {
            train.push(d);
        }
    }
    let tokenizer = vocabulary(train.iter().copied(), args.pieces);
    if tokenizer.vocab_size() > u32::from(u16::MAX) {
        return Err(format!(
            "a vocabulary of {} does not fit 16-bit ids",
            tokenizer.vocab_size()
        ));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let write = |file: &str, bytes: &[u8]| {
        let path = args.out.join(file);
        std::fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    write(&format!("{}.tok", args.name), &tokenizer.to_bytes())?;
    let mut sides = Vec::new();
    for (side, docs, lead) in [("train", &train, true), ("heldout", &held, false)] {
        let mut ids: Vec<u32> = Vec::new();
        if lead {
            ids.push(EOS);
        }
        let (mut bytes, mut words) = (0, 0);
        for d in docs.iter() {
            ids.extend(tokenizer.encode(d));
            ids.push(EOS);
            bytes += d.len() + 1;
            words += d.split_whitespace().count() + 1;
        }
        let raw: Vec<u8> = ids
            .iter()
            // Checked above: every id is below the vocabulary's size.
            .flat_map(|&t| (t as u16).to_le_bytes())
            .collect();
        write(&format!("{side}.u16"), &raw)?;
        sides.push(format!(
            "\"{side}\": {{\"documents\": {}, \"tokens\": {}, \"bytes\": {bytes}, \"words\": {words}}}",
            docs.len(),
            ids.len() - usize::from(lead)
        ));
    }
    write(
        "split.json",
        format!(
            "{{\"vocab_size\": {}, \"hold_out\": \"document i when i % {HOLD_OUT_EVERY} == {HOLD_OUT_AT}\", {}}}\n",
            tokenizer.vocab_size(),
            sides.join(", ")
        )
        .as_bytes(),
    )?;
    eprintln!(
        "lmcorpus: {}: vocabulary {}; {}",
        args.name,
        tokenizer.vocab_size(),
        sides.join("; ")
    );
    Ok(())
}
