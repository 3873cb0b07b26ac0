//! The persistent hash table under [`super::PHashMap`] and [`super::PBytesMap`]: extendible
//! hashing (as in CCEH) over 16 KiB segments of 64-byte buckets.
//!
//! On-media format (docs/FORMAT.md, "Hash maps"; map format version [`MAP_FORMAT`]):
//!
//! * **Header** ([`HEADER_BYTES`]): magic, kind, key and value sizes, hash seed and a checksum
//!   of those (immutable after creation), then the mutable `len`, `dir` (offset of the
//!   directory) and `depth` (global depth G), the detached directory a `clear` is still freeing,
//!   and (fixed-size maps) the entry of the reserved all-ones key.
//! * **Directory**: 2^G words; word i = segment offset | (local depth L << 56). The segment of
//!   a key is `dir[hash >> (64 - G)]`; a segment of local depth L is named by the 2^(G-L)
//!   consecutive words that share the top L bits.
//! * **Segment**: 256 buckets of 64 bytes (one cache line), each holding `64 / SLOT` slots.
//!   A key's home bucket is `hash & 255`; it lives in one of the [`PROBE`] buckets from there.
//!
//! Invariants (verified by [`Table::check`]; `daisy pool check` runs it on every map):
//! 1. every live entry of a segment with pattern p and local depth L has `hash >> (64-L) == p`;
//! 2. **probe invariant**: an entry whose home is bucket h and that lives in bucket h+i has
//!    every bucket h..h+i-1 full, and i < PROBE. So a lookup stops at the first bucket with an
//!    empty slot, and an insert goes into the first free slot from home;
//! 3. no key appears twice; `len` counts the live entries.
//!
//! Crash reasoning: every change is made inside a Daisy transaction, so it is all-or-nothing,
//! except in-place slot writes (below). Inserts and removes write slots through the redo log (a
//! slot write and `len` fit one 64-byte record). A split never edits a segment in place: it builds 2^k new segments in fresh
//! allocations (unreachable until commit, so written without logging), points the directory at
//! them and frees the old one in the same transaction. Doubling the directory likewise copies
//! it into a fresh object. Removal restores the probe invariant by moving entries back (all
//! writes logged in the same transaction).
//!
//! Batches ([`BatchCore`]) copy a segment on first write within a transaction (copy-on-write
//! into a fresh object) and then store into the copy in place: the copies are flushed once at
//! commit, and the transaction makes the switch of the directory atomic.
//!
//! **Batches filling an empty table** (fixed maps; docs/FORMAT.md section 8a): a table made
//! with a capacity ([`Table::create_in_with_capacity`], `reserve`) has its segments allocated
//! up front, and a batch into an *empty* map stores into those segments in place instead of
//! copying them, because nothing committed lives there to protect:
//! * before the first store, every committed transaction is made durable and retired (no
//!   recovery may replay a record over the stored slots or the flags word) and
//!   [`FLAG_FILLING`] is set durably in the header by one in-place store of the
//!   checksum-and-flags word ([`Table::start_filling`]; canary `FillWithoutFlag`);
//! * at the batch's first commit the filled segments are flushed and fenced *before* the
//!   commit record, which also clears the flag (`BatchCore::persist_filled`; canary
//!   `FillNoFlush`): from then on the entries are committed and the batch goes on as any;
//! * a batch that ends without committing (an error, a panic) empties the segments again,
//!   durably, then clears the flag; a crash before the first commit leaves the flag set, and
//!   opening the map empties the segments (`finish_interrupted_fill`) in the same way. So a
//!   crash keeps nothing of the batch before its first commit, and a prefix after it, as for
//!   any batch.
//!
//! **In-place slot writes** (fixed maps with 8-byte entries; docs/FORMAT.md, section 8a): an
//! insert, update or removal that changes one slot only is one aligned 8-byte store (atomic
//! under power failure), a flush and a fence, with no log record. Invariants that make it safe:
//! * no recovery replays a transaction over an in-place write: before the first in-place write
//!   after a transaction that may have touched the map ([`Table::note_tx`]), the handle makes
//!   every committed transaction durable and covered by the persisted watermark
//!   ([`Table::in_place_ready`]); a replayed record would otherwise rewrite the slot with what
//!   it logged, older than the in-place value. (`tests/hashmap/crash.rs` and the power-failure
//!   simulator's `NoInPlaceBarrier` fault show this happens without the barrier.) The barrier
//!   covers committed transactions only, so no in-place write happens while the calling
//!   thread holds an open transaction (`tx::thread_in_tx`): one that wrote the map would
//!   commit after the barrier. Across threads, the handle's exclusivity is the rule: a thread
//!   that writes the map inside its transaction keeps the map's lock until that commits;
//! * a removal in place leaves the probe invariant intact: it only empties a slot of a bucket
//!   that keeps another empty slot, so no entry lives past that bucket on its account;
//! * `len` does not follow in-place writes: [`FLAG_LEN_STALE`] is durably set before the first
//!   one, the handle keeps the difference in DRAM, and dropping the handle makes `len` exact
//!   again. After a crash, the first `len` counts the entries.

use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::shared::PoolInner;
use crate::tx::Tx;
use bytemuck::{Pod, Zeroable};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

pub const MAP_MAGIC: u64 = u64::from_le_bytes(*b"DAISYMAP");
pub const MAP_FORMAT: u32 = 2;
/// The format before it (no flags word, a probe window of four buckets). Such a map is a valid
/// format-2 map (flags zero, every entry within four buckets of its home), so it is read, and
/// upgraded (format field and checksum rewritten in one transaction) when a handle opens it:
/// after that, builds that know only format 1 refuse it instead of misreading it.
pub const MAP_FORMAT_OLD: u32 = 1;
pub const BUCKET: usize = 64;
pub const SEG_BUCKETS: usize = 256;
pub const SEG_BYTES: usize = BUCKET * SEG_BUCKETS;
/// Buckets a key may be placed in, from its home bucket on.
pub const PROBE: usize = 8;
/// Largest global depth (a directory of 2^MAX_DEPTH words is far beyond any pool).
pub const MAX_DEPTH: u32 = 40;
pub const OFF_MASK: u64 = (1 << 56) - 1;
/// Header bytes: 88 fixed + up to 64 bytes of the reserved key's value, rounded.
pub const HEADER_BYTES: usize = 160;
/// Directory ranges up to this many words are rewritten through the log; larger ones copy the
/// directory into a fresh object instead (a redo record must fit one log slot).
pub const DIR_LOG_MAX_WORDS: u64 = 256;

pub const H_FLAGS: u64 = 36;
pub const H_LEN: u64 = 40;
pub const H_DIR: u64 = 48;
pub const H_DEPTH: u64 = 56;
pub const H_GARBAGE_DIR: u64 = 64;
pub const H_GARBAGE_DEPTH: u64 = 72;
pub const H_GARBAGE_POS: u64 = 76;
pub const H_SPECIAL: u64 = 80;
pub const H_SPECIAL_VAL: u64 = 88;

/// `flags` bit: `len` may lag the entries, because in-place slot writes (see "In-place slot
/// writes" above) changed the count since the header's `len` was last made exact.
pub const FLAG_LEN_STALE: u32 = 1;

/// `flags` bit: a batch is filling the map's segments in place (see "Batches filling an empty
/// table" above). The map's committed contents are empty: whatever a segment holds was
/// stored by a batch that did not commit, and opening the map empties the segments again.
pub const FLAG_FILLING: u32 = 2;

pub const KIND_FIXED: u32 = 1;
pub const KIND_BYTES: u32 = 2;

/// The first 88 bytes of a map header.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct MapHeader {
    pub magic: u64,
    pub kind: u32,
    pub format: u32,
    pub key_size: u32,
    pub val_size: u32,
    pub seed: u64,
    /// crc32c of bytes 0..32.
    pub crc: u32,
    /// [`FLAG_LEN_STALE`] or 0 (mutable).
    pub flags: u32,
    pub len: u64,
    pub dir: u64,
    pub depth: u64,
    pub garbage_dir: u64,
    pub garbage_depth: u32,
    pub garbage_pos: u32,
    pub special: u64,
}

const _: () = {
    assert!(std::mem::size_of::<MapHeader>() == H_SPECIAL_VAL as usize);
    // `PBytesMap::prefetch_at` reads the seed as the header's fourth word.
    assert!(std::mem::offset_of!(MapHeader, seed) == 24);
    assert!(std::mem::offset_of!(MapHeader, flags) == H_FLAGS as usize);
    assert!(std::mem::offset_of!(MapHeader, len) == H_LEN as usize);
    assert!(std::mem::offset_of!(MapHeader, dir) == H_DIR as usize);
    assert!(std::mem::offset_of!(MapHeader, depth) == H_DEPTH as usize);
    assert!(std::mem::offset_of!(MapHeader, garbage_dir) == H_GARBAGE_DIR as usize);
    assert!(std::mem::offset_of!(MapHeader, garbage_depth) == H_GARBAGE_DEPTH as usize);
    assert!(std::mem::offset_of!(MapHeader, garbage_pos) == H_GARBAGE_POS as usize);
    assert!(std::mem::offset_of!(MapHeader, special) == H_SPECIAL as usize);
    assert!(H_SPECIAL_VAL as usize + BUCKET <= HEADER_BYTES);
};

/// The header words every operation reads: `len`, `dir`, `depth` (at [`H_LEN`]).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct Hot {
    pub len: u64,
    pub dir: u64,
    pub depth: u64,
}

impl MapHeader {
    pub fn immutable_crc(&self) -> u32 {
        crate::checksum::crc32c_append(0, &bytemuck::bytes_of(self)[..32])
    }
}

/// How a slot stores an entry: implemented by the fixed-size and the byte-string maps.
pub trait SlotKind {
    const KIND: u32;
    const SLOT: usize;
    /// Byte every slot of a new segment is filled with (an empty slot).
    const EMPTY_FILL: u8;
    const PER_BUCKET: usize = BUCKET / Self::SLOT;
    fn key_size() -> u32;
    fn val_size() -> u32;
    fn is_empty(slot: &[u8]) -> bool;
    /// The hash of the entry held in a (non-empty) slot.
    fn entry_hash(seed: u64, slot: &[u8]) -> u64;
    /// Slots own an object each (freed with the entry).
    const OWNS_OBJECTS: bool = false;
    /// The object a (non-empty) slot owns, freed with the entry (byte-string maps).
    fn owned_object(_slot: &[u8]) -> Option<u64> {
        None
    }
}

/// The hash function of the format: XXH3-64 of the key bytes with the map's seed.
#[inline(always)]
pub fn hash_bytes(seed: u64, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}

#[inline(always)]
pub fn dir_index(h: u64, depth: u32) -> u64 {
    if depth == 0 {
        0
    } else {
        h >> (64 - depth)
    }
}

#[inline(always)]
pub fn home_bucket(h: u64) -> usize {
    (h as usize) & (SEG_BUCKETS - 1)
}

/// Where reads come from: a transaction (its own writes included) or the committed pool.
pub enum Src<'a, 'p> {
    Pool(&'a PoolInner),
    Tx(&'a Tx<'p>),
}

impl Src<'_, '_> {
    #[inline(always)]
    pub fn read(&self, off: u64, out: &mut [u8]) -> Result<()> {
        match self {
            Src::Pool(p) => {
                let end = off.checked_add(out.len() as u64);
                if off < p.hdr.heap_off || end.is_none_or(|e| e > p.heap_end()) {
                    return Err(Error::InvalidPointer {
                        offset: off,
                        why: "collection points outside the pool's heap",
                    });
                }
                p.map.read_bytes(off, out);
                Ok(())
            }
            Src::Tx(tx) => tx.read_bytes(off, out),
        }
    }

