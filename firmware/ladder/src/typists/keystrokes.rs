//! The keystroke model: what a typist types and when.
//!
//! Deterministic for a seed, so the features-off and features-on runs of
//! one benchmark type the same keystrokes at the same moments.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal};

/// The built-in corpus: the Book of Genesis, King James Version (public
/// domain; the text the `kjv` model was built from), one verse a line.
pub const KJV_GENESIS: &str = include_str!("../../corpus/kjv-genesis.txt");

/// Why a corpus or a keystroke model was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("the corpus has no passage to type (one passage a line, some non-blank)")]
    EmptyCorpus,
    #[error("{what} must be {rule} (is {value})")]
    Parameter {
        what: &'static str,
        rule: &'static str,
        value: f64,
    },
}

/// The passages typists type, one a line.
#[derive(Debug, Clone)]
pub struct Corpus {
    passages: Vec<Passage>,
}

#[derive(Debug, Clone)]
struct Passage {
    text: String,
    /// Byte offsets where a word starts: where a typist may begin.
    word_starts: Vec<usize>,
}

impl Corpus {
    /// One passage per non-blank line, its whitespace runs made single
    /// spaces (a typist types one space between words).
    pub fn parse(text: &str) -> Result<Corpus, ModelError> {
        let passages: Vec<Passage> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .map(|text| {
                let word_starts = std::iter::once(0)
                    .chain(text.match_indices(' ').map(|(i, _)| i + 1))
                    .collect();
                Passage { text, word_starts }
            })
            .collect();
        if passages.is_empty() {
            return Err(ModelError::EmptyCorpus);
        }
        Ok(Corpus { passages })
    }

    /// The built-in corpus.
    pub fn kjv_genesis() -> Result<Corpus, ModelError> {
        Corpus::parse(KJV_GENESIS)
    }

    pub fn passages(&self) -> usize {
        self.passages.len()
    }

    /// Places a typist may start typing: every word of every passage.
    pub fn starting_points(&self) -> usize {
        self.passages.iter().map(|p| p.word_starts.len()).sum()
    }
}

/// When keys are pressed and where a typist pauses.
///
/// - The interval between two keystrokes is log-normal: median
///   `interval_median`, shape `interval_sigma` (the standard deviation of
///   its logarithm), cut to `interval_min..=interval_max`. The defaults,
///   180 ms and 0.45, give a mean near 200 ms: about 60 words a minute.
/// - After the space that ends a word the typist pauses with probability
///   `pause_after_word`; after the space that follows `,` `;` `:` with
///   `pause_after_clause`; after the space that follows `.` `?` `!`, and
///   after a passage's last character, always.
/// - A pause is log-normal too: median `pause_median`, shape
///   `pause_sigma`, cut to `pause_min..=pause_max`. A pause is never
///   shorter than `pause_min` (1 s, the speculative-typing budget), so a
///   suggestion within the budget always arrives before typing goes on.
/// - After the pause at a passage's end the field is cleared and the next
///   passage begins. A typist starts each passage at a word chosen at
///   random (the corpus has thousands), so two typists seldom type the same
///   text and the server's cache sees what one typist repeats rather than
///   what the corpus repeats.
/// - Typists start within `start_spread` of the rung's start, at random.
#[derive(Debug, Clone, PartialEq)]
pub struct KeystrokeModel {
    pub interval_median: Duration,
    pub interval_sigma: f64,
    pub interval_min: Duration,
    pub interval_max: Duration,
    pub pause_after_word: f64,
    pub pause_after_clause: f64,
    pub pause_median: Duration,
    pub pause_sigma: f64,
    pub pause_min: Duration,
    pub pause_max: Duration,
    pub start_spread: Duration,
}

impl Default for KeystrokeModel {
    fn default() -> Self {
        KeystrokeModel {
            interval_median: Duration::from_millis(180),
            interval_sigma: 0.45,
            interval_min: Duration::from_millis(40),
            interval_max: Duration::from_millis(1500),
            pause_after_word: 0.15,
            pause_after_clause: 0.5,
            pause_median: Duration::from_millis(2000),
            pause_sigma: 0.4,
            pause_min: Duration::from_millis(1000),
            pause_max: Duration::from_millis(6000),
            start_spread: Duration::from_secs(2),
        }
    }
}

