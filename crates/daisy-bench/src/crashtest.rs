//! The kill torture test (seed 000's persistence functional test, process-crash half).
//!
//! A child process runs transactions on a pool and reports each committed transaction's id on
//! stdout; the parent kills it with SIGKILL at a random moment, reopens the pool (running
//! recovery), and checks against a DRAM model:
//!
//! * every transaction reported committed is present (`last_tx >= acked`);
//! * at most the one in-flight transaction beyond that is present (`last_tx <= acked + 1`);
//! * the whole state equals the model after exactly `last_tx` transactions (nothing partial);
//! * the allocated objects are exactly the reachable ones (no leak from an unfinished
//!   transaction, no dangling pointer) and `pool check` passes.
//!
//! The workload is deterministic in (seed, transaction id), so the model replays it exactly and
//! any failure replays from the printed seed. Transactions exercise every log path: single and
//! multi-line updates, allocation, free, large objects spanning several chunks, big logs; and
//! the hash maps: inserts and removes in a transaction (segment splits and directory doublings
//! as the map grows), batches (copy-on-write segments), byte-string entries; the sequence
//! (`PSeq`, small chunks so that chunks are allocated and freed all the time): pushes and pops
//! at both ends, middle inserts, sets and removes, removals by value, trims, and sequences
//! retired and freed by `free_step` in bounded steps; and the ordered map (`PTreeMap` of
//! 256-byte nodes, [`crate::cttree`]): inserts and bursts of them (leaf and internal splits,
//! new roots), removals, pops, key-range and rank-range removals (merges, redistributions,
//! collapsed roots, nodes freed) and rank queries, compared entry by entry and rank by rank
//! with a `BTreeMap` after every kill.

use crate::cttree::{self, TreeModel, TreeOp};
use bytemuck::{Pod, Zeroable};
use daisy::{Error, PBytesMap, PHashMap, PPtr, PSeq, PTreeMap, Pool, PoolOptions, Tx};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const LAYOUT: &str = "daisy.crashtest";
const SLOTS: usize = 64;
const MAX_LIST: u64 = 400;
/// Keys of the fixed map in the `Maps` mix are drawn from 0..MAP_KEYS: enough for a few
/// segment splits and directory doublings. The `Mixed` mix draws from 0..MIXED_MAP_KEYS, a map
/// that stays near one segment (cheap to verify on every crash image; growth is the `Maps`
/// mix's job).
/// directory doublings, small enough to verify every crash image quickly.
const MAP_KEYS: u32 = 5000;
const MIXED_MAP_KEYS: u32 = 1500;
/// Keys of the byte-string map: "k0" .. "k63"; values of 0 to 59 bytes. Few keys and few size
/// classes keep the entries on few pages: every crash image maps the pool afresh, and each page
/// verification touches costs a page fault.
const BMAP_KEYS: u32 = 64;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct CtRoot {
    pub last_tx: u64,
    pub list_len: u64,
    pub head: PPtr<CtNode>,
    pub blob: PPtr<u8>,
    pub blob_len: u64,
    pub blob_gen: u64,
    pub map: PPtr<PHashMap<u32, u32>>,
    pub bmap: PPtr<PBytesMap>,
    /// Eight slots per cache line: updates of k slots touch up to k lines.
    pub slots: [u64; SLOTS],
    /// The object [`Op::Recycle`] replaces, and the transaction that wrote it.
    pub recycle: PPtr<u8>,
    pub recycle_gen: u64,
    /// The live sequence ([`SEQ_CHUNK`]-byte chunks).
    pub seq: PPtr<PSeq>,
    /// A retired sequence being freed by [`SeqOp::FreeStep`]s (null: none).
    pub seq_dead: PPtr<PSeq>,
    /// The ordered map ([`cttree::NODE_SIZE`]-byte nodes) and the last [`TreeOp::Probe`]'s
    /// result.
    pub tree: PPtr<PTreeMap>,
    pub tree_probe: cttree::Probe,
}

/// Chunk size of the workload's sequences: small (232 bytes of items, items over 58 bytes out
/// of line), so that pushes, pops and edits cross chunk boundaries every few operations.
pub const SEQ_CHUNK: u32 = 256;
/// Items past which the sequence ops of a plan drain the sequence (pops and trims) instead
/// of growing it: the sequence stays small enough to verify on every crash image.
const SEQ_HIGH: u64 = 160;
/// Objects a [`SeqOp::FreeStep`] frees at most (several steps per retired sequence).
const SEQ_FREE_BUDGET: u32 = 3;
/// The two values that recur among the sequence's items (one inline, one out of line), so
/// that removals by value find several.
const SEQ_DUPS: [&[u8]; 2] = [b"dup", &[b'D'; 90]];

/// Size of the objects [`Op::Recycle`] replaces: over 4 KiB, so that a new one's contents are
/// written in place and flushed before its record, not logged (tx.rs, `FRESH_LOG_MAX`).
pub const RECYCLE_SIZE: u64 = 12 * 1024;

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
pub struct CtNode {
    pub id: u64,
    pub payload: [u64; 6],
    pub next: PPtr<CtNode>,
}

/// One transaction's plan, a pure function of (seed, id, list length).
#[derive(Clone, Debug)]
enum Op {
    /// Only the root's id: a one-word transaction, which commits in place when no record is
    /// left to replay (tx.rs, "One-word transactions").
    IdOnly,
    Slots(Vec<usize>),
    Push,
    Pop,
    Blob(u64),
    /// The blob rewritten in place through the log with this transaction's bytes: a redo
    /// record larger than the log slot, which continues in an overflow extent (docs/FORMAT.md
    /// section 2.3).
    Rewrite,
    Big,
    MapInsert(Vec<(u32, u32)>),
    MapRemove(Vec<u32>),
    /// (insert?, key, value) as one batch.
    MapBatch(Vec<(bool, u32, u32)>),
    /// (insert?, key, value) through `PHashMap::insert`/`remove`: durable on its own (an
    /// in-place slot write when it can), then a transaction records the id. A crash in between
    /// leaves the operation done while the root names the transaction before; the verifiers
    /// accept that state, and a restarted workload repeats the operation (it is idempotent).
    MapOwn(bool, u32, u32),
    BytesInsert(u32, usize),
    BytesRemove(u32),
    /// In one transaction: a logged write into the recycled object, its free, and a new one
    /// of the same size class ([`RECYCLE_SIZE`]). They come in pairs of consecutive
    /// transactions, so the second allocation is where a block freed by the first would be
    /// reused if reuse did not wait for the watermark (the first's record, replayed over the
    /// new owner, would then corrupt it: docs/FORMAT.md section 7).
    Recycle,
    /// Sequence operations, each in the transaction with the id (see [`SeqOp`]).
    Seq(SeqOp),
    /// A transaction on another pool (`Ct::side_dir`, same mode) that copies 2 MiB into a new
    /// object and aborts, that pool dropped with nothing left to make durable; then the id
    /// alone, on this pool. In msync mode the aborted copy's pages wait for an msync that this
    /// pool's commit must not run (issue 16, bug 1).
    AbortElsewhere,
    /// An ordered-map operation, in the transaction with the id (see [`TreeOp`]).
    Tree(TreeOp),
    /// The id into these slots by direct stores (`Tx::add_range`, then a store through
    /// `Pool::direct`: the C API's PMDK-style path), after a transaction that declares the
    /// same slots, stores garbage into them and aborts. A crash before the commit must find
    /// the slots as the undo records kept them (docs/FORMAT.md section 2.5).
    DirectSlots(Vec<usize>),
}

/// A transaction's operation on the workload's sequences (its plan; positions are raw numbers
/// taken modulo the length when it runs, so the plan needs no more of the state than the
/// length).
#[derive(Clone, Debug)]
pub enum SeqOp {
    /// Push these items at the back (else the front), in one transaction.
    Push(bool, Vec<Vec<u8>>),
    /// Pop this many from the back (else the front).
    Pop(bool, u64),
    /// Insert at `raw % (len + 1)`.
    Insert(u64, Vec<u8>),
    /// Replace the item at `raw % len`.
    Set(u64, Vec<u8>),
    /// Remove the item at `raw % len`.
    RemoveAt(u64),
    /// Redis's LREM of one of [`SEQ_DUPS`] with this count.
    RemoveValue(usize, i64),
    /// Drop this many items from the front and from the back (Redis's LTRIM of the rest).
    Trim(u64, u64),
    /// Retire the live sequence: finish freeing the retired one if any (in this transaction),
    /// make the live one the retired one, and start a new live one with these items.
    Retire(Vec<Vec<u8>>),
    /// One bounded `free_step` of the retired sequence (nothing when there is none); the
    /// pointer is cleared in the transaction whose step frees its header.
    FreeStep,
}

