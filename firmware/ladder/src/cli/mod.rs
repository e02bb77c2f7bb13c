//! The `ladder` command: a module per kind of run, sharing what the target
//! says and the bands.

pub mod args;
mod burst;
mod common;
mod mixed;
mod requests;
mod typists;

use ladder::client::Target;

use args::{Args, WorkloadKind};

/// Runs what the arguments ask: true if every rung kept within its bands.
pub async fn run(args: Args) -> anyhow::Result<bool> {
    common::raise_fd_limit();
    let target = Target::parse(&args.target)
        .and_then(|t| t.from_sources(args.sources))
        .map_err(anyhow::Error::msg)?;
    let bands = common::bands(&args)?;
    if let Some(sizes) = &args.burst {
        if args.workload == WorkloadKind::Typists {
            anyhow::bail!("--burst releases requests, not typists: leave out --workload typists");
        }
        return burst::run(&args, sizes, target, bands).await;
    }
    if let Some(profile) = &args.profile {
        if args.workload == WorkloadKind::Typists {
            anyhow::bail!("a profile names each class's workload: leave out --workload typists");
        }
        return mixed::run(&args, profile, target, bands).await;
    }
    match args.workload {
        WorkloadKind::Requests => requests::run(&args, target, bands).await,
        WorkloadKind::Typists => typists::run(&args, target, bands).await,
    }
}
