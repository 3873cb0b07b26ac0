//! Allocation inside a transaction: objects come from the lane's caches (blocks of runs, each
//! allocation an OR of its bitmap bit in the record) or from the heap's free extents (whole
//! chunks, a LARGE chunk-table entry), new runs carved from free chunks, frees logged as
//! AND-NOTs and queued for reuse until the watermark passes them (docs/FORMAT.md section 7).

use super::Tx;
use crate::alloc::Freed;
use crate::error::{Error, Result};
use crate::layout::*;
use crate::log::*;
use crate::ptr::PPtr;
use bytemuck::{Pod, Zeroable};
use std::sync::atomic::Ordering;

impl<'p> Tx<'p> {
    /// Allocate a `T` initialised to `value`.
    pub fn alloc<T: Pod>(&mut self, value: &T) -> Result<PPtr<T>> {
        let size = std::mem::size_of::<T>() as u64;
        let off = self.alloc_raw(size.max(1))?;
        self.write_bytes(off, bytemuck::bytes_of(value))?;
        Ok(PPtr::from_offset(off))
    }

    /// Allocate a zeroed `T`.
    pub fn alloc_zeroed<T: Pod + Zeroable>(&mut self) -> Result<PPtr<T>> {
        let p = self.alloc_zeroed_bytes(std::mem::size_of::<T>() as u64)?;
        Ok(p.cast())
    }

    /// Allocate `len` zeroed bytes.
    pub fn alloc_zeroed_bytes(&mut self, len: u64) -> Result<PPtr<u8>> {
        let off = self.alloc_raw(len.max(1))?;
        let size = self.st.buf.fresh.last().map(|f| f.1).unwrap_or(len);
        self.pool.map.fill(off, size as usize, 0);
        self.note_fresh_dirty(off, size);
        Ok(PPtr::from_offset(off))
    }

    /// Allocate `len` bytes holding `data` (len = data.len()).
    pub fn alloc_bytes(&mut self, data: &[u8]) -> Result<PPtr<u8>> {
        let off = self.alloc_raw((data.len() as u64).max(1))?;
        self.write_bytes(off, data)?;
        Ok(PPtr::from_offset(off))
    }

    /// Allocate `data.len()` bytes holding `data`, written with ordinary stores and flushed at
    /// commit, so that the caller may go on storing into the object in place (a hash-map
    /// batch's segments) until then.
    pub(crate) fn alloc_bytes_cached(&mut self, data: &[u8]) -> Result<u64> {
        let off = self.alloc_raw((data.len() as u64).max(1))?;
        self.pool.map.write_bytes(off, data);
        self.note_fresh_dirty(off, data.len() as u64);
        Ok(off)
    }

    /// Allocate `size` bytes without writing them; returns the offset. For a collection (or
    /// a binding: the C API's `daisy_tx_alloc`) that fills only part of a new object: its
    /// writes through [`Tx::write_bytes`] go in place (the object is this transaction's) and
    /// only those bytes are made durable at commit. The bytes not written hold whatever the
    /// block held before: nothing may read them as data.
    pub fn alloc_uninit(&mut self, size: u64) -> Result<u64> {
        self.alloc_raw(size.max(1))
    }

    /// Usable size of an allocated object (at least what was asked for).
    pub fn usable_size<T>(&self, p: PPtr<T>) -> Result<u64> {
        let off = p.offset();
        if let Some((o, s)) = self.st.buf.fresh_lookup(off, 1) {
            if o == off {
                return Ok(s);
            }
        }
        let chunk = self.pool.geo.chunk_of(off).ok_or(Error::InvalidPointer {
            offset: off,
            why: "outside the heap",
        })?;
        match self.pool.chunk_entry(chunk) {
            Some(ChunkEntry::Run { class }) => Ok(SIZE_CLASSES[class as usize] as u64),
            Some(ChunkEntry::Large { chunks }) => Ok(chunks as u64 * CHUNK_SIZE),
            _ => Err(Error::InvalidPointer {
                offset: off,
                why: "not an allocated object",
            }),
        }
    }

