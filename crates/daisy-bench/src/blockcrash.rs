//! Data validation after SIGKILL (seed 003): `daisy crashtest --blocks`, and the same for
//! the file paths (`daisy bench io --validate`: [`Backend`]).
//!
//! A child process (`daisy crashtest-child POOL --seed S --blocks`) opens a block store and
//! runs writer threads, each on its own LBAs (`lba % WRITERS`), writing self-describing blocks
//! ([`block`]: LBA, a version, a checksum); after each write returns it prints `lba version`.
//! Versions grow per LBA across children: a child's generation (one more than the highest in
//! the store when it starts) in the high 32 bits, a per-thread count in the low. The parent
//! kills it with SIGKILL at a random moment, reopens the pool (recovery), and reads every
//! block back: each must be whole (checksum, its own LBA), and hold the acknowledged version
//! or a newer one (the write in flight); a block older than its acknowledged version is
//! **lost**, one that is not whole is **corrupt**. The store's checker and `pool check` with
//! reachability must be clean.
//!
//! The file backends run the same child on a plain file of `NBLOCKS` blocks, written with
//! `pwrite` or stores into a shared mapping, with or without `fdatasync`/`msync` after each
//! write, and read back with `pread` after the kill. A SIGKILL leaves the page cache to the
//! kernel, so a file written without any sync loses nothing to a kill; the power-failure
//! model (`iobench::powerfail`) shows what it loses when the machine stops.

use anyhow::{anyhow, bail, Context, Result};
use daisy::{PBlockStore, PPtr, Pool, PoolOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub const LAYOUT: &str = "daisy.blockcrash";
pub const WRITERS: u64 = 4;
/// The block size of the validation runs (`daisy bench io --validate`, the report) and the
/// default of a [`Config`]; `daisy crashtest --blocks --block-size N` picks another.
pub const BLOCK: u32 = 1024;
pub const NBLOCKS: u64 = 4096;

/// A self-describing block of `bs` bytes (at least 32): LBA, version, filler from both, and a
/// checksum of the rest in the last 8 bytes.
pub fn block(bs: usize, lba: u64, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    b[0..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    for (i, c) in b[16..bs - 8].iter_mut().enumerate() {
        *c = (version.wrapping_mul(131) ^ (i as u64).wrapping_mul(7) ^ lba) as u8;
    }
    let sum = fnv(&b[..bs - 8]);
    b[bs - 8..].copy_from_slice(&sum.to_le_bytes());
    b
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// What a block read back holds: None for zeros (never written), (lba, version) of a whole
/// block; Err when it is torn or mixed.
pub fn parse(b: &[u8]) -> std::result::Result<Option<(u64, u64)>, String> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let bs = b.len();
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    if w(bs - 8) != fnv(&b[..bs - 8]) {
        return Err(format!(
            "a torn or mixed block (checksum mismatch; header says LBA {}, version {:#x})",
            w(0),
            w(8)
        ));
    }
    Ok(Some((w(0), w(8))))
}

/// What the child writes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Backend {
    /// Daisy's block store (`PBlockStore`) in a pool.
    Daisy,
    /// `pwrite` of a file, no sync.
    Pwrite,
    /// `pwrite` then `fdatasync` before the write is acknowledged.
    PwriteFdatasync,
    /// Stores into a shared mapping of the file, no sync.
    Mmap,
    /// Stores into a shared mapping, then `msync(MS_SYNC)` of the block's pages.
    MmapMsync,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Daisy,
        Backend::Pwrite,
        Backend::PwriteFdatasync,
        Backend::Mmap,
        Backend::MmapMsync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Daisy => "daisy",
            Backend::Pwrite => "pwrite",
            Backend::PwriteFdatasync => "pwrite-fdatasync",
            Backend::Mmap => "mmap",
            Backend::MmapMsync => "mmap-msync",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == s)
    }
}

/// A plain file of the store's size, open for reading and writing.
fn open_file(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| path.display().to_string())
}

/// Create the store: the pool and its store (the root points at it), or a zeroed file.
pub fn setup_backend(path: &Path, backend: Backend, block_size: u32) -> Result<()> {
    if backend == Backend::Daisy {
        return setup(path, block_size);
    }
    let _ = std::fs::remove_file(path);
    let f = std::fs::File::create(path).with_context(|| path.display().to_string())?;
    f.set_len(NBLOCKS * block_size as u64)?;
    Ok(())
}