impl KeystrokeModel {
    /// Checks the parameters a distribution or a probability needs.
    pub fn validate(&self) -> Result<(), ModelError> {
        let positive = |what, d: Duration| {
            if d.is_zero() {
                Err(ModelError::Parameter {
                    what,
                    rule: "positive",
                    value: 0.0,
                })
            } else {
                Ok(())
            }
        };
        positive("the interval's median", self.interval_median)?;
        positive("the pause's median", self.pause_median)?;
        for (what, p) in [
            ("the pause after a word", self.pause_after_word),
            ("the pause after a clause", self.pause_after_clause),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(ModelError::Parameter {
                    what,
                    rule: "a probability, 0 to 1",
                    value: p,
                });
            }
        }
        for (what, s) in [
            ("the interval's sigma", self.interval_sigma),
            ("the pause's sigma", self.pause_sigma),
        ] {
            if !(s.is_finite() && s >= 0.0) {
                return Err(ModelError::Parameter {
                    what,
                    rule: "finite and not negative",
                    value: s,
                });
            }
        }
        for (what, lo, hi) in [
            ("the interval's range", self.interval_min, self.interval_max),
            ("the pause's range", self.pause_min, self.pause_max),
        ] {
            if lo > hi {
                return Err(ModelError::Parameter {
                    what,
                    rule: "a minimum no larger than its maximum",
                    value: lo.as_secs_f64(),
                });
            }
        }
        Ok(())
    }
}

/// One keystroke.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    /// Clear the field first (a new passage begins).
    pub clear: bool,
    pub ch: char,
    /// The typist pauses after this key.
    pub pause: bool,
    /// Until the next key: the pause, or an interval.
    pub gap: Duration,
}

/// One typist's keystrokes, endless.
#[derive(Debug)]
pub struct Keystrokes {
    corpus: Arc<Corpus>,
    model: KeystrokeModel,
    rng: Xoshiro256PlusPlus,
    interval: LogNormal<f64>,
    pause: LogNormal<f64>,
    passage: usize,
    /// Byte offset of the next character in the passage.
    at: usize,
    clear: bool,
}

