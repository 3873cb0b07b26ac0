//! `daisy bench tx`: small transactions, Daisy against PMDK and the bare store+flush floor.
//!
//! Cases (same work for every mechanism, same file system):
//! * `update-1`: one 8-byte update (also in the embedded databases LMDB, redb and SQLite,
//!   `dbrivals.rs`: the one record updated by a durable write transaction);
//! * `update-8`: eight 8-byte updates in different cache lines;
//! * `alloc-free`: allocate 64 bytes, link it into the root, free the block it replaces;
//! * `alloc-free-x100`: a hundred such pairs in one transaction;
//! * `alloc-free-pairs`: allocator throughput: a thousand (allocate 64 bytes, free the block
//!   allocated a thousand allocations earlier) pairs per transaction, nothing else.
//!
//! Each figure is the median of several timed runs (spread printed as min..max), taken in
//! rounds: each round makes one run of every mechanism of the case, so that a spell of a
//! shared machine falls on all of them alike (see [`time_rounds`]); flush and fence counts
//! come from a separate counting pass, so counting never slows the timed runs.

use crate::capi::{CPool, CTx, DaisyC};
use crate::dbrivals::{Db, UpdateOne};
use crate::pmdk::{PMEMoid, Pmdk, PmdkPool};
use crate::stats::{median, Spread};
use crate::table::Table;
use anyhow::{anyhow, Result};
use bytemuck::{Pod, Zeroable};
use daisy::internals::Persister;
use daisy::{counters, Error, PPtr, Pool, PoolOptions};
use std::cell::{Ref, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RING: usize = 64;

/// The layout of the benchmark's Daisy pool.
const LAYOUT: &str = "daisy.bench.tx";

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct BenchRoot {
    lines: [[u64; 8]; 8],
    ring: [PPtr<[u8; 64]>; RING],
}

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub ops: u64,
    pub runs: usize,
    pub cases: Vec<String>,
    /// Also run every case through Daisy's C API, loaded from this libdaisy.so
    /// (`daisy bench tx --api c`): a `daisy-c` row beside `daisy`, with the ratios.
    pub c_lib: Option<PathBuf>,
}

pub const CASES: [&str; 5] = [
    "update-1",
    "update-8",
    "alloc-free",
    "alloc-free-x100",
    "alloc-free-pairs",
];

/// Pairs per transaction in `alloc-free-pairs`.
const PAIRS: u64 = 1000;

/// One result row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bench: &'static str,
    pub case: String,
    pub mechanism: &'static str,
    pub ns_per_op: f64,
    pub ops_per_s: f64,
    pub spread_min_ns: f64,
    pub spread_max_ns: f64,
    /// Allocation+free pairs per second (alloc cases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs_per_s: Option<f64>,
    pub flushes_per_op: Option<f64>,
    pub fences_per_op: Option<f64>,
    pub runs: usize,
    pub ops: u64,
    pub mode: String,
    pub fs: String,
    /// PMDK's time divided by this row's (how many times faster than PMDK).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_vs_pmdk: Option<f64>,
    /// (File mechanisms) this row's time divided by Daisy's: how many times faster Daisy is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_vs_daisy: Option<f64>,
    /// (`daisy-c` rows) this row's time divided by the Rust path's (`daisy`) on the same pool
    /// file: the median of the rounds' ratios ([`round_ratios`]). On `daisy-c` rows
    /// `speedup_vs_pmdk` is likewise the median of the rounds' PMDK/C ratios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x_rust: Option<f64>,
    /// This row's time divided by the store-flush floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x_store_flush: Option<f64>,
    /// (The embedded databases) the library measured and its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Nanoseconds per operation of each timed run, in round order: the runs of one round
    /// of two rows were taken seconds apart, so their ratio ([`round_ratios`]) compares the
    /// mechanisms in the same spell of the machine.
    pub runs_ns: Vec<f64>,
}

/// Each round's time of `num` over `den`'s (the rounds both rows have, in order).
pub fn round_ratios(num: &Row, den: &Row) -> Vec<f64> {
    num.runs_ns
        .iter()
        .zip(&den.runs_ns)
        .map(|(a, b)| a / b)
        .collect()
}