/// Create the pool and its store of `block_size` bytes per block (the root points at it); the
/// store's format is the one `create_in` picks for that size (format 2, one fence per write,
/// up to `PBlockStore::V2_MAX_BLOCK`; format 1 above), so the torture covers both by size.
pub fn setup(path: &Path, block_size: u32) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let pool = Pool::create(
        path,
        &PoolOptions::new(LAYOUT).size(16 << 20).max_size(64 << 20),
    )?;
    let root = pool.root::<PPtr<PBlockStore>>()?;
    pool.transaction(|tx| {
        let id = PBlockStore::create_in(tx, block_size, NBLOCKS)?;
        tx.write(root, &id)
    })?;
    pool.close()?;
    Ok(())
}

/// The child's store: Daisy's, or a file with its write path.
enum ChildStore {
    /// The store, and its pool kept open.
    Daisy(PBlockStore, #[allow(dead_code)] Pool),
    /// The file, its write path, its mapping, and its block size (the file's length over
    /// [`NBLOCKS`], as `setup_backend` made it).
    File(
        std::fs::File,
        Backend,
        Option<daisy::internals::Mapping>,
        u64,
    ),
}

impl ChildStore {
    fn open(path: &Path, backend: Backend) -> Result<ChildStore> {
        if backend == Backend::Daisy {
            let pool = Pool::open(path, LAYOUT)?;
            let id = pool.read(pool.root::<PPtr<PBlockStore>>()?);
            let store = PBlockStore::open(&pool, id)?;
            return Ok(ChildStore::Daisy(store, pool));
        }
        let f = open_file(path)?;
        let flen = f.metadata()?.len();
        let bs = flen / NBLOCKS;
        if bs < 32 || bs * NBLOCKS != flen {
            bail!("{}: not a file of {NBLOCKS} blocks", path.display());
        }
        let len = (NBLOCKS * bs) as usize;
        let map = match backend {
            Backend::Mmap | Backend::MmapMsync => {
                Some(daisy::internals::Mapping::new(&f, len, len).context("mmap")?)
            }
            _ => None,
        };
        Ok(ChildStore::File(f, backend, map, bs))
    }

    fn block_size(&self) -> usize {
        match self {
            ChildStore::Daisy(s, _) => s.block_size(),
            ChildStore::File(_, _, _, bs) => *bs as usize,
        }
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            ChildStore::Daisy(s, _) => Ok(s.read(lba, buf)?),
            ChildStore::File(f, _, _, bs) => {
                use std::os::unix::fs::FileExt;
                Ok(f.read_exact_at(buf, lba * bs)?)
            }
        }
    }

