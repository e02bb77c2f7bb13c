//! Unique clients in a form boards can combine: a HyperLogLog sketch of the
//! window's client hashes, and the fleet-wide key those hashes are made
//! with.
//!
//! A board counts its own unique clients exactly (a set of keyed hashes);
//! that set is never exported, since with a shared key each hash would be
//! a stable pseudonym of one address across windows, boots and boards.
//! The sketch is what leaves the board: 4096 registers, each the longest
//! run of leading zeros seen among the hashes that fall in it. Two sketches
//! made with the same key combine exactly (the register-wise maximum is
//! the sketch of the union), and the union's size is an estimate with a
//! standard error of 1.04/√4096 ≈ 1.6% (far better below a few thousand
//! clients, where the estimate is linear counting of empty registers).
//!
//! The registers and the estimator are ours, not a crate's: the registers
//! are stored on the card in the versioned stats record, so their layout
//! must be one this project defines and keeps, and the hash going into
//! them is already ours (keyed SHA-256, below).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Index bits: 2^12 registers.
pub const PRECISION: u32 = 12;
/// Registers in a sketch.
pub const REGISTERS: usize = 1 << PRECISION;
/// The largest rank a 64-bit hash can give with 12 index bits.
pub const MAX_RANK: u8 = (64 - PRECISION + 1) as u8;
/// The estimate's relative standard error.
pub const STD_ERROR: f64 = 1.04 / 64.0;

/// A fleet-wide client key: every board configured with the same one
/// hashes a client to the same value, so their sketches combine.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientKey {
    key: [u8; 16],
}

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: only its public id is shown.
        write!(f, "ClientKey({:016x})", self.id())
    }
}

impl ClientKey {
    /// Reads 32 hex digits (128 bits), as `stats_client_key` holds them.
    pub fn from_hex(text: &str) -> Option<ClientKey> {
        let t = text.trim();
        if t.len() != 32 || !t.is_ascii() {
            return None;
        }
        let mut key = [0u8; 16];
        for (i, b) in key.iter_mut().enumerate() {
            *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(ClientKey { key })
    }

    /// A public name for the key, so a merge can tell whether boards share
    /// it without anyone learning it: a hash of the key under a label of
    /// its own, never equal to a client hash.
    pub fn id(&self) -> u64 {
        let mut h = Sha256::new();
        h.update(b"fabricd stats client key id\0");
        h.update(self.key);
        first_u64(&h.finalize())
    }

    /// The client's hash: SHA-256 of the key and the address, cut to 64
    /// bits. A keyed hash rather than a plain one: without the key, an
    /// IPv4 address is found from its hash by trying all 2^32.
    pub fn hash(&self, ip: std::net::IpAddr) -> u64 {
        let mut h = Sha256::new();
        h.update(self.key);
        match ip {
            std::net::IpAddr::V4(a) => h.update(a.octets()),
            std::net::IpAddr::V6(a) => h.update(a.octets()),
        }
        first_u64(&h.finalize())
    }
}

fn first_u64(digest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(b)
}

/// A window's sketch as stored and shown: the key's id and the registers
/// that are not zero, as (index, rank) pairs in index order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSketch {
    pub key_id: u64,
    pub registers: Vec<(u16, u8)>,
}

/// The registers while a window is open.
#[derive(Debug, Clone)]
pub struct Registers {
    r: Vec<u8>,
}

impl Default for Registers {
    fn default() -> Registers {
        Registers {
            r: vec![0; REGISTERS],
        }
    }
}

impl Registers {
    /// Counts one (keyed, uniformly distributed) hash.
    pub fn insert(&mut self, hash: u64) {
        let index = (hash >> (64 - PRECISION)) as usize;
        // The marker bit bounds the rank when the remaining bits are all
        // zero.
        let rest = (hash << PRECISION) | (1 << (PRECISION - 1));
        let rank = rest.leading_zeros() as u8 + 1;
        if let Some(slot) = self.r.get_mut(index) {
            *slot = (*slot).max(rank);
        }
    }

