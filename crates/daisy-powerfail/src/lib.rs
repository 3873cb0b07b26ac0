//! Power-failure simulation driver: `daisy crashtest --power-fail`.
//!
//! A workload runs numbered transactions on a pool tracked by the simulator (`daisy::sim`).
//! At every fence of every thread the simulator holds the world still and hands over a crash
//! point: the surely-persisted shadow image plus every line that may hold something else
//! (flushed but not fenced, stored since, or any value it held since its last sure
//! write-back). For each crash point the driver builds crash images (all combinations when few
//! lines are undecided, plus torn ones; a seeded sample otherwise, a third of it with several
//! lines torn at 8-byte granularity), writes each to a scratch file, opens it with the real
//! recovery (copy-on-write), and checks it against what the workload had done:
//!
//! * `pool check` passes and every allocated object is reachable (no leak, nothing dangling);
//! * every transaction that had returned is present, and one in flight is either wholly
//!   present or wholly absent; a transaction that returned an error is absent.
//!
//! Workloads (all in pmem mode unless said):
//! * `single`: one thread, the kill torture's transactions (words, lists, blobs that make the
//!   pool grow, big transactions, recycled objects, hash maps, byte maps);
//! * `threads`: the same transactions on three threads, one at a time, in seeded bursts of one
//!   to twelve per thread, so lanes go idle with data not yet durable while another wraps
//!   around its log slots (helping, slot reuse, claims);
//! * `concurrent`: four threads committing at the same time, on their own data and on shared
//!   data under locks ([`concurrent`]);
//! * `hashmap`: hash-map operations only, from a few transactions before a split that doubles
//!   the directory;
//! * `kv`: the server's commands in group transactions ([`kv`]);
//! * `msync`: `single`'s transactions on a pool in msync mode;
//! * `seq`: sequence operations only (`crashtest::Mix::Seq`): pushes and pops at both ends of
//!   a sequence of 256-byte chunks (so chunks are allocated and freed every few operations),
//!   middle inserts, sets and removes, removals by value, trims, and retired sequences freed
//!   by `free_step` a few objects per transaction, each against the model;
//! * `tree`: ordered-map operations only (`crashtest::Mix::Tree`, `daisy_bench::cttree`) on a
//!   tree of 256-byte nodes that grows to three or four levels and shrinks again: inserts and
//!   bursts of them (leaf and internal splits, new roots, nodes allocated), removals, moves of
//!   an entry to a new key (`move_key`: within a leaf or across two), pops,
//!   key-range and rank-range removals (merges, redistributions, collapsed roots, nodes and
//!   item objects freed) and rank queries, each checked entry by entry against the model;
//! * `blocks`: a block store created under the simulator and written by three threads at once,
//!   each block self-describing (LBA, version, checksum): no acknowledged write lost, no torn
//!   block ([`blocks`]).
//! * `backup`: `single`'s transactions with an online backup taken every few transactions
//!   while the writer runs ([`backup`]): crash points fall in the backup's drain too, and each
//!   finished copy must recover, with nothing to replay, to exactly the state at its pause.
//!
//! Every workload but `concurrent` and `blocks` has two lives: after half of its budget one crash
//! image of the moment is kept, opened under the simulator (so crash points fall inside its
//! recovery, whose every image must recover to the same state), and the workload runs on from
//! there until its budget is spent.

pub mod backup;
pub mod blocks;
pub mod canary;
pub mod concurrent;
pub mod kv;

use anyhow::{anyhow, bail, Result};
use daisy::sim::{self, CrashPoint};
use daisy::{ModeChoice, Pool, PoolOptions};
use daisy_bench::crashtest::{self, CtRoot, Model};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Workload {
    Single,
    Threads,
    /// Threads that really commit at the same time (`concurrent.rs`).
    Concurrent,
    /// Hash-map operations only, after an untracked warm-up that fills the map close to its
    /// first segment splits, so splits and directory doublings happen under the simulator.
    HashMap,
    /// The KV server's commands in group transactions on a keyspace pool (`kv.rs`).
    Kv,
    /// `Single` in msync mode.
    Msync,
    /// Sequence operations (`crashtest::Mix::Seq`).
    Seq,
    /// Ordered-map operations (`crashtest::Mix::Tree`).
    Tree,
    /// A block store written by threads at once (`blocks.rs`).
    Blocks,
    /// `Single` with online backups taken while it runs (`backup.rs`).
    Backup,
}

/// Transactions the hash-map workload runs under the simulator before the first segment
/// split that doubles the directory (found by a dry run on a scratch pool).
const HASHMAP_LEAD: u64 = 20;

/// The share of a workload's budget spent in its first life (the rest goes to the second).
const FIRST_LIFE: (u64, u64) = (1, 2);

