//! A model file as the catalog and the rotation read it
//! (`fabric_model::committed::read`, either format by its magic), and a
//! transformer's weights (`fabric_model::lm::Weights::from_bytes`), which
//! the simulator steps for every token of a transformer slot.
//!
//! Beyond not panicking: weights that parse write back to the same bytes,
//! their declared identity is their words' hash, and a step of every token
//! at every position either gives one logit a token or says the context is
//! full: no shape, scale or table entry, however wrong, makes the integer
//! arithmetic read outside its matrices.
#![no_main]

use fabric_model::lm::{StepError, Weights};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = fabric_model::committed::read(bytes);
    let Ok(w) = Weights::from_bytes(bytes) else {
        return;
    };
    let words = w.to_words();
    let back: Vec<u8> = words.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(back, bytes);
    assert_eq!(fabric_model::lm::weights::identity(&words), w.identity);
    let mut cache = w.cache();
    let token = |i: usize| (i * 7919 % w.shape.vocab) as u32;
    for i in 0..=w.shape.context {
        match w.step(&mut cache, token(i)) {
            Ok(logits) => assert_eq!(logits.len(), w.shape.vocab),
            Err(StepError::Full { .. }) => assert_eq!(i, w.shape.context),
            Err(e) => panic!("a step of weights that parsed: {e}"),
        }
    }
});
