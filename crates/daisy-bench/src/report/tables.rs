//! Each section's tables, built once from the measurements: report.md and report.html render
//! the same [`Table`]s.

use super::verdicts::find;
use super::Report;
use crate::kvbench;
use crate::table::{grouped, Table};
use crate::txbench;

/// A count with its thousands separated.
fn count(v: u64) -> String {
    grouped(v as f64, 0)
}

/// A number of the simulator's JSON summary, thousands separated.
fn json_count(v: &serde_json::Value) -> String {
    v.as_f64()
        .map(|x| grouped(x, 0))
        .unwrap_or_else(|| v.to_string())
}

/// Every table of the report; a section that did not run has none.
pub(super) struct Tables {
    pub environment: Table,
    pub functional: Table,
    /// The power-failure simulation per workload, with the total row.
    pub power_fail: Option<Table>,
    pub server_crash: Option<Table>,
    pub tx: Table,
    pub hashmap: Table,
    /// The file rivals on a disk, when they ran there.
    pub hashmap_disk: Option<Table>,
    /// The Redis requests per case and server.
    pub kv: Option<Table>,
    /// Memory per key and restart times (with the row after SIGKILL).
    pub kv_memory: Option<Table>,
    /// The extra pipeline-1 rounds of daisy and redis-none.
    pub kv_p1: Option<Table>,
    /// Bytes per hash field and daisy's restart with keys of mixed types.
    pub kv_types_memory: Option<Table>,
    /// The data types and MULTI/EXEC.
    pub kv_types: Option<Table>,
}

impl Tables {
    pub fn of(r: &Report) -> Tables {
        Tables {
            environment: environment(r),
            functional: functional(r),
            power_fail: r.power_fail.as_ref().ok().map(power_fail),
            server_crash: r.server_crash.as_ref().ok().map(server_crash),
            tx: tx(&r.tx),
            hashmap: hashmap(r),
            hashmap_disk: r.hashmap_disk_dir.is_some().then(|| hashmap_disk(r)),
            kv: r.kv.as_ref().ok().map(kv),
            kv_memory: r.kv.as_ref().ok().and_then(kv_memory),
            kv_types_memory: r.kv.as_ref().ok().and_then(kvbench::types_table),
            kv_p1: match &r.kv_p1 {
                Some(Ok(k)) => Some(kv_p1(k)),
                _ => None,
            },
            kv_types: match &r.kv_types {
                Some(Ok(k)) => Some(kv(k)),
                _ => None,
            },
        }
    }
}

fn environment(r: &Report) -> Table {
    let e = &r.environment;
    let mut t = Table::new(["item", "value"]);
    t.row(["CPU".into(), format!("{} ({} cores)", e.cpu, e.cores)]);
    t.row(["memory".into(), format!("{:.1} GiB", e.memory_gib)]);
    t.row(["kernel", e.kernel.as_str()]);
    t.row(["flush instructions".into(), e.flush_instructions.join(", ")]);
    t.row([
        "pool directory".into(),
        format!(
            "{} ({}{})",
            e.dir.display(),
            e.fs,
            if e.fs == "tmpfs" {
                ": DRAM emulating NVM, as in seed 000"
            } else {
                ""
            }
        ),
    ]);
    t.row(["Daisy", e.daisy_version.as_str()]);
    t.row(["PMDK", e.pmdk.as_str()]);
    t.row(["Redis", e.redis.as_str()]);
    t.row(["embedded databases".into(), e.databases.join("; ")]);
    t
}

fn functional(r: &Report) -> Table {
    let f = &r.functional;
    let mut t = Table::new([
        "kills",
        "transactions verified",
        "lost",
        "inconsistencies",
        "recoveries that re-applied transactions",
        "slowest open",
        "mode",
        "seed",
    ]);
    t.row([
        count(f.kills),
        count(f.transactions_verified),
        f.lost.to_string(),
        f.failures.to_string(),
        f.recoveries_replayed.to_string(),
        format!("{} us", f.max_open_micros),
        format!("{} on {}", f.mode, f.fs),
        f.seed.to_string(),
    ]);
    t
}