    /// End of the pool's heap (reads beyond it fail).
    pub fn heap_end(&self) -> u64 {
        match self {
            Src::Pool(p) => p.heap_end(),
            Src::Tx(tx) => tx.pool_inner().heap_end(),
        }
    }

    /// Read a small `T` (the hot path: header words, a directory word, a bucket). Inline
    /// copies instead of a byte loop; a transaction's own writes are overlaid when it has any.
    #[inline(always)]
    pub fn read_pod<T: Pod>(&self, off: u64) -> Result<T> {
        let len = std::mem::size_of::<T>() as u64;
        let direct = match self {
            Src::Pool(p) => Some(*p),
            Src::Tx(tx) if !tx.has_logged_copies() => Some(tx.pool_inner()),
            Src::Tx(_) => None,
        };
        match direct {
            Some(p) => {
                let end = off.checked_add(len);
                if off < p.hdr.heap_off || end.is_none_or(|e| e > p.heap_end()) {
                    return Err(Error::InvalidPointer {
                        offset: off,
                        why: "collection points outside the pool's heap",
                    });
                }
                Ok(p.map.read::<T>(off))
            }
            None => {
                let mut v = T::zeroed();
                self.read(off, bytemuck::bytes_of_mut(&mut v))?;
                Ok(v)
            }
        }
    }

    #[inline(always)]
    pub fn read_u64(&self, off: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn header(&self, hdr: u64) -> Result<MapHeader> {
        let mut h = MapHeader::zeroed();
        self.read(hdr, bytemuck::bytes_of_mut(&mut h))?;
        Ok(h)
    }
}

/// Is a directory of depth `depth` at `dir` plausible: depth in range and the 2^depth words
/// inside the heap? Checked before anything is sized from a depth read from the media, so a
/// damaged header cannot make us allocate or walk an absurd directory.
pub fn dir_fits(pool: &PoolInner, dir: u64, depth: u64) -> bool {
    depth <= MAX_DEPTH as u64
        && dir >= pool.hdr.heap_off
        && (8u64 << depth)
            .checked_add(dir)
            .is_some_and(|end| end <= pool.heap_end())
}

fn bad_dir(hdr: u64) -> Error {
    Error::InvalidPointer {
        offset: hdr,
        why: "hash map directory (offset or depth) does not fit the pool",
    }
}

/// The directory's words (the caller checked with [`dir_fits`] or a depth bound that they
/// are few enough to read).
pub fn read_dir(src: &Src, dir: u64, depth: u32) -> Result<Vec<u64>> {
    let mut words = vec![0u64; 1usize << depth];
    src.read(dir, bytemuck::cast_slice_mut(&mut words))?;
    Ok(words)
}

/// The segments of a directory, one per span: (first word, segment, local depth). Checks
/// what every reader relies on: each word decodes, a segment of local depth L fills exactly
/// its aligned run of 2^(G-L) words, and no segment appears under two runs (copying or
/// freeing it would leave the other run dangling).
pub fn dir_spans(
    words: &[u64],
    depth: u32,
    dir: u64,
) -> std::result::Result<Vec<(u64, u64, u32)>, String> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < words.len() {
        let at = dir + i as u64 * 8;
        let (seg, ld) = decode_dir(words[i], depth, at).map_err(|e| format!("word {i}: {e}"))?;
        let span = 1usize << (depth - ld);
        if !i.is_multiple_of(span) || words[i..i + span].iter().any(|&w| w != words[i]) {
            return Err(format!(
                "words {i}..{}: a segment of local depth {ld} must fill its aligned run",
                i + span
            ));
        }
        out.push((i as u64, seg, ld));
        i += span;
    }
    let mut segs: Vec<u64> = out.iter().map(|s| s.1).collect();
    segs.sort_unstable();
    if let Some(w) = segs.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("segment {:#x} appears under two runs", w[0]));
    }
    Ok(out)
}

/// Push every object a directory owns, from word `from` on: its segments and, for
/// byte-string maps (`entries`), the entry objects their slots point to. Used for the live
/// directory and for one a `clear` detached (whose freed part lies before `garbage_pos`).
pub fn owned_by_dir(
    src: &Src,
    dir: u64,
    depth: u32,
    from: u64,
    entries: bool,
    out: &mut Vec<u64>,
) -> Result<()> {
    let words = read_dir(src, dir, depth)?;
    let spans = dir_spans(&words, depth, dir).map_err(|_| Error::InvalidPointer {
        offset: dir,
        why: "hash map directory is inconsistent",
    })?;
    let mut img = vec![0u8; SEG_BYTES];
    for (_, seg, _) in spans.into_iter().filter(|s| s.0 >= from) {
        out.push(seg);
        if entries {
            src.read(seg, &mut img)?;
            out.extend(
                img.chunks_exact(16)
                    .map(|slot| u64::from_le_bytes(slot[8..16].try_into().unwrap()))
                    .filter(|&p| p != 0),
            );
        }
    }
    Ok(())
}

/// Result of probing a segment for a key.
#[derive(Clone, Copy, Debug)]
pub enum Probe {
    /// The key is in the slot at this offset.
    Found(u64),
    /// The key is absent; this is the slot an insert must use.
    Free(u64),
    /// The key is absent and its probe window is full: the segment must split.
    Full,
}

/// Decode a directory word, checking it is plausible (the heap bounds are checked on read).
#[inline(always)]
pub fn decode_dir(word: u64, depth: u32, at: u64) -> Result<(u64, u32)> {
    let seg = word & OFF_MASK;
    let ld = (word >> 56) as u32;
    // Bit 55 is never set on media (it marks fresh segments in a batch's DRAM copy only).
    if ld > depth || seg == 0 || !seg.is_multiple_of(BUCKET as u64) || seg & FRESH != 0 {
        return Err(Error::InvalidPointer {
            offset: at,
            why: "hash map directory word is invalid",
        });
    }
    Ok((seg, ld))
}

/// Probe the window of `h` in segment `seg`: `matches` says whether a non-empty slot holds
/// the key.
#[inline(always)]
pub fn probe<S: SlotKind>(
    src: &Src,
    seg: u64,
    h: u64,
    mut matches: impl FnMut(&[u8]) -> Result<bool>,
) -> Result<Probe> {
    let home = home_bucket(h);
    for p in 0..PROBE {
        let boff = seg + (((home + p) & (SEG_BUCKETS - 1)) * BUCKET) as u64;
        let line: [u8; BUCKET] = src.read_pod(boff)?;
        let mut free = None;
        for s in 0..S::PER_BUCKET {
            let slot = &line[s * S::SLOT..(s + 1) * S::SLOT];
            if S::is_empty(slot) {
                if free.is_none() {
                    free = Some(s);
                }
            } else if matches(slot)? {
                return Ok(Probe::Found(boff + (s * S::SLOT) as u64));
            }
        }
        if let Some(s) = free {
            return Ok(Probe::Free(boff + (s * S::SLOT) as u64));
        }
    }
    Ok(Probe::Full)
}

/// Place one slot into a segment image by the insert rule (first free slot from home within
/// the window). False when the window is full.
pub fn place<S: SlotKind>(img: &mut [u8], h: u64, slot: &[u8]) -> bool {
    let home = home_bucket(h);
    for p in 0..PROBE {
        let b = ((home + p) & (SEG_BUCKETS - 1)) * BUCKET;
        for s in 0..S::PER_BUCKET {
            let at = b + s * S::SLOT;
            if S::is_empty(&img[at..at + S::SLOT]) {
                img[at..at + S::SLOT].copy_from_slice(slot);
                return true;
            }
        }
    }
    false
}

/// Split the entries of segment image `old` (local depth `ld`) by the `k` hash bits after the
/// top `ld`: 2^k new images, or None when one of them would overflow a probe window.
pub fn redistribute<S: SlotKind>(seed: u64, old: &[u8], ld: u32, k: u32) -> Option<Vec<Vec<u8>>> {
    let mut imgs = vec![vec![S::EMPTY_FILL; SEG_BYTES]; 1 << k];
    for b in 0..SEG_BUCKETS {
        for s in 0..S::PER_BUCKET {
            let at = b * BUCKET + s * S::SLOT;
            let slot = &old[at..at + S::SLOT];
            if S::is_empty(slot) {
                continue;
            }
            let h = S::entry_hash(seed, slot);
            let i = ((h << ld) >> (64 - k)) as usize;
            if !place::<S>(&mut imgs[i], h, slot) {
                return None;
            }
        }
    }
    Some(imgs)
}

/// Where a slot may move during removal: is the entry in bucket `m`, whose home is `hm`, allowed
/// to live in bucket `j` (at or after its home, closer than `m`)?
#[inline(always)]
fn may_move_back(hm: usize, j: usize, m: usize) -> bool {
    let d_home = (m + SEG_BUCKETS - hm) & (SEG_BUCKETS - 1);
    let d_hole = (m + SEG_BUCKETS - j) & (SEG_BUCKETS - 1);
    d_hole <= d_home
}

/// How a table writes slots: through the redo log, or in place into a segment this
/// transaction owns (a batch's copy or new segment, or one it fills: see [`BatchCore::own`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    Logged,
    InPlace,
}

#[inline(always)]
pub fn put(tx: &mut Tx, mode: WriteMode, off: u64, data: &[u8]) -> Result<()> {
    match mode {
        WriteMode::Logged => tx.write_bytes(off, data),
        WriteMode::InPlace => {
            tx.pool_inner().map.write_bytes(off, data);
            Ok(())
        }
    }
}

/// Empty the slot at `hole` and restore the probe invariant by moving entries back.
pub fn remove_slot<S: SlotKind>(
    tx: &mut Tx,
    mode: WriteMode,
    seed: u64,
    seg: u64,
    hole: u64,
) -> Result<()> {
    let empty = [S::EMPTY_FILL; BUCKET];
    let mut hole = hole;
    // Whether the hole's bucket was full before the slot was emptied. If it was not, no entry
    // lives past it on its account (probe invariant), so nothing has to move back.
    let full = |line: &[u8]| {
        (0..S::PER_BUCKET).all(|s| !S::is_empty(&line[s * S::SLOT..(s + 1) * S::SLOT]))
    };
    let mut line = [0u8; BUCKET];
    let j0 = seg + (((hole - seg) as usize) / BUCKET * BUCKET) as u64;
    tx.read_bytes(j0, &mut line)?;
    let mut was_full = full(&line);
    put(tx, mode, hole, &empty[..S::SLOT])?;
    while was_full {
        let j = ((hole - seg) as usize) / BUCKET;
        let mut moved = None;
        'search: for step in 1..PROBE {
            let m = (j + step) & (SEG_BUCKETS - 1);
            let boff = seg + (m * BUCKET) as u64;
            tx.read_bytes(boff, &mut line)?;
            for s in 0..S::PER_BUCKET {
                let slot = &line[s * S::SLOT..(s + 1) * S::SLOT];
                if S::is_empty(slot) {
                    continue;
                }
                let hm = home_bucket(S::entry_hash(seed, slot));
                if may_move_back(hm, j, m) {
                    let mut bytes = [0u8; BUCKET];
                    bytes[..S::SLOT].copy_from_slice(slot);
                    moved = Some((boff + (s * S::SLOT) as u64, bytes, full(&line)));
                    break 'search;
                }
            }
            // Entries past a bucket with a free slot never lean on the buckets before it.
            if !full(&line) {
                break;
            }
        }
        let Some((from, bytes, from_full)) = moved else {
            return Ok(());
        };
        put(tx, mode, hole, &bytes[..S::SLOT])?;
        put(tx, mode, from, &empty[..S::SLOT])?;
        hole = from;
        was_full = from_full;
    }
    Ok(())
}

