//! Recovery: what opening a pool does once its header and state page are validated.
//!
//! Two steps, so that a damaged pool is refused before anything is written:
//!
//! 1. [`scan`] (read-only) reads every log slot, refuses corruption (an invalid slot that is
//!    not its lane's in-flight slot, two records with one sequence number, a state that replay
//!    would make invalid), and computes the watermark `W` = max(state watermark, claims of the
//!    valid records), the records to replay (seq > W, in seq order), and the lanes' state.
//! 2. [`recover`] (the first writes; the pool is already assembled) replays those records in
//!    commit order, flushes what they wrote, fences, and only then raises the state page's
//!    watermark past them (flush, fence). A crash anywhere in between leaves the same records
//!    to replay, and replaying is idempotent: each record is the complete redo image of one
//!    committed transaction, applied in commit order.
//!
//! Why replay is correct, and why no older record is replayed over newer data: docs/FORMAT.md
//! section 5. Cost: the scan reads every slot's 32-byte header and checksums only the records
//! whose claim or replay matters (newer than the state page's watermark); see [`scan`].

use crate::error::{Error, Result};
use crate::layout::*;
use crate::log::*;
use crate::log::{self, Record, SlotState, TargetBounds};
use crate::map::Mapping;
use crate::media::Media;
use std::path::Path;
use std::sync::atomic::Ordering;

/// What recovery found and did when the pool was opened.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Valid log records read (committed transactions, replayed or already covered by a
    /// claim); slots of records no claim can need are counted in `records_retired`.
    pub records_valid: usize,
    /// Committed transactions whose effects recovery re-applied.
    pub records_replayed: usize,
    /// Torn (in-flight, never committed) records that recovery ignored.
    pub records_torn: usize,
    /// Slots whose header names a record that the watermark retired: only the header was
    /// read.
    pub records_retired: usize,
    /// Bytes of log read (headers of every slot, whole records where they matter).
    pub log_bytes_read: u64,
    /// Cache lines written by replay (each flushed once).
    pub replayed_lines: u64,
    /// Time spent reading the logs, microseconds.
    pub scan_micros: u64,
    /// Time spent replaying and making the replay durable, microseconds.
    pub replay_micros: u64,
    /// Time spent in open, microseconds.
    pub open_micros: u64,
    /// A snapshot ([`crate::Pool::open_snapshot`]) of a pool that another process (or handle)
    /// had open for writing: what it shows may include transactions in flight.
    pub opened_in_use: bool,
}

/// The result of reading the logs (step 1).
pub(crate) struct LogScan {
    /// Records to replay: seq > `watermark`, in seq order.
    pub replay: Vec<Record>,
    /// Per lane: the slot its next commit writes, and the seq of the record in each slot (0:
    /// empty, torn, or retired by the state page's watermark).
    pub lane_slots: Vec<(u32, Vec<u64>)>,
    /// W: every transaction with seq <= W is durably applied.
    pub watermark: u64,
    /// The undo table the state page names, and what it says to put back (undo.rs).
    pub undo: crate::undo::UndoScan,
    /// The newest committed transaction (the next one takes `max_seq + 1`).
    pub max_seq: u64,
    pub report: RecoveryReport,
}

impl LogScan {
    /// Whether recovery has anything to write (records to replay, or a watermark to raise).
    pub fn needs_writes(&self, state: &PoolState) -> bool {
        !self.replay.is_empty() || self.watermark != state.watermark || self.undo.table != 0
    }
}

