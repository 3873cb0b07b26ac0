//! `daisy bench io`: seed 002's fio matrix. NVM used as a block store, measured as bandwidth
//! (MB/s, 10^6 bytes per second) for rw in {read, write, randread, randwrite} x block sizes
//! x jobs (threads), for each mechanism on the same directory (tmpfs emulates NVM):
//!
//! * `daisy`: Daisy's block store (`daisy::PBlockStore`): every write atomic and durable when
//!   it returns;
//! * `libpmemblk`: PMDK's block store, called in process (the same load generator as
//!   `daisy`): atomic and durable too;
//! * `fio-pmemblk`, `fio-libpmem`, `fio-mmap`, `fio-psync`, `fio-psync-fsync`: the real `fio`
//!   binary's engines (`libpmem` with `--sync=1`: non-temporal copies drained per write;
//!   `mmap` and `psync` without a sync are not durable when a write returns; `--fsync=1` is);
//! * `pwrite`: this crate's load generator on `pwrite`/`pread` of a file, the same path as
//!   `fio-psync`: the cross-check of the generator against fio (within 10%, printed).
//!
//! A cell runs its jobs for a fixed time on one store (file) of `size` bytes shared by all
//! jobs, as fio's `--numjobs` on one `--filename` with `--thread`: sequential jobs each start
//! at block 0 and wrap; random ones draw uniformly. The stores are filled before the first read
//! cell (a block never written reads as zeros without touching the data in a block store).

use crate::pmdk::{Pmemblk, PmemblkPool};
use crate::table::Table;
use anyhow::{anyhow, bail, Context, Result};
use daisy::{PBlockStore, PPtr, Pool, PoolOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const RWS: [&str; 4] = ["read", "write", "randread", "randwrite"];
pub const BLOCK_SIZES: [u32; 5] = [512, 1024, 2048, 4096, 8192];
pub const JOBS: [u32; 4] = [1, 2, 4, 8];
pub const MECHANISMS: [&str; 10] = [
    "daisy",
    "libpmemblk",
    "fio-pmemblk",
    "fio-libpmem",
    "fio-mmap",
    "fio-psync",
    "fio-psync-fsync",
    "pwrite",
    "fio-psync-disk",
    "fio-psync-fsync-disk",
];

/// The mechanisms on `Config::dir` (tmpfs): all but the disk ones.
pub const TMPFS_MECHANISMS: usize = 8;

/// A mechanism that runs in `Config::disk_dir` (a disk file system) instead of `dir`.
pub fn on_disk(m: &str) -> bool {
    m.ends_with("-disk")
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    pub dir: PathBuf,
    /// A directory on a disk file system for the `-disk` mechanisms (seed 002's ext4 rows).
    pub disk_dir: Option<PathBuf>,
    pub rws: Vec<String>,
    pub block_sizes: Vec<u32>,
    pub jobs: Vec<u32>,
    pub mechanisms: Vec<String>,
    /// Seconds per cell.
    pub seconds: f64,
    /// Bytes of data per store.
    pub size: u64,
    pub seed: u64,
}

impl Config {
    /// The full matrix of seed 002 (80 cells per mechanism) on `dir` (the disk mechanisms
    /// join when `disk_dir` is set: [`Config::with_disk`]).
    pub fn full(dir: PathBuf) -> Config {
        Config {
            dir,
            disk_dir: None,
            rws: RWS.iter().map(|s| s.to_string()).collect(),
            block_sizes: BLOCK_SIZES.to_vec(),
            jobs: JOBS.to_vec(),
            mechanisms: MECHANISMS[..TMPFS_MECHANISMS]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            seconds: 1.0,
            size: 256 << 20,
            seed: 1,
        }
    }

    /// A few cells: random writes and reads of 512 B and 4 KiB blocks by 1 and 4 jobs.
    pub fn quick(dir: PathBuf) -> Config {
        Config {
            rws: vec!["randwrite".into(), "randread".into()],
            block_sizes: vec![512, 4096],
            jobs: vec![1, 4],
            seconds: 0.5,
            size: 64 << 20,
            ..Config::full(dir)
        }
    }

    /// Add seed 002's disk rows: `fio-psync` with and without `--fsync=1` on a file in
    /// `disk_dir`.
    pub fn with_disk(mut self, disk_dir: PathBuf) -> Config {
        self.disk_dir = Some(disk_dir);
        for m in &MECHANISMS[TMPFS_MECHANISMS..] {
            if !self.mechanisms.iter().any(|x| x == m) {
                self.mechanisms.push(m.to_string());
            }
        }
        self
    }
}

/// One measured cell.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell {
    pub mechanism: String,
    pub rw: String,
    pub bs: u32,
    pub jobs: u32,
    /// 10^6 bytes per second; None when the mechanism could not run (see `note`).
    pub mb_s: Option<f64>,
    pub note: String,
    /// fio-psync's cells when the cross-check runs: fio's own time per I/O of one job in this
    /// cell's shape, outside any I/O (its `null` engine, which does no I/O), in ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fio_harness_ns: Option<f64>,
}

