//! [`PBlockStore`]: an array of fixed-size blocks in a pool, each block write atomic under
//! power failure, read and written by many threads at once: what PMDK's libpmemblk gives a
//! program that uses NVM as a block device (seed 002). Format: docs/FORMAT.md section 8e,
//! block store format version [`BLK_FORMAT`].
//!
//! **Design: block translation.** The store has `nblocks` logical blocks (LBAs) and
//! `nblocks + spare` physical blocks of `block_size` bytes. The *map* (one 8-byte word per
//! LBA) names the physical block that holds each LBA's data. Exactly `spare` physical blocks
//! are named by no map word: the free blocks, one per *write lane*. Every byte of data is
//! written once (no journal of the data), into a block nobody reads, and a write becomes
//! visible and durable by one aligned 8-byte map store. The free blocks are not persisted:
//! [`PBlockStore::open`] finds them as the blocks no map word names (a scan of the map, 8
//! bytes per block). libpmemblk's BTT writes the same data once but also a 16-byte log entry
//! per write (its "flog"), with fences of its own.
//!
//! **Which version.** [`PBlockStore::create_in`] makes version 2 stores for blocks of up to
//! 512 bytes and version 1 stores for larger ones; [`PBlockStore::create_in_format`] makes
//! either. Version 2 saves the data's fence, but adds a crc32c pass over the data and a record
//! line read and written under the stripe lock: in the same-run fio matrix on this project's
//! emulated NVM (tmpfs on a 2-core VM) it was faster than version 1 at 512 B (the fence
//! dominates) and slower from 1 KiB on (the checksum does): docs/FORMAT.md section 8e. Both are
//! tested the same way.
//!
//! **Format 2: one fence per write.** Each physical block `p` has a 32-byte
//! *record* ([`BlkRecord`], after the blocks in the data object): the LBA it holds, that LBA's
//! *version* (`seq`, per LBA, one more than the version it replaces), a kind (data; zero: the
//! LBA reads as zeros and the block's bytes mean nothing; free: a spare at creation) and a
//! crc32c over the block's data (kind data) and the record. A write of LBA `l` on a lane whose
//! free block is `f`:
//!
//! 1. copies the data into `f` (non-temporal stores in pmem mode) and computes its crc32c,
//!    outside any lock: no map word names `f`, and `f`'s record still describes what `f` held
//!    before, so neither a reader nor a recovery takes `f` for `l`'s data;
//! 2. under the lock of `l`'s stripe: reads `o = map[l]` and `o`'s version `s`, writes `f`'s
//!    record (`l`, `s + 1`, data, crc), stores `map[l] = f`, flushes the record's and the
//!    word's lines, and **fences once**: the data, the record and the word are durable
//!    together. The lock is held across the fence;
//! 3. gives `o` to the lane as its next free block.
//!
//! The fence completes the three in no particular order: a crash before it may leave the word
//! naming `f` while `f`'s data or record is torn, or `f` whole while the word still names `o`.
//! Neither is ever read as is: open settles it first (**Recovery**). `set_zero(l)` is a write
//! of kind zero (no data; the word gets the [`ZERO`] flag): a record cannot be changed in place
//! atomically.
//!
//! **Recovery** (format 2, at [`PBlockStore::open`]; [`PBlockStore::reader`] and the checker
//! compute the same without writing it): a write a crash interrupted involves two blocks, its
//! new block `f` and the block `o` it replaces. Whichever way its word went, one of the two is
//! named and the other is free at open, and the free one is the block a lane held (the free
//! blocks are exactly the lanes' blocks: at most `spare` writes run at once). So the free
//! blocks bound what can be in flight: for every free block whose record is whole (crc over
//! the record and, kind data, the block) and names an LBA, the highest version per LBA is a
//! candidate; it replaces the LBA's named block when that block's record is not a whole record
//! of the LBA or holds a lower version. A torn new block thus loses to the old one (which was
//! never overwritten: it becomes a lane's block only after the switch's fence), a whole new
//! block whose word did not switch is taken (the write was not acknowledged: either version
//! is allowed), and a stale free block (an older version of an LBA) loses to the named one.
//! The new words are stored and flushed, then fenced once; a crash midway leaves a map from
//! which the same rule settles the rest (a replaced block is torn or older, so it never wins
//! back). The canary `BlockRecoveryNoCrc` trusts records without their crc and is caught: a
//! torn block whose record or word reached the media is then kept.
//!
//! **Format 1 (stores made before format 2): two fences per write**, no records. Step 1 fences
//! the data before step 2 stores the word, which is flushed and fenced under the stripe lock:
//! a word names a block only after its data is durable, so open has nothing to settle. The
//! canary `BlockSwapBeforeData` leaves out step 1's fence and is caught. Version 1 stores keep
//! this protocol rather than being refused or converted: they have no room for records (the
//! data object's size is fixed), and a conversion would rewrite every block; a store's
//! version never changes.
//!
//! **Invariants** (verified by [`PBlockStore::check`]; `daisy pool check` runs it on every
//! block store it finds):
//! 1. the header's immutable fields hold and its checksum matches; the map and the data area
//!    are allocated objects large enough for `nblocks` words and `nblocks + spare` blocks (and
//!    their records, format 2);
//! 2. every map word names a physical block below `nblocks + spare` (bits 48..63 are flags:
//!    only [`ZERO`], "reads as zeros", is defined);
//! 3. no physical block is named twice (so exactly `spare` are named by none);
//! 4. (format 2) after what recovery settles, every LBA's block holds a whole record of that
//!    LBA, of kind zero exactly when its word has the `ZERO` flag (every named block's data is
//!    read and its crc checked).
//!
//! **Crash reasoning.** The header, the map's initial contents, the records' initial contents
//! (format 2: LBA `i`'s version 0 of kind zero in block `i`, the spares free) and the data
//! area's allocation are written by the creating transaction; nothing else in the store ever
//! goes through the redo log. After that, the only persistent changes are data copies into
//! free blocks, records of free blocks (format 2) and 8-byte map stores:
//! * after any crash every LBA reads a whole version, the one before the write in flight or
//!   the one after it: format 1 because a word names only durable data, format 2 because of
//!   Recovery (invariant 4 holds for every acknowledged switch, so the block a torn write
//!   replaced is whole). **A torn block is never visible**;
//! * a write returns after its switch's fence: an acknowledged write is durable; versions of
//!   one LBA strictly increase over its acknowledged writes (the lock serialises the switches
//!   of an LBA and is held across their fences), so a whole free block of a lower version is
//!   never taken over the named one;
//! * invariant 3 survives any crash: a block is written only while free, and it becomes a
//!   lane's free block only through a switch that its lane made durable before the lane
//!   writes into it. A switch of the same LBA by another lane waits for the first switch's
//!   fence (the stripe lock is held across it), so a freed block is never named by a
//!   durable map word while it is overwritten; recovery moves a word only to a free block and
//!   frees the block it replaces;
//! * **no redo record is ever replayed over a map word** written in place: the creation
//!   transaction logs the map when it is small (at most 4 KiB of new objects are logged,
//!   FORMAT.md section 4), and a replay of that record after a crash would reset the map to
//!   its initial contents, naming blocks that were reused since. [`PBlockStore::open`]
//!   therefore makes every committed transaction durable and retired (the watermark passes
//!   it) before the first in-place store, as hash maps do before their in-place writes
//!   (table.rs); the canary `BlockNoBarrier` skips this and is caught;
//! * freeing a store ([`PBlockStore::free_in`]) is refused while a handle is open, so no
//!   in-place store reaches memory the allocator may hand out again.
//!
//! **Threads.** Reads and writes take `&self`: share one handle (`Arc` or scoped threads).
//! What is serialised, and why:
//! * writes (and [`PBlockStore::set_zero`]) of LBAs on the same stripe (LBA modulo the stripe
//!   count, a power of two up to 1024) serialise their step 2, the switch (format 2: the
//!   record and the word) and its fence, under the stripe's lock: two writers of one LBA must
//!   not both take the same old block as their next free block (nor the same version), and
//!   the block a switch frees may be overwritten at once only because no reader can still be
//!   copying it (below). The data copy (step 1) and its crc run outside the lock;
//! * a writer holds one lane (one free block) from its copy to its swap: at most `spare`
//!   writes run at once; more writers wait for a lane;
//! * readers take no lock and write no shared memory: a reader notes the stripe's sequence
//!   count, reads the map word, copies the block, and retries when the count changed (a swap
//!   of its stripe ran meanwhile and may have freed the block it copied). Only durable data
//!   is ever returned: the count returns to even after the swap's fence.

