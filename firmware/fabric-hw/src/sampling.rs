//! The contract's sampling arithmetic (`docs/fabric-contract.md`, section 8):
//! how a decoder turns a descriptor's temperature and seed and a context's
//! candidate tokens into the next token, in integers only.
//!
//! Every decoder of the contract (the simulator's model, the RTL engine in
//! `rtl/engine/`) computes exactly this, so the same prompt, seed and
//! temperature give the same tokens bit for bit on each. Floating point has
//! no place here: a small engine in the fabric has no `powf`.
//!
//! - The descriptor's `f32` temperature becomes a [`Sampling`]: greedy, or
//!   the inverse temperature `floor(256 / T)` (Q8), computed exactly from the
//!   float's bits ([`Sampling::from_bits`]).
//! - A candidate's weight comes from its count's base-2 logarithm in Q11
//!   ([`log2_q11`], stored in the model's table so the engine does not compute
//!   it): `d = ((L_first - L) * inv_t) >> 8` in Q11, then `EXP2[d's top eight
//!   fraction bits] >> d's integer part` ([`weight`]). The first candidate (the
//!   most frequent) always weighs 65,536.
//! - The draw is the high 32 bits of the request's SplitMix64 output,
//!   scaled to the total weight: `x = (draw >> 32) * total >> 32`; the pick is
//!   the first candidate whose running weight passes `x` ([`pick`]).

/// How a request samples, from its descriptor's temperature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// The most frequent candidate, always (temperature at most 0.001,
    /// negative, or -0).
    Greedy,
    /// Weights scaled by the inverse temperature, `floor(256 / T)`.
    Scaled { inv_t: u32 },
}

/// The bits of `0.001f32`: temperatures at or below it are greedy.
pub const GREEDY_MAX_BITS: u32 = 0x3A83_126F;
/// The inverse temperature a non-finite temperature samples with (T = 1).
pub const INV_T_ONE: u32 = 256;

impl Sampling {
    /// The sampling of a descriptor whose `temperature` field holds `bits`.
    ///
    /// Infinities and NaNs sample as T = 1 (the simulator's behaviour since
    /// version 1.0); a negative number, zero and anything up to 0.001 are
    /// greedy. Otherwise `inv_t = floor(2^(158 - E) / M)`, with `E` the
    /// exponent field and `M` the significand with its hidden bit, which is
    /// `floor(256 / T)` exactly: a hardware divider of 42 by 24 bits.
    pub fn from_bits(bits: u32) -> Sampling {
        let exponent = (bits >> 23) & 0xFF;
        if exponent == 0xFF {
            return Sampling::Scaled { inv_t: INV_T_ONE };
        }
        if bits & 0x8000_0000 != 0 || bits <= GREEDY_MAX_BITS {
            return Sampling::Greedy;
        }
        // Above 0.001 the number is normal (exponent >= 117), so the shift
        // is at most 41 and the quotient below 2^19.
        let significand = u64::from(bits & 0x7F_FFFF) | (1 << 23);
        let shift = 158u32.saturating_sub(exponent);
        Sampling::Scaled {
            inv_t: ((1u64 << shift) / significand) as u32,
        }
    }

    /// The sampling of a temperature.
    pub fn from_f32(temperature: f32) -> Sampling {
        Sampling::from_bits(temperature.to_bits())
    }
}

/// `log2(count)` in Q11 (five integer bits, eleven fraction bits), each
/// fraction bit found by squaring and truncating: exact and the same
/// everywhere. A count of 0 has no logarithm and gives 0.
pub fn log2_q11(count: u32) -> u16 {
    if count == 0 {
        return 0;
    }
    let n = 31 - count.leading_zeros();
    // 1.f in Q62.
    let mut x = u128::from(count) << (62 - n);
    let mut frac = 0u16;
    for _ in 0..11 {
        x = (x * x) >> 62;
        frac <<= 1;
        if x >= 1 << 63 {
            frac |= 1;
            x >>= 1;
        }
    }
    ((n as u16) << 11) | frac
}

/// `round(65536 * 2^(-i/256))` for i in 0..256: the weight of a fraction of
/// a halving. `rtl/tables/exp2.hex` holds the same table; a test checks it.
pub const EXP2: [u32; 256] = exp2_table();

const fn exp2_table() -> [u32; 256] {
    // 2^(-i/256) by repeated multiplication with 2^(-1/256) in Q32 fixed
    // point, rounded to Q16: integer-only, so const and exact.
    // 2^(-1/256) in Q40, truncated:
    const STEP_Q40: u128 = 1_096_538_610_001;
    let mut t = [0u32; 256];
    let mut v: u128 = 1 << 40;
    let mut i = 0;
    while i < 256 {
        t[i] = ((v + (1 << 23)) >> 24) as u32;
        v = (v * STEP_Q40) >> 40;
        i += 1;
    }
    t
}

