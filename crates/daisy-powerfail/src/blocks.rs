//! The `blocks` workload: a block store (`daisy::PBlockStore`) created under the simulator
//! and written by three threads at once, with fewer spare blocks than threads (so writers
//! wait for a lane) and every LBA written by all of them (so swaps of one stripe and of one
//! LBA race).
//!
//! Each written block describes itself: its LBA, a version unique in the run, the writer,
//! and a checksum over the rest (seed 003's data validation). A thread's write or zeroing
//! is recorded, under the checker's lock, when it starts and when it returns; a crash image
//! must then hold, for every LBA, a whole block (checksum sound, its own LBA) of a version
//! that may be the latest: one whose write started and whose end (or, still running, none)
//! comes after the start of no write of that LBA which had returned. So an acknowledged write
//! is never lost, a running one is wholly present or wholly absent, and a torn or mixed block
//! is a failure. Before the store's creation returned, the image may hold no store or an
//! empty one; after, it must hold it. Then the store's checker (no physical block named
//! twice, every word in range) and `pool check` with reachability (the root and the store's
//! three objects, nothing leaked).
//!
//! The creation's transaction is small, so its redo record logs the map: the store's open
//! must retire it before the first in-place map store (canary `BlockNoBarrier`); each write
//! must fence its data before the map word names it (canary `BlockSwapBeforeData`) and flush
//! the word (`NoInPlaceFlush`). The seed fixes the operations and the image sampling; the
//! interleaving is the scheduler's.

