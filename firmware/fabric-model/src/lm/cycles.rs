//! The transformer engine's cycles (`rtl/engine/lm`), counted from its
//! sequencer rather than measured: what a round of decoding costs the
//! fabric, for the simulator to charge (contract section 10; docs/rtl.md,
//! "The transformer engine").
//!
//! A round (`fabric_lm.v`, `S_IDLE` to `S_END`) feeds each of its lanes one
//! token, and nothing in it overlaps anything else: the sequencer waits
//! for each read, each pass of the vector pipeline, each division, each
//! write and each matrix product before it starts the next. So a round is
//! a sum. With `L` the port's latency, `n = position + 1`, `hd` a head's
//! width, and `+1` for each read that does not start at a 64-bit beat:
//!
//! ```text
//! round   = 3 + layers·(16 + Wq + Wk + Wv + Wo + W1 + W2)
//!             + [a lane draws] (5 + E) + Σ lanes lane
//! product = 2L + 27 + rows + row_beats + max(row_beats, 11)·(rows − 1)
//!           (row_beats = cols / 8; port-bound once L + 18 > 128)
//! lane    = 2L + dim + 13 + [prompt] (L + 6)
//!             + layers·(9·dim + 2·hidden + 403 + heads·head)
//!             + [draws] (3·dim + 153)
//! head    = 4L + 5·hd + 158 + writes(key) + writes(value)
//!             + max(2·hd + 48, L + 5 + n) + n·(1 + hd/4)
//!           (hd ≥ 16; port-bound once L + 18 > 128; hd = 4: n·(1 + hd/2))
//! ```
//!
//! - The products (`product_cycles`) read each matrix once for every lane
//!   of the round: the row scales a word a cycle, then the weights a beat
//!   a cycle, a row's last beat waiting for the scaler's 8 lanes, two
//!   latencies (scales, weights). They are a round's fixed part: on kjv-lm
//!   the port's bound is 91% of a lone context's round.
//! - Each lane's part (`lane_cycles`) runs a lane at a time between the
//!   products: its token and embedding row, two norms (`norm`), the
//!   rotations and GELU (`pass`), and the attention's output and GELU's
//!   quantized from the maxima kept as they were written (`quant_known`)
//!   a layer, and the attention a head at a time (`head_cycles`): the
//!   key, value and query quantized (`quant`, a pass to find the max),
//!   the position's key and value written (an AXI write a word, at most
//!   8 unanswered: `kv_writes`) and awaited, then every position's keys
//!   and values read back, 4 reads of latency `L`, the keys and values a
//!   beat (two words, eight elements) a cycle, the values' maxima a word
//!   a cycle as the weights are made. Only the attention grows with the
//!   position, by `2 + hd/4` cycles a position, a head and a layer (one
//!   less while the keys' maxima, read as the query is quantized, are in
//!   before it is).
//! - Drawing lanes add the final norm and the pick; the logits' product
//!   over the embedding (`E`) runs once if any lane draws.
//!
//! The model is checked against the Verilated RTL by
//! `firmware/fabric-rtl/tests/lm_cycles.rs`: it is exact but for the reads
//! whose alignment it cannot know (a token's embedding scale, a prompt's
//! token: a cycle each, taken as aligned, so it never counts more than the
//! RTL). It assumes the port of `rtl/sim/lm.cpp`: a read burst answered
//! `latency` cycles after its address, a beat a cycle, a write `latency`
//! cycles after its data, no stalls (the reads taken a word a cycle
//! assume so up to a latency of about 238, where a beat every other cycle
//! would outrun eight bursts in flight); the region beat-aligned and 4 KiB
//! aligned; greedy
//! picks (a sampled pick adds one or two passes over the logits); a shape
//! the weights' checks accept.

use super::Shape;

/// Contexts a round serves at most (`fabric_lm`'s `LANES`).
pub const LANES: usize = 8;