/// Which transactions a workload runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mix {
    /// Everything: words, lists, blobs, large transactions, maps.
    #[default]
    Mixed,
    /// Hash-map operations only (inserts, removes, batches, byte-string entries), so the map
    /// grows through splits and directory doublings within a short run.
    Maps,
    /// Everything, with the larger key space of `Maps`: the kill torture's mix, so processes
    /// are also killed while the map grows (verification there runs once per kill, not once
    /// per crash image, so a bigger map costs little).
    Kill,
    /// `Mixed` for the power-failure simulator's `threads` workload, whose schedule hands out
    /// aligned bursts of [`THREADS_BURST`] transactions to one worker at a time: the first and
    /// the last transaction of every burst also write one word (slot 63). A worker's log then
    /// wraps around the record of its burst's first transaction while the previous worker's
    /// last record, which wrote the same word earlier and whose lane sits idle with its lines
    /// not yet durable, still waits to be retired: the case the slot-reuse rule exists for
    /// (docs/FORMAT.md section 5).
    Threads,
    /// Sequence operations only (and the recycled objects of every mix): the power-failure
    /// simulator's `seq` workload, so that chunk allocation and freeing, pushes and pops at
    /// both ends, middle edits and `free_step` fall under every crash point.
    Seq,
    /// Ordered-map operations only (and the recycled objects of every mix): the power-failure
    /// simulator's `tree` workload, so that splits, merges, node allocation and free fall
    /// under every crash point.
    Tree,
}

/// Transactions per burst of the `threads` workload (see [`Mix::Threads`]); more than a lane's
/// log slots there (4), so the burst wraps around them.
pub const THREADS_BURST: u64 = 12;

fn plan(seed: u64, id: u64, list_len: u64, seq_len: u64, mix: Mix) -> Op {
    let mut rng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Recycled objects in pairs, in every mix (the hash-map workload's own frees, of split
    // segments, come too seldom for a reuse to fall within the window where it would harm).
    if id % 16 == 8 || id % 16 == 9 {
        return Op::Recycle;
    }
    if mix == Mix::Seq {
        return Op::Seq(seq_plan(&mut rng, id, seq_len));
    }
    if mix == Mix::Tree {
        return Op::Tree(cttree::plan(&mut rng, cttree::TREE_KEYS));
    }
    if mix != Mix::Maps {
        // Transaction 1 allocates a blob of three chunks and transaction 2 replaces it with a
        // small one: the chunks go back to the heap holding data, and the runs that the next
        // transactions create for size classes they use first are carved from them (the case
        // in which a new run's bitmap must be zeroed on media: section 4).
        match id {
            1 => return Op::Blob(700_000),
            2 => return Op::Blob(1),
            _ => {}
        }
        if mix == Mix::Threads && matches!(id % THREADS_BURST, 0 | 1) {
            return Op::Slots(vec![SLOTS - 1]);
        }
        if id % 32 == 20 {
            return Op::AbortElsewhere;
        }
        // A blob of 200 KB, rewritten by the next transaction through the log (an overflow
        // record), then replaced by a large object at once: the chunks it takes are where the
        // overflow extent would be reused if reuse did not wait for the watermark.
        match id % 64 {
            3 => return Op::Blob(200_000),
            4 => return Op::Rewrite,
            5 => return Op::Blob(300_000),
            _ => {}
        }
        if id % 32 == 28 {
            // From a stream of its own, so the other transactions' plans stay as they were.
            let mut drng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7));
            let k = drng.gen_range(1..=3);
            return Op::DirectSlots((0..k).map(|_| drng.gen_range(0..SLOTS - 1)).collect());
        }
        match id % 16 {
            // A logged insert of a hot key, then at once a self-durable update of it, which
            // writes its slot in place: only the barrier before in-place writes keeps
            // recovery from replaying the insert over it (collections/table.rs).
            12 => return Op::MapInsert(vec![(0, id as u32)]),
            13 => return Op::MapOwn(true, 0, !(id as u32)),
            _ => {}
        }
    }
    let (roll, keys) = match mix {
        Mix::Mixed | Mix::Threads => (rng.gen_range(0..100), MIXED_MAP_KEYS),
        Mix::Kill => (rng.gen_range(0..100), MAP_KEYS),
        Mix::Maps => (rng.gen_range(60..100), MAP_KEYS),
        Mix::Seq | Mix::Tree => unreachable!("planned above"),
    };
    // The kill torture runs the sequence's operations too, in place of two fifths of the
    // transactions that touch no map (about a quarter of all), so the maps still grow (and
    // split) as fast per transaction as before; from a stream of its own, so the other mixes'
    // plans are unchanged.
    if mix == Mix::Kill && roll < 60 {
        let mut srng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        if srng.gen_ratio(2, 5) {
            return Op::Seq(seq_plan(&mut srng, id, seq_len));
        }
        // And the ordered map's, in place of a third of the rest (an eighth of all), from a
        // stream of their own too.
        let mut trng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xA24B_AED4_963E_E407));
        if trng.gen_ratio(1, 3) {
            return Op::Tree(cttree::plan(&mut trng, cttree::KILL_KEYS));
        }
    }
    match roll {
        0..=4 => Op::IdOnly,
        5..=19 => {
            let k = rng.gen_range(1..=8);
            Op::Slots((0..k).map(|_| rng.gen_range(0..SLOTS)).collect())
        }
        20..=37 if list_len < MAX_LIST => Op::Push,
        20..=37 => Op::Pop,
        38..=49 if list_len > 0 => Op::Pop,
        38..=49 => Op::Push,
        50..=56 => {
            // Sizes covering the smallest and the largest run classes, a middle one, and large
            // objects of one to three chunks (and so pool growth). A few fixed sizes, each
            // jittered within its size class: every class a lane touches costs it a 256 KiB
            // run, and small pools keep crash images cheap to check (the property test covers
            // the other sizes).
            const SIZES: [(u64, u64); 9] = [
                (1, 16),
                (97, 112),
                (1537, 1792),
                (28673, 32768),
                (57345, 65536),
                (73_729, 81_920),
                (98_305, 114_688),
                (114_689, 262_144),
                (262_145, 700_000),
            ];
            let (lo, hi) = SIZES[rng.gen_range(0..SIZES.len())];
            Op::Blob(rng.gen_range(lo..=hi))
        }
        57..=59 => Op::Big,
        60..=71 => Op::MapInsert(
            (0..rng.gen_range(1..=3))
                .map(|_| (map_key(&mut rng, keys), rng.gen()))
                .collect(),
        ),
        // Half on a few hot keys, which the transactional operations also pick: a
        // transaction and a later in-place write then often touch the same slots, the case the
        // barrier before in-place writes exists for (table.rs).
        72..=79 => Op::MapOwn(rng.gen_bool(0.6), map_key(&mut rng, keys), rng.gen()),
        80..=86 => Op::MapRemove(
            (0..rng.gen_range(1..=2))
                .map(|_| map_key(&mut rng, keys))
                .collect(),
        ),
        87..=90 => Op::MapBatch(
            (0..rng.gen_range(5..=40))
                .map(|_| (rng.gen_bool(0.8), rng.gen_range(0..keys), rng.gen()))
                .collect(),
        ),
        91..=96 => Op::BytesInsert(rng.gen_range(0..BMAP_KEYS), rng.gen_range(0..60)),
        _ => Op::BytesRemove(rng.gen_range(0..BMAP_KEYS)),
    }
}

/// An item of transaction `id`: one of [`SEQ_DUPS`] now and then, else distinct bytes of a
/// length that is mostly short, sometimes near the inline limit (58 bytes), sometimes out of
/// line.
fn seq_item(rng: &mut SmallRng, id: u64, k: u64) -> Vec<u8> {
    if rng.gen_ratio(1, 6) {
        return SEQ_DUPS[rng.gen_range(0..SEQ_DUPS.len())].to_vec();
    }
    let len = match rng.gen_range(0..10) {
        0..=6 => rng.gen_range(0..24),
        7 | 8 => rng.gen_range(24..59),
        _ => rng.gen_range(59..200),
    };
    (0..len)
        .map(|i| (id.wrapping_mul(131) ^ k.wrapping_mul(29) ^ i as u64) as u8)
        .collect()
}

