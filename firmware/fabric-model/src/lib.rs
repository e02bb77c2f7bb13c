//! The small language models that the simulated fabric runs.
//!
//! A model is a word-level trigram model with back-off over a vocabulary of
//! word pieces, with every byte as a fallback token, so any text tokenizes and
//! decodes back to itself. It generates deterministically for a given prompt,
//! seed and temperature.
//!
//! # Layout
//! - [`tokenizer`]: pieces, byte fallback, encode and decode. The daemon
//!   loads the tokenizer file named in the manifest: on a board the fabric
//!   takes token ids, and the vocabulary travels beside the bitstream.
//! - [`committed`]: what every model file a slot commits has in common,
//!   checked by its format.
//! - [`corpus`]: documents and the vocabulary they make, for every
//!   model builder.
//! - [`lm`]: the transformer in integers (contract section 10).
//! - [`ngram`]: counting, pruning and sampling.
//! - [`table`]: the model as the fabric's engine reads it from DDR, word by
//!   word: what a catalog ships as a model (format FTB2).
//! - [`image`]: an engine as the configuration data of a Xilinx `.bit`, so
//!   the simulated fabric loads exactly what the daemon stages, through the
//!   same header checks and byte-swapping as a real partial bitstream.

#![forbid(unsafe_code)]

pub mod committed;
pub mod corpus;
pub mod image;
pub mod lm;
pub mod ngram;
pub mod table;
pub mod tokenizer;

pub use ngram::Model;
pub use tokenizer::Tokenizer;
