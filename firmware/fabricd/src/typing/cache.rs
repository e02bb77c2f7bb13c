//! The completion cache: what the fabric answered to a deterministic
//! request, for the next identical one.
//!
//! A request is deterministic when its temperature is 0 (greedy: the seed
//! plays no part, so it is left out of the key) or it names its seed. The
//! key is everything the fabric's output depends on: the model, the
//! prompt's tokens, `max_tokens`, the temperature, the seed and the stop
//! token. Stop sequences are not in it: they are applied to the text at
//! the edge, hit or miss, so a request cut short by one is not cached.
//!
//! Entries belong to the slots' models as they were: the scheduler moves
//! an epoch whenever a slot's model or image changes, and the first use
//! under a new epoch empties the cache. An answer whose request was
//! admitted under an older epoch is not kept.

use std::sync::Arc;

use fabric_hw::contract::Finish;
use fabric_hw::shell::Params;

use super::lru::Lru;

/// What a deterministic request's answer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    model: Arc<str>,
    prompt: Box<[u32]>,
    max_tokens: u32,
    temperature_bits: u32,
    seed: u64,
    stop_token: u32,
}

impl CacheKey {
    /// The key of a request, if it is deterministic: temperature 0, or a
    /// seed it named (`seeded`).
    pub fn of(model: &Arc<str>, prompt: &[u32], params: &Params, seeded: bool) -> Option<CacheKey> {
        let greedy = params.temperature == 0.0;
        if !greedy && !seeded {
            return None;
        }
        Some(CacheKey {
            model: model.clone(),
            prompt: prompt.into(),
            max_tokens: params.max_tokens,
            temperature_bits: params.temperature.to_bits(),
            seed: if greedy { 0 } else { params.seed },
            stop_token: params.stop_token,
        })
    }

    fn bytes(&self) -> usize {
        std::mem::size_of::<CacheKey>() + 4 * self.prompt.len() + self.model.len()
    }
}

/// A cached answer: the fabric's output tokens and why it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub tokens: Arc<[u32]>,
    pub finish: Finish,
}

/// What the cache did, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheFigures {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub bytes: usize,
    pub evictions: u64,
    pub invalidations: u64,
}

/// The cache, bounded by bytes.
#[derive(Debug)]
pub struct Cache {
    lru: Lru<CacheKey, Cached>,
    epoch: u64,
    hits: u64,
    misses: u64,
    invalidations: u64,
}

impl Cache {
    pub fn new(max_bytes: usize) -> Cache {
        Cache {
            lru: Lru::new(max_bytes, usize::MAX),
            epoch: 0,
            hits: 0,
            misses: 0,
            invalidations: 0,
        }
    }

    /// Empties the cache if the slots' models changed since it was filled
    /// (`epoch` is never below the cache's: the callers see to it).
    fn at(&mut self, epoch: u64) {
        if epoch > self.epoch {
            if !self.lru.is_empty() {
                self.invalidations += 1;
            }
            self.lru.clear();
            self.epoch = epoch;
        }
    }

    /// The answer for `key` under the slots' `epoch`, counted as a hit or
    /// a miss.
    pub fn get(&mut self, key: &CacheKey, epoch: u64) -> Option<Cached> {
        if epoch < self.epoch {
            // Looked up with the slots as they were before a change: a
            // miss, and nothing to empty (the epoch never goes back).
            self.misses += 1;
            return None;
        }
        self.at(epoch);
        let found = self.lru.get_mut(key).cloned();
        match found {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        found
    }

    /// Keeps the answer to a request admitted under `epoch`.
    pub fn insert(&mut self, key: CacheKey, value: Cached, epoch: u64) {
        if epoch < self.epoch {
            // Computed by a model that has left its slot since.
            return;
        }
        self.at(epoch);
        let bytes = key.bytes() + 4 * value.tokens.len();
        self.lru.insert(key, value, bytes);
    }

    pub fn figures(&self) -> CacheFigures {
        CacheFigures {
            hits: self.hits,
            misses: self.misses,
            entries: self.lru.len(),
            bytes: self.lru.bytes(),
            evictions: self.lru.evicted(),
            invalidations: self.invalidations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, seed: u64) -> Params {
        Params {
            max_tokens: 8,
            temperature,
            seed,
            stop_token: 256,
            stream: false,
        }
    }

    fn cached(tokens: &[u32]) -> Cached {
        Cached {
            tokens: tokens.into(),
            finish: Finish::Length,
        }
    }

    #[test]
    fn only_deterministic_requests_have_keys() {
        let m: Arc<str> = Arc::from("kjv");
        assert!(CacheKey::of(&m, &[1], &params(1.0, 7), false).is_none());
        assert!(CacheKey::of(&m, &[1], &params(1.0, 7), true).is_some());
        // Greedy: the seed (drawn at random when none was named) is not
        // part of it.
        assert_eq!(
            CacheKey::of(&m, &[1], &params(0.0, 7), false),
            CacheKey::of(&m, &[1], &params(0.0, 8), false)
        );
        assert_ne!(
            CacheKey::of(&m, &[1], &params(1.0, 7), true),
            CacheKey::of(&m, &[1], &params(1.0, 8), true)
        );
    }

    #[test]
    fn hits_misses_and_a_model_change_empties_it() {
        let m: Arc<str> = Arc::from("kjv");
        let key = CacheKey::of(&m, &[1, 2], &params(0.0, 0), false).expect("key");
        let mut c = Cache::new(1 << 20);
        assert_eq!(c.get(&key, 0), None);
        c.insert(key.clone(), cached(&[5, 6]), 0);
        assert_eq!(c.get(&key, 0), Some(cached(&[5, 6])));
        // The slots changed: gone, and an answer computed before the change
        // is not kept.
        assert_eq!(c.get(&key, 1), None);
        c.insert(key.clone(), cached(&[5, 6]), 0);
        assert_eq!(c.get(&key, 1), None);
        let f = c.figures();
        assert_eq!((f.hits, f.misses, f.invalidations), (1, 3, 1));
        assert_eq!(f.entries, 0);
    }

    #[test]
    fn the_bytes_are_bounded_whatever_comes() {
        let m: Arc<str> = Arc::from("kjv");
        let mut c = Cache::new(64 * 1024);
        // Cache-busting prompts: every one new.
        for i in 0..10_000u32 {
            let key = CacheKey::of(&m, &[i; 20], &params(0.0, 0), false).expect("key");
            c.insert(key, cached(&[i; 8]), 0);
        }
        let f = c.figures();
        assert!(f.bytes <= 64 * 1024, "{f:?}");
        assert!(f.entries > 100 && f.evictions > 9000, "{f:?}");
    }
}
