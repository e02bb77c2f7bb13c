//! Typists: the traffic of a speculative-typing page.
//!
//! A rung's value is simultaneous typists. Each types text from a corpus
//! (by default the Book of Genesis, King James Version: the text the `kjv`
//! model was built from) with the keystroke timing of [`KeystrokeModel`]:
//! log-normal intervals (median 180 ms, σ 0.45: about 60 words a minute),
//! a pause after some words and after every sentence (log-normal, median
//! 2 s, never under 1 s). Like a typing UI it sends a completion request
//! for the field's text on every keystroke (or, with a debounce, once the
//! keys stop for that long), naming its typing session
//! (`"session"`), and it shows an answer only if it is still valid for
//! what has been typed since: the field is the answer's prompt, or the
//! prompt followed by the start of the suggestion. Every other answer is
//! stale and discarded.
//!
//! The figure that matters is the **suggestion latency at a pause**: for
//! each keystroke after which the typist pauses, the time from that
//! keystroke until the typist holds a suggestion valid for its text (zero
//! when one it already holds still is). A pause that ends with nothing is
//! missed, and counts as later than any answer. Beside it: requests and
//! fabric requests per keystroke, the share superseded, and the answers'
//! sources (`X-Fabricd-Source`: cache and typed-forward hits).
//!
//! # Layout
//! - [`keystrokes`]: the corpus and the keystroke model.
//! - [`typist`]: one typist as plain state, fed keys and answers.
//! - [`run`]: a rung of typists against a target.
//! - [`report`]: a rung summarized, the table and the SVG.

pub mod keystrokes;
pub mod report;
pub mod run;
pub mod typist;

pub use keystrokes::{Corpus, KeystrokeModel};
pub use report::TypistResult;
pub use run::TypistsConfig;
