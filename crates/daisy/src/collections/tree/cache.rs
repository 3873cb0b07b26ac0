//! A [`TreeMapView`](super::TreeMapView)'s DRAM copies of its tree's nodes, as the view's
//! transaction sees them: a descent searches a cached internal node in DRAM instead of
//! reading its header, index and probed items through the transaction (each read also looks
//! up the transaction's own writes), and a leaf read again and again (a pop from either end)
//! is copied from DRAM.
//!
//! Why it stays coherent (every cached image equals the node's bytes as the transaction
//! sees them):
//! * It serves one transaction only: every view operation first hands the cache its
//!   transaction's [`Tx::serial`](crate::Tx::serial) (unique among the pool handle's
//!   transactions), and a different serial empties it. So a transaction that aborted leaves
//!   nothing behind, and nothing written by another transaction is ever served.
//! * An image enters only as read through the transaction ([`Img::read`] of `Src::Tx`).
//! * Every write of the tree code goes through [`T::write`](super::ops::T::write) (directly
//!   or through [`write_diff`](super::node::write_diff)), naming the node (or header) it
//!   writes into, which applies the same bytes to that node's cached image after the
//!   transaction took them (tree code never writes one node's bytes as part of another's),
//!   and every free through
//!   [`T::free`](super::ops::T::free), which drops the freed node's image. (The one other
//!   write, of an item object's bytes just after its allocation, overlaps no live node.)
//!   Nothing else
//!   writes a tree's nodes inside a transaction: the view holds the tree's claim, so no
//!   other handle or view of it exists.
//! * A view operation that fails empties the cache (a write may have been half done).
//!
//! Only internal nodes are cached on first read (a few hundred for a million entries); a leaf
//! is cached when it is read a second time among the last few leaf reads (a pop's leaf, not
//! the random leaves of inserts), and at most [`LEAF_MAX`] leaves are held.

use super::node::{Geo, Img};
use crate::collections::table::Src;
use crate::error::Result;
use crate::shared::OffsetHashBuilder;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

/// Internal nodes held at most (1 KiB each by default); past it, new ones are not cached.
const INNER_MAX: usize = 2048;
/// Leaves held at most (the oldest goes first).
const LEAF_MAX: usize = 4;
/// Leaf offsets remembered to spot a leaf read twice.
const RECENT: usize = 8;

#[derive(Default)]
struct State {
    /// The transaction the images belong to (0: none yet).
    serial: u64,
    /// Node offset -> image.
    nodes: HashMap<u64, Img, OffsetHashBuilder>,
    inner: usize,
    /// Cached leaves, oldest first (may name leaves dropped since).
    leaves: VecDeque<u64>,
    recent: [u64; RECENT],
    recent_at: usize,
}

impl State {
    fn clear(&mut self) {
        self.nodes.clear();
        self.inner = 0;
        self.leaves.clear();
        self.recent = [0; RECENT];
    }
    fn remove(&mut self, off: u64) {
        if let Some(img) = self.nodes.remove(&off) {
            if !img.leaf() {
                self.inner -= 1;
            }
        }
    }
}

/// See the module comment.
#[derive(Default)]
pub struct NodeCache {
    /// Boxed: a view stays small (a sorted set's handle holds one).
    st: Box<RefCell<State>>,
}

impl std::fmt::Debug for NodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeCache({} nodes)", self.st.borrow().nodes.len())
    }
}

impl NodeCache {
    /// Serve transaction `serial` from now on: another transaction's images are dropped.
    pub fn begin(&self, serial: u64) {
        let mut st = self.st.borrow_mut();
        if st.serial != serial {
            st.clear();
            st.serial = serial;
        }
    }

    /// Drop every image.
    pub fn clear(&self) {
        self.st.borrow_mut().clear();
    }

    /// The transaction wrote `bytes` at `addr`, inside the object at `obj`: apply them to
    /// its image, if cached. (A write that would pass the image's end, which the tree's code
    /// never makes, empties the cache.)
    #[inline]
    pub fn patch(&self, obj: u64, addr: u64, bytes: &[u8]) {
        let mut st = self.st.borrow_mut();
        if st.nodes.is_empty() {
            return;
        }
        let Some(img) = st.nodes.get_mut(&obj) else {
            return;
        };
        let at = addr.wrapping_sub(obj) as usize;
        match img.b.get_mut(at..at.wrapping_add(bytes.len())) {
            Some(dst) if addr >= obj => dst.copy_from_slice(bytes),
            _ => st.clear(),
        }
    }

    /// The object at `off` was freed: drop its image, if it is a node's.
    pub fn evict(&self, off: u64) {
        self.st.borrow_mut().remove(off);
    }

    /// Run `f` on the internal node at `off` (at `level`, 1 or more), read through `src` (the
    /// cache's transaction) and kept when not cached yet.
    pub fn with_inner<R>(
        &self,
        src: &Src,
        off: u64,
        geo: Geo,
        level: u64,
        f: impl FnOnce(&Img) -> Result<R>,
    ) -> Result<R> {
        let mut st = self.st.borrow_mut();
        if let Some(img) = st.nodes.get(&off) {
            if img.level() as u64 == level {
                return f(img);
            }
            // Checked as a read checks it (a damaged tree): the error comes from the read.
        }
        let img = Img::read(src, off, geo, level)?;
        if st.inner >= INNER_MAX {
            return f(&img);
        }
        st.remove(off);
        st.inner += 1;
        let img = st.nodes.entry(off).or_insert(img);
        f(img)
    }

    /// A copy of the node at `off`, at `level`, as `src` (the cache's transaction) sees it.
    pub fn node(&self, src: &Src, off: u64, geo: Geo, level: u64) -> Result<Img> {
        if level > 0 {
            return self.with_inner(src, off, geo, level, |img| Ok(img.clone()));
        }
        let mut st = self.st.borrow_mut();
        if let Some(img) = st.nodes.get(&off) {
            if img.leaf() {
                return Ok(img.clone());
            }
        }
        let img = Img::read(src, off, geo, 0)?;
        if st.recent.contains(&off) {
            st.remove(off);
            st.nodes.insert(off, img.clone());
            st.leaves.push_back(off);
            while st.leaves.len() > LEAF_MAX {
                let old = st.leaves.pop_front().expect("a leaf");
                if st.nodes.get(&old).is_some_and(|i| i.leaf()) {
                    st.nodes.remove(&old);
                }
            }
        } else {
            let at = st.recent_at;
            st.recent[at] = off;
            st.recent_at = (at + 1) % RECENT;
        }
        Ok(img)
    }
}
