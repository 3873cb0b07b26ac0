//! [`PTreeMap`]: a persistent ordered map from byte strings to byte strings (a B+-tree with
//! order statistics), the base of sorted sets. Format: docs/FORMAT.md section 8c, tree format
//! version [`TREE_FORMAT`].
//!
//! * `node.rs`: the node layout (slotted nodes: items in a heap, a sorted one-byte index) and
//!   the diff writer;
//! * `keys.rs`: keys inline or in item objects (a 16-byte prefix inline), comparisons,
//!   separators (suffix-truncated);
//! * `ops.rs`: descents by key and by rank, inserts and splits, removals, merges and
//!   redistribution, range removal, cursors;
//! * `cache.rs`: a view's DRAM copies of the nodes it reads, coherent with its transaction;
//! * `free.rs`: freeing in bounded steps (`clear`, `free_step`), the walks checkers use;
//! * `check.rs`: the invariants.
//!
//! **Design.** Keys are ordered by memcmp, a proper prefix first (Rust's slice order).
//! Nodes are 256 B to 2 KiB (1 KiB by default: see FORMAT.md for the measurements), one
//! allocation each, so a node is a few whole cache lines. Internal items carry the number of
//! entries under each child, which makes rank, select, ZCOUNT-style counts and range offsets
//! O(log n). Separators are the shortest keys between their neighbours (suffix truncation),
//! so a sorted set's separators are usually a score and a byte or two. An insert that fits
//! its leaf logs the new entry, the shifted tail of the leaf's index, its header word, one
//! count word per level and the header's length: a couple of hundred bytes, not a node.
//!
//! **Invariants** (verified by [`PTreeMap::check`]; `daisy pool check` runs it on every tree):
//! 1. keys strictly ascend within a leaf and across leaves; every key of child i of an
//!    internal node lies in [separator i, separator i+1) (item 0 has no separator; the
//!    parent's bounds apply);
//! 2. every internal item's count equals the entries of its subtree; `len` equals the
//!    entries of the tree;
//! 3. every leaf is at level 0, every internal node one above its children, the root at
//!    `height - 1`: the depth is uniform;
//! 4. every node but the root uses at least a quarter of its bytes; an internal root has two
//!    children or more; no node is empty (an empty tree has no root);
//! 5. every node and item object is allocated and owned once (no cycles, nothing shared).
//!
//! **Crash reasoning.** Every change of an operation, including the splits, merges and
//! redistributions it causes, the new root, the collapsed root and the count updates, is
//! written through the caller's transaction (a node this transaction allocated is written in
//! place, and flushed or logged before the commit record, FORMAT.md section 4). Invariants
//! 1-5 hold before the transaction and after it, so they hold after a crash: recovery shows
//! the transaction wholly or not at all. Nodes and objects an operation drops are freed in the
//! same transaction that unlinks them, so nothing leaks and nothing freed stays reachable.
//! Freeing a whole tree (`clear`, [`PTreeMap::free_step`]) is the one multi-transaction job;
//! the header records its progress (see `free.rs`).

mod cache;
mod check;
mod free;
mod keys;
mod node;
mod ops;

use crate::collections::table::{MapCheck, Src};
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::ptr::PPtr;
use crate::shared::PoolInner;
use crate::tx::Tx;
use cache::NodeCache;
use ops::{Cursor, Target, T};
use std::ops::Bound;

pub(crate) use ops::{TREE_HEADER_BYTES, TREE_MAGIC};

pub(crate) use check::check_tree;
pub(crate) use free::{tree_entries, tree_objects};

const WHAT: &str = check::WHAT;

/// An entry: (key, value).
pub type Entry = (Vec<u8>, Vec<u8>);

/// A persistent ordered map from byte strings to byte strings (a B+-tree with order
/// statistics). Same handle rules and durability modes as [`crate::PBytesMap`]: an exclusive
/// handle from [`open`](Self::open), whose writes are each a transaction of their own (durable
/// when they return) and whose reads see the committed map; `_tx` methods and the
/// transaction-scoped [`TreeMapView`] work inside a caller's transaction and see its writes.
pub struct PTreeMap {
    pool: Pool,
    t: T<'static>,
}

impl std::fmt::Debug for PTreeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PTreeMap@{:#x}", self.t.hdr)
    }
}

