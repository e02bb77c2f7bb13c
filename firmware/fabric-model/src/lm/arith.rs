//! The transformer's arithmetic, in integers only (contract section 10).
//!
//! Every vector between two matrix products is `i32` in Q16 (sixteen
//! fraction bits): the residual stream, the norms' outputs, queries, keys,
//! values, the attention's output and the MLP's hidden layer. A matrix
//! product takes its input as `i8` with one scale for the vector
//! ([`quantize`]), multiplies by `i8` weights with one scale a row, sums in
//! `i32`, and gives Q16 back ([`matvec`]). Wide intermediates are `i128`
//! so that the definition states what is exact, not what a register
//! holds; the RTL's widths follow from the bounds given at each step.
//!
//! Rounding is the same everywhere: [`round_shift`], half up.

use fabric_hw::sampling::EXP2;

/// Fraction bits of every vector.
pub const Q: u32 = 16;
/// Fraction bits of a weight row's scale.
pub const SCALE_BITS: u32 = 30;
/// Fraction bits of the rotary tables' cosines and sines.
pub const ROPE_BITS: u32 = 14;
/// Fraction bits of the GELU table.
pub const PHI_BITS: u32 = 15;
/// Entries of the GELU table: Φ over [-8, 8) in steps of 1/128.
pub const PHI_ENTRIES: usize = 2048;
/// `round(log2(e) * 2^16)`: natural logarithms into base-2 ones.
pub const LOG2_E_Q16: i128 = 94_548;

/// `v / 2^s`, rounded half up.
pub fn round_shift(v: i128, s: u32) -> i128 {
    (v + (1i128 << (s - 1))) >> s
}

/// Saturates to `i32`.
pub fn sat(v: i128) -> i32 {
    v.clamp(i128::from(i32::MIN), i128::from(i32::MAX)) as i32
}

/// A vector as a matrix product takes it: `i8` values in units of
/// `max / 128`, where `max` is the largest magnitude of the Q16 vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantized {
    pub values: Vec<i8>,
    /// The largest magnitude, Q16; 0 for a vector of zeros.
    pub max: u32,
}

/// `x` as `i8` in units of `max / 128`: `q = min(127, round(|x| * 128 / max))`
/// with `x`'s sign, by one reciprocal a vector (`R = floor(2^47 / max)`,
/// `q = (|x| * R + 2^39) >> 40`; `|x| * R <= 2^47`), so the engine divides
/// once a vector, not once an element. The largest element, 128 units,
/// is held at 127.
pub fn quantize(x: &[i32]) -> Quantized {
    let max = x.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
    if max == 0 {
        return Quantized {
            values: vec![0; x.len()],
            max: 0,
        };
    }
    let r = (1u64 << 47) / u64::from(max);
    let values = x
        .iter()
        .map(|&v| {
            let q = ((u64::from(v.unsigned_abs()) * r + (1 << 39)) >> 40).min(127) as i8;
            if v < 0 {
                -q
            } else {
                q
            }
        })
        .collect();
    Quantized { values, max }
}

/// A matrix of `i8` weights, one scale a row (`scale / 2^30` is the row's
/// step), rows of `cols` values one after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub scales: Vec<u32>,
    pub weights: Vec<i8>,
}

impl Matrix {
    /// Row `r`'s weights.
    pub fn row(&self, r: usize) -> &[i8] {
        &self.weights[r * self.cols..(r + 1) * self.cols]
    }

    /// Row `r` as a Q16 vector (the embedding's lookup):
    /// `round(w * scale / 2^14)`.
    pub fn row_q16(&self, r: usize) -> Vec<i32> {
        let s = i128::from(self.scales[r]);
        self.row(r)
            .iter()
            .map(|&w| sat(round_shift(i128::from(w) * s, SCALE_BITS - Q)))
            .collect()
    }
}

/// The `i32` sum of row `r`'s products with `x`: at most
/// `127 * 127 * cols` in magnitude, 2^24 for 1,024 columns.
pub fn dot(row: &[i8], x: &[i8]) -> i32 {
    row.iter()
        .zip(x)
        .map(|(&w, &v)| i32::from(w) * i32::from(v))
        .sum()
}