use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::ptr::PPtr;
use crate::shared::PoolInner;
use crate::tx::{thread_in_tx, Tx};
use bytemuck::{Pod, Zeroable};
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub(crate) const BLK_MAGIC: u64 = u64::from_le_bytes(*b"DAISYBLK");
/// The newest block store format version (docs/FORMAT.md section 8e): 2, one fence per write
/// with a record per physical block. Version 1 stores (two fences per write, no records) are
/// read and written too, each by its own protocol.
pub(crate) const BLK_FORMAT: u32 = 2;
/// The first format version (no records).
pub(crate) const BLK_FORMAT_V1: u32 = 1;
/// Blocks up to this size are made in version 2 by [`PBlockStore::create_in`], larger ones in
/// version 1. Version 2 saves a fence per write but adds a crc32c pass over the data and a
/// record line per write: the fence dominates a small block's write, the checksum a large
/// one's (docs/FORMAT.md section 8e, "Which version": measured in the same run);
/// [`PBlockStore::create_in_format`] makes either.
pub(crate) const V2_MAX_BLOCK: u32 = 512;

/// The version [`PBlockStore::create_in`] makes for blocks of `block_size` bytes.
pub(crate) fn default_format(block_size: u32) -> u32 {
    if block_size <= V2_MAX_BLOCK {
        BLK_FORMAT
    } else {
        BLK_FORMAT_V1
    }
}
/// Bytes of a physical block's record (format 2): [`BlkRecord`].
const REC_BYTES: u64 = 32;
/// Record kinds (format 2).
const KIND_DATA: u32 = 1;
const KIND_ZERO: u32 = 2;
const KIND_FREE: u32 = 3;
pub(crate) const BLK_HEADER_BYTES: u64 = 64;
/// Map word flag: the LBA reads as zeros (never written since the store was created, or
/// zeroed by [`PBlockStore::set_zero`]); the physical block it names still belongs to it.
pub(crate) const ZERO: u64 = 1 << 63;
/// Map word bits that hold the physical block number.
const PHYS_MASK: u64 = (1 << 48) - 1;
const KNOWN_FLAGS: u64 = ZERO;
/// Most stripes (sequence counts) a store keeps in DRAM.
const MAX_STRIPES: u64 = 1024;
/// Spare blocks (write lanes) of a store made by [`PBlockStore::create_in`].
pub const DEFAULT_SPARE: u32 = 64;

const WHAT: &str = "block store";

/// The 64-byte header (one cache line). Immutable after creation.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub(crate) struct BlkHeader {
    pub magic: u64,
    pub format: u32,
    pub block_size: u32,
    pub nblocks: u64,
    pub spare: u32,
    /// 0 (no flags are defined; others are refused).
    pub flags: u32,
    /// Offset of the map object (`nblocks` little-endian u64 words).
    pub map: u64,
    /// Offset of the data object; physical block 0 starts at the next multiple of 64.
    pub data: u64,
    /// crc32c of bytes 0..48.
    pub crc: u32,
    pub pad: u32,
    pub reserved: u64,
}

const _: () = assert!(std::mem::size_of::<BlkHeader>() as u64 == BLK_HEADER_BYTES);

impl BlkHeader {
    fn crc_of(&self) -> u32 {
        crate::checksum::crc32c_append(0, &bytemuck::bytes_of(self)[..48])
    }
}

/// A physical block's record (format 2, docs/FORMAT.md section 8e): which LBA the block holds,
/// as which version of it, and a checksum that tells a whole block from a torn one. Written
/// with the block's data, in the same fence as the map word that names the block.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
struct BlkRecord {
    lba: u64,
    /// The LBA's version: one more than the record of the block it replaces (per LBA,
    /// strictly increasing over its acknowledged writes and zeroings).
    seq: u64,
    /// [`KIND_DATA`] (the block holds the LBA's data), [`KIND_ZERO`] (the LBA reads as zeros;
    /// the block's bytes are not covered), [`KIND_FREE`] (a spare block at creation).
    kind: u32,
    reserved: [u32; 2],
    /// crc32c of the block's data (kind data only) followed by bytes 0..28 of the record.
    crc: u32,
}

const _: () = assert!(std::mem::size_of::<BlkRecord>() as u64 == REC_BYTES);

impl BlkRecord {
    /// The record of `lba`'s version `seq`, of `kind`; `data_crc`: crc32c of the data (kind
    /// data), 0 otherwise.
    fn new(lba: u64, seq: u64, kind: u32, data_crc: u32) -> BlkRecord {
        let mut r = BlkRecord {
            lba,
            seq,
            kind,
            reserved: [0; 2],
            crc: 0,
        };
        r.crc = crate::checksum::crc32c_append(data_crc, &bytemuck::bytes_of(&r)[..28]);
        r
    }
}
/// Where things are, from a validated header.
#[derive(Clone, Copy, Debug)]
struct Geo {
    hdr: u64,
    bs: u64,
    nblocks: u64,
    nphys: u64,
    map: u64,
    /// Physical block 0.
    base: u64,
    data_obj: u64,
    /// The format version (1 or 2).
    format: u32,
    /// Format 2: the record of physical block 0 (the records follow the blocks).
    recs: u64,
}