use crate::{hook, remove_scratch, scratch_files, Ctx, Expect, WorkloadResult};
use anyhow::{anyhow, bail, Result};
use bytemuck::{Pod, Zeroable};
use daisy::sim;
use daisy::{PBlockStore, PPtr, Pool, PoolOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub const THREADS: usize = 3;
const LAYOUT: &str = "daisy.blocks";
/// Block size: four cache lines, so a block's lines can reach the media in any order.
pub const BLOCK: usize = 256;
pub const NBLOCKS: u64 = 24;
const SPARE: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct BlkRoot {
    store: PPtr<PBlockStore>,
}

/// A self-describing block (see the module comment): LBA, version, writer, filler from the
/// version, checksum of the rest in the last 8 bytes.
pub fn block(lba: u64, version: u64, writer: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[0..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    b[16..24].copy_from_slice(&writer.to_le_bytes());
    for (i, c) in b[24..BLOCK - 8].iter_mut().enumerate() {
        *c = (version.wrapping_mul(131) ^ (i as u64).wrapping_mul(7) ^ lba) as u8;
    }
    let sum = fnv(&b[..BLOCK - 8]);
    b[BLOCK - 8..].copy_from_slice(&sum.to_le_bytes());
    b
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// What a block read back holds: zeros, or (lba, version) of a whole block; Err: torn.
fn parse(b: &[u8]) -> std::result::Result<Option<(u64, u64)>, String> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    if w(BLOCK - 8) != fnv(&b[..BLOCK - 8]) {
        return Err(format!(
            "a torn or mixed block (checksum mismatch; header says LBA {}, version {})",
            w(0),
            w(8)
        ));
    }
    Ok(Some((w(0), w(8))))
}

/// One write (or zeroing) of an LBA: its version (0: zeros), and when it started and ended
/// on the workload's clock.
#[derive(Clone, Debug)]
struct Write {
    version: u64,
    zero: bool,
    start: u64,
    end: Option<u64>,
}

struct BlkExpect {
    /// The store's creation returned.
    created: bool,
    clock: u64,
    /// Per LBA, the writes that may still be the latest (pruned as later ones return).
    lbas: Vec<Vec<Write>>,
    acked: u64,
}

impl BlkExpect {
    fn new() -> BlkExpect {
        let initial = Write {
            version: 0,
            zero: true,
            start: 0,
            end: Some(0),
        };
        BlkExpect {
            created: false,
            clock: 1,
            lbas: vec![vec![initial]; NBLOCKS as usize],
            acked: 0,
        }
    }

    /// A write of `lba` starts: its version.
    fn start(&mut self, lba: u64, zero: bool) -> u64 {
        self.clock += 1;
        let v = self.clock;
        self.lbas[lba as usize].push(Write {
            version: v,
            zero,
            start: v,
            end: None,
        });
        v
    }

    /// The write `version` of `lba` returned.
    fn end(&mut self, lba: u64, version: u64) {
        self.clock += 1;
        let now = self.clock;
        let h = &mut self.lbas[lba as usize];
        let start = match h.iter_mut().find(|w| w.version == version) {
            Some(w) => {
                w.end = Some(now);
                w.start
            }
            None => return,
        };
        // Writes that ended before this one started can no longer be the latest.
        h.retain(|w| w.end.is_none_or(|e| e >= start));
        self.acked += 1;
    }

    /// Whether `got` (None: zeros) may be what `lba` holds.
    fn allowed(&self, lba: u64, got: Option<u64>) -> bool {
        let h = &self.lbas[lba as usize];
        h.iter().any(|w| {
            let same = match got {
                None => w.zero,
                Some(v) => !w.zero && w.version == v,
            };
            let end = w.end.unwrap_or(u64::MAX);
            same && !h.iter().any(|o| o.end.is_some() && o.start > end)
        })
    }
}

impl Expect for BlkExpect {
    fn check(&self, path: &Path) -> Result<u64> {
        let pool =
            Pool::open_snapshot(path, Some(LAYOUT)).map_err(|e| anyhow!("recovery failed: {e}"))?;
        let root = pool.root::<BlkRoot>()?;
        let id = pool.read(root).store;
        let mut reach = vec![root.offset()];
        if id.is_null() {
            if self.created {
                bail!("the block store is missing, but its creation had returned");
            }
        } else {
            reach.extend(daisy::block_store_objects(&pool, id.offset())?);
            let checks = daisy::check_all(&pool)?;
            let c = checks
                .iter()
                .find(|c| c.header == id.offset())
                .ok_or_else(|| anyhow!("pool check does not find the block store"))?;
            if let Some(p) = c.problems.first() {
                bail!("block store check: {p}");
            }
            let r = PBlockStore::reader(&pool, id)?;
            let mut buf = vec![0u8; BLOCK];
            for lba in 0..NBLOCKS {
                r.read(lba, &mut buf)?;
                let got = parse(&buf).map_err(|e| anyhow!("LBA {lba}: {e}"))?;
                let v = match got {
                    Some((l, _)) if l != lba => bail!("LBA {lba} holds block {l}'s data"),
                    Some((_, v)) => Some(v),
                    None => None,
                };
                if !self.allowed(lba, v) {
                    let may: Vec<String> = self.lbas[lba as usize]
                        .iter()
                        .map(|w| {
                            format!(
                                "{}{}",
                                if w.zero {
                                    "zeros@".into()
                                } else {
                                    String::new()
                                },
                                w.version
                            )
                        })
                        .collect();
                    bail!(
                        "LBA {lba} holds {}, not a version that may be the latest ({})",
                        v.map_or("zeros".into(), |v| format!("version {v}")),
                        may.join(", ")
                    );
                }
            }
        }
        let rep = pool.check(Some(&reach));
        if let Some(p) = rep.problems.first() {
            bail!("pool check: {p}");
        }
        Ok(self.acked)
    }

    fn acked(&self) -> String {
        format!(
            "{} block writes{}",
            self.acked,
            if self.created {
                ""
            } else {
                ", store not yet created"
            }
        )
    }
}

/// Run the workload until the context has checked `budget` images (or found a failure): a
/// third of them on a store of format version 1 (two fences per write), the rest on one of the
/// current version (one fence per write, recovery from the blocks' records), each in a pool
/// of its own.
pub fn run(dir: &Path, seed: u64, budget: u64, per_point: usize) -> Result<WorkloadResult> {
    let first = (budget / 3).max(1);
    let mut res = run_format(dir, seed, first, per_point, PBlockStore::FORMAT_V1)?;
    if res.failures > 0 {
        return Ok(res);
    }
    let r2 = run_format(
        dir,
        seed,
        budget.saturating_sub(res.images).max(1),
        per_point,
        PBlockStore::FORMAT,
    )?;
    res.transactions += r2.transactions;
    res.crash_points += r2.crash_points;
    res.images += r2.images;
    res.failures += r2.failures;
    res.messages.extend(r2.messages);
    res.fences += r2.fences;
    res.fences_without_point += r2.fences_without_point;
    res.threads.extend(r2.threads.into_iter().map(|mut t| {
        t.thread = format!("v2/{}", t.thread);
        t
    }));
    for (k, v) in r2.events {
        *res.events.entry(k).or_default() += v;
    }
    for (k, v) in r2.reached {
        *res.reached.entry(k).or_default() += v;
    }
    Ok(res)
}

/// [`run`] on a store of block store format version `format`.
fn run_format(
    dir: &Path,
    seed: u64,
    budget: u64,
    per_point: usize,
    format: u32,
) -> Result<WorkloadResult> {
    let tag = format!("blocks{format}-{}-{seed}", std::process::id());
    let path = dir.join(format!("daisy-powerfail-{tag}.pool"));
    let scratch = dir.join(format!("daisy-powerfail-{tag}.image"));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        let pool = Pool::create(
            &path,
            &PoolOptions::new(LAYOUT)
                .size(1 << 20)
                .max_size(8 << 20)
                .lanes(THREADS as u32 + 1)
                .log_slot_size(4096)
                .log_slots_per_lane(4),
        )?;
        let root = pool.root::<BlkRoot>()?;
        pool.drain()?;
        let ctx = Arc::new(Mutex::new(Ctx::new(
            seed,
            crate::Workload::Blocks,
            BlkExpect::new(),
            scratch_files(&scratch)?,
            per_point,
        )));
        let lock = || ctx.lock().unwrap_or_else(|e| e.into_inner());
        sim::reset_counts();
        sim::track(&pool, hook(&ctx));
        // The creation under the simulator: its record logs the map (a small store).
        let created = pool.transaction(|tx| {
            let id = PBlockStore::create_in_format(tx, BLOCK as u32, NBLOCKS, SPARE, format)?;
            tx.write(root, &BlkRoot { store: id })?;
            Ok::<_, daisy::Error>(id)
        });
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                lock().fail(format!("creating the block store: {e}"));
                sim::stop();
                return Ok(result_of(&ctx, 0));
            }
        };
        lock().expect.created = true;
        let store = match PBlockStore::open(&pool, id) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                lock().fail(format!("opening the block store: {e}"));
                sim::stop();
                return Ok(result_of(&ctx, 0));
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (store, ctx, stop, ops) =
                    (store.clone(), ctx.clone(), stop.clone(), ops.clone());
                std::thread::Builder::new()
                    .name(format!("blk{t}"))
                    .spawn(move || writer(t, seed, &store, &ctx, &stop, &ops))
                    .expect("spawn a writer")
            })
            .collect();
        loop {
            {
                let c = lock();
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
        for h in handles {
            let _ = h.join();
        }
        let stats = sim::stop();
        drop(store);
        drop(pool);
        let mut res = result_of(&ctx, ops.load(Ordering::Relaxed));
        res.add_stats(&stats, "");
        res.add_events();
        Ok(res)
    })();
    sim::stop();
    let _ = std::fs::remove_file(&path);
    remove_scratch(&scratch);
    result
}