/// `W x` in Q16: `round(acc * scale * max / 2^37)` a row, the row's step
/// `scale / 2^30` times the input's `max / 2^23`.
pub fn matvec(m: &Matrix, x: &Quantized) -> Vec<i32> {
    (0..m.rows)
        .map(|r| {
            let acc = i128::from(dot(m.row(r), &x.values));
            sat(round_shift(
                acc * i128::from(m.scales[r]) * i128::from(x.max),
                SCALE_BITS + 7,
            ))
        })
        .collect()
}

/// RMSNorm with gains `g` (Q16): `x / rms(x) * g`.
///
/// The vector is first shifted right until its largest magnitude fits 15
/// bits (`xs`, a norm does not see scale), then `ms = floor(sum(xs^2) / n)`,
/// `r = isqrt(ms * 2^16)` (the rms of `xs`, Q8), `inv = floor(2^46 / r)`,
/// and `y = round(xs * g * inv / 2^38)`. A vector of zeros stays zeros.
/// The float model adds 1e-5 to the mean square; at a Q16 vector's scale
/// that is below the arithmetic's resolution, and left out.
pub fn rmsnorm(x: &[i32], g: &[i32]) -> Vec<i32> {
    let max = x.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
    if max == 0 {
        return vec![0; x.len()];
    }
    let shift = (32 - max.leading_zeros()).saturating_sub(15);
    let xs: Vec<i64> = x.iter().map(|&v| i64::from(v >> shift)).collect();
    let ss: u64 = xs.iter().map(|&v| (v * v) as u64).sum();
    let ms = ss / x.len() as u64;
    let r = isqrt(ms << 16).max(1);
    let inv = (1u64 << 46) / r;
    xs.iter()
        .zip(g)
        .map(|(&v, &g)| {
            sat(round_shift(
                i128::from(v) * i128::from(g) * i128::from(inv),
                38,
            ))
        })
        .collect()
}

/// `floor(sqrt(v))`, exactly.
pub fn isqrt(v: u64) -> u64 {
    if v < 2 {
        return v;
    }
    // Newton's method from above: decreasing to the floor, exact in integers.
    let mut x = 1u64 << (64 - v.leading_zeros()).div_ceil(2);
    loop {
        let y = (x + v / x) / 2;
        if y >= x {
            return x;
        }
        x = y;
    }
}

/// Rotates the interleaved pairs `(v[2i], v[2i+1])` of one head by the
/// position's `(cos, sin)` pairs (Q14): `a' = round((a c - b s) / 2^14)`,
/// `b' = round((a s + b c) / 2^14)`.
pub fn rotate(v: &mut [i32], table: &[(i16, i16)]) {
    for (pair, &(c, s)) in v.chunks_exact_mut(2).zip(table) {
        let (a, b) = (i128::from(pair[0]), i128::from(pair[1]));
        let (c, s) = (i128::from(c), i128::from(s));
        pair[0] = sat(round_shift(a * c - b * s, ROPE_BITS));
        pair[1] = sat(round_shift(a * s + b * c, ROPE_BITS));
    }
}

/// GELU by its table of Φ (Q15, midpoints of steps of 1/128 over [-8, 8)):
/// `y = round(h * PHI[clamp((h + 8.0) >> 9)] / 2^15)`.
pub fn gelu(h: &mut [i32], phi: &[u16]) {
    for v in h {
        let idx = ((i64::from(*v) + (8 << Q)) >> 9).clamp(0, PHI_ENTRIES as i64 - 1) as usize;
        *v = sat(round_shift(i128::from(*v) * i128::from(phi[idx]), PHI_BITS));
    }
}

/// A score's base-2 exponent in Q8, from a query's and a key's `i8` dot
/// product and their `max`es: `floor(acc * max_q * max_k * log2(e) / 2^(54 + s))`,
/// where `2^s` is the square root of the head's size (the attention's
/// scale, so the head size is a power of four). That is the score
/// `q.k / sqrt(head)` in base-2 logarithms with eight fraction bits.
pub fn score(acc: i32, max_q: u32, max_k: u32, half_log_head: u32) -> i64 {
    let v = i128::from(acc) * i128::from(max_q) * i128::from(max_k) * LOG2_E_Q16;
    (v >> (54 + half_log_head)) as i64
}