fn seq_items(rng: &mut SmallRng, id: u64, n: u64) -> Vec<Vec<u8>> {
    (0..n).map(|k| seq_item(rng, id, k)).collect()
}

/// The sequence operation of transaction `id` when the live sequence holds `len` items.
fn seq_plan(rng: &mut SmallRng, id: u64, len: u64) -> SeqOp {
    let roll = rng.gen_range(0..100);
    if len > SEQ_HIGH && roll < 60 {
        return match roll % 3 {
            0 => SeqOp::Pop(rng.gen_bool(0.5), rng.gen_range(5..30)),
            1 => SeqOp::Trim(rng.gen_range(0..20), rng.gen_range(0..20)),
            _ => SeqOp::RemoveValue(rng.gen_range(0..2), 0),
        };
    }
    match roll {
        0..=27 => {
            let n = rng.gen_range(1..=3);
            SeqOp::Push(rng.gen_bool(0.5), seq_items(rng, id, n))
        }
        28..=31 => {
            let n = rng.gen_range(10..40);
            SeqOp::Push(rng.gen_bool(0.5), seq_items(rng, id, n))
        }
        32..=47 => SeqOp::Pop(rng.gen_bool(0.5), rng.gen_range(1..=3)),
        48..=57 => SeqOp::Insert(rng.gen(), seq_item(rng, id, 0)),
        58..=65 => SeqOp::Set(rng.gen(), seq_item(rng, id, 0)),
        66..=73 => SeqOp::RemoveAt(rng.gen()),
        74..=78 => SeqOp::RemoveValue(rng.gen_range(0..2), rng.gen_range(-2..=2)),
        79..=83 => SeqOp::Trim(rng.gen_range(0..3), rng.gen_range(0..3)),
        84..=95 => SeqOp::FreeStep,
        _ => {
            let n = rng.gen_range(0..12);
            SeqOp::Retire(seq_items(rng, id, n))
        }
    }
}

/// Keys of the fixed-size map's operations: half from a few hot keys, the rest spread.
fn map_key(rng: &mut SmallRng, keys: u32) -> u32 {
    if rng.gen_ratio(1, 2) {
        rng.gen_range(0..HOT_KEYS)
    } else {
        rng.gen_range(0..keys)
    }
}

/// See [`map_key`].
const HOT_KEYS: u32 = 4;

fn bkey(k: u32) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn bvalue(id: u64, k: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id.wrapping_mul(17) ^ (k as u64 * 31) ^ i as u64) as u8)
        .collect()
}

/// Order-independent digest of a map's contents (sum of mixed entries).
fn mix(a: u64, b: u64) -> u64 {
    let x = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 31)
}