/// A workload's pool: small to start (crash images stay cheap), growing on demand; the dry
/// run and the simulated run use the same one. The log geometry differs per workload, so the
/// deferral of write-backs (`slots - 2` commits) runs at its smallest (single and msync: 4
/// slots, deferral 2: single, msync, threads, concurrent) and at small pools' default (hash
/// map, kv: 8).
fn workload_pool(path: &Path, w: Workload) -> Result<Pool> {
    let mut opts = PoolOptions::new(crashtest::LAYOUT)
        .size(1 << 20)
        .max_size(32 << 20)
        .lanes(4);
    opts = match w {
        Workload::Single | Workload::Backup => opts.log_slot_size(4096).log_slots_per_lane(4),
        Workload::Msync => opts
            .log_slot_size(4096)
            .log_slots_per_lane(4)
            .mode(ModeChoice::Msync),
        Workload::Threads => opts.log_slot_size(4096).log_slots_per_lane(4),
        Workload::HashMap => opts.log_slots_per_lane(8),
        // Records of up to a few KiB (a retired sequence finished in one transaction).
        Workload::Seq => opts.log_slot_size(8 << 10).log_slots_per_lane(8),
        // Records of a few KiB (a burst of inserts splitting several nodes, a range removal).
        Workload::Tree => opts.log_slot_size(8 << 10).log_slots_per_lane(8),
        Workload::Kv => return kv::KvWork::create_pool(path),
        Workload::Concurrent | Workload::Blocks => {
            unreachable!("concurrent.rs and blocks.rs build their own pools")
        }
    };
    Pool::create(path, &opts).map_err(anyhow::Error::from)
}

/// The id of the first transaction of the `Maps` mix that takes the fixed-size map from two
/// segments to three (a split that also doubles the directory), by a dry run without the
/// simulator. The workload is deterministic in the seed, so the real run splits there too.
fn first_doubling_split(dir: &Path, seed: u64) -> Result<u64> {
    let path = dir.join(format!(
        "daisy-powerfail-dry-{}-{seed}.pool",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let r = (|| {
        let pool = workload_pool(&path, Workload::HashMap)?;
        let ct = crashtest::Ct::open_mix(&pool, seed, crashtest::Mix::Maps)?;
        for id in 1..=50_000 {
            ct.run_tx(seed, id)?;
            if ct.map_shape().0 >= 3 {
                return Ok(id);
            }
        }
        Err(anyhow!("the hash-map workload never split its map"))
    })();
    let _ = std::fs::remove_file(&path);
    r
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Single => "single",
            Workload::Threads => "threads",
            Workload::Concurrent => "concurrent",
            Workload::HashMap => "hashmap",
            Workload::Kv => "kv",
            Workload::Msync => "msync",
            Workload::Seq => "seq",
            Workload::Tree => "tree",
            Workload::Blocks => "blocks",
            Workload::Backup => "backup",
        }
    }

    pub const ALL: [Workload; 10] = [
        Workload::Single,
        Workload::Threads,
        Workload::Concurrent,
        Workload::HashMap,
        Workload::Kv,
        Workload::Msync,
        Workload::Seq,
        Workload::Tree,
        Workload::Blocks,
        Workload::Backup,
    ];

    pub fn parse(s: &str) -> Option<Workload> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }

    fn mix(self) -> crashtest::Mix {
        match self {
            Workload::HashMap => crashtest::Mix::Maps,
            Workload::Threads => crashtest::Mix::Threads,
            Workload::Seq => crashtest::Mix::Seq,
            Workload::Tree => crashtest::Mix::Tree,
            _ => crashtest::Mix::Mixed,
        }
    }
}

/// The default budget of `daisy crashtest --power-fail` (crash images over all workloads):
/// every canary in `tests/must_fail.rs` is caught within its per-workload share, which is what
/// CI runs. 10,000 per workload: the kv workload reaches its table shrink (the canary
/// `ShrinkHeaderEarly`) only late in that share.
pub const DEFAULT_BUDGET: u64 = 100_000;

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub seed: u64,
    /// Crash images to check in all (split evenly between workloads).
    pub budget: u64,
    pub workloads: Vec<Workload>,
    /// Images per crash point at most (more when all combinations are fewer).
    pub per_point: usize,
}