/// A score's softmax weight from its distance `d >= 0` below the highest
/// (Q8 base 2): `EXP2[d & 0xFF] >> (d >> 8)`, 0 from a distance of 17
/// halvings on. The highest weighs 65,536.
pub fn softmax_weight(d: i64) -> u32 {
    let whole = d >> 8;
    if whole >= 17 {
        return 0;
    }
    EXP2[(d & 0xFF) as usize] >> whole
}

/// The attention's output for one element of a head: the weighted sum of
/// the values' elements (`i8`, in units of their `max / 128`), over the
/// weights' total, Q16: `round(sum(w * v * max_v) * floor(2^48 / total) / 2^55)`.
pub fn weighted_mean(terms: impl Iterator<Item = (u32, i8, u32)>, total: u64) -> i32 {
    let num: i128 = terms
        .map(|(w, v, max)| i128::from(w) * i128::from(v) * i128::from(max))
        .sum();
    let inv = i128::from((1u64 << 48) / total.max(1));
    sat(round_shift(num * inv, 55))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_maps_the_largest_to_127_and_keeps_signs() {
        let q = quantize(&[65536, -32768, 0, 16384, -65536]);
        assert_eq!(q.max, 65536);
        assert_eq!(q.values, [127, -64, 0, 32, -127]);
        assert_eq!(quantize(&[0, 0]).values, [0, 0]);
        // The smallest non-zero max: every element is 0 or its full unit.
        assert_eq!(quantize(&[1, -1, 0]).values, [127, -127, 0]);
    }

    #[test]
    fn matvec_scales_back_to_q16() {
        // One row, weight 64 of step 1/64: the weight is 1.0; the input's
        // 1.0 (Q16) quantizes to 127 units of 1/128. 1.0 * 127/128.
        let m = Matrix {
            rows: 1,
            cols: 1,
            scales: vec![1 << (SCALE_BITS - 6)],
            weights: vec![64],
        };
        let y = matvec(&m, &quantize(&[1 << Q]));
        assert_eq!(y, [(127 << Q) / 128]);
    }

    #[test]
    fn rmsnorm_gives_unit_rms_at_unit_gain() {
        let g = vec![1 << Q; 4];
        let y = rmsnorm(&[3 << Q, -3 << Q, 3 << Q, -3 << Q], &g);
        assert_eq!(y, [1 << Q, -(1 << Q), 1 << Q, -(1 << Q)]);
        // Scale does not matter: the same vector far smaller.
        let y = rmsnorm(&[3, -3, 3, -3], &g);
        assert_eq!(y, [1 << Q, -(1 << Q), 1 << Q, -(1 << Q)]);
        assert_eq!(rmsnorm(&[0, 0], &g[..2]), [0, 0]);
    }

    #[test]
    fn isqrt_is_the_floor() {
        for v in [
            0u64,
            1,
            2,
            3,
            4,
            15,
            16,
            17,
            1 << 40,
            (1 << 40) - 1,
            u64::MAX,
        ] {
            let r = isqrt(v);
            assert!(u128::from(r) * u128::from(r) <= u128::from(v), "{v}");
            assert!(u128::from(r + 1) * u128::from(r + 1) > u128::from(v), "{v}");
        }
    }

    #[test]
    fn a_quarter_turn_swaps_the_pair() {
        let mut v = [1 << Q, 0];
        rotate(&mut v, &[(0, 1 << ROPE_BITS)]);
        assert_eq!(v, [0, 1 << Q]);
    }

    #[test]
    fn softmax_weights_halve_every_256() {
        assert_eq!(softmax_weight(0), 65536);
        assert_eq!(softmax_weight(256), 32768);
        assert_eq!(softmax_weight(17 * 256), 0);
        // Equal weights average; the reciprocal keeps it exact here.
        let v = weighted_mean(
            [(65536, 64, 1 << Q), (65536, 0, 1 << Q)].into_iter(),
            131072,
        );
        assert_eq!(v, (1 << Q) / 4);
    }
}