/// Step 1: read the logs without writing anything.
///
/// Every slot's 32-byte header is read. The records that matter are parsed and checksummed:
/// each lane's newest valid record (found from the headers, newest first), whose claims give a
/// first watermark `W0` (with the state page's), and every record a header says is newer than
/// `W0`, which may be replayed or raise the watermark further. A slot whose header names a
/// record at or below `W0` (magic right, `claim < seq <= W0`) holds a record no claim can need
/// any more: it is never replayed and its claim cannot raise `W`, so its payload is not read.
/// (Such a slot may also hold a torn write over a retired record, harmless the same way; or
/// damage, which the lane's next commit overwrites and which `pool check` reports, as it
/// validates every slot.) So the log read is the headers plus a few records per lane, bounded
/// by the deferral bound of tx.rs (`DIRTY_LINES_MAX`), not by the log's geometry: after a crash
/// under load, as after a clean shutdown.
pub(crate) fn scan(path: &Path, map: &Mapping, hdr: &Header, state: &PoolState) -> Result<LogScan> {
    let t0 = std::time::Instant::now();
    let bounds = TargetBounds {
        chunk_table_off: hdr.chunk_table_off,
        data_end: state.heap_end,
    };
    let mut report = RecoveryReport::default();
    let k = hdr.slots_per_lane as usize;
    let lanes = hdr.lane_count as usize;
    // Per lane: each slot's header, and what parsing found (None: not parsed).
    let mut heads: Vec<Vec<LogHeader>> = Vec::with_capacity(lanes);
    let mut parsed: Vec<Vec<Option<SlotState>>> = Vec::with_capacity(lanes);
    let mut w0 = state.watermark;
    for lane in 0..lanes {
        let h: Vec<LogHeader> = (0..k)
            .map(|s| map.read(log::slot_offset(hdr, lane, s)))
            .collect();
        report.log_bytes_read += (k * LOG_HEADER_SIZE) as u64;
        let mut p: Vec<Option<SlotState>> = (0..k).map(|_| None).collect();
        // The lane's newest valid record: parse the slots newest first (by their headers).
        let mut order: Vec<usize> = (0..k).filter(|&s| h[s].magic == LOG_MAGIC).collect();
        order.sort_by_key(|&s| std::cmp::Reverse(h[s].seq));
        for s in order {
            let st = log::parse_slot(map, log::slot_offset(hdr, lane, s), hdr.slot_size, bounds);
            let valid = matches!(st, SlotState::Valid(_));
            if let SlotState::Valid(r) = &st {
                w0 = w0.max(r.claim);
            }
            p[s] = Some(st);
            if valid {
                break;
            }
        }
        heads.push(h);
        parsed.push(p);
    }
    let retired =
        |h: &LogHeader| h.magic == LOG_MAGIC && h.seq != 0 && h.claim < h.seq && h.seq <= w0;
    // (lane, slot, record) of every valid record parsed; per lane, each slot's seq and the
    // invalid slots.
    let mut records: Vec<(usize, usize, Record)> = Vec::new();
    let mut lane_seqs: Vec<Vec<u64>> = Vec::with_capacity(lanes);
    let mut lane_invalid: Vec<Vec<(usize, String)>> = Vec::with_capacity(lanes);
    let mut watermark = w0;
    for lane in 0..lanes {
        let mut seqs = vec![0u64; k];
        let mut invalid: Vec<(usize, String)> = Vec::new();
        for slot in 0..k {
            let st = match parsed[lane][slot].take() {
                Some(st) => st,
                None if retired(&heads[lane][slot]) => {
                    seqs[slot] = heads[lane][slot].seq;
                    report.records_retired += 1;
                    continue;
                }
                None => log::parse_slot(
                    map,
                    log::slot_offset(hdr, lane, slot),
                    hdr.slot_size,
                    bounds,
                ),
            };
            match st {
                SlotState::Empty => {}
                SlotState::Valid(r) => {
                    report.log_bytes_read += r.payload.len() as u64;
                    seqs[slot] = r.seq;
                    watermark = watermark.max(r.claim);
                    records.push((lane, slot, r));
                }
                SlotState::Invalid(why) => invalid.push((slot, why)),
            }
        }
        lane_seqs.push(seqs);
        lane_invalid.push(invalid);
    }
    // Overflow records to replay: read their extents. A record whose extent does not hold its
    // payload was torn before its commit fence if it is its lane's newest record (the fence
    // covers slot and extent; the lane wrote nothing after it), and is then dropped like any
    // torn record; anywhere else it is corruption. (Retired records' extents are not read:
    // they may hold other objects by now.)
    let mut torn_overflow = Vec::new();
    // A torn overflow record keeps its seq taken: its slot still holds a checksummed header
    // until its lane writes there again, and no other record may carry that seq meanwhile.
    let max_seq = records
        .iter()
        .map(|r| r.2.seq)
        .max()
        .unwrap_or(0)
        .max(watermark);
    for (i, (lane, slot, r)) in records.iter_mut().enumerate() {
        if r.seq <= watermark || r.overflow.is_none() {
            continue;
        }
        if let Err(why) = log::load_overflow(map, r, bounds) {
            let newest = lane_seqs[*lane].iter().max().copied() == Some(r.seq);
            if !newest {
                return Err(Error::corrupt(
                    path,
                    format!("log lane {lane} slot {slot}: {why} (not the lane's newest record)"),
                ));
            }
            lane_seqs[*lane][*slot] = 0;
            torn_overflow.push(i);
        } else {
            report.log_bytes_read += r.payload.len() as u64;
        }
    }
    for &i in torn_overflow.iter().rev() {
        records.remove(i);
        report.records_torn += 1;
    }
    let mut lane_slots = Vec::with_capacity(lanes);
    for (lane, (seqs, invalid)) in lane_seqs.into_iter().zip(lane_invalid).enumerate() {
        // Slots are written round-robin, so the only slot that may legitimately hold a torn
        // record is the one after the lane's newest valid record (slot 0 if none).
        let newest = (0..k).filter(|&s| seqs[s] != 0).max_by_key(|&s| seqs[s]);
        let in_flight = newest.map(|s| (s + 1) % k).unwrap_or(0);
        for (slot, why) in invalid {
            if slot != in_flight {
                return Err(Error::corrupt(
                    path,
                    format!("log lane {lane} slot {slot}: {why} (not the lane's in-flight slot)"),
                ));
            }
            report.records_torn += 1;
        }
        lane_slots.push((in_flight as u32, seqs));
    }
    let mut records: Vec<Record> = records.into_iter().map(|(_, _, r)| r).collect();
    // Sequence numbers must be unique among valid records.
    records.sort_by_key(|r| r.seq);
    for w in records.windows(2) {
        if w[0].seq == w[1].seq {
            return Err(Error::corrupt(
                path,
                format!("two log records with sequence number {}", w[0].seq),
            ));
        }
    }
    report.records_valid = records.len();
    let replay: Vec<Record> = records.into_iter().filter(|r| r.seq > watermark).collect();
    report.records_replayed = replay.len();
    // Direct stores of transactions that did not commit (format version 5): what to put
    // back, found now so that a damaged undo table refuses the pool before any write.
    let undo = crate::undo::scan(
        path,
        map,
        hdr,
        state.undo_table,
        state.heap_end,
        &lane_slots,
    )?;
    report.scan_micros = t0.elapsed().as_micros() as u64;
    Ok(LogScan {
        replay,
        lane_slots,
        watermark,
        undo,
        max_seq,
        report,
    })
}

