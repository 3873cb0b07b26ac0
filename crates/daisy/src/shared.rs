//! The state of an open pool that its handles, its transactions and its collections share:
//! the file and mapping (`Media`, which `PoolInner` derefs to), the lanes and watermark
//! (`Lanes`), the volatile heap index; and what works on all of them: growth, the walk of the
//! chunk table, closing.

use crate::alloc::{HarvestedSet, Heap};
use crate::error::{Error, Result};
use crate::lanes::Lanes;
use crate::layout::*;
use crate::map;
use crate::media::Media;
use crate::recovery::RecoveryReport;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// One allocated object: offset and usable size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectInfo {
    /// Offset of the object.
    pub off: u64,
    /// Its usable size in bytes.
    pub size: u64,
}

pub(crate) struct PoolInner {
    /// The file, mapping, header and persistence functions (PoolInner derefs to it).
    pub media: Media,
    /// The lanes and the watermark protocol's state (lanes.rs).
    pub lanes: Lanes,
    pub heap: Mutex<Heap>,
    pub harvested: HarvestedSet,
    pub root_lock: Mutex<()>,
    pub fs_type: &'static str,
    /// Set once recovery finished (before the pool is handed out).
    pub recovered: std::sync::OnceLock<RecoveryReport>,
    /// Header offsets of collections open through a handle (handles are exclusive). A view is
    /// opened per command by a server, so claiming must be cheap: offsets are distinct
    /// 16-aligned numbers, not attacker-chosen, and a multiplicative hash serves.
    pub open_objects: Mutex<std::collections::HashSet<u64, OffsetHashBuilder>>,
    /// This session's undo table for direct stores (0 until the first `Tx::add_range`;
    /// undo.rs).
    pub undo_table: Mutex<u64>,
    /// Bytes that transactions committed in this session allocated (+) and freed (-): each
    /// commit adds its [`TxBuffers::alloc_balance`](crate::buffers::TxBuffers::alloc_balance).
    /// With `alloc_base` it gives the heap's allocated bytes without a scan
    /// ([`Pool::allocated_bytes`](crate::Pool::allocated_bytes)).
    pub alloc_net: std::sync::atomic::AtomicI64,
    /// The heap's allocated bytes minus `alloc_net`, from one scan at the first request.
    pub alloc_base: std::sync::OnceLock<i64>,
}

impl std::ops::Deref for PoolInner {
    type Target = Media;
    #[inline(always)]
    fn deref(&self) -> &Media {
        &self.media
    }
}

impl PoolInner {
    /// Make the durable watermark reach at least `target` (see [`Lanes::advance_watermark`]).
    #[inline]
    pub fn advance_watermark(&self, target: u64) -> Result<()> {
        self.lanes.advance_watermark(&self.media, target)
    }

    /// Make every committed transaction durable and retired.
    pub fn drain_all(&self) -> Result<()> {
        self.lanes.drain_all(&self.media)
    }

    /// Register an open collection handle; false when one is open already.
    pub fn claim_object(&self, off: u64) -> bool {
        self.open_objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(off)
    }