fn same_pool(pool: &PoolInner, tx: &Tx, hdr: u64) -> Result<()> {
    if std::ptr::eq(tx.pool_inner(), pool) {
        Ok(())
    } else {
        Err(Error::InvalidPointer {
            offset: hdr,
            why: "the transaction belongs to another pool than the tree",
        })
    }
}

/// The tree at `hdr` as `src` shows it, if it is a live tree.
fn live_tree(src: &Src, hdr: u64) -> Result<T<'static>> {
    let (h, t) = free::tree_at(src, hdr)?;
    if h.state != ops::STATE_LIVE {
        return Err(Error::NotACollection {
            offset: hdr,
            what: WHAT,
            why: "the tree is being freed".into(),
        });
    }
    Ok(t)
}

/// Ranks `a..b` of a bound range after `offset` entries, at most `limit` of them, counted
/// from the low end or (`rev`) from the high end.
fn window(a: u64, b: u64, rev: bool, offset: u64, limit: u64) -> Option<(u64, u64)> {
    let n = b.saturating_sub(a);
    if offset >= n {
        return None;
    }
    let k = (n - offset).min(limit);
    if k == 0 {
        return None;
    }
    Some(if rev {
        (b - offset - k, b - offset)
    } else {
        (a + offset, a + offset + k)
    })
}

/// Ranks of `start..=end` counted from the low end, or (`rev`) from the high end, in a tree
/// of `len` entries, as a half-open range of ranks from the low end.
fn rank_window(len: u64, start: u64, end: u64, rev: bool) -> Option<(u64, u64)> {
    if start > end || start >= len {
        return None;
    }
    let end = end.min(len - 1);
    Some(if rev {
        (len - 1 - end, len - start)
    } else {
        (start, end + 1)
    })
}

/// Read operations on a tree seen through `src` (shared by handles and views).
struct Reader<'s, 'a, 'p> {
    src: &'s Src<'a, 'p>,
    t: T<'s>,
}

impl Reader<'_, '_, '_> {
    fn len(&self) -> Result<u64> {
        Ok(self.t.hot(self.src)?.len)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        ops::get(self.src, &self.t, key)
    }
    fn rank(&self, key: &[u8]) -> Result<(u64, bool)> {
        ops::rank(self.src, &self.t, key)
    }
    fn at_rank(&self, r: u64) -> Result<Option<Entry>> {
        ops::at_rank(self.src, &self.t, r)
    }
    fn last(&self) -> Result<Option<Entry>> {
        match self.len()? {
            0 => Ok(None),
            n => self.at_rank(n - 1),
        }
    }
    fn lower(&self, lo: Bound<&[u8]>) -> Result<u64> {
        ops::lower_rank(self.src, &self.t, lo)
    }
    fn upper(&self, hi: Bound<&[u8]>) -> Result<u64> {
        ops::upper_rank(self.src, &self.t, hi)
    }
    fn count(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        Ok(self.upper(hi)?.saturating_sub(self.lower(lo)?))
    }
    fn range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        rev: bool,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Entry>> {
        let (a, b) = (self.lower(lo)?, self.upper(hi)?);
        match window(a, b, rev, offset, limit) {
            Some((x, y)) => ops::collect_ranks(self.src, &self.t, x, y, rev),
            None => Ok(Vec::new()),
        }
    }
    fn range_by_rank(&self, start: u64, end: u64, rev: bool) -> Result<Vec<Entry>> {
        match rank_window(self.len()?, start, end, rev) {
            Some((x, y)) => ops::collect_ranks(self.src, &self.t, x, y, rev),
            None => Ok(Vec::new()),
        }
    }
}

impl PTreeMap {
    /// Tree format version (docs/FORMAT.md section 8c): a tree header with another version is
    /// refused, never misread.
    pub const FORMAT: u32 = ops::TREE_FORMAT;

    /// Node sizes a tree may have.
    pub const NODE_SIZES: [u32; 4] = node::NODE_SIZES;

    /// Longest key or value ([`Error::Unsupported`] beyond).
    pub const MAX_ITEM_LEN: usize = keys::MAX_ITEM_LEN;

    /// Node size of trees made by [`create_in`](Self::create_in) (docs/FORMAT.md section 8c
    /// gives the measurements behind it).
    pub const DEFAULT_NODE_SIZE: u32 = 1024;

    /// Create an empty tree inside `tx`; store the pointer somewhere reachable in the same
    /// transaction.
    pub fn create_in(tx: &mut Tx) -> Result<PPtr<PTreeMap>> {
        Self::create_in_with(tx, Self::DEFAULT_NODE_SIZE)
    }

