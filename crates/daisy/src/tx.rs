//! Transactions: redo logging with one fence per commit.
//!
//! A transaction buffers its writes in DRAM, in the on-media entry format. Commit:
//!
//! 1. publish a lower bound of the sequence number it is about to take, then take `seq` from
//!    the pool's global counter (a fetch_add: no lock);
//! 2. write header + entries into the lane's next log slot and flush them;
//! 3. **fence: the commit point.** The record is durable, so the transaction is;
//! 4. apply the entries in place and flush the targets *without* a fence: the lane's next
//!    commit fence (or a helper, or close) makes them durable.
//!
//! Why an old record is never replayed over newer data: every record carries `claim`, a
//! watermark W such that every transaction with seq <= W was durably applied before the record
//! was written. Recovery takes the largest claim it finds (and the state page's watermark),
//! ignores records with seq <= W, and replays the rest in seq order. A slot is reused only once
//! a durable claim covers its record. See docs/FORMAT.md, "Recovery and the watermark", for the
//! whole argument.
//!
//! **One-word transactions.** A transaction whose only effect is one aligned 8-byte store into
//! the heap (no allocation, no free) needs no log when no record that recovery might replay
//! exists: the store is atomic under power failure, and its flush and fence make it durable.
//! So when the persisted watermark covers every committed transaction
//! (`persisted_claim >= next_seq - 1`), commit stores the word in place, flushes its line and
//! fences, and takes no sequence number. Without that condition a replayed older record could
//! write the word back to an older value; the transaction is then logged as usual, and after
//! [`IN_PLACE_AFTER`] such logged one-word commits in a row the lane retires everything
//! committed (`advance_watermark`, a fence or two; only when no other lane needs help, which
//! would mean re-reading its log) so that the next ones go in place. Later
//! logged transactions read the in-place value like any other, so their replay is right.
//!
//! Writes into blocks allocated by the same transaction bypass the log: such a block is
//! unreachable until commit, so its bytes are written in place and flushed before the commit
//! fence. Reuse of freed blocks is deferred until the watermark passes the freeing transaction
//! (alloc.rs), so no replayed record can ever touch a block's new contents.

use crate::alloc::Freed;
use crate::error::{Error, Result};
use crate::lanes::{defer_commits, Lane, LaneState};
use crate::layout::*;
use crate::lock::SpinGuard;
use crate::log::*;

use crate::ptr::PPtr;
use crate::shared::PoolInner;
use bytemuck::{Pod, Zeroable};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Logged one-word commits in a row after which a lane retires every committed transaction so
/// that one-word transactions can go in place again (see the module docs).
pub const IN_PLACE_AFTER: u32 = 4;

/// New objects whose in-place contents total at most this many bytes are logged at commit;
/// larger ones cost one extra fence (`Tx::persist_fresh`).
pub const FRESH_LOG_MAX: u64 = 4096;

thread_local! {
    static LANE_HINT: Cell<usize> = const { Cell::new(usize::MAX) };
    static THREAD_TOKEN: u8 = const { 0 };
}

/// Does the calling thread hold an open transaction (of any pool)? Hash maps then keep their
/// own operations logged: an in-place write must not run while a transaction that may have
/// written the same map is still to commit (collections/table.rs, "In-place slot writes").
#[inline(always)]
pub(crate) fn thread_in_tx() -> bool {
    crate::persist::open_transactions() != 0
}

/// A nonzero number unique to the calling thread while it lives (its thread-local's address).
#[inline(always)]
fn thread_token() -> usize {
    THREAD_TOKEN.with(|t| t as *const u8 as usize)
}
static NEXT_LANE_HINT: AtomicUsize = AtomicUsize::new(0);