fn digest_bytes(k: &[u8], v: &[u8]) -> u64 {
    let h = |d: &[u8]| {
        d.iter().fold(0xcbf2_9ce4_8422_2325u64, |a, &b| {
            (a ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    };
    mix(h(k), h(v) ^ v.len() as u64)
}

fn node_for(id: u64) -> CtNode {
    let mut payload = [0u64; 6];
    for (i, p) in payload.iter_mut().enumerate() {
        *p = id.wrapping_mul(31).wrapping_add(i as u64 * 7919);
    }
    CtNode {
        id,
        payload,
        next: PPtr::null(),
    }
}

thread_local! {
    /// The last expected blob, ((len, gen), bytes): verifying many crash images of one state
    /// compares with memcmp instead of regenerating the pattern each time.
    static EXPECTED_BLOB: std::cell::RefCell<((u64, u64), Vec<u8>)> =
        const { std::cell::RefCell::new(((u64::MAX, 0), Vec::new())) };
}

fn blob_byte(gen: u64, i: u64) -> u8 {
    (gen.wrapping_mul(131).wrapping_add(i.wrapping_mul(7))) as u8
}

/// The DRAM model of the pool's contents.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub last_tx: u64,
    pub slots: Vec<u64>,
    /// Node ids, head first.
    pub list: Vec<u64>,
    pub blob: Option<(u64, u64)>, // (len, gen)
    /// The transaction that wrote the recycled object (0: none yet).
    pub recycle: u64,
    pub map: HashMap<u32, u32>,
    /// key index -> (id that wrote it, value length)
    pub bmap: HashMap<u32, (u64, usize)>,
    pub mix: Mix,
    /// Order-independent digests of `map` and `bmap`, kept up to date by `apply` (verifying
    /// a crash image compares them instead of walking the model).
    pub map_digest: u64,
    pub bmap_digest: u64,
    /// The last applied transaction was an [`Op::MapOwn`]: its effect may be in a crash image
    /// whose root still names the transaction before.
    pub last_op_own: bool,
    /// The live sequence's items.
    pub seq: VecDeque<Vec<u8>>,
    /// The items the retired sequence held when it was retired (None: none was ever retired).
    /// How far `free_step` got is not modelled: a crash image's retired sequence is either
    /// gone, being freed, or intact with these items.
    pub seq_dead: Option<Vec<Vec<u8>>>,
    /// The ordered map and the last probe.
    pub tree: TreeModel,
}

impl Model {
    pub fn new() -> Model {
        Self::with_mix(Mix::Mixed)
    }

    pub fn with_mix(mix: Mix) -> Model {
        Model {
            slots: vec![0; SLOTS],
            mix,
            ..Default::default()
        }
    }

    fn apply(&mut self, seed: u64, id: u64) {
        let op = plan(
            seed,
            id,
            self.list.len() as u64,
            self.seq.len() as u64,
            self.mix,
        );
        self.last_op_own = matches!(op, Op::MapOwn(..));
        match op {
            Op::IdOnly | Op::AbortElsewhere => {}
            Op::Seq(op) => self.seq_apply(op),
            Op::Tree(op) => self.tree.apply(op, id),
            Op::Recycle => self.recycle = id,
            Op::Slots(s) | Op::DirectSlots(s) => s.iter().for_each(|&i| self.slots[i] = id),
            Op::Push => self.list.insert(0, id),
            Op::Pop => {
                self.list.remove(0);
            }
            Op::Blob(len) => self.blob = Some((len, id)),
            Op::Rewrite => {
                if let Some((len, _)) = self.blob {
                    self.blob = Some((len, id));
                }
            }
            Op::Big => {
                self.slots.iter_mut().for_each(|s| *s = id);
                for k in 0..3 {
                    self.list.insert(0, id * 4 + k);
                }
                self.list.remove(0);
            }
            Op::MapInsert(kv) => kv.into_iter().for_each(|(k, v)| self.map_insert(k, v)),
            Op::MapRemove(ks) => ks.iter().for_each(|&k| self.map_remove(k)),
            Op::MapOwn(true, k, v) => self.map_insert(k, v),
            Op::MapOwn(false, k, _) => self.map_remove(k),
            Op::MapBatch(ops) => ops.into_iter().for_each(|(ins, k, v)| {
                if ins {
                    self.map_insert(k, v);
                } else {
                    self.map_remove(k);
                }
            }),
            Op::BytesInsert(k, len) => {
                if let Some((oid, olen)) = self.bmap.insert(k, (id, len)) {
                    self.bmap_digest = self
                        .bmap_digest
                        .wrapping_sub(digest_bytes(&bkey(k), &bvalue(oid, k, olen)));
                }
                self.bmap_digest = self
                    .bmap_digest
                    .wrapping_add(digest_bytes(&bkey(k), &bvalue(id, k, len)));
            }
            Op::BytesRemove(k) => {
                if let Some((oid, olen)) = self.bmap.remove(&k) {
                    self.bmap_digest = self
                        .bmap_digest
                        .wrapping_sub(digest_bytes(&bkey(k), &bvalue(oid, k, olen)));
                }
            }
        }
        self.last_tx = id;
    }

    fn seq_apply(&mut self, op: SeqOp) {
        let q = &mut self.seq;
        let len = q.len() as u64;
        match op {
            SeqOp::Push(true, items) => q.extend(items),
            SeqOp::Push(false, items) => items.into_iter().for_each(|i| q.push_front(i)),
            SeqOp::Pop(back, n) => {
                for _ in 0..n.min(len) {
                    if back {
                        q.pop_back();
                    } else {
                        q.pop_front();
                    }
                }
            }
            SeqOp::Insert(raw, it) => q.insert((raw % (len + 1)) as usize, it),
            SeqOp::Set(raw, it) if len > 0 => q[(raw % len) as usize] = it,
            SeqOp::RemoveAt(raw) if len > 0 => {
                q.remove((raw % len) as usize);
            }
            SeqOp::Set(..) | SeqOp::RemoveAt(_) => {}
            SeqOp::RemoveValue(which, count) => {
                let v = SEQ_DUPS[which];
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut at: Vec<usize> = (0..q.len()).filter(|&i| q[i] == v).collect();
                if count < 0 {
                    at.reverse();
                }
                at.truncate(limit);
                at.sort_unstable();
                for &i in at.iter().rev() {
                    q.remove(i);
                }
            }
            SeqOp::Trim(front, back) => {
                if front + back >= len {
                    q.clear();
                } else {
                    q.truncate((len - back) as usize);
                    q.drain(..front as usize);
                }
            }
            SeqOp::Retire(items) => {
                self.seq_dead = Some(std::mem::take(q).into());
                self.seq = items.into();
            }
            SeqOp::FreeStep => {}
        }
    }

    fn map_insert(&mut self, k: u32, v: u32) {
        if let Some(old) = self.map.insert(k, v) {
            self.map_digest = self.map_digest.wrapping_sub(mix(k as u64, old as u64));
        }
        self.map_digest = self.map_digest.wrapping_add(mix(k as u64, v as u64));
    }

    fn map_remove(&mut self, k: u32) {
        if let Some(old) = self.map.remove(&k) {
            self.map_digest = self.map_digest.wrapping_sub(mix(k as u64, old as u64));
        }
    }

    pub fn advance_to(&mut self, seed: u64, id: u64) {
        while self.last_tx < id {
            let next = self.last_tx + 1;
            self.apply(seed, next);
        }
    }
}

fn push_node(tx: &mut Tx<'_>, root: PPtr<CtRoot>, id: u64) -> daisy::Result<()> {
    let r = tx.read(root)?;
    let mut n = node_for(id);
    n.next = r.head;
    let p = tx.alloc(&n)?;
    tx.write(root.byte_add(16), &p)?; // head
    tx.write(root.byte_add(8), &(r.list_len + 1))
}

fn pop_node(tx: &mut Tx<'_>, root: PPtr<CtRoot>) -> daisy::Result<()> {
    let r = tx.read(root)?;
    let n = tx.read(r.head)?;
    tx.free(r.head)?;
    tx.write(root.byte_add(16), &n.next)?;
    tx.write(root.byte_add(8), &(r.list_len - 1))
}

/// The pool with the workload's maps open (map handles are exclusive, so threads share this).
pub struct Ct {
    pub pool: Pool,
    pub root: PPtr<CtRoot>,
    pub mix: Mix,
    /// Where [`Op::AbortElsewhere`] creates its other pool (the pool's own directory).
    side_dir: PathBuf,
    map: Mutex<PHashMap<u32, u32>>,
    bmap: Mutex<PBytesMap>,
}

/// Create the root, the two maps and the ordered map if the pool has none yet (transaction
/// 0).
pub fn setup(pool: &Pool, seed: u64) -> daisy::Result<PPtr<CtRoot>> {
    let root = pool.root::<CtRoot>()?;
    if pool.read(root).map.is_null() {
        pool.transaction(|tx| {
            let m = PHashMap::<u32, u32>::create_in_with_seed(tx, seed)?;
            let b = PBytesMap::create_in_with_seed(tx, seed ^ 1)?;
            let s = PSeq::create_in_with(tx, SEQ_CHUNK)?;
            tx.write(root.byte_add(48), &m)?;
            tx.write(root.byte_add(56), &b)?;
            let t = PTreeMap::create_in_with(tx, cttree::NODE_SIZE)?;
            tx.write(root.byte_add(SEQ_OFF), &s)?;
            tx.write(root.byte_add(TREE_OFF), &t)
        })?;
    }
    Ok(root)
}

/// Offsets of `seq` and `seq_dead` in [`CtRoot`].
const SEQ_OFF: u64 = std::mem::offset_of!(CtRoot, seq) as u64;
const SEQ_DEAD_OFF: u64 = std::mem::offset_of!(CtRoot, seq_dead) as u64;
/// Offsets of `tree` and `tree_probe` in [`CtRoot`].
const TREE_OFF: u64 = std::mem::offset_of!(CtRoot, tree) as u64;
const TREE_PROBE_OFF: u64 = std::mem::offset_of!(CtRoot, tree_probe) as u64;

impl Ct {
    pub fn open(pool: &Pool, seed: u64) -> daisy::Result<Ct> {
        Self::open_mix(pool, seed, Mix::Mixed)
    }

    pub fn open_mix(pool: &Pool, seed: u64, mix: Mix) -> daisy::Result<Ct> {
        let root = setup(pool, seed)?;
        let r = pool.read(root);
        let side_dir = match pool.path().parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Ct {
            pool: pool.clone(),
            root,
            mix,
            side_dir,
            map: Mutex::new(PHashMap::open(pool, r.map)?),
            bmap: Mutex::new(PBytesMap::open(pool, r.bmap)?),
        })
    }

    /// Run transaction `id` of the workload.
    pub fn run_tx(&self, seed: u64, id: u64) -> daisy::Result<()> {
        let (pool, root) = (&self.pool, self.root);
        let r = pool.read(root);
        // Only the mixes with sequence operations plan by the sequence's length.
        let seq_len = if r.seq.is_null() || !matches!(self.mix, Mix::Seq | Mix::Kill) {
            0
        } else {
            pool.transaction(|tx| PSeq::view(pool, tx, r.seq)?.len(tx))?
        };
        let op = plan(seed, id, r.list_len, seq_len, self.mix);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Op::MapOwn(ins, k, v) = op {
            if ins {
                map.insert(k, v)?;
            } else {
                map.remove(&k)?;
            }
            return pool.transaction(|tx| tx.write(root.cast::<u64>(), &id));
        }
        if let Op::MapBatch(ops) = op {
            // One batch, small enough to be one transaction: the id goes with it.
            return map.batch(|b| {
                for (ins, k, v) in ops {
                    if ins {
                        b.insert(k, v)?;
                    } else {
                        b.remove(&k)?;
                    }
                }
                b.tx()?.write(root.cast::<u64>(), &id)
            });
        }
        if let Op::AbortElsewhere = op {
            self.abort_elsewhere()?;
        }
        if let Op::DirectSlots(s) = &op {
            // Declared, stored into, aborted: the slots get their bytes back at once.
            let aborted = pool.transaction(|tx| {
                for &i in s {
                    let off = root.byte_add::<u64>(64 + 8 * i as u64).offset();
                    tx.add_range(off, 8)?;
                    store_direct(pool, off, !id)?;
                }
                Err::<(), _>(Error::Aborted("direct stores undone".into()))
            });
            match aborted {
                Err(Error::Aborted(_)) => {}
                Err(e) => return Err(e),
                Ok(()) => unreachable!("the transaction returns an error"),
            }
        }
        let mut bmap = self.bmap.lock().unwrap_or_else(|e| e.into_inner());
        pool.transaction(|tx| {
            let r = tx.read(root)?;
            match op {
                Op::IdOnly | Op::AbortElsewhere => {}
                Op::Tree(op) => {
                    let probe = root.byte_add::<cttree::Probe>(TREE_PROBE_OFF);
                    cttree::run(pool, tx, r.tree, probe, op, id)?;
                }
                Op::Recycle => {
                    if !r.recycle.is_null() {
                        // A last, logged write into the old object, then its free.
                        tx.write_bytes(r.recycle.offset(), &[0x5a; 64])?;
                        tx.free(r.recycle)?;
                    }
                    let data: Vec<u8> = (0..RECYCLE_SIZE).map(|i| recycle_byte(id, i)).collect();
                    let n = tx.alloc_bytes(&data)?;
                    tx.write(root.byte_add(RECYCLE_OFF), &n)?;
                    tx.write(root.byte_add(RECYCLE_OFF + 8), &id)?;
                }
                Op::Slots(s) => {
                    for i in s {
                        tx.write(root.byte_add(64 + 8 * i as u64), &id)?;
                    }
                }
                Op::DirectSlots(s) => {
                    for i in s {
                        let off = root.byte_add::<u64>(64 + 8 * i as u64).offset();
                        tx.add_range(off, 8)?;
                        store_direct(pool, off, id)?;
                    }
                }
                Op::Push => push_node(tx, root, id)?,
                Op::Pop => pop_node(tx, root)?,
                Op::Rewrite => {
                    let r: CtRoot = tx.read(root)?;
                    if !r.blob.is_null() {
                        let data: Vec<u8> = (0..r.blob_len).map(|i| blob_byte(id, i)).collect();
                        tx.write_bytes(r.blob.offset(), &data)?;
                        tx.write(root.byte_add(40), &id)?;
                    }
                }
                Op::Blob(len) => {
                    let data: Vec<u8> = (0..len).map(|i| blob_byte(id, i)).collect();
                    let b = tx.alloc_bytes(&data)?;
                    if !r.blob.is_null() {
                        tx.free(r.blob)?;
                    }
                    tx.write(root.byte_add(24), &b)?;
                    tx.write(root.byte_add(32), &len)?;
                    tx.write(root.byte_add(40), &id)?;
                }
                Op::Big => {
                    // An object allocated and freed in the same transaction (a cancelled
                    // allocation): its block goes straight back to the cache and is reused by
                    // the pushes below; nothing of it may survive.
                    let tmp = tx.alloc_bytes(&[0xa5u8; 64])?;
                    tx.free(tmp)?;
                    tx.write(root.byte_add(64), &[id; SLOTS])?;
                    for k in 0..3 {
                        push_node(tx, root, id * 4 + k)?;
                    }
                    pop_node(tx, root)?;
                }
                Op::MapInsert(kv) => {
                    for (k, v) in kv {
                        map.insert_tx(tx, k, v)?;
                    }
                }
                Op::MapRemove(ks) => {
                    for k in ks {
                        map.remove_tx(tx, &k)?;
                    }
                }
                Op::MapBatch(_) | Op::MapOwn(..) => unreachable!("handled above"),
                Op::Seq(op) => seq_run(pool, tx, root, &r, op)?,
                Op::BytesInsert(k, len) => {
                    bmap.insert_tx(tx, &bkey(k), &bvalue(id, k, len))?;
                }
                Op::BytesRemove(k) => {
                    bmap.remove_tx(tx, &bkey(k))?;
                }
            }
            tx.write(root.cast::<u64>(), &id)
        })
    }
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|x| x.as_slice()).collect()
}

