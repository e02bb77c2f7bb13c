//! Models in DDR as a slot's engine reads them (contract section 7,
//! "Committing a table", and section 10): a commit's read-in at the HP
//! port's pace, its header checked and its CRC computed as the words come,
//! a transformer's weights parsed and their region checked to hold every
//! lane's keys and values; and a trigram table's words, read from DDR at
//! every step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::*;
use fabric_hw::dma::DmaBuf;
use fabric_model::lm::Weights;
use fabric_model::table::{Reader, Table, TableError, HEADER_WORDS};

use super::Fabric;

/// A table a slot's engine read in (section 7, "Committing a table"): where
/// it lies in DDR and its header, which the engine keeps. Its other words
/// stay in DDR and are read at every step, as the RTL reads them: a host
/// that writes over a serving slot's table changes what it decodes.
#[derive(Debug, Clone)]
pub(super) struct SlotTable {
    /// Its offset in the device's view of DDR, and the words it declares.
    pub(super) at: usize,
    pub(super) words: usize,
    /// The region's words (TABLE_WORDS at the commit): a transformer's
    /// keys and values follow its weights there.
    pub(super) region_words: u32,
    pub(super) header: [u32; HEADER_WORDS],
    /// The CRC-32 the engine computed reading it (SLOT_TABLE_CRC).
    pub(super) crc: u32,
    /// What the table declares in its words 8..16 (SLOT_IDENTITY): declared,
    /// not computed.
    pub(super) identity: [u8; 32],
    /// A transformer's weights, read from DDR as the read-in ended
    /// (section 10); `None` for a trigram table, read at every step.
    pub(super) lm: Option<Arc<Weights>>,
}

/// A slot's table as its engine reads it at a step: the header it kept,
/// the rest from DDR (the device's view; the CPU's mapping for a coherent
/// buffer, which has no other), every read bounded by the words the table
/// declares.
pub(super) struct DramWords<'a> {
    pub(super) table: &'a SlotTable,
    pub(super) dram: &'a [u8],
    pub(super) cpu: Option<&'a DmaBuf>,
}

impl Reader for DramWords<'_> {
    fn word(&self, at: usize) -> Result<u32, TableError> {
        let words = self.table.words;
        if at >= words {
            return Err(TableError::Beyond { at, words });
        }
        if at < HEADER_WORDS {
            return Ok(self.table.header[at]);
        }
        let off = self.table.at + 4 * at;
        let mut b = [0u8; 4];
        match self.cpu {
            // In bounds: the commit checked the table against the buffer.
            Some(cpu) => {
                let _ = cpu.read(off as u64, &mut b);
            }
            None => b.copy_from_slice(&self.dram[off..off + 4]),
        }
        Ok(u32::from_le_bytes(b))
    }
}

/// A commit being read in: what it comes to, and when.
#[derive(Debug)]
pub(super) struct PendingCommit {
    pub(super) value: u32,
    pub(super) until: Instant,
    /// The table, or the slot error reading it came to.
    pub(super) result: Result<SlotTable, u8>,
    /// The part of the table still to read, for its CRC.
    pub(super) reading: Option<TableRead>,
}

/// A table's read-in under way: the engine streams it from DDR through its
/// own port while the other slots step, so it is read `READ_PIECE` bytes a
/// tick, not in one go that would hold every slot's steps up.
#[derive(Debug)]
pub(super) struct TableRead {
    pub(super) next: usize,
    pub(super) end: usize,
    pub(super) crc: crc32fast::Hasher,
}

/// The bytes of a table read in a tick.
const READ_PIECE: usize = 64 << 10;

impl Fabric {
    /// Reads the next piece of slot `s`'s table, if one is being read in;
    /// returns whether any is left.
    pub(super) fn read_piece(&mut self, s: usize) -> bool {
        let Some(read) = self.slots[s]
            .commit
            .as_ref()
            .and_then(|p| p.reading.as_ref())
        else {
            return false;
        };
        let (start, end) = (read.next, (read.next + READ_PIECE).min(read.end));
        self.coherent_in(start, end);
        let Some(p) = self.slots[s].commit.as_mut() else {
            return false;
        };
        let Some(read) = p.reading.as_mut() else {
            return false;
        };
        // Its words little-endian, as they lie: as `Table::crc` takes them.
        read.crc.update(&self.dram[start..end]);
        read.next = end;
        if end < read.end {
            return true;
        }
        if let (Some(read), Ok(table)) = (p.reading.take(), p.result.as_mut()) {
            table.crc = read.crc.finalize();
        }
        false
    }

