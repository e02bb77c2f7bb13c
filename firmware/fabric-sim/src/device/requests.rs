//! The requests: descriptors fetched from the submission ring and checked,
//! the contexts that hold them, their lanes and tokens, and the completion
//! ring (contract sections 4 to 6).

use std::time::Instant;

use fabric_hw::contract::*;
use fabric_hw::sampling::{Sampling, SplitMix64};
use fabric_model::table::Reader;

use super::tables::DramWords;
use super::{Ctx, Fabric};
use crate::engine::{LmContext, LmNext};

impl Fabric {
    pub(super) fn fetch(&mut self, now: Instant) {
        let Some(sq) = &self.sq else { return };
        let (base, entries) = (sq.base, sq.entries);
        let tail = REG_SQ_TAIL.get(self.r());
        let mut fetched = false;
        while self.sq_head != tail && tail.wrapping_sub(self.sq_head) <= entries {
            let seq = self.sq_head;
            let at = base + (seq % entries) as usize * SQE_LEN;
            self.coherent_in(at, at + SQE_LEN);
            let mut raw = [0u8; SQE_LEN];
            raw.copy_from_slice(&self.dram[at..at + SQE_LEN]);
            self.sq_head = self.sq_head.wrapping_add(1);
            fetched = true;
            match Sqe::decode(&raw, seq) {
                Ok(sqe) => self.accept(sqe, seq, now),
                Err(DescriptorError::Stale { .. }) => {
                    self.stats.stale_descriptors += 1;
                    log::warn!("SQ index {seq}: stale descriptor (the host did not sync it for the device)");
                    self.refuse(seq, CqeStatus::StaleDescriptor, FaultCode::StaleDescriptor);
                }
                Err(e) => {
                    log::warn!("SQ index {seq}: {e}");
                    self.refuse(seq, CqeStatus::BadDescriptor, FaultCode::BadDescriptorCrc);
                }
            }
        }
        if fetched {
            REG_SQ_HEAD.device_write(&self.regs, self.sq_head);
        }
    }

    pub(super) fn refuse(&mut self, seq: u32, status: CqeStatus, code: FaultCode) {
        self.fault(code);
        self.pending.push_back(Cqe {
            seq: 0,
            tag: 0,
            ctx: 0,
            kind: CqeKind::Done,
            status,
            n_tokens: seq,
            crc: 0,
            fabric_us: 0,
            finish: Finish::None,
        });
    }

    /// Refuses an intact descriptor with a DONE carrying its tag; a bad
    /// descriptor's (status 2) also carries its SQ index in `n_tokens`, as
    /// every one of status 2 does (contract section 4).
    pub(super) fn done_now(&mut self, sqe: &Sqe, status: CqeStatus, code: FaultCode) {
        self.fault(code);
        let n_tokens = if status == CqeStatus::BadDescriptor {
            sqe.seq
        } else {
            0
        };
        self.pending.push_back(Cqe {
            seq: 0,
            tag: sqe.tag,
            ctx: sqe.ctx,
            kind: CqeKind::Done,
            status,
            n_tokens,
            crc: 0,
            fabric_us: 0,
            finish: Finish::None,
        });
    }

