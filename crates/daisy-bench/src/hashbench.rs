//! `daisy bench hashmap`: seed 000's table, random insertion of N key-value pairs (two u32s),
//! reproduced for every mechanism side by side in one run.
//!
//! The workload: N random *distinct* keys from a seeded bijection of u32 ([`keys`]), the same
//! sequence for every mechanism, each inserted with the value [`value_of`]`(key)`; or, with
//! `--op get|remove`, the same table built first (untimed) and the N keys looked up or removed
//! in a different seeded order ([`order`]).
//!
//! How each (N, mechanism) is measured:
//! 1. a pre-flight on a fresh table times the first 1% of the operations (at least 100, at most
//!    10,000; cut short after a tenth of `--max-secs`) to project the time of a whole run. A
//!    mechanism whose projection exceeds `--max-secs` is timed on the prefix of operations that
//!    fits in `--max-secs`, and its row says `extrapolated` (total projected to N);
//! 2. `--runs` timed runs, each on a fresh table, timing only the whole loop plus the
//!    mechanism's durability point ([`Mechanism::finish`]): no timer inside the loop;
//! 3. one more run that times every operation with the CPU's time-stamp counter (converted to
//!    ns against `Instant` over that run) into an HDR histogram, for p99 and the slowest single
//!    operation; flushes and fences of mechanisms that persist through `daisy::internals::Persister` are
//!    counted during this run too, so counting never slows the timed runs.
//!
//! Mechanisms implement [`Mechanism`] and are listed in [`MECHANISMS`]; the rivals live in
//! `hashrivals.rs`.

use crate::dbrivals;
use crate::hashbench_daisy;
use crate::hashrivals;
use crate::pmdk::Pmdk;
use crate::stats::Spread;
use crate::table::{fmt_ms, Table};
use anyhow::{anyhow, Result};
use daisy::{counters, FlushInstr, Mode};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Key value that marks an empty slot in the open-addressing tables; never generated.
pub const EMPTY_KEY: u32 = u32::MAX;
/// Key value that marks a removed slot (a tombstone); never generated.
pub const TOMBSTONE_KEY: u32 = u32::MAX - 1;

/// Sizes measured by default (seed 000's table without its largest size).
pub const DEFAULT_NS: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// The size `--full` adds.
pub const FULL_N: usize = 10_000_000;
/// Largest N accepted: the tables have next_power_of_two(2N) slots, indexed by u32 hashes.
pub const MAX_N: usize = 1 << 31;

/// The operation being timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Insert,
    Get,
    Remove,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Get => "get",
            Op::Remove => "remove",
        }
    }

    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "insert" => Some(Op::Insert),
            "get" => Some(Op::Get),
            "remove" => Some(Op::Remove),
            _ => None,
        }
    }
}

/// What the "flushes+fences (or syncs) per op" column can say about a mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counting {
    /// Flushes and fences go through `daisy::internals::Persister`: counted with `daisy::counters`.
    Persister,
    /// The mechanism counts its own msync/fdatasync/fsync calls ([`Mechanism::syncs`]).
    Syncs,
    /// Nothing is persisted: zero of everything.
    Nothing,
    /// Not observable from here (PMDK flushes inside libpmemobj).
    Unknown,
}

/// Storage a table occupies, for the bytes-per-entry column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes {
    /// Bytes of the file, pool object or mapping that holds the table.
    Measured(u64),
    /// An estimate (DRAM structures whose allocation is not observable); labelled in output.
    Estimated(u64),
}

