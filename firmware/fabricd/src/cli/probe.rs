//! `fabricd probe`: what the fabric looks like, without touching it.

use std::path::PathBuf;

use fabric_hw::contract::SlotState;
use fabric_hw::Root;

use super::load_catalog;

pub(super) fn probe(
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
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
        let model = match (&catalog, slot.state) {
            (_, SlotState::Empty | SlotState::NoModel | SlotState::Loading) => "-".to_owned(),
            (Some(c), _) => c
                .by_identity(&slot.identity)
                .map_or_else(|| "(not in the catalog)".into(), |m| m.name.to_string()),
            (None, _) => "(no catalog)".into(),
        };
        let engine = match (slot.engine, &catalog) {
            (None, _) => "no engine".to_owned(),
            (Some(id), Some(c)) => match c.engine(id) {
                Some(e) => format!("engine {} ({id})", e.name),
                None => format!("engine {id} (not in the catalog)"),
            },
            (Some(id), None) => format!("engine {id}"),
        };
        let table = match slot.state {
            SlotState::Ready => format!(
                "table {}… crc {:#010x}",
                &slot.identity[..12],
                slot.table_crc
            ),
            _ => "no table".to_owned(),
        };
        println!(
            "  slot {}    {:<8} {:<12} {engine}, {table}; loads {}, active {}{}  region {}",
            slot.index,
            slot.state.as_str(),
            model,
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