    /// The registers of a stored sketch. `None` if one is out of range (a
    /// file that no board wrote).
    pub fn from_sketch(s: &ClientSketch) -> Option<Registers> {
        let mut out = Registers::default();
        for &(i, rank) in &s.registers {
            if rank == 0 || rank > MAX_RANK {
                return None;
            }
            let slot = out.r.get_mut(usize::from(i))?;
            *slot = (*slot).max(rank);
        }
        Some(out)
    }

    pub fn sketch(&self, key_id: u64) -> ClientSketch {
        ClientSketch {
            key_id,
            registers: self
                .r
                .iter()
                .enumerate()
                .filter(|(_, &v)| v > 0)
                .map(|(i, &v)| (i as u16, v))
                .collect(),
        }
    }

    /// The union: the sketch of every hash either one counted.
    pub fn merge(&mut self, other: &Registers) {
        for (a, &b) in self.r.iter_mut().zip(&other.r) {
            *a = (*a).max(b);
        }
    }

    /// The estimated number of distinct hashes (Flajolet et al. 2007, with
    /// linear counting below 2.5·m; no large-range correction, which a
    /// 64-bit hash does not need).
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let zeros = self.r.iter().filter(|&&v| v == 0).count();
        let sum: f64 = self.r.iter().map(|&v| 2f64.powi(-i32::from(v))).sum();
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ClientKey {
        ClientKey::from_hex("000102030405060708090a0b0c0d0e0f").expect("key")
    }

    fn ip(n: u32) -> std::net::IpAddr {
        std::net::IpAddr::V4(std::net::Ipv4Addr::from(n))
    }

    #[test]
    fn keys_read_32_hex_digits_and_show_only_their_id() {
        assert!(ClientKey::from_hex("00").is_none());
        assert!(ClientKey::from_hex("zz0102030405060708090a0b0c0d0e0f").is_none());
        let k = key();
        assert!(!format!("{k:?}").contains("0001020304"));
        assert_ne!(k.id(), 0);
        let other = ClientKey::from_hex("ff0102030405060708090a0b0c0d0e0f").expect("key");
        assert_ne!(k.hash(ip(1)), other.hash(ip(1)));
        assert_eq!(k.hash(ip(1)), key().hash(ip(1)));
    }

    #[test]
    fn small_counts_are_exact_and_unions_count_each_client_once() {
        let k = key();
        let mut a = Registers::default();
        let mut b = Registers::default();
        for n in 1..=3 {
            a.insert(k.hash(ip(n)));
        }
        for n in 2..=5 {
            b.insert(k.hash(ip(n)));
        }
        assert_eq!(a.estimate(), 3);
        assert_eq!(b.estimate(), 4);
        let mut both = Registers::from_sketch(&a.sketch(k.id())).expect("sketch");
        both.merge(&b);
        assert_eq!(both.estimate(), 5);
    }

    #[test]
    fn large_counts_are_within_four_standard_errors() {
        let k = key();
        for n in [10_000u32, 100_000] {
            let mut r = Registers::default();
            for i in 0..n {
                r.insert(k.hash(ip(i)));
            }
            let err = (r.estimate() as f64 - f64::from(n)).abs() / f64::from(n);
            assert!(err < 4.0 * STD_ERROR, "{n}: {} ({err})", r.estimate());
        }
    }

    #[test]
    fn out_of_range_registers_are_refused() {
        let bad = |registers| ClientSketch {
            key_id: 1,
            registers,
        };
        assert!(Registers::from_sketch(&bad(vec![(4096, 1)])).is_none());
        assert!(Registers::from_sketch(&bad(vec![(1, MAX_RANK + 1)])).is_none());
        assert!(Registers::from_sketch(&bad(vec![(1, 0)])).is_none());
        assert!(Registers::from_sketch(&bad(vec![(4095, MAX_RANK)])).is_some());
    }
}
