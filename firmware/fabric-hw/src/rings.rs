//! The rings: the submission and completion queues in the DDR buffer, the
//! one doorbell function, and the drain of completions (the contract's
//! section 5; the functions below say where each step is). [`Rings`] owns
//! the buffer and the ring state, and exactly one task drives it; it reads
//! and writes the shell's registers through the [`Shell`] it is given.
//!
//! A drain allocates nothing, so the interrupt costs no trip to the
//! allocator: the per-context state is fixed in size (the contract's
//! [`MAX_SHELL_CONTEXTS`]); each context keeps the running CRC of its output
//! rather than the tokens themselves; and the tokens a drain reads go into
//! the caller's [`Drained`], which [`Rings::drained`] makes with room for
//! the most one drain can find.

use std::time::Duration;

use crate::barrier::{io_rmb, io_wmb};
use crate::contract::*;
use crate::dma::DmaBuf;
use crate::shell::{wait_reg, Shell, ShellError, ShellInfo};

/// Ring sizes.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    pub sq_entries: u32,
    pub cq_entries: u32,
    /// How long the shell may take to stop or start.
    pub enable_timeout: Duration,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            sq_entries: 256,
            cq_entries: 1024,
            enable_timeout: Duration::from_secs(2),
        }
    }
}

/// Where everything lives in the DMA buffer (contract section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub sq: u64,
    pub cq: u64,
    pub prompts: u64,
    pub outputs: u64,
    pub prompt_stride: u64,
    pub output_stride: u64,
    pub end: u64,
}

const SECTION_ALIGN: u64 = 4096;

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

impl Layout {
    /// The layout for `info` and `config`.
    pub fn new(info: &ShellInfo, config: &RingConfig) -> Layout {
        let contexts = info.contexts() as u64;
        let sq = 0;
        let cq = align_up(
            sq + u64::from(config.sq_entries) * SQE_LEN as u64,
            SECTION_ALIGN,
        );
        let prompts = align_up(
            cq + u64::from(config.cq_entries) * CQE_LEN as u64,
            SECTION_ALIGN,
        );
        let prompt_stride = align_up(u64::from(info.max_prompt) * 4, crate::dma::CACHE_LINE);
        let outputs = align_up(prompts + contexts * prompt_stride, SECTION_ALIGN);
        let output_stride = align_up(u64::from(info.max_output) * 4, crate::dma::CACHE_LINE);
        let end = align_up(outputs + contexts * output_stride, SECTION_ALIGN);
        Layout {
            sq,
            cq,
            prompts,
            outputs,
            prompt_stride,
            output_stride,
            end,
        }
    }
}

/// What a request asks the fabric to generate, besides its prompt: the
/// descriptor's fields that the caller chooses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: u64,
    pub stop_token: u32,
    /// Report tokens as they come (a stream, or stop sequences to watch).
    pub stream: bool,
}

/// A request to start generating: the caller's prompt, borrowed (it is
/// copied once, into the DMA buffer).
#[derive(Debug, Clone, Copy)]
pub struct Submission<'a> {
    pub tag: u32,
    pub ctx: u16,
    pub prompt: &'a [u32],
    pub params: Params,
}

/// Where a completion's tokens are in the [`Drained`] that holds it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

/// What a completion entry meant for one request. Its tokens are in the
/// [`Drained`] it was drained into: [`Drained::tokens`].
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// More tokens (stream mode).
    Tokens { tag: u32, ctx: u16, tokens: Span },
    /// The request is over and its context is free.
    Done {
        tag: u32,
        ctx: u16,
        status: CqeStatus,
        finish: Finish,
        /// Tokens not delivered by an earlier `Tokens`.
        tokens: Span,
        /// All output tokens of the request.
        n_tokens: u32,
        fabric_us: u32,
        /// False when the output CRC did not match: the tokens are corrupt.
        intact: bool,
    },
}

impl Completion {
    /// Where this entry's tokens are.
    pub fn tokens(&self) -> Span {
        match self {
            Completion::Tokens { tokens, .. } | Completion::Done { tokens, .. } => *tokens,
        }
    }
}