/// A map's identity: its header offset and hash seed, plus the pool it lives in.
/// The header at `hdr` if it is a map of kind `S` that fits the pool (what opening a map
/// checks before it trusts anything sized from the media).
fn valid_header<S: SlotKind>(
    src: &Src,
    pool: &PoolInner,
    hdr: u64,
    what: &'static str,
) -> Result<MapHeader> {
    let not = |why: String| Error::NotACollection {
        offset: hdr,
        what,
        why,
    };
    let h = src
        .header(hdr)
        .map_err(|_| not("offset outside the heap".into()))?;
    if h.magic != MAP_MAGIC || h.crc != h.immutable_crc() {
        return Err(not(
            "no hash map header there (bad magic or checksum)".into()
        ));
    }
    if h.format != MAP_FORMAT && h.format != MAP_FORMAT_OLD {
        return Err(not(format!(
            "map format version {} (this build reads {MAP_FORMAT_OLD} and {MAP_FORMAT})",
            h.format
        )));
    }
    if h.kind != S::KIND || h.key_size != S::key_size() || h.val_size != S::val_size() {
        return Err(not(format!(
            "it holds kind {} with {}-byte keys and {}-byte values, the type asks for kind {} \
             with {}-byte keys and {}-byte values",
            h.kind,
            h.key_size,
            h.val_size,
            S::KIND,
            S::key_size(),
            S::val_size()
        )));
    }
    if h.dir == 0 && h.depth == 0 {
        return Err(not("the map is being freed".into()));
    }
    if !dir_fits(pool, h.dir, h.depth) {
        return Err(not(format!(
            "directory at {:#x} of depth {} does not fit the pool",
            h.dir, h.depth
        )));
    }
    if h.garbage_dir != 0 && !dir_fits(pool, h.garbage_dir, h.garbage_depth as u64) {
        return Err(not("the detached directory does not fit the pool".into()));
    }
    if !flags_valid(h.flags, h.kind, S::SLOT) {
        return Err(not(format!("invalid header flags {:#x}", h.flags)));
    }
    Ok(h)
}

pub struct Table<S: SlotKind> {
    pub pool: Pool,
    pub hdr: u64,
    pub seed: u64,
    /// Volatile state of in-place slot writes (see "In-place slot writes" above).
    in_place: InPlace,
    _kind: std::marker::PhantomData<fn() -> S>,
}

/// Whether a header's flags word is valid: [`FLAG_LEN_STALE`] and [`FLAG_FILLING`] are the
/// only flags; only fixed maps with 8-byte slots write single slots in place, so only they may
/// carry the first, and only fixed maps have batches, so only they may carry the second.
fn flags_valid(flags: u32, kind: u32, slot: usize) -> bool {
    flags & !(FLAG_LEN_STALE | FLAG_FILLING) == 0
        && (flags & FLAG_LEN_STALE == 0 || (kind == KIND_FIXED && slot == 8))
        && (flags & FLAG_FILLING == 0 || kind == KIND_FIXED)
}

/// `InPlace::delta` before the entries were counted.
const DELTA_UNKNOWN: i64 = i64::MIN;

/// What a handle knows about its in-place slot writes. The handle is exclusive (one per map),
/// so these describe the map exactly; atomics only because reads take `&self` (the handle may
/// sit behind an `RwLock`).
struct InPlace {
    /// A transaction may have written this map since the last [`Table::in_place_barrier`]:
    /// its record might still be replayed by recovery, so no in-place write may happen yet.
    tx_since_barrier: AtomicBool,
    /// [`FLAG_LEN_STALE`] is durably set in the header.
    len_stale: AtomicBool,
    /// Live entries minus the header's `len` ([`DELTA_UNKNOWN`]: not counted yet after a
    /// crash). Transactions keep changing `len` by their own deltas, so this difference
    /// changes only with in-place writes.
    delta: AtomicI64,
}

/// Entries a new map's first segment is created with, and the directory it starts from.
fn new_segment_image<S: SlotKind>() -> Vec<u8> {
    vec![S::EMPTY_FILL; SEG_BYTES]
}

impl<S: SlotKind> Table<S> {
    /// Create a new empty map inside `tx`; returns the header offset.
    pub fn create_in(tx: &mut Tx, seed: u64) -> Result<u64> {
        Self::create_in_with_capacity(tx, seed, 0)
    }

    /// Create a new empty map inside `tx` with room for `capacity` entries: a directory of
    /// 2^g words and 2^g empty segments ([`capacity_depth`]), all fresh objects (flushed before
    /// the commit, with the header, the directory and the segments' allocation in one record).
    /// Returns the header offset.
    pub fn create_in_with_capacity(tx: &mut Tx, seed: u64, capacity: u64) -> Result<u64> {
        let g = capacity_depth::<S>(capacity)?;
        if !table_fits(tx.pool_inner(), g) {
            return Err(Error::Aborted(format!(
                "a hash map table for {capacity} entries (2^{g} segments of {SEG_BYTES} bytes) \
                 does not fit the pool"
            )));
        }
        let order: Vec<usize> = Vec::new();
        let dir = place_all::<S>(tx, &[], &[], &order, g)?
            .expect("an empty table has no probe window to overflow");
        let mut h = MapHeader {
            magic: MAP_MAGIC,
            kind: S::KIND,
            format: MAP_FORMAT,
            key_size: S::key_size(),
            val_size: S::val_size(),
            seed,
            crc: 0,
            flags: 0,
            len: 0,
            dir,
            depth: g as u64,
            garbage_dir: 0,
            garbage_depth: 0,
            garbage_pos: 0,
            special: 0,
        };
        h.crc = h.immutable_crc();
        let mut bytes = vec![0u8; HEADER_BYTES];
        bytes[..std::mem::size_of::<MapHeader>()].copy_from_slice(bytemuck::bytes_of(&h));
        Ok(tx.alloc_bytes(&bytes)?.offset())
    }

    /// Validate the header at `hdr` and claim the map for this handle.
    pub fn open(pool: &Pool, hdr: u64, what: &'static str) -> Result<Table<S>> {
        let h = valid_header::<S>(&Src::Pool(&pool.inner), &pool.inner, hdr, what)?;
        let t = Self::claim(pool, hdr, &h, what)?;
        if h.format == MAP_FORMAT_OLD {
            t.upgrade_format()?;
        }
        if h.flags & FLAG_FILLING != 0 {
            t.finish_interrupted_fill()?;
        }
        Ok(t)
    }

    /// A transaction-scoped handle (see `PBytesMap::view`): the header validated as `tx`
    /// sees it (the map may have been created in `tx`), and the map claimed like [`open`]'s,
    /// so that no exclusive handle can use it at the same time. A format-1 map is refused
    /// (its upgrade needs a transaction of its own; the maps a view reaches are newer).
    pub fn view(pool: &Pool, tx: &Tx, hdr: u64, what: &'static str) -> Result<Table<S>> {
        if !std::ptr::eq(tx.pool_inner(), &*pool.inner) {
            return Err(Error::InvalidPointer {
                offset: hdr,
                why: "the transaction belongs to another pool than the map",
            });
        }
        let h = valid_header::<S>(&Src::Tx(tx), &pool.inner, hdr, what)?;
        if h.flags & FLAG_FILLING != 0 {
            return Err(Error::NotACollection {
                offset: hdr,
                what,
                why: "a batch's fill was interrupted: open the map first".into(),
            });
        }
        if h.format != MAP_FORMAT {
            return Err(Error::NotACollection {
                offset: hdr,
                what,
                why: format!(
                    "map format version {} must be upgraded first (open it)",
                    h.format
                ),
            });
        }
        Self::claim(pool, hdr, &h, what)
    }

    fn claim(pool: &Pool, hdr: u64, h: &MapHeader, what: &'static str) -> Result<Table<S>> {
        if !pool.inner.claim_object(hdr) {
            return Err(Error::CollectionInUse { offset: hdr, what });
        }
        let stale = h.flags & FLAG_LEN_STALE != 0;
        Ok(Table {
            pool: pool.clone(),
            hdr,
            seed: h.seed,
            in_place: InPlace {
                // Recovery may have left records that a barrier must retire first.
                tx_since_barrier: AtomicBool::new(true),
                len_stale: AtomicBool::new(stale),
                delta: AtomicI64::new(if stale { DELTA_UNKNOWN } else { 0 }),
            },
            _kind: std::marker::PhantomData,
        })
    }

    /// Rewrite a format-1 header as format 2 (see [`MAP_FORMAT_OLD`]).
    fn upgrade_format(&self) -> Result<()> {
        self.note_tx();
        self.pool.transaction(|tx| {
            let mut h = Src::Tx(tx).header(self.hdr)?;
            h.format = MAP_FORMAT;
            h.crc = h.immutable_crc();
            tx.write_bytes(self.hdr, &bytemuck::bytes_of(&h)[..36])
        })
    }

    /// Check that `tx` runs on this map's pool.
    #[inline(always)]
    pub fn same_pool(&self, tx: &Tx) -> Result<()> {
        if std::ptr::eq(tx.pool_inner(), &*self.pool.inner) {
            Ok(())
        } else {
            Err(Error::InvalidPointer {
                offset: self.hdr,
                why: "the transaction belongs to another pool than the map",
            })
        }
    }

    /// Find the segment of `h`: (directory index, segment offset, local depth, header).
    #[inline(always)]
    pub fn locate(&self, src: &Src, h: u64) -> Result<(u64, u64, u32, Hot)> {
        let hd: Hot = src.read_pod(self.hdr + H_LEN)?;
        if hd.depth > MAX_DEPTH as u64 {
            return Err(bad_dir(self.hdr));
        }
        let depth = hd.depth as u32;
        let idx = dir_index(h, depth);
        let at = hd
            .dir
            .checked_add(idx * 8)
            .ok_or_else(|| bad_dir(self.hdr))?;
        let (seg, ld) = decode_dir(src.read_pod::<u64>(at)?, depth, at)?;
        Ok((idx, seg, ld, hd))
    }