/// Run a sequence operation inside the workload's transaction (through a view).
fn seq_run(
    pool: &Pool,
    tx: &mut Tx<'_>,
    root: PPtr<CtRoot>,
    r: &CtRoot,
    op: SeqOp,
) -> daisy::Result<()> {
    match op {
        SeqOp::FreeStep => {
            if !r.seq_dead.is_null() && PSeq::free_step(pool, tx, r.seq_dead, SEQ_FREE_BUDGET)? {
                tx.write(root.byte_add(SEQ_DEAD_OFF), &PPtr::<PSeq>::null())?;
            }
            return Ok(());
        }
        SeqOp::Retire(items) => {
            if !r.seq_dead.is_null() {
                while !PSeq::free_step(pool, tx, r.seq_dead, u32::MAX)? {}
            }
            let s = PSeq::create_in_with(tx, SEQ_CHUNK)?;
            PSeq::view(pool, tx, s)?.push_back_many(tx, &refs(&items))?;
            tx.write(root.byte_add(SEQ_DEAD_OFF), &r.seq)?;
            return tx.write(root.byte_add(SEQ_OFF), &s);
        }
        _ => {}
    }
    let mut v = PSeq::view(pool, tx, r.seq)?;
    let len = v.len(tx)?;
    match op {
        SeqOp::Push(true, items) => {
            v.push_back_many(tx, &refs(&items))?;
        }
        SeqOp::Push(false, items) => {
            v.push_front_many(tx, &refs(&items))?;
        }
        SeqOp::Pop(true, n) => {
            v.pop_back_n(tx, n)?;
        }
        SeqOp::Pop(false, n) => {
            v.pop_front_n(tx, n)?;
        }
        SeqOp::Insert(raw, it) => {
            v.insert_at(tx, raw % (len + 1), &it)?;
        }
        SeqOp::Set(raw, it) if len > 0 => v.set(tx, (raw % len) as i64, &it)?,
        SeqOp::RemoveAt(raw) if len > 0 => {
            v.remove_at(tx, (raw % len) as i64)?;
        }
        SeqOp::Set(..) | SeqOp::RemoveAt(_) => {}
        SeqOp::RemoveValue(which, count) => {
            v.remove_value(tx, SEQ_DUPS[which], count)?;
        }
        SeqOp::Trim(front, back) => {
            // LTRIM front -(back + 1); the chunks it detaches are freed in this transaction.
            v.trim(tx, front as i64, -(back as i64) - 1)?;
            while !v.collect_garbage(tx, 64)? {}
        }
        SeqOp::FreeStep | SeqOp::Retire(_) => unreachable!("handled above"),
    }
    Ok(())
}

/// Bytes [`Op::AbortElsewhere`] copies into its aborted object: 2 MiB, so that the pages the
/// copy leaves waiting for an msync span more than a thread stack or another small mapping
/// that could take over the dropped pool's addresses (an msync of a range that is wholly
/// mapped again would succeed and hide the bug the operation is there for).
const SIDE_COPY: usize = 2 << 20;

/// Offset of `recycle` in [`CtRoot`].
const RECYCLE_OFF: u64 = std::mem::offset_of!(CtRoot, recycle) as u64;

fn recycle_byte(gen: u64, i: u64) -> u8 {
    (gen.wrapping_mul(29) ^ i.wrapping_mul(13)) as u8
}

/// Remove the other pools [`Op::AbortElsewhere`] of process `pid` left next to `pool` (a
/// killed child leaves the one it was using).
fn remove_side_pools(pool: &Path, pid: u32) {
    let dir = match pool.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = format!(".daisy-side-{pid}-");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&prefix) || name.starts_with(&format!("..daisy-side-{pid}-")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Store `word` at `off` straight into the pool, as a C program does through `daisy_direct`
/// after `daisy_tx_add_range` ([`Op::DirectSlots`]).
#[expect(
    unsafe_code,
    reason = "a direct store through `Pool::direct` is a raw pointer write: the path under test"
)]
fn store_direct(pool: &Pool, off: u64, word: u64) -> daisy::Result<()> {
    let p = pool.direct(off, 8)?;
    // SAFETY: `direct` checked that the 8 bytes at `p` lie in the mapped heap; the running
    // transaction declared them (`add_range`), and the workload runs one transaction on them
    // at a time. Unaligned: the write does not assume the slot's alignment.
    unsafe { std::ptr::write_unaligned(p.cast::<u64>(), word) };
    Ok(())
}

impl Ct {
    /// [`Op::AbortElsewhere`]'s part on the other pool.
    fn abort_elsewhere(&self) -> daisy::Result<()> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self
            .side_dir
            .join(format!(".daisy-side-{}-{n}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mode = match self.pool.mode() {
            daisy::Mode::Msync => daisy::ModeChoice::Msync,
            daisy::Mode::Pmem(_) => daisy::ModeChoice::Pmem,
        };
        let r = (|| {
            let side = Pool::create(
                &path,
                &PoolOptions::new("daisy.side")
                    .size(4 << 20)
                    .max_size(4 << 20)
                    .lanes(1)
                    .mode(mode),
            )?;
            side.drain()?;
            let aborted = side.transaction(|tx| {
                tx.alloc_bytes(&vec![0xab; SIDE_COPY])?;
                Err::<(), _>(Error::Aborted("side pool".into()))
            });
            debug_assert!(matches!(aborted, Err(Error::Aborted(_))));
            drop(side);
            Ok(())
        })();
        let _ = std::fs::remove_file(&path);
        r
    }
}

