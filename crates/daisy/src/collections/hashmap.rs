//! [`PHashMap`]: a persistent hash map of fixed-size plain-old-data keys and values, stored
//! inline in the table's slots (see `table.rs` for the format and the crash reasoning).

use super::table::*;
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::ptr::PPtr;
use crate::tx::{thread_in_tx, Tx};
use bytemuck::Pod;
use std::marker::PhantomData;

/// Slot layout of a fixed map: the key's bytes then the value's. A slot whose key bytes are
/// all 0xFF is empty; the all-ones key itself is kept in the map header.
pub struct Fixed<K, V>(PhantomData<fn() -> (K, V)>);

impl<K: Pod, V: Pod> SlotKind for Fixed<K, V> {
    const KIND: u32 = KIND_FIXED;
    const SLOT: usize = std::mem::size_of::<K>() + std::mem::size_of::<V>();
    const EMPTY_FILL: u8 = 0xFF;
    fn key_size() -> u32 {
        std::mem::size_of::<K>() as u32
    }
    fn val_size() -> u32 {
        std::mem::size_of::<V>() as u32
    }
    #[inline(always)]
    fn is_empty(slot: &[u8]) -> bool {
        is_reserved(&slot[..std::mem::size_of::<K>()])
    }
    #[inline(always)]
    fn entry_hash(seed: u64, slot: &[u8]) -> u64 {
        hash_bytes(seed, &slot[..std::mem::size_of::<K>()])
    }
}

/// Is this the reserved all-ones key (the empty-slot marker)?
#[inline(always)]
fn is_reserved(k: &[u8]) -> bool {
    match k.len() {
        4 => u32::from_ne_bytes(k.try_into().unwrap()) == u32::MAX,
        8 => u64::from_ne_bytes(k.try_into().unwrap()) == u64::MAX,
        _ => k.iter().all(|&b| b == 0xFF),
    }
}

/// Whether two keys' bytes are equal (word compares for the usual sizes).
#[inline(always)]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    match a.len() {
        4 => u32::from_ne_bytes(a.try_into().unwrap()) == u32::from_ne_bytes(b.try_into().unwrap()),
        8 => u64::from_ne_bytes(a.try_into().unwrap()) == u64::from_ne_bytes(b.try_into().unwrap()),
        _ => a == b,
    }
}

/// Probe the window of `h` in segment `seg` for key `kb`, the bucket lines read by `line_at`:
/// the fixed maps' [`probe`], which finds the key and the free slots of a bucket in one
/// branch-free pass over its slots (bit masks) instead of slot by slot.
#[inline(always)]
fn probe_key<K: Pod, V: Pod>(
    seg: u64,
    h: u64,
    kb: &[u8],
    mut line_at: impl FnMut(u64) -> Result<[u8; BUCKET]>,
) -> Result<Probe> {
    let slot = Fixed::<K, V>::SLOT;
    let home = home_bucket(h);
    for p in 0..PROBE {
        let boff = seg + (((home + p) & (SEG_BUCKETS - 1)) * BUCKET) as u64;
        let line = line_at(boff)?;
        let (mut found, mut free) = (0u32, 0u32);
        for s in 0..Fixed::<K, V>::PER_BUCKET {
            let key = &line[s * slot..s * slot + kb.len()];
            found |= (same_key(key, kb) as u32) << s;
            free |= (is_reserved(key) as u32) << s;
        }
        if found != 0 {
            return Ok(Probe::Found(
                boff + (found.trailing_zeros() as usize * slot) as u64,
            ));
        }
        if free != 0 {
            return Ok(Probe::Free(
                boff + (free.trailing_zeros() as usize * slot) as u64,
            ));
        }
    }
    Ok(Probe::Full)
}

/// [`probe_key`] reading from `src`.
#[inline(always)]
fn probe_in<K: Pod, V: Pod>(src: &Src, seg: u64, h: u64, kb: &[u8]) -> Result<Probe> {
    probe_key::<K, V>(seg, h, kb, |boff| src.read_pod(boff))
}

