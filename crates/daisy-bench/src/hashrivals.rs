//! The rivals of `daisy bench hashmap`: one simple table, seven ways of keeping it.
//!
//! The simple table: open addressing over 8-byte slots (key in the low half, value in the high
//! half, native byte order), [`capacity`]`(N)` slots, linear probing from a Fibonacci
//! (multiplicative) hash, key [`EMPTY_KEY`] for an empty slot and [`TOMBSTONE_KEY`] for a
//! removed one. Every insert, overwrite or remove therefore writes exactly one aligned 8-byte
//! slot, which x86 stores atomically with respect to power failure: a table that persists each
//! slot write is crash-consistent without any log, which is what makes `store-flush` the
//! physical floor of per-operation durability.
//!
//! What differs is where the slots live and how a write is made durable ([`Slots`]):
//! * `store-flush`: a file on `--dir` mapped `MAP_SHARED`; store, flush the line, fence
//!   (`daisy::internals::Persister`, which picks clwb/clflushopt/clflush; msync of the page on a disk);
//! * `pmdk-tx`: the root object of a PMDK pool; one libpmemobj transaction per write
//!   (`pmemobj_tx_add_range` of the slot, then the store);
//! * `store-end`: a mapped file; bare stores, then every written line flushed and one fence at
//!   the end (the floor of one durability point);
//! * `msync-op` / `msync-end`: a mapped file; `msync(MS_SYNC)` of the slot's page after each
//!   write / of the whole table at the end (seed 000's baseline);
//! * `fsync-op` / `fsync-end`: the table in DRAM plus a file; `pwrite` of the slot and
//!   `fdatasync` per write / `pwrite` per write and one `fsync` at the end;
//! * `dram`: `std::collections::HashMap` (default hasher, nothing persisted, created with
//!   room for N entries), the floor for batched work.
//!
//! Every table is sized for N before the run (the capacity hint): the simple tables get
//! [`capacity`]`(N)` slots, `dram` `HashMap::with_capacity(N)`, Daisy's maps
//! `create_in_with_seed_and_capacity(.., N)`.
//!
//! No `unsafe` here: mappings and msync come from `daisy::map`, PMDK from `crate::pmdk`.

use crate::hashbench::{capacity, Bytes, Counting, Mechanism, Setup, EMPTY_KEY, TOMBSTONE_KEY};
use crate::measure::RemoveOnDrop;
use crate::pmdk::PmdkPool;
use anyhow::{anyhow, Result};
use daisy::internals::Mapping;
use daisy::internals::Persister;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// An empty slot (key [`EMPTY_KEY`]; the value half is irrelevant).
const EMPTY_SLOT: u64 = u64::MAX;
/// A removed slot (key [`TOMBSTONE_KEY`], value 0).
const TOMBSTONE_SLOT: u64 = TOMBSTONE_KEY as u64;

fn slot(key: u32, value: u32) -> u64 {
    key as u64 | (value as u64) << 32
}

fn key_of(w: u64) -> u32 {
    w as u32
}

fn value_of_slot(w: u64) -> u32 {
    (w >> 32) as u32
}

/// Where a key is, or where it would go.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// The key's slot.
    Found(usize, u64),
    /// Absent; the first tombstone or empty slot on its probe path.
    Vacant(usize),
    /// Absent and no free slot anywhere (every slot live or a tombstone).
    Full,
}

/// Linear probing from the key's home slot in a table of `mask + 1` slots read by `load`.
/// Stops at the key or at an empty slot; visits each slot at most once.
#[inline(always)]
fn probe(load: impl Fn(usize) -> u64, mask: usize, shift: u32, key: u32) -> Probe {
    // Fibonacci hashing: the top bits of key * 2^64/phi.
    let mut i = ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
    let mut free = None;
    for _ in 0..=mask {
        let w = load(i);
        match key_of(w) {
            k if k == key => return Probe::Found(i, w),
            EMPTY_KEY => return Probe::Vacant(free.unwrap_or(i)),
            TOMBSTONE_KEY if free.is_none() => free = Some(i),
            _ => {}
        }
        i = (i + 1) & mask;
    }
    free.map_or(Probe::Full, Probe::Vacant)
}