    /// An empty tree with nodes of `node_size` bytes (one of [`Self::NODE_SIZES`]: small nodes
    /// make deep trees from few entries, as tests want).
    pub fn create_in_with(tx: &mut Tx, node_size: u32) -> Result<PPtr<PTreeMap>> {
        if node::Geo::new(node_size).is_none() {
            return Err(Error::Unsupported(format!(
                "ordered map node size {node_size} (sizes: {:?})",
                node::NODE_SIZES
            )));
        }
        let h = ops::TreeHeader::new(node_size);
        Ok(PPtr::from_offset(tx.alloc(&h)?.offset()))
    }

    /// Open the tree at `id` as an exclusive handle; finishes a `clear` a crash interrupted.
    pub fn open(pool: &Pool, id: PPtr<PTreeMap>) -> Result<PTreeMap> {
        let t = live_tree(&Src::Pool(&pool.inner), id.offset())?;
        if !pool.inner.claim_object(t.hdr) {
            return Err(Error::CollectionInUse {
                offset: t.hdr,
                what: WHAT,
            });
        }
        let m = PTreeMap {
            pool: pool.clone(),
            t,
        };
        if ops::read_header(&Src::Pool(&pool.inner), t.hdr)?.garbage_root != 0 {
            m.finish_garbage()?;
        }
        Ok(m)
    }

    /// A transaction-scoped view of the tree at `id`: every operation runs in the caller's
    /// transaction `tx` (of `pool`) and sees its earlier writes, and the tree may be one `tx`
    /// created. Cheap to open (the header is validated, nothing else read). While the view
    /// lives the tree is claimed, as by [`open`](Self::open): no exclusive handle nor second
    /// view meanwhile. A tree whose `clear` a crash interrupted is usable through a view (the
    /// detached nodes wait); [`open`](Self::open) finishes freeing them.
    pub fn view(pool: &Pool, tx: &Tx, id: PPtr<PTreeMap>) -> Result<TreeMapView> {
        same_pool(&pool.inner, tx, id.offset())?;
        let t = live_tree(&Src::Tx(tx), id.offset())?;
        if !pool.inner.claim_object(t.hdr) {
            return Err(Error::CollectionInUse {
                offset: t.hdr,
                what: WHAT,
            });
        }
        Ok(TreeMapView {
            map: PTreeMap {
                pool: pool.clone(),
                t,
            },
            cache: NodeCache::default(),
        })
    }

    /// The tree's header pointer (what to store to find it again).
    pub fn id(&self) -> PPtr<PTreeMap> {
        PPtr::from_offset(self.t.hdr)
    }

    /// Bytes per node.
    pub fn node_size(&self) -> u32 {
        self.t.geo.n as u32
    }

    fn committed(&self) -> Src<'_, '_> {
        Src::Pool(&self.pool.inner)
    }

    fn in_tx<R>(&self, tx: &Tx, f: impl FnOnce(&Reader) -> Result<R>) -> Result<R> {
        same_pool(&self.pool.inner, tx, self.t.hdr)?;
        let src = Src::Tx(tx);
        f(&Reader {
            src: &src,
            t: self.t,
        })
    }