/// Everything reachable from the root (for leak and dangling-pointer checks).
pub fn reachable(pool: &Pool) -> daisy::Result<Vec<u64>> {
    let r = pool.read(pool.root::<CtRoot>()?);
    let mut out = reachable_outside_maps(pool)?;
    for m in [r.map.offset(), r.bmap.offset()] {
        if m != 0 {
            out.extend(daisy::map_objects(pool, m)?);
        }
    }
    for s in [r.seq.offset(), r.seq_dead.offset()] {
        if s != 0 {
            out.extend(daisy::seq_objects(pool, s)?);
        }
    }
    if !r.tree.is_null() {
        out.extend(daisy::tree_objects(pool, r.tree.offset())?);
    }
    Ok(out)
}

/// The root, the list and the blob (the maps' objects come from their own walk).
fn reachable_outside_maps(pool: &Pool) -> daisy::Result<Vec<u64>> {
    let root = pool.root::<CtRoot>()?;
    let r = pool.read(root);
    let mut out = vec![root.offset()];
    let mut p = r.head;
    let mut guard = 0;
    while !p.is_null() && guard < 10 * MAX_LIST {
        out.push(p.offset());
        p = pool.try_read(p)?.next;
        guard += 1;
    }
    if !r.blob.is_null() {
        out.push(r.blob.offset());
    }
    if !r.recycle.is_null() {
        out.push(r.recycle.offset());
    }
    Ok(out)
}

/// Compare the pool with the model; returns a list of differences.
pub fn verify(pool: &Pool, model: &Model) -> daisy::Result<Vec<String>> {
    let r = pool.read(pool.root::<CtRoot>()?);
    if r.map.is_null() || r.bmap.is_null() {
        return Ok(vec!["the maps are missing".into()]);
    }
    let m = PHashMap::open(pool, r.map)?;
    let b = PBytesMap::open(pool, r.bmap)?;
    verify_with(pool, &m, &b, model)
}

/// Does the pool hold `next` (the model after one more transaction, an [`Op::MapOwn`]) except
/// for the root's id, which still names the transaction before? That is the state a crash
/// leaves between the self-durable map operation and the transaction recording its id.
pub fn holds_unrecorded_own_op(pool: &Pool, next: &Model) -> daisy::Result<bool> {
    if !next.last_op_own {
        return Ok(false);
    }
    let want = format!("last_tx {} != model {}", next.last_tx - 1, next.last_tx);
    Ok(verify(pool, next)?.iter().all(|d| *d == want))
}

impl Ct {
    /// (segments, global depth, entries) of the fixed-size map.
    pub fn map_shape(&self) -> (u64, u32, u64) {
        let c = self.map.lock().unwrap_or_else(|e| e.into_inner()).check();
        (c.segments, c.depth, c.entries)
    }

    /// (nodes, height in levels, entries) of the ordered map.
    pub fn tree_shape(&self) -> (u64, u32, u64) {
        let tree = self.pool.read(self.root).tree.offset();
        let c = daisy::check_all(&self.pool)
            .ok()
            .and_then(|cs| cs.into_iter().find(|c| c.header == tree));
        c.map_or((0, 0, 0), |c| (c.segments, c.depth, c.entries))
    }

    /// [`verify`] through this context's open maps.
    pub fn verify(&self, model: &Model) -> daisy::Result<Vec<String>> {
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let b = self.bmap.lock().unwrap_or_else(|e| e.into_inner());
        verify_with(&self.pool, &m, &b, model)
    }
}

fn verify_with(
    pool: &Pool,
    m: &PHashMap<u32, u32>,
    b: &PBytesMap,
    model: &Model,
) -> daisy::Result<Vec<String>> {
    let mut bad = vec![];
    let root = pool.root::<CtRoot>()?;
    let r = pool.read(root);
    if r.last_tx != model.last_tx {
        bad.push(format!("last_tx {} != model {}", r.last_tx, model.last_tx));
    }
    for (i, (&a, &b)) in r.slots.iter().zip(&model.slots).enumerate() {
        if a != b {
            bad.push(format!("slot {i}: {a} != model {b} (partial transaction?)"));
        }
    }
    if r.list_len != model.list.len() as u64 {
        bad.push(format!(
            "list_len {} != model {}",
            r.list_len,
            model.list.len()
        ));
    }
    let mut p = r.head;
    for (i, &id) in model.list.iter().enumerate() {
        if p.is_null() {
            bad.push(format!("list ends at {i}, model has {}", model.list.len()));
            break;
        }
        let n = pool.try_read(p)?;
        let mut want = node_for(id);
        want.next = n.next;
        if n != want {
            bad.push(format!("list node {i}: {:?} != model id {id}", n.id));
        }
        p = n.next;
    }
    match model.blob {
        None if !r.blob.is_null() => bad.push("blob present, model has none".into()),
        None => {}
        Some((len, gen)) => {
            if r.blob_len != len || r.blob_gen != gen {
                bad.push(format!(
                    "blob {}/{} != model {len}/{gen}",
                    r.blob_len, r.blob_gen
                ));
            } else {
                let mut data = vec![0u8; len as usize];
                pool.try_read_bytes(r.blob.offset(), &mut data)?;
                let differs = EXPECTED_BLOB.with(|c| {
                    let mut c = c.borrow_mut();
                    if c.0 != (len, gen) {
                        *c = ((len, gen), (0..len).map(|i| blob_byte(gen, i)).collect());
                    }
                    data != c.1
                });
                if differs {
                    let i = (0..len)
                        .find(|&i| data[i as usize] != blob_byte(gen, i))
                        .unwrap_or(0);
                    bad.push(format!("blob byte {i} differs from the model"));
                }
            }
        }
    }
    match (model.recycle, r.recycle.is_null()) {
        (0, true) => {}
        (0, false) => bad.push("recycled object present, model has none".into()),
        (_, true) => bad.push("recycled object missing".into()),
        (gen, false) => {
            if r.recycle_gen != gen {
                bad.push(format!(
                    "recycled object of {} != model {gen}",
                    r.recycle_gen
                ));
            } else {
                let mut data = vec![0u8; RECYCLE_SIZE as usize];
                pool.try_read_bytes(r.recycle.offset(), &mut data)?;
                if let Some(i) =
                    (0..RECYCLE_SIZE).find(|&i| data[i as usize] != recycle_byte(gen, i))
                {
                    bad.push(format!("recycled object byte {i} differs from the model"));
                }
            }
        }
    }
    // The maps' checks walk their objects already: reuse that walk for reachability (this
    // runs on every crash image of the simulator).
    let mut reach = reachable_outside_maps(pool)?;
    reach.extend(verify_maps(m, b, model, &mut bad)?);
    reach.extend(verify_seqs(pool, &r, model, &mut bad));
    reach.extend(cttree::verify(
        pool,
        r.tree,
        r.tree_probe,
        &model.tree,
        &mut bad,
    )?);
    let rep = pool.check(Some(&reach));
    bad.extend(rep.problems.into_iter().map(|p| format!("pool check: {p}")));
    Ok(bad)
}

/// Compare the sequences with the model: the live one item by item, the retired one (if its
/// pointer is still set) intact with the items it was retired with or being freed; both
/// sound (`seq_objects` walks and checks them). Returns the objects they own.
fn verify_seqs(pool: &Pool, r: &CtRoot, model: &Model, bad: &mut Vec<String>) -> Vec<u64> {
    let mut objects = vec![];
    if r.seq.is_null() {
        bad.push("the sequence is missing".into());
        return objects;
    }
    match daisy::seq_items(pool, r.seq.offset()) {
        Ok(items) if items.len() == model.seq.len() && items.iter().eq(model.seq.iter()) => {}
        Ok(items) => {
            let first = (0..items.len().min(model.seq.len()))
                .find(|&i| items[i] != model.seq[i])
                .unwrap_or(items.len().min(model.seq.len()));
            bad.push(format!(
                "sequence: {} items, model {}; first difference at {first}",
                items.len(),
                model.seq.len()
            ));
        }
        Err(e) => bad.push(format!("sequence: {e}")),
    }
    match daisy::seq_objects(pool, r.seq.offset()) {
        Ok(o) => objects.extend(o),
        Err(e) => bad.push(format!("sequence objects: {e}")),
    }
    if r.seq_dead.is_null() {
        return objects;
    }
    let Some(want) = &model.seq_dead else {
        bad.push("a retired sequence, but the model retired none".into());
        return objects;
    };
    // Flags word (docs/FORMAT.md section 8d): bit 0, being freed.
    let freeing = pool
        .try_read(PPtr::<u32>::from_offset(r.seq_dead.offset() + 20))
        .map(|f| f & 1 != 0)
        .unwrap_or(false);
    match daisy::seq_items(pool, r.seq_dead.offset()) {
        Ok(items) if freeing && items.is_empty() => {}
        Ok(items) if !freeing && items == *want => {}
        Ok(items) => bad.push(format!(
            "retired sequence: {} items (being freed: {freeing}), model {}",
            items.len(),
            want.len()
        )),
        Err(e) => bad.push(format!("retired sequence: {e}")),
    }
    match daisy::seq_objects(pool, r.seq_dead.offset()) {
        Ok(o) => objects.extend(o),
        Err(e) => bad.push(format!("retired sequence objects: {e}")),
    }
    objects
}