    /// Move frees whose transaction the durable watermark has passed into the caches.
    fn release_deferred(&mut self) {
        let st = &mut *self.st;
        let claim = self
            .pool
            .lanes
            .persisted_claim
            .load(Ordering::Acquire)
            .max(st.durable_claim);
        while let Some(&(seq, f)) = st.alloc.deferred.front() {
            if seq > claim && !sim_fault!(EarlyBlockReuse) {
                break;
            }
            sim_event!(DeferredReuse);
            st.alloc.deferred.pop_front();
            match f {
                Freed::Block { off, class } => st.alloc.caches[class as usize].push(off),
                Freed::Large { chunk, chunks } => {
                    let mut h = self.pool.heap.lock().unwrap_or_else(|e| e.into_inner());
                    h.insert_extent(chunk, chunks);
                }
            }
        }
    }

    /// Take `n` chunks from the heap (growing the pool if needed).
    pub(super) fn take_chunks(&mut self, n: u64, requested: u64) -> Result<u64> {
        let pool = self.pool;
        let ready;
        let start;
        {
            let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
            if !h.scanned {
                pool.build_heap_index(&mut h)?;
            }
            ready = h.scan_ready;
            start = match h.take_extent(n) {
                Some(s) => s,
                None => {
                    pool.grow(&mut h, n, requested)?;
                    h.take_extent(n).ok_or_else(|| Error::PoolFull {
                        path: pool.path.clone(),
                        requested,
                        size: pool.heap_end(),
                        max_size: pool.max_size(),
                    })?
                }
            };
        }
        // Chunks found FREE by the scan may have been freed by transactions the watermark has
        // not passed yet; wait for it before writing into them.
        if let Err(e) = pool.advance_watermark(ready) {
            let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
            h.insert_extent(start, n);
            return Err(e);
        }
        Ok(start)
    }

    /// Fill the lane cache of `class` (harvest an existing run, or create a new one).
    fn refill(&mut self, class: usize) -> Result<()> {
        let pool = self.pool;
        // Try to harvest a run that existed before this process opened the pool.
        let harvested = {
            let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
            if !h.scanned {
                pool.build_heap_index(&mut h)?;
            }
            let mut got = None;
            while let Some(chunk) = h.unharvested[class].pop() {
                // Snapshot the free blocks while holding the heap lock; frees applied later
                // see the harvested flag and go to their own lane's cache instead.
                let (n, _) = run_geometry(class);
                let base = pool.geo.chunk_start(chunk);
                let mut blocks = Vec::new();
                for w in 0..(n as u64).div_ceil(64) {
                    let bits: u64 = pool.map.atomic_u64(base + w * 8).load(Ordering::SeqCst);
                    let mut free = !bits;
                    while free != 0 {
                        let b = free.trailing_zeros() as u64;
                        free &= free - 1;
                        let idx = w * 64 + b;
                        if idx < n as u64 {
                            blocks.push(pool.geo.block_off(chunk, class as u16, idx as u32));
                        }
                    }
                }
                pool.harvested.set(chunk);
                if !blocks.is_empty() {
                    got = Some((blocks, pool.lanes.next_seq.load(Ordering::SeqCst) - 1));
                    break;
                }
            }
            got
        };
        if let Some((mut blocks, ready)) = harvested {
            pool.advance_watermark(ready)?;
            blocks.reverse(); // hand out in address order
            self.st.alloc.caches[class].extend(blocks);
            return Ok(());
        }
        // Create a new run in a fresh chunk: zero its bitmap in place (the chunk is free and
        // unreachable) and log the chunk table entry.
        let chunk = self.take_chunks(1, SIZE_CLASSES[class] as u64)?;
        self.st.buf.chunks_taken.push((chunk, 1, true));
        let (n, data_off) = run_geometry(class);
        let base = pool.geo.chunk_start(chunk);
        // The bitmap must be zero on media whenever the RUN entry is, so the zeroing is logged
        // with it (the chunk may hold an old object's bytes). Zeroing in place now is harmless:
        // the chunk is unreachable until commit.
        // (Simulator builds: whether the bitmap held anything, the case where its zeroing
        // on media matters, for the fault that leaves it out.)
        let stale_bitmap = cfg!(feature = "sim")
            && (0..data_off as u64 / 8).any(|w| pool.map.read::<u64>(base + w * 8) != 0);
        pool.map.fill(base, data_off as usize, 0);
        if !(stale_bitmap && sim_fault!(NoRunBitmapZero)) {
            self.log_zero(base, data_off as u64)?;
        }
        let entry = ChunkEntry::Run {
            class: class as u16,
        }
        .encode();
        self.log_copy(pool.geo.chunk_entry_off(chunk), &entry.to_le_bytes())?;
        pool.harvested.set(chunk);
        let cache = &mut self.st.alloc.caches[class];
        for i in (0..n).rev() {
            cache.push(pool.geo.block_off(chunk, class as u16, i));
        }
        Ok(())
    }