impl Geo {
    #[inline(always)]
    fn entry_off(&self, lba: u64) -> u64 {
        self.map + 8 * lba
    }
    #[inline(always)]
    fn block_off(&self, phys: u64) -> u64 {
        self.base + phys * self.bs
    }
    #[inline(always)]
    fn rec_off(&self, phys: u64) -> u64 {
        self.recs + phys * REC_BYTES
    }
}

/// Bytes of the data object for `nphys` blocks of `bs` bytes (room to align block 0 to 64),
/// and in format 2 their records after them.
fn data_bytes(format: u32, bs: u64, nphys: u64) -> Option<u64> {
    let per = if format >= 2 { bs + REC_BYTES } else { bs };
    per.checked_mul(nphys)?.checked_add(64)
}

/// Physical block 0 of the data object at `data` (aligned to a cache line).
fn blocks_at(data: u64) -> u64 {
    data.next_multiple_of(64)
}

/// Format 2: the record of physical block 0, after the `nphys` blocks of `bs` bytes.
fn records_at(data: u64, bs: u64, nphys: u64) -> u64 {
    blocks_at(data) + nphys * bs
}

/// Check the limits of a geometry; the reason when it is refused.
fn check_limits(bs: u64, nblocks: u64, spare: u64) -> std::result::Result<(), String> {
    if !(PBlockStore::MIN_BLOCK_SIZE as u64..=PBlockStore::MAX_BLOCK_SIZE as u64).contains(&bs)
        || !bs.is_multiple_of(64)
    {
        return Err(format!(
            "block size {bs} (a multiple of 64 bytes from {} to {})",
            PBlockStore::MIN_BLOCK_SIZE,
            PBlockStore::MAX_BLOCK_SIZE
        ));
    }
    if nblocks == 0 || nblocks > PBlockStore::MAX_BLOCKS {
        return Err(format!(
            "{nblocks} blocks (1 to {})",
            PBlockStore::MAX_BLOCKS
        ));
    }
    if spare == 0 || spare > PBlockStore::MAX_SPARE as u64 {
        return Err(format!(
            "{spare} spare blocks (1 to {})",
            PBlockStore::MAX_SPARE
        ));
    }
    Ok(())
}

/// Validate the header at `hdr` as `read` shows it, and the objects it names (`size_of`: the
/// usable size of the allocated object at an offset, or why there is none).
fn load_geo(
    hdr: u64,
    read: impl Fn(u64, &mut [u8]) -> Result<()>,
    size_of: impl Fn(u64) -> std::result::Result<u64, String>,
) -> Result<Geo> {
    let bad = |why: String| Error::NotACollection {
        offset: hdr,
        what: WHAT,
        why,
    };
    let mut h = BlkHeader::zeroed();
    read(hdr, bytemuck::bytes_of_mut(&mut h))?;
    if h.magic != BLK_MAGIC {
        return Err(bad("no block store header there".into()));
    }
    if h.crc != h.crc_of() {
        return Err(bad("header checksum mismatch".into()));
    }
    if h.format != BLK_FORMAT && h.format != BLK_FORMAT_V1 {
        return Err(bad(format!(
            "block store format version {} is not supported (this build reads versions {BLK_FORMAT_V1} and {BLK_FORMAT})",
            h.format
        )));
    }
    if h.flags != 0 {
        return Err(bad(format!("unknown header flags {:#x}", h.flags)));
    }
    let (bs, nblocks, spare) = (h.block_size as u64, h.nblocks, h.spare as u64);
    check_limits(bs, nblocks, spare).map_err(|w| bad(format!("header names {w}")))?;
    let nphys = nblocks + spare;
    match size_of(h.map) {
        Ok(s) if s >= nblocks * 8 && h.map.is_multiple_of(8) => {}
        Ok(s) => return Err(bad(format!("map object of {s} bytes for {nblocks} blocks"))),
        Err(w) => return Err(bad(format!("map at {:#x}: {w}", h.map))),
    }
    let need = data_bytes(h.format, bs, nphys).ok_or_else(|| bad("data size overflows".into()))?;
    match size_of(h.data) {
        Ok(s) if s >= need => {}
        Ok(s) => {
            return Err(bad(format!(
                "data object of {s} bytes for {nphys} blocks of {bs}"
            )))
        }
        Err(w) => return Err(bad(format!("data at {:#x}: {w}", h.data))),
    }
    let base = blocks_at(h.data);
    Ok(Geo {
        hdr,
        bs,
        nblocks,
        nphys,
        map: h.map,
        base,
        data_obj: h.data,
        format: h.format,
        recs: records_at(h.data, bs, nphys),
    })
}

fn geo_of(inner: &PoolInner, hdr: u64) -> Result<Geo> {
    load_geo(
        hdr,
        |off, buf| {
            inner.heap_range(off, buf.len() as u64)?;
            inner.map.read_bytes(off, buf);
            Ok(())
        },
        |off| inner.allocated_object(off).map_err(String::from),
    )
}

/// A stripe's sequence count: even when no swap runs, odd while one does (its lock).
#[repr(align(64))]
struct Stripe(AtomicU64);

impl Stripe {
    /// Take the stripe's lock (count even -> odd); returns the count it held.
    #[inline]
    fn lock(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let v = self.0.load(Ordering::Relaxed);
            if v & 1 == 0
                && self
                    .0
                    .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return v;
            }
            backoff(&mut spins);
        }
    }

    #[inline]
    fn unlock(&self, v: u64) {
        self.0.store(v + 2, Ordering::Release);
    }
}

/// Spin a little, then give the core away (more threads than cores is a case the seed
/// measures: a lock holder that was preempted must get to run).
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A write lane: one free physical block, owned by the writer that holds the lane.
#[repr(align(64))]
struct Lane {
    busy: AtomicBool,
    free: AtomicU64,
}

static NEXT_HINT: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// The lane this thread tries first (threads spread over the lanes).
    static LANE_HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// A persistent array of fixed-size blocks, each block write atomic under power failure
