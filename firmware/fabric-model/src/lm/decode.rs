//! A decode step of the transformer, in the integers of [`super::arith`]:
//! one token in at the context's next position, the logits of the one
//! after out, the context's keys and values kept for the steps after.

use fabric_hw::sampling::{self, Sampling};

use super::arith::{
    gelu, matvec, quantize, rmsnorm, rotate, round_shift, score, softmax_weight, weighted_mean,
    LOG2_E_Q16, Q,
};
use super::weights::Weights;

/// One context's keys and values: `i8` a head's element, in units of the
/// head's `max / 128` at that position, for every layer and position so far.
/// A context's cache is its own: no step reads another's.
#[derive(Debug, Clone)]
pub struct Cache {
    len: usize,
    dim: usize,
    heads: usize,
    context: usize,
    keys: Vec<i8>,
    key_max: Vec<u32>,
    values: Vec<i8>,
    value_max: Vec<u32>,
}

impl Cache {
    /// Positions held so far: the next step's position.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No position yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position: the context starts a new sequence.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    fn at(&self, layer: usize, pos: usize) -> usize {
        layer * self.context + pos
    }
}

/// Why a step cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("token {token} is outside the vocabulary of {vocab}")]
    Token { token: u32, vocab: usize },
    #[error("the context holds {context} positions, all taken")]
    Full { context: usize },
}

impl Weights {
    /// An empty cache for one context of this model.
    pub fn cache(&self) -> Cache {
        let s = &self.shape;
        let n = s.layers * s.context;
        Cache {
            len: 0,
            dim: s.dim,
            heads: s.heads,
            context: s.context,
            keys: vec![0; n * s.dim],
            key_max: vec![0; n * s.heads],
            values: vec![0; n * s.dim],
            value_max: vec![0; n * s.heads],
        }
    }

    /// Feeds `token` at the cache's next position and returns the logits of
    /// the next token (Q16, natural logarithms up to a constant).
    pub fn step(&self, cache: &mut Cache, token: u32) -> Result<Vec<i32>, StepError> {
        let s = &self.shape;
        if token as usize >= s.vocab {
            return Err(StepError::Token {
                token,
                vocab: s.vocab,
            });
        }
        let pos = cache.len;
        if pos >= s.context {
            return Err(StepError::Full { context: s.context });
        }
        let head = s.head();
        let rope = &self.rope[pos * head / 2..(pos + 1) * head / 2];
        let mut x = self.embed.row_q16(token as usize);
        for (l, layer) in self.layers.iter().enumerate() {
            let n = quantize(&rmsnorm(&x, &layer.norm1));
            let mut q = matvec(&layer.wq, &n);
            let mut k = matvec(&layer.wk, &n);
            let v = matvec(&layer.wv, &n);
            let at = cache.at(l, pos);
            for h in 0..s.heads {
                let span = h * head..(h + 1) * head;
                rotate(&mut q[span.clone()], rope);
                rotate(&mut k[span.clone()], rope);
                let kq = quantize(&k[span.clone()]);
                let vq = quantize(&v[span.clone()]);
                let e = at * s.dim + h * head;
                cache.keys[e..e + head].copy_from_slice(&kq.values);
                cache.values[e..e + head].copy_from_slice(&vq.values);
                cache.key_max[at * s.heads + h] = kq.max;
                cache.value_max[at * s.heads + h] = vq.max;
            }
            let mut o = vec![0i32; s.dim];
            for h in 0..s.heads {
                let span = h * head..(h + 1) * head;
                self.attend(cache, l, pos, h, &q[span.clone()], &mut o[span]);
            }
            let o = matvec(&layer.wo, &quantize(&o));
            add(&mut x, &o);
            let mut hidden = matvec(&layer.w1, &quantize(&rmsnorm(&x, &layer.norm2)));
            gelu(&mut hidden, &self.phi);
            let m = matvec(&layer.w2, &quantize(&hidden));
            add(&mut x, &m);
        }
        cache.len = pos + 1;
        Ok(matvec(&self.embed, &quantize(&rmsnorm(&x, &self.norm))))
    }

