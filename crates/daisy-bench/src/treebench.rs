//! `daisy bench tree`: Daisy's persistent ordered map ([`PTreeMap`]) against std's BTreeMap in
//! DRAM and PMDK's own persistent B-tree (the `btree_map` example of libpmemobj, when it and a
//! C compiler are installed), on sorted-set shaped data.
//!
//! Keys are what a sorted set stores: an 8-byte order-preserving score (distinct random u64s)
//! followed by the member (`member:<i>`, 8 to 14 bytes), values empty. PMDK's example takes
//! u64 keys only, so it gets the score alone. Operations, each timed over all N keys in a
//! seeded random order:
//! * `insert`: into an empty map; Daisy and PMDK make every insert durable when it returns
//!   (one transaction each);
//! * `get`: a lookup of each key;
//! * `rank`: the rank of each key (ZRANK; BTreeMap and PMDK's example have none in O(log n));
//! * `range`: min(N, 100,000) scans of 10 entries from a random key (ZRANGEBYSCORE ... LIMIT
//!   0 10; not in PMDK's example);
//! * `remove`: each key, durable per operation where the structure is persistent.
//!
//! Every structure runs in the same process on the same keys and orders, one after the other
//! for each N; the notes before the table say what was measured and how (pool directory, file
//! system, Daisy's persistence mode and flush instruction, PMDK's version and forced mode),
//! and each row carries its ratios to std's BTreeMap and (Daisy's rows) to PMDK's B-tree.

use crate::hashbench::dir_mode;
use crate::measure::{timed, RemoveOnDrop};
use anyhow::{anyhow, Result};
use daisy::{Error, FlushInstr, Mode, PPtr, PTreeMap, Pool, PoolOptions};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::path::PathBuf;

pub const OPS: [&str; 5] = ["insert", "get", "rank", "range", "remove"];
pub const STRUCTURES: [&str; 3] = ["daisy", "dram", "pmdk-btree"];
pub const DEFAULT_NS: [u64; 2] = [100_000, 1_000_000];
/// Entries a range scan returns.
pub const SCAN: u64 = 10;
/// Range scans per run at most.
const SCANS_MAX: u64 = 100_000;

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub ns: Vec<u64>,
    pub structures: Vec<String>,
    pub node_size: u32,
    pub seed: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub op: String,
    pub n: u64,
    pub structure: String,
    /// How the structure persists: Daisy's pool mode ("pmem (clwb)", "msync"), PMDK's
    /// ("pmem (forced)": PMEM_IS_PMEM_FORCE=1), "none" for DRAM.
    pub mode: String,
    /// File system of the pool directory.
    pub fs: String,
    /// Operations timed.
    pub ops: u64,
    pub secs: f64,
    pub ns_per_op: f64,
    /// Cache lines written back and fences per operation (Daisy only).
    pub lines_per_op: Option<f64>,
    pub fences_per_op: Option<f64>,
    /// This structure's time per operation over std's BTreeMap's (same op and N).
    pub vs_dram: Option<f64>,
    /// Daisy's rows: PMDK's B-tree's time per operation over Daisy's (same op and N; above 1:
    /// Daisy is faster).
    pub speedup_vs_pmdk: Option<f64>,
}

/// The data of one N: sorted-set keys and the orders operations visit them in.
struct Data {
    scores: Vec<u64>,
    keys: Vec<Vec<u8>>,
    /// Visiting orders: lookups, removals, scan starts.
    get_order: Vec<usize>,
    remove_order: Vec<usize>,
    scans: Vec<usize>,
}

fn data(n: u64, seed: u64) -> Data {
    let mut rng = SmallRng::seed_from_u64(seed ^ n);
    let mut seen = HashSet::with_capacity(n as usize);
    let mut scores = Vec::with_capacity(n as usize);
    while scores.len() < n as usize {
        let s = rng.gen::<u64>() | 1; // PMDK's example reserves key 0
        if seen.insert(s) {
            scores.push(s);
        }
    }
    let keys = scores
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut k = s.to_be_bytes().to_vec();
            k.extend_from_slice(format!("member:{i}").as_bytes());
            k
        })
        .collect();
    let mut get_order: Vec<usize> = (0..n as usize).collect();
    get_order.shuffle(&mut rng);
    let mut remove_order = get_order.clone();
    remove_order.shuffle(&mut rng);
    let scans = (0..n.min(SCANS_MAX))
        .map(|_| rng.gen_range(0..n as usize))
        .collect();
    Data {
        scores,
        keys,
        get_order,
        remove_order,
        scans,
    }
}