/// One mechanism, timed in runs of `ops` operations.
struct Timed<'a> {
    ops: u64,
    /// Runs the operations numbered `first..first + n` and returns how long they took.
    /// Anything a run needs first (opening the pool file this mechanism shares with another,
    /// see [`SharedPool`]) is done before its clock starts.
    run: Box<dyn FnMut(u64, u64) -> Result<Duration> + 'a>,
}

impl<'a> Timed<'a> {
    /// A mechanism of one operation, timed over `ops` calls of `op`.
    fn new(ops: u64, op: impl FnMut(u64) -> Result<()> + 'a) -> Self {
        Self::boxed(ops, Box::new(op))
    }

    /// [`Timed::new`] of an operation already boxed. It is called through a `dyn` pointer, as
    /// every mechanism's operation is: none of them is inlined into the timing loop.
    fn boxed(ops: u64, mut op: Box<dyn FnMut(u64) -> Result<()> + 'a>) -> Self {
        Timed {
            ops,
            run: Box::new(move |first, n| time_ops(first, n, &mut op)),
        }
    }
}

/// Time `op` over the operation numbers `first..first + n`.
fn time_ops(first: u64, n: u64, op: &mut dyn FnMut(u64) -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    for i in first..first + n {
        op(i)?;
    }
    Ok(t.elapsed())
}

/// Time the mechanisms' runs in rounds: each round makes one run of every mechanism, one
/// after the other. A run lasts milliseconds and a slow or fast spell of a shared machine
/// lasts up to seconds: run one mechanism's runs back to back and a spell can fall on all of
/// them and none of its rival's (a report once read Daisy 319 ns against msync 222 ns while
/// every other run that day read 200-240 against 220-270). In rounds it falls on all alike,
/// and the runs of one round can be compared pairwise (mechanisms next to each other in
/// `mechs` run next to each other in every round). Every other round goes through the
/// mechanisms in reverse, so none always runs right after the same one (fsync's disk writes,
/// say). Each mechanism is warmed up first (a tenth of a run, at least 100 operations).
/// Returns each mechanism's nanoseconds per operation of every run, in round order, in the
/// order given.
fn time_rounds(runs: usize, mechs: &mut [Timed]) -> Result<Vec<Vec<f64>>> {
    // Operation numbers go on from the warm-up, per mechanism.
    let mut next = vec![0u64; mechs.len()];
    for (m, i) in mechs.iter_mut().zip(next.iter_mut()) {
        let warm = (m.ops / 10).max(100);
        (m.run)(*i, warm)?;
        *i += warm;
    }
    let mut samples = vec![Vec::with_capacity(runs); mechs.len()];
    for round in 0..runs {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..mechs.len()).collect()
        } else {
            (0..mechs.len()).rev().collect()
        };
        for k in order {
            let (m, i) = (&mut mechs[k], &mut next[k]);
            let t = (m.run)(*i, m.ops)?;
            *i += m.ops;
            samples[k].push(t.as_nanos() as f64 / m.ops as f64);
        }
    }
    Ok(samples)
}

/// The benchmark's Daisy pool file, shared by the Rust path and the C API (`--api c`) so that
/// both run on the same memory: how long a cache-line write-back takes depends on where the
/// line lies (one process measuring the same C loop on four pools read medians from 159 to
/// 226 ns), so two pools would compare their placements as much as the two APIs. A pool file
/// is open through one handle at a time (the exclusive lock), so each run opens it through
/// its own API, closing the other, before its clock starts, and warms it up (its lane's log
/// and the lines it touches back in the cache). Without the C API the Rust path opens it once.
struct SharedPool<'l> {
    path: PathBuf,
    lib: Option<&'l DaisyC>,
    rust: RefCell<Option<Pool>>,
    c: RefCell<Option<CPool<'l>>>,
}

impl<'l> SharedPool<'l> {
    /// Create the pool file (through the Rust API) and open it there.
    fn create(path: &Path, lib: Option<&'l DaisyC>) -> Result<Self> {
        let _ = std::fs::remove_file(path);
        let pool = Pool::create(
            path,
            &PoolOptions::new(LAYOUT).size(256 << 20).max_size(1 << 30),
        )?;
        pool.root::<BenchRoot>()?;
        Ok(SharedPool {
            path: path.to_path_buf(),
            lib,
            rust: RefCell::new(Some(pool)),
            c: RefCell::new(None),
        })
    }