/// (docs/FORMAT.md section 8e; the design and the crash reasoning are in this module's
/// source). One exclusive handle per store and process ([`open`](Self::open)); the handle is
/// `Sync`: share it between threads, which read and write at once.
///
/// ```no_run
/// use daisy::{PBlockStore, PPtr, Pool, PoolOptions};
/// # fn main() -> daisy::Result<()> {
/// let pool = Pool::create("/dev/shm/blocks.pool", &PoolOptions::new("blocks").size(64 << 20))?;
/// let root = pool.root::<PPtr<PBlockStore>>()?;
/// pool.transaction(|tx| {
///     let id = PBlockStore::create_in(tx, 4096, 1024)?; // 1024 blocks of 4 KiB
///     tx.write(root, &id)
/// })?;
/// let store = PBlockStore::open(&pool, pool.read(root))?;
/// store.write(7, &[0xab; 4096])?;          // durable and atomic when it returns
/// let mut buf = vec![0u8; 4096];
/// store.read(7, &mut buf)?;
/// assert_eq!(buf[0], 0xab);
/// store.read(8, &mut buf)?;                  // never written: zeros
/// assert!(buf.iter().all(|&b| b == 0));
/// # Ok(()) }
/// ```
pub struct PBlockStore {
    pool: Pool,
    geo: Geo,
    stripes: Box<[Stripe]>,
    stripe_mask: u64,
    lanes: Box<[Lane]>,
}

impl std::fmt::Debug for PBlockStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PBlockStore@{:#x} ({} blocks of {} bytes)",
            self.geo.hdr, self.geo.nblocks, self.geo.bs
        )
    }
}

impl PBlockStore {
    /// The newest block store format version (docs/FORMAT.md section 8e). Stores of version
    /// 1 are read and written too (two fences per write); any other version is refused, never
    /// misread.
    pub const FORMAT: u32 = BLK_FORMAT;
    /// Blocks up to this size are made in version 2 by [`create_in`](Self::create_in) and
    /// [`create_in_with`](Self::create_in_with), larger ones in version 1 (each measured
    /// faster there: docs/FORMAT.md section 8e, "Which version").
    pub const V2_MAX_BLOCK: u32 = V2_MAX_BLOCK;
    /// The first block store format version, still read and written.
    pub const FORMAT_V1: u32 = BLK_FORMAT_V1;
    /// Smallest block size.
    pub const MIN_BLOCK_SIZE: u32 = 64;
    /// Largest block size.
    pub const MAX_BLOCK_SIZE: u32 = 1 << 20;
    /// Most blocks a store may have.
    pub const MAX_BLOCKS: u64 = 1 << 40;
    /// Most spare blocks (write lanes).
    pub const MAX_SPARE: u32 = 4096;
    /// Spare blocks (write lanes) of a store made by [`create_in`](Self::create_in).
    pub const DEFAULT_SPARE: u32 = DEFAULT_SPARE;

    /// Create a store of `nblocks` blocks of `block_size` bytes (a multiple of 64, from 64 B
    /// to 1 MiB) inside `tx`, every block reading as zeros, with [`Self::DEFAULT_SPARE`] spare
    /// blocks (at most that many writes run at once). Store the pointer somewhere reachable in
    /// the same transaction. The pool must have room for the data (`(nblocks + spare) *
    /// block_size` bytes, plus a 32-byte record per block in format 2, which this makes for
    /// blocks of up to [`Self::V2_MAX_BLOCK`] bytes) and the map (8 bytes per block).
    pub fn create_in(tx: &mut Tx, block_size: u32, nblocks: u64) -> Result<PPtr<PBlockStore>> {
        Self::create_in_with(tx, block_size, nblocks, DEFAULT_SPARE)
    }

    /// [`create_in`](Self::create_in) with `spare` spare blocks (1 to [`Self::MAX_SPARE`]).
    pub fn create_in_with(
        tx: &mut Tx,
        block_size: u32,
        nblocks: u64,
        spare: u32,
    ) -> Result<PPtr<PBlockStore>> {
        Self::create_in_format(tx, block_size, nblocks, spare, default_format(block_size))
    }

    /// [`create_in_with`](Self::create_in_with) in block store format version `format`: 1 (two
    /// fences per write, no records: what builds before format 2 read) or 2 ([`Self::FORMAT`]:
    /// one fence per write, a 32-byte record with a crc32c per block, recovery at open;
    /// docs/FORMAT.md section 8e). `create_in_with` picks by block size
    /// ([`Self::V2_MAX_BLOCK`]).
    pub fn create_in_format(
        tx: &mut Tx,
        block_size: u32,
        nblocks: u64,
        spare: u32,
        format: u32,
    ) -> Result<PPtr<PBlockStore>> {
        if format != BLK_FORMAT && format != BLK_FORMAT_V1 {
            return Err(Error::Unsupported(format!(
                "{WHAT}: format version {format} (this build writes {BLK_FORMAT_V1} and {BLK_FORMAT})"
            )));
        }
        let (bs, spare64) = (block_size as u64, spare as u64);
        check_limits(bs, nblocks, spare64)
            .map_err(|w| Error::Unsupported(format!("{WHAT}: {w}")))?;
        let nphys = nblocks + spare64;
        let data_len = data_bytes(format, bs, nphys)
            .ok_or_else(|| Error::Unsupported(format!("{WHAT}: data size overflows")))?;
        // The data area is never read before a block is written (a ZERO word reads as zeros,
        // a free block is written before a word names it): left as the allocator gives it.
        // Format 2's records are written here (below).
        let data = tx.alloc_uninit(data_len)?;
        let map = tx.alloc_uninit(nblocks * 8)?;
        // LBA i starts in physical block i, reading as zeros; blocks nblocks.. are the spares.
        // Written in place into the new object (logged when the new objects total at most
        // 4 KiB, else flushed before the commit record: FORMAT.md section 4).
        let mut buf = Vec::with_capacity(8192 * 8);
        let mut lba = 0u64;
        while lba < nblocks {
            let n = (nblocks - lba).min(8192);
            buf.clear();
            for i in lba..lba + n {
                buf.extend_from_slice(&(i | ZERO).to_le_bytes());
            }
            tx.write_bytes(map + lba * 8, &buf)?;
            lba += n;
        }
        if format >= 2 {
            // Every block's record: LBA i's version 0, zeros, in block i; the spares free.
            // (Recovery trusts a record only through its checksum: these make every named
            // block's record valid from the start, invariant 4.)
            let recs = records_at(data, bs, nphys);
            let mut p = 0u64;
            while p < nphys {
                let n = (nphys - p).min(2048);
                buf.clear();
                for q in p..p + n {
                    let r = if q < nblocks {
                        BlkRecord::new(q, 0, KIND_ZERO, 0)
                    } else {
                        BlkRecord::new(0, 0, KIND_FREE, 0)
                    };
                    buf.extend_from_slice(bytemuck::bytes_of(&r));
                }
                tx.write_bytes(recs + p * REC_BYTES, &buf)?;
                p += n;
            }
        }
        let mut h = BlkHeader {
            magic: BLK_MAGIC,
            format,
            block_size,
            nblocks,
            spare,
            flags: 0,
            map,
            data,
            crc: 0,
            pad: 0,
            reserved: 0,
        };
        h.crc = h.crc_of();
        Ok(PPtr::from_offset(tx.alloc(&h)?.offset()))
    }

