//! `fabricd`: probe, generate, serve, inspect. See `fabricd --help`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use fabric_hw::contract::{SlotState, NO_STOP_TOKEN};
use fabric_hw::shell::Params;
use fabric_hw::shell::RingConfig;
use fabric_hw::Root;
use fabric_model::tokenizer::EOS;
use fabricd::catalog::Catalog;
use fabricd::fabric::Driver;
use fabricd::sched::{self, Admission, ClientKey, ReqEvent, Request};
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(
    name = "fabricd",
    version,
    about = "Serve completions from an FPGA fabric"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print what the fabric looks like: shell, slots, buffer.
    Probe {
        /// Root of the board's file system (`/` on a board).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// The model catalog (default: <root>/lib/firmware/fabricd).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one completion through the rings and print it.
    Generate {
        #[arg(long, default_value = "/")]
        root: PathBuf,
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
    /// Print a bitstream's header, byte order and hash, and the catalog
    /// entry it is, if any.
    Inspect {
        /// A `.bit` or `.bin` file.
        file: PathBuf,
        /// The catalog to look it up in (default:
        /// /lib/firmware/fabricd, if there).
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
struct ServeArgs {
    /// A TOML configuration file (flags override it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on [default: 0.0.0.0:8080].
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Root of the board's file system [default: /].
    #[arg(long)]
    root: Option<PathBuf>,
    /// Start the simulated fabric in a temporary root and serve from it.
    #[arg(long)]
    sim: bool,
    /// Requests admitted at once (waiting or running) [default: 2048].
    #[arg(long)]
    queue_capacity: Option<usize>,
    /// Open connections at once [default: 16384].
    #[arg(long)]
    max_connections: Option<usize>,
    /// The model catalog [default: <root>/lib/firmware/fabricd; with --sim, ./bitstreams].
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// The simulator's time scale (with --sim).
    #[arg(long)]
    time_scale: Option<f64>,
    /// The control socket fabricctl talks to [default: /run/fabricd.sock under the root].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Where stats are kept [default: /data/fabricd under the root].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Length of a stats window, e.g. 30m, 10s [default: 30m].
    #[arg(long)]
    stats_window: Option<String>,
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe {
            root,
            catalog,
            json,
        } => probe(&root, catalog, json),
        Command::Generate {
            root,
            catalog,
            model,
            prompt,
            max_tokens,
            seed,
            temperature,
        } => generate(
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
            catalog,
            json,
        } => inspect(&file, catalog, json),
        Command::Serve(args) => serve(args),
        #[cfg(feature = "sim")]
        Command::Sim(config) => return fabric_sim::run(config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabricd: {e:#}");
            if e.downcast_ref::<fabricd::serve::RestartRequired>()
                .is_some()
            {
                ExitCode::from(fabricd::serve::RestartRequired::EXIT_CODE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn inspect(file: &std::path::Path, catalog: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let info = fabric_hw::bitstream::inspect(&bytes)
        .with_context(|| format!("{}: not a bitstream", file.display()))?;
    let sha256 = fabricd::catalog::sha256_hex(&bytes);
    // The catalog entry with this file's hash, if the catalog is there.
    let explicit = catalog.is_some();
    let catalog = catalog.unwrap_or_else(|| Root::new("/").our_firmware_dir());
    let entry = match Catalog::load(&catalog) {
        Ok(c) => c.models.iter().find_map(|m| {
            m.images
                .iter()
                .find(|i| i.sha256 == sha256)
                .map(|i| (m.name.clone(), i.clone()))
        }),
        Err(e) if explicit => return Err(e.into()),
        Err(_) => None,
    };
    if json {
        let v = serde_json::json!({
            "file": file,
            "bytes": bytes.len(),
            "sha256": sha256,
            "image": info,
            "user_id": info.header.as_ref().and_then(|h| h.user_id()),
            "partial": info.header.as_ref().map(|h| h.is_partial()),
            "catalog": entry.as_ref().map(|(m, i)| serde_json::json!({"model": m, "image": i})),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("{}: {} bytes, sha256 {sha256}", file.display(), bytes.len());
    match &info.header {
        Some(h) => {
            println!("  format    .bit, header of {} bytes", h.data_offset);
            println!("  design    {}", h.design_name());
            println!("  part      {}", h.part);
            println!("  built     {} {}", h.date, h.time);
            println!(
                "  user id   {}",
                h.user_id()
                    .map_or_else(|| "none".into(), |u| format!("{u:#010x}"))
            );
            println!(
                "  kind      {}",
                if h.is_partial() {
                    "partial (a PR slot's module)"
                } else {
                    "full (the whole device)"
                }
            );
        }
        None => println!("  format    .bin (no header)"),
    }
    println!(
        "  data      {} bytes at offset {}, sync word at +{}",
        info.data_len, info.data_offset, info.sync_offset
    );
    println!(
        "  order     {}",
        match info.order {
            fabric_hw::bitstream::ByteOrder::Natural => "natural (as in a .bit: AA 99 55 66)",
            fabric_hw::bitstream::ByteOrder::Swapped =>
                "byte-swapped 32-bit words (a .bin as the Zynq-7000 manager loads it)",
        }
    );
    match entry {
        Some((model, image)) => println!(
            "  catalog   model {model}, {} image {} for slots {:?}",
            image.kind, image.file, image.slots
        ),
        None => println!("  catalog   not in {}", catalog.display()),
    }
    Ok(())
}

fn load_catalog(root: &Root, dir: Option<PathBuf>) -> anyhow::Result<Catalog> {
    let dir = dir.unwrap_or_else(|| root.our_firmware_dir());
    Ok(Catalog::load(&dir)?)
}

fn probe(root: &std::path::Path, catalog: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let root = Root::new(root);
    let p = fabric_hw::attach::probe(&root)?;
    let catalog = load_catalog(&root, catalog).ok();
    if json {
        println!("{}", serde_json::to_string_pretty(&p)?);
        return Ok(());
    }
    let s = &p.shell;
    println!("fabric under {}", root.base().display());
    println!(
        "  shell     v{}.{} at {}, node {}",
        s.version_major, s.version_minor, p.uio, p.topology.shell_node
    );
    println!(
        "  part      {}, interface id {:#010x}",
        p.topology.part, p.topology.interface_id
    );
    println!(
        "  capacity  {} slots × {} lanes; prompts up to {} tokens, outputs up to {}",
        s.slots, s.lanes, s.max_prompt, s.max_output
    );
    println!(
        "  timing    prefill {} ns/token, decode {} ns/token",
        s.prefill_ns, s.decode_ns
    );
    for slot in &p.slots {
        let name = match (&catalog, slot.state) {
            (_, SlotState::Empty) => String::new(),
            (Some(c), _) => c
                .by_hash(&slot.hash)
                .map_or_else(|| "(not in the catalog)".into(), |m| m.name.to_string()),
            (None, _) => "(no catalog)".into(),
        };
        println!(
            "  slot {}    {:<8} {:<12} sha256 {}…  loads {}, active {}{}  region {}",
            slot.index,
            slot.state.as_str(),
            name,
            &slot.hash[..12],
            slot.loads,
            slot.active,
            if slot.quiesced { ", quiesced" } else { "" },
            p.topology
                .regions
                .get(usize::from(slot.index))
                .map_or("?", String::as_str),
        );
    }
    println!(
        "  buffer    {}: {} KiB at {:#x}, {}",
        p.dma.name,
        p.dma.size / 1024,
        p.dma.phys_addr,
        if p.dma.coherent {
            "coherent"
        } else {
            "non-coherent (cache maintenance on)"
        }
    );
    let c = &p.counters;
    println!(
        "  counters  submitted {}, completed {}, cancelled {}, active {}, tokens {}, errors {}",
        c.submitted, c.completed, c.cancelled, c.active, c.tokens, c.errors
    );
    Ok(())
}

fn generate(
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    model: Option<String>,
    prompt: &str,
    max_tokens: u32,
    seed: u64,
    temperature: f32,
) -> anyhow::Result<()> {
    let root = Root::new(root);
    let _lock = fabricd::lock::FabricLock::take(root.base())?;
    let catalog = load_catalog(&root, catalog)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let attached = fabric_hw::attach(&root, RingConfig::default())?;
        let (driver, _topology) = Driver::new(attached);
        let shell = driver.shell().clone();
        let slots = shell.slots();
        let pick = slots.iter().find(|s| {
            s.state == SlotState::Ready
                && match &model {
                    Some(name) => catalog.by_hash(&s.hash).is_some_and(|m| *m.name == **name),
                    None => true,
                }
        });
        let Some(slot) = pick else {
            match &model {
                Some(name) => {
                    catalog.get(name)?;
                    bail!("model {name} is not loaded in any ready slot");
                }
                None => bail!("no slot is ready (fabricd probe shows the slots)"),
            }
        };
        let entry = catalog
            .by_hash(&slot.hash)
            .with_context(|| format!("slot {} holds an image that is not in the catalog {}", slot.index, catalog.dir.display()))?
            .clone();
        let tokenizer = entry
            .tokenizer
            .clone()
            .with_context(|| format!("model {} has no usable tokenizer", entry.name))?;
        let tokens = tokenizer.encode(prompt);
        if tokens.is_empty() {
            bail!("the prompt is empty");
        }
        // The daemon's own path: the scheduler, which runs the driver.
        let scheduler = sched::spawn(
            driver,
            Arc::new(catalog),
            1,
            Arc::new(fabricd::stats::InFlight::default()),
        );
        let start = Instant::now();
        let (tx, mut events) = sched::events(false);
        let timeout = std::time::Duration::from_secs(3600);
        let request = Request {
            model: entry.name.clone(),
            client: ClientKey {
                ip: std::net::Ipv4Addr::LOCALHOST.into(),
                user: None,
            },
            prompt: tokens.clone(),
            params: Params {
                max_tokens,
                temperature,
                seed,
                stop_token: EOS,
                stream: false,
            },
            announce: false,
            deadline: start + timeout,
            timeout,
            received: start,
        };
        let admitted = scheduler
            .handle
            .admit(Admission {
                id: 1,
                request,
                events: tx,
                permit: None,
            })
            .await;
        if admitted.is_err() {
            bail!("the scheduler stopped");
        }
        drop(scheduler.handle);
        let (out, n_tokens, fabric_us, finish, slot_index) = match events.recv().await {
            Some(ReqEvent::Finished { tokens, n_tokens, fabric_us, finish, slot, .. }) => {
                (tokens, n_tokens, fabric_us, finish, slot)
            }
            Some(ReqEvent::Failed(o)) => bail!("the request failed: {}", o.message()),
            _ => bail!("the scheduler stopped"),
        };
        let driver = scheduler.task.await.context("the scheduler task")?;
        driver.stop()?;
        let text: Vec<u32> = out.iter().copied().filter(|&t| t != EOS && t != NO_STOP_TOKEN).collect();
        println!("{}{}", prompt, tokenizer.decode(&text));
        eprintln!(
            "fabricd: {} from slot {slot_index}: {} prompt + {n_tokens} output tokens, {finish:?}, fabric {fabric_us} µs, {:.1} ms end to end",
            entry.name,
            tokens.len(),
            start.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    })
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use fabricd::config::Config;
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.root {
        config.root = v;
    }
    if let Some(v) = args.queue_capacity {
        config.queue_capacity = v;
    }
    if let Some(v) = args.max_connections {
        config.max_connections = v;
    }
    if let Some(v) = args.catalog {
        config.catalog = Some(v);
    }
    if let Some(v) = args.time_scale {
        config.sim.time_scale = v;
    }
    if let Some(v) = args.socket {
        config.socket = v;
    }
    if let Some(v) = args.data_dir {
        config.data_dir = v;
    }
    if let Some(v) = args.stats_window {
        config.stats_window = v;
    }
    config.validate()?;
    #[cfg(feature = "sim")]
    let _sim = if args.sim {
        let src = match config.catalog.take() {
            Some(c) => c,
            None => fabricd::serve::default_sim_catalog().context(
                "no catalog for the simulator: run from the repository or pass --catalog DIR",
            )?,
        };
        let sim = fabricd::serve::start_sim(&config, &src)?;
        config.root = sim.root.clone();
        Some(sim)
    } else {
        None
    };
    #[cfg(not(feature = "sim"))]
    if args.sim {
        bail!("this fabricd was built without the simulator (feature \"sim\")");
    }
    // Multi-threaded even with one worker: loads hand their blocking steps
    // to `block_in_place`, which needs it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = fabricd::serve::listen(config.listen)
            .with_context(|| format!("listening on {}", config.listen))?;
        log::info!("serve: listening on http://{}", listener.local_addr()?);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            fabricd::serve::signalled().await;
            stop.cancel();
        });
        fabricd::serve::run(config, listener, shutdown).await
    })
}