    /// The pool through the Rust API, opened there (and closed in C) when it was not; the
    /// flag says whether it was just opened.
    fn rust(&self) -> Result<(Ref<'_, Pool>, bool)> {
        let opened = self.rust.borrow().is_none();
        if opened {
            // Dropping the C handle closes it (everything committed made durable).
            drop(self.c.borrow_mut().take());
            *self.rust.borrow_mut() = Some(Pool::open(&self.path, LAYOUT)?);
        }
        let pool = Ref::map(self.rust.borrow(), |p| p.as_ref().expect("opened above"));
        Ok((pool, opened))
    }

    /// The pool through the C API (`--api c` only), opened there (and closed in Rust) when it
    /// was not; the flag says whether it was just opened.
    fn c(&self) -> Result<(Ref<'_, CPool<'l>>, bool)> {
        let lib = self
            .lib
            .ok_or_else(|| anyhow!("the C API was not loaded"))?;
        let opened = self.c.borrow().is_none();
        if opened {
            if let Some(p) = self.rust.borrow_mut().take() {
                p.close()?;
            }
            *self.c.borrow_mut() = Some(CPool::open(
                lib,
                &self.path,
                LAYOUT,
                std::mem::size_of::<BenchRoot>() as u64,
            )?);
        }
        let pool = Ref::map(self.c.borrow(), |p| p.as_ref().expect("opened above"));
        Ok((pool, opened))
    }
}

/// Operations run untimed on a pool just opened for a run, before its clock starts, so that a
/// run of `n` operations does not pay for the caches the other API left cold; numbered from
/// [`REOPEN_WARM_FIRST`] (never the timed runs' numbers).
fn reopen_warm_ops(n: u64) -> u64 {
    (n / 20).clamp(1, 5_000)
}
const REOPEN_WARM_FIRST: u64 = 1 << 40;

/// The Rust path on the shared pool.
fn daisy_timed<'a>(shared: &'a SharedPool<'_>, case: &'a str, ops: u64) -> Timed<'a> {
    let mut live: Vec<PPtr<[u8; 64]>> = vec![PPtr::null(); PAIRS as usize];
    let mut pos = 0u64;
    Timed {
        ops,
        run: Box::new(move |first, n| {
            let (pool, opened) = shared.rust()?;
            let root = pool.root::<BenchRoot>()?;
            let mut op = daisy_op(&pool, root, case, &mut live, &mut pos);
            if opened {
                let w = reopen_warm_ops(n);
                time_ops(REOPEN_WARM_FIRST, w, &mut op)?;
            }
            time_ops(first, n, &mut op)
        }),
    }
}

/// The C API on the shared pool.
fn capi_timed<'a>(shared: &'a SharedPool<'_>, case: &'a str, ops: u64) -> Timed<'a> {
    let mut live: Vec<u64> = vec![0; PAIRS as usize];
    let mut pos = 0u64;
    Timed {
        ops,
        run: Box::new(move |first, n| {
            let (pool, opened) = shared.c()?;
            let mut op = capi_op(&pool, case, &mut live, &mut pos);
            if opened {
                let w = reopen_warm_ops(n);
                time_ops(REOPEN_WARM_FIRST, w, &mut op)?;
            }
            time_ops(first, n, &mut op)
        }),
    }
}

fn count_pass(n: u64, mut op: impl FnMut(u64) -> Result<()>) -> Result<(f64, f64)> {
    counters::enable(true);
    let _ = counters::take();
    let r = (0..n).try_for_each(|i| op(1_000_000_000 + i));
    let c = counters::take();
    counters::enable(false);
    r?;
    Ok((c.flushes as f64 / n as f64, c.fences as f64 / n as f64))
}

