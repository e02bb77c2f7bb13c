//! The command line of `fabricd`: probe, generate, inspect, serve, and the
//! hidden `sim`. `main.rs` only sets up logging and calls [`main`].
//!
//! Paths on the board (`--catalog`, `--socket`, `--data-dir`) follow one
//! rule, [`crate::config::under_root`]: absolute as given, relative under
//! `--root`. `--root`, `--config` and `inspect`'s file are paths on this
//! machine, relative to the working directory as usual.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fabric_hw::Root;

use crate::catalog::Catalog;

mod generate;
mod inspect;
mod probe;
mod serve;

#[derive(Parser, Debug)]
#[command(
    name = "fabricd",
    version,
    about = "Serve completions from an FPGA fabric",
    after_help = PATHS_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The path rule, at the end of every `--help` that takes a board path.
const PATHS_HELP: &str =
    "Paths on the board (--catalog, --socket, --data-dir, and the same keys in \
--config): an absolute path is used as given; a relative one is under --root. \
--root and --config themselves are relative to the working directory.";

#[derive(Subcommand, Debug)]
enum Command {
    /// Print what the fabric looks like: shell, slots, buffer.
    #[command(after_help = PATHS_HELP)]
    Probe {
        /// Root of the board's file system (`/` on a board).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// The model catalog; relative: under --root (default:
        /// <root>/lib/firmware/fabricd).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one completion through the rings and print it.
    #[command(after_help = PATHS_HELP)]
    Generate {
        /// Root of the board's file system (`/` on a board).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// The model catalog; relative: under --root (default:
        /// <root>/lib/firmware/fabricd).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// The model (default: the one in the first ready slot).
        #[arg(long)]
        model: Option<String>,
        #[arg(long)]
        prompt: String,
        #[arg(long, default_value_t = 32)]
        max_tokens: u32,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 1.0)]
        temperature: f32,
    },
    /// Print a bitstream's header, byte order and hash, or a model table's
    /// header, identity and CRC, and the catalog entry it is, if any.
    #[command(after_help = PATHS_HELP)]
    Inspect {
        /// A `.bit`, `.bin` or `.ftb` file (relative to the working
        /// directory).
        file: PathBuf,
        /// Root of the board's file system, for --catalog.
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// The catalog to look it up in; relative: under --root (default:
        /// <root>/lib/firmware/fabricd, if there).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve completions over HTTP.
    Serve(ServeArgs),
    /// Run the simulated fabric (the same program as `fabric-sim`).
    #[cfg(feature = "sim")]
    #[command(hide = true)]
    Sim(fabric_sim::SimConfig),
}

#[derive(clap::Args, Debug)]
#[command(after_help = PATHS_HELP)]
pub(crate) struct ServeArgs {
    /// A TOML configuration file (flags override it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on [default: 0.0.0.0:8080].
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Answer HAProxy's agent check on this address [default: off].
    #[arg(long)]
    agent_listen: Option<std::net::SocketAddr>,
    /// Root of the board's file system [default: /].
    #[arg(long)]
    root: Option<PathBuf>,
    /// Start the simulated fabric in a temporary root and serve from it.
    #[arg(long)]
    sim: bool,
    /// Requests admitted at once (waiting or running) [default: 2048].
    #[arg(long)]
    queue_capacity: Option<usize>,
    /// Open connections at once [default: one per 32 KiB of memory,
    /// 1024 to 65536].
    #[arg(long)]
    max_connections: Option<usize>,
    /// The model catalog; relative: under --root [default:
    /// <root>/lib/firmware/fabricd]. With --sim, the simulator's models on
    /// this machine, relative to the working directory [default: ./bitstreams].
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// The simulator's time scale (with --sim).
    #[arg(long)]
    time_scale: Option<f64>,
    /// The control socket fabricctl talks to; relative: under --root
    /// [default: run/fabricd.sock].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Where stats are kept; relative: under --root [default: data/fabricd].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Length of a stats window, e.g. 30m, 10s [default: 30m].
    #[arg(long)]
    stats_window: Option<String>,
}

/// Runs the command line; the exit code of `fabricd`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe {
            root,
            catalog,
            json,
        } => probe::probe(&root, catalog, json),
        Command::Generate {
            root,
            catalog,
            model,
            prompt,
            max_tokens,
            seed,
            temperature,
        } => generate::generate(
            &root,
            catalog,
            model,
            &prompt,
            max_tokens,
            seed,
            temperature,
        ),
        Command::Inspect {
            file,
            root,
            catalog,
            json,
        } => inspect::inspect(&file, &root, catalog, json),
        Command::Serve(args) => serve::serve(args),
        #[cfg(feature = "sim")]
        Command::Sim(config) => return fabric_sim::run(config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabricd: {e:#}");
            if e.downcast_ref::<crate::serve::RestartRequired>().is_some() {
                ExitCode::from(crate::serve::RestartRequired::EXIT_CODE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The catalog `--catalog` names ([`crate::config::under_root`]), or the
/// board's.
pub(crate) fn catalog_dir(root: &Root, dir: Option<PathBuf>) -> PathBuf {
    match dir {
        Some(d) => crate::config::under_root(root.base(), &d),
        None => root.our_firmware_dir(),
    }
}

pub(crate) fn load_catalog(root: &Root, dir: Option<PathBuf>) -> anyhow::Result<Catalog> {
    Ok(Catalog::load(&catalog_dir(root, dir), None)?)
}
