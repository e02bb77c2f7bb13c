//! `fabricd generate`: one completion through the daemon's own path (the
//! scheduler, which runs the driver).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use fabric_hw::contract::{SlotState, NO_STOP_TOKEN};
use fabric_hw::shell::{Params, RingConfig};
use fabric_hw::Root;
use fabric_model::tokenizer::EOS;

use super::load_catalog;
use crate::fabric::Driver;
use crate::sched::{self, Admission, ClientKey, ReqEvent, Request};

pub(super) fn generate(
    root: &std::path::Path,
    catalog: Option<PathBuf>,
    model: Option<String>,
    prompt: &str,
    max_tokens: u32,
    seed: u64,
    temperature: f32,
) -> anyhow::Result<()> {
    let root = Root::new(root);
    let _lock = crate::lock::FabricLock::take(root.base())?;
    let catalog = load_catalog(&root, catalog)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let attached = fabric_hw::attach(&root, RingConfig::default())?;
        let (driver, _topology, tables) = Driver::new(attached);
        let shell = driver.shell().clone();
        let holds = |s: &fabric_hw::shell::SlotStatus| {
            s.state == SlotState::Ready
                && match &model {
                    Some(name) => catalog.by_identity(&s.identity).is_some_and(|m| *m.name == **name),
                    None => true,
                }
        };
        if !shell.slots().iter().any(holds) {
            fill(&shell, &tables, &catalog, model.as_deref())?;
        }
        let slots = shell.slots();
        let Some(slot) = slots.iter().find(|s| holds(s)) else {
            match &model {
                Some(name) => {
                    catalog.get(name)?;
                    bail!("model {name} is not loaded in any ready slot, and no slot runs its engine with no model");
                }
                None => bail!("no slot is ready (fabricd probe shows the slots)"),
            }
        };
        let entry = catalog
            .by_identity(&slot.identity)
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
            Arc::new(crate::stats::InFlight::default()),
            &crate::config::TypingSettings::default(),
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
            session: None,
            join: None,
            front: false,
            pause_after: None,
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

/// A board just booted holds engines and no models: commits `model` (the
/// catalog's first usable one when none is named) into the first slot that
/// runs its engine and holds no model, as the daemon would on starting.
/// Nothing to do when no slot is empty.
fn fill(
    shell: &fabric_hw::shell::Shell,
    tables: &fabric_hw::tables::Tables,
    catalog: &crate::catalog::Catalog,
    model: Option<&str>,
) -> anyhow::Result<()> {
    let candidates: Vec<&crate::catalog::CatalogModel> = match model {
        Some(name) => vec![catalog.get(name)?],
        None => catalog
            .models
            .iter()
            .filter(|m| m.problem.is_none())
            .collect(),
    };
    for entry in candidates {
        let empty = shell
            .slots()
            .into_iter()
            .find(|s| s.state == SlotState::NoModel && s.engine == Some(entry.engine));
        if let Some(slot) = empty {
            let took = crate::rotation::commit_model(
                shell,
                tables,
                catalog,
                entry,
                slot.index,
                &crate::rotation::RotationConfig::default(),
            )
            .with_context(|| format!("putting {} into slot {}", entry.name, slot.index))?;
            eprintln!(
                "fabricd: slot {} held no model: committed {}'s table ({:.1} ms)",
                slot.index,
                entry.name,
                took.as_secs_f64() * 1e3
            );
            return Ok(());
        }
    }
    Ok(())
}
