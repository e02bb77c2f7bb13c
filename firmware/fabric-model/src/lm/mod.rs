//! A small decoder-only transformer of the llama family, in integers: the
//! model the transformer engine (kind 2) runs, as the contract's section 10
//! defines it and the simulator serves it.
//!
//! - [`arith`]: the integer arithmetic, step by step.
//! - [`weights`]: the weights as DDR holds them (format FLM1), read and
//!   checked.
//! - [`decode`]: a decode step with a context's key-value cache, and the
//!   sampling over the logits.
//! - [`cycles`]: what a round of decoding costs the RTL engine in fabric
//!   cycles, counted from its sequencer.
//!
//! `scripts/train-lm` trains the model in floating point and writes its
//! weights in this format; nothing here trains.

pub mod arith;
pub mod cycles;
pub mod decode;
pub mod weights;

pub use decode::{generate, pick, Cache, StepError};
pub use weights::{Shape, Weights, WeightsError};

use fabric_hw::sampling::SplitMix64;

use arith::{Matrix, PHI_BITS, PHI_ENTRIES, ROPE_BITS, SCALE_BITS};

impl Weights {
    /// A model of `shape` with weights drawn from `seed`, for tests: the
    /// rotary table as a trained model's, Φ by the logistic approximation
    /// `1 / (1 + e^(-1.702 x))` (any table within 1.0 is valid data).
    pub fn random(shape: Shape, seed: u64) -> Weights {
        let mut rng = SplitMix64(seed);
        let head = shape.head();
        let mut rope = Vec::with_capacity(shape.context * head / 2);
        for pos in 0..shape.context {
            for i in 0..head / 2 {
                let angle = pos as f64 * 10000f64.powf(-((2 * i) as f64) / head as f64);
                let q = |v: f64| (v * f64::from(1u32 << ROPE_BITS)).round() as i16;
                rope.push((q(angle.cos()), q(angle.sin())));
            }
        }
        let phi = (0..PHI_ENTRIES)
            .map(|i| {
                let x = -8.0 + (i as f64 + 0.5) / 128.0;
                (f64::from(1u32 << PHI_BITS) / (1.0 + (-1.702 * x).exp())).round() as u16
            })
            .collect();
        let mut matrix = |rows: usize, cols: usize| {
            let scales = (0..rows)
                .map(|_| (1 << (SCALE_BITS - 10)) + (rng.next() >> 44) as u32)
                .collect();
            let weights = (0..rows * cols)
                .map(|_| ((rng.next() >> 56) as u8 as i8).clamp(-127, 127))
                .collect();
            Matrix {
                rows,
                cols,
                scales,
                weights,
            }
        };
        let (d, h) = (shape.dim, shape.hidden);
        let embed = matrix(shape.vocab, d);
        let layers = (0..shape.layers)
            .map(|_| weights::Layer {
                norm1: vec![1 << arith::Q; d],
                wq: matrix(d, d),
                wk: matrix(d, d),
                wv: matrix(d, d),
                wo: matrix(d, d),
                norm2: vec![1 << arith::Q; d],
                w1: matrix(h, d),
                w2: matrix(d, h),
            })
            .collect();
        let mut w = Weights {
            shape,
            rope,
            phi,
            embed,
            layers,
            norm: vec![1 << arith::Q; d],
            identity: [0; 32],
        };
        w.identity = weights::identity(&w.to_words());
        w
    }
}