/// One way of keeping the benchmark's `u32 -> u32` map. The driver creates a fresh one for
/// every run (through [`Entry::open`]) and drops it afterwards; dropping removes its files.
///
/// Durability contract: a per-operation mechanism makes each `insert`/`remove` durable before
/// returning; a batched one may defer until [`finish`](Mechanism::finish), which is the
/// durability point for everything before it and is included in the timed runs.
pub trait Mechanism {
    /// The name used in `--mechanisms`, the table and the JSON rows.
    fn name(&self) -> &'static str;
    /// One line on how it stores and persists the table (printed before the table).
    fn describe(&self) -> String;
    /// Insert `key` with `value`, overwriting the value of a key already present.
    /// Keys are never [`EMPTY_KEY`] or [`TOMBSTONE_KEY`].
    fn insert(&mut self, key: u32, value: u32) -> Result<()>;
    /// The value of `key`, if present.
    fn get(&mut self, key: u32) -> Result<Option<u32>>;
    /// Remove `key`; whether it was present.
    fn remove(&mut self, key: u32) -> Result<bool>;
    /// The durability point: everything inserted or removed before it is durable on return.
    fn finish(&mut self) -> Result<()>;
    /// Insert all `pairs` into an empty table and make them durable, by the fastest path the
    /// mechanism has (untimed: it builds the table for `get`/`remove`). Per-operation
    /// mechanisms override it with their end-of-run path.
    fn build(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        for &(k, v) in pairs {
            self.insert(k, v)?;
        }
        self.finish()
    }
    /// Run `f`, which performs a run of operations, inside whatever scope the mechanism needs
    /// around them: `daisy-batch` opens one batch (its durability point is the scope's end).
    /// None (the default): no scope; the driver calls `f` on the mechanism itself.
    fn scoped(
        &mut self,
        _f: &mut dyn FnMut(&mut dyn Mechanism) -> Result<()>,
    ) -> Option<Result<()>> {
        None
    }
    /// Storage the table occupies now, if known.
    fn bytes_used(&self) -> Option<Bytes>;
    /// Every (key, value) pair, sorted by key, read back from the mechanism's storage (tests).
    fn contents(&self) -> Result<Vec<(u32, u32)>>;
    /// What the flushes/syncs column reports for this mechanism.
    fn counting(&self) -> Counting;
    /// msync/fdatasync/fsync calls made so far (for [`Counting::Syncs`]).
    fn syncs(&self) -> u64 {
        0
    }
    /// The library and its version, for the mechanisms that are someone else's library (the
    /// embedded databases): printed and carried in the result rows.
    fn version(&self) -> Option<String> {
        None
    }
    /// The most operations a timed run may take, for mechanisms whose every operation is a
    /// durable commit of a database (an fsync or more): a run is then timed on that prefix
    /// and projected to N, as `--max-secs` does for any slow mechanism.
    fn max_ops(&self) -> Option<usize> {
        None
    }
}

/// What a mechanism gets to create a fresh, empty table.
pub struct Setup<'a> {
    /// Directory for its files (`--dir`).
    pub dir: &'a Path,
    /// Entries the table will hold; the open-addressing tables get
    /// [`capacity`]`(n)` slots.
    pub n: usize,
    /// File name stem unique to this table: files go to `dir/{stem}.{ext}` and are removed
    /// when the mechanism is dropped (the driver also removes leftovers with this prefix).
    pub stem: String,
    /// Persistence mode for users of `daisy::internals::Persister` (Daisy's rule for `dir`).
    pub mode: Mode,
    /// PMDK's libpmemobj when it could be loaded.
    pub pmdk: Option<&'a Pmdk>,
}

impl Setup<'_> {
    /// `dir/{stem}.{ext}`.
    pub fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.stem))
    }
}

/// Creates a fresh table of one mechanism.
pub type Open = for<'a> fn(&Setup<'a>) -> Result<Box<dyn Mechanism + 'a>>;

/// One mechanism of the benchmark.
pub struct Entry {
    pub name: &'static str,
    pub open: Open,
}

/// Every mechanism, in table order. Adding one is an `impl Mechanism` and a line here.
pub const MECHANISMS: &[Entry] = &[
    Entry {
        name: "daisy",
        open: hashbench_daisy::open_daisy,
    },
    Entry {
        name: "daisy-batch",
        open: hashbench_daisy::open_daisy_batch,
    },
    Entry {
        name: "store-flush",
        open: hashrivals::open_store_flush,
    },
    Entry {
        name: "store-end",
        open: hashrivals::open_store_end,
    },
    Entry {
        name: "pmdk-tx",
        open: hashrivals::open_pmdk_tx,
    },
    Entry {
        name: "msync-op",
        open: hashrivals::open_msync_op,
    },
    Entry {
        name: "msync-end",
        open: hashrivals::open_msync_end,
    },
    Entry {
        name: "fsync-op",
        open: hashrivals::open_fsync_op,
    },
    Entry {
        name: "fsync-end",
        open: hashrivals::open_fsync_end,
    },
    Entry {
        name: "dram",
        open: hashrivals::open_dram,
    },
    Entry {
        name: "lmdb-op",
        open: dbrivals::open_lmdb_op,
    },
    Entry {
        name: "lmdb-end",
        open: dbrivals::open_lmdb_end,
    },
    Entry {
        name: "redb-op",
        open: dbrivals::open_redb_op,
    },
    Entry {
        name: "redb-end",
        open: dbrivals::open_redb_end,
    },
    Entry {
        name: "sqlite-op",
        open: dbrivals::open_sqlite_op,
    },
    Entry {
        name: "sqlite-end",
        open: dbrivals::open_sqlite_end,
    },
];

/// Names of every mechanism, in table order.
pub fn mechanism_names() -> Vec<&'static str> {
    MECHANISMS.iter().map(|e| e.name).collect()
}

/// The entry called `name`, or an error listing the known names.
pub fn entry(name: &str) -> Result<&'static Entry> {
    MECHANISMS.iter().find(|e| e.name == name).ok_or_else(|| {
        anyhow!(
            "unknown mechanism {name:?}; known: {}",
            mechanism_names().join(", ")
        )
    })
}

