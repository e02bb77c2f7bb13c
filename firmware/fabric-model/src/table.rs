//! A model as the fabric's engine reads it: the table of 32-bit words that a
//! slot holds in block RAM (or UltraRAM), in the layout of
//! `docs/fabric-contract.md` section 9.
//!
//! ```text
//! word 0       MAGIC "FTB1"
//! word 1       vocabulary size
//! word 2, 3    unigram candidates: first word, count
//! word 4, 5    bigram index: first word, entries
//! word 6, 7    trigram index: first word, entries
//! word 8..16   the table's identity: SHA-256 of the words from 16 on
//! then         index entries, two words each, sorted by key:
//!                key (b for a bigram; a << 16 | b for a trigram),
//!                first candidate word << 8 | candidates (1..255)
//! then         candidates, one word each: token << 16 | Q11 log of its count
//! ```
//!
//! Tokens must fit 16 bits. The engine finds a context by binary search over
//! an index (so a lookup costs about log2(entries) reads, and no hash needs
//! building in hardware), falls back from trigram to bigram to unigram as
//! [`Model::continuations`] does, and samples with
//! [`fabric_hw::sampling`]. [`Table::step`] is that engine, word for word, in
//! Rust: the RTL is checked against it, and it against [`Model`].

use sha2::{Digest, Sha256};

use crate::ngram::{Model, Span};
use fabric_hw::sampling::{self, Sampling};

/// `MAGIC` of a table: "FTB1".
pub const MAGIC: u32 = 0x4654_4231;
/// Words before the index entries.
pub const HEADER_WORDS: usize = 16;
/// Most candidates one index entry can name.
pub const MAX_ENTRY_CANDIDATES: usize = 255;

/// Why a model has no table.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("token {0} does not fit the table's 16 bits")]
    TokenTooLarge(u32),
    #[error("a context has {0} candidates; an index entry holds at most 255")]
    TooManyCandidates(usize),
    #[error("the table would need {0} words; entries address at most 2^24")]
    TooLarge(usize),
    #[error("word {at}: {what}")]
    Corrupt { at: usize, what: &'static str },
}

/// A model's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub words: Vec<u32>,
}

/// How many words of each part a table has, for sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    pub words: usize,
    pub bigram_entries: usize,
    pub trigram_entries: usize,
    pub candidates: usize,
}