/// Words a beat of the 64-bit port (`DW / 32`).
const BEAT_WORDS: u64 = 2;
/// Beats a read burst at most, and bursts in flight (`MAX_BURST`,
/// `MAX_OUT`); `fabric_axi_rd` never lets a burst cross 4 KiB.
const MAX_BURST: u64 = 16;
const BURSTS_OUT: u64 = 8;
const PAGE_BEATS: u64 = 4096 / 8;
/// Writes awaiting their answers at most (`fabric_lm_wr`'s `MAX_OUT`).
const WRITES_OUT: usize = 8;
/// `S_DIV`: `fabric_lm_div` takes its start the cycle after the state
/// that asks, brings down two quotient bits a cycle for 32 cycles, and
/// says `done` the cycle after the last.
const DIVIDE: u64 = 34;
/// `S_SQRT`: a bit of the root a cycle from `2^46` down to `2^0`, then the
/// cycle that finds none left.
const SQRT: u64 = 25;
/// `fabric_lm_mv`'s scaler: after a row's last beat, a cycle in stage 1,
/// one reading the row's scale (`sc_pre`), then a cycle a lane for all
/// `LANES` lanes, whichever are in the round. The next row's last beat
/// waits for it, so a row takes at least this many cycles.
const ROW_FLOOR: u64 = LANES as u64 + 3;

/// What a lane does in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneStep {
    /// Which lane (0 to [`LANES`] − 1): where its keys and values lie.
    pub lane: usize,
    /// The position it feeds (0 for a new sequence's end-of-text).
    pub position: usize,
    /// Its token is read from the prompt in DDR (`S_TOKW`): a prompt's
    /// token, not the end-of-text nor the token drawn last.
    pub from_prompt: bool,
    /// It is answered with a token drawn this round (its prompt is fed).
    pub draws: bool,
}

impl LaneStep {
    /// Lane `lane` decoding: fed its last token at `position`, drawing the
    /// next.
    pub fn decode(lane: usize, position: usize) -> LaneStep {
        LaneStep {
            lane,
            position,
            from_prompt: false,
            draws: true,
        }
    }
}

/// Cycles of a decode round in which each of `positions` is a lane (lane
/// `i` the `i`th) fed its last token at that position and drawing the next
/// (greedy); the batch is `positions.len()`, at most [`LANES`]. `latency`
/// is the port's, from a burst's address to its first beat (64 in the
/// results' figures).
pub fn round_cycles(shape: &Shape, positions: &[usize], latency: u32) -> u64 {
    let lanes: Vec<LaneStep> = positions
        .iter()
        .enumerate()
        .map(|(lane, &p)| LaneStep::decode(lane, p))
        .collect();
    step_cycles(shape, &lanes, latency)
}

/// Cycles of any round: from the `S_IDLE` that starts it to the `S_IDLE`
/// after its `S_END`, the next round's requests waiting. A lane at or past
/// the context is answered "context full" in `S_FEED` and does not join.
/// No lanes, no round.
pub fn step_cycles(shape: &Shape, lanes: &[LaneStep], latency: u32) -> u64 {
    if lanes.is_empty() {
        return 0;
    }
    let g = Geometry::new(shape, latency);
    let (fed, full): (Vec<&LaneStep>, Vec<&LaneStep>) =
        lanes.iter().partition(|l| l.position < g.c);
    // A refused lane: S_PREP (and its prompt's token), S_FEED, S_RSP.
    let refused: u64 = full.iter().map(|l| 3 + token_read(&g, l)).sum();
    // S_IDLE, the S_PREP that finds no lane left, S_END.
    let mut cycles = 3 + refused;
    if fed.is_empty() {
        return cycles;
    }
    let (d, f) = (g.d, g.f);
    for layer in 0..g.layers {
        let lw = g.l0 + layer * g.layer_w;
        // In each of the phases P_N1, P_ATT, P_O1, P_N2 and P_G a S_LOOP
        // finds no lane left, and S_AFTER runs once to start each of the
        // six products and once more to leave each phase.
        cycles += 5 + 6 + 5;
        // Wq, Wk, Wv (P_N1) and Wo (P_O1), after norm 1's gains; W1 (P_N2)
        // after norm 2's gains; W2 (P_G).
        for m in 0..4 {
            cycles += product_cycles(&g, lw + d + m * g.mat_dd, d, d);
        }
        cycles += product_cycles(&g, lw + g.inc_a + d, f, d);
        cycles += product_cycles(&g, lw + g.inc_a + d + g.mat_fd, d, f);
    }
    if fed.iter().any(|l| l.draws) {
        // P_FN and P_PICK: a S_LOOP and a S_AFTER each, and the S_AFTER
        // that starts the logits' product (the embedding read again).
        cycles += 5 + product_cycles(&g, g.e0, g.v, d);
    }
    let mut reads = KvReads::default();
    cycles
        + fed
            .into_iter()
            .map(|l| lane_cycles(&g, l, &mut reads))
            .sum::<u64>()
}