    /// Write a block; durable on return where the backend syncs.
    fn write(&self, lba: u64, data: &[u8]) -> Result<()> {
        match self {
            ChildStore::Daisy(s, _) => Ok(s.write(lba, data)?),
            ChildStore::File(f, b, map, bs) => {
                let off = lba * *bs;
                if let Some(m) = map {
                    // The header (LBA, version) first, then the rest: the validator tells a
                    // block torn by the write in flight at the kill by its header naming a
                    // version newer than acknowledged (`Verdict::torn_in_flight`). One copy
                    // of the whole block would not keep that order: glibc's memcpy of 1 KiB
                    // stores its first 32 bytes last, so a kill inside it left the old header
                    // over new bytes, counted corrupt (seen once in CI, mmap-msync). A SIGKILL
                    // leaves the page cache as the stores made it, in program order (x86-TSO).
                    m.write_bytes(off, &data[..16]);
                    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                    m.write_bytes(off + 16, &data[16..]);
                    if *b == Backend::MmapMsync {
                        let page = daisy::internals::page_size();
                        let start = off as usize & !(page - 1);
                        let end = (off as usize + data.len()).next_multiple_of(page);
                        daisy::internals::msync(m.base() as usize + start, end - start)?;
                    }
                } else {
                    use std::os::unix::fs::FileExt;
                    f.write_all_at(data, off)?;
                    if *b == Backend::PwriteFdatasync {
                        f.sync_data()?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Child side: write blocks on [`WRITERS`] threads until killed, printing each acknowledged
/// `lba version`.
pub fn child(path: &Path, seed: u64) -> Result<()> {
    child_backend(path, seed, Backend::Daisy)
}

/// [`child`] on any backend.
pub fn child_backend(path: &Path, seed: u64, backend: Backend) -> Result<()> {
    let store = ChildStore::open(path, backend)?;
    let bs = store.block_size();
    let mut buf = vec![0u8; bs];
    let mut gen = 0u64;
    for lba in 0..NBLOCKS {
        store.read(lba, &mut buf)?;
        if let Ok(Some((_, v))) = parse(&buf) {
            gen = gen.max(v >> 32);
        }
    }
    let gen = gen + 1;
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|sc| -> Result<()> {
        let hs: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (store, out) = (&store, &out);
                sc.spawn(move || -> Result<()> {
                    let mut rng = SmallRng::seed_from_u64(seed ^ gen << 8 ^ t);
                    let mine = NBLOCKS / WRITERS;
                    for k in 1u64.. {
                        let lba = rng.gen_range(0..mine) * WRITERS + t;
                        let v = gen << 32 | k;
                        store.write(lba, &block(bs, lba, v))?;
                        // Printed only after the write returned: it is durable.
                        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                        writeln!(o, "{lba} {v}")?;
                        o.flush()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| anyhow!("a writer panicked"))??;
        }
        Ok(())
    })
}

/// What one read-back of a store found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Blocks with an acknowledged write, compared with it.
    pub verified: u64,
    /// Blocks older than their acknowledged version (or zeros).
    pub lost: u64,
    /// Blocks not whole: torn, mixed, or another LBA's.
    pub corrupt: u64,
    /// Blocks newer than acknowledged (a write in flight): `acked` is raised to them.
    pub newer: u64,
    /// Blocks torn by a write that was never acknowledged (the checksum fails, the header
    /// names this LBA and a version newer than acknowledged), on a store that does not
    /// promise atomic blocks (`atomic: false`); with `atomic`, such a block is corrupt.
    pub torn_in_flight: u64,
    /// The first few problems, in words.
    pub problems: Vec<String>,
}

/// Read every block of a store of `nblocks` blocks of `bs` bytes back with `read` and compare
/// it with `acked` (LBA -> the newest acknowledged version): the validator of seed 003.
pub fn verify(
    nblocks: u64,
    bs: usize,
    atomic: bool,
    acked: &mut HashMap<u64, u64>,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<Verdict> {
    let mut v = Verdict::default();
    let mut buf = vec![0u8; bs];
    let note = |v: &mut Verdict, m: String| {
        if v.problems.len() < 10 {
            v.problems.push(m);
        }
    };
    for lba in 0..nblocks {
        read(lba, &mut buf)?;
        let want = acked.get(&lba).copied().unwrap_or(0);
        let got = match parse(&buf) {
            Ok(None) => 0,
            Ok(Some((l, _))) if l != lba => {
                v.corrupt += 1;
                note(&mut v, format!("LBA {lba} holds LBA {l}'s block"));
                continue;
            }
            Ok(Some((_, ver))) => ver,
            Err(e) => {
                let w = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap());
                if !atomic && w(0) == lba && w(8) > want {
                    v.torn_in_flight += 1;
                    note(
                        &mut v,
                        format!("LBA {lba}: an unacknowledged write torn: {e}"),
                    );
                } else {
                    v.corrupt += 1;
                    note(&mut v, format!("LBA {lba}: {e}"));
                }
                continue;
            }
        };
        if want > 0 {
            v.verified += 1;
        }
        if got < want {
            v.lost += 1;
            note(
                &mut v,
                format!("LBA {lba} holds version {got:#x}, but {want:#x} was acknowledged"),
            );
        } else if got > want {
            v.newer += 1;
            acked.insert(lba, got);
        }
    }
    Ok(v)
}

#[derive(Clone, Debug)]
pub struct Config {
    pub pool: PathBuf,
    pub kills: u64,
    pub seed: u64,
    pub max_delay: Duration,
    /// Program and leading arguments that start a child (`daisy crashtest-child`); the pool,
    /// `--seed S` and `--blocks` (and `--file-method M` for a file backend) follow.
    pub child_cmd: Vec<String>,
    pub backend: Backend,
    /// Bytes per block ([`BLOCK`] unless chosen): for Daisy it also picks the store's format.
    pub block_size: u32,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub kills: u64,
    /// Acknowledged writes the children printed.
    pub writes_acked: u64,
    /// Blocks read back and compared with their acknowledged version, over all kills.
    pub blocks_verified: u64,
    /// Blocks older than their acknowledged version.
    pub lost: u64,
    /// Blocks not whole (torn, mixed, another LBA's).
    pub corrupt: u64,
    /// Blocks that held a newer version than acknowledged (a write in flight at the kill).
    pub in_flight_present: u64,
    /// Blocks torn by an unacknowledged write (file backends only: see [`Verdict`]).
    pub torn_in_flight: u64,
    pub failures: u64,
    pub seed: u64,
    pub mode: String,
    /// The backend's name (`daisy`, `pwrite`, ...).
    pub backend: String,
    pub messages: Vec<String>,
}

/// Run the kill torture; `progress` after each kill.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Summary)) -> Result<Summary> {
    setup_backend(&cfg.pool, cfg.backend, cfg.block_size)?;
    let mut sum = Summary {
        seed: cfg.seed,
        backend: cfg.backend.name().into(),
        ..Default::default()
    };
    if cfg.backend == Backend::Daisy {
        let pool = Pool::open(&cfg.pool, LAYOUT)?;
        let id = pool.read(pool.root::<PPtr<PBlockStore>>()?);
        let format = PBlockStore::open(&pool, id)?.format();
        sum.mode = format!(
            "{}; block store format {format}, {} B blocks",
            pool.mode().describe(),
            cfg.block_size
        );
    } else {
        sum.mode = format!(
            "a file on {}",
            daisy::internals::fs_type_name(&open_file(&cfg.pool)?)
        );
    }
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    for kill in 0..cfg.kills {
        let (prog, args) = cfg.child_cmd.split_first().expect("child command");
        let mut child = Command::new(prog)
            .args(args)
            .arg(&cfg.pool)
            .arg("--seed")
            .arg(cfg.seed.wrapping_add(kill).to_string())
            .arg("--blocks")
            .args(match cfg.backend {
                Backend::Daisy => vec![],
                b => vec!["--file-method".to_string(), b.name().to_string()],
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning {prog}"))?;
        let stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut got = vec![];
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut it = line.split_whitespace().map(|w| w.parse::<u64>());
                if let (Some(Ok(l)), Some(Ok(v))) = (it.next(), it.next()) {
                    got.push((l, v));
                }
            }
            got
        });
        std::thread::sleep(Duration::from_micros(
            rng.gen_range(1000..=cfg.max_delay.as_micros().max(1001) as u64),
        ));
        let _ = child.kill(); // SIGKILL
        let status = child.wait()?;
        let got = reader.join().map_err(|_| anyhow!("reader panicked"))?;
        if status.code().is_some() {
            let mut e = String::new();
            if let Some(mut s) = child.stderr.take() {
                use std::io::Read;
                let _ = s.read_to_string(&mut e);
            }
            sum.failures += 1;
            sum.messages.push(format!(
                "kill {kill}: the child exited on its own ({status}): {}",
                e.trim()
            ));
            break;
        }
        sum.kills += 1;
        sum.writes_acked += got.len() as u64;
        for (l, v) in got {
            let e = acked.entry(l).or_default();
            *e = (*e).max(v);
        }
        let note = |sum: &mut Summary, m: String| {
            if sum.messages.len() < 10 {
                sum.messages.push(format!(
                    "kill {kill}: {m}; replay: daisy crashtest --blocks --block-size {} --seed {} --kills {}",
                    cfg.block_size,
                    cfg.seed,
                    kill + 1
                ));
            }
        };
        let absorb = |sum: &mut Summary, v: Verdict| {
            sum.blocks_verified += v.verified;
            sum.lost += v.lost;
            sum.corrupt += v.corrupt;
            sum.in_flight_present += v.newer;
            sum.torn_in_flight += v.torn_in_flight;
            for p in v.problems {
                note(sum, p);
            }
        };
        if cfg.backend != Backend::Daisy {
            use std::os::unix::fs::FileExt;
            let f = open_file(&cfg.pool)?;
            let bs = cfg.block_size as u64;
            let v = verify(NBLOCKS, bs as usize, false, &mut acked, |lba, b| {
                Ok(f.read_exact_at(b, lba * bs)?)
            })?;
            absorb(&mut sum, v);
            progress(&sum);
            if sum.lost + sum.corrupt + sum.failures > 0 {
                break;
            }
            continue;
        }
        // Reopen (recovery) and read every block back.
        let pool = Pool::open(&cfg.pool, LAYOUT)?;
        let id = pool.read(pool.root::<PPtr<PBlockStore>>()?);
        let store = PBlockStore::open(&pool, id)?;
        let v = verify(
            store.len(),
            cfg.block_size as usize,
            true,
            &mut acked,
            |lba, b| Ok(store.read(lba, b)?),
        )?;
        absorb(&mut sum, v);
        let c = store.check();
        let mut reach = vec![pool.root::<PPtr<PBlockStore>>()?.offset()];
        reach.extend(c.objects.iter().copied());
        if let Some(p) = c.problems.first() {
            sum.failures += 1;
            note(&mut sum, format!("block store check: {p}"));
        }
        drop(store);
        let rep = pool.check(Some(&reach));
        if let Some(p) = rep.problems.first() {
            sum.failures += 1;
            note(&mut sum, format!("pool check: {p}"));
        }
        drop(pool);
        progress(&sum);
        if sum.lost + sum.corrupt + sum.failures > 0 {
            break;
        }
    }
    let _ = std::fs::remove_file(&cfg.pool);
    if sum.kills == 0 && sum.failures == 0 {
        bail!("no kill ran");
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_describe_themselves_and_a_mix_is_caught() {
        let a = block(1024, 7, 3 << 32 | 9);
        assert_eq!(parse(&a).unwrap(), Some((7, 3 << 32 | 9)));
        assert_eq!(parse(&vec![0; 1024]).unwrap(), None);
        let mut mixed = a.clone();
        mixed[512..576].copy_from_slice(&block(1024, 7, 10)[512..576]);
        assert!(parse(&mixed).is_err());
    }

    #[test]
    fn the_validator_counts_an_injected_lost_and_a_corrupt_block() {
        // Canary: a store that dropped one acknowledged write and tore another must be
        // counted, block by block.
        let n = 16u64;
        let mut image: Vec<Vec<u8>> = (0..n).map(|l| block(256, l, 5)).collect();
        let mut acked: HashMap<u64, u64> = (0..n).map(|l| (l, 5)).collect();
        let clean = verify(n, 256, true, &mut acked.clone(), |l, b| {
            b.copy_from_slice(&image[l as usize]);
            Ok(())
        })
        .unwrap();
        assert_eq!((clean.verified, clean.lost, clean.corrupt), (n, 0, 0));
        acked.insert(3, 6); // acknowledged, never reached the store
        image[9][100] ^= 1; // torn
        image[11] = block(256, 12, 5); // misdirected
        let v = verify(n, 256, true, &mut acked, |l, b| {
            b.copy_from_slice(&image[l as usize]);
            Ok(())
        })
        .unwrap();
        assert_eq!((v.lost, v.corrupt), (1, 2), "{v:?}");
        // A block torn by a write newer than acknowledged: corrupt on an atomic store, torn in
        // flight on a file.
        let mut torn = block(256, 9, 7);
        torn[200..].copy_from_slice(&image[0][200..]);
        image[9] = torn;
        image[11] = block(256, 11, 5);
        let mut acked: HashMap<u64, u64> = (0..n).map(|l| (l, 5)).collect();
        let read = |l: u64, b: &mut [u8]| {
            b.copy_from_slice(&image[l as usize]);
            Ok(())
        };
        let atomic = verify(n, 256, true, &mut acked.clone(), read).unwrap();
        assert_eq!((atomic.corrupt, atomic.torn_in_flight), (1, 0));
        let file = verify(n, 256, false, &mut acked, read).unwrap();
        assert_eq!((file.corrupt, file.torn_in_flight), (0, 1));
        assert!(v
            .problems
            .iter()
            .any(|p| p.contains("LBA 3 holds version 0x5, but 0x6")));
    }
}
