//! The redo-log record format, in one place: where a slot lives ([`slot_offset`]), the
//! record and entry layouts, encoding ([`word_entry`], [`EntryHeader::new`], [`seal`]),
//! decoding and validation ([`parse_slot`]), and applying ([`apply_payload`], which a commit
//! and recovery's replay both use). docs/FORMAT.md section 2.3 is the prose version.
//!
//! ```text
//! slot (slot_size bytes): LogHeader (32 bytes), then payload_len bytes of entries
//!   LogHeader: u32 checksum | u32 magic "DLOG" | u64 seq | u64 claim | u32 payload_len | u32 n
//!   full entry: u64 target | u64 kind | len << 8 | data (Copy: len bytes padded to 8;
//!               Or/AndNot: an 8-byte mask; Zero: none)
//!   word entry: u64 0x57 << 56 | target | u64 data     (a Copy of exactly 8 bytes)
//!
//! overflow record (a transaction whose entries outgrow its slot; format version 4):
//!   slot: LogHeader with magic "DLOX" (payload_len, n_entries: of the whole payload), then
//!         OverflowDesc (32 bytes); the checksum covers header and descriptor only
//!   heap extent at OverflowDesc.off (whole chunks, FREE in the chunk table, held by the
//!   committing lane until the watermark passes the record): u64 seq | u64 payload_len |
//!   the payload; OverflowDesc.crc is crc32c over those bytes
//! ```
//!
//! A record is *valid* when its magic and crc32c match and every entry lies inside the pool's
//! data area. A valid record with `seq > watermark` is a committed transaction whose effects
//! may not yet be durable: recovery replays it.

use crate::layout::*;
use crate::map::Mapping;
use bytemuck::{Pod, Zeroable};

/// Header of one redo-log record (one per log slot).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct LogHeader {
    /// crc32c of the record from `magic` to the end of the payload.
    pub checksum: u32,
    /// [`LOG_MAGIC`].
    pub magic: u32,
    /// Global commit sequence number, > 0.
    pub seq: u64,
    /// Durable watermark known when this record was written (see FORMAT.md, "Watermark").
    pub claim: u64,
    /// Bytes of entries after the header.
    pub payload_len: u32,
    /// Number of entries.
    pub n_entries: u32,
}

/// Magic of a log record: "DLOG".
pub const LOG_MAGIC: u32 = u32::from_le_bytes(*b"DLOG");
/// Magic of an overflow record, whose payload lives in a heap extent: "DLOX".
pub const LOG_OVERFLOW_MAGIC: u32 = u32::from_le_bytes(*b"DLOX");

/// What an overflow record's slot holds after its [`LogHeader`]: where its payload is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct OverflowDesc {
    /// Pool offset of the extent (a chunk start in the heap).
    pub off: u64,
    /// Bytes of the extent (whole chunks).
    pub cap: u64,
    /// crc32c of the extent's first `OVERFLOW_PREFIX + payload_len` bytes.
    pub crc: u32,
    /// Zero.
    pub reserved: [u32; 3],
}

/// Bytes of an [`OverflowDesc`].
pub const OVERFLOW_DESC_SIZE: usize = std::mem::size_of::<OverflowDesc>();
const _: () = assert!(OVERFLOW_DESC_SIZE == 32);
/// Bytes before the payload in an overflow extent: the record's seq and payload length, so
/// that an extent's bytes validate only for the record that wrote them.
pub const OVERFLOW_PREFIX: usize = 16;
/// Largest payload a record may carry (its length is a u32).
pub const MAX_PAYLOAD: usize = u32::MAX as usize;
/// Largest sequence number (and watermark) a valid pool holds. At one commit per nanosecond a
/// pool needs 146 years to get there, so a larger value on media is damage; refusing it keeps
/// `seq + 1` and the watermark arithmetic free of overflow.
pub const MAX_SEQ: u64 = 1 << 62;
/// Bytes of a [`LogHeader`].
pub const LOG_HEADER_SIZE: usize = std::mem::size_of::<LogHeader>();
const _: () = assert!(LOG_HEADER_SIZE == 32);
// `seal` below stores these fields by offset; keep them where it expects them.
const _: () = {
    assert!(std::mem::offset_of!(LogHeader, magic) == 4);
    assert!(std::mem::offset_of!(LogHeader, seq) == 8);
    assert!(std::mem::offset_of!(LogHeader, claim) == 16);
    assert!(std::mem::offset_of!(LogHeader, payload_len) == 24);
    assert!(std::mem::offset_of!(LogHeader, n_entries) == 28);
};