/// Where the slots of a simple table live and how one slot write is made durable.
pub(crate) trait Slots {
    fn name(&self) -> &'static str;
    fn describe(&self) -> String;
    /// Number of slots (a power of two).
    fn len(&self) -> usize;
    fn load(&self, i: usize) -> u64;
    /// Write slot `i`, durable on return for per-operation mechanisms.
    fn store(&mut self, i: usize, w: u64) -> Result<()>;
    /// Replace every slot with `image` and make it durable (building and emptying tables).
    fn write_image(&mut self, image: &[u64]) -> Result<()>;
    fn finish(&mut self) -> Result<()>;
    fn bytes_used(&self) -> Option<Bytes>;
    fn counting(&self) -> Counting;
    fn syncs(&self) -> u64 {
        0
    }
    /// Every slot as the storage holds it (the file, the pool object).
    fn stored(&self) -> Result<Vec<u64>>;
}

/// The simple table over any slot storage.
pub(crate) struct OpenTable<S> {
    slots: S,
    mask: usize,
    shift: u32,
}

impl<S: Slots> OpenTable<S> {
    /// Wrap `slots` and empty them (every slot [`EMPTY_SLOT`], durably).
    fn new(mut slots: S) -> Result<Self> {
        let len = slots.len();
        assert!(len.is_power_of_two() && len >= 2);
        slots.write_image(&vec![EMPTY_SLOT; len])?;
        Ok(OpenTable {
            slots,
            mask: len - 1,
            shift: 64 - len.trailing_zeros(),
        })
    }

    #[inline(always)]
    fn find(&self, key: u32) -> Probe {
        probe(|i| self.slots.load(i), self.mask, self.shift, key)
    }
}

fn check_key(key: u32) -> Result<()> {
    if key == EMPTY_KEY || key == TOMBSTONE_KEY {
        return Err(anyhow!("key {key:#x} is reserved (empty/tombstone marker)"));
    }
    Ok(())
}

impl<S: Slots> Mechanism for OpenTable<S> {
    fn name(&self) -> &'static str {
        self.slots.name()
    }

    fn describe(&self) -> String {
        self.slots.describe()
    }

    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        check_key(key)?;
        match self.find(key) {
            Probe::Found(i, _) | Probe::Vacant(i) => self.slots.store(i, slot(key, value)),
            Probe::Full => Err(anyhow!(
                "{}: table of {} slots is full",
                self.name(),
                self.mask + 1
            )),
        }
    }

    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        Ok(match self.find(key) {
            Probe::Found(_, w) => Some(value_of_slot(w)),
            _ => None,
        })
    }

    fn remove(&mut self, key: u32) -> Result<bool> {
        match self.find(key) {
            Probe::Found(i, _) => self.slots.store(i, TOMBSTONE_SLOT).map(|()| true),
            _ => Ok(false),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.slots.finish()
    }

    /// Place every pair in a DRAM image of the table, then write the image once, durably.
    fn build(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        let mut image: Vec<u64> = (0..=self.mask).map(|i| self.slots.load(i)).collect();
        for &(k, v) in pairs {
            check_key(k)?;
            match probe(|i| image[i], self.mask, self.shift, k) {
                Probe::Found(i, _) | Probe::Vacant(i) => image[i] = slot(k, v),
                Probe::Full => return Err(anyhow!("{}: table is full", self.name())),
            }
        }
        self.slots.write_image(&image)
    }

    fn bytes_used(&self) -> Option<Bytes> {
        self.slots.bytes_used()
    }

    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        let mut v: Vec<(u32, u32)> = self
            .slots
            .stored()?
            .into_iter()
            .filter(|&w| key_of(w) != EMPTY_KEY && key_of(w) != TOMBSTONE_KEY)
            .map(|w| (key_of(w), value_of_slot(w)))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    fn counting(&self) -> Counting {
        self.slots.counting()
    }

    fn syncs(&self) -> u64 {
        self.slots.syncs()
    }
}