fn row(op: &str, n: u64, s: &str, t: (u64, f64, u64, u64), counted: bool) -> Row {
    let (ops, secs, fl, fe) = t;
    let per = |x: u64| counted.then(|| x as f64 / ops.max(1) as f64);
    Row {
        op: op.into(),
        n,
        structure: s.into(),
        mode: String::new(),
        fs: String::new(),
        ops,
        secs,
        ns_per_op: secs * 1e9 / ops.max(1) as f64,
        lines_per_op: per(fl),
        fences_per_op: per(fe),
        vs_dram: None,
        speedup_vs_pmdk: None,
    }
}

fn daisy_rows(cfg: &Config, n: u64, d: &Data) -> Result<Vec<Row>> {
    let path = cfg
        .dir
        .join(format!("daisy-bench-tree-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let size = (n * 96 + (64 << 20)).next_multiple_of(1 << 20);
    let pool = Pool::create(
        &path,
        &PoolOptions::new("daisy.bench.tree")
            .size(size)
            .max_size(size * 4),
    )?;
    let _cleanup = RemoveOnDrop(path.clone());
    let root = pool.root::<PPtr<PTreeMap>>()?;
    let id = pool.transaction(|tx| {
        let id = PTreeMap::create_in_with(tx, cfg.node_size)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })?;
    let mut m = PTreeMap::open(&pool, id)?;
    let mode = pool.mode().describe();
    let mut rows = vec![];
    let t = timed(n, || {
        for k in &d.keys {
            m.insert(k, b"")?;
        }
        Ok(())
    })?;
    rows.push(row("insert", n, "daisy", t, true));
    let t = timed(n, || {
        for &i in &d.get_order {
            if m.get(&d.keys[i])?.is_none() {
                return Err(anyhow!("daisy: key {i} missing"));
            }
        }
        Ok(())
    })?;
    rows.push(row("get", n, "daisy", t, true));
    let t = timed(n, || {
        for &i in &d.get_order {
            if !m.rank(&d.keys[i])?.1 {
                return Err(anyhow!("daisy: key {i} has no rank"));
            }
        }
        Ok(())
    })?;
    rows.push(row("rank", n, "daisy", t, true));
    let t = timed(d.scans.len() as u64, || {
        for &i in &d.scans {
            let r = m.range(
                Bound::Included(&d.keys[i]),
                Bound::Unbounded,
                false,
                0,
                SCAN,
            )?;
            if r.is_empty() {
                return Err(anyhow!("daisy: empty scan"));
            }
        }
        Ok(())
    })?;
    rows.push(row("range", n, "daisy", t, true));
    let c = m.check();
    if !c.problems.is_empty() || c.entries != n {
        return Err(anyhow!("daisy: the tree fails its check: {:?}", c.problems));
    }
    let t = timed(n, || {
        for &i in &d.remove_order {
            if m.remove(&d.keys[i])?.is_none() {
                return Err(anyhow!("daisy: key {i} missing at removal"));
            }
        }
        Ok(())
    })?;
    rows.push(row("remove", n, "daisy", t, true));
    if !m.is_empty()? {
        return Err(anyhow!(
            "daisy: the tree is not empty after removing every key"
        ));
    }
    for r in &mut rows {
        r.mode = mode.clone();
    }
    Ok(rows)
}

fn dram_rows(n: u64, d: &Data) -> Result<Vec<Row>> {
    let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rows = vec![];
    let t = timed(n, || {
        for k in &d.keys {
            m.insert(k.clone(), Vec::new());
        }
        Ok(())
    })?;
    rows.push(row("insert", n, "dram", t, false));
    let t = timed(n, || {
        for &i in &d.get_order {
            // Copied out, as Daisy's get returns an owned value.
            if m.get(&d.keys[i]).cloned().is_none() {
                return Err(anyhow!("dram: key {i} missing"));
            }
        }
        Ok(())
    })?;
    rows.push(row("get", n, "dram", t, false));
    let t = timed(d.scans.len() as u64, || {
        for &i in &d.scans {
            let r: Vec<(Vec<u8>, Vec<u8>)> = m
                .range(d.keys[i].clone()..)
                .take(SCAN as usize)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if r.is_empty() {
                return Err(anyhow!("dram: empty scan"));
            }
        }
        Ok(())
    })?;
    rows.push(row("range", n, "dram", t, false));
    let t = timed(n, || {
        for &i in &d.remove_order {
            if m.remove(&d.keys[i]).is_none() {
                return Err(anyhow!("dram: key {i} missing at removal"));
            }
        }
        Ok(())
    })?;
    rows.push(row("remove", n, "dram", t, false));
    for r in &mut rows {
        r.mode = "none".into();
    }
    Ok(rows)
}

fn pmdk_rows(cfg: &Config, n: u64, d: &Data) -> Result<Vec<Row>> {
    let path = cfg.dir.join(format!(
        "daisy-bench-pmdk-btree-{}.pool",
        std::process::id()
    ));
    let _cleanup = RemoveOnDrop(path.clone());
    // Order-8 nodes of 7 24-byte items: about 400 bytes per 5 entries, plus undo logs.
    let size = (n as usize * 160 + (64 << 20)).next_multiple_of(1 << 20);
    let mut b = daisy_bench_pmdk_btree(&cfg.dir, &path, size)?;
    let mut rows = vec![];
    let t = timed(n, || {
        for &s in &d.scores {
            b.insert(s)?;
        }
        Ok(())
    })?;
    rows.push(row("insert", n, "pmdk-btree", t, false));
    let t = timed(n, || {
        for &i in &d.get_order {
            if !b.contains(d.scores[i]) {
                return Err(anyhow!("pmdk-btree: key {i} missing"));
            }
        }
        Ok(())
    })?;
    rows.push(row("get", n, "pmdk-btree", t, false));
    let t = timed(n, || {
        for &i in &d.remove_order {
            if !b.remove(d.scores[i]) {
                return Err(anyhow!("pmdk-btree: key {i} missing at removal"));
            }
        }
        Ok(())
    })?;
    rows.push(row("remove", n, "pmdk-btree", t, false));
    for r in &mut rows {
        r.mode = "pmem (forced)".into();
    }
    Ok(rows)
}

fn daisy_bench_pmdk_btree(
    dir: &std::path::Path,
    path: &std::path::Path,
    size: usize,
) -> Result<crate::pmdk::PmdkBtree> {
    // A build directory of this process's own, removed whatever the outcome.
    let build = dir.join(format!(".daisy-bench-btree-build-{}", std::process::id()));
    let r = crate::pmdk::PmdkBtree::create(&build, path, size);
    let _ = std::fs::remove_dir_all(&build);
    r
}

/// What was measured and how: the lines printed before the table.
pub fn describe(cfg: &Config, mode: Mode, fs: &str, pmdk: Option<&str>) -> Vec<String> {
    let mut v = vec![
        format!(
            "daisy bench tree: N = {} sorted-set keys (8-byte random score + member, 16 to 22 \
             bytes, values empty), seed {}; each structure in turn in this process, same keys \
             and visiting orders; one timed pass per operation",
            cfg.ns
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            cfg.seed
        ),
        format!(
            "daisy: PTreeMap, {}-byte nodes, every insert and removal its own transaction \
             (durable when it returns); pmdk-btree: PMDK's btree_map example (order 8, u64 \
             keys: the score alone), every insert and removal its own PMDK transaction; dram: \
             std BTreeMap<Vec<u8>, Vec<u8>>, nothing persisted",
            cfg.node_size
        ),
    ];
    let flush = FlushInstr::available()
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ");
    v.push(format!(
        "dir {} on {fs} ({}), Daisy's persistence mode {}; CPU flush instructions: {}",
        cfg.dir.display(),
        if fs == "tmpfs" {
            "DRAM emulating NVM"
        } else {
            "disk"
        },
        mode.describe(),
        if flush.is_empty() { "none" } else { &flush }
    ));
    if let Some(p) = pmdk {
        v.push(format!(
            "PMDK: {p} (libpmemobj, forced pmem mode: PMEM_IS_PMEM_FORCE=1{})",
            if fs == "tmpfs" {
                ""
            } else {
                "; on a disk its cache-line flushes persist nothing, so its figures are not durable"
            }
        ));
    }
    v
}

/// Run every structure for every N; `note` gets what was measured and how, progress lines
/// and skipped rivals' reasons.
pub fn run(cfg: &Config, mut note: impl FnMut(&str)) -> Result<Vec<Row>> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let (mode, fs) = dir_mode(&cfg.dir)?;
    let pmdk = if cfg.structures.iter().any(|s| s == "pmdk-btree") {
        crate::pmdk::Pmdk::load().ok().map(|p| p.version.clone())
    } else {
        None
    };
    for l in describe(cfg, mode, fs, pmdk.as_deref()) {
        note(&l);
    }
    daisy::counters::enable(true);
    let mut rows = vec![];
    for &n in &cfg.ns {
        note(&format!("N = {n}: generating keys"));
        let d = data(n, cfg.seed);
        for s in &cfg.structures {
            note(&format!("N = {n}: {s}"));
            let r = match s.as_str() {
                "daisy" => daisy_rows(cfg, n, &d),
                "dram" => dram_rows(n, &d),
                "pmdk-btree" => match pmdk_rows(cfg, n, &d) {
                    Err(e) => {
                        note(&format!("pmdk-btree skipped: {e}"));
                        continue;
                    }
                    r => r,
                },
                other => Err(anyhow!("unknown structure {other}")),
            };
            rows.extend(r?.into_iter().map(|mut r| {
                r.fs = fs.to_string();
                r
            }));
        }
    }
    daisy::counters::enable(false);
    let dram: Vec<(String, u64, f64)> = rows
        .iter()
        .filter(|r| r.structure == "dram")
        .map(|r| (r.op.clone(), r.n, r.ns_per_op))
        .collect();
    let pmdk: Vec<(String, u64, f64)> = rows
        .iter()
        .filter(|r| r.structure == "pmdk-btree")
        .map(|r| (r.op.clone(), r.n, r.ns_per_op))
        .collect();
    for r in &mut rows {
        if let Some(d) = dram.iter().find(|d| d.0 == r.op && d.1 == r.n) {
            r.vs_dram = Some(r.ns_per_op / d.2);
        }
        if r.structure == "daisy" {
            if let Some(p) = pmdk.iter().find(|p| p.0 == r.op && p.1 == r.n) {
                r.speedup_vs_pmdk = Some(p.2 / r.ns_per_op);
            }
        }
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
        "mode",
        "ns/op",
        "ops/s",
        "lines/op",
        "fences/op",
        "vs BTreeMap",
        "PMDK / Daisy",
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
            r.mode.clone(),
            format!("{:.0}", r.ns_per_op),
            format!("{:.0}", 1e9 / r.ns_per_op.max(1e-9)),
            opt(r.lines_per_op, 2),
            opt(r.fences_per_op, 2),
            r.vs_dram.map(|v| format!("{v:.1}x")).unwrap_or("-".into()),
            r.speedup_vs_pmdk
                .map(|v| format!("{v:.2}x"))
                .unwrap_or("-".into()),
        ]);
    }
    format!(
        "{t}\nkeys: 8-byte score + member (16 to 22 bytes), values empty; pmdk-btree: the score \
         alone (u64 keys). insert/remove: durable per operation (Daisy, PMDK); range: scans of \
         {SCAN} entries from a random key; rank: ZRANK (Daisy only). vs BTreeMap: time per \
         operation over std's BTreeMap's; PMDK / Daisy: PMDK's time per operation over \
         Daisy's (above 1: Daisy is faster).\n"
    )
}
