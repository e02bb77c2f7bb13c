//! Helpers shared by the simulator's integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::{NO_STOP_TOKEN, WINDOW_LEN};
use fabric_hw::devtree::Topology;
use fabric_hw::mmio::Mmio;
use fabric_hw::shell::{Completion, Drained, Params, RingConfig, Rings, Shell, Submission};
use fabric_hw::tables::{Committed, TableError, Tables};
use fabric_hw::uio::UioIrq;
use fabric_sim::{SimConfig, Simulator};

pub fn bitstreams() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
}

/// The trigram engine's partial image: what a `--load` puts in a slot.
pub const ENGINE: &str = "trigram-v2.bit";

/// A simulator with the trigram engine in slots 0 and 1 and no model in
/// either: [`host`] commits kjv's table to slot 0 and fortunes' to slot 1.
pub fn sim(dir: &Path, tweak: impl FnOnce(&mut SimConfig)) -> Simulator {
    let mut config = SimConfig::for_root(dir);
    config.firmware = Some(bitstreams());
    config.load = vec![format!("0={ENGINE}"), format!("1={ENGINE}")];
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
    pub tables: Tables,
    /// A second mapping of the shell's register window, for tests that
    /// play a careless driver: the layer's own driver never lends its
    /// window out.
    pub regs: Mmio,
}

/// Attaches the way the daemon does (`fabric_hw::attach`) and puts kjv in
/// slot 0 and fortunes in slot 1, where those slots hold an engine and no
/// model. The commits change the slots' states, which raises the event
/// interrupt: taken and acknowledged here, as the daemon does, so a test
/// starts with none pending.
pub async fn host(sim: &Simulator) -> Host {
    let mut host = bare_host(sim);
    let mut committed = false;
    for (slot, model) in [(0, "kjv"), (1, "fortunes")] {
        if host.shell.slot(slot).state == fabric_hw::contract::SlotState::NoModel {
            host.commit(slot, model).expect("the model's table commits");
            committed = true;
        }
    }
    if committed {
        tokio::time::timeout(Duration::from_secs(10), host.irq.wait())
            .await
            .expect("the commits' event interrupt within 10 s")
            .expect("interrupt");
        let mut out = host.rings.drained();
        host.rings.drain(&host.shell, &mut out).expect("drain");
        host.irq.unmask().expect("unmask");
    }
    host
}

/// A table from the catalog.
pub fn table(model: &str) -> Vec<u8> {
    std::fs::read(bitstreams().join(format!("{model}.ftb"))).expect("the catalog's table")
}

impl Host {
    /// Quiesces `slot`, commits `model`'s table to it and lets it serve
    /// again: what the daemon's rotation does for a switch.
    pub fn commit(&self, slot: u8, model: &str) -> Result<Committed, TableError> {
        self.commit_bytes(slot, &table(model))
    }

    /// The same with a table's bytes.
    pub fn commit_bytes(&self, slot: u8, table: &[u8]) -> Result<Committed, TableError> {
        self.commit_with_kv(slot, table, kv_of(table, &self.shell))
    }

    /// Commits `table` saying its lanes' keys and values take `kv` bytes of
    /// the region, as the daemon works them out (`kv_of`) or, to see what
    /// the device does with a daemon that got them wrong, not.
    pub fn commit_with_kv(&self, slot: u8, table: &[u8], kv: u64) -> Result<Committed, TableError> {
        self.shell
            .quiesce(slot, Duration::from_secs(10))
            .expect("the slot quiesces");
        let r = self
            .tables
            .commit(&self.shell, slot, table, kv, Duration::from_secs(10));
        self.shell.set_quiesce(slot, false);
        r
    }
}

/// What the daemon leaves room for after `table` in a region: a
/// transformer's keys and values for every lane of the shell (0 for a
/// trigram table, or a table that does not parse).
pub fn kv_of(table: &[u8], shell: &Shell) -> u64 {
    fabric_model::committed::read(table)
        .map_or(0, |c| c.kv_bytes_a_lane * shell.info().lanes as u64)
}

/// Attaches and commits nothing.
pub fn bare_host(sim: &Simulator) -> Host {
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
        tables: a.tables,
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

pub const PROMPT: [u32; 4] = [300, 301, 302, 303];

pub fn sub(tag: u32, ctx: u16, max_tokens: u32, stream: bool) -> Submission<'static> {
    Submission {
        tag,
        ctx,
        prompt: &PROMPT,
        params: Params {
            max_tokens,
            temperature: 0.8,
            seed: 42,
            stop_token: NO_STOP_TOKEN,
            stream,
        },
    }
}

/// Waits for interrupts (with a bounded wait each) and drains until `tag`
/// is done; returns every completion seen, drained into one [`Drained`].
pub async fn until_done(irq: &mut UioIrq, shell: &Shell, rings: &mut Rings, tag: u32) -> Drained {
    let mut all = rings.drained();
    loop {
        tokio::time::timeout(Duration::from_secs(10), irq.wait())
            .await
            .expect("an interrupt within 10 s")
            .expect("interrupt");
        rings.drain(shell, &mut all).expect("drain");
        irq.unmask().expect("unmask");
        let done = all
            .completions
            .iter()
            .any(|c| matches!(c, Completion::Done { tag: t, .. } if *t == tag));
        if done {
            return all;
        }
    }
}

pub fn tokens_of(all: &Drained) -> Vec<u32> {
    all.iter().flat_map(|(_, t)| t.iter().copied()).collect()
}
