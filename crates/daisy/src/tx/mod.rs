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

use crate::error::{Error, Result};
use crate::lanes::{Lane, LaneState};
use crate::layout::*;
use crate::lock::SpinGuard;
use crate::log::*;

use crate::ptr::PPtr;
use crate::shared::PoolInner;
use bytemuck::Pod;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

mod alloc;
mod commit;
mod undo;

pub(crate) use undo::UndoLog;

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
            if let Some(mut st) = pool.lanes[start].state.try_lock() {
                st.buf.serial = st.buf.serial.wrapping_add(1);
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
        let mut st = st;
        st.buf.serial = st.buf.serial.wrapping_add(1);
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
        // A record that outgrows its slot continues in an overflow extent at commit (log.rs);
        // only the 32-bit payload length limits it.
        let needed = self.st.buf.record.len() + extra;
        if needed > LOG_HEADER_SIZE + MAX_PAYLOAD {
            return Err(Error::TxTooLarge {
                needed,
                capacity: LOG_HEADER_SIZE + MAX_PAYLOAD,
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
                    if b.indexed() {
                        b.shadow_write(target, 8, p);
                    }
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

    /// Whether [off, off + len) lies in an object this transaction allocated (written in
    /// place: no crash before the commit can expose it, since its allocation is not durable).
    #[inline(always)]
    pub(crate) fn fresh_contains(&mut self, off: u64, len: u64) -> bool {
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

    /// A number no other transaction of this pool's handle has had or will have while the
    /// pool stays open (the lane's index and how many transactions the lane has begun): for
    /// DRAM state that must not outlive the transaction it was built in (a cache of views
    /// validated by this transaction, say).
    #[inline(always)]
    pub fn serial(&self) -> u64 {
        (self.lane_index() as u64) << 52 | (self.st.buf.serial & ((1 << 52) - 1))
    }

    /// Net heap bytes this transaction allocates so far if it commits (its new objects minus
    /// those it frees, as [`Pool::usage`](crate::Pool::usage) counts them): with
    /// [`Pool::allocated_bytes`](crate::Pool::allocated_bytes), what the heap will hold after
    /// the commit (a server evicting keys before a command measures its progress so).
    pub fn allocation_balance(&self) -> i64 {
        self.st.buf.alloc_balance()
    }

    /// The index of the log lane this transaction holds, in `0..Pool::lane_count()`: no
    /// other transaction of the pool has it while this one is open. For bindings that keep
    /// per-transaction state by lane (the C API keeps its transaction handles so, without an
    /// allocation per transaction).
    #[inline(always)]
    pub fn lane_index(&self) -> usize {
        (self.lane as *const Lane as usize - self.pool.lanes.as_ptr() as usize)
            / std::mem::size_of::<Lane>()
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

    /// Bytes of redo log still free in this transaction's log slot. A caller that packs many
    /// operations into one transaction (group commit) ends it and starts another before this
    /// runs low, to keep its commits cheap: a transaction that outgrows its slot still commits,
    /// its record continuing in an extent allocated from the pool for the commit (one more
    /// copy and allocation; docs/FORMAT.md section 2.3), or fails with
    /// [`Error::TxTooLargeForPool`] when the pool has no room for it.
    #[inline(always)]
    pub fn log_room(&self) -> usize {
        self.log_capacity().saturating_sub(self.log_used())
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
