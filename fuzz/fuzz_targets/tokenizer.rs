//! A tokenizer file (`.tok`, `fabric_model::tokenizer::Tokenizer::from_bytes`),
//! which the catalog reads for every model, and text encoded with it. The
//! input is two bytes (little-endian) giving the file's length, the file,
//! then the text.
//!
//! Beyond not panicking: a file that parses writes back to a file that
//! parses to the same tokenizer; a token's text is its bytes whenever they
//! are whole UTF-8; every id encoding gives is in the vocabulary; and
//! decoding the text's ids gives the text back, whatever the pieces.
#![no_main]

use fabric_model::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let n = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (file, text) = rest.split_at(n);
    let Ok(t) = Tokenizer::from_bytes(file) else {
        return;
    };
    let again = Tokenizer::from_bytes(&t.to_bytes()).expect("a tokenizer reads its own file");
    assert_eq!(again, t);
    for id in 0..t.vocab_size() + 2 {
        assert_eq!(
            t.token_text(id),
            std::str::from_utf8(t.token_bytes(id)).ok(),
            "token {id}"
        );
    }
    let text = String::from_utf8_lossy(text);
    let ids = t.encode(&text);
    assert!(ids.iter().all(|&id| id < t.vocab_size()), "{ids:?}");
    assert_eq!(t.decode(&ids), text);
});