    pub fn release_object(&self, off: u64) {
        self.open_objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&off);
    }

    /// Grow the heap by at least `min_chunks` chunks. Called with the heap lock held.
    pub fn grow(&self, heap: &mut Heap, min_chunks: u64, requested: u64) -> Result<()> {
        let heap_end = self.heap_end();
        let cur = (heap_end - self.hdr.heap_off) / CHUNK_SIZE;
        let limit = self.max_size().saturating_sub(self.hdr.heap_off) / CHUNK_SIZE;
        let max = self.geo.max_chunks.min(limit);
        let full = || Error::PoolFull {
            path: self.path.clone(),
            requested,
            size: heap_end,
            max_size: self.max_size(),
        };
        if cur + min_chunks > max {
            return Err(full());
        }
        // Grow by a quarter of the current size, capped at max.
        // (At least one chunk: small pools stay small, which keeps crash images and tests
        // cheap; large pools grow by a quarter, so growth stays rare.)
        let step = min_chunks.max(cur / 4).max(1);
        let new = (cur + step).min(max);
        let new_end = self.hdr.heap_off + new * CHUNK_SIZE;
        if let Err(e) = map::fallocate(&self.file, heap_end, new_end - heap_end) {
            if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EFBIG) {
                return Err(full());
            }
            return Err(Error::io(&self.path, "grow file", e));
        }
        if self.map.len() < new_end as usize {
            self.map
                .grow(&self.file, new_end as usize)
                .map_err(|e| Error::io(&self.path, "mmap", e))?;
        }
        // The file's new length (and the extent's blocks) must be durable before heap_end
        // names them: on a DAX file system they live in the file system's journal, and a
        // power failure after the heap_end fence but before the journal commit would leave a
        // pool whose heap end lies past its file (refused at open as truncated). fdatasync
        // commits them; on tmpfs it costs a system call. Growth is rare (a quarter of the
        // pool at a time), so this is one sync per growth, in every mode.
        if !sim_fault!(GrowWithoutSync) {
            self.file
                .sync_data()
                .map_err(|e| self.io_err("fdatasync", e))?;
            #[cfg(feature = "sim")]
            crate::sim::on_file_synced(self.map.base(), new_end as usize);
        }
        sim_event!(Grow);
        // The new extent is durable and mapped; publishing heap_end is one 8-byte store.
        self.map
            .atomic_u64(STATE_HEAP_END)
            .store(new_end, Ordering::Release);
        self.persist.flush(self.map.at(STATE_HEAP_END, 8), 8);
        self.persist
            .fence()
            .map_err(|e| self.io_err("persist", e))?;
        self.heap_end_cache.store(new_end, Ordering::Release);
        heap.insert_extent(cur, new - cur);
        Ok(())
    }

    /// Every allocated object (scan of the chunk table and run bitmaps).
    pub fn allocated_objects(&self) -> Result<Vec<ObjectInfo>> {
        let mut out = Vec::new();
        self.for_each_object(|o| out.push(o))?;
        Ok(out)
    }

    /// (bytes, objects) allocated: the same scan, counting only.
    pub fn usage(&self) -> Result<(u64, u64)> {
        let (mut bytes, mut n) = (0, 0);
        self.for_each_object(|o| {
            bytes += o.size;
            n += 1;
        })?;
        Ok((bytes, n))
    }

    fn for_each_object(&self, mut out: impl FnMut(ObjectInfo)) -> Result<()> {
        for (c, entry) in self.chunks() {
            match entry {
                Some(ChunkEntry::Free) => {}
                Some(ChunkEntry::Large { chunks: n }) => {
                    // Listing it would hand out memory past the heap end (check reports the
                    // same entry as a problem).
                    if c + n as u64 > self.heap_chunks() {
                        return Err(self.large_past_end(c, n));
                    }
                    out(ObjectInfo {
                        off: self.geo.chunk_start(c),
                        size: n as u64 * CHUNK_SIZE,
                    });
                }
                Some(ChunkEntry::Run { class }) => {
                    let (n, _) = run_geometry(class as usize);
                    let base = self.geo.chunk_start(c);
                    for w in 0..(n as u64).div_ceil(64) {
                        let mut bits: u64 = self.map.read(base + w * 8);
                        while bits != 0 {
                            let b = bits.trailing_zeros() as u64;
                            bits &= bits - 1;
                            let idx = w * 64 + b;
                            if idx < n as u64 {
                                out(ObjectInfo {
                                    off: self.geo.block_off(c, class, idx as u32),
                                    size: SIZE_CLASSES[class as usize] as u64,
                                });
                            }
                        }
                    }
                }
                None => return Err(self.invalid_chunk_entry(c)),
            }
        }
        Ok(())
    }

    /// The one walk of the chunk table: each chunk of the heap in order with its decoded entry
    /// (None: an invalid encoding), the chunks a large object covers skipped. Reads only the
    /// table, never the heap. Used by the object listing, `pool check` and the heap index
    /// built on the first allocation.
    pub fn chunks(&self) -> ChunkWalk<'_> {
        ChunkWalk {
            media: &self.media,
            next: 0,
            end: self.heap_chunks(),
        }
    }

    /// Build the volatile heap index from the chunk table (on the first allocation after
    /// open): free extents and the runs not yet harvested, per class. Reads only the table (8
    /// bytes per chunk), never the heap.
    pub fn build_heap_index(&self, h: &mut Heap) -> Result<()> {
        h.unharvested = (0..SIZE_CLASSES.len()).map(|_| Vec::new()).collect();
        // A run of free chunks goes in as one extent.
        let mut free: Option<(u64, u64)> = None;
        for (c, entry) in self.chunks() {
            if entry == Some(ChunkEntry::Free) {
                match &mut free {
                    Some((s, n)) if *s + *n == c => *n += 1,
                    _ => {
                        if let Some((s, n)) = free.take() {
                            h.insert_extent(s, n);
                        }
                        free = Some((c, 1));
                    }
                }
                continue;
            }
            match entry {
                Some(ChunkEntry::Run { class }) => h.unharvested[class as usize].push(c),
                Some(_) => {}
                None => return Err(self.invalid_chunk_entry(c)),
            }
        }
        if let Some((s, n)) = free {
            h.insert_extent(s, n);
        }
        for v in h.unharvested.iter_mut() {
            v.reverse(); // pop() returns the lowest chunk first
        }
        // Anything the scan found free may have been freed by a transaction the watermark has
        // not passed: users of these chunks first advance the watermark to here.
        h.scan_ready = self.lanes.next_seq.load(Ordering::SeqCst) - 1;
        h.scanned = true;
        Ok(())
    }

    /// The error for a large object at chunk `c` of `n` chunks that runs past the heap end.
    pub fn large_past_end(&self, c: u64, n: u32) -> Error {
        Error::corrupt(
            &self.path,
            format!("chunk table entry {c}: large object of {n} chunks runs past the heap end"),
        )
    }

    /// The error for chunk table entry `c` that decodes to nothing.
    pub fn invalid_chunk_entry(&self, c: u64) -> Error {
        Error::corrupt(
            &self.path,
            format!("chunk table entry {c} has an invalid encoding"),
        )
    }
}

