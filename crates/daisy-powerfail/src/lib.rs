//! Power-failure simulation driver: `daisy crashtest --power-fail`.
//!
//! A workload runs numbered transactions (the kill torture's workload: updates of one to sixty
//! four words, pushes and pops with allocation and free, blobs of 1 byte to 700 KB that make the
//! pool grow, large transactions) on a pool tracked by the simulator (`daisy::sim`). At every
//! fence the simulator stops the world and hands over a crash point: the surely-persisted
//! shadow image plus every line that may hold something else. For each crash point the driver
//! builds crash images (all combinations when few lines are undecided, a seeded sample
//! otherwise, some lines torn at 8-byte granularity), writes each to a scratch file, opens it
//! with the real recovery, and checks:
//!
//! * `pool check` passes and every allocated object is reachable (no leak, nothing dangling);
//! * every transaction that had returned is present, and the one in flight is either wholly
//!   present or wholly absent: the pool equals the model after `acked` or `acked + 1`
//!   transactions, byte for byte.
//!
//! Workloads: `single` (one thread) and `threads` (the same transactions spread over three
//! threads, one at a time in a seeded order, so lanes go idle with data not yet flushed and
//! the watermark's helping and ordering rules are exercised).

pub mod kv;

use daisy::sim::{self, CrashPoint};
use daisy::{Pool, PoolOptions};
use daisy_bench::crashtest::{self, CtRoot, Model};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Workload {
    Single,
    Threads,
    /// Hash-map operations only, after an untracked warm-up that fills the map close to its
    /// first segment splits, so splits and directory doublings happen under the simulator.
    HashMap,
    /// The KV server's commands in group transactions on a keyspace pool (`kv.rs`).
    Kv,
}

/// Transactions the hash-map workload runs under the simulator before the first segment
/// split that doubles the directory (found by a dry run on a scratch pool).
const HASHMAP_LEAD: u64 = 20;

/// A workload's pool: small to start (crash images stay cheap), growing on demand; the dry
/// run and the simulated run use the same one. Each workload runs another count of log slots
/// per lane (slots of 4 KiB where there are many, so the pool stays small), so the deferral of
/// write-backs (`slots - 2` commits) runs under the simulator at its smallest (single: 4), at
/// large pools' default (threads: 32) and at small pools' default (hash map: 8 of 16 KiB; the
/// KV workload builds its own pool, with 8).
fn workload_pool(path: &Path, w: Workload) -> Result<Pool, String> {
    let mut opts = PoolOptions::new(crashtest::LAYOUT)
        .size(1 << 20)
        .max_size(32 << 20)
        .lanes(4);
    opts = match w {
        Workload::Single => opts.log_slot_size(4096).log_slots_per_lane(4),
        Workload::Threads => opts.log_slot_size(4096).log_slots_per_lane(32),
        Workload::HashMap | Workload::Kv => opts.log_slots_per_lane(8),
    };
    Pool::create(path, &opts).map_err(|e| e.to_string())
}

/// The id of the first transaction of the `Maps` mix that takes the fixed-size map from two
/// segments to three (a split that also doubles the directory), by a dry run without the
/// simulator. The workload is deterministic in the seed, so the real run splits there too.
fn first_doubling_split(dir: &Path, seed: u64) -> Result<u64, String> {
    let path = dir.join(format!(
        "daisy-powerfail-dry-{}-{seed}.pool",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let r = (|| {
        let pool = workload_pool(&path, Workload::HashMap)?;
        let ct = crashtest::Ct::open_mix(&pool, seed, crashtest::Mix::Maps)
            .map_err(|e| e.to_string())?;
        for id in 1..=50_000 {
            ct.run_tx(seed, id).map_err(|e| e.to_string())?;
            if ct.map_shape().0 >= 3 {
                return Ok(id);
            }
        }
        Err("the hash-map workload never split its map".to_string())
    })();
    let _ = std::fs::remove_file(&path);
    r
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Single => "single",
            Workload::Threads => "threads",
            Workload::HashMap => "hashmap",
            Workload::Kv => "kv",
        }
    }

    pub const ALL: [Workload; 4] = [
        Workload::Single,
        Workload::Threads,
        Workload::HashMap,
        Workload::Kv,
    ];

    pub fn parse(s: &str) -> Option<Workload> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }

    fn mix(self) -> crashtest::Mix {
        match self {
            Workload::HashMap => crashtest::Mix::Maps,
            _ => crashtest::Mix::Mixed,
        }
    }
}

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

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct WorkloadResult {
    pub workload: String,
    pub transactions: u64,
    pub crash_points: u64,
    pub images: u64,
    pub failures: u64,
    pub messages: Vec<String>,
    /// The fixed-size hash map when the simulator started and when it stopped: (segments,
    /// global depth, entries). Splits under the simulator show as a segment count that grew.
    pub map_before: (u64, u32, u64),
    pub map_after: (u64, u32, u64),
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub crash_points: u64,
    pub images: u64,
    pub failures: u64,
    pub seed: u64,
    pub seconds: f64,
    pub mode: String,
    pub workloads: Vec<WorkloadResult>,
}

