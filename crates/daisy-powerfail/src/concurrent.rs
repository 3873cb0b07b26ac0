//! The `concurrent` workload: four threads that really commit at the same time.
//!
//! Each thread runs its own numbered operations (a pure function of the seed, the thread and
//! the number, and of the thread's own data), on:
//! * its own data: words on its own cache line, a list (allocation and free), a blob (large
//!   objects: chunks, growth), and its word in a line of last-operation words that all threads
//!   write (a one-word transaction when nothing else changes: committed in place when the
//!   watermark allows it, logged otherwise);
//! * shared data under locks, held across the transaction as Daisy's isolation rule asks:
//!   shared words and a shared list under one lock, a hash map under its handle's lock
//!   (operations in a transaction, and self-durable ones that write a slot in place after the
//!   barrier that retires every committed transaction, then record the operation's number).
//!
//! Threads pause now and then (their lanes go idle with applied data not yet durable, which
//! others must help to durability), and the log has 4 slots per lane, so lanes that keep
//! committing reach slots whose records no durable claim covers yet and advance the watermark.
//!
//! **What a crash image must show.** A thread's operation counts as done once its transaction
//! returned; the thread records that, and the shared operations record their place in the
//! order of the lock, under the checker's lock (so no operation completes while a crash point
//! is checked). Then, per thread, the image holds its operations up to the last one recorded
//! or one more (the one in flight), wholly: its last-operation word says which, and its own
//! data must equal a model after that many operations. The shared data must equal a model of
//! the shared operations in lock order, plus the one in flight under each lock if its thread's
//! word says it is done (a self-durable map operation may also be done before its number is
//! recorded). Then `pool check` and reachability, as for every workload.
//!
//! The seed fixes the operations and the image sampling; the interleaving is the scheduler's,
//! so a failure names the seed but may need a few runs to reproduce.

