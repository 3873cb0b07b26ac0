//! Redo-log records: parsing, validation and replay.
//!
//! A record is a [`LogHeader`] followed by `payload_len` bytes of entries. It is *valid* when
//! its magic and crc32c match and every entry lies inside the pool's data area. A record that
//! is valid and has `seq > watermark` is a committed transaction whose effects may not yet be
//! durable: recovery replays it. See docs/FORMAT.md for the full protocol.

use crate::layout::*;
use crate::map::Mapping;

/// What a log slot holds.
#[derive(Debug)]
pub enum SlotState {
    /// Never written (all-zero header).
    Empty,
    /// A complete record.
    Valid(Record),
    /// Bytes that are not a complete record: a torn write, or corruption.
    Invalid(String),
}

/// A parsed, validated record.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub claim: u64,
    /// The entries, as written (a copy out of the slot: the checksum was computed over it).
    pub payload: Vec<u8>,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub kind: EntryKind,
    pub target: u64,
    pub len: u64,
    /// Position of the entry's data (Copy) or mask (Or/AndNot) in the record's payload.
    pub data_pos: usize,
}

impl Record {
    /// The data of entry `e` (Copy: `len` bytes; Or/AndNot: the 8-byte mask; Zero: none).
    pub fn data(&self, e: &Entry) -> &[u8] {
        let n = match e.kind {
            EntryKind::Copy => e.len as usize,
            EntryKind::Zero => 0,
            EntryKind::Or | EntryKind::AndNot => 8,
        };
        &self.payload[e.data_pos..e.data_pos + n]
    }
}

/// Bounds for entry targets: the state page and everything from the chunk table on, below
/// `data_end`. Entries must never touch the header or the lanes.
#[derive(Clone, Copy, Debug)]
pub struct TargetBounds {
    pub chunk_table_off: u64,
    pub data_end: u64,
}

impl TargetBounds {
    pub fn contains(&self, target: u64, len: u64) -> bool {
        let Some(end) = target.checked_add(len) else {
            return false;
        };
        let in_state = target >= STATE_OFF && end <= STATE_OFF + STATE_SIZE;
        let in_data = target >= self.chunk_table_off && end <= self.data_end;
        in_state || in_data
    }
}

/// Checksum of a record: crc32c over the header from `magic` on, then the payload.
/// (The commit path checksums its contiguous record buffer in one call; this is the same
/// value.)
pub fn record_checksum(hdr: &LogHeader, payload: &[u8]) -> u32 {
    let hb = bytemuck::bytes_of(hdr);
    let c = crate::checksum::crc32c_append(0, &hb[4..]);
    crate::checksum::crc32c_append(c, payload)
}

/// Parse the slot at `slot_off` (size `slot_size`).
pub fn parse_slot(map: &Mapping, slot_off: u64, slot_size: u32, bounds: TargetBounds) -> SlotState {
    let hdr: LogHeader = map.read(slot_off);
    if bytemuck::bytes_of(&hdr).iter().all(|&b| b == 0) {
        return SlotState::Empty;
    }
    if hdr.magic != LOG_MAGIC {
        return SlotState::Invalid("bad record magic".into());
    }
    let max_payload = slot_size as usize - LOG_HEADER_SIZE;
    if hdr.payload_len as usize > max_payload {
        return SlotState::Invalid(format!(
            "payload length {} exceeds slot capacity {max_payload}",
            hdr.payload_len
        ));
    }
    let payload = map.snapshot(slot_off + LOG_HEADER_SIZE as u64, hdr.payload_len as usize);
    if record_checksum(&hdr, &payload) != hdr.checksum {
        return SlotState::Invalid("record checksum mismatch".into());
    }
    if hdr.seq == 0 || hdr.seq > MAX_SEQ || hdr.claim >= hdr.seq {
        return SlotState::Invalid(format!(
            "checksummed record with impossible seq {} / claim {}",
            hdr.seq, hdr.claim
        ));
    }
    // Walk the entries; a checksummed record with malformed entries is corruption, not a tear.
    // Every entry takes at least a header, so a larger count is caught by the walk; cap the
    // reservation so a damaged count cannot ask for an absurd allocation first.
    let mut entries =
        Vec::with_capacity((hdr.n_entries as usize).min(payload.len() / WORD_ENTRY_SIZE));
    let mut pos = 0usize;
    for i in 0..hdr.n_entries {
        if pos + 8 > payload.len() {
            return SlotState::Invalid(format!("entry {i} runs past the payload"));
        }
        let Some((target, kind, len, hsize)) = decode_entry(&payload[pos..]) else {
            return SlotState::Invalid(format!(
                "entry {i} has unknown kind or runs past the payload"
            ));
        };
        let data_len = match kind {
            EntryKind::Copy => (len as usize).next_multiple_of(8),
            EntryKind::Zero => 0,
            EntryKind::Or | EntryKind::AndNot => {
                if len != 8 || target % 8 != 0 {
                    return SlotState::Invalid(format!("entry {i}: bad bit-operation entry"));
                }
                8
            }
        };
        if pos + hsize + data_len > payload.len() {
            return SlotState::Invalid(format!("entry {i} data runs past the payload"));
        }
        if !bounds.contains(target, len) {
            return SlotState::Invalid(format!(
                "entry {i} targets {:#x}+{len}, outside the pool's data area",
                target
            ));
        }
        entries.push(Entry {
            kind,
            target,
            len,
            data_pos: pos + hsize,
        });
        pos += hsize + data_len;
    }
    if pos != payload.len() {
        return SlotState::Invalid("payload has trailing bytes".into());
    }
    SlotState::Valid(Record {
        seq: hdr.seq,
        claim: hdr.claim,
        payload,
        entries,
    })
}