    pub(super) fn accept(&mut self, sqe: Sqe, seq: u32, now: Instant) {
        let c = &self.config;
        let per_slot = c.contexts_per_slot();
        let ctx = usize::from(sqe.ctx);
        let slot = usize::from(sqe.slot);
        let valid = sqe.opcode == OP_GENERATE
            && sqe.tag != 0
            && ctx < self.ctxs.len()
            && slot < self.slots.len()
            && ctx / per_slot == slot
            && (1..=c.max_prompt).contains(&sqe.prompt_len)
            && (1..=c.max_output).contains(&sqe.max_tokens)
            && sqe.output_cap >= sqe.max_tokens;
        let prompt_at = self.dram_offset(sqe.prompt_addr, u64::from(sqe.prompt_len) * 4);
        // The output is not checked here: a device sees a bad address only
        // when its write fails (contract 1.1, section 6).
        let output_at = self.dram_offset(sqe.output_addr, u64::from(sqe.output_cap) * 4);
        let (Some(prompt_at), true) = (prompt_at, valid) else {
            log::warn!(
                "SQ index {seq}: descriptor for tag {} is out of bounds or malformed",
                sqe.tag
            );
            self.refuse(seq, CqeStatus::BadDescriptor, FaultCode::BadDescriptorCrc);
            return;
        };
        if self.ctxs[ctx].is_some() {
            self.done_now(&sqe, CqeStatus::BadDescriptor, FaultCode::ContextBusy);
            return;
        }
        let s = &self.slots[slot];
        if !matches!(
            (&s.table, s.state, s.quiesce),
            (Some(_), SlotState::Ready, false)
        ) {
            self.done_now(&sqe, CqeStatus::SlotNotReady, FaultCode::SlotNotReady);
            return;
        }
        let len = sqe.prompt_len as usize;
        self.coherent_in(prompt_at, prompt_at + len * 4);
        let prompt: Vec<u32> = (0..len).map(|i| self.dram_u32(prompt_at + i * 4)).collect();
        let hung = take(&mut self.faults.hang);
        let corrupt = take(&mut self.faults.corrupt);
        self.ctxs[ctx] = Some(Ctx {
            tag: sqe.tag,
            slot,
            started: now,
            running: false,
            next_due: now,
            prompt_len: sqe.prompt_len,
            // Section 8: the prompt's last two tokens, end-of-text before it.
            a: if prompt.len() >= 2 {
                prompt[prompt.len() - 2]
            } else {
                fabric_model::tokenizer::EOS
            },
            b: prompt
                .last()
                .copied()
                .unwrap_or(fabric_model::tokenizer::EOS),
            lm: self.slots[slot]
                .table
                .as_ref()
                .and_then(|t| t.lm.clone())
                .map(|w| Box::new(LmContext::new(w, &prompt))),
            rng: SplitMix64(sqe.seed),
            sampling: Sampling::from_f32(sqe.temperature),
            produced: 0,
            max_tokens: sqe.max_tokens,
            stop_token: sqe.stop_token,
            stream: sqe.flags & FLAG_STREAM != 0,
            output: output_at,
            crc: crc32fast::Hasher::new(),
            hung,
            corrupt,
        });
        self.slots[slot].active += 1;
        self.slots[slot].dirty = true;
        self.slots[slot].waiting.push_back(ctx);
        self.counters.submitted = self.counters.submitted.wrapping_add(1);
        self.counters.active += 1;
        self.start_waiting(slot, now);
    }

    /// Gives free lanes of `slot` to its waiting contexts, in order.
    pub(super) fn start_waiting(&mut self, slot: usize, now: Instant) {
        let lanes = usize::from(self.config.lanes);
        while self.slots[slot].running < lanes {
            let Some(i) = self.slots[slot].waiting.pop_front() else {
                break;
            };
            if self.ctxs[i].is_none() {
                continue;
            }
            self.slots[slot].running += 1;
            let first = self.ctxs[i].as_ref().map(|c| self.first_token_time(c));
            if let (Some(c), Some(first)) = (self.ctxs[i].as_mut(), first) {
                // A lane freed at `now` (the instant the previous request's
                // last token was due) starts this one then, unless it
                // arrived later: back to back, as hardware would.
                let start = now.max(c.started);
                c.running = true;
                c.next_due = start + first;
                let decoding: usize = self.slots.iter().map(|s| s.running).sum();
                self.stats.peak_decoding = self.stats.peak_decoding.max(decoding as u32);
            }
        }
    }

    pub(super) fn cancels(&mut self, now: Instant) {
        for i in 0..self.ctxs.len() {
            let Some(c) = &self.ctxs[i] else { continue };
            if c.hung {
                continue;
            }
            if reg_ctx_cancel(i).get(self.r()) == c.tag {
                self.finish(i, CqeStatus::Cancelled, Finish::None, now);
            }
        }
    }