/// A file of the benchmark, removed when dropped.
struct TempFile {
    path: PathBuf,
    file: File,
}

impl TempFile {
    /// Create `path` (replacing a leftover) with `len` bytes.
    fn create(path: PathBuf, len: usize) -> Result<TempFile> {
        let err = |e: std::io::Error| anyhow!("{}: {e}", path.display());
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(err)?;
        // Owned from here on: removed again if sizing fails.
        let t = TempFile { path, file };
        t.file
            .set_len(len as u64)
            .map_err(|e| t.err("truncate", e))?;
        Ok(t)
    }

    fn err(&self, what: &str, e: std::io::Error) -> anyhow::Error {
        anyhow!("{what} {}: {e}", self.path.display())
    }

    /// The whole file as slots.
    fn read_slots(&self) -> Result<Vec<u64>> {
        let bytes = std::fs::read(&self.path).map_err(|e| self.err("read", e))?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect())
    }

    /// Write slots at slot `first` with pwrite (in pieces, so no huge byte copy is needed).
    fn write_slots(&self, first: usize, slots: &[u64]) -> Result<()> {
        for (c, chunk) in slots.chunks(1 << 16).enumerate() {
            let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let off = (first + (c << 16)) * 8;
            self.file
                .write_all_at(&bytes, off as u64)
                .map_err(|e| self.err("pwrite", e))?;
        }
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A table file on `--dir` mapped `MAP_SHARED`, every page written once (no mechanism pays for
/// first-touch faults or block allocation in its timed runs).
struct MappedFile {
    file: TempFile,
    map: Mapping,
    slots: usize,
}

impl MappedFile {
    fn create(setup: &Setup<'_>) -> Result<MappedFile> {
        let slots = capacity(setup.n);
        let file = TempFile::create(setup.path("table"), slots * 8)?;
        file.write_slots(0, &vec![EMPTY_SLOT; slots])?;
        let map =
            Mapping::new(&file.file, slots * 8, slots * 8).map_err(|e| file.err("mmap", e))?;
        Ok(MappedFile { file, map, slots })
    }

    #[inline(always)]
    fn load(&self, i: usize) -> u64 {
        self.map.read::<u64>(i as u64 * 8)
    }

    #[inline(always)]
    fn store(&self, i: usize, w: u64) {
        self.map.write::<u64>(i as u64 * 8, &w);
    }

    fn write_image(&self, image: &[u64]) {
        self.map.write_bytes(0, bytemuck::cast_slice(image));
    }

    /// msync(MS_SYNC) of `[off, off+len)` rounded out to pages.
    fn msync(&self, off: usize, len: usize) -> Result<()> {
        let page = daisy::internals::page_size();
        let start = off & !(page - 1);
        let end = (off + len).next_multiple_of(page).min(self.map.len());
        daisy::internals::msync(self.map.base() as usize + start, end - start)
            .map_err(|e| self.file.err("msync", e))
    }

    fn bytes(&self) -> Option<Bytes> {
        Some(Bytes::Measured(self.slots as u64 * 8))
    }
}

/// `store-flush`: bare store, flush of the touched line, fence; no transaction.
pub(crate) struct StoreFlush {
    f: MappedFile,
    persist: Persister,
}

impl Slots for StoreFlush {
    fn name(&self) -> &'static str {
        "store-flush"
    }
    fn describe(&self) -> String {
        format!(
            "simple table in a mapped file; 8-byte store + flush of its line + fence per \
             operation, no transaction (Persister, {}): the physical floor",
            self.persist.mode().describe()
        )
    }
    fn len(&self) -> usize {
        self.f.slots
    }
    fn load(&self, i: usize) -> u64 {
        self.f.load(i)
    }
    fn store(&mut self, i: usize, w: u64) -> Result<()> {
        self.f.store(i, w);
        self.persist.flush(self.f.map.at(i as u64 * 8, 8), 8);
        self.persist
            .fence()
            .map_err(|e| self.f.file.err("fence", e))
    }
    fn write_image(&mut self, image: &[u64]) -> Result<()> {
        self.f.write_image(image);
        let len = self.f.slots * 8;
        self.persist.flush(self.f.map.at(0, len), len);
        self.persist
            .fence()
            .map_err(|e| self.f.file.err("fence", e))
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn bytes_used(&self) -> Option<Bytes> {
        self.f.bytes()
    }
    fn counting(&self) -> Counting {
        Counting::Persister
    }
    fn stored(&self) -> Result<Vec<u64>> {
        self.f.file.read_slots()
    }
}

/// `store-end`: bare 8-byte stores, no flush while the run goes; at the end every line
/// written is flushed (in address order) and one fence makes them all durable. The floor of a
/// batch with one durability point in a mapped pool file: like `msync-end`, a crash before
/// the end keeps any subset of the writes (no prefix, no atomicity).
pub(crate) struct StoreEnd {
    f: MappedFile,
    persist: Persister,
    /// One bit per 64-byte line of the table: written since the last durability point.
    dirty: Vec<u64>,
}

impl StoreEnd {
    /// Flush every line marked dirty, in address order, and forget the marks.
    fn flush_dirty(&mut self) {
        for (wi, word) in self.dirty.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let line = wi * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.persist.flush(self.f.map.at(line as u64 * 64, 64), 64);
            }
        }
    }
}

