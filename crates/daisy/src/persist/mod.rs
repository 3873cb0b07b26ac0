//! Persistence primitives: how a store reaches the persistence domain.
//!
//! Two modes, chosen once per pool at open (see [`Mode`]):
//!
//! * **pmem**: the mapping is byte-addressable persistent memory (a DAX file mapped with
//!   `MAP_SYNC`, or a file on tmpfs, which is how the origin documents emulate NVM). A store is
//!   persistent once its cache line was written back (`clwb`, `clflushopt` or `clflush`, the best
//!   the CPU has) and a fence (`sfence`) followed. Large copies use non-temporal stores, which
//!   bypass the cache and need only the fence.
//! * **msync**: an ordinary file on a disk. `flush` remembers the touched pages, `fence` calls
//!   `msync(MS_SYNC)` on them. The same program therefore runs, slower, on a laptop's disk.
//!
//! The contract the rest of the library relies on: after `flush(range)` and a later `fence()`
//! *on the same thread*, every byte stored to `range` before the flush is persistent. Stores
//! are 8-byte atomic with respect to power failure when 8-byte aligned (x86 guarantee).
//!
//! Counting: the layer counts cache lines flushed and fences issued per thread when counting is
//! switched on ([`counters::enable`]); when it is off the cost is one relaxed load and a
//! predictable branch.
//!
//! Every flush and fence of the library goes through [`Persister`], the one seam the
//! power-failure simulator observes (cargo feature `sim`, see [`crate::sim`]; normal builds
//! contain none of it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

/// Cache line size assumed by the on-media format and the flush loop.
pub const CACHE_LINE: usize = 64;

/// Copies at least this long use non-temporal stores in pmem mode.
pub const NT_THRESHOLD: usize = 1024;

pub mod arch;
pub mod dirty;

pub use arch::FlushInstr;

/// How a pool's stores are made persistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Cache-line flushes plus a fence.
    Pmem(FlushInstr),
    /// `msync(MS_SYNC)` of the touched pages at each fence.
    Msync,
}

impl Mode {
    /// "pmem" or "msync".
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pmem(_) => "pmem",
            Mode::Msync => "msync",
        }
    }

    /// "pmem (clwb)" or "msync".
    pub fn describe(self) -> String {
        match self {
            Mode::Pmem(f) => format!("pmem ({})", f.name()),
            Mode::Msync => "msync".into(),
        }
    }
}

/// Per-thread flush and fence counters.
pub mod counters {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};

    static ENABLED: AtomicBool = AtomicBool::new(false);

    thread_local! {
        static FLUSHES: Cell<u64> = const { Cell::new(0) };
        static FENCES: Cell<u64> = const { Cell::new(0) };
        static MSYNCS: Cell<u64> = const { Cell::new(0) };
    }

    /// Flush/fence counts of the calling thread since the last [`take`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Counts {
        /// Cache lines written back (pmem) or pages synced (msync mode counts lines of the range).
        pub flushes: u64,
        /// Fences (sfence in pmem mode, a batch of msync calls in msync mode).
        pub fences: u64,
        /// msync system calls.
        pub msyncs: u64,
    }

    /// Turn counting on or off for the whole process.
    pub fn enable(on: bool) {
        ENABLED.store(on, Ordering::Relaxed);
    }

    /// Whether counting is on.
    pub fn enabled() -> bool {
        ENABLED.load(Ordering::Relaxed)
    }

    /// Return the calling thread's counts and reset them.
    pub fn take() -> Counts {
        Counts {
            flushes: FLUSHES.with(|c| c.replace(0)),
            fences: FENCES.with(|c| c.replace(0)),
            msyncs: MSYNCS.with(|c| c.replace(0)),
        }
    }

    #[inline(always)]
    pub(crate) fn add_flushes(n: u64) {
        if ENABLED.load(Ordering::Relaxed) {
            FLUSHES.with(|c| c.set(c.get() + n));
        }
    }

    #[inline(always)]
    pub(crate) fn add_fence() {
        if ENABLED.load(Ordering::Relaxed) {
            FENCES.with(|c| c.set(c.get() + 1));
        }
    }

    #[inline(always)]
    pub(crate) fn add_msync() {
        if ENABLED.load(Ordering::Relaxed) {
            MSYNCS.with(|c| c.set(c.get() + 1));
        }
    }
}

/// msync mode: the pages each thread flushed since its last fence, for one persister (one
/// pool) only. A fence syncs the calling thread's pages of its own pool and nothing else: a
/// list shared by every pool a thread uses would make one pool's commit sync (and fail on) the
/// pages of another, possibly unmapped by then (issue 16, bug 1). The lists die with the pool.
#[derive(Default)]
struct MsyncPending {
    /// Per thread: (start, end, depth of the transaction that flushed it).
    by_thread: Mutex<HashMap<ThreadId, Vec<Pending>>>,
}

