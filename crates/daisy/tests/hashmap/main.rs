//! Persistent hash maps: behaviour, bad input, crashes, and property tests against std's
//! HashMap as the model.
//!
//! One test binary (`cargo test -p daisy --test hashmap`), its tests grouped by scenario:
//!
//! - `basics`: insert, get, remove, iteration and reopening; handles refused (wrong type,
//!   in use, another pool, other map format versions); operations in a failed transaction;
//!   byte-map entries read in place, cursor scans, random keys and `clear_with`.
//! - `batch`: batches, the prefix an error keeps, a failed commit, a split failing half-way.
//! - `capacity`: tables sized beforehand (`with_capacity`, `reserve`, `Batch::reserve`), a
//!   batch filling an empty map in place, and a fill that fails or crashes (an empty map).
//! - `clear`: `clear` frees everything, with small and the smallest log slots, and a crash
//!   inside `clear`.
//! - `crash`: committed and in-place writes survive a crash; `len` recounted; map operations
//!   inside an open transaction.
//! - `damage`: the map checker finds damage; damaged maps give errors, not panics.
//! - `props`: property tests against std's HashMap (fixed-size and byte maps).
//! - `views`: transaction-scoped views, freeing a map in bounded steps, uniform random picks.
//!
//! Shared helpers (pools, maps, `assert_ok`, `contents`) live here.

use daisy::MapCheck;
use daisy::{Error, PBytesMap, PHashMap, PPtr, Pool, PoolOptions};
use std::collections::HashMap;

mod basics;
mod batch;
mod capacity;
mod clear;
mod crash;
mod damage;
mod props;
mod views;

type U32Map = PHashMap<u32, u32>;

fn new_pool(dir: &tempfile::TempDir, name: &str) -> Pool {
    Pool::create(
        dir.path().join(name),
        &PoolOptions::new("test.hashmap")
            .size(64 << 20)
            .max_size(1 << 30),
    )
    .unwrap()
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-hashmap-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn create_u32(pool: &Pool, seed: u64) -> PPtr<U32Map> {
    let root = pool.root::<PPtr<U32Map>>().unwrap();
    pool.transaction(|tx| {
        let id = U32Map::create_in_with_seed(tx, seed)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn create_bytes(pool: &Pool, seed: u64) -> PPtr<PBytesMap> {
    let root = pool.root::<PPtr<PBytesMap>>().unwrap();
    pool.transaction(|tx| {
        let id = PBytesMap::create_in_with_seed(tx, seed)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn assert_ok(c: &MapCheck) {
    assert!(c.problems.is_empty(), "map check found: {:?}", c.problems);
}

fn contents(m: &U32Map) -> HashMap<u32, u32> {
    m.iter().unwrap().map(|e| e.unwrap()).collect()
}
