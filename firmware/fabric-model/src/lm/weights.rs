//! A transformer's weights as the fabric's engine reads them from DDR:
//! 32-bit little-endian words the daemon writes into a slot's region and
//! commits, as it does a trigram table (contract section 10, format FLM1).
//!
//! ```text
//! word 0       MAGIC "FLM1"
//! word 1       ENGINE: kind [15:0], version [31:16] (the transformer v1)
//! word 2       WORDS: the file's length in words, header included
//! word 3       vocabulary size
//! word 4       model width (dim)
//! word 5       layers [7:0], heads [15:8], 0 above
//! word 6       the MLP's hidden width
//! word 7       context: the most positions a sequence holds
//! word 8..16   the identity the weights declare: SHA-256 of the words from
//!              16 on (little-endian bytes), big-endian words
//! then         the rotary table: context x head/2 words, cos [15:0] and
//!              sin [31:16], Q14
//!              the GELU table: 2,048 Q15 halves, two a word, low first
//!              the embedding (vocab x dim), also the output matrix
//!              each layer: norm1 gains (dim words, Q16), wq, wk, wv, wo
//!              (dim x dim), norm2 gains, w1 (hidden x dim), w2 (dim x hidden)
//!              the final norm's gains
//! ```
//!
//! A matrix is its rows' scales (a word each, the row's step times 2^30),
//! then its `i8` weights, four a word, row after row, low byte first. Rows
//! are whole words: every width is a multiple of four.

use super::arith::{Matrix, PHI_ENTRIES};
use fabric_hw::contract::EngineId;

/// `MAGIC` of a weights file: "FLM1".
pub const MAGIC: u32 = 0x464C_4D31;
/// The engine these weights run on.
pub const ENGINE: EngineId = EngineId::TRANSFORMER_V1;
/// Words before the tables.
pub const HEADER_WORDS: usize = 16;

/// A transformer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub vocab: usize,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub hidden: usize,
    pub context: usize,
}

impl Shape {
    /// A head's width.
    pub fn head(&self) -> usize {
        self.dim / self.heads
    }

    /// `s` with `2^s` the square root of a head's width.
    pub fn half_log_head(&self) -> u32 {
        self.head().trailing_zeros() / 2
    }

    /// Words of a file of this shape.
    pub fn words(&self) -> usize {
        let matrix = |rows: usize, cols: usize| rows + rows * cols / 4;
        let layer = 2 * self.dim
            + 4 * matrix(self.dim, self.dim)
            + matrix(self.hidden, self.dim)
            + matrix(self.dim, self.hidden);
        HEADER_WORDS
            + self.context * self.head() / 2
            + PHI_ENTRIES / 2
            + matrix(self.vocab, self.dim)
            + self.layers * layer
            + self.dim
    }

    /// Words a decoding step streams from the weights: the token's
    /// embedding row, every layer's matrices and the output matrix (the
    /// embedding again), scales included. The rotary and GELU tables and
    /// the gains are read once, at the commit, and kept on chip.
    pub fn words_a_step(&self) -> usize {
        let matrix = |rows: usize, cols: usize| rows + rows * cols / 4;
        let layer = 4 * matrix(self.dim, self.dim)
            + matrix(self.hidden, self.dim)
            + matrix(self.dim, self.hidden);
        matrix(1, self.dim) + self.layers * layer + matrix(self.vocab, self.dim)
    }

    /// Bytes of one lane's keys and values in the slot's region (contract
    /// section 10): for each layer and head, the keys and the values (a
    /// byte an element, `context` positions of a head) and their maxima (a
    /// word a position each). A region holds the weights and every lane's.
    pub fn kv_bytes_a_lane(&self) -> u64 {
        let per_head = 2 * self.context as u64 * (self.head() as u64 + 4);
        self.layers as u64 * self.heads as u64 * per_head
    }

    fn check(&self) -> Result<(), WeightsError> {
        let bad = |why: &str| Err(WeightsError::Shape(format!("{self:?}: {why}")));
        if self.vocab == 0 || self.vocab > 1 << 16 {
            return bad("the vocabulary is 1 to 65,536 tokens");
        }
        if self.dim == 0
            || !self.dim.is_multiple_of(4)
            || self.hidden == 0
            || !self.hidden.is_multiple_of(4)
        {
            return bad("widths are multiples of four");
        }
        if self.dim > 4096 || self.hidden > 16384 || self.layers == 0 || self.layers > 64 {
            return bad("at most 4,096 wide, 16,384 hidden and 64 layers");
        }
        if self.heads == 0 || !self.dim.is_multiple_of(self.heads) {
            return bad("the heads divide the width");
        }
        let head = self.head();
        if !head.is_power_of_two() || !head.trailing_zeros().is_multiple_of(2) || head < 4 {
            return bad("a head's width is a power of four, at least 4");
        }
        if self.context == 0 || self.context > 4096 {
            return bad("a context of 1 to 4,096 positions");
        }
        Ok(())
    }
}