/// See [`PoolInner::chunks`].
pub(crate) struct ChunkWalk<'a> {
    media: &'a Media,
    next: u64,
    end: u64,
}

impl Iterator for ChunkWalk<'_> {
    type Item = (u64, Option<ChunkEntry>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let c = self.next;
        let e = self.media.chunk_entry(c);
        self.next += match e {
            Some(ChunkEntry::Large { chunks }) => (chunks as u64).max(1),
            _ => 1,
        };
        Some((c, e))
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // Best effort: make the last transactions' data durable so the next open has nothing
        // to replay. Errors here cannot be reported; recovery covers them.
        if !self.poisoned.load(Ordering::Acquire) && self.drain_all().is_ok() {
            // No transaction is open any more, so no lane's undo table word names an extent:
            // the next open need not read the table (undo.rs).
            let table = *self.undo_table.get_mut().unwrap_or_else(|e| e.into_inner());
            if table != 0 {
                let _ = crate::undo::store_word(
                    &self.media.map,
                    &self.media.persist,
                    STATE_UNDO_TABLE,
                    0,
                );
            }
        }
    }
}

/// Hasher of pool offsets ([`PoolInner::open_objects`], a tree view's cached nodes): one
/// multiply (Fibonacci hashing), the high half folded into the low bits (the table takes its
/// bucket from the low bits, and aligned offsets have zero low bits).
#[derive(Default, Clone, Copy)]
pub struct OffsetHasher(u64);

impl std::hash::Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ h >> 32;
    }
}

/// Builds [`OffsetHasher`]s.
pub type OffsetHashBuilder = std::hash::BuildHasherDefault<OffsetHasher>;
