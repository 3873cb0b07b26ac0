//! Seed 004's survey of file-I/O methods (`daisy bench io --methods`): the same data (a
//! seeded set of blocks, each stamped with its block number and the seed) written into a file
//! by each method with each sync policy, for each offset pattern and thread count, in MB/s;
//! then random reads by many threads with latency percentiles.
//!
//! Methods (writes):
//! * `write`: one descriptor shared by the threads; `lseek` + `write` under a lock (the file
//!   position is shared, so the pair must not interleave: the seed's reason to prefer pwrite);
//! * `pwrite`: one descriptor, `pwrite` at the offset, no lock;
//! * `fwrite`: a buffered stream per thread (std's `BufWriter`, 64 KiB, the role of stdio's
//!   FILE buffer); a write at the stream's position is buffered, any other offset seeks, which
//!   first writes the buffer out (as `fseek` does);
//! * `mmap-msync`: stores into a shared mapping; the sync is `msync(MS_SYNC)`;
//! * `mmap-pmem`: stores into a shared mapping; the sync is Daisy's cache-line write-back
//!   (`Persister` in pmem mode: clwb/clflushopt/clflush, as detected) and a fence: durable on
//!   persistent memory (a DAX file); on tmpfs it is the cost NVM would pay, on a disk file it
//!   is not durable at all (the page cache still holds the data);
//! * `odirect`: `pwrite` on a descriptor opened with `O_DIRECT` from a 4 KiB-aligned buffer
//!   (block size a multiple of 4 KiB); where the file system refuses `O_DIRECT` (tmpfs before
//!   Linux 6.6), the cell says "unsupported".
//!
//! Sync policies: `none` (the page cache decides: see `pagecache`), `op` (after every write:
//! `fdatasync`, `msync` of the block's pages, or flush + fence of its lines; `fwrite` flushes
//! its buffer first), `end` (once after the last write, inside the timed region).
//!
//! Offsets: `seq` (each thread writes its own contiguous share in order), `rand` (a seeded
//! random set of distinct blocks, a fraction of the file, in random order, dealt to the
//! threads), `sorted` (the same set, each thread's share sorted ascending: seed 004's
//! "skipping" writes, which on a disk turn seeks into one sweep).

use super::{create_file, pagecache};
use anyhow::{anyhow, bail, Context, Result};
use daisy::internals::{Mapping, Persister};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub const METHODS: [&str; 6] = [
    "write",
    "pwrite",
    "fwrite",
    "mmap-msync",
    "mmap-pmem",
    "odirect",
];
pub const SYNCS: [&str; 3] = ["none", "end", "op"];
pub const OFFSETS: [&str; 3] = ["seq", "rand", "sorted"];
pub const READ_METHODS: [&str; 3] = ["pread", "mmap", "odirect"];

#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    /// Directories to write in (tmpfs, a disk).
    pub dirs: Vec<PathBuf>,
    pub methods: Vec<String>,
    pub syncs: Vec<String>,
    pub offsets: Vec<String>,
    pub threads: Vec<u32>,
    pub read_methods: Vec<String>,
    pub bs: u32,
    /// Bytes of the file.
    pub file_size: u64,
    /// Bytes written per cell (a whole number of blocks; `seq` writes the file's first ones).
    pub write_size: u64,
    /// Random reads per thread count.
    pub reads: u64,
    pub seed: u64,
    /// Keep each cell's file contents' hash (the test of byte-identical results).
    pub hash: bool,
}

impl Config {
    pub fn quick(dirs: Vec<PathBuf>) -> Config {
        Config {
            dirs,
            methods: METHODS.iter().map(|s| s.to_string()).collect(),
            syncs: SYNCS.iter().map(|s| s.to_string()).collect(),
            offsets: OFFSETS.iter().map(|s| s.to_string()).collect(),
            threads: vec![1, 4],
            read_methods: READ_METHODS.iter().map(|s| s.to_string()).collect(),
            bs: 4096,
            file_size: 64 << 20,
            write_size: 8 << 20,
            reads: 20_000,
            seed: 1,
            hash: false,
        }
    }

    pub fn full(dirs: Vec<PathBuf>) -> Config {
        Config {
            threads: vec![1, 2, 4, 8],
            file_size: 256 << 20,
            write_size: 32 << 20,
            reads: 100_000,
            ..Config::quick(dirs)
        }
    }
}