    /// Split the segment at directory index `idx` (logged mode: a transaction of its own or
    /// the caller's).
    pub fn split_logged(&self, tx: &mut Tx, idx: u64) -> Result<()> {
        self.note_tx();
        let mut hd = Src::Tx(tx).header(self.hdr)?;
        if !dir_fits(tx.pool_inner(), hd.dir, hd.depth) {
            return Err(bad_dir(self.hdr));
        }
        let depth = hd.depth as u32;
        let at = hd.dir + idx * 8;
        let (seg, ld) = decode_dir(Src::Tx(tx).read_u64(at)?, depth, at)?;
        let mut old = vec![0u8; SEG_BYTES];
        tx.read_bytes(seg, &mut old)?;
        let (k, imgs) = split_images::<S>(self.seed, &old, ld)?;
        let pattern = idx >> (depth - ld);
        while (hd.depth as u32) < ld + k {
            self.double_dir_logged(tx, &mut hd)?;
        }
        let g = hd.depth as u32;
        let first = pattern << (g - ld);
        let span = 1u64 << (g - ld);
        let mut segs = Vec::with_capacity(imgs.len());
        for img in &imgs {
            segs.push(tx.alloc_bytes(img)?.offset());
        }
        let sub = span >> k;
        let words: Vec<u64> = (0..span)
            .map(|i| segs[(i / sub) as usize] | (((ld + k) as u64) << 56))
            .collect();
        // Rewrite the range through the log when it is small and fits the record's room;
        // otherwise copy the whole directory into a fresh object.
        let room = tx.log_capacity().saturating_sub(tx.log_used() + 256);
        if span <= DIR_LOG_MAX_WORDS && (span as usize) * 8 + 16 <= room {
            tx.write_bytes(hd.dir + first * 8, bytemuck::cast_slice(&words))?;
        } else {
            let mut dir = vec![0u64; 1 << g];
            tx.read_bytes(hd.dir, bytemuck::cast_slice_mut(&mut dir))?;
            dir[first as usize..(first + span) as usize].copy_from_slice(&words);
            let new_dir = tx.alloc_bytes(bytemuck::cast_slice(&dir))?.offset();
            tx.write_bytes(self.hdr + H_DIR, &new_dir.to_le_bytes())?;
            tx.free(crate::PPtr::<u8>::from_offset(hd.dir))?;
        }
        tx.free(crate::PPtr::<u8>::from_offset(seg))?;
        Ok(())
    }

    fn double_dir_logged(&self, tx: &mut Tx, hd: &mut MapHeader) -> Result<()> {
        let g = hd.depth as u32;
        if g >= MAX_DEPTH {
            return Err(Error::Aborted(
                "hash map directory reached its maximum depth (keys hash too alike)".into(),
            ));
        }
        let mut dir = vec![0u64; 1 << g];
        tx.read_bytes(hd.dir, bytemuck::cast_slice_mut(&mut dir))?;
        let doubled: Vec<u64> = (0..(2usize << g)).map(|i| dir[i >> 1]).collect();
        let new_dir = tx.alloc_bytes(bytemuck::cast_slice(&doubled))?.offset();
        let mut w = [0u8; 16];
        w[..8].copy_from_slice(&new_dir.to_le_bytes());
        w[8..].copy_from_slice(&(g as u64 + 1).to_le_bytes());
        tx.write_bytes(self.hdr + H_DIR, &w)?;
        tx.free(crate::PPtr::<u8>::from_offset(hd.dir))?;
        hd.dir = new_dir;
        hd.depth = g as u64 + 1;
        Ok(())
    }

    /// Rebuild the table at the size its entries need, inside `tx`: every entry's slot (its
    /// hash and entry object: nothing is copied or reallocated per entry) is placed into new
    /// segments of a new directory, the header repointed, and the old directory and segments
    /// freed, all in the caller's transaction. Tables never shrink otherwise, so one emptied by
    /// removals keeps its size; a caller calls this when it has become sparse. False (nothing
    /// done) when the table is not larger than its entries need, or has more old segments than
    /// `max_segments` (their frees must fit the transaction's redo record).
    ///
    /// Crash safety: the new segments and directory are fresh objects, flushed before the
    /// commit record; the header's `dir` and `depth` change in one logged write with the frees:
    /// after a crash the map is the old table or the new one, both holding the same entries.
    pub fn shrink(&self, tx: &mut Tx, max_segments: usize) -> Result<bool> {
        self.note_tx();
        let src = Src::Tx(tx);
        let hd = src.header(self.hdr)?;
        if hd.garbage_dir != 0 {
            return Ok(false); // a clear still frees its detached table
        }
        let segs = self.segments(&src)?;
        if segs.len() > max_segments {
            return Ok(false);
        }
        // Segments needed at about half full.
        let slots_per_seg = (SEG_BUCKETS * S::PER_BUCKET) as u64;
        let want_segs = (hd.len * 2).div_ceil(slots_per_seg).max(1);
        let mut g = 64 - (want_segs - 1).leading_zeros();
        if want_segs == 1 {
            g = 0;
        }
        if (1usize << g) >= segs.len() {
            return Ok(false);
        }
        self.rebuild(tx, &segs, g)?;
        Ok(true)
    }

    /// Make room for `n` entries (see [`capacity_depth`]) inside `tx`: a table with a segment
    /// of a smaller local depth than `n` entries need is rebuilt with every segment at that
    /// depth (or at the directory's depth, when that is deeper), its entries moved; nothing is
    /// done (false) when every segment is deep enough already. Same crash reasoning as
    /// [`Table::shrink`]: fresh objects, the header's `dir` and `depth` changed in one logged
    /// write with the frees of the old ones, so after a crash the table is the old one or the
    /// new one, both holding the same entries.
    pub fn reserve(&self, tx: &mut Tx, n: u64) -> Result<bool> {
        self.note_tx();
        let g_cap = capacity_depth::<S>(n)?;
        let src = Src::Tx(tx);
        let hd = src.header(self.hdr)?;
        let segs = self.segments(&src)?;
        if segs.iter().all(|s| s.2 >= g_cap) {
            return Ok(false);
        }
        self.rebuild(tx, &segs, g_cap.max(hd.depth as u32))?;
        Ok(true)
    }

    /// Move every entry of the table (whose segments are `segs`) into a new table of global
    /// depth at least `g` (deeper when a probe window would overflow), all segments at that
    /// local depth, inside `tx`: fresh segments and directory (flushed before the commit), the
    /// header's `dir` and `depth` in one logged 16-byte write, the old segments and directory
    /// freed. Slots move as they are (an entry object of a byte-string map is not copied).
    fn rebuild(&self, tx: &mut Tx, segs: &[(u64, u64, u32)], g: u32) -> Result<()> {
        let src = Src::Tx(tx);
        let hd = src.header(self.hdr)?;
        // Every entry: its hash, and its slot's bytes (back to back, S::SLOT each).
        let cap = hd.len.min(1 << 24) as usize;
        let mut hashes: Vec<u64> = Vec::with_capacity(cap);
        let mut bytes: Vec<u8> = Vec::with_capacity(cap * S::SLOT);
        let mut img = vec![0u8; SEG_BYTES];
        for &(_, seg, _) in segs {
            src.read(seg, &mut img)?;
            for slot in img.chunks_exact(S::SLOT) {
                if !S::is_empty(slot) {
                    hashes.push(S::entry_hash(self.seed, slot));
                    bytes.extend_from_slice(slot);
                }
            }
        }
        let mut order: Vec<usize> = (0..hashes.len()).collect();
        let mut g = g;
        let dir = loop {
            if g > MAX_DEPTH || !table_fits(tx.pool_inner(), g) {
                return Err(Error::Aborted(if g > MAX_DEPTH {
                    "hash map cannot be rebuilt (keys hash too alike)".into()
                } else {
                    format!("a hash map table of 2^{g} segments does not fit the pool")
                }));
            }
            order.sort_unstable_by_key(|&i| dir_index(hashes[i], g));
            if let Some(d) = place_all::<S>(tx, &hashes, &bytes, &order, g)? {
                break d;
            }
            g += 1;
        };
        if sim_fault!(ShrinkHeaderEarly) {
            let inner = tx.pool_inner();
            inner.store_word_durable(self.hdr + H_DIR, dir)?;
            inner.store_word_durable(self.hdr + H_DEPTH, g as u64)?;
        } else {
            let mut w = [0u8; 16];
            w[..8].copy_from_slice(&dir.to_le_bytes());
            w[8..].copy_from_slice(&(g as u64).to_le_bytes());
            tx.write_bytes(self.hdr + H_DIR, &w)?;
        }
        for &(_, seg, _) in segs {
            tx.free(crate::PPtr::<u8>::from_offset(seg))?;
        }
        tx.free(crate::PPtr::<u8>::from_offset(hd.dir))?;
        Ok(())
    }

    /// Add `delta` to `len` (logged).
    #[inline(always)]
    pub fn add_len(&self, tx: &mut Tx, cur: u64, delta: i64) -> Result<()> {
        let len = cur.wrapping_add(delta as u64);
        tx.write_bytes(self.hdr + H_LEN, &len.to_le_bytes())
    }

    /// Number of live entries. After a crash that left [`FLAG_LEN_STALE`] set, the first call
    /// counts the entries (reads every segment once).
    pub fn len(&self) -> Result<u64> {
        let hd_len = Src::Pool(&self.pool.inner).header(self.hdr)?.len;
        Ok(hd_len.wrapping_add(self.len_delta()? as u64))
    }

    /// Live entries minus the header's `len` (counted on first use after a crash).
    pub fn len_delta(&self) -> Result<i64> {
        let d = self.in_place.delta.load(Ordering::Relaxed);
        if d != DELTA_UNKNOWN {
            return Ok(d);
        }
        let src = Src::Pool(&self.pool.inner);
        let hd = src.header(self.hdr)?;
        let mut count = u64::from(hd.special != 0);
        let mut img = vec![0u8; SEG_BYTES];
        for (_, seg, _) in self.segments(&src)? {
            src.read(seg, &mut img)?;
            count += img
                .chunks_exact(S::SLOT)
                .filter(|s| !S::is_empty(s))
                .count() as u64;
        }
        let d = count.wrapping_sub(hd.len) as i64;
        self.in_place.delta.store(d, Ordering::Relaxed);
        Ok(d)
    }

    /// Record that a transaction is about to write this map: the next in-place write must
    /// first retire it ([`Table::in_place_barrier`]). Called before every transaction that
    /// may touch the map, committed or not (a rolled-back one only costs a barrier).
    #[inline(always)]
    pub fn note_tx(&self) {
        self.in_place
            .tx_since_barrier
            .store(true, Ordering::Relaxed);
    }

    /// Make an in-place slot write safe (see "In-place slot writes" above): every transaction
    /// that wrote this map is durably applied and covered by the persisted watermark, so
    /// recovery never replays one over the in-place write; and [`FLAG_LEN_STALE`] is durable.
    #[inline(always)]
    pub fn in_place_ready(&self) -> Result<()> {
        if self.in_place.tx_since_barrier.load(Ordering::Relaxed) {
            self.in_place_barrier()?;
        }
        Ok(())
    }

