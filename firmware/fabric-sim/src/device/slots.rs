//! The PR slots: what a load does to a slot, its registers, and QUIESCE as
//! the DFX AXI Shutdown Manager has it (contract section 7).

use std::time::Instant;

use fabric_hw::contract::*;

use super::{Fabric, Loaded};

impl Fabric {
    /// `set_slot` for the RTL: the load's steps as the kernel and the
    /// configuration port take them.
    #[cfg(feature = "rtl")]
    pub(super) fn rtl_set_slot(&mut self, s: usize, loaded: Option<Loaded>, state: SlotState) {
        let engine = loaded.as_ref().map(|l| l.engine);
        self.slots[s].loaded = loaded;
        self.with_rtl(|rtl, mem, regs| {
            if !rtl.decoupled(s) {
                rtl.begin_load(mem, regs, s);
            }
            match state {
                SlotState::Loading => {}
                // An engine's image, or none (a greybox): the shell reads
                // which from SLOT_ENGINE.
                _ => rtl.end_load(mem, regs, s, engine, true),
            }
        });
    }

    /// Programs slot `s` directly (a boot image, or the end of a load):
    /// `loaded`, an engine with no model (`NoModel`), or none (`Empty`); or
    /// the load's start (`Loading`), or its failure. The engine's table is
    /// gone either way. A load's start while a step or a table read is
    /// outstanding tears the slot: the load then ends in `Error(TORN)`.
    pub fn set_slot(&mut self, s: usize, loaded: Option<Loaded>, mut state: SlotState) {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            return self.rtl_set_slot(s, loaded, state);
        }
        let now = Instant::now();
        let outstanding =
            (!self.slots[s].shut && self.slot_decoding(s, now)) || self.slots[s].commit.is_some();
        self.abort_slot(s);
        let slot = &mut self.slots[s];
        // A commit under way has been acted on: the slot comes up torn, and
        // the commit is not taken up again after the load.
        if let Some(p) = slot.commit.take() {
            slot.committed = p.value;
        }
        match state {
            SlotState::Loading => {
                if outstanding {
                    log::warn!("fabric-sim: slot {s} reprogrammed with a step or a table read outstanding: torn");
                }
                slot.torn = outstanding;
            }
            SlotState::NoModel | SlotState::Ready if slot.torn => {
                state = SlotState::Error(slot_error::TORN);
            }
            _ => {}
        }
        if matches!(state, SlotState::NoModel | SlotState::Ready) {
            slot.torn = false;
            if loaded.is_none() {
                state = SlotState::Empty;
            }
        }
        slot.loaded = loaded;
        slot.table = None;
        slot.commit = None;
        slot.state = state;
        self.write_slot(s);
        self.bump_event();
    }

    /// The overlay that programmed slot `s`.
    pub fn slot_overlay(&self, s: usize) -> Option<String> {
        self.slots[s]
            .loaded
            .as_ref()
            .and_then(|l| l.overlay.clone())
    }

    /// Slot `s`'s state.
    pub fn slot_state(&self, s: usize) -> SlotState {
        #[cfg(feature = "rtl")]
        if self.rtl.is_some() {
            return SlotState::decode(SlotRegs::of(s).state.read(&self.regs));
        }
        self.slots[s].state
    }

    /// The number of slots.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Whether a token of slot `s` is under way at `now`: a running
    /// context whose next token is not yet made, and that the slot, if
    /// quiesced, still lets finish.
    pub(super) fn slot_decoding(&self, s: usize, now: Instant) -> bool {
        let until = self.slots[s].draining_until;
        self.ctxs.iter().flatten().any(|c| {
            c.slot == s
                && c.running
                && !c.hung
                && c.next_due > now
                && until.is_none_or(|u| c.next_due <= u)
        })
    }

    /// Ends every request running in slot `s` with a fault (its logic is
    /// about to be replaced).
    pub(super) fn abort_slot(&mut self, s: usize) {
        let now = Instant::now();
        for i in 0..self.ctxs.len() {
            if self.ctxs[i].as_ref().is_some_and(|c| c.slot == s) {
                self.finish(i, CqeStatus::Fault, Finish::None, now);
            }
        }
    }

    pub(super) fn write_slot(&mut self, s: usize) {
        self.write_times();
        let regs = SlotRegs::of(s);
        let slot = &self.slots[s];
        let (identity, crc) = slot
            .table
            .as_ref()
            .map_or(([0u8; 32], 0), |t| (t.identity, t.crc));
        // What a commit reports before SLOT_COMMITTED, which the host
        // polls and then reads the rest: written last (the RTL changes
        // them all in one cycle; this file is read while it is written).
        regs.engine.device_write(
            &self.regs,
            slot.loaded.as_ref().map_or(0, |l| l.engine.encode()),
        );
        regs.loads.device_write(&self.regs, slot.loads);
        regs.active.device_write(&self.regs, slot.active);
        regs.table_crc.device_write(&self.regs, crc);
        for (i, chunk) in identity.chunks_exact(4).enumerate() {
            regs.identity_word(i).device_write(
                &self.regs,
                u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
            );
        }
        regs.shutdown.device_write(
            &self.regs,
            match (slot.quiesce, slot.shut) {
                (false, _) => 0,
                (true, true) => SHUTDOWN_DONE,
                (true, false) => SHUTDOWN_DRAINING,
            },
        );
        regs.state.device_write(&self.regs, slot.state.encode());
        regs.committed.device_write(&self.regs, slot.committed);
    }

    /// QUIESCE stops the slot starting work, the way the DFX AXI Shutdown
    /// Manager blocks new transactions: the tokens under way are finished
    /// and the slot's contexts keep their requests, paused. Cleared, they
    /// go on.
    pub(super) fn slot_control(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            let regs = SlotRegs::of(s);
            let quiesce = regs.ctrl.read(self.r()).is_set(SLOT_CTRL::QUIESCE);
            if self.slots[s].quiesce == quiesce {
                continue;
            }
            self.slots[s].quiesce = quiesce;
            self.slots[s].dirty = true;
            if quiesce {
                self.slots[s].draining_until = self
                    .ctxs
                    .iter()
                    .flatten()
                    .filter(|c| c.slot == s && c.running && !c.hung)
                    .map(|c| c.next_due)
                    .max();
            } else {
                self.slots[s].draining_until = None;
                for i in 0..self.ctxs.len() {
                    let Some(c) = &self.ctxs[i] else { continue };
                    if c.slot == s && c.running && c.next_due < now {
                        let step = self.next_token_time(c);
                        if let Some(c) = self.ctxs[i].as_mut() {
                            c.next_due = now + step;
                        }
                    }
                }
            }
        }
    }

    /// Whether each quiesced slot has finished what was under way: no step
    /// and no table read outstanding.
    pub(super) fn shutdowns(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            let shut = self.slots[s].quiesce
                && !self.slot_decoding(s, now)
                && self.slots[s].commit.is_none();
            if self.slots[s].shut != shut {
                self.slots[s].shut = shut;
                self.slots[s].dirty = true;
            }
        }
    }

    /// Rewrites the registers of slots that changed.
    pub(super) fn flush_slots(&mut self) {
        for s in 0..self.slots.len() {
            if std::mem::take(&mut self.slots[s].dirty) {
                self.write_slot(s);
            }
        }
    }
}
