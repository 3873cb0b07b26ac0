//! The crash-consistent allocator.
//!
//! On media (see layout.rs): a chunk table with one word per 256 KiB chunk (FREE, RUN(class),
//! LARGE(n)), and in each RUN chunk an allocation bitmap. Nothing else is persistent: free lists
//! live in DRAM and are rebuilt lazily, so opening a pool never scans the heap.
//!
//! Every persistent change goes through the transaction's redo log: allocating a block logs an
//! OR of its bitmap bit, freeing logs an AND-NOT, creating a run or a large object logs the chunk
//! table word. A crash before the commit point therefore leaves no trace of the allocation (no
//! leak); a crash after it is replayed.
//!
//! Volatile state and its invariants:
//! * `Heap` (one mutex): free chunk extents and the runs not yet *harvested*. It is built on the
//!   first allocation after open by scanning the chunk table (not the bitmaps).
//! * A run is harvested once per process: the zero bits of its bitmap are moved into the
//!   harvesting lane's cache. From then on each of its free blocks is in exactly one place: a
//!   lane cache, a lane's deferred list, or reserved by a running transaction.
//! * Reuse rule (docs/FORMAT.md, "Reuse after free"): a block or chunk freed by transaction `s`
//!   is reused only after the durable watermark reaches `s`, so that no valid older log record
//!   can be replayed over the new owner's data. Frees wait in a per-lane deferred queue; a
//!   harvest first drains the watermark to the newest committed transaction.

use crate::layout::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// Volatile, process-wide heap state (behind a mutex in the pool).
#[derive(Default)]
pub(crate) struct Heap {
    pub scanned: bool,
    /// Chunks the scan found FREE are reusable once the watermark reaches this seq.
    pub scan_ready: u64,
    /// Free extents: first chunk index -> number of chunks.
    pub free_extents: BTreeMap<u64, u64>,
    /// Runs not yet harvested, per class (chunk indices).
    pub unharvested: Vec<Vec<u64>>,
}

impl Heap {
    /// Insert a free extent, merging with neighbours.
    pub fn insert_extent(&mut self, mut start: u64, mut n: u64) {
        if let Some((&ps, &pn)) = self.free_extents.range(..start).next_back() {
            debug_assert!(ps + pn <= start, "overlapping free extents");
            if ps + pn == start {
                self.free_extents.remove(&ps);
                start = ps;
                n += pn;
            }
        }
        if let Some(&nn) = self.free_extents.get(&(start + n)) {
            self.free_extents.remove(&(start + n));
            n += nn;
        }
        self.free_extents.insert(start, n);
    }

    /// Take `n` contiguous chunks (first fit), or None.
    pub fn take_extent(&mut self, n: u64) -> Option<u64> {
        let (&s, &len) = self.free_extents.iter().find(|(_, &len)| len >= n)?;
        self.free_extents.remove(&s);
        if len > n {
            self.free_extents.insert(s + n, len - n);
        }
        Some(s)
    }

    #[cfg(test)]
    pub fn free_chunks(&self) -> u64 {
        self.free_extents.values().sum()
    }
}

/// One bit per chunk: has this run been harvested in this process?
pub(crate) struct HarvestedSet {
    words: Box<[AtomicU64]>,
}

