//! Power-failure simulation (cargo feature `sim`; absent from normal builds).
//!
//! Fault model (x86 with ADR, what pmem mode assumes): a store reaches the media when its cache
//! line is written back, which happens for sure after a flush of the line *and* a later fence
//! on the flushing thread, and may happen at any earlier moment (eviction). So after a power
//! failure, each cache line holds the content it had at its last sure write-back, or any later
//! content it had since, and aligned 8-byte words are the only atomic unit.
//!
//! The simulator keeps a **shadow** image of what is surely persisted. Every flush of a tracked
//! range snapshots the flushed lines into the flushing thread's pending set; every fence makes
//! that thread's pending snapshots part of the shadow. At each fence (a *crash point*, taken
//! before the fence completes) it hands the crash hook the shadow and every line that may hold
//! something else: lines flushed but not fenced (their snapshots) and lines whose current
//! content differs from the shadow (dirty, never flushed: this finds stores that bypass the
//! persistence API). The hook builds crash images from those and checks each with the real
//! recovery code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

const LINE: usize = 64;

/// Faults that a test can inject, to show the simulator catches the bugs it exists for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Fault {
    /// Commit without flushing the log record.
    NoRecordFlush = 1,
    /// Commit without the commit fence.
    NoCommitFence = 2,
    /// Apply the transaction in place before its log record is persisted.
    ApplyBeforeCommit = 4,
    /// Never flush applied data lines (deferred flushes are dropped).
    NoDataFlush = 8,
    /// Hash maps write slots in place without first retiring the transactions that wrote
    /// the map (collections/table.rs, "In-place slot writes").
    NoInPlaceBarrier = 16,
    /// Hash maps' in-place slot writes are not flushed.
    NoInPlaceFlush = 32,
    /// A one-word transaction is written in place although an older record that recovery may
    /// still replay exists (tx.rs, "One-word transactions").
    InPlaceUncovered = 64,
}

static FAULTS: AtomicU32 = AtomicU32::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);

pub fn inject(f: Fault) {
    FAULTS.fetch_or(f as u32, Ordering::SeqCst);
}

pub fn clear_faults() {
    FAULTS.store(0, Ordering::SeqCst);
}

#[inline]
pub fn fault(f: Fault) -> bool {
    FAULTS.load(Ordering::Relaxed) & f as u32 != 0
}

/// One line that may hold something other than its shadow content at a crash.
#[derive(Clone, Debug)]
pub struct LineChoices {
    /// Offset of the line in the pool file.
    pub off: usize,
    /// Possible contents besides the shadow's (snapshots taken at flushes, the current one).
    pub versions: Vec<[u8; LINE]>,
}

/// What a crash at this moment could leave on the media.
#[derive(Clone, Debug)]
pub struct CrashPoint {
    /// Number of this crash point (fences seen so far).
    pub index: u64,
    /// Surely persisted image of the pool file.
    pub shadow: Vec<u8>,
    pub lines: Vec<LineChoices>,
    /// Offsets of the shadow lines that changed since the previous crash point, or None when
    /// the shadow grew or this is the first point (a copy of the previous shadow plus these
    /// lines equals this one).
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

    /// The shadow with `picks[i]` applied to line `i`: 0 keeps the shadow content, k > 0 takes
    /// `versions[k-1]`. `torn[i]`, when set, mixes old and new per 8-byte word with its bits.
    pub fn image(&self, picks: &[usize], torn: &[u8]) -> Vec<u8> {
        let mut img = self.shadow.clone();
        for (i, l) in self.lines.iter().enumerate() {
            let k = picks.get(i).copied().unwrap_or(0);
            if k == 0 {
                continue;
            }
            let v = &l.versions[k - 1];
            let mask = torn.get(i).copied().unwrap_or(0xff);
            for w in 0..8 {
                if mask & (1 << w) != 0 {
                    img[l.off + w * 8..l.off + w * 8 + 8].copy_from_slice(&v[w * 8..w * 8 + 8]);
                }
            }
        }
        img
    }
}

type Hook = Box<dyn FnMut(&CrashPoint) + Send>;

struct Tracked {
    pool: crate::Pool,
    base: usize,
    reserved: usize,
    shadow: Vec<u8>,
    pending: HashMap<ThreadId, Vec<(usize, [u8; LINE])>>,
    /// Shadow lines changed since the last crash point (None: grown, or no point yet).
    changed: Option<Vec<usize>>,
    fences: u64,
    hook: Option<Hook>,
}

static STATE: Mutex<Option<Tracked>> = Mutex::new(None);

