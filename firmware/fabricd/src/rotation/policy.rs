//! The policy: which slot a load goes into, and what the schedule loads
//! next. Pure functions of the published slots.

use std::sync::Arc;

use super::RotationError;
use crate::sched::SlotView;

/// Where a load of `model` goes when no slot is named: an empty slot; else
/// a slot whose model is loaded elsewhere too, or is the one being loaded;
/// else the least recently loaded slot that does not hold `current` (the
/// model `default` names). The model being replaced serves until the new
/// one is ready (make before break), and `default` never loses its only
/// slot.
pub fn pick_slot(views: &[SlotView], model: &str, current: Option<&Arc<str>>) -> u8 {
    if let Some(v) = views.iter().find(|v| v.model.is_none()) {
        return v.index;
    }
    let count = |m: &Arc<str>| views.iter().filter(|v| v.model.as_ref() == Some(m)).count();
    if let Some(v) = views.iter().find(|v| {
        v.model
            .as_ref()
            .is_some_and(|m| count(m) > 1 || &**m == model)
    }) {
        return v.index;
    }
    views
        .iter()
        .min_by_key(|v| {
            (
                v.model.is_some() && v.model.as_ref() == current,
                v.loaded_at,
                v.index,
            )
        })
        .map_or(0, |v| v.index)
}

/// What the schedule loads after `current`: the next model in it, or its
/// first when `current` is not in it.
pub fn next_in_schedule(
    schedule: &[String],
    current: Option<&Arc<str>>,
) -> Result<String, RotationError> {
    if schedule.is_empty() {
        return Err(RotationError::NoSchedule);
    }
    let next = match current.and_then(|m| schedule.iter().position(|s| **s == **m)) {
        Some(i) => schedule[(i + 1) % schedule.len()].clone(),
        None => schedule[0].clone(),
    };
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_hw::contract::SlotState;
    use std::time::{Duration, Instant};

    fn view(index: u8, model: Option<&str>, loaded_at: Option<Instant>) -> SlotView {
        SlotView {
            index,
            state: SlotState::Ready,
            model: model.map(Arc::from),
            engine: None,
            identity: String::new(),
            accepting: true,
            loaded_at,
        }
    }

    #[test]
    fn an_empty_slot_then_a_duplicate_then_the_oldest_not_default() {
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        let kjv: Arc<str> = Arc::from("kjv");
        // An empty slot first.
        let v = [view(0, Some("kjv"), None), view(1, None, None)];
        assert_eq!(pick_slot(&v, "fortunes", Some(&kjv)), 1);
        // A model held twice gives one copy up.
        let v = [view(0, Some("a"), None), view(1, Some("a"), None)];
        assert_eq!(pick_slot(&v, "b", None), 0);
        // Otherwise the least recently loaded slot not holding `default`,
        // however old `default`'s own slot is.
        let v = [
            view(0, Some("kjv"), Some(t)),
            view(1, Some("x"), Some(later)),
            view(2, Some("y"), None),
        ];
        assert_eq!(pick_slot(&v, "z", Some(&kjv)), 2);
        let v = [
            view(0, Some("kjv"), Some(t)),
            view(1, Some("x"), Some(later)),
        ];
        assert_eq!(pick_slot(&v, "z", Some(&kjv)), 1);
    }

    #[test]
    fn the_schedule_walks_on_from_the_current_model() {
        let s = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(next_in_schedule(&s, None).expect("first"), "a");
        assert_eq!(
            next_in_schedule(&s, Some(&Arc::from("a"))).expect("next"),
            "b"
        );
        assert_eq!(
            next_in_schedule(&s, Some(&Arc::from("b"))).expect("wraps"),
            "a"
        );
        assert!(matches!(
            next_in_schedule(&[], None),
            Err(RotationError::NoSchedule)
        ));
    }
}
