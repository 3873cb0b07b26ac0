//! Power-failure simulation (cargo feature `sim`; absent from normal builds).
//!
//! **Fault model, pmem mode** (x86 with ADR): a store reaches the media when its cache line is
//! written back, which happens for sure after a flush of the line *and* a later fence on the
//! flushing thread, and may happen at any earlier moment (eviction). So after a power failure
//! each cache line holds the content it had at its last sure write-back, or *any* content it
//! held since (not only its latest), and aligned 8-byte words are the only atomic unit.
//!
//! **msync mode**: a page is durable once an `msync` covering it returned; before that, each of
//! its lines may or may not have reached the disk, in any order (lines, not pages, is the finer
//! and so the stricter granularity). A fence of a thread syncs the pages that thread flushed.
//!
//! **File length**: growing a pool extends its file; the new length (and with it every byte in
//! the new extent) survives a crash only once a file sync (`fdatasync`) made it durable, as on
//! a DAX file system whose block allocation lives in the journal. A crash image is the file cut
//! to its durable length.
//!
//! **What is tracked.** The simulator keeps a *shadow* image of what is surely persisted, the
//! durable file length, each thread's flushes not yet fenced (pmem: a snapshot of each flushed
//! line; msync: the pages), and, per line, the values it held since its last sure write-back: the
//! library's every store goes through [`crate::map::Mapping`], which reports it *before* it
//! writes, so the content a line held until then is recorded (a bounded sample per line). At
//! each fence of the tracked pool, on any thread (a *crash point*, taken before the fence
//! completes), the crash hook gets the shadow and every line that may hold something else: the
//! flushed snapshots, the recorded values, and the current content where it differs from the
//! shadow (which also catches stores that bypass the persistence API). It builds crash images
//! from those and checks each with the real recovery code.
//!
//! **Threads.** One lock serialises every hook of the tracked pool (store, flush, fence,
//! growth, file sync), and a crash point is checked while it is held. A thread that reaches any
//! hook while another thread's crash point is being checked waits, so no fence goes without its
//! crash point and the memory being imaged does not change under the checker; between hooks,
//! threads run truly in parallel. Every fence is counted per thread, and so is every crash
//! point.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

const LINE: usize = 64;

/// Values recorded per line between two sure write-backs, at most.
const HISTORY_MAX: usize = 8;

