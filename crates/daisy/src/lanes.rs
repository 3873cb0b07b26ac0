//! The log lanes and the watermark protocol (docs/FORMAT.md sections 5 and 6): each lane's
//! published bounds, its private state (held while a transaction runs on it), the lines it
//! applied and has not yet written back, the claims that tell recovery what is durable, and
//! the helpers that make an idle lane's transactions durable for it.
//!
//! The hardest reasoning of the format lives here, in one place: what `compute_watermark`
//! may claim, in which order a committing lane publishes its bounds (tx.rs follows it), how
//! `advance_watermark` helps lanes that went idle and raises the persisted watermark.

use crate::alloc::LaneAlloc;
use crate::buffers::TxBuffers;
use crate::error::{Error, Result};
use crate::layout::STATE_WATERMARK;
use crate::lock::SpinLock;
use crate::media::Media;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A value alone on its own pair of cache lines (no false sharing with its neighbours).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// `D`: how many of its own commits a lane lets pass before it flushes the data lines a
/// transaction applied, for a pool of `K = slots` log slots per lane: `D = K - 2`. The flush
/// then rides on that later commit's one fence, and a line that is written again meanwhile is
/// flushed once for all those writes. A log slot is reused after `K` commits, and recovery may
/// drop a record only once a claim covers it, so the deferral must leave two commits of slack.
#[inline(always)]
pub fn defer_commits(slots: u32) -> u64 {
    slots as u64 - 2
}

/// Data lines a lane applied but has not flushed yet, oldest first: a queue in a Vec
/// (`q[head..]`), which is cheaper than a VecDeque on the commit path.
///
/// A line already waiting in the queue is not queued again: its earlier entry is flushed
/// sooner, and a flush writes back whatever the line holds by then, newer bytes included.
/// `tags` is a small direct-mapped filter that finds such lines in O(1).
/// A tag is (line, number of its newest entry). Invariant: `tags[slot(l)].0 == l` implies that
/// entry is still in the queue: popping it clears the tag. Popping an older duplicate does not,
/// so duplicates die out. Two lines that share a tag slot only cost a duplicate entry (one more
/// flush), never a missed one.
pub(crate) struct DirtyLines {
    /// (line address, lane commit number that dirtied it first, that transaction's seq)
    q: Vec<(usize, u64, u64)>,
    head: usize,
    tags: [(usize, u64); DIRTY_TAGS],
    /// Entries pushed so far: the entry at `q[i]` is number `pushed - (q.len() - i)`.
    pushed: u64,
}

const DIRTY_TAGS: usize = 64;

// `Lane::written_slots` has a bit per slot.
const _: () = assert!(crate::layout::MAX_SLOTS_PER_LANE <= 64);

/// Most applied lines a lane leaves waiting for a later fence: past it, a commit writes back
/// every waiting line with its own fence. The deferral (`D` commits) saves write-backs of
/// lines written again and again; this bound keeps what a crash leaves to replay small
/// whatever the transactions' size and rate. A transaction counts as undurable (holding
/// claims, and so recovery's watermark, back) while any of its lines waits, so without the
/// bound a lane of big transactions (a server's group commits of a thousand lines each) left
/// `D` whole records to replay, at one page fault per random line: 13 ms of recovery after a
/// crash under a pipelined SET load, against 0.3 ms after a clean shutdown. With it, a crash
/// leaves to replay at most the lines waiting (this many) and the lane's two newest records
/// (a record's claim can count only what was durable before its own fence, so the newest
/// record and the one before it are always replayed; docs/FORMAT.md section 6).
const DIRTY_LINES_MAX: usize = 1024;

impl Default for DirtyLines {
    fn default() -> Self {
        DirtyLines {
            q: Vec::new(),
            head: 0,
            tags: [(0, 0); DIRTY_TAGS],
            pushed: 0,
        }
    }
}

impl DirtyLines {
    #[inline(always)]
    fn tag_slot(line: usize) -> usize {
        (line / crate::persist::CACHE_LINE) % DIRTY_TAGS
    }

    /// Remember a line, unless it is already waiting (see the type's comment).
    #[inline(always)]
    pub(crate) fn push(&mut self, line: usize, lc: u64, seq: u64) {
        let t = &mut self.tags[Self::tag_slot(line)];
        if t.0 == line {
            return;
        }
        *t = (line, self.pushed);
        self.pushed += 1;
        self.q.push((line, lc, seq));
    }

    #[inline(always)]
    pub(crate) fn front(&self) -> Option<(usize, u64, u64)> {
        self.q.get(self.head).copied()
    }

