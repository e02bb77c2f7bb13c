//! Word pieces with byte fallback.
//!
//! Ids 0..=255 are the bytes, 256 is end-of-text, and 257.. are pieces: a
//! run of letters or digits with an optional leading space, or a single
//! punctuation character. Text is split into such pieces; a piece in the
//! vocabulary becomes its id, any other piece becomes its bytes. Decoding
//! concatenates, so `decode(encode(s)) == s` for every string.

use serde::{Deserialize, Serialize};

/// The end-of-text token.
pub const EOS: u32 = 256;
/// The first piece id.
pub const FIRST_PIECE: u32 = 257;
const MAGIC: &[u8; 8] = b"FBRTOK01";

/// Why a tokenizer file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("not a tokenizer file (bad magic)")]
    Magic,
    #[error("tokenizer file is corrupt: {0}")]
    Decode(String),
}

/// A vocabulary of pieces.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tokenizer {
    pieces: Vec<Vec<u8>>,
    /// Piece → id: each piece's id, found by [`piece_hash`] and checked
    /// against `pieces`. Every word of every prompt is looked up here, on
    /// the boards' cores too: see [`piece_hash`] for why this hash and this
    /// table.
    #[serde(skip)]
    index: hashbrown::HashTable<u32>,
    /// Every token that is whole UTF-8, as text: `spans[id]` is its range
    /// in `text`, or `None` for a byte above 0x7f or a piece that is not
    /// whole characters. Checked once here, so decoding the usual token
    /// needs no UTF-8 check per token (see [`Tokenizer::token_text`]).
    #[serde(skip)]
    text: String,
    #[serde(skip)]
    spans: Vec<Option<(u32, u32)>>,
}

/// The index's hash of a piece: 32-bit FNV-1a, its 32 bits in both halves
/// of the `u64` (the table takes its buckets from the low bits and its
/// tags from the top seven of a `usize`, on 32- and 64-bit builds alike).
///
/// The table's keys are the vocabulary's, fixed by the model file, and a
/// prompt only looks pieces up, so a hash an attacker can collide costs
/// nothing: a lookup's probes end at the table's own load, whatever its
/// hash. What counts is the cost of a short word on a Cortex-A9, a 32-bit
/// core: foldhash's 64-bit multiplies are several instructions each there,
/// and so is the call to libc's `memcmp` that compared each piece found
/// (results/arm-cost-2026-12-07.md). Written here: the `fnv` crate hashes
/// in 64 bits.
fn piece_hash(piece: &[u8]) -> u64 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in piece {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u64::from(h) << 32 | u64::from(h)
}

/// Whether two pieces are the same bytes, compared in place: a piece is a
/// few bytes, and a call to `memcmp` costs more than comparing them.
fn same_piece(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Two tokenizers are the same when their pieces are: the rest is made
/// from them.
impl PartialEq for Tokenizer {
    fn eq(&self, other: &Tokenizer) -> bool {
        self.pieces == other.pieces
    }
}

impl Eq for Tokenizer {}

/// Splits text into pieces (see the module doc), lazily: encoding a prompt
/// needs no list of them.
pub fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let word_at =
        move |j: usize| j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] >= 0x80);
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        if bytes[i] == b' ' && word_at(i + 1) {
            i += 1;
        }
        if word_at(i) {
            while word_at(i) {
                i += 1;
            }
        } else {
            // One character (UTF-8 aware) on its own.
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
        Some(&text[start..i])
    })
}

impl Tokenizer {
    /// A tokenizer whose pieces are `pieces` (ids from [`FIRST_PIECE`]).
    pub fn new(pieces: Vec<Vec<u8>>) -> Tokenizer {
        let mut t = Tokenizer {
            pieces,
            index: hashbrown::HashTable::new(),
            text: String::new(),
            spans: Vec::new(),
        };
        t.reindex();
        t
    }

    fn reindex(&mut self) {
        let mut index = hashbrown::HashTable::with_capacity(self.pieces.len());
        for (i, piece) in self.pieces.iter().enumerate() {
            let id = FIRST_PIECE + i as u32;
            let hash = piece_hash(piece);
            // A piece listed twice is found by its last id, as a map built
            // in order has it.
            match index.find_mut(hash, |&other: &u32| same_piece(self.piece(other), piece)) {
                Some(other) => *other = id,
                None => {
                    index.insert_unique(hash, id, |&other: &u32| piece_hash(self.piece(other)));
                }
            }
        }
        self.index = index;
        let mut text = String::new();
        let spans = (0..self.vocab_size())
            .map(|id| {
                let s = std::str::from_utf8(self.token_bytes(id)).ok()?;
                let start = text.len() as u32;
                text.push_str(s);
                Some((start, text.len() as u32))
            })
            .collect();
        self.text = text;
        self.spans = spans;
    }