/// One write cell.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MethodCell {
    pub kind: &'static str,
    pub dir: String,
    pub fs: String,
    pub method: String,
    pub sync: String,
    pub offsets: String,
    pub threads: u32,
    pub bs: u32,
    pub bytes: u64,
    /// None: the method could not run here (`note`).
    pub mb_s: Option<f64>,
    pub note: String,
    /// FNV-1a of the file's contents after the cell (with `Config::hash`).
    pub contents_hash: Option<u64>,
}

/// One random-read cell.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReadCell {
    pub kind: &'static str,
    pub dir: String,
    pub fs: String,
    pub method: String,
    pub threads: u32,
    pub bs: u32,
    pub reads: u64,
    pub mb_s: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    pub note: String,
}

/// The content of block `lba` for `seed`: its number, the seed, a filler from both.
pub fn fill_block(buf: &mut [u8], lba: u64, seed: u64) {
    let x = (lba.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed) as u8;
    buf.fill(x);
    buf[0..8].copy_from_slice(&lba.to_le_bytes());
    buf[8..16].copy_from_slice(&seed.to_le_bytes());
}

/// Each thread's list of blocks for an offset pattern.
pub fn plan(offsets: &str, nblocks: u64, count: u64, threads: u32, seed: u64) -> Vec<Vec<u64>> {
    let t = threads as u64;
    match offsets {
        "seq" => (0..t)
            .map(|j| (count * j / t..count * (j + 1) / t).collect())
            .collect(),
        _ => {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut all: Vec<u64> = (0..nblocks).collect();
            let (chosen, _) = all.partial_shuffle(&mut rng, count as usize);
            let chosen = chosen.to_vec();
            (0..t)
                .map(|j| {
                    let mut mine: Vec<u64> = chosen
                        .iter()
                        .skip(j as usize)
                        .step_by(t as usize)
                        .copied()
                        .collect();
                    if offsets == "sorted" {
                        mine.sort_unstable();
                    }
                    mine
                })
                .collect()
        }
    }
}

fn fnv_file(path: &Path) -> Result<u64> {
    let data = std::fs::read(path)?;
    Ok(data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    }))
}

/// A 4 KiB-aligned buffer of `len` bytes inside a Vec (for O_DIRECT).
struct Aligned {
    v: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let v = vec![0u8; len + 4096];
        let at = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
        Aligned { v, at, len }
    }
    fn get(&mut self) -> &mut [u8] {
        &mut self.v[self.at..self.at + self.len]
    }
}