/// What drains found: the completions, in the order the device posted
/// them, and the output tokens they announced, which each refers to by a
/// [`Span`]. The caller keeps one from drain to drain and clears it once
/// taken in; its buffers keep their room.
#[derive(Debug, Clone, Default)]
pub struct Drained {
    pub completions: Vec<Completion>,
    tokens: Vec<u32>,
}

impl Drained {
    /// The tokens at `span`.
    ///
    /// # Panics
    /// If `span` is not of a completion drained into this [`Drained`]
    /// since it was last cleared.
    pub fn tokens(&self, span: Span) -> &[u32] {
        &self.tokens[span.start..span.start + span.len]
    }

    /// Forgets every completion and token, keeping the room.
    pub fn clear(&mut self) {
        self.completions.clear();
        self.tokens.clear();
    }

    /// Each completion with its tokens.
    pub fn iter(&self) -> impl Iterator<Item = (&Completion, &[u32])> {
        self.completions
            .iter()
            .map(|c| (c, self.tokens(c.tokens())))
    }
}

/// What a drain found besides completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainReport {
    pub completions: u32,
    /// EVENT_SEQ moved: slot states or a fault changed.
    pub event: bool,
    pub fault: Option<u32>,
}

#[derive(Debug, Clone, Default)]
struct CtxState {
    /// 0 when the context is free.
    tag: u32,
    /// Tokens reported by `Tokens` entries so far.
    have: u32,
    /// Their CRC, for the DONE entry's check of the whole output.
    crc: TokensCrc,
    cap: u32,
}

/// The submission and completion rings, and the arenas.
#[derive(Debug)]
pub struct Rings {
    dma: DmaBuf,
    layout: Layout,
    config: RingConfig,
    info: ShellInfo,
    sq_tail: u32,
    cq_head: u32,
    /// For each SQ entry, the (tag, ctx) written there, so a refused
    /// descriptor (whose tag cannot be trusted) finds its request. Sized
    /// once, for the ring as configured: the contract's bound (4,096
    /// entries) would hold 32 KiB for the usual 256.
    sq_owner: Box<[(u32, u16)]>,
    /// One per context of the shell.
    ctxs: heapless::Vec<CtxState, MAX_SHELL_CONTEXTS>,
}

impl Rings {
    /// Runs the contract's initialisation: stop the shell, program the
    /// rings, start it. Drops whatever the shell was running for a previous
    /// daemon; the slots keep their models.
    pub fn init(shell: &Shell, dma: DmaBuf, config: RingConfig) -> Result<Rings, ShellError> {
        let info = shell.info().clone();
        for (name, n) in [
            ("SQ_ENTRIES", config.sq_entries),
            ("CQ_ENTRIES", config.cq_entries),
        ] {
            if !n.is_power_of_two() || !(2..=4096).contains(&n) {
                return Err(ShellError::Invalid {
                    tag: 0,
                    field: name,
                    value: n.into(),
                    limit: "a power of two in 2..=4096".into(),
                });
            }
        }
        if (config.sq_entries as usize) < info.contexts() {
            return Err(ShellError::Invalid {
                tag: 0,
                field: "SQ_ENTRIES",
                value: config.sq_entries.into(),
                limit: format!("at least the {} contexts", info.contexts()),
            });
        }
        let mut ctxs = heapless::Vec::new();
        if ctxs.resize_default(info.contexts()).is_err() {
            return Err(ShellError::Invalid {
                tag: 0,
                field: "contexts",
                value: info.contexts() as u64,
                limit: format!("at most the contract's {MAX_SHELL_CONTEXTS}"),
            });
        }
        let layout = Layout::new(&info, &config);
        if layout.end > dma.size() {
            return Err(ShellError::BufferTooSmall {
                path: dma.name().to_owned(),
                have: dma.size(),
                need: layout.end,
            });
        }
        let mut rings = Rings {
            dma,
            layout,
            config,
            sq_tail: 0,
            cq_head: 0,
            sq_owner: vec![(0, 0); config.sq_entries as usize].into_boxed_slice(),
            ctxs,
            info,
        };
        rings.reset(shell)?;
        Ok(rings)
    }