    /// The bytes of piece `id` (an id the index holds); empty for any other.
    fn piece(&self, id: u32) -> &[u8] {
        id.checked_sub(FIRST_PIECE)
            .and_then(|i| self.pieces.get(i as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// Number of token ids (bytes, end-of-text and pieces).
    pub fn vocab_size(&self) -> u32 {
        FIRST_PIECE + self.pieces.len() as u32
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        for piece in pre_tokenize(text) {
            let piece_bytes = piece.as_bytes();
            let found = self.index.find(piece_hash(piece_bytes), |&id| {
                same_piece(self.piece(id), piece_bytes)
            });
            match found {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().map(u32::from)),
            }
        }
        out
    }

    /// The bytes of one token; end-of-text and unknown ids are empty.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        if id < 256 {
            // Bytes 0..=255 are their own tokens; a one-byte slice of a
            // static table avoids allocating.
            &BYTES[id as usize..id as usize + 1]
        } else if id >= FIRST_PIECE {
            self.pieces
                .get((id - FIRST_PIECE) as usize)
                .map_or(&[], Vec::as_slice)
        } else {
            &[]
        }
    }

    /// The text of one token when its bytes are whole UTF-8 characters
    /// (end-of-text and unknown ids are empty); `None` when they are not,
    /// and only a decoder that holds back partial characters can use them.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        match self.spans.get(id as usize) {
            Some(&Some((start, end))) => self.text.get(start as usize..end as usize),
            Some(None) => None,
            None => Some(""),
        }
    }

    /// The bytes of a token sequence.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect()
    }

    /// The text of a token sequence (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// The file form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        // Serialising a Vec of byte vectors cannot fail.
        out.extend(postcard::to_allocvec(&self.pieces).unwrap_or_default());
        out
    }

    /// Reads the file form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tokenizer, TokenizerError> {
        let body = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or(TokenizerError::Magic)?;
        let pieces: Vec<Vec<u8>> =
            postcard::from_bytes(body).map_err(|e| TokenizerError::Decode(e.to_string()))?;
        Ok(Tokenizer::new(pieces))
    }
}

static BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tok() -> Tokenizer {
        Tokenizer::new(vec![
            b"In".to_vec(),
            b" the".to_vec(),
            b" beginning".to_vec(),
            b",".to_vec(),
        ])
    }

    #[test]
    fn pieces_and_fallback() {
        assert_eq!(
            pre_tokenize("In the beginning, God").collect::<Vec<_>>(),
            vec!["In", " the", " beginning", ",", " God"]
        );
        let t = tok();
        let ids = t.encode("In the beginning, God");
        assert_eq!(&ids[..4], &[257, 258, 259, 260]);
        assert_eq!(&ids[4..], &[32, 71, 111, 100]);
        assert_eq!(t.decode(&ids), "In the beginning, God");
    }

    #[test]
    fn token_text_is_the_bytes_when_they_are_whole_characters() {
        let t = Tokenizer::new(vec![
            b" the".to_vec(),
            "é".as_bytes().to_vec(),
            vec![0xC3],
            vec![0xff, b'a'],
        ]);
        for id in 0..t.vocab_size() + 3 {
            assert_eq!(
                t.token_text(id),
                std::str::from_utf8(t.token_bytes(id)).ok(),
                "{id}"
            );
        }
        assert_eq!(t.token_text(u32::from(b'A')), Some("A"));
        assert_eq!(t.token_text(0xC3), None);
        assert_eq!(t.token_text(FIRST_PIECE + 1), Some("é"));
        assert_eq!(t.token_text(FIRST_PIECE + 2), None);
    }

    #[test]
    fn file_round_trip_and_bad_magic() {
        let t = tok();
        assert_eq!(Tokenizer::from_bytes(&t.to_bytes()).expect("load"), t);
        assert!(matches!(
            Tokenizer::from_bytes(b"nope"),
            Err(TokenizerError::Magic)
        ));
    }

    /// `encode` as a map from pieces to ids has it (the last id of a
    /// piece listed twice), against which the index is checked.
    fn encode_by_map(pieces: &[Vec<u8>], text: &str) -> Vec<u32> {
        let map: std::collections::HashMap<&[u8], u32> = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_slice(), FIRST_PIECE + i as u32))
            .collect();
        let mut out = Vec::new();
        for piece in pre_tokenize(text) {
            match map.get(piece.as_bytes()) {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().map(u32::from)),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(s in "\\PC*") {
            let t = tok();
            prop_assert_eq!(t.decode(&t.encode(&s)), s);
        }

        /// Words drawn from a small alphabet, so that texts are mostly the
        /// vocabulary's pieces, near misses (a prefix, one letter more) and
        /// pieces listed twice.
        #[test]
        fn the_index_finds_what_a_map_of_the_pieces_finds(
            pieces in proptest::collection::vec("[ ]?[abc]{1,4}|[,.]|é", 0..40),
            words in proptest::collection::vec("[ ]?[abc]{1,5}|[,. ]|é", 0..30),
        ) {
            let pieces: Vec<Vec<u8>> = pieces.into_iter().map(String::into_bytes).collect();
            let text = words.concat();
            let t = Tokenizer::new(pieces.clone());
            prop_assert_eq!(t.encode(&text), encode_by_map(&pieces, &text));
        }
    }

    #[test]
    fn a_piece_listed_twice_is_found_by_its_last_id() {
        let t = Tokenizer::new(vec![b" a".to_vec(), b"b".to_vec(), b" a".to_vec()]);
        assert_eq!(t.encode(" a"), vec![FIRST_PIECE + 2]);
        assert_eq!(t.encode("b"), vec![FIRST_PIECE + 1]);
    }
}