    fn read<R>(&self, f: impl FnOnce(&Reader) -> Result<R>) -> Result<R> {
        let src = self.committed();
        f(&Reader {
            src: &src,
            t: self.t,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> Result<u64> {
        self.read(|r| r.len())
    }

    /// Whether the tree has no entry.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The committed value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(|r| r.get(key))
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        Ok(self.read(|r| r.rank(key))?.1)
    }

    /// The smallest entry.
    pub fn first(&self) -> Result<Option<Entry>> {
        self.read(|r| r.at_rank(0))
    }

    /// The largest entry.
    pub fn last(&self) -> Result<Option<Entry>> {
        self.read(|r| r.last())
    }

    /// The number of keys below `key`, and whether `key` is present (its 0-based rank when
    /// it is). O(log n).
    pub fn rank(&self, key: &[u8]) -> Result<(u64, bool)> {
        self.read(|r| r.rank(key))
    }

    /// The entry of rank `r` (0-based), if `r` is below the length. O(log n).
    pub fn entry_at_rank(&self, r: u64) -> Result<Option<Entry>> {
        self.read(|x| x.at_rank(r))
    }

    /// The rank of the first key a range starting at `lo` includes: the number of keys
    /// below the bound (0 for `Unbounded`). O(log n).
    pub fn lower_rank(&self, lo: Bound<&[u8]>) -> Result<u64> {
        self.read(|r| r.lower(lo))
    }

    /// One past the rank of the last key a range ending at `hi` includes: the number of keys
    /// at or below the bound (the length for `Unbounded`). O(log n).
    pub fn upper_rank(&self, hi: Bound<&[u8]>) -> Result<u64> {
        self.read(|r| r.upper(hi))
    }

    /// The number of keys between the bounds (ZCOUNT, ZLEXCOUNT): two rank lookups.
    pub fn count_range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        self.read(|r| r.count(lo, hi))
    }

    /// The entries between the bounds, ascending or (`rev`) descending, after skipping
    /// `offset` of them, at most `limit` (ZRANGEBYSCORE/ZRANGEBYLEX with LIMIT, and their REV
    /// forms). The skip costs a rank lookup, not a walk: O(log n + returned).
    pub fn range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        rev: bool,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Entry>> {
        self.read(|r| r.range(lo, hi, rev, offset, limit))
    }

    /// The entries of ranks `start..=end` (clipped to the length), ascending; with `rev`, the
    /// ranks count from the largest key and the entries come largest first (ZRANGE, ZRANGE
    /// REV). O(log n + returned).
    pub fn range_by_rank(&self, start: u64, end: u64, rev: bool) -> Result<Vec<Entry>> {
        self.read(|r| r.range_by_rank(start, end, rev))
    }

    /// Every entry in key order, lazily, from the committed tree.
    pub fn iter(&self) -> Result<TreeIter<'_>> {
        TreeIter::new(&self.pool.inner, self.t, 0, self.len()?, false)
    }