    #[cold]
    fn in_place_barrier(&self) -> Result<()> {
        if !self.in_place.len_stale.load(Ordering::Relaxed) {
            self.pool.transaction(|tx| {
                tx.durable_apply();
                tx.write_bytes(self.hdr + H_FLAGS, &FLAG_LEN_STALE.to_le_bytes())
            })?;
            self.in_place.len_stale.store(true, Ordering::Relaxed);
        }
        // Every transaction that touched the map committed before this load (the handle is
        // exclusive and none is open), so its seq is below the counter.
        let inner = &self.pool.inner;
        let newest = inner
            .lanes
            .next_seq
            .load(Ordering::SeqCst)
            .saturating_sub(1);
        if !sim_fault!(NoInPlaceBarrier) {
            inner.advance_watermark(newest)?;
        }
        self.in_place
            .tx_since_barrier
            .store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Before a batch fills this (empty) map's segments in place: make every committed
    /// transaction durable and retired, as for in-place slot writes (no recovery may replay a
    /// record over what the batch stores, or over the flags word), then set [`FLAG_FILLING`]
    /// with one durable in-place store of the header's checksum-and-flags word (`crc_flags`
    /// as the map's committed header holds it). The handle is exclusive and the calling thread
    /// holds no transaction, so no record that writes the map can be committed in between.
    /// False when the pool is poisoned (the batch then copies segments, and fails at its first
    /// commit anyway).
    pub fn start_filling(&self, crc_flags: u64) -> Result<bool> {
        let inner = &*self.pool.inner;
        if inner.poisoned.load(Ordering::Acquire) {
            return Ok(false);
        }
        let newest = inner
            .lanes
            .next_seq
            .load(Ordering::SeqCst)
            .saturating_sub(1);
        if !sim_fault!(NoInPlaceBarrier) {
            inner.advance_watermark(newest)?;
        }
        if !sim_fault!(FillWithoutFlag) {
            inner.store_word_durable(self.hdr + 32, crc_flags | (FLAG_FILLING as u64) << 32)?;
        }
        Ok(true)
    }

    /// Opening a map whose header says [`FLAG_FILLING`]: a batch was filling its (empty)
    /// table in place when the process stopped, before its commit. The committed map is empty:
    /// every segment is emptied again and made durable (non-temporal stores or flushes, one
    /// fence), then the flag is cleared and `len` set to 0 in one transaction. A crash in
    /// between leaves the flag set, and the next open does it again.
    fn finish_interrupted_fill(&self) -> Result<()> {
        let inner = &*self.pool.inner;
        let src = Src::Pool(inner);
        let empty = new_segment_image::<S>();
        for (_, seg, _) in self.segments(&src)? {
            if !inner.map.in_bounds(seg, SEG_BYTES) || seg < inner.hdr.heap_off {
                return Err(bad_dir(self.hdr));
            }
            inner.persist.copy_nodrain(&inner.map, seg, &empty);
        }
        inner
            .persist
            .fence()
            .map_err(|e| inner.io_err("persist", e))?;
        self.note_tx();
        self.pool.transaction(|tx| {
            let mut w = [0u8; 12];
            w[4..12].copy_from_slice(&0u64.to_le_bytes());
            // flags (offset 36) and len (offset 40): an exact, empty map.
            tx.write_bytes(self.hdr + H_FLAGS, &w)
        })?;
        self.in_place.len_stale.store(false, Ordering::Relaxed);
        self.in_place.delta.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Store the aligned 8-byte slot at `off` in place and make it durable (one flush, one
    /// fence); `delta` is the change in live entries. The caller ran
    /// [`Table::in_place_ready`] and checked that the slot belongs to a current segment.
    #[inline(always)]
    pub fn store_slot(&self, off: u64, word: u64, delta: i64) -> Result<()> {
        const { assert!(S::SLOT == 8) };
        let inner = &*self.pool.inner;
        if inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: inner.path.clone(),
            });
        }
        debug_assert!(
            off.is_multiple_of(8) && off >= inner.hdr.heap_off && off + 8 <= inner.heap_end()
        );
        if delta != 0 {
            let d = self.in_place.delta.load(Ordering::Relaxed);
            if d != DELTA_UNKNOWN {
                self.in_place
                    .delta
                    .store(d.wrapping_add(delta), Ordering::Relaxed);
            }
        }
        inner.store_word_durable(off, word)
    }

    /// Make the header's `len` exact again and clear [`FLAG_LEN_STALE`] (one transaction;
    /// nothing to do unless in-place writes happened). Runs when the handle is dropped.
    pub fn settle_len(&self) -> Result<()> {
        if !self.in_place.len_stale.load(Ordering::Relaxed) {
            return Ok(());
        }
        if crate::tx::thread_in_tx() || std::thread::panicking() {
            // An open transaction of this thread may still write `len` (by its own delta from
            // the value it read): an exact `len` written now would be off by that. And no
            // transactions while unwinding. The flag stays; the next user counts.
            return Ok(());
        }
        let d = self.in_place.delta.load(Ordering::Relaxed);
        if d == DELTA_UNKNOWN {
            // Counting now would make dropping a handle O(entries); the next user counts.
            return Ok(());
        }
        self.note_tx();
        self.pool.transaction(|tx| {
            let hd = Src::Tx(tx).header(self.hdr)?;
            self.add_len(tx, hd.len, d)?;
            tx.write_bytes(self.hdr + H_FLAGS, &0u32.to_le_bytes())
        })?;
        self.in_place.len_stale.store(false, Ordering::Relaxed);
        self.in_place.delta.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Every distinct segment: (first directory index, segment offset, local depth).
    pub fn segments(&self, src: &Src) -> Result<Vec<(u64, u64, u32)>> {
        let hd = src.header(self.hdr)?;
        if hd.depth > MAX_DEPTH as u64 {
            return Err(bad_dir(self.hdr));
        }
        let g = hd.depth as u32;
        let words = read_dir(src, hd.dir, g)?;
        dir_spans(&words, g, hd.dir).map_err(|_| bad_dir(self.hdr))
    }

    /// Replace the map's contents with an empty table (one transaction), then free the old
    /// segments a bounded number per transaction. A crash in between leaves the old directory
    /// recorded in the header; the next `clear`, `open` or `finish_garbage` call continues.
    pub fn clear(&self) -> Result<()> {
        self.clear_with(|_| Ok(()))
    }

    /// [`Table::clear`], with `extra` run inside the transaction that empties the map (so a
    /// caller's own bookkeeping changes atomically with it).
    pub fn clear_with(&self, extra: impl FnOnce(&mut Tx) -> Result<()>) -> Result<()> {
        self.finish_garbage()?;
        self.note_tx();
        self.pool.transaction(|tx| {
            extra(tx)?;
            let hd = Src::Tx(tx).header(self.hdr)?;
            if hd.depth > 32 {
                // `garbage_pos` is a u32 (a directory index); such a directory would be
                // 32 GiB.
                return Err(Error::Aborted(
                    "hash map too large to clear (directory deeper than 32 bits)".into(),
                ));
            }
            let seg = tx.alloc_bytes(&new_segment_image::<S>())?.offset();
            let dir = tx.alloc_bytes(&seg.to_le_bytes())?.offset();
            let mut w = vec![0u8; 48];
            w[0..8].copy_from_slice(&0u64.to_le_bytes()); // len
            w[8..16].copy_from_slice(&dir.to_le_bytes());
            w[16..24].copy_from_slice(&0u64.to_le_bytes()); // depth
            w[24..32].copy_from_slice(&hd.dir.to_le_bytes()); // garbage dir
            w[32..36].copy_from_slice(&(hd.depth as u32).to_le_bytes());
            w[36..40].copy_from_slice(&0u32.to_le_bytes());
            w[40..48].copy_from_slice(&0u64.to_le_bytes()); // special
            tx.write_bytes(self.hdr + H_LEN, &w)?;
            // The new table is empty and `len` says so: exact again.
            tx.write_bytes(self.hdr + H_FLAGS, &0u32.to_le_bytes())
        })?;
        self.in_place.len_stale.store(false, Ordering::Relaxed);
        self.in_place.delta.store(0, Ordering::Relaxed);
        self.finish_garbage()
    }

    /// At open: finish a `clear` a crash interrupted, if there is one (the common case reads
    /// one header word and runs no transaction).
    pub fn finish_interrupted_clear(&self) -> Result<()> {
        if Src::Pool(&self.pool.inner).header(self.hdr)?.garbage_dir == 0 {
            return Ok(());
        }
        self.finish_garbage()
    }

    /// Free what a `clear` detached (see [`Table::clear`]): a bounded amount per
    /// transaction, so each redo record fits a log slot (see [`garbage_step`]).
    pub fn finish_garbage(&self) -> Result<()> {
        self.note_tx();
        loop {
            let done = self.pool.transaction(|tx| {
                let mut budget = GARBAGE_BUDGET;
                garbage_step::<S>(tx, self.hdr, &mut budget, &mut |_, _| Ok(()))
            })?;
            if done {
                return Ok(());
            }
        }
    }
}

/// Frees per garbage transaction: their bitmap entries must fit one log record.
pub const GARBAGE_BUDGET: u32 = 128;

/// Log bytes kept free before each entry a garbage step frees: the free, its slot write, the
/// progress word, the segment's own free, and what the caller's `on_entry` logs (at most a
/// small allocation and a few words: see [`destroy_step`]).
const GARBAGE_ENTRY_RESERVE: usize = 512;

/// One bounded step of freeing what the detached directory of the map at `hdr` owns (a
/// `clear`'s, or a map being destroyed), inside `tx`; true when nothing is left detached.
///
/// Entries' own objects (byte-string maps) are freed first and their slots emptied, which
/// records the progress within a segment; `garbage_pos` records it across segments; the
/// detached directory goes last. `on_entry(tx, entry_object)` runs before an entry object is
/// freed (a caller whose values own further objects queues them there). Each free lowers
/// `budget`; the room checks keep a reserve for the steps that end the transaction and apply
/// only once something was freed, so every call makes progress even with the smallest log
/// slots (256 bytes).
pub(crate) fn garbage_step<S: SlotKind>(
    tx: &mut Tx,
    hdr: u64,
    budget: &mut u32,
    on_entry: &mut dyn FnMut(&mut Tx, u64) -> Result<()>,
) -> Result<bool> {
    let hd = Src::Tx(tx).header(hdr)?;
    if hd.garbage_dir == 0 {
        return Ok(true);
    }
    let g = hd.garbage_depth;
    if !dir_fits(tx.pool_inner(), hd.garbage_dir, g as u64) {
        return Err(Error::InvalidPointer {
            offset: hdr,
            why: "detached directory depth out of range",
        });
    }
    let mut i = hd.garbage_pos as u64;
    let mut progressed = false;
    'segments: while i < (1u64 << g) && *budget > 0 {
        let at = hd.garbage_dir + i * 8;
        let (seg, ld) = decode_dir(Src::Tx(tx).read_u64(at)?, g, at)?;
        if S::OWNS_OBJECTS {
            let mut img = vec![0u8; SEG_BYTES];
            tx.read_bytes(seg, &mut img)?;
            let empty = [S::EMPTY_FILL; BUCKET];
            for b in 0..SEG_BUCKETS {
                for s in 0..S::PER_BUCKET {
                    let at = b * BUCKET + s * S::SLOT;
                    let slot = &img[at..at + S::SLOT];
                    let Some(o) = (!S::is_empty(slot))
                        .then(|| S::owned_object(slot))
                        .flatten()
                    else {
                        continue;
                    };
                    if progressed
                        && (*budget == 0
                            || tx.log_used() + GARBAGE_ENTRY_RESERVE > tx.log_capacity())
                    {
                        break 'segments;
                    }
                    on_entry(tx, o)?;
                    tx.free(crate::PPtr::<u8>::from_offset(o))?;
                    if !sim_fault!(GarbageSlotKept) {
                        tx.write_bytes(seg + at as u64, &empty[..S::SLOT])?;
                    }
                    *budget = budget.saturating_sub(1);
                    progressed = true;
                }
            }
        }
        if progressed && tx.log_used() + 128 > tx.log_capacity() {
            break 'segments;
        }
        tx.free(crate::PPtr::<u8>::from_offset(seg))?;
        *budget = budget.saturating_sub(1);
        progressed = true;
        i += 1u64 << (g - ld);
    }
    if i >= (1u64 << g) {
        tx.free(crate::PPtr::<u8>::from_offset(hd.garbage_dir))?;
        let w = [0u8; 16];
        tx.write_bytes(hdr + H_GARBAGE_DIR, &w)?;
        Ok(true)
    } else {
        tx.write_bytes(hdr + H_GARBAGE_POS, &(i as u32).to_le_bytes())?;
        Ok(false)
    }
}