/// Slots of the open-addressing tables for `n` entries: load factor at most 1/2.
pub fn capacity(n: usize) -> usize {
    (2 * n.max(1)).next_power_of_two()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A bijection of u32 chosen by a seed: additions, xor-shifts and odd multiplications, each
/// invertible, so distinct inputs give distinct keys without a set to check against.
struct Permutation {
    add: [u32; 2],
    mul: [u32; 2],
}

impl Permutation {
    fn new(seed: u64) -> Permutation {
        let mut s = seed;
        let (a, b) = (splitmix64(&mut s), splitmix64(&mut s));
        Permutation {
            add: [a as u32, (a >> 32) as u32],
            mul: [b as u32 | 1, (b >> 32) as u32 | 1],
        }
    }

    fn apply(&self, x: u32) -> u32 {
        let mut x = x.wrapping_add(self.add[0]);
        x ^= x >> 16;
        x = x.wrapping_mul(self.mul[0]);
        x ^= x >> 15;
        x = x.wrapping_add(self.add[1]);
        x = x.wrapping_mul(self.mul[1]);
        x ^ (x >> 16)
    }
}

/// `n` distinct random keys, the same for the same seed: a seeded permutation of u32 applied
/// to 0, 1, 2, ..., skipping [`EMPTY_KEY`] and [`TOMBSTONE_KEY`]. Panics when `n` exceeds
/// [`MAX_N`].
pub fn keys(seed: u64, n: usize) -> Vec<u32> {
    assert!(n <= MAX_N, "at most {MAX_N} keys");
    let p = Permutation::new(seed);
    (0..=u32::MAX)
        .map(|i| p.apply(i))
        .filter(|&k| k != EMPTY_KEY && k != TOMBSTONE_KEY)
        .take(n)
        .collect()
}

/// The value stored with `key` (any u32 is a valid value; `get` checks it).
pub fn value_of(key: u32) -> u32 {
    key.rotate_left(13) ^ 0x5A5A_A5A5
}

/// `keys` in a different seeded order (Fisher-Yates driven by splitmix64, so the order never
/// depends on a library's generator).
pub fn order(seed: u64, keys: &[u32]) -> Vec<u32> {
    let mut v = keys.to_vec();
    let mut s = seed ^ 0x6F72_6465_7273_6565; // "orderssee"
    for i in (1..v.len()).rev() {
        let j = ((splitmix64(&mut s) as u128 * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, j);
    }
    v
}

/// Benchmark settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub ns: Vec<usize>,
    pub mechanisms: Vec<String>,
    pub op: Op,
    pub runs: usize,
    pub seed: u64,
    pub max_secs: f64,
}

/// One result row (one mechanism at one N).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bench: &'static str,
    pub op: &'static str,
    pub n: u64,
    pub mechanism: &'static str,
    /// Median over the timed runs.
    pub ns_per_op: f64,
    pub ops_per_s: f64,
    /// Median total time of a run of N operations (projected to N when `extrapolated`).
    pub total_ms: f64,
    pub spread_min_ns: f64,
    pub spread_max_ns: f64,
    pub spread_min_ms: f64,
    pub spread_max_ms: f64,
    /// From the latency run (time-stamp counter per operation).
    pub p99_ns: f64,
    pub max_ns: f64,
    pub flushes_per_op: Option<f64>,
    pub fences_per_op: Option<f64>,
    /// msync/fdatasync/fsync calls per operation (system-call mechanisms).
    pub syncs_per_op: Option<f64>,
    pub bytes_per_entry: Option<f64>,
    /// `bytes_per_entry` is an estimate, not a measurement.
    pub bytes_estimated: bool,
    pub runs: usize,
    pub mode: String,
    pub fs: String,
    /// Timed on the first `ops_timed` operations only (too slow for `--max-secs`).
    pub extrapolated: bool,
    pub ops_timed: u64,
    pub seed: u64,
    /// msync-op's total time divided by this row's: how many times faster than msync-op.
    pub speedup_vs_msync_op: Option<f64>,
    /// msync-end's total time divided by this row's.
    pub speedup_vs_msync_end: Option<f64>,
    /// The library measured and its version (the embedded databases; none for the others).
    pub version: Option<String>,
}