/// Fences and crash points of one thread of a workload.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ThreadCount {
    pub thread: String,
    pub fences: u64,
    pub crash_points: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct WorkloadResult {
    pub workload: String,
    pub transactions: u64,
    pub crash_points: u64,
    pub images: u64,
    pub failures: u64,
    pub messages: Vec<String>,
    /// Fences of the tracked pool, and those that were not a crash point (must be 0).
    pub fences: u64,
    pub fences_without_point: u64,
    /// Per thread, in order of first fence (second-life threads are named `life2/...`).
    pub threads: Vec<ThreadCount>,
    /// The second life: the transactions the kept image held, and the crash points that
    /// fell inside its recovery.
    pub second_life_from: Option<u64>,
    pub recovery_points: u64,
    /// What the workload made the library do under the simulator (`daisy::sim::Event`).
    pub events: BTreeMap<String, u64>,
    /// How often the place of each injectable fault was reached by the tracked work
    /// (`daisy::sim::reached`): the rules this workload exercises.
    pub reached: BTreeMap<String, u64>,
    /// The fixed-size hash map when the simulator started and when it stopped: (segments,
    /// global depth, entries). Splits under the simulator show as a segment count that grew.
    pub map_before: (u64, u32, u64),
    pub map_after: (u64, u32, u64),
    /// The ordered map when the first life's simulation stopped: (nodes, height in levels,
    /// entries); zeros where the workload leaves it empty.
    pub tree_after: (u64, u32, u64),
}

impl WorkloadResult {
    fn add_stats(&mut self, s: &sim::Stats, prefix: &str) {
        self.fences += s.fences;
        self.fences_without_point += s.fences_without_point;
        self.threads.extend(s.threads.iter().map(|t| ThreadCount {
            thread: format!("{prefix}{}", t.thread),
            fences: t.fences,
            crash_points: t.crash_points,
        }));
    }

    fn add_events(&mut self) {
        for e in sim::Event::ALL {
            *self.events.entry(e.name().to_string()).or_default() += sim::events(e);
        }
        for f in sim::Fault::ALL {
            *self.reached.entry(format!("{f:?}")).or_default() += sim::reached(f);
        }
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub crash_points: u64,
    pub images: u64,
    pub failures: u64,
    pub fences: u64,
    pub fences_without_point: u64,
    pub seed: u64,
    pub seconds: f64,
    pub mode: String,
    pub workloads: Vec<WorkloadResult>,
}

/// What a crash image must recover to, as the workload stands: checked at every crash point,
/// under the context's lock, which the workload's threads take to record what returned.
pub(crate) trait Expect: Send + Sync {
    /// Recover the image at `path` with the real recovery (copy-on-write) and compare; Ok:
    /// the transactions the image holds (for a second life).
    fn check(&self, path: &Path) -> Result<u64>;
    /// The transactions that had returned (for messages).
    fn acked(&self) -> String;
}

/// State shared between the workload and the crash hook.
pub(crate) struct Ctx<E: Expect> {
    pub seed: u64,
    pub expect: E,
    /// One scratch file per checking thread.
    scratch: Vec<(PathBuf, std::fs::File)>,
    /// The scratch files hold the previous crash point's image base.
    scratch_synced: bool,
    per_point: usize,
    pub images: u64,
    pub points: u64,
    pub failures: u64,
    pub messages: Vec<String>,
    workload: Workload,
    /// Keep one image of the next crash point (for a second life): its bytes, and the
    /// transactions it holds.
    pub save: bool,
    pub saved: Option<(Vec<u8>, u64)>,
}

/// One crash image to build: a version pick per undecided line, optional tearing.
struct Spec {
    picks: Vec<usize>,
    torn: Vec<u8>,
    sample: Option<usize>,
}

/// Tear up to four of the lines `picks` takes a version of: each keeps a random subset of its
/// 8-byte words from the shadow.
fn tear(picks: &[usize], rng: &mut SmallRng) -> Vec<u8> {
    let chosen: Vec<usize> = (0..picks.len()).filter(|&i| picks[i] != 0).collect();
    let mut torn = vec![0xffu8; picks.len()];
    if chosen.is_empty() {
        return torn;
    }
    let k = rng.gen_range(1..=chosen.len().min(4));
    for _ in 0..k {
        torn[chosen[rng.gen_range(0..chosen.len())]] = rng.gen();
    }
    torn
}

/// The images to check at a crash point: every combination of the undecided lines' versions
/// when they are at most `per_point`, then a quarter as many more with several lines torn; a
/// seeded sample of `per_point` otherwise, a third of it torn.
fn image_specs(p: &CrashPoint, per_point: usize, rng: &mut SmallRng) -> Vec<Spec> {
    let radix: Vec<usize> = p.lines.iter().map(|l| l.versions.len() + 1).collect();
    let combos = radix.iter().try_fold(1usize, |acc, &r| acc.checked_mul(r));
    let mut specs = vec![];
    let random_picks = |rng: &mut SmallRng| -> Vec<usize> {
        let mut picks: Vec<usize> = radix.iter().map(|&r| rng.gen_range(0..r)).collect();
        if picks.iter().all(|&k| k == 0) && !radix.is_empty() {
            let i = rng.gen_range(0..radix.len());
            picks[i] = rng.gen_range(1..radix[i]);
        }
        picks
    };
    match combos {
        Some(n) if n <= per_point => {
            let mut picks = vec![0usize; radix.len()];
            for _ in 0..n {
                specs.push(Spec {
                    picks: picks.clone(),
                    torn: vec![],
                    sample: None,
                });
                for (d, r) in picks.iter_mut().zip(&radix) {
                    *d += 1;
                    if *d < *r {
                        break;
                    }
                    *d = 0;
                }
            }
            if !radix.is_empty() {
                for k in 0..(per_point / 4).max(1) {
                    let picks = random_picks(rng);
                    let torn = tear(&picks, rng);
                    specs.push(Spec {
                        picks,
                        torn,
                        sample: Some(k),
                    });
                }
            }
        }
        _ => {
            for k in 0..per_point {
                let picks = random_picks(rng);
                let torn = if k % 3 == 2 {
                    tear(&picks, rng)
                } else {
                    vec![]
                };
                specs.push(Spec {
                    picks,
                    torn,
                    sample: Some(k),
                });
            }
        }
    }
    specs
}

impl<E: Expect> Ctx<E> {
    fn new(
        seed: u64,
        w: Workload,
        expect: E,
        scratch: Vec<(PathBuf, std::fs::File)>,
        per_point: usize,
    ) -> Self {
        Ctx {
            seed,
            expect,
            scratch,
            scratch_synced: false,
            per_point,
            images: 0,
            points: 0,
            failures: 0,
            messages: vec![],
            workload: w,
            save: false,
            saved: None,
        }
    }