impl Slots for StoreEnd {
    fn name(&self) -> &'static str {
        "store-end"
    }
    fn describe(&self) -> String {
        format!(
            "simple table in a mapped file; plain 8-byte stores, then every written line \
             flushed and one fence at the end (Persister, {}): the floor of one durability \
             point",
            self.persist.mode().describe()
        )
    }
    fn len(&self) -> usize {
        self.f.slots
    }
    fn load(&self, i: usize) -> u64 {
        self.f.load(i)
    }
    #[inline(always)]
    fn store(&mut self, i: usize, w: u64) -> Result<()> {
        self.f.store(i, w);
        // Eight slots to a line, 64 lines to a word of the bitmap.
        self.dirty[i / 512] |= 1 << ((i / 8) % 64);
        Ok(())
    }
    fn write_image(&mut self, image: &[u64]) -> Result<()> {
        self.f.write_image(image);
        self.dirty.iter_mut().for_each(|w| *w = 0);
        let len = self.f.slots * 8;
        self.persist.flush(self.f.map.at(0, len), len);
        self.persist
            .fence()
            .map_err(|e| self.f.file.err("fence", e))
    }
    fn finish(&mut self) -> Result<()> {
        self.flush_dirty();
        self.persist
            .fence()
            .map_err(|e| self.f.file.err("fence", e))
    }
    fn bytes_used(&self) -> Option<Bytes> {
        self.f.bytes()
    }
    fn counting(&self) -> Counting {
        Counting::Persister
    }
    fn stored(&self) -> Result<Vec<u64>> {
        self.f.file.read_slots()
    }
}

/// `msync-op` / `msync-end`: a mapped file made durable with msync.
pub(crate) struct Msync {
    f: MappedFile,
    per_op: bool,
    syncs: u64,
}

