//! `serve --sim`: the simulator as a child process in a temporary root.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::catalog::Catalog;
use crate::config::Config;

/// The simulator child process of `--sim`; stopped on drop.
#[derive(Debug)]
pub struct SimChild {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    /// The models the slots boot with, in slot order: their engines are in,
    /// their tables the daemon commits.
    pub boot: Vec<String>,
}

impl Drop for SimChild {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the catalog is when none was named: `./bitstreams`, or the
/// repository's, found from the executable (`target/<profile>/fabricd`).
pub fn default_sim_catalog() -> Option<PathBuf> {
    let here = PathBuf::from("bitstreams");
    if here.join(crate::catalog::MANIFEST).exists() {
        return Some(here);
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .map(|d| d.join("bitstreams"))
        .find(|d| d.join(crate::catalog::MANIFEST).exists())
}

/// Starts `fabricd sim` in a fresh temporary root with the catalog's models
/// in its slots, and waits until it is up.
pub fn start_sim(config: &Config, catalog_src: &Path) -> anyhow::Result<SimChild> {
    let dir = tempfile::Builder::new()
        .prefix("fabricd-sim-")
        .tempdir()
        .context("creating the simulator's root")?;
    let root = dir.path().to_owned();
    let catalog = Catalog::load(catalog_src, None)?;
    let boot: Vec<String> = if config.sim.boot.is_empty() {
        let first = catalog
            .models
            .iter()
            .filter(|m| m.problem.is_none())
            .take(usize::from(config.sim.slots))
            .map(|m| m.name.to_string());
        // What `slot_models` wants, where it says; the catalog's first
        // models elsewhere.
        first
            .enumerate()
            .map(|(i, m)| match config.slot_models.get(i) {
                Some(want) if !want.is_empty() => want.clone(),
                _ => m,
            })
            .collect()
    } else {
        config.sim.boot.clone()
    };
    let mut args: Vec<String> = vec![
        "sim".into(),
        "--root".into(),
        root.display().to_string(),
        "--firmware".into(),
        catalog_src.display().to_string(),
        "--time-scale".into(),
        config.sim.time_scale.to_string(),
        "--slots".into(),
        config.sim.slots.to_string(),
        "--lanes".into(),
        config.sim.lanes.to_string(),
        "--configfs".into(),
        config.configfs.clone(),
        "--die-with-parent".into(),
    ];
    // Each slot boots with its model's engine (a partial image carries an
    // engine); the daemon then commits the model's table, as it fills any
    // slot that holds an engine and no model.
    for (slot, name) in boot.iter().enumerate() {
        let model = catalog.get(name)?;
        let image = model
            .images
            .iter()
            .find(|i| i.slots.contains(&(slot as u8)) && i.is(crate::catalog::ImageKind::Partial))
            .with_context(|| format!("model {name}'s engine has no image for slot {slot}"))?;
        args.push("--load".into());
        args.push(format!("{slot}={}", image.file));
    }
    args.extend(config.sim.extra_args.iter().cloned());
    let exe = std::env::current_exe().context("finding our own executable")?;
    let child = std::process::Command::new(exe)
        .args(&args)
        .spawn()
        .context("starting the simulator")?;
    let mut sim = SimChild {
        child,
        _dir: dir,
        root: root.clone(),
        boot: boot.clone(),
    };
    let ready = root.join("sim/ready");
    let start = Instant::now();
    while !ready.exists() {
        if let Ok(Some(status)) = sim.child.try_wait() {
            bail!("the simulator exited with {status} before it was up");
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("the simulator did not come up within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    log::info!(
        "serve: simulated fabric at {} with {}",
        root.display(),
        boot.join(", ")
    );
    Ok(sim)
}
