//! Helpers shared by the simulator's integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fabric_hw::devtree::{discover_live, Topology};
use fabric_hw::shell::{RingConfig, Rings, Shell};
use fabric_sim::{SimConfig, Simulator};

pub fn bitstreams() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
}

/// A simulator with kjv in slot 0 and fortunes in slot 1.
pub fn sim(dir: &Path, tweak: impl FnOnce(&mut SimConfig)) -> Simulator {
    let mut config = SimConfig::for_root(dir);
    config.firmware = Some(bitstreams());
    config.load = vec!["0=kjv.bit".into(), "1=fortunes.bit".into()];
    config.time_scale = 0.05;
    config.poll_us = 50;
    tweak(&mut config);
    Simulator::start(config).expect("simulator starts")
}

pub struct Host {
    pub topo: Topology,
    pub shell: Shell,
    pub rings: Rings,
}

/// Attaches the hardware layer the way the daemon does.
pub fn host(sim: &Simulator) -> Host {
    let root = sim.root();
    let topo = discover_live(&root.device_tree()).expect("discovery");
    let shell = Shell::attach(&root, &topo).expect("shell");
    let dma = fabric_hw::dma::open_buffer(&root, &topo.dma, shell.device()).expect("dma");
    let rings = Rings::init(&shell, dma, RingConfig::default()).expect("rings");
    Host { topo, shell, rings }
}

/// Polls `cond` until it holds, or fails the test after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
