//! A model's table (`fabric_model::table::Table::from_bytes`): the file the
//! catalog reads and the daemon commits, and the reads the engine makes of
//! it (`lookup`, `step`), which the simulator runs for every token.
//!
//! Beyond not panicking: a table that parses declares exactly its length,
//! writes back to the same bytes, and every step either names a token or
//! says which read passed the table's end (the engine's TABLE_READ fault):
//! no index or entry, however wrong, reads outside it. The steps' contexts
//! and draws come from the table's own last words, so the fuzzer steers
//! them too.
#![no_main]

use fabric_hw::sampling::Sampling;
use fabric_model::table::{Reader, Table, TableError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(table) = Table::from_bytes(bytes) else {
        return;
    };
    assert_eq!(table.words[2] as usize, table.words.len());
    assert_eq!(table.to_bytes(), bytes);
    let _ = (table.crc(), table.identity(), table.declared_identity());
    let tail: Vec<u32> = table.words.iter().rev().take(8).copied().collect();
    for (i, pair) in tail.chunks(2).enumerate() {
        let (a, b) = (pair[0], *pair.get(1).unwrap_or(&0));
        let sampling = [
            Sampling::Greedy,
            Sampling::from_f32(0.8),
            Sampling::from_f32(9.0),
        ][i % 3];
        let draw = u64::from(a) << 32 | u64::from(b);
        for (a, b) in [(a, b), (a & 0xFFFF, b & 0xFFFF), (0, b & 0xFFFF)] {
            match table.step(a, b, draw, sampling) {
                Ok(_) | Err(TableError::Beyond { .. }) => {}
                Err(e) => panic!("a step of a table that parsed: {e}"),
            }
        }
    }
});