    /// Open the store at `id` as this process's handle to it. Validates the header and the
    /// objects it names, makes every committed transaction of the pool durable and retired
    /// (so that no recovery replays one over the in-place map writes that follow: module
    /// comment), and reads the map once (8 bytes per block) to find the free blocks, checking
    /// that no physical block is named twice. Fails inside a transaction of this thread
    /// ([`Error::Unsupported`]), while another handle is open ([`Error::CollectionInUse`]),
    /// and on a damaged store ([`Error::NotACollection`], [`Error::Corrupt`]).
    pub fn open(pool: &Pool, id: PPtr<PBlockStore>) -> Result<PBlockStore> {
        let inner = &*pool.inner;
        if thread_in_tx() {
            return Err(Error::Unsupported(format!(
                "{WHAT}: open it outside a transaction (a transaction still to commit could write the map after the handle's first in-place store)"
            )));
        }
        let geo = geo_of(inner, id.offset())?;
        if !inner.claim_object(geo.hdr) {
            return Err(Error::CollectionInUse {
                offset: geo.hdr,
                what: WHAT,
            });
        }
        let r = Self::open_claimed(pool, geo);
        if r.is_err() {
            inner.release_object(geo.hdr);
        }
        r
    }

    fn open_claimed(pool: &Pool, geo: Geo) -> Result<PBlockStore> {
        let inner = &*pool.inner;
        // The barrier: every transaction committed so far (the creating one among them) is
        // durable and below the persisted watermark, so recovery never replays it.
        let newest = inner
            .lanes
            .next_seq
            .load(Ordering::SeqCst)
            .saturating_sub(1);
        if !sim_fault!(BlockNoBarrier) {
            inner.advance_watermark(newest)?;
        }
        // The free blocks: the physical blocks no map word names.
        let mut named = vec![0u64; geo.nphys.div_ceil(64) as usize];
        let mut words = vec![0u8; 8 * 4096];
        let mut lba = 0;
        while lba < geo.nblocks {
            let n = (geo.nblocks - lba).min(4096);
            let chunk = &mut words[..8 * n as usize];
            inner.map.read_bytes(geo.entry_off(lba), chunk);
            for (i, w) in chunk.chunks_exact(8).enumerate() {
                let w = u64::from_le_bytes(w.try_into().unwrap());
                let l = lba + i as u64;
                let phys = decode(w, geo.nphys).map_err(|why| Error::Corrupt {
                    path: inner.path.clone(),
                    detail: format!("{WHAT} at {:#x}: LBA {l}: {why}", geo.hdr),
                })?;
                let (word, bit) = ((phys / 64) as usize, 1u64 << (phys % 64));
                if named[word] & bit != 0 {
                    return Err(Error::Corrupt {
                        path: inner.path.clone(),
                        detail: format!(
                            "{WHAT} at {:#x}: LBA {l} names physical block {phys}, which another LBA names too",
                            geo.hdr
                        ),
                    });
                }
                named[word] |= bit;
            }
            lba += n;
        }
        // Format 2: settle the writes a crash interrupted (module comment, "Recovery"), before
        // the free blocks are taken from the map: a switched word frees another block.
        if geo.format >= 2 {
            let plan = recovery_plan(inner, &geo, &named);
            for &(l, w) in &plan {
                let off = geo.entry_off(l);
                let old: u64 = inner.map.read(off);
                inner.store_word_flushed(off, w);
                let (o, n) = (old & PHYS_MASK, w & PHYS_MASK);
                named[(o / 64) as usize] &= !(1u64 << (o % 64));
                named[(n / 64) as usize] |= 1u64 << (n % 64);
            }
            if !plan.is_empty() {
                inner
                    .persist
                    .fence()
                    .map_err(|e| inner.io_err("persist", e))?;
            }
        }
        let free: Vec<u64> = (0..geo.nphys).filter(|&p| !bit_of(&named, p)).collect();
        // nblocks distinct names among nblocks + spare blocks: exactly spare are free.
        debug_assert_eq!(free.len() as u64, geo.nphys - geo.nblocks);
        let lanes = free
            .into_iter()
            .map(|p| Lane {
                busy: AtomicBool::new(false),
                free: AtomicU64::new(p),
            })
            .collect();
        let nstripes = geo.nblocks.next_power_of_two().min(MAX_STRIPES);
        Ok(PBlockStore {
            pool: pool.clone(),
            geo,
            stripes: (0..nstripes).map(|_| Stripe(AtomicU64::new(0))).collect(),
            stripe_mask: nstripes - 1,
            lanes,
        })
    }

