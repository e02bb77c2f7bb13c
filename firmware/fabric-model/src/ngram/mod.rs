//! A trigram model with back-off to bigrams and unigrams.
//!
//! Training counts continuations of every (two-token) and (one-token)
//! context, with each document starting after two end-of-text tokens and
//! ending with one, so generation after a prompt that ends a sentence flows
//! into a new one. Pruning keeps the image small: trigram contexts seen at
//! least twice, and the most frequent continuations of each context.
//!
//! Generation draws from the continuations of the longest known context,
//! weighted by about count^(1/temperature) (temperature 0 is greedy), with a
//! SplitMix64 generator seeded by the request's seed, in the contract's
//! integer arithmetic ([`fabric_hw::sampling`]): the same prompt, seed and
//! temperature give the same tokens here and in the RTL engine.

pub mod cycles;

use std::collections::HashMap;

use fabric_hw::sampling::{self, log2_q11, Sampling, SplitMix64};
use serde::{Deserialize, Serialize};

use crate::tokenizer::EOS;

/// Pruning limits.
#[derive(Debug, Clone, Copy)]
pub struct Pruning {
    pub trigram_min_count: u32,
    pub trigram_keep: usize,
    pub bigram_keep: usize,
    pub unigram_keep: usize,
}

impl Default for Pruning {
    fn default() -> Self {
        Pruning {
            trigram_min_count: 2,
            trigram_keep: 8,
            bigram_keep: 24,
            unigram_keep: 512,
        }
    }
}

type Continuations = Vec<(u32, u32)>;

/// The stored form: sorted, so the same corpus always gives the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stored {
    name: String,
    vocab_size: u32,
    unigram: Continuations,
    bigram: Vec<(u32, Continuations)>,
    trigram: Vec<((u32, u32), Continuations)>,
}

/// A trained model, ready to generate.
#[derive(Debug, Clone)]
pub struct Model {
    stored: Stored,
    /// Every context's candidates, one after the other, as the decoder
    /// samples them: token and Q11 log of its count.
    cands: Vec<Cand>,
    unigram: Span,
    bigram: Lookup<u32>,
    trigram: Lookup<(u32, u32)>,
}

/// A candidate next token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cand {
    pub token: u32,
    /// `log2(count)` in Q11 ([`sampling::log2_q11`]).
    pub log: u16,
}

/// A model's contexts, sorted by key, with where their candidates lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contexts {
    pub unigram: Span,
    pub bigram: Vec<(u32, Span)>,
    pub trigram: Vec<((u32, u32), Span)>,
}

/// Where a context's candidates lie in [`Model`]'s list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

/// A context's candidates, looked up at every decode step. The keys come
/// from the model file, not from requests, so a fixed foldhash (several
/// times faster than std's SipHash on these small keys) needs no seed.
type Lookup<K> = HashMap<K, Span, foldhash::fast::FixedState>;

/// Why a model could not be read.
#[derive(Debug, thiserror::Error)]
#[error("model data is corrupt: {0}")]
pub struct ModelError(String);

fn top(counts: HashMap<u32, u32>, keep: usize) -> Continuations {
    let mut v: Continuations = counts.into_iter().collect();
    // Highest count first; ties by token id, for determinism.
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(keep);
    v
}

impl Model {
    /// Trains on documents of token ids.
    pub fn train(name: &str, vocab_size: u32, docs: &[Vec<u32>], pruning: Pruning) -> Model {
        let mut uni: HashMap<u32, u32> = HashMap::new();
        let mut bi: HashMap<u32, HashMap<u32, u32>> = HashMap::new();
        let mut tri: HashMap<(u32, u32), HashMap<u32, u32>> = HashMap::new();
        for doc in docs {
            let (mut a, mut b) = (EOS, EOS);
            for &t in doc.iter().chain(std::iter::once(&EOS)) {
                *uni.entry(t).or_default() += 1;
                *bi.entry(b).or_default().entry(t).or_default() += 1;
                *tri.entry((a, b)).or_default().entry(t).or_default() += 1;
                a = b;
                b = t;
            }
        }
        let mut bigram: Vec<(u32, Continuations)> = bi
            .into_iter()
            .map(|(k, c)| (k, top(c, pruning.bigram_keep)))
            .collect();
        bigram.sort_by_key(|(k, _)| *k);
        let mut trigram: Vec<((u32, u32), Continuations)> = tri
            .into_iter()
            .filter(|(_, c)| c.values().sum::<u32>() >= pruning.trigram_min_count)
            .map(|(k, c)| (k, top(c, pruning.trigram_keep)))
            .collect();
        trigram.sort_by_key(|(k, _)| *k);
        Model::from_stored(Stored {
            name: name.to_owned(),
            vocab_size,
            unigram: top(uni, pruning.unigram_keep),
            bigram,
            trigram,
        })
    }

    fn from_stored(stored: Stored) -> Model {
        let mut cands = Vec::new();
        let mut add = |list: &Continuations| {
            let start = cands.len() as u32;
            cands.extend(list.iter().map(|&(token, count)| Cand {
                token,
                log: log2_q11(count),
            }));
            Span {
                start,
                len: list.len() as u32,
            }
        };
        let unigram = add(&stored.unigram);
        let bigram = stored.bigram.iter().map(|(k, c)| (*k, add(c))).collect();
        let trigram = stored.trigram.iter().map(|(k, c)| (*k, add(c))).collect();
        Model {
            stored,
            cands,
            unigram,
            bigram,
            trigram,
        }
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.stored.name
    }