/// Cycles of a commit the engine takes, from `S_IDLE` to `tbl_done`: the
/// header (16 words), the shape's six products by shift and add, then
/// every word after the header, a word a cycle (`S_BODY`: the CRC and the
/// tables kept on chip).
pub fn commit_cycles(shape: &Shape, latency: u32) -> u64 {
    let g = Geometry::new(shape, latency);
    // S_SHAPE2 waits for each `hmul`, a bit of its multiplier a cycle,
    // and takes a cycle to see it done: d·d, f·d, v·d; head_kv·heads;
    // twice a product by the layers.
    let bits = |v: u64| u64::from(u64::BITS - v.max(1).leading_zeros());
    let shape_products = 3 * bits(g.d) + bits(g.heads) + 2 * bits(g.layers) + 6;
    // S_IDLE; S_HDR; S_CHECK and S_SHAPE; S_SHAPE2; S_SHAPE3; S_BODY, and
    // the cycle that finds the last word in.
    1 + read(g.latency, 16, true) + 2 + shape_products + 1 + read(g.latency, g.words - 16, true) + 1
}

/// Where everything lies, in words from the region's base (contract
/// section 10; `fabric_lm.v`'s `S_SHAPE2` works out the same).
#[derive(Debug, Clone, Copy)]
struct Geometry {
    latency: u64,
    v: u64,
    d: u64,
    f: u64,
    c: usize,
    layers: u64,
    heads: u64,
    hd: u64,
    /// The embedding's row scales.
    e0: u64,
    /// The first layer (`l0`), a layer's words, a `d x d` matrix's and
    /// W1's words, and a layer's norm-1 gains and four `d x d` matrices.
    l0: u64,
    layer_w: u64,
    mat_dd: u64,
    mat_fd: u64,
    inc_a: u64,
    /// The weights' words: the keys and values start after them.
    words: u64,
    /// A head's keys, values and their maxima, a layer's heads, a lane's
    /// layers: `block_words` each, `lane_blocks` to a lane.
    block_words: u64,
    lane_blocks: u64,
}

impl Geometry {
    fn new(s: &Shape, latency: u32) -> Geometry {
        let w = |n: usize| n as u64;
        let (v, d, f, c, layers, heads) = (
            w(s.vocab),
            w(s.dim),
            w(s.hidden),
            w(s.context),
            w(s.layers),
            w(s.heads),
        );
        let hd = d.checked_div(heads).unwrap_or(0);
        let matrix = |rows: u64, cols: u64| rows + rows * cols / 4;
        let (mat_dd, mat_fd, mat_df) = (matrix(d, d), matrix(f, d), matrix(d, f));
        // The header, the rotary table, Φ (1,024 words).
        let e0 = 16 + c * hd / 2 + 1024;
        let l0 = e0 + matrix(v, d);
        let inc_a = d + 4 * mat_dd;
        let layer_w = inc_a + d + mat_fd + mat_df;
        Geometry {
            latency: u64::from(latency),
            v,
            d,
            f,
            c: s.context,
            layers,
            heads,
            hd,
            e0,
            l0,
            layer_w,
            mat_dd,
            mat_fd,
            inc_a,
            words: l0 + layers * layer_w + d,
            block_words: 2 * c * (hd / 4 + 1),
            lane_blocks: layers * heads,
        }
    }
}

