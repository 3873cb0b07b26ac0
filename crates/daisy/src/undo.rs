//! Undo records for direct stores (pool format version 5; docs/FORMAT.md section 2.5).
//!
//! Daisy's transactions are redo-logged: nothing reaches the pool's bytes before the commit
//! point. [`crate::Tx::add_range`] (PMDK's `pmemobj_tx_add_range`) breaks that on purpose: the
//! program stores straight into declared bytes through [`crate::Pool::direct`], and those
//! stores may reach the media (a process crash on tmpfs keeps them all; a power failure any
//! evicted line) before the transaction commits. So each declared range's old bytes are kept
//! durably *before* `add_range` returns, and recovery puts them back for a transaction that
//! did not commit.
//!
//! ```text
//! state page word at STATE_OFF + 32 (STATE_UNDO_TABLE): 0, or the undo table of the session
//!   that last had the pool open
//! undo table (whole chunks, FREE in the chunk table): one u64 per lane, 0 or the offset of
//!   the lane's undo extent
//! undo extent (whole chunks, FREE in the chunk table):
//!   header (64 bytes): u64 magic "DAISYUND" | u64 base | u64 gen | u64 cap | u32 crc32c of
//!                      bytes 0..32 | 28 bytes zero
//!   ranges, back to back from byte 64: u64 off | u64 len | u64 gen | u32 crc32c of the first
//!                      24 bytes and the data | u32 0 | data (len bytes, padded to 8)
//!   after the last range: 32 zero bytes (the terminator)
//! ```
//!
//! Rules (why recovery restores exactly the uncommitted direct stores):
//! * **Before a direct store can happen, its old bytes are durable.** `add_range` writes the
//!   range (and a fresh terminator after it) into the extent, flushes, fences; the first one
//!   of a transaction writes the extent's header with it and only then names the extent in the
//!   lane's table word (an aligned 8-byte store, flushed and fenced). A table word never names
//!   an extent whose header is not durable; a range is read only up to the first terminator,
//!   torn range or range of another `gen` (a random number per extent), so the bytes of an
//!   earlier use of the chunks are never taken for ranges.
//! * **Committed or not.** `base` is the pool's next sequence number when the extent was
//!   attached, read while the transaction holds its lane: every record the lane wrote before
//!   has a smaller seq, and its own commit takes one at least as large. So the transaction
//!   committed exactly when its lane holds a valid (or retired: a claim covers it) record
//!   with `seq >= base`. (Such a transaction always writes a record: `add_range` turns off
//!   the one-word in-place commit, which writes none.)
//! * **After the commit point** the table word is cleared (store, flush, fence) and only then
//!   are the extent's chunks reused; a crash in between finds the record, so nothing is
//!   undone. An **abort** first puts the old bytes back in memory and makes them durable, then
//!   clears the word.
//! * **Recovery** (at open, before any replay and before anything can allocate): for each lane
//!   whose table word names an extent and whose transaction did not commit, the ranges are
//!   copied back, newest first (so the oldest snapshot of a byte declared twice wins),
//!   flushed, fenced; then the state page's table word is cleared (flush, fence). The table
//!   and the extents are FREE in the chunk table, so once the word is clear they are ordinary
//!   free space: nothing leaks, and nothing names them. A crash during recovery leaves the
//!   table word set and the same restores to do (they are idempotent).
//! * The table belongs to one session (one open of the pool): it is created at the first
//!   `add_range` after open, its chunks taken from the heap index like an overflow extent,
//!   zeroed and made durable before the state page names it.

use crate::error::{Error, Result};
use crate::layout::*;
use crate::map::Mapping;
use crate::persist::Persister;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Magic of an undo extent's header: "DAISYUND".
pub const UNDO_MAGIC: u64 = u64::from_le_bytes(*b"DAISYUND");
/// Bytes of an undo extent's header.
pub const UNDO_HEADER: u64 = 64;
/// Bytes of a range's header in an extent (and of the terminator after the last range).
pub const RANGE_HEADER: u64 = 32;

/// The header of an undo extent.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct UndoHeader {
    pub magic: u64,
    /// The pool's next sequence number when the extent was attached.
    pub base: u64,
    /// A random number every range of this extent repeats.
    pub gen: u64,
    /// Bytes of the extent (whole chunks).
    pub cap: u64,
    /// crc32c of the 32 bytes above.
    pub crc: u32,
    pub zero: [u32; 7],
}

const _: () = assert!(std::mem::size_of::<UndoHeader>() == UNDO_HEADER as usize);

impl UndoHeader {
    pub fn new(base: u64, gen: u64, cap: u64) -> UndoHeader {
        let mut h = UndoHeader {
            magic: UNDO_MAGIC,
            base,
            gen,
            cap,
            crc: 0,
            zero: [0; 7],
        };
        h.crc = h.compute_crc();
        h
    }

    fn compute_crc(&self) -> u32 {
        crate::checksum::crc32c_append(0, &bytemuck::bytes_of(self)[..32])
    }
}