/// The measured operation for `case`, chosen once (so the harness adds no per-call dispatch).
/// `alloc-free-pairs` keeps its live blocks in `live` (a ring, `pos` its next place) across
/// runs.
fn daisy_op<'a>(
    pool: &'a Pool,
    root: PPtr<BenchRoot>,
    case: &str,
    live: &'a mut [PPtr<[u8; 64]>],
    pos: &'a mut u64,
) -> Box<dyn FnMut(u64) -> Result<()> + 'a> {
    let err = anyhow::Error::from;
    match case {
        "update-1" => Box::new(move |i| {
            pool.transaction(|tx| tx.write(root.cast::<u64>(), &i))
                .map_err(err)
        }),
        "update-8" => Box::new(move |i| {
            pool.transaction(|tx| {
                for l in 0..8u64 {
                    tx.write(root.byte_add::<u64>(l * 64), &i)?;
                }
                Ok::<_, Error>(())
            })
            .map_err(err)
        }),
        "alloc-free" => Box::new(move |i| {
            pool.transaction(|tx| alloc_link_free(tx, root, i))
                .map_err(err)
        }),
        "alloc-free-x100" => Box::new(move |i| {
            pool.transaction(|tx| {
                for k in 0..100 {
                    alloc_link_free(tx, root, i * 100 + k)?;
                }
                Ok::<_, Error>(())
            })
            .map_err(err)
        }),
        // The live blocks are kept in DRAM (the pool sees them as unreachable; the benchmark
        // pool is thrown away).
        "alloc-free-pairs" => Box::new(move |_| {
            pool.transaction(|tx| {
                for _ in 0..PAIRS {
                    let new = tx.alloc(&[0u8; 64])?;
                    let old = std::mem::replace(&mut live[(*pos % PAIRS) as usize], new);
                    *pos += 1;
                    if !old.is_null() {
                        tx.free(old)?;
                    }
                }
                Ok::<_, Error>(())
            })
            .map_err(err)
        }),
        other => panic!("unknown case {other}"),
    }
}

fn alloc_link_free(tx: &mut daisy::Tx<'_>, root: PPtr<BenchRoot>, i: u64) -> daisy::Result<()> {
    let slot = root.byte_add::<PPtr<[u8; 64]>>(512 + 8 * (i % RING as u64));
    let old = tx.read(slot)?;
    let mut v = [0u8; 64];
    v[..8].copy_from_slice(&i.to_le_bytes());
    let new = tx.alloc(&v)?;
    tx.write(slot, &new)?;
    if !old.is_null() {
        tx.free(old)?;
    }
    Ok(())
}

/// The same transactions as [`daisy_op`], through the C API (libdaisy.so): the same calls a
/// C program makes (`daisy_tx_begin`, `_read`, `_alloc`, `_write`, `_free`, `_commit`).
/// `alloc-free-pairs`'s live blocks as in [`daisy_op`].
fn capi_op<'a>(
    p: &'a CPool<'_>,
    case: &str,
    live: &'a mut [u64],
    pos: &'a mut u64,
) -> Box<dyn FnMut(u64) -> Result<()> + 'a> {
    let root = p.root;
    match case {
        "update-1" => Box::new(move |i| p.tx(|t| t.write(root, &i.to_le_bytes()))),
        "update-8" => Box::new(move |i| {
            p.tx(|t| {
                for l in 0..8u64 {
                    t.write(root + l * 64, &i.to_le_bytes())?;
                }
                Ok(())
            })
        }),
        "alloc-free" => Box::new(move |i| p.tx(|t| c_alloc_link_free(t, root, i))),
        "alloc-free-x100" => Box::new(move |i| {
            p.tx(|t| {
                for k in 0..100 {
                    c_alloc_link_free(t, root, i * 100 + k)?;
                }
                Ok(())
            })
        }),
        "alloc-free-pairs" => Box::new(move |_| {
            p.tx(|t| {
                for _ in 0..PAIRS {
                    let new = t.alloc(64)?;
                    t.write(new, &[0u8; 64])?;
                    let old = std::mem::replace(&mut live[(*pos % PAIRS) as usize], new);
                    *pos += 1;
                    if old != 0 {
                        t.free(old)?;
                    }
                }
                Ok(())
            })
        }),
        other => panic!("unknown case {other}"),
    }
}

fn c_alloc_link_free(t: &CTx<'_>, root: u64, i: u64) -> Result<()> {
    let slot = root + 512 + 8 * (i % RING as u64);
    let old = t.read_u64(slot)?;
    let mut v = [0u8; 64];
    v[..8].copy_from_slice(&i.to_le_bytes());
    let new = t.alloc(64)?;
    t.write(new, &v)?;
    t.write(slot, &new.to_le_bytes())?;
    if old != 0 {
        t.free(old)?;
    }
    Ok(())
}