/// A read by the sequencer (`stream`, `stream_at`) taken a word a cycle
/// (the embedding row: an element a cycle): the cycles from the one after
/// the state that asks to the one that takes the last. The command
/// reaches `fabric_axi_rd` the cycle after it is asked for; its first
/// burst is offered the next and its address taken the next; the first
/// beat comes `latency` cycles on, leaves `fabric_lm_stream`'s register
/// the cycle after, and its first word is in `ub` the next. A read not
/// starting a beat waits a cycle more for the port's second beat (the
/// stream's gearbox). Later beats come faster than they are taken.
fn read(latency: u64, taken: u64, aligned: bool) -> u64 {
    latency + 5 + taken + u64::from(!aligned)
}

/// `S_KEYS` and `S_VALS`' reads of `words` from word `at`: two words a
/// cycle where a head's words are even (a beat of the 64-bit port, as fast
/// as the port hands them over: past about 110 cycles of latency the port
/// is the bound, and the 4 KiB pages a read crosses count), else a word a
/// cycle.
fn kv_read(latency: u64, at: u64, words: u64, aligned: bool, head_words: u64) -> u64 {
    if head_words.is_multiple_of(2) {
        latency + 5 + port_cycles(latency, at, words) + u64::from(!aligned)
    } else {
        read(latency, words, aligned)
    }
}

/// [`kv_read`]'s answers within one round. A read's cycles depend on where
/// it starts only within its 4 KiB page, and a round's lanes, layers and
/// heads start their reads at few offsets in a page, so each is walked
/// once: the simulator counts a round for every transformer token, and
/// eight lanes at the end of kjv-lm's context would otherwise walk 32,000
/// bursts, as many again as the round's products (160 µs a round, not 90).
#[derive(Default)]
struct KvReads(Vec<((u64, u64), u64)>);

impl KvReads {
    fn cycles(&mut self, latency: u64, at: u64, words: u64, aligned: bool, head_words: u64) -> u64 {
        let key = (at % (PAGE_BEATS * BEAT_WORDS), words);
        if let Some(&(_, c)) = self.0.iter().find(|(k, _)| *k == key) {
            return c;
        }
        let c = kv_read(latency, at, words, aligned, head_words);
        self.0.push((key, c));
        c
    }
}

/// `S_PASS` over `n` elements: one issued a cycle, the pipeline's four
/// stages drained, and the cycle that finds it idle.
fn pass(n: u64) -> u64 {
    n + 5
}

/// `quant`, after the state that starts it: the largest magnitude (a
/// pass, `OP_MAX`), then [`quant_known`] from `S_QNT1`, which divides
/// `2^47` by it; `S_QNT2` starts the quantizing pass (`OP_QNT`).
fn quant(n: u64) -> u64 {
    pass(n) + quant_known(n)
}

/// `quant_known`, from the state that asks for the division: a tracked
/// pass (a norm's `OP_RMS`, `OP_GELU`, the attention's `S_OUT`) kept the
/// largest magnitude as it wrote, so no `OP_MAX` pass; `S_QNT2` starts the
/// quantizing pass; `S_QNT3` keeps the max.
fn quant_known(n: u64) -> u64 {
    1 + DIVIDE + 1 + pass(n) + 1
}

/// `norm`, after the `S_LOOP` that starts it with the residual's largest
/// magnitude (kept as the embedding and the products wrote it): `S_RMS1`;
/// the sum of squares (`OP_SS`); `S_RMS2` divides it by `d`; `S_RMS3`;
/// `S_SQRT`; the reciprocal's division; `S_RMS4`; the scaled pass
/// (`OP_RMS`, its max kept); then `S_QNT` quantizes it for the product
/// after it.
fn norm(d: u64) -> u64 {
    1 + pass(d) + 1 + DIVIDE + 1 + SQRT + DIVIDE + 1 + pass(d) + quant_known(d)
}

/// `S_TOKW`: a prompt's token, a word, taken as starting a beat (its
/// address is the request's).
fn token_read(g: &Geometry, l: &LaneStep) -> u64 {
    if l.from_prompt {
        read(g.latency, 1, true)
    } else {
        0
    }
}