    /// Head `h`'s attention at `pos` over positions `0..=pos` of layer `l`.
    fn attend(&self, cache: &Cache, l: usize, pos: usize, h: usize, q: &[i32], out: &mut [i32]) {
        let head = q.len();
        let qq = quantize(q);
        let half_log_head = self.shape.half_log_head();
        let slot = |p: usize| cache.at(l, p);
        let scores: Vec<i64> = (0..=pos)
            .map(|p| {
                let e = slot(p) * cache.dim + h * head;
                let acc = super::arith::dot(&cache.keys[e..e + head], &qq.values);
                score(
                    acc,
                    qq.max,
                    cache.key_max[slot(p) * cache.heads + h],
                    half_log_head,
                )
            })
            .collect();
        let top = scores.iter().copied().max().unwrap_or(0);
        let weights: Vec<u32> = scores.iter().map(|&z| softmax_weight(top - z)).collect();
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        for (i, o) in out.iter_mut().enumerate() {
            *o = weighted_mean(
                weights.iter().enumerate().map(|(p, &w)| {
                    let e = slot(p) * cache.dim + h * head + i;
                    (
                        w,
                        cache.values[e],
                        cache.value_max[slot(p) * cache.heads + h],
                    )
                }),
                total,
            );
        }
    }
}

fn add(x: &mut [i32], y: &[i32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a = a.saturating_add(b);
    }
}

/// The next token from the logits, by section 8's sampling: the candidates
/// are the most likely token (the lowest id among equals) and then every
/// other in id order, each weighted by its distance below the most likely
/// in base-2 logarithms, Q11 (`round((top - logit) * log2(e) / 2^21)`, at
/// most 65,535).
pub fn pick(logits: &[i32], draw: u64, sampling: Sampling) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    if sampling == Sampling::Greedy {
        return best as u32;
    }
    let top = i128::from(logits[best]);
    let log = |i: usize| {
        let below = round_shift((top - i128::from(logits[i])) * LOG2_E_Q16, Q + 5);
        u16::MAX - below.clamp(0, i128::from(u16::MAX)) as u16
    };
    let order = std::iter::once(best).chain((0..logits.len()).filter(move |&i| i != best));
    let n = sampling::pick(order.clone().map(log), draw, sampling);
    order.clone().nth(n).unwrap_or(best) as u32
}

/// The tokens a request gets, as an engine makes them: end-of-text and the
/// prompt fed from position 0, then up to `n` tokens drawn with section 8's
/// stream seeded by `seed`, each fed before the next draw, ending at
/// `stop` (included) or when the context is full. The reference the
/// simulator's and the RTL's engines are checked against.
pub fn generate(
    w: &Weights,
    prompt: &[u32],
    n: u32,
    temperature: f32,
    seed: u64,
    stop: u32,
) -> Result<Vec<u32>, StepError> {
    let mut cache = w.cache();
    let mut rng = sampling::SplitMix64(seed);
    let sampling = Sampling::from_f32(temperature);
    let mut logits = w.step(&mut cache, crate::tokenizer::EOS)?;
    for &t in prompt {
        logits = w.step(&mut cache, t)?;
    }
    let mut out = Vec::new();
    while out.len() < n as usize {
        let t = pick(&logits, rng.next(), sampling);
        out.push(t);
        if t == stop || out.len() == n as usize {
            break;
        }
        logits = match w.step(&mut cache, t) {
            Ok(l) => l,
            Err(StepError::Full { .. }) => break,
            Err(e) => return Err(e),
        };
    }
    Ok(out)
}

/// The logits' natural-log probability of `token`, exactly from the
/// integers (for perplexity; the engine samples with [`pick`]).
pub fn log_prob(logits: &[i32], token: u32) -> f64 {
    let scale = f64::from(1u32 << Q);
    let top = logits.iter().copied().max().unwrap_or(0);
    let sum: f64 = logits
        .iter()
        .map(|&l| ((i64::from(l) - i64::from(top)) as f64 / scale).exp())
        .sum();
    (i64::from(logits[token as usize]) - i64::from(top)) as f64 / scale - sum.ln()
}