/// A persistent hash map from `K` to `V`, both plain old data (bytemuck `Pod`), stored inline.
///
/// Keys compare and hash by their bytes. A handle is exclusive (opening the same map twice
/// fails with [`Error::CollectionInUse`]); share one between threads behind a `Mutex` or
/// `RwLock` (writes take `&mut self`, reads `&self`).
///
/// Durability, three ways (docs/FORMAT.md, "Hash maps"):
/// * [`insert`](Self::insert), [`remove`](Self::remove), [`clear`](Self::clear): each is its
///   own transaction, durable when it returns. With 8-byte entries (`u32` to `u32`), an
///   operation that changes one slot is instead a single atomic in-place store, one flush and
///   one fence (no log record); after a crash, the first [`len`](Self::len) then counts the
///   entries once;
/// * [`insert_tx`](Self::insert_tx) and friends: part of the caller's transaction, all or
///   nothing with everything else in it. When one of them returns an error, the transaction
///   may hold part of that operation: end the transaction with the error (the usual `?`), do
///   not commit it;
/// * [`batch`](Self::batch): many operations with one durability point at the end (bulk
///   loading); after a crash the map holds a prefix of the batch's operations.
///
/// ```no_run
/// use daisy::{Pool, PoolOptions, PPtr, PHashMap};
/// # fn main() -> daisy::Result<()> {
/// let pool = Pool::create("/dev/shm/map-example.pool", &PoolOptions::new("example"))?;
/// let root = pool.root::<PPtr<PHashMap<u32, u32>>>()?;
/// let id = pool.transaction(|tx| {
///     let id = PHashMap::<u32, u32>::create_in(tx)?;
///     tx.write(root, &id)?;
///     Ok::<_, daisy::Error>(id)
/// })?;
/// let mut map = PHashMap::open(&pool, id)?;
/// map.insert(7, 49)?; // durable when it returns
/// assert_eq!(map.get(&7)?, Some(49));
/// # Ok(()) }
/// ```
pub struct PHashMap<K: Pod, V: Pod> {
    t: Table<Fixed<K, V>>,
}

const WHAT: &str = "fixed-size hash map";

impl<K: Pod, V: Pod> std::fmt::Debug for PHashMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PHashMap@{:#x}", self.t.hdr)
    }
}

fn check_types<K, V>() -> Result<()> {
    let (k, v) = (std::mem::size_of::<K>(), std::mem::size_of::<V>());
    if k == 0 || k + v > BUCKET {
        return Err(Error::Unsupported(format!(
            "PHashMap needs a key of at least 1 byte and key + value of at most {BUCKET} bytes \
             (got {k} + {v}); use PBytesMap for larger entries"
        )));
    }
    Ok(())
}

pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}

impl<K: Pod, V: Pod> PHashMap<K, V> {
    /// Create an empty map inside `tx` with a random hash seed. Store the returned pointer
    /// somewhere reachable (e.g. the root) in the same transaction.
    pub fn create_in(tx: &mut Tx) -> Result<PPtr<PHashMap<K, V>>> {
        Self::create_in_with_seed(tx, random_seed())
    }

    /// Create with a chosen hash seed (deterministic layouts for tests and benchmarks).
    pub fn create_in_with_seed(tx: &mut Tx, seed: u64) -> Result<PPtr<PHashMap<K, V>>> {
        check_types::<K, V>()?;
        Ok(PPtr::from_offset(Table::<Fixed<K, V>>::create_in(
            tx, seed,
        )?))
    }

    /// Create an empty map inside `tx` (random hash seed) with room for `capacity` entries:
    /// its directory and segments are allocated now, sized so that the entries fill at most
    /// half of the slots (the same bytes as an open-addressing table of `2 * capacity` slots
    /// rounded up to a power of two), so inserting them splits no segment (or a rare few).
    /// A [`batch`](Self::batch) into the empty map then stores into those segments in place:
    /// no copy-on-write (see `batch`). The table never shrinks below this by itself.
    pub fn create_in_with_capacity(tx: &mut Tx, capacity: u64) -> Result<PPtr<PHashMap<K, V>>> {
        Self::create_in_with_seed_and_capacity(tx, random_seed(), capacity)
    }

    /// [`create_in_with_capacity`](Self::create_in_with_capacity) with a chosen hash seed.
    pub fn create_in_with_seed_and_capacity(
        tx: &mut Tx,
        seed: u64,
        capacity: u64,
    ) -> Result<PPtr<PHashMap<K, V>>> {
        check_types::<K, V>()?;
        Ok(PPtr::from_offset(
            Table::<Fixed<K, V>>::create_in_with_capacity(tx, seed, capacity)?,
        ))
    }

    /// Make room for `capacity` entries in all (as
    /// [`create_in_with_capacity`](Self::create_in_with_capacity) sizes a table): when a
    /// segment is shallower than that, the whole table is rebuilt at that size, every entry
    /// moved into new segments, in one transaction (durable when it returns; a crash leaves the
    /// old table or the new one, the same entries in both). True when it rebuilt the table.
    pub fn reserve(&mut self, capacity: u64) -> Result<bool> {
        let this = &*self;
        this.t.note_tx();
        this.t.pool.transaction(|tx| {
            if Self::IN_PLACE {
                tx.durable_apply();
            }
            this.t.reserve(tx, capacity)
        })
    }