/// A lane's part of a round: its token and embedding in `S_PREP`, then
/// its turn (a `S_LOOP` that picks it, and its work) in each phase.
fn lane_cycles(g: &Geometry, l: &LaneStep, reads: &mut KvReads) -> u64 {
    let (lat, d, f) = (g.latency, g.d, g.f);
    // S_PREP; S_TOKW; S_FEED; S_EMB_S reads the token's row scale (taken
    // as starting a beat: it depends on the token); S_EMB_W reads the row
    // (d bytes), an element a cycle, its alignment the same for every
    // token (a row is d/4 words, d a multiple of 8).
    let row_at = g.e0 + g.v;
    let embed =
        1 + token_read(g, l) + 1 + read(lat, 1, true) + read(lat, d, row_at.is_multiple_of(2));
    // P_N1 and P_N2: a norm each. P_ATT: q's and k's rotations (OP_ROT,
    // each back to S_ROT), then S_ROT goes to the heads. P_O1: the
    // attention's output quantized, its max kept by S_OUT (the S_LOOP
    // asks for the division). P_G: OP_GELU, then S_GELU quantizes it.
    let rotate = 2 * (pass(d) + 1);
    let layer = (1 + norm(d))
        + (1 + rotate)
        + quant_known(d)
        + (1 + norm(d))
        + (1 + pass(f) + quant_known(f));
    let heads: u64 = (0..g.layers * g.heads)
        .map(|block| {
            let block = g.lane_blocks * l.lane as u64 + block;
            head_cycles(g, block, l.position as u64, reads)
        })
        .sum();
    // P_FN's norm; P_PICK's S_LOOP, S_PICK (greedy) and S_RSP.
    let draw = if l.draws { 1 + norm(d) + 3 } else { 0 };
    embed + g.layers * layer + heads + draw
}

/// The attention of one head for a lane at `pos` (`S_HEAD` to `S_OUT`),
/// the same in every layer and head but for where its keys and values lie
/// (`block`: the lane's, layer's and head's, counted from the first): the
/// position's key and value quantized and written, the writes awaited,
/// the query quantized, then every position's keys' maxima, keys,
/// weights, values' maxima, values.
fn head_cycles(g: &Geometry, block: u64, pos: u64, reads: &mut KvReads) -> u64 {
    let (lat, hd, c) = (g.latency, g.hd, g.c as u64);
    let n = pos + 1;
    let hw = hd / 4; // words of a position's head
    let keys_at = g.words + block * g.block_words;
    // Every lane's, layer's and head's block is a multiple of 8 bytes
    // from the keys' base, the weights' words past the region's base: the
    // keys and their maxima start a beat as the weights' length is even,
    // the values `context·hd/4` words on, their maxima `context` words on.
    let even = |w: u64| w.is_multiple_of(2);
    let keys = even(g.words);
    let values = even(g.words + c * hd / 4);
    let value_maxima = even(g.words + c);
    let (key_writes, value_writes) = kv_writes(lat, hw + 1, 1 + quant(hd) + 1);
    // S_HEAD; the key's quant; S_KVW (its words, then its max); S_KVW2;
    // the value's quant; S_KVW; S_KVW2; S_AWAIT until the last write is
    // answered (`latency + 2` after it), when it asks for the keys' maxima.
    let write = 1 + quant(hd) + key_writes + 1 + quant(hd) + value_writes + 1 + (lat + 2);
    // The query's quant, then S_HEAD2 until the keys' maxima (n words, a
    // word a cycle since S_AWAIT asked) are in; S_KEYS (n·hw words, then
    // the scores' four stages drain and a cycle finds them done and asks
    // for the values' maxima); S_WTS (a position's weight as its value's
    // max arrives); S_HEAD3 and the total's division; S_WTS2; S_VALS and
    // the cycle that finds the last position in; S_OUT (hd elements
    // through two stages).
    let read_back = (quant(hd) + 1).max(read(lat, n, keys))
        + reads.cycles(lat, keys_at, n * hw, keys, hw)
        + 5
        + read(lat, n, value_maxima)
        + 1
        + DIVIDE
        + 1
        + reads.cycles(lat, keys_at + c * hw, n * hw, values, hw)
        + 1
        + hd
        + 2;
    write + read_back
}

