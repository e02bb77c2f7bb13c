//! What the control socket's commands do: read what the scheduler and the
//! stats publish, and ask rotation to load, drain or resume.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::protocol::{Command, Refusal};
use super::socket::Commands;
use crate::catalog::Catalog;
use crate::rotation::{LoadReport, Program, RotationError, Rotator};
use crate::sched::Control;
use crate::stats::metrics::Metrics;
use crate::stats::StatsHandle;

/// The daemon's side of the control socket.
#[derive(Debug)]
pub struct Admin {
    pub sched: Control,
    pub catalog: Arc<Catalog>,
    pub metrics: Arc<Metrics>,
    pub stats: Arc<StatsHandle>,
    pub rotator: Arc<Rotator>,
    /// The board's drain, which the agent check answers from.
    pub board_drain: Arc<crate::serve::agent::BoardDrain>,
    /// Whether an agent check listens, for what a board drain can claim.
    pub agent_listening: bool,
    pub started: Instant,
}

/// What `fabricctl load` and `rotate` print.
fn load_message(r: &LoadReport) -> String {
    let done = format!("slot {} runs {} ({} ms)", r.slot, r.model, r.total_ms);
    match &r.restart {
        Some(why) => format!("{done}; {why}"),
        None => done,
    }
}

fn refuse(e: RotationError) -> Refusal {
    Refusal::new(e.kind(), fabric_hw::Chain(&e).to_string())
}

impl Commands for Admin {
    async fn run(&self, cmd: Command) -> Result<Value, Refusal> {
        let published = self.sched.published();
        match cmd {
            Command::Status => Ok(json!({
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_s": self.started.elapsed().as_secs_f64(),
                "fabric": {
                    "state": published.view().state,
                    "device": published.device,
                    "shell": published.info,
                },
                "queue_depth": published.queued.load(Relaxed),
                "in_flight": published.in_flight.load(Relaxed),
                "connections": self.metrics.connections_open.load(Relaxed),
                "drained": self.board_drain.is_on(),
                "slots": published.view().slots,
            })),
            Command::Models => {
                let view = published.view();
                let models: Vec<_> = self
                    .catalog
                    .models
                    .iter()
                    .map(|m| {
                        let held: Vec<_> = view
                            .slots
                            .iter()
                            .filter(|s| s.model.as_deref() == Some(&*m.name))
                            .map(|s| json!({"slot": s.index, "state": s.state.as_str()}))
                            .collect();
                        json!({
                            "id": m.name,
                            "description": m.description,
                            "usable": m.problem.is_none(),
                            "problem": m.problem.as_ref().map(ToString::to_string),
                            "images": m.images,
                            "slots": held,
                        })
                    })
                    .collect();
                Ok(json!({"models": models}))
            }
            Command::Stats { since_ms, merge } => Ok(self.stats.report(since_ms, merge).await),
            Command::Checkpoint => {
                self.stats.checkpoint().await;
                Ok(json!({"message": "the open stats window is on the card"}))
            }
            Command::Load {
                model,
                slot,
                force,
                full,
                reflash,
            } => {
                let program = match (full, reflash) {
                    (true, true) => {
                        return Err(Refusal::new(
                            "bad_request",
                            "load: \"full\" programs every slot; \"reflash\" is for one",
                        ))
                    }
                    (true, false) => Program::Fabric,
                    (false, true) => Program::Slot,
                    (false, false) => Program::AsNeeded,
                };
                let r = self
                    .rotator
                    .load(&model, slot, force, program)
                    .await
                    .map_err(refuse)?;
                Ok(json!({
                    "message": load_message(&r),
                    "report": r,
                    "slots": published.view().slots,
                }))
            }
            Command::Rotate => {
                let r = self.rotator.rotate().await.map_err(refuse)?;
                Ok(json!({
                    "message": load_message(&r),
                    "report": r,
                    "slots": published.view().slots,
                }))
            }
            Command::Drain {
                slot: None,
                board: true,
            } => {
                let was = self.board_drain.set(true);
                let message = match (was, self.agent_listening) {
                    (true, _) => "the board was drained already".to_owned(),
                    (false, true) => "the board is drained: its agent check answers drain, so the \
                         balancer sends it no new work; it still serves what arrives, until \
                         `fabricctl resume --board` (a restart forgets it)"
                        .to_owned(),
                    (false, false) => "the board is marked drained, but no agent check listens \
                         (agent_listen is not set): no balancer hears of it, and work still comes"
                        .to_owned(),
                };
                Ok(json!({"message": message, "drained": true}))
            }
            Command::Resume {
                slot: None,
                board: true,
            } => {
                let was = self.board_drain.set(false);
                let message = if was {
                    "the board takes new work again"
                } else {
                    "the board was not drained"
                };
                Ok(json!({"message": message, "drained": false}))
            }
            Command::Drain { slot: None, .. } | Command::Resume { slot: None, .. } => {
                Err(Refusal::new(
                    "bad_request",
                    "give a slot, or board: true for the whole board",
                ))
            }
            Command::Drain {
                slot: Some(_),
                board: true,
            }
            | Command::Resume {
                slot: Some(_),
                board: true,
            } => Err(Refusal::new(
                "bad_request",
                "a slot or board: true, not both",
            )),
            Command::Drain {
                slot: Some(slot), ..
            } => {
                let d = self.rotator.drain(slot).await.map_err(refuse)?;
                let message = format!(
                    "slot {slot} drained in {} ms; it takes no new work until a load or resume",
                    d.as_millis()
                );
                Ok(json!({"message": message, "slots": published.view().slots}))
            }
            Command::Resume {
                slot: Some(slot), ..
            } => {
                self.rotator.resume(slot).await.map_err(refuse)?;
                let message = format!("slot {slot} takes work again");
                Ok(json!({"message": message, "slots": published.view().slots}))
            }
        }
    }
}
