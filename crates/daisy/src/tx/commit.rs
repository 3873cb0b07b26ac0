//! Commit: the one-word in-place path, the logged path (a sequence number, the record, one
//! fence), applying in place, and rolling back what an unfinished transaction did in DRAM.
//! The steps and why they are in this order: the module docs of `tx` and docs/FORMAT.md
//! section 4.

use super::{Tx, FRESH_LOG_MAX, IN_PLACE_AFTER};
use crate::alloc::Freed;
use crate::error::{Error, Result};
use crate::lanes::defer_commits;
use crate::layout::*;
use crate::log::*;
use std::sync::atomic::Ordering;

impl<'p> Tx<'p> {
    /// Make this transaction's applied lines (and the lane's older deferred ones) durable at
    /// the end of its commit, with a second fence, instead of letting later commits flush
    /// them. The lane then holds nothing undurable, so `PoolInner::advance_watermark` can
    /// retire this transaction without re-reading the lane's log. For a transaction that is
    /// about to be followed by in-place writes to the same data (hash maps' in-place slot
    /// writes).
    pub(crate) fn durable_apply(&mut self) {
        self.st.buf.durable_apply = true;
    }

    /// Commit: one fence makes the transaction durable. Consumes the transaction. When it
    /// returns `Ok`, every change is durable; on an error nothing of it is visible (as
    /// [`Pool::transaction`](crate::Pool::transaction)).
    #[inline(always)]
    pub fn commit(mut self) -> Result<()> {
        let pool = self.pool;
        self.st.buf.settle_fresh_dirty();
        if self.st.buf.undo.is_some() {
            return self.commit_with_undo();
        }
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

    /// Commit a transaction that declared ranges for direct stores (`Tx::add_range`): the
    /// changed ranges are logged, the commit always writes a record (recovery tells a
    /// committed transaction by it, see undo.rs), and after its commit point the undo extent
    /// is released. Nothing changed: the undo is released as an abort does.
    #[cold]
    fn commit_with_undo(mut self) -> Result<()> {
        self.log_direct_stores()?;
        if self.st.buf.is_empty() {
            self.finish_abort();
            return Ok(());
        }
        if self.pool.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: self.pool.path.clone(),
            });
        }
        self.st.logged_single_words = 0;
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
        // A record that outgrew its slot: its payload goes to an extent taken now, before the
        // seq (taking chunks may grow the pool or advance the watermark).
        let overflow = if self.st.buf.record.len() > pool.hdr.slot_size as usize {
            Some(self.take_overflow()?)
        } else {
            None
        };
        let st = &mut *self.st;
        let slot = st.next_slot as usize;
        // What the heap's allocated bytes change by (taken before apply drains `freed`).
        let alloc_balance = st.buf.alloc_balance();

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
        // Every early return below gives the overflow extent back (nothing names it yet).
        let give_back = |pool: &crate::shared::PoolInner| {
            if let Some((chunk, n)) = overflow {
                let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
                h.insert_extent(chunk, n);
            }
        };
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
                give_back(pool);
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
        if let Some((chunk, n)) = overflow {
            // The payload was copied to the extent (and written back) by `take_overflow`; its
            // prefix binds it to this seq. The slot gets the header and the descriptor, one
            // line, and the commit fence below covers both.
            let ext = pool.geo.chunk_start(chunk);
            let payload = &rec[LOG_HEADER_SIZE..];
            let prefix = [seq, payload.len() as u64];
            pool.map.write(ext, &prefix);
            if !sim_fault!(NoRecordFlush) {
                pool.persist.flush(pool.map.at(ext, 16), 16);
            }
            let desc = OverflowDesc {
                off: ext,
                cap: n * CHUNK_SIZE,
                crc: overflow_checksum(seq, payload),
                reserved: [0; 3],
            };
            let mut head: LogHeader = bytemuck::pod_read_unaligned(&rec[..LOG_HEADER_SIZE]);
            head.magic = LOG_OVERFLOW_MAGIC;
            head.checksum = record_checksum(&head, bytemuck::bytes_of(&desc));
            let mut line = [0u8; 64];
            line[..LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&head));
            line[LOG_HEADER_SIZE..].copy_from_slice(bytemuck::bytes_of(&desc));
            let at = pool.map.write_line(slot_off, &line);
            if !sim_fault!(NoRecordFlush) {
                pool.persist.flush(at, 64);
            }
        } else if rec.len() <= 64 {
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
            give_back(pool);
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
        // Helpers read this slot from now on (before `last_committed` names the record).
        let bit = 1u64 << slot;
        if lane.written_slots.load(Ordering::Relaxed) & bit == 0 {
            lane.written_slots.fetch_or(bit, Ordering::Release);
        }
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
        if alloc_balance != 0 {
            pool.alloc_net.fetch_add(alloc_balance, Ordering::AcqRel);
        }
        let st = &mut *self.st;
        if let Some((chunk, chunks)) = overflow {
            // The extent holds the record's payload until no claim can need the record: it is
            // reused once the watermark passes `seq`, as any freed chunk (section 7). It is
            // FREE in the chunk table all along, so after a crash recovery reads it before
            // anything can allocate it.
            if sim_fault!(OverflowEarlyReuse) {
                let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
                h.insert_extent(chunk, chunks);
            } else {
                st.alloc
                    .deferred
                    .push_back((seq, Freed::Large { chunk, chunks }));
            }
        }
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
        if self.st.buf.undo.is_some() {
            self.release_undo_committed();
        }
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
        let pool = self.pool;
        pool.store_word_flushed(target, word);
        // The transaction's DRAM bookkeeping goes between the write-back and the fence: its
        // stores drain while the line is written back, instead of waiting behind the fence
        // (where they delay the next transaction's lane lock). The fence still comes before
        // the commit returns.
        self.st.buf.clear();
        self.done = true;
        pool.persist.fence().map_err(|e| pool.io_err("persist", e))
    }

    /// Take an extent for the payload of a record that outgrew its slot and copy the payload
    /// there, written back (the commit fence makes it durable with the slot's part). The
    /// extent is not logged as allocated: the committing lane holds it in DRAM until the
    /// watermark passes the record (then it is reused like a freed chunk), and after a crash
    /// its chunks are FREE, read by recovery before anything allocates.
    #[cold]
    fn take_overflow(&mut self) -> Result<(u64, u64)> {
        let pool = self.pool;
        let payload_len = self.st.buf.record.len() - LOG_HEADER_SIZE;
        let need = (OVERFLOW_PREFIX + payload_len) as u64;
        let n = need.div_ceil(CHUNK_SIZE);
        sim_event!(OverflowRecord);
        let chunk = match self.take_chunks(n, need) {
            Ok(c) => c,
            Err(Error::PoolFull { .. }) => {
                let h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
                let free_chunks: u64 = h.free_extents.values().sum();
                return Err(Error::TxTooLargeForPool {
                    path: pool.path.clone(),
                    needed: need,
                    slot: pool.hdr.slot_size,
                    free: free_chunks * CHUNK_SIZE
                        + pool.max_size().saturating_sub(pool.heap_end()),
                    size: pool.heap_end(),
                    max_size: pool.max_size(),
                });
            }
            Err(e) => return Err(e),
        };
        let ext = pool.geo.chunk_start(chunk);
        let payload = &self.st.buf.record[LOG_HEADER_SIZE..];
        if !sim_fault!(NoRecordFlush) {
            pool.persist
                .copy_nodrain(&pool.map, ext + OVERFLOW_PREFIX as u64, payload);
        } else {
            pool.map.write_bytes(ext + OVERFLOW_PREFIX as u64, payload);
        }
        Ok((chunk, n))
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
        let room = (pool.hdr.slot_size as u64).saturating_sub(self.st.buf.record.len() as u64);
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

    /// Abandon the transaction: nothing it did is visible, in DRAM or on media, and its
    /// allocations are returned (the same as dropping it).
    pub fn abort(self) {
        drop(self)
    }

    /// Undo the volatile effects of an unfinished transaction.
    pub(super) fn finish_abort(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if self.st.buf.undo.is_some() {
            self.undo_direct_stores();
        }
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