impl Table {
    /// Lays `model` out as a table.
    pub fn build(model: &Model) -> Result<Table, TableError> {
        let crate::ngram::Contexts {
            unigram,
            bigram,
            trigram,
        } = model.contexts();
        let cands = model.candidates();
        for c in cands {
            if c.token > 0xFFFF {
                return Err(TableError::TokenTooLarge(c.token));
            }
        }
        for &(a, b) in trigram.iter().map(|(k, _)| k) {
            if a > 0xFFFF || b > 0xFFFF {
                return Err(TableError::TokenTooLarge(a.max(b)));
            }
        }
        let bi_base = HEADER_WORDS;
        let tri_base = bi_base + 2 * bigram.len();
        let cand_base = tri_base + 2 * trigram.len();
        let total = cand_base + cands.len();
        if total >= 1 << 24 {
            return Err(TableError::TooLarge(total));
        }
        let entry = |span: Span| -> Result<u32, TableError> {
            if span.len == 0 || span.len as usize > MAX_ENTRY_CANDIDATES {
                return Err(TableError::TooManyCandidates(span.len as usize));
            }
            Ok(((cand_base as u32 + span.start) << 8) | span.len)
        };
        let mut words = vec![0u32; HEADER_WORDS];
        words[0] = MAGIC;
        words[1] = model.vocab_size();
        words[2] = cand_base as u32 + unigram.start;
        words[3] = unigram.len;
        words[4] = bi_base as u32;
        words[5] = bigram.len() as u32;
        words[6] = tri_base as u32;
        words[7] = trigram.len() as u32;
        for (b, span) in &bigram {
            words.push(*b);
            words.push(entry(*span)?);
        }
        for ((a, b), span) in &trigram {
            words.push((a << 16) | b);
            words.push(entry(*span)?);
        }
        words.extend(cands.iter().map(|c| (c.token << 16) | u32::from(c.log)));
        let hash = identity(&words);
        for (i, chunk) in hash.chunks_exact(4).enumerate() {
            words[8 + i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Ok(Table { words })
    }

    /// The identity a slot holding this table reports in `SLOT_HASH`: the
    /// SHA-256 of its words from 16 on, little-endian.
    pub fn identity(&self) -> [u8; 32] {
        identity(&self.words)
    }

    /// The sizes of the table's parts.
    pub fn stats(&self) -> TableStats {
        let w = |i: usize| self.words.get(i).copied().unwrap_or(0) as usize;
        TableStats {
            words: self.words.len(),
            bigram_entries: w(5),
            trigram_entries: w(7),
            candidates: self.words.len().saturating_sub(w(6) + 2 * w(7)),
        }
    }

    /// The table as `$readmemh` reads it: one word a line, in hex.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(self.words.len() * 9);
        for w in &self.words {
            s.push_str(&format!("{w:08x}\n"));
        }
        s
    }

    fn word(&self, at: usize) -> Result<u32, TableError> {
        self.words.get(at).copied().ok_or(TableError::Corrupt {
            at,
            what: "beyond the table",
        })
    }

    /// Binary search of the index at `base` with `n` entries for `key`.
    fn find(&self, base: usize, n: usize, key: u32) -> Result<Option<u32>, TableError> {
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let k = self.word(base + 2 * mid)?;
            if k == key {
                return Ok(Some(self.word(base + 2 * mid + 1)?));
            }
            if k < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(None)
    }

    /// The candidates after `a b`, as first word and count.
    pub fn lookup(&self, a: u32, b: u32) -> Result<(usize, usize), TableError> {
        if self.word(0)? != MAGIC {
            return Err(TableError::Corrupt {
                at: 0,
                what: "no table magic",
            });
        }
        // A token beyond 16 bits is in no context of the model.
        let tri = if a > 0xFFFF || b > 0xFFFF {
            None
        } else {
            self.find(
                self.word(6)? as usize,
                self.word(7)? as usize,
                (a << 16) | b,
            )?
        };
        let entry = match tri {
            Some(e) => Some(e),
            None => self.find(self.word(4)? as usize, self.word(5)? as usize, b)?,
        };
        Ok(match entry {
            Some(e) => ((e >> 8) as usize, (e & 0xFF) as usize),
            None => (self.word(2)? as usize, self.word(3)? as usize),
        })
    }

    /// The next token after `a b` for a draw, as the engine computes it.
    pub fn step(&self, a: u32, b: u32, draw: u64, sampling: Sampling) -> Result<u32, TableError> {
        let (first, n) = self.lookup(a, b)?;
        let cands = self
            .words
            .get(first..first + n)
            .ok_or(TableError::Corrupt {
                at: first,
                what: "candidates beyond the table",
            })?;
        let i = sampling::pick(cands.iter().map(|&w| w as u16), draw, sampling);
        Ok(cands.get(i).map_or(crate::tokenizer::EOS, |&w| w >> 16))
    }

    /// All tokens for a request, as [`Model::generate`] gives them.
    pub fn generate(
        &self,
        prompt: &[u32],
        max_tokens: u32,
        temperature: f32,
        seed: u64,
        stop_token: u32,
    ) -> Result<Vec<u32>, TableError> {
        let eos = crate::tokenizer::EOS;
        let mut b = prompt.last().copied().unwrap_or(eos);
        let mut a = if prompt.len() >= 2 {
            prompt[prompt.len() - 2]
        } else {
            eos
        };
        let mut rng = sampling::SplitMix64(seed);
        let sampling = Sampling::from_f32(temperature);
        let mut out = Vec::new();
        for _ in 0..max_tokens {
            let t = self.step(a, b, rng.next(), sampling)?;
            out.push(t);
            (a, b) = (b, t);
            if t == stop_token {
                break;
            }
        }
        Ok(out)
    }
}

fn identity(words: &[u32]) -> [u8; 32] {
    let mut h = Sha256::new();
    for w in words.iter().skip(HEADER_WORDS) {
        h.update(w.to_le_bytes());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::Pruning;
    use fabric_hw::sampling::SplitMix64;

    fn model() -> Model {
        let mut rng = SplitMix64(3);
        let docs: Vec<Vec<u32>> = (0..200)
            .map(|_| {
                (0..(rng.next() % 30 + 1))
                    .map(|_| 300 + (rng.next() % 40) as u32)
                    .collect()
            })
            .collect();
        Model::train(
            "t",
            400,
            &docs,
            Pruning {
                trigram_min_count: 1,
                ..Pruning::default()
            },
        )
    }

    #[test]
    fn the_table_generates_what_the_model_generates() {
        let m = model();
        let t = Table::build(&m).expect("table");
        let mut rng = SplitMix64(9);
        for i in 0..500 {
            let mut prompt: Vec<u32> = (0..(i % 4 + 1))
                .map(|_| 300 + (rng.next() % 50) as u32)
                .collect();
            if i % 7 == 0 {
                // A token no table holds: 16 bits of it must not match.
                prompt.push((1 << 16) | 300);
            }
            let temperature = [0.0f32, 0.3, 0.8, 1.0, 1.7, 9.0][i % 6];
            let seed = rng.next();
            assert_eq!(
                t.generate(&prompt, 40, temperature, seed, 2).expect("walk"),
                m.generate(&prompt, 40, temperature, seed, 2),
                "prompt {prompt:?} T {temperature} seed {seed}"
            );
        }
    }

    #[test]
    fn the_identity_is_in_the_header_and_covers_the_body() {
        let m = model();
        let mut t = Table::build(&m).expect("table");
        let id = t.identity();
        let in_header: Vec<u8> = t.words[8..16]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        assert_eq!(in_header, id);
        let last = t.words.len() - 1;
        t.words[last] ^= 1;
        assert_ne!(t.identity(), id);
    }

    #[test]
    fn a_token_beyond_16_bits_is_refused() {
        let m = Model::train("t", 70_000, &[vec![69_999, 5]], Pruning::default());
        assert!(matches!(
            Table::build(&m),
            Err(TableError::TokenTooLarge(69_999))
        ));
    }

    #[test]
    fn hex_has_a_word_a_line() {
        let t = Table::build(&model()).expect("table");
        let hex = t.to_hex();
        assert_eq!(hex.lines().count(), t.words.len());
        assert_eq!(hex.lines().next(), Some("46544231"));
    }
}