    /// Token ids the model may produce are below this.
    pub fn vocab_size(&self) -> u32 {
        self.stored.vocab_size
    }

    /// The stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_allocvec(&self.stored).unwrap_or_default()
    }

    /// Reads the stored form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Model, ModelError> {
        let stored: Stored = postcard::from_bytes(bytes).map_err(|e| ModelError(e.to_string()))?;
        if stored.unigram.is_empty() {
            return Err(ModelError("no unigrams".into()));
        }
        Ok(Model::from_stored(stored))
    }

    /// The candidates after `a b`: of the trigram context if the model
    /// kept it, else of the bigram context `b`, else the unigrams.
    pub fn continuations(&self, a: u32, b: u32) -> &[Cand] {
        let span = self
            .trigram
            .get(&(a, b))
            .or_else(|| self.bigram.get(&b))
            .unwrap_or(&self.unigram);
        &self.cands[span.start as usize..(span.start + span.len) as usize]
    }

    /// The contexts as the fabric's table lays them out: the unigrams, the
    /// bigram contexts by token and the trigram contexts by pair, each
    /// sorted, with their spans in [`Model::candidates`].
    pub fn contexts(&self) -> Contexts {
        let mut bigram: Vec<(u32, Span)> = self.bigram.iter().map(|(k, s)| (*k, *s)).collect();
        bigram.sort_by_key(|(k, _)| *k);
        let mut trigram: Vec<((u32, u32), Span)> =
            self.trigram.iter().map(|(k, s)| (*k, *s)).collect();
        trigram.sort_by_key(|(k, _)| *k);
        Contexts {
            unigram: self.unigram,
            bigram,
            trigram,
        }
    }

    /// Every context's candidates, one after the other.
    pub fn candidates(&self) -> &[Cand] {
        &self.cands
    }

    /// A generator positioned after `prompt`.
    pub fn start(&self, prompt: &[u32], seed: u64, temperature: f32) -> Generator {
        let b = prompt.last().copied().unwrap_or(EOS);
        let a = if prompt.len() >= 2 {
            prompt[prompt.len() - 2]
        } else {
            EOS
        };
        Generator {
            a,
            b,
            rng: SplitMix64(seed),
            sampling: Sampling::from_f32(temperature),
        }
    }

    /// All tokens for a request, stopping after `stop_token` or `max_tokens`.
    pub fn generate(
        &self,
        prompt: &[u32],
        max_tokens: u32,
        temperature: f32,
        seed: u64,
        stop_token: u32,
    ) -> Vec<u32> {
        let mut g = self.start(prompt, seed, temperature);
        let mut out = Vec::new();
        for _ in 0..max_tokens {
            let t = g.step(self);
            out.push(t);
            if t == stop_token {
                break;
            }
        }
        out
    }
}

/// Generation state of one request.
#[derive(Debug, Clone)]
pub struct Generator {
    a: u32,
    b: u32,
    rng: SplitMix64,
    sampling: Sampling,
}

impl Generator {
    /// The next token.
    pub fn step(&mut self, model: &Model) -> u32 {
        let cands = model.continuations(self.a, self.b);
        let draw = self.rng.next();
        let i = sampling::pick(cands.iter().map(|c| c.log), draw, self.sampling);
        let t = cands.get(i).map_or(EOS, |c| c.token);
        self.a = self.b;
        self.b = t;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<Vec<u32>> {
        vec![
            vec![300, 301, 302, 303],
            vec![300, 301, 304],
            vec![300, 301, 302, 305],
        ]
    }

    #[test]
    fn greedy_follows_the_counts_and_stops() {
        let m = Model::train("t", 400, &docs(), Pruning::default());
        // After 300 301 the most frequent continuation is 302.
        assert_eq!(m.generate(&[300, 301], 1, 0.0, 0, EOS), vec![302]);
        let out = m.generate(&[300], 10, 0.0, 0, EOS);
        assert_eq!(out.last(), Some(&EOS));
        assert!(out.len() < 10);
    }

    #[test]
    fn same_seed_same_tokens_and_seeds_differ() {
        let m = Model::train(
            "t",
            400,
            &docs(),
            Pruning {
                trigram_min_count: 1,
                ..Pruning::default()
            },
        );
        let a = m.generate(&[300], 50, 1.0, 7, u32::MAX);
        assert_eq!(a, m.generate(&[300], 50, 1.0, 7, u32::MAX));
        let differs = (0..20).any(|s| m.generate(&[300], 50, 1.0, s, u32::MAX) != a);
        assert!(differs);
    }

    #[test]
    fn a_hotter_temperature_spreads_the_picks() {
        let m = Model::train("t", 400, &docs(), Pruning::default());
        // After 300 301: 302 twice, 304 once.
        let share = |t: f32| {
            (0..2_000)
                .filter(|&s| m.generate(&[300, 301], 1, t, s, u32::MAX) == [304])
                .count()
        };
        let (cold, one, hot) = (share(0.2), share(1.0), share(5.0));
        assert!(cold < one && one < hot, "{cold} {one} {hot}");
        // At 1.0 the counts are the weights: one in three.
        assert!((560..780).contains(&one), "{one}");
    }

    #[test]
    fn bytes_round_trip() {
        let m = Model::train("t", 400, &docs(), Pruning::default());
        let again = Model::from_bytes(&m.to_bytes()).expect("load");
        assert_eq!(again.stored, m.stored);
        assert!(Model::from_bytes(&[1, 2, 3]).is_err());
    }
}