type Pending = (usize, usize, u32);

thread_local! {
    /// Transactions (of any pool) the calling thread holds open.
    static OPEN_TRANSACTIONS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Transactions (of any pool) the calling thread holds open (tx.rs counts them: its
/// transactions begin and end here, so that msync ranges can be told apart by transaction).
#[inline(always)]
pub(crate) fn open_transactions() -> u32 {
    OPEN_TRANSACTIONS.with(|c| c.get())
}

#[inline(always)]
pub(crate) fn enter_transaction() {
    OPEN_TRANSACTIONS.with(|c| c.set(c.get() + 1));
}

#[inline(always)]
pub(crate) fn leave_transaction() {
    OPEN_TRANSACTIONS.with(|c| c.set(c.get() - 1));
}

/// Unique ids of persisters: the power-failure simulator tells the fences of the pool it
/// tracks from those of other pools by it.
static NEXT_PERSISTER_ID: AtomicU64 = AtomicU64::new(1);

#[cfg(feature = "sim")]
thread_local! {
    /// The old, buggy design (one list per thread for every pool), kept only so that the
    /// power-failure simulator can show it catches it (fault `SharedMsyncPending`).
    static SHARED_PENDING_SYNC: std::cell::RefCell<Vec<Pending>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The persistence functions of one pool. Cheap to clone (clones share the msync bookkeeping).
#[derive(Clone)]
pub struct Persister {
    mode: Mode,
    page_size: usize,
    /// msync mode only.
    msync: Option<Arc<MsyncPending>>,
    id: u64,
    /// Pages flushed while an online backup runs (`crate::backup`).
    pub(crate) dirty: Arc<dirty::DirtyPages>,
}

impl std::fmt::Debug for Persister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persister")
            .field("mode", &self.mode)
            .field("id", &self.id)
            .finish()
    }
}

impl Persister {
    /// The persistence functions for `mode` (each persister keeps its own msync bookkeeping).
    pub fn new(mode: Mode) -> Persister {
        Persister {
            mode,
            page_size: crate::map::page_size(),
            msync: (mode == Mode::Msync).then(Default::default),
            id: NEXT_PERSISTER_ID.fetch_add(1, Ordering::Relaxed),
            dirty: Default::default(),
        }
    }

    /// Its mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// This persister's unique id (the simulator's way of telling pools apart).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Start writing back `[addr, addr+len)`; durable after the next [`fence`](Self::fence)
    /// on this thread.
    #[inline(always)]
    pub fn flush(&self, addr: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        #[cfg(feature = "sim")]
        crate::sim::on_flush(addr, len);
        self.dirty.note(addr, len);
        let start = addr as usize & !(CACHE_LINE - 1);
        let end = addr as usize + len;
        match self.mode {
            Mode::Pmem(instr) => {
                let mut p = start;
                let mut lines = 0;
                while p < end {
                    arch::flush_line(instr, p as *const u8);
                    p += CACHE_LINE;
                    lines += 1;
                }
                counters::add_flushes(lines);
            }
            Mode::Msync => self.note_msync_range(start, end),
        }
    }

    /// The calling thread's pending msync ranges of this persister (None in pmem mode).
    fn with_my_pending<R>(&self, f: impl FnOnce(&mut Vec<Pending>) -> R) -> Option<R> {
        let pending = self.msync.as_ref()?;
        #[cfg(feature = "sim")]
        if crate::sim::fault(crate::sim::Fault::SharedMsyncPending) {
            return Some(SHARED_PENDING_SYNC.with(|p| f(&mut p.borrow_mut())));
        }
        let mut map = pending.by_thread.lock().unwrap_or_else(|e| e.into_inner());
        Some(f(map.entry(std::thread::current().id()).or_default()))
    }

    /// msync mode: remember the pages of `[start, end)` for the next fence.
    #[cold]
    fn note_msync_range(&self, start: usize, end: usize) {
        counters::add_flushes((end - start).div_ceil(CACHE_LINE) as u64);
        let pstart = start & !(self.page_size - 1);
        let pend = (end + self.page_size - 1) & !(self.page_size - 1);
        let depth = open_transactions();
        self.with_my_pending(|p| {
            if let Some(last) = p.last_mut() {
                // Merge with the previous range when it touches or overlaps (and was flushed
                // by the same transaction).
                if pstart <= last.1 && pend >= last.0 && last.2 == depth {
                    last.0 = last.0.min(pstart);
                    last.1 = last.1.max(pend);
                    return;
                }
            }
            p.push((pstart, pend, depth));
        });
    }

    /// Forget the pending msync ranges the calling thread's innermost open transaction
    /// flushed (msync mode; it is aborting: nothing of it needs to become durable). Ranges of
    /// enclosing transactions stay: each range is tagged with the transaction depth it was
    /// flushed at, and only ranges of one depth are merged. A transaction that committed
    /// fenced its ranges already, so everything at the aborting depth is the aborting one's.
    pub fn forget_this_transactions_flushes(&self) {
        let Some(pending) = self.msync.as_ref() else {
            return;
        };
        #[cfg(feature = "sim")]
        if crate::sim::fault(crate::sim::Fault::SharedMsyncPending) {
            return; // the old design forgot nothing
        }
        let depth = open_transactions();
        let mut map = pending.by_thread.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::thread::current().id();
        if let Some(p) = map.get_mut(&me) {
            p.retain(|r| r.2 < depth);
            if p.is_empty() {
                map.remove(&me);
            }
        }
    }

    /// Take the calling thread's pending msync ranges of this persister (its entry goes: a
    /// thread that ends leaves nothing behind).
    fn take_my_pending(&self) -> Vec<Pending> {
        let Some(pending) = self.msync.as_ref() else {
            return Vec::new();
        };
        #[cfg(feature = "sim")]
        if crate::sim::fault(crate::sim::Fault::SharedMsyncPending) {
            return SHARED_PENDING_SYNC.with(|p| std::mem::take(&mut *p.borrow_mut()));
        }
        let mut map = pending.by_thread.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&std::thread::current().id()).unwrap_or_default()
    }

    /// Wait until every range this thread flushed is persistent.
    /// Returns an error only in msync mode, when the kernel reports a write-back failure.
    #[inline(always)]
    pub fn fence(&self) -> std::io::Result<()> {
        #[cfg(feature = "sim")]
        crate::sim::on_fence(self.id);
        counters::add_fence();
        match self.mode {
            Mode::Pmem(_) => {
                arch::sfence();
                Ok(())
            }
            Mode::Msync => self.msync_pending(),
        }
    }

    #[cold]
    fn msync_pending(&self) -> std::io::Result<()> {
        let mut ranges = self.take_my_pending();
        ranges.sort_unstable();
        let mut result = Ok(());
        let mut merged: Option<(usize, usize)> = None;
        let mut sync = |(s, e): (usize, usize)| {
            counters::add_msync();
            if let Err(err) = crate::map::msync(s, e - s) {
                result = Err(err);
            }
        };
        for &(s, e, _) in &ranges {
            match merged {
                Some((ms, me)) if s <= me => merged = Some((ms, me.max(e))),
                Some(m) => {
                    sync(m);
                    merged = Some((s, e));
                }
                None => merged = Some((s, e)),
            }
        }
        if let Some(m) = merged {
            sync(m);
        }
        result
    }

    /// `flush` + `fence`.
    #[inline]
    pub fn persist(&self, addr: *const u8, len: usize) -> std::io::Result<()> {
        self.flush(addr, len);
        self.fence()
    }

    /// Copy `src` into `map` at `off` so that it is durable after the next fence (bounds
    /// checked: panics outside the mapping, as `Mapping::at`). Large copies use non-temporal
    /// stores in pmem mode.
    #[inline]
    pub fn copy_nodrain(&self, map: &crate::map::Mapping, off: u64, src: &[u8]) {
        self.copy_nodrain_from(map, off, src, NT_THRESHOLD)
    }

    /// [`copy_nodrain`](Self::copy_nodrain) with non-temporal stores from `nt_from` bytes on
    /// (a block store's blocks are whole cache lines that nobody reads back soon: streaming
    /// them past the cache pays from one line on).
    #[inline]
    pub fn copy_nodrain_from(
        &self,
        map: &crate::map::Mapping,
        off: u64,
        src: &[u8],
        nt_from: usize,
    ) {
        match self.mode {
            Mode::Pmem(_) if src.len() >= nt_from => {
                let dst = map.write_nt(off, src);
                self.dirty.note(dst, src.len());
                #[cfg(feature = "sim")]
                crate::sim::on_flush(dst, src.len());
                #[cfg(not(feature = "sim"))]
                let _ = dst;
                // Non-temporal stores count as flushed lines for the statistics.
                counters::add_flushes(src.len().div_ceil(CACHE_LINE) as u64);
            }
            _ => {
                map.write_bytes(off, src);
                self.flush(map.at(off, src.len()), src.len());
            }
        }
    }
}
