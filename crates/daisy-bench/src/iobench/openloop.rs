//! The open-loop scheduler of `daisy bench io --workload` (seed 003's iorate curves).
//!
//! At a fixed rate R with T threads, each thread owns the schedule of R/T operations per
//! second: operation i of thread j is *intended* to start at `start + (i + j/T) * T/R`
//! (`distribution = fixed`) or after seeded exponential gaps of the same mean
//! (`exponential`). A thread waits for an operation's intended start when it is early and
//! starts it at once when it is late; the latency recorded is from the **intended** start to
//! the end, so time an operation spent queued behind a slow one counts (no coordinated
//! omission). Operations intended in the warm-up are run but not recorded. Issuing stops at
//! the end of the measured window: operations intended in it that never started are counted
//! (`unissued`) and, with the achieved rate below the requested one, show a mechanism that
//! cannot keep up. At `iorate = max` (closed loop) each thread issues as fast as it can and
//! latency is from each operation's actual start.
//!
//! Each operation is a read (`rdpct`) or a write of a transfer size drawn from `xfersize`, at
//! a random block (`seekpct`) or the block after the thread's previous transfer.

use super::workload::{Distribution, IoRate, Workload};
use super::Target;
use anyhow::{anyhow, Result};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// Intervals the measured window is cut into for the latency-over-time series.
pub const INTERVALS: usize = 10;

/// One rate of a curve, measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RatePoint {
    /// Operations per second asked for; None at `max`.
    pub requested: Option<f64>,
    /// Operations completed in the measured window per second of it.
    pub achieved: f64,
    pub mb_s: f64,
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    /// Operations intended in the measured window that never started before it ended.
    pub unissued: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Mean latency (µs) of the operations intended in each tenth of the measured window
    /// (None: no operation intended there started).
    pub mean_us_by_interval: Vec<Option<f64>>,
}

struct ThreadResult {
    hist: Histogram<u64>,
    reads: u64,
    writes: u64,
    bytes: u64,
    unissued: u64,
    sum_ns: [u128; INTERVALS],
    count: [u64; INTERVALS],
}

fn new_hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 1 << 42, 3).expect("valid histogram bounds")
}