    /// Allocate `size` bytes; returns the offset. The object is recorded as fresh.
    fn alloc_raw(&mut self, size: u64) -> Result<u64> {
        match self.alloc_raw_once(size) {
            // This lane's frees wait for the watermark to pass their transactions before their
            // memory is reused (up to `D` commits: 30 with 32 log slots per lane). A full pool
            // with such frees waiting makes them durable now (one watermark advance) and tries
            // again, instead of failing while freed memory sits idle.
            Err(Error::PoolFull { .. }) if !self.st.alloc.deferred.is_empty() => {
                let newest = self.st.alloc.deferred.back().map(|d| d.0).unwrap_or(0);
                self.pool.advance_watermark(newest)?;
                self.alloc_raw_once(size)
            }
            r => r,
        }
    }

    fn alloc_raw_once(&mut self, size: u64) -> Result<u64> {
        self.release_deferred();
        match class_for(size) {
            Some(class) => {
                if self.st.alloc.caches[class].is_empty() {
                    self.refill(class)?;
                }
                let off = self.st.alloc.caches[class].pop().expect("refilled cache");
                let chunk = self.pool.geo.chunk_of(off).expect("block in heap");
                let b = self
                    .pool
                    .geo
                    .block_at(chunk, class as u16, off)
                    .expect("cache holds block starts");
                self.st.buf.reserved.push((off, class as u16));
                if let Err(e) = self.log_bitop(b.bitmap_word, EntryKind::Or, b.mask) {
                    self.st.buf.reserved.pop();
                    self.st.alloc.caches[class].push(off);
                    return Err(e);
                }
                self.st.buf.push_fresh((off, SIZE_CLASSES[class] as u64));
                Ok(off)
            }
            None => {
                let n = size.div_ceil(CHUNK_SIZE);
                if n > u32::MAX as u64 {
                    return Err(Error::PoolFull {
                        path: self.pool.path.clone(),
                        requested: size,
                        size: self.pool.heap_end(),
                        max_size: self.pool.max_size(),
                    });
                }
                let chunk = self.take_chunks(n, size)?;
                self.st.buf.chunks_taken.push((chunk, n, false));
                let entry = ChunkEntry::Large { chunks: n as u32 }.encode();
                self.log_copy(self.pool.geo.chunk_entry_off(chunk), &entry.to_le_bytes())?;
                let off = self.pool.geo.chunk_start(chunk);
                self.st.buf.push_fresh((off, n * CHUNK_SIZE));
                Ok(off)
            }
        }
    }

    /// The mask already logged for `word` with `kind` in this transaction (0 if none).
    fn pending_mask(&self, word: u64, kind: EntryKind) -> u64 {
        let b = &self.st.buf;
        b.find_bitop(word, kind as u8)
            .map(|p| u64::from_le_bytes(b.record[p..p + 8].try_into().unwrap()))
            .unwrap_or(0)
    }

