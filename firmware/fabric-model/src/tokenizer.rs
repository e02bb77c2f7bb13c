//! Word pieces with byte fallback.
//!
//! Ids 0..=255 are the bytes, 256 is end-of-text, and 257.. are pieces: a
//! run of letters or digits with an optional leading space, or a single
//! punctuation character. Text is split into such pieces; a piece in the
//! vocabulary becomes its id, any other piece becomes its bytes. Decoding
//! concatenates, so `decode(encode(s)) == s` for every string.

use std::collections::HashMap;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokenizer {
    pieces: Vec<Vec<u8>>,
    /// Piece → id. Its keys come from the model file (a prompt only looks
    /// them up), so a fixed foldhash serves: faster than SipHash on every
    /// piece of every prompt.
    #[serde(skip)]
    index: HashMap<Vec<u8>, u32, foldhash::fast::FixedState>,
    /// Every token that is whole UTF-8, as text: `spans[id]` is its range
    /// in `text`, or `None` for a byte above 0x7f or a piece that is not
    /// whole characters. Checked once here, so decoding the usual token
    /// needs no UTF-8 check per token (see [`Tokenizer::token_text`]).
    #[serde(skip)]
    text: String,
    #[serde(skip)]
    spans: Vec<Option<(u32, u32)>>,
}

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
            index: HashMap::default(),
            text: String::new(),
            spans: Vec::new(),
        };
        t.reindex();
        t
    }

    fn reindex(&mut self) {
        self.index = self
            .pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), FIRST_PIECE + i as u32))
            .collect();
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

    /// Number of token ids (bytes, end-of-text and pieces).
    pub fn vocab_size(&self) -> u32 {
        FIRST_PIECE + self.pieces.len() as u32
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        for piece in pre_tokenize(text) {
            match self.index.get(piece.as_bytes()) {
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

    proptest! {
        #[test]
        fn decode_inverts_encode(s in "\\PC*") {
            let t = tok();
            prop_assert_eq!(t.decode(&t.encode(&s)), s);
        }
    }
}