    /// The entries between the bounds, lazily, ascending or (`rev`) descending.
    pub fn iter_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        rev: bool,
    ) -> Result<TreeIter<'_>> {
        let (a, b) = (self.lower_rank(lo)?, self.upper_rank(hi)?);
        TreeIter::new(&self.pool.inner, self.t, a, b, rev)
    }

    /// Insert or replace; true when a value was replaced. Durable when it returns.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let t = self.t;
        self.pool.transaction(|tx| ops::insert(tx, &t, key, value))
    }

    /// Replace the entry of `from` by (`to`, `value`): the same tree as [`remove`] of `from`
    /// and then [`insert`] of `to`, to the byte, with fewer writes when neither leaf splits
    /// nor merges (a sorted set moving a member to a new score). False, with nothing changed,
    /// when `from` has no entry. Durable when it returns.
    ///
    /// [`remove`]: Self::remove
    /// [`insert`]: Self::insert
    pub fn move_key(&mut self, from: &[u8], to: &[u8], value: &[u8]) -> Result<bool> {
        let t = self.t;
        self.pool
            .transaction(|tx| ops::move_key(tx, &t, from, to, value))
    }

    /// Remove `key`; its value when it was present. Durable when it returns.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t = self.t;
        let r = self
            .pool
            .transaction(|tx| ops::remove(tx, &t, Target::Key(key)))?;
        Ok(r.map(|e| e.1))
    }

    /// Remove and return the smallest entry. Durable when it returns.
    pub fn pop_first(&mut self) -> Result<Option<Entry>> {
        let t = self.t;
        self.pool
            .transaction(|tx| ops::remove(tx, &t, Target::Rank(0)))
    }

    /// Remove and return the largest entry. Durable when it returns.
    pub fn pop_last(&mut self) -> Result<Option<Entry>> {
        let t = self.t;
        self.pool.transaction(|tx| pop_last_in(tx, &t))
    }

    /// Remove the entries of ranks `start..=end` (clipped to the length; ZREMRANGEBYRANK);
    /// returns how many. One transaction, durable when it returns; its redo log grows with the
    /// leaves touched (a leaf's worth of entries goes per index rewrite). A record that
    /// outgrows its log slot continues in an overflow extent (docs/FORMAT.md section 2.3), so
    /// a range of any size commits whole; only a pool without room for that extent refuses
    /// it ([`Error::TxTooLargeForPool`], nothing removed).
    pub fn remove_range_by_rank(&mut self, start: u64, end: u64) -> Result<u64> {
        let t = self.t;
        self.pool
            .transaction(|tx| remove_rank_window(tx, &t, start, end))
    }

    /// Remove the entries between the bounds (ZREMRANGEBYSCORE, ZREMRANGEBYLEX); returns how
    /// many. Same cost and limits as [`remove_range_by_rank`](Self::remove_range_by_rank).
    pub fn remove_range(&mut self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        let t = self.t;
        self.pool.transaction(|tx| remove_bounds(tx, &t, lo, hi))
    }

    /// Insert or replace inside the caller's transaction; true when a value was replaced.
    pub fn insert_tx(&mut self, tx: &mut Tx, key: &[u8], value: &[u8]) -> Result<bool> {
        same_pool(&self.pool.inner, tx, self.t.hdr)?;
        ops::insert(tx, &self.t, key, value)
    }

    /// Remove `key` inside the caller's transaction; its value when it was present.
    pub fn remove_tx(&mut self, tx: &mut Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        same_pool(&self.pool.inner, tx, self.t.hdr)?;
        Ok(ops::remove(tx, &self.t, Target::Key(key))?.map(|e| e.1))
    }

    /// The value of `key` as transaction `tx` sees it.
    pub fn get_tx(&self, tx: &Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.in_tx(tx, |r| r.get(key))
    }

    /// The number of entries as transaction `tx` sees it.
    pub fn len_tx(&self, tx: &Tx) -> Result<u64> {
        self.in_tx(tx, |r| r.len())
    }

    /// Remove every entry: the nodes are detached in one transaction (with `extra`'s
    /// changes, see [`clear_with`](Self::clear_with)), then freed 128 objects per
    /// transaction; a crash in between leaves them owned by the header, and the next `open`
    /// or `clear` finishes the job.
    pub fn clear(&mut self) -> Result<()> {
        self.clear_with(|_| Ok(()))
    }

    /// [`clear`](Self::clear), running `extra` inside the transaction that empties the tree.
    pub fn clear_with(&mut self, extra: impl FnOnce(&mut Tx) -> Result<()>) -> Result<()> {
        self.finish_garbage()?;
        let t = self.t;
        self.pool.transaction(|tx| {
            extra(tx)?;
            let h = ops::read_header(&Src::Tx(tx), t.hdr)?;
            if h.garbage_root != 0 {
                return Err(Error::Aborted(
                    "ordered map: a clear is still freeing".into(),
                ));
            }
            if h.root == 0 {
                return Ok(());
            }
            // [root, len, height, garbage_root, garbage_height]
            let w = [0, 0, 0, h.root, h.height];
            tx.write_bytes(t.hdr + ops::H_ROOT, bytemuck::cast_slice(&w))
        })?;
        self.finish_garbage()
    }

    /// Free what a `clear` detached, a bounded number of objects per transaction.
    fn finish_garbage(&self) -> Result<()> {
        let t = self.t;
        loop {
            let done = self.pool.transaction(|tx| {
                let mut budget = free::GARBAGE_BUDGET;
                free::garbage_step(tx, &t, &mut budget)
            })?;
            if done {
                return Ok(());
            }
        }
    }

    /// Free the tree at `id`, a bounded amount of work per call, inside the caller's
    /// transaction: true once the tree is gone (its header included). Frees at most about
    /// `budget` objects per call and stops early while the redo record runs low, so a tree
    /// of any size is freed by calls in successive transactions. Nothing may use the tree
    /// any more (the caller unlinked it; a tree with a handle or a view is refused).
    ///
    /// Crash safety: each call's changes commit with `tx`, and the header records how far
    /// freeing got (the root moved to its detached slot, which shrinks from its right edge:
    /// docs/FORMAT.md section 8c), so calls after a crash resume there.
    pub fn free_step(pool: &Pool, tx: &mut Tx, id: PPtr<PTreeMap>, budget: u32) -> Result<bool> {
        let hdr = id.offset();
        same_pool(&pool.inner, tx, hdr)?;
        let (_, t) = free::tree_at(&Src::Tx(tx), hdr)?;
        if !pool.inner.claim_object(hdr) {
            return Err(Error::CollectionInUse {
                offset: hdr,
                what: WHAT,
            });
        }
        let mut budget = budget.max(1);
        let r = free::destroy_step(tx, &t, &mut budget);
        pool.inner.release_object(hdr);
        r
    }

    /// Verify the tree's invariants (read-only).
    pub fn check(&self) -> MapCheck {
        check_tree(&self.pool.inner, self.t.hdr)
    }
}

