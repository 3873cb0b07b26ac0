//! Eviction (Redis's evict.c): `maxmemory` and `maxmemory-policy`.
//!
//! What is measured: the heap's allocated bytes (`daisy::Pool::allocated_bytes`, a counter
//! each commit updates, so reading it costs two loads), plus what the current transaction
//! allocates or frees (`Tx::allocation_balance`). INFO's `used_memory` is the same figure, so
//! the `-OOM` error and INFO always agree. `maxmemory` is set when it is below the pool's
//! capacity (0, "no limit", is the capacity); it also stops the pool's growth
//! (`Pool::set_max_size`), so the pool file never grows past it either.
//!
//! When the used bytes pass `maxmemory`, keys are removed by the policy, as Redis does:
//! before each command (in the command's own transaction, so the removal and the command
//! commit together), and between rounds of the event loop (its own transaction), so that a
//! client sees the invalidation of an evicted key before the reply to its next command.
//! `-OOM` answers a command that may grow memory (`denyoom`) only when eviction cannot bring
//! the used bytes under the limit: policy `noeviction`, or no key the policy may take.
//!
//! Victims: `maxmemory-samples` keys sampled at random from each database (for `volatile-*`
//! only keys with a time to live count); `*-random` takes the first, `*-lru` the longest idle
//! (the DRAM access clock that OBJECT IDLETIME reads), `volatile-ttl` the nearest expiry.
//! Daisy keeps no access-frequency counters: the `*-lfu` policies evict by idle time as the
//! `*-lru` ones do (documented in the README).
//!
//! A big collection is freed in bounded steps after its key goes (lazyfree): its bytes leave
//! `used_memory` only as those steps run. One eviction pass credits the bytes it queued
//! (the key's MEMORY USAGE) so it does not evict more keys for them, and the pass between
//! rounds waits while the lazyfree queue is not empty (those bytes are on their way out;
//! Redis's lazy eviction likewise counts queued frees as progress).

use crate::commands::ServerState;
use crate::keyspace::{Keyspace, Val};
use daisy::Tx;

/// At most this many keys go in one pass (Redis bounds a pass by time, `maxmemory-eviction
/// -tenacity`); the next command or round continues.
const MAX_KEYS_PER_PASS: usize = 1000;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysRandom,
    VolatileRandom,
    AllKeysLru,
    VolatileLru,
    VolatileTtl,
}

impl Policy {
    /// The policy the configuration names (the lfu ones evict by idle time, see above).
    pub fn of(sv: &ServerState) -> Policy {
        match sv.config.get("maxmemory-policy").unwrap_or("noeviction") {
            "allkeys-random" => Policy::AllKeysRandom,
            "volatile-random" => Policy::VolatileRandom,
            "allkeys-lru" | "allkeys-lfu" => Policy::AllKeysLru,
            "volatile-lru" | "volatile-lfu" => Policy::VolatileLru,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }

    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileRandom | Policy::VolatileLru | Policy::VolatileTtl
        )
    }
}

/// The used bytes as `tx` will leave them if it commits.
pub fn used_in(sv: &ServerState, tx: &Tx) -> u64 {
    (sv.used_memory() as i64 + tx.allocation_balance()).max(0) as u64
}

/// Evict keys until the used bytes are at most `maxmemory`. True: under the limit now (or no
/// limit is set, or queued frees will bring it there); false: the policy found nothing more
/// to remove (a `denyoom` command is then refused).
pub fn perform(ks: &mut Keyspace, tx: &mut Tx, sv: &mut ServerState) -> daisy::Result<bool> {
    let Some(limit) = sv.memory_limit() else {
        return Ok(true);
    };
    if used_in(sv, tx) <= limit {
        return Ok(true);
    }
    let policy = Policy::of(sv);
    if policy == Policy::NoEviction {
        return Ok(false);
    }
    let samples = sv
        .config
        .get("maxmemory-samples")
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(5)
        .max(1);
    // Bytes of collections this pass queued for freeing, not yet out of `used`.
    let mut queued: u64 = 0;
    let mut under = false;
    for _ in 0..MAX_KEYS_PER_PASS {
        if used_in(sv, tx).saturating_sub(queued) <= limit {
            under = true;
            break;
        }
        let Some((db, key, v)) = pick(ks, tx, sv, policy, samples)? else {
            break;
        };
        let bytes = key_memory(ks, tx, &key, &v)?;
        let before = tx.allocation_balance();
        // An eviction is no change for SAVE's counter (Redis does not count it in `dirty`).
        let dirty = ks.dirty;
        ks.delete(tx, db, &key, &v)?;
        ks.dirty = dirty;
        let freed_now = (before - tx.allocation_balance()).max(0) as u64;
        queued += bytes.saturating_sub(freed_now);
        sv.counters.evicted_keys += 1;
        if !ks.events.is_empty() {
            crate::pubsub::flush_key_events(ks, sv);
        }
        crate::pubsub::notify_event(sv, crate::pubsub::N_EVICTED, "evicted", &key, db);
    }
    // Clients tracking the evicted keys are told, as for an expiry: no client wrote them.
    if !ks.touched.is_empty() {
        crate::tracking::keys_written(ks, sv, 0);
    }
    Ok(under || ks.lazy_pending() > 0 && queued > 0)
}