    pub(crate) fn fail(&mut self, why: String) {
        self.failures += 1;
        if self.messages.len() < 10 {
            self.messages.push(format!(
                "workload {}: {why}; replay: daisy crashtest --power-fail --seed {} --workload {}",
                self.workload.name(),
                self.seed,
                self.workload.name(),
            ));
        }
    }

    /// Check every image of one crash point, on all checking threads.
    fn check_point(&mut self, p: &CrashPoint) {
        self.points += 1;
        let mut rng =
            SmallRng::seed_from_u64(self.seed ^ p.index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let specs = image_specs(p, self.per_point, &mut rng);
        let workers = self.scratch.len();
        // Bring the scratch files to this point's image base: only the changed lines when
        // they hold the previous one, the whole image otherwise.
        let delta = if self.scratch_synced {
            p.changed_since_last.as_deref()
        } else {
            None
        };
        let expect = &self.expect;
        let failed: Vec<(usize, anyhow::Error)> = std::thread::scope(|sc| {
            let handles: Vec<_> = self
                .scratch
                .iter()
                .enumerate()
                .map(|(w, (path, file))| {
                    let specs = &specs;
                    sc.spawn(move || {
                        daisy::sim::ignore_current_thread();
                        let mut bad = vec![];
                        // The scratch file holds the image base; each image patches its lines
                        // in, is recovered without writing the file (a copy-on-write open),
                        // and the lines are restored.
                        if let Err(e) = write_base(file, &p.shadow[..p.len], delta) {
                            return vec![(usize::MAX, e)];
                        }
                        for (i, s) in specs.iter().enumerate().skip(w).step_by(workers) {
                            if let Err(why) = with_lines(file, p, s, || checked(expect, path)) {
                                bad.push((i, why));
                            }
                        }
                        bad
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        self.images += specs.len() as u64;
        self.scratch_synced = !failed.iter().any(|f| f.0 == usize::MAX);
        for (i, why) in failed {
            if i == usize::MAX {
                self.fail(format!("scratch file: {why}"));
                continue;
            }
            let s = &specs[i];
            let what = format!(
                "crash point {} ({}, thread {}; {} returned), image {}: {why}",
                p.index,
                if p.at_fence { "at a fence" } else { "now" },
                p.thread,
                self.expect.acked(),
                s.sample
                    .map(|k| format!("sample {k}"))
                    .unwrap_or_else(|| format!("{:?}", s.picks)),
            );
            self.fail(what);
        }
        if self.save && self.failures == 0 {
            match self.keep_image(p, &mut rng) {
                Ok(Some(saved)) => {
                    self.save = false;
                    self.saved = Some(saved);
                }
                Ok(None) => {}
                Err(why) => self.fail(format!("keeping an image for the second life: {why}")),
            }
        }
    }

    /// One random image of `p`, recovered and checked: its bytes and the transactions it
    /// holds; None when its recovery would replay nothing (a second life from it would not
    /// exercise a crash inside a replay).
    fn keep_image(&mut self, p: &CrashPoint, rng: &mut SmallRng) -> Result<Option<(Vec<u8>, u64)>> {
        let radix: Vec<usize> = p.lines.iter().map(|l| l.versions.len() + 1).collect();
        let picks: Vec<usize> = radix.iter().map(|&r| rng.gen_range(0..r)).collect();
        let torn = tear(&picks, rng);
        let img = p.image(&picks, &torn);
        let (path, file) = &self.scratch[0];
        write_base(file, &img, None)?;
        self.scratch_synced = false;
        let replays = Pool::open_snapshot(path, None)
            .map(|pool| pool.recovery_report().records_replayed > 0)
            .map_err(|e| anyhow!("recovery failed: {e}"))?;
        if !replays {
            return Ok(None);
        }
        let found = checked(&self.expect, path)?;
        Ok(Some((img, found)))
    }
}

/// `expect.check(path)`, with a panic (of the recovery code, or of a verifier that met data it
/// did not expect) reported as a failure of the image.
fn checked<E: Expect>(expect: &E, path: &Path) -> Result<u64> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| expect.check(path))).unwrap_or_else(
        |p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(anyhow!("recovery or verification panicked: {msg}"))
        },
    )
}

fn write_base(file: &std::fs::File, base: &[u8], delta: Option<&[usize]>) -> Result<()> {
    if let Some(lines) = delta {
        for &off in lines.iter().filter(|&&o| o + 64 <= base.len()) {
            file.write_all_at(&base[off..off + 64], off as u64)?;
        }
        return Ok(());
    }
    let len = file.metadata()?.len();
    if len != base.len() as u64 {
        file.set_len(base.len() as u64)?;
    }
    file.write_all_at(base, 0).map_err(anyhow::Error::from)
}

/// Patch the image's lines into the scratch file, run `f`, restore the shadow's lines.
fn with_lines<R>(
    file: &std::fs::File,
    p: &CrashPoint,
    s: &Spec,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let mut touched = vec![];
    for (i, &pick) in s.picks.iter().enumerate() {
        let torn = s.torn.get(i).copied().unwrap_or(0xff);
        if let Some(bytes) = p.line_image(i, pick, torn) {
            let off = p.lines[i].off;
            file.write_all_at(&bytes, off as u64)?;
            touched.push(off);
        }
    }
    let r = f();
    for off in touched {
        file.write_all_at(&p.shadow[off..off + 64], off as u64)?;
    }
    r
}

/// One scratch image file per checking thread.
fn scratch_files(scratch: &Path) -> Result<Vec<(PathBuf, std::fs::File)>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let mut files = vec![];
    for t in 0..threads {
        let p = scratch.with_extension(format!("image{t}"));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .map_err(|e| anyhow!("{}: {e}", p.display()))?;
        files.push((p, f));
    }
    Ok(files)
}

fn remove_scratch(scratch: &Path) {
    for t in 0..8 {
        let _ = std::fs::remove_file(scratch.with_extension(format!("image{t}")));
    }
}

/// A crash hook that checks each point in `ctx`.
fn hook<E: Expect + 'static>(ctx: &Arc<Mutex<Ctx<E>>>) -> Box<dyn FnMut(&CrashPoint) + Send> {
    let ctx = ctx.clone();
    Box::new(move |p| ctx.lock().unwrap_or_else(|e| e.into_inner()).check_point(p))
}

// ---- Workloads whose transactions form one sequence ----

/// A model of the state after a number of transactions of one sequence.
pub(crate) trait LinearModel: Clone + Send + Sync + 'static {
    fn advance_to(&mut self, seed: u64, id: u64);
    fn applied(&self) -> u64;
    /// Recover the image at `path` and compare it with `model` (the transactions that
    /// returned) or `next` (and the one in flight); Ok: the transactions it holds.
    fn verify(path: &Path, model: &Self, next: &Self) -> Result<u64>;
}

impl LinearModel for Model {
    fn advance_to(&mut self, seed: u64, id: u64) {
        Model::advance_to(self, seed, id)
    }
    fn applied(&self) -> u64 {
        self.last_tx
    }
    fn verify(path: &Path, model: &Self, next: &Self) -> Result<u64> {
        recover_and_verify(path, model, next)
    }
}

impl LinearModel for kv::KvModel {
    fn advance_to(&mut self, seed: u64, id: u64) {
        kv::KvModel::advance_to(self, seed, id)
    }
    fn applied(&self) -> u64 {
        self.applied
    }
    fn verify(path: &Path, model: &Self, next: &Self) -> Result<u64> {
        kv::verify(path, model, next)
    }
}

/// What the transaction after the acknowledged ones is doing.
#[derive(Clone, Debug)]
enum InFlight {
    /// Running: it may be wholly present or wholly absent.
    One,
    /// Nothing runs (recovery of the second life): exactly the acknowledged state.
    Nothing,
    /// It returned an error: it must be absent.
    Failed(String),
}

struct Linear<M> {
    model: M,
    next: M,
    in_flight: InFlight,
}

impl<M: LinearModel> Linear<M> {
    fn new(seed: u64, model: M, in_flight: InFlight) -> Self {
        let mut next = model.clone();
        next.advance_to(seed, model.applied() + 1);
        Linear {
            model,
            next,
            in_flight,
        }
    }

