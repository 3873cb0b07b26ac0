//! [`PBytesMap`]: a persistent hash map from byte strings to byte strings of any length.
//!
//! A slot is 16 bytes: the key's 64-bit hash and the offset of an *entry object*
//! `[key_len u32][value_len u32][key][value]` (offset 0: empty). The stored hash lets splits
//! and removals move slots without reading the entries, and lookups compare hashes before
//! keys. Replacing a value allocates a new entry and frees the old one in the same
//! transaction, so a value is never seen half-written; a value whose block has room for the new
//! one, and that changes little (an equal-length value of at most 256 bytes, or up to 64 KiB
//! values where at most half the bytes differ: an append, a counter, a field added to a packed
//! record), is instead rewritten in place through the redo log: as atomic, without allocator
//! work, and only the changed lines written back.

use super::table::*;
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::ptr::PPtr;
use crate::tx::Tx;

/// Slot layout of a byte-string map.
pub struct BytesSlot;

impl SlotKind for BytesSlot {
    const KIND: u32 = KIND_BYTES;
    const SLOT: usize = 16;
    const EMPTY_FILL: u8 = 0;
    const OWNS_OBJECTS: bool = true;
    fn key_size() -> u32 {
        0
    }
    fn val_size() -> u32 {
        0
    }
    #[inline(always)]
    fn is_empty(slot: &[u8]) -> bool {
        slot_ptr(slot) == 0
    }
    #[inline(always)]
    fn entry_hash(_seed: u64, slot: &[u8]) -> u64 {
        u64::from_le_bytes(slot[..8].try_into().unwrap())
    }
    fn owned_object(slot: &[u8]) -> Option<u64> {
        Some(slot_ptr(slot))
    }
}

#[inline(always)]
fn slot_ptr(slot: &[u8]) -> u64 {
    u64::from_le_bytes(slot[8..16].try_into().unwrap())
}

/// Values up to this many bytes replace a value of the same length in place (logged) instead
/// of through a new entry object.
const REPLACE_IN_PLACE_MAX: usize = 256;

/// Values up to this many bytes are compared with the old value when replaced, and written in
/// place when little differs (see `rewrite_in_place`).
const DIFF_IN_PLACE_MAX: usize = 64 << 10;

/// Largest key or value (the entry header stores 32-bit lengths).
pub const MAX_ITEM_LEN: usize = u32::MAX as usize;

const WHAT: &str = "byte-string hash map";

impl std::fmt::Debug for PBytesMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PBytesMap@{:#x}", self.t.hdr)
    }
}

/// A persistent hash map from byte strings to byte strings. Same durability modes and
/// handle rules as [`super::PHashMap`] (per-operation, or inside a caller's transaction).
pub struct PBytesMap {
    t: Table<BytesSlot>,
    /// The entry being built by `upsert_tx`, kept between calls (no allocation per write).
    scratch: Vec<u8>,
}

/// Read the entry object at `obj`: (key length, value length).
fn entry_lens(src: &Src, obj: u64) -> Result<(usize, usize)> {
    let mut h = [0u8; 8];
    src.read(obj, &mut h)?;
    let (kl, vl) = (
        u32::from_le_bytes(h[..4].try_into().unwrap()) as u64,
        u32::from_le_bytes(h[4..].try_into().unwrap()) as u64,
    );
    // Checked before anything is allocated from these lengths (damaged media).
    if obj + 8 + kl + vl > src.heap_end() {
        return Err(Error::InvalidPointer {
            offset: obj,
            why: "hash map entry runs past the heap",
        });
    }
    Ok((kl as usize, vl as usize))
}

fn key_matches(src: &Src, obj: u64, key: &[u8]) -> Result<bool> {
    // A short key: its entry's header and bytes in one read (one overlay lookup inside a
    // big transaction instead of two). The read may not run past the heap's end.
    // (`obj` comes from the media: checked arithmetic, so a damaged pointer near u64::MAX
    // takes the slow path, whose reads report it, instead of wrapping.)
    if key.len() <= 56
        && obj
            .checked_add(8 + key.len() as u64)
            .is_some_and(|end| end <= src.heap_end())
    {
        let mut b = [0u8; 64];
        let n = 8 + key.len();
        src.read(obj, &mut b[..n])?;
        let kl = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        return Ok(kl == key.len() && &b[8..n] == key);
    }
    let (kl, _) = entry_lens(src, obj)?;
    if kl != key.len() {
        return Ok(false);
    }
    // Compare in pieces: keys may be long.
    let mut buf = [0u8; 256];
    let mut done = 0;
    while done < kl {
        let n = (kl - done).min(buf.len());
        src.read(obj + 8 + done as u64, &mut buf[..n])?;
        if buf[..n] != key[done..done + n] {
            return Ok(false);
        }
        done += n;
    }
    Ok(true)
}

fn check_len(what: &str, n: usize) -> Result<()> {
    if n > MAX_ITEM_LEN {
        return Err(Error::Unsupported(format!(
            "{what} of {n} bytes is larger than the map's limit of {MAX_ITEM_LEN} bytes"
        )));
    }
    Ok(())
}

/// (slot offset, entry object) of each occupied slot of `bytes`, read from pool offset `at`.
fn occupied(bytes: &[u8], at: u64) -> Vec<(u64, u64)> {
    bytes
        .chunks_exact(BytesSlot::SLOT)
        .enumerate()
        .map(|(i, s)| (at + (i * BytesSlot::SLOT) as u64, slot_ptr(s)))
        .filter(|&(_, p)| p != 0)
        .collect()
}

/// A number below `n` from the random word `rng()` gives, taken from its high bits (Lemire's
/// multiply-shift): a caller's generator whose low bits are weak (xorshift) still draws evenly.
fn below(rng: &mut dyn FnMut() -> u64, n: u64) -> u64 {
    ((rng() as u128 * n as u128) >> 64) as u64
}