/// Header of one log entry; a Copy entry's data follows, padded to 8 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct EntryHeader {
    /// Pool offset the entry applies to.
    pub target: u64,
    /// `kind` in the low 8 bits, byte length in the high 56.
    pub kind_len: u64,
}

/// Bytes of an [`EntryHeader`].
pub const ENTRY_HEADER_SIZE: usize = std::mem::size_of::<EntryHeader>();

/// What a log entry does to its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// Copy `len` bytes of data to the target.
    Copy = 1,
    /// Atomically OR an 8-byte mask into the 8-aligned target word (allocation bitmaps).
    Or = 2,
    /// Atomically clear the mask's bits in the 8-aligned target word.
    AndNot = 3,
    /// Fill `len` bytes at the target with zeros (no data follows).
    Zero = 4,
}

impl EntryKind {
    /// The kind with this code, if any.
    pub fn from_u8(b: u8) -> Option<EntryKind> {
        match b {
            1 => Some(EntryKind::Copy),
            2 => Some(EntryKind::Or),
            3 => Some(EntryKind::AndNot),
            4 => Some(EntryKind::Zero),
            _ => None,
        }
    }
}

impl EntryHeader {
    /// The header of an entry of `kind` covering `len` bytes at `target`.
    pub fn new(target: u64, kind: EntryKind, len: u64) -> EntryHeader {
        debug_assert!(len < (1 << 56));
        EntryHeader {
            target,
            kind_len: (len << 8) | kind as u64,
        }
    }
    /// The entry's kind (None: damage).
    pub fn kind(&self) -> Option<EntryKind> {
        EntryKind::from_u8(self.kind_len as u8)
    }
    /// Bytes the entry covers at its target (an entry is never "empty": no `is_empty`).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.kind_len >> 8
    }
}

/// Top byte of an entry's first word that marks a **word entry**: a Copy of exactly 8 bytes in
/// 16 bytes of log (the target in the low 56 bits of the first word, the data in the second),
/// instead of 24 with a full [`EntryHeader`]. Pool offsets are below 2^56, so a full header's
/// first word (its target) never has this byte set. Word entries keep the commonest records
/// (an 8-byte slot plus a counter) within one 64-byte cache line.
pub const WORD_ENTRY_TAG: u64 = 0x57 << 56;
/// Bytes of a word entry.
pub const WORD_ENTRY_SIZE: usize = 16;
/// The target bits of an entry's first word.
pub const TARGET_MASK: u64 = (1 << 56) - 1;

/// Bytes a Copy entry of `len` data bytes takes in the log.
#[inline]
pub fn copy_entry_size(len: usize) -> usize {
    if len == 8 {
        return WORD_ENTRY_SIZE;
    }
    ENTRY_HEADER_SIZE + len.next_multiple_of(8)
}

/// Decode the entry at the start of `bytes` (at least 8 bytes): (target, kind, len, header
/// size). None for an unknown kind. Word entries decode as Copy of 8 bytes.
#[inline(always)]
pub fn decode_entry(bytes: &[u8]) -> Option<(u64, EntryKind, u64, usize)> {
    let w0 = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    if w0 & !TARGET_MASK == WORD_ENTRY_TAG {
        return Some((w0 & TARGET_MASK, EntryKind::Copy, 8, 8));
    }
    if bytes.len() < ENTRY_HEADER_SIZE {
        return None;
    }
    let eh: EntryHeader = bytemuck::pod_read_unaligned(&bytes[..ENTRY_HEADER_SIZE]);
    Some((eh.target, eh.kind()?, eh.len(), ENTRY_HEADER_SIZE))
}