    /// Transaction `id` returned.
    fn ack(&mut self, seed: u64, id: u64) {
        self.model.advance_to(seed, id);
        self.next.advance_to(seed, id + 1);
    }
}

impl<M: LinearModel> Expect for Linear<M> {
    fn check(&self, path: &Path) -> Result<u64> {
        let found = M::verify(path, &self.model, &self.next)?;
        let acked = self.model.applied();
        if found > acked {
            match &self.in_flight {
                InFlight::One => {}
                InFlight::Nothing => {
                    bail!("recovered state holds transaction {found}, but only {acked} had run")
                }
                InFlight::Failed(e) => {
                    bail!(
                        "transaction {found} returned an error ({e}) but is present after recovery"
                    )
                }
            }
        }
        Ok(found)
    }

    fn acked(&self) -> String {
        format!("transactions up to {}", self.model.applied())
    }
}

/// Runs one workload's transactions, one at a time.
trait Runner {
    fn run_tx(&mut self, seed: u64, id: u64) -> Result<()>;
    /// The fixed-size hash map's (segments, global depth, entries), where there is one.
    fn map_shape(&self) -> (u64, u32, u64) {
        (0, 0, 0)
    }
    /// The ordered map's (nodes, height, entries), where there is one.
    fn tree_shape(&self) -> (u64, u32, u64) {
        (0, 0, 0)
    }
}

struct CtRunner(Arc<crashtest::Ct>);

impl Runner for CtRunner {
    fn run_tx(&mut self, seed: u64, id: u64) -> Result<()> {
        self.0.run_tx(seed, id).map_err(anyhow::Error::from)
    }
    fn map_shape(&self) -> (u64, u32, u64) {
        self.0.map_shape()
    }
    fn tree_shape(&self) -> (u64, u32, u64) {
        self.0.tree_shape()
    }
}

impl Runner for kv::KvWork {
    fn run_tx(&mut self, seed: u64, id: u64) -> Result<()> {
        kv::KvWork::run_tx(self, seed, id)
    }
}

/// The `threads` workload: three workers, each with its own lane, given transactions one at a
/// time in aligned bursts of `THREADS_BURST` for one worker (a seeded choice), so exactly one
/// runs at any moment and the others sit idle with applied data not yet durable while it
/// wraps around its 4 log slots (see `crashtest::Mix::Threads`).
struct ThreadsRunner {
    ct: Arc<crashtest::Ct>,
    senders: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Result<()>>,
    handles: Vec<std::thread::JoinHandle<()>>,
    rng: SmallRng,
    current: usize,
}

impl ThreadsRunner {
    fn new(ct: Arc<crashtest::Ct>, seed: u64) -> ThreadsRunner {
        let (done_tx, done) = mpsc::channel::<Result<()>>();
        let mut senders = vec![];
        let mut handles = vec![];
        for t in 0..3 {
            let (tx, rx) = mpsc::channel::<u64>();
            senders.push(tx);
            let ct = ct.clone();
            let d = done_tx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("worker{t}"))
                    .spawn(move || {
                        for id in rx {
                            let r = ct.run_tx(seed, id).map_err(anyhow::Error::from);
                            if d.send(r).is_err() {
                                break;
                            }
                        }
                    })
                    .expect("spawn a worker"),
            );
        }
        ThreadsRunner {
            ct,
            senders,
            done,
            handles,
            rng: SmallRng::seed_from_u64(seed ^ 0x7e7e),
            current: 0,
        }
    }
}

