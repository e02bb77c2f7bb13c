//! A corpus as the model builders read it: documents, one a record, and the
//! vocabulary of pieces they make.
//!
//! `mkmodel` builds the trigram tables from it, and `lmcorpus` the token
//! streams a transformer trains on, so both split and count the same way.

use std::collections::HashMap;

use crate::tokenizer::{pre_tokenize, Tokenizer};

/// The documents of `text`: records separated by a line holding only
/// `separator` (`%`, as in fortune files), trimmed, empty ones dropped.
pub fn records<'a>(text: &'a str, separator: &str) -> Vec<&'a str> {
    text.split(&format!("\n{separator}\n"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect()
}

/// A tokenizer of the `pieces` most frequent pieces of `docs` longer than
/// one byte and seen at least twice (ties by the piece's bytes, so the same
/// documents give the same vocabulary).
pub fn vocabulary<'a>(docs: impl IntoIterator<Item = &'a str>, pieces: usize) -> Tokenizer {
    let mut freq: HashMap<&str, u64> = HashMap::new();
    for d in docs {
        for p in pre_tokenize(d) {
            if p.len() > 1 {
                *freq.entry(p).or_default() += 1;
            }
        }
    }
    let mut kept: Vec<(&str, u64)> = freq.into_iter().filter(|(_, c)| *c >= 2).collect();
    kept.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    kept.truncate(pieces);
    kept.sort_by(|a, b| a.0.cmp(b.0));
    Tokenizer::new(kept.iter().map(|(p, _)| p.as_bytes().to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_on_the_separator_line_alone() {
        let text = "one\n%\n two \n%\n\n%\nthree % not a separator\n";
        assert_eq!(
            records(text, "%"),
            ["one", "two", "three % not a separator"]
        );
    }

    #[test]
    fn the_vocabulary_keeps_the_most_frequent_pieces_seen_twice() {
        let docs = ["the cat the dog", "the cat ran", "a dog"];
        let t = vocabulary(docs, 2);
        // " the" is seen once (the first "the" has no space), "the" twice,
        // " cat" twice, " dog" twice: the two kept tie on count and go by
        // their bytes.
        assert_eq!(t.vocab_size(), crate::tokenizer::FIRST_PIECE + 2);
        assert_eq!(t.encode(" cat"), [crate::tokenizer::FIRST_PIECE]);
        assert_eq!(t.encode(" dog"), [crate::tokenizer::FIRST_PIECE + 1]);
    }
}
