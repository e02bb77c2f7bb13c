//! Models in DDR (contract section 7, "Committing a table"): each slot's
//! region of the DMA buffer, the table written into it, and the commit
//! that has the slot's engine read it in.
//!
//! The regions follow the rings and arenas ([`crate::rings::Layout`]), one
//! per slot, each a whole number of pages, so a table's cache maintenance
//! never touches a word the device writes. [`Tables::commit`] is the one
//! function that writes a table and commits it; its doc says why each step
//! is there.
//!
//! The slot must be quiesced with nothing outstanding (SLOT_SHUTDOWN 0x0F)
//! before a commit: the device refuses one otherwise, and the slot keeps
//! serving what it held. Quiescing is the caller's (the rotation's) job,
//! as it is before a partial reconfiguration.

use std::time::{Duration, Instant};

use crate::barrier;
use crate::contract::*;
use crate::dma::{DmaBuf, DmaError};
use crate::shell::{hex, Shell};

/// Why a table could not be put into a slot.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("slot {slot}: its region of {region} bytes cannot hold a table of {bytes} bytes{}", and_kv(*kv))]
    RegionTooSmall {
        slot: u8,
        bytes: u64,
        kv: u64,
        region: u64,
    },
    #[error("slot {slot}: SLOT_SHUTDOWN reads {shutdown:#x}, not {SHUTDOWN_DONE:#x}: its engine may still read its region, so nothing is written there until it is quiesced with nothing outstanding")]
    NotQuiesced { slot: u8, shutdown: u32 },
    #[error("the DMA buffer of {size} bytes leaves {left} bytes after the rings for {slots} slots' tables")]
    NoRoom { size: u64, left: u64, slots: usize },
    #[error("slot {slot}: writing its table into the DMA buffer")]
    Write {
        slot: u8,
        #[source]
        source: DmaError,
    },
    #[error("slot {slot}: SLOT_COMMITTED still reads {found} after {waited_ms} ms, the commit was {commit}")]
    Timeout {
        slot: u8,
        commit: u32,
        found: u32,
        waited_ms: u128,
    },
    #[error("slot {slot}: the commit was refused (FAULT_CODE {fault}): the slot was not quiesced with nothing outstanding, or holds no engine; it keeps what it held")]
    Refused { slot: u8, fault: u32 },
    #[error("slot {slot}: reading its table in ended in {state:?}")]
    Failed { slot: u8, state: SlotState },
}

/// A transformer's keys and values, named in a region's refusal.
fn and_kv(kv: u64) -> String {
    if kv == 0 {
        String::new()
    } else {
        format!(" and its lanes' keys and values of {kv} bytes")
    }
}

/// What a slot holds after a commit, as the shell reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub engine: Option<EngineId>,
    /// The CRC-32 the engine computed over the table as it read it in.
    pub crc: u32,
    /// The identity the table declares, hex.
    pub identity: String,
    /// How long the engine took to read the table in, from the commit.
    pub took: Duration,
}

/// The slots' table regions in the DMA buffer: a mapping of the buffer of
/// their own (the rings' owner keeps its own), and where each region lies.
#[derive(Debug)]
pub struct Tables {
    dma: DmaBuf,
    first: u64,
    region: u64,
    slots: usize,
}

impl Tables {
    /// The regions of `slots` slots in `dma` from offset `first` on (the
    /// rings' layout's end): the rest of the buffer, split evenly, in whole
    /// pages.
    pub fn new(dma: DmaBuf, first: u64, slots: usize) -> Result<Tables, TableError> {
        const PAGE: u64 = 4096;
        let first = first.div_ceil(PAGE) * PAGE;
        let left = dma.size().saturating_sub(first);
        let region = (left / slots.max(1) as u64) / PAGE * PAGE;
        if region == 0 {
            return Err(TableError::NoRoom {
                size: dma.size(),
                left,
                slots,
            });
        }
        Ok(Tables {
            dma,
            first,
            region,
            slots,
        })
    }

    /// Bytes each slot's region holds.
    pub fn region_bytes(&self) -> u64 {
        self.region
    }

    /// The offset in the buffer of slot `slot`'s region.
    pub fn offset(&self, slot: u8) -> u64 {
        self.first + self.region * u64::from(slot)
    }