    /// TABLE_COMMIT (section 7, "Committing a table"): a slot quiesced with
    /// nothing outstanding, holding an engine, reads the table at
    /// TABLE_BASE in, its header checked and every read bounded by
    /// TABLE_WORDS, its CRC computed as the words come, at the HP port's
    /// pace (`--table-bytes-per-sec`); the requests its contexts held end
    /// as faults (their model is going). Any other slot refuses the commit
    /// (FAULT_CODE 7) and keeps what it held. Either way SLOT_COMMITTED
    /// takes the commit's value once done.
    pub(super) fn commits(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            if let Some(until) = self.slots[s].commit.as_ref().map(|p| p.until) {
                if self.read_piece(s) || until > now {
                    continue;
                }
                let Some(p) = self.slots[s].commit.take() else {
                    continue;
                };
                let slot = &mut self.slots[s];
                slot.committed = p.value;
                slot.dirty = true;
                let transformer = slot
                    .loaded
                    .as_ref()
                    .is_some_and(|l| l.engine == EngineId::TRANSFORMER_V1);
                let result = match p.result {
                    Ok(t) if transformer => self.read_weights(t),
                    other => other,
                };
                let slot = &mut self.slots[s];
                match result {
                    Ok(t) => {
                        slot.table = Some(t);
                        slot.state = SlotState::Ready;
                    }
                    Err(code) => {
                        slot.table = None;
                        slot.state = SlotState::Error(code);
                        if code == slot_error::TABLE_READ {
                            self.fault(FaultCode::TableRead);
                        }
                    }
                }
                self.bump_event();
                continue;
            }
            let regs = SlotRegs::of(s);
            let commit = regs.table_commit.get(self.r());
            if commit == self.slots[s].committed {
                continue;
            }
            let slot = &self.slots[s];
            if !(slot.quiesce && slot.shut)
                || slot.loaded.is_none()
                || matches!(slot.state, SlotState::Loading | SlotState::Empty)
            {
                log::warn!(
                    "fabric-sim: slot {s}: table commit {commit} refused ({}, {})",
                    if slot.quiesce && slot.shut {
                        "quiesced"
                    } else {
                        "not quiesced with nothing outstanding"
                    },
                    slot.state.as_str()
                );
                self.slots[s].committed = commit;
                self.slots[s].dirty = true;
                self.fault(FaultCode::CommitRefused);
                continue;
            }
            let base = u64::from(regs.table_base_lo.get(self.r()))
                | (u64::from(regs.table_base_hi.get(self.r())) << 32);
            let region_words = regs.table_words.get(self.r());
            self.abort_slot(s);
            let engine = self.slots[s].loaded.as_ref().map(|l| l.engine);
            let (bytes, result) = self.read_table(base, region_words, engine);
            let time = self.config.scaled(Duration::from_secs_f64(
                bytes as f64 / self.config.table_bytes_per_sec.max(1) as f64,
            ));
            let slot = &mut self.slots[s];
            slot.state = SlotState::Loading;
            slot.loads = slot.loads.wrapping_add(1);
            slot.table = None;
            slot.dirty = true;
            let reading = result.as_ref().ok().map(|t| TableRead {
                next: t.at,
                end: t.at + bytes as usize,
                crc: crc32fast::Hasher::new(),
            });
            slot.commit = Some(PendingCommit {
                value: commit,
                until: now + time,
                result,
                reading,
            });
            self.bump_event();
        }
    }

    /// Reads a committed table as the engine does: its header, then the
    /// words it declares, every read bounded by the region's `region_words`
    /// and answered with a bus error outside DDR. Returns the bytes read and
    /// the table, or the slot error it came to.
    pub(super) fn read_table(
        &mut self,
        base: u64,
        region_words: u32,
        engine: Option<EngineId>,
    ) -> (u64, Result<SlotTable, u8>) {
        let header = HEADER_WORDS as u64 * 4;
        if u64::from(region_words) < HEADER_WORDS as u64 {
            return (0, Err(slot_error::TABLE_READ));
        }
        let Some(at) = self.dram_offset(base, header) else {
            return (0, Err(slot_error::TABLE_READ));
        };
        self.coherent_in(at, at + header as usize);
        let head = Table {
            words: (0..HEADER_WORDS)
                .map(|i| self.dram_u32(at + 4 * i))
                .collect(),
        };
        let declared = if engine == Some(EngineId::TRANSFORMER_V1) {
            // Section 10: the weights' magic, engine and length now; their
            // shape and identity as the read-in ends.
            let w = &head.words;
            if w[0] != fabric_model::lm::weights::MAGIC
                || w[1] != EngineId::TRANSFORMER_V1.encode()
                || (w[2] as usize) < HEADER_WORDS
            {
                log::warn!(
                    "fabric-sim: a committed table is not transformer weights (words {:#010x} {:#010x} {})",
                    w[0],
                    w[1],
                    w[2]
                );
                return (header, Err(slot_error::BAD_TABLE));
            }
            w[2]
        } else {
            match head.check() {
                Ok(_) => head.words[2],
                Err(TableError::Length { .. }) if head.words[2] as usize >= HEADER_WORDS => {
                    head.words[2]
                }
                Err(e) => {
                    log::warn!("fabric-sim: a committed table: {e}");
                    return (header, Err(slot_error::BAD_TABLE));
                }
            }
        };
        if declared > region_words {
            log::warn!(
                "fabric-sim: a committed table of {declared} words does not fit its region of {region_words}"
            );
            return (header, Err(slot_error::BAD_TABLE));
        }
        let bytes = u64::from(declared) * 4;
        let Some(at) = self.dram_offset(base, bytes) else {
            return (header, Err(slot_error::TABLE_READ));
        };
        let mut header = [0u32; HEADER_WORDS];
        for (i, w) in header.iter_mut().enumerate() {
            *w = self.dram_u32(at + 4 * i);
        }
        let identity = Table {
            words: header.to_vec(),
        }
        .declared_identity();
        // The CRC comes as the rest is read (`read_piece`).
        let slot_table = SlotTable {
            at,
            words: declared as usize,
            region_words,
            header,
            crc: 0,
            identity,
            lm: None,
        };
        (bytes, Ok(slot_table))
    }

    /// A transformer's weights, read in whole: parsed from DDR and checked
    /// (shape, size), and the region checked to hold every lane's keys and
    /// values after them, as the RTL engine checks it
    /// (`rtl/engine/lm/fabric_lm.v`, S_SHAPE3); or the slot error they come
    /// to. The identity they declare is reported, not checked against
    /// their words: the RTL engine does not hash them (the host checks
    /// their CRC against the catalog's). Where this is stricter than the
    /// RTL: a row's scale past 1.0 or a Φ entry past 1.0 is refused here,
    /// where the RTL engine computes with it (the definition gives no
    /// tokens for such weights, and the daemon never commits them: the
    /// catalog's hash and CRC are checked first).
    pub(super) fn read_weights(&self, mut t: SlotTable) -> Result<SlotTable, u8> {
        let words: Vec<u32> = (0..t.words).map(|i| self.dram_u32(t.at + 4 * i)).collect();
        match Weights::from_committed_words(&words) {
            Ok(w) => {
                let kv_words = w.shape.kv_bytes_a_lane() / 4 * u64::from(self.config.lanes);
                if t.words as u64 + kv_words > u64::from(t.region_words) {
                    log::warn!(
                        "fabric-sim: committed weights of {} words and {kv_words} words of keys and values for {} lanes do not fit their region of {} words",
                        t.words,
                        self.config.lanes,
                        t.region_words
                    );
                    return Err(slot_error::BAD_TABLE);
                }
                t.lm = Some(Arc::new(w));
                Ok(t)
            }
            Err(e) => {
                log::warn!("fabric-sim: committed weights: {e}");
                Err(slot_error::BAD_TABLE)
            }
        }
    }
}