fn open_direct(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Whether `dir`'s file system accepts O_DIRECT (tmpfs does not).
pub fn direct_supported(dir: &Path) -> std::result::Result<(), String> {
    let p = dir.join(format!(
        "daisy-bench-io-direct-{}.probe",
        std::process::id()
    ));
    let r = create_file(&p, 4096)
        .map_err(|e| e.to_string())
        .and_then(|_| open_direct(&p).map(|_| ()).map_err(|e| e.to_string()));
    let _ = std::fs::remove_file(&p);
    r.map_err(|e| format!("unsupported: O_DIRECT refused on this file system ({e})"))
}

fn msync_range(map: &Mapping, off: usize, len: usize) -> Result<()> {
    let page = daisy::internals::page_size();
    let start = off & !(page - 1);
    let end = (off + len).next_multiple_of(page).min(map.len());
    Ok(daisy::internals::msync(
        map.base() as usize + start,
        end - start,
    )?)
}

/// Write the plan into `path` by `method` with `sync`; seconds taken.
fn write_cell(
    path: &Path,
    method: &str,
    sync: &str,
    lists: &[Vec<u64>],
    cfg: &Config,
    persister: &Option<Persister>,
) -> Result<f64> {
    let (bs, file_size, seed) = (cfg.bs as usize, cfg.file_size, cfg.seed);
    let file = create_file(path, file_size)?;
    let sync_op = sync == "op";
    let map = if method.starts_with("mmap") {
        Some(Mapping::new(&file, file_size as usize, file_size as usize).context("mmap")?)
    } else {
        None
    };
    let direct = if method == "odirect" {
        Some(open_direct(path).map_err(|e| anyhow!("unsupported: O_DIRECT refused ({e})"))?)
    } else {
        None
    };
    let shared = Mutex::new(&file);
    let pm = match (method, persister) {
        ("mmap-pmem", Some(p)) => Some(p),
        ("mmap-pmem", None) => bail!("unsupported: no cache-line flush instruction on this CPU"),
        _ => None,
    };
    let t0 = Instant::now();
    std::thread::scope(|sc| -> Result<()> {
        let hs: Vec<_> = lists
            .iter()
            .map(|mine| {
                let (file, map, direct, shared) = (&file, &map, &direct, &shared);
                sc.spawn(move || -> Result<()> {
                    let mut buf = Aligned::new(bs);
                    let mut stream = if method == "fwrite" {
                        Some((
                            std::io::BufWriter::with_capacity(
                                64 << 10,
                                std::fs::OpenOptions::new().write(true).open(path)?,
                            ),
                            u64::MAX,
                        ))
                    } else {
                        None
                    };
                    for &lba in mine {
                        let off = lba * bs as u64;
                        let b = buf.get();
                        fill_block(b, lba, seed);
                        match method {
                            "write" => {
                                let guard = shared.lock().unwrap_or_else(|e| e.into_inner());
                                let mut f: &std::fs::File = *guard;
                                f.seek(SeekFrom::Start(off))?;
                                f.write_all(b)?;
                            }
                            "pwrite" => file.write_all_at(b, off)?,
                            "odirect" => direct.as_ref().expect("opened").write_all_at(b, off)?,
                            "fwrite" => {
                                let (w, pos) = stream.as_mut().expect("opened");
                                if *pos != off {
                                    w.seek(SeekFrom::Start(off))?;
                                }
                                w.write_all(b)?;
                                *pos = off + bs as u64;
                                if sync_op {
                                    w.flush()?;
                                }
                            }
                            _ => {
                                let m = map.as_ref().expect("mapped");
                                m.write_bytes(off, b);
                                if sync_op {
                                    match pm {
                                        Some(p) => p.persist(m.at(off, bs), bs)?,
                                        None => msync_range(m, off as usize, bs)?,
                                    }
                                }
                                continue;
                            }
                        }
                        if sync_op {
                            file.sync_data()?;
                        }
                    }
                    if let Some((mut w, _)) = stream {
                        w.flush()?;
                    }
                    // pmem at the end: this thread's lines written back, one fence.
                    if let (true, Some(p), Some(m)) = (sync == "end", pm, map) {
                        for &lba in mine {
                            p.flush(m.at(lba * bs as u64, bs), bs);
                        }
                        p.fence()?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().map_err(|_| anyhow!("a writer panicked"))?)
    })?;
    if sync == "end" {
        match (&map, pm) {
            (Some(_), Some(_)) => {} // each thread flushed its own blocks
            (Some(m), None) => msync_range(m, 0, m.len())?,
            _ => file.sync_data()?,
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Random reads of the file at `path` by `threads` threads (`reads` in all).
fn read_cell(
    path: &Path,
    method: &str,
    threads: u32,
    bs: usize,
    reads: u64,
    seed: u64,
) -> Result<(f64, Histogram<u64>)> {
    // Read-write: the shared mapping of the mmap reader needs it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let n = len / bs as u64;
    let map = if method == "mmap" {
        Some(Mapping::new(&file, len as usize, len as usize)?)
    } else {
        None
    };
    let direct = if method == "odirect" {
        Some(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .map_err(|e| anyhow!("unsupported: O_DIRECT refused ({e})"))?,
        )
    } else {
        None
    };
    let per = reads / threads as u64;
    let t0 = Instant::now();
    let hists: Vec<Result<Histogram<u64>>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|j| {
                let (file, map, direct) = (&file, &map, &direct);
                sc.spawn(move || -> Result<Histogram<u64>> {
                    let mut h = Histogram::<u64>::new_with_bounds(1, 1 << 42, 3)?;
                    let mut rng = SmallRng::seed_from_u64(seed ^ (j as u64 + 1) << 20);
                    let mut buf = Aligned::new(bs);
                    for _ in 0..per {
                        let off = rng.gen_range(0..n) * bs as u64;
                        let s = Instant::now();
                        let b = buf.get();
                        match (map, direct) {
                            (Some(m), _) => m.read_bytes(off, b),
                            (_, Some(d)) => d.read_exact_at(b, off)?,
                            _ => file.read_exact_at(b, off)?,
                        }
                        std::hint::black_box(&b);
                        h.saturating_record(s.elapsed().as_nanos().max(1) as u64);
                    }
                    Ok(h)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a reader panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut all = Histogram::<u64>::new_with_bounds(1, 1 << 42, 3)?;
    for h in hists {
        all.add(&h?).map_err(|e| anyhow!("{e}"))?;
    }
    Ok((secs, all))
}

/// What a directory is: its file system's name.
pub fn fs_of(dir: &Path) -> String {
    std::fs::File::open(dir)
        .map(|f| daisy::internals::fs_type_name(&f).to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Run the survey; `progress` gets a line per cell.
pub fn run(
    cfg: &Config,
    mut progress: impl FnMut(&str),
) -> Result<(Vec<MethodCell>, Vec<ReadCell>)> {
    if cfg.bs < 16 || !cfg.bs.is_multiple_of(512) {
        bail!("block size {}: a multiple of 512 bytes", cfg.bs);
    }
    let bs = cfg.bs as usize;
    let nblocks = cfg.file_size / cfg.bs as u64;
    let count = (cfg.write_size / cfg.bs as u64).min(nblocks);
    if count == 0 {
        bail!(
            "nothing to write: write size {} < block size {}",
            cfg.write_size,
            cfg.bs
        );
    }
    let persister = daisy::FlushInstr::detect()
        .ok()
        .map(|i| Persister::new(daisy::Mode::Pmem(i)));
    let mut cells = vec![];
    let mut reads = vec![];
    for dir in &cfg.dirs {
        std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        let fs = fs_of(dir);
        let direct = direct_supported(dir);
        let path = dir.join(format!(
            "daisy-bench-io-methods-{}.data",
            std::process::id()
        ));
        for offsets in &cfg.offsets {
            for &threads in &cfg.threads {
                let lists = plan(offsets, nblocks, count, threads, cfg.seed);
                for method in &cfg.methods {
                    for sync in &cfg.syncs {
                        let r = if method == "odirect" && direct.is_err() {
                            Err(anyhow!("{}", direct.clone().unwrap_err()))
                        } else if method == "odirect" && !bs.is_multiple_of(4096) {
                            Err(anyhow!("unsupported: O_DIRECT here needs 4 KiB multiples"))
                        } else {
                            write_cell(&path, method, sync, &lists, cfg, &persister)
                        };
                        let (mb_s, note) = match r {
                            Ok(secs) => (
                                Some((count * cfg.bs as u64) as f64 / secs / 1e6),
                                String::new(),
                            ),
                            Err(e) => (None, format!("{e:#}")),
                        };
                        let contents_hash = if cfg.hash && mb_s.is_some() {
                            Some(fnv_file(&path)?)
                        } else {
                            None
                        };
                        let _ = std::fs::remove_file(&path);
                        progress(&format!(
                            "{fs:<6} {method:<10} sync {sync:<4} {offsets:<6} threads {threads}: {}",
                            mb_s.map(|v| format!("{v:.0} MB/s")).unwrap_or_else(|| note.clone())
                        ));
                        cells.push(MethodCell {
                            kind: "method",
                            dir: dir.display().to_string(),
                            fs: fs.clone(),
                            method: method.clone(),
                            sync: sync.clone(),
                            offsets: offsets.clone(),
                            threads,
                            bs: cfg.bs,
                            bytes: count * cfg.bs as u64,
                            mb_s,
                            note,
                            contents_hash,
                        });
                    }
                }
            }
        }
        // Random reads: the whole file written once (pwrite, synced), then read.
        if !cfg.read_methods.is_empty() && cfg.reads > 0 {
            let all = plan("seq", nblocks, nblocks, 1, cfg.seed);
            write_cell(&path, "pwrite", "end", &all, cfg, &None)?;
            for method in &cfg.read_methods {
                for &threads in &cfg.threads {
                    let r = if method == "odirect" && direct.is_err() {
                        Err(anyhow!("{}", direct.clone().unwrap_err()))
                    } else {
                        read_cell(&path, method, threads, bs, cfg.reads, cfg.seed)
                    };
                    let us = |h: &Histogram<u64>, q: f64| Some(h.value_at_quantile(q) as f64 / 1e3);
                    let cell = match r {
                        Ok((secs, h)) => ReadCell {
                            kind: "randread",
                            dir: dir.display().to_string(),
                            fs: fs.clone(),
                            method: method.clone(),
                            threads,
                            bs: cfg.bs,
                            reads: h.len(),
                            mb_s: Some(h.len() as f64 * bs as f64 / secs / 1e6),
                            p50_us: us(&h, 0.5),
                            p99_us: us(&h, 0.99),
                            p999_us: us(&h, 0.999),
                            max_us: Some(h.max() as f64 / 1e3),
                            note: String::new(),
                        },
                        Err(e) => ReadCell {
                            kind: "randread",
                            dir: dir.display().to_string(),
                            fs: fs.clone(),
                            method: method.clone(),
                            threads,
                            bs: cfg.bs,
                            reads: 0,
                            mb_s: None,
                            p50_us: None,
                            p99_us: None,
                            p999_us: None,
                            max_us: None,
                            note: format!("{e:#}"),
                        },
                    };
                    progress(&format!(
                        "{fs:<6} randread {method:<8} threads {threads}: {}",
                        cell.mb_s
                            .map(|v| format!(
                                "{v:.0} MB/s, p99 {:.1} µs",
                                cell.p99_us.unwrap_or(0.0)
                            ))
                            .unwrap_or_else(|| cell.note.clone())
                    ));
                    reads.push(cell);
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok((cells, reads))
}

/// How the survey measured, in one paragraph (the printed result and the report open with it).
pub fn method_text(cfg: &Config) -> String {
    format!(
        "file-I/O methods (seed 004): {} B blocks, {} MiB written per cell into a {} MiB file \
         (seq: the first blocks in order; rand: a seeded random set of distinct blocks; sorted: \
         the same set, each thread's share ascending); MB/s = 10^6 bytes/s, the sync included; \
         flush instruction for mmap-pmem: {} (durable only on persistent memory mapped with DAX: \
         on tmpfs it is the cost NVM would pay, on a disk file it leaves the data in the page cache)",
        cfg.bs,
        cfg.write_size >> 20,
        cfg.file_size >> 20,
        daisy::FlushInstr::detect()
            .map(|i| i.name().to_string())
            .unwrap_or_else(|e| e),
    )
}

/// One table of the survey: its title, the table, and notes under it (why cells are missing).
pub struct TitledTable {
    pub title: String,
    pub table: crate::table::Table,
    pub notes: Vec<String>,
}

/// The survey's tables: per directory and offset pattern (rows: method and sync; columns:
/// threads; MB/s), then per directory the random reads with their latency.
pub fn tables(cfg: &Config, cells: &[MethodCell], reads: &[ReadCell]) -> Vec<TitledTable> {
    use crate::table::Table;
    let mut out = vec![];
    for dir in &cfg.dirs {
        let d = dir.display().to_string();
        let fs = cells
            .iter()
            .find(|c| c.dir == d)
            .map(|c| c.fs.clone())
            .unwrap_or_default();
        for offsets in &cfg.offsets {
            let mut t = Table::new(
                ["method", "sync"]
                    .into_iter()
                    .map(String::from)
                    .chain(cfg.threads.iter().map(|t| format!("{t} thr"))),
            )
            .left(&[0, 1]);
            let mut notes: Vec<String> = vec![];
            for m in &cfg.methods {
                for s in &cfg.syncs {
                    let mut row = vec![m.clone(), s.clone()];
                    for &th in &cfg.threads {
                        let c = cells.iter().find(|c| {
                            c.dir == d
                                && &c.offsets == offsets
                                && &c.method == m
                                && &c.sync == s
                                && c.threads == th
                        });
                        row.push(match c {
                            Some(c) => match c.mb_s {
                                Some(v) => format!("{v:.0}"),
                                None => {
                                    let n = format!("{m}: {}", c.note);
                                    if !notes.contains(&n) {
                                        notes.push(n);
                                    }
                                    if c.note.starts_with("unsupported") {
                                        "unsupported".into()
                                    } else {
                                        "error".into()
                                    }
                                }
                            },
                            None => "-".into(),
                        });
                    }
                    t.row(row);
                }
            }
            out.push(TitledTable {
                title: format!("{d} ({fs}), offsets {offsets} (MB/s)"),
                table: t,
                notes,
            });
        }
        let mine: Vec<&ReadCell> = reads.iter().filter(|r| r.dir == d).collect();
        if !mine.is_empty() {
            let mut t = Table::new([
                "method",
                "threads",
                "MB/s",
                "p50 µs",
                "p99 µs",
                "p99.9 µs",
                "max µs",
            ])
            .left(&[0]);
            let f = |v: Option<f64>, p: usize| {
                v.map(|v| format!("{v:.p$}")).unwrap_or_else(|| "-".into())
            };
            for r in mine {
                t.row([
                    r.method.clone(),
                    r.threads.to_string(),
                    r.mb_s.map(|v| format!("{v:.0}")).unwrap_or_else(|| {
                        if r.note.starts_with("unsupported") {
                            "unsupported".into()
                        } else {
                            r.note.clone()
                        }
                    }),
                    f(r.p50_us, 1),
                    f(r.p99_us, 1),
                    f(r.p999_us, 1),
                    f(r.max_us, 0),
                ]);
            }
            out.push(TitledTable {
                title: format!(
                    "{d} ({fs}): random reads of {} B, {} reads per cell, latency per read (the \
                     file written once and synced first; pread and mmap are served by the page \
                     cache)",
                    cfg.bs, cfg.reads
                ),
                table: t,
                notes: vec![],
            });
        }
    }
    out
}

/// The printed result: what was measured and how, the page cache's knobs, then the tables.
pub fn report(cfg: &Config, cells: &[MethodCell], reads: &[ReadCell]) -> String {
    let mut out = format!("{}\n{}\n", method_text(cfg), pagecache::describe());
    for t in tables(cfg, cells, reads) {
        out += &format!("\n{}\n", t.title);
        out += &t.table.text();
        for n in t.notes {
            out += &format!("  {n}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(dir: &Path) -> Config {
        Config {
            threads: vec![1, 3],
            bs: 4096,
            file_size: 256 << 10,
            write_size: 96 << 10,
            reads: 60,
            hash: true,
            ..Config::quick(vec![dir.to_path_buf()])
        }
    }

    #[test]
    fn every_method_writes_byte_identical_files_for_the_same_seed() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = tiny(dir.path());
        let (cells, reads) = run(&cfg, |_| {}).unwrap();
        assert_eq!(cells.len(), 3 * 2 * METHODS.len() * SYNCS.len());
        for offsets in OFFSETS {
            let ran: Vec<&MethodCell> = cells
                .iter()
                .filter(|c| c.offsets == offsets && c.mb_s.is_some())
                .collect();
            // All but O_DIRECT (and mmap-pmem without a flush instruction) run anywhere.
            assert!(ran.len() >= 2 * 4 * SYNCS.len(), "{offsets}: {cells:#?}");
            let h = ran[0].contents_hash.unwrap();
            for c in &ran {
                assert_eq!(
                    c.contents_hash,
                    Some(h),
                    "{} {} {} differs",
                    c.method,
                    c.sync,
                    c.offsets
                );
            }
            for c in cells
                .iter()
                .filter(|c| c.offsets == offsets && c.mb_s.is_none())
            {
                assert!(c.note.starts_with("unsupported"), "{c:?}");
            }
        }
        // The patterns write different sets (seq: the first blocks; rand and sorted: the same
        // random set), so their files differ where they should and agree where they should.
        let of = |o: &str| {
            cells
                .iter()
                .find(|c| c.offsets == o && c.mb_s.is_some())
                .unwrap()
                .contents_hash
        };
        assert_ne!(of("seq"), of("rand"));
        assert_eq!(of("rand"), of("sorted"));
        assert!(reads
            .iter()
            .any(|r| r.method == "pread" && r.reads == 60 && r.p50_us.is_some()));
    }

    #[test]
    fn sorted_offsets_are_the_random_set_in_ascending_order_per_thread() {
        let r = plan("rand", 1000, 100, 3, 9);
        let s = plan("sorted", 1000, 100, 3, 9);
        for (a, b) in r.iter().zip(&s) {
            let mut a2 = a.clone();
            a2.sort_unstable();
            assert_eq!(&a2, b);
            assert_ne!(a, b, "a random share that happened to be sorted");
        }
        let mut all: Vec<u64> = r.concat();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 100, "distinct blocks");
        assert_eq!(
            plan("seq", 1000, 100, 3, 9).concat(),
            (0..100).collect::<Vec<_>>()
        );
    }
}
