//! Dirty-page tracking for online backups (`crate::backup`).
//!
//! While a backup runs, every range the pool's [`Persister`](super::Persister) flushes (and
//! every non-temporal copy) sets the bit of each 4 KiB page it touches. The backup's copier
//! takes the bits (an atomic swap per 64 pages) and copies those pages again.
//!
//! Why flushes are the right thing to watch: every store that must survive a crash is written
//! back by a flush (or is a non-temporal store) before the transaction that made it counts as
//! durable; the power-failure simulator holds the library to exactly that, since it keeps only
//! flushed lines in its crash images. Stores whose flush is still deferred (section 6 of
//! docs/FORMAT.md) are flushed by the drain that ends every backup. So after the drain, every
//! page that changed since the copier last read it has its bit set.
//!
//! Ordering: a writer stores, then flushes (the bit is set with `Release` after the store); the
//! copier swaps the bits with `Acquire` before it reads the pages. A store is therefore either
//! seen by the copier's read or flagged for the next pass, never missed. Tracking must start
//! when no other thread is inside a transaction (the backup's documented precondition), so no
//! store can race with the switch itself.
//!
//! When no backup runs, a flush pays one relaxed load of a process-wide counter.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Tracking granularity: the page size of the copies (x86-64 base pages).
pub const PAGE: usize = 4096;

/// Pools of this process with a backup running (the flush path's fast check).
static TRACKING: AtomicU32 = AtomicU32::new(0);

/// The dirty-page bitmap of one pool (shared by the clones of its persister).
#[derive(Default)]
pub struct DirtyPages {
    active: AtomicBool,
    /// Address of the pool's byte 0 in this process.
    base: AtomicUsize,
    /// One bit per page of the pool's reserved address range (its maximum size), made at the
    /// first backup.
    bits: OnceLock<Box<[AtomicU64]>>,
}

impl std::fmt::Debug for DirtyPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirtyPages")
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish()
    }
}

impl DirtyPages {
    /// Start tracking a pool mapped at `base` with `reserved` bytes of address space. Every
    /// bit starts clear. Call only when no thread is inside a transaction of the pool. False
    /// (and nothing changes) when tracking is on already: one backup at a time.
    pub fn start(&self, base: *const u8, reserved: usize) -> bool {
        if self
            .active
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        let pages = reserved.div_ceil(PAGE);
        let bits = self
            .bits
            .get_or_init(|| (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
        for w in bits.iter() {
            w.store(0, Ordering::Relaxed);
        }
        self.base.store(base as usize, Ordering::Relaxed);
        TRACKING.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Stop tracking.
    pub fn stop(&self) {
        if self.active.swap(false, Ordering::SeqCst) {
            TRACKING.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Note that `[addr, addr + len)` was flushed (called after the stores it covers).
    #[inline(always)]
    pub fn note(&self, addr: *const u8, len: usize) {
        if TRACKING.load(Ordering::Relaxed) != 0 {
            self.note_slow(addr, len);
        }
    }

    #[cold]
    fn note_slow(&self, addr: *const u8, len: usize) {
        if !self.active.load(Ordering::Acquire) || len == 0 || self.bits.get().is_none() {
            return;
        }
        let Some(bits) = self.bits.get() else { return };
        let Some(off) = (addr as usize).checked_sub(self.base.load(Ordering::Relaxed)) else {
            return;
        };
        let (first, last) = (off / PAGE, (off + len - 1) / PAGE);
        let end = last.min(bits.len() * 64 - 1) + 1;
        // The power-failure simulator's canary for this rule: an off-by-one that flags the
        // range's pages but the last.
        let end = if sim_fault!(BackupPageUnflagged) {
            end - 1
        } else {
            end
        };
        for p in first..end {
            bits[p / 64].fetch_or(1 << (p % 64), Ordering::Release);
        }
    }

    /// Take the dirty pages' numbers (clearing their bits), in increasing order.
    pub fn take(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let Some(bits) = self.bits.get() else {
            return out;
        };
        for (i, w) in bits.iter().enumerate() {
            if w.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut v = w.swap(0, Ordering::Acquire);
            while v != 0 {
                out.push(i * 64 + v.trailing_zeros() as usize);
                v &= v - 1;
            }
        }
        out
    }

    /// Pages flagged now (without clearing them).
    pub fn count(&self) -> usize {
        self.bits.get().map_or(0, |b| {
            b.iter()
                .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
                .sum()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_flag_their_pages_only_while_tracking() {
        let region = vec![0u8; 64 * PAGE];
        let d = DirtyPages::default();
        d.note(region.as_ptr(), 8);
        assert_eq!(d.count(), 0, "nothing is tracked before start");
        assert!(d.start(region.as_ptr(), region.len()));
        assert!(
            !d.start(region.as_ptr(), region.len()),
            "one backup at a time"
        );
        d.note(region[PAGE - 8..].as_ptr(), 16); // straddles pages 0 and 1
        d.note(region[5 * PAGE..].as_ptr(), 1);
        d.note(region[5 * PAGE + 100..].as_ptr(), 1);
        assert_eq!(d.count(), 3);
        assert_eq!(d.take(), vec![0, 1, 5]);
        assert!(d.take().is_empty(), "take clears the bits");
        d.stop();
        d.note(region.as_ptr(), 8);
        assert!(d.take().is_empty(), "nothing is tracked after stop");
    }
}