/// One bounded step of destroying the map at `hdr` inside `tx` (nothing else may use the
/// map: the caller unlinked it); true when the map is gone, header included.
///
/// States, each left by a committed step (so a crash between steps resumes where it was):
/// 1. a live map, perhaps with a `clear`'s detached directory: that garbage is freed first;
/// 2. the live directory is detached like a `clear`'s, with no new table in its place: the
///    header then says `dir = 0, depth = 0, len = 0` ("being destroyed": `open` refuses such
///    a map, `check` and the reachability walk count only the header and what is detached);
/// 3. the detached directory is freed by [`garbage_step`]s;
/// 4. the header is freed.
pub(crate) fn destroy_step<S: SlotKind>(
    tx: &mut Tx,
    hdr: u64,
    budget: &mut u32,
    on_entry: &mut dyn FnMut(&mut Tx, u64) -> Result<()>,
) -> Result<bool> {
    while *budget > 0 {
        let hd = Src::Tx(tx).header(hdr)?;
        if hd.garbage_dir != 0 {
            if !garbage_step::<S>(tx, hdr, budget, on_entry)? {
                return Ok(false);
            }
            continue;
        }
        if hd.dir != 0 {
            if hd.depth > 32 {
                return Err(Error::Aborted(
                    "hash map too large to free (directory deeper than 32 bits)".into(),
                ));
            }
            if !dir_fits(tx.pool_inner(), hd.dir, hd.depth) {
                return Err(bad_dir(hdr));
            }
            // Detach the live directory: [len, dir, depth, garbage_dir, garbage_depth|pos].
            let mut w = [0u8; 40];
            w[24..32].copy_from_slice(&hd.dir.to_le_bytes());
            w[32..36].copy_from_slice(&(hd.depth as u32).to_le_bytes());
            tx.write_bytes(hdr + H_LEN, &w)?;
            continue;
        }
        tx.free(crate::PPtr::<u8>::from_offset(hdr))?;
        return Ok(true);
    }
    Ok(false)
}

/// Allocate, inside `tx`, the 2^g segments of a table holding the entries whose hashes and
/// slot bytes are given (`order`: their indexes sorted by directory index at depth `g`), and
/// its directory (every segment at local depth `g`); returns the directory. One segment image
/// is built at a time. None, with nothing left allocated, when a probe window would overflow.
fn place_all<S: SlotKind>(
    tx: &mut Tx,
    hashes: &[u64],
    bytes: &[u8],
    order: &[usize],
    g: u32,
) -> Result<Option<u64>> {
    let Some(words) = place_segments::<S>(tx, hashes, bytes, order, g, false)? else {
        return Ok(None);
    };
    match tx.alloc_bytes(bytemuck::cast_slice(&words)) {
        Ok(d) => Ok(Some(d.offset())),
        Err(e) => {
            let segs: Vec<u64> = words.iter().map(|w| w & OFF_MASK).collect();
            cancel_fresh(tx, &segs);
            Err(e)
        }
    }
}

/// The segments of [`place_all`], without the directory: their directory words (offset |
/// local depth `g`). `cached`: written with ordinary stores and flushed at commit, so that a
/// batch may go on storing into them ([`Tx::alloc_bytes_cached`]); otherwise copied with
/// non-temporal stores where the mode has them.
fn place_segments<S: SlotKind>(
    tx: &mut Tx,
    hashes: &[u64],
    bytes: &[u8],
    order: &[usize],
    g: u32,
    cached: bool,
) -> Result<Option<Vec<u64>>> {
    let mut words: Vec<u64> = Vec::with_capacity(1 << g);
    let empty = new_segment_image::<S>();
    let mut img = empty.clone();
    let mut next = 0;
    let give_back = |tx: &mut Tx, words: &[u64]| {
        let segs: Vec<u64> = words.iter().map(|w| w & OFF_MASK).collect();
        cancel_fresh(tx, &segs);
    };
    for i in 0..(1u64 << g) {
        let first = next;
        while next < order.len() && dir_index(hashes[order[next]], g) == i {
            next += 1;
        }
        if next > first {
            img.copy_from_slice(&empty);
            for &e in &order[first..next] {
                if !place::<S>(&mut img, hashes[e], &bytes[e * S::SLOT..(e + 1) * S::SLOT]) {
                    give_back(tx, &words);
                    return Ok(None);
                }
            }
        }
        let data = if next > first { &img } else { &empty };
        let seg = if cached {
            tx.alloc_bytes_cached(data)
        } else {
            tx.alloc_bytes(data).map(|p| p.offset())
        };
        match seg {
            Ok(off) => words.push(off | ((g as u64) << 56)),
            Err(e) => {
                give_back(tx, &words);
                return Err(e);
            }
        }
    }
    Ok(Some(words))
}

/// Global depth of a table with room for `n` entries: 2^g segments whose slots number at
/// least twice `n` (at most half full, as the simple tables of `daisy bench hashmap`, which
/// get 2n slots rounded up to a power of two: the same bytes). At half load a probe window of
/// eight buckets overflows so rarely that inserting the `n` entries splits no segment, or a
/// handful (for entries of 8 bytes, 64 slots per window against 32 expected: a window holds
/// 64 keys with a probability under 1e-8); with large entries (one slot per bucket) some
/// segments still split. An error when `n` is beyond any table.
pub fn capacity_depth<S: SlotKind>(n: u64) -> Result<u32> {
    let per_seg = (SEG_BUCKETS * S::PER_BUCKET) as u64;
    let segs = n
        .max(1)
        .checked_mul(2)
        .map(|slots| slots.div_ceil(per_seg))
        .and_then(u64::checked_next_power_of_two)
        .filter(|s| s.trailing_zeros() <= MAX_DEPTH)
        .ok_or_else(|| Error::Aborted(format!("a hash map of {n} entries is beyond any table")))?;
    Ok(segs.trailing_zeros())
}

/// Whether a table of 2^g segments (and its directory) could fit the pool at its largest.
fn table_fits(pool: &PoolInner, g: u32) -> bool {
    let heap = pool.hdr.max_size.saturating_sub(pool.hdr.heap_off);
    g <= MAX_DEPTH && ((SEG_BYTES as u64 + 8) << g) <= heap
}

impl<S: SlotKind> Drop for Table<S> {
    fn drop(&mut self) {
        // A failure leaves the flag set: the next user counts the entries, nothing is lost.
        let _ = self.settle_len();
        self.pool.inner.release_object(self.hdr);
    }
}

/// Images for splitting `old`: k = 1 nearly always; more bits when one half would overflow.
pub fn split_images<S: SlotKind>(seed: u64, old: &[u8], ld: u32) -> Result<(u32, Vec<Vec<u8>>)> {
    /// More bits than this for one split means damaged slots (or keys whose hashes agree in
    /// dozens of bits, which XXH3 makes practically impossible): refuse instead of building
    /// 2^k segments.
    const MAX_SPLIT_BITS: u32 = 6;
    let mut k = 1;
    loop {
        if ld + k > MAX_DEPTH || k > MAX_SPLIT_BITS {
            return Err(Error::Aborted(
                "hash map segment cannot split further (keys hash too alike)".into(),
            ));
        }
        if let Some(imgs) = redistribute::<S>(seed, old, ld, k) {
            return Ok((k, imgs));
        }
        k += 1;
    }
}

/// Give back segments a failed batch step allocated (freeing an object in the transaction that
/// allocated it cancels the allocation; nothing is logged). A batch stays usable after an
/// operation's error, so a half-done step must not leave unreachable objects for its next
/// commit to make permanent.
fn cancel_fresh(tx: &mut Tx, segs: &[u64]) {
    // A segment is a run block (asserted below), whose cancel only edits the pending bitmap
    // mask and logs nothing, so it cannot fail (a large object's cancel logs, and could).
    const _: () = assert!(SEG_BYTES as u64 <= crate::layout::MAX_RUN_BLOCK);
    for &s in segs {
        let _ = tx.free(crate::PPtr::<u8>::from_offset(s));
    }
}

/// A fresh-segment flag kept only in a batch's DRAM copy of the directory.
pub const FRESH: u64 = 1 << 55;

/// A batch's state: the directory in DRAM (with [`FRESH`] marking segments this transaction
/// may write in place: copied, created, or filled), the header fields it will write at commit,
/// and the transaction.
pub struct BatchCore<'p> {
    pub tx: Option<Tx<'p>>,
    pool: &'p PoolInner,
    hdr: u64,
    pub dir: Vec<u64>,
    pub depth: u32,
    pub len: u64,
    /// Directory words changed since the last commit: (first index, count).
    pub changed: Vec<(u64, u64)>,
    /// The persistent directory no longer matches `depth` (it doubled): rewrite it whole.
    pub dir_resized: bool,
    pub persisted_dir: u64,
    pub persisted_len: u64,
    /// [`FLAG_FILLING`] is durably set: segments of the persistent directory are written in
    /// place (see "Batches filling an empty table" above).
    filling: bool,
    /// The header's checksum and flags word (offset 32) when the batch began, the flags
    /// without [`FLAG_FILLING`]: written back when filling ends.
    crc_flags: u64,
    /// Segments of the persistent directory written in place while filling: flushed before
    /// the commit record, emptied again when the batch ends without committing.
    filled: Vec<u64>,
    /// The byte an empty segment is filled with.
    empty_fill: u8,
}

impl<'p> BatchCore<'p> {
    /// Begin a batch on `t`, whose entries number the header's `len` plus `len_delta`
    /// (in-place writes before the batch). When the map is empty (and the calling thread holds
    /// no transaction that could have written it), the batch fills the existing segments in
    /// place instead of copying them: [`Table::start_filling`] first.
    pub fn begin<S: SlotKind>(t: &'p Table<S>, len_delta: i64) -> Result<BatchCore<'p>> {
        t.note_tx();
        let pool: &'p PoolInner = &t.pool.inner;
        let committed = Src::Pool(pool).header(t.hdr)?;
        let empty = committed.special == 0
            && committed.len.wrapping_add(len_delta as u64) == 0
            && committed.flags & FLAG_FILLING == 0
            && !crate::tx::thread_in_tx();
        let crc_flags = committed.crc as u64 | (committed.flags as u64) << 32;
        let filling = empty && t.start_filling(crc_flags)?;
        let mut core = BatchCore {
            tx: None,
            pool,
            hdr: t.hdr,
            dir: Vec::new(),
            depth: 0,
            len: 0,
            changed: Vec::new(),
            dir_resized: false,
            persisted_dir: 0,
            persisted_len: 0,
            filling,
            crc_flags,
            filled: Vec::new(),
            empty_fill: S::EMPTY_FILL,
        };
        // From here on, an error drops `core`, which clears the flag again.
        let tx = Tx::begin(pool)?;
        let src = Src::Tx(&tx);
        let hd = src.header(t.hdr)?;
        if !dir_fits(pool, hd.dir, hd.depth) {
            return Err(bad_dir(t.hdr));
        }
        let g = hd.depth as u32;
        let dir = read_dir(&src, hd.dir, g)?;
        // The batch trusts this copy for in-place writes: a damaged directory stops it here.
        dir_spans(&dir, g, hd.dir).map_err(|_| bad_dir(t.hdr))?;
        core.tx = Some(tx);
        core.dir = dir;
        core.depth = g;
        core.len = hd.len;
        core.persisted_dir = hd.dir;
        core.persisted_len = hd.len;
        Ok(core)
    }

    #[inline(always)]
    pub fn tx(&mut self) -> &mut Tx<'p> {
        self.tx.as_mut().expect("batch transaction is open")
    }