/// One layer's weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub norm1: Vec<i32>,
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    pub wo: Matrix,
    pub norm2: Vec<i32>,
    pub w1: Matrix,
    pub w2: Matrix,
}

/// A transformer's weights and tables, read from its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights {
    pub shape: Shape,
    /// `rope[pos * head/2 + i]`: the cosine and sine rotating pair `i` at
    /// position `pos`, Q14.
    pub rope: Vec<(i16, i16)>,
    /// Φ at the midpoints of steps of 1/128 over [-8, 8), Q15.
    pub phi: Vec<u16>,
    pub embed: Matrix,
    pub layers: Vec<Layer>,
    pub norm: Vec<i32>,
    /// What the weights declare they are (words 8..16).
    pub identity: [u8; 32],
}

/// Why weights cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
    #[error("the file is {0} bytes, not whole 32-bit words")]
    Ragged(usize),
    #[error("the file has {0} words, fewer than the header's {HEADER_WORDS}")]
    Short(usize),
    #[error("word 0 is {found:#010x}, not a weights file's magic {MAGIC:#010x} (\"FLM1\")")]
    Magic { found: u32 },
    #[error("the weights are for engine {found:#010x}, not {want} ({:#010x})", want.encode())]
    Engine { found: u32, want: EngineId },
    #[error("the weights say they have {declared} words; {have} are there")]
    Words { declared: usize, have: usize },
    #[error("the shape is not one the engine runs: {0}")]
    Shape(String),
    #[error("the shape needs {need} words; the weights have {have}")]
    Size { need: usize, have: usize },
    #[error("the weights declare identity {declared}, but their words hash to {actual}")]
    Identity { declared: String, actual: String },
    #[error("row {row} of {matrix} has scale {scale}: a step of at most 1.0 (2^30)")]
    Scale {
        matrix: String,
        row: usize,
        scale: u32,
    },
    #[error("Φ[{index}] is {value}, past 1.0 (2^15)")]
    Phi { index: usize, value: u16 },
}

/// The identity of weights words `16..`: their SHA-256, as a table's.
pub use crate::table::identity;