/// The simulator's summary (its JSON) per workload, and the total.
fn power_fail(v: &serde_json::Value) -> Table {
    let mut t = Table::new([
        "workload",
        "transactions",
        "crash points",
        "fences without one",
        "images",
        "failures",
    ]);
    for w in v["workloads"].as_array().into_iter().flatten() {
        t.row([
            w["workload"].as_str().unwrap_or("?").to_string(),
            json_count(&w["transactions"]),
            json_count(&w["crash_points"]),
            json_count(&w["fences_without_point"]),
            json_count(&w["images"]),
            json_count(&w["failures"]),
        ]);
    }
    t.total([
        "all".to_string(),
        String::new(),
        json_count(&v["crash_points"]),
        json_count(&v["fences_without_point"]),
        json_count(&v["images"]),
        json_count(&v["failures"]),
    ]);
    t
}

fn server_crash(k: &crate::kvcrash::Summary) -> Table {
    let mut t = Table::new([
        "server kills",
        "acknowledged commands verified",
        "in flight, found applied",
        "lost",
        "failures",
        "seconds",
        "seed",
    ]);
    t.row([
        k.kills.to_string(),
        count(k.acknowledged_verified),
        count(k.in_flight_applied),
        k.lost.to_string(),
        k.failures.to_string(),
        format!("{:.1}", k.seconds),
        k.seed.to_string(),
    ]);
    t
}