/// Compare both maps with the model: entry count, an order-independent digest of the
/// contents, and the maps' own invariants (`check`). Returns the objects the maps own.
fn verify_maps(
    m: &PHashMap<u32, u32>,
    b: &PBytesMap,
    model: &Model,
    bad: &mut Vec<String>,
) -> daisy::Result<Vec<u64>> {
    let (mut n, mut d) = (0usize, 0u64);
    for e in m.iter()? {
        let (k, v) = e?;
        n += 1;
        d = d.wrapping_add(mix(k as u64, v as u64));
    }
    let want = model.map_digest;
    if n != model.map.len() || d != want || m.len()? != n as u64 {
        bad.push(format!(
            "hash map: {n} entries (len {}), model {}; contents {}",
            m.len()?,
            model.map.len(),
            if d == want { "match" } else { "differ" }
        ));
    }
    let (mut n, mut d) = (0usize, 0u64);
    for e in b.iter()? {
        let (k, v) = e?;
        n += 1;
        d = d.wrapping_add(digest_bytes(&k, &v));
    }
    let want = model.bmap_digest;
    if n != model.bmap.len() || d != want || b.len()? != n as u64 {
        bad.push(format!(
            "byte map: {n} entries, model {}; contents {}",
            model.bmap.len(),
            if d == want { "match" } else { "differ" }
        ));
    }
    let mut objects = vec![];
    for c in [m.check(), b.check()] {
        bad.extend(c.problems.iter().map(|p| format!("{} check: {p}", c.kind)));
        objects.extend(c.objects);
    }
    Ok(objects)
}

/// Child side: run transactions forever, printing each committed id.
pub fn child(path: &Path, seed: u64) -> daisy::Result<()> {
    let pool = Pool::open(path, LAYOUT)?;
    let ct = Ct::open_mix(&pool, seed, Mix::Kill)?;
    let mut id = pool.read(ct.root).last_tx;
    let out = std::io::stdout();
    let mut out = out.lock();
    loop {
        id += 1;
        ct.run_tx(seed, id)?;
        // The id goes out only after commit returned: it is durable.
        writeln!(out, "{id}").map_err(|e| Error::Aborted(e.to_string()))?;
        out.flush().map_err(|e| Error::Aborted(e.to_string()))?;
    }
}

/// Parameters of a kill-torture run.
#[derive(Clone, Debug)]
pub struct Config {
    pub pool: PathBuf,
    pub kills: u64,
    pub seed: u64,
    /// Longest random delay before a kill.
    pub max_delay: Duration,
    /// Program and leading arguments that start a child (`daisy crashtest-child`).
    pub child_cmd: Vec<String>,
    pub pool_size: u64,
}

/// Summary of a run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub kills: u64,
    pub transactions_verified: u64,
    pub lost: u64,
    pub failures: u64,
    pub recoveries_replayed: u64,
    pub max_open_micros: u64,
    /// The fixed-size hash map after the last recovery: entries, segments, global depth (it
    /// grows through splits while processes are being killed).
    pub map_entries: u64,
    pub map_segments: u64,
    pub map_depth: u32,
    /// The live sequence after the last recovery (items, chunks of [`SEQ_CHUNK`] bytes), and
    /// the most chunks it had after any recovery (it grows and shrinks through chunk
    /// allocations and frees while processes are being killed).
    pub seq_items: u64,
    pub seq_chunks: u64,
    pub seq_max_chunks: u64,
    /// The ordered map after the last recovery: entries, nodes, height in levels.
    pub tree_entries: u64,
    pub tree_nodes: u64,
    pub tree_height: u32,
    pub seed: u64,
    pub mode: String,
    pub fs: String,
    pub messages: Vec<String>,
}

