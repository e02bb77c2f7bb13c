//! A model as the fabric's engine reads it from DDR: the table of 32-bit
//! words the daemon writes into a slot's region and commits (contract
//! section 9, format FTB2).
//!
//! ```text
//! word 0       MAGIC "FTB2"
//! word 1       ENGINE: kind [15:0], version [31:16] (the word trigram v2)
//! word 2       WORDS: the table's length, header included
//! word 3       vocabulary size
//! word 4       unigram candidates: first word
//! word 5       bigram index: first word
//! word 6       trigram index: first word
//! word 7       bigram home buckets 2^[7:0], trigram home buckets 2^[15:8],
//!              unigram candidates [31:16] (at most MAX_CANDIDATES)
//! word 8..16   the identity the table declares: SHA-256 of the words from
//!              16 on (little-endian bytes), big-endian words
//! then         the bigram index, the trigram index: buckets of two words,
//!                key (b for a bigram; a << 16 | b for a trigram),
//!                first candidate word << 8 | candidates (1..255), or 0
//!                for an empty bucket
//! then         candidates, one word each: token << 16 | Q11 log of its count
//! ```
//!
//! An index is a hash table, so that a lookup is one dependent read of DDR
//! where a binary search was seventeen: a key's home bucket is the top
//! bits of `key * 0x9E3779B1` (Fibonacci hashing), and a key lies in the
//! first empty-or-matching bucket from its home on (linear probing, no
//! wrap: an index ends with an empty bucket, so every probe ends inside
//! it). Each index is at most half full, so a probe rarely passes its first
//! eight buckets, one burst of 64 bytes. Tokens must fit 16 bits. The
//! engine falls back from trigram to bigram to unigram as
//! [`Model::continuations`] does, and samples with [`fabric_hw::sampling`].
//! [`Table::step`] is that engine, read for read, in Rust: the RTL is checked
//! against it, and it against [`Model`].

use sha2::{Digest, Sha256};

use crate::ngram::{Model, Span};
use fabric_hw::contract::EngineId;
use fabric_hw::sampling::{self, Sampling};

/// `MAGIC` of a table: "FTB2".
pub const MAGIC: u32 = 0x4654_4232;
/// The engine a table of this format runs on.
pub const ENGINE: EngineId = EngineId::TRIGRAM_V2;
/// Words before the indexes.
pub const HEADER_WORDS: usize = 16;
/// Most candidates one index entry can name.
pub const MAX_ENTRY_CANDIDATES: usize = 255;
/// Most candidates any context has (the unigrams): what an engine's
/// candidate buffer holds.
pub const MAX_CANDIDATES: usize = 512;
/// Most bits of an index's home buckets: an entry addresses 2^24 words.
pub const MAX_INDEX_BITS: u32 = 24;
/// Fibonacci hashing's multiplier: 2^32 over the golden ratio, odd.
pub const HASH_MULTIPLIER: u32 = 0x9E37_79B1;
/// An index holds at most one key per this many buckets.
const LOAD_DIVISOR: usize = 2;

/// Why a model has no table, or a table cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("token {0} does not fit the table's 16 bits")]
    TokenTooLarge(u32),
    #[error("a context has {0} candidates; an index entry holds at most 255, the unigrams 512")]
    TooManyCandidates(usize),
    #[error("the table would need {0} words; entries address at most 2^24")]
    TooLarge(usize),
    #[error("word 0 is {found:#010x}, not a table's magic {MAGIC:#010x} (\"FTB2\")")]
    Magic { found: u32 },
    #[error("the table is for engine {found:#010x}, not {want} ({:#010x})", want.encode())]
    Engine { found: u32, want: EngineId },
    #[error("the table says it has {declared} words; {have} are there")]
    Length { declared: usize, have: usize },
    #[error("a read of word {at} passes the table's end ({words} words)")]
    Beyond { at: usize, words: usize },
    #[error("word 7 is {sizes:#010x}: indexes of at most 2^24 home buckets and {MAX_CANDIDATES} unigrams, not 2^{bigram_bits}, 2^{trigram_bits} and {unigrams}", bigram_bits = sizes & 0xFF, trigram_bits = (sizes >> 8) & 0xFF, unigrams = sizes >> 16)]
    Sizes { sizes: u32 },
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
    pub bigram_buckets: usize,
    pub trigram_buckets: usize,
    pub candidates: usize,
}

/// A key's home bucket in an index of 2^`bits` home buckets.
pub fn home(key: u32, bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    (key.wrapping_mul(HASH_MULTIPLIER) >> (32 - bits)) as usize
}

