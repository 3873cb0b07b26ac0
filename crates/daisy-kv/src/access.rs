//! OBJECT IDLETIME's access clock: when each key was last read or written, in DRAM only.
//!
//! Redis keeps a 24-bit clock in each object (`robj.lru`) and updates it on every lookup
//! except those that only inspect (TYPE, TTL, EXISTS, OBJECT: `LOOKUP_NOTOUCH`). Daisy's keys
//! live in the pool, and writing a clock there on every read would turn each read into a
//! logged write. So the clock lives beside the keyspace, in DRAM: per database, a table from a
//! 64-bit hash of the key (XXH3) to the second of its last access. It need not survive a
//! restart: a key not accessed since the server started reads as idle since then, as a key
//! Redis loaded from its RDB file does.
//!
//! Cost: one hash of the key and one slot update per key a command reads or writes, the slot
//! prefetched with the key's own lookup (the event loop prefetches the keys of the commands
//! ahead: `Keyspace::prefetch`); measured in README.md ("OBJECT IDLETIME"). DRAM: 12 bytes per
//! slot, the table 3/8 to 3/4 full: 16 to 32 bytes per key accessed since the start; a deleted
//! key's slot goes with it. Two keys of one database whose 64-bit hashes collide would share a
//! clock (about one chance in 4 * 10^7 among a million keys); that is ignored.
//!
//! A failed group (its transaction rolled back, see `server::run_work`) gives back the clocks
//! of the keys it removed (`committed` / `rollback`); the accesses it made stay: the commands
//! run again.

#![expect(
    unsafe_code,
    reason = "a prefetch hint for the clock's slot of a key a later command reads"
)]

/// One database's clocks: an open-addressing table with linear probing, at most 3/4 full.
/// `hashes[i]` is a key's 64-bit XXH3 hash (never 0; 0 marks an empty slot) and `times[i]` the
/// second of its last access. A key's home slot is its hash modulo the table size, so a
/// removal shifts the slots after it back (no tombstones) and a prefetch knows where to look.
#[derive(Clone, Default)]
struct Table {
    hashes: Vec<u64>,
    times: Vec<u32>,
    len: usize,
}

#[inline]
fn hash_of(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key).max(1)
}

impl Table {
    #[inline]
    fn mask(&self) -> usize {
        self.hashes.len().wrapping_sub(1)
    }

    /// The slot holding `h`, or the empty slot where it would go.
    #[inline]
    fn find(&self, h: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            let s = self.hashes[i];
            if s == h {
                return (i, true);
            }
            if s == 0 {
                return (i, false);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn set(&mut self, h: u64, t: u32) {
        if (self.len + 1) * 4 > self.hashes.len() * 3 {
            self.grow();
        }
        let (i, found) = self.find(h);
        if !found {
            self.hashes[i] = h;
            self.len += 1;
        }
        self.times[i] = t;
    }

    fn get(&self, h: u64) -> Option<u32> {
        if self.hashes.is_empty() {
            return None;
        }
        let (i, found) = self.find(h);
        found.then(|| self.times[i])
    }

    /// Remove `h`; its time, if it was there.
    fn remove(&mut self, h: u64) -> Option<u32> {
        if self.hashes.is_empty() {
            return None;
        }
        let (i, found) = self.find(h);
        if !found {
            return None;
        }
        let t = self.times[i];
        // Shift back the slots after it that may move (those whose home is not in
        // (hole, k], cyclically).
        let mask = self.mask();
        let mut hole = i;
        let mut k = (i + 1) & mask;
        loop {
            let s = self.hashes[k];
            if s == 0 {
                break;
            }
            let home = s as usize & mask;
            let stays = if hole <= k {
                home > hole && home <= k
            } else {
                home > hole || home <= k
            };
            if !stays {
                self.hashes[hole] = s;
                self.times[hole] = self.times[k];
                hole = k;
            }
            k = (k + 1) & mask;
        }
        self.hashes[hole] = 0;
        self.len -= 1;
        Some(t)
    }

    fn grow(&mut self) {
        let n = (self.hashes.len() * 2).max(1024);
        let hashes = std::mem::replace(&mut self.hashes, vec![0; n]);
        let times = std::mem::replace(&mut self.times, vec![0; n]);
        for (h, t) in hashes.into_iter().zip(times).filter(|&(h, _)| h != 0) {
            let (i, _) = self.find(h);
            self.hashes[i] = h;
            self.times[i] = t;
        }
    }

    #[inline]
    fn prefetch(&self, h: u64) {
        let i = h as usize & self.mask();
        if let (Some(a), Some(b)) = (self.hashes.get(i), self.times.get(i)) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch never faults and has no architectural effect; the addresses
            // are elements of the table.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(a as *const u64 as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(b as *const u32 as *const i8);
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (a, b);
        }
    }
}

/// What a failed group must give back.
enum Undo {
    Removed(usize, u64, u32),
    Cleared(usize, Table),
    Swapped(usize, usize),
}

/// The last access of each key, per database.
#[derive(Default)]
pub struct AccessClock {
    dbs: Vec<Table>,
    /// The second (since the epoch) the running command counts as (set before each command).
    pub now_s: u32,
    /// The server started at this second: keys not accessed since read as idle since then.
    pub started_s: u32,
    /// The running command only inspects keys (Redis's `LOOKUP_NOTOUCH`): its lookups are no
    /// access.
    pub no_touch: bool,
    undo: Vec<Undo>,
}

impl AccessClock {
    pub fn new(databases: usize, now_s: u32) -> AccessClock {
        AccessClock {
            dbs: vec![Table::default(); databases],
            now_s,
            started_s: now_s,
            no_touch: false,
            undo: Vec::new(),
        }
    }

