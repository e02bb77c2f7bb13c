//! What a load reports: its errors (each with the type `fabricctl` shows),
//! its timeouts and schedule, its report, and how it asks for a restart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fabric_hw::bitstream::BitstreamError;
use fabric_hw::fpga::FpgaError;
use fabric_hw::shell::ShellError;
use fabric_hw::tables::TableError;

use crate::catalog::{CatalogError, GateError};

/// Overlay names this daemon owns: `fabricd-slot<N>`.
pub const OVERLAY_PREFIX: &str = "fabricd-slot";

/// Why a load was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    #[error("{0:?} is not a model name (letters, digits, -, _ and . only; models are named, never addressed by path)")]
    BadName(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("model {model} cannot be loaded: {problem}")]
    Unusable {
        model: String,
        problem: CatalogError,
    },
    #[error("there is no slot {slot} (the shell has {slots})")]
    NoSuchSlot { slot: u8, slots: usize },
    #[error(
        "model {model} has no {kind} image for slot {slot} (its images are for slots {slots:?})"
    )]
    NotForSlot {
        model: String,
        kind: &'static str,
        slot: u8,
        slots: Vec<u8>,
    },
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error("the catalog is for shell {manifest}, the fabric runs shell {shell}")]
    WrongShell { manifest: String, shell: String },
    #[error("{file}")]
    Bitstream {
        file: String,
        source: BitstreamError,
    },
    #[error("slot {slot} still runs requests after {waited_ms} ms; retry, or force it")]
    Busy { slot: u8, waited_ms: u128 },
    #[error("another load is in progress")]
    AlreadyLoading,
    #[error("staging {path}")]
    Stage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("quiescing slot {slot}")]
    Quiesce { slot: u8, source: ShellError },
    #[error("slot {slot}")]
    Reconfigure { slot: u8, source: FpgaError },
    #[error("slot {slot} reads {state} with {found} after the load; expected {expected}")]
    Readback {
        slot: u8,
        state: String,
        found: String,
        expected: String,
    },
    #[error("committing the table")]
    Table {
        #[from]
        source: TableError,
    },
    // The failed load's whole chain: `error` is this error's story, not a
    // source to print after `restored`.
    #[error("{}; {restored}", fabric_hw::Chain(.error.as_ref()))]
    RolledBack {
        error: Box<RotationError>,
        restored: String,
    },
    #[error("no rotation schedule is configured ([rotation] models in the configuration)")]
    NoSchedule,
    #[error("the fabric is dark (a full reconfiguration is running)")]
    Dark,
    #[error("{0}")]
    Internal(String),
}

impl RotationError {
    /// The type string fabricctl shows.
    pub fn kind(&self) -> &'static str {
        match self {
            RotationError::BadName(_) => "bad_model_name",
            RotationError::Catalog(c) | RotationError::Unusable { problem: c, .. } => {
                catalog_kind(c)
            }
            // An image the gate refused is refused for the gate's reason,
            // when it was found loading or when the catalog was read.
            RotationError::Gate(g) => g.kind(),
            RotationError::NoSuchSlot { .. } => "no_such_slot",
            RotationError::NotForSlot { .. } => "wrong_slot",
            RotationError::WrongShell { .. } => "wrong_shell",
            RotationError::Bitstream { .. } => "bad_image",
            RotationError::Busy { .. } => "slot_busy",
            RotationError::AlreadyLoading => "busy",
            RotationError::Stage { .. } => "staging_failed",
            RotationError::Quiesce { .. } => "quiesce_failed",
            RotationError::Reconfigure { .. } | RotationError::Readback { .. } => "load_failed",
            RotationError::Table {
                source: TableError::RegionTooSmall { .. },
            } => "region_too_small",
            RotationError::Table {
                source: TableError::Refused { .. } | TableError::NotQuiesced { .. },
            } => "commit_refused",
            RotationError::Table { .. } => "load_failed",
            RotationError::RolledBack { .. } => "load_failed_rolled_back",
            RotationError::NoSchedule => "no_schedule",
            RotationError::Dark => "fabric_dark",
            RotationError::Internal(_) => "internal",
        }
    }
}

/// The type of a catalog's refusal: an image the gate refused, for the
/// gate's reason, also when it is a model's engine's.
fn catalog_kind(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::UnknownModel { .. } => "unknown_model",
        CatalogError::Gate(g) => g.kind(),
        CatalogError::EngineUnusable { problem, .. } => catalog_kind(problem),
        _ => "bad_image",
    }
}

/// How much of the fabric a load programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Program {
    /// The slot's engine image only where the slot does not run the
    /// model's engine; else a switch, the table alone.
    #[default]
    AsNeeded,
    /// The slot's engine image even where it runs the engine (`reflash`):
    /// the engine's logic rebuilt from its image.
    Slot,
    /// The full image: the shell and every slot, the fabric dark meanwhile
    /// (`full`).
    Fabric,
}

/// Timeouts and the schedule.
#[derive(Debug, Clone)]
pub struct RotationConfig {
    pub drain_timeout: Duration,
    pub quiesce_timeout: Duration,
    pub apply_timeout: Duration,
    pub full_timeout: Duration,
    /// How long a slot may take to read a committed table in.
    pub commit_timeout: Duration,
    pub schedule: Vec<String>,
    /// Where the slot plan is kept ([`super::plan`]); none: not kept.
    pub plan: Option<std::path::PathBuf>,
}

impl Default for RotationConfig {
    fn default() -> Self {
        RotationConfig {
            drain_timeout: Duration::from_secs(30),
            quiesce_timeout: Duration::from_secs(2),
            apply_timeout: Duration::from_secs(120),
            full_timeout: Duration::from_secs(300),
            commit_timeout: Duration::from_secs(10),
            schedule: Vec::new(),
            plan: None,
        }
    }
}

/// How a load asks the daemon to restart: after a reconfiguration the
/// shell's UIO device came back under another number, so every handle to
/// the old one is invalid. A restart attaches to the new one without
/// reflashing anything (see `serve`), which is simpler and better tested
/// than swapping every handle in place.
#[derive(Debug, Clone, Default)]
pub struct RestartHandle {
    shutdown: Option<tokio_util::sync::CancellationToken>,
    requested: Arc<std::sync::atomic::AtomicBool>,
}

impl RestartHandle {
    /// A handle that stops the daemon through `shutdown`.
    pub fn new(shutdown: tokio_util::sync::CancellationToken) -> RestartHandle {
        RestartHandle {
            shutdown: Some(shutdown),
            requested: Arc::default(),
        }
    }

    pub(super) fn request(&self) {
        self.requested
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(s) = &self.shutdown {
            s.cancel();
        }
    }

    /// Whether a restart was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a finished load reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub model: String,
    pub slot: u8,
    pub replaced: Option<String>,
    pub method: &'static str,
    pub staged_sha256: String,
    pub drain_ms: u128,
    /// The partial reconfiguration (0 for a switch: the engine stayed).
    pub reconfigure_ms: u128,
    /// The table's commit: written, read in by the engine, checked.
    pub table_ms: u128,
    pub total_ms: u128,
    /// Set when the shell's UIO device moved and the daemon restarts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
}
