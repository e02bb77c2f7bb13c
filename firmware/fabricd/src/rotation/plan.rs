//! Which model each slot was last given, kept on the card: a slot's table
//! lives in DDR, so a power cycle (or a full reconfiguration, after which
//! the daemon restarts) leaves every slot with its engine and no model. The
//! daemon fills such a slot with the model this plan names for it, so a
//! board comes back as the operator left it.
//!
//! A plan that cannot be read is not an error worth refusing to serve
//! over: it is logged and the slots get the configuration's or the
//! catalog's models instead.

use std::path::{Path, PathBuf};

use super::RotationError;

/// What the file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct PlanFile {
    /// One entry per slot; empty: nothing planned.
    slots: Vec<String>,
}

/// The plan, and where it is kept (nowhere for a daemon that keeps none).
#[derive(Debug)]
pub struct Plan {
    path: Option<PathBuf>,
    file: std::sync::Mutex<PlanFile>,
}

impl Plan {
    /// The plan at `path` (none kept if `None`); an unreadable one is
    /// logged and starts empty.
    pub fn open(path: Option<PathBuf>) -> Plan {
        let file = path.as_deref().map_or_else(PlanFile::default, read);
        Plan {
            path,
            file: std::sync::Mutex::new(file),
        }
    }

    /// The model planned for `slot`, if any.
    pub fn get(&self, slot: u8) -> Option<String> {
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.slots
            .get(usize::from(slot))
            .filter(|m| !m.is_empty())
            .cloned()
    }

    /// Records that `slot` holds `model`, durably.
    pub fn set(&self, slot: u8, model: &str) -> Result<(), RotationError> {
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let i = usize::from(slot);
        if file.slots.len() <= i {
            file.slots.resize(i + 1, String::new());
        }
        if file.slots[i] == model {
            return Ok(());
        }
        file.slots[i] = model.to_owned();
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut text = serde_json::to_vec_pretty(&*file).map_err(|e| {
            RotationError::Internal(format!("the slot plan does not serialize: {e}"))
        })?;
        text.push(b'\n');
        super::image::stage(path, &text)
    }
}

fn read(path: &Path) -> PlanFile {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            log::warn!(
                "rotation: the slot plan {} is unreadable ({e}); the slots get the configuration's or the catalog's models",
                path.display()
            );
            PlanFile::default()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => PlanFile::default(),
        Err(e) => {
            log::warn!("rotation: reading the slot plan {}: {e}", path.display());
            PlanFile::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_a_restart_and_a_bad_one_starts_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data/slots.json");
        let plan = Plan::open(Some(path.clone()));
        assert_eq!(plan.get(1), None);
        plan.set(1, "fortunes").expect("set");
        plan.set(0, "kjv").expect("set");
        let again = Plan::open(Some(path.clone()));
        assert_eq!(
            (again.get(0), again.get(1), again.get(2)),
            (Some("kjv".into()), Some("fortunes".into()), None)
        );
        std::fs::write(&path, "{ not json").expect("write");
        assert_eq!(Plan::open(Some(path)).get(0), None);
    }
}