/// The weight of a candidate whose log is `log` when the first candidate's
/// is `first`.
pub fn weight(first: u16, log: u16, inv_t: u32) -> u32 {
    let diff = u64::from(first.saturating_sub(log));
    let d = (diff * u64::from(inv_t)) >> 8;
    let whole = d >> 11;
    if whole >= 17 {
        return 0;
    }
    EXP2[((d >> 3) & 0xFF) as usize] >> whole
}

/// The index of the candidate drawn from `logs` (the candidates' Q11 logs,
/// most frequent first), or 0 when there is one or none.
pub fn pick(logs: impl Iterator<Item = u16> + Clone, draw: u64, sampling: Sampling) -> usize {
    let Sampling::Scaled { inv_t } = sampling else {
        return 0;
    };
    let mut all = logs.clone();
    let Some(first) = all.next() else { return 0 };
    let total: u64 = logs
        .clone()
        .map(|l| u64::from(weight(first, l, inv_t)))
        .sum();
    let mut x = ((draw >> 32) * total) >> 32;
    for (i, l) in logs.enumerate() {
        let w = u64::from(weight(first, l, inv_t));
        if x < w {
            return i;
        }
        x -= w;
    }
    0
}

/// SplitMix64, the request's random stream: seeded by the descriptor's
/// `seed`, one output per decode step.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next output.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
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

    #[test]
    fn inverse_temperature_is_exact() {
        for t in [
            0.0011f32, 0.1, 0.5, 0.7, 0.8, 1.0, 1.5, 2.0, 3.0, 255.9, 256.0, 1e9,
        ] {
            let want = (256.0f64 / f64::from(t)).floor() as u32;
            assert_eq!(
                Sampling::from_f32(t),
                Sampling::Scaled { inv_t: want },
                "T = {t}"
            );
        }
    }

    #[test]
    fn small_negative_and_odd_temperatures() {
        for t in [0.0f32, -0.0, 0.001, 1e-9, -1.0, f32::MIN_POSITIVE / 2.0] {
            assert_eq!(Sampling::from_f32(t), Sampling::Greedy, "T = {t}");
        }
        for t in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            assert_eq!(Sampling::from_f32(t), Sampling::Scaled { inv_t: 256 });
        }
        assert_eq!(
            Sampling::from_bits(GREEDY_MAX_BITS + 1),
            Sampling::Scaled { inv_t: 255_999 }
        );
    }

    #[test]
    fn logs_are_truncated_logarithms() {
        assert_eq!(log2_q11(1), 0);
        assert_eq!(log2_q11(2), 1 << 11);
        assert_eq!(log2_q11(u32::MAX), (31 << 11) | 0x7FF);
        for c in [3u32, 5, 7, 100, 1000, 65_535, 1 << 20, 123_456_789] {
            let exact = f64::from(c).log2() * 2048.0;
            let got = f64::from(log2_q11(c));
            assert!(
                got <= exact && exact - got < 1.0 + 1e-9,
                "{c}: {got} against {exact}"
            );
        }
    }

    #[test]
    fn the_exp2_table_matches_its_definition() {
        for (i, &w) in EXP2.iter().enumerate() {
            let exact = 65536.0 * (-(i as f64) / 256.0).exp2();
            assert!(
                (f64::from(w) - exact).abs() <= 0.5 + 1e-6,
                "{i}: {w} against {exact}"
            );
        }
        assert_eq!(EXP2[0], 65536);
    }

    #[test]
    fn at_temperature_one_weights_follow_the_counts() {
        let counts = [40u32, 20, 10, 5];
        let logs: Vec<u16> = counts.iter().map(|&c| log2_q11(c)).collect();
        let w: Vec<u32> = logs.iter().map(|&l| weight(logs[0], l, 256)).collect();
        assert_eq!(w[0], 65536);
        for (i, &c) in counts.iter().enumerate() {
            let want = 65536.0 * f64::from(c) / 40.0;
            assert!(
                (f64::from(w[i]) - want).abs() / want < 0.01,
                "{i}: {} against {want}",
                w[i]
            );
        }
    }

    #[test]
    fn the_pick_covers_the_candidates_in_proportion() {
        let logs = [log2_q11(3), log2_q11(1)];
        let mut rng = SplitMix64(1);
        let picks = (0..40_000)
            .filter(|_| {
                pick(
                    logs.iter().copied(),
                    rng.next(),
                    Sampling::Scaled { inv_t: 256 },
                ) == 1
            })
            .count();
        // One in four, within sampling noise.
        assert!((9_000..11_000).contains(&picks), "{picks}");
        assert_eq!(pick(logs.iter().copied(), u64::MAX, Sampling::Greedy), 0);
        assert_eq!(
            pick(std::iter::empty(), 7, Sampling::Scaled { inv_t: 256 }),
            0
        );
    }
}