/// The persistence mode Daisy would choose for a pool in `dir` (as `Pool::create` does:
/// `DAISY_MODE` wins; otherwise pmem on tmpfs, msync elsewhere; a DAX mount, where Daisy's
/// pools get `MAP_SYNC`, counts as a disk here). Also returns the file-system name.
pub fn dir_mode(dir: &Path) -> Result<(Mode, &'static str)> {
    let f = std::fs::File::open(dir).map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    let fs = daisy::internals::fs_type_name(&f);
    let choice = match std::env::var("DAISY_MODE") {
        Ok(v) => match v.trim() {
            "auto" => None,
            "pmem" => Some(true),
            "msync" => Some(false),
            _ => return Err(anyhow!("DAISY_MODE={v:?}: expected auto, pmem or msync")),
        },
        Err(_) => None,
    };
    let pmem = choice.unwrap_or_else(|| daisy::internals::is_tmpfs(&f));
    let mode = if pmem {
        Mode::Pmem(FlushInstr::detect().map_err(|e| anyhow!("{}: {e}", dir.display()))?)
    } else {
        Mode::Msync
    };
    Ok((mode, fs))
}

/// The lines printed before the table: what was measured, where and how.
pub fn describe_env(cfg: &Config, mode: Mode, fs: &str) -> Vec<String> {
    let mut v = vec![format!(
        "daisy bench hashmap: {} of N random distinct (u32 key, u32 value) pairs, N = {}; \
         keys from seed {} (same keys and order for every mechanism)",
        cfg.op.name(),
        cfg.ns
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        cfg.seed
    )];
    if cfg.op != Op::Insert {
        v.push(format!(
            "each table is first built with all N keys (untimed), then the N keys are {} in a \
             different seeded order",
            if cfg.op == Op::Get {
                "looked up (values checked)"
            } else {
                "removed"
            }
        ));
    }
    v.push(format!(
        "measured: {} timed run(s) on fresh tables, total time only (loop + durability point), \
         median and min..max; one more run times each operation ({}) for p99 and max",
        cfg.runs,
        if cfg!(target_arch = "x86_64") {
            "rdtsc, converted to ns against the clock"
        } else {
            "Instant"
        }
    ));
    let tmpfs = fs == "tmpfs";
    v.push(format!(
        "dir {} on {} ({}), persistence mode {}{}",
        cfg.dir.display(),
        fs,
        if tmpfs {
            "DRAM emulating NVM, as in seed 000"
        } else {
            "disk"
        },
        mode.describe(),
        if FlushInstr::available().is_empty() {
            String::new()
        } else {
            format!(
                "; CPU flush instructions: {}",
                FlushInstr::available()
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ));
    if tmpfs {
        v.push(
            "note: tmpfs has no backing store, so msync and fsync persist nothing beyond the \
             page cache: msync-end and fsync-end here are DRAM figures, msync-op and fsync-op \
             the cost of the system calls alone"
                .into(),
        );
    } else {
        if mode == Mode::Msync {
            v.push(
                "note: on a disk a cache-line flush persists nothing, so store-flush (and Daisy) \
                 use msync of the touched page as their flush+fence (Daisy's msync mode)"
                    .into(),
            );
        }
        if cfg.mechanisms.iter().any(|m| m == "pmdk-tx") {
            v.push(
                "note: pmdk-tx is forced into pmem mode (PMEM_IS_PMEM_FORCE=1, as on tmpfs): \
                 on a disk its cache-line flushes persist nothing, so its figure is not durable"
                    .into(),
            );
        }
    }
    v
}

use crate::ticks::ticks;

/// One operation of the workload on `key`; `get` checks the value and fails loudly.
#[inline(always)]
fn one_op(m: &mut dyn Mechanism, op: Op, key: u32) -> Result<()> {
    match op {
        Op::Insert => m.insert(key, value_of(key)),
        Op::Get => match m.get(key)? {
            Some(v) if v == value_of(key) => Ok(()),
            other => Err(anyhow!(
                "{}: get({key}) returned {other:?}, expected Some({}): the table is wrong",
                m.name(),
                value_of(key)
            )),
        },
        Op::Remove => {
            if m.remove(key)? {
                Ok(())
            } else {
                Err(anyhow!(
                    "{}: remove({key}) found nothing: the table is wrong",
                    m.name()
                ))
            }
        }
    }
}

/// Run `f` in the mechanism's scope ([`Mechanism::scoped`]).
pub fn in_scope(
    m: &mut dyn Mechanism,
    f: &mut dyn FnMut(&mut dyn Mechanism) -> Result<()>,
) -> Result<()> {
    match m.scoped(f) {
        Some(r) => r,
        None => f(m),
    }
}

/// The timed loop (the `op` match is hoisted out of it), in the mechanism's scope.
fn run_ops(m: &mut dyn Mechanism, op: Op, keys: &[u32]) -> Result<()> {
    in_scope(m, &mut |m| run_ops_bare(m, op, keys))
}

fn run_ops_bare(m: &mut dyn Mechanism, op: Op, keys: &[u32]) -> Result<()> {
    match op {
        Op::Insert => keys.iter().try_for_each(|&k| one_op(m, Op::Insert, k)),
        Op::Get => keys.iter().try_for_each(|&k| one_op(m, Op::Get, k)),
        Op::Remove => keys.iter().try_for_each(|&k| one_op(m, Op::Remove, k)),
    }
}

/// Removes every file of this process's tables that a mechanism left behind.
struct Cleanup {
    dir: PathBuf,
    prefix: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&self.prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// What one (N, mechanism) measurement produced, before speed-ups are known.
struct Measured {
    totals_ms: Vec<f64>,
    ns_per_op: Vec<f64>,
    ops_timed: usize,
    p99_ns: f64,
    max_ns: f64,
    counts: Option<(f64, f64)>,
    syncs_per_op: Option<f64>,
    bytes: Option<Bytes>,
    version: Option<String>,
}

struct Ctx<'a> {
    cfg: &'a Config,
    mode: Mode,
    pmdk: Option<&'a Pmdk>,
    prefix: String,
    tables: std::cell::Cell<u64>,
}

impl<'a> Ctx<'a> {
    /// A fresh table of `e` for `n` entries, built with `pairs` when given.
    fn fresh(
        &self,
        e: &Entry,
        n: usize,
        pairs: Option<&[(u32, u32)]>,
    ) -> Result<Box<dyn Mechanism + 'a>> {
        let t = self.tables.get();
        self.tables.set(t + 1);
        let setup = Setup {
            dir: &self.cfg.dir,
            n,
            stem: format!("{}{}-{t}", self.prefix, e.name),
            mode: self.mode,
            pmdk: self.pmdk,
        };
        let mut m = (e.open)(&setup)?;
        if let Some(p) = pairs {
            m.build(p)?;
        }
        Ok(m)
    }
}

/// Measure one mechanism at one N. `step` is called after each stage (for progress).
fn measure(
    ctx: &Ctx<'_>,
    e: &Entry,
    n: usize,
    work: &[u32],
    pairs: Option<&[(u32, u32)]>,
    mut step: impl FnMut(&str),
) -> Result<Measured> {
    let cfg = ctx.cfg;
    let op = cfg.op;
    // 1. Pre-flight: project the time of a whole run from its first operations.
    let probe = (n / 100).clamp(100.min(n), 10_000);
    let mut m = ctx.fresh(e, n, pairs)?;
    let t = Instant::now();
    let mut done = 0;
    in_scope(m.as_mut(), &mut |m| {
        for chunk in work[..probe].chunks(16) {
            run_ops_bare(m, op, chunk)?;
            done += chunk.len();
            if t.elapsed().as_secs_f64() > cfg.max_secs / 10.0 {
                break;
            }
        }
        Ok(())
    })?;
    m.finish()?;
    let per_op = t.elapsed().as_secs_f64() / done as f64;
    let (version, max_ops) = (m.version(), m.max_ops());
    drop(m);
    let limit = if per_op * n as f64 > cfg.max_secs {
        ((cfg.max_secs / per_op) as usize).clamp(done, n)
    } else {
        n
    };
    let limit = max_ops.map_or(limit, |c| limit.min(c.max(done)));
    let ops = &work[..limit];
    step("pre-flight");

    // 2. Timed runs: total time only.
    let mut totals_ms = vec![];
    let mut ns_per_op = vec![];
    let mut syncs_per_op = None;
    let mut bytes = None;
    for r in 0..cfg.runs {
        let mut m = ctx.fresh(e, n, pairs)?;
        let s0 = m.syncs();
        let t = Instant::now();
        run_ops(m.as_mut(), op, ops)?;
        m.finish()?;
        let ns = t.elapsed().as_nanos() as f64;
        if r == 0 {
            if m.counting() == Counting::Syncs {
                syncs_per_op = Some((m.syncs() - s0) as f64 / limit as f64);
            }
            bytes = m.bytes_used();
        }
        drop(m);
        totals_ms.push(ns / 1e6 * n as f64 / limit as f64);
        ns_per_op.push(ns / limit as f64);
        step(&format!("run {}/{}", r + 1, cfg.runs));
    }

    // 3. Latency run: every operation timed; Persister counts taken here.
    let mut m = ctx.fresh(e, n, pairs)?;
    let count = m.counting() == Counting::Persister;
    if count {
        counters::enable(true);
        let _ = counters::take();
    }
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 42, 3)?;
    let t = Instant::now();
    let c0 = ticks();
    let res = (|| {
        in_scope(m.as_mut(), &mut |m| {
            for &k in ops {
                let a = ticks();
                one_op(m, op, k)?;
                let b = ticks();
                hist.saturating_record(b.saturating_sub(a).max(1));
            }
            Ok(())
        })?;
        m.finish()
    })();
    let c1 = ticks();
    let ns = t.elapsed().as_nanos() as f64;
    let c = counters::take();
    if count {
        counters::enable(false);
    }
    res?;
    drop(m);
    let ns_per_tick = ns / (c1.saturating_sub(c0)).max(1) as f64;
    // Per operation, the durability point included.
    let counts = count.then(|| {
        (
            c.flushes as f64 / limit as f64,
            c.fences as f64 / limit as f64,
        )
    });
    step("latency run");
    Ok(Measured {
        totals_ms,
        ns_per_op,
        ops_timed: limit,
        p99_ns: hist.value_at_quantile(0.99) as f64 * ns_per_tick,
        max_ns: hist.max() as f64 * ns_per_tick,
        counts,
        syncs_per_op,
        bytes,
        version,
    })
}

