//! The slots, as the scheduler holds them: the one place a slot's model,
//! whether it takes work, whether it is loading and when it was loaded
//! live. The shell's registers say what the slot holds; everything else is
//! the daemon's own state, changed only by the scheduler's task.

use std::sync::Arc;
use std::time::Instant;

use fabric_hw::contract::{EngineId, SlotState};
use fabric_hw::shell::SlotStatus;
use tokio::sync::oneshot;

/// What the shell says about a slot, named from the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSlot {
    pub index: u8,
    pub state: SlotState,
    /// The engine its module reports.
    pub engine: Option<EngineId>,
    /// The catalog's name for the model the slot holds (none without a
    /// table, or with one not in the catalog).
    pub model: Option<Arc<str>>,
    /// The identity its table declares.
    pub identity: String,
}

impl ShellSlot {
    /// A slot's registers, named by `name_of` (a catalog lookup by the
    /// identity its table declares).
    pub fn read(s: SlotStatus, name_of: impl Fn(&str) -> Option<Arc<str>>) -> ShellSlot {
        let model = match s.state {
            SlotState::Empty | SlotState::NoModel => None,
            _ => name_of(&s.identity),
        };
        ShellSlot {
            index: s.index,
            state: s.state,
            engine: s.engine,
            model,
            identity: s.identity,
        }
    }
}

/// A slot as published: what `/readyz`, `/v1/models`, `fabricctl` and a
/// load's choice of slot see.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotView {
    pub index: u8,
    /// The shell's state, or `loading` while the daemon loads the slot.
    pub state: SlotState,
    /// The model it holds, or the one being loaded into it.
    pub model: Option<Arc<str>>,
    /// The engine its module reports.
    pub engine: Option<EngineId>,
    /// The identity its table declares.
    pub identity: String,
    /// Whether new work may start here (false while draining for a load).
    pub accepting: bool,
    /// When a load last put a model here (for the least recently loaded
    /// choice); not shown.
    #[serde(skip)]
    pub loaded_at: Option<Instant>,
}

/// Whether the fabric can be driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FabricState {
    Attached,
    /// A full reconfiguration is running: every register reads its reset
    /// value, and nothing is read from the shell until the rings are
    /// initialised again.
    Dark,
}

/// Everything the scheduler publishes about the fabric, replaced whole on
/// every change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricView {
    pub state: FabricState,
    pub slots: Vec<SlotView>,
    /// The model `default` names, once a load or a rotation set it.
    pub default: Option<Arc<str>>,
}

impl FabricView {
    /// The model requests for `default` go to: the one loaded or rotated
    /// to most recently, or at start the first ready slot's.
    pub fn default_model(&self) -> Option<Arc<str>> {
        self.default.clone().or_else(|| {
            self.slots
                .iter()
                .find(|v| v.state == SlotState::Ready && v.model.is_some())
                .and_then(|v| v.model.clone())
        })
    }
}

/// One slot inside the scheduler.
#[derive(Debug)]
pub(super) struct Slot {
    pub shell: ShellSlot,
    pub accepting: bool,
    /// The model a load is putting here.
    pub loading: Option<Arc<str>>,
    pub loaded_at: Option<Instant>,
    /// Free decode contexts.
    pub free: Vec<u16>,
    /// Contexts held by bulk requests (see `policy`).
    pub bulk: usize,
    /// Told when the slot's last running request leaves.
    pub drained: Vec<oneshot::Sender<()>>,
}

impl Slot {
    pub fn new(shell: ShellSlot, lanes: usize) -> Slot {
        let base = u16::from(shell.index) * lanes as u16;
        Slot {
            free: (base..base + lanes as u16).rev().collect(),
            shell,
            bulk: 0,
            accepting: true,
            loading: None,
            loaded_at: None,
            drained: Vec::new(),
        }
    }

    pub fn index(&self) -> u8 {
        self.shell.index
    }

    /// Its state as served: loading while a load runs.
    pub fn state(&self) -> SlotState {
        match self.loading {
            Some(_) => SlotState::Loading,
            None => self.shell.state,
        }
    }

    /// The model requests for it wait for: the one being loaded, or the
    /// one it holds.
    pub fn model(&self) -> Option<&Arc<str>> {
        self.loading.as_ref().or(self.shell.model.as_ref())
    }

    /// Whether a free context here may start a request now.
    pub fn takes_work(&self) -> bool {
        self.accepting && self.state() == SlotState::Ready && !self.free.is_empty()
    }

    pub fn view(&self) -> SlotView {
        SlotView {
            index: self.index(),
            state: self.state(),
            model: self.model().cloned(),
            engine: self.shell.engine,
            identity: self.shell.identity.clone(),
            accepting: self.accepting,
            loaded_at: self.loaded_at,
        }
    }
}