    /// [`reserve`](Self::reserve) inside the caller's transaction.
    pub fn reserve_tx(&mut self, tx: &mut Tx, capacity: u64) -> Result<bool> {
        self.t.same_pool(tx)?;
        self.t.reserve(tx, capacity)
    }

    /// Open the map at `id`. Finishes a `clear` that a crash interrupted.
    pub fn open(pool: &Pool, id: PPtr<PHashMap<K, V>>) -> Result<PHashMap<K, V>> {
        check_types::<K, V>()?;
        let t = Table::open(pool, id.offset(), WHAT)?;
        t.finish_interrupted_clear()?;
        Ok(PHashMap { t })
    }

    /// The map's persistent pointer.
    pub fn id(&self) -> PPtr<PHashMap<K, V>> {
        PPtr::from_offset(self.t.hdr)
    }

    /// Number of entries (committed). O(1), except the first call after a crash that
    /// interrupted in-place writes, which counts the entries (reads every segment once).
    pub fn len(&self) -> Result<u64> {
        self.t.len()
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Entries of exactly 8 bytes (`u32` to `u32`, the benchmark's map) are written in place
    /// by one atomic store when an operation changes a single slot (table.rs, "In-place slot
    /// writes"); everything else goes through a transaction, and so does every operation made
    /// while the calling thread holds an open transaction (which may have written this map
    /// and not committed yet).
    const IN_PLACE: bool = Fixed::<K, V>::SLOT == 8;

    /// Insert or replace; returns the previous value. Durable when it returns.
    pub fn insert(&mut self, k: K, v: V) -> Result<Option<V>> {
        let h = hash_bytes(self.t.seed, bytemuck::bytes_of(&k));
        if Self::IN_PLACE && !is_reserved(bytemuck::bytes_of(&k)) && !thread_in_tx() {
            if let Some(old) = self.insert_in_place(&k, &v, h)? {
                return Ok(old);
            }
        }
        let this = &*self;
        this.t.note_tx();
        this.t.pool.transaction(|tx| {
            if Self::IN_PLACE {
                tx.durable_apply();
            }
            this.insert_hashed(tx, k, v, h)
        })
    }

    /// Insert with one in-place slot store: the key's slot, or the first free slot of its
    /// window. `None` when the window is full (a split is due: the transaction does it).
    #[inline(always)]
    fn insert_in_place(&self, k: &K, v: &V, h: u64) -> Result<Option<Option<V>>> {
        self.t.in_place_ready()?;
        let kb = bytemuck::bytes_of(k);
        let src = Src::Pool(&self.t.pool.inner);
        let (_, seg, _, _) = self.t.locate(&src, h)?;
        let (off, old, delta) = match probe_in::<K, V>(&src, seg, h, kb)? {
            Probe::Found(off) => (off, Some(read_val::<V>(&src, off + kb.len() as u64)?), 0),
            Probe::Free(off) => (off, None, 1),
            Probe::Full => return Ok(None),
        };
        let mut w = [0u8; 8];
        w[..kb.len()].copy_from_slice(kb);
        w[kb.len()..].copy_from_slice(bytemuck::bytes_of(v));
        self.t.store_slot(off, u64::from_ne_bytes(w), delta)?;
        Ok(Some(old))
    }

    /// Remove; returns the value. Durable when it returns.
    pub fn remove(&mut self, k: &K) -> Result<Option<V>> {
        if Self::IN_PLACE && !is_reserved(bytemuck::bytes_of(k)) && !thread_in_tx() {
            if let Some(old) = self.remove_in_place(k)? {
                return Ok(old);
            }
        }
        let this = &*self;
        this.t.note_tx();
        this.t.pool.transaction(|tx| {
            if Self::IN_PLACE {
                tx.durable_apply();
            }
            this.remove_in(tx, k)
        })
    }

    /// Remove with one in-place store of an empty slot, when the key's bucket has another
    /// empty slot: then no entry lives past it on the key's account (probe invariant) and
    /// nothing has to move back. `None` when the bucket is full (the transaction moves
    /// entries back).
    fn remove_in_place(&self, k: &K) -> Result<Option<Option<V>>> {
        let kb = bytemuck::bytes_of(k);
        let h = hash_bytes(self.t.seed, kb);
        let src = Src::Pool(&self.t.pool.inner);
        let (_, seg, _, _) = self.t.locate(&src, h)?;
        let Probe::Found(off) = probe_in::<K, V>(&src, seg, h, kb)? else {
            return Ok(Some(None));
        };
        let bucket = seg + ((off - seg) & !(BUCKET as u64 - 1));
        let line: [u8; BUCKET] = src.read_pod(bucket)?;
        if !line
            .chunks_exact(Fixed::<K, V>::SLOT)
            .any(Fixed::<K, V>::is_empty)
        {
            return Ok(None);
        }
        let old = read_val::<V>(&src, off + kb.len() as u64)?;
        self.t.in_place_ready()?;
        self.t.store_slot(off, u64::MAX, -1)?;
        Ok(Some(Some(old)))
    }

    /// Look up a committed value.
    pub fn get(&self, k: &K) -> Result<Option<V>> {
        self.get_in(&Src::Pool(&self.t.pool.inner), k)
    }

    /// Whether `k` has an entry.
    pub fn contains_key(&self, k: &K) -> Result<bool> {
        Ok(self.get(k)?.is_some())
    }

    /// Look up a value as transaction `tx` sees it.
    pub fn get_tx(&self, tx: &Tx, k: &K) -> Result<Option<V>> {
        self.t.same_pool(tx)?;
        self.get_in(&Src::Tx(tx), k)
    }

    #[inline(always)]
    fn get_in(&self, src: &Src, k: &K) -> Result<Option<V>> {
        let kb = bytemuck::bytes_of(k);
        if is_reserved(kb) {
            return self.special_get(src);
        }
        let h = hash_bytes(self.t.seed, kb);
        let (_, seg, _, _) = self.t.locate(src, h)?;
        match probe_in::<K, V>(src, seg, h, kb)? {
            Probe::Found(off) => Ok(Some(read_val::<V>(src, off + kb.len() as u64)?)),
            _ => Ok(None),
        }
    }

    fn special_get(&self, src: &Src) -> Result<Option<V>> {
        special_read(src, self.t.hdr)
    }

    /// Insert or replace inside the caller's transaction.
    #[inline]
    pub fn insert_tx(&mut self, tx: &mut Tx, k: K, v: V) -> Result<Option<V>> {
        self.t.same_pool(tx)?;
        self.t.note_tx();
        self.insert_in(tx, k, v)
    }

    /// (`&self`: the handle's exclusivity is the public methods' `&mut self`.)
    #[inline(always)]
    fn insert_in(&self, tx: &mut Tx, k: K, v: V) -> Result<Option<V>> {
        let h = hash_bytes(self.t.seed, bytemuck::bytes_of(&k));
        self.insert_hashed(tx, k, v, h)
    }

    #[inline(always)]
    fn insert_hashed(&self, tx: &mut Tx, k: K, v: V, h: u64) -> Result<Option<V>> {
        let kb = bytemuck::bytes_of(&k);
        let vb = bytemuck::bytes_of(&v);
        if is_reserved(kb) {
            let old = special_write::<V>(tx, self.t.hdr, Some(vb))?;
            if old.is_none() {
                let hd = Src::Tx(tx).header(self.t.hdr)?;
                self.t.add_len(tx, hd.len, 1)?;
            }
            return Ok(old);
        }

        loop {
            let src = Src::Tx(tx);
            let (idx, seg, _, hd) = self.t.locate(&src, h)?;
            match probe_in::<K, V>(&src, seg, h, kb)? {
                Probe::Found(off) => {
                    let vo = off + kb.len() as u64;
                    let old = read_val::<V>(&src, vo)?;
                    tx.write_bytes(vo, vb)?;
                    return Ok(Some(old));
                }
                Probe::Free(off) => {
                    let mut slot = [0u8; BUCKET];
                    slot[..kb.len()].copy_from_slice(kb);
                    slot[kb.len()..kb.len() + vb.len()].copy_from_slice(vb);
                    tx.write_bytes(off, &slot[..kb.len() + vb.len()])?;
                    self.t.add_len(tx, hd.len, 1)?;
                    return Ok(None);
                }
                Probe::Full => self.t.split_logged(tx, idx)?,
            }
        }
    }

    /// Remove inside the caller's transaction.
    pub fn remove_tx(&mut self, tx: &mut Tx, k: &K) -> Result<Option<V>> {
        self.t.same_pool(tx)?;
        self.t.note_tx();
        self.remove_in(tx, k)
    }

    fn remove_in(&self, tx: &mut Tx, k: &K) -> Result<Option<V>> {
        let kb = bytemuck::bytes_of(k);
        if is_reserved(kb) {
            let old = special_write::<V>(tx, self.t.hdr, None)?;
            if old.is_some() {
                let hd = Src::Tx(tx).header(self.t.hdr)?;
                self.t.add_len(tx, hd.len, -1)?;
            }
            return Ok(old);
        }
        let h = hash_bytes(self.t.seed, kb);
        let src = Src::Tx(tx);
        let (_, seg, _, hd) = self.t.locate(&src, h)?;
        match probe_in::<K, V>(&src, seg, h, kb)? {
            Probe::Found(off) => {
                let old = read_val::<V>(&src, off + kb.len() as u64)?;
                remove_slot::<Fixed<K, V>>(tx, WriteMode::Logged, self.t.seed, seg, off)?;
                self.t.add_len(tx, hd.len, -1)?;
                Ok(Some(old))
            }
            _ => Ok(None),
        }
    }

    /// Remove every entry. The new empty table is installed in one transaction; the old
    /// segments are then freed a bounded number per transaction (a crash in between is
    /// finished by the next `open` or `clear`).
    pub fn clear(&mut self) -> Result<()> {
        self.t.clear()
    }

    /// Every entry, in no particular order (a snapshot of the committed map, read segment by
    /// segment).
    pub fn iter(&self) -> Result<impl Iterator<Item = Result<(K, V)>> + '_> {
        let src = Src::Pool(&self.t.pool.inner);
        let segs = self.t.segments(&src)?;
        let special = self.special_get(&src)?;
        let ks = std::mem::size_of::<K>();
        let slot = Fixed::<K, V>::SLOT;
        let per = Fixed::<K, V>::PER_BUCKET;
        let pool = &self.t.pool.inner;
        let first: Option<Result<(K, V)>> =
            special.map(|v| Ok((bytemuck::pod_read_unaligned(&vec![0xFFu8; ks]), v)));
        let rest = segs.into_iter().flat_map(move |(_, seg, _)| {
            let mut img = vec![0u8; SEG_BYTES];
            let mut out: Vec<Result<(K, V)>> = Vec::new();
            if let Err(e) = Src::Pool(pool).read(seg, &mut img) {
                out.push(Err(e));
                return out;
            }
            for b in 0..SEG_BUCKETS {
                for s in 0..per {
                    let at = b * BUCKET + s * slot;
                    let sl = &img[at..at + slot];
                    if !Fixed::<K, V>::is_empty(sl) {
                        out.push(Ok((
                            bytemuck::pod_read_unaligned(&sl[..ks]),
                            bytemuck::pod_read_unaligned(&sl[ks..]),
                        )));
                    }
                }
            }
            out
        });
        Ok(first.into_iter().chain(rest))
    }

    /// Verify the map's invariants (read-only; `daisy pool check` runs this on every map).
    pub fn check(&self) -> MapCheck {
        check_fixed(
            &self.t.pool.inner,
            self.t.hdr,
            std::mem::size_of::<K>(),
            std::mem::size_of::<V>(),
        )
    }

    /// Run many operations with one durability point at the end: the bulk-loading mode.
    ///
    /// Guarantee: when `batch` returns `Ok`, every operation is durable. The operations are
    /// applied as a sequence of transactions (a new one starts when the redo log fills, or at
    /// [`Batch::sync`]); after a crash, or when `f` returns an error, the map holds exactly the
    /// operations before some point of the batch (a prefix, in order: never a torn operation),
    /// and at least those before the last completed `sync`.
    ///
    /// Cost: the first write to a segment within a transaction copies it (16 KiB) into a new
    /// object; later writes to it are plain stores, flushed once at commit. Large batches thus
    /// cost a few nanoseconds over DRAM per operation; for a handful of operations, use
    /// [`insert_tx`](Self::insert_tx) in one transaction instead.
    ///
    /// Bulk loading an empty map: when the map holds no entry as the batch begins, its
    /// segments are not copied but filled in place. The batch first marks the map as being
    /// filled, durably (one fence, after retiring every committed transaction); at its commit
    /// the segments it wrote are flushed before the record that ends the filling. A crash
    /// before that commit leaves the mark, and the next [`open`](Self::open) empties the
    /// segments again (a pass over the table): the map is then empty, the prefix of the batch
    /// that committed (none). With a table sized beforehand
    /// ([`create_in_with_capacity`](Self::create_in_with_capacity), [`reserve`](Self::reserve))
    /// or in the batch ([`Batch::reserve`]), a bulk load of N entries then costs N plain
    /// stores, one flush of the written segments and two fences, with no copy and no split.
    /// Only the batch's first transaction fills: after a commit inside it (a full log, a
    /// [`Batch::sync`]) the map holds entries, and segments are copied on their next write.
    ///
    /// Log size matters: every segment a batch creates or copies adds allocator entries to the
    /// redo record, and when the record fills the batch commits and starts over, copying each
    /// segment again on its next write. With the default 16 KiB log slots that happens every
    /// few thousand segments (maps beyond a few million entries); a pool meant for bulk loads
    /// of large maps should be created with larger slots (`PoolOptions::log_slot_size`: 1 MiB
    /// holds a batch that builds a 10-million-entry map).
    pub fn batch<R>(&mut self, f: impl FnOnce(&mut Batch<'_, K, V>) -> Result<R>) -> Result<R> {
        let len_delta = self.t.len_delta()?;
        let core = BatchCore::begin(&self.t, len_delta)?;
        let mut b = Batch {
            core,
            len_delta,
            hdr: self.t.hdr,
            seed: self.t.seed,
            queue: [(K::zeroed(), V::zeroed(), 0); PUT_QUEUE],
            q_head: 0,
            q_len: 0,
            _t: PhantomData,
        };
        let r = f(&mut b)?;
        b.apply_queued()?;
        b.ensure_open()?;
        b.core.commit(b.hdr, false)?;
        Ok(r)
    }
}

/// The value of the reserved all-ones key (kept in the header, since all-ones key bytes mark
/// an empty slot), as `src` sees it.
fn special_read<V: Pod>(src: &Src, hdr: u64) -> Result<Option<V>> {
    if src.header(hdr)?.special == 0 {
        return Ok(None);
    }
    Ok(Some(read_val::<V>(src, hdr + H_SPECIAL_VAL)?))
}

/// Set (`Some`) or clear (`None`) the reserved key's entry; returns the old value. Logged:
/// the header is never a fresh object. The caller adjusts the length (+1 when an insert added
/// the key, -1 when a remove took it).
fn special_write<V: Pod>(tx: &mut Tx, hdr: u64, v: Option<&[u8]>) -> Result<Option<V>> {
    let old = special_read::<V>(&Src::Tx(tx), hdr)?;
    match v {
        Some(vb) => {
            tx.write_bytes(hdr + H_SPECIAL_VAL, vb)?;
            if old.is_none() {
                tx.write_bytes(hdr + H_SPECIAL, &1u64.to_le_bytes())?;
            }
        }
        None if old.is_some() => tx.write_bytes(hdr + H_SPECIAL, &0u64.to_le_bytes())?,
        None => {}
    }
    Ok(old)
}

#[inline(always)]
fn read_val<V: Pod>(src: &Src, off: u64) -> Result<V> {
    let mut v = V::zeroed();
    src.read(off, bytemuck::bytes_of_mut(&mut v))?;
    Ok(v)
}

/// Check the fixed map at `hdr` (sizes from its header: `pool check` does not know the types).
pub(crate) fn check_fixed(
    pool: &crate::shared::PoolInner,
    hdr: u64,
    key_size: usize,
    val_size: usize,
) -> MapCheck {
    let d = SlotDesc {
        slot: key_size + val_size,
        key_size,
        stored_hash: false,
    };
    check_table(pool, hdr, WHAT, d, |s| Ok((s[..key_size].to_vec(), None)))
}

/// A batch of operations on a [`PHashMap`] (see [`PHashMap::batch`]).
pub struct Batch<'m, K: Pod, V: Pod> {
    core: BatchCore<'m>,
    /// Entries minus the header's `len` (in-place writes before the batch; see `Table`).
    len_delta: i64,
    hdr: u64,
    seed: u64,
    /// [`Batch::put`]s not applied yet, oldest first, with their keys' hashes (their buckets
    /// were prefetched when they were queued): a ring, `q_len` entries from `q_head` on.
    queue: [(K, V, u64); PUT_QUEUE],
    q_head: usize,
    q_len: usize,
    _t: PhantomData<fn() -> (K, V)>,
}

/// Puts a batch keeps queued (see [`Batch::put`]): enough cache misses in flight to cover a
/// memory access's latency with the work of the puts in between.
pub const PUT_QUEUE: usize = 16;
const _: () = assert!(PUT_QUEUE.is_power_of_two());

impl<'m, K: Pod, V: Pod> Batch<'m, K, V> {
    /// A commit inside the batch failed earlier: the batch cannot go on.
    #[inline(always)]
    fn ensure_open(&self) -> Result<()> {
        if self.core.tx.is_none() {
            return Err(Error::Aborted(
                "the batch's transaction failed earlier; the batch cannot continue".into(),
            ));
        }
        Ok(())
    }