/// Faults that a test can inject, to show the simulator catches the bugs it exists for.
/// Each is evaluated at the place where the rule it breaks is applied; [`reached`] counts
/// how often that place was reached while tracking (with the rule mattering there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Fault {
    /// Commit without flushing the log record.
    NoRecordFlush = 0,
    /// Commit without the commit fence.
    NoCommitFence = 1,
    /// Apply the transaction in place before its log record is persisted.
    ApplyBeforeCommit = 2,
    /// Never flush applied data lines (deferred flushes are dropped).
    NoDataFlush = 3,
    /// Hash maps write slots in place without first retiring the transactions that wrote
    /// the map (collections/table.rs, "In-place slot writes").
    NoInPlaceBarrier = 4,
    /// Hash maps' in-place slot writes are not flushed.
    NoInPlaceFlush = 5,
    /// A one-word transaction is written in place although an older record that recovery may
    /// still replay exists (tx.rs, "One-word transactions").
    InPlaceUncovered = 6,
    /// A log slot is reused although no durable claim covers the record it holds
    /// (docs/FORMAT.md section 5, "Slot-reuse rule").
    SkipSlotReuseCheck = 7,
    /// A freed block or chunk is handed out again before the watermark passed the
    /// transaction that freed it (section 7, "Reuse after free").
    EarlyBlockReuse = 8,
    /// A new run's bitmap is not zeroed on media (the Zero log entry is left out; section 4).
    NoRunBitmapZero = 9,
    /// A committing lane publishes its in-flight bound only after taking its sequence number
    /// (the order section 5 forbids); the window is widened so that it is hit.
    LateInflightBound = 10,
    /// A durable in-place word store first stores the word's complement, then the word: a
    /// value the line holds for an instant and that an eviction may persist.
    TransientStore = 11,
    /// msync mode: one list of pages to sync per thread, shared by every pool (issue 16,
    /// bug 1).
    SharedMsyncPending = 12,
    /// Growth publishes the new heap end without first making the file's new length durable
    /// (issue 16, bug 2).
    GrowWithoutSync = 13,
    /// Recovery writes its watermark before the data it replayed is durable.
    EarlyRecoveryWatermark = 14,
    /// Freeing a hash map's detached entries (a `clear`, or a map being destroyed) frees an
    /// entry object without emptying its slot: a crash after that step leaves a slot that
    /// names a free block, and the next step frees it again (collections/table.rs,
    /// `garbage_step`).
    GarbageSlotKept = 15,
    /// `daisy serve`'s lazyfree: the queue slot of a collection whose last object was freed
    /// is cleared by a transaction of its own after that, instead of in the same one: a
    /// crash in between leaves the queue naming freed memory (daisy-kv, keyspace.rs).
    LazyQueueLate = 16,
    /// A hash map's shrink stores the new directory into the header durably at once instead of
    /// through the transaction's log: a crash before the commit leaves the header naming
    /// objects that were never allocated (collections/table.rs, `Table::shrink`).
    ShrinkHeaderEarly = 17,
    /// An ordered map's split of a leaf that existed before the transaction stores the old
    /// leaf's shrunken header (its entry count) durably at once instead of through the
    /// transaction's log: a crash before the commit leaves the entries that moved to the new
    /// sibling in neither node (collections/tree/ops.rs, `put_item`).
    TreeSplitEarly = 18,
    /// A sequence that grows a new chunk at an end stores the old end chunk's link to it
    /// durably at once instead of through the transaction's log: a crash before the commit
    /// leaves the old chunk naming a block that was never allocated
    /// (collections/seq.rs, "Crash reasoning").
    SeqLinkOutsideTx = 19,
    /// A record that outgrew its log slot gives its overflow extent back to the heap as soon
    /// as it is applied, instead of when the watermark passes it: the next large allocation
    /// overwrites a payload that recovery may still replay (docs/FORMAT.md section 2.3).
    OverflowEarlyReuse = 20,
    /// `Tx::add_range` writes a range's old bytes into an undo extent but never names the
    /// extent in the lane's undo table word: a crash before the commit finds no undo, and the
    /// program's direct stores of an uncommitted transaction stay (docs/FORMAT.md section 2.5).
    UndoNotNamed = 21,
    /// A block store's write switches the map word to the new block without first fencing
    /// the block's data: the data and the word complete in the same fence, in no particular
    /// order, so a crash may leave the word naming a half-written block
    /// (collections/blocks.rs, step 1).
    BlockSwapBeforeData = 22,
    /// Opening a block store skips the barrier that retires every committed transaction:
    /// recovery may then replay the creating transaction's logged map over the in-place map
    /// words (collections/blocks.rs, "Crash reasoning").
    BlockNoBarrier = 23,
    /// A batch fills an empty hash map's segments in place without first setting the map's
    /// FILLING flag: a crash before its commit leaves entries of an uncommitted batch in the
    /// map, where opening it finds them (collections/table.rs, "Batches filling an empty
    /// table").
    FillWithoutFlag = 24,
    /// A batch that filled a hash map's segments in place commits without flushing them
    /// first: its record says the entries are committed while lines of them never reached
    /// the media (collections/table.rs, `BatchCore::persist_filled`).
    FillNoFlush = 25,
    /// While an online backup runs, a flush flags the pages of its range but the last (an
    /// off-by-one: a flush within one page flags nothing), so a page written after the copier
    /// read it is not copied again and the backup holds its old bytes (persist/dirty.rs,
    /// docs/FORMAT.md section 11).
    BackupPageUnflagged = 26,
    /// `daisy serve`'s XADD appends the new entry to a stream's last node durably at once,
    /// outside the command's transaction and its log: a crash before the commit leaves a node
    /// holding an entry that the stream's meta (its length, last ID) does not count (daisy-kv,
    /// types/stream).
    StreamAppendOutsideTx = 27,
    /// Format 2 block store recovery trusts a record without its checksum (over the record
    /// and the block's data): a write whose record or map word reached the media before all of
    /// its data passes for whole, and a torn block is kept (collections/blocks.rs,
    /// "Recovery").
    BlockRecoveryNoCrc = 28,
}