impl Runner for ThreadsRunner {
    fn run_tx(&mut self, _seed: u64, id: u64) -> Result<()> {
        // Bursts start at ids 1, 13, 25, ...: aligned so that a burst's first and last
        // transactions are the ones that write slot 63 (ids 1 and 0 modulo the burst).
        if id % crashtest::THREADS_BURST == 1 {
            self.current = self.rng.gen_range(0..self.senders.len());
        }
        self.senders[self.current]
            .send(id)
            .map_err(|_| anyhow!("a worker stopped"))?;
        self.done.recv().map_err(|_| anyhow!("a worker stopped"))?
    }
    fn map_shape(&self) -> (u64, u32, u64) {
        self.ct.map_shape()
    }
}

impl Drop for ThreadsRunner {
    fn drop(&mut self) {
        self.senders.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Open the workload's runner on `pool`.
/// `applied`: the transactions the pool already holds (the kv workload's model needs it).
fn open_runner(w: Workload, pool: &Pool, seed: u64, applied: u64) -> Result<Box<dyn Runner>> {
    if w == Workload::Kv {
        return Ok(Box::new(kv::KvWork::open(pool, seed, applied)?));
    }
    if w == Workload::Backup {
        return Ok(Box::new(backup::BackupRunner::open(pool, seed, applied)?));
    }
    let ct = Arc::new(crashtest::Ct::open_mix(pool, seed, w.mix())?);
    Ok(if w == Workload::Threads {
        Box::new(ThreadsRunner::new(ct, seed))
    } else {
        Box::new(CtRunner(ct))
    })
}

/// Run transactions from `id + 1` until the context has checked `budget` images (or found a
/// failure). A transaction that returns an error is recorded, a crash point is checked at once
/// (it must be absent from every image), and the run stops. Returns the last id run.
fn run_until<M: LinearModel>(
    runner: &mut dyn Runner,
    ctx: &Arc<Mutex<Ctx<Linear<M>>>>,
    seed: u64,
    mut id: u64,
    done: impl Fn(&Ctx<Linear<M>>, u64) -> bool,
) -> u64 {
    let lock = || ctx.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        {
            let c = lock();
            if done(&c, id) || c.failures > 0 {
                return id;
            }
        }
        id += 1;
        match runner.run_tx(seed, id) {
            Ok(()) => lock().expect.ack(seed, id),
            Err(e) => {
                lock().expect.in_flight = InFlight::Failed(e.to_string());
                sim::crash_now();
                lock().fail(format!("transaction {id} returned an error: {e}"));
                return id;
            }
        }
    }
}

/// Run one workload until it has checked `budget` images (or failed).
pub fn run_workload(
    dir: &Path,
    seed: u64,
    w: Workload,
    budget: u64,
    per_point: usize,
) -> Result<WorkloadResult> {
    match w {
        Workload::Concurrent => concurrent::run(dir, seed, budget, per_point),
        Workload::Blocks => blocks::run(dir, seed, budget, per_point),
        Workload::Kv => run_linear(dir, seed, w, budget, per_point, kv::KvModel::default()),
        _ => run_linear(dir, seed, w, budget, per_point, Model::with_mix(w.mix())),
    }
}

fn run_linear<M: LinearModel>(
    dir: &Path,
    seed: u64,
    w: Workload,
    budget: u64,
    per_point: usize,
    model0: M,
) -> Result<WorkloadResult> {
    let tag = format!("{}-{}-{}", w.name(), std::process::id(), seed);
    let path = dir.join(format!("daisy-powerfail-{tag}.pool"));
    let scratch = dir.join(format!("daisy-powerfail-{tag}.image"));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        let mut res = WorkloadResult {
            workload: w.name().into(),
            ..Default::default()
        };
        // ---- First life ----
        let pool = workload_pool(&path, w)?;
        let mut runner = open_runner(w, &pool, seed, 0)?;
        let mut model = model0;
        let mut id = 0u64;
        if w == Workload::HashMap {
            let warmup = first_doubling_split(dir, seed)?.saturating_sub(HASHMAP_LEAD);
            while id < warmup {
                id += 1;
                runner.run_tx(seed, id)?;
            }
            model.advance_to(seed, id);
        }
        pool.drain()?;
        res.map_before = runner.map_shape();
        let ctx = Arc::new(Mutex::new(Ctx::new(
            seed,
            w,
            Linear::new(seed, model.clone(), InFlight::One),
            scratch_files(&scratch)?,
            per_point,
        )));
        let lock = || ctx.lock().unwrap_or_else(|e| e.into_inner());
        sim::reset_counts();
        sim::track(&pool, hook(&ctx));
        let first = budget * FIRST_LIFE.0 / FIRST_LIFE.1;
        id = run_until(&mut *runner, &ctx, seed, id, |c, _| c.images >= first);
        // Keep an image for the second life: from the next crash point whose image recovery
        // has records to replay (so that crash points fall inside a replay).
        lock().save = true;
        let give_up = id + 64;
        id = run_until(&mut *runner, &ctx, seed, id, |c, id| {
            c.saved.is_some() || id >= give_up
        });
        if lock().saved.is_none() && lock().failures == 0 {
            lock().fail(format!(
                "no crash image with records to replay in 64 transactions after {}: no second life",
                give_up - 64
            ));
        }
        lock().save = false;
        res.add_stats(&sim::stop(), "");
        res.map_after = runner.map_shape();
        res.tree_after = runner.tree_shape();
        drop(runner);
        drop(pool);
        // ---- Second life: recover a kept image under the simulator, and run on ----
        let saved = lock().saved.take();
        if let Some((image, found)) = saved {
            res.second_life_from = Some(found);
            std::fs::write(&path, &image).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            let mut at = model.clone();
            at.advance_to(seed, found);
            lock().expect = Linear::new(seed, at.clone(), InFlight::Nothing);
            sim::track_next_open(&path, hook(&ctx));
            let before = lock().points;
            let opened = Pool::open(
                &path,
                if w == Workload::Kv {
                    daisy_kv::keyspace::LAYOUT
                } else {
                    crashtest::LAYOUT
                },
            );
            res.recovery_points = lock().points - before;
            let pool = match opened {
                Ok(p) => p,
                Err(e) => {
                    lock().fail(format!(
                        "the kept image (after transaction {found}) does not open: {e}"
                    ));
                    sim::stop();
                    return Ok(res_with(res, &ctx, id));
                }
            };
            let mut runner = open_runner(w, &pool, seed, found)?;
            lock().expect = Linear::new(seed, at, InFlight::One);
            id = run_until(&mut *runner, &ctx, seed, found, |c, _| c.images >= budget);
            res.add_stats(&sim::stop(), "life2/");
            drop(runner);
            drop(pool);
        }
        res.add_events();
        Ok(res_with(res, &ctx, id))
    })();
    sim::stop();
    let _ = std::fs::remove_file(&path);
    remove_scratch(&scratch);
    result
}