/// A running transaction. Created by [`crate::Pool::transaction`].
pub struct Tx<'p> {
    pool: &'p PoolInner,
    lane: &'p Lane,
    st: SpinGuard<'p, LaneState>,
    done: bool,

    /// A transaction stays on the thread that began it (not `Send`): its lane records that
    /// thread as owner, and the thread's count of open transactions (`thread_in_tx`) must
    /// drop on the same thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'p> Tx<'p> {
    #[inline(always)]
    pub(crate) fn begin(pool: &'p PoolInner) -> Result<Tx<'p>> {
        if pool.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: pool.path.clone(),
            });
        }
        let n = pool.lanes.len();
        let mut start = LANE_HINT.with(|h| h.get());
        if start < n {
            // Fast path: the thread's usual lane is free.
            if let Some(st) = pool.lanes[start].state.try_lock() {
                // The hint is per thread, shared by all pools: register the lane with this
                // pool's watermark scan if it is new here.
                if pool.lanes.in_use.load(Ordering::Relaxed) <= start {
                    pool.lanes.in_use.fetch_max(start + 1, Ordering::SeqCst);
                }
                pool.lanes[start]
                    .owner
                    .store(thread_token(), Ordering::Relaxed);
                crate::persist::enter_transaction();
                return Ok(Tx {
                    pool,
                    lane: &pool.lanes[start],
                    st,
                    done: false,
                    _not_send: std::marker::PhantomData,
                });
            }
        }
        if start >= n {
            start = NEXT_LANE_HINT.fetch_add(1, Ordering::Relaxed) % n;
            LANE_HINT.with(|h| h.set(start));
        }
        // The usual lane is busy (another thread, or a transaction nested in this one): take
        // any free lane, or wait for the usual one when every lane is busy.
        let got = (0..n).find_map(|i| {
            let idx = (start + i) % n;
            pool.lanes[idx].state.try_lock().map(|g| (idx, g))
        });
        let me = thread_token();
        let (idx, st) = match got {
            Some(g) => g,
            None if pool.lanes[start].owner.load(Ordering::Relaxed) != me => {
                (start, pool.lanes[start].state.lock())
            }
            None => {
                // This thread's own open transaction holds its usual lane, so waiting for that
                // lane would never end: wait for one another thread holds, if there is any.
                // (A lane's owner is cleared before it is unlocked, so `me` is never stale.)
                let others: Vec<usize> = (0..n)
                    .filter(|&i| pool.lanes[i].owner.load(Ordering::Relaxed) != me)
                    .collect();
                if others.is_empty() {
                    return Err(Error::NestedTransaction {
                        path: pool.path.clone(),
                    });
                }
                loop {
                    if let Some(g) = others
                        .iter()
                        .find_map(|&i| pool.lanes[i].state.try_lock().map(|g| (i, g)))
                    {
                        break g;
                    }
                    std::thread::yield_now();
                }
            }
        };
        pool.lanes[idx].owner.store(me, Ordering::Relaxed);
        if idx != start {
            LANE_HINT.with(|h| h.set(idx));
        }
        // (The hint is per thread and shared by all pools; a pool with fewer lanes re-derives
        // it above.)
        if pool.lanes.in_use.load(Ordering::Relaxed) <= idx {
            pool.lanes.in_use.fetch_max(idx + 1, Ordering::SeqCst);
        }
        debug_assert!(st.buf.is_empty() && st.buf.fresh.is_empty());
        crate::persist::enter_transaction();
        Ok(Tx {
            pool,
            lane: &pool.lanes[idx],
            st,
            done: false,
            _not_send: std::marker::PhantomData,
        })
    }

    #[inline(always)]
    fn reserve_log(&self, extra: usize) -> Result<()> {
        let needed = self.st.buf.record.len() + extra;
        if needed > self.pool.hdr.slot_size as usize {
            return Err(Error::TxTooLarge {
                needed,
                capacity: self.pool.hdr.slot_size as usize,
            });
        }
        Ok(())
    }

    /// Append a Copy entry (no bounds policy: internal callers may target the state page).
    #[inline(always)]
    fn log_copy(&mut self, target: u64, data: &[u8]) -> Result<()> {
        let b = &mut self.st.buf;
        if data.len() == 8 {
            // A word written again (a counter, a list head): overwrite the earlier entry's
            // data when no later entry overlaps it, so the log grows once per word. Only the
            // newest few entries are searched.
            let recent = b.copies.len().saturating_sub(4);
            if let Some(i) = (recent..b.copies.len())
                .rev()
                .find(|&i| b.copies[i].0 == target && b.copies[i].1 == 8)
            {
                let overlapped = b.copies[i + 1..]
                    .iter()
                    .any(|&(t, l, _)| t < target + 8 && target < t + l);
                if !overlapped {
                    let p = b.copies[i].2;
                    b.record[p..p + 8].copy_from_slice(data);
                    return Ok(());
                }
            }
        }
        self.reserve_log(copy_entry_size(data.len()))?;
        let b = &mut self.st.buf;
        let pos;
        if data.len() == 8 {
            // The common case (one word) as a compact word entry, in a single append.
            debug_assert!(target <= TARGET_MASK);
            let e = crate::log::word_entry(target, data);
            pos = b.record.len() + 8;
            b.record.push_array(&e);
        } else {
            let eh = EntryHeader::new(target, EntryKind::Copy, data.len() as u64);
            pos = b.record.len() + ENTRY_HEADER_SIZE;
            let padded = data.len().next_multiple_of(8);
            b.record.extend_from_slice(bytemuck::bytes_of(&eh));
            b.record.extend_from_slice(data);
            b.record.zero_extend_to(pos + padded);
        }
        b.n_entries += 1;
        b.push_copy((target, data.len() as u64, pos));
        Ok(())
    }

    /// Append a Zero entry.
    fn log_zero(&mut self, target: u64, len: u64) -> Result<()> {
        self.reserve_log(ENTRY_HEADER_SIZE)?;
        let eh = EntryHeader::new(target, EntryKind::Zero, len);
        let b = &mut self.st.buf;
        b.record.extend_from_slice(bytemuck::bytes_of(&eh));
        b.n_entries += 1;
        Ok(())
    }

    /// Add `mask` to the OR/AND-NOT entry for `word`, creating it if needed.
    fn log_bitop(&mut self, word: u64, kind: EntryKind, mask: u64) -> Result<()> {
        let b = &mut self.st.buf;
        if let Some(pos) = b.find_bitop(word, kind as u8) {
            let m = u64::from_le_bytes(b.record[pos..pos + 8].try_into().unwrap()) | mask;
            b.record[pos..pos + 8].copy_from_slice(&m.to_le_bytes());
            return Ok(());
        }
        self.reserve_log(ENTRY_HEADER_SIZE + 8)?;
        let b = &mut self.st.buf;
        let eh = EntryHeader::new(word, kind, 8);
        b.record.extend_from_slice(bytemuck::bytes_of(&eh));
        let pos = b.record.len();
        b.record.extend_from_slice(&mask.to_le_bytes());
        b.n_entries += 1;
        b.push_bitop((word, kind as u8, pos));
        Ok(())
    }

    #[inline(always)]
    fn fresh_contains(&mut self, off: u64, len: u64) -> bool {
        self.st.buf.fresh_holding(off, len).is_some()
    }

    #[inline(always)]
    fn check_user_range(&self, off: u64, len: u64) -> Result<()> {
        let end = off.checked_add(len);
        if off < self.pool.hdr.heap_off || end.is_none_or(|e| e > self.pool.heap_end()) {
            return Err(Error::InvalidPointer {
                offset: off,
                why: "outside the pool's heap",
            });
        }
        Ok(())
    }

    /// Write `data` at pool offset `off`, as part of this transaction.
    #[inline(always)]
    pub fn write_bytes(&mut self, off: u64, data: &[u8]) -> Result<()> {
        self.check_user_range(off, data.len() as u64)?;
        if self.fresh_contains(off, data.len() as u64) {
            // The block is ours alone until commit (see module comment): write it in place.
            let p = &self.pool;
            if data.len() >= crate::persist::NT_THRESHOLD {
                p.persist.copy_nodrain(&p.map, off, data);
                // Already written back (non-temporal stores, or copy + flush): only the fence
                // before the commit record is missing (`persist_fresh`).
                self.st.buf.fresh_unfenced = true;
            } else {
                p.map.write_bytes(off, data);
                // Made durable before or with the record at commit (`persist_fresh`).
                self.note_fresh_dirty(off, data.len() as u64);
            }
            return Ok(());
        }
        self.log_copy(off, data)
    }

    /// The pool this transaction runs on (crate-internal: collections read through it).
    #[inline(always)]
    pub(crate) fn pool_inner(&self) -> &'p PoolInner {
        self.pool
    }

    /// Whether this transaction has logged any write (reads must then overlay them).
    #[inline(always)]
    pub(crate) fn has_logged_copies(&self) -> bool {
        !self.st.buf.copies.is_empty()
    }

    /// Bytes of redo log this transaction has used so far.
    #[inline(always)]
    pub(crate) fn log_used(&self) -> usize {
        self.st.buf.record.len()
    }

    /// Bytes one log record may hold (the pool's log slot size).
    #[inline(always)]
    pub(crate) fn log_capacity(&self) -> usize {
        self.pool.hdr.slot_size as usize
    }

    /// Bytes of redo log still free in this transaction's record. A caller that packs many
    /// operations into one transaction (group commit) ends it and starts another before this
    /// runs low; a transaction that outgrows its record fails with [`Error::TxTooLarge`].
    #[inline(always)]
    pub fn log_room(&self) -> usize {
        self.log_capacity().saturating_sub(self.log_used())
    }

    /// Write into an object this transaction allocated with [`Tx::alloc_bytes_cached`] or
    /// [`Tx::alloc_zeroed_bytes`], in place, without logging and without noting it dirty: those
    /// calls noted the whole object dirty, so commit flushes these bytes too. The caller (a
    /// collection that tracks which of its objects are fresh) guarantees the target is such an
    /// object; writing anything else this way would break crash consistency.
    #[inline(always)]
    pub(crate) fn write_fresh(&mut self, off: u64, data: &[u8]) {
        debug_assert!(
            self.fresh_contains(off, data.len() as u64),
            "write_fresh outside this transaction's new objects"
        );
        self.pool.map.write_bytes(off, data);
    }

    /// Remember bytes written in place into this transaction's new objects; they are flushed
    /// just before the commit fence. Adjacent ranges merge (consecutive small allocations).
    #[inline]
    fn note_fresh_dirty(&mut self, off: u64, len: u64) {
        let d = &mut self.st.buf.fresh_dirty;
        if let Some(last) = d.last_mut() {
            if off >= last.0 && off <= last.1 {
                last.1 = last.1.max(off + len);
                return;
            }
        }
        d.push((off, off + len));
    }

    /// Write a `T` through a persistent pointer.
    #[inline(always)]
    pub fn write<T: Pod>(&mut self, p: PPtr<T>, v: &T) -> Result<()> {
        if p.offset() >= STATE_OFF && p.offset() < STATE_OFF + STATE_SIZE {
            // Internal: the root pointer in the state page.
            return self.log_copy(p.offset(), bytemuck::bytes_of(v));
        }
        self.write_bytes(p.offset(), bytemuck::bytes_of(v))
    }

    /// Read bytes as this transaction sees them (its own writes included).
    pub fn read_bytes(&self, off: u64, out: &mut [u8]) -> Result<()> {
        self.check_user_range(off, out.len() as u64)?;
        self.pool.map.read_bytes(off, out);
        self.st.buf.overlay(off, out);
        Ok(())
    }

    /// Read a `T` as this transaction sees it.
    pub fn read<T: Pod>(&self, p: PPtr<T>) -> Result<T> {
        let mut v = T::zeroed();
        self.read_bytes(p.offset(), bytemuck::bytes_of_mut(&mut v))?;
        Ok(v)
    }

    /// Read-modify-write a `T`.
    pub fn update<T: Pod>(&mut self, p: PPtr<T>, f: impl FnOnce(&mut T)) -> Result<()> {
        let mut v = self.read(p)?;
        f(&mut v);
        self.write(p, &v)
    }

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
    /// commit, so that [`Tx::write_fresh`] may store into the object afterwards.
    pub(crate) fn alloc_bytes_cached(&mut self, data: &[u8]) -> Result<u64> {
        let off = self.alloc_raw((data.len() as u64).max(1))?;
        self.pool.map.write_bytes(off, data);
        self.note_fresh_dirty(off, data.len() as u64);
        Ok(off)
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
    fn take_chunks(&mut self, n: u64, requested: u64) -> Result<u64> {
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
                        max_size: pool.hdr.max_size,
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
                        max_size: self.pool.hdr.max_size,
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
        let Some(i) = self.st.buf.fresh.iter().rposition(|f| f.0 == off) else {
            return Err(Error::InvalidPointer {
                offset: off,
                why: "not allocated (double free?)",
            });
        };
        let buf = &mut self.st.buf;
        let size = buf.fresh[i].1;
        buf.unindex_fresh(off, size);
        buf.fresh.swap_remove(i);
        // Its bytes must not be logged at commit: the block goes back to the cache now, and a
        // later owner's unlogged contents would be overwritten when this record is replayed.
        let (a, b) = (off, off + size);
        let mut kept = Vec::with_capacity(self.st.buf.fresh_dirty.len() + 1);
        for &(s, e) in &self.st.buf.fresh_dirty {
            if e <= a || s >= b {
                kept.push((s, e));
                continue;
            }
            if s < a {
                kept.push((s, a));
            }
            if e > b {
                kept.push((b, e));
            }
        }
        self.st.buf.fresh_dirty = kept;
        if let Some(j) = self.st.buf.reserved.iter().rposition(|r| r.0 == off) {
            let (_, class) = self.st.buf.reserved.swap_remove(j);
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

    /// Make this transaction's applied lines (and the lane's older deferred ones) durable at
    /// the end of its commit, with a second fence, instead of letting later commits flush
    /// them. The lane then holds nothing undurable, so `PoolInner::advance_watermark` can
    /// retire this transaction without re-reading the lane's log. For a transaction that is
    /// about to be followed by in-place writes to the same data (hash maps' in-place slot
    /// writes).
    pub(crate) fn durable_apply(&mut self) {
        self.st.buf.durable_apply = true;
    }

    /// Commit: one fence makes the transaction durable. Consumes the transaction.
    #[inline(always)]
    pub(crate) fn commit(mut self) -> Result<()> {
        let pool = self.pool;
        if self.st.buf.is_empty() {
            // Read-only (or every allocation was cancelled): nothing to persist. Fresh writes
            // to cancelled blocks need no durability.
            self.finish_abort();
            return Ok(());
        }
        if pool.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: pool.path.clone(),
            });
        }
        if let Some((target, word)) = self
            .st
            .buf
            .single_word((pool.hdr.heap_off, pool.heap_end()))
        {
            if self.single_word_in_place()? {
                return self.commit_in_place(target, word);
            }
        } else {
            self.st.logged_single_words = 0;
        }
        self.commit_logged()
    }

    /// Commit through the log (steps 1-4 of the module docs). Kept out of line: the one-word
    /// path above then pays no part of its register saves and stack frame.
    #[inline(never)]
    fn commit_logged(mut self) -> Result<()> {
        let pool = self.pool;
        let lane = self.lane;
        if !self.st.buf.fresh_dirty.is_empty() || self.st.buf.fresh_unfenced {
            self.persist_fresh()?;
        }
        let st = &mut *self.st;
        let slot = st.next_slot as usize;

        // 1. Take a sequence number, publishing a lower bound first (see `Lane`).
        let lb = pool.lanes.next_seq.load(Ordering::Relaxed);
        let late_bound = sim_fault!(LateInflightBound);
        if !late_bound {
            lane.inflight_lb.store(lb, Ordering::Relaxed);
        }
        let seq = pool.lanes.next_seq.fetch_add(1, Ordering::AcqRel);
        if late_bound {
            // The injected fault: the bound after the counter. The window is held open until
            // another lane has committed meanwhile (one window at a time, at most 20 ms), so
            // that it is hit: that commit's claim may pass `seq`.
            #[cfg(feature = "sim")]
            crate::sim::hold_window(|| {
                let n = pool
                    .lanes
                    .in_use
                    .load(Ordering::Acquire)
                    .min(pool.lanes.len());
                pool.lanes[..n]
                    .iter()
                    .any(|l| l.index != st.index && l.last_committed.load(Ordering::Acquire) > seq)
            });
            lane.inflight_lb.store(lb, Ordering::Release);
        }
        #[cfg(feature = "sim")]
        if pool.lanes[..pool
            .lanes
            .in_use
            .load(Ordering::Relaxed)
            .min(pool.lanes.len())]
            .iter()
            .any(|l| l.index != st.index && l.inflight_lb.load(Ordering::Relaxed) != u64::MAX)
        {
            sim_event!(OverlappingCommit);
        }

        // The slot may be reused only when a durable claim covers its old record.
        let old = st.slot_seq[slot];
        if old > st.durable_claim
            && old > pool.lanes.persisted_claim.load(Ordering::Acquire)
            && !sim_fault!(SkipSlotReuseCheck)
        {
            sim_event!(SlotWait);
            if let Err(e) = pool.advance_watermark(old) {
                lane.inflight_lb.store(u64::MAX, Ordering::Release);
                return Err(e);
            }
        }
        // This lane's bound: `lb` while in flight, or older unflushed lines (the value its
        // `undurable_from` holds since the last commit).
        let claim = pool
            .lanes
            .compute_watermark_owner(st.index, lb.min(st.dirty.oldest_seq()));
        debug_assert!(claim < seq, "claim {claim} must be below seq {seq}");

        // Lines applied D commits ago become durable with this commit's fence.
        let lc = st.commit_no + 1;
        let defer = defer_commits(pool.hdr.slots_per_lane);
        st.dirty.flush_while(pool, |first| first + defer <= lc);

        // 2. Write the record: header into the buffer's reserved front, checksum, one copy.
        crate::log::seal(&mut st.buf.record, seq, claim, st.buf.n_entries);
        let rec = &st.buf.record;
        let slot_off = crate::log::slot_offset(&pool.hdr, st.index, slot);
        if rec.len() <= 64 {
            // One line, the tail past the record included (slots are multiples of 64 bytes,
            // so it stays in the slot; recovery reads only `payload_len` bytes).
            let at = pool.map.write_line(slot_off, st.buf.record.first_line());
            if !sim_fault!(NoRecordFlush) {
                pool.persist.flush(at, st.buf.record.len());
            }
        } else if rec.len() <= 512 {
            let at = pool.map.write_words(slot_off, rec);
            if !sim_fault!(NoRecordFlush) {
                pool.persist.flush(at, rec.len());
            }
        } else {
            // The slot belongs to this lane, which we hold exclusively; the record fits the
            // slot (checked when entries were added).
            pool.persist.copy_nodrain(&pool.map, slot_off, rec);
        }

        let applied_early = sim_fault!(ApplyBeforeCommit);
        if applied_early {
            self.apply(seq, lc);
        }
        let st = &mut *self.st;

        // 3. The commit point.
        let fenced = if sim_fault!(NoCommitFence) {
            Ok(())
        } else {
            pool.persist.fence()
        };
        if let Err(e) = fenced {
            lane.inflight_lb.store(u64::MAX, Ordering::Release);
            return Err(pool.io_err("persist", e));
        }
        st.commit_no = lc;
        st.durable_claim = st.durable_claim.max(claim);
        if claim >= pool.lanes.persisted_claim.load(Ordering::Relaxed) + 32 {
            pool.lanes
                .persisted_claim
                .fetch_max(claim, Ordering::AcqRel);
        }
        st.slot_seq[slot] = seq;
        st.next_slot = if slot + 1 == st.slot_seq.len() {
            0
        } else {
            slot as u32 + 1
        };
        if pool.fail_apply.load(Ordering::Relaxed) && pool.fail_apply.swap(false, Ordering::AcqRel)
        {
            pool.poisoned.store(true, Ordering::Release);
            // `inflight_lb` stays set, as for a process that died here: no watermark or claim
            // computed by another thread may pass this unapplied transaction.
            st.buf.clear();
            self.done = true;
            return Ok(());
        }

        // 4. Apply in place; the lines become durable with a later fence of this lane (or a
        // helper's), which `undurable_from` tells the watermark.
        if !applied_early {
            self.apply(seq, lc);
        }
        let st = &mut *self.st;
        if st.buf.durable_apply {
            // Every line this lane applied so far, this transaction's included, becomes
            // durable now: the lane then holds nothing undurable (see `Tx::durable_apply`).
            st.dirty.flush_while(pool, |_| true);
            if pool.persist.fence().is_err() {
                // The transaction is committed (its record is durable), but its lines may not
                // be: stop using the pool, as for a failed apply.
                pool.poisoned.store(true, Ordering::Release);
            }
        }
        lane.undurable_from
            .store(st.dirty.oldest_seq(), Ordering::Release);
        lane.last_committed.store(seq, Ordering::Release);
        lane.inflight_lb.store(u64::MAX, Ordering::Release);
        self.st.buf.clear();
        self.done = true;
        Ok(())
    }

    /// May a one-word transaction be stored in place now (module docs, "One-word
    /// transactions")? True when no committed record is left for recovery to replay; after
    /// [`IN_PLACE_AFTER`] refusals in a row, this lane first retires every committed
    /// transaction.
    #[inline(always)]
    fn single_word_in_place(&mut self) -> Result<bool> {
        let pool = self.pool;
        if pool.fail_apply.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let newest = pool.lanes.next_seq.load(Ordering::Acquire) - 1;
        if pool.lanes.persisted_claim.load(Ordering::Acquire) >= newest
            || sim_fault!(InPlaceUncovered)
        {
            self.st.logged_single_words = 0;
            return Ok(true);
        }
        self.st.logged_single_words += 1;
        if self.st.logged_single_words < IN_PLACE_AFTER {
            return Ok(false);
        }
        self.st.logged_single_words = 0;
        // Only when this lane alone holds undurable work: helping other lanes means re-reading
        // their logs (tens of microseconds), too much to pay for one word. Then stay logged.
        let own = self.st.index;
        let n = pool
            .lanes
            .in_use
            .load(Ordering::Acquire)
            .min(pool.lanes.len());
        if (0..n).any(|i| i != own && pool.lanes[i].oldest_undurable() <= newest) {
            return Ok(false);
        }
        self.retire_all(newest)?;
        Ok(true)
    }

    /// Make every transaction up to `newest` durable and covered by the persisted watermark:
    /// this lane's deferred lines first (it holds them; a helper would re-read its whole log),
    /// then the other lanes through `advance_watermark`.
    #[cold]
    fn retire_all(&mut self, newest: u64) -> Result<()> {
        let pool = self.pool;
        let st = &mut *self.st;
        st.dirty.flush_while(pool, |_| true);
        pool.persist
            .fence()
            .map_err(|e| pool.io_err("persist", e))?;
        self.lane
            .undurable_from
            .store(st.dirty.oldest_seq(), Ordering::Release);
        pool.advance_watermark(newest)
    }

    /// Commit a one-word transaction in place: store, flush, fence. No sequence number, no
    /// record (the caller checked that none can be replayed over the word).
    #[inline(always)]
    fn commit_in_place(mut self, target: u64, word: u64) -> Result<()> {
        sim_event!(InPlaceWord);
        let stored = self.pool.store_word_durable(target, word);
        self.st.buf.clear();
        self.done = true;
        stored
    }

    /// Make the bytes written in place into this transaction's new objects durable no later
    /// than its log record: a record that reached the media must never be replayed while the
    /// objects it links to hold garbage. Small contents are logged (they become durable
    /// atomically with the record, still one fence); large ones are flushed and fenced before
    /// the record is written (one extra fence, only for such transactions).
    fn persist_fresh(&mut self) -> Result<()> {
        let pool = self.pool;
        let ranges = std::mem::take(&mut self.st.buf.fresh_dirty);
        let total: u64 = ranges.iter().map(|&(a, b)| b - a).sum();
        let overhead = ranges.len() as u64 * (ENTRY_HEADER_SIZE as u64 + 8);
        let room = pool.hdr.slot_size as u64 - self.st.buf.record.len() as u64;
        if total <= FRESH_LOG_MAX && total + overhead <= room && !self.st.buf.fresh_unfenced {
            // Logged straight from the objects into the record. These entries come last and
            // are not applied again at commit: the bytes are already in place.
            self.st.buf.fresh_log_start = self.st.buf.record.len();
            for &(a, b) in &ranges {
                let len = (b - a) as usize;
                let eh = EntryHeader::new(a, EntryKind::Copy, len as u64);
                let rec = &mut self.st.buf.record;
                rec.extend_from_slice(bytemuck::bytes_of(&eh));
                let pos = rec.len();
                rec.zero_extend_to(pos + len.next_multiple_of(8));
                pool.map.read_bytes(a, &mut rec[pos..pos + len]);
                self.st.buf.n_entries += 1;
            }
        } else {
            for &(a, b) in &ranges {
                pool.persist
                    .flush(pool.map.at(a, (b - a) as usize), (b - a) as usize);
            }
            pool.persist
                .fence()
                .map_err(|e| pool.io_err("persist", e))?;
        }
        // Kept until commit ends: their lines join the lane's deferred flushes.
        self.st.buf.fresh_dirty = ranges;
        Ok(())
    }

    /// Apply the committed record in place (step 4 of commit).
    #[inline(always)]
    fn apply(&mut self, seq: u64, lc: u64) {
        if self.st.buf.freed.is_empty() {
            let st = &mut *self.st;
            let end = st.buf.fresh_log_start.min(st.buf.record.len());
            let dirty = &mut st.dirty;
            crate::log::apply_payload(
                &self.pool.map,
                &st.buf.record[LOG_HEADER_SIZE..end],
                |line| dirty.push(line, lc, seq),
            );
        } else {
            self.apply_with_frees(seq, lc);
        }
        // Logged new objects' lines are flushed like applied data: they must reach the media
        // before their record is retired. (Unlogged ones were flushed and fenced already.)
        let st = &mut *self.st;
        if st.buf.fresh_log_start == usize::MAX {
            return;
        }
        for &(a, b) in &st.buf.fresh_dirty {
            let mut line = self.pool.map.at(a, 0) as usize & !(crate::persist::CACHE_LINE - 1);
            let end = self.pool.map.at(b, 0) as usize;
            while line < end {
                st.dirty.push(line, lc, seq);
                line += crate::persist::CACHE_LINE;
            }
        }
    }

    /// Apply a record that frees objects, and queue the frees for reuse.
    #[cold]
    fn apply_with_frees(&mut self, seq: u64, lc: u64) {
        let pool = self.pool;
        let st = &mut *self.st;
        let unharvested_free = st.buf.freed.iter().any(|f| match *f {
            Freed::Block { off, .. } => !pool.harvested.get(pool.geo.chunk_of(off).unwrap()),
            Freed::Large { .. } => true,
        });
        // Frees of blocks in runs no lane has harvested yet are applied under the heap lock,
        // so a harvest sees either the old bit (and the freeing lane keeps the block) or the
        // cleared bit (and the harvester takes it), never both.
        let heap_guard =
            unharvested_free.then(|| pool.heap.lock().unwrap_or_else(|e| e.into_inner()));
        let end = st.buf.fresh_log_start.min(st.buf.record.len());
        let dirty = &mut st.dirty;
        crate::log::apply_payload(&pool.map, &st.buf.record[LOG_HEADER_SIZE..end], |line| {
            dirty.push(line, lc, seq)
        });
        // Decide where each freed object goes once the watermark passes `seq`.
        for f in st.buf.freed.drain(..) {
            let keep = match f {
                Freed::Block { off, .. } => pool.harvested.get(pool.geo.chunk_of(off).unwrap()),
                // Chunks: a scan that already happened will not see this FREE entry.
                Freed::Large { .. } => heap_guard.as_ref().is_some_and(|h| h.scanned),
            };
            if keep {
                st.alloc.deferred.push_back((seq, f));
            }
        }
    }

    /// Undo the volatile effects of an unfinished transaction.
    fn finish_abort(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let pool = self.pool;
        // msync mode: what this transaction wrote back early (large copies into its new
        // objects) waits for an msync that nothing needs now.
        pool.persist.forget_this_transactions_flushes();
        let st = &mut *self.st;
        for &(off, class) in &st.buf.reserved {
            st.alloc.caches[class as usize].push(off);
        }
        if !st.buf.chunks_taken.is_empty()
            || st
                .buf
                .freed
                .iter()
                .any(|f| matches!(f, Freed::Large { .. }))
        {
            let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
            for &(chunk, n, is_run) in &st.buf.chunks_taken {
                if is_run {
                    // Drop the never-committed run's blocks from the cache.
                    let start = pool.geo.chunk_start(chunk);
                    let end = start + CHUNK_SIZE;
                    for c in st.alloc.caches.iter_mut() {
                        c.retain(|&o| o < start || o >= end);
                    }
                    pool.harvested.clear(chunk);
                }
                h.insert_extent(chunk, n);
            }
        }
        // Large objects allocated and freed within this transaction were never committed.
        st.buf.clear();
    }
}

impl Drop for Tx<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.done {
            self.finish_abort();
        }
        // Before the lane's lock is released (the `st` field drops after this body).
        self.lane.owner.store(0, Ordering::Relaxed);
        crate::persist::leave_transaction();
    }
}