impl HarvestedSet {
    pub fn new(max_chunks: u64) -> Self {
        HarvestedSet {
            words: (0..max_chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    pub fn set(&self, chunk: u64) {
        self.words[(chunk / 64) as usize].fetch_or(1 << (chunk % 64), Ordering::AcqRel);
    }
    pub fn clear(&self, chunk: u64) {
        self.words[(chunk / 64) as usize].fetch_and(!(1 << (chunk % 64)), Ordering::AcqRel);
    }
    pub fn get(&self, chunk: u64) -> bool {
        self.words[(chunk / 64) as usize].load(Ordering::Acquire) & (1 << (chunk % 64)) != 0
    }
}

/// Something a committed transaction freed, waiting for the watermark before reuse.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Freed {
    Block { off: u64, class: u16 },
    Large { chunk: u64, chunks: u64 },
}

/// Per-lane allocator state (lives in the lane, so the hot path takes no shared lock).
pub(crate) struct LaneAlloc {
    /// Free blocks ready for reuse, per class.
    pub caches: Vec<Vec<u64>>,
    /// (seq of the freeing transaction, what was freed), in seq order.
    pub deferred: VecDeque<(u64, Freed)>,
}

impl LaneAlloc {
    pub fn new() -> Self {
        LaneAlloc {
            caches: (0..SIZE_CLASSES.len()).map(|_| Vec::new()).collect(),
            deferred: VecDeque::new(),
        }
    }
}

/// Where a block lives: its run chunk, index, bitmap word and bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockAddr {
    pub chunk: u64,
    pub class: u16,
    pub index: u32,
    pub bitmap_word: u64,
    pub mask: u64,
}

/// Pool geometry needed to translate offsets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub heap_off: u64,
    pub chunk_table_off: u64,
    pub max_chunks: u64,
}

impl Geometry {
    #[inline]
    pub fn chunk_start(&self, chunk: u64) -> u64 {
        self.heap_off + chunk * CHUNK_SIZE
    }
    #[inline]
    pub fn chunk_entry_off(&self, chunk: u64) -> u64 {
        self.chunk_table_off + chunk * 8
    }
    #[inline]
    pub fn chunk_of(&self, off: u64) -> Option<u64> {
        if off < self.heap_off {
            return None;
        }
        let c = (off - self.heap_off) / CHUNK_SIZE;
        (c < self.max_chunks).then_some(c)
    }
    /// Address of block `index` in run `chunk` of class `class`.
    #[inline]
    pub fn block_addr(&self, chunk: u64, class: u16, index: u32) -> BlockAddr {
        BlockAddr {
            chunk,
            class,
            index,
            bitmap_word: self.chunk_start(chunk) + (index as u64 / 64) * 8,
            mask: 1 << (index % 64),
        }
    }
    #[inline]
    pub fn block_off(&self, chunk: u64, class: u16, index: u32) -> u64 {
        let (_, data_off) = run_geometry(class as usize);
        self.chunk_start(chunk)
            + data_off as u64
            + index as u64 * SIZE_CLASSES[class as usize] as u64
    }
    /// The block containing exactly `off` in run `chunk`, if `off` is a block start.
    pub fn block_at(&self, chunk: u64, class: u16, off: u64) -> Option<BlockAddr> {
        let (n, data_off) = run_geometry(class as usize);
        let first = self.chunk_start(chunk) + data_off as u64;
        if off < first {
            return None;
        }
        let size = SIZE_CLASSES[class as usize] as u64;
        let rel = off - first;
        if !rel.is_multiple_of(size) || rel / size >= n as u64 {
            return None;
        }
        Some(self.block_addr(chunk, class, (rel / size) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_merge_and_split() {
        let mut h = Heap::default();
        h.insert_extent(0, 2);
        h.insert_extent(4, 2);
        h.insert_extent(2, 2);
        assert_eq!(h.free_extents.len(), 1);
        assert_eq!(h.free_chunks(), 6);
        assert_eq!(h.take_extent(4), Some(0));
        assert_eq!(h.take_extent(4), None);
        assert_eq!(h.take_extent(2), Some(4));
        assert_eq!(h.free_chunks(), 0);
    }

    #[test]
    fn block_addressing_roundtrip() {
        let g = Geometry {
            heap_off: 1 << 20,
            chunk_table_off: 1 << 16,
            max_chunks: 100,
        };
        for class in [0u16, 3, 20, 43] {
            let (n, _) = run_geometry(class as usize);
            for index in [0, 1, 63, 64, n - 1].into_iter().filter(|&i| i < n) {
                let off = g.block_off(7, class, index);
                let b = g.block_at(7, class, off).unwrap();
                assert_eq!(b.index, index);
                assert_eq!(g.chunk_of(off), Some(7));
                assert!(g.block_at(7, class, off + 8).is_none());
            }
        }
    }
}