    /// Stops the shell, reprograms the rings and starts it again: the
    /// contract's initialisation. Every running request is dropped by the
    /// device; their `(tag, ctx)` are returned for the caller to answer.
    pub fn reset(&mut self, shell: &Shell) -> Result<Vec<(u32, u16)>, ShellError> {
        let dropped = self.abandon_all();
        let r = shell.regs();
        let (layout, config) = (self.layout, self.config);
        // Stop, and wait until the shell has dropped its old ring state.
        REG_CONTROL.set(r, 0);
        wait_reg(
            r,
            REG_STATUS.offset(),
            "STATUS.RUNNING",
            "0",
            config.enable_timeout,
            |v| v & 1 == 0,
        )?;
        let sq_addr = self.dma.phys_addr() + layout.sq;
        let cq_addr = self.dma.phys_addr() + layout.cq;
        REG_SQ_BASE_LO.set(r, sq_addr as u32);
        REG_SQ_BASE_HI.set(r, (sq_addr >> 32) as u32);
        REG_SQ_ENTRIES.set(r, config.sq_entries);
        REG_CQ_BASE_LO.set(r, cq_addr as u32);
        REG_CQ_BASE_HI.set(r, (cq_addr >> 32) as u32);
        REG_CQ_ENTRIES.set(r, config.cq_entries);
        REG_SQ_TAIL.set(r, 0);
        REG_CQ_HEAD.set(r, 0);
        REG_EVENT_ACK.set(r, REG_EVENT_SEQ.get(r));
        for ctx in 0..self.info.contexts() {
            reg_ctx_cancel(ctx).set(r, 0);
        }
        // Zero the rings so a stale entry from a previous run can never
        // carry a sequence number that happens to be due.
        let zeros = vec![0u8; (layout.prompts - layout.sq) as usize];
        self.dma.write(layout.sq, &zeros)?;
        self.dma
            .sync_for_device(layout.sq, layout.prompts - layout.sq)?;
        io_wmb();
        REG_CONTROL.write(r, CONTROL::ENABLE::SET + CONTROL::IRQ_ENABLE::SET);
        wait_reg(
            r,
            REG_STATUS.offset(),
            "STATUS.RUNNING",
            "1",
            config.enable_timeout,
            |v| v & 1 == 1,
        )?;
        self.sq_tail = 0;
        self.cq_head = 0;
        Ok(dropped)
    }

    /// Stops the rings (CONTROL = 0) and waits, bounded, until the shell
    /// says it has: after this the device writes nothing more into the
    /// buffer, which may then be unmapped. Every running request is
    /// forgotten; their `(tag, ctx)` are returned.
    pub fn stop(&mut self, shell: &Shell) -> Result<Vec<(u32, u16)>, ShellError> {
        let dropped = self.abandon_all();
        let r = shell.regs();
        REG_CONTROL.set(r, 0);
        wait_reg(
            r,
            REG_STATUS.offset(),
            "STATUS.RUNNING",
            "0",
            self.config.enable_timeout,
            |v| v & 1 == 0,
        )?;
        Ok(dropped)
    }

    /// The DMA layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shell's description, as the rings were set up for it.
    pub fn info(&self) -> &ShellInfo {
        &self.info
    }

    /// The tag running in `ctx`, or 0.
    pub fn running(&self, ctx: u16) -> u32 {
        self.ctxs.get(usize::from(ctx)).map_or(0, |c| c.tag)
    }

    /// A [`Drained`] with room for the most one drain can find: every CQ
    /// entry, and each context's whole output (no more than the buffer's
    /// output section), so that draining into it never allocates.
    pub fn drained(&self) -> Drained {
        Drained {
            completions: Vec::with_capacity(self.config.cq_entries as usize),
            tokens: Vec::with_capacity(self.info.contexts() * self.info.max_output as usize),
        }
    }

    /// The DMA buffer (for tests that play a careless driver).
    pub fn dma(&self) -> &DmaBuf {
        &self.dma
    }