impl Fault {
    /// Every fault, in declaration order.
    pub const ALL: [Fault; 29] = [
        Fault::NoRecordFlush,
        Fault::NoCommitFence,
        Fault::ApplyBeforeCommit,
        Fault::NoDataFlush,
        Fault::NoInPlaceBarrier,
        Fault::NoInPlaceFlush,
        Fault::InPlaceUncovered,
        Fault::SkipSlotReuseCheck,
        Fault::EarlyBlockReuse,
        Fault::NoRunBitmapZero,
        Fault::LateInflightBound,
        Fault::TransientStore,
        Fault::SharedMsyncPending,
        Fault::GrowWithoutSync,
        Fault::EarlyRecoveryWatermark,
        Fault::GarbageSlotKept,
        Fault::LazyQueueLate,
        Fault::ShrinkHeaderEarly,
        Fault::TreeSplitEarly,
        Fault::SeqLinkOutsideTx,
        Fault::OverflowEarlyReuse,
        Fault::UndoNotNamed,
        Fault::BlockSwapBeforeData,
        Fault::BlockNoBarrier,
        Fault::FillWithoutFlag,
        Fault::FillNoFlush,
        Fault::BackupPageUnflagged,
        Fault::StreamAppendOutsideTx,
        Fault::BlockRecoveryNoCrc,
    ];

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// Things the library does that a workload should make happen under the simulator (counted
/// while tracking, outside the crash hook).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// A lane made another lane's applied transactions durable (`Lane::help_flush`).
    Help = 0,
    /// A commit found its next log slot not yet covered by a durable claim and advanced the
    /// watermark first (the slow path of the slot-reuse rule).
    SlotWait = 1,
    /// A one-word transaction committed in place.
    InPlaceWord = 2,
    /// The persisted watermark was raised (`advance_watermark` wrote the state page).
    WatermarkWrite = 3,
    /// The pool grew.
    Grow = 4,
    /// A free waited for the watermark before its memory was reused.
    DeferredReuse = 5,
    /// A commit took its sequence number while another lane was inside a commit.
    OverlappingCommit = 6,
    /// A commit wrote a record too large for its slot through an overflow extent.
    OverflowRecord = 7,
    /// An online backup finished (its pause ran while tracking).
    Backup = 8,
    /// A backup's copier copied the pages flagged so far while the pool was in use (a live
    /// pass, racing with the writers).
    BackupLivePass = 9,
}

impl Event {
    /// Every event.
    pub const ALL: [Event; 10] = [
        Event::Help,
        Event::SlotWait,
        Event::InPlaceWord,
        Event::WatermarkWrite,
        Event::Grow,
        Event::DeferredReuse,
        Event::OverlappingCommit,
        Event::OverflowRecord,
        Event::Backup,
        Event::BackupLivePass,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Event::Help => "help",
            Event::SlotWait => "slot-wait",
            Event::InPlaceWord => "in-place-word",
            Event::WatermarkWrite => "watermark-write",
            Event::Grow => "grow",
            Event::DeferredReuse => "deferred-reuse",
            Event::OverlappingCommit => "overlapping-commit",
            Event::OverflowRecord => "overflow-record",
            Event::Backup => "backup",
            Event::BackupLivePass => "backup-live-pass",
        }
    }
}