/// Each `S_KVW`'s cycles, the key's, then the value's `gap` cycles after
/// the key's last write, from the cycle that first offers to the one whose
/// write is taken: `words` writes each, one at most every other cycle
/// (`fabric_lm_wr` offers one and waits for both channels to take it), at
/// most [`WRITES_OUT`] unanswered, each answered at the end of the cycle
/// `latency + 2` after it. A head of 64 (17 writes) at latency 64 waits
/// for two round trips: 136 cycles where 34 would do.
fn kv_writes(latency: u64, words: u64, gap: u64) -> (u64, u64) {
    let mut issued: Vec<u64> = Vec::new();
    let state = |start: u64, issued: &mut Vec<u64>| {
        let mut at = start + 1;
        for _ in 0..words {
            let back = issued.len().checked_sub(WRITES_OUT);
            if let Some(&old) = back.and_then(|i| issued.get(i)) {
                at = at.max(old + latency + 3);
            }
            issued.push(at);
            at += 2;
        }
        at - 1 - start
    };
    let key = state(0, &mut issued);
    let value = state(key - 1 + gap, &mut issued);
    (key, value)
}

/// `S_MVW`: a product by a `rows x cols` matrix whose scales start at word
/// `at`, read once for every lane. `fabric_lm_mv` asks for the scales the
/// cycle after `start` and writes one a cycle; the cycle after the last it
/// asks for the weights, which it takes a beat a cycle, a row's last beat
/// waiting for the scaler ([`ROW_FLOOR`]); the last row's lanes go through
/// the scaler's stages a to d; `P_WEIGHTS`, `P_DRAIN` and `done` take a
/// cycle each. 27 is that: 7 to the scales' first word, 4 more to the
/// weights' first beat, 17 from the last beat to `S_AFTER`, less the one
/// counted with the rows.
fn product_cycles(g: &Geometry, at: u64, rows: u64, cols: u64) -> u64 {
    let lat = g.latency;
    let row_beats = cols / 8;
    let scaler = row_beats + row_beats.max(ROW_FLOOR) * rows.saturating_sub(1);
    let weights_at = at + rows;
    let weights = scaler.max(port_cycles(lat, weights_at, rows * cols / 4));
    let unaligned = u64::from(!at.is_multiple_of(2)) + u64::from(!weights_at.is_multiple_of(2));
    2 * lat + 27 + rows + weights + unaligned
}