    /// The store's header pointer (what to store to find it again).
    pub fn id(&self) -> PPtr<PBlockStore> {
        PPtr::from_offset(self.geo.hdr)
    }

    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.geo.bs as usize
    }

    /// Number of blocks (LBAs `0..len()`).
    pub fn len(&self) -> u64 {
        self.geo.nblocks
    }

    /// Always false: a store has at least one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The store's format version ([`Self::FORMAT_V1`]: two fences per write; 2: one fence
    /// and a record per block), fixed at creation.
    pub fn format(&self) -> u32 {
        self.geo.format
    }

    /// Spare blocks: the most writes that run at once.
    pub fn spare(&self) -> u32 {
        self.lanes.len() as u32
    }

    /// Map in every page of the store's map and data area now (one read per page; nothing is
    /// written), so that later writes do not each pay a page fault the first time they touch
    /// a page: a few microseconds per 4 KiB page on a virtual machine, 16,384 faults for a
    /// store of 64 MiB. The pool file's space is allocated already (a pool is created with
    /// `posix_fallocate`): this costs page-table entries, not memory. What PMDK's
    /// `prefault.at_open` does for libpmemobj pools, and what `Pool::create` does for the log
    /// slots; not done by [`open`](Self::open) itself, since a store of many GiB would take
    /// seconds to open. Returns the pages touched.
    pub fn prefault(&self) -> u64 {
        let inner = &*self.pool.inner;
        let g = &self.geo;
        let page = crate::map::page_size() as u64;
        let mut pages = 0;
        for (start, len) in [(g.map, g.nblocks * 8), (g.base, g.nphys * g.bs)] {
            let mut off = start;
            while off < start + len {
                // A read of the page's first word (the load itself is the point).
                std::hint::black_box(inner.map.read::<u64>(off & !7));
                pages += 1;
                off = (off / page + 1) * page;
            }
        }
        pages
    }

    fn check_args(&self, lba: u64, len: usize) -> Result<()> {
        if lba >= self.geo.nblocks {
            return Err(Error::IndexOutOfRange {
                index: lba.min(i64::MAX as u64) as i64,
                len: self.geo.nblocks,
            });
        }
        if len as u64 != self.geo.bs {
            return Err(Error::Unsupported(format!(
                "{WHAT}: a buffer of {len} bytes for blocks of {}",
                self.geo.bs
            )));
        }
        Ok(())
    }

    fn check_poisoned(&self) -> Result<()> {
        let inner = &*self.pool.inner;
        if inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: inner.path.clone(),
            });
        }
        Ok(())
    }

    #[inline(always)]
    fn stripe(&self, lba: u64) -> &Stripe {
        &self.stripes[(lba & self.stripe_mask) as usize]
    }

    /// Read block `lba` into `buf` (exactly [`block_size`](Self::block_size) bytes): its last
    /// acknowledged contents, or those of a write still running (whole, never a mix). Takes
    /// no lock (module comment, "Threads").
    pub fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        self.check_args(lba, buf.len())?;
        let inner = &*self.pool.inner;
        let g = &self.geo;
        let s = self.stripe(lba);
        let mut spins = 0;
        loop {
            let v1 = s.0.load(Ordering::Acquire);
            if v1 & 1 == 1 {
                backoff(&mut spins);
                continue;
            }
            // A plain aligned 8-byte load (atomic on x86-64; no simulator store hook).
            let w: u64 = inner.map.read(g.entry_off(lba));
            match decode(w, g.nphys) {
                Ok(_) if w & ZERO != 0 => buf.fill(0),
                Ok(phys) => inner.map.read_bytes(g.block_off(phys), buf),
                Err(why) => {
                    return Err(Error::Corrupt {
                        path: inner.path.clone(),
                        detail: format!("{WHAT} at {:#x}: LBA {lba}: {why}", g.hdr),
                    })
                }
            }
            // The copy happened before the count is read again (seqlock): a swap that began
            // meanwhile shows as a changed count, and the copy is retried.
            fence(Ordering::Acquire);
            if s.0.load(Ordering::Relaxed) == v1 {
                return Ok(());
            }
            backoff(&mut spins);
        }
    }

    /// Write `data` (exactly [`block_size`](Self::block_size) bytes) as block `lba`: atomic
    /// under power failure (after a crash the block holds the old contents or the new, whole)
    /// and durable when it returns. The data is copied into a free block, fenced, and one map
    /// word switched to it (module comment).
    pub fn write(&self, lba: u64, data: &[u8]) -> Result<()> {
        self.check_args(lba, data.len())?;
        self.check_poisoned()?;
        if self.geo.format >= 2 {
            let inner = &*self.pool.inner;
            let lane = self.acquire_lane();
            let f = lane.free.load(Ordering::Relaxed);
            // The data into the lane's free block: no map word names it (no reader sees it),
            // and its record still describes what the block held before, so no recovery
            // takes it until the record below is whole along with every line of the data.
            inner
                .persist
                .copy_nodrain_from(&inner.map, self.geo.block_off(f), data, 64);
            let data_crc = crate::checksum::crc32c_append(0, data);
            return self.switch_v2(lane, lba, f, KIND_DATA, data_crc);
        }
        self.write_v1(lba, data)
    }

    /// Format 2's switch (module comment, "Format 2"): under the stripe's lock, the record of
    /// `f` (the LBA's next version, one more than the named block's), the map word naming
    /// `f`, flushes of both lines, and the write's one fence, which also completes the data's
    /// write-back. The lock is held across the fence (a second writer of the LBA reads the
    /// version and the old block only once this switch is durable); the old block becomes the
    /// lane's free block after it.
    fn switch_v2(&self, lane: &Lane, lba: u64, f: u64, kind: u32, data_crc: u32) -> Result<()> {
        let inner = &*self.pool.inner;
        let g = &self.geo;
        let s = self.stripe(lba);
        let v = s.lock();
        let off = g.entry_off(lba);
        let old = inner.map.atomic_u64(off).load(Ordering::Relaxed);
        if kind == KIND_ZERO && old & ZERO != 0 {
            // Already zeros, durably (read under the lock, which every switch holds across
            // its fence): nothing to write, the lane's block stays free.
            s.unlock(v);
            lane.busy.store(false, Ordering::Release);
            return Ok(());
        }
        let o = old & PHYS_MASK;
        let seq: u64 = inner.map.read(g.rec_off(o) + 8);
        let rec = BlkRecord::new(lba, seq.wrapping_add(1), kind, data_crc);
        inner.map.write(g.rec_off(f), &rec);
        inner.persist.flush(
            inner.map.at(g.rec_off(f), REC_BYTES as usize),
            REC_BYTES as usize,
        );
        let zero = if kind == KIND_ZERO { ZERO } else { 0 };
        inner.store_word_flushed(off, f | zero);
        let r = inner
            .persist
            .fence()
            .map_err(|e| inner.io_err("persist", e));
        s.unlock(v);
        // Not after a failed fence: the switch may or may not be durable (the pool is
        // poisoned anyway).
        if r.is_ok() {
            lane.free.store(o, Ordering::Relaxed);
        }
        lane.busy.store(false, Ordering::Release);
        r
    }

    /// Format 1's write: the data fenced, then the map word (module comment, "Format 1").
    fn write_v1(&self, lba: u64, data: &[u8]) -> Result<()> {
        let inner = &*self.pool.inner;
        let g = &self.geo;
        let lane = self.acquire_lane();
        let f = lane.free.load(Ordering::Relaxed);
        // 1. The data into the lane's free block: no map word names it, so no reader and no
        // crash image sees it yet. Then the fence that makes it durable before a word names
        // it (the canary BlockSwapBeforeData leaves it to step 2's fence, which completes the
        // data and the map word in no particular order).
        inner
            .persist
            .copy_nodrain_from(&inner.map, g.block_off(f), data, 64);
        if !sim_fault!(BlockSwapBeforeData) {
            if let Err(e) = inner.persist.fence() {
                lane.busy.store(false, Ordering::Release);
                return Err(inner.io_err("persist", e));
            }
        }
        // 2. Switch the map word under the stripe's lock, held across the word's fence.
        let s = self.stripe(lba);
        let v = s.lock();
        let off = g.entry_off(lba);
        let old = inner.map.atomic_u64(off).load(Ordering::Relaxed);
        let r = inner.store_word_durable(off, f);
        s.unlock(v);
        // 3. The old block is the lane's next free one. Not after a failed store: its word
        // may or may not be durable, and the pool is poisoned anyway.
        if r.is_ok() {
            lane.free.store(old & PHYS_MASK, Ordering::Relaxed);
        }
        lane.busy.store(false, Ordering::Release);
        r
    }

    /// Make block `lba` read as zeros: one map word stored (its physical block stays the
    /// LBA's, unread until the next write replaces it), atomic and durable when it returns.
    pub fn set_zero(&self, lba: u64) -> Result<()> {
        self.check_args(lba, self.geo.bs as usize)?;
        self.check_poisoned()?;
        let inner = &*self.pool.inner;
        if self.geo.format >= 2 {
            // A new version of kind zero in a free block (its bytes untouched and not
            // covered): the named block's record cannot be changed in place atomically.
            let lane = self.acquire_lane();
            let f = lane.free.load(Ordering::Relaxed);
            return self.switch_v2(lane, lba, f, KIND_ZERO, 0);
        }
        let s = self.stripe(lba);
        let v = s.lock();
        let off = self.geo.entry_off(lba);
        let old = inner.map.atomic_u64(off).load(Ordering::Relaxed);
        let r = if old & ZERO != 0 {
            Ok(())
        } else {
            inner.store_word_durable(off, old | ZERO)
        };
        s.unlock(v);
        r
    }

    /// Take a free lane, the calling thread's usual one when it is free.
    #[inline]
    fn acquire_lane(&self) -> &Lane {
        let n = self.lanes.len();
        let hint = LANE_HINT.with(|h| {
            if h.get() == usize::MAX {
                h.set(NEXT_HINT.fetch_add(1, Ordering::Relaxed));
            }
            h.get()
        });
        let mut spins = 0;
        loop {
            for k in 0..n {
                let lane = &self.lanes[(hint + k) % n];
                if !lane.busy.load(Ordering::Relaxed)
                    && lane
                        .busy
                        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return lane;
                }
            }
            backoff(&mut spins);
        }
    }

    /// Check the invariants (module comment; also run by `daisy pool check`). Reads the
    /// committed map as it is: with writes running in this process meanwhile, a word may be
    /// read mid-swap and a duplicate reported that is not there.
    pub fn check(&self) -> crate::MapCheck {
        check_block_store(&self.pool.inner, self.geo.hdr)
    }

    /// A reader of the committed blocks of the store at `id` that claims nothing and writes
    /// nothing: for checkers and verifiers of a pool nobody writes meanwhile (a crash image, a
    /// backup). A store whose handle is open elsewhere in this process is readable too, with
    /// no guarantee against its concurrent writes.
    pub fn reader(pool: &Pool, id: PPtr<PBlockStore>) -> Result<BlockReader<'_>> {
        let geo = geo_of(&pool.inner, id.offset())?;
        // Format 2: what opening the store would settle (an interrupted write), without
        // writing it.
        let settled = if geo.format >= 2 {
            let named = named_blocks(&pool.inner, &geo);
            recovery_plan(&pool.inner, &geo, &named)
                .into_iter()
                .collect()
        } else {
            Default::default()
        };
        Ok(BlockReader { pool, geo, settled })
    }

    /// Free the store at `id` in `tx` (its header, map and data), which the caller unlinks
    /// in the same transaction. Refused while a handle to it is open
    /// ([`Error::CollectionInUse`]): its writes go in place, outside any transaction.
    pub fn free_in(pool: &Pool, tx: &mut Tx, id: PPtr<PBlockStore>) -> Result<()> {
        if !std::ptr::eq(tx.pool_inner(), &*pool.inner) {
            return Err(Error::InvalidPointer {
                offset: id.offset(),
                why: "the transaction belongs to another pool than the block store",
            });
        }
        let geo = load_geo(
            id.offset(),
            |off, buf| tx.read_bytes(off, buf),
            |off| {
                tx.usable_size(PPtr::<u8>::from_offset(off))
                    .map_err(|e| e.to_string())
            },
        )?;
        if !pool.inner.claim_object(geo.hdr) {
            return Err(Error::CollectionInUse {
                offset: geo.hdr,
                what: WHAT,
            });
        }
        pool.inner.release_object(geo.hdr);
        tx.free(PPtr::<u8>::from_offset(geo.data_obj))?;
        tx.free(PPtr::<u8>::from_offset(geo.map))?;
        tx.free(PPtr::<u8>::from_offset(geo.hdr))
    }
}