static FAULTS: AtomicU32 = AtomicU32::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);
static REACHED: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];
static EVENTS: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// Inject `f` (process-wide) until [`clear_faults`].
pub fn inject(f: Fault) {
    FAULTS.fetch_or(f.bit(), Ordering::SeqCst);
}

/// Inject no fault.
pub fn clear_faults() {
    FAULTS.store(0, Ordering::SeqCst);
}

/// Whether `f` is injected; counts the place as reached when a workload runs it.
#[inline]
pub fn fault(f: Fault) -> bool {
    if !ignored() {
        REACHED[f as usize].fetch_add(1, Ordering::Relaxed);
    }
    FAULTS.load(Ordering::Relaxed) & f.bit() != 0
}

/// How often the place of `f` was reached by tracked work since [`reset_counts`].
pub fn reached(f: Fault) -> u64 {
    REACHED[f as usize].load(Ordering::Relaxed)
}

/// Count an event of the tracked work.
#[inline]
pub fn event(e: Event) {
    if !ignored() {
        EVENTS[e as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// How often `e` happened in tracked work since [`reset_counts`].
pub fn events(e: Event) -> u64 {
    EVENTS[e as usize].load(Ordering::Relaxed)
}

/// Zero the reached and event counters.
pub fn reset_counts() {
    REACHED
        .iter()
        .chain(EVENTS.iter())
        .for_each(|c| c.store(0, Ordering::Relaxed));
}

/// For an injected ordering fault: hold the calling thread where it is until `done()` or 20 ms,
/// one thread at a time (others return at once), so that a race the fault opens is hit.
pub fn hold_window(done: impl Fn() -> bool) {
    static OPEN: AtomicBool = AtomicBool::new(false);
    if OPEN.swap(true, Ordering::AcqRel) {
        return;
    }
    let t0 = std::time::Instant::now();
    while !done() && t0.elapsed() < std::time::Duration::from_millis(20) {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    OPEN.store(false, Ordering::Release);
}

/// One line that may hold something other than its shadow content at a crash.
#[derive(Clone, Debug)]
pub struct LineChoices {
    /// Offset of the line in the pool file.
    pub off: usize,
    /// Possible contents besides the shadow's: flushed snapshots, values the line held since
    /// its last sure write-back, its current content.
    pub versions: Vec<[u8; LINE]>,
}

/// What a crash at this moment could leave on the media.
#[derive(Clone, Debug)]
pub struct CrashPoint {
    /// Number of this crash point (counts every point of the tracked run).
    pub index: u64,
    /// The thread whose fence this is (its name, or `t<N>` in order of first fence); for a
    /// point taken by [`crash_now`], the caller's.
    pub thread: String,
    /// False for a point taken by [`crash_now`] rather than at a fence.
    pub at_fence: bool,
    /// Surely persisted image of the pool file (as long as the mapping; see `len`).
    pub shadow: Vec<u8>,
    /// The file length that survives: images are the shadow cut to this length.
    pub len: usize,
    /// Every line that may hold something else than its shadow content.
    pub lines: Vec<LineChoices>,
    /// Offsets of the shadow lines that changed since the previous crash point, or None when
    /// the file's length changed or this is the first point (a copy of the previous image base
    /// plus these lines equals this one).
    pub changed_since_last: Option<Vec<usize>>,
}

impl CrashPoint {
    /// The bytes line `i` holds in an image with `pick` and `torn` (see [`CrashPoint::image`]);
    /// None when it keeps the shadow's content.
    pub fn line_image(&self, i: usize, pick: usize, torn: u8) -> Option<[u8; LINE]> {
        if pick == 0 {
            return None;
        }
        let l = &self.lines[i];
        let mut out = [0u8; LINE];
        out.copy_from_slice(&self.shadow[l.off..l.off + LINE]);
        let v = &l.versions[pick - 1];
        for w in 0..8 {
            if torn & (1 << w) != 0 {
                out[w * 8..w * 8 + 8].copy_from_slice(&v[w * 8..w * 8 + 8]);
            }
        }
        Some(out)
    }

    /// The shadow, cut to `len`, with `picks[i]` applied to line `i`: 0 keeps the shadow
    /// content, k > 0 takes `versions[k-1]`. `torn[i]`, when set, mixes old and new per 8-byte
    /// word with its bits.
    pub fn image(&self, picks: &[usize], torn: &[u8]) -> Vec<u8> {
        let mut img = self.shadow[..self.len].to_vec();
        for (i, l) in self.lines.iter().enumerate() {
            let k = picks.get(i).copied().unwrap_or(0);
            if let Some(bytes) = self.line_image(i, k, torn.get(i).copied().unwrap_or(0xff)) {
                img[l.off..l.off + LINE].copy_from_slice(&bytes);
            }
        }
        img
    }
}

type Hook = Box<dyn FnMut(&CrashPoint) + Send>;

/// Fences and crash points of one thread.
#[derive(Clone, Debug, Default)]
pub struct ThreadCounts {
    /// The thread's name (or `t<N>`).
    pub thread: String,
    /// Fences of the tracked pool it issued.
    pub fences: u64,
    /// Crash points checked on it.
    pub crash_points: u64,
}

/// What a tracked run saw, returned by [`stop`].
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Fences of the tracked pool, all threads.
    pub fences: u64,
    /// Crash points checked (fences plus [`crash_now`] calls).
    pub crash_points: u64,
    /// Fences that were not a crash point (always 0 unless the hook was missing).
    pub fences_without_point: u64,
    /// Per thread, in order of first fence.
    pub threads: Vec<ThreadCounts>,
}

struct Tracked {
    /// The tracked pool (lines are read through its mapping).
    pool: crate::Pool,
    persister: u64,
    base: usize,
    reserved: usize,
    msync: bool,
    /// Surely persisted content of every mapped byte.
    shadow: Vec<u8>,
    /// Stamp of the flush whose snapshot set a shadow line (absent: before tracking began).
    /// A later fence of an *older* snapshot of the line does not move it back.
    shadow_stamp: HashMap<usize, u64>,
    /// File length that survives a crash.
    durable_len: usize,
    /// pmem: per thread, the lines it flushed since its last fence (offset, snapshot, stamp).
    pending_lines: HashMap<ThreadId, Vec<(usize, [u8; LINE], u64)>>,
    /// msync: per thread, the page ranges (offsets) it flushed since its last fence.
    pending_pages: HashMap<ThreadId, Vec<(usize, usize)>>,
    /// Per line, values it held since its last sure write-back (content, stamp).
    history: HashMap<usize, Vec<([u8; LINE], u64)>>,
    /// Event clock: stores, flushes and fences each take the next stamp.
    stamp: u64,
    /// Shadow lines changed since the last point (None: the length changed, or no point yet).
    changed: Option<Vec<usize>>,
    points: u64,
    fences: u64,
    without_point: u64,
    threads: Vec<(ThreadId, ThreadCounts)>,
    hook: Option<Hook>,
}

static STATE: Mutex<Option<Tracked>> = Mutex::new(None);

/// A tracking to start when a pool at this path is opened next (see [`track_next_open`]).
static NEXT_OPEN: Mutex<Option<(PathBuf, Hook)>> = Mutex::new(None);

thread_local! {
    /// Set while the crash hook runs: the hook's own pools (recovering crash images) store,
    /// flush and fence too, and must not count as the workload's.
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Make the simulator ignore this thread's stores, flushes and fences from now on (threads
/// that recover crash images on behalf of the hook).
pub fn ignore_current_thread() {
    IN_HOOK.with(|h| h.set(true));
}

#[inline]
fn ignored() -> bool {
    !ACTIVE.load(Ordering::Relaxed) || IN_HOOK.with(|h| h.get())
}

fn lock() -> std::sync::MutexGuard<'static, Option<Tracked>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Tracked {
    fn new(pool: &crate::Pool, hook: Hook) -> Tracked {
        let map = &pool.inner.map;
        let mut shadow = vec![0u8; map.len()];
        map.read_bytes(0, &mut shadow);
        let durable_len = pool
            .inner
            .file
            .metadata()
            .map(|m| m.len() as usize)
            .unwrap_or(shadow.len())
            .min(shadow.len());
        Tracked {
            pool: pool.clone(),
            persister: pool.inner.persist.id(),
            base: map.base() as usize,
            reserved: map.reserved(),
            msync: pool.inner.persist.mode() == crate::Mode::Msync,
            shadow,
            shadow_stamp: HashMap::new(),
            durable_len,
            pending_lines: HashMap::new(),
            pending_pages: HashMap::new(),
            history: HashMap::new(),
            stamp: 0,
            changed: None,
            points: 0,
            fences: 0,
            without_point: 0,
            threads: Vec::new(),
            hook: Some(hook),
        }
    }

    /// `[start, end)` as offsets in the tracked mapping, or None when `addr` is not in it.
    fn range(&self, addr: usize, len: usize) -> Option<(usize, usize)> {
        if addr < self.base || addr >= self.base + self.reserved {
            return None;
        }
        let start = addr - self.base;
        Some((start, (start + len).min(self.shadow.len())))
    }

    fn line(&self, off: usize) -> [u8; LINE] {
        let mut l = [0u8; LINE];
        self.pool.inner.map.read_bytes(off as u64, &mut l);
        l
    }

    fn thread_counts(&mut self) -> &mut ThreadCounts {
        let me = std::thread::current();
        let i = match self.threads.iter().position(|t| t.0 == me.id()) {
            Some(i) => i,
            None => {
                let name = me
                    .name()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("t{}", self.threads.len()));
                self.threads.push((
                    me.id(),
                    ThreadCounts {
                        thread: name,
                        ..Default::default()
                    },
                ));
                self.threads.len() - 1
            }
        };
        &mut self.threads[i].1
    }

    fn stamp_of(&self, off: usize) -> u64 {
        self.shadow_stamp.get(&off).copied().unwrap_or(0)
    }

    /// Every line that may hold something other than its shadow content now.
    fn undecided_lines(&self) -> Vec<LineChoices> {
        let mut by_line: HashMap<usize, Vec<[u8; LINE]>> = HashMap::new();
        let len = self.durable_len & !(LINE - 1);
        let mut add = |off: usize, v: &[u8; LINE], shadow: &[u8]| {
            if off + LINE > len || v[..] == shadow[off..off + LINE] {
                return;
            }
            let vs = by_line.entry(off).or_default();
            if !vs.contains(v) {
                vs.push(*v);
            }
        };
        for list in self.pending_lines.values() {
            for (off, snap, st) in list {
                if *st > self.stamp_of(*off) {
                    add(*off, snap, &self.shadow);
                }
            }
        }
        for (off, versions) in &self.history {
            for (v, _) in versions {
                add(*off, v, &self.shadow);
            }
        }
        self.pool
            .inner
            .map
            .for_each_differing_line(&self.shadow, |off, line| add(off, line, &self.shadow));
        let mut lines: Vec<LineChoices> = by_line
            .into_iter()
            .map(|(off, versions)| LineChoices { off, versions })
            .collect();
        lines.sort_by_key(|l| l.off);
        lines
    }

    /// Check a crash point now (the lock is held by the caller).
    fn crash_point(&mut self, at_fence: bool) {
        let Some(mut hook) = self.hook.take() else {
            if at_fence {
                self.without_point += 1;
            }
            return;
        };
        self.points += 1;
        self.thread_counts().crash_points += 1;
        let point = CrashPoint {
            index: self.points,
            thread: self.thread_counts().thread.clone(),
            at_fence,
            lines: self.undecided_lines(),
            len: self.durable_len,
            // The shadow moves into the crash point and back (no copy of the whole pool).
            shadow: std::mem::take(&mut self.shadow),
            changed_since_last: self.changed.replace(Vec::new()),
        };
        IN_HOOK.with(|f| f.set(true));
        hook(&point);
        IN_HOOK.with(|f| f.set(false));
        self.shadow = point.shadow;
        self.hook = Some(hook);
    }

    /// A line's content became surely persisted: `content`, written back at `stamp`.
    fn persisted(&mut self, off: usize, content: &[u8; LINE], stamp: u64) {
        if off + LINE > self.shadow.len() || stamp <= self.stamp_of(off) {
            return;
        }
        if self.shadow[off..off + LINE] != content[..] {
            self.shadow[off..off + LINE].copy_from_slice(content);
            if let Some(c) = self.changed.as_mut() {
                c.push(off);
            }
        }
        self.shadow_stamp.insert(off, stamp);
        // Values older than the write-back can no longer be what the media holds.
        if let Some(h) = self.history.get_mut(&off) {
            h.retain(|(_, s)| *s > stamp);
            if h.is_empty() {
                self.history.remove(&off);
            }
        }
    }

    /// The calling thread's fence completed: what it flushed is persisted.
    fn complete_fence(&mut self) {
        let me = std::thread::current().id();
        if self.msync {
            let pages = self.pending_pages.remove(&me).unwrap_or_default();
            self.stamp += 1;
            let now = self.stamp;
            for (start, end) in pages {
                let mut off = start;
                while off < end.min(self.shadow.len()) {
                    let line = self.line(off);
                    self.persisted(off, &line, now);
                    off += LINE;
                }
            }
        } else {
            for (off, snap, st) in self.pending_lines.remove(&me).unwrap_or_default() {
                self.persisted(off, &snap, st);
            }
        }
    }
}

/// Start simulating power failures of `pool`. Its current contents are taken as persisted
/// (drain it first). `hook` runs at every crash point, on the thread that fences, while every
/// other thread that touches the pool waits (it may open and recover other pools).
pub fn track(pool: &crate::Pool, hook: Hook) {
    *lock() = Some(Tracked::new(pool, hook));
    ACTIVE.store(true, Ordering::SeqCst);
}

/// Start tracking the pool at `path` when it is opened next, before recovery writes anything:
/// crash points then fall inside recovery too. The file's contents at open are taken as
/// persisted.
pub fn track_next_open(path: &Path, hook: Hook) {
    *NEXT_OPEN.lock().unwrap_or_else(|e| e.into_inner()) = Some((path.to_path_buf(), hook));
}

/// Called by `Pool::open` once the pool is mapped and validated, before recovery writes.
pub(crate) fn on_open(pool: &crate::Pool) {
    let mut next = NEXT_OPEN.lock().unwrap_or_else(|e| e.into_inner());
    if next.as_ref().is_some_and(|(p, _)| p == pool.path()) {
        let (_, hook) = next.take().expect("checked");
        track(pool, hook);
    }
}

/// Stop tracking; returns what the run saw.
pub fn stop() -> Stats {
    ACTIVE.store(false, Ordering::SeqCst);
    *NEXT_OPEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let t = lock().take();
    // Dropped outside the lock: the pool handle may be the last one and drain (fence).
    t.map(|t| Stats {
        fences: t.fences,
        crash_points: t.points,
        fences_without_point: t.without_point,
        threads: t.threads.into_iter().map(|(_, c)| c).collect(),
    })
    .unwrap_or_default()
}

/// For canaries outside the library (daisy-kv's): store `data` at pool offset `off` and make
/// it durable at once, outside any transaction and its log, as a bug that bypasses the log
/// would. (The offset must lie in the heap of `pool`.)
pub fn store_durable_now(pool: &crate::Pool, off: u64, data: &[u8]) -> crate::Result<()> {
    let inner = &pool.inner;
    inner.map.write_bytes(off, data);
    inner
        .persist
        .flush(inner.map.at(off, data.len()), data.len());
    inner
        .persist
        .fence()
        .map_err(|e| inner.io_err("persist", e))
}

/// A crash point now, outside any fence (for a driver that wants to know what a crash at this
/// moment leaves, such as after a transaction returned an error).
pub fn crash_now() {
    if !ACTIVE.load(Ordering::SeqCst) {
        return;
    }
    if let Some(t) = lock().as_mut() {
        t.crash_point(false);
    }
}

/// Called by `Mapping` before every store into `[addr, addr + len)`: the content the lines
/// held until now is one they may be found holding after a crash.
pub(crate) fn on_store(addr: usize, len: usize) {
    if ignored() {
        return;
    }
    let mut g = lock();
    let Some(t) = g.as_mut() else { return };
    let Some((start, end)) = t.range(addr, len) else {
        return;
    };
    t.stamp += 1;
    let stamp = t.stamp;
    let mut off = start & !(LINE - 1);
    while off < end && off + LINE <= t.shadow.len() {
        let line = t.line(off);
        if line[..] != t.shadow[off..off + LINE] {
            let h = t.history.entry(off).or_default();
            if !h.iter().any(|(v, _)| *v == line) {
                if h.len() < HISTORY_MAX {
                    h.push((line, stamp));
                } else {
                    // A bounded sample: keep the first values, rotate the newest over the rest.
                    let i = HISTORY_MAX / 2 + (stamp as usize) % (HISTORY_MAX / 2);
                    h[i] = (line, stamp);
                }
            }
        }
        off += LINE;
    }
}

/// Called by `Persister::flush` (and non-temporal copies) for every range flushed.
pub(crate) fn on_flush(addr: *const u8, len: usize) {
    if ignored() {
        return;
    }
    let mut g = lock();
    let Some(t) = g.as_mut() else { return };
    let Some((start, end)) = t.range(addr as usize, len) else {
        return;
    };
    let me = std::thread::current().id();
    if t.msync {
        let page = crate::map::page_size();
        let range = (start & !(page - 1), end.next_multiple_of(page));
        t.pending_pages.entry(me).or_default().push(range);
        return;
    }
    let mut off = start & !(LINE - 1);
    while off < end && off + LINE <= t.shadow.len() {
        t.stamp += 1;
        let snap = t.line(off);
        let st = t.stamp;
        t.pending_lines.entry(me).or_default().push((off, snap, st));
        off += LINE;
    }
}

/// Called by `Persister::fence` of persister `persister`: for the tracked pool, a crash point,
/// then this thread's flushes become persisted.
pub(crate) fn on_fence(persister: u64) {
    if ignored() {
        return;
    }
    let mut g = lock();
    let Some(t) = g.as_mut() else { return };
    if t.persister != persister {
        return;
    }
    t.fences += 1;
    t.thread_counts().fences += 1;
    t.crash_point(true);
    t.complete_fence();
}

/// Called by `Mapping::grow`: the mapping at `base` now spans `new_len` bytes. New extents come
/// from fallocate and read as zeros; they survive a crash once [`on_file_synced`] says so.
pub(crate) fn on_grow(base: *const u8, new_len: usize) {
    let mut g = lock();
    let Some(t) = g.as_mut() else { return };
    if t.base != base as usize || new_len <= t.shadow.len() {
        return;
    }
    t.shadow.resize(new_len, 0);
}

/// Called after a file sync of the pool file at `base`: its length `len` is durable.
pub(crate) fn on_file_synced(base: *const u8, len: usize) {
    let mut g = lock();
    let Some(t) = g.as_mut() else { return };
    if t.base != base as usize {
        return;
    }
    let len = len.min(t.shadow.len());
    if len != t.durable_len {
        t.durable_len = len;
        t.changed = None;
    }
}