/// An index of `keys` (sorted, each with its entry word) laid out as
/// buckets: the bits of its home range, and its words.
fn build_index(keys: &[(u32, u32)]) -> (u32, Vec<u32>) {
    if keys.is_empty() {
        // No home buckets: one empty bucket, so a probe ends at once.
        return (0, vec![0, 0]);
    }
    let bits = (keys.len() * LOAD_DIVISOR)
        .next_power_of_two()
        .trailing_zeros()
        .max(1);
    let mut buckets: Vec<(u32, u32)> = vec![(0, 0); 1 << bits];
    for &(key, entry) in keys {
        let mut b = home(key, bits);
        loop {
            if b == buckets.len() {
                buckets.push((0, 0));
            }
            if buckets[b].1 == 0 {
                buckets[b] = (key, entry);
                break;
            }
            b += 1;
        }
    }
    // The last bucket empty: a probe that runs off the home range ends here.
    if buckets.last().is_some_and(|b| b.1 != 0) {
        buckets.push((0, 0));
    }
    let words = buckets.iter().flat_map(|&(k, e)| [k, e]).collect();
    (bits, words)
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
        let entry = |span: Span, base: usize| -> Result<u32, TableError> {
            if span.len == 0 || span.len as usize > MAX_ENTRY_CANDIDATES {
                return Err(TableError::TooManyCandidates(span.len as usize));
            }
            Ok(((base as u32 + span.start) << 8) | span.len)
        };
        // The index sizes do not depend on where the candidates go.
        let bi_len = build_index(&bigram.iter().map(|(b, _)| (*b, 1)).collect::<Vec<_>>())
            .1
            .len();
        let tri_len = build_index(
            &trigram
                .iter()
                .map(|((a, b), _)| ((a << 16) | b, 1))
                .collect::<Vec<_>>(),
        )
        .1
        .len();
        let bi_base = HEADER_WORDS;
        let tri_base = bi_base + bi_len;
        let cand_base = tri_base + tri_len;
        let total = cand_base + cands.len();
        if total >= 1 << 24 {
            return Err(TableError::TooLarge(total));
        }
        let bi_keys = bigram
            .iter()
            .map(|(b, span)| Ok((*b, entry(*span, cand_base)?)))
            .collect::<Result<Vec<_>, TableError>>()?;
        let tri_keys = trigram
            .iter()
            .map(|((a, b), span)| Ok(((a << 16) | b, entry(*span, cand_base)?)))
            .collect::<Result<Vec<_>, TableError>>()?;
        let (bi_bits, bi_words) = build_index(&bi_keys);
        let (tri_bits, tri_words) = build_index(&tri_keys);
        let mut words = vec![0u32; HEADER_WORDS];
        words[0] = MAGIC;
        words[1] = ENGINE.encode();
        words[2] = total as u32;
        words[3] = model.vocab_size();
        if unigram.len as usize > MAX_CANDIDATES {
            return Err(TableError::TooManyCandidates(unigram.len as usize));
        }
        words[4] = cand_base as u32 + unigram.start;
        words[5] = bi_base as u32;
        words[6] = tri_base as u32;
        words[7] = bi_bits | (tri_bits << 8) | (unigram.len << 16);
        words.extend(bi_words);
        words.extend(tri_words);
        words.extend(cands.iter().map(|c| (c.token << 16) | u32::from(c.log)));
        let hash = identity(&words);
        for (i, chunk) in hash.chunks_exact(4).enumerate() {
            words[8 + i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Ok(Table { words })
    }

    /// A table from its file's bytes (little-endian words), checked as the
    /// engine checks a committed one: its magic, its engine, its length.
    pub fn from_bytes(bytes: &[u8]) -> Result<Table, TableError> {
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let table = Table { words };
        let declared = table.check()?;
        if declared != table.words.len() || !bytes.len().is_multiple_of(4) {
            return Err(TableError::Length {
                declared,
                have: bytes.len() / 4,
            });
        }
        Ok(table)
    }

    /// The table's bytes, as its file and its region in DDR hold them.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// What the engine checks of a committed table's header, before it
    /// reads the rest: the magic, the engine, the words it declares
    /// (returned), which its region must hold, and its index sizes.
    pub fn check(&self) -> Result<usize, TableError> {
        let magic = self.words.first().copied().unwrap_or(0);
        if magic != MAGIC {
            return Err(TableError::Magic { found: magic });
        }
        let engine = self.words.get(1).copied().unwrap_or(0);
        if engine != ENGINE.encode() {
            return Err(TableError::Engine {
                found: engine,
                want: ENGINE,
            });
        }
        let sizes = self.words.get(7).copied().unwrap_or(0);
        if sizes & 0xFF > MAX_INDEX_BITS
            || (sizes >> 8) & 0xFF > MAX_INDEX_BITS
            || (sizes >> 16) as usize > MAX_CANDIDATES
        {
            return Err(TableError::Sizes { sizes });
        }
        // Last: a header alone (what the engine reads first) fails here
        // only, for the words it declares past itself.
        let declared = self.words.get(2).copied().unwrap_or(0) as usize;
        if declared < HEADER_WORDS || declared > self.words.len() {
            return Err(TableError::Length {
                declared,
                have: self.words.len(),
            });
        }
        Ok(declared)
    }

    /// The engine the table says it is for (word 1, as `SLOT_ENGINE` reads
    /// an engine).
    pub fn engine_word(&self) -> u32 {
        self.words.get(1).copied().unwrap_or(0)
    }

    /// The identity the table declares in words 8..16; the catalog checks it
    /// is [`Table::identity`].
    pub fn declared_identity(&self) -> [u8; 32] {
        let mut id = [0u8; 32];
        for (i, chunk) in id.chunks_exact_mut(4).enumerate() {
            let w = self.words.get(8 + i).copied().unwrap_or(0);
            chunk.copy_from_slice(&w.to_be_bytes());
        }
        id
    }

    /// The SHA-256 of the table's words from 16 on: what it should declare.
    pub fn identity(&self) -> [u8; 32] {
        identity(&self.words)
    }

    /// The CRC-32 (IEEE) of the table's bytes: what an engine computes as it
    /// reads the table in, and reports in `SLOT_TABLE_CRC`.
    pub fn crc(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for w in &self.words {
            h.update(&w.to_le_bytes());
        }
        h.finalize()
    }

    /// The sizes of the table's parts.
    pub fn stats(&self) -> TableStats {
        let w = |i: usize| self.words.get(i).copied().unwrap_or(0) as usize;
        let cand_base = self.words.len() - self.candidates_len();
        TableStats {
            words: self.words.len(),
            bigram_buckets: (w(6).saturating_sub(w(5))) / 2,
            trigram_buckets: (cand_base.saturating_sub(w(6))) / 2,
            candidates: self.candidates_len(),
        }
    }

    fn candidates_len(&self) -> usize {
        // The candidates are the words after the last index's final empty
        // bucket; the builder never leaves a gap.
        let w = |i: usize| self.words.get(i).copied().unwrap_or(0) as usize;
        let tri_bits = (w(7) >> 8) & 0xFF;
        let mut end = w(6) + 2 * (1usize << tri_bits).max(1);
        while end + 1 < self.words.len() && self.words[end - 1] != 0 {
            end += 2;
        }
        self.words.len().saturating_sub(end)
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

/// A table's words as an engine reads them, every read bounded by the words
/// the table declares. The engine's reads ([`Reader::lookup`],
/// [`Reader::step`]) are the same whether the words are a [`Table`] in
/// memory or a slot's region of DDR (the simulator reads the region as the
/// RTL does, at every step, so a host that overwrites a serving slot's
/// table is caught there as on a board).
pub trait Reader {
    /// Word `at`, or the read that passed the table's end.
    fn word(&self, at: usize) -> Result<u32, TableError>;

    /// The entry of `key` in the index at `base` with 2^`bits` home
    /// buckets: its home, then each next bucket until the key or an empty
    /// one.
    fn find(&self, base: usize, bits: u32, key: u32) -> Result<Option<u32>, TableError> {
        let mut at = base + 2 * home(key, bits);
        loop {
            let entry = self.word(at + 1)?;
            if entry == 0 {
                return Ok(None);
            }
            if self.word(at)? == key {
                return Ok(Some(entry));
            }
            at += 2;
        }
    }

    /// The candidates after `a b`, as first word and count.
    fn lookup(&self, a: u32, b: u32) -> Result<(usize, usize), TableError> {
        let sizes = self.word(7)?;
        let (bi_bits, tri_bits) = (sizes & 0xFF, (sizes >> 8) & 0xFF);
        // A token beyond 16 bits is in no context of the model.
        let tri = if a > 0xFFFF || b > 0xFFFF {
            None
        } else {
            self.find(self.word(6)? as usize, tri_bits, (a << 16) | b)?
        };
        let entry = match tri {
            Some(e) => Some(e),
            None => self.find(self.word(5)? as usize, bi_bits, b)?,
        };
        Ok(match entry {
            Some(e) => ((e >> 8) as usize, (e & 0xFF) as usize),
            None => (self.word(4)? as usize, (sizes >> 16) as usize),
        })
    }

    /// The next token after `a b` for a draw, as the engine computes it.
    fn step(&self, a: u32, b: u32, draw: u64, sampling: Sampling) -> Result<u32, TableError> {
        let (first, n) = self.lookup(a, b)?;
        if n == 0 {
            return Ok(crate::tokenizer::EOS);
        }
        // The engine reads only the first candidate of a greedy step.
        let n = if sampling == Sampling::Greedy { 1 } else { n };
        let cands = (first..first + n)
            .map(|at| self.word(at))
            .collect::<Result<Vec<u32>, TableError>>()?;
        let i = sampling::pick(cands.iter().map(|&w| w as u16), draw, sampling);
        Ok(cands.get(i).map_or(crate::tokenizer::EOS, |&w| w >> 16))
    }
}

impl Reader for Table {
    /// Word `at`, a read the engine bounds by WORDS.
    fn word(&self, at: usize) -> Result<u32, TableError> {
        let words = self.words.get(2).copied().unwrap_or(0) as usize;
        if at >= words.min(self.words.len()) {
            return Err(TableError::Beyond { at, words });
        }
        Ok(self.words[at])
    }
}

/// What a committed model file should declare in words 8..16, whatever its
/// format (sections 9 and 10): the SHA-256 of its words from 16 on,
/// little-endian.
pub fn identity(words: &[u32]) -> [u8; 32] {
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
    fn every_key_is_found_from_its_home_and_every_index_ends_empty() {
        let t = Table::build(&model()).expect("table");
        let m = model();
        let c = m.contexts();
        for ((a, b), span) in &c.trigram {
            let (_, n) = t.lookup(*a, *b).expect("lookup");
            assert_eq!(n, span.len as usize, "trigram {a} {b}");
        }
        let (bi, tri) = (t.words[5] as usize, t.words[6] as usize);
        assert_eq!(
            t.words[tri - 1],
            0,
            "the bigram index ends with an empty bucket"
        );
        let s = t.stats();
        assert!(
            s.bigram_buckets * 2 >= 2 * c.bigram.len(),
            "at most half full"
        );
        assert_eq!(bi, HEADER_WORDS);
        assert_eq!(s.words, t.words.len());
    }

    #[test]
    fn the_identity_is_declared_in_the_header_and_covers_the_body() {
        let m = model();
        let mut t = Table::build(&m).expect("table");
        let id = t.identity();
        assert_eq!(t.declared_identity(), id);
        let last = t.words.len() - 1;
        t.words[last] ^= 1;
        assert_ne!(t.identity(), id);
        assert_eq!(t.declared_identity(), id, "declared, not computed");
    }

    #[test]
    fn a_table_survives_its_bytes_and_a_wrong_one_is_named() {
        let t = Table::build(&model()).expect("table");
        let bytes = t.to_bytes();
        assert_eq!(Table::from_bytes(&bytes).expect("bytes"), t);
        assert_eq!(t.crc(), crc32fast::hash(&bytes));
        let mut other = bytes.clone();
        other[4] = 9; // ENGINE
        assert!(matches!(
            Table::from_bytes(&other),
            Err(TableError::Engine { .. })
        ));
        assert!(matches!(
            Table::from_bytes(&bytes[..bytes.len() - 4]),
            Err(TableError::Length { .. })
        ));
        let mut no = bytes;
        no[0] = 0;
        assert!(matches!(
            Table::from_bytes(&no),
            Err(TableError::Magic { .. })
        ));
    }

    #[test]
    fn a_read_past_the_tables_end_is_an_error_not_a_token() {
        let mut t = Table::build(&model()).expect("table");
        // The unigrams pointing past the end.
        t.words[4] = t.words.len() as u32 - 1;
        let err = t
            .step(0x1_0000, 0x1_0001, 7, Sampling::Scaled { inv_t: 256 })
            .expect_err("beyond");
        assert!(matches!(err, TableError::Beyond { .. }), "{err}");
    }

    #[test]
    fn a_token_beyond_16_bits_is_refused() {
        let m = Model::train("t", 70_000, &[vec![69_999, 5]], Pruning::default());
        assert!(matches!(
            Table::build(&m),
            Err(TableError::TokenTooLarge(69_999))
        ));
    }
}