impl Slots for Msync {
    fn name(&self) -> &'static str {
        if self.per_op {
            "msync-op"
        } else {
            "msync-end"
        }
    }
    fn describe(&self) -> String {
        if self.per_op {
            "simple table in a mapped file; msync(MS_SYNC) of the touched page after each \
             operation"
                .into()
        } else {
            "simple table in a mapped file; one msync(MS_SYNC) of the whole table at the end \
             (seed 000's baseline)"
                .into()
        }
    }
    fn len(&self) -> usize {
        self.f.slots
    }
    fn load(&self, i: usize) -> u64 {
        self.f.load(i)
    }
    fn store(&mut self, i: usize, w: u64) -> Result<()> {
        self.f.store(i, w);
        if self.per_op {
            self.syncs += 1;
            self.f.msync(i * 8, 8)?;
        }
        Ok(())
    }
    fn write_image(&mut self, image: &[u64]) -> Result<()> {
        self.f.write_image(image);
        self.syncs += 1;
        self.f.msync(0, self.f.slots * 8)
    }
    fn finish(&mut self) -> Result<()> {
        if self.per_op {
            return Ok(());
        }
        self.syncs += 1;
        self.f.msync(0, self.f.slots * 8)
    }
    fn bytes_used(&self) -> Option<Bytes> {
        self.f.bytes()
    }
    fn counting(&self) -> Counting {
        Counting::Syncs
    }
    fn syncs(&self) -> u64 {
        self.syncs
    }
    fn stored(&self) -> Result<Vec<u64>> {
        self.f.file.read_slots()
    }
}

/// `fsync-op` / `fsync-end`: the table in DRAM, each slot write also pwritten to a file.
pub(crate) struct Fsync {
    table: Vec<u64>,
    file: TempFile,
    per_op: bool,
    syncs: u64,
}

impl Slots for Fsync {
    fn name(&self) -> &'static str {
        if self.per_op {
            "fsync-op"
        } else {
            "fsync-end"
        }
    }
    fn describe(&self) -> String {
        if self.per_op {
            "simple table in DRAM; pwrite of the 8-byte slot + fdatasync per operation".into()
        } else {
            "simple table in DRAM; pwrite of the 8-byte slot per operation, one fsync at the end"
                .into()
        }
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn load(&self, i: usize) -> u64 {
        self.table[i]
    }
    fn store(&mut self, i: usize, w: u64) -> Result<()> {
        self.table[i] = w;
        self.file
            .file
            .write_all_at(&w.to_ne_bytes(), i as u64 * 8)
            .map_err(|e| self.file.err("pwrite", e))?;
        if self.per_op {
            self.syncs += 1;
            self.file
                .file
                .sync_data()
                .map_err(|e| self.file.err("fdatasync", e))?;
        }
        Ok(())
    }
    fn write_image(&mut self, image: &[u64]) -> Result<()> {
        self.table.copy_from_slice(image);
        self.file.write_slots(0, image)?;
        self.syncs += 1;
        self.file
            .file
            .sync_all()
            .map_err(|e| self.file.err("fsync", e))
    }
    fn finish(&mut self) -> Result<()> {
        if self.per_op {
            return Ok(());
        }
        self.syncs += 1;
        self.file
            .file
            .sync_all()
            .map_err(|e| self.file.err("fsync", e))
    }
    fn bytes_used(&self) -> Option<Bytes> {
        Some(Bytes::Measured(self.table.len() as u64 * 8))
    }
    fn counting(&self) -> Counting {
        Counting::Syncs
    }
    fn syncs(&self) -> u64 {
        self.syncs
    }
    fn stored(&self) -> Result<Vec<u64>> {
        self.file.read_slots()
    }
}

/// `pmdk-tx`: the table is the root object of a PMDK pool; one transaction per slot write.
pub(crate) struct PmdkTx<'a> {
    // Field order matters: the pool is closed before its file is removed.
    pool: PmdkPool<'a>,
    _file: RemoveOnDrop,
}

/// Slots per transaction when writing a whole image (64 KiB undo snapshots).
const PMDK_IMAGE_CHUNK: usize = 8192;