    pub(super) fn advance(&mut self, now: Instant) {
        for i in 0..self.ctxs.len() {
            while let Some(c) = self.ctxs[i].as_mut() {
                if c.hung || !c.running || c.next_due > now {
                    break;
                }
                // A quiesced slot makes only the tokens already under way.
                let slot = &self.slots[c.slot];
                if slot.quiesce && slot.draining_until.is_none_or(|u| c.next_due > u) {
                    break;
                }
                let Some(output) = c.output else {
                    // The first write to the output fails: a bus error.
                    let due = c.next_due;
                    self.fault(FaultCode::DecoderFault);
                    self.finish(i, CqeStatus::Fault, Finish::None, due);
                    break;
                };
                let Some(table) = self.slots[c.slot].table.as_ref() else {
                    // Unreachable: a slot loses its table only as its
                    // contexts end (a load or a commit aborts them).
                    break;
                };
                let token = if let Some(lm) = c.lm.as_mut() {
                    match lm.next(c.rng.next(), c.sampling) {
                        LmNext::Token(t) => t,
                        LmNext::Full => {
                            let due = c.next_due;
                            self.finish(i, CqeStatus::Ok, Finish::Length, due);
                            break;
                        }
                        LmNext::BadToken(t) => {
                            let due = c.next_due;
                            log::warn!(
                                "fabric-sim: tag {}: prompt token {t} is outside the vocabulary",
                                c.tag
                            );
                            self.fault(FaultCode::DecoderFault);
                            self.finish(i, CqeStatus::Fault, Finish::None, due);
                            break;
                        }
                    }
                } else {
                    let words = DramWords {
                        table,
                        dram: &self.dram,
                        cpu: self.config.dma_coherent.then_some(&self.cpu_view),
                    };
                    match words.step(c.a, c.b, c.rng.next(), c.sampling) {
                        Ok(t) => t,
                        Err(e) => {
                            // A table read that failed: the request ends as a
                            // fault, and the slot is in error until loaded
                            // again.
                            let (due, slot) = (c.next_due, c.slot);
                            log::warn!("fabric-sim: slot {slot}: {e}");
                            self.fault(FaultCode::TableRead);
                            self.finish(i, CqeStatus::Fault, Finish::None, due);
                            self.slots[slot].state = SlotState::Error(slot_error::TABLE_READ);
                            self.slots[slot].dirty = true;
                            self.bump_event();
                            break;
                        }
                    }
                };
                (c.a, c.b) = (c.b, token);
                let at = output + c.produced as usize * 4;
                c.crc.update(&token.to_le_bytes());
                c.produced += 1;
                let due = c.next_due;
                let (produced, stream, tag) = (c.produced, c.stream, c.tag);
                let done = if token == c.stop_token {
                    Some(Finish::Stop)
                } else if c.produced >= c.max_tokens {
                    Some(Finish::Length)
                } else {
                    None
                };
                if done.is_none() {
                    // The next token: the engine's time for it, with the
                    // lanes decoding now.
                    let step = self.ctxs[i].as_ref().map(|c| self.next_token_time(c));
                    if let (Some(c), Some(step)) = (self.ctxs[i].as_mut(), step) {
                        c.next_due = due + step;
                    }
                }
                self.dram[at..at + 4].copy_from_slice(&token.to_le_bytes());
                self.coherent_out(at, at + 4);
                self.counters.tokens = self.counters.tokens.wrapping_add(1);
                match done {
                    Some(finish) => {
                        self.finish(i, CqeStatus::Ok, finish, due);
                        break;
                    }
                    None if stream => self.pending.push_back(Cqe {
                        seq: 0,
                        tag,
                        ctx: i as u16,
                        kind: CqeKind::Tokens,
                        status: CqeStatus::Ok,
                        n_tokens: produced,
                        crc: 0,
                        fabric_us: 0,
                        finish: Finish::None,
                    }),
                    None => {}
                }
            }
        }
    }

    pub(super) fn finish(&mut self, i: usize, status: CqeStatus, finish: Finish, now: Instant) {
        let Some(c) = self.ctxs[i].take() else { return };
        let crc = c.crc.finalize();
        if c.corrupt && c.produced > 0 {
            // Flip a bit of the first token after the CRC was taken: the
            // host must notice.
            if let Some(at) = c.output {
                self.dram[at] ^= 0x01;
                self.coherent_out(at, at + 4);
            }
        }
        let slot = &mut self.slots[c.slot];
        slot.active = slot.active.saturating_sub(1);
        if c.running {
            slot.running = slot.running.saturating_sub(1);
        } else {
            slot.waiting.retain(|&w| w != i);
        }
        self.counters.active = self.counters.active.saturating_sub(1);
        match status {
            CqeStatus::Ok => self.counters.completed = self.counters.completed.wrapping_add(1),
            CqeStatus::Cancelled => {
                self.counters.cancelled = self.counters.cancelled.wrapping_add(1)
            }
            _ => self.counters.errors = self.counters.errors.wrapping_add(1),
        }
        self.pending.push_back(Cqe {
            seq: 0,
            tag: c.tag,
            ctx: i as u16,
            kind: CqeKind::Done,
            status,
            n_tokens: c.produced,
            crc,
            fabric_us: now
                .saturating_duration_since(c.started)
                .as_micros()
                .min(u32::MAX.into()) as u32,
            finish,
        });
        self.write_slot(c.slot);
        self.start_waiting(c.slot, now);
    }

    pub(super) fn post_pending(&mut self) {
        let Some(cq) = &self.cq else { return };
        let (base, entries) = (cq.base, cq.entries);
        let head = REG_CQ_HEAD.get(self.r());
        let mut posted = false;
        while let Some(mut cqe) = self.pending.pop_front() {
            if self.cq_tail.wrapping_sub(head) >= entries {
                // Full: the device waits for the host to consume.
                self.pending.push_front(cqe);
                break;
            }
            cqe.seq = self.cq_tail;
            let at = base + (self.cq_tail % entries) as usize * CQE_LEN;
            self.dram[at..at + CQE_LEN].copy_from_slice(&cqe.encode());
            self.coherent_out(at, at + CQE_LEN);
            self.cq_tail = self.cq_tail.wrapping_add(1);
            posted = true;
        }
        if posted {
            REG_CQ_TAIL.device_write(&self.regs, self.cq_tail);
        }
    }
}

/// Takes one of a fault's injections, if any are left.
pub(super) fn take(counter: &mut u32) -> bool {
    if *counter > 0 {
        *counter -= 1;
        true
    } else {
        false
    }
}