/// A key the policy may evict, sampled from every database (the best sample over all of
/// them, as Redis's eviction pool), with its record.
fn pick(
    ks: &mut Keyspace,
    tx: &mut Tx,
    sv: &mut ServerState,
    policy: Policy,
    samples: usize,
) -> daisy::Result<Option<(usize, Vec<u8>, Val)>> {
    let dbs = ks.databases();
    let mut best: Option<(u64, usize, Vec<u8>, Val)> = None;
    for i in 0..dbs {
        let db = (sv.evict_db + i) % dbs;
        if ks.len(tx, db)? == 0 || policy.volatile() && ks.expires(tx, db)? == 0 {
            continue;
        }
        // Keys with a time to live may be few: look at more keys to find enough of them.
        let tries = if policy.volatile() {
            samples * 16
        } else {
            samples
        };
        let mut found: Vec<(Vec<u8>, Val)> = Vec::new();
        for _ in 0..tries {
            if found.len() == samples {
                break;
            }
            let Some(key) = ks.random_key(tx, db, &mut || sv.next_random())? else {
                break;
            };
            let Some(v) = ks.peek(tx, db, &key)? else {
                continue;
            };
            if policy.volatile() && v.expire_ms.is_none() {
                continue;
            }
            found.push((key, v));
            if policy.random() {
                break;
            }
        }
        if found.is_empty() && policy.volatile() {
            // Few keys with a TTL among many: random draws can miss them all. Walk the
            // database from a random point instead (bounded), so a volatile policy refuses
            // only when no key has a TTL.
            let start = sv.next_random();
            found.extend(scan_volatile(ks, tx, db, start)?);
        }
        for (key, v) in found {
            if policy.random() {
                // Random: the first key found, the databases taken in turn.
                sv.evict_db = (db + 1) % dbs;
                return Ok(Some((db, key, v)));
            }
            let score = match policy {
                // The nearest expiry first; else the longest idle (the lru policies).
                Policy::VolatileTtl => u64::MAX - v.expire_ms.unwrap_or(i64::MAX).max(0) as u64,
                _ => ks.clock.idle_s(db, &key),
            };
            if best.as_ref().is_none_or(|b| score > b.0) {
                best = Some((score, db, key, v));
            }
        }
    }
    Ok(best.map(|(_, db, key, v)| (db, key, v)))
}

/// Keys a volatile policy's fallback scan looks at, at most, per database and pass.
const SCAN_VOLATILE_MAX: usize = 10_000;

/// The first key with a time to live found by a SCAN of `db` from cursor `start` (wrapping
/// once), looking at up to [`SCAN_VOLATILE_MAX`] keys.
fn scan_volatile(
    ks: &mut Keyspace,
    tx: &mut Tx,
    db: usize,
    start: u64,
) -> daisy::Result<Option<(Vec<u8>, Val)>> {
    let mut cursor = start;
    let mut wrapped = false;
    let mut looked = 0;
    let mut found = Vec::new();
    while looked < SCAN_VOLATILE_MAX {
        found.clear();
        let next = ks.scan(tx, db, cursor, 100, &mut found)?;
        for (k, e) in &found {
            let v = ks.val_of(tx, *e)?;
            if v.expire_ms.is_some() {
                return Ok(Some((k.clone(), v)));
            }
        }
        looked += found.len().max(1);
        if next == 0 {
            if wrapped {
                break;
            }
            wrapped = true;
        }
        cursor = next;
    }
    Ok(None)
}

/// MEMORY USAGE of a key: its entry object (header, key, record) rounded to the allocator's
/// 16 bytes, its slot, and every object its value owns.
pub fn key_memory(ks: &Keyspace, tx: &Tx, key: &[u8], v: &Val) -> daisy::Result<u64> {
    let mut bytes = ((8 + key.len() + v.off + v.len).div_ceil(16) * 16 + 16) as u64;
    let p = ks.payload(tx, v)?;
    let owned = crate::types::of(v.ty)
        .owned(ks.pool(), v.enc, &p)
        .map_err(daisy::Error::Unsupported)?;
    for o in owned {
        bytes += tx.usable_size(daisy::PPtr::<u8>::from_offset(o))?;
    }
    Ok(bytes)
}