thread_local! {
    /// Set while the crash hook runs: the hook's own pools (recovering crash images) flush and
    /// fence too, and must not count as the workload's.
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Make the simulator ignore this thread's flushes and fences from now on (threads that
/// recover crash images on behalf of the hook).
pub fn ignore_current_thread() {
    IN_HOOK.with(|h| h.set(true));
}

fn ignored() -> bool {
    !ACTIVE.load(Ordering::Relaxed) || IN_HOOK.with(|h| h.get())
}

/// Start simulating power failures of `pool`. Its current contents are taken as persisted
/// (drain it first). `hook` runs at every crash point, on the thread that fences, with no
/// simulator lock held (it may open and recover other pools).
pub fn track(pool: &crate::Pool, hook: Hook) {
    let map = &pool.inner.map;
    let mut shadow = vec![0u8; map.len()];
    map.read_bytes(0, &mut shadow);
    *STATE.lock().unwrap() = Some(Tracked {
        pool: pool.clone(),
        base: map.base() as usize,
        reserved: map.reserved(),
        shadow,
        pending: HashMap::new(),
        changed: None,
        fences: 0,
        hook: Some(hook),
    });
    ACTIVE.store(true, Ordering::SeqCst);
}

/// Stop tracking; returns the number of crash points seen.
pub fn stop() -> u64 {
    ACTIVE.store(false, Ordering::SeqCst);
    let t = STATE.lock().unwrap().take();
    // Dropped outside the lock: the pool handle may be the last one and drain (fence).
    t.map(|t| t.fences).unwrap_or(0)
}

/// Called by `Persister::flush` (and non-temporal copies) for every range made durable.
pub(crate) fn on_flush(addr: *const u8, len: usize) {
    if ignored() {
        return;
    }
    let mut g = STATE.lock().unwrap();
    let Some(t) = g.as_mut() else { return };
    let a = addr as usize;
    if a < t.base || a >= t.base + t.reserved {
        return;
    }
    let start = (a - t.base) & !(LINE - 1);
    let end = a - t.base + len;
    let me = std::thread::current().id();
    let mut off = start;
    let mapped = t.pool.inner.map.len();
    while off < end && off + LINE <= mapped {
        let mut snap = [0u8; LINE];
        t.pool.inner.map.read_bytes(off as u64, &mut snap);
        t.pending.entry(me).or_default().push((off, snap));
        off += LINE;
    }
}

/// Called by `Persister::fence`: a crash point, then this thread's flushes become persisted.
pub(crate) fn on_fence() {
    if ignored() {
        return;
    }
    let (point, mut hook) = {
        let mut g = STATE.lock().unwrap();
        let Some(t) = g.as_mut() else { return };
        let len = t.pool.inner.map.len();
        if t.shadow.len() < len {
            // Growth: new extents come from fallocate (zeros) and are persisted before use.
            t.shadow.resize(len, 0);
            t.changed = None;
        }
        t.fences += 1;
        let mut by_line: HashMap<usize, Vec<[u8; LINE]>> = HashMap::new();
        for list in t.pending.values() {
            for (off, snap) in list {
                if snap[..] != t.shadow[*off..*off + LINE] {
                    let v = by_line.entry(*off).or_default();
                    if !v.contains(snap) {
                        v.push(*snap);
                    }
                }
            }
        }
        t.pool
            .inner
            .map
            .for_each_differing_line(&t.shadow, |off, line| {
                let v = by_line.entry(off).or_default();
                if !v.contains(line) {
                    v.push(*line);
                }
            });
        let mut lines: Vec<LineChoices> = by_line
            .into_iter()
            .map(|(off, versions)| LineChoices { off, versions })
            .collect();
        lines.sort_by_key(|l| l.off);
        // The shadow moves into the crash point and back (no copy of the whole pool).
        let point = CrashPoint {
            index: t.fences,
            shadow: std::mem::take(&mut t.shadow),
            lines,
            changed_since_last: t.changed.replace(Vec::new()),
        };
        (point, t.hook.take())
    };
    if let Some(h) = hook.as_mut() {
        IN_HOOK.with(|f| f.set(true));
        h(&point);
        IN_HOOK.with(|f| f.set(false));
    }
    let mut g = STATE.lock().unwrap();
    if let Some(t) = g.as_mut() {
        if t.hook.is_none() {
            t.hook = hook;
        }
        t.shadow = point.shadow;
        // The fence completes: this thread's flushed snapshots are now surely persisted.
        let me = std::thread::current().id();
        if let Some(list) = t.pending.remove(&me) {
            for (off, snap) in list {
                if off + LINE <= t.shadow.len() {
                    t.shadow[off..off + LINE].copy_from_slice(&snap);
                    if let Some(c) = t.changed.as_mut() {
                        c.push(off);
                    }
                }
            }
        }
    }
}