/// Seconds of fio's null engine per cross-check cell (pure CPU: steady in a short run).
const HARNESS_SECONDS: f64 = 0.2;

/// Nanoseconds per I/O of one job from a cell's MB/s.
pub fn ns_per_io(mb_s: f64, bs: u32, jobs: u32) -> f64 {
    jobs as f64 * bs as f64 * 1e3 / mb_s
}

/// What a load generator drives: blocks of one size, read and written from many threads.
pub trait Target: Sync {
    fn nblocks(&self) -> u64;
    fn read(&self, n: u64, buf: &mut [u8]) -> Result<()>;
    fn write(&self, n: u64, buf: &[u8]) -> Result<()>;
    /// Read the run of blocks from `n` that fills `buf` (a multiple of the block size): one
    /// call on a file, a block at a time on a block store.
    fn read_run(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        let bs = self.block_size();
        for (i, b) in buf.chunks_mut(bs).enumerate() {
            self.read(n + i as u64, b)?;
        }
        Ok(())
    }
    /// Write the run of blocks from `n` in `buf`, as [`read_run`](Self::read_run).
    fn write_run(&self, n: u64, buf: &[u8]) -> Result<()> {
        let bs = self.block_size();
        for (i, b) in buf.chunks(bs).enumerate() {
            self.write(n + i as u64, b)?;
        }
        Ok(())
    }
    /// Bytes per block.
    fn block_size(&self) -> usize;
}

/// A file of `len` bytes at `path`, created or truncated, open for reading and writing
/// (sparse: callers that want it allocated do so themselves).
pub(crate) fn create_file(path: &Path, len: u64) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| path.display().to_string())?;
    f.set_len(len)?;
    Ok(f)
}

pub mod methods;
pub mod openloop;
pub mod pagecache;
pub mod powerfail;
pub mod validate;
pub mod workload;

struct DaisyTarget {
    _pool: Pool,
    store: PBlockStore,
}

impl Target for DaisyTarget {
    fn nblocks(&self) -> u64 {
        self.store.len()
    }
    fn read(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.store.read(n, buf)?)
    }
    fn write(&self, n: u64, buf: &[u8]) -> Result<()> {
        Ok(self.store.write(n, buf)?)
    }
    fn block_size(&self) -> usize {
        self.store.block_size()
    }
}

impl Target for PmemblkPool<'_> {
    fn nblocks(&self) -> u64 {
        self.nblock()
    }
    fn read(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        PmemblkPool::read(self, n, buf)
    }
    fn write(&self, n: u64, buf: &[u8]) -> Result<()> {
        PmemblkPool::write(self, n, buf)
    }
    fn block_size(&self) -> usize {
        PmemblkPool::block_size(self)
    }
}

