//! Helpers shared by the simulator's integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::WINDOW_LEN;
use fabric_hw::devtree::Topology;
use fabric_hw::mmio::Mmio;
use fabric_hw::shell::{RingConfig, Rings, Shell};
use fabric_hw::uio::UioIrq;
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
    pub shell: Arc<Shell>,
    pub rings: Rings,
    pub irq: UioIrq,
    /// A second mapping of the shell's register window, for tests that
    /// play a careless driver: the layer's own driver never lends its
    /// window out.
    pub regs: Mmio,
}

/// Attaches the way the daemon does (`fabric_hw::attach`); must run in a
/// tokio runtime, for the interrupt.
pub fn host(sim: &Simulator) -> Host {
    let root = sim.root();
    let a = fabric_hw::attach(&root, RingConfig::default()).expect("attach");
    let regs = a
        .shell
        .device()
        .map(0, WINDOW_LEN as u64)
        .expect("a second mapping of the registers");
    Host {
        topo: a.topology,
        shell: a.shell,
        rings: a.rings,
        irq: a.irq,
        regs,
    }
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