    #[inline(always)]
    pub(crate) fn pop_front(&mut self) {
        let line = self.q[self.head].0;
        let number = self.pushed - (self.q.len() - self.head) as u64;
        let t = &mut self.tags[Self::tag_slot(line)];
        if *t == (line, number) {
            *t = (0, 0);
        }
        self.head += 1;
        if self.head == self.q.len() {
            self.q.clear();
            self.head = 0;
        }
    }

    /// Drop the popped entries from the front of the vector. The queue empties completely only
    /// after a few commits that dirty nothing, which a steady stream of writes never gives, so
    /// without this `q` would only grow. Entry numbers depend on `q.len() - head` alone, so
    /// the tags stay valid.
    #[inline(always)]
    pub(crate) fn compact(&mut self) {
        if self.head >= 4096 && self.head * 2 >= self.q.len() {
            self.q.drain(..self.head);
            self.head = 0;
        }
    }

    #[inline(always)]
    pub(crate) fn oldest_seq(&self) -> u64 {
        self.front().map(|e| e.2).unwrap_or(u64::MAX)
    }

    /// Lines waiting.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.q.len() - self.head
    }

    /// Flush (no fence) the oldest lines while `due(lane commit number that dirtied the line)`
    /// holds, or all of them when more than [`DIRTY_LINES_MAX`] wait, and forget them: the
    /// caller's next fence makes them durable.
    #[inline(always)]
    pub(crate) fn flush_while(&mut self, pool: &Media, due: impl Fn(u64) -> bool) {
        let all = self.len() > DIRTY_LINES_MAX;
        while let Some((line, first, _)) = self.front() {
            if !all && !due(first) {
                break;
            }
            if !sim_fault!(NoDataFlush) {
                pool.persist.flush(line as *const u8, 1);
            }
            self.pop_front();
        }
        self.compact();
    }
}

/// One log lane: a thread runs a transaction on a lane it holds exclusively.
///
/// The watermark (`Lanes::compute_watermark`) reads four words per lane; the owner writes
/// them without any lock:
/// * `inflight_lb`: while committing, a lower bound of the seq being committed (stored relaxed
///   before the AcqRel `fetch_add` that takes the seq, so a reader that acquires the new
///   counter value sees it); u64::MAX otherwise;
/// * `undurable_from`: the oldest seq of this lane whose applied lines the owner has not yet
///   flushed and fenced (u64::MAX: none);
/// * `last_committed`: the newest seq this lane has fully applied;
/// * `helped_to`: written by helpers: every transaction of this lane up to it is durable.
///
/// After applying, the owner stores `undurable_from`, then `last_committed`, then clears
/// `inflight_lb` (Release); readers load them in the opposite order (Acquire). See
/// [`Lane::oldest_undurable`] for how they combine.
///
/// Layout: the owner writes its `state` all through a transaction, while other threads read
/// the four words on every commit; `repr(C)` and the padded `state` keep them on different
/// cache lines (no false sharing).
#[repr(C, align(128))]
pub(crate) struct Lane {
    pub state: Padded<SpinLock<LaneState>>,
    pub inflight_lb: AtomicU64,
    pub undurable_from: AtomicU64,
    pub last_committed: AtomicU64,
    pub helped_to: AtomicU64,
    /// Slots the owner has written a record into since the pool was opened (bit i: slot i;
    /// slots per lane are at most 64), each bit set before the `last_committed` store of the
    /// first record in its slot. A record in any other slot predates the open, and recovery
    /// made it durable before the open returned: [`Lane::help_flush`] reads only these slots,
    /// so a helper never touches (and page-faults in) the log slots a lane has not used.
    pub written_slots: AtomicU64,
    /// The thread holding the lane ([`thread_token`]; 0: none, or just being taken). Written
    /// by the holder only; read by a thread that finds every lane busy, to tell whether it
    /// would wait for itself (a transaction nested in its own).
    pub owner: AtomicUsize,
    pub index: usize,
}

impl Lane {
    pub fn new(st: LaneState) -> Lane {
        Lane {
            index: st.index,
            state: Padded(SpinLock::new(st)),
            inflight_lb: AtomicU64::new(u64::MAX),
            undurable_from: AtomicU64::new(u64::MAX),
            last_committed: AtomicU64::new(0),
            helped_to: AtomicU64::new(0),
            written_slots: AtomicU64::new(0),
            owner: AtomicUsize::new(0),
        }
    }