/// The prefetch hints of [`PBytesMap::prefetch`] for the map whose header is at `hdr`.
fn prefetch_key(pool: &crate::shared::PoolInner, hdr: u64, seed: u64, key: &[u8], stage: u8) {
    let src = Src::Pool(pool);
    let h = hash_bytes(seed, key);
    let Ok(hd) = src.read_pod::<Hot>(hdr + H_LEN) else {
        return;
    };
    if hd.depth > MAX_DEPTH as u64 {
        return;
    }
    let depth = hd.depth as u32;
    let Some(at) = hd.dir.checked_add(dir_index(h, depth) * 8) else {
        return;
    };
    let Ok(Ok((seg, _))) = src.read_pod::<u64>(at).map(|w| decode_dir(w, depth, at)) else {
        return;
    };
    let bucket = seg + (home_bucket(h) * BUCKET) as u64;
    if stage == 1 {
        pool.map.prefetch(bucket);
        return;
    }
    let Ok(line) = src.read_pod::<[u8; BUCKET]>(bucket) else {
        return;
    };
    for slot in line.chunks_exact(BytesSlot::SLOT) {
        if !BytesSlot::is_empty(slot) && BytesSlot::entry_hash(0, slot) == h {
            pool.map.prefetch(slot_ptr(slot));
            return;
        }
    }
}

impl PBytesMap {
    /// Create an empty map inside `tx` (random hash seed); store the pointer somewhere
    /// reachable in the same transaction.
    pub fn create_in(tx: &mut Tx) -> Result<PPtr<PBytesMap>> {
        Self::create_in_with_seed(tx, super::hashmap::random_seed())
    }

    /// A new, empty map in `tx`, hashing with `seed` (a fixed seed makes layouts reproducible, as tests want).
    pub fn create_in_with_seed(tx: &mut Tx, seed: u64) -> Result<PPtr<PBytesMap>> {
        Ok(PPtr::from_offset(Table::<BytesSlot>::create_in(tx, seed)?))
    }

    /// A new, empty map in `tx` (random hash seed) with room for `capacity` entries: its
    /// directory and segments are allocated now, at most half of their slots for the entries,
    /// so inserting them splits no segment, or a rare few (the table's
    /// `capacity_depth`). The table never shrinks below this
    /// by itself.
    pub fn create_in_with_capacity(tx: &mut Tx, capacity: u64) -> Result<PPtr<PBytesMap>> {
        Self::create_in_with_seed_and_capacity(tx, super::hashmap::random_seed(), capacity)
    }

    /// [`create_in_with_capacity`](Self::create_in_with_capacity) with a chosen hash seed.
    pub fn create_in_with_seed_and_capacity(
        tx: &mut Tx,
        seed: u64,
        capacity: u64,
    ) -> Result<PPtr<PBytesMap>> {
        Ok(PPtr::from_offset(
            Table::<BytesSlot>::create_in_with_capacity(tx, seed, capacity)?,
        ))
    }

    /// Open the map at `id`; finishes a `clear` a crash interrupted.
    pub fn open(pool: &Pool, id: PPtr<PBytesMap>) -> Result<PBytesMap> {
        let t = Table::open(pool, id.offset(), WHAT)?;
        t.finish_interrupted_clear()?;
        Ok(PBytesMap {
            t,
            scratch: Vec::new(),
        })
    }

    /// The map's header pointer (what to store to find it again).
    pub fn id(&self) -> PPtr<PBytesMap> {
        PPtr::from_offset(self.t.hdr)
    }

    /// Number of entries.
    pub fn len(&self) -> Result<u64> {
        self.t.len()
    }

    /// The number of entries as transaction `tx` sees it.
    pub fn len_tx(&self, tx: &Tx) -> Result<u64> {
        self.t.same_pool(tx)?;
        Ok(Src::Tx(tx).header(self.t.hdr)?.len)
    }

    /// Slots the table's directory can address as `tx` sees it (see
    /// [`BytesMapView::capacity`]).
    pub fn capacity_tx(&self, tx: &Tx) -> Result<u64> {
        self.t.same_pool(tx)?;
        let hd = Src::Tx(tx).header(self.t.hdr)?;
        Ok((1u64 << hd.depth.min(MAX_DEPTH as u64)) * (SEG_BYTES / BytesSlot::SLOT) as u64)
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Insert or replace; true when a value was replaced. Durable when it returns.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let pool = self.t.pool.clone();
        pool.transaction(|tx| self.insert_in(tx, key, &[value]))
    }

