//! Daisy's mechanisms of `daisy bench hashmap`: the persistent [`PHashMap<u32, u32>`] in a
//! pool on the benchmark's directory.
//!
//! * `daisy`: every operation its own transaction, durable when it returns;
//! * `daisy-batch`: the whole run as one [`PHashMap::batch`], durable at its end (the seed's
//!   "insert all, then persist"); after a crash the map holds a prefix of the operations.
//!
//! Both create the map with room for N entries (`create_in_with_seed_and_capacity`), as every
//! rival's table is sized for N: the batch then fills the empty map's segments in place. The
//! set-up is drained (`Pool::drain`) before the timer starts, as the rivals' set-ups are
//! complete before theirs: the timed scope holds the run's own work only.

use crate::hashbench::{Bytes, Counting, Mechanism, Setup};
use anyhow::{anyhow, Result};
use daisy::{Error, PHashMap, PPtr, Pool, PoolOptions};

/// A pool holding one map; the pool file goes when this is dropped.
struct MapPool {
    map: PHashMap<u32, u32>,
    pool: Pool,
    path: std::path::PathBuf,
    batch: bool,
}

impl Drop for MapPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn e2s(e: Error) -> anyhow::Error {
    e.into()
}

fn open<'a>(s: &Setup<'a>, batch: bool) -> Result<Box<dyn Mechanism + 'a>> {
    let path = s.path("pool");
    let _ = std::fs::remove_file(&path);
    // About 16 bytes per entry once grown, twice that while a batch copies segments; start
    // with room for the whole run and let the pool grow beyond it if needed.
    let n = s.n as u64;
    let size = (n * 40 + (64 << 20)).next_multiple_of(1 << 20);
    let mut opts = PoolOptions::new("daisy.bench.hashmap")
        .size(size)
        .max_size(size * 4);
    if batch {
        // A batch commits when its redo record fills, and after a commit every segment it
        // writes again is copied again. Building a 10-million-entry map logs about 130 KB of
        // allocator entries (one per new run of segments): 1 MiB slots hold the whole batch
        // in one transaction. One thread runs here, so 4 lanes (32 MiB of log) are plenty.
        opts = opts.lanes(4).log_slot_size(1 << 20);
    }
    let pool = Pool::create(&path, &opts).map_err(e2s)?;
    let root = pool.root::<PPtr<PHashMap<u32, u32>>>().map_err(e2s)?;
    let id = pool
        .transaction(|tx| {
            // A fixed seed: every run and every mechanism sees the same layout.
            // Sized for N up front, as every rival's table is (the benchmark's capacity hint).
            let id = PHashMap::<u32, u32>::create_in_with_seed_and_capacity(tx, 0x5eed, n)?;
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .map_err(e2s)?;
    // The set-up ends durable and retired, as every rival's does before its timer starts: the
    // creating transaction's applied lines are flushed now, not by the timed run's first
    // commit or batch (which would otherwise pay for the set-up).
    pool.drain().map_err(e2s)?;
    let map = PHashMap::open(&pool, id).map_err(e2s)?;
    Ok(Box::new(MapPool {
        map,
        pool,
        path,
        batch,
    }))
}

pub(crate) fn open_daisy<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(s, false)
}

pub(crate) fn open_daisy_batch<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(s, true)
}

/// The operations of one batch, seen as a mechanism by the driver's loop.
struct InBatch<'b, 'm> {
    b: &'b mut daisy::Batch<'m, u32, u32>,
}

impl Mechanism for InBatch<'_, '_> {
    fn name(&self) -> &'static str {
        "daisy-batch"
    }
    fn describe(&self) -> String {
        String::new()
    }
    /// A put: the driver wants no previous value, so the insert may wait in the batch's
    /// queue while the next keys' buckets are fetched (`Batch::put`).
    #[inline]
    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        self.b.put(key, value).map_err(e2s)
    }
    #[inline]
    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        self.b.get(&key).map_err(e2s)
    }
    #[inline]
    fn remove(&mut self, key: u32) -> Result<bool> {
        self.b.remove(&key).map(|v| v.is_some()).map_err(e2s)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn bytes_used(&self) -> Option<Bytes> {
        None
    }
    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        Err(anyhow!("inside a batch"))
    }
    fn counting(&self) -> Counting {
        Counting::Persister
    }
}

impl Mechanism for MapPool {
    fn name(&self) -> &'static str {
        if self.batch {
            "daisy-batch"
        } else {
            "daisy"
        }
    }

    fn describe(&self) -> String {
        let how = if self.batch {
            "the whole run as one batch into the empty map, sized for N: its segments \
             filled in place with plain stores (puts queued 32 deep, their buckets \
             prefetched), one flush of the written segments and one commit at the end; a \
             crash keeps a prefix (here: nothing or everything); pool with 1 MiB log slots so \
             a large batch stays one transaction; the map's creation made durable and retired \
             before the timer starts (as every rival's set-up)"
        } else {
            "every operation durable when it returns: one in-place 8-byte slot store, one \
             cache line flushed, one fence (a transaction for splits and removals that move \
             entries)"
        };
        format!(
            "Daisy PHashMap<u32, u32> in a pool on this directory ({}); {how}",
            self.pool.mode().describe()
        )
    }

    #[inline]
    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        self.map.insert(key, value).map(|_| ()).map_err(e2s)
    }

    #[inline]
    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        self.map.get(&key).map_err(e2s)
    }

    #[inline]
    fn remove(&mut self, key: u32) -> Result<bool> {
        self.map.remove(&key).map(|v| v.is_some()).map_err(e2s)
    }

    fn finish(&mut self) -> Result<()> {
        // Per-operation durability: every operation was durable when it returned.
        Ok(())
    }

    fn scoped(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Mechanism) -> Result<()>,
    ) -> Option<Result<()>> {
        if !self.batch {
            return None;
        }
        let mut inner = Ok(());
        let r = self.map.batch(|b| {
            inner = f(&mut InBatch { b });
            match &inner {
                Ok(()) => Ok(()),
                Err(e) => Err(Error::Aborted(format!("{e:#}"))),
            }
        });
        Some(inner.and(r.map_err(e2s)))
    }

    fn build(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        self.map
            .batch(|b| {
                for &(k, v) in pairs {
                    b.put(k, v)?;
                }
                Ok(())
            })
            .map_err(e2s)
    }

    fn bytes_used(&self) -> Option<Bytes> {
        Some(Bytes::Measured(self.pool.info().used))
    }

    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        let mut v: Vec<(u32, u32)> = self
            .map
            .iter()
            .map_err(e2s)?
            .collect::<daisy::Result<_>>()
            .map_err(e2s)?;
        v.sort_unstable();
        Ok(v)
    }

    fn counting(&self) -> Counting {
        Counting::Persister
    }
}