    #[inline(always)]
    fn before_op(&mut self) -> Result<()> {
        self.ensure_open()?;
        if self.core.should_commit() {
            self.core.commit(self.hdr, true)?;
        }
        Ok(())
    }

    /// Make every operation so far durable (a durability point inside the batch).
    pub fn sync(&mut self) -> Result<()> {
        self.apply_queued()?;
        self.ensure_open()?;
        self.core.commit(self.hdr, true)
    }

    /// Insert or replace, without returning the previous value, and possibly later: the key's
    /// bucket is prefetched now and the put queued; it is applied when 16 (`PUT_QUEUE`) newer
    /// puts are queued, or at the batch's next other call ([`insert`](Self::insert),
    /// [`get`](Self::get), [`remove`](Self::remove), [`sync`](Self::sync), ...) or its end,
    /// whichever comes first. So the cache misses of consecutive puts overlap instead of
    /// following one another: a bulk load of a large map runs at the speed of memory's
    /// bandwidth rather than its latency. The operations still happen in call order, and a
    /// crash keeps a prefix of them as for any batch.
    ///
    /// An error applying a queued put is returned by the call that applied it (a later put,
    /// or the next other call, or the batch's end); the puts queued after the failed one are
    /// dropped with it, so the map holds a prefix of the operations, ending before the failed
    /// put. [`len`](Self::len) does not count puts still queued.
    #[inline]
    pub fn put(&mut self, k: K, v: V) -> Result<()> {
        if is_reserved(bytemuck::bytes_of(&k)) {
            return self.insert(k, v).map(|_| ());
        }
        let h = hash_bytes(self.seed, bytemuck::bytes_of(&k));
        let (_, seg, _, _) = self.core.locate(h);
        self.core.prefetch(seg + (home_bucket(h) * BUCKET) as u64);
        if self.q_len < PUT_QUEUE {
            self.queue[(self.q_head + self.q_len) % PUT_QUEUE] = (k, v, h);
            self.q_len += 1;
            return Ok(());
        }
        // Full: the oldest put leaves, the new one takes its place at the ring's tail.
        let (k0, v0, h0) = std::mem::replace(&mut self.queue[self.q_head], (k, v, h));
        self.q_head = (self.q_head + 1) % PUT_QUEUE;
        if let Err(e) = self.insert_hashed(k0, v0, h0) {
            self.q_len = 0;
            return Err(e);
        }
        Ok(())
    }

