//! One completion from a transformer's weights, by the integer definition
//! (`fabric_model::lm::generate`), without the daemon or a fabric: the
//! tokens a transformer slot gives for the same prompt, temperature and
//! seed. The real-kernel rig checks the board's answer against it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fabric_hw::contract::NO_STOP_TOKEN;
use fabric_model::lm::{generate, Weights};
use fabric_model::Tokenizer;

#[derive(Parser, Debug)]
#[command(about = "One completion from a transformer's weights, as its engine gives it")]
struct Args {
    /// The weights (FLM1).
    #[arg(long)]
    weights: PathBuf,
    /// The model's tokenizer.
    #[arg(long)]
    tokenizer: PathBuf,
    #[arg(long)]
    prompt: String,
    #[arg(long, default_value_t = 16)]
    max_tokens: u32,
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lmgen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<String, String> {
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
    let weights = Weights::from_bytes(&read(&args.weights)?)
        .map_err(|e| format!("{}: {e}", args.weights.display()))?;
    let tokenizer = Tokenizer::from_bytes(&read(&args.tokenizer)?)
        .map_err(|e| format!("{}: {e}", args.tokenizer.display()))?;
    let prompt = tokenizer.encode(&args.prompt);
    let tokens = generate(
        &weights,
        &prompt,
        args.max_tokens,
        args.temperature,
        args.seed,
        NO_STOP_TOKEN,
    )
    .map_err(|e| e.to_string())?;
    Ok(tokenizer.decode(&tokens))
}