/// Offset of `slot` of `lane`: the one formula for where a log slot lives.
#[inline(always)]
pub(crate) fn slot_offset(hdr: &Header, lane: usize, slot: usize) -> u64 {
    hdr.lanes_off + lane as u64 * hdr.lane_bytes() + slot as u64 * hdr.slot_size as u64
}

/// A word entry: a Copy of the 8 bytes `data` to `target` (< 2^56), in 16 bytes.
#[inline(always)]
pub(crate) fn word_entry(target: u64, data: &[u8]) -> [u8; WORD_ENTRY_SIZE] {
    debug_assert!(target <= TARGET_MASK && data.len() == 8);
    let mut e = [0u8; WORD_ENTRY_SIZE];
    e[..8].copy_from_slice(&(target | WORD_ENTRY_TAG).to_le_bytes());
    e[8..].copy_from_slice(data);
    e
}

/// Make `record` (a [`LogHeader`]'s room, then `n_entries` entries) a complete record of
/// transaction `seq` carrying `claim`: the header's fields, then its checksum over the rest.
/// The fields are stored by offset into the fixed-size header (no bounds checks on the
/// commit path).
#[inline(always)]
pub(crate) fn seal(record: &mut [u8], seq: u64, claim: u64, n_entries: u32) {
    let payload_len = (record.len() - LOG_HEADER_SIZE) as u32;
    let h: &mut [u8; LOG_HEADER_SIZE] = (&mut record[..LOG_HEADER_SIZE]).try_into().unwrap();
    h[4..8].copy_from_slice(&LOG_MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..24].copy_from_slice(&claim.to_le_bytes());
    h[24..28].copy_from_slice(&payload_len.to_le_bytes());
    h[28..32].copy_from_slice(&n_entries.to_le_bytes());
    let crc = crate::checksum::crc32c_append(0, &record[4..]);
    record[..4].copy_from_slice(&crc.to_le_bytes());
}

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
    /// Empty for an overflow record until [`load_overflow`] read its extent.
    pub payload: Vec<u8>,
    pub entries: Vec<Entry>,
    /// An overflow record: where its payload is, its length and entry count (`None` once
    /// loaded, and for a record held in its slot).
    pub overflow: Option<(OverflowDesc, u32, u32)>,
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