    /// Apply every queued put (see [`put`](Self::put)), oldest first.
    #[inline]
    fn apply_queued(&mut self) -> Result<()> {
        while self.q_len > 0 {
            let (k, v, h) = self.queue[self.q_head];
            self.q_head = (self.q_head + 1) % PUT_QUEUE;
            self.q_len -= 1;
            if let Err(e) = self.insert_hashed(k, v, h) {
                self.q_len = 0;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Insert or replace; returns the previous value.
    #[inline]
    pub fn insert(&mut self, k: K, v: V) -> Result<Option<V>> {
        self.apply_queued()?;
        let kb = bytemuck::bytes_of(&k);
        if is_reserved(kb) {
            self.before_op()?;
            return self.special_insert(bytemuck::bytes_of(&v));
        }
        let h = hash_bytes(self.seed, kb);
        self.insert_hashed(k, v, h)
    }

    /// [`insert`](Self::insert) of a key that is not the reserved one, whose hash is `h`.
    /// The usual case stores into a segment this transaction owns (copied, created or being
    /// filled): plain stores, nothing logged, so the log cannot fill; a segment to take or
    /// split first goes through [`make_room`](Self::make_room).
    #[inline(always)]
    fn insert_hashed(&mut self, k: K, v: V, h: u64) -> Result<Option<V>> {
        self.ensure_open()?;
        let kb = bytemuck::bytes_of(&k);
        let vb = bytemuck::bytes_of(&v);
        loop {
            let (idx, seg, _, fresh) = self.core.locate(h);
            if fresh {
                match probe_key::<K, V>(seg, h, kb, |boff| Ok(self.core.read_owned(boff)))? {
                    Probe::Found(off) => {
                        let vo = off + kb.len() as u64;
                        let old = self.core.read_owned::<V>(vo);
                        self.core.store(vo, vb);
                        return Ok(Some(old));
                    }
                    Probe::Free(off) => {
                        let mut slot = [0u8; BUCKET];
                        slot[..kb.len()].copy_from_slice(kb);
                        slot[kb.len()..kb.len() + vb.len()].copy_from_slice(vb);
                        self.core.store(off, &slot[..kb.len() + vb.len()]);
                        self.core.len = self.core.len.wrapping_add(1);
                        return Ok(None);
                    }
                    Probe::Full => {}
                }
            }
            self.make_room(idx, h, kb, fresh)?;
        }
    }

    /// The key's segment is not this transaction's to write in place (`fresh` false: take it,
    /// or split it when the key's window is full), or its window is full (split it). Either
    /// logs allocator entries, so a transaction whose log is nearly full commits first (and
    /// the caller locates the key again: the commit took every segment's fresh mark).
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, idx: u64, h: u64, kb: &[u8], fresh: bool) -> Result<()> {
        if self.core.should_commit() {
            return self.core.commit(self.hdr, true);
        }
        let full = fresh || {
            let (_, seg, _, _) = self.core.locate(h);
            let src = Src::Pool(self.core.tx().pool_inner());
            matches!(probe_in::<K, V>(&src, seg, h, kb)?, Probe::Full)
        };
        if full {
            self.core.split::<Fixed<K, V>>(self.seed, idx)
        } else {
            self.core.own(idx)
        }
    }

    fn special_insert(&mut self, vb: &[u8]) -> Result<Option<V>> {
        let old = special_write::<V>(self.core.tx(), self.hdr, Some(vb))?;
        if old.is_none() {
            self.core.len = self.core.len.wrapping_add(1);
        }
        Ok(old)
    }

    /// Look up a value as the batch sees it.
    #[inline]
    pub fn get(&mut self, k: &K) -> Result<Option<V>> {
        self.apply_queued()?;
        self.ensure_open()?;
        let kb = bytemuck::bytes_of(k);
        if is_reserved(kb) {
            let hdr = self.hdr;
            return special_read(&Src::Tx(self.core.tx()), hdr);
        }
        let h = hash_bytes(self.seed, kb);
        let (_, seg, _, _) = self.core.locate(h);
        let src = Src::Pool(self.core.tx().pool_inner());
        match probe_in::<K, V>(&src, seg, h, kb)? {
            Probe::Found(off) => Ok(Some(read_val::<V>(&src, off + kb.len() as u64)?)),
            _ => Ok(None),
        }
    }

    /// Remove; returns the value.
    pub fn remove(&mut self, k: &K) -> Result<Option<V>> {
        self.apply_queued()?;
        self.before_op()?;
        let kb = bytemuck::bytes_of(k);
        if is_reserved(kb) {
            let old = special_write::<V>(self.core.tx(), self.hdr, None)?;
            if old.is_some() {
                self.core.len = self.core.len.wrapping_sub(1);
            }
            return Ok(old);
        }
        let h = hash_bytes(self.seed, kb);
        loop {
            let (idx, seg, _, fresh) = self.core.locate(h);
            let src = Src::Pool(self.core.tx().pool_inner());
            match probe_in::<K, V>(&src, seg, h, kb)? {
                Probe::Found(off) if fresh => {
                    let old = read_val::<V>(&src, off + kb.len() as u64)?;
                    remove_slot::<Fixed<K, V>>(
                        self.core.tx(),
                        WriteMode::InPlace,
                        self.seed,
                        seg,
                        off,
                    )?;
                    self.core.len = self.core.len.wrapping_sub(1);
                    return Ok(Some(old));
                }
                Probe::Found(_) => self.core.own(idx)?,
                _ => return Ok(None),
            }
        }
    }

    /// Make room for `capacity` entries in all, inside the batch (see
    /// [`PHashMap::reserve`]): when the table is smaller, its entries move into a new table of
    /// segments allocated in the batch's transaction, which the batch then writes in place (no
    /// copy-on-write); the new table becomes the map's at the batch's next commit.
    pub fn reserve(&mut self, capacity: u64) -> Result<()> {
        self.apply_queued()?;
        self.before_op()?;
        self.core.reserve::<Fixed<K, V>>(self.seed, capacity)
    }

    /// The batch's current transaction, for writes that must commit together with the
    /// operations around them (a transaction ends when the log fills or at [`Batch::sync`]).
    pub fn tx(&mut self) -> Result<&mut Tx<'m>> {
        self.apply_queued()?;
        self.ensure_open()?;
        Ok(self.core.tx())
    }

    /// Entries in the map as the batch sees it (puts still queued not counted: see
    /// [`put`](Self::put)).
    pub fn len(&self) -> u64 {
        self.core.len.wrapping_add(self.len_delta as u64)
    }

    /// Whether the batch has made no change yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