    /// Store `data` at `off`, in a segment this transaction may write in place (marked
    /// [`FRESH`] in the DRAM directory: flushed before the commit record).
    #[inline(always)]
    pub fn store(&mut self, off: u64, data: &[u8]) {
        self.pool.map.write_bytes(off, data);
    }

    /// Read a `T` from a segment this transaction owns (marked [`FRESH`]): straight from the
    /// mapping, which holds what the batch stored. The segment lies in the heap (checked when
    /// it was taken, [`BatchCore::own`], or allocated).
    #[inline(always)]
    pub fn read_owned<T: Pod>(&self, off: u64) -> T {
        self.pool.map.read::<T>(off)
    }

    /// Hint that the bucket at `off` will be read soon (a prefetch; nothing when `off` is
    /// outside the pool).
    #[inline(always)]
    pub fn prefetch(&self, off: u64) {
        self.pool.map.prefetch(off);
    }

    /// Locate the segment of `h`: (index, segment, local depth, fresh).
    #[inline(always)]
    pub fn locate(&self, h: u64) -> (u64, u64, u32, bool) {
        let idx = dir_index(h, self.depth);
        let w = self.dir[idx as usize];
        (idx, w & OFF_MASK & !FRESH, (w >> 56) as u32, w & FRESH != 0)
    }

    fn set_span(&mut self, first: u64, span: u64, word: u64) {
        for w in &mut self.dir[first as usize..(first + span) as usize] {
            *w = word;
        }
        self.changed.push((first, span));
    }

    /// Make the segment at `idx` writable in place for this transaction (its first write to
    /// it): while filling, the segment itself (the map was empty when the batch began, so a
    /// crash before the commit leaves nothing in it that matters: see "Batches filling an empty
    /// table"); otherwise a fresh copy ([`BatchCore::cow`]).
    pub fn own(&mut self, idx: u64) -> Result<()> {
        if !self.filling {
            return self.cow(idx);
        }
        let (_, seg, ld, fresh) = self.locate_idx(idx);
        debug_assert!(!fresh);
        // Written in place from here on: it must lie in the heap (a damaged directory word
        // is refused here rather than written through).
        let end = seg.checked_add(SEG_BYTES as u64);
        if seg < self.pool.hdr.heap_off || end.is_none_or(|e| e > self.pool.heap_end()) {
            return Err(Error::InvalidPointer {
                offset: seg,
                why: "hash map segment outside the pool's heap",
            });
        }
        self.filled.push(seg);
        // The persistent directory does not change: only the DRAM copy's word is marked.
        let g = self.depth;
        let first = (idx >> (g - ld)) << (g - ld);
        for w in &mut self.dir[first as usize..(first + (1 << (g - ld))) as usize] {
            *w |= FRESH;
        }
        Ok(())
    }

    /// Copy the segment at `idx` into a fresh object (first write of this transaction to it).
    pub fn cow(&mut self, idx: u64) -> Result<()> {
        let (_, seg, ld, fresh) = self.locate_idx(idx);
        debug_assert!(!fresh);
        let mut img = vec![0u8; SEG_BYTES];
        Src::Pool(self.tx().pool_inner()).read(seg, &mut img)?;
        let tx = self.tx();
        let new = tx.alloc_bytes_cached(&img)?;
        if let Err(e) = tx.free(crate::PPtr::<u8>::from_offset(seg)) {
            cancel_fresh(tx, &[new]);
            return Err(e);
        }
        let g = self.depth;
        let first = (idx >> (g - ld)) << (g - ld);
        self.set_span(first, 1 << (g - ld), new | FRESH | ((ld as u64) << 56));
        Ok(())
    }

    #[inline(always)]
    fn locate_idx(&self, idx: u64) -> (u64, u64, u32, bool) {
        let w = self.dir[idx as usize];
        (idx, w & OFF_MASK & !FRESH, (w >> 56) as u32, w & FRESH != 0)
    }

    /// Split the segment at `idx` into fresh segments.
    pub fn split<S: SlotKind>(&mut self, seed: u64, idx: u64) -> Result<()> {
        let (_, seg, ld, _) = self.locate_idx(idx);
        let mut old = vec![0u8; SEG_BYTES];
        Src::Pool(self.tx().pool_inner()).read(seg, &mut old)?;
        let (k, imgs) = split_images::<S>(seed, &old, ld)?;
        let pattern = idx >> (self.depth - ld);
        while self.depth < ld + k {
            // The directory must fit the pool once written: refuse before allocating it here.
            let heap = {
                let p = self.tx().pool_inner();
                p.hdr.max_size.saturating_sub(p.hdr.heap_off)
            };
            if self.depth >= MAX_DEPTH || (16u64 << self.depth) > heap {
                return Err(Error::Aborted(
                    "hash map directory reached its maximum depth".into(),
                ));
            }
            let d = std::mem::take(&mut self.dir);
            self.dir = (0..d.len() * 2).map(|i| d[i >> 1]).collect();
            self.depth += 1;
            self.dir_resized = true;
        }
        let g = self.depth;
        let first = pattern << (g - ld);
        let span = 1u64 << (g - ld);
        let sub = span >> k;
        let tx = self.tx();
        let mut segs = Vec::with_capacity(imgs.len());
        for img in &imgs {
            match tx.alloc_bytes_cached(img) {
                Ok(s) => segs.push(s),
                Err(e) => {
                    cancel_fresh(tx, &segs);
                    return Err(e);
                }
            }
        }
        if let Err(e) = tx.free(crate::PPtr::<u8>::from_offset(seg)) {
            cancel_fresh(tx, &segs);
            return Err(e);
        }
        for (i, s) in segs.iter().enumerate() {
            self.set_span(
                first + i as u64 * sub,
                sub,
                s | FRESH | (((ld + k) as u64) << 56),
            );
        }
        Ok(())
    }

    /// True when the log is close enough to full that the next operation must start a new
    /// transaction (an operation adds at most a split's entries; the commit adds the
    /// directory and header writes).
    pub fn should_commit(&mut self) -> bool {
        let tx = self.tx();
        let margin = (6 * 1024).min(tx.log_capacity() / 4);
        tx.log_used() + margin > tx.log_capacity()
    }

    /// Write the directory and header changes into the transaction and commit it; then begin
    /// the next one. Afterwards no segment is fresh.
    pub fn commit(&mut self, hdr: u64, reopen: bool) -> Result<()> {
        let written = self
            .write_dir_and_header(hdr)
            .and_then(|()| self.persist_filled());
        if let Err(e) = written {
            // The record may hold part of the directory change: abandon the transaction (its
            // drop rolls it back) so nothing half-written can ever commit. The batch is over;
            // what earlier commits made durable stays (the documented prefix).
            self.tx = None;
            return Err(e);
        }
        let tx = self.tx.take().expect("batch transaction is open");
        let pool = tx.pool_inner();
        tx.commit()?;
        // The record cleared FLAG_FILLING: the filled segments hold committed entries now.
        self.filling = false;
        self.filled.clear();
        self.persisted_len = self.len;
        self.changed.clear();
        self.dir_resized = false;
        for w in &mut self.dir {
            *w &= !FRESH;
        }
        if reopen {
            self.tx = Some(Tx::begin(pool)?);
        }
        Ok(())
    }