fn result_of(ctx: &Mutex<Ctx<BlkExpect>>, ops: u64) -> WorkloadResult {
    let c = ctx.lock().unwrap_or_else(|e| e.into_inner());
    WorkloadResult {
        workload: crate::Workload::Blocks.name().into(),
        transactions: ops,
        crash_points: c.points,
        images: c.images,
        failures: c.failures,
        messages: c.messages.clone(),
        ..Default::default()
    }
}

/// One thread's loop: writes (one in sixteen a zeroing) of seeded LBAs, each recorded when it
/// starts and when it returns.
fn writer(
    t: usize,
    seed: u64,
    store: &PBlockStore,
    ctx: &Mutex<Ctx<BlkExpect>>,
    stop: &AtomicBool,
    ops: &AtomicU64,
) {
    let lock = || ctx.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = SmallRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x9e37_79b9));
    while !stop.load(Ordering::Relaxed) {
        let lba = rng.gen_range(0..NBLOCKS);
        let zero = rng.gen_ratio(1, 16);
        let v = lock().expect.start(lba, zero);
        let r = if zero {
            store.set_zero(lba)
        } else {
            store.write(lba, &block(lba, v, t as u64))
        };
        match r {
            Ok(()) => lock().expect.end(lba, v),
            Err(e) => {
                lock().fail(format!("thread {t}: writing LBA {lba} (version {v}): {e}"));
                sim::crash_now();
                stop.store(true, Ordering::SeqCst);
                return;
            }
        }
        ops.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's rule: acknowledged writes supersede what ended before they started; a
    /// running write is allowed alongside the acknowledged one.
    #[test]
    fn the_model_allows_exactly_the_versions_that_may_be_latest() {
        let mut e = BlkExpect::new();
        assert!(e.allowed(3, None));
        let a = e.start(3, false);
        assert!(e.allowed(3, None) && e.allowed(3, Some(a)));
        e.end(3, a);
        assert!(!e.allowed(3, None), "zeros after an acknowledged write");
        let b = e.start(3, false);
        let c = e.start(3, true);
        assert!(e.allowed(3, Some(a)) && e.allowed(3, Some(b)) && e.allowed(3, None));
        e.end(3, c);
        // b overlapped c: either may have swapped last; a ended before c started.
        assert!(!e.allowed(3, Some(a)));
        assert!(e.allowed(3, Some(b)) && e.allowed(3, None));
        e.end(3, b);
        assert!(e.allowed(3, Some(b)) && e.allowed(3, None));
        let d = e.start(3, false);
        e.end(3, d);
        assert!(!e.allowed(3, Some(b)) && !e.allowed(3, None) && e.allowed(3, Some(d)));
        assert!(!e.allowed(3, Some(12345)));
        assert!(parse(&block(3, d, 1)).unwrap() == Some((3, d)));
        let mut torn = block(3, d, 1);
        torn[100..164].copy_from_slice(&block(3, b, 1)[100..164]);
        assert!(parse(&torn).is_err());
    }
}