fn pmdk_op<'a>(
    p: &'a PmdkPool<'a>,
    ring: &'a mut [PMEMoid],
    case: &str,
) -> impl FnMut(u64) -> Result<()> + 'a {
    let case = case.to_string();
    let root = p.root;
    let mut pairs: Vec<PMEMoid> = vec![PMEMoid::default(); PAIRS as usize];
    let mut pairs_pos = 0u64;
    move |i| match case.as_str() {
        "alloc-free-pairs" => p.tx(|t| {
            for _ in 0..PAIRS {
                let new = t.alloc(64)?;
                let old = std::mem::replace(&mut pairs[(pairs_pos % PAIRS) as usize], new);
                pairs_pos += 1;
                if old.off != 0 {
                    t.free(old)?;
                }
            }
            Ok(())
        }),
        "update-1" => p.tx(|t| {
            t.add_range(root, 0, 8)?;
            t.store_u64(root, 0, i);
            Ok(())
        }),
        "update-8" => p.tx(|t| {
            for l in 0..8u64 {
                t.add_range(root, l * 64, 8)?;
                t.store_u64(root, l * 64, i);
            }
            Ok(())
        }),
        "alloc-free" | "alloc-free-x100" => {
            let k = if case == "alloc-free" { 1 } else { 100 };
            p.tx(|t| {
                for j in 0..k {
                    let idx = ((i * k + j) % RING as u64) as usize;
                    // The ring of object ids lives in the root after the 512 bytes of lines.
                    let off = 512 + 16 * idx as u64;
                    t.add_range(root, off, 16)?;
                    let new = t.alloc(64)?;
                    let old = ring[idx];
                    t.store_u64(root, off, new.pool_uuid_lo);
                    t.store_u64(root, off + 8, new.off);
                    ring[idx] = new;
                    if old.off != 0 {
                        t.free(old)?;
                    }
                }
                Ok(())
            })
        }
        other => Err(anyhow!("unknown case {other}")),
    }
}

/// The seed's baseline: the same 8-byte update in an mmap'ed file, made durable with msync of
/// its page (on tmpfs msync writes nothing anywhere: the report says so).
fn msync_op(map: &daisy::internals::Mapping) -> impl FnMut(u64) -> Result<()> + '_ {
    move |i| {
        map.write(8192, &i);
        daisy::internals::msync(map.at(8192, 8) as usize & !4095, 4096).map_err(anyhow::Error::from)
    }
}

/// write + fdatasync of the 8 bytes.
fn fsync_op(file: &std::fs::File) -> impl FnMut(u64) -> Result<()> + '_ {
    use std::os::unix::fs::FileExt;
    move |i| {
        file.write_all_at(&i.to_le_bytes(), 12288)?;
        file.sync_data().map_err(anyhow::Error::from)
    }
}

/// The floor: a bare 8-byte store + cache-line flush + fence on a mapped tmpfs file.
fn store_flush_op(
    map: &daisy::internals::Mapping,
    persist: Persister,
) -> impl FnMut(u64) -> Result<()> + '_ {
    move |i| {
        map.write(4096, &i);
        persist.flush(map.at(4096, 8), 8);
        persist.fence().map_err(anyhow::Error::from)
    }
}

