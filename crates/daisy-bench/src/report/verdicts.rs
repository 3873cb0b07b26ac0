//! The verdicts: each figure against the seed's requirement (or the target), PASS or
//! FAIL, with the figures that decide it.

use super::{join_fixed, Environment, Outcome, P1_TARGET_ROUNDS};
use crate::kvbench;
use crate::{crashtest, hashbench, txbench};
use std::path::PathBuf;

/// A requirement judged on this run's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    pub name: String,
    pub passed: bool,
    pub text: String,
}
/// The power-failure simulation: every crash image recovered and verified, no fence without
/// a crash point.
pub(super) fn power_fail_verdict(power_fail: &Outcome<serde_json::Value>) -> Verdict {
    match power_fail {
        Ok(v) => {
            let failures = v["failures"].as_u64().unwrap_or(1);
            let unchecked = v["fences_without_point"].as_u64().unwrap_or(1);
            let passed = failures == 0 && unchecked == 0;
            Verdict {
                name: "functional: data survives power failures".into(),
                passed,
                text: format!(
                    "Power-failure simulation: {} crash images at {} crash points (every fence of every thread, {} without one) recovered and verified, {} failures: {}",
                    v["images"], v["crash_points"], unchecked, failures,
                    if passed { "PASS" } else { "FAIL" }
                ),
            }
        }
        // Not a failure of the product: the simulator binary was not built.
        Err(e) => Verdict {
            name: "not run: power-failure simulation".into(),
            passed: false,
            text: format!("Power-failure simulation: {e}: NOT RUN"),
        },
    }
}

