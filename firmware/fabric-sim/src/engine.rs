//! The transformer engine's side of a context (contract section 10): the
//! sequence it feeds and its key-value cache, stepped by
//! `fabric_model::lm`, the definition the RTL engine is checked against.
//! The weights are read from DDR once, as the commit's read-in ends; a
//! trigram slot's step reads its table from DDR (`device.rs`).

use std::sync::Arc;

use fabric_hw::sampling::Sampling;
use fabric_model::lm::{pick, Cache, StepError, Weights};
use fabric_model::tokenizer::EOS;

/// A transformer context: its cache, and the tokens to feed before the
/// next draw (end-of-text and the prompt at first, then each token drawn).
pub(crate) struct LmContext {
    weights: Arc<Weights>,
    cache: Cache,
    to_feed: Vec<u32>,
}

impl std::fmt::Debug for LmContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmContext")
            .field("positions", &self.cache.len())
            .field("to_feed", &self.to_feed.len())
            .finish()
    }
}

/// How a context's next draw ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LmNext {
    Token(u32),
    /// Every position of the context is taken: the request ends as at its
    /// `max_tokens` (the daemon refuses a request that would get here).
    Full,
    /// A prompt token outside the vocabulary: a decoder fault.
    BadToken(u32),
}

impl LmContext {
    pub(crate) fn new(weights: Arc<Weights>, prompt: &[u32]) -> LmContext {
        let mut to_feed = Vec::with_capacity(prompt.len() + 1);
        to_feed.push(EOS);
        to_feed.extend_from_slice(prompt);
        LmContext {
            cache: weights.cache(),
            weights,
            to_feed,
        }
    }

    /// The positions its sequence holds: where its next token goes.
    pub(crate) fn position(&self) -> usize {
        self.cache.len()
    }

    /// Feeds what is pending and draws the next token with `draw`.
    pub(crate) fn next(&mut self, draw: u64, sampling: Sampling) -> LmNext {
        let mut logits = None;
        for &t in &self.to_feed {
            match self.weights.step(&mut self.cache, t) {
                Ok(l) => logits = Some(l),
                Err(StepError::Full { .. }) => return LmNext::Full,
                Err(StepError::Token { token, .. }) => return LmNext::BadToken(token),
            }
        }
        self.to_feed.clear();
        let Some(logits) = logits else {
            // Unreachable: there is always a token to feed before a draw.
            return LmNext::Full;
        };
        let token = pick(&logits, draw, sampling);
        self.to_feed.push(token);
        LmNext::Token(token)
    }
}