impl Drop for PBlockStore {
    fn drop(&mut self) {
        self.pool.inner.release_object(self.geo.hdr);
    }
}

/// The committed blocks of a store, read without a handle ([`PBlockStore::reader`]).
pub struct BlockReader<'a> {
    pool: &'a Pool,
    geo: Geo,
    /// Format 2: the map words recovery would store (LBA -> word), read in place of the map's.
    settled: std::collections::HashMap<u64, u64>,
}

impl BlockReader<'_> {
    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.geo.bs as usize
    }

    /// Number of blocks.
    pub fn len(&self) -> u64 {
        self.geo.nblocks
    }

    /// Always false: a store has at least one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Block `lba` into `buf` ([`Error::Corrupt`] when its map word is damaged).
    pub fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        let inner = &*self.pool.inner;
        let g = &self.geo;
        if lba >= g.nblocks || buf.len() as u64 != g.bs {
            return Err(Error::Unsupported(format!(
                "{WHAT}: block {lba} of {}, buffer of {} bytes for blocks of {}",
                g.nblocks,
                buf.len(),
                g.bs
            )));
        }
        let w: u64 = match self.settled.get(&lba) {
            Some(&w) => w,
            None => inner.map.read(g.entry_off(lba)),
        };
        match decode(w, g.nphys) {
            Ok(_) if w & ZERO != 0 => buf.fill(0),
            Ok(phys) => inner.map.read_bytes(g.block_off(phys), buf),
            Err(why) => {
                return Err(Error::Corrupt {
                    path: inner.path.clone(),
                    detail: format!("{WHAT} at {:#x}: LBA {lba}: {why}", g.hdr),
                })
            }
        }
        Ok(())
    }
}

/// The physical block a map word names, or why the word is damaged.
#[inline(always)]
fn decode(w: u64, nphys: u64) -> std::result::Result<u64, String> {
    let phys = w & PHYS_MASK;
    if w & !PHYS_MASK & !KNOWN_FLAGS != 0 {
        return Err(format!("map word {w:#018x} has unknown flag bits"));
    }
    if phys >= nphys {
        return Err(format!(
            "map word names physical block {phys}, beyond the {nphys} blocks"
        ));
    }
    Ok(phys)
}

/// Whether physical block `p`'s bit is set in `bits`.
#[inline(always)]
fn bit_of(bits: &[u64], p: u64) -> bool {
    bits[(p / 64) as usize] & (1 << (p % 64)) != 0
}

/// Format 2: physical block `p`'s record when it is whole (its checksum over the record and,
/// for a data block, the block's bytes matches) and names an LBA of the store; None for a torn
/// or damaged record, a torn block, or a free one. `buf`: scratch for the block's bytes.
fn valid_record(inner: &PoolInner, g: &Geo, p: u64, buf: &mut Vec<u8>) -> Option<BlkRecord> {
    // The canary: recovery that trusts a record without its checksum (a torn block whose
    // record reached the media, or whose map word did, passes for whole).
    let unchecked = sim_fault!(BlockRecoveryNoCrc);
    if p >= g.nphys {
        return None;
    }
    let r: BlkRecord = inner.map.read(g.rec_off(p));
    if r.lba >= g.nblocks || r.reserved != [0; 2] {
        return None;
    }
    let data_crc = match r.kind {
        KIND_DATA if !unchecked => {
            buf.resize(g.bs as usize, 0);
            inner.map.read_bytes(g.block_off(p), buf);
            crate::checksum::crc32c_append(0, buf)
        }
        KIND_DATA | KIND_ZERO => 0,
        _ => return None,
    };
    (unchecked || BlkRecord::new(r.lba, r.seq, r.kind, data_crc).crc == r.crc).then_some(r)
}