/// `res` with the context's counts, for a run that ended at transaction `last`.
fn res_with<E: Expect>(
    mut res: WorkloadResult,
    ctx: &Arc<Mutex<Ctx<E>>>,
    last: u64,
) -> WorkloadResult {
    let c = ctx.lock().unwrap_or_else(|e| e.into_inner());
    res.transactions = last;
    res.crash_points = c.points;
    res.images = c.images;
    res.failures = c.failures;
    res.messages = c.messages.clone();
    res
}

/// Recover the crash image in the scratch file with the real open (copy-on-write, so the file
/// is left as it is) and compare it with the model of the transactions that returned, or of
/// one more: the one in flight. Ok: the transactions the image holds.
fn recover_and_verify(path: &Path, model: &Model, next: &Model) -> Result<u64> {
    let acked = model.last_tx;
    let pool = Pool::open_snapshot(path, Some(crashtest::LAYOUT))
        .map_err(|e| anyhow!("recovery failed: {e}"))?;
    let last = pool.read(pool.root::<CtRoot>()?).last_tx;
    let model = if last == acked {
        model
    } else if last == acked + 1 {
        next
    } else {
        bail!(
            "recovered state is after transaction {last}, but {acked} had returned and at most one more was running"
        );
    };
    let mut diffs = crashtest::verify(&pool, model)?;
    if !diffs.is_empty() && last == acked && crashtest::holds_unrecorded_own_op(&pool, next)? {
        diffs.clear();
    }
    if let Some(d) = diffs.first() {
        bail!("{d} ({} differences in all)", diffs.len());
    }
    Ok(last)
}