/// Parse the slot at `slot_off` (size `slot_size`). An overflow record is validated as far as
/// its slot goes (header, descriptor, checksum): its payload stays in its extent until
/// [`load_overflow`] reads it, which only records that may still be needed get (a retired
/// record's extent may hold another object by now).
pub fn parse_slot(map: &Mapping, slot_off: u64, slot_size: u32, bounds: TargetBounds) -> SlotState {
    let hdr: LogHeader = map.read(slot_off);
    if bytemuck::bytes_of(&hdr).iter().all(|&b| b == 0) {
        return SlotState::Empty;
    }
    if hdr.magic == LOG_OVERFLOW_MAGIC {
        return parse_overflow_slot(map, slot_off, hdr, bounds);
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
    if let Err(why) = check_seq(&hdr) {
        return SlotState::Invalid(why);
    }
    match parse_entries(&payload, hdr.n_entries, bounds) {
        Ok(entries) => SlotState::Valid(Record {
            seq: hdr.seq,
            claim: hdr.claim,
            payload,
            entries,
            overflow: None,
        }),
        Err(why) => SlotState::Invalid(why),
    }
}

fn check_seq(hdr: &LogHeader) -> Result<(), String> {
    if hdr.seq == 0 || hdr.seq > MAX_SEQ || hdr.claim >= hdr.seq {
        return Err(format!(
            "checksummed record with impossible seq {} / claim {}",
            hdr.seq, hdr.claim
        ));
    }
    Ok(())
}

/// The slot part of an overflow record: header and descriptor, checksummed together.
fn parse_overflow_slot(map: &Mapping, slot_off: u64, hdr: LogHeader, b: TargetBounds) -> SlotState {
    let desc: OverflowDesc = map.read(slot_off + LOG_HEADER_SIZE as u64);
    if record_checksum(&hdr, bytemuck::bytes_of(&desc)) != hdr.checksum {
        return SlotState::Invalid("overflow record checksum mismatch".into());
    }
    if let Err(why) = check_seq(&hdr) {
        return SlotState::Invalid(why);
    }
    let need = OVERFLOW_PREFIX as u64 + hdr.payload_len as u64;
    if desc.cap < need
        || desc.reserved != [0; 3]
        || desc.off < b.chunk_table_off
        || desc
            .off
            .checked_add(desc.cap)
            .is_none_or(|e| e > b.data_end)
    {
        return SlotState::Invalid(format!(
            "checksummed overflow record with an impossible extent {:#x}+{} for {} bytes",
            desc.off, desc.cap, hdr.payload_len
        ));
    }
    SlotState::Valid(Record {
        seq: hdr.seq,
        claim: hdr.claim,
        payload: Vec::new(),
        entries: Vec::new(),
        overflow: Some((desc, hdr.payload_len, hdr.n_entries)),
    })
}

/// The crc32c an overflow extent holding `payload` for record `seq` carries.
pub fn overflow_checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut prefix = [0u8; OVERFLOW_PREFIX];
    prefix[..8].copy_from_slice(&seq.to_le_bytes());
    prefix[8..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let c = crate::checksum::crc32c_append(0, &prefix);
    crate::checksum::crc32c_append(c, payload)
}

/// Read an overflow record's payload from its extent, check it against the descriptor and
/// parse its entries. Nothing to do for a record held in its slot. An error means the extent
/// does not hold this record's payload: a commit torn before its fence (the extent's lines
/// did not all persist), an extent reused after the record was retired, or damage.
pub fn load_overflow(map: &Mapping, rec: &mut Record, bounds: TargetBounds) -> Result<(), String> {
    let Some((desc, len, n)) = rec.overflow else {
        return Ok(());
    };
    let prefix: [u64; 2] = map.read(desc.off);
    if prefix != [rec.seq, len as u64] {
        return Err(format!(
            "overflow extent {:#x} holds record {} of {} bytes, not record {} of {len}",
            desc.off, prefix[0], prefix[1], rec.seq
        ));
    }
    let payload = map.snapshot(desc.off + OVERFLOW_PREFIX as u64, len as usize);
    if overflow_checksum(rec.seq, &payload) != desc.crc {
        return Err(format!(
            "overflow extent {:#x}: checksum mismatch",
            desc.off
        ));
    }
    rec.entries = parse_entries(&payload, n, bounds)?;
    rec.payload = payload;
    rec.overflow = None;
    Ok(())
}

/// Walk a checksummed payload's entries; malformed entries are corruption, not a tear.
fn parse_entries(
    payload: &[u8],
    n_entries: u32,
    bounds: TargetBounds,
) -> Result<Vec<Entry>, String> {
    // Every entry takes at least a header, so a larger count is caught by the walk; cap the
    // reservation so a damaged count cannot ask for an absurd allocation first.
    let mut entries = Vec::with_capacity((n_entries as usize).min(payload.len() / WORD_ENTRY_SIZE));
    let mut pos = 0usize;
    for i in 0..n_entries {
        if pos + 8 > payload.len() {
            return Err(format!("entry {i} runs past the payload"));
        }
        let Some((target, kind, len, hsize)) = decode_entry(&payload[pos..]) else {
            return Err(format!(
                "entry {i} has unknown kind or runs past the payload"
            ));
        };
        let data_len = match kind {
            EntryKind::Copy => (len as usize).next_multiple_of(8),
            EntryKind::Zero => 0,
            EntryKind::Or | EntryKind::AndNot => {
                if len != 8 || target % 8 != 0 {
                    return Err(format!("entry {i}: bad bit-operation entry"));
                }
                8
            }
        };
        if pos + hsize + data_len > payload.len() {
            return Err(format!("entry {i} data runs past the payload"));
        }
        if !bounds.contains(target, len) {
            return Err(format!(
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
        return Err("payload has trailing bytes".into());
    }
    Ok(entries)
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