/// The state page's first words as they will be after replaying `records` (read-only: only
/// the entries that touch those words are evaluated, on a copy). Open validates this before
/// it writes anything, so a damaged record that would install a bad heap end or root is
/// refused with the file untouched.
pub(crate) fn state_after_replay(state: PoolState, records: &[Record]) -> PoolState {
    let mut words = state;
    let buf = bytemuck::bytes_of_mut(&mut words);
    let (lo, hi) = (STATE_OFF, STATE_OFF + buf.len() as u64);
    for (r, e) in records
        .iter()
        .flat_map(|r| r.entries.iter().map(move |e| (r, e)))
    {
        // Entries were bounds-checked by parse_slot, so target + len does not overflow.
        let (s, t) = (e.target.max(lo), (e.target + e.len).min(hi));
        if s >= t {
            continue;
        }
        let dst = &mut buf[(s - lo) as usize..(t - lo) as usize];
        match e.kind {
            EntryKind::Copy => {
                let at = e.data_pos + (s - e.target) as usize;
                dst.copy_from_slice(&r.payload[at..at + dst.len()])
            }
            EntryKind::Zero => dst.fill(0),
            // Bit operations are 8-byte, 8-aligned: the word lies wholly inside the range.
            EntryKind::Or | EntryKind::AndNot => {
                let mask = u64::from_le_bytes(r.data(e).try_into().expect("8-byte mask"));
                let w = u64::from_le_bytes(dst[..8].try_into().unwrap());
                let w = if e.kind == EntryKind::Or {
                    w | mask
                } else {
                    w & !mask
                };
                dst.copy_from_slice(&w.to_le_bytes());
            }
        }
    }
    words
}

/// Step 2: replay and retire (the pool was assembled from `scan`; nothing may use it before
/// this returns). `upgrade`: the version-2 header's upgrade word to store first (see
/// `pool::upgraded_header`).
pub(crate) fn recover(
    pool: &Media,
    scan: &LogScan,
    state: &PoolState,
    upgrade: Option<u64>,
) -> Result<RecoveryReport> {
    let t0 = std::time::Instant::now();
    let (map, persist) = (&pool.map, &pool.persist);
    let persisted = |e: std::io::Error| Error::io(&pool.path, "persist", e);
    let mut report = scan.report.clone();
    if let Some(word) = upgrade {
        // The header's version and checksum share the aligned word at offset 8: one atomic
        // store replaces both (docs/FORMAT.md, the versions list at the top).
        map.atomic_u64(8).store(word, Ordering::Release);
        persist.flush(map.at(8, 8), 8);
        persist.fence().map_err(persisted)?;
    }
    if !scan.needs_writes(state) {
        return Ok(report);
    }
    // First the direct stores of uncommitted transactions go (undo.rs: before any replay,
    // idempotent, the state page's table word cleared last).
    crate::undo::recover(map, persist, &scan.undo).map_err(persisted)?;
    // Replay in commit order through the commit's own apply function, then flush every line
    // written (once each) and fence.
    let mut lines = Vec::new();
    for r in &scan.replay {
        log::apply_payload(map, &r.payload, |l| lines.push(l));
    }
    lines.sort_unstable();
    lines.dedup();
    let retire = || -> Result<()> {
        // From now on no record up to max_seq is ever replayed again.
        map.write(STATE_WATERMARK, &scan.max_seq);
        persist.flush(map.at(STATE_WATERMARK, 8), 8);
        persist.fence().map_err(persisted)
    };
    if sim_fault!(EarlyRecoveryWatermark) {
        retire()?;
    }
    for &l in &lines {
        persist.flush(l as *const u8, crate::persist::CACHE_LINE);
    }
    report.replayed_lines = lines.len() as u64;
    persist.fence().map_err(persisted)?;
    retire()?;
    report.replay_micros = t0.elapsed().as_micros() as u64;
    Ok(report)
}