/// Little-endian bytes as words.
pub fn words_of(bytes: &[u8]) -> Result<Vec<u32>, WeightsError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(WeightsError::Ragged(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads words in order.
struct Cursor<'a> {
    words: &'a [u32],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u32] {
        // The shape's size was checked against the file first.
        let s = &self.words[self.at..self.at + n];
        self.at += n;
        s
    }

    fn gains(&mut self, n: usize) -> Vec<i32> {
        self.take(n).iter().map(|&w| w as i32).collect()
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, WeightsError> {
        let scales = self.take(rows).to_vec();
        if let Some((row, &scale)) = scales.iter().enumerate().find(|(_, &s)| s > 1 << 30) {
            return Err(WeightsError::Scale {
                matrix: name.into(),
                row,
                scale,
            });
        }
        let weights = self
            .take(rows * cols / 4)
            .iter()
            .flat_map(|w| w.to_le_bytes().map(|b| b as i8))
            .collect();
        Ok(Matrix {
            rows,
            cols,
            scales,
            weights,
        })
    }
}

impl Weights {
    /// Reads and checks weights: magic, engine, length, shape, the size
    /// the shape needs, the declared identity against the words, and every
    /// scale and table entry within its range.
    pub fn from_words(words: &[u32]) -> Result<Weights, WeightsError> {
        Weights::parse(words, true)
    }

    /// Reads weights as an engine takes them in at a commit (contract
    /// section 7): the same checks but the identity's, which an engine
    /// reports as declared and does not compute (SLOT_IDENTITY); the host
    /// catches weights that are not what they declare by their CRC,
    /// against the catalog's. `identity` is the declared one.
    pub fn from_committed_words(words: &[u32]) -> Result<Weights, WeightsError> {
        Weights::parse(words, false)
    }

    fn parse(words: &[u32], verify: bool) -> Result<Weights, WeightsError> {
        if words.len() < HEADER_WORDS {
            return Err(WeightsError::Short(words.len()));
        }
        if words[0] != MAGIC {
            return Err(WeightsError::Magic { found: words[0] });
        }
        if words[1] != ENGINE.encode() {
            return Err(WeightsError::Engine {
                found: words[1],
                want: ENGINE,
            });
        }
        if words[2] as usize != words.len() {
            return Err(WeightsError::Words {
                declared: words[2] as usize,
                have: words.len(),
            });
        }
        if words[5] >> 16 != 0 {
            return Err(WeightsError::Shape(format!(
                "word 5 is {:#010x}: layers [7:0], heads [15:8], and 0 above",
                words[5]
            )));
        }
        let shape = Shape {
            vocab: words[3] as usize,
            dim: words[4] as usize,
            layers: (words[5] & 0xFF) as usize,
            heads: ((words[5] >> 8) & 0xFF) as usize,
            hidden: words[6] as usize,
            context: words[7] as usize,
        };
        shape.check()?;
        if shape.words() != words.len() {
            return Err(WeightsError::Size {
                need: shape.words(),
                have: words.len(),
            });
        }
        let mut declared = [0u8; 32];
        for (i, w) in words[8..16].iter().enumerate() {
            declared[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        let actual = if verify { identity(words) } else { declared };
        if actual != declared {
            return Err(WeightsError::Identity {
                declared: hex(&declared),
                actual: hex(&actual),
            });
        }
        let mut c = Cursor {
            words,
            at: HEADER_WORDS,
        };
        let rope = c
            .take(shape.context * shape.head() / 2)
            .iter()
            .map(|&w| (w as u16 as i16, (w >> 16) as u16 as i16))
            .collect();
        let phi: Vec<u16> = c
            .take(PHI_ENTRIES / 2)
            .iter()
            .flat_map(|&w| [w as u16, (w >> 16) as u16])
            .collect();
        if let Some((index, &value)) = phi.iter().enumerate().find(|(_, &v)| v > 1 << 15) {
            return Err(WeightsError::Phi { index, value });
        }
        let (d, h) = (shape.dim, shape.hidden);
        let embed = c.matrix("the embedding", shape.vocab, d)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let name = |m: &str| format!("layer {l}'s {m}");
            layers.push(Layer {
                norm1: c.gains(d),
                wq: c.matrix(&name("wq"), d, d)?,
                wk: c.matrix(&name("wk"), d, d)?,
                wv: c.matrix(&name("wv"), d, d)?,
                wo: c.matrix(&name("wo"), d, d)?,
                norm2: c.gains(d),
                w1: c.matrix(&name("w1"), h, d)?,
                w2: c.matrix(&name("w2"), d, h)?,
            });
        }
        let norm = c.gains(d);
        Ok(Weights {
            shape,
            rope,
            phi,
            embed,
            layers,
            norm,
            identity: declared,
        })
    }

    /// The words of these weights, their identity computed: what
    /// [`Weights::from_words`] reads back (the exporter writes the same).
    pub fn to_words(&self) -> Vec<u32> {
        let s = &self.shape;
        let mut w = vec![0u32; HEADER_WORDS];
        w[0] = MAGIC;
        w[1] = ENGINE.encode();
        w[3] = s.vocab as u32;
        w[4] = s.dim as u32;
        w[5] = s.layers as u32 | (s.heads as u32) << 8;
        w[6] = s.hidden as u32;
        w[7] = s.context as u32;
        w.extend(
            self.rope
                .iter()
                .map(|&(c, s)| u32::from(c as u16) | u32::from(s as u16) << 16),
        );
        w.extend(
            self.phi
                .chunks_exact(2)
                .map(|p| u32::from(p[0]) | u32::from(p[1]) << 16),
        );
        let matrix = |w: &mut Vec<u32>, m: &Matrix| {
            w.extend(&m.scales);
            w.extend(
                m.weights
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8])),
            );
        };
        matrix(&mut w, &self.embed);
        for l in &self.layers {
            w.extend(l.norm1.iter().map(|&g| g as u32));
            for m in [&l.wq, &l.wk, &l.wv, &l.wo] {
                matrix(&mut w, m);
            }
            w.extend(l.norm2.iter().map(|&g| g as u32));
            matrix(&mut w, &l.w1);
            matrix(&mut w, &l.w2);
        }
        w.extend(self.norm.iter().map(|&g| g as u32));
        w[2] = w.len() as u32;
        let id = identity(&w);
        for (i, c) in id.chunks_exact(4).enumerate() {
            w[8 + i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        w
    }

    /// Reads weights from a file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Weights, WeightsError> {
        Weights::from_words(&words_of(bytes)?)
    }
}