use crate::{hook, remove_scratch, scratch_files, Ctx, Expect, WorkloadResult};
use anyhow::{anyhow, bail, Result};
use bytemuck::{Pod, Zeroable};
use daisy::sim;
use daisy::{PHashMap, PPtr, Pool, PoolOptions, Tx};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub const THREADS: usize = 4;
const LAYOUT: &str = "daisy.concurrent";
const SHARED_WORDS: usize = 4;
const MAX_LIST: usize = 40;
const MAP_KEYS: u32 = 300;
const HOT_KEYS: u32 = 8;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct CcRoot {
    /// Each thread's last operation done: one line that every thread writes.
    last: [u64; THREADS],
    _pad: [u64; 8 - THREADS],
    /// Each thread's own words, a line each.
    own: [[u64; 8]; THREADS],
    list: [PPtr<Node>; THREADS],
    list_len: [u64; THREADS],
    blob: [PPtr<u8>; THREADS],
    blob_len: [u64; THREADS],
    blob_gen: [u64; THREADS],
    /// Each thread's recycled object (`crashtest::RECYCLE_SIZE` bytes) and its writer.
    recycle: [PPtr<u8>; THREADS],
    recycle_gen: [u64; THREADS],
    /// Under the shared lock.
    shared: [u64; SHARED_WORDS],
    shared_list: PPtr<Node>,
    shared_len: u64,
    /// Under the map's lock.
    map: PPtr<PHashMap<u32, u32>>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
pub struct Node {
    tag: u64,
    fill: [u64; 2],
    next: PPtr<Node>,
}

fn node(tag: u64) -> Node {
    Node {
        tag,
        fill: [tag.wrapping_mul(3), !tag],
        next: PPtr::null(),
    }
}

/// An operation's tag: thread and number.
fn tag(t: usize, k: u64) -> u64 {
    (t as u64) << 48 | k
}

fn blob_byte(gen: u64, i: u64) -> u8 {
    (gen.wrapping_mul(151) ^ i.wrapping_mul(11)) as u8
}

const OFF_LAST: u64 = std::mem::offset_of!(CcRoot, last) as u64;
const OFF_OWN: u64 = std::mem::offset_of!(CcRoot, own) as u64;
const OFF_LIST: u64 = std::mem::offset_of!(CcRoot, list) as u64;
const OFF_LIST_LEN: u64 = std::mem::offset_of!(CcRoot, list_len) as u64;
const OFF_BLOB: u64 = std::mem::offset_of!(CcRoot, blob) as u64;
const OFF_BLOB_LEN: u64 = std::mem::offset_of!(CcRoot, blob_len) as u64;
const OFF_BLOB_GEN: u64 = std::mem::offset_of!(CcRoot, blob_gen) as u64;
const OFF_RECYCLE: u64 = std::mem::offset_of!(CcRoot, recycle) as u64;
const OFF_RECYCLE_GEN: u64 = std::mem::offset_of!(CcRoot, recycle_gen) as u64;
const RECYCLE_SIZE: u64 = daisy_bench::crashtest::RECYCLE_SIZE;
const OFF_SHARED: u64 = std::mem::offset_of!(CcRoot, shared) as u64;
const OFF_SHARED_LIST: u64 = std::mem::offset_of!(CcRoot, shared_list) as u64;
const OFF_SHARED_LEN: u64 = std::mem::offset_of!(CcRoot, shared_len) as u64;

#[derive(Clone, Debug)]
enum Op {
    /// Only the thread's last-operation word.
    IdOnly,
    Own(Vec<usize>),
    Push,
    Pop,
    Blob(u64),
    /// A logged write into the thread's recycled object, its free and a new one, in one
    /// transaction; in pairs (see `crashtest::Op::Recycle`).
    Recycle,
    /// Shared words (under the shared lock).
    Shared(Vec<usize>),
    /// Push onto the shared list, or pop when it is long (under the shared lock).
    SharedList,
    /// (insert?, key, value) in a transaction (under the map's lock).
    Map(Vec<(bool, u32, u32)>),
    /// A self-durable map operation, then a transaction for the number.
    MapOwn(bool, u32, u32),
}

impl Op {
    fn lock(&self) -> Option<Lock> {
        match self {
            Op::Shared(_) | Op::SharedList => Some(Lock::Shared),
            Op::Map(_) | Op::MapOwn(..) => Some(Lock::Map),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lock {
    Shared,
    Map,
}

/// Operation `k` of thread `t`: a seeded mix, except at fixed positions, which set up the
/// races the rules exist for:
/// * `k % 16 == 4`: shared word `t % 2`, then an idle spell (see `worker`). The other thread of
///   the same parity, writing that word in turn, then wraps its log (4 slots) around that
///   record while this lane sits idle with its own record of the word not yet retired: the
///   case of the slot-reuse rule (docs/FORMAT.md section 5). No other operation writes words
///   0 and 1.
/// * `k % 16` in 8, 9: a recycled object in consecutive transactions (reuse after free).
/// * `k % 64` in 26..=31: one-word transactions in a row, alone: the other threads wait
///   between their operations while the run makes every lane durable (`Pool::drain`, which
///   helps them) and commits its words, which then go in place (tx.rs, "One-word
///   transactions": in place only when no committed record is left to replay, which under
///   constant contention is seldom).
/// * `k % 64` in 12, 13: a logged insert of the thread's own hot key, then a self-durable
///   update of it, written in place after the barrier (collections/table.rs). Self-durable
///   map operations come only here: each runs a barrier that retires every lane's records,
///   and frequent barriers would leave no record old enough for the slot-reuse race.
fn plan(seed: u64, t: usize, k: u64, list_len: usize) -> Op {
    let mut rng =
        SmallRng::seed_from_u64(seed ^ tag(t, k).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xcc);
    match (k % 16, k % 64) {
        // A blob of two chunks, then a small one: the chunks go back to the heap holding data,
        // and runs created next for classes first used are carved from them (the case in which
        // a new run's bitmap must be zeroed on media: docs/FORMAT.md section 4).
        _ if k == 1 => return Op::Blob(300_000),
        _ if k == 2 => return Op::Blob(100),
        (4, _) => return Op::Shared(vec![t % 2]),
        (8 | 9, _) => return Op::Recycle,
        // Runs of one-word transactions: after `IN_PLACE_AFTER` logged ones a lane retires
        // everything committed, when no other lane holds undurable work, and goes in place.
        (_, 26..=31) => return Op::IdOnly,
        (_, 12) => return Op::Map(vec![(true, OWN_KEY + t as u32, k as u32)]),
        (_, 13) => return Op::MapOwn(true, OWN_KEY + t as u32, !(k as u32)),
        _ => {}
    }
    let key = |rng: &mut SmallRng| {
        if rng.gen_bool(0.5) {
            rng.gen_range(0..HOT_KEYS)
        } else {
            rng.gen_range(0..MAP_KEYS)
        }
    };
    match rng.gen_range(0..100) {
        0..=13 => Op::IdOnly,
        14..=29 => Op::Own(
            (0..rng.gen_range(1..=4))
                .map(|_| rng.gen_range(0..8))
                .collect(),
        ),
        30..=45 if list_len < MAX_LIST => Op::Push,
        30..=45 => Op::Pop,
        46..=50 => Op::Blob(
            [
                (17, 200),
                (3000, 8000),
                (70_000, 110_000),
                (262_145, 400_000),
            ]
            .map(|(lo, hi)| rng.gen_range(lo..=hi))[rng.gen_range(0..4)],
        ),
        51..=66 => Op::Shared(
            (0..rng.gen_range(1..=2))
                .map(|_| rng.gen_range(2..SHARED_WORDS))
                .collect(),
        ),
        67..=78 => Op::SharedList,
        _ => Op::Map(
            (0..rng.gen_range(1..=3))
                .map(|_| (rng.gen_bool(0.7), key(&mut rng), rng.gen()))
                .collect(),
        ),
    }
}

/// The hot key of thread `t`'s map pair is `OWN_KEY + t` (outside the mix's keys).
const OWN_KEY: u32 = 1000;

/// One thread's own data after some of its operations.
#[derive(Clone, Debug, Default)]
struct OwnModel {
    done: u64,
    words: [u64; 8],
    /// Node tags, head first.
    list: Vec<u64>,
    blob: Option<(u64, u64)>,
    recycle: u64,
}

impl OwnModel {
    /// Apply operation `done + 1`; returns it (for its shared part).
    fn step(&mut self, seed: u64, t: usize) -> Op {
        let k = self.done + 1;
        let op = plan(seed, t, k, self.list.len());
        match &op {
            Op::Own(w) => w.iter().for_each(|&i| self.words[i] = k),
            Op::Push => self.list.insert(0, tag(t, k)),
            Op::Pop => {
                self.list.remove(0);
            }
            Op::Blob(len) => self.blob = Some((*len, tag(t, k))),
            Op::Recycle => self.recycle = tag(t, k),
            _ => {}
        }
        self.done = k;
        op
    }

    fn advance_to(&mut self, seed: u64, t: usize, k: u64) {
        while self.done < k {
            self.step(seed, t);
        }
    }
}

/// The shared data after some shared operations.
#[derive(Clone, Debug, Default)]
struct SharedModel {
    words: [u64; SHARED_WORDS],
    list: Vec<u64>,
    map: HashMap<u32, u32>,
}

impl SharedModel {
    /// Apply operation `k` of thread `t` (a shared one; others change nothing here).
    fn apply(&mut self, t: usize, k: u64, op: &Op) {
        match op {
            Op::Shared(w) => w.iter().for_each(|&i| self.words[i] = tag(t, k)),
            Op::SharedList => {
                if self.list.len() >= MAX_LIST {
                    self.list.remove(0);
                } else {
                    self.list.insert(0, tag(t, k));
                }
            }
            Op::Map(ops) => ops
                .iter()
                .for_each(|&(ins, key, v)| self.map_op(ins, key, v)),
            Op::MapOwn(ins, key, v) => self.map_op(*ins, *key, *v),
            _ => {}
        }
    }

    fn map_op(&mut self, ins: bool, k: u32, v: u32) {
        if ins {
            self.map.insert(k, v);
        } else {
            self.map.remove(&k);
        }
    }
}

/// What crash images must show (see the module docs).
struct CcExpect {
    seed: u64,
    /// Per thread: own data after the operations that returned, and after one more.
    own: Vec<OwnModel>,
    own_next: Vec<OwnModel>,
    /// The shared data after the shared operations that returned, in lock order.
    shared: SharedModel,
    shared_ops: u64,
    /// Per lock, the shared operation in flight under it: (thread, number, operation).
    holders: Vec<Option<(usize, u64, Op)>>,
}

impl CcExpect {
    fn new(seed: u64) -> CcExpect {
        let own: Vec<OwnModel> = (0..THREADS).map(|_| OwnModel::default()).collect();
        let mut own_next = own.clone();
        for (t, m) in own_next.iter_mut().enumerate() {
            m.step(seed, t);
        }
        CcExpect {
            seed,
            own,
            own_next,
            shared: SharedModel::default(),
            shared_ops: 0,
            holders: vec![None, None],
        }
    }

    fn lock_index(l: Lock) -> usize {
        match l {
            Lock::Shared => 0,
            Lock::Map => 1,
        }
    }

    /// Operation `k` of thread `t` returned (its shared part, if any, in lock order: called
    /// while the lock is still held).
    fn done(&mut self, t: usize, k: u64) {
        let op = self.own[t].step(self.seed, t);
        debug_assert_eq!(self.own[t].done, k);
        self.own_next[t].advance_to(self.seed, t, k + 1);
        if let Some(l) = op.lock() {
            self.shared.apply(t, k, &op);
            self.shared_ops += 1;
            self.holders[Self::lock_index(l)] = None;
        }
    }
}

/// Read the shared data of a recovered pool.
fn read_shared(pool: &Pool, r: &CcRoot) -> Result<SharedModel> {
    let mut m = SharedModel {
        words: r.shared,
        ..Default::default()
    };
    let mut p = r.shared_list;
    while !p.is_null() && m.list.len() <= 2 * MAX_LIST {
        let n = pool.try_read(p)?;
        m.list.push(n.tag);
        if n != (Node {
            next: n.next,
            ..node(n.tag)
        }) {
            bail!("shared list node {:#x} is damaged", n.tag);
        }
        p = n.next;
    }
    if r.shared_len != m.list.len() as u64 {
        bail!(
            "shared list length {} but {} nodes",
            r.shared_len,
            m.list.len()
        );
    }
    Ok(m)
}

impl Expect for CcExpect {
    fn check(&self, path: &Path) -> Result<u64> {
        let pool =
            Pool::open_snapshot(path, Some(LAYOUT)).map_err(|e| anyhow!("recovery failed: {e}"))?;
        let root = pool.root::<CcRoot>()?;
        let r = pool.read(root);
        let mut reach = vec![root.offset()];
        // Per thread: which operations are done, and its own data.
        for t in 0..THREADS {
            let (a, n) = (&self.own[t], &self.own_next[t]);
            let want = match r.last[t] {
                x if x == a.done => a,
                x if x == n.done => n,
                x => {
                    bail!(
                        "thread {t}: operation {x} is the last done, but {} had returned and at most one more was running",
                        a.done
                    )
                }
            };
            if r.own[t] != want.words {
                bail!(
                    "thread {t} after operation {}: own words {:?} != model {:?}",
                    want.done,
                    r.own[t],
                    want.words
                );
            }
            let mut p = r.list[t];
            let mut tags = vec![];
            while !p.is_null() && tags.len() <= MAX_LIST {
                reach.push(p.offset());
                let nd = pool.try_read(p)?;
                if nd
                    != (Node {
                        next: nd.next,
                        ..node(nd.tag)
                    })
                {
                    bail!("thread {t}: list node {:#x} is damaged", nd.tag);
                }
                tags.push(nd.tag);
                p = nd.next;
            }
            if tags != want.list || r.list_len[t] != want.list.len() as u64 {
                bail!(
                    "thread {t} after operation {}: list {tags:x?} (len {}) != model {:x?}",
                    want.done,
                    r.list_len[t],
                    want.list
                );
            }
            match want.blob {
                None if r.blob[t].is_null() => {}
                None => bail!("thread {t}: a blob, model has none"),
                Some(_) if r.blob[t].is_null() => bail!("thread {t}: blob missing"),
                Some((len, gen)) => {
                    if (r.blob_len[t], r.blob_gen[t]) != (len, gen) {
                        bail!(
                            "thread {t}: blob {}/{:#x} != model {len}/{gen:#x}",
                            r.blob_len[t],
                            r.blob_gen[t]
                        );
                    }
                    let mut data = vec![0u8; len as usize];
                    pool.try_read_bytes(r.blob[t].offset(), &mut data)?;
                    if let Some(i) = (0..len).find(|&i| data[i as usize] != blob_byte(gen, i)) {
                        bail!("thread {t}: blob byte {i} differs from the model");
                    }
                    reach.push(r.blob[t].offset());
                }
            }
            match (want.recycle, r.recycle[t].is_null()) {
                (0, true) => {}
                (_, true) | (0, false) => {
                    bail!("thread {t}: recycled object present or missing against the model")
                }
                (gen, false) => {
                    let mut data = vec![0u8; RECYCLE_SIZE as usize];
                    pool.try_read_bytes(r.recycle[t].offset(), &mut data)?;
                    if r.recycle_gen[t] != gen
                        || (0..RECYCLE_SIZE).any(|i| data[i as usize] != blob_byte(gen, i))
                    {
                        bail!(
                            "thread {t}: recycled object of {:#x} differs from the model's {gen:#x}",
                            r.recycle_gen[t]
                        );
                    }
                    reach.push(r.recycle[t].offset());
                }
            }
        }
        // Shared data: the operations that returned, in lock order, plus per lock the one in
        // flight when its thread's word says it is done (or, self-durable, either way).
        let got = read_shared(&pool, &r)?;
        // (read_shared walked the list already: every node on it reads.)
        let mut p = r.shared_list;
        while !p.is_null() && reach.len() < 10 * MAX_LIST {
            reach.push(p.offset());
            p = pool.try_read(p)?.next;
        }
        let mut candidates = vec![self.shared.clone()];
        for h in self.holders.iter().flatten() {
            let (t, k, op) = h;
            let done = r.last[*t] == *k;
            let either = matches!(op, Op::MapOwn(..)) && !done;
            let with: Vec<SharedModel> = candidates
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    c.apply(*t, *k, op);
                    c
                })
                .collect();
            if done {
                candidates = with;
            } else if either {
                candidates.extend(with);
            }
        }
        let map = PHashMap::<u32, u32>::open(&pool, r.map)?;
        let mut entries = HashMap::new();
        for e in map.iter()? {
            let (k, v) = e?;
            entries.insert(k, v);
        }
        if map.len()? != entries.len() as u64 {
            bail!("hash map: len differs from its entries");
        }
        let mc = map.check();
        if let Some(p) = mc.problems.first() {
            bail!("hash map check: {p}");
        }
        reach.extend(mc.objects);
        let matches =
            |c: &SharedModel| c.words == got.words && c.list == got.list && c.map == entries;
        if !candidates.iter().any(matches) {
            let c = &candidates[0];
            bail!(
                "shared data is not the state after the {} shared operations that returned (plus those in flight): words {}, list {}, map {}",
                self.shared_ops,
                if c.words == got.words { "match" } else { "differ" },
                if c.list == got.list { "matches" } else { "differs" },
                if c.map == entries { "matches" } else { "differs" },
            );
        }
        let rep = pool.check(Some(&reach));
        if let Some(p) = rep.problems.first() {
            bail!("pool check: {p}");
        }
        Ok(0)
    }

    fn acked(&self) -> String {
        let done: Vec<String> = self.own.iter().map(|m| m.done.to_string()).collect();
        format!("operations {} of the threads", done.join("/"))
    }
}

/// The workload's shared state while it runs.
struct Work {
    pool: Pool,
    root: PPtr<CcRoot>,
    /// Operations completed by all threads, and threads pausing now (see `worker`).
    ops: std::sync::atomic::AtomicU64,
    paused: std::sync::atomic::AtomicUsize,
    /// Held for writing by a run of one-word transactions (see `plan`), for reading by every
    /// other operation.
    solo: std::sync::RwLock<()>,
    shared: Mutex<()>,
    map: Mutex<PHashMap<u32, u32>>,
}

fn push(tx: &mut Tx<'_>, head_at: u64, len_at: u64, t: u64) -> daisy::Result<()> {
    let head: PPtr<Node> = tx.read(PPtr::from_offset(head_at))?;
    let len: u64 = tx.read(PPtr::from_offset(len_at))?;
    let mut n = node(t);
    n.next = head;
    let p = tx.alloc(&n)?;
    tx.write(PPtr::from_offset(head_at), &p)?;
    tx.write(PPtr::<u64>::from_offset(len_at), &(len + 1))
}

fn pop(tx: &mut Tx<'_>, head_at: u64, len_at: u64) -> daisy::Result<()> {
    let head: PPtr<Node> = tx.read(PPtr::from_offset(head_at))?;
    let len: u64 = tx.read(PPtr::from_offset(len_at))?;
    let n = tx.read(head)?;
    tx.free(head)?;
    tx.write(PPtr::from_offset(head_at), &n.next)?;
    tx.write(PPtr::<u64>::from_offset(len_at), &(len - 1))
}

impl Work {
    /// Run operation `k` of thread `t`; `map`: the map's handle, locked by the caller for map
    /// operations.
    fn run_op(
        &self,
        t: usize,
        k: u64,
        op: &Op,
        mut map: Option<&mut PHashMap<u32, u32>>,
    ) -> daisy::Result<()> {
        let root = self.root.offset();
        let ti = t as u64;
        let last_at = PPtr::<u64>::from_offset(root + OFF_LAST + 8 * ti);
        if let Op::MapOwn(ins, key, v) = op {
            let m = map.expect("map lock taken");
            if *ins {
                m.insert(*key, *v)?;
            } else {
                m.remove(key)?;
            }
            return self.pool.transaction(|tx| tx.write(last_at, &k));
        }
        self.pool.transaction(|tx| {
            match op {
                Op::IdOnly => {}
                Op::Own(words) => {
                    for &i in words {
                        tx.write(
                            PPtr::<u64>::from_offset(root + OFF_OWN + 64 * ti + 8 * i as u64),
                            &k,
                        )?;
                    }
                }
                Op::Push => push(
                    tx,
                    root + OFF_LIST + 8 * ti,
                    root + OFF_LIST_LEN + 8 * ti,
                    tag(t, k),
                )?,
                Op::Pop => pop(tx, root + OFF_LIST + 8 * ti, root + OFF_LIST_LEN + 8 * ti)?,
                Op::Blob(len) => {
                    let old: PPtr<u8> = tx.read(PPtr::from_offset(root + OFF_BLOB + 8 * ti))?;
                    let gen = tag(t, k);
                    let data: Vec<u8> = (0..*len).map(|i| blob_byte(gen, i)).collect();
                    let b = tx.alloc_bytes(&data)?;
                    if !old.is_null() {
                        tx.free(old)?;
                    }
                    tx.write(PPtr::from_offset(root + OFF_BLOB + 8 * ti), &b)?;
                    tx.write(PPtr::<u64>::from_offset(root + OFF_BLOB_LEN + 8 * ti), len)?;
                    tx.write(PPtr::<u64>::from_offset(root + OFF_BLOB_GEN + 8 * ti), &gen)?;
                }
                Op::Recycle => {
                    let at = root + OFF_RECYCLE + 8 * ti;
                    let old: PPtr<u8> = tx.read(PPtr::from_offset(at))?;
                    if !old.is_null() {
                        tx.write_bytes(old.offset(), &[0x5a; 64])?;
                        tx.free(old)?;
                    }
                    let gen = tag(t, k);
                    let data: Vec<u8> = (0..RECYCLE_SIZE).map(|i| blob_byte(gen, i)).collect();
                    let n = tx.alloc_bytes(&data)?;
                    tx.write(PPtr::from_offset(at), &n)?;
                    tx.write(
                        PPtr::<u64>::from_offset(root + OFF_RECYCLE_GEN + 8 * ti),
                        &gen,
                    )?;
                }
                Op::Shared(words) => {
                    for &i in words {
                        tx.write(
                            PPtr::<u64>::from_offset(root + OFF_SHARED + 8 * i as u64),
                            &tag(t, k),
                        )?;
                    }
                }
                Op::SharedList => {
                    let len: u64 = tx.read(PPtr::from_offset(root + OFF_SHARED_LEN))?;
                    if len as usize >= MAX_LIST {
                        pop(tx, root + OFF_SHARED_LIST, root + OFF_SHARED_LEN)?;
                    } else {
                        push(tx, root + OFF_SHARED_LIST, root + OFF_SHARED_LEN, tag(t, k))?;
                    }
                }
                Op::Map(ops) => {
                    let m = map.as_mut().expect("map lock taken");
                    for &(ins, key, v) in ops {
                        if ins {
                            m.insert_tx(tx, key, v)?;
                        } else {
                            m.remove_tx(tx, &key)?;
                        }
                    }
                }
                Op::MapOwn(..) => unreachable!("handled above"),
            }
            tx.write(last_at, &k)
        })
    }
}

/// Run the workload until `budget` images were checked (or a failure).
pub fn run(dir: &Path, seed: u64, budget: u64, per_point: usize) -> Result<WorkloadResult> {
    let tag_ = format!("concurrent-{}-{seed}", std::process::id());
    let path = dir.join(format!("daisy-powerfail-{tag_}.pool"));
    let scratch = dir.join(format!("daisy-powerfail-{tag_}.image"));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        let pool = Pool::create(
            &path,
            &PoolOptions::new(LAYOUT)
                .size(1 << 20)
                .max_size(32 << 20)
                .lanes(THREADS as u32 + 2)
                .log_slot_size(4096)
                .log_slots_per_lane(4),
        )?;
        let root = pool.root::<CcRoot>()?;
        pool.transaction(|tx| {
            let m = PHashMap::<u32, u32>::create_in_with_seed(tx, seed)?;
            tx.write(root.byte_add(std::mem::offset_of!(CcRoot, map) as u64), &m)
        })?;
        let map = PHashMap::open(&pool, pool.read(root).map)?;
        pool.drain()?;
        let work = Arc::new(Work {
            pool: pool.clone(),
            root,
            ops: Default::default(),
            paused: Default::default(),
            solo: Default::default(),
            shared: Mutex::new(()),
            map: Mutex::new(map),
        });
        let ctx = Arc::new(Mutex::new(Ctx::new(
            seed,
            crate::Workload::Concurrent,
            CcExpect::new(seed),
            scratch_files(&scratch)?,
            per_point,
        )));
        let stop = Arc::new(AtomicBool::new(false));
        sim::reset_counts();
        sim::track(&pool, hook(&ctx));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (work, ctx, stop) = (work.clone(), ctx.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(format!("cc{t}"))
                    .spawn(move || worker(t, seed, &work, &ctx, &stop))
                    .expect("spawn a worker")
            })
            .collect();
        loop {
            {
                let c = ctx.lock().unwrap_or_else(|e| e.into_inner());
                if c.images >= budget || c.failures > 0 {
                    break;
                }
            }
            if handles.iter().all(|h| h.is_finished()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        stop.store(true, Ordering::SeqCst);
        let mut ops = 0;
        for h in handles {
            ops += h.join().unwrap_or(0);
        }
        let stats = sim::stop();
        drop(work);
        drop(pool);
        let c = ctx.lock().unwrap_or_else(|e| e.into_inner());
        let mut res = WorkloadResult {
            workload: crate::Workload::Concurrent.name().into(),
            transactions: ops,
            crash_points: c.points,
            images: c.images,
            failures: c.failures,
            messages: c.messages.clone(),
            ..Default::default()
        };
        res.add_stats(&stats, "");
        res.add_events();
        Ok(res)
    })();
    sim::stop();
    let _ = std::fs::remove_file(&path);
    remove_scratch(&scratch);
    result
}

/// One thread's loop; returns the operations it completed.
fn worker(t: usize, seed: u64, work: &Work, ctx: &Mutex<Ctx<CcExpect>>, stop: &AtomicBool) -> u64 {
    let lock = || ctx.lock().unwrap_or_else(|e| e.into_inner());
    let mut own = OwnModel::default();
    let mut pause = SmallRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x51ed));
    let mut solo = None;
    while !stop.load(Ordering::Relaxed) {
        let k = own.done + 1;
        let op = own.step(seed, t);
        let run = (26..=31).contains(&(k % 64));
        if k % 64 == 26 {
            let _ = solo.insert(work.solo.write().unwrap_or_else(|e| e.into_inner()));
            if let Err(e) = work.pool.drain() {
                lock().fail(format!("thread {t}: drain before operation {k}: {e}"));
                stop.store(true, Ordering::SeqCst);
                return k - 1;
            }
        }
        let others = (!run).then(|| work.solo.read().unwrap_or_else(|e| e.into_inner()));
        // A shared operation holds its lock across the transaction and the recording of its
        // place in the lock's order, as Daisy's isolation rule asks.
        let shared = (op.lock() == Some(Lock::Shared))
            .then(|| work.shared.lock().unwrap_or_else(|e| e.into_inner()));
        let mut map = (op.lock() == Some(Lock::Map))
            .then(|| work.map.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(l) = op.lock() {
            lock().expect.holders[CcExpect::lock_index(l)] = Some((t, k, op.clone()));
        }
        let r = work.run_op(t, k, &op, map.as_deref_mut());
        if r.is_ok() {
            lock().expect.done(t, k);
        }
        drop(map);
        drop(shared);
        // (Not held through a pause: a pausing thread waits for the others' operations.)
        drop(others);
        if k % 64 == 31 {
            drop(solo.take());
        }
        if let Err(e) = r {
            lock().fail(format!("thread {t} operation {k} returned an error: {e}"));
            sim::crash_now();
            stop.store(true, Ordering::SeqCst);
            return k - 1;
        }
        work.ops.fetch_add(1, Ordering::Relaxed);
        // Now and then, and after each operation 4 of 16 (see `plan`), an idle spell while
        // the others complete 20 to 60 operations: this lane's applied lines wait for a fence that is not
        // coming, and its records for a claim that covers them; the others must help them to
        // durability, and their lanes wrap around their slots meanwhile. Measured in the
        // others' operations, not in time: under the simulator an operation takes as long as
        // its crash points take to check. At most two threads pause at once.
        if solo.is_none() && (k % 16 == 4 || pause.gen_ratio(1, 16)) {
            if work.paused.fetch_add(1, Ordering::SeqCst) < 2 {
                let until = work.ops.load(Ordering::Relaxed) + pause.gen_range(20..60);
                while work.ops.load(Ordering::Relaxed) < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
            work.paused.fetch_sub(1, Ordering::SeqCst);
        }
    }
    own.done
}