    /// A lower bound of the oldest transaction of this lane that may not be durable (in
    /// flight, or applied but not yet flushed and fenced); u64::MAX when none.
    #[inline]
    pub fn oldest_undurable(&self) -> u64 {
        let inflight = self.inflight_lb.load(Ordering::Acquire);
        let last = self.last_committed.load(Ordering::Acquire);
        let undurable = self.undurable_from.load(Ordering::Acquire);
        let helped = self.helped_to.load(Ordering::Acquire);
        let applied = if undurable > helped {
            undurable
        } else if last <= helped {
            // A helper made everything this lane committed durable.
            u64::MAX
        } else {
            helped + 1
        };
        inflight.min(applied)
    }

    /// Make every transaction this lane has applied durable, without waiting for its owner
    /// (who may be running user code that waits for us).
    ///
    /// The owner keeps its unflushed lines privately; the helper instead re-reads the lane's
    /// log records. Every transaction of the lane up to `last_committed` is either still in a
    /// slot (a slot is reused only once a durable claim covers its record) or already durable,
    /// so flushing the targets of the records up to `last_committed` and fencing makes all of
    /// them durable. Records newer than that may not be applied yet and are skipped. Only
    /// the slots written since the open can hold such a record (`written_slots`, loaded
    /// after `last_committed`: every slot of a record up to `last` is marked by then).
    pub fn help_flush(&self, pool: &Media) -> Result<()> {
        let last = self.last_committed.load(Ordering::Acquire);
        if last <= self.helped_to.load(Ordering::Acquire) {
            return Ok(());
        }
        let written = self.written_slots.load(Ordering::Acquire);
        let bounds = crate::log::TargetBounds {
            chunk_table_off: pool.hdr.chunk_table_off,
            data_end: pool.heap_end(),
        };
        for slot in 0..pool.hdr.slots_per_lane as usize {
            if written & (1 << slot) == 0 {
                continue;
            }
            let off = crate::log::slot_offset(&pool.hdr, self.index, slot);
            if let crate::log::SlotState::Valid(mut rec) =
                crate::log::parse_slot(&pool.map, off, pool.hdr.slot_size, bounds)
            {
                // An overflow record whose extent no longer holds its payload was retired
                // (its extent is reused only once a durable claim covers it): its lines are
                // durable, nothing to flush.
                if rec.seq <= last && crate::log::load_overflow(&pool.map, &mut rec, bounds).is_ok()
                {
                    for e in &rec.entries {
                        let len = e.len as usize;
                        pool.persist.flush(pool.map.at(e.target, len), len);
                    }
                }
            }
        }
        pool.persist
            .fence()
            .map_err(|e| pool.io_err("persist", e))?;
        sim_event!(Help);
        self.helped_to.fetch_max(last, Ordering::AcqRel);
        Ok(())
    }
}

/// Per-lane state, protected by the lane mutex.
pub(crate) struct LaneState {
    pub index: usize,
    pub next_slot: u32,
    /// Seq of the record in each slot (0: empty or retired long ago).
    pub slot_seq: Vec<u64>,
    pub alloc: LaneAlloc,
    pub buf: TxBuffers,
    /// Largest watermark this lane itself made durable (in its own fenced records). The global
    /// `persisted_claim` is updated from it only now and then, to keep the commit path free of
    /// shared read-modify-writes.
    pub durable_claim: u64,
    /// Commits this lane has made (numbers the dirty lines for [`defer_commits`]).
    pub commit_no: u64,
    /// Lines applied but not yet flushed (owner-private; helpers use the log instead).
    pub dirty: DirtyLines,
    /// One-word transactions logged in a row because a record was not yet covered (see
    /// [`IN_PLACE_AFTER`]).
    pub logged_single_words: u32,
}

/// Every lane of a pool, the commit counter and the persisted watermark: the state the
/// watermark protocol works on.
pub(crate) struct Lanes {
    pub list: Box<[Lane]>,
    /// Next commit sequence number to hand out. Every commit of every thread writes it, so it
    /// sits alone on its cache lines, away from fields that every transaction only reads.
    pub next_seq: Padded<AtomicU64>,
    /// Largest watermark known to be durable (in a fenced log record or the state page).
    pub persisted_claim: AtomicU64,
    /// Lanes ever taken in this process (the watermark reads only these).
    pub in_use: AtomicUsize,
}

impl std::ops::Deref for Lanes {
    type Target = [Lane];
    #[inline(always)]
    fn deref(&self) -> &[Lane] {
        &self.list
    }
}