/// Apply a payload's entries to the pool (a committing transaction's record, or a record that
/// recovery replays: the one apply function of both) and report the address of every cache
/// line they wrote to `touched` (in entry order; a line may come more than once). Nothing is
/// flushed here: commit defers the flushes (tx.rs, `DirtyLines`), recovery flushes them all.
/// Or/AndNot are atomic read-modify-writes, so that concurrent transactions changing other bits
/// of one allocation-bitmap word compose.
///
/// The payload must be well formed: built by the transaction, or validated by [`parse_slot`].
#[inline(always)]
pub(crate) fn apply_payload(map: &Mapping, payload: &[u8], mut touched: impl FnMut(usize)) {
    use std::sync::atomic::Ordering;
    const LINE: usize = crate::persist::CACHE_LINE;
    let mut pos = 0;
    while pos < payload.len() {
        // The common entry, one word, decoded and applied without the general machinery.
        if let Some(e) = payload.get(pos..pos + WORD_ENTRY_SIZE) {
            let w0 = u64::from_le_bytes(e[..8].try_into().unwrap());
            if w0 & !TARGET_MASK == WORD_ENTRY_TAG {
                let target = w0 & TARGET_MASK;
                let v = u64::from_le_bytes(e[8..].try_into().unwrap());
                let p = map.write_u64(target, v);
                let first = p & !(LINE - 1);
                touched(first);
                let last = (p + 7) & !(LINE - 1);
                if last != first {
                    touched(last);
                }
                pos += WORD_ENTRY_SIZE;
                continue;
            }
        }
        let (target, kind, len, hsize) =
            decode_entry(&payload[pos..]).expect("a well-formed payload");
        pos += hsize;
        let len = len as usize;
        let p = map.at(target, len);
        match kind {
            EntryKind::Copy if len == 8 => {
                let v = u64::from_le_bytes(payload[pos..pos + 8].try_into().unwrap());
                map.write(target, &v);
                pos += 8;
            }
            EntryKind::Copy => {
                map.write_bytes(target, &payload[pos..pos + len]);
                pos += len.next_multiple_of(8);
            }
            EntryKind::Or => {
                let mask = u64::from_le_bytes(payload[pos..pos + 8].try_into().unwrap());
                map.atomic_u64(target).fetch_or(mask, Ordering::AcqRel);
                pos += 8;
            }
            EntryKind::AndNot => {
                let mask = u64::from_le_bytes(payload[pos..pos + 8].try_into().unwrap());
                map.atomic_u64(target).fetch_and(!mask, Ordering::AcqRel);
                pos += 8;
            }
            EntryKind::Zero => map.fill(target, len, 0),
        }
        let mut line = p as usize & !(LINE - 1);
        let end = p as usize + len;
        while line < end {
            touched(line);
            line += LINE;
        }
    }
}