/// The cycles from a read's first beat to its last, as the port hands
/// them to a reader that takes a beat a cycle. `fabric_axi_rd` cuts the
/// read into bursts of up to 16 beats, ending at each 4 KiB; offers a
/// burst at most every other cycle, and only while fewer than
/// [`BURSTS_OUT`] are in flight (a burst counts until its last beat); a
/// burst's first beat comes `latency + 1` cycles after its address is
/// taken, and after the previous burst's. With `latency + 18` within the
/// 128 beats in flight they come back to back; past it, each round of
/// eight bursts waits for the latency (kjv-lm at 128: a round 14% longer).
fn port_cycles(latency: u64, at: u64, words: u64) -> u64 {
    let first = at / BEAT_WORDS;
    let beats = (at + words).div_ceil(BEAT_WORDS).saturating_sub(first);
    // The port's extra beat where the read does not start a beat is the
    // caller's (the stream's gearbox holds the first).
    let extra = beats.saturating_sub(words.div_ceil(BEAT_WORDS));
    let mut ends = [0u64; BURSTS_OUT as usize];
    let (mut from, end) = (first, first + beats);
    let (mut address, mut begun, mut last) = (0u64, None::<u64>, None::<u64>);
    let mut n = 0usize;
    while from < end {
        let page_end = (from / PAGE_BEATS + 1) * PAGE_BEATS;
        let len = (end - from).min(MAX_BURST).min(page_end - from);
        let slot = n % BURSTS_OUT as usize;
        if n > 0 {
            address += 2;
        }
        if n >= BURSTS_OUT as usize {
            address = address.max(ends[slot] + 2);
        }
        let due = address + latency + 1;
        let first_beat = last.map_or(due, |e| due.max(e + 1));
        begun.get_or_insert(first_beat);
        ends[slot] = first_beat + len - 1;
        last = Some(ends[slot]);
        from += len;
        n += 1;
    }
    match (begun, last) {
        (Some(b), Some(e)) => (e + 1 - b).saturating_sub(extra),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kjv-lm (bitstreams/kjv-lm.flm).
    const KJV: Shape = Shape {
        vocab: 4353,
        dim: 256,
        layers: 4,
        heads: 4,
        hidden: 1024,
        context: 256,
    };

    /// `scripts/bench-rtl-lm` as results/rtl-lm-speed-2026-12-07-run2.md
    /// ran it: 8-token prompts and 16 greedy tokens a request, requests
    /// started together; a decode round is the cycles between the last
    /// answers of consecutive rounds, averaged over 15. Alone, the rounds
    /// feed positions 9 to 23. With 8 lanes, lane 0's request is taken a
    /// round before the others (the engine starts a round on the first
    /// request), so it runs a position ahead and ends a round early; the
    /// example groups the answers in eights, so its 15 periods run from
    /// round 10's lane 6 to round 25's lane 7, three cycles (lane 7's
    /// S_LOOP, S_PICK, S_RSP) past the rounds 11 to 25.
    fn bench(latency: u32, lanes: usize) -> f64 {
        let total: u64 = if lanes == 1 {
            (9..24).map(|p| round_cycles(&KJV, &[p], latency)).sum()
        } else {
            let round = |r: usize| {
                let ahead = (r <= 24).then_some(r - 1);
                let rest = std::iter::repeat_n(r - 2, lanes - 1);
                let positions: Vec<usize> = ahead.into_iter().chain(rest).collect();
                round_cycles(&KJV, &positions, latency)
            };
            3 + (11..=25).map(round).sum::<u64>()
        };
        total as f64 / 15.0
    }

    /// The measured figures (results/rtl-lm-speed-2026-12-07-run2.md, the
    /// RTL as it still is): the model within a cycle a lane a round, the
    /// embedding scales' alignment it cannot know (the bench's tokens).
    #[test]
    fn kjv_lm_is_the_measured_figures() {
        for (latency, alone, eight, commit) in [
            (64, 594_000.0, 898_663.0, 1_090_314),
            (128, 680_946.0, 1_045_713.0, 1_090_442),
        ] {
            let (one, all) = (bench(latency, 1), bench(latency, LANES));
            assert!(
                one <= alone && alone - one <= 1.0,
                "batch 1 at {latency}: {one}"
            );
            assert!(
                all <= eight && eight - all <= LANES as f64,
                "batch 8 at {latency}: {all}"
            );
            assert_eq!(commit_cycles(&KJV, latency), commit);
        }
    }

    /// A round grows with its lanes' positions through the attention
    /// alone: `layers · heads · (2 + hd/4)` cycles a position (kjv-lm:
    /// 288), the keys and values a beat a cycle; a cycle less a head while
    /// the keys' maxima come in under the query's quantizing (kjv-lm at a
    /// latency of 64: up to position 105).
    #[test]
    fn a_position_costs_the_attentions_reads() {
        let step = |p: usize| round_cycles(&KJV, &[p + 1], 64) - round_cycles(&KJV, &[p], 64);
        assert_eq!(step(100), 4 * 4 * (1 + 64 / 4));
        assert_eq!(step(200), 4 * 4 * (2 + 64 / 4));
        let lane = round_cycles(&KJV, &[100, 100], 64) - round_cycles(&KJV, &[100], 64);
        assert_eq!(
            round_cycles(&KJV, &[100, 100, 100], 64),
            round_cycles(&KJV, &[100], 64) + 2 * lane
        );
    }

    #[test]
    fn no_lanes_no_round_and_a_full_context_is_refused() {
        assert_eq!(round_cycles(&KJV, &[], 64), 0);
        assert_eq!(round_cycles(&KJV, &[256], 64), 3 + 3);
        assert_eq!(
            round_cycles(&KJV, &[3, 256], 64),
            round_cycles(&KJV, &[3], 64) + 3
        );
    }
}