/// Environment line every benchmark prints.
pub fn describe_env(pool: &Pool) -> String {
    format!(
        "pool {} on {} ({}), mode {}{}",
        pool.path().display(),
        pool.info().fs_type,
        if pool.info().fs_type == "tmpfs" {
            "DRAM emulating NVM, as in seed 000"
        } else {
            "disk"
        },
        pool.mode().describe(),
        if daisy::FlushInstr::available().is_empty() {
            String::new()
        } else {
            format!(
                "; CPU flush instructions: {}",
                daisy::FlushInstr::available()
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )
}

/// Run the benchmark. `emit` receives each row as soon as it is measured.
pub fn run(
    cfg: &Config,
    mut note: impl FnMut(&str),
    mut emit: impl FnMut(&Row),
) -> Result<Vec<Row>> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let dpath = cfg
        .dir
        .join(format!("daisy-bench-tx-{}.pool", std::process::id()));
    let ppath = cfg
        .dir
        .join(format!("pmdk-bench-tx-{}.pool", std::process::id()));
    let fpath = cfg
        .dir
        .join(format!("store-flush-{}.bin", std::process::id()));
    let _cleanup = Cleanup(vec![dpath.clone(), ppath.clone(), fpath.clone()]);
    let clib = match &cfg.c_lib {
        Some(p) => Some(DaisyC::load(p)?),
        None => None,
    };
    let shared = SharedPool::create(&dpath, clib.as_ref())?;
    let (mode, fs) = {
        let (pool, _) = shared.rust()?;
        note(&describe_env(&pool));
        (pool.mode(), pool.info().fs_type.to_string())
    };
    let pmdk = Pmdk::load();
    match &pmdk {
        Ok(p) => note(&format!(
            "PMDK: {} (libpmemobj, forced pmem mode: PMEM_IS_PMEM_FORCE=1)",
            p.version
        )),
        Err(e) => note(&format!("PMDK: not measured: {e}")),
    }
    if cfg.cases.iter().any(|c| c == "update-1") {
        for db in Db::ALL {
            note(&format!(
                "{} (update-1): {}; {}",
                db.name(),
                db.settings(),
                db.version()
            ));
        }
    }
    if let Some(l) = &clib {
        note(&format!(
            "C API: {} (daisy-c rows: the same transactions through daisy.h, on the Rust path's \
             pool file, each run opening it through its own API; x rust = C time / Rust time, \
             the median of the rounds' ratios)",
            l.path.display()
        ));
    }
    let mut rows = Vec::new();
    let mut ring: Vec<PMEMoid> = vec![PMEMoid::default(); RING];
    let ppool = match &pmdk {
        Ok(lib) => match PmdkPool::create(
            lib,
            &ppath,
            256 << 20,
            std::mem::size_of::<BenchRoot>() + 16 * RING,
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                note(&format!("PMDK: pool creation failed: {e}"));
                None
            }
        },
        Err(_) => None,
    };
    let sfile = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&fpath)?;
    sfile.set_len(1 << 20)?;
    // Touch every page so no mechanism pays for first-touch faults.
    use std::os::unix::fs::FileExt;
    sfile.write_all_at(&vec![0u8; 1 << 20], 0)?;
    let smap = daisy::internals::Mapping::new(&sfile, 1 << 20, 1 << 20)?;
    let spersist = Persister::new(mode);

    for case in &cfg.cases {
        let row = |mech: &'static str, runs_ns: Vec<f64>, counts: Option<(f64, f64)>| {
            let sp = Spread::of(&runs_ns);
            Row {
                bench: "tx",
                case: case.clone(),
                mechanism: mech,
                ns_per_op: sp.median,
                ops_per_s: 1e9 / sp.median,
                spread_min_ns: sp.min,
                spread_max_ns: sp.max,
                pairs_per_s: match case.as_str() {
                    "alloc-free" => Some(1e9 / sp.median),
                    "alloc-free-x100" => Some(100.0 * 1e9 / sp.median),
                    "alloc-free-pairs" => Some(PAIRS as f64 * 1e9 / sp.median),
                    _ => None,
                },
                flushes_per_op: counts.map(|c| c.0),
                fences_per_op: counts.map(|c| c.1),
                runs: cfg.runs,
                ops: cfg.ops,
                mode: if mech == "pmdk" {
                    "pmem (forced)".into()
                } else {
                    mode.describe()
                },
                fs: fs.clone(),
                speedup_vs_pmdk: None,
                speedup_vs_daisy: None,
                x_store_flush: None,
                x_rust: None,
                version: None,
                runs_ns,
            }
        };
        let ops = match case.as_str() {
            "alloc-free-x100" => (cfg.ops / 50).max(200),
            "alloc-free-pairs" => (cfg.ops / 500).max(50),
            _ => cfg.ops,
        };
        // Daisy, PMDK, and for update-1 the floor and file persistence (the seed's baseline),
        // timed in rounds. msync and fsync cost microseconds to milliseconds on a disk: fewer
        // operations per run.
        let file_ops = (ops / 10).max(100);
        let update_1 = case == "update-1";
        // The embedded databases (update-1 only): the record updated by one durable write
        // transaction per operation, fewer operations per run as for the files.
        let dbs: Vec<UpdateOne> = if update_1 {
            Db::ALL
                .iter()
                .map(|&db| {
                    UpdateOne::create(
                        db,
                        &cfg.dir,
                        &format!("tx-{}-{}", db.name(), std::process::id()),
                    )
                })
                .collect::<Result<_>>()?
        } else {
            vec![]
        };
        // The Rust path, the C API and PMDK next to each other, so that in every round their
        // runs follow each other: the C API's ratios to both are taken round by round.
        let mut timed = vec![daisy_timed(&shared, case, ops)];
        if clib.is_some() {
            timed.push(capi_timed(&shared, case, ops));
        }
        if let Some(pp) = &ppool {
            timed.push(Timed::new(ops, pmdk_op(pp, &mut ring, case)));
        }
        if update_1 {
            timed.push(Timed::new(ops, store_flush_op(&smap, spersist.clone())));
            timed.push(Timed::new(file_ops, msync_op(&smap)));
            timed.push(Timed::new(file_ops, fsync_op(&sfile)));
            for u in &dbs {
                timed.push(Timed::boxed(file_ops, u.op()?));
            }
        }
        let mut samples = time_rounds(cfg.runs, &mut timed)?.into_iter();
        drop(timed);
        let mut next = || samples.next().expect("samples per timed mechanism");
        let counts = {
            let (pool, _) = shared.rust()?;
            let root = pool.root::<BenchRoot>()?;
            let mut live = vec![PPtr::null(); PAIRS as usize];
            let mut pos = 0;
            count_pass(
                1000.min(ops),
                daisy_op(&pool, root, case, &mut live, &mut pos),
            )?
        };
        let mut d = row("daisy", next(), Some(counts));
        let mut c_row = clib.as_ref().map(|_| row("daisy-c", next(), None));
        let p_row = ppool.as_ref().map(|_| row("pmdk", next(), None));
        let mut s_row = None;
        let mut file_rows = vec![];
        if update_1 {
            let counts = count_pass(1000, store_flush_op(&smap, spersist.clone()))?;
            s_row = Some(row("store-flush", next(), Some(counts)));
            for (mech, mode) in [
                ("msync", "msync of the page"),
                ("fsync", "pwrite + fdatasync"),
            ] {
                let mut r = row(mech, next(), None);
                r.mode = mode.into();
                r.ops = file_ops;
                file_rows.push(r);
            }
            for u in &dbs {
                let mut r = row(u.db.name(), next(), None);
                r.mode = u.db.settings().into();
                r.ops = file_ops;
                r.version = Some(u.db.version());
                file_rows.push(r);
            }
        }
        if let Some(p) = &p_row {
            d.speedup_vs_pmdk = Some(p.ns_per_op / d.ns_per_op);
        }
        if let Some(c) = &mut c_row {
            c.x_rust = Some(median(&round_ratios(c, &d)));
            if let Some(p) = &p_row {
                c.speedup_vs_pmdk = Some(median(&round_ratios(p, c)));
            }
        }
        if let Some(s) = &s_row {
            d.x_store_flush = Some(d.ns_per_op / s.ns_per_op);
        }
        for f in file_rows.iter_mut() {
            f.speedup_vs_daisy = Some(f.ns_per_op / d.ns_per_op);
        }
        for r in [Some(d), c_row, p_row, s_row]
            .into_iter()
            .flatten()
            .chain(file_rows)
        {
            emit(&r);
            rows.push(r);
        }
    }
    drop(ppool);
    drop(shared);
    Ok(rows)
}