impl Lanes {
    /// The durable watermark candidate: one less than the oldest transaction that is in flight
    /// or applied but not yet fenced, on any lane.
    pub fn compute_watermark(&self) -> u64 {
        // No lane is the caller's own: every lane's published bound is read.
        self.compute_watermark_owner(usize::MAX, u64::MAX)
    }

    /// [`Self::compute_watermark`] as the owner of lane `own` computes it while committing:
    /// its own lane's bound comes from what the owner knows privately (`own_bound`: the lower
    /// bound it published in `inflight_lb`, or its oldest unflushed transaction if older),
    /// instead of four loads and their combination. Helpers can only raise a lane's bound
    /// (`helped_to`), so the private one is never above the published one: the result is a
    /// valid watermark, at most lower. (With one lane in use, the usual case of one thread,
    /// no other lane is read at all.)
    #[inline(always)]
    pub fn compute_watermark_owner(&self, own: usize, own_bound: u64) -> u64 {
        // The counter first, then the lanes (see `Lane` for the pairing stores).
        let mut m = self.next_seq.load(Ordering::Acquire).min(own_bound);
        let n = self.in_use.load(Ordering::Acquire).min(self.list.len());
        for i in 0..n {
            if i != own {
                m = m.min(self.list[i].oldest_undurable());
            }
        }
        m - 1
    }

    /// Make the durable watermark reach at least `target` (every transaction with seq <=
    /// target durably applied, and that fact itself durable). Helps idle lanes by flushing their
    /// last applied ranges; waits only for lanes that are inside a commit.
    pub fn advance_watermark(&self, media: &Media, target: u64) -> Result<()> {
        if self.persisted_claim.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        let mut spins = 0u32;
        loop {
            if media.poisoned.load(Ordering::Acquire) {
                // A commit that stopped between its fence and its apply keeps its lane in
                // flight (no watermark may pass it), so waiting for it would never end.
                return Err(Error::Poisoned {
                    path: media.path.clone(),
                });
            }
            let n = self.in_use.load(Ordering::SeqCst).min(self.list.len());
            for lane in &self.list[..n] {
                if lane.oldest_undurable() <= target {
                    lane.help_flush(media)?;
                }
            }
            let w = self.compute_watermark();
            if w >= target {
                let word = media.map.atomic_u64(STATE_WATERMARK);
                word.fetch_max(w, Ordering::AcqRel);
                sim_event!(WatermarkWrite);
                media.persist.flush(media.map.at(STATE_WATERMARK, 8), 8);
                media
                    .persist
                    .fence()
                    .map_err(|e| media.io_err("persist", e))?;
                self.persisted_claim.fetch_max(w, Ordering::AcqRel);
                return Ok(());
            }
            // Some lane is inside a commit with an older sequence number: it finishes without
            // running user code, so this wait is bounded.
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Make every committed transaction durable and retired.
    pub fn drain_all(&self, media: &Media) -> Result<()> {
        let target = self.next_seq.load(Ordering::SeqCst) - 1;
        self.advance_watermark(media, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's queue of lines to flush, driven as commit drives it: every commit dirties a
    /// new line and a hot one. The hot line is queued once while it waits (flushed about once
    /// per `D` commits, even though new lines keep colliding with its tag), every
    /// new line is flushed, and the vector stays bounded however long the run.
    #[test]
    fn dirty_queue_dedups_and_stays_bounded() {
        const DEFER_COMMITS: u64 = 6;
        let mut d = DirtyLines::default();
        let hot = 0x40usize;
        let (mut fresh_flushed, mut hot_flushed) = (0u64, 0u64);
        let commits = 200_000u64;
        for lc in 1..=commits {
            while let Some((line, first, _)) = d.front() {
                if first + DEFER_COMMITS > lc {
                    break;
                }
                if line == hot {
                    hot_flushed += 1;
                } else {
                    fresh_flushed += 1;
                }
                d.pop_front();
            }
            d.compact();
            d.push(0x100000 + lc as usize * 64, lc, lc);
            d.push(hot, lc, lc);
            assert!(
                d.q.len() < 20_000,
                "queue vector grows: {} at commit {lc}",
                d.q.len()
            );
        }
        assert_eq!(fresh_flushed, commits - DEFER_COMMITS);
        let once_per_window = commits / DEFER_COMMITS;
        assert!(
            hot_flushed <= once_per_window + once_per_window / 10,
            "hot line flushed {hot_flushed} times, about {once_per_window} expected"
        );
        assert!(hot_flushed >= once_per_window - 1);
    }
}