/// The longest gap between two consecutive clock readings in a loop doing nothing else, in
/// microseconds: how long this machine can pause the process on its own.
pub fn machine_stall_us(d: std::time::Duration) -> f64 {
    let t0 = Instant::now();
    let mut last = t0;
    let mut worst = std::time::Duration::ZERO;
    while last - t0 < d {
        let now = Instant::now();
        worst = worst.max(now - last);
        last = now;
    }
    worst.as_secs_f64() * 1e6
}

/// Run the benchmark. `note` receives the lines that describe it, `progress` (done, total,
/// what) each finished stage, `emit` the rows of each N as soon as that N is complete.
pub fn run(
    cfg: &Config,
    mut note: impl FnMut(&str),
    mut progress: impl FnMut(u64, u64, &str),
    mut emit: impl FnMut(&Row),
) -> Result<Vec<Row>> {
    if cfg.runs == 0 {
        return Err(anyhow!("--runs must be at least 1"));
    }
    if cfg.max_secs.is_nan() || cfg.max_secs <= 0.0 {
        return Err(anyhow!("--max-secs must be positive"));
    }
    if let Some(&n) = cfg.ns.iter().find(|&&n| n == 0 || n > MAX_N) {
        return Err(anyhow!("N = {n}: each N must be between 1 and {MAX_N}"));
    }
    let entries = cfg
        .mechanisms
        .iter()
        .map(|m| entry(m))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let (mode, fs) = dir_mode(&cfg.dir)?;
    for l in describe_env(cfg, mode, fs) {
        note(&l);
    }
    let pmdk = if cfg.mechanisms.iter().any(|m| m == "pmdk-tx") {
        let p = Pmdk::load();
        match &p {
            Ok(p) => note(&format!(
                "PMDK: {} (libpmemobj, forced pmem mode: PMEM_IS_PMEM_FORCE=1)",
                p.version
            )),
            Err(e) => note(&format!("PMDK: pmdk-tx not measured: {e}")),
        }
        p.ok()
    } else {
        None
    };
    let stall = machine_stall_us(std::time::Duration::from_millis(500));
    note(&format!(
        "control: a bare loop reading the clock for 0.5 s saw the process paused for up to \
         {stall:.0} us (scheduler, virtual machine): a max latency near that is the machine's, \
         not the mechanism's"
    ));
    let prefix = format!("hashbench-{}-", std::process::id());
    let _cleanup = Cleanup {
        dir: cfg.dir.clone(),
        prefix: prefix.clone(),
    };
    let ctx = Ctx {
        cfg,
        mode,
        pmdk: pmdk.as_ref(),
        prefix,
        tables: std::cell::Cell::new(0),
    };
    // A mechanism that cannot create its table (PMDK missing) is skipped with a note.
    let mut live: Vec<&Entry> = vec![];
    for e in entries {
        match ctx.fresh(e, 1, None) {
            Ok(m) => {
                note(&format!("  {}: {}", e.name, m.describe()));
                if let Some(c) = m.max_ops() {
                    note(&format!(
                        "  {}: a durable commit per operation: each run timed on at most the \
                         first {c} operations and projected to N (marked ~ where N is larger)",
                        e.name
                    ));
                }
                live.push(e);
            }
            Err(err) => note(&format!("  {}: skipped: {err}", e.name)),
        }
    }
    let total = (cfg.ns.len() * live.len() * (cfg.runs + 2)) as u64;
    let mut done = 0u64;
    let mut rows = vec![];
    for &n in &cfg.ns {
        let keys = keys(cfg.seed, n);
        let (work, pairs) = match cfg.op {
            Op::Insert => (keys, None),
            _ => {
                let pairs: Vec<(u32, u32)> = keys.iter().map(|&k| (k, value_of(k))).collect();
                (order(cfg.seed, &keys), Some(pairs))
            }
        };
        let mut group = vec![];
        for e in &live {
            let m = measure(&ctx, e, n, &work, pairs.as_deref(), |what| {
                done += 1;
                progress(done, total, &format!("N={n} {} {what}", e.name));
            })
            .map_err(|err| anyhow!("{} at N={n}: {err}", e.name))?;
            group.push(row(cfg, e.name, n, m, mode, fs));
        }
        let total_of = |name: &str| {
            group
                .iter()
                .find(|r: &&Row| r.mechanism == name)
                .map(|r| r.total_ms)
        };
        let (op_ms, end_ms) = (total_of("msync-op"), total_of("msync-end"));
        for r in group.iter_mut() {
            r.speedup_vs_msync_op = op_ms.map(|t| t / r.total_ms);
            r.speedup_vs_msync_end = end_ms.map(|t| t / r.total_ms);
        }
        for r in group {
            emit(&r);
            rows.push(r);
        }
    }
    Ok(rows)
}

