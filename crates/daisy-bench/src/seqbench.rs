//! `daisy bench seq`: Daisy's persistent sequence ([`PSeq`], a deque of chunks of packed
//! items, Redis's quicklist) against std's `VecDeque` in DRAM and, for the operations it has,
//! a PMDK doubly linked list, in one run on the same file system.
//!
//! Items are `--value-size` bytes (16 by default: a job id or a short event, what queues hold).
//! Operations, in this order on one structure (each timed over all its operations):
//! * `push_back`: N items onto an empty sequence (RPUSH), durable per operation for Daisy and
//!   PMDK (one transaction each);
//! * `index`: min(N, 10,000) reads of the item at a random index (LINDEX);
//! * `range`: min(N, 10,000) reads of 100 items from a random index (LRANGE start start+99);
//! * `pop_front`: the N items, one durable pop each (LPOP), checked in order;
//! * `push_front`: N items onto the empty sequence (LPUSH), durable per operation;
//! * `pop_back`: the N items, one durable pop each (RPOP), checked in order.
//!
//! PMDK has no deque: libpmemobj's natural equivalent is a doubly linked list of one object per
//! item (the shape of its `POBJ_TAILQ` macros), each push or pop one transaction (allocate or
//! free the node, snapshot the neighbour's link and the root). It has the four end
//! operations; `index` and `range` have no PMDK row, since a linked list answers them only by
//! walking from an end (O(N) per LINDEX), which is not an equivalent but a different algorithm.

use crate::measure::{fs_of, timed, RemoveOnDrop};
use crate::pmdk::{PMEMoid, Pmdk, PmdkPool};
use anyhow::{anyhow, Result};
use daisy::{Error, PPtr, PSeq, Pool, PoolOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::path::PathBuf;

/// Operations in the order they run and print.
pub const OPS: [&str; 6] = [
    "push_back",
    "index",
    "range",
    "pop_front",
    "push_front",
    "pop_back",
];
pub const STRUCTURES: [&str; 3] = ["daisy", "dram", "pmdk-list"];
pub const DEFAULT_NS: [u64; 2] = [100_000, 1_000_000];
/// Items a range read returns.
pub const RANGE: i64 = 100;
/// Index and range reads per run at most.
const READS_MAX: u64 = 10_000;

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub ns: Vec<u64>,
    pub structures: Vec<String>,
    /// Daisy's chunk size in bytes.
    pub chunk_bytes: u32,
    pub value_size: usize,
    pub seed: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bench: &'static str,
    pub op: String,
    pub n: u64,
    pub structure: String,
    /// Operations timed.
    pub ops: u64,
    pub secs: f64,
    pub ns_per_op: f64,
    /// Cache lines written back and fences per operation (Daisy only).
    pub lines_per_op: Option<f64>,
    pub fences_per_op: Option<f64>,
    /// This structure's time per operation over VecDeque's (same op and N).
    pub vs_dram: Option<f64>,
    /// This structure's time per operation over PMDK's list's (same op and N).
    pub vs_pmdk: Option<f64>,
    /// How the structure persists: Daisy's pool mode (with its flush instruction), PMDK's
    /// library version, "dram" for VecDeque.
    pub mode: String,
    /// File system of the pool's directory.
    pub fs: String,
    pub value_size: usize,
}

/// Item `i`: `value_size` bytes, the index first (so pops can be checked in order).
fn item(i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![b'x'; size.max(8)];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v.truncate(size.max(8));
    v
}

fn item_id(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("items are at least 8 bytes"))
}

/// The random indexes the reads visit (the same for every structure).
fn reads(n: u64, seed: u64) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed ^ n);
    (0..n.min(READS_MAX)).map(|_| rng.gen_range(0..n)).collect()
}

/// One timed loop: (ops, seconds, flushes, fences).
struct Ctx<'a> {
    n: u64,
    structure: &'a str,
    counted: bool,
    mode: String,
    fs: String,
    value_size: usize,
}

impl Ctx<'_> {
    fn row(&self, op: &str, t: (u64, f64, u64, u64)) -> Row {
        let (ops, secs, fl, fe) = t;
        let per = |x: u64| self.counted.then(|| x as f64 / ops.max(1) as f64);
        Row {
            bench: "seq",
            op: op.into(),
            n: self.n,
            structure: self.structure.into(),
            ops,
            secs,
            ns_per_op: secs * 1e9 / ops.max(1) as f64,
            lines_per_op: per(fl),
            fences_per_op: per(fe),
            vs_dram: None,
            vs_pmdk: None,
            mode: self.mode.clone(),
            fs: self.fs.clone(),
            value_size: self.value_size,
        }
    }
}

