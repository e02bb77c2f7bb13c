//! A map bounded by bytes and entries that lets its least recently used
//! entries go: the cache's and the session table's store.
//!
//! Recency is the order of a `hashlink::LinkedHashMap`, its front the
//! least recently used: a use moves an entry to the back, an eviction takes
//! the front, both in O(1) and with one hash of the key. (A stamp per entry
//! in a `BTreeMap` beside a `HashMap` did the same with three hashes, two
//! tree operations and an `Arc` of each key: 4% of a keystroke's
//! instructions under callgrind, results/arm-cost-2026-12-07.md.) Each
//! entry is charged its own bytes, as its owner reckons them, plus
//! [`OVERHEAD`] for the map's own room.
//!
//! The bounds are written here, not taken from a crate: the tables need a
//! hard bound on bytes and on entries at once, an insert that is always
//! kept (a typing session's entry must be there for its next keystroke)
//! and evictions counted. `lru` bounds entries only, and a byte bound over
//! it is this much code again; `moka` and `quick_cache` bound by weight but
//! choose what to keep by admission policies (TinyLFU, S3-FIFO) that may
//! drop a new key at once.

use std::hash::{BuildHasher, Hash};

use hashlink::linked_hash_map::{LinkedHashMap, RawEntryMut};

/// What an entry costs besides its own bytes: its node in the linked map
/// (two links and the key), its slot in the map's table, the allocator's
/// rounding. Deliberately generous, so the bound holds for what the process
/// really pays.
pub const OVERHEAD: usize = 160;

#[derive(Debug)]
struct Slot<V> {
    value: V,
    bytes: usize,
}

/// The bounded map.
#[derive(Debug)]
pub struct Lru<K, V> {
    /// Front: the least recently used.
    map: LinkedHashMap<K, Slot<V>, foldhash::fast::RandomState>,
    bytes: usize,
    max_bytes: usize,
    max_entries: usize,
    evicted: u64,
}

impl<K: Hash + Eq, V> Lru<K, V> {
    pub fn new(max_bytes: usize, max_entries: usize) -> Lru<K, V> {
        Lru {
            map: LinkedHashMap::with_hasher(foldhash::fast::RandomState::default()),
            bytes: 0,
            max_bytes,
            max_entries,
            evicted: 0,
        }
    }

    /// The entry for `key`, now the most recently used.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.map.to_back(key).map(|slot| &mut slot.value)
    }

    /// The entry for `key`, without counting it as a use.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|s| &s.value)
    }

    /// Puts `value` (costing `bytes` besides [`OVERHEAD`]) under `key`,
    /// replacing what was there, and lets the least recently used entries
    /// go until the bounds hold. A value that alone is over the bound is
    /// not kept.
    pub fn insert(&mut self, key: K, value: V, bytes: usize) {
        // One hash for the removal of the old entry and the insertion.
        let hash = self.map.hasher().hash_one(&key);
        if let RawEntryMut::Occupied(old) =
            self.map.raw_entry_mut().from_key_hashed_nocheck(hash, &key)
        {
            self.bytes -= old.remove().bytes;
        }
        let bytes = bytes + OVERHEAD;
        if bytes > self.max_bytes || self.max_entries == 0 {
            return;
        }
        while self.bytes + bytes > self.max_bytes || self.map.len() >= self.max_entries {
            let Some((_, oldest)) = self.map.pop_front() else {
                break;
            };
            self.bytes -= oldest.bytes;
            self.evicted += 1;
        }
        if let RawEntryMut::Vacant(vacant) =
            self.map.raw_entry_mut().from_key_hashed_nocheck(hash, &key)
        {
            vacant.insert_hashed_nocheck(hash, key, Slot { value, bytes });
            self.bytes += bytes;
        }
    }

    /// Takes `key`'s entry out.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.map.remove(key)?;
        self.bytes -= slot.bytes;
        Some(slot.value)
    }

    /// Empties it (not counted as evictions).
    pub fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes charged, overheads included.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries let go to keep the bounds.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_bounds_hold() {
        let mut l: Lru<u32, u32> = Lru::new(3 * (OVERHEAD + 10), 100);
        for k in 0..3 {
            l.insert(k, k, 10);
        }
        assert_eq!(l.bytes(), 3 * (OVERHEAD + 10));
        // 0 is used, so 1 is the oldest now.
        assert_eq!(l.get_mut(&0).copied(), Some(0));
        l.insert(3, 3, 10);
        assert_eq!(l.peek(&1), None);
        assert!(l.peek(&0).is_some() && l.peek(&2).is_some() && l.peek(&3).is_some());
        assert_eq!(l.evicted(), 1);
        // A value bigger than everything is not kept, and takes nothing.
        l.insert(9, 9, 10_000);
        assert_eq!((l.len(), l.peek(&9)), (3, None));
        // Replacing an entry charges it once.
        l.insert(3, 30, 20);
        assert!(l.bytes() <= 3 * (OVERHEAD + 10));
        assert_eq!(l.remove(&3), Some(30));
        let mut l: Lru<u32, u32> = Lru::new(1 << 20, 2);
        for k in 0..5 {
            l.insert(k, k, 1);
        }
        assert_eq!(l.len(), 2);
        assert!(l.peek(&3).is_some() && l.peek(&4).is_some());
        l.clear();
        assert_eq!((l.len(), l.bytes()), (0, 0));
    }
}
