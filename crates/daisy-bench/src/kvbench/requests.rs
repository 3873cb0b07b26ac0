//! The request cases: redis-benchmark against one server, case by case, its `--csv` output
//! parsed, and the rounds of a case merged into one row.

use super::client::{multi_exec_load, preload_keys, pubsub_load, xreadgroup_load, Conn};
use super::server::{Proc, Server, Tools};
use super::{keyspace_of, Config, Partial, Row, NEW_BYTES_BUDGET, PROBE_N};
use crate::stats::Spread;
use anyhow::{anyhow, Result};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One CSV row of redis-benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    /// Lower-case test name (`set`, `mset`).
    pub test: String,
    pub rps: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Parse redis-benchmark 7's `--csv` output (with the `csv` crate): a header
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
/// "p99_latency_ms","max_latency_ms"`, then one row per test (`"MSET (10 keys)"` -> mset).
pub fn parse_csv(out: &str) -> Result<Vec<CsvRow>> {
    // The quoted lines are the CSV; redis-benchmark may print errors and notes around them.
    let quoted: String = out
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('"'))
        .flat_map(|l| [l, "\n"])
        .collect();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(quoted.as_bytes());
    let mut header: Option<csv::StringRecord> = None;
    let mut rows = vec![];
    for f in reader.records() {
        let f = f.map_err(|e| anyhow!("redis-benchmark CSV: {e}"))?;
        let l = f.iter().collect::<Vec<_>>().join(",");
        if f.get(0) == Some("test") {
            header = Some(f);
            continue;
        }
        // LRANGE's set-up ("LPUSH (needed to benchmark LRANGE)") is not a test of its own.
        if f.get(0).is_some_and(|t| t.contains("needed to benchmark")) {
            continue;
        }
        let h = header
            .as_ref()
            .ok_or_else(|| anyhow!("redis-benchmark CSV row before its header: {l}"))?;
        let col = |name: &str| -> Result<f64> {
            let i = h
                .iter()
                .position(|x| x == name)
                .ok_or_else(|| anyhow!("redis-benchmark CSV has no {name} column: {h:?}"))?;
            f.get(i)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| anyhow!("redis-benchmark CSV: bad {name} in {l}"))
        };
        let test = f
            .get(0)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("")
            .to_lowercase();
        rows.push(CsvRow {
            test,
            rps: col("rps")?,
            avg_ms: col("avg_latency_ms")?,
            p50_ms: col("p50_latency_ms")?,
            p99_ms: col("p99_latency_ms")?,
            max_ms: col("max_latency_ms")?,
        });
    }
    if rows.is_empty() {
        return Err(anyhow!(
            "redis-benchmark printed no results: {}",
            out.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(rows)
}

/// One case of the requests table: requests, pipeline depth, value size.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    pipeline: usize,
    size: usize,
    /// `-r`.
    keyspace: usize,
}

/// One redis-benchmark invocation (all of `cfg.tests`), its output in `scratch`; killed after
/// `timeout`.
fn redis_benchmark(
    tools: &Tools,
    exe: &Path,
    port: u16,
    cfg: &Config,
    case: Case,
    scratch: &Path,
    timeout: Duration,
) -> Result<Vec<CsvRow>> {
    let Case {
        n,
        pipeline,
        size,
        keyspace,
    } = case;
    // redis-benchmark runs its own tests; the MULTI/EXEC case is the bench's loader.
    let rb_tests: Vec<&str> = cfg
        .tests
        .iter()
        .map(String::as_str)
        .filter(|t| !matches!(*t, "multi" | "pfadd" | "pubsub" | "xadd" | "xreadgroup"))
        .collect();
    let mut rows = if rb_tests.is_empty() {
        vec![]
    } else {
        run_redis_benchmark(tools, exe, port, cfg, case, &rb_tests, scratch, timeout)?
    };
    // PFADD is no test of redis-benchmark's: it runs the command (its own invocation).
    if cfg.tests.iter().any(|t| t == "pfadd") {
        rows.extend(run_redis_benchmark(
            tools,
            exe,
            port,
            cfg,
            case,
            &["pfadd"],
            scratch,
            timeout,
        )?);
    }
    // XADD neither: one more invocation running the command.
    if cfg.tests.iter().any(|t| t == "xadd") {
        rows.extend(run_redis_benchmark(
            tools,
            exe,
            port,
            cfg,
            case,
            &["xadd"],
            scratch,
            timeout,
        )?);
    }
    if cfg.tests.iter().any(|t| t == "xreadgroup") {
        let t = xreadgroup_load(port, cfg.clients, n, pipeline, size)?;
        rows.push(CsvRow {
            test: "xreadgroup".into(),
            rps: t.tps,
            avg_ms: t.avg_ms,
            p50_ms: t.p50_ms,
            p99_ms: t.p99_ms,
            max_ms: t.max_ms,
        });
    }
    if cfg.tests.iter().any(|t| t == "multi") {
        let t = multi_exec_load(port, cfg.clients, n, pipeline, keyspace, size, n as u64)?;
        rows.push(CsvRow {
            test: "multi".into(),
            rps: t.tps,
            avg_ms: t.avg_ms,
            p50_ms: t.p50_ms,
            p99_ms: t.p99_ms,
            max_ms: t.max_ms,
        });
    }
    if cfg.tests.iter().any(|t| t == "pubsub") {
        let t = pubsub_load(port, cfg.clients, n, pipeline, size)?;
        rows.push(CsvRow {
            test: "pubsub".into(),
            rps: t.tps,
            avg_ms: t.avg_ms,
            p50_ms: t.p50_ms,
            p99_ms: t.p99_ms,
            max_ms: t.max_ms,
        });
    }
    Ok(rows)
}

/// One redis-benchmark invocation of `tests`.
#[allow(clippy::too_many_arguments)]
fn run_redis_benchmark(
    tools: &Tools,
    exe: &Path,
    port: u16,
    cfg: &Config,
    case: Case,
    tests: &[&str],
    scratch: &Path,
    timeout: Duration,
) -> Result<Vec<CsvRow>> {
    let Case {
        n,
        pipeline,
        size,
        keyspace,
    } = case;
    let out_path = scratch.join("redis-benchmark.out");
    let out =
        std::fs::File::create(&out_path).map_err(|e| anyhow!("{}: {e}", out_path.display()))?;
    let err = out.try_clone()?;
    let args: Vec<OsString> = [
        "-h".to_string(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
        "-c".into(),
        cfg.clients.to_string(),
        "-n".into(),
        n.to_string(),
        "-r".into(),
        keyspace.to_string(),
        "-P".into(),
        pipeline.to_string(),
        "-d".into(),
        size.to_string(),
        "--csv".into(),
    ]
    .into_iter()
    .chain(if tests == ["pfadd"] {
        ["PFADD", "hll:bench", "__rand_int__"]
            .map(String::from)
            .to_vec()
    } else if tests == ["xadd"] {
        ["XADD", "stream:bench", "*", "field", "__rand_int__"]
            .map(String::from)
            .to_vec()
    } else {
        vec!["-t".into(), tests.join(",")]
    })
    .map(OsString::from)
    .collect();
    let mut p = Proc::spawn(
        Command::new(exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err),
        tools.pin.map(|p| p.client),
    )
    .map_err(|e| anyhow!("{}: {e}", exe.display()))?;
    let st = p.wait_for(timeout);
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    match st {
        None => Err(anyhow!(
            "redis-benchmark did not finish within {:.0} s (killed); its output: {}",
            timeout.as_secs_f64(),
            text.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
        )),
        Some(s) if !s.success() => Err(anyhow!(
            "redis-benchmark exited with {s}: {}",
            text.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
        )),
        Some(_) => parse_csv(&text),
    }
}

/// A number rounded down to two significant digits (sampled request counts).
pub(super) fn round2(n: usize) -> usize {
    let mut p = 1;
    while n / p >= 100 {
        p *= 10;
    }
    n / p * p
}

/// The requests cases of one server: one server process for all of them.
pub(super) fn measure_requests(
    cfg: &Config,
    tools: &Tools,
    bench: &Path,
    name: &str,
    sub: &Path,
    fs: &str,
    tick: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, Partial<Vec<Row>>> {
    let server = Server::start(tools, name, sub, Duration::from_secs(10))
        .map_err(|e| (vec![], format!("{e:#}"), false))?;
    let mut rows = vec![];
    let res = (|| -> Result<()> {
        let mut c = server.conn()?;
        for &pipeline in &cfg.pipelines {
            for &size in &cfg.sizes {
                for keys in &cfg.keys {
                    let keyspace = keyspace_of(keys, size);
                    // One redis-benchmark invocation of `n` requests on a keyspace set up
                    // for this case: emptied, and preloaded for `update` keys.
                    let fresh_run = |c: &mut Conn, n: usize, timeout: Duration| {
                        c.ok(&["FLUSHALL"])?;
                        if keys == "update" {
                            preload_keys(c, keyspace, size)?;
                        }
                        let case = Case {
                            n,
                            pipeline,
                            size,
                            keyspace,
                        };
                        redis_benchmark(tools, bench, server.port, cfg, case, sub, timeout)
                    };
                    // Seconds per request of each test, from the previous N.
                    let mut per_req: Option<f64> = None;
                    for &n in &cfg.ns {
                        let mut n_run = n;
                        if let Some(spr) = per_req {
                            if spr * n as f64 > cfg.max_secs {
                                n_run = round2((cfg.max_secs / spr) as usize).clamp(1, n);
                            }
                        }
                        if per_req.is_none() && n > PROBE_N * 2 {
                            // No smaller N to project from: a probe of PROBE_N requests (not
                            // reported) estimates the time of this one.
                            let rows = fresh_run(&mut c, PROBE_N, Duration::from_secs(120))
                                .map_err(|e| anyhow!("probe of {PROBE_N} requests: {e}"))?;
                            let spr: f64 = rows.iter().map(|r| 1.0 / r.rps.max(1e-9)).sum();
                            if spr * n as f64 > cfg.max_secs {
                                n_run = round2((cfg.max_secs / spr) as usize).clamp(PROBE_N, n);
                            }
                            per_req = Some(spr);
                        }
                        if keys != "update" {
                            let cap = (NEW_BYTES_BUDGET / size.max(1)).max(1);
                            if n_run > cap {
                                n_run = round2(cap).clamp(1, n);
                            }
                        }
                        let projected = per_req.map(|s| s * n_run as f64).unwrap_or(10.0);
                        let timeout = Duration::from_secs_f64(60.0 + 20.0 * projected);
                        let mut samples: Vec<Vec<CsvRow>> = vec![];
                        let mut keys_after = 0;
                        for r in 0..cfg.runs {
                            let rows = fresh_run(&mut c, n_run, timeout).map_err(|e| {
                                anyhow!("N={n} pipeline {pipeline} size {size} keys {keys}: {e}")
                            })?;
                            samples.push(rows);
                            keys_after = c.int(&["DBSIZE"])? as u64;
                            // redis-benchmark counts error replies as done: SETs of new keys
                            // that left no keys were refused (a full pool answers -OOM).
                            if keys == "new"
                                && cfg.tests.iter().any(|t| t == "set")
                                && keys_after < n_run as u64 * 9 / 10
                            {
                                return Err(anyhow!(
                                    "keys new, size {size}: {n_run} SETs left only {keys_after} \
                                     keys: the server refused writes"
                                ));
                            }
                            tick(&format!(
                                "P={pipeline} size={size} keys={keys} N={n} run {}/{}",
                                r + 1,
                                cfg.runs
                            ));
                        }
                        let mut spr = 0.0;
                        for t in &cfg.tests {
                            let per: Vec<&CsvRow> = samples
                                .iter()
                                .filter_map(|s| s.iter().find(|r| &r.test == t))
                                .collect();
                            if per.len() != samples.len() {
                                return Err(anyhow!(
                                    "redis-benchmark gave no {t} result (N={n}, pipeline \
                                 {pipeline}, size {size})"
                                ));
                            }
                            let med = |f: fn(&CsvRow) -> f64| {
                                crate::stats::median(&per.iter().map(|r| f(r)).collect::<Vec<_>>())
                            };
                            let rps = Spread::of(&per.iter().map(|r| r.rps).collect::<Vec<_>>());
                            if rps.median.is_nan() || rps.median <= 0.0 {
                                return Err(anyhow!(
                                    "redis-benchmark reported {t} at 0 requests/s"
                                ));
                            }
                            spr += 1.0 / rps.median;
                            rows.push(Row {
                                bench: "kv",
                                kind: "requests",
                                server: name.to_string(),
                                test: t.clone(),
                                pipeline,
                                value_size: size,
                                keys: keys.clone(),
                                keyspace: keyspace as u64,
                                requests: n as u64,
                                requests_run: n_run as u64,
                                sampled: n_run < n,
                                clients: cfg.clients,
                                rps: rps.median,
                                rps_min: rps.min,
                                rps_max: rps.max,
                                rps_runs: per.iter().map(|r| r.rps).collect(),
                                elapsed_ms: n as f64 / rps.median * 1e3,
                                avg_ms: med(|r| r.avg_ms),
                                p50_ms: med(|r| r.p50_ms),
                                p99_ms: med(|r| r.p99_ms),
                                max_ms: med(|r| r.max_ms),
                                keys_after,
                                runs: cfg.runs,
                                vs_redis_none: None,
                                vs_redis_aof_always: None,
                                port: server.port,
                                dir: cfg.dir.display().to_string(),
                                fs: fs.to_string(),
                            });
                        }
                        per_req = Some(spr);
                    }
                }
            }
        }
        Ok(())
    })();
    let stopped = server.stop(&["SHUTDOWN", "NOSAVE"]);
    match res.and(stopped) {
        Ok(()) => Ok(rows),
        Err(e) => Err((rows, format!("{e:#}"), true)),
    }
}

/// One row per case from the rows of single runs (one per round): requests/s as the median
/// with min..max over the runs, latencies as medians, DBSIZE of the last run.
pub(super) fn merge_runs(rows: Vec<Row>) -> Vec<Row> {
    let mut groups: Vec<Vec<Row>> = vec![];
    for r in rows {
        let key = |x: &Row| {
            (
                x.test.clone(),
                x.pipeline,
                x.value_size,
                x.keys.clone(),
                x.requests,
            )
        };
        match groups.iter_mut().find(|g| key(&g[0]) == key(&r)) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let f = |get: fn(&Row) -> f64| g.iter().map(get).collect::<Vec<f64>>();
            let rps = Spread::of(&f(|r| r.rps));
            let med = |get: fn(&Row) -> f64| crate::stats::median(&f(get));
            let last = g.last().expect("a group has rows");
            Row {
                rps: rps.median,
                rps_min: rps.min,
                rps_max: rps.max,
                rps_runs: g.iter().flat_map(|r| r.rps_runs.iter().copied()).collect(),
                elapsed_ms: last.requests as f64 / rps.median * 1e3,
                avg_ms: med(|r| r.avg_ms),
                p50_ms: med(|r| r.p50_ms),
                p99_ms: med(|r| r.p99_ms),
                max_ms: med(|r| r.max_ms),
                requests_run: g.iter().map(|r| r.requests_run).min().unwrap_or(0),
                sampled: g.iter().any(|r| r.sampled),
                runs: g.len(),
                ..last.clone()
            }
        })
        .collect()
}