    fn check(&self, s: &Submission<'_>) -> Result<(), ShellError> {
        let invalid = |field, value: u64, limit: String| ShellError::Invalid {
            tag: s.tag,
            field,
            value,
            limit,
        };
        if s.tag == 0 {
            return Err(invalid("tag", 0, "1..".into()));
        }
        if usize::from(s.ctx) >= self.info.contexts() {
            return Err(invalid(
                "ctx",
                s.ctx.into(),
                format!("0..{}", self.info.contexts()),
            ));
        }
        if s.prompt.is_empty() || s.prompt.len() as u64 > u64::from(self.info.max_prompt) {
            return Err(invalid(
                "prompt length",
                s.prompt.len() as u64,
                format!("1..={}", self.info.max_prompt),
            ));
        }
        if s.params.max_tokens == 0 || s.params.max_tokens > self.info.max_output {
            return Err(invalid(
                "max_tokens",
                s.params.max_tokens.into(),
                format!("1..={}", self.info.max_output),
            ));
        }
        let running = self.ctxs[usize::from(s.ctx)].tag;
        if running != 0 {
            return Err(ShellError::ContextBusy {
                tag: s.tag,
                ctx: s.ctx,
                running,
            });
        }
        Ok(())
    }

    /// Submits a batch: the one doorbell function (contract section 5).
    ///
    /// 1. prompts into their contexts' prompt slots, descriptors into the
    ///    ring past SQ_TAIL (cached normal memory; the device reads no
    ///    entry at or past SQ_TAIL, so nothing here is visible yet);
    /// 2. clean the cache over what was written (`sync_for_device`), unless
    ///    the buffer is coherent: otherwise the device may read stale DDR;
    /// 3. only then does the host's ring state advance: SQ_TAIL, and each
    ///    context's running tag;
    /// 4. `io_wmb`: the device must not see the doorbell before the data;
    /// 5. one write of SQ_TAIL for the whole batch.
    ///
    /// All or nothing: an invalid request, a full ring or a failed copy or
    /// sync returns an error with the rings as they were. A DMA error here
    /// means the buffer cannot be trusted, which the caller treats as the
    /// fabric failing (as in [`Rings::drain`]).
    pub fn submit(&mut self, shell: &Shell, batch: &[Submission<'_>]) -> Result<(), ShellError> {
        if batch.is_empty() {
            return Ok(());
        }
        for (i, s) in batch.iter().enumerate() {
            self.check(s)?;
            if let Some(first) = batch[..i].iter().find(|o| o.ctx == s.ctx) {
                return Err(ShellError::ContextBusy {
                    tag: s.tag,
                    ctx: s.ctx,
                    running: first.tag,
                });
            }
        }
        let head = REG_SQ_HEAD.get(shell.regs());
        let in_flight = self.sq_tail.wrapping_sub(head);
        if in_flight + batch.len() as u32 > self.config.sq_entries {
            return Err(ShellError::RingFull { entries: in_flight });
        }
        let first = self.sq_tail;
        // Steps 1 and 2 for the prompts.
        for (i, s) in batch.iter().enumerate() {
            let seq = first.wrapping_add(i as u32);
            let ctx = usize::from(s.ctx);
            let prompt_off = self.layout.prompts + ctx as u64 * self.layout.prompt_stride;
            let output_off = self.layout.outputs + ctx as u64 * self.layout.output_stride;
            self.dma.write_u32s(prompt_off, s.prompt)?;
            self.dma
                .sync_for_device(prompt_off, s.prompt.len() as u64 * 4)?;
            let p = &s.params;
            let sqe = Sqe {
                seq,
                opcode: OP_GENERATE,
                slot: self.info.slot_of(s.ctx),
                flags: if p.stream { FLAG_STREAM } else { 0 },
                tag: s.tag,
                ctx: s.ctx,
                prompt_addr: self.dma.phys_addr() + prompt_off,
                prompt_len: s.prompt.len() as u32,
                max_tokens: p.max_tokens,
                output_addr: self.dma.phys_addr() + output_off,
                output_cap: self.info.max_output,
                temperature: p.temperature,
                seed: p.seed,
                stop_token: p.stop_token,
            };
            let index = seq % self.config.sq_entries;
            self.dma.write(
                self.layout.sq + u64::from(index) * SQE_LEN as u64,
                &sqe.encode(),
            )?;
        }
        // Step 2 for the descriptors: one range, or two when the batch wraps.
        for (index, count) in ring_ranges(first, batch.len() as u32, self.config.sq_entries) {
            self.dma.sync_for_device(
                self.layout.sq + u64::from(index) * SQE_LEN as u64,
                u64::from(count) * SQE_LEN as u64,
            )?;
        }
        // Step 3: nothing failed, so the batch is the device's from here.
        for (i, s) in batch.iter().enumerate() {
            let index = first.wrapping_add(i as u32) % self.config.sq_entries;
            self.sq_owner[index as usize] = (s.tag, s.ctx);
            self.ctxs[usize::from(s.ctx)] = CtxState {
                tag: s.tag,
                cap: s.params.max_tokens,
                ..CtxState::default()
            };
        }
        self.sq_tail = first.wrapping_add(batch.len() as u32);
        // Step 4.
        io_wmb();
        // Step 5.
        REG_SQ_TAIL.set(shell.regs(), self.sq_tail);
        Ok(())
    }

    /// Reads every completion the device has posted (contract section 5,
    /// steps 2 to 5), adding them to `out`. Call it after an interrupt,
    /// then unmask. On an error, what was drained before it is in `out`.
    pub fn drain(&mut self, shell: &Shell, out: &mut Drained) -> Result<DrainReport, ShellError> {
        let r = shell.regs();
        let mut report = DrainReport::default();
        // Step 2: the index, then a barrier before reading what it announces.
        let tail = REG_CQ_TAIL.get(r);
        io_rmb();
        let count = tail.wrapping_sub(self.cq_head);
        if count > self.config.cq_entries {
            return Err(ShellError::Completion {
                index: self.cq_head,
                source: DescriptorError::Field {
                    what: "CQ_TAIL",
                    field: "distance from CQ_HEAD",
                    value: count,
                },
            });
        }
        // Step 3: invalidate the entries.
        for (index, n) in ring_ranges(self.cq_head, count, self.config.cq_entries) {
            self.dma.sync_for_cpu(
                self.layout.cq + u64::from(index) * CQE_LEN as u64,
                u64::from(n) * CQE_LEN as u64,
            )?;
        }
        while self.cq_head != tail {
            let seq = self.cq_head;
            let index = seq % self.config.cq_entries;
            let mut raw = [0u8; CQE_LEN];
            self.dma
                .read(self.layout.cq + u64::from(index) * CQE_LEN as u64, &mut raw)?;
            // Step 4: the entry's own CRC and sequence number.
            let cqe = Cqe::decode(&raw, seq)
                .map_err(|source| ShellError::Completion { index: seq, source })?;
            self.cq_head = self.cq_head.wrapping_add(1);
            report.completions += 1;
            let c = self.complete(&cqe, seq, &mut out.tokens)?;
            out.completions.push(c);
        }
        // Step 5.
        REG_CQ_HEAD.set(r, self.cq_head);
        let event_seq = REG_EVENT_SEQ.get(r);
        if event_seq != REG_EVENT_ACK.get(r) {
            report.event = true;
            let fault = REG_FAULT_CODE.get(r);
            if fault != 0 {
                report.fault = Some(fault);
            }
            REG_EVENT_ACK.set(r, event_seq);
        }
        Ok(report)
    }

    /// What `cqe` means, its new tokens read onto the end of `tokens`.
    fn complete(
        &mut self,
        cqe: &Cqe,
        index: u32,
        tokens: &mut Vec<u32>,
    ) -> Result<Completion, ShellError> {
        // A refused descriptor carries its SQ index instead of a trusted tag.
        let (tag, ctx) = if matches!(
            cqe.status,
            CqeStatus::BadDescriptor | CqeStatus::StaleDescriptor
        ) && cqe.kind == CqeKind::Done
        {
            self.sq_owner[(cqe.n_tokens % self.config.sq_entries) as usize]
        } else {
            (cqe.tag, cqe.ctx)
        };
        let Some(state) = self.ctxs.get_mut(usize::from(ctx)) else {
            return Err(ShellError::UnknownTag {
                index,
                tag,
                ctx,
                running: 0,
            });
        };
        if state.tag != tag || tag == 0 {
            return Err(ShellError::UnknownTag {
                index,
                tag,
                ctx,
                running: state.tag,
            });
        }
        let n = if matches!(
            cqe.status,
            CqeStatus::BadDescriptor | CqeStatus::StaleDescriptor
        ) {
            0
        } else {
            cqe.n_tokens
        };
        if n > state.cap {
            return Err(ShellError::TooManyTokens {
                index,
                ctx,
                n_tokens: n,
                cap: state.cap,
            });
        }
        let have = state.have;
        let start = tokens.len();
        if n > have {
            // Step 3 for the output tokens this entry announces.
            let off = self.layout.outputs
                + u64::from(ctx) * self.layout.output_stride
                + u64::from(have) * 4;
            let len = u64::from(n - have) * 4;
            self.dma.sync_for_cpu(off, len)?;
            tokens.resize(start + (n - have) as usize, 0);
            if let Err(e) = self.dma.read_u32s(off, &mut tokens[start..]) {
                tokens.truncate(start);
                return Err(e.into());
            }
            // The CRC covers the whole output: what earlier entries
            // reported, then these.
            state.crc.update(&tokens[start..]);
        }
        let span = Span {
            start,
            len: tokens.len() - start,
        };
        let n_tokens = have + span.len as u32;
        match cqe.kind {
            CqeKind::Tokens => {
                state.have = n_tokens;
                Ok(Completion::Tokens {
                    tag,
                    ctx,
                    tokens: span,
                })
            }
            CqeKind::Done => {
                let intact = cqe.status != CqeStatus::Ok || state.crc.value() == cqe.crc;
                *state = CtxState::default();
                Ok(Completion::Done {
                    tag,
                    ctx,
                    status: cqe.status,
                    finish: cqe.finish,
                    tokens: span,
                    n_tokens,
                    fabric_us: cqe.fabric_us,
                    intact,
                })
            }
        }
    }

    /// Forgets every running request (after a full reconfiguration, when
    /// the fabric lost them). Returns their (tag, ctx).
    pub fn abandon_all(&mut self) -> Vec<(u32, u16)> {
        let mut lost = Vec::new();
        for (ctx, state) in self.ctxs.iter_mut().enumerate() {
            if state.tag != 0 {
                lost.push((state.tag, ctx as u16));
                *state = CtxState::default();
            }
        }
        lost
    }
}

/// Splits `count` ring entries starting at free-running index `start` into
/// at most two contiguous `(index, count)` ranges.
pub fn ring_ranges(start: u32, count: u32, entries: u32) -> impl Iterator<Item = (u32, u32)> {
    let first = start % entries;
    let until_end = entries - first;
    let (head, wrapped) = if count == 0 {
        (None, None)
    } else if count <= until_end {
        (Some((first, count)), None)
    } else {
        (Some((first, until_end)), Some((0, count - until_end)))
    };
    head.into_iter().chain(wrapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_split_at_the_wrap() {
        let ranges = |s, c, e| ring_ranges(s, c, e).collect::<Vec<_>>();
        assert_eq!(ranges(5, 3, 8), vec![(5, 3)]);
        assert_eq!(ranges(6, 4, 8), vec![(6, 2), (0, 2)]);
        assert_eq!(ranges(u32::MAX, 2, 8), vec![(7, 1), (0, 1)]);
        assert!(ranges(3, 0, 8).is_empty());
    }

    #[test]
    fn layout_sections_do_not_overlap_and_are_aligned() {
        let info = ShellInfo {
            version_major: 1,
            version_minor: 0,
            slots: 2,
            lanes: 4,
            contexts_per_slot: 4,
            max_prompt: 1000,
            max_output: 250,
            interface_id: 0,
            prefill_ns: 0,
            decode_ns: 0,
        };
        let l = Layout::new(&info, &RingConfig::default());
        assert_eq!(l.sq, 0);
        assert!(l.cq >= 256 * 64);
        assert!(l.prompts >= l.cq + 1024 * 32);
        assert_eq!(l.prompt_stride % 64, 0);
        assert!(l.outputs >= l.prompts + 8 * l.prompt_stride);
        assert!(l.end >= l.outputs + 8 * l.output_stride);
        for v in [l.cq, l.prompts, l.outputs, l.end] {
            assert_eq!(v % 4096, 0);
        }
    }
}