fn row(cfg: &Config, name: &'static str, n: usize, m: Measured, mode: Mode, fs: &str) -> Row {
    let ns = Spread::of(&m.ns_per_op);
    let ms = Spread::of(&m.totals_ms);
    // Per entry the table held when its size was taken: after an insert run on a prefix
    // (extrapolated), only that prefix was inserted.
    let entries = match cfg.op {
        Op::Insert => m.ops_timed.max(1),
        Op::Get | Op::Remove => n.max(1),
    } as f64;
    let (bytes_per_entry, bytes_estimated) = match m.bytes {
        Some(Bytes::Measured(b)) => (Some(b as f64 / entries), false),
        Some(Bytes::Estimated(b)) => (Some(b as f64 / entries), true),
        None => (None, false),
    };
    let (flushes_per_op, fences_per_op) = match m.counts {
        Some((f, s)) => (Some(f), Some(s)),
        None => (None, None),
    };
    Row {
        bench: "hashmap",
        op: cfg.op.name(),
        n: n as u64,
        mechanism: name,
        ns_per_op: ns.median,
        ops_per_s: 1e9 / ns.median,
        total_ms: ms.median,
        spread_min_ns: ns.min,
        spread_max_ns: ns.max,
        spread_min_ms: ms.min,
        spread_max_ms: ms.max,
        p99_ns: m.p99_ns,
        max_ns: m.max_ns,
        flushes_per_op,
        fences_per_op,
        syncs_per_op: m.syncs_per_op,
        bytes_per_entry,
        bytes_estimated,
        runs: cfg.runs,
        mode: match name {
            "pmdk-tx" => "pmem (forced)".into(),
            "msync-op" | "msync-end" => "msync".into(),
            "fsync-op" => "pwrite + fdatasync".into(),
            "fsync-end" => "pwrite + fsync".into(),
            "dram" => "none".into(),
            "lmdb-op" | "lmdb-end" => "LMDB default sync".into(),
            "redb-op" | "redb-end" => "redb Durability::Immediate".into(),
            "sqlite-op" | "sqlite-end" => "SQLite WAL, synchronous=FULL".into(),
            _ => mode.describe(),
        },
        fs: fs.to_string(),
        extrapolated: m.ops_timed < n,
        ops_timed: m.ops_timed as u64,
        seed: cfg.seed,
        speedup_vs_msync_op: None,
        speedup_vs_msync_end: None,
        version: m.version,
    }
}