/// Run every configured workload; `progress` gets a line per workload.
pub fn run(cfg: &Config, mut progress: impl FnMut(&WorkloadResult)) -> Result<Summary> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let per = (cfg.budget / cfg.workloads.len().max(1) as u64).max(1);
    let mut sum = Summary {
        seed: cfg.seed,
        ..Default::default()
    };
    for (i, &w) in cfg.workloads.iter().enumerate() {
        let r = run_workload(
            &cfg.dir,
            cfg.seed.wrapping_add(i as u64),
            w,
            per,
            cfg.per_point,
        )?;
        progress(&r);
        sum.crash_points += r.crash_points;
        sum.images += r.images;
        sum.failures += r.failures;
        sum.fences += r.fences;
        sum.fences_without_point += r.fences_without_point;
        sum.workloads.push(r);
    }
    // The pools ran in the mode the directory implies (msync forced where the workload says);
    // report it.
    sum.mode = {
        let probe = cfg
            .dir
            .join(format!("daisy-powerfail-probe-{}.pool", std::process::id()));
        let m = Pool::create(
            &probe,
            &PoolOptions::new("probe")
                .size(1 << 20)
                .max_size(4 << 20)
                .lanes(1),
        )
        .map(|p| p.mode().describe())
        .unwrap_or_default();
        let _ = std::fs::remove_file(&probe);
        m
    };
    sum.seconds = t0.elapsed().as_secs_f64();
    let _ = std::io::stdout().flush();
    Ok(sum)
}