    /// Remove; true when the key was present. Durable when it returns.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        let this = &*self;
        this.t.pool.transaction(|tx| this.remove_in(tx, key))
    }

    /// The committed value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in(&Src::Pool(&self.t.pool.inner), key)
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        let src = Src::Pool(&self.t.pool.inner);
        Ok(self.find(&src, key)?.is_some())
    }

    /// The value of `key` as transaction `tx` sees it.
    pub fn get_tx(&self, tx: &Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.t.same_pool(tx)?;
        self.get_in(&Src::Tx(tx), key)
    }

    /// (slot offset, entry object) of `key`, if present.
    fn find(&self, src: &Src, key: &[u8]) -> Result<Option<(u64, u64)>> {
        let h = hash_bytes(self.t.seed, key);
        let (_, seg, _, _) = self.t.locate(src, h)?;
        match probe::<BytesSlot>(src, seg, h, |s| {
            Ok(BytesSlot::entry_hash(0, s) == h && key_matches(src, slot_ptr(s), key)?)
        })? {
            Probe::Found(off) => Ok(Some((off, src.read_u64(off + 8)?))),
            _ => Ok(None),
        }
    }

    fn get_in(&self, src: &Src, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some((_, obj)) = self.find(src, key)? else {
            return Ok(None);
        };
        let (kl, vl) = entry_lens(src, obj)?;
        let mut v = vec![0u8; vl];
        src.read(obj + 8 + kl as u64, &mut v)?;
        Ok(Some(v))
    }

    /// Insert or replace inside the caller's transaction; true when a value was replaced.
    pub fn insert_tx(&mut self, tx: &mut Tx, key: &[u8], value: &[u8]) -> Result<bool> {
        self.insert_in(tx, key, &[value])
    }

    /// [`insert_tx`](Self::insert_tx) of the value that is the concatenation of `parts`
    /// (saves the caller a copy when a value is a header plus a payload).
    pub fn insert_parts_tx(&mut self, tx: &mut Tx, key: &[u8], parts: &[&[u8]]) -> Result<bool> {
        self.insert_in(tx, key, parts)
    }

    /// Insert or replace with the value `parts` concatenated: the upsert that always puts.
    fn insert_in(&mut self, tx: &mut Tx, key: &[u8], parts: &[&[u8]]) -> Result<bool> {
        let mut replaced = false;
        self.upsert_tx(tx, key, |_, old, buf| {
            replaced = old.is_some();
            for p in parts {
                buf.extend_from_slice(p);
            }
            Ok(Upsert::Put)
        })?;
        Ok(replaced)
    }

    /// Prefetch hints for a batch of lookups (a server's pipelined round): stage 1 brings in
    /// `key`'s home bucket; stage 2, a few keys later when that bucket is cached, the entry
    /// whose stored hash matches. Reads the committed table only and never fails: a stale or
    /// damaged word only makes the hint useless.
    pub fn prefetch(&self, key: &[u8], stage: u8) {
        prefetch_key(&self.t.pool.inner, self.t.hdr, self.t.seed, key, stage)
    }

    /// [`prefetch`](Self::prefetch) on the map at `id`, with no handle (a server's per-key
    /// collections). Reads the committed header for the hash seed; a stale or freed `id`
    /// only makes the hint useless (every read is bounds-checked).
    pub fn prefetch_at(pool: &Pool, id: PPtr<PBytesMap>, key: &[u8], stage: u8) {
        let src = Src::Pool(&pool.inner);
        let Ok(h) = src.read_pod::<[u64; 4]>(id.offset()) else {
            return;
        };
        if h[0] != MAP_MAGIC {
            return;
        }
        // The seed is the fourth word of the header (after magic, kind|format, sizes).
        prefetch_key(&pool.inner, id.offset(), h[3], key, stage)
    }

    /// Read, then insert, replace, remove or keep `key` in one probe of the table (what a
    /// server's SET with options needs without looking the key up twice).
    ///
    /// `decide` is called once with the current entry (if any) and a buffer; to store a new
    /// value it appends the value's bytes to the buffer and returns [`Upsert::Put`]. The
    /// buffer holds the new entry's header and key before the value: only what `decide`
    /// appends is the value. Returns what was done.
    pub fn upsert_tx(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        decide: impl FnOnce(&Tx, Option<EntryRef>, &mut Vec<u8>) -> Result<Upsert>,
    ) -> Result<Upsert> {
        self.t.same_pool(tx)?;
        check_len("key", key.len())?;
        let h = hash_bytes(self.t.seed, key);
        let mut entry = std::mem::take(&mut self.scratch);
        entry.clear();
        entry.extend_from_slice(&(key.len() as u32).to_le_bytes());
        entry.extend_from_slice(&[0u8; 4]);
        entry.extend_from_slice(key);
        let src = Src::Tx(tx);
        let (mut idx, mut seg, _, mut hd) = self.t.locate(&src, h)?;
        let matches = |src: &Src, s: &[u8]| -> Result<bool> {
            Ok(BytesSlot::entry_hash(0, s) == h && key_matches(src, slot_ptr(s), key)?)
        };
        let mut found = probe::<BytesSlot>(&src, seg, h, |s| matches(&src, s))?;
        let old = match found {
            Probe::Found(off) => {
                let obj = src.read_u64(off + 8)?;
                let (kl, vl) = entry_lens(&src, obj)?;
                Some(EntryRef {
                    obj,
                    key_len: kl as u32,
                    value_len: vl as u32,
                })
            }
            _ => None,
        };
        let op = decide(tx, old, &mut entry)?;
        match (op, found, old) {
            (Upsert::Keep, ..) | (Upsert::Remove, _, None) => {}
            (Upsert::Remove, Probe::Found(off), Some(e)) => {
                remove_slot::<BytesSlot>(tx, WriteMode::Logged, self.t.seed, seg, off)?;
                tx.free(PPtr::<u8>::from_offset(e.obj))?;
                self.t.add_len(tx, hd.len, -1)?;
            }
            (Upsert::Put, ..) => {
                let vlen = entry.len() - 8 - key.len();
                check_len("value", vlen)?;
                entry[4..8].copy_from_slice(&(vlen as u32).to_le_bytes());
                loop {
                    match found {
                        Probe::Found(_)
                            if rewrite_in_place(
                                tx,
                                old.expect("found"),
                                &entry[8 + key.len()..],
                            )? =>
                        {
                            break;
                        }
                        Probe::Found(off) => {
                            let obj = tx.alloc_bytes(&entry)?.offset();
                            tx.write_bytes(off + 8, &obj.to_le_bytes())?;
                            tx.free(PPtr::<u8>::from_offset(old.expect("found").obj))?;
                            break;
                        }
                        Probe::Free(off) => {
                            let obj = tx.alloc_bytes(&entry)?.offset();
                            let mut slot = [0u8; 16];
                            slot[..8].copy_from_slice(&h.to_le_bytes());
                            slot[8..].copy_from_slice(&obj.to_le_bytes());
                            tx.write_bytes(off, &slot)?;
                            self.t.add_len(tx, hd.len, 1)?;
                            break;
                        }
                        Probe::Full => {
                            self.t.split_logged(tx, idx)?;
                            let src = Src::Tx(tx);
                            (idx, seg, _, hd) = self.t.locate(&src, h)?;
                            found = probe::<BytesSlot>(&src, seg, h, |s| matches(&src, s))?;
                        }
                    }
                }
            }
            (Upsert::Remove, ..) => unreachable!("an old entry is only given when found"),
        }
        if entry.capacity() <= 1 << 20 {
            self.scratch = entry; // kept for the next call (not after a huge value)
        }
        Ok(op)
    }

    /// Remove inside the caller's transaction; true when the key was present.
    pub fn remove_tx(&mut self, tx: &mut Tx, key: &[u8]) -> Result<bool> {
        self.t.same_pool(tx)?;
        self.remove_in(tx, key)
    }

    fn remove_in(&self, tx: &mut Tx, key: &[u8]) -> Result<bool> {
        let src = Src::Tx(tx);
        let h = hash_bytes(self.t.seed, key);
        let (_, seg, _, hd) = self.t.locate(&src, h)?;
        let Some((off, obj)) = self.find(&src, key)? else {
            return Ok(false);
        };
        remove_slot::<BytesSlot>(tx, WriteMode::Logged, self.t.seed, seg, off)?;
        tx.free(PPtr::<u8>::from_offset(obj))?;
        self.t.add_len(tx, hd.len, -1)?;
        Ok(true)
    }

    /// Remove every entry (see [`super::PHashMap::clear`] for how it stays bounded per
    /// transaction and crash-safe).
    pub fn clear(&mut self) -> Result<()> {
        self.t.clear()
    }

    /// [`clear`](Self::clear), running `extra` inside the transaction that empties the map:
    /// the caller's bookkeeping (a counter next to the map, say) changes atomically with it.
    pub fn clear_with(&mut self, extra: impl FnOnce(&mut Tx) -> Result<()>) -> Result<()> {
        self.t.clear_with(extra)
    }

    /// Where `key`'s entry is in the committed map, without copying its value: read the
    /// value (or part of it) with [`read_value`](Self::read_value).
    pub fn entry(&self, key: &[u8]) -> Result<Option<EntryRef>> {
        self.entry_in(&Src::Pool(&self.t.pool.inner), key)
    }

    /// [`entry`](Self::entry) as transaction `tx` sees the map.
    pub fn entry_tx(&self, tx: &Tx, key: &[u8]) -> Result<Option<EntryRef>> {
        self.t.same_pool(tx)?;
        self.entry_in(&Src::Tx(tx), key)
    }

    fn entry_in(&self, src: &Src, key: &[u8]) -> Result<Option<EntryRef>> {
        let Some((_, obj)) = self.find(src, key)? else {
            return Ok(None);
        };
        let (kl, vl) = entry_lens(src, obj)?;
        Ok(Some(EntryRef {
            obj,
            key_len: kl as u32,
            value_len: vl as u32,
        }))
    }

    /// Copy `out.len()` bytes of the entry's value, starting at byte `from`, from the
    /// committed map.
    pub fn read_value(&self, e: &EntryRef, from: usize, out: &mut [u8]) -> Result<()> {
        read_value_in(&Src::Pool(&self.t.pool.inner), e, from, out)
    }

    /// [`read_value`](Self::read_value) as transaction `tx` sees the map.
    pub fn read_value_tx(&self, tx: &Tx, e: &EntryRef, from: usize, out: &mut [u8]) -> Result<()> {
        self.t.same_pool(tx)?;
        read_value_in(&Src::Tx(tx), e, from, out)
    }

    /// Cursor iteration over the committed map (the model of Redis's SCAN): returns the
    /// keys (with their entries) whose hash lies in `[cursor, next)`, about `count` of them,
    /// and `next`; start with cursor 0, stop when `next` is 0.
    ///
    /// A segment holds one contiguous range of hash values (its directory prefix), so the
    /// cursor is a hash value and the ranges of successive calls are disjoint and cover the
    /// whole hash space in order, however the table grows or shrinks in between. Hence the
    /// guarantee, stronger than Redis's: a key present for the whole iteration is returned
    /// exactly once, and no key is returned twice.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> Result<u64> {
        self.scan_in(&Src::Pool(&self.t.pool.inner), cursor, count, out)
    }

    /// [`scan`](Self::scan) as transaction `tx` sees the map.
    pub fn scan_tx(
        &self,
        tx: &Tx,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> Result<u64> {
        self.t.same_pool(tx)?;
        self.scan_in(&Src::Tx(tx), cursor, count, out)
    }

    fn scan_in(
        &self,
        src: &Src,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> Result<u64> {
        let (_, seg, ld, hd) = self.t.locate(src, cursor)?;
        // The segment's hash range: every hash with the same top `ld` bits as the cursor.
        let seg_start = if ld == 0 {
            0
        } else {
            (cursor >> (64 - ld)) << (64 - ld)
        };
        let seg_end = seg_start as u128 + (1u128 << (64 - ld));
        // A sub-range expected to hold about `count` entries (hashes are uniform).
        let step = ((count.max(1) as u128) << 64) / (hd.len.max(1) as u128);
        let end = (cursor as u128 + step.max(1)).min(seg_end);
        let mut img = vec![0u8; SEG_BYTES];
        src.read(seg, &mut img)?;
        for slot in img.chunks_exact(BytesSlot::SLOT) {
            if BytesSlot::is_empty(slot) {
                continue;
            }
            let h = BytesSlot::entry_hash(0, slot);
            if h < cursor || h as u128 >= end {
                continue;
            }
            let obj = slot_ptr(slot);
            out.push(read_entry_key(src, obj)?);
        }
        // `end` > cursor, so a next cursor is never 0 unless the hash space is done.
        Ok(if end >= 1u128 << 64 { 0 } else { end as u64 })
    }

    /// A key chosen at random from the map as `tx` sees it (with its entry); `None` when the
    /// map is empty. `rng` gives the caller's random words.
    ///
    /// While the table is reasonably full every key is equally likely: a directory word is
    /// drawn, its segment kept with probability 2^(local depth - global depth) (so each
    /// segment is equally likely, whatever its share of the directory), then one of the
    /// segment's buckets is drawn and kept with probability (its entries / its slots), and one
    /// of its entries taken (so each entry is equally likely; one cache line read per draw).
    /// After 8 failed draws a one-segment table (small, so sparse) picks among its entries
    /// directly (still uniform); a sparse table of many segments (emptied by removals) samples
    /// as Redis's `dictGetFairRandomKey` does: up to 8 entries gathered from a random bucket on,
    /// one of them taken (fair, though entries after wide gaps come up more often).
    pub fn random_entry_tx(
        &self,
        tx: &Tx,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Option<(Vec<u8>, EntryRef)>> {
        self.t.same_pool(tx)?;
        let src = Src::Tx(tx);
        match self.random_slot(&src, rng)? {
            Some((_, _, obj)) => read_entry_key(&src, obj).map(Some),
            None => Ok(None),
        }
    }

    /// Remove an entry chosen as [`random_entry_tx`](Self::random_entry_tx) chooses, inside
    /// the caller's transaction, and return its key and value (a set's SPOP: the pick and the
    /// removal share one probe).
    pub fn take_random_tx(
        &mut self,
        tx: &mut Tx,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.t.same_pool(tx)?;
        let (seg, slot, obj, len) = {
            let src = Src::Tx(tx);
            let Some((seg, slot, obj)) = self.random_slot(&src, rng)? else {
                return Ok(None);
            };
            (seg, slot, obj, src.header(self.t.hdr)?.len)
        };
        let kv = read_entry(&Src::Tx(tx), obj)?;
        remove_slot::<BytesSlot>(tx, WriteMode::Logged, self.t.seed, seg, slot)?;
        tx.free(PPtr::<u8>::from_offset(obj))?;
        self.t.add_len(tx, len, -1)?;
        Ok(Some(kv))
    }

    /// The (segment, slot offset, entry object) of a random pick (see
    /// [`random_entry_tx`](Self::random_entry_tx)).
    fn random_slot(
        &self,
        src: &Src,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Option<(u64, u64, u64)>> {
        /// Bucket draws before the fallback (each reads a directory word and one bucket).
        const DRAWS: usize = 8;
        /// Entries the fallback gathers before it picks one.
        const GATHER: usize = 8;
        const PER_BUCKET: u64 = BytesSlot::PER_BUCKET as u64;
        let (_, seg0, _, hd) = self.t.locate(src, 0)?;
        if hd.len == 0 {
            return Ok(None);
        }
        let g = hd.depth as u32;
        // A random segment (each equally likely, whatever its share of the directory).
        let draw_segment = |rng: &mut dyn FnMut() -> u64| -> Result<Option<u64>> {
            if g == 0 {
                return Ok(Some(seg0));
            }
            let idx = rng() >> (64 - g);
            let at = hd.dir + idx * 8;
            let (seg, ld) = decode_dir(src.read_u64(at)?, g, at)?;
            Ok((ld == g || below(rng, 1u64 << (g - ld)) == 0).then_some(seg))
        };
        // Draws go in batches: the batch's buckets are prefetched together, so their cache
        // misses overlap, then judged in order (the first kept wins: still exact rejection
        // sampling, since every draw is independent of the others).
        const BATCH: usize = 4;
        let map = &self.t.pool.inner.map;
        for _ in 0..DRAWS / BATCH {
            let mut cand = [(0u64, 0u64, 0u64, 0u64); BATCH];
            let mut n = 0;
            for _ in 0..BATCH {
                let Some(seg) = draw_segment(rng)? else {
                    continue;
                };
                let line = seg + below(rng, SEG_BUCKETS as u64) * BUCKET as u64;
                map.prefetch(line);
                cand[n] = (seg, line, below(rng, PER_BUCKET), rng());
                n += 1;
            }
            for &(seg, line, keep, pick) in &cand[..n] {
                // A bucket is kept with probability (its entries / its slots), then one of its
                // entries taken: each entry of the map equally likely.
                let bytes: [u8; BUCKET] = src.read_pod(line)?;
                let full = occupied(&bytes, line);
                if keep >= full.len() as u64 {
                    continue;
                }
                let (slot, obj) = full[((pick as u128 * full.len() as u128) >> 64) as usize];
                return Ok(Some((seg, slot, obj)));
            }
        }
        if g == 0 {
            // One sparse segment (a small table): pick among its entries, exactly uniform.
            let mut img = vec![0u8; SEG_BYTES];
            src.read(seg0, &mut img)?;
            let full = occupied(&img, seg0);
            if full.is_empty() {
                return Ok(None);
            }
            let (slot, obj) = full[below(rng, full.len() as u64) as usize];
            return Ok(Some((seg0, slot, obj)));
        }
        // A sparse table of many segments (emptied by removals): gather up to GATHER entries from a random
        // bucket on, in directory order (consecutive cache lines), and take one of them
        // uniformly, as Redis's dictGetFairRandomKey samples a few keys: fair, though entries
        // after wide gaps come up more often.
        // Read 16 buckets (1 KiB) at a time: one overlay lookup per read, sequential lines.
        const RUN: u64 = 16;
        let buckets = (1u64 << g) * SEG_BUCKETS as u64;
        let start = below(rng, buckets / RUN) * RUN;
        let mut found: Vec<(u64, u64, u64)> = Vec::with_capacity(GATHER + 4 * RUN as usize);
        let mut run = [0u8; BUCKET * RUN as usize];
        let mut pos = start;
        loop {
            let (idx, b) = (pos / SEG_BUCKETS as u64, pos % SEG_BUCKETS as u64);
            let at = hd.dir + idx * 8;
            let (seg, _) = decode_dir(src.read_u64(at)?, g, at)?;
            let at = seg + b * BUCKET as u64;
            src.read(at, &mut run)?;
            found.extend(
                occupied(&run, at)
                    .into_iter()
                    .map(|(slot, obj)| (seg, slot, obj)),
            );
            pos = (pos + RUN) % buckets;
            if found.len() >= GATHER || pos == start {
                break;
            }
        }
        if found.is_empty() {
            return Ok(None);
        }
        Ok(Some(found[below(rng, found.len() as u64) as usize]))
    }

    /// Rebuild the table at the size its entries need, inside the caller's transaction: entry
    /// slots move into new segments (entries are neither copied nor reallocated), the old
    /// segments and directory are freed. Tables never shrink by themselves: a program that
    /// removes most entries calls this (for example when [`BytesMapView::capacity`] passes ten
    /// times the length), so scans and random picks stop walking empty buckets. False when the
    /// table is no larger than its entries need, or has more than `max_segments` segments (the
    /// frees of their segments must fit one redo record: about 16 bytes each).
    pub fn shrink_tx(&mut self, tx: &mut Tx, max_segments: usize) -> Result<bool> {
        self.t.same_pool(tx)?;
        self.t.shrink(tx, max_segments)
    }

    /// Make room for `capacity` entries in all, inside the caller's transaction: when a
    /// segment is shallower than that many entries need, the table is rebuilt at that size
    /// (entry slots move into new segments; entries are neither copied nor reallocated), the
    /// old segments and directory freed. A crash leaves the old table or the new one, the same
    /// entries in both. True when it rebuilt the table.
    pub fn reserve_tx(&mut self, tx: &mut Tx, capacity: u64) -> Result<bool> {
        self.t.same_pool(tx)?;
        self.t.reserve(tx, capacity)
    }

    /// A key chosen uniformly at random (see [`random_entry_tx`](Self::random_entry_tx)).
    pub fn random_key_tx(&self, tx: &Tx, rng: &mut dyn FnMut() -> u64) -> Result<Option<Vec<u8>>> {
        Ok(self.random_entry_tx(tx, rng)?.map(|(k, _)| k))
    }

    /// A transaction-scoped view of the map at `id`: every operation runs in the caller's
    /// transaction `tx` (of `pool`) and sees its earlier writes, and the map may be one that
    /// `tx` itself created. Opening a view is cheap (the header is validated, nothing is
    /// counted or repaired), so a program that keeps many maps, one per record, opens a view
    /// where it needs one instead of keeping a handle per map.
    ///
    /// While the view lives the map is claimed, as by [`open`](Self::open): an exclusive
    /// handle cannot be opened on it, nor a second view (a view refuses a map that has a
    /// handle). A map whose `clear` a crash interrupted is usable through a view; opening
    /// it with [`open`](Self::open) finishes the clear.
    pub fn view(pool: &Pool, tx: &Tx, id: PPtr<PBytesMap>) -> Result<BytesMapView> {
        Ok(BytesMapView(
            PBytesMap {
                t: Table::view(pool, tx, id.offset(), WHAT)?,
                scratch: Vec::new(),
            },
            false,
        ))
    }

    /// Free the map at `id`, a bounded amount of work per call, inside the caller's
    /// transaction: true once the map is gone (its header included). Frees at most about
    /// `budget` objects per call and stops early when `tx`'s redo record runs low, so a map of
    /// any size is freed by repeating calls in successive transactions. Nothing may use the
    /// map any more (the caller has unlinked it; a map with a handle or a view is refused).
    /// `on_entry(tx, entry)` runs before each entry object is freed (values that own further
    /// objects queue them there; it may log a few hundred bytes).
    ///
    /// Crash safety: each call's changes commit with `tx`; the map's header records how far
    /// freeing got (docs/FORMAT.md, "Freeing a map"), so calls after a crash resume there.
    pub fn free_step(
        pool: &Pool,
        tx: &mut Tx,
        id: PPtr<PBytesMap>,
        budget: u32,
        mut on_entry: impl FnMut(&mut Tx, EntryRef) -> Result<()>,
    ) -> Result<bool> {
        let hdr = id.offset();
        if !std::ptr::eq(tx.pool_inner(), &*pool.inner) {
            return Err(Error::InvalidPointer {
                offset: hdr,
                why: "the transaction belongs to another pool than the map",
            });
        }
        let h = Src::Tx(tx).header(hdr)?;
        if h.magic != MAP_MAGIC || h.crc != h.immutable_crc() || h.kind != KIND_BYTES {
            return Err(Error::NotACollection {
                offset: hdr,
                what: WHAT,
                why: "no byte-string map header there".into(),
            });
        }
        if !pool.inner.claim_object(hdr) {
            return Err(Error::CollectionInUse {
                offset: hdr,
                what: WHAT,
            });
        }
        let mut budget = budget.max(1);
        let r = destroy_step::<BytesSlot>(tx, hdr, &mut budget, &mut |tx, obj| {
            let (kl, vl) = entry_lens(&Src::Tx(tx), obj)?;
            on_entry(
                tx,
                EntryRef {
                    obj,
                    key_len: kl as u32,
                    value_len: vl as u32,
                },
            )
        });
        pool.inner.release_object(hdr);
        r
    }

    /// Every (key, value), in no particular order, from the committed map.
    pub fn iter(&self) -> Result<impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        let pool = &self.t.pool.inner;
        let segs = self.t.segments(&Src::Pool(pool))?;
        Ok(segs.into_iter().flat_map(move |(_, seg, _)| {
            let src = Src::Pool(pool);
            let mut out = Vec::new();
            let mut img = vec![0u8; SEG_BYTES];
            if let Err(e) = src.read(seg, &mut img) {
                out.push(Err(e));
                return out;
            }
            for at in (0..SEG_BYTES).step_by(BytesSlot::SLOT) {
                let slot = &img[at..at + BytesSlot::SLOT];
                if BytesSlot::is_empty(slot) {
                    continue;
                }
                out.push(read_entry(&src, slot_ptr(slot)));
            }
            out
        }))
    }

    /// Verify the map's invariants (read-only).
    pub fn check(&self) -> MapCheck {
        check_bytes(&self.t.pool.inner, self.t.hdr)
    }
}

/// A transaction-scoped view of a [`PBytesMap`], from [`PBytesMap::view`]: the map's
/// operations that take the caller's transaction, and nothing that runs a transaction of its
/// own. Drop it before the map is freed.
#[derive(Debug)]
pub struct BytesMapView(PBytesMap, bool);

impl BytesMapView {
    /// The map's header pointer.
    pub fn id(&self) -> PPtr<PBytesMap> {
        self.0.id()
    }
    /// Number of entries as `tx` sees it.
    pub fn len(&self, tx: &Tx) -> Result<u64> {
        self.0.len_tx(tx)
    }
    /// Whether the map has no entry, as `tx` sees it.
    pub fn is_empty(&self, tx: &Tx) -> Result<bool> {
        Ok(self.0.len_tx(tx)? == 0)
    }
    /// The value of `key` (see [`PBytesMap::get_tx`]).
    pub fn get(&self, tx: &Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.get_tx(tx, key)
    }
    /// Where `key`'s entry is (see [`PBytesMap::entry_tx`]).
    pub fn entry(&self, tx: &Tx, key: &[u8]) -> Result<Option<EntryRef>> {
        self.0.entry_tx(tx, key)
    }
    /// Insert or replace; true when a value was replaced.
    pub fn insert(&mut self, tx: &mut Tx, key: &[u8], value: &[u8]) -> Result<bool> {
        self.0.insert_tx(tx, key, value)
    }
    /// Insert or replace with the value `parts` concatenated.
    pub fn insert_parts(&mut self, tx: &mut Tx, key: &[u8], parts: &[&[u8]]) -> Result<bool> {
        self.0.insert_parts_tx(tx, key, parts)
    }
    /// Read, then insert, replace, remove or keep `key` in one probe (see
    /// [`PBytesMap::upsert_tx`]).
    pub fn upsert(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        decide: impl FnOnce(&Tx, Option<EntryRef>, &mut Vec<u8>) -> Result<Upsert>,
    ) -> Result<Upsert> {
        let r = self.0.upsert_tx(tx, key, decide)?;
        self.1 |= r == Upsert::Remove;
        Ok(r)
    }
    /// Remove; true when the key was present.
    pub fn remove(&mut self, tx: &mut Tx, key: &[u8]) -> Result<bool> {
        let r = self.0.remove_tx(tx, key)?;
        self.1 |= r;
        Ok(r)
    }
    /// Whether an entry may have been removed through this view: only then can the map have
    /// become empty or sparse (a caller deciding whether to delete or shrink it skips the
    /// header reads after inserts alone).
    pub fn removed_any(&self) -> bool {
        self.1
    }
    /// Copy part of an entry's value (see [`PBytesMap::read_value_tx`]).
    pub fn read_value(&self, tx: &Tx, e: &EntryRef, from: usize, out: &mut [u8]) -> Result<()> {
        self.0.read_value_tx(tx, e, from, out)
    }
    /// One cursor step (see [`PBytesMap::scan`]).
    pub fn scan(
        &self,
        tx: &Tx,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> Result<u64> {
        self.0.scan_tx(tx, cursor, count, out)
    }
    /// Slots the table's directory can address (2^depth segments of 1024 slots): an upper
    /// bound of its size, to tell a table emptied by removals (a caller may then rebuild it
    /// smaller: the table itself never shrinks).
    pub fn capacity(&self, tx: &Tx) -> Result<u64> {
        self.0.capacity_tx(tx)
    }
    /// Rebuild the table at the size its entries need, in the caller's transaction (see
    /// [`PBytesMap::shrink_tx`]).
    pub fn shrink(&mut self, tx: &mut Tx, max_segments: usize) -> Result<bool> {
        self.0.shrink_tx(tx, max_segments)
    }
    /// Remove a random entry and return it (see [`PBytesMap::take_random_tx`]).
    pub fn take_random(
        &mut self,
        tx: &mut Tx,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let r = self.0.take_random_tx(tx, rng)?;
        self.1 |= r.is_some();
        Ok(r)
    }
    /// A key chosen uniformly at random, with its entry (see
    /// [`PBytesMap::random_entry_tx`]).
    pub fn random_entry(
        &self,
        tx: &Tx,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Option<(Vec<u8>, EntryRef)>> {
        self.0.random_entry_tx(tx, rng)
    }
}

/// What [`PBytesMap::upsert_tx`]'s decision did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upsert {
    /// Leave the map as it is.
    Keep,
    /// Store the new value (insert, or replace the old entry).
    Put,
    /// Remove the old entry (nothing when there is none).
    Remove,
}

/// Where an entry of a [`PBytesMap`] lives, from [`PBytesMap::entry`] or a scan. It stays
/// valid until that key is next changed (a stale one reads whatever the block then holds,
/// always inside the pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef {
    obj: u64,
    key_len: u32,
    value_len: u32,
}

impl EntryRef {
    /// Copy `out.len()` bytes of the value from byte `from`, as transaction `tx` sees the
    /// pool (the map's `read_value_tx` without the map at hand).
    pub fn read_tx(&self, tx: &Tx, from: usize, out: &mut [u8]) -> Result<()> {
        read_value_in(&Src::Tx(tx), self, from, out)
    }

    /// Overwrite `data.len()` bytes of the value from byte `from`, through transaction `tx`'s
    /// redo log (the value's length stays). For an edit of a few bytes of a large value
    /// (a register of a HyperLogLog, a bit of a bitmap), which a replacement would compare
    /// whole. Crash safety: the bytes are logged, so after a crash the value holds its old
    /// bytes or the new ones as the transaction committed or not; the entry must be live in
    /// `tx` (not removed or replaced earlier in it).
    pub fn write_tx(&self, tx: &mut Tx, from: usize, data: &[u8]) -> Result<()> {
        if from
            .checked_add(data.len())
            .is_none_or(|end| end > self.value_len as usize)
        {
            return Err(Error::Unsupported(format!(
                "write of {} bytes at {from} past the end of a {}-byte value",
                data.len(),
                self.value_len
            )));
        }
        tx.write_bytes(obj_value(self) + from as u64, data)
    }

    /// Length of the entry's key in bytes.
    pub fn key_len(&self) -> usize {
        self.key_len as usize
    }

    /// Length of the entry's value in bytes.
    pub fn value_len(&self) -> usize {
        self.value_len as usize
    }
}

/// Replace the value of the entry `o` by `new` where it lies, through the redo log, when its
/// block has room and little changes: only the byte runs that differ from the old value, the
/// bytes past its end, and the length are written (an append to a packed collection logs the
/// appended bytes and its count; an equal-length small value is rewritten whole). True when
/// done; false leaves the entry as it was (the caller writes a new entry instead).
///
/// Crash safety: every write is logged in the caller's transaction, so the entry holds the old
/// value or the new one after a crash, never a mix; readers within the transaction see the new
/// bytes through its read-your-writes overlay.
fn rewrite_in_place(tx: &mut Tx, o: EntryRef, new: &[u8]) -> Result<bool> {
    let (old_len, vlen) = (o.value_len as usize, new.len());
    if old_len == vlen && vlen <= REPLACE_IN_PLACE_MAX {
        tx.write_bytes(obj_value(&o), new)?;
        return Ok(true);
    }
    if vlen > DIFF_IN_PLACE_MAX {
        return Ok(false);
    }
    let room = tx.usable_size(PPtr::<u8>::from_offset(o.obj))?;
    if 8 + o.key_len as u64 + vlen as u64 > room {
        return Ok(false);
    }
    let common = old_len.min(vlen);
    let mut before = vec![0u8; common];
    read_value_in(&Src::Tx(tx), &o, 0, &mut before)?;
    // Runs of differing bytes, merged across gaps of less than 16 equal bytes (one log entry
    // costs about that much). Equal 64-byte blocks are skipped whole (a vectorized compare):
    // most of a record edited by one command is unchanged.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < common {
        if i % 64 == 0 && i + 64 <= common && before[i..i + 64] == new[i..i + 64] {
            i += 64;
            continue;
        }
        if before[i] == new[i] {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut same = 0;
        i += 1;
        while i < common && same < 16 {
            if before[i] == new[i] {
                same += 1;
            } else {
                same = 0;
                end = i + 1;
            }
            i += 1;
        }
        runs.push((start, end));
    }
    if vlen > common {
        match runs.last_mut() {
            Some(r) if common - r.1 < 16 => r.1 = vlen,
            _ => runs.push((common, vlen)),
        }
    }
    let logged: usize = runs.iter().map(|r| r.1 - r.0).sum();
    // Little changed: worth logging. Much changed: a new entry (written once, unlogged) is
    // cheaper than logging the bytes and writing them again.
    if logged * 2 > vlen.max(64) {
        return Ok(false);
    }
    for (a, b) in runs {
        tx.write_bytes(obj_value(&o) + a as u64, &new[a..b])?;
    }
    if vlen != old_len {
        tx.write_bytes(o.obj + 4, &(vlen as u32).to_le_bytes())?;
    }
    Ok(true)
}

fn read_value_in(src: &Src, e: &EntryRef, from: usize, out: &mut [u8]) -> Result<()> {
    if from
        .checked_add(out.len())
        .is_none_or(|end| end > e.value_len as usize)
    {
        return Err(Error::Unsupported(format!(
            "read of {} bytes at {from} past the end of a {}-byte value",
            out.len(),
            e.value_len
        )));
    }
    src.read(obj_value(e) + from as u64, out)
}

#[inline(always)]
fn obj_value(e: &EntryRef) -> u64 {
    e.obj + 8 + e.key_len as u64
}

fn read_entry_key(src: &Src, obj: u64) -> Result<(Vec<u8>, EntryRef)> {
    let (kl, vl) = entry_lens(src, obj)?;
    let mut k = vec![0u8; kl];
    src.read(obj + 8, &mut k)?;
    let e = EntryRef {
        obj,
        key_len: kl as u32,
        value_len: vl as u32,
    };
    Ok((k, e))
}

pub(crate) fn read_entry(src: &Src, obj: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let (kl, vl) = entry_lens(src, obj)?;
    let mut k = vec![0u8; kl];
    let mut v = vec![0u8; vl];
    src.read(obj + 8, &mut k)?;
    src.read(obj + 8 + kl as u64, &mut v)?;
    Ok((k, v))
}

/// Check the byte-string map at `hdr`.
pub(crate) fn check_bytes(pool: &crate::shared::PoolInner, hdr: u64) -> MapCheck {
    check_table(pool, hdr, WHAT, SlotDesc::of::<BytesSlot>(), |s| {
        let obj = slot_ptr(s);
        let src = Src::Pool(pool);
        let size = pool
            .allocated_object(obj)
            .map_err(|why| format!("entry object {obj:#x} is not an allocated object: {why}"))?;
        let (kl, vl) = entry_lens(&src, obj).map_err(|e| e.to_string())?;
        if 8 + kl as u64 + vl as u64 > size {
            return Err(format!(
                "entry object {obj:#x}: lengths {kl}+{vl} exceed its {size}-byte block"
            ));
        }
        let mut k = vec![0u8; kl];
        src.read(obj + 8, &mut k).map_err(|e| e.to_string())?;
        Ok((k, Some(obj)))
    })
}