impl Drop for PTreeMap {
    fn drop(&mut self) {
        self.pool.inner.release_object(self.t.hdr);
    }
}

fn pop_last_in(tx: &mut Tx, t: &T) -> Result<Option<Entry>> {
    let n = t.hot(&Src::Tx(tx))?.len;
    if n == 0 {
        return Ok(None);
    }
    ops::remove(tx, t, Target::Rank(n - 1))
}

fn remove_rank_window(tx: &mut Tx, t: &T, start: u64, end: u64) -> Result<u64> {
    let len = t.hot(&Src::Tx(tx))?.len;
    match rank_window(len, start, end, false) {
        Some((a, b)) => ops::remove_ranks(tx, t, a, b),
        None => Ok(0),
    }
}

fn remove_bounds(tx: &mut Tx, t: &T, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
    let (a, b) = {
        let src = Src::Tx(tx);
        (ops::lower_rank(&src, t, lo)?, ops::upper_rank(&src, t, hi)?)
    };
    if a >= b {
        return Ok(0);
    }
    ops::remove_ranks(tx, t, a, b)
}

/// A transaction-scoped view of a [`PTreeMap`], from [`PTreeMap::view`]: the tree's
/// operations inside the caller's transaction (reads see its writes), nothing that runs a
/// transaction of its own. Drop it before the tree is freed.
///
/// A view keeps DRAM copies of the nodes it reads, as its transaction sees them (internal
/// nodes, and leaves read repeatedly), kept coherent with every write it makes and dropped
/// when it is used in another transaction or an operation fails (see `cache.rs`).
#[derive(Debug)]
pub struct TreeMapView {
    map: PTreeMap,
    cache: NodeCache,
}

