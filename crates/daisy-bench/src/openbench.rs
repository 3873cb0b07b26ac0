//! `daisy bench open`: how long opening (recovering) a pool takes as the data grows.
//!
//! Recovery must not grow with the amount of data: opening reads the header, the state page
//! and the log slots, never the heap. This fills a pool with N small objects, then times
//! `Pool::open` after a clean close and after a simulated crash (records left to replay).

use crate::table::Table;
use anyhow::Result;
use daisy::{Error, Pool, PoolOptions};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bench: &'static str,
    pub objects: u64,
    pub pool_bytes: u64,
    /// Median of several opens after a clean close, milliseconds.
    pub open_ms: f64,
    pub open_ms_max: f64,
    /// Open after a crash with committed transactions still in the log.
    pub crash_open_ms: f64,
    pub crash_replayed: usize,
    pub fill_seconds: f64,
    pub mode: String,
    pub fs: String,
}

const BATCH: u64 = 8000;

/// Fill a pool with `objects` 16-byte objects and time its opening.
pub fn run(dir: &std::path::Path, objects: u64, mut progress: impl FnMut(u64)) -> Result<Row> {
    let path: PathBuf = dir.join(format!("daisy-bench-open-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let r = run_at(&path, objects, &mut progress);
    let _ = std::fs::remove_file(&path);
    r
}

fn run_at(path: &std::path::Path, objects: u64, progress: &mut impl FnMut(u64)) -> Result<Row> {
    let e = anyhow::Error::from;
    let max = (objects * 32 + (256 << 20)).next_power_of_two();
    let pool = Pool::create(
        path,
        &PoolOptions::new("daisy.bench.open")
            .size(64 << 20)
            .max_size(max),
    )
    .map_err(e)?;
    let t0 = Instant::now();
    let mut done = 0;
    while done < objects {
        let n = BATCH.min(objects - done);
        pool.transaction(|tx| {
            for i in 0..n {
                tx.alloc(&(done + i))?;
            }
            Ok::<_, Error>(())
        })
        .map_err(e)?;
        done += n;
        if done % (BATCH * 64) == 0 || done == objects {
            progress(done);
        }
    }
    let fill_seconds = t0.elapsed().as_secs_f64();
    let info = pool.info();
    let mode = info.mode.describe();
    let fs = info.fs_type.to_string();
    assert_eq!(info.objects, objects, "every object allocated");
    pool.close().map_err(e)?;

    let mut times = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        let p = Pool::open(path, "daisy.bench.open").map_err(e)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(p);
    }
    // A crash with committed transactions whose data is not yet retired.
    let p = Pool::open(path, "daisy.bench.open").map_err(e)?;
    for k in 0..8u64 {
        p.transaction(|tx| tx.alloc(&k).map(|_| ())).map_err(e)?;
    }
    p.crash_for_test();
    let t = Instant::now();
    let p = Pool::open(path, "daisy.bench.open").map_err(e)?;
    let crash_open_ms = t.elapsed().as_secs_f64() * 1e3;
    let crash_replayed = p.recovery_report().records_replayed;
    let pool_bytes = p.size();
    drop(p);
    let spread = crate::stats::Spread::of(&times);
    Ok(Row {
        bench: "open",
        objects,
        pool_bytes,
        open_ms: spread.median,
        open_ms_max: spread.max,
        crash_open_ms,
        crash_replayed,
        fill_seconds,
        mode,
        fs,
    })
}

/// Human-readable table of the open times.
pub fn table(r: &Row) -> String {
    let mut t =
        Table::new(["open after", "ms", "slowest ms", "transactions re-applied"]).left(&[0]);
    t.row([
        "a clean close".to_string(),
        format!("{:.2}", r.open_ms),
        format!("{:.2}", r.open_ms_max),
        "-".into(),
    ]);
    t.row([
        "a crash".to_string(),
        format!("{:.2}", r.crash_open_ms),
        "-".into(),
        r.crash_replayed.to_string(),
    ]);
    t.text()
        + "\nms: after a clean close the median of 5 opens; after a crash one open, which \
                re-applies the committed transactions left in the log\n"
}
