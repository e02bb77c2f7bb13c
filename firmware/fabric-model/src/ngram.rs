//! A trigram model with back-off to bigrams and unigrams.
//!
//! Training counts continuations of every (two-token) and (one-token)
//! context, with each document starting after two end-of-text tokens and
//! ending with one, so generation after a prompt that ends a sentence flows
//! into a new one. Pruning keeps the image small: trigram contexts seen at
//! least twice, and the most frequent continuations of each context.
//!
//! Generation draws from the continuations of the longest known context,
//! weighted by count^(1/temperature) (temperature 0 is greedy), with a
//! SplitMix64 generator seeded by the request's seed: the same prompt, seed
//! and temperature always give the same tokens.

use std::collections::HashMap;

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
    bigram: Lookup<u32>,
    trigram: Lookup<(u32, u32)>,
}

/// A context's index into the stored tables, looked up at every decode
/// step. The keys come from the model file, not from requests, so a fixed
/// foldhash (several times faster than std's SipHash on these small keys)
/// needs no seed.
type Lookup<K> = HashMap<K, usize, foldhash::fast::FixedState>;

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
        let bigram = stored
            .bigram
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i))
            .collect();
        let trigram = stored
            .trigram
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i))
            .collect();
        Model {
            stored,
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

    fn continuations(&self, a: u32, b: u32) -> &[(u32, u32)] {
        if let Some(&i) = self.trigram.get(&(a, b)) {
            return &self.stored.trigram[i].1;
        }
        if let Some(&i) = self.bigram.get(&b) {
            return &self.stored.bigram[i].1;
        }
        &self.stored.unigram
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
            temperature: if temperature.is_finite() {
                temperature.max(0.0)
            } else {
                1.0
            },
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
    temperature: f32,
}

impl Generator {
    /// The next token.
    pub fn step(&mut self, model: &Model) -> u32 {
        let cands = model.continuations(self.a, self.b);
        let draw = self.rng.next();
        let t = pick(cands, draw, self.temperature);
        self.a = self.b;
        self.b = t;
        t
    }
}

fn pick(cands: &[(u32, u32)], draw: u64, temperature: f32) -> u32 {
    let Some(&(best, _)) = cands.first() else {
        return EOS;
    };
    if temperature <= 1e-3 {
        return best;
    }
    let inv = 1.0 / f64::from(temperature);
    // 53 random bits give a uniform f64 in [0, 1).
    let unit = (draw >> 11) as f64 / (1u64 << 53) as f64;
    if inv == 1.0 {
        // The counts are the weights (`powf(c, 1.0)` is exactly `c`): the
        // same pick without a power or an allocation per token.
        let total: f64 = cands.iter().map(|&(_, c)| f64::from(c)).sum();
        return walk(cands.iter().map(|&(t, c)| (t, f64::from(c))), unit * total).unwrap_or(best);
    }
    let weights: Vec<f64> = cands.iter().map(|&(_, c)| f64::from(c).powf(inv)).collect();
    let total: f64 = weights.iter().sum();
    walk(
        cands.iter().zip(&weights).map(|(&(t, _), &w)| (t, w)),
        unit * total,
    )
    .unwrap_or(best)
}

/// The token whose share of the weights holds `x`.
fn walk(weighted: impl Iterator<Item = (u32, f64)>, mut x: f64) -> Option<u32> {
    for (t, w) in weighted {
        if x < w {
            return Some(t);
        }
        x -= w;
    }
    None
}

/// SplitMix64: tiny, fast, and the same on every platform.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
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
    fn temperature_one_picks_exactly_as_the_power_would() {
        // The shortcut at 1.0 must pick the token the general path picks,
        // for every draw: completions already checked against it stay
        // the same.
        let cands = [(10, 7), (11, 3), (12, 1), (13, 1)];
        let mut rng = SplitMix64(42);
        for _ in 0..10_000 {
            let draw = rng.next();
            let weights: Vec<f64> = cands.iter().map(|&(_, c)| f64::from(c).powf(1.0)).collect();
            let total: f64 = weights.iter().sum();
            let mut x = (draw >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut want = 10;
            for (&(t, _), w) in cands.iter().zip(&weights) {
                if x < *w {
                    want = t;
                    break;
                }
                x -= w;
            }
            assert_eq!(pick(&cands, draw, 1.0), want);
        }
    }

    #[test]
    fn bytes_round_trip() {
        let m = Model::train("t", 400, &docs(), Pruning::default());
        let again = Model::from_bytes(&m.to_bytes()).expect("load");
        assert_eq!(again.stored, m.stored);
        assert!(Model::from_bytes(&[1, 2, 3]).is_err());
    }
}
