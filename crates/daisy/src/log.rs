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
    /// Offset of the slot in the pool.
    pub slot_off: u64,
    pub payload_len: u32,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub kind: EntryKind,
    pub target: u64,
    pub len: u64,
    /// Offset of the entry's data (Copy) or mask (Or/AndNot) in the pool.
    pub data_off: u64,
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
            data_off: slot_off + (LOG_HEADER_SIZE + pos + hsize) as u64,
        });
        pos += hsize + data_len;
    }
    if pos != payload.len() {
        return SlotState::Invalid("payload has trailing bytes".into());
    }
    SlotState::Valid(Record {
        seq: hdr.seq,
        claim: hdr.claim,
        slot_off,
        payload_len: hdr.payload_len,
        entries,
    })
}

/// Apply one record's entries to the pool (recovery; single-threaded). Returns the ranges
/// written so the caller can flush them.
pub fn replay(map: &Mapping, rec: &Record, touched: &mut Vec<(u64, u64)>) {
    for e in &rec.entries {
        match e.kind {
            EntryKind::Copy => {
                let data = map.snapshot(e.data_off, e.len as usize);
                map.write_bytes(e.target, &data);
            }
            EntryKind::Or => {
                let mask: u64 = map.read(e.data_off);
                let w: u64 = map.read(e.target);
                map.write(e.target, &(w | mask));
            }
            EntryKind::AndNot => {
                let mask: u64 = map.read(e.data_off);
                let w: u64 = map.read(e.target);
                map.write(e.target, &(w & !mask));
            }
            EntryKind::Zero => map.fill(e.target, e.len as usize, 0),
        }
        touched.push((e.target, e.len));
    }
}