struct Cleanup(Vec<PathBuf>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Human-readable table of tx bench rows.
pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new([
        "case",
        "mechanism",
        "ns/op",
        "ops/s",
        "spread (ns)",
        "flush/op",
        "fence/op",
        "vs pmdk",
        "x floor",
        "daisy faster",
        "x rust",
    ])
    .left(&[0, 1]);
    let opt = |v: Option<f64>, suffix: &str| {
        v.map(|v| format!("{v:.2}{suffix}"))
            .unwrap_or_else(|| "-".into())
    };
    for r in rows {
        t.row([
            r.case.clone(),
            r.mechanism.to_string(),
            format!("{:.1}", r.ns_per_op),
            format!("{:.0}", r.ops_per_s),
            format!("{:.0}..{:.0}", r.spread_min_ns, r.spread_max_ns),
            opt(r.flushes_per_op, ""),
            opt(r.fences_per_op, ""),
            opt(r.speedup_vs_pmdk, "x"),
            opt(r.x_store_flush, "x"),
            opt(r.speedup_vs_daisy, "x"),
            opt(r.x_rust, "x"),
        ]);
    }
    t.text()
}

/// One row of the thread-scaling run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScalingRow {
    pub bench: &'static str,
    pub case: &'static str,
    pub threads: usize,
    pub ops_per_s: f64,
    /// Aggregate throughput divided by the one-thread throughput.
    pub scaling: f64,
    pub mode: String,
}

