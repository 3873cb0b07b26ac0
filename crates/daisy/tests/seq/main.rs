//! Persistent sequences (`PSeq`): behaviour, chunk boundaries, big items, middle edits, trims,
//! removals by value, bounded freeing, views, crashes, damage, and property tests against
//! std's `VecDeque` as the model.
//!
//! One test binary (`cargo test -p daisy --test seq`), its tests grouped by scenario:
//!
//! - `basics`: pushes, pops, indexes, ranges, iterators and positions on a small sequence;
//!   handles refused (in use, another pool, not a sequence); out-of-range errors.
//! - `boundaries`: pushes and pops across chunk allocation and freeing at both ends, queues
//!   that slide through chunks, the sole chunk kept when a sequence empties.
//! - `big`: items stored out of line (over a quarter chunk, up to megabytes), freed with them.
//! - `middle`: set, insert and remove in the middle: chunk splits, fresh rewrites, merges.
//! - `trim`: LTRIM semantics, whole chunks detached and collected, small and large trims.
//! - `remove`: removal by value from the head, the tail, and everywhere.
//! - `free`: `free_step` in bounded transactions, with a crash between steps.
//! - `views`: read-your-writes inside a transaction, aborts, claims.
//! - `crash`: reopening after a close and after a crash.
//! - `damage`: damaged chunks and headers give errors and check problems, never panics.
//! - `props`: random operation sequences against `VecDeque`, `check` after each.
//!
//! Seeds are printed by the tests that draw them; assertion messages name the step.

use daisy::{Error, MapCheck, PPtr, PSeq, Pool, PoolOptions};
use std::collections::VecDeque;

mod basics;
mod big;
mod boundaries;
mod crash;
mod damage;
mod free;
mod middle;
mod props;
mod remove;
mod trim;
mod views;

const LAYOUT: &str = "test.seq";

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-seq-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn new_pool(dir: &tempfile::TempDir, name: &str) -> Pool {
    Pool::create(
        dir.path().join(name),
        &PoolOptions::new(LAYOUT).size(32 << 20).max_size(1 << 30),
    )
    .unwrap()
}

/// A sequence with `chunk_bytes`-byte chunks, linked from the root.
fn create(pool: &Pool, chunk_bytes: u32) -> PPtr<PSeq> {
    let root = pool.root::<PPtr<PSeq>>().unwrap();
    pool.transaction(|tx| {
        let id = PSeq::create_in_with(tx, chunk_bytes)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn assert_ok(c: &MapCheck) {
    assert!(
        c.problems.is_empty(),
        "sequence check found: {:?}",
        c.problems
    );
}

/// The sequence equals the model, checks sound, and the pool holds exactly the root and the
/// sequence's objects (no leak, nothing dangling).
fn assert_matches(pool: &Pool, s: &PSeq, model: &VecDeque<Vec<u8>>, what: &str) {
    let got = s.range(0, -1).unwrap();
    assert_eq!(got.len(), model.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(model).enumerate() {
        assert_eq!(a, b, "{what}: item {i}");
    }
    assert_eq!(s.len().unwrap(), model.len() as u64, "{what}: len");
    let c = s.check();
    assert!(c.problems.is_empty(), "{what}: {:?}", c.problems);
    assert_eq!(c.entries, model.len() as u64, "{what}: entries");
    let mut reach = c.objects.clone();
    reach.push(pool.root::<PPtr<PSeq>>().unwrap().offset());
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{what}: {:?}", rep.problems);
}

/// Item `i` of a test: varied lengths, distinct contents.
fn item(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(31) ^ (k as u64).wrapping_mul(7)) as u8)
        .collect()
}

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Allocated objects in the pool.
fn objects(pool: &Pool) -> usize {
    pool.objects().unwrap().len()
}