    /// The physical address of slot `slot`'s region.
    pub fn phys(&self, slot: u8) -> u64 {
        self.dma.phys_addr() + self.offset(slot)
    }

    /// Writes `table` (its bytes: little-endian words) into slot `slot`'s
    /// region and has the slot read it in; waits at most `timeout`. `kv`
    /// is what the engine keeps in the region after the table: a
    /// transformer's keys and values, for every lane (contract section 10);
    /// the region must hold both, or nothing is written.
    ///
    /// In order (contract section 7):
    /// 0. the slot quiesced with nothing outstanding (SLOT_SHUTDOWN 0x0F),
    ///    checked before anything is written: the engine reads its table
    ///    from the region at every step, so writing over a serving slot's
    ///    table would change what it decodes, whether or not the commit is
    ///    then taken;
    /// 1. the table into the region, through the cached mapping;
    /// 2. the cache cleaned over it (u-dma-buf `sync_for_device`), if the
    ///    buffer is not coherent: the engine reads DDR, not the CPU's cache;
    /// 3. a write barrier, so the device cannot see the commit before the
    ///    table;
    /// 4. TABLE_BASE and TABLE_WORDS (the region's, which bounds every read
    ///    the engine makes), then TABLE_COMMIT one past SLOT_COMMITTED: the
    ///    slot reads the table in, computing its CRC;
    /// 5. SLOT_COMMITTED polled until it reads the commit; then the slot's
    ///    state says whether it took the table.
    pub fn commit(
        &self,
        shell: &Shell,
        slot: u8,
        table: &[u8],
        kv: u64,
        timeout: Duration,
    ) -> Result<Committed, TableError> {
        assert!(usize::from(slot) < self.slots, "slot {slot} has no region");
        let bytes = table.len() as u64;
        if bytes.saturating_add(kv) > self.region {
            return Err(TableError::RegionTooSmall {
                slot,
                bytes,
                kv,
                region: self.region,
            });
        }
        let regs = SlotRegs::of(usize::from(slot));
        let r = shell.regs();
        let shutdown = regs.shutdown.get(r);
        if shutdown != SHUTDOWN_DONE {
            return Err(TableError::NotQuiesced { slot, shutdown });
        }
        let at = self.offset(slot);
        let write = |source| TableError::Write { slot, source };
        self.dma.write(at, table).map_err(write)?;
        self.dma.sync_for_device(at, bytes).map_err(write)?;
        barrier::io_wmb();
        let phys = self.phys(slot);
        regs.table_base_lo.set(r, phys as u32);
        regs.table_base_hi.set(r, (phys >> 32) as u32);
        regs.table_words.set(r, (self.region / 4) as u32);
        let commit = regs.committed.get(r).wrapping_add(1);
        let loads = regs.loads.get(r);
        let start = Instant::now();
        regs.table_commit.set(r, commit);
        loop {
            let found = regs.committed.get(r);
            if found == commit {
                break;
            }
            if start.elapsed() > timeout {
                return Err(TableError::Timeout {
                    slot,
                    commit,
                    found,
                    waited_ms: start.elapsed().as_millis(),
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let took = start.elapsed();
        let s = shell.slot(slot);
        if s.loads == loads {
            // Refused: a commit the slot acts on counts in SLOT_LOADS, good
            // table or bad; a refused one changes nothing but FAULT_CODE.
            return Err(TableError::Refused {
                slot,
                fault: REG_FAULT_CODE.get(r),
            });
        }
        match s.state {
            SlotState::Ready => Ok(Committed {
                engine: s.engine,
                crc: s.table_crc,
                identity: s.identity,
                took,
            }),
            _ => Err(TableError::Failed {
                slot,
                state: s.state,
            }),
        }
    }
}

/// The identity a table's bytes declare (words 8..16), hex: what a slot
/// holding it reports in SLOT_IDENTITY.
pub fn declared_identity(table: &[u8]) -> Option<String> {
    let words = table.get(32..64)?;
    let be: Vec<u8> = words
        .chunks_exact(4)
        .flat_map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_be_bytes())
        .collect();
    Some(hex(&be))
}
