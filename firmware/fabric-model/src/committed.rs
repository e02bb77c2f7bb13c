//! What every model file a slot commits has in common, whatever its engine
//! (contract sections 9 and 10): word 0 its magic, word 1 the engine it runs
//! on, word 2 its length in words, words 8..16 the identity it declares, and
//! the CRC-32 of its bytes, which the engine computes reading it in. The
//! catalog and the rotation check a file here, each format as its engine
//! checks it.

use crate::lm::{Weights, WeightsError};
use crate::table::{Table, TableError};

/// A model file, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Word 1: the engine it is for, as `SLOT_ENGINE` reads an engine.
    pub engine_word: u32,
    /// Its length in words.
    pub words: usize,
    /// What it declares in words 8..16 (`SLOT_IDENTITY`).
    pub declared_identity: [u8; 32],
    /// The SHA-256 of its words from 16 on: what it should declare.
    pub identity: [u8; 32],
    /// The CRC-32 of its bytes (`SLOT_TABLE_CRC`).
    pub crc: u32,
    /// A transformer's context: the most positions a sequence holds.
    pub context: Option<usize>,
    /// Bytes of one lane's keys and values the engine keeps in the slot's
    /// region after the table (a transformer's; 0 for a trigram table).
    pub kv_bytes_a_lane: u64,
}

/// Why a model file cannot be committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommittedError {
    #[error("a trigram table (FTB2): {0}")]
    Table(#[from] TableError),
    #[error("transformer weights (FLM1): {0}")]
    Weights(#[from] WeightsError),
    #[error("word 0 is {0:#010x}: neither a trigram table (\"FTB2\") nor transformer weights (\"FLM1\")")]
    Magic(u32),
}

/// Reads and checks a model file by its magic.
pub fn read(bytes: &[u8]) -> Result<Committed, CommittedError> {
    let magic = bytes
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    match magic {
        crate::table::MAGIC => {
            let t = Table::from_bytes(bytes)?;
            Ok(Committed {
                engine_word: t.engine_word(),
                words: t.words.len(),
                declared_identity: t.declared_identity(),
                identity: t.identity(),
                crc: t.crc(),
                context: None,
                kv_bytes_a_lane: 0,
            })
        }
        crate::lm::weights::MAGIC => {
            // Reading checks the declared identity against the words.
            let w = Weights::from_bytes(bytes)?;
            Ok(Committed {
                engine_word: crate::lm::weights::ENGINE.encode(),
                words: bytes.len() / 4,
                declared_identity: w.identity,
                identity: w.identity,
                crc: crc32fast::hash(bytes),
                context: Some(w.shape.context),
                kv_bytes_a_lane: w.shape.kv_bytes_a_lane(),
            })
        }
        other => Err(CommittedError::Magic(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::Shape;

    #[test]
    fn either_format_reads_by_its_magic_and_nothing_else_does() {
        let w = Weights::random(
            Shape {
                vocab: 260,
                dim: 16,
                layers: 1,
                heads: 1,
                hidden: 16,
                context: 8,
            },
            1,
        );
        let bytes: Vec<u8> = w.to_words().iter().flat_map(|v| v.to_le_bytes()).collect();
        let c = read(&bytes).expect("weights");
        assert_eq!(c.engine_word, 0x0001_0002);
        assert_eq!(c.words * 4, bytes.len());
        assert_eq!(c.crc, crc32fast::hash(&bytes));
        assert_eq!(c.declared_identity, w.identity);
        assert_eq!(
            read(b"ELF\x7f...."),
            Err(CommittedError::Magic(0x7f46_4c45))
        );
        assert!(matches!(
            read(&bytes[..bytes.len() - 4]),
            Err(CommittedError::Weights(WeightsError::Words { .. }))
        ));
    }
}
