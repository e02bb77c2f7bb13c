//! `fabricd serve`: the configuration from the file and the flags, the
//! runtime, and the daemon.

use anyhow::Context;

use super::ServeArgs;

pub(super) fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use crate::config::Config;
    crate::serve::tune_malloc();
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.agent_listen {
        config.agent_listen = Some(v);
    }
    if let Some(v) = args.root {
        config.root = v;
    }
    if let Some(v) = args.queue_capacity {
        config.queue_capacity = v;
    }
    if let Some(v) = args.max_connections {
        config.max_connections = Some(v);
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
        // Under --sim the catalog is where the simulator's models come from,
        // on this machine (relative to the working directory, as the default
        // ./bitstreams is); the daemon serves the simulator's copy under its
        // root.
        let src = match config.catalog.take() {
            Some(c) => c,
            None => crate::serve::default_sim_catalog().context(
                "no catalog for the simulator: run from the repository or pass --catalog DIR",
            )?,
        };
        let sim = crate::serve::start_sim(&config, &src)?;
        config.root = sim.root.clone();
        // The boot models' tables go in as the daemon starts.
        for (slot, model) in sim.boot.iter().enumerate() {
            match config.slot_models.get_mut(slot) {
                Some(want) if want.is_empty() => *want = model.clone(),
                Some(_) => {}
                None => {
                    config.slot_models.resize(slot, String::new());
                    config.slot_models.push(model.clone());
                }
            }
        }
        Some(sim)
    } else {
        None
    };
    #[cfg(not(feature = "sim"))]
    if args.sim {
        anyhow::bail!("this fabricd was built without the simulator (feature \"sim\")");
    }
    // Multi-threaded even with one worker: loads hand their blocking steps
    // to `block_in_place`, which needs it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = crate::serve::listen(config.listen)
            .with_context(|| format!("listening on {}", config.listen))?;
        log::info!("serve: listening on http://{}", listener.local_addr()?);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            crate::serve::signalled().await;
            stop.cancel();
        });
        crate::serve::run(config, listener, shutdown).await
    })
}