/// Format 2 recovery (module comment, "Recovery"), read-only: the map words to store so that
/// every LBA names its newest whole version. `named`: the blocks the map names now. Only the
/// free blocks can hold a write a crash interrupted, or the version such a write replaced:
/// for each LBA that a whole free block holds, the free block with its highest version
/// replaces the named block when that one is not a whole block of the LBA or holds an older
/// version. Returns (LBA, word) pairs in LBA order; storing them in any order, or some of them
/// before a crash, leaves a map that plans the rest.
fn recovery_plan(inner: &PoolInner, g: &Geo, named: &[u64]) -> Vec<(u64, u64)> {
    let mut buf = Vec::new();
    let mut best: std::collections::BTreeMap<u64, BlkRecord> = Default::default();
    let mut phys_of: std::collections::BTreeMap<u64, u64> = Default::default();
    for p in (0..g.nphys).filter(|&p| !bit_of(named, p)) {
        if let Some(r) = valid_record(inner, g, p, &mut buf) {
            if best.get(&r.lba).is_none_or(|b| r.seq > b.seq) {
                best.insert(r.lba, r);
                phys_of.insert(r.lba, p);
            }
        }
    }
    let mut plan = Vec::new();
    for (lba, cand) in best {
        let w: u64 = inner.map.read(g.entry_off(lba));
        if decode(w, g.nphys).is_err() {
            continue; // damage, reported by the map's scan (open refuses the store)
        }
        let keep = match valid_record(inner, g, w & PHYS_MASK, &mut buf) {
            Some(r) => r.lba == lba && r.seq >= cand.seq,
            None => false,
        };
        if !keep {
            let zero = if cand.kind == KIND_ZERO { ZERO } else { 0 };
            plan.push((lba, phys_of[&lba] | zero));
        }
    }
    plan
}

/// The blocks the map names (words that do not decode are skipped, a block named twice is
/// set once: for readers and checkers, which report those themselves).
fn named_blocks(inner: &PoolInner, g: &Geo) -> Vec<u64> {
    let mut named = vec![0u64; g.nphys.div_ceil(64) as usize];
    for lba in 0..g.nblocks {
        let w: u64 = inner.map.read(g.entry_off(lba));
        if let Ok(p) = decode(w, g.nphys) {
            named[(p / 64) as usize] |= 1 << (p % 64);
        }
    }
    named
}

/// Whether the object at `off` starts with a valid block store header (magic and checksum).
pub(crate) fn looks_like_block_store(inner: &PoolInner, off: u64) -> bool {
    let mut h = BlkHeader::zeroed();
    if inner.heap_range(off, BLK_HEADER_BYTES).is_err() {
        return false;
    }
    inner.map.read_bytes(off, bytemuck::bytes_of_mut(&mut h));
    h.magic == BLK_MAGIC && h.crc == h.crc_of()
}

/// Every object the store at `hdr` owns (header, map, data), for leak checks. Read-only.
pub fn block_store_objects(pool: &Pool, hdr: u64) -> Result<Vec<u64>> {
    let g = geo_of(&pool.inner, hdr)?;
    Ok(vec![g.hdr, g.map, g.data_obj])
}

/// Check the store at `hdr` (invariants 1-3 of the module comment). `entries`: LBAs that
/// hold data (not [`ZERO`]); `segments`: physical blocks; `depth`: 0.
pub(crate) fn check_block_store(inner: &PoolInner, hdr: u64) -> crate::MapCheck {
    let mut c = crate::MapCheck {
        header: hdr,
        kind: WHAT,
        ..Default::default()
    };
    let g = match geo_of(inner, hdr) {
        Ok(g) => g,
        Err(e) => {
            c.problems.push(e.to_string());
            return c;
        }
    };
    c.objects = vec![g.hdr, g.map, g.data_obj];
    c.segments = g.nphys;
    let mut named = vec![0u64; g.nphys.div_ceil(64) as usize];
    for lba in 0..g.nblocks {
        let w: u64 = inner.map.read(g.entry_off(lba));
        match decode(w, g.nphys) {
            Err(why) => c.problems.push(format!("LBA {lba}: {why}")),
            Ok(phys) => {
                let (word, bit) = ((phys / 64) as usize, 1u64 << (phys % 64));
                if named[word] & bit != 0 {
                    c.problems.push(format!(
                        "LBA {lba} names physical block {phys}, which another LBA names too"
                    ));
                }
                named[word] |= bit;
                if w & ZERO == 0 {
                    c.entries += 1;
                }
            }
        }
        if c.problems.len() >= 100 {
            c.problems.push("(more problems not listed)".into());
            break;
        }
    }
    if g.format >= 2 && c.problems.is_empty() {
        check_records(inner, &g, &named, &mut c);
    }
    c
}

/// Format 2's invariant 4: after what recovery would settle, every LBA's block holds a whole
/// record of that LBA (checksum over the record and the data), of kind zero exactly when the
/// map word reads as zeros. Reads every named block.
fn check_records(inner: &PoolInner, g: &Geo, named: &[u64], c: &mut crate::MapCheck) {
    let settled: std::collections::HashMap<u64, u64> =
        recovery_plan(inner, g, named).into_iter().collect();
    let mut buf = Vec::new();
    for lba in 0..g.nblocks {
        let w = match settled.get(&lba) {
            Some(&w) => w,
            None => inner.map.read(g.entry_off(lba)),
        };
        let p = w & PHYS_MASK;
        let why = match valid_record(inner, g, p, &mut buf) {
            None => Some("a torn or damaged block or record (checksum mismatch)".to_string()),
            Some(r) if r.lba != lba => Some(format!("a record of LBA {}", r.lba)),
            Some(r) if (r.kind == KIND_ZERO) != (w & ZERO != 0) => Some(format!(
                "a record of kind {} under a map word {} zeros",
                if r.kind == KIND_ZERO { "zero" } else { "data" },
                if w & ZERO != 0 {
                    "reading as"
                } else {
                    "not reading as"
                }
            )),
            Some(_) => None,
        };
        if let Some(why) = why {
            c.problems
                .push(format!("LBA {lba}: physical block {p} holds {why}"));
            if c.problems.len() >= 100 {
                c.problems.push("(more problems not listed)".into());
                return;
            }
        }
    }
}