impl Slots for PmdkTx<'_> {
    fn name(&self) -> &'static str {
        "pmdk-tx"
    }
    fn describe(&self) -> String {
        // (Described from a one-entry trial table: the pool size is sized per N, so it is
        // not printed here.)
        "simple table in the root object of a libpmemobj pool sized for N (the table plus \
         32 MiB for PMDK's metadata); one transaction per operation: pmemobj_tx_add_range of \
         the slot, then the store"
            .to_string()
    }
    fn len(&self) -> usize {
        self.pool.root_size() / 8
    }
    fn load(&self, i: usize) -> u64 {
        self.pool.read_root_u64(i as u64 * 8)
    }
    fn store(&mut self, i: usize, w: u64) -> Result<()> {
        let root = self.pool.root;
        let off = i as u64 * 8;
        self.pool.tx(|t| {
            t.add_range(root, off, 8)?;
            t.store_u64(root, off, w);
            Ok(())
        })
    }
    fn write_image(&mut self, image: &[u64]) -> Result<()> {
        let root = self.pool.root;
        for (c, chunk) in image.chunks(PMDK_IMAGE_CHUNK).enumerate() {
            let first = (c * PMDK_IMAGE_CHUNK) as u64 * 8;
            self.pool.tx(|t| {
                t.add_range(root, first, chunk.len() * 8)?;
                for (j, &w) in chunk.iter().enumerate() {
                    t.store_u64(root, first + j as u64 * 8, w);
                }
                Ok(())
            })?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn bytes_used(&self) -> Option<Bytes> {
        // The table object itself; the pool file also holds PMDK's heap metadata and logs,
        // sized by the pool, not by the table.
        Some(Bytes::Measured(self.pool.root_size() as u64))
    }
    fn counting(&self) -> Counting {
        Counting::Unknown
    }
    fn stored(&self) -> Result<Vec<u64>> {
        Ok((0..self.len()).map(|i| self.load(i)).collect())
    }
}

/// `dram`: `std::collections::HashMap`, default hasher, nothing persisted.
pub(crate) struct Dram {
    map: std::collections::HashMap<u32, u32>,
}

impl Mechanism for Dram {
    fn name(&self) -> &'static str {
        "dram"
    }
    fn describe(&self) -> String {
        "std::collections::HashMap<u32, u32> (HashMap::new(), default hasher), nothing \
         persisted: the floor for batched work"
            .into()
    }
    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        self.map.insert(key, value);
        Ok(())
    }
    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        Ok(self.map.get(&key).copied())
    }
    fn remove(&mut self, key: u32) -> Result<bool> {
        Ok(self.map.remove(&key).is_some())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    /// hashbrown's layout: buckets = next power of two of capacity * 8/7, each an 8-byte entry
    /// plus one control byte (plus a group of trailing control bytes).
    fn bytes_used(&self) -> Option<Bytes> {
        let cap = self.map.capacity();
        let buckets = match cap {
            0 => 0,
            1..=3 => 4,
            4..=7 => 8,
            c => (c * 8 / 7).next_power_of_two(),
        };
        Some(Bytes::Estimated((buckets * 9 + 16) as u64))
    }
    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        let mut v: Vec<(u32, u32)> = self.map.iter().map(|(&k, &v)| (k, v)).collect();
        v.sort_unstable();
        Ok(v)
    }
    fn counting(&self) -> Counting {
        Counting::Nothing
    }
}

pub(crate) fn open_store_flush<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    let t = StoreFlush {
        f: MappedFile::create(s)?,
        persist: Persister::new(s.mode),
    };
    Ok(Box::new(OpenTable::new(t)?))
}

pub(crate) fn open_store_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    let f = MappedFile::create(s)?;
    let t = StoreEnd {
        dirty: vec![0; f.slots.div_ceil(512)],
        f,
        persist: Persister::new(s.mode),
    };
    Ok(Box::new(OpenTable::new(t)?))
}

pub(crate) fn open_pmdk_tx<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    let lib = s.pmdk.ok_or_else(|| {
        anyhow!("PMDK's libpmemobj could not be loaded (see the PMDK line above)")
    })?;
    let root_size = capacity(s.n) * 8;
    // Room for the root object, PMDK's heap metadata and lanes (PMDK's minimum pool is 8 MiB).
    let pool_size = (root_size + root_size / 8 + (32 << 20)).next_multiple_of(1 << 20);
    let path = s.path("pmdk");
    let remove = RemoveOnDrop(path.clone());
    let t = PmdkTx {
        pool: PmdkPool::create(lib, &path, pool_size, root_size)?,
        _file: remove,
    };
    Ok(Box::new(OpenTable::new(t)?))
}

