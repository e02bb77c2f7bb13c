//! Held-out perplexity of a transformer's weights, by the integer
//! definition (`fabric_model::lm`): every held-out document alone, from an
//! end-of-text token, each of its tokens and its closing end-of-text
//! scored by the integer logits' exact softmax. Per token, per byte and
//! per word, with `lmcorpus`'s `split.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_model::lm::{decode::log_prob, Weights};
use fabric_model::tokenizer::EOS;

#[derive(Parser, Debug)]
#[command(about = "Held-out perplexity of a transformer's weights, in the engine's integers")]
struct Args {
    /// The weights (FLM1).
    #[arg(long)]
    weights: PathBuf,
    /// lmcorpus's output directory (heldout.u16, split.json).
    #[arg(long)]
    data: PathBuf,
    /// Score only the first N held-out documents (all by default).
    #[arg(long)]
    documents: Option<usize>,
    /// Threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

#[derive(serde::Deserialize)]
struct Side {
    documents: usize,
    bytes: u64,
    words: u64,
}

#[derive(serde::Deserialize)]
struct Split {
    heldout: Side,
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lmeval: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let read = |p: PathBuf| std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()));
    let weights = Weights::from_bytes(&read(args.weights.clone())?)
        .map_err(|e| format!("{}: {e}", args.weights.display()))?;
    let split: Split = serde_json::from_slice(&read(args.data.join("split.json"))?)
        .map_err(|e| format!("split.json: {e}"))?;
    let ids: Vec<u32> = read(args.data.join("heldout.u16"))?
        .chunks_exact(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    let mut docs: Vec<&[u32]> = ids.split_inclusive(|&t| t == EOS).collect();
    if docs.len() != split.heldout.documents {
        return Err(format!(
            "heldout.u16 has {} documents; split.json says {}",
            docs.len(),
            split.heldout.documents
        ));
    }
    let all = docs.len();
    if let Some(n) = args.documents {
        docs.truncate(n);
    }
    let started = std::time::Instant::now();
    let threads = args.threads.max(1);
    let results: Vec<Result<(f64, usize), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (weights, docs) = (&weights, &docs);
                s.spawn(move || {
                    let mut cache = weights.cache();
                    let (mut nll, mut tokens) = (0.0, 0);
                    for doc in docs.iter().skip(t).step_by(threads) {
                        cache.clear();
                        let mut prev = EOS;
                        for &t in doc.iter().take(weights.shape.context) {
                            let logits =
                                weights.step(&mut cache, prev).map_err(|e| e.to_string())?;
                            nll -= log_prob(&logits, t);
                            tokens += 1;
                            prev = t;
                        }
                    }
                    Ok((nll, tokens))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    let (mut nll, mut tokens) = (0.0, 0);
    for r in results {
        let (n, t) = r?;
        nll += n;
        tokens += t;
    }
    let whole = docs.len() == all;
    let per = |unit: u64| whole.then(|| (nll / unit as f64).exp());
    println!(
        "{}",
        serde_json::json!({
            "documents": docs.len(),
            "heldout_tokens": tokens,
            "heldout_nll": nll,
            "ppl_per_token": (nll / tokens as f64).exp(),
            "ppl_per_byte": per(split.heldout.bytes),
            "ppl_per_word": per(split.heldout.words),
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}