/// Run `w` on `t` at `rate` operations per second (None: max) for its warm-up and elapsed
/// time.
pub fn run_rate(t: &dyn Target, w: &Workload, rate: Option<f64>, seed: u64) -> Result<RatePoint> {
    let unit = t.block_size() as u64;
    let n = t.nblocks();
    let total_weight: u32 = w.xfersize.iter().map(|x| x.1).sum();
    let threads = w.threads as u64;
    let start = Instant::now() + Duration::from_millis(2);
    let measure_from = start + Duration::from_secs_f64(w.warmup);
    let end = measure_from + Duration::from_secs_f64(w.elapsed);
    let window = w.elapsed;
    let results: Vec<Result<ThreadResult>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|j| {
                sc.spawn(move || -> Result<ThreadResult> {
                    let mut rng =
                        SmallRng::seed_from_u64(seed ^ (j + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut r = ThreadResult {
                        hist: new_hist(),
                        reads: 0,
                        writes: 0,
                        bytes: 0,
                        unissued: 0,
                        sum_ns: [0; INTERVALS],
                        count: [0; INTERVALS],
                    };
                    let largest = w.xfersize.iter().map(|x| x.0).max().unwrap_or(4096) as usize;
                    let mut buf = vec![0x5au8; largest];
                    let mut cursor = (n / threads) * j;
                    // Seconds between this thread's operations, and its first intended start.
                    let period = rate.map(|r| threads as f64 / r);
                    let mut intended_s = period.map_or(0.0, |p| p * j as f64 / threads as f64);
                    loop {
                        let intended = match period {
                            Some(_) => start + Duration::from_secs_f64(intended_s),
                            None => Instant::now(),
                        };
                        if intended >= end {
                            break;
                        }
                        let now = Instant::now();
                        if now >= end {
                            // Late operations intended in the window that will not start.
                            if let Some(p) = period {
                                let left = (end - intended).as_secs_f64() / p;
                                r.unissued += left.ceil() as u64;
                            }
                            break;
                        }
                        if intended > now {
                            let wait = intended - now;
                            if wait > Duration::from_micros(200) {
                                std::thread::sleep(wait - Duration::from_micros(100));
                            }
                            while Instant::now() < intended {
                                std::hint::spin_loop();
                            }
                        }
                        // The operation: kind, size, place.
                        let mut pick = rng.gen_range(0..total_weight);
                        let mut size = w.xfersize[0].0 as u64;
                        for &(s, wt) in &w.xfersize {
                            if pick < wt {
                                size = s as u64;
                                break;
                            }
                            pick -= wt;
                        }
                        let k = size / unit;
                        let read = rng.gen_range(0..100) < w.rdpct;
                        let lba = if rng.gen_range(0..100) < w.seekpct {
                            rng.gen_range(0..=n - k)
                        } else {
                            if cursor + k > n {
                                cursor = 0;
                            }
                            cursor
                        };
                        cursor = lba + k;
                        let b = &mut buf[..size as usize];
                        let began = Instant::now();
                        if read {
                            t.read_run(lba, b)?;
                        } else {
                            b[..8].copy_from_slice(&lba.to_le_bytes());
                            t.write_run(lba, b)?;
                        }
                        let done = Instant::now();
                        let from = if period.is_some() { intended } else { began };
                        if intended >= measure_from {
                            let ns = (done - from).as_nanos();
                            r.hist.saturating_record(ns.max(1) as u64);
                            let at = (intended - measure_from).as_secs_f64() / window;
                            let slot = ((at * INTERVALS as f64) as usize).min(INTERVALS - 1);
                            r.sum_ns[slot] += ns;
                            r.count[slot] += 1;
                            r.bytes += size;
                            if read {
                                r.reads += 1;
                            } else {
                                r.writes += 1;
                            }
                        }
                        if let Some(p) = period {
                            intended_s += match w.distribution {
                                Distribution::Fixed => p,
                                Distribution::Exponential => -p * (1.0 - rng.gen::<f64>()).ln(),
                            };
                        }
                    }
                    Ok(r)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a workload thread panicked")))
            })
            .collect()
    });
    let mut hist = new_hist();
    let (mut reads, mut writes, mut bytes, mut unissued) = (0, 0, 0, 0);
    let mut sum_ns = [0u128; INTERVALS];
    let mut count = [0u64; INTERVALS];
    for r in results {
        let r = r?;
        hist.add(&r.hist)
            .map_err(|e| anyhow!("merging histograms: {e}"))?;
        reads += r.reads;
        writes += r.writes;
        bytes += r.bytes;
        unissued += r.unissued;
        for i in 0..INTERVALS {
            sum_ns[i] += r.sum_ns[i];
            count[i] += r.count[i];
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
    let ops = reads + writes;
    Ok(RatePoint {
        requested: rate,
        achieved: ops as f64 / window,
        mb_s: bytes as f64 / window / 1e6,
        ops,
        reads,
        writes,
        unissued,
        p50_us: us(0.50),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: hist.max() as f64 / 1e3,
        mean_us_by_interval: (0..INTERVALS)
            .map(|i| (count[i] > 0).then(|| sum_ns[i] as f64 / count[i] as f64 / 1e3))
            .collect(),
    })
}

/// The whole curve of `w`: its fixed rates; or the maximum and then its percents (`curve`);
/// or the maximum alone. `progress` gets each point.
pub fn run_curve(
    t: &dyn Target,
    w: &Workload,
    seed: u64,
    mut progress: impl FnMut(&RatePoint),
) -> Result<Vec<RatePoint>> {
    let mut out = vec![];
    let rates: Vec<f64> = match &w.iorate {
        IoRate::Max => vec![],
        IoRate::Fixed(r) => r.clone(),
        IoRate::Curve(pcts) => {
            let max = run_rate(t, w, None, seed)?;
            progress(&max);
            let m = max.achieved;
            out.push(max);
            pcts.iter().map(|p| m * p / 100.0).collect()
        }
    };
    if w.iorate == IoRate::Max {
        let p = run_rate(t, w, None, seed)?;
        progress(&p);
        out.push(p);
    }
    for (i, r) in rates.into_iter().enumerate() {
        let p = run_rate(t, w, Some(r.max(0.001)), seed.wrapping_add(i as u64 + 1))?;
        progress(&p);
        out.push(p);
    }
    Ok(out)
}

/// The mechanisms a workload runs against.
pub const WORKLOAD_TARGETS: [&str; 3] = ["daisy", "pwrite", "pwrite-fdatasync"];

/// One point of one mechanism's curve, for the output.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CurveRow {
    pub kind: &'static str,
    pub workload: String,
    pub mechanism: String,
    pub dir: String,
    pub fs: String,
    #[serde(flatten)]
    pub point: RatePoint,
}

/// Run `w` against each of `targets` in each of `dirs` (Daisy's block store in the first
/// directory only: it is the NVM one); a store is filled first when the workload reads.
pub fn run_workload(
    w: &Workload,
    targets: &[String],
    dirs: &[std::path::PathBuf],
    seed: u64,
    mut progress: impl FnMut(&str),
) -> Result<Vec<CurveRow>> {
    let unit = w.unit();
    let nblocks = w.size / unit as u64;
    let mut rows = vec![];
    for (k, dir) in dirs.iter().enumerate() {
        std::fs::create_dir_all(dir)?;
        let fs = super::methods::fs_of(dir);
        for m in targets {
            if m == "daisy" && k > 0 {
                continue;
            }
            let file = dir.join(format!("daisy-bench-io-wl-{}-{m}.data", std::process::id()));
            let (target, cleanup): (Box<dyn Target>, std::path::PathBuf) = match m.as_str() {
                "daisy" => {
                    let (t, p) = super::daisy_target(dir, unit, w.size)?;
                    (Box::new(t), p)
                }
                "pwrite" | "pwrite-fdatasync" => (
                    Box::new(super::FileTarget::create(
                        &file,
                        unit as u64,
                        nblocks,
                        m == "pwrite-fdatasync",
                    )?),
                    file.clone(),
                ),
                other => anyhow::bail!("unknown workload target {other}"),
            };
            if w.rdpct > 0 {
                super::fill(&*target, unit)?;
            }
            let r = run_curve(&*target, w, seed, |p| {
                progress(&format!(
                    "{:<10} {m:<16} {fs:<6} requested {:>9} achieved {:>9.0} ops/s  p50 {:>8.1} p99 {:>8.1} p99.9 {:>8.1} max {:>9.1} µs{}",
                    w.name,
                    p.requested.map(|r| format!("{r:.0}")).unwrap_or_else(|| "max".into()),
                    p.achieved,
                    p.p50_us,
                    p.p99_us,
                    p.p999_us,
                    p.max_us,
                    if p.unissued > 0 { format!("  ({} unissued)", p.unissued) } else { String::new() }
                ))
            });
            drop(target);
            let _ = std::fs::remove_file(&cleanup);
            for point in r? {
                rows.push(CurveRow {
                    kind: "iorate",
                    workload: w.name.clone(),
                    mechanism: m.clone(),
                    dir: dir.display().to_string(),
                    fs: fs.clone(),
                    point,
                });
            }
        }
    }
    Ok(rows)
}

/// The iorate curve tables: one per mechanism and file system.
pub fn curve_report(w: &Workload, rows: &[CurveRow]) -> String {
    use crate::table::Table;
    let sizes: Vec<String> = w
        .xfersize
        .iter()
        .map(|(s, wt)| format!("{s} B x{wt}"))
        .collect();
    let mut out = format!(
        "workload {}: rdpct {}, seekpct {}, xfersize {}, threads {}, elapsed {} s after {} s warm-up per rate, {} arrivals, {} MiB store; latency from each operation's intended start (open loop; at max: from its actual start)\n",
        w.name,
        w.rdpct,
        w.seekpct,
        sizes.join(", "),
        w.threads,
        w.elapsed,
        w.warmup,
        match w.distribution {
            Distribution::Fixed => "evenly spaced",
            Distribution::Exponential => "exponential",
        },
        w.size >> 20
    );
    let mut seen: Vec<(String, String)> = vec![];
    for r in rows {
        let key = (r.mechanism.clone(), r.dir.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out += &format!("\n{} on {} ({})\n", r.mechanism, r.dir, r.fs);
        let mut t = Table::new([
            "requested/s",
            "achieved/s",
            "MB/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "unissued",
        ]);
        for p in rows
            .iter()
            .filter(|x| x.mechanism == r.mechanism && x.dir == r.dir)
            .map(|x| &x.point)
        {
            t.row([
                p.requested
                    .map(|r| format!("{r:.0}"))
                    .unwrap_or_else(|| "max".into()),
                format!("{:.0}", p.achieved),
                format!("{:.1}", p.mb_s),
                format!("{:.1}", p.p50_us),
                format!("{:.1}", p.p99_us),
                format!("{:.1}", p.p999_us),
                format!("{:.0}", p.max_us),
                p.unissued.to_string(),
            ]);
        }
        out += &t.text();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mechanism that takes at least `service` per operation (it sleeps), on one lock.
    struct Slow {
        service: Duration,
        lock: std::sync::Mutex<()>,
    }

    impl Target for Slow {
        fn nblocks(&self) -> u64 {
            64
        }
        fn read(&self, _: u64, _: &mut [u8]) -> Result<()> {
            let _g = self.lock.lock().unwrap();
            std::thread::sleep(self.service);
            Ok(())
        }
        fn write(&self, n: u64, b: &[u8]) -> Result<()> {
            self.read(n, &mut b.to_vec())
        }
        fn block_size(&self) -> usize {
            512
        }
    }

    fn workload(rate: f64) -> Workload {
        Workload {
            xfersize: vec![(512, 1)],
            iorate: IoRate::Fixed(vec![rate]),
            elapsed: 0.2,
            warmup: 0.0,
            size: 64 * 512,
            ..Workload::new("slow")
        }
    }

    #[test]
    fn latency_from_the_intended_start_grows_when_the_rate_exceeds_capacity() {
        // Capacity at most 500/s (2 ms each); asked for 1000/s: each operation starts later
        // than intended by more than the last, so latency climbs through the window instead of
        // staying near the 2 ms service time (what a closed loop would report).
        let slow = Slow {
            service: Duration::from_millis(2),
            lock: Default::default(),
        };
        let p = run_rate(&slow, &workload(1000.0), Some(1000.0), 7).unwrap();
        let means: Vec<f64> = p.mean_us_by_interval.iter().flatten().copied().collect();
        assert!(means.len() >= 2, "{p:?}");
        let (first, last) = (means[0], *means.last().unwrap());
        assert!(last > 3.0 * first, "latency did not grow: {means:?}");
        assert!(
            p.max_us >= 20_000.0,
            "max {} µs: queueing delay missing",
            p.max_us
        );
        // Half of the schedule (or more) could not start before the window ended.
        assert!(p.unissued >= 50, "{p:?}");
        assert!(p.achieved < 1000.0);
    }

    #[test]
    fn a_curve_runs_the_maximum_then_its_percents() {
        let slow = Slow {
            service: Duration::from_micros(100),
            lock: Default::default(),
        };
        let w = Workload {
            iorate: IoRate::Curve(vec![10.0, 50.0]),
            elapsed: 0.05,
            ..workload(1.0)
        };
        let pts = run_curve(&slow, &w, 1, |_| {}).unwrap();
        assert_eq!(pts.len(), 3);
        assert_eq!(pts[0].requested, None);
        let max = pts[0].achieved;
        assert!((pts[1].requested.unwrap() - max * 0.1).abs() < 1e-6);
        assert!((pts[2].requested.unwrap() - max * 0.5).abs() < 1e-6);
    }
}