/// A range's header as stored: off, len, gen, crc (of these 24 bytes and the data), 0.
pub fn range_header(off: u64, data: &[u8], gen: u64) -> [u8; RANGE_HEADER as usize] {
    let mut h = [0u8; RANGE_HEADER as usize];
    h[0..8].copy_from_slice(&off.to_le_bytes());
    h[8..16].copy_from_slice(&(data.len() as u64).to_le_bytes());
    h[16..24].copy_from_slice(&gen.to_le_bytes());
    let crc = crate::checksum::crc32c_append(crate::checksum::crc32c_append(0, &h[..24]), data);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Bytes a range of `len` data bytes takes in an extent (header and padded data).
pub fn range_size(len: u64) -> u64 {
    RANGE_HEADER + len.next_multiple_of(8)
}

/// What recovery must put back for one lane: (offset, old bytes) in declaration order.
pub(crate) type Restores = Vec<(u64, Vec<u8>)>;

/// What the open found in the state page's undo table (read-only, step 1 of recovery).
#[derive(Default)]
pub(crate) struct UndoScan {
    /// The table's offset (0: none; nothing to do).
    pub table: u64,
    /// Per lane with an uncommitted transaction: what to put back.
    pub restores: Vec<(usize, Restores)>,
}

/// Step 1 (no writes): read the undo table the state page names, if any. `lane_slots`: per
/// lane, the seq of each slot's record (recovery's scan: 0 for empty or torn slots). A table
/// or an extent that the rules above never leave (outside the heap, a header that does not
/// check out, a range naming bytes outside the heap) is corruption, and the pool is refused
/// before anything is written.
pub(crate) fn scan(
    path: &Path,
    map: &Mapping,
    hdr: &Header,
    table: u64,
    heap_end: u64,
    lane_slots: &[(u32, Vec<u64>)],
) -> Result<UndoScan> {
    let mut out = UndoScan {
        table,
        restores: Vec::new(),
    };
    if table == 0 {
        return Ok(out);
    }
    let lanes = hdr.lane_count as u64;
    let in_heap = |off: u64, len: u64| {
        off >= hdr.heap_off && off.checked_add(len).is_some_and(|e| e <= heap_end)
    };
    if !(table - hdr.heap_off.min(table)).is_multiple_of(CHUNK_SIZE) || !in_heap(table, lanes * 8) {
        return Err(Error::corrupt(
            path,
            format!("pool state: undo table {table:#x} is not a chunk of the heap"),
        ));
    }
    for lane in 0..lanes as usize {
        let ext: u64 = map.read(table + lane as u64 * 8);
        if ext == 0 {
            continue;
        }
        let bad = |why: String| Error::corrupt(path, format!("undo extent of lane {lane}: {why}"));
        if !(ext - hdr.heap_off.min(ext)).is_multiple_of(CHUNK_SIZE) || !in_heap(ext, UNDO_HEADER) {
            return Err(bad(format!("{ext:#x} is not a chunk of the heap")));
        }
        let h: UndoHeader = map.read(ext);
        if h.magic != UNDO_MAGIC || h.crc != h.compute_crc() {
            return Err(bad(format!("no undo header at {ext:#x}")));
        }
        if h.cap < UNDO_HEADER + RANGE_HEADER || !in_heap(ext, h.cap) {
            return Err(bad(format!("capacity {} runs past the heap", h.cap)));
        }
        let committed = lane_slots
            .get(lane)
            .is_some_and(|(_, seqs)| seqs.iter().any(|&s| s != 0 && s >= h.base));
        if committed {
            continue;
        }
        let mut ranges = Vec::new();
        let mut at = ext + UNDO_HEADER;
        while at + RANGE_HEADER <= ext + h.cap {
            let rh: [u8; RANGE_HEADER as usize] = map.read(at);
            let word = |i: usize| u64::from_le_bytes(rh[i * 8..i * 8 + 8].try_into().unwrap());
            let (off, len, gen) = (word(0), word(1), word(2));
            if gen != h.gen || len == 0 || at + range_size(len) > ext + h.cap {
                break; // the terminator, a torn range or bytes of an earlier use
            }
            let mut data = vec![0u8; len as usize];
            map.read_bytes(at + RANGE_HEADER, &mut data);
            if range_header(off, &data, gen) != rh {
                break; // torn: its add_range never returned, so nothing was stored there
            }
            if !in_heap(off, len) {
                return Err(bad(format!("a range {off:#x}+{len} outside the heap")));
            }
            ranges.push((off, data));
            at += range_size(len);
        }
        if !ranges.is_empty() {
            out.restores.push((lane, ranges));
        }
    }
    Ok(out)
}

/// Step 2 (the first writes of recovery, before any replay): put back what `scan` found, make
/// it durable, then clear the state page's table word (durably). Idempotent: a crash in here
/// leaves the same work to do.
pub(crate) fn recover(map: &Mapping, persist: &Persister, scan: &UndoScan) -> std::io::Result<()> {
    if scan.table == 0 {
        return Ok(());
    }
    for (_, ranges) in &scan.restores {
        // Newest first: a byte declared twice ends with its oldest (pre-transaction) value.
        for (off, data) in ranges.iter().rev() {
            map.write_bytes(*off, data);
            persist.flush(map.at(*off, data.len()), data.len());
        }
    }
    persist.fence()?;
    store_word(map, persist, STATE_UNDO_TABLE, 0)
}

/// Store an aligned word and make it durable (store, flush, fence).
pub(crate) fn store_word(
    map: &Mapping,
    persist: &Persister,
    off: u64,
    word: u64,
) -> std::io::Result<()> {
    map.atomic_u64(off).store(word, Ordering::Release);
    persist.flush(map.at(off, 8), 8);
    persist.fence()
}