/// Run the kill torture. `progress` is called after each kill.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Summary)) -> daisy::Result<Summary> {
    if cfg.pool.exists() {
        std::fs::remove_file(&cfg.pool).map_err(|e| Error::Io {
            path: cfg.pool.clone(),
            what: "remove old pool",
            source: e,
        })?;
    }
    let pool = Pool::create(
        &cfg.pool,
        &PoolOptions::new(LAYOUT)
            .size(cfg.pool_size)
            .max_size(cfg.pool_size * 4)
            .lanes(4),
    )?;
    setup(&pool, cfg.seed)?;
    let mut sum = Summary {
        seed: cfg.seed,
        mode: pool.mode().describe(),
        fs: pool.info().fs_type.to_string(),
        ..Default::default()
    };
    drop(pool);
    let mut model = Model::with_mix(Mix::Kill);
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    for kill in 0..cfg.kills {
        let (prog, args) = cfg.child_cmd.split_first().expect("child command");
        let mut child = Command::new(prog)
            .args(args)
            .arg(&cfg.pool)
            .arg("--seed")
            .arg(cfg.seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Io {
                path: PathBuf::from(prog),
                what: "spawn crash-test child",
                source: e,
            })?;
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = 0u64;
            let mut n = 0u64;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = line.trim().parse::<u64>() {
                    last = v;
                    n += 1;
                }
            }
            (last, n)
        });
        // Let the child open the pool and commit a few transactions, then kill it.
        let delay = Duration::from_micros(rng.gen_range(0..=cfg.max_delay.as_micros() as u64));
        let t0 = Instant::now();
        std::thread::sleep(delay);
        // SIGKILL (what `Child::kill` sends on Unix).
        let _ = child.kill();
        let status = child.wait().map_err(|e| Error::Aborted(e.to_string()))?;
        remove_side_pools(&cfg.pool, child.id());
        let (acked, n) = reader.join().unwrap();
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        if status.code().is_some() {
            // The child exited by itself: that is a failure of the child (bad pool, panic).
            sum.failures += 1;
            sum.messages.push(format!(
                "kill {kill}: child exited on its own ({status}) after {:?}: {}",
                t0.elapsed(),
                stderr.trim()
            ));
            break;
        }
        sum.kills += 1;
        let before = model.last_tx;
        let acked = acked.max(before);

        // Reopen: recovery runs here.
        let pool = Pool::open(&cfg.pool, LAYOUT)?;
        let rep = pool.recovery_report().clone();
        sum.recoveries_replayed += (rep.records_replayed > 0) as u64;
        sum.max_open_micros = sum.max_open_micros.max(rep.open_micros);
        let last = pool.read(pool.root::<CtRoot>()?).last_tx;
        if last < acked {
            sum.lost += acked - last;
            sum.messages.push(format!(
                "kill {kill}: transactions {}..={acked} were acknowledged but are missing (pool has {last}); replay: daisy crashtest --seed {} --kills {}",
                last + 1,
                cfg.seed,
                kill + 1
            ));
        }
        if last > acked + 1 {
            sum.failures += 1;
            sum.messages.push(format!(
                "kill {kill}: pool holds transaction {last}, but only {acked} were started"
            ));
        }
        model.advance_to(cfg.seed, last.min(acked + 1).max(before));
        let mut diffs = verify(&pool, &model)?;
        if !diffs.is_empty() && last <= acked {
            // The transaction in flight may be a self-durable map operation that took effect
            // before its id was recorded (see `Op::MapOwn`).
            let mut next = model.clone();
            next.advance_to(cfg.seed, last + 1);
            if holds_unrecorded_own_op(&pool, &next)? {
                diffs.clear();
            }
        }
        if !diffs.is_empty() {
            sum.failures += 1;
            for d in diffs.iter().take(5) {
                sum.messages.push(format!(
                    "kill {kill} (after tx {last}): {d}; replay: daisy crashtest --seed {} --kills {}",
                    cfg.seed,
                    kill + 1
                ));
            }
            break;
        }
        sum.transactions_verified += n;
        let r = pool.read(pool.root::<CtRoot>()?);
        for c in daisy::check_all(&pool)? {
            if c.header == r.map.offset() {
                sum.map_entries = c.entries;
                sum.map_segments = c.segments;
                sum.map_depth = c.depth;
            } else if c.header == r.seq.offset() {
                sum.seq_items = c.entries;
                sum.seq_chunks = c.segments;
                sum.seq_max_chunks = sum.seq_max_chunks.max(c.segments);
            } else if c.header == r.tree.offset() {
                sum.tree_entries = c.entries;
                sum.tree_nodes = c.segments;
                sum.tree_height = c.depth;
            }
        }
        pool.close()?;
        progress(&sum);
        if sum.lost > 0 {
            break;
        }
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids of the pool's list, head first (ids may repeat: a big transaction's nodes are
    /// numbered id * 4 + k).
    fn list_ids(pool: &Pool) -> daisy::Result<Vec<u64>> {
        let r = pool.read(pool.root::<CtRoot>()?);
        let mut out = Vec::new();
        let mut p = r.head;
        while !p.is_null() {
            let n = pool.read(p);
            out.push(n.id);
            p = n.next;
        }
        Ok(out)
    }

    /// The ordered-map mix in-process matches the model step by step, while the tree grows
    /// to three levels and shrinks (merges) again; every kind of operation runs; a wrong
    /// model is detected.
    #[test]
    fn tree_workload_matches_model() {
        let seed = 20261125;
        eprintln!("seed {seed}");
        let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let path = d.path().join("ct.pool");
        let pool = Pool::create(
            &path,
            &PoolOptions::new(LAYOUT)
                .size(8 << 20)
                .max_size(64 << 20)
                .lanes(2),
        )
        .unwrap();
        let ct = Ct::open_mix(&pool, seed, Mix::Tree).unwrap();
        let mut model = Model::with_mix(Mix::Tree);
        let tree = pool.read(ct.root).tree.offset();
        let shape = || {
            let c = daisy::check_all(&pool)
                .unwrap()
                .into_iter()
                .find(|c| c.header == tree)
                .unwrap();
            (c.entries, c.segments, c.depth)
        };
        let mut kinds = std::collections::BTreeSet::new();
        let (mut max_depth, mut max_nodes, mut shrank) = (0, 0, false);
        for id in 1..=3000 {
            if let Op::Tree(op) = plan(seed, id, 0, 0, Mix::Tree) {
                kinds.insert(format!("{op:?}").split('(').next().unwrap().to_string());
            }
            ct.run_tx(seed, id).unwrap();
            model.advance_to(seed, id);
            if id % 50 == 0 {
                let (entries, nodes, depth) = shape();
                assert_eq!(entries, model.tree.map.len() as u64, "after {id}");
                max_depth = max_depth.max(depth);
                shrank |= nodes + 3 < max_nodes;
                max_nodes = max_nodes.max(nodes);
            }
            if id % 250 == 0 {
                let diffs = ct.verify(&model).unwrap();
                assert!(diffs.is_empty(), "after {id}: {diffs:?}");
            }
        }
        eprintln!(
            "{} entries, at most {max_nodes} nodes and {max_depth} levels; ops {kinds:?}",
            model.tree.map.len()
        );
        assert!(max_depth >= 3, "the tree reached {max_depth} levels");
        assert!(shrank, "the tree never lost nodes (merges)");
        assert_eq!(kinds.len(), 7, "{kinds:?}");
        assert!(model.tree.map.len() > 50, "{}", model.tree.map.len());
        // A wrong model is detected: a missing entry, a changed value, a wrong probe.
        let mut wrong = model.clone();
        wrong.tree.map.pop_last();
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        let mut wrong = model.clone();
        wrong.tree.map.values_mut().nth(7).unwrap().push(1);
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        let mut wrong = model.clone();
        wrong.tree.probe[0] ^= 2;
        assert!(!ct.verify(&wrong).unwrap().is_empty());
    }

    /// Running the workload in-process matches the model step by step.
    #[test]
    fn workload_matches_model() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let path = d.path().join("ct.pool");
        let pool = Pool::create(
            &path,
            &PoolOptions::new(LAYOUT)
                .size(32 << 20)
                .max_size(128 << 20)
                .lanes(4),
        )
        .unwrap();
        let ct = Ct::open(&pool, 42).unwrap();
        let mut model = Model::new();
        for id in 1..=4000 {
            ct.run_tx(42, id).unwrap();
            model.advance_to(42, id);
            if id % 500 == 0 {
                let diffs = ct.verify(&model).unwrap();
                assert!(diffs.is_empty(), "{diffs:?}");
            }
        }
        // A wrong model is detected (the checker can fail).
        let mut wrong = model.clone();
        wrong.slots[3] ^= 1;
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        let mut wrong = model.clone();
        wrong.list.pop();
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        let mut wrong = model.clone();
        wrong.map_digest = wrong.map_digest.wrapping_add(1);
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        let mut wrong = model.clone();
        wrong.bmap_digest = wrong.bmap_digest.wrapping_add(1);
        assert!(!ct.verify(&wrong).unwrap().is_empty());
        assert!(model.map.len() > 1000, "the map grew: {}", model.map.len());
        // The incremental digests equal digests recomputed from the model's contents.
        let full = model
            .map
            .iter()
            .fold(0u64, |a, (&k, &v)| a.wrapping_add(mix(k as u64, v as u64)));
        assert_eq!(full, model.map_digest);
        let full = model.bmap.iter().fold(0u64, |a, (&k, &(id, len))| {
            a.wrapping_add(digest_bytes(&bkey(k), &bvalue(id, k, len)))
        });
        assert_eq!(full, model.bmap_digest);
        drop(ct);
        drop(pool);
        assert_eq!(
            list_ids(&Pool::open(&path, LAYOUT).unwrap()).unwrap(),
            model.list
        );
    }

    /// The sequence mixes (the simulator's `seq` workload and the kill torture's) match the
    /// model step by step: sequences grow, shrink, get retired and freed; a wrong model of
    /// either sequence is detected.
    #[test]
    fn sequence_workloads_match_model() {
        for mix in [Mix::Seq, Mix::Kill] {
            let d =
                tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
            let path = d.path().join("seq.pool");
            let pool = Pool::create(
                &path,
                &PoolOptions::new(LAYOUT)
                    .size(32 << 20)
                    .max_size(128 << 20)
                    .lanes(4),
            )
            .unwrap();
            let ct = Ct::open_mix(&pool, 7, mix).unwrap();
            let mut model = Model::with_mix(mix);
            let (mut longest, mut retired, mut freed) = (0, 0, 0);
            for id in 1..=3000 {
                let had_dead = !pool.read(ct.root).seq_dead.is_null();
                ct.run_tx(7, id).unwrap();
                model.advance_to(7, id);
                longest = longest.max(model.seq.len());
                let r = pool.read(ct.root);
                retired += matches!(plan(7, id, 0, 0, mix), Op::Seq(SeqOp::Retire(_))) as u32;
                freed += (had_dead && r.seq_dead.is_null()) as u32;
                if id % 250 == 0 {
                    let diffs = ct.verify(&model).unwrap();
                    assert!(diffs.is_empty(), "{mix:?} after {id}: {diffs:?}");
                }
            }
            eprintln!("{mix:?}: longest {longest}, retired {retired}, freed {freed}");
            assert!(
                longest > 40,
                "{mix:?}: the sequence grew to {longest} items"
            );
            if mix == Mix::Seq {
                assert!(
                    retired > 5 && freed > 0,
                    "{mix:?}: {retired} retired, {freed} freed"
                );
            }
            let mut wrong = model.clone();
            wrong.seq.push_back(b"extra".to_vec());
            assert!(!ct.verify(&wrong).unwrap().is_empty());
            if let Some(mut dead) = model.seq_dead.clone() {
                if !pool.read(ct.root).seq_dead.is_null() && !dead.is_empty() {
                    let freeing: u32 =
                        pool.read(PPtr::from_offset(pool.read(ct.root).seq_dead.offset() + 20));
                    if freeing == 0 {
                        dead.pop();
                        let mut wrong = model.clone();
                        wrong.seq_dead = Some(dead);
                        assert!(!ct.verify(&wrong).unwrap().is_empty());
                    }
                }
            }
        }
    }
}