/// What a workload's crash images are compared with: the state after a number of
/// transactions, as a function of the seed.
trait Checked: Clone + Send + Sync {
    fn advance_to(&mut self, seed: u64, id: u64);
    /// Recover the image at `path`; it must equal `self` (after `acked` transactions) or
    /// `next` (after the one in flight too).
    fn verify(&self, path: &Path, next: &Self, acked: u64) -> Result<(), String>;
}

impl Checked for Model {
    fn advance_to(&mut self, seed: u64, id: u64) {
        Model::advance_to(self, seed, id)
    }
    fn verify(&self, path: &Path, next: &Self, acked: u64) -> Result<(), String> {
        recover_and_verify(path, self, next, acked)
    }
}

impl Checked for kv::KvModel {
    fn advance_to(&mut self, seed: u64, id: u64) {
        kv::KvModel::advance_to(self, seed, id)
    }
    fn verify(&self, path: &Path, next: &Self, _acked: u64) -> Result<(), String> {
        kv::verify(path, self, next)
    }
}

/// State shared between the workload and the crash hook.
struct Ctx<M: Checked> {
    seed: u64,
    /// Transactions that returned.
    acked: u64,
    /// Model after `acked` transactions.
    model: M,
    /// One scratch file per checking thread.
    scratch: Vec<(PathBuf, std::fs::File)>,
    /// The scratch files hold the previous crash point's shadow.
    scratch_synced: bool,
    per_point: usize,
    images: u64,
    points: u64,
    failures: u64,
    messages: Vec<String>,
    workload: Workload,
}

/// One crash image to build: a version pick per undecided line, optional tearing.
struct Spec {
    picks: Vec<usize>,
    torn: Vec<u8>,
    sample: Option<usize>,
}

impl<M: Checked> Ctx<M> {
    fn new(
        seed: u64,
        w: Workload,
        acked: u64,
        model: M,
        scratch: Vec<(PathBuf, std::fs::File)>,
        per_point: usize,
    ) -> Self {
        Ctx {
            seed,
            acked,
            model,
            scratch,
            scratch_synced: false,
            per_point,
            images: 0,
            points: 0,
            failures: 0,
            messages: vec![],
            workload: w,
        }
    }

