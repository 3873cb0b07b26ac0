//! Data validation after SIGKILL (seed 003): `daisy crashtest --blocks`.
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

/// Create the pool and its store (the root points at it).
pub fn setup(path: &Path) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let pool = Pool::create(
        path,
        &PoolOptions::new(LAYOUT).size(16 << 20).max_size(64 << 20),
    )?;
    let root = pool.root::<PPtr<PBlockStore>>()?;
    pool.transaction(|tx| {
        let id = PBlockStore::create_in(tx, BLOCK, NBLOCKS)?;
        tx.write(root, &id)
    })?;
    pool.close()?;
    Ok(())
}

/// Child side: write blocks on [`WRITERS`] threads until killed, printing each acknowledged
/// `lba version`.
pub fn child(path: &Path, seed: u64) -> Result<()> {
    let pool = Pool::open(path, LAYOUT)?;
    let id = pool.read(pool.root::<PPtr<PBlockStore>>()?);
    let store = PBlockStore::open(&pool, id)?;
    let mut buf = vec![0u8; BLOCK as usize];
    let mut gen = 0u64;
    for lba in 0..store.len() {
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
                    let mine = store.len() / WRITERS;
                    for k in 1u64.. {
                        let lba = rng.gen_range(0..mine) * WRITERS + t;
                        let v = gen << 32 | k;
                        store.write(lba, &block(BLOCK as usize, lba, v))?;
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

#[derive(Clone, Debug)]
pub struct Config {
    pub pool: PathBuf,
    pub kills: u64,
    pub seed: u64,
    pub max_delay: Duration,
    /// Program and leading arguments that start a child (`daisy crashtest-child`); the pool,
    /// `--seed S` and `--blocks` follow.
    pub child_cmd: Vec<String>,
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
    pub failures: u64,
    pub seed: u64,
    pub mode: String,
    pub messages: Vec<String>,
}

/// Run the kill torture; `progress` after each kill.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Summary)) -> Result<Summary> {
    setup(&cfg.pool)?;
    let mut sum = Summary {
        seed: cfg.seed,
        ..Default::default()
    };
    {
        let pool = Pool::open(&cfg.pool, LAYOUT)?;
        sum.mode = pool.mode().describe();
    }
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut buf = vec![0u8; BLOCK as usize];
    for kill in 0..cfg.kills {
        let (prog, args) = cfg.child_cmd.split_first().expect("child command");
        let mut child = Command::new(prog)
            .args(args)
            .arg(&cfg.pool)
            .arg("--seed")
            .arg(cfg.seed.wrapping_add(kill).to_string())
            .arg("--blocks")
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
        // Reopen (recovery) and read every block back.
        let pool = Pool::open(&cfg.pool, LAYOUT)?;
        let id = pool.read(pool.root::<PPtr<PBlockStore>>()?);
        let store = PBlockStore::open(&pool, id)?;
        let note = |sum: &mut Summary, m: String| {
            if sum.messages.len() < 10 {
                sum.messages.push(format!(
                    "kill {kill}: {m}; replay: daisy crashtest --blocks --seed {} --kills {}",
                    cfg.seed,
                    kill + 1
                ));
            }
        };
        for lba in 0..store.len() {
            store.read(lba, &mut buf)?;
            let want = acked.get(&lba).copied().unwrap_or(0);
            let got = match parse(&buf) {
                Ok(None) => 0,
                Ok(Some((l, _))) if l != lba => {
                    sum.corrupt += 1;
                    note(&mut sum, format!("LBA {lba} holds LBA {l}'s block"));
                    continue;
                }
                Ok(Some((_, v))) => v,
                Err(e) => {
                    sum.corrupt += 1;
                    note(&mut sum, format!("LBA {lba}: {e}"));
                    continue;
                }
            };
            if want > 0 {
                sum.blocks_verified += 1;
            }
            if got < want {
                sum.lost += 1;
                note(
                    &mut sum,
                    format!("LBA {lba} holds version {got:#x}, but {want:#x} was acknowledged"),
                );
            } else if got > want {
                sum.in_flight_present += 1;
                acked.insert(lba, got);
            }
        }
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
}