    /// Free an object allocated by `alloc*` (in this or an earlier transaction).
    ///
    /// The media tells committed objects from ones this transaction allocated: an allocation
    /// sets its bitmap bit (or chunk entry) only at commit. So the common case needs no search
    /// of this transaction's own allocations.
    pub fn free<T>(&mut self, p: PPtr<T>) -> Result<()> {
        let off = p.offset();
        let invalid = |why| Error::InvalidPointer { offset: off, why };
        let chunk = self
            .pool
            .geo
            .chunk_of(off)
            .filter(|&c| c < self.pool.heap_chunks())
            .ok_or_else(|| invalid("outside the heap"))?;
        match self.pool.chunk_entry(chunk) {
            Some(ChunkEntry::Run { class }) => {
                let b = self
                    .pool
                    .geo
                    .block_at(chunk, class, off)
                    .ok_or_else(|| invalid("not the start of an object"))?;
                let word: u64 = self
                    .pool
                    .map
                    .atomic_u64(b.bitmap_word)
                    .load(Ordering::Acquire);
                if word & b.mask == 0 {
                    return self.cancel_fresh(off);
                }
                if self.pending_mask(b.bitmap_word, EntryKind::AndNot) & b.mask != 0 {
                    return Err(invalid("freed twice in one transaction"));
                }
                self.log_bitop(b.bitmap_word, EntryKind::AndNot, b.mask)?;
                self.st.buf.freed.push(Freed::Block { off, class });
                Ok(())
            }
            Some(ChunkEntry::Large { chunks }) => {
                if off != self.pool.geo.chunk_start(chunk) {
                    return Err(invalid("not the start of an object"));
                }
                // The freed extent goes back to the heap: one that runs past the heap end would
                // later be handed out as memory that is not mapped.
                if chunk + chunks as u64 > self.pool.heap_chunks() {
                    return Err(Error::corrupt(
                        &self.pool.path,
                        format!(
                            "chunk table entry {chunk}: large object of {chunks} chunks runs \
                             past the heap end"
                        ),
                    ));
                }
                // Likewise one that spans another object's chunk: reusing the extent would hand
                // that chunk out twice.
                if let Some(k) = (1..chunks as u64)
                    .find(|&k| self.pool.chunk_entry(chunk + k) != Some(ChunkEntry::Free))
                {
                    return Err(Error::corrupt(
                        &self.pool.path,
                        format!(
                            "chunk {}: covered by the large object at chunk {chunk} but not FREE",
                            chunk + k
                        ),
                    ));
                }
                if self
                    .st
                    .buf
                    .freed
                    .iter()
                    .any(|f| matches!(f, Freed::Large { chunk: c, .. } if *c == chunk))
                {
                    return Err(invalid("freed twice in one transaction"));
                }
                self.log_copy(
                    self.pool.geo.chunk_entry_off(chunk),
                    &CHUNK_FREE.to_le_bytes(),
                )?;
                self.st.buf.freed.push(Freed::Large {
                    chunk,
                    chunks: chunks as u64,
                });
                Ok(())
            }
            // FREE on media: a large object or a new run created by this transaction, or
            // nothing at all.
            Some(ChunkEntry::Free) => self.cancel_fresh(off),
            None => Err(Error::corrupt(
                &self.pool.path,
                format!("chunk table entry {chunk} has an invalid encoding"),
            )),
        }
    }

    /// Free an object this transaction allocated: cancel the allocation.
    fn cancel_fresh(&mut self, off: u64) -> Result<()> {
        let buf = &mut self.st.buf;
        let Some(i) = buf.fresh_pos.find(&buf.fresh, off) else {
            return Err(Error::InvalidPointer {
                offset: off,
                why: "not allocated (double free?)",
            });
        };
        let size = buf.fresh[i].1;
        buf.unindex_fresh(i, off, size);
        buf.fresh_pos.swap_remove(&mut buf.fresh, i, off);
        // Its bytes must not be logged at commit: the block goes back to the cache now, and a
        // later owner's unlogged contents would be overwritten when this record is replayed.
        self.st.buf.cut_fresh_dirty(off, off + size);
        let buf = &mut self.st.buf;
        if let Some(j) = buf.reserved_pos.find(&buf.reserved, off) {
            let class = buf.reserved[j].1;
            buf.reserved_pos.swap_remove(&mut buf.reserved, j, off);
            let chunk = self.pool.geo.chunk_of(off).expect("heap block");
            let b = self
                .pool
                .geo
                .block_at(chunk, class, off)
                .expect("block start");
            let buf = &mut self.st.buf;
            let pos = buf
                .find_bitop(b.bitmap_word, EntryKind::Or as u8)
                .expect("allocation logged its bit");
            let m = u64::from_le_bytes(buf.record[pos..pos + 8].try_into().unwrap()) & !b.mask;
            buf.record[pos..pos + 8].copy_from_slice(&m.to_le_bytes());
            self.st.alloc.caches[class as usize].push(off);
        } else {
            // A large object: log the chunk entry back to FREE (later entries win).
            let chunk = self.pool.geo.chunk_of(off).expect("heap chunk");
            self.log_copy(
                self.pool.geo.chunk_entry_off(chunk),
                &CHUNK_FREE.to_le_bytes(),
            )?;
            // The chunks stay in `chunks_taken` (returned if this transaction aborts) and are
            // queued as freed (released after the watermark if it commits).
            if let Some(&(c, n, _)) = self
                .st
                .buf
                .chunks_taken
                .iter()
                .find(|c| c.0 == chunk && !c.2)
            {
                self.st.buf.freed.push(Freed::Large {
                    chunk: c,
                    chunks: n,
                });
            }
        }
        Ok(())
    }
}