fn open_msync<'a>(s: &Setup<'a>, per_op: bool) -> Result<Box<dyn Mechanism + 'a>> {
    let t = Msync {
        f: MappedFile::create(s)?,
        per_op,
        syncs: 0,
    };
    Ok(Box::new(OpenTable::new(t)?))
}

pub(crate) fn open_msync_op<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open_msync(s, true)
}

pub(crate) fn open_msync_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open_msync(s, false)
}

fn open_fsync<'a>(s: &Setup<'a>, per_op: bool) -> Result<Box<dyn Mechanism + 'a>> {
    let slots = capacity(s.n);
    let t = Fsync {
        table: vec![EMPTY_SLOT; slots],
        file: TempFile::create(s.path("table"), slots * 8)?,
        per_op,
        syncs: 0,
    };
    Ok(Box::new(OpenTable::new(t)?))
}

pub(crate) fn open_fsync_op<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open_fsync(s, true)
}

pub(crate) fn open_fsync_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open_fsync(s, false)
}

pub(crate) fn open_dram<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    // Sized for N up front, as every other table (the benchmark's capacity hint).
    Ok(Box::new(Dram {
        map: std::collections::HashMap::with_capacity(s.n),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashbench::{dir_mode, entry, keys, mechanism_names, value_of, Open};
    use crate::pmdk::Pmdk;
    use std::collections::HashMap;

    fn tmpdir() -> tempfile::TempDir {
        if std::path::Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            tempfile::tempdir().unwrap()
        }
    }

    /// Every mechanism: the rivals of this file, the databases (dbrivals.rs) and Daisy's two.
    const RIVALS: [&str; 15] = [
        "daisy",
        "daisy-batch",
        "store-flush",
        "pmdk-tx",
        "msync-op",
        "msync-end",
        "fsync-op",
        "fsync-end",
        "dram",
        "lmdb-op",
        "lmdb-end",
        "redb-op",
        "redb-end",
        "sqlite-op",
        "sqlite-end",
    ];

    /// Open `name` for `n` entries in `dir`, or None when PMDK is not installed.
    fn open<'a>(
        name: &str,
        dir: &'a std::path::Path,
        n: usize,
        pmdk: Option<&'a Pmdk>,
    ) -> Option<Box<dyn Mechanism + 'a>> {
        let open: Open = entry(name).unwrap().open;
        let setup = Setup {
            dir,
            n,
            stem: format!("t-{name}"),
            mode: dir_mode(dir).unwrap().0,
            pmdk,
        };
        match open(&setup) {
            Ok(m) => Some(m),
            Err(e) if name == "pmdk-tx" && pmdk.is_none() => {
                eprintln!("pmdk-tx not tested: {e}");
                None
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }

    #[test]
    fn every_rival_is_listed() {
        for r in RIVALS {
            assert!(mechanism_names().contains(&r), "{r}");
        }
    }

    /// Inserts, overwrites, removes, re-inserts into tombstones and misses, checked step by
    /// step against a std HashMap model, then the final contents read back from storage.
    #[test]
    fn rivals_match_a_hashmap_model() {
        let d = tmpdir();
        let pmdk = Pmdk::load().ok();
        let n = 600;
        let ks = keys(42, n);
        for name in RIVALS {
            let Some(mut m) = open(name, d.path(), n, pmdk.as_ref()) else {
                continue;
            };
            assert_eq!(m.name(), name);
            let mut model: HashMap<u32, u32> = HashMap::new();
            let mut s = 99u64;
            // In the mechanism's scope: daisy-batch runs all of it as one batch.
            crate::hashbench::in_scope(m.as_mut(), &mut |m| {
                for step in 0..3000u32 {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let k = ks[(s >> 33) as usize % n];
                    match (s >> 20) % 4 {
                        0 | 1 => {
                            let v = value_of(k) ^ step;
                            m.insert(k, v).unwrap();
                            model.insert(k, v);
                        }
                        2 => assert_eq!(
                            m.remove(k).unwrap(),
                            model.remove(&k).is_some(),
                            "{name}: remove {k} at step {step}"
                        ),
                        _ => assert_eq!(
                            m.get(k).unwrap(),
                            model.get(&k).copied(),
                            "{name}: get {k} at step {step}"
                        ),
                    }
                }
                Ok(())
            })
            .unwrap();
            m.finish().unwrap();
            let mut want: Vec<(u32, u32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            want.sort_unstable();
            assert!(!want.is_empty());
            assert_eq!(m.contents().unwrap(), want, "{name}: final contents");
            for (k, v) in &want {
                assert_eq!(m.get(*k).unwrap(), Some(*v), "{name}: get {k}");
            }
            // A key never inserted is absent, and removing it reports so.
            let absent = keys(43, 1)[0];
            if !model.contains_key(&absent) {
                assert_eq!(m.get(absent).unwrap(), None);
                assert!(!m.remove(absent).unwrap());
            }
            if m.counting() == Counting::Syncs {
                assert!(m.syncs() > 0, "{name} counted no syncs");
            }
            assert!(m.bytes_used().is_some(), "{name}");
            drop(m);
        }
        // Every table file was removed with its table.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// The build path (used before timing get/remove) gives the same table as inserting.
    #[test]
    fn build_matches_inserts_and_get_returns_values() {
        let d = tmpdir();
        let pmdk = Pmdk::load().ok();
        let n = 2000;
        let pairs: Vec<(u32, u32)> = keys(5, n).into_iter().map(|k| (k, value_of(k))).collect();
        let mut want = pairs.clone();
        want.sort_unstable();
        for name in RIVALS {
            let Some(mut m) = open(name, d.path(), n, pmdk.as_ref()) else {
                continue;
            };
            m.build(&pairs).unwrap();
            assert_eq!(m.contents().unwrap(), want, "{name}");
            for &(k, v) in &pairs {
                assert_eq!(m.get(k).unwrap(), Some(v), "{name}: get {k}");
            }
            for &(k, _) in &pairs[..n / 2] {
                assert!(m.remove(k).unwrap(), "{name}: remove {k}");
            }
            m.finish().unwrap();
            assert_eq!(m.contents().unwrap().len(), n - n / 2, "{name}");
        }
    }

    #[test]
    fn probing_wraps_reuses_tombstones_and_reports_full() {
        let mut image = [EMPTY_SLOT; 4];
        let (mask, shift) = (3, 62);
        let ks = keys(3, 5);
        for &k in &ks[..4] {
            match probe(|i| image[i], mask, shift, k) {
                Probe::Vacant(i) => image[i] = slot(k, 1),
                p => panic!("{p:?}"),
            }
        }
        // Every slot live: a fifth key finds no room, and a miss still terminates.
        assert_eq!(probe(|i| image[i], mask, shift, ks[4]), Probe::Full);
        let Probe::Found(i, _) = probe(|i| image[i], mask, shift, ks[2]) else {
            panic!()
        };
        image[i] = TOMBSTONE_SLOT;
        assert_eq!(probe(|i| image[i], mask, shift, ks[4]), Probe::Vacant(i));
        assert!(matches!(
            probe(|i| image[i], mask, shift, ks[3]),
            Probe::Found(..)
        ));
    }

    #[test]
    fn reserved_keys_are_refused() {
        let d = tmpdir();
        let mut m = open("store-flush", d.path(), 10, None).unwrap();
        assert!(m
            .insert(EMPTY_KEY, 1)
            .unwrap_err()
            .to_string()
            .contains("reserved"));
        assert!(m.insert(TOMBSTONE_KEY, 1).is_err());
    }
}