/// A file read and written by `pread`/`pwrite`, with `fdatasync` after each write when `sync`.
pub struct FileTarget {
    file: std::fs::File,
    bs: u64,
    n: u64,
    sync: bool,
}

impl FileTarget {
    /// A file of `n` blocks of `bs` bytes at `path` (created or truncated).
    pub fn create(path: &Path, bs: u64, n: u64, sync: bool) -> Result<FileTarget> {
        let file = create_file(path, bs * n)?;
        // Allocated before the first cell, as fio lays out a new file (`fallocate=native`):
        // otherwise the first writes of a sparse tmpfs file pay the page allocation and
        // zeroing that fio's writes do not, and the cross-check compares different work.
        if let Err(e) = rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bs * n)
        {
            if e != rustix::io::Errno::OPNOTSUPP {
                return Err(anyhow!("{}: fallocate: {e}", path.display()));
            }
        }
        Ok(FileTarget { file, bs, n, sync })
    }
}

impl Target for FileTarget {
    fn nblocks(&self) -> u64 {
        self.n
    }
    fn read(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.file.read_exact_at(buf, n * self.bs)?)
    }
    fn write(&self, n: u64, buf: &[u8]) -> Result<()> {
        self.file.write_all_at(buf, n * self.bs)?;
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn read_run(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        self.read(n, buf)
    }
    fn write_run(&self, n: u64, buf: &[u8]) -> Result<()> {
        self.write(n, buf)
    }
    fn block_size(&self) -> usize {
        self.bs as usize
    }
}