    /// The directory changes (logged ranges, or a fresh copy of the whole directory when
    /// they would not fit the record) and the new length, into the transaction.
    fn write_dir_and_header(&mut self, hdr: u64) -> Result<()> {
        let words: u64 = self.changed.iter().map(|c| c.1).sum();
        let dir_bytes = |d: &[u64]| -> Vec<u8> {
            d.iter()
                .flat_map(|w| (w & !FRESH).to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let logged_bytes = words as usize * 8 + self.changed.len() * 16;
        let room = {
            let tx = self.tx();
            tx.log_capacity().saturating_sub(tx.log_used() + 256)
        };
        if self.dir_resized
            || words > DIR_LOG_MAX_WORDS
            || self.changed.len() > 64
            || logged_bytes > room
        {
            let bytes = dir_bytes(&self.dir);
            let old = self.persisted_dir;
            let depth = self.depth as u64;
            let tx = self.tx();
            let new_dir = tx.alloc_bytes(&bytes)?.offset();
            let mut w = [0u8; 16];
            w[..8].copy_from_slice(&new_dir.to_le_bytes());
            w[8..].copy_from_slice(&depth.to_le_bytes());
            tx.write_bytes(hdr + H_DIR, &w)?;
            tx.free(crate::PPtr::<u8>::from_offset(old))?;
            self.persisted_dir = new_dir;
        } else {
            let dir = self.persisted_dir;
            for i in 0..self.changed.len() {
                let (first, n) = self.changed[i];
                let bytes = dir_bytes(&self.dir[first as usize..(first + n) as usize]);
                self.tx().write_bytes(dir + first * 8, &bytes)?;
            }
        }
        if self.len != self.persisted_len {
            let len = self.len;
            self.tx().write_bytes(hdr + H_LEN, &len.to_le_bytes())?;
        }
        if self.filling {
            // Filling ends with this record: the flags as they were before the batch.
            let flags = (self.crc_flags >> 32) as u32;
            self.tx().write_bytes(hdr + H_FLAGS, &flags.to_le_bytes())?;
        }
        Ok(())
    }

    /// Make the segments filled in place durable, before the commit record that clears
    /// [`FLAG_FILLING`] (its own fence: a crash during the commit's fence may persist any
    /// subset of the lines being flushed, and a record that says the filled entries are
    /// committed must never reach the media without them).
    fn persist_filled(&mut self) -> Result<()> {
        if self.filled.is_empty() {
            return Ok(());
        }
        let pool = self.pool;
        if !sim_fault!(FillNoFlush) {
            for &seg in &self.filled {
                pool.persist.flush(pool.map.at(seg, SEG_BYTES), SEG_BYTES);
            }
        }
        pool.persist.fence().map_err(|e| pool.io_err("persist", e))
    }

    /// The batch ends without committing its filled segments (an error, a failed commit, a
    /// panic): empty them again, durably, then clear [`FLAG_FILLING`] with one in-place store
    /// (no record that wrote the flags word can be replayed: [`Table::start_filling`] retired
    /// every one, and no commit of this batch wrote it since). The map is then what it was
    /// committed as: empty. A crash in between leaves the flag set, and opening the map
    /// empties the segments. Nothing is written to a poisoned pool (a failed fence: what
    /// reached the media is for recovery to judge).
    fn undo_filling(&mut self) {
        let pool = self.pool;
        if pool.poisoned.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let empty = vec![self.empty_fill; SEG_BYTES];
        for &seg in &self.filled {
            pool.persist.copy_nodrain(&pool.map, seg, &empty);
        }
        if pool.persist.fence().is_err() {
            pool.poisoned
                .store(true, std::sync::atomic::Ordering::Release);
            return;
        }
        let _ = pool.store_word_durable(self.hdr + 32, self.crc_flags);
        self.filled.clear();
        self.filling = false;
    }

    /// Make room for `n` entries ([`capacity_depth`]) in this transaction: when a segment is
    /// shallower than that, every entry moves into a new table of fresh segments (written in
    /// place by the batch from then on, no copy-on-write) at that depth or the directory's,
    /// and the old segments are freed. The persistent directory is rewritten at commit.
    pub fn reserve<S: SlotKind>(&mut self, seed: u64, n: u64) -> Result<()> {
        let g_cap = capacity_depth::<S>(n)?;
        let spans = dir_spans(
            &self.dir.iter().map(|w| w & !FRESH).collect::<Vec<_>>(),
            self.depth,
            0,
        )
        .map_err(|_| bad_dir(self.hdr))?;
        if spans.iter().all(|s| s.2 >= g_cap) {
            return Ok(());
        }
        let src = Src::Pool(self.pool);
        let mut hashes = Vec::new();
        let mut bytes = Vec::new();
        let mut img = vec![0u8; SEG_BYTES];
        for &(_, seg, _) in &spans {
            src.read(seg, &mut img)?;
            for slot in img.chunks_exact(S::SLOT) {
                if !S::is_empty(slot) {
                    hashes.push(S::entry_hash(seed, slot));
                    bytes.extend_from_slice(slot);
                }
            }
        }
        let mut order: Vec<usize> = (0..hashes.len()).collect();
        let mut g = g_cap.max(self.depth);
        let words = loop {
            if !table_fits(self.pool, g) {
                return Err(Error::Aborted(format!(
                    "a hash map table of 2^{g} segments does not fit the pool"
                )));
            }
            order.sort_unstable_by_key(|&i| dir_index(hashes[i], g));
            let tx = self.tx.as_mut().expect("batch transaction is open");
            if let Some(w) = place_segments::<S>(tx, &hashes, &bytes, &order, g, true)? {
                break w;
            }
            g += 1;
        };
        let tx = self.tx.as_mut().expect("batch transaction is open");
        for &(_, seg, _) in &spans {
            if let Err(e) = tx.free(crate::PPtr::<u8>::from_offset(seg)) {
                let segs: Vec<u64> = words.iter().map(|w| w & OFF_MASK).collect();
                cancel_fresh(tx, &segs);
                return Err(e);
            }
        }
        self.dir = words.into_iter().map(|w| w | FRESH).collect();
        self.depth = g;
        self.dir_resized = true;
        self.changed.clear();
        Ok(())
    }
}

impl Drop for BatchCore<'_> {
    fn drop(&mut self) {
        // The open transaction (if any) is rolled back first: nothing it did commits.
        self.tx = None;
        if self.filling {
            self.undo_filling();
        }
    }
}

/// Findings of [`PHashMap::check`](crate::PHashMap::check),
/// [`PBytesMap::check`](crate::PBytesMap::check) and [`PTreeMap::check`](crate::PTreeMap::check).
#[derive(Clone, Debug, Default)]
pub struct MapCheck {
    /// Offset of the map's header.
    pub header: u64,
    /// "hash map" (fixed-size entries), "byte-string hash map" or "ordered map".
    pub kind: &'static str,
    /// Entries found.
    pub entries: u64,
    /// Segments of the table (hash maps), or nodes of the live tree (ordered maps).
    pub segments: u64,
    /// Global depth of the directory (2^depth words), or the tree's height in levels.
    pub depth: u32,
    /// Invariants that do not hold (empty when the map is sound).
    pub problems: Vec<String>,
    /// Every object the map owns (header, directory, segments, entry objects).
    pub objects: Vec<u64>,
}

/// A slot layout known at run time (`pool check` reads sizes from the header).
#[derive(Clone, Copy, Debug)]
pub struct SlotDesc {
    pub slot: usize,
    pub key_size: usize,
    /// Byte-string maps store the hash in the slot's first word and the entry at the second.
    pub stored_hash: bool,
}

impl SlotDesc {
    pub fn of<S: SlotKind>() -> SlotDesc {
        SlotDesc {
            slot: S::SLOT,
            key_size: S::key_size() as usize,
            stored_hash: S::KIND == KIND_BYTES,
        }
    }
    fn per_bucket(&self) -> usize {
        BUCKET / self.slot
    }
    fn is_empty(&self, slot: &[u8]) -> bool {
        if self.stored_hash {
            slot[8..16].iter().all(|&b| b == 0)
        } else {
            slot[..self.key_size].iter().all(|&b| b == 0xFF)
        }
    }
    fn entry_hash(&self, seed: u64, slot: &[u8]) -> u64 {
        if self.stored_hash {
            u64::from_le_bytes(slot[..8].try_into().unwrap())
        } else {
            hash_bytes(seed, &slot[..self.key_size])
        }
    }
}

/// Verify the invariants of the map at `hdr` (read-only). `entry_objects` reads a byte-string
/// map's entry at a slot (None for fixed maps) and returns (its object, its key hash).
pub fn check_table(
    pool: &PoolInner,
    hdr: u64,
    kind: &'static str,
    d: SlotDesc,
    mut key_of: impl FnMut(&[u8]) -> std::result::Result<(Vec<u8>, Option<u64>), String>,
) -> MapCheck {
    let src = Src::Pool(pool);
    let mut r = MapCheck {
        header: hdr,
        kind,
        ..Default::default()
    };
    r.objects.push(hdr);
    let hd = match src.header(hdr) {
        Ok(h) => h,
        Err(e) => {
            r.problems.push(format!("header unreadable: {e}"));
            return r;
        }
    };
    if hd.dir == 0 && hd.depth == 0 {
        // Being destroyed (`destroy_step`): no live table, only what is still detached.
        if hd.len != 0 {
            r.problems
                .push(format!("map being freed has len {} (want 0)", hd.len));
        }
        detached_objects(pool, &hd, d, &mut r);
        return r;
    }
    if !dir_fits(pool, hd.dir, hd.depth) {
        r.problems.push(format!(
            "directory at {:#x} of depth {} does not fit the pool",
            hd.dir, hd.depth
        ));
        return r;
    }
    let g = hd.depth as u32;
    r.depth = g;
    r.objects.push(hd.dir);
    let mut dir = vec![0u64; 1usize << g];
    if let Err(e) = src.read(hd.dir, bytemuck::cast_slice_mut(&mut dir)) {
        r.problems.push(format!("directory unreadable: {e}"));
        return r;
    }
    // (hash, slot offset) of every entry: duplicates are found by sorting.
    let mut keys: Vec<(u64, u64)> = Vec::with_capacity(hd.len.min(1 << 24) as usize);
    let mut count = 0u64;
    let spans = match dir_spans(&dir, g, hd.dir) {
        Ok(s) => s,
        Err(e) => {
            r.problems.push(format!("directory {e}"));
            return r;
        }
    };
    // A batch was filling the table in place when the process stopped: the committed map is
    // empty, whatever the segments hold (opening the map empties them).
    let filling = hd.flags & FLAG_FILLING != 0;
    for (i, seg, ld) in spans {
        let pattern = i >> (g - ld);
        r.segments += 1;
        r.objects.push(seg);
        if filling {
            continue;
        }
        let mut img = vec![0u8; SEG_BYTES];
        if let Err(e) = src.read(seg, &mut img) {
            r.problems.push(format!("segment {seg:#x} unreadable: {e}"));
            return r;
        }
        for b in 0..SEG_BUCKETS {
            for s in 0..d.per_bucket() {
                let at = b * BUCKET + s * d.slot;
                let slot = &img[at..at + d.slot];
                if d.is_empty(slot) {
                    continue;
                }
                count += 1;
                let h = d.entry_hash(hd.seed, slot);
                if d.stored_hash {
                    // Byte maps: the key lives in the entry object; its hash must match.
                    let (key, obj) = match key_of(slot) {
                        Ok(k) => k,
                        Err(e) => {
                            r.problems
                                .push(format!("segment {seg:#x} bucket {b} slot {s}: {e}"));
                            continue;
                        }
                    };
                    if let Some(o) = obj {
                        r.objects.push(o);
                    }
                    if hash_bytes(hd.seed, &key) != h {
                        r.problems.push(format!(
                            "segment {seg:#x} bucket {b} slot {s}: stored hash does not match \
                             its key"
                        ));
                    }
                }
                if dir_index(h, ld) != pattern {
                    r.problems.push(format!(
                        "segment {seg:#x} bucket {b} slot {s}: key belongs to another segment"
                    ));
                }
                let home = home_bucket(h);
                let dist = (b + SEG_BUCKETS - home) & (SEG_BUCKETS - 1);
                if dist >= PROBE {
                    r.problems.push(format!(
                        "segment {seg:#x} bucket {b} slot {s}: {dist} buckets from its home"
                    ));
                } else {
                    for step in 0..dist {
                        let fb = (home + step) & (SEG_BUCKETS - 1);
                        let full = (0..d.per_bucket()).all(|t| {
                            let a = fb * BUCKET + t * d.slot;
                            !d.is_empty(&img[a..a + d.slot])
                        });
                        if !full {
                            r.problems.push(format!(
                                "segment {seg:#x} bucket {b} slot {s}: probe invariant broken \
                                 (bucket {fb} before it has a free slot)"
                            ));
                            break;
                        }
                    }
                }
                keys.push((h, seg + at as u64));
            }
        }
    }
    // Duplicates: the same key has the same hash. Keys are compared only within a run of
    // equal hashes, with no allocation for the usual run of one (this runs on every crash
    // image of the simulator). A run's keys are sorted, so two equal keys in a run of any
    // length end up side by side (a forged image may give many entries one stored hash).
    keys.sort_unstable();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && keys[end].0 == keys[start].0 {
            end += 1;
        }
        if end - start > 1 {
            let mut run: Vec<(Vec<u8>, u64)> = Vec::with_capacity(end - start);
            for &(_, at) in &keys[start..end] {
                let mut slot = vec![0u8; d.slot];
                if src.read(at, &mut slot).is_ok() {
                    if let Ok((k, _)) = key_of(&slot) {
                        run.push((k, at));
                    }
                }
            }
            run.sort_unstable();
            for w in run.windows(2) {
                if w[0].0 == w[1].0 {
                    r.problems.push(format!(
                        "slots {:#x} and {:#x}: key stored twice",
                        w[0].1, w[1].1
                    ));
                }
            }
        }
        start = end;
    }
    if hd.special != 0 {
        count += 1;
        if filling {
            r.problems
                .push("a map being filled by a batch holds the reserved key's entry".into());
        }
    }
    r.entries = count;
    if !flags_valid(hd.flags, hd.kind, d.slot) {
        r.problems
            .push(format!("invalid header flags {:#x}", hd.flags));
    }
    // With FLAG_LEN_STALE, `len` may lag in-place writes; the handle counts on open.
    if hd.flags & FLAG_LEN_STALE == 0 && count != hd.len {
        r.problems.push(format!(
            "header len is {} but {count} entries are stored",
            hd.len
        ));
    }
    detached_objects(pool, &hd, d, &mut r);
    r
}

/// A clear() a crash interrupted (opening the map finishes it), or a map being destroyed:
/// what the detached directory still owns is the map's too.
fn detached_objects(pool: &PoolInner, hd: &MapHeader, d: SlotDesc, r: &mut MapCheck) {
    if hd.garbage_dir == 0 {
        return;
    }
    r.objects.push(hd.garbage_dir);
    let g = hd.garbage_depth;
    if !dir_fits(pool, hd.garbage_dir, g as u64) {
        r.problems
            .push("the detached directory does not fit the pool".to_string());
    } else if let Err(e) = owned_by_dir(
        &Src::Pool(pool),
        hd.garbage_dir,
        g,
        hd.garbage_pos as u64,
        d.stored_hash,
        &mut r.objects,
    ) {
        r.problems.push(format!("detached directory: {e}"));
    }
}