    /// `key` of `db` was read or written now.
    #[inline]
    pub fn access(&mut self, db: usize, key: &[u8]) {
        if self.no_touch {
            return;
        }
        let now = self.now_s;
        if let Some(m) = self.dbs.get_mut(db) {
            m.set(hash_of(key), now);
        }
    }

    /// Hint that a later command will access `key` of `db` (see `Keyspace::prefetch`).
    #[inline]
    pub fn prefetch(&self, db: usize, key: &[u8]) {
        if let Some(m) = self.dbs.get(db) {
            m.prefetch(hash_of(key));
        }
    }

    /// `key` of `db` was removed.
    pub fn remove(&mut self, db: usize, key: &[u8]) {
        let h = hash_of(key);
        if let Some(t) = self.dbs.get_mut(db).and_then(|m| m.remove(h)) {
            self.undo.push(Undo::Removed(db, h, t));
        }
    }

    /// Every key of `db` was removed (FLUSHDB).
    pub fn clear(&mut self, db: usize) {
        if let Some(m) = self.dbs.get_mut(db) {
            let old = std::mem::take(m);
            if old.len > 0 {
                self.undo.push(Undo::Cleared(db, old));
            }
        }
    }

    /// Databases `a` and `b` swapped (SWAPDB).
    pub fn swap(&mut self, a: usize, b: usize) {
        if a < self.dbs.len() && b < self.dbs.len() {
            self.dbs.swap(a, b);
            self.undo.push(Undo::Swapped(a, b));
        }
    }

    /// Set `key`'s clock as if last accessed `idle_s` seconds ago (RESTORE ... IDLETIME).
    pub fn set_idle(&mut self, db: usize, key: &[u8], idle_s: u64) {
        let t = (self.now_s as u64).saturating_sub(idle_s) as u32;
        if let Some(m) = self.dbs.get_mut(db) {
            m.set(hash_of(key), t);
        }
    }

    /// Seconds since `key` of `db` was last accessed (OBJECT IDLETIME).
    pub fn idle_s(&self, db: usize, key: &[u8]) -> u64 {
        let last = self
            .dbs
            .get(db)
            .and_then(|m| m.get(hash_of(key)))
            .unwrap_or(self.started_s);
        self.now_s.saturating_sub(last) as u64
    }

    /// Keys with a clock, all databases.
    pub fn len(&self) -> usize {
        self.dbs.iter().map(|m| m.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// DRAM the clocks hold, in bytes.
    pub fn memory(&self) -> usize {
        self.dbs.iter().map(|m| m.hashes.len() * 12).sum()
    }

    /// The group's transaction committed: its removals stand.
    pub fn committed(&mut self) {
        self.undo.clear();
    }

    /// The group's transaction failed: the clocks it removed come back.
    pub fn rollback(&mut self) {
        while let Some(u) = self.undo.pop() {
            match u {
                Undo::Removed(db, h, t) => {
                    if self.dbs[db].get(h).is_none() {
                        self.dbs[db].set(h, t);
                    }
                }
                Undo::Cleared(db, old) => {
                    let now = std::mem::replace(&mut self.dbs[db], old);
                    for (h, t) in now.hashes.into_iter().zip(now.times) {
                        if h != 0 {
                            self.dbs[db].set(h, t);
                        }
                    }
                }
                Undo::Swapped(a, b) => self.dbs.swap(a, b),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_counts_from_the_last_access_or_the_start() {
        let mut c = AccessClock::new(2, 100);
        c.now_s = 105;
        assert_eq!(c.idle_s(0, b"k"), 5, "never accessed: since the start");
        c.access(0, b"k");
        c.now_s = 112;
        assert_eq!(c.idle_s(0, b"k"), 7);
        assert_eq!(c.idle_s(1, b"k"), 12, "databases apart");
        c.no_touch = true;
        c.access(0, b"k");
        assert_eq!(c.idle_s(0, b"k"), 7, "an inspection is no access");
    }

    #[test]
    fn the_table_matches_a_map_through_inserts_and_removals() {
        use rand::{Rng, SeedableRng};
        let seed = 0x5EED_0001u64;
        println!("seed {seed:#x}");
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut t = Table::default();
        let mut model = std::collections::HashMap::new();
        for step in 0..200_000u32 {
            // Few distinct hashes with small values, so probe runs wrap and collide.
            let h = rng.gen_range(1..5000u64) * if rng.gen_bool(0.5) { 1 } else { 1 << 20 };
            if rng.gen_bool(0.4) {
                assert_eq!(t.remove(h), model.remove(&h), "step {step}");
            } else {
                t.set(h, step);
                model.insert(h, step);
            }
        }
        assert_eq!(t.len, model.len());
        for (h, v) in &model {
            assert_eq!(t.get(*h), Some(*v));
        }
    }

    #[test]
    fn a_failed_group_gives_removed_clocks_back() {
        let mut c = AccessClock::new(2, 100);
        c.now_s = 101;
        c.access(0, b"a");
        c.access(1, b"b");
        c.committed();
        c.remove(0, b"a");
        c.swap(0, 1);
        c.clear(0);
        c.now_s = 110;
        c.rollback();
        assert_eq!(c.idle_s(0, b"a"), 9);
        assert_eq!(c.idle_s(1, b"b"), 9);
        c.remove(0, b"a");
        c.committed();
        c.rollback();
        assert_eq!(c.idle_s(0, b"a"), 10, "removed for good: since the start");
    }
}