impl TreeMapView {
    /// The tree with this view's cache, serving `tx`.
    fn t(&self, tx: &Tx) -> Result<T<'_>> {
        same_pool(&self.map.pool.inner, tx, self.map.t.hdr)?;
        self.cache.begin(tx.serial());
        Ok(T {
            cache: Some(&self.cache),
            ..self.map.t
        })
    }

    fn read<R>(&self, tx: &Tx, f: impl FnOnce(&Reader) -> Result<R>) -> Result<R> {
        let t = self.t(tx)?;
        let src = Src::Tx(tx);
        f(&Reader { src: &src, t })
    }

    /// Run a write `f`; a failure empties the cache (a write may have been half done).
    fn write<R>(&mut self, tx: &mut Tx, f: impl FnOnce(&mut Tx, &T) -> Result<R>) -> Result<R> {
        let t = self.t(tx)?;
        let r = f(tx, &t);
        if r.is_err() {
            self.cache.clear();
        }
        r
    }

    /// The tree's header pointer.
    pub fn id(&self) -> PPtr<PTreeMap> {
        self.map.id()
    }
    /// Number of entries as `tx` sees it.
    pub fn len(&self, tx: &Tx) -> Result<u64> {
        self.read(tx, |r| r.len())
    }
    /// Whether the tree has no entry, as `tx` sees it.
    pub fn is_empty(&self, tx: &Tx) -> Result<bool> {
        Ok(self.len(tx)? == 0)
    }
    /// The value of `key`.
    pub fn get(&self, tx: &Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(tx, |r| r.get(key))
    }
    /// Whether `key` has an entry.
    pub fn contains_key(&self, tx: &Tx, key: &[u8]) -> Result<bool> {
        Ok(self.read(tx, |r| r.rank(key))?.1)
    }
    /// The smallest entry.
    pub fn first(&self, tx: &Tx) -> Result<Option<Entry>> {
        self.read(tx, |r| r.at_rank(0))
    }
    /// The largest entry.
    pub fn last(&self, tx: &Tx) -> Result<Option<Entry>> {
        self.read(tx, |r| r.last())
    }
    /// Keys below `key`, and whether it is present (see [`PTreeMap::rank`]).
    pub fn rank(&self, tx: &Tx, key: &[u8]) -> Result<(u64, bool)> {
        self.read(tx, |r| r.rank(key))
    }
    /// The entry of rank `r` (see [`PTreeMap::entry_at_rank`]).
    pub fn entry_at_rank(&self, tx: &Tx, r: u64) -> Result<Option<Entry>> {
        self.read(tx, |x| x.at_rank(r))
    }
    /// See [`PTreeMap::lower_rank`].
    pub fn lower_rank(&self, tx: &Tx, lo: Bound<&[u8]>) -> Result<u64> {
        self.read(tx, |r| r.lower(lo))
    }
    /// See [`PTreeMap::upper_rank`].
    pub fn upper_rank(&self, tx: &Tx, hi: Bound<&[u8]>) -> Result<u64> {
        self.read(tx, |r| r.upper(hi))
    }
    /// See [`PTreeMap::count_range`].
    pub fn count_range(&self, tx: &Tx, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        self.read(tx, |r| r.count(lo, hi))
    }
    /// See [`PTreeMap::range`].
    pub fn range(
        &self,
        tx: &Tx,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        rev: bool,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Entry>> {
        self.read(tx, |r| r.range(lo, hi, rev, offset, limit))
    }
    /// See [`PTreeMap::range_by_rank`].
    pub fn range_by_rank(&self, tx: &Tx, start: u64, end: u64, rev: bool) -> Result<Vec<Entry>> {
        self.read(tx, |r| r.range_by_rank(start, end, rev))
    }
    /// Insert or replace; true when a value was replaced.
    pub fn insert(&mut self, tx: &mut Tx, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write(tx, |tx, t| ops::insert(tx, t, key, value))
    }
    /// Remove `key`; its value when it was present.
    pub fn remove(&mut self, tx: &mut Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let r = self.write(tx, |tx, t| ops::remove(tx, t, Target::Key(key)))?;
        Ok(r.map(|e| e.1))
    }
    /// Replace the entry of `from` by (`to`, `value`); false, with nothing changed, when
    /// `from` has no entry (see [`PTreeMap::move_key`]).
    pub fn move_key(&mut self, tx: &mut Tx, from: &[u8], to: &[u8], value: &[u8]) -> Result<bool> {
        self.write(tx, |tx, t| ops::move_key(tx, t, from, to, value))
    }
    /// Remove and return the smallest entry.
    pub fn pop_first(&mut self, tx: &mut Tx) -> Result<Option<Entry>> {
        self.write(tx, |tx, t| ops::remove(tx, t, Target::Rank(0)))
    }
    /// Remove and return the largest entry.
    pub fn pop_last(&mut self, tx: &mut Tx) -> Result<Option<Entry>> {
        self.write(tx, pop_last_in)
    }
    /// Remove ranks `start..=end` (see [`PTreeMap::remove_range_by_rank`]).
    pub fn remove_range_by_rank(&mut self, tx: &mut Tx, start: u64, end: u64) -> Result<u64> {
        self.write(tx, |tx, t| remove_rank_window(tx, t, start, end))
    }
    /// Remove the entries between the bounds (see [`PTreeMap::remove_range`]).
    pub fn remove_range(&mut self, tx: &mut Tx, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        self.write(tx, |tx, t| remove_bounds(tx, t, lo, hi))
    }
}

/// A lazy walk over a committed tree's entries (from [`PTreeMap::iter`] and
/// [`PTreeMap::iter_range`]): one leaf in DRAM at a time.
pub struct TreeIter<'a> {
    pool: &'a PoolInner,
    t: T<'static>,
    cur: Option<Cursor>,
    left: u64,
    forward: bool,
    started: bool,
}

impl<'a> TreeIter<'a> {
    fn new(pool: &'a PoolInner, t: T<'static>, a: u64, b: u64, rev: bool) -> Result<TreeIter<'a>> {
        let left = b.saturating_sub(a);
        let cur = if left == 0 {
            None
        } else {
            let src = Src::Pool(pool);
            Some(Cursor::at_rank(&src, &t, if rev { b - 1 } else { a })?)
        };
        Ok(TreeIter {
            pool,
            t,
            cur,
            left,
            forward: !rev,
            started: false,
        })
    }
}

impl Iterator for TreeIter<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.left == 0 {
            return None;
        }
        let src = Src::Pool(self.pool);
        let cur = self.cur.as_mut()?;
        if self.started {
            match cur.step(&src, &self.t, self.forward) {
                Ok(true) => {}
                Ok(false) => {
                    self.left = 0;
                    return None;
                }
                Err(e) => {
                    self.left = 0;
                    return Some(Err(e));
                }
            }
        }
        self.started = true;
        self.left -= 1;
        Some(cur.entry(&src))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, usize::try_from(self.left).ok())
    }
}