/// A seed for typist `typist` of rung `rung` of a run seeded `seed`:
/// splitmix64's finaliser over the three, so neighbouring typists' streams
/// share nothing.
pub fn typist_seed(seed: u64, rung: u64, typist: u64) -> u64 {
    let mut z = seed
        ^ rung.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ typist.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn lognormal(
    what: &'static str,
    median: Duration,
    sigma: f64,
) -> Result<LogNormal<f64>, ModelError> {
    LogNormal::new(median.as_secs_f64().ln(), sigma).map_err(|_| ModelError::Parameter {
        what,
        rule: "a positive median and a finite, non-negative sigma",
        value: sigma,
    })
}

impl Keystrokes {
    /// A typist's keystrokes.
    pub fn new(
        corpus: Arc<Corpus>,
        model: KeystrokeModel,
        seed: u64,
    ) -> Result<Keystrokes, ModelError> {
        model.validate()?;
        if corpus.passages.is_empty() {
            return Err(ModelError::EmptyCorpus);
        }
        let mut k = Keystrokes {
            interval: lognormal("the interval", model.interval_median, model.interval_sigma)?,
            pause: lognormal("the pause", model.pause_median, model.pause_sigma)?,
            corpus,
            model,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            passage: 0,
            at: 0,
            clear: false,
        };
        k.next_passage();
        k.clear = false;
        Ok(k)
    }

    /// When this typist starts, after the rung's start.
    pub fn start_delay(&mut self) -> Duration {
        let spread = self.model.start_spread.as_secs_f64();
        Duration::from_secs_f64(self.rng.random::<f64>() * spread)
    }

    fn next_passage(&mut self) {
        let n = self.corpus.passages.len();
        self.passage = self.rng.random_range(0..n);
        let starts = self
            .corpus
            .passages
            .get(self.passage)
            .map_or(&[][..], |p| &p.word_starts[..]);
        self.at = if starts.is_empty() {
            0
        } else {
            starts[self.rng.random_range(0..starts.len())]
        };
        self.clear = true;
    }

    fn draw(&mut self, d: LogNormal<f64>, lo: Duration, hi: Duration) -> Duration {
        let secs = d.sample(&mut self.rng);
        Duration::from_secs_f64(secs.clamp(lo.as_secs_f64(), hi.as_secs_f64()))
    }

    /// The next keystroke.
    pub fn next_key(&mut self) -> Key {
        let text = self
            .corpus
            .passages
            .get(self.passage)
            .map_or("", |p| p.text.as_str());
        let Some(ch) = text[self.at..].chars().next() else {
            // Never: a passage is not empty and a typist moves to the next
            // one after its last character.
            return Key {
                clear: false,
                ch: ' ',
                pause: false,
                gap: self.model.interval_median,
            };
        };
        let before = text[..self.at].chars().next_back();
        let clear = std::mem::take(&mut self.clear);
        self.at += ch.len_utf8();
        let end = self.at >= text.len();
        let p = match (ch, before) {
            _ if end => 1.0,
            (' ', Some('.' | '?' | '!')) => 1.0,
            (' ', Some(',' | ';' | ':')) => self.model.pause_after_clause,
            (' ', Some(c)) if c.is_alphanumeric() => self.model.pause_after_word,
            _ => 0.0,
        };
        let pause = p >= 1.0 || (p > 0.0 && self.rng.random::<f64>() < p);
        let gap = if pause {
            self.draw(self.pause, self.model.pause_min, self.model.pause_max)
        } else {
            self.draw(
                self.interval,
                self.model.interval_min,
                self.model.interval_max,
            )
        };
        if end {
            self.next_passage();
        }
        Key {
            clear,
            ch,
            pause,
            gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(text: &str) -> Arc<Corpus> {
        Arc::new(Corpus::parse(text).expect("corpus"))
    }

    #[test]
    fn the_built_in_corpus_is_genesis() {
        let c = Corpus::kjv_genesis().expect("corpus");
        assert_eq!(c.passages(), 1533, "the verses of Genesis");
        assert!(c.starting_points() > 30_000, "{}", c.starting_points());
        assert_eq!(
            Corpus::parse(" \n\t\n").err(),
            Some(ModelError::EmptyCorpus)
        );
    }

    #[test]
    fn the_same_seed_types_the_same_keys_at_the_same_moments() {
        let c = Arc::new(Corpus::kjv_genesis().expect("corpus"));
        let keys = |seed| {
            let mut k = Keystrokes::new(c.clone(), KeystrokeModel::default(), seed).expect("model");
            (0..500).map(|_| k.next_key()).collect::<Vec<_>>()
        };
        assert_eq!(keys(7), keys(7));
        assert_ne!(keys(7), keys(8));
        assert_ne!(typist_seed(1, 0, 1), typist_seed(1, 0, 2));
        assert_ne!(typist_seed(1, 0, 1), typist_seed(1, 1, 1));
    }

    #[test]
    fn typists_type_the_passage_from_a_word_and_clear_the_field_after_it() {
        let c = corpus("one two. three\nfour five\n");
        let mut k = Keystrokes::new(c, KeystrokeModel::default(), 3).expect("model");
        let mut field = String::new();
        let mut typed = Vec::new();
        for _ in 0..400 {
            let key = k.next_key();
            if key.clear {
                typed.push(std::mem::take(&mut field));
            }
            field.push(key.ch);
            if key.pause {
                assert!(
                    key.gap >= Duration::from_secs(1) && key.gap <= Duration::from_secs(6),
                    "{key:?}"
                );
            } else {
                assert!(
                    key.gap >= Duration::from_millis(40) && key.gap <= Duration::from_millis(1500),
                    "{key:?}"
                );
            }
        }
        let whole = ["one two. three", "four five"];
        for t in &typed {
            assert!(
                whole.iter().any(|w| w.ends_with(t.as_str()))
                    && (t.is_empty() || !t.starts_with(' ')),
                "{t:?} is the end of a passage, from a word"
            );
        }
        assert!(typed.len() > 10);
        // Some passage was typed from its first word.
        assert!(typed.iter().any(|t| whole.contains(&t.as_str())));
    }

    #[test]
    fn pauses_come_where_the_model_says() {
        let c = corpus("Alpha beta, gamma. Delta epsilon\n");
        let model = KeystrokeModel {
            pause_after_word: 0.0,
            pause_after_clause: 0.0,
            ..KeystrokeModel::default()
        };
        let mut k = Keystrokes::new(c, model, 11).expect("model");
        let mut field = String::new();
        let mut paused_at = Vec::new();
        for _ in 0..300 {
            let key = k.next_key();
            if key.clear {
                field.clear();
            }
            field.push(key.ch);
            if key.pause {
                paused_at.push(field.clone());
            }
        }
        // Only after a sentence and at the passage's end.
        for p in &paused_at {
            assert!(
                p.ends_with(". ") || p.ends_with("epsilon"),
                "paused after {p:?}"
            );
        }
        assert!(paused_at.iter().any(|p| p.ends_with("gamma. ")));
        assert!(paused_at.iter().any(|p| p.ends_with("epsilon")));
    }

    #[test]
    fn intervals_follow_the_stated_distribution() {
        let c = corpus("abcdefghijklmnopqrstuvwxyz\n");
        let mut k = Keystrokes::new(c, KeystrokeModel::default(), 5).expect("model");
        let mut gaps: Vec<f64> = (0..20_000)
            .map(|_| k.next_key())
            .filter(|key| !key.pause)
            .map(|key| key.gap.as_secs_f64())
            .collect();
        gaps.sort_by(f64::total_cmp);
        let median = gaps[gaps.len() / 2];
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // Log-normal, median 180 ms, sigma 0.45: mean 180·e^(0.45²/2) ≈ 199 ms.
        assert!((0.170..0.190).contains(&median), "median {median}");
        assert!((0.188..0.210).contains(&mean), "mean {mean}");
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let m = KeystrokeModel {
            pause_after_word: 1.5,
            ..KeystrokeModel::default()
        };
        assert!(matches!(
            m.validate(),
            Err(ModelError::Parameter {
                what: "the pause after a word",
                ..
            })
        ));
        let m = KeystrokeModel {
            pause_min: Duration::from_secs(9),
            ..KeystrokeModel::default()
        };
        assert!(m.validate().is_err());
        assert!(KeystrokeModel::default().validate().is_ok());
    }
}