/// One-update transactions on 1..=`max_threads` threads, each thread on its own cache line of
/// one pool (no shared data, so only the commit path itself can serialise them: each thread
/// has its own log lane, and commits share one `fetch_add`).
pub fn thread_scaling(dir: &Path, max_threads: usize, ops: u64) -> Result<Vec<ScalingRow>> {
    let path = dir.join(format!("daisy-bench-threads-{}.pool", std::process::id()));
    let _cleanup = Cleanup(vec![path.clone()]);
    let _ = std::fs::remove_file(&path);
    let pool = Pool::create(
        &path,
        &PoolOptions::new("daisy.bench.threads")
            .size(64 << 20)
            .max_size(1 << 30),
    )?;
    let base = pool.transaction(|tx| tx.alloc_zeroed_bytes(64 * 64))?;
    let mode = pool.mode().describe();
    let mut rows: Vec<ScalingRow> = vec![];
    for threads in 1..=max_threads.max(1) {
        let mut samples = vec![];
        for _ in 0..3 {
            let barrier = std::sync::Barrier::new(threads + 1);
            let t0 = std::thread::scope(|s| {
                for t in 0..threads {
                    let (pool, barrier) = (&pool, &barrier);
                    s.spawn(move || {
                        let slot = base.byte_add::<u64>(64 * t as u64);
                        barrier.wait();
                        for i in 0..ops {
                            pool.transaction(|tx| tx.write(slot, &i)).unwrap();
                        }
                    });
                }
                barrier.wait();
                Instant::now()
            });
            samples.push((threads as u64 * ops) as f64 / t0.elapsed().as_secs_f64());
        }
        let ops_per_s = crate::stats::median(&samples);
        let one = rows.first().map(|r| r.ops_per_s).unwrap_or(ops_per_s);
        rows.push(ScalingRow {
            bench: "tx-threads",
            case: "update-1",
            threads,
            ops_per_s,
            scaling: ops_per_s / one,
            mode: mode.clone(),
        });
    }
    Ok(rows)
}

/// Human-readable table of the thread-scaling rows.
pub fn scaling_table(rows: &[ScalingRow]) -> String {
    let mut t = Table::new(["case", "threads", "transactions/s", "scaling", "mode"]).left(&[0, 4]);
    for r in rows {
        t.row([
            r.case.to_string(),
            r.threads.to_string(),
            format!("{:.0}", r.ops_per_s),
            format!("{:.2}x", r.scaling),
            r.mode.clone(),
        ]);
    }
    t.text()
}

#[cfg(test)]
mod tests {
    use super::{time_rounds, Timed};
    use std::cell::RefCell;

    #[test]
    fn rounds_alternate_the_mechanisms_after_warming_each() {
        // Which mechanism ran each operation, and its operation number.
        let log = RefCell::new(Vec::<(char, u64)>::new());
        let op = |m: char| {
            let log = &log;
            move |i: u64| {
                log.borrow_mut().push((m, i));
                Ok(())
            }
        };
        let mut mechs = vec![Timed::new(200, op('a')), Timed::new(20, op('b'))];
        let samples = time_rounds(3, &mut mechs).unwrap();
        drop(mechs);
        // Each mechanism's three runs, in round order.
        assert_eq!(samples.len(), 2);
        assert!(samples
            .iter()
            .all(|s| s.len() == 3 && s.iter().all(|&x| x > 0.0)));
        // Collapse the log into runs of one mechanism: (mechanism, operations, first number).
        let mut runs: Vec<(char, u64, u64)> = vec![];
        for &(m, i) in log.borrow().iter() {
            match runs.last_mut() {
                Some(r) if r.0 == m => r.1 += 1,
                _ => runs.push((m, 1, i)),
            }
        }
        // Warm-ups (a tenth of a run, at least 100 operations), then a run of each in every
        // round, every other round in reverse (a b | b a | a b: the runs next to each other
        // of one mechanism read as one here), the operation numbers going on from the
        // warm-up.
        assert_eq!(
            runs,
            vec![
                ('a', 100, 0),
                ('b', 100, 0),
                ('a', 200, 100),
                ('b', 20 + 20, 100),
                ('a', 200 + 200, 300),
                ('b', 20, 140),
            ]
        );
    }
}