/// Daisy's block store of `size` bytes of `bs`-byte blocks in a new pool in `dir`; the pool's
/// path (remove it when done).
pub fn daisy_target(dir: &Path, bs: u32, size: u64) -> Result<(impl Target, PathBuf)> {
    let path = dir.join(format!("daisy-bench-io-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let nblocks = size / bs as u64;
    let data = (nblocks + PBlockStore::DEFAULT_SPARE as u64) * bs as u64;
    let pool_size = (data + nblocks * 8 + (16 << 20)).next_multiple_of(1 << 20);
    let pool = Pool::create(
        &path,
        &PoolOptions::new("daisy.bench.io")
            .size(pool_size)
            .max_size(pool_size * 2),
    )?;
    let root = pool.root::<PPtr<PBlockStore>>()?;
    let id = pool.transaction(|tx| {
        let id = PBlockStore::create_in(tx, bs, nblocks)?;
        tx.write(root, &id)?;
        Ok::<_, daisy::Error>(id)
    })?;
    let store = PBlockStore::open(&pool, id)?;
    // Untimed set-up, as fio lays out its file before a job: map the store's pages in now, so
    // the first cell does not pay the page faults later cells do not (PMDK's
    // `prefault.at_open`).
    store.prefault();
    Ok((DaisyTarget { _pool: pool, store }, path))
}

/// Write every block once (so reads copy data), on `threads` threads.
pub(crate) fn fill(t: &dyn Target, bs: u32) -> Result<()> {
    let n = t.nblocks();
    let threads = 4u64;
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                sc.spawn(move || -> Result<()> {
                    let mut buf = vec![0x5au8; bs as usize];
                    let mut i = k;
                    while i < n {
                        buf[..8].copy_from_slice(&i.to_le_bytes());
                        t.write(i, &buf)?;
                        i += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().map_err(|_| anyhow!("a fill thread panicked"))?)
    })
}

/// Run `jobs` threads of `rw` on `t` for `secs`; MB/s.
///
/// Timed as fio times a time-based job group, so that the cross-check compares like with
/// like: the jobs start together (a barrier, as fio's threads wait for each other before
/// their first I/O), each runs for `secs` on its own clock from its first operation (fio's
/// `--runtime` per job, not a stop signal that a descheduled thread notices late), and the
/// bandwidth is all jobs' bytes over the longest job's time (fio's group `bw_bytes`: the
/// summed bytes over the longest runtime). Thread creation and joining are outside the time.
fn drive(t: &dyn Target, rw: &str, bs: u32, jobs: u32, secs: f64, seed: u64) -> Result<f64> {
    let n = t.nblocks();
    let random = rw.starts_with("rand");
    let write = rw.ends_with("write");
    let run_for = Duration::from_secs_f64(secs);
    let start = std::sync::Barrier::new(jobs as usize);
    // Each job: (operations, its own elapsed time).
    let r: Result<Vec<(u64, Duration)>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..jobs)
            .map(|j| {
                let start = &start;
                sc.spawn(move || -> Result<(u64, Duration)> {
                    let mut x = (seed ^ (j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
                    let mut buf = vec![0xa5u8; bs as usize];
                    let mut seq = 0u64;
                    let mut done = 0u64;
                    start.wait();
                    let t0 = Instant::now();
                    loop {
                        // The clock is read every 16 operations (a few ns each: under 1% of
                        // the cheapest cell's operation).
                        for _ in 0..16 {
                            let lba = if random {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                x % n
                            } else {
                                let l = seq;
                                seq = if seq + 1 == n { 0 } else { seq + 1 };
                                l
                            };
                            if write {
                                buf[..8].copy_from_slice(&lba.to_le_bytes());
                                t.write(lba, &buf)?;
                            } else {
                                t.read(lba, &mut buf)?;
                            }
                        }
                        done += 16;
                        let el = t0.elapsed();
                        if el >= run_for {
                            return Ok((done, el));
                        }
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a job panicked"))?)
            .collect()
    });
    let per_job = r?;
    let ops: u64 = per_job.iter().map(|p| p.0).sum();
    let longest = per_job
        .iter()
        .map(|p| p.1)
        .max()
        .unwrap_or(run_for)
        .as_secs_f64();
    Ok(ops as f64 * bs as f64 / longest / 1e6)
}

/// fio's engine and extra options for a mechanism.
fn fio_engine(m: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match m {
        "fio-pmemblk" => ("pmemblk", &[]),
        "fio-libpmem" => ("libpmem", &["--sync=1"]),
        "fio-mmap" => ("mmap", &[]),
        "fio-psync" => ("psync", &[]),
        "fio-psync-fsync" | "fio-psync-fsync-disk" => ("psync", &["--fsync=1"]),
        "fio-psync-disk" => ("psync", &[]),
        // No I/O at all: fio's own cost per I/O (the cross-check's reference).
        "fio-null" => ("null", &[]),
        _ => return None,
    })
}

/// Whether the `fio` binary runs; its version.
pub fn fio_version() -> Result<String> {
    let o = std::process::Command::new("fio")
        .arg("--version")
        .output()
        .context("fio is not installed (scripts/install-deps.sh installs Debian's fio)")?;
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// One fio run of a cell; MB/s from its JSON (`bw_bytes` of the group).
fn fio_cell(
    cfg: &Config,
    m: &str,
    file: &Path,
    rw: &str,
    bs: u32,
    jobs: u32,
    secs: Option<f64>,
) -> Result<f64> {
    let (engine, extra) = fio_engine(m).expect("a fio mechanism");
    let size_mb = cfg.size >> 20;
    let filename = if engine == "pmemblk" {
        // path,bsize,fsize_mb: the pool (with its BTT) is created at this size.
        format!("{},{bs},{}", file.display(), size_mb + size_mb / 8 + 16)
    } else {
        file.display().to_string()
    };
    let mut cmd = std::process::Command::new("fio");
    cmd.env("PMEM_IS_PMEM_FORCE", "1")
        .arg("--name=cell")
        .arg(format!("--filename={filename}"))
        .arg(format!("--ioengine={engine}"))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={bs}"))
        .arg(format!("--numjobs={jobs}"))
        .arg(format!("--size={}", cfg.size))
        .args([
            "--thread",
            "--group_reporting",
            "--norandommap",
            "--unlink=0",
            "--output-format=json",
            // fio's per-I/O latency bookkeeping off (as its pmemblk example does): the cells
            // measure bandwidth, and the bookkeeping costs more than a 512 B copy.
            "--disable_lat=1",
            "--disable_clat=1",
            "--disable_slat=1",
            "--disable_bw_measurement=1",
            "--clat_percentiles=0",
        ])
        .args(extra);
    // Time-based cells; without a time, one pass over the file (laying it out).
    if let Some(secs) = secs {
        let ms = (secs * 1000.0).round().max(100.0) as u64;
        cmd.arg(format!("--runtime={ms}ms")).arg("--time_based");
    }
    let out = cmd.output().context("running fio")?;
    if !out.status.success() {
        bail!(
            "fio {engine} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        );
    }
    let s = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON object.
    let json = &s[s.find('{').ok_or_else(|| anyhow!("fio printed no JSON"))?..];
    let v: serde_json::Value = serde_json::from_str(json).context("fio's JSON")?;
    let job = &v["jobs"][0];
    let side = if rw.ends_with("write") {
        "write"
    } else {
        "read"
    };
    let bw = job[side]["bw_bytes"]
        .as_f64()
        .ok_or_else(|| anyhow!("fio's JSON lacks {side}.bw_bytes"))?;
    Ok(bw / 1e6)
}

/// Run the matrix; `progress` gets a line per cell.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Cell>> {
    std::fs::create_dir_all(&cfg.dir)?;
    let mut cells = vec![];
    let pmemblk = if cfg.mechanisms.iter().any(|m| m == "libpmemblk") {
        Some(Pmemblk::load())
    } else {
        None
    };
    let fio = if cfg.mechanisms.iter().any(|m| m.starts_with("fio-")) {
        Some(fio_version())
    } else {
        None
    };
    let mut push = |cells: &mut Vec<Cell>, m: &str, rw: &str, bs: u32, j: u32, r: Result<f64>| {
        let (mb_s, note) = match r {
            Ok(v) => (Some(v), String::new()),
            Err(e) => (None, e.to_string()),
        };
        progress(&format!(
            "{m:<16} {rw:<9} bs {bs:>5} jobs {j}: {}",
            mb_s.map(|v| format!("{v:.0} MB/s"))
                .unwrap_or_else(|| format!("skipped ({note})"))
        ));
        cells.push(Cell {
            fio_harness_ns: None,
            mechanism: m.into(),
            rw: rw.into(),
            bs,
            jobs: j,
            mb_s,
            note,
        });
    };
    // Writes before reads: a store is filled once, before its first read cell.
    let mut order: Vec<&String> = cfg.rws.iter().filter(|r| r.ends_with("write")).collect();
    order.extend(cfg.rws.iter().filter(|r| !r.ends_with("write")));
    let tag = std::process::id();
    let with_pwrite = cfg.mechanisms.iter().any(|m| m == "pwrite");
    for m in &cfg.mechanisms {
        for &bs in &cfg.block_sizes {
            let dir = if on_disk(m) {
                cfg.disk_dir.clone()
            } else {
                Some(cfg.dir.clone())
            };
            let Some(dir) = dir else {
                for rw in &order {
                    for &j in &cfg.jobs {
                        push(
                            &mut cells,
                            m,
                            rw,
                            bs,
                            j,
                            Err(anyhow!("no disk directory given (--disk-dir)")),
                        );
                    }
                }
                continue;
            };
            std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
            let file = dir.join(format!("daisy-bench-io-{tag}-{m}.data"));
            let _ = std::fs::remove_file(&file);
            // The store of this mechanism and block size, for the in-process generators.
            let target: Result<(Box<dyn Target + '_>, Option<PathBuf>)> = match m.as_str() {
                "daisy" => daisy_target(&cfg.dir, bs, cfg.size)
                    .map(|(t, p)| (Box::new(t) as Box<dyn Target>, Some(p))),
                "libpmemblk" => match &pmemblk {
                    Some(Ok(lib)) => PmemblkPool::create(
                        lib,
                        &file,
                        bs as usize,
                        (cfg.size + cfg.size / 8 + (16 << 20)) as usize,
                    )
                    .map(|p| (Box::new(p) as Box<dyn Target>, None)),
                    Some(Err(e)) => Err(anyhow!("{e}")),
                    None => unreachable!(),
                },
                "pwrite" => FileTarget::create(&file, bs as u64, cfg.size / bs as u64, false)
                    .map(|t| (Box::new(t) as Box<dyn Target>, None)),
                f if f.starts_with("fio-") => match &fio {
                    Some(Err(e)) => Err(anyhow!("{e}")),
                    _ => Ok((Box::new(NoTarget) as Box<dyn Target>, None)),
                },
                other => Err(anyhow!("unknown mechanism {other}")),
            };
            let (target, pool_path) = match target {
                Ok(t) => t,
                Err(e) => {
                    let why = format!("{e:#}");
                    for rw in &order {
                        for &j in &cfg.jobs {
                            push(&mut cells, m, rw, bs, j, Err(anyhow!("{why}")));
                        }
                    }
                    continue;
                }
            };
            let mut filled = false;
            for rw in &order {
                for &j in &cfg.jobs {
                    let r = if m.starts_with("fio-") {
                        if !rw.ends_with("write") && !filled {
                            // Lay the file out (and fill a pmemblk pool) once, untimed.
                            let _ = fio_cell(cfg, m, &file, "write", bs, 1, None).map(|_| ());
                            filled = true;
                        }
                        fio_cell(cfg, m, &file, rw, bs, j, Some(cfg.seconds))
                    } else {
                        if !rw.ends_with("write") && !filled {
                            fill(&*target, bs)?;
                            filled = true;
                        }
                        drive(&*target, rw, bs, j, cfg.seconds, cfg.seed)
                    };
                    let measured = r.is_ok();
                    push(&mut cells, m, rw, bs, j, r);
                    // The cross-check's reference: fio's own cost per I/O in this cell's shape.
                    if m == "fio-psync" && measured && with_pwrite {
                        let null =
                            fio_cell(cfg, "fio-null", &file, rw, bs, j, Some(HARNESS_SECONDS));
                        if let (Ok(mb), Some(c)) = (null, cells.last_mut()) {
                            c.fio_harness_ns = Some(ns_per_io(mb, bs, j));
                        }
                    }
                }
            }
            drop(target);
            if let Some(p) = pool_path {
                let _ = std::fs::remove_file(p);
            }
            let _ = std::fs::remove_file(&file);
        }
    }
    Ok(cells)
}

/// Placeholder target of the fio mechanisms (fio runs as a process).
struct NoTarget;

impl Target for NoTarget {
    fn nblocks(&self) -> u64 {
        0
    }
    fn read(&self, _: u64, _: &mut [u8]) -> Result<()> {
        bail!("not an in-process target")
    }
    fn write(&self, _: u64, _: &[u8]) -> Result<()> {
        bail!("not an in-process target")
    }
    fn block_size(&self) -> usize {
        1
    }
}

fn find<'a>(cells: &'a [Cell], m: &str, rw: &str, bs: u32, j: u32) -> Option<&'a Cell> {
    cells
        .iter()
        .find(|c| c.mechanism == m && c.rw == rw && c.bs == bs && c.jobs == j)
}

/// A table in the seed's shape: a row per (rw, jobs), a column per block size, each cell
/// written by `cell(rw, bs, jobs)`.
fn seed_grid(cfg: &Config, mut cell: impl FnMut(&str, u32, u32) -> String) -> Table {
    let mut t = Table::new(
        std::iter::once("type-jobs".to_string())
            .chain(cfg.block_sizes.iter().map(|b| format!("{b} B"))),
    )
    .left(&[0]);
    for rw in &cfg.rws {
        t.gap();
        for &j in &cfg.jobs {
            let mut row = vec![format!("{rw}-{j}")];
            row.extend(cfg.block_sizes.iter().map(|&bs| cell(rw, bs, j)));
            t.row(row);
        }
    }
    t
}

/// The seed's table for one mechanism: a row per (rw, jobs), a column per block size, MB/s.
pub fn mechanism_table(cfg: &Config, cells: &[Cell], m: &str) -> Table {
    seed_grid(cfg, |rw, bs, j| {
        find(cells, m, rw, bs, j)
            .and_then(|c| c.mb_s)
            .map(|v| crate::table::grouped(v, 0))
            .unwrap_or_else(|| "-".into())
    })
}

/// `ours` over `theirs` per cell in the seed's shape (a row per rw and jobs, a column per
/// block size), each ratio written by `cell(rw, ratio)`; "-" where either is missing.
fn ratio_grid(
    cfg: &Config,
    cells: &[Cell],
    ours: &str,
    theirs: &str,
    mut cell: impl FnMut(&str, u32, u32, f64) -> String,
) -> Table {
    seed_grid(cfg, |rw, bs, j| {
        let d = find(cells, ours, rw, bs, j).and_then(|c| c.mb_s);
        let r = find(cells, theirs, rw, bs, j).and_then(|c| c.mb_s);
        match (d, r) {
            (Some(d), Some(r)) if r > 0.0 => cell(rw, bs, j, d / r),
            _ => "-".into(),
        }
    })
}

/// Daisy over `rival`, per cell (x), in the same shape; and the smallest ratio over the write
/// cells.
pub fn ratio_table(cfg: &Config, cells: &[Cell], rival: &str) -> (Table, Option<f64>) {
    let mut min_write: Option<f64> = None;
    let t = ratio_grid(cfg, cells, "daisy", rival, |rw, _, _, x| {
        if rw.ends_with("write") {
            min_write = Some(min_write.map_or(x, |m: f64| m.min(x)));
        }
        format!("{x:.2}x")
    });
    (t, min_write)
}

/// The agreement the cross-check asks for: this crate's generator within 10% of fio.
pub const CROSS_CHECK_TOLERANCE: f64 = 0.10;

/// Whether a cross-check ratio (ours / fio's) is within [`CROSS_CHECK_TOLERANCE`].
pub fn agrees(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= CROSS_CHECK_TOLERANCE
}

/// What the gap table shows, for the output and the report.
pub const CROSS_CHECK_GAP: &str = "both measure the same work: the same file system, a file \
allocated before the first cell (as fio lays out a new file), block-aligned offsets, all jobs \
started together and each timed from its first I/O for the cell's time, the bytes of all jobs \
over the longest job's time (fio's group bandwidth). What remains is fio's own time per I/O \
(its I/O unit bookkeeping, offset generation, accounting and clock checks), measured in the same \
cell shape with fio's null engine, which does no I/O. Per I/O of one job, in ns: fio-psync's \
time minus pwrite's / fio's own time. Where the two are close, the gap is fio's harness, not a \
difference in the I/O measured; it weighs most on the cheapest I/O (one job, small blocks on \
tmpfs, where an I/O takes a few hundred ns)";

/// The cross-check per cell: this crate's generator (`pwrite`) over fio's `psync` on the same
/// file system, in the seed's shape; "✓" within 10%, "✗" outside.
pub fn cross_check_table(cfg: &Config, cells: &[Cell]) -> Table {
    ratio_grid(cfg, cells, "pwrite", "fio-psync", |_, _, _, x| {
        format!("{x:.2}x {}", if agrees(x) { "✓" } else { "✗" })
    })
}

/// Why a cross-check cell differs, per I/O of one job in ns: fio-psync's time minus
/// pwrite's (the gap), and fio's own time per I/O outside the I/O in that cell's shape (its
/// null engine), as "gap / fio's own"; "-" where either is missing.
pub fn cross_check_gap_table(cfg: &Config, cells: &[Cell]) -> Table {
    let mut t = Table::new(
        std::iter::once("type-jobs".to_string())
            .chain(cfg.block_sizes.iter().map(|b| format!("{b} B"))),
    )
    .left(&[0]);
    for rw in &cfg.rws {
        t.gap();
        for &j in &cfg.jobs {
            let mut row = vec![format!("{rw}-{j}")];
            for &bs in &cfg.block_sizes {
                let own = find(cells, "pwrite", rw, bs, j).and_then(|c| c.mb_s);
                let fio = find(cells, "fio-psync", rw, bs, j);
                row.push(
                    match (
                        own,
                        fio.and_then(|c| c.mb_s),
                        fio.and_then(|c| c.fio_harness_ns),
                    ) {
                        (Some(o), Some(f), Some(h)) if o > 0.0 && f > 0.0 => {
                            format!("{:.0} / {h:.0}", ns_per_io(f, bs, j) - ns_per_io(o, bs, j))
                        }
                        _ => "-".into(),
                    },
                );
            }
            t.row(row);
        }
    }
    t
}

/// The cross-check of this crate's generator (`pwrite`) against fio's `psync` on the same
/// files: (cells compared, cells within 10%, the largest deviation).
pub fn cross_check(cells: &[Cell]) -> (usize, usize, f64) {
    let mut n = 0;
    let mut within = 0;
    let mut worst = 0f64;
    for c in cells.iter().filter(|c| c.mechanism == "pwrite") {
        let (Some(own), Some(fio)) = (
            c.mb_s,
            find(cells, "fio-psync", &c.rw, c.bs, c.jobs).and_then(|f| f.mb_s),
        ) else {
            continue;
        };
        n += 1;
        worst = worst.max((own / fio - 1.0).abs());
        if agrees(own / fio) {
            within += 1;
        }
    }
    (n, within, worst)
}

/// Everything printed after the run: a table per mechanism, Daisy's ratios over its rivals,
/// the generator's cross-check.
pub fn report(cfg: &Config, cells: &[Cell]) -> String {
    let mut out = String::new();
    for m in &cfg.mechanisms {
        let skipped: Vec<&Cell> = cells
            .iter()
            .filter(|c| &c.mechanism == m && c.mb_s.is_none())
            .collect();
        out += &format!("\n{m} (MB/s)\n");
        if let Some(c) = skipped.first() {
            out += &format!("  {} cells skipped: {}\n", skipped.len(), c.note);
        }
        out += &mechanism_table(cfg, cells, m).text();
    }
    if cfg.mechanisms.iter().any(|m| m == "daisy") {
        for rival in cfg.mechanisms.iter().filter(|m| *m != "daisy") {
            let (t, min_write) = ratio_table(cfg, cells, rival);
            out += &format!("\ndaisy / {rival} (higher: Daisy faster)\n");
            out += &t.text();
            if let Some(m) = min_write {
                out += &format!("  smallest write ratio: {m:.2}x\n");
            }
        }
    }
    let (n, within, worst) = cross_check(cells);
    if n > 0 {
        out += "\ncross-check of the load generator: pwrite / fio-psync on the same files, per cell (✓ within 10%, ✗ outside)\n";
        out += &cross_check_table(cfg, cells).text();
        out += &format!(
            "  {within} of {n} cells within 10% (largest deviation {:.0}%)\n",
            worst * 100.0
        );
        out += &format!("\nwhy they differ: {CROSS_CHECK_GAP}\n");
        out += &cross_check_gap_table(cfg, cells).text();
    }
    out
}
