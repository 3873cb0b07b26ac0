//! Persistent ordered maps (`PTreeMap`): behaviour, big keys and values, deep trees, ranks
//! and ranges, views, freeing, crashes, damage, and property tests against std's BTreeMap.
//!
//! One test binary (`cargo test -p daisy --test tree`), its tests grouped by scenario:
//!
//! - `basics`: insert, get, remove, first/last, pops, reopening; handles refused (in use,
//!   another pool, not a tree, bad node size, oversized items); failed transactions.
//! - `big`: long keys and values (outline entries, long separators), mixed with short ones.
//! - `shape`: splits and merges to depth 3 and more, root growth and shrink, fill bounds,
//!   ascending and descending inserts, the redo log an insert costs.
//! - `ranks`: rank, select, bound ranks, ranges with offset/limit in both directions, ranges
//!   by rank, range removal, at their edges.
//! - `free`: `clear`, `free_step` in bounded transactions with a crash between steps.
//! - `views`: transaction-scoped views (read-your-writes, abort leaves nothing, exclusion).
//! - `crash`: reopen after close and after `crash_for_test`.
//! - `damage`: corrupted nodes and headers are reported by `check`, and operations on them
//!   return errors, never panic.
//! - `props`: random operation sequences against std's BTreeMap, ranks and ranges included.
//!
//! Shared helpers live here.

use daisy::{Error, MapCheck, PPtr, PTreeMap, Pool, PoolOptions};
use std::collections::BTreeMap;

mod basics;
mod big;
mod crash;
mod damage;
mod free;
mod props;
mod ranks;
mod shape;
mod views;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-tree-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn new_pool(dir: &tempfile::TempDir, name: &str) -> Pool {
    Pool::create(
        dir.path().join(name),
        &PoolOptions::new("test.tree")
            .size(64 << 20)
            .max_size(1 << 30),
    )
    .unwrap()
}

/// A tree with `node_size`-byte nodes, its pointer stored in the pool's root.
fn create(pool: &Pool, node_size: u32) -> PPtr<PTreeMap> {
    let root = pool.root::<PPtr<PTreeMap>>().unwrap();
    pool.transaction(|tx| {
        let id = PTreeMap::create_in_with(tx, node_size)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn assert_ok(c: &MapCheck) {
    assert!(c.problems.is_empty(), "tree check found: {:?}", c.problems);
}

/// The tree's entries, in order, through its lazy iterator.
fn contents(m: &PTreeMap) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().unwrap().map(|e| e.unwrap()).collect()
}

fn model_vec(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A sorted-set key: the order-preserving encoding of a f64 score, then the member.
fn zkey(score: f64, member: &[u8]) -> Vec<u8> {
    let b = score.to_bits();
    let b = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    let mut k = b.to_be_bytes().to_vec();
    k.extend_from_slice(member);
    k
}

/// Objects the pool holds beyond the tree's and the root's: must be none.
fn assert_no_leak(pool: &Pool, id: PPtr<PTreeMap>) {
    let mut owned = daisy::tree_objects(pool, id.offset()).unwrap();
    owned.push(pool.root::<PPtr<PTreeMap>>().unwrap().offset());
    let rep = pool.check(Some(&owned));
    assert!(rep.ok(), "{rep:?}");
}