    /// Check every image of one crash point, on all checking threads.
    fn check_point(&mut self, p: &CrashPoint) {
        self.points += 1;
        let mut rng =
            SmallRng::seed_from_u64(self.seed ^ p.index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let radix: Vec<usize> = p.lines.iter().map(|l| l.versions.len() + 1).collect();
        let combos = radix.iter().try_fold(1usize, |acc, &r| acc.checked_mul(r));
        let mut specs = vec![];
        match combos {
            // Few undecided lines: every combination.
            Some(n) if n <= self.per_point => {
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
            }
            // Otherwise a seeded sample, a fifth of it with one line torn per 8-byte word.
            _ => {
                for k in 0..self.per_point {
                    let picks: Vec<usize> = radix.iter().map(|&r| rng.gen_range(0..r)).collect();
                    let mut torn = vec![];
                    if k % 5 == 4 && !radix.is_empty() {
                        torn = vec![0xffu8; radix.len()];
                        torn[rng.gen_range(0..radix.len())] = rng.gen();
                    }
                    specs.push(Spec {
                        picks,
                        torn,
                        sample: Some(k),
                    });
                }
            }
        }
        let mut next = self.model.clone();
        next.advance_to(self.seed, self.acked + 1);
        let (model, acked, seed) = (&self.model, self.acked, self.seed);
        let workers = self.scratch.len();
        // Bring the scratch files to this point's shadow: only the changed lines when they
        // hold the previous one, the whole image otherwise.
        let delta = if self.scratch_synced {
            p.changed_since_last.as_deref()
        } else {
            None
        };
        let failed: Vec<(usize, String)> = std::thread::scope(|sc| {
            let handles: Vec<_> = self
                .scratch
                .iter()
                .enumerate()
                .map(|(w, (path, file))| {
                    let (specs, next) = (&specs, &next);
                    sc.spawn(move || {
                        daisy::sim::ignore_current_thread();
                        let mut bad = vec![];
                        // The scratch file holds the shadow; each image patches its lines in,
                        // is recovered without writing the file (a copy-on-write open), and
                        // the lines are restored.
                        if let Err(e) = write_base(file, &p.shadow[..p.len], delta) {
                            return vec![(usize::MAX, e)];
                        }
                        for (i, s) in specs.iter().enumerate().skip(w).step_by(workers) {
                            let r = with_lines(file, p, s, || model.verify(path, next, acked));
                            if let Err(why) = r {
                                bad.push((i, why));
                            }
                        }
                        let _ = seed;
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
            self.failures += 1;
            if i == usize::MAX {
                self.messages.push(format!("scratch file: {why}"));
                continue;
            }
            if self.messages.len() < 10 {
                let s = &specs[i];
                self.messages.push(format!(
                    "workload {}, crash point {} (after transaction {} returned), image {}: {why}; replay: daisy crashtest --power-fail --seed {} --workload {}",
                    self.workload.name(),
                    p.index,
                    self.acked,
                    s.sample.map(|k| format!("sample {k}")).unwrap_or_else(|| format!("{:?}", s.picks)),
                    self.seed,
                    self.workload.name(),
                ));
            }
        }
    }
}

fn write_base(file: &std::fs::File, shadow: &[u8], delta: Option<&[usize]>) -> Result<(), String> {
    if let Some(lines) = delta {
        for &off in lines.iter().filter(|&&o| o + 64 <= shadow.len()) {
            file.write_all_at(&shadow[off..off + 64], off as u64)
                .map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len != shadow.len() as u64 {
        file.set_len(shadow.len() as u64)
            .map_err(|e| e.to_string())?;
    }
    file.write_all_at(shadow, 0).map_err(|e| e.to_string())
}

/// Patch the image's lines into the scratch file, run `f`, restore the shadow's lines.
fn with_lines(
    file: &std::fs::File,
    p: &CrashPoint,
    s: &Spec,
    f: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let mut touched = vec![];
    for (i, &pick) in s.picks.iter().enumerate() {
        let torn = s.torn.get(i).copied().unwrap_or(0xff);
        if let Some(bytes) = p.line_image(i, pick, torn) {
            let off = p.lines[i].off;
            file.write_all_at(&bytes, off as u64)
                .map_err(|e| e.to_string())?;
            touched.push(off);
        }
    }
    let r = f();
    for off in touched {
        file.write_all_at(&p.shadow[off..off + 64], off as u64)
            .map_err(|e| e.to_string())?;
    }
    r
}

/// Recover the crash image in the scratch file with the real open (copy-on-write, so the file
/// is left as it is) and compare it with the model of the transactions that returned, or of
/// one more: the one in flight.
fn recover_and_verify(path: &Path, model: &Model, next: &Model, acked: u64) -> Result<(), String> {
    let pool = Pool::open_snapshot(path, Some(crashtest::LAYOUT))
        .map_err(|e| format!("recovery failed: {e}"))?;
    let last = pool
        .read(pool.root::<CtRoot>().map_err(|e| e.to_string())?)
        .last_tx;
    let model = if last == acked {
        model
    } else if last == acked + 1 {
        next
    } else {
        return Err(format!(
            "recovered state is after transaction {last}, but {acked} had returned and at most one more was running"
        ));
    };
    let mut diffs = crashtest::verify(&pool, model).map_err(|e| e.to_string())?;
    if !diffs.is_empty()
        && last == acked
        && crashtest::holds_unrecorded_own_op(&pool, next).map_err(|e| e.to_string())?
    {
        diffs.clear();
    }
    if let Some(d) = diffs.first() {
        return Err(format!("{d} ({} differences in all)", diffs.len()));
    }
    Ok(())
}

fn result_of<M: Checked>(ctx: &Ctx<M>, transactions: u64) -> WorkloadResult {
    WorkloadResult {
        workload: ctx.workload.name().into(),
        transactions,
        crash_points: ctx.points,
        images: ctx.images,
        failures: ctx.failures,
        messages: ctx.messages.clone(),
        ..Default::default()
    }
}

/// One scratch image file per checking thread.
fn scratch_files(scratch: &Path) -> Result<Vec<(PathBuf, std::fs::File)>, String> {
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
            .map_err(|e| format!("{}: {e}", p.display()))?;
        files.push((p, f));
    }
    Ok(files)
}

/// The KV workload: group transactions of server commands until `budget` images (or a
/// failure).
fn run_kv_workload(
    path: &Path,
    scratch: &Path,
    seed: u64,
    budget: u64,
    per_point: usize,
) -> Result<WorkloadResult, String> {
    let mut work = kv::KvWork::create(path)?;
    work.pool.drain().map_err(|e| e.to_string())?;
    let ctx = Arc::new(Mutex::new(Ctx::new(
        seed,
        Workload::Kv,
        0,
        kv::KvModel::default(),
        scratch_files(scratch)?,
        per_point,
    )));
    let hook_ctx = ctx.clone();
    sim::track(
        &work.pool,
        Box::new(move |p| hook_ctx.lock().unwrap().check_point(p)),
    );
    let mut id = 0;
    loop {
        {
            let c = ctx.lock().unwrap();
            if c.images >= budget || c.failures > 0 {
                break;
            }
        }
        id += 1;
        work.run_tx(seed, id)?;
        let mut c = ctx.lock().unwrap();
        c.acked = id;
        c.model.advance_to(seed, id);
    }
    sim::stop();
    drop(work);
    let c = ctx.lock().unwrap();
    Ok(result_of(&c, id))
}

/// Run one workload until it has checked `budget` images (or failed).
pub fn run_workload(
    dir: &Path,
    seed: u64,
    w: Workload,
    budget: u64,
    per_point: usize,
) -> Result<WorkloadResult, String> {
    let tag = format!("{}-{}-{}", w.name(), std::process::id(), seed);
    let path = dir.join(format!("daisy-powerfail-{tag}.pool"));
    let scratch = dir.join(format!("daisy-powerfail-{tag}.image"));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        if w == Workload::Kv {
            return run_kv_workload(&path, &scratch, seed, budget, per_point);
        }
        let pool = workload_pool(&path, w)?;
        let ct =
            Arc::new(crashtest::Ct::open_mix(&pool, seed, w.mix()).map_err(|e| e.to_string())?);
        let mut model = Model::with_mix(w.mix());
        let mut id = 0u64;
        if w == Workload::HashMap {
            let warmup = first_doubling_split(dir, seed)?.saturating_sub(HASHMAP_LEAD);
            while id < warmup {
                id += 1;
                ct.run_tx(seed, id).map_err(|e| e.to_string())?;
            }
            model.advance_to(seed, id);
        }
        pool.drain().map_err(|e| e.to_string())?;
        let map_before = ct.map_shape();
        let ctx = Arc::new(Mutex::new(Ctx::new(
            seed,
            w,
            id,
            model,
            scratch_files(&scratch)?,
            per_point,
        )));
        let hook_ctx = ctx.clone();
        sim::track(
            &pool,
            Box::new(move |p| hook_ctx.lock().unwrap().check_point(p)),
        );
        let done = |c: &Arc<Mutex<Ctx<Model>>>| {
            let c = c.lock().unwrap();
            c.images >= budget || c.failures > 0
        };
        match w {
            Workload::Kv => unreachable!("run by run_kv_workload"),
            Workload::Single | Workload::HashMap => {
                while !done(&ctx) {
                    id += 1;
                    ct.run_tx(seed, id).map_err(|e| e.to_string())?;
                    let mut c = ctx.lock().unwrap();
                    c.acked = id;
                    c.model.advance_to(seed, id);
                }
            }
            Workload::Threads => {
                // Three workers, each with its own lane; the driver hands out transactions one
                // at a time to a seeded-random worker, so exactly one runs at any moment.
                let mut senders = vec![];
                let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
                let mut handles = vec![];
                for _ in 0..3 {
                    let (tx, rx) = mpsc::channel::<u64>();
                    senders.push(tx);
                    let ct = ct.clone();
                    let d = done_tx.clone();
                    handles.push(std::thread::spawn(move || {
                        for id in rx {
                            let r = ct.run_tx(seed, id).map_err(|e| e.to_string());
                            if d.send(r).is_err() {
                                break;
                            }
                        }
                    }));
                }
                let mut rng = SmallRng::seed_from_u64(seed ^ 0x7e7e);
                let mut outcome = Ok(());
                while !done(&ctx) {
                    id += 1;
                    senders[rng.gen_range(0..senders.len())].send(id).unwrap();
                    if let Err(e) = done_rx.recv().unwrap() {
                        outcome = Err(e);
                        break;
                    }
                    let mut c = ctx.lock().unwrap();
                    c.acked = id;
                    c.model.advance_to(seed, id);
                }
                drop(senders);
                for h in handles {
                    let _ = h.join();
                }
                outcome?;
            }
        }
        sim::stop();
        let map_after = ct.map_shape();
        drop(ct);
        drop(pool);
        let c = ctx.lock().unwrap();
        Ok(WorkloadResult {
            map_before,
            map_after,
            ..result_of(&c, id)
        })
    })();
    sim::stop();
    let _ = std::fs::remove_file(&path);
    for t in 0..8 {
        let _ = std::fs::remove_file(scratch.with_extension(format!("image{t}")));
    }
    result
}

/// Run every configured workload; `progress` gets a line per workload.
pub fn run(cfg: &Config, mut progress: impl FnMut(&WorkloadResult)) -> Result<Summary, String> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
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
        sum.workloads.push(r);
    }
    // The pools ran in the mode the directory implies; report it.
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