/// A number with about three significant digits, no exponent.
fn sig3(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else if a >= 0.0001 {
        format!("{v:.5}")
    } else {
        format!("{v:.1e}")
    }
}

/// Human-readable table of hashmap rows, in seed 000's shape, with its legend.
pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new([
        "N",
        "mechanism",
        "total ms",
        "ns/op",
        "spread ns/op",
        "x msync-op",
        "x msync-end",
        "p99 ns",
        "max ns",
        "flush+fence/op",
        "B/entry",
    ])
    .left(&[1]);
    let opt = |v: Option<f64>, suffix: &str| {
        v.map(|v| format!("{}{suffix}", sig3(v)))
            .unwrap_or_else(|| "-".into())
    };
    let mut last_n = None;
    let mut any_extra = false;
    let mut any_est = false;
    let mut notes = vec![];
    for r in rows {
        if last_n.is_some_and(|n| n != r.n) {
            t.gap();
        }
        last_n = Some(r.n);
        let persist = match (r.flushes_per_op, r.fences_per_op, r.syncs_per_op) {
            (Some(f), Some(e), _) => format!("{}+{}", sig3(f), sig3(e)),
            (_, _, Some(y)) => format!("{} sync", sig3(y)),
            _ if r.mechanism == "dram" => "0".into(),
            _ => "?".into(),
        };
        let mark = if r.extrapolated { "~" } else { "" };
        if r.extrapolated {
            any_extra = true;
            notes.push(format!(
                "  ~ {} at N={}: timed on the first {} of {} operations",
                r.mechanism, r.n, r.ops_timed, r.n
            ));
        }
        any_est |= r.bytes_estimated;
        t.row([
            r.n.to_string(),
            r.mechanism.to_string(),
            format!("{mark}{}", fmt_ms(r.total_ms)),
            sig3(r.ns_per_op),
            format!("{}..{}", sig3(r.spread_min_ns), sig3(r.spread_max_ns)),
            opt(r.speedup_vs_msync_op, "x"),
            opt(r.speedup_vs_msync_end, "x"),
            sig3(r.p99_ns),
            sig3(r.max_ns),
            persist,
            match r.bytes_per_entry {
                Some(b) if r.bytes_estimated => format!("{} est", sig3(b)),
                Some(b) => sig3(b),
                None => "-".into(),
            },
        ]);
    }
    let mut s = t.text();
    s.push_str(
        "\nx msync-op / x msync-end: that mechanism's total time divided by this row's (how many \
         times faster). flush+fence/op: cache lines flushed + fences per operation, counted by \
         Daisy's persistence layer; \"sync\": msync/fdatasync/fsync calls per operation; \
         ?: not observable (inside libpmemobj or the database).\n",
    );
    if any_extra {
        s.push_str(&format!(
            "~ extrapolated: too slow for --max-secs (or a database committing every operation: \
             at most {} timed), timed on a prefix of the operations; total ms projected to N \
             (ns/op, p99 and max are those of the prefix; bytes per entry of the prefix's \
             entries):\n",
            dbrivals::PER_OP_MAX_OPS
        ));
        for n in notes {
            s.push_str(&n);
            s.push('\n');
        }
    }
    if any_est {
        s.push_str(
            "est: DRAM bytes estimated from HashMap::capacity() (8-byte entry + 1 control byte \
             per bucket); not measured.\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_deterministic_and_avoid_markers() {
        let a = keys(7, 200_000);
        assert_eq!(a.len(), 200_000);
        assert_eq!(a, keys(7, 200_000));
        assert_eq!(
            a[..1000],
            keys(7, 1000)[..],
            "a prefix is the smaller N's sequence"
        );
        let set: HashSet<u32> = a.iter().copied().collect();
        assert_eq!(set.len(), a.len(), "keys must be distinct");
        assert!(!set.contains(&EMPTY_KEY) && !set.contains(&TOMBSTONE_KEY));
        let b = keys(8, 1000);
        assert_ne!(a[..1000], b[..], "another seed gives other keys");
        // Not a trivial sequence: keys spread over the whole range.
        assert!(a.iter().any(|&k| k > u32::MAX / 2) && a.iter().any(|&k| k < u32::MAX / 2));
    }

    #[test]
    fn permutation_is_a_bijection() {
        // Checked exhaustively on a 2^20 window: no two inputs give one key.
        let p = Permutation::new(123);
        let mut seen = HashSet::with_capacity(1 << 20);
        for i in 0..(1u32 << 20) {
            assert!(seen.insert(p.apply(i)), "collision at input {i}");
        }
    }

    #[test]
    fn order_is_a_seeded_permutation() {
        let k = keys(1, 5000);
        let o = order(1, &k);
        assert_ne!(o, k);
        assert_eq!(o, order(1, &k));
        let mut a = o.clone();
        let mut b = k.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }

    #[test]
    fn mechanism_names_resolve() {
        for n in mechanism_names() {
            assert_eq!(entry(n).unwrap().name, n);
        }
        let e = entry("bogus").err().unwrap();
        assert!(
            e.to_string().contains("bogus") && e.to_string().contains("msync-op"),
            "{e}"
        );
        assert_eq!(capacity(1000), 2048);
        assert_eq!(capacity(1024), 2048);
        assert_eq!(capacity(1), 2);
    }

    #[test]
    fn table_marks_extrapolated_and_estimates() {
        let r = Row {
            bench: "hashmap",
            op: "insert",
            n: 1000,
            mechanism: "dram",
            ns_per_op: 20.0,
            ops_per_s: 5e7,
            total_ms: 0.02,
            spread_min_ns: 19.0,
            spread_max_ns: 21.0,
            spread_min_ms: 0.019,
            spread_max_ms: 0.021,
            p99_ns: 50.0,
            max_ns: 900.0,
            flushes_per_op: None,
            fences_per_op: None,
            syncs_per_op: None,
            bytes_per_entry: Some(18.4),
            bytes_estimated: true,
            runs: 1,
            mode: "none".into(),
            fs: "tmpfs".into(),
            extrapolated: false,
            ops_timed: 1000,
            seed: 1,
            speedup_vs_msync_op: Some(100.0),
            speedup_vs_msync_end: None,
            version: None,
        };
        let mut slow = r.clone();
        slow.mechanism = "msync-op";
        slow.extrapolated = true;
        slow.ops_timed = 10;
        slow.bytes_estimated = false;
        let t = table(&[r, slow]);
        assert!(t.contains("18.4 est") && t.contains("est: DRAM"), "{t}");
        assert!(
            t.contains("~0.020") && t.contains("first 10 of 1000"),
            "{t}"
        );
    }
}