fn daisy_rows(cfg: &Config, n: u64, reads: &[u64], note: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let path = cfg
        .dir
        .join(format!("daisy-bench-seq-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _cleanup = RemoveOnDrop(path.clone());
    // Items packed in chunks (a few bytes of length each) plus the log: generous, and the pool
    // grows if the guess is short.
    let size = (n * (cfg.value_size as u64 + 32) + (64 << 20)).next_multiple_of(1 << 20);
    let pool = Pool::create(
        &path,
        &PoolOptions::new("daisy.bench.seq")
            .size(size)
            .max_size(size * 4),
    )?;
    note(&format!("daisy: {}", crate::txbench::describe_env(&pool)));
    let root = pool.root::<PPtr<PSeq>>()?;
    let chunk = cfg.chunk_bytes;
    let id = pool.transaction(|tx| {
        let id = PSeq::create_in_with(tx, chunk)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })?;
    let mut s = PSeq::open(&pool, id)?;
    let c = Ctx {
        n,
        structure: "daisy",
        counted: true,
        mode: pool.mode().describe(),
        fs: pool.info().fs_type.to_string(),
        value_size: cfg.value_size,
    };
    let vs = cfg.value_size;
    let mut rows = vec![];
    let t = timed(n, || {
        for i in 0..n {
            s.push_back(&item(i, vs))?;
        }
        Ok(())
    })?;
    rows.push(c.row("push_back", t));
    let t = timed(reads.len() as u64, || {
        for &i in reads {
            let v = s
                .get(i as i64)?
                .ok_or_else(|| anyhow!("daisy: no item {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("daisy: item {i} reads as {}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("index", t));
    let t = timed(reads.len() as u64, || {
        for &i in reads {
            let r = s.range(i as i64, i as i64 + RANGE - 1)?;
            if r.is_empty() || item_id(&r[0]) != i {
                return Err(anyhow!("daisy: range from {i} is wrong"));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("range", t));
    let chk = s.check();
    if !chk.problems.is_empty() || chk.entries != n {
        return Err(anyhow!(
            "daisy: the sequence fails its check: {:?}",
            chk.problems
        ));
    }
    let t = timed(n, || {
        for i in 0..n {
            let v = s
                .pop_front()?
                .ok_or_else(|| anyhow!("daisy: empty at {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("daisy: popped {} for {i}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("pop_front", t));
    let t = timed(n, || {
        for i in 0..n {
            s.push_front(&item(i, vs))?;
        }
        Ok(())
    })?;
    rows.push(c.row("push_front", t));
    let t = timed(n, || {
        for i in 0..n {
            let v = s
                .pop_back()?
                .ok_or_else(|| anyhow!("daisy: empty at {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("daisy: popped {} for {i}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("pop_back", t));
    if !s.is_empty()? {
        return Err(anyhow!("daisy: items left after the pops"));
    }
    Ok(rows)
}

fn dram_rows(cfg: &Config, n: u64, reads: &[u64]) -> Result<Vec<Row>> {
    let mut q: VecDeque<Vec<u8>> = VecDeque::new();
    let c = Ctx {
        n,
        structure: "dram",
        counted: false,
        mode: "dram".into(),
        fs: "-".into(),
        value_size: cfg.value_size,
    };
    let vs = cfg.value_size;
    let mut rows = vec![];
    let t = timed(n, || {
        for i in 0..n {
            q.push_back(item(i, vs));
        }
        Ok(())
    })?;
    rows.push(c.row("push_back", t));
    let t = timed(reads.len() as u64, || {
        for &i in reads {
            // Copied out, as Daisy's get returns an owned item.
            let v = q
                .get(i as usize)
                .cloned()
                .ok_or_else(|| anyhow!("dram: no item {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("dram: item {i} reads as {}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("index", t));
    let t = timed(reads.len() as u64, || {
        for &i in reads {
            let r: Vec<Vec<u8>> = q
                .range(i as usize..)
                .take(RANGE as usize)
                .cloned()
                .collect();
            if r.is_empty() || item_id(&r[0]) != i {
                return Err(anyhow!("dram: range from {i} is wrong"));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("range", t));
    let t = timed(n, || {
        for i in 0..n {
            let v = q.pop_front().ok_or_else(|| anyhow!("dram: empty at {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("dram: popped {} for {i}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("pop_front", t));
    let t = timed(n, || {
        for i in 0..n {
            q.push_front(item(i, vs));
        }
        Ok(())
    })?;
    rows.push(c.row("push_front", t));
    let t = timed(n, || {
        for i in 0..n {
            let v = q.pop_back().ok_or_else(|| anyhow!("dram: empty at {i}"))?;
            if item_id(&v) != i {
                return Err(anyhow!("dram: popped {} for {i}", item_id(&v)));
            }
        }
        Ok(())
    })?;
    rows.push(c.row("pop_back", t));
    Ok(rows)
}

/// PMDK's list: the root holds head, tail and length (u64 offsets); a node holds next, prev,
/// the item's length and its bytes, padded to 8.
mod list {
    use super::*;
    const HEAD: u64 = 0;
    const TAIL: u64 = 8;
    const LEN: u64 = 16;
    const NEXT: u64 = 0;
    const PREV: u64 = 8;
    const SIZE: u64 = 16;
    const DATA: u64 = 24;

    pub struct List<'a> {
        pub p: PmdkPool<'a>,
    }

    impl List<'_> {
        fn oid(&self, off: u64) -> PMEMoid {
            PMEMoid {
                pool_uuid_lo: self.p.root.pool_uuid_lo,
                off,
            }
        }

        /// Push `v` at the back (else the front) in one transaction.
        pub fn push(&self, back: bool, v: &[u8]) -> Result<()> {
            let root = self.p.root;
            let (near, far_link, near_link) = if back {
                (TAIL, HEAD, NEXT)
            } else {
                (HEAD, TAIL, PREV)
            };
            self.p.tx(|tx| {
                let node = tx.alloc((DATA as usize + v.len()).next_multiple_of(8))?;
                // A fresh object needs no snapshot: PMDK discards it if the transaction aborts.
                let end = tx.load_u64(root, near);
                tx.store_u64(node, SIZE, v.len() as u64);
                tx.store_u64(node, NEXT, if back { 0 } else { end });
                tx.store_u64(node, PREV, if back { end } else { 0 });
                for (k, w) in v.chunks(8).enumerate() {
                    let mut b = [0u8; 8];
                    b[..w.len()].copy_from_slice(w);
                    tx.store_u64(node, DATA + 8 * k as u64, u64::from_le_bytes(b));
                }
                tx.add_range(root, 0, 24)?;
                if end == 0 {
                    tx.store_u64(root, far_link, node.off);
                } else {
                    let e = self.oid(end);
                    tx.add_range(e, near_link, 8)?;
                    tx.store_u64(e, near_link, node.off);
                }
                tx.store_u64(root, near, node.off);
                let len = tx.load_u64(root, LEN);
                tx.store_u64(root, LEN, len + 1);
                Ok(())
            })
        }

        /// Pop from the back (else the front) in one transaction; None when empty.
        pub fn pop(&self, back: bool) -> Result<Option<Vec<u8>>> {
            let root = self.p.root;
            let (near, far, inward, outward) = if back {
                (TAIL, HEAD, PREV, NEXT)
            } else {
                (HEAD, TAIL, NEXT, PREV)
            };
            let mut out = None;
            self.p.tx(|tx| {
                let end = tx.load_u64(root, near);
                if end == 0 {
                    return Ok(());
                }
                let e = self.oid(end);
                let len = tx.load_u64(e, SIZE) as usize;
                let mut v = Vec::with_capacity(len.next_multiple_of(8));
                for k in 0..len.div_ceil(8) {
                    v.extend_from_slice(&tx.load_u64(e, DATA + 8 * k as u64).to_le_bytes());
                }
                v.truncate(len);
                let next = tx.load_u64(e, inward);
                tx.add_range(root, 0, 24)?;
                if next == 0 {
                    tx.store_u64(root, far, 0);
                } else {
                    let nx = self.oid(next);
                    tx.add_range(nx, outward, 8)?;
                    tx.store_u64(nx, outward, 0);
                }
                tx.store_u64(root, near, next);
                let n = tx.load_u64(root, LEN);
                tx.store_u64(root, LEN, n - 1);
                tx.free(e)?;
                out = Some(v);
                Ok(())
            })?;
            Ok(out)
        }
    }
}

fn pmdk_rows(cfg: &Config, n: u64, lib: &Pmdk) -> Result<Vec<Row>> {
    let path = cfg
        .dir
        .join(format!("daisy-bench-seq-pmdk-{}.pool", std::process::id()));
    let _cleanup = RemoveOnDrop(path.clone());
    // A node of 24 bytes + the item, in PMDK's allocation classes (with its 16-byte header):
    // 128 bytes per item is ample, plus the undo logs and PMDK's minimum pool.
    let size = (n as usize * 128 + (64 << 20)).next_multiple_of(1 << 20);
    let l = list::List {
        p: PmdkPool::create(lib, &path, size, 64)?,
    };
    let c = Ctx {
        n,
        structure: "pmdk-list",
        counted: false,
        mode: lib.version.clone(),
        fs: fs_of(&cfg.dir),
        value_size: cfg.value_size,
    };
    let vs = cfg.value_size;
    let mut rows = vec![];
    for (push, pop) in [("push_back", "pop_front"), ("push_front", "pop_back")] {
        let back = push == "push_back";
        let t = timed(n, || {
            for i in 0..n {
                l.push(back, &item(i, vs))?;
            }
            Ok(())
        })?;
        rows.push(c.row(push, t));
        let t = timed(n, || {
            for i in 0..n {
                let v = l
                    .pop(!back)?
                    .ok_or_else(|| anyhow!("pmdk-list: empty at {i}"))?;
                if item_id(&v) != i {
                    return Err(anyhow!("pmdk-list: popped {} for {i}", item_id(&v)));
                }
            }
            Ok(())
        })?;
        rows.push(c.row(pop, t));
    }
    if l.pop(true)?.is_some() {
        return Err(anyhow!("pmdk-list: items left after the pops"));
    }
    Ok(rows)
}

/// Run every structure for every N; `note` gets the environment, progress and the reasons a
/// rival was skipped.
pub fn run(cfg: &Config, mut note: impl FnMut(&str)) -> Result<Vec<Row>> {
    if cfg.value_size < 8 {
        return Err(anyhow!(
            "the value size must be at least 8 bytes (items carry their index)"
        ));
    }
    daisy::counters::enable(true);
    let pmdk = if cfg.structures.iter().any(|s| s == "pmdk-list") {
        match Pmdk::load() {
            Ok(p) => {
                note(&format!("pmdk-list: {}, on {}", p.version, fs_of(&cfg.dir)));
                Some(p)
            }
            Err(e) => {
                note(&format!("pmdk-list skipped: {e}"));
                None
            }
        }
    } else {
        None
    };
    let mut rows = vec![];
    for &n in &cfg.ns {
        let rd = reads(n, cfg.seed);
        for s in &cfg.structures {
            note(&format!("N = {n}: {s}"));
            let r = match s.as_str() {
                "daisy" => daisy_rows(cfg, n, &rd, &mut note),
                "dram" => dram_rows(cfg, n, &rd),
                "pmdk-list" => match &pmdk {
                    Some(lib) => pmdk_rows(cfg, n, lib),
                    None => continue,
                },
                other => Err(anyhow!("unknown structure {other}")),
            };
            rows.extend(r?);
        }
    }
    daisy::counters::enable(false);
    let base = |s: &str| -> Vec<(String, u64, f64)> {
        rows.iter()
            .filter(|r| r.structure == s)
            .map(|r| (r.op.clone(), r.n, r.ns_per_op))
            .collect()
    };
    let (dram, pm) = (base("dram"), base("pmdk-list"));
    for r in &mut rows {
        let find = |b: &[(String, u64, f64)]| {
            b.iter()
                .find(|d| d.0 == r.op && d.1 == r.n)
                .map(|d| r.ns_per_op / d.2.max(1e-9))
        };
        r.vs_dram = find(&dram);
        r.vs_pmdk = find(&pm);
    }
    Ok(rows)
}

/// The rows as a text table, grouped by operation and N.
pub fn table(rows: &[Row]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    t.set_header([
        "op",
        "N",
        "structure",
        "ns/op",
        "ops/s",
        "lines/op",
        "fences/op",
        "vs VecDeque",
        "vs PMDK list",
    ]);
    let mut order: Vec<&Row> = rows.iter().collect();
    order.sort_by_key(|r| {
        (
            OPS.iter().position(|o| *o == r.op),
            r.n,
            STRUCTURES.iter().position(|s| *s == r.structure),
        )
    });
    for r in order {
        let opt = |x: Option<f64>, p: usize| x.map(|v| format!("{v:.p$}")).unwrap_or("-".into());
        t.add_row([
            r.op.clone(),
            r.n.to_string(),
            r.structure.clone(),
            format!("{:.0}", r.ns_per_op),
            format!("{:.0}", 1e9 / r.ns_per_op.max(1e-9)),
            opt(r.lines_per_op, 2),
            opt(r.fences_per_op, 2),
            r.vs_dram.map(|v| format!("{v:.1}x")).unwrap_or("-".into()),
            r.vs_pmdk.map(|v| format!("{v:.2}x")).unwrap_or("-".into()),
        ]);
    }
    let vs = rows.first().map(|r| r.value_size).unwrap_or(16);
    format!(
        "{t}\nitems: {vs} bytes. push/pop: durable per operation (Daisy, PMDK); index: LINDEX \
         of a random index; range: LRANGE of {RANGE} items from a random index. pmdk-list: a \
         doubly linked list of one object per item, one transaction per push or pop (PMDK has \
         no deque); it has no index or range row (a list walks from an end: O(N)). Ratios: \
         time per operation over VecDeque's and over PMDK's (above 1: slower).\n"
    )
}