/// The KV server's kill torture: `kills` kills, no acknowledged write lost.
pub(super) fn server_crash_verdict(
    server_crash: &Outcome<crate::kvcrash::Summary>,
    kills: u64,
) -> Verdict {
    match server_crash {
        Ok(s) => {
            let ok = s.lost == 0 && s.failures == 0 && s.kills == kills;
            Verdict {
                name: "functional: the KV server loses no acknowledged write".into(),
                passed: ok,
                text: format!(
                    "KV server kill torture: daisy serve killed {} times under 3 pipelining \
                     clients, {} acknowledged commands verified after the restarts, {} lost: {}",
                    s.kills,
                    s.acknowledged_verified,
                    s.lost,
                    if ok { "PASS" } else { "FAIL" }
                ),
            }
        }
        Err(e) => Verdict {
            name: "functional: the KV server loses no acknowledged write".into(),
            passed: false,
            text: format!("KV server kill torture could not run: {e}: FAIL"),
        },
    }
}
/// Daisy on (emulated) NVM against file persistence that really persists: on a disk. (Seed 000
/// itself ran its file rivals on a tmpfs RAMDISK carved from the same battery-backed NVDIMM, so
/// that only the mechanism differed: the tmpfs rows reproduce that. Here tmpfs is plain DRAM and
/// persists nothing, hence these rows as well.)
pub(super) fn disk_verdicts(
    pm: &[hashbench::Row],
    disk: &[hashbench::Row],
    dir: &Option<(PathBuf, String)>,
) -> Vec<Verdict> {
    let mut v = vec![];
    let Some((_, fs)) = dir else {
        return v;
    };
    let mut pairs = vec![
        (
            "daisy-batch",
            "msync-end",
            "insert all, then one durability point",
            1.05,
        ),
        ("daisy", "msync-op", "every insert durable", 1.05),
    ];
    pairs.extend(db_pairs());
    for (ours, theirs, what, need) in pairs {
        let Some(m) = disk.iter().find(|r| r.mechanism == theirs) else {
            continue;
        };
        let Some(d) = pm.iter().find(|r| r.mechanism == ours && r.n == m.n) else {
            continue;
        };
        let ratio = m.total_ms / d.total_ms;
        v.push(Verdict {
            name: format!("performance: {ours} vs {theirs} on disk"),
            passed: ratio >= need,
            text: format!(
                "File persistence on a disk, hash map N = {} ({what}): Daisy on NVM (tmpfs) {:.1} ms, \
                 {theirs} on a disk file ({fs}) {}{:.1} ms: {}x (requirement: at least \
                 {need}x): {}",
                m.n,
                d.total_ms,
                if m.extrapolated { "~" } else { "" },
                m.total_ms,
                verdict_ratio(ratio),
                if ratio >= need { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

/// Issue 22's targets against the embedded databases: (Daisy's mechanism, the rival's, what
/// is compared, the least speed-up required): every insert durable, at least 10x faster than
/// each database committing every insert; insert all and persist, at least 1.05x faster than
/// each committing the run as one transaction.
fn db_pairs() -> Vec<(&'static str, &'static str, &'static str, f64)> {
    let mut v = vec![];
    for db in crate::dbrivals::Db::ALL {
        let (op, end) = match db {
            crate::dbrivals::Db::Lmdb => ("lmdb-op", "lmdb-end"),
            crate::dbrivals::Db::Redb => ("redb-op", "redb-end"),
            crate::dbrivals::Db::Sqlite => ("sqlite-op", "sqlite-end"),
        };
        v.push((
            "daisy",
            op,
            "every insert durable, a write transaction each",
            10.0,
        ));
        v.push((
            "daisy-batch",
            end,
            "insert all, then one durability point: one write transaction",
            1.05,
        ));
    }
    v
}

/// Seed 000's comparison at the largest N: "insert all pairs and persist" (daisy-batch against
/// msync-end, the seed's comparison), per-insert durability (daisy against msync-op), and PMDK.
pub(super) fn hashmap_verdicts(rows: &[hashbench::Row], env: &Environment) -> Vec<Verdict> {
    let mut v = vec![];
    let Some(n) = rows.iter().map(|r| r.n).max() else {
        return v;
    };
    let at = |m: &str| rows.iter().find(|r| r.n == n && r.mechanism == m);
    let tmpfs_note = if env.fs == "tmpfs" {
        " (on tmpfs msync writes nothing to any device: the rival persists nothing here, so \
         this comparison is the rival's best case (seed 000's tmpfs sat on a battery-backed \
         NVDIMM); the rows on a disk, when the report found one, show file persistence that \
         persists)"
    } else {
        ""
    };
    for (name, ours, theirs, what) in [
        (
            "performance: hash map, insert all and persist, vs msync",
            "daisy-batch",
            "msync-end",
            "insert all N pairs, then one durability point",
        ),
        (
            "performance: hash map, every insert durable, vs msync",
            "daisy",
            "msync-op",
            "every insert durable when it returns",
        ),
    ] {
        if let (Some(d), Some(m)) = (at(ours), at(theirs)) {
            let ratio = m.total_ms / d.total_ms;
            v.push(Verdict {
                name: name.into(),
                passed: ratio >= 1.05,
                text: format!(
                    "Hash map, N = {n} ({what}): Daisy {:.1} ms, {theirs} {:.1} ms: {}x \
                     (requirement: at least 1.05x){tmpfs_note}: {}",
                    d.total_ms,
                    m.total_ms,
                    verdict_ratio(ratio),
                    if ratio >= 1.05 { "PASS" } else { "FAIL" }
                ),
            });
        }
    }
    // Issue 22's bulk targets: the batch within 1.5x of bare stores with one durability point
    // (store-end), and faster than the DRAM HashMap (every table sized for N beforehand).
    if let (Some(d), Some(s)) = (at("daisy-batch"), at("store-end")) {
        let ratio = d.total_ms / s.total_ms;
        v.push(Verdict {
            name: "performance: hash map, insert all and persist, vs the store-end floor".into(),
            passed: ratio <= 1.5,
            text: format!(
                "Hash map, N = {n} (insert all N pairs, then one durability point): Daisy {:.1} \
                 ms, store-end (bare 8-byte stores, every written line flushed and one fence at \
                 the end) {:.1} ms: Daisy takes {ratio:.2}x its time (requirement: at most \
                 1.5x): {}",
                d.total_ms,
                s.total_ms,
                if ratio <= 1.5 { "PASS" } else { "FAIL" }
            ),
        });
    }
    if let (Some(d), Some(m)) = (at("daisy-batch"), at("dram")) {
        let ratio = m.total_ms / d.total_ms;
        v.push(Verdict {
            name: "performance: hash map, insert all and persist, vs DRAM HashMap".into(),
            passed: ratio >= 1.0,
            text: format!(
                "Hash map, N = {n} (insert all N pairs): Daisy, durable at the end, {:.1} ms, \
                 std's HashMap in DRAM (nothing persisted) {:.1} ms: {}x (requirement: at \
                 least 1x): {}",
                d.total_ms,
                m.total_ms,
                verdict_ratio(ratio),
                if ratio >= 1.0 { "PASS" } else { "FAIL" }
            ),
        });
    }
    for (ours, theirs, what, need) in db_pairs() {
        if let (Some(d), Some(m)) = (at(ours), at(theirs)) {
            let ratio = m.total_ms / d.total_ms;
            v.push(Verdict {
                name: format!("performance: hash map, {ours} vs {theirs}"),
                passed: ratio >= need,
                text: format!(
                    "Hash map, N = {n} ({what}): Daisy {:.1} ms, {theirs} ({}) {}{:.1} ms: {}x \
                     (requirement: at least {need}x): {}",
                    d.total_ms,
                    m.version.as_deref().unwrap_or("?"),
                    if m.extrapolated { "~" } else { "" },
                    m.total_ms,
                    verdict_ratio(ratio),
                    if ratio >= need { "PASS" } else { "FAIL" }
                ),
            });
        }
    }
    if let (Some(d), Some(p)) = (at("daisy"), at("pmdk-tx")) {
        let ratio = p.total_ms / d.total_ms;
        v.push(Verdict {
            name: "comparison: hash map vs PMDK".into(),
            passed: ratio >= 1.0,
            text: format!(
                "Hash map, N = {n}, one transaction per insert: Daisy {:.0} ns, PMDK libpmemobj \
                 {:.0} ns per insert: {ratio:.1}x faster",
                d.ns_per_op, p.ns_per_op
            ),
        });
    }
    v
}
/// Each round's requests/s of one server over another's: in a round the servers run a case
/// back to back, so a round's ratio compares runs made seconds apart, in the same spell of
/// the machine. Runs are kept in round order, so when a server failed part-way the rounds
/// both finished are the first ones: those are paired.
fn per_round_ratios(d: &[f64], r: &[f64]) -> Vec<f64> {
    d.iter().zip(r).map(|(a, b)| a / b).collect()
}

/// How much faster `d` is than `r`: the median of the rounds' ratios, with `more` ratios from
/// other paired rounds; the ratio of the medians when no rounds pair (no runs kept).
fn paired_ratio(d: &kvbench::Row, r: &kvbench::Row, more: &[f64]) -> f64 {
    let mut ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
    ratios.extend_from_slice(more);
    if ratios.is_empty() {
        d.rps / r.rps
    } else {
        crate::stats::median(&ratios)
    }
}
/// Seed 000's Redis test: Daisy's server (every write durable) against Redis with RDB and
/// with AOF, the target against Redis with no persistence, and the restart time.
/// Issue 18's targets for Redis's data types and MULTI/EXEC: each test at pipeline 16 at
/// least as fast as redis-none, and at pipeline 1 at least as fast as redis-aof-always (the
/// rival that, like daisy, makes every write durable before its reply), judged on the median
/// of the paired rounds' ratios.
pub(super) fn types_verdicts(kv_types: Option<&Outcome<kvbench::Report>>) -> Vec<Verdict> {
    let rep = match kv_types {
        None => return vec![],
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return vec![Verdict {
                name: "not run: data types and MULTI/EXEC".into(),
                passed: false,
                text: format!("Data types and MULTI/EXEC: {e}: NOT RUN"),
            }]
        }
    };
    let mut v: Vec<Verdict> = rep
        .unavailable
        .iter()
        .map(|u| Verdict {
            name: format!("not run: data types and MULTI/EXEC, {}", u.server),
            passed: u.status != "failed",
            text: format!(
                "Data types and MULTI/EXEC: {} {}: {}",
                u.server, u.status, u.reason
            ),
        })
        .collect();
    let Some(n) = rep.rows.iter().map(|r| r.requests).max() else {
        return v;
    };
    let at = |server: &str, test: &str, p: usize| {
        rep.rows.iter().find(|r| {
            r.requests == n
                && r.server == server
                && r.test.eq_ignore_ascii_case(test)
                && r.pipeline == p
        })
    };
    let mut parts = vec![];
    let mut all = true;
    for test in super::TYPES_TESTS {
        // Writes against Redis without persistence (P16) and with an fsynced AOF (P1); reads,
        // which no persistence slows, against Redis without persistence at both.
        let rivals = if crate::kvbench::READ_TESTS.contains(test) {
            [(16, "redis-none"), (1, "redis-none")]
        } else {
            [(16, "redis-none"), (1, "redis-aof-always")]
        };
        for (p, rival) in rivals {
            if let (Some(d), Some(r)) = (at("daisy", test, p), at(rival, test, p)) {
                let ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
                let ratio = paired_ratio(d, r, &[]);
                all &= ratio >= 1.0;
                parts.push(format!(
                    "{} P{p} vs {rival}: {}x (faster in {} of {} rounds)",
                    test.to_ascii_uppercase(),
                    verdict_ratio(ratio),
                    ratios.iter().filter(|&&x| x >= 1.0).count(),
                    ratios.len()
                ));
            }
        }
    }
    if !parts.is_empty() {
        v.push(Verdict {
            name: "target: data types and MULTI/EXEC vs Redis".into(),
            passed: all,
            text: format!(
                "Data types and MULTI/EXEC, N = {n}, 50 clients, 8-byte values (HSET, SADD and \
                 SPOP on one big hash and set; LPUSH, RPUSH, LPOP, RPOP on one list; LRANGE_N \
                 reads the first N items of a list; ZADD and ZPOPMIN on one sorted set; \
                 MULTI/EXEC = MULTI, SET, INCR, HSET, EXEC, in transactions per second): {} \
                 (target: writes at least 1.00x against redis-none at pipeline 16 and against \
                 redis-aof-always at pipeline 1, reads against redis-none at both; each figure \
                 is the median of the rounds' ratios): {}",
                parts.join("; "),
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

/// Issue 18's memory and restart targets for the data types: bytes per field of small hashes
/// within 1.2x of Redis's (listpack), of large hashes at most Redis's (hashtable), and daisy's
/// restart with 1,000,000 keys of mixed types to the first PONG within 12 ms.
pub(super) fn types_memory_verdicts(kv: &Outcome<kvbench::Report>) -> Vec<Verdict> {
    let Ok(rep) = kv else {
        return vec![]; // the Redis benchmark's own verdict says it did not run
    };
    let per = |server: &str, kind: &str| {
        rep.memory
            .iter()
            .find(|m| m.server == server && m.kind == kind)
            .map(|m| m.bytes_per_key)
    };
    let mut v = vec![];
    let mut parts = vec![];
    let mut all = true;
    let mut any = false;
    for (kind, what, bound) in [
        ("memory-hash-small", "small hashes", 1.2),
        ("memory-hash-large", "large hashes", 1.0),
    ] {
        if let (Some(d), Some(r)) = (per("daisy", kind), per("redis-none", kind)) {
            any = true;
            let ratio = d / r;
            all &= ratio <= bound;
            parts.push(format!(
                "{what}: {d:.1} against {r:.1} bytes per field = {}x (at most {bound:.1}x)",
                verdict_ratio(ratio)
            ));
        }
    }
    if let Some(r) = rep
        .restarts
        .iter()
        .find(|r| r.after == "shutdown, mixed types")
    {
        any = true;
        let ok = r.restart_ms <= 12.0 && r.dbsize_ok;
        all &= ok;
        parts.push(format!(
            "restart with {} keys of mixed types: {:.1} ms to the first PONG (at most 12 ms), \
             DBSIZE {}",
            r.keys,
            r.restart_ms,
            if r.dbsize_ok { "right" } else { "WRONG" }
        ));
    }
    if any {
        v.push(Verdict {
            name: "target: data types memory and restart".into(),
            passed: all,
            text: format!(
                "Data types: {}: {}",
                parts.join("; "),
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

pub(super) fn kv_verdicts(
    kv: &Outcome<kvbench::Report>,
    kv_p1: Option<&Outcome<kvbench::Report>>,
) -> Vec<Verdict> {
    let rep = match kv {
        Ok(r) => r,
        Err(e) => {
            return vec![Verdict {
                name: "not run: Redis benchmark".into(),
                passed: false,
                text: format!("Redis benchmark: {e}: NOT RUN"),
            }]
        }
    };
    let mut v = vec![];
    for u in &rep.unavailable {
        v.push(Verdict {
            name: format!("not run: Redis benchmark, {}", u.server),
            passed: u.status != "failed",
            text: format!("Redis benchmark: {} {}: {}", u.server, u.status, u.reason),
        });
    }
    // The extra pipeline-1 rounds: a server that failed there, or the stage not run.
    match kv_p1 {
        Some(Ok(p)) => {
            for u in &p.unavailable {
                v.push(Verdict {
                    name: format!("not run: Redis benchmark pipeline-1 rounds, {}", u.server),
                    passed: u.status != "failed",
                    text: format!(
                        "Redis benchmark, pipeline-1 target rounds: {} {}: {}",
                        u.server, u.status, u.reason
                    ),
                });
            }
        }
        Some(Err(e)) => v.push(Verdict {
            name: "not run: Redis benchmark pipeline-1 rounds".into(),
            passed: false,
            text: format!("Redis benchmark, pipeline-1 target rounds: {e}: NOT RUN"),
        }),
        None => {}
    }
    let Some(n) = rep.rows.iter().map(|r| r.requests).max() else {
        return v;
    };
    let at = |server: &str, test: &str, p: usize| {
        rep.rows.iter().find(|r| {
            r.requests == n
                && r.server == server
                && r.test.eq_ignore_ascii_case(test)
                && r.pipeline == p
        })
    };
    for rival in ["redis-rdb", "redis-aof-always"] {
        let mut parts = vec![];
        let mut all = true;
        for test in ["SET", "GET"] {
            for p in kvbench::DEFAULT_PIPELINES {
                if let (Some(d), Some(r)) = (at("daisy", test, p), at(rival, test, p)) {
                    // As for the target below: the median of the rounds' ratios.
                    let ratio = paired_ratio(d, r, &[]);
                    all &= ratio >= 1.05;
                    parts.push(format!(
                        "{test} P{p}: {:.0} vs {:.0} req/s = {}x",
                        d.rps,
                        r.rps,
                        verdict_ratio(ratio)
                    ));
                }
            }
        }
        if parts.is_empty() {
            continue;
        }
        v.push(Verdict {
            name: format!("performance: Redis benchmark vs {rival}"),
            passed: all,
            text: format!(
                "Redis benchmark, N = {n}, 50 clients, 8-byte values: daisy serve (every write \
                 durable before its reply) against {rival}: {} (medians of the runs; each \
                 ratio is the median of the rounds' ratios; requirement: at least 1.05x in \
                 each): {}",
                parts.join("; "),
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    // The issue's own target: as fast as Redis with no persistence at all, judged on the
    // paired rounds (see P1_TARGET_ROUNDS).
    let extra = |test: &str| -> Option<(&kvbench::Row, &kvbench::Row)> {
        let rows = &kv_p1?.as_ref().ok()?.rows;
        let find = |server: &str| {
            rows.iter().find(|r| {
                r.requests == n
                    && r.server == server
                    && r.test.eq_ignore_ascii_case(test)
                    && r.pipeline == 1
            })
        };
        Some((find("daisy")?, find("redis-none")?))
    };
    let mut parts = vec![];
    let mut all = true;
    for test in ["SET", "GET"] {
        for p in kvbench::DEFAULT_PIPELINES {
            if let (Some(d), Some(r)) = (at("daisy", test, p), at("redis-none", test, p)) {
                let mut ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
                let mut more = vec![];
                if p == 1 {
                    if let Some((d1, r1)) = extra(test) {
                        more = per_round_ratios(&d1.rps_runs, &r1.rps_runs);
                    }
                }
                let ratio = paired_ratio(d, r, &more);
                ratios.extend(more);
                all &= ratio >= 1.0;
                let rounds = if ratios.len() > 1 {
                    format!(
                        " (faster in {} of {} rounds: {})",
                        ratios.iter().filter(|&&x| x >= 1.0).count(),
                        ratios.len(),
                        join_fixed(&ratios, 2)
                    )
                } else {
                    String::new()
                };
                parts.push(format!("{test} P{p} {}x{rounds}", verdict_ratio(ratio)));
            }
        }
    }
    if !parts.is_empty() {
        v.push(Verdict {
            name: "target: Redis benchmark vs Redis without persistence".into(),
            passed: all,
            text: format!(
                "Redis benchmark against redis-none (nothing persisted), N = {n}: {} (target: \
                 at least 1.00x in each; each figure is the median of the rounds' ratios: in a \
                 round the two servers run the case back to back, seconds apart{}): {}",
                parts.join("; "),
                if kv_p1.is_some() {
                    format!(
                        "; at pipeline 1, where redis-benchmark's own CPU sets the pace for every \
                         server and single runs on a shared 2-core machine swing by 10-30%, the \
                         report ran {P1_TARGET_ROUNDS} more rounds of the two servers alone"
                    )
                } else {
                    String::new()
                },
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    let restart = |s: &str| {
        rep.restarts
            .iter()
            .find(|r| r.server == s && r.after == "shutdown")
    };
    if let Some(k) = rep
        .restarts
        .iter()
        .find(|r| r.server == "daisy" && r.after == "sigkill")
    {
        let rec = k.recovery_ms.unwrap_or(f64::INFINITY);
        let ok = k.dbsize_ok && k.restart_ms <= 12.0 && rec < 5.0;
        v.push(Verdict {
            name: "performance: Redis restart after a crash".into(),
            passed: ok,
            text: format!(
                "Restart with {} keys after SIGKILL under a pipelined SET load, until the first \
                 PONG: daisy serve {:.1} ms (its own open {:.2} ms, {} transactions replayed; {}) \
                 (target: within 12 ms, the open under 5 ms): {}",
                k.keys,
                k.restart_ms,
                rec,
                k.replayed.unwrap_or(0),
                if k.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
                if ok { "PASS" } else { "FAIL" }
            ),
        });
    }
    if let Some(d) = restart("daisy") {
        let others: Vec<String> = ["redis-rdb", "redis-aof-always"]
            .iter()
            .filter_map(|s| restart(s).map(|r| format!("{s} {:.0} ms", r.restart_ms)))
            .collect();
        let ok = d.dbsize_ok && d.restart_ms <= 12.0 * (d.keys as f64 / 1e6).max(1.0);
        v.push(Verdict {
            name: "performance: Redis restart time".into(),
            passed: ok,
            text: format!(
                "Restart with {} keys until the first PONG: daisy serve {:.1} ms ({}), {} \
                 (target: within 12 ms at 1,000,000 keys): {}",
                d.keys,
                d.restart_ms,
                if d.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
                others.join(", "),
                if ok { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

pub(super) fn find<'a>(
    rows: &'a [txbench::Row],
    case: &str,
    mech: &str,
) -> Option<&'a txbench::Row> {
    rows.iter().find(|r| r.case == case && r.mechanism == mech)
}

/// A ratio in a verdict, cut (not rounded) to two decimals: 1.048 against a requirement of
/// 1.05 reads 1.04, never a passing-looking 1.05 next to FAIL.
fn verdict_ratio(r: f64) -> String {
    format!("{:.2}", (r * 100.0).floor() / 100.0)
}

pub(super) fn verdicts(
    f: &crashtest::Summary,
    tx: &[txbench::Row],
    env: &Environment,
) -> Vec<Verdict> {
    let mut v = vec![];
    let ok = f.lost == 0 && f.failures == 0;
    v.push(Verdict {
        name: "functional: data survives crashes".into(),
        passed: ok,
        text: format!(
            "Persistence functional test: {} kills, {} committed transactions verified after recovery, {} lost, {} inconsistencies: {}",
            f.kills,
            f.transactions_verified,
            f.lost,
            f.failures,
            if ok { "PASS" } else { "FAIL" }
        ),
    });
    if let (Some(d), Some(m)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "msync")) {
        let ratio = m.ns_per_op / d.ns_per_op;
        let tmpfs_note = if env.fs == "tmpfs" {
            " (on tmpfs msync writes nothing to any device, so this baseline is optimistic for msync)"
        } else {
            ""
        };
        v.push(Verdict {
            name: "performance: faster than msync".into(),
            passed: ratio >= 1.05,
            text: format!(
                "Persistence performance: Daisy per-transaction durability {:.1}x faster than msync ({:.0} ns vs {:.0} ns per 8-byte update; requirement: at least 1.05x){tmpfs_note}: {}",
                ratio,
                d.ns_per_op,
                m.ns_per_op,
                if ratio >= 1.05 { "PASS" } else { "FAIL" }
            ),
        });
    }
    if let (Some(d), Some(fs)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "fsync")) {
        let ratio = fs.ns_per_op / d.ns_per_op;
        v.push(Verdict {
            name: "performance: faster than fsync".into(),
            passed: ratio >= 1.05,
            text: format!(
                "Persistence performance: Daisy {:.1}x faster than write+fdatasync ({:.0} ns vs {:.0} ns): {}",
                ratio,
                d.ns_per_op,
                fs.ns_per_op,
                if ratio >= 1.05 { "PASS" } else { "FAIL" }
            ),
        });
    }
    // Issue 22: one 8-byte update made durable, against the embedded databases committing a
    // write transaction per update: at least 10x faster.
    for db in crate::dbrivals::Db::ALL {
        if let (Some(d), Some(r)) = (
            find(tx, "update-1", "daisy"),
            find(tx, "update-1", db.name()),
        ) {
            let ratio = r.ns_per_op / d.ns_per_op;
            v.push(Verdict {
                name: format!("performance: update-1 vs {}", db.name()),
                passed: ratio >= 10.0,
                text: format!(
                    "Persistence performance: one 8-byte update made durable: Daisy {:.0} ns, \
                     {} ({}, a write transaction per update) {:.0} ns: {}x (requirement: at \
                     least 10x){}: {}",
                    d.ns_per_op,
                    db.name(),
                    r.version.as_deref().unwrap_or("?"),
                    r.ns_per_op,
                    verdict_ratio(ratio),
                    if env.fs == "tmpfs" {
                        " (on tmpfs the databases' fsyncs write nothing to any device)"
                    } else {
                        ""
                    },
                    if ratio >= 10.0 { "PASS" } else { "FAIL" }
                ),
            });
        }
    }
    for case in txbench::CASES {
        if let Some(d) = find(tx, case, "daisy") {
            if let Some(s) = d.speedup_vs_pmdk {
                v.push(Verdict {
                    name: format!("comparison: {case} vs PMDK"),
                    passed: s >= 1.0,
                    text: format!(
                        "Transactions ({case}): Daisy {:.0} ns, PMDK libpmemobj {:.0} ns: {:.1}x faster",
                        d.ns_per_op,
                        d.ns_per_op * s,
                        s
                    ),
                });
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::{kv_verdicts, per_round_ratios, types_verdicts, verdict_ratio};
    use crate::kvbench;
    use crate::report::tests::kv_row as row;

    fn target(v: &[super::Verdict]) -> &super::Verdict {
        v.iter()
            .find(|v| v.name.starts_with("target: Redis benchmark"))
            .expect("a target verdict")
    }

    #[test]
    fn the_target_verdict_takes_the_median_of_paired_rounds() {
        // Daisy's median (100) equals redis-none's, but Daisy is the faster in 2 of the 3
        // paired rounds: the ratios 1.25, 0.90, 1.11 have the median 1.11.
        let main = |d: [f64; 3], r: [f64; 3]| kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [1, 16]
                        .into_iter()
                        .flat_map(move |p| [row("daisy", t, p, &d), row("redis-none", t, p, &r)])
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(main([100.0, 90.0, 111.0], [80.0, 100.0, 100.0])), None);
        let t = target(&v);
        assert!(t.passed, "{}", t.text);
        assert!(
            t.text
                .contains("SET P1 1.11x (faster in 2 of 3 rounds: 1.25 0.90 1.11)"),
            "{}",
            t.text
        );
        // Daisy slower in 2 of 3 rounds: FAIL, though its best round is far ahead.
        let slow = main([150.0, 95.0, 95.0], [100.0, 100.0, 100.0]);
        let v = kv_verdicts(&Ok(slow.clone()), None);
        assert!(!target(&v).passed, "{}", target(&v).text);
        // The pipeline-1 target rounds are paired with the main ones: 3 more rounds where
        // Daisy is faster make 4 of 6; ratios 0.95 0.95 1.05 1.10 1.20 1.50, median 1.075.
        let extra = kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [
                        row("daisy", t, 1, &[105.0, 110.0, 120.0]),
                        row("redis-none", t, 1, &[100.0, 100.0, 100.0]),
                    ]
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(slow.clone()), Some(&Ok(extra)));
        let t = target(&v);
        assert!(
            t.text.contains("SET P1 1.07x (faster in 4 of 6 rounds"),
            "{}",
            t.text
        );
        // Pipeline 16 has no extra rounds and stays at 1 of 3.
        assert!(
            t.text.contains("SET P16 0.95x (faster in 1 of 3 rounds"),
            "{}",
            t.text
        );
        assert!(!t.passed, "{}", t.text);
        // Extra rounds that did not run leave the main rounds' verdict.
        let v = kv_verdicts(&Ok(slow), Some(&Err("no redis".to_string())));
        assert!(target(&v)
            .text
            .contains("SET P1 0.95x (faster in 1 of 3 rounds"));
        // ... and are a failing verdict of their own: a crash there is not hidden.
        assert!(v
            .iter()
            .any(|x| x.name == "not run: Redis benchmark pipeline-1 rounds" && !x.passed));
    }

    #[test]
    fn per_round_ratios_pair_the_rounds_in_order() {
        assert_eq!(
            per_round_ratios(&[110.0, 90.0, 100.0], &[100.0, 100.0, 80.0]),
            vec![1.1, 0.9, 1.25]
        );
        assert_eq!(per_round_ratios(&[3.0], &[2.0]), vec![1.5]);
        // A server that failed after its first round: the rounds both ran are paired.
        assert_eq!(per_round_ratios(&[1.0, 2.0], &[2.0]), vec![0.5]);
    }

    /// Each data-type test is judged against its rival at its pipeline, on paired rounds; one
    /// slow test fails the verdict, and a stage that did not run is a failing verdict.
    #[test]
    fn data_type_targets_pair_rounds_per_test_and_rival() {
        let rep = |daisy_multi: &[f64]| kvbench::Report {
            rows: vec![
                row("daisy", "hset", 16, &[105.0, 98.0, 110.0]),
                row("redis-none", "hset", 16, &[100.0, 100.0, 100.0]),
                row("redis-aof-always", "hset", 16, &[50.0, 50.0, 50.0]),
                row("daisy", "multi", 1, daisy_multi),
                row("redis-aof-always", "multi", 1, &[100.0, 100.0, 100.0]),
                row("redis-none", "multi", 1, &[200.0, 200.0, 200.0]),
            ],
            runs: 3,
            ..Default::default()
        };
        let ok = Ok(rep(&[101.0, 120.0, 99.0]));
        let v = types_verdicts(Some(&ok));
        let t = v.last().unwrap();
        assert!(t.passed, "{}", t.text);
        assert!(
            t.text
                .contains("HSET P16 vs redis-none: 1.05x (faster in 2 of 3"),
            "{}",
            t.text
        );
        assert!(
            t.text.contains("MULTI P1 vs redis-aof-always: 1.01x"),
            "{}",
            t.text
        );
        let slow = Ok(rep(&[90.0, 120.0, 95.0]));
        let v = types_verdicts(Some(&slow));
        assert!(!v.last().unwrap().passed, "{}", v.last().unwrap().text);
        let v = types_verdicts(Some(&Err("no redis".into())));
        assert!(!v[0].passed && v[0].text.contains("NOT RUN"));
        assert!(types_verdicts(None).is_empty());
    }

    #[test]
    fn verdict_ratios_never_read_as_passing_when_below_the_requirement() {
        assert_eq!(verdict_ratio(1.0476), "1.04");
        assert_eq!(verdict_ratio(0.996), "0.99");
        assert_eq!(verdict_ratio(1.05), "1.05");
        assert_eq!(verdict_ratio(2.6), "2.60");
    }
}