/// A per-operation count with two decimals, `-` where there is none (tx.csv has the same).
pub(super) fn per_op(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

fn tx(rows: &[txbench::Row]) -> Table {
    let mut t = Table::new([
        "case",
        "mechanism",
        "ns/op",
        "ops/s",
        "spread (ns)",
        "flushes/op",
        "fences/op",
        "mode",
        "Daisy faster by",
    ]);
    for row in rows {
        let faster = match (row.mechanism, row.speedup_vs_daisy, row.speedup_vs_pmdk) {
            (_, Some(x), _) => format!("{x:.1}x"),
            ("pmdk", _, _) => find(rows, &row.case, "daisy")
                .and_then(|d| d.speedup_vs_pmdk)
                .map(|x| format!("{x:.1}x"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        t.row([
            row.case.clone(),
            row.mechanism.to_string(),
            grouped(row.ns_per_op, 0),
            grouped(row.ops_per_s, 0),
            format!(
                "{}..{}",
                grouped(row.spread_min_ns, 0),
                grouped(row.spread_max_ns, 0)
            ),
            per_op(row.flushes_per_op),
            per_op(row.fences_per_op),
            row.mode.clone(),
            faster,
        ]);
    }
    t
}

fn hashmap(r: &Report) -> Table {
    let mut t = Table::new([
        "N",
        "mechanism",
        "total ms",
        "ns/insert",
        "spread ns",
        "x msync-op",
        "x msync-end",
        "p99 ns",
        "max ns",
        "flushes+fences (or syncs) per insert",
        "bytes per entry",
    ]);
    for (i, row) in r.hashmap.iter().enumerate() {
        if i > 0 && r.hashmap[i - 1].n != row.n {
            t.gap();
        }
        let x = |v: Option<f64>| v.map(|v| format!("{v:.2}x")).unwrap_or_default();
        let per = match (row.flushes_per_op, row.fences_per_op, row.syncs_per_op) {
            (Some(f), Some(g), _) => format!("{f:.2}+{g:.2}"),
            (_, _, Some(y)) => format!("{y:.2} sync"),
            _ => "-".into(),
        };
        t.row([
            count(row.n),
            row.mechanism.to_string(),
            format!(
                "{}{}",
                if row.extrapolated { "~" } else { "" },
                grouped(row.total_ms, 2)
            ),
            grouped(row.ns_per_op, 0),
            format!(
                "{}..{}",
                grouped(row.spread_min_ns, 0),
                grouped(row.spread_max_ns, 0)
            ),
            x(row.speedup_vs_msync_op),
            x(row.speedup_vs_msync_end),
            grouped(row.p99_ns, 0),
            grouped(row.max_ns, 0),
            per,
            row.bytes_per_entry
                .map(|b| format!("{b:.1}{}", if row.bytes_estimated { " (est)" } else { "" }))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t
}

fn hashmap_disk(r: &Report) -> Table {
    let mut t = Table::new([
        "N (disk)",
        "mechanism",
        "total ms",
        "ns/insert",
        "syncs per insert",
        "bytes per entry",
    ]);
    for row in &r.hashmap_disk {
        t.row([
            count(row.n),
            row.mechanism.to_string(),
            format!(
                "{}{}",
                if row.extrapolated { "~" } else { "" },
                grouped(row.total_ms, 1)
            ),
            grouped(row.ns_per_op, 0),
            row.syncs_per_op
                .map(|v| format!("{v:.6}"))
                .unwrap_or_else(|| "-".into()),
            row.bytes_per_entry
                .map(|b| format!("{b:.1}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t
}

/// Requests per case and server: case by case (the servers side by side), in the order the
/// tests were given.
fn kv(k: &kvbench::Report) -> Table {
    let mut t = Table::new([
        "test",
        "pipeline",
        "value B",
        "N",
        "server",
        "requests/s",
        "elapsed ms",
        "p50 ms",
        "p99 ms",
        "max ms",
        "x redis-none",
        "x redis-aof-always",
    ]);
    let x = |v: Option<f64>| v.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into());
    let mut tests: Vec<&str> = vec![];
    for r in &k.rows {
        if !tests.contains(&r.test.as_str()) {
            tests.push(&r.test);
        }
    }
    let mut rows: Vec<&kvbench::Row> = k.rows.iter().collect();
    rows.sort_by_key(|r| {
        let t = tests.iter().position(|t| *t == r.test);
        (t, r.pipeline, r.value_size, r.requests)
    });
    let mut case = None;
    for row in rows {
        // A gap between cases (test, pipeline, value size, N): the servers of one case together.
        let this = (&row.test, row.pipeline, row.value_size, row.requests);
        if case.is_some_and(|c| c != this) {
            t.gap();
        }
        case = Some(this);
        t.row([
            row.test.to_ascii_uppercase(),
            row.pipeline.to_string(),
            row.value_size.to_string(),
            count(row.requests),
            row.server.clone(),
            format!(
                "{}{}",
                if row.sampled { "~" } else { "" },
                grouped(row.rps, 0)
            ),
            grouped(row.elapsed_ms, 1),
            format!("{:.3}", row.p50_ms),
            format!("{:.3}", row.p99_ms),
            format!("{:.3}", row.max_ms),
            x(row.vs_redis_none),
            x(row.vs_redis_aof_always),
        ]);
    }
    t
}

/// Memory per key and restart after a shutdown, per server, then the restarts after SIGKILL;
/// none when neither was measured.
fn kv_memory(k: &kvbench::Report) -> Option<Table> {
    if k.memory.is_empty() && k.restarts.is_empty() {
        return None;
    }
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    let dbsize = |r: &kvbench::RestartRow| {
        format!(
            "{}{}",
            count(r.dbsize),
            if r.dbsize_ok { " ok" } else { " WRONG" }
        )
    };
    let mut t = Table::new([
        "server",
        "keys",
        "load ms",
        "bytes per key",
        "restart ms",
        "DBSIZE after restart",
        "files",
    ]);
    for m in k.memory.iter().filter(|m| m.kind == "memory") {
        let r = k
            .restarts
            .iter()
            .find(|r| r.server == m.server && r.after == "shutdown");
        let or_dash =
            |f: &dyn Fn(&kvbench::RestartRow) -> String| r.map(f).unwrap_or_else(|| "-".into());
        t.row([
            m.server.clone(),
            count(m.keys),
            grouped(m.load_ms, 0),
            format!("{:.1}", m.bytes_per_key),
            or_dash(&|r| format!("{:.1}", r.restart_ms)),
            or_dash(&dbsize),
            or_dash(&|r| mib(r.data_bytes)),
        ]);
    }
    for r in k.restarts.iter().filter(|r| r.after == "sigkill") {
        t.row([
            format!("{} after SIGKILL under load", r.server),
            count(r.keys),
            "-".into(),
            "-".into(),
            format!(
                "{:.1} (its open {} ms, {} transactions replayed)",
                r.restart_ms,
                r.recovery_ms
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "-".into()),
                r.replayed.unwrap_or(0)
            ),
            dbsize(r),
            mib(r.data_bytes),
        ]);
    }
    Some(t)
}

/// The extra pipeline-1 rounds: each server's median and every round's requests/s.
fn kv_p1(k: &kvbench::Report) -> Table {
    let mut t = Table::new(["test", "server", "requests/s (median)", "each round"]);
    for row in &k.rows {
        t.row([
            row.test.to_ascii_uppercase(),
            row.server.clone(),
            grouped(row.rps, 0),
            row.rps_runs
                .iter()
                .map(|x| grouped(*x, 0))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    t
}
