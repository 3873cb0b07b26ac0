//! The human-readable tables of `daisy bench kv`, with their legends (rendered by
//! [`Table::text`]).

use super::restart::{KILL_LOAD_CLIENTS, KILL_LOAD_PIPELINE};
use super::{Report, RestartRow, Row, KEY_MODES, SERVERS, TESTS};
use crate::table::{fmt_ms, Table};

/// What the CPU steal measured during the request cases says, when there was any (a machine
/// that is not a virtual machine has none to report).
pub fn steal_note(percent: f64) -> Option<String> {
    (percent > 0.0).then(|| {
        format!(
            "CPU steal during the request cases: {percent:.1}% of the machine's CPU time went \
             to other guests of the hypervisor (time the runs lost)"
        )
    })
}

fn fmt_ratio(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into())
}

fn fmt_bytes(b: u64) -> String {
    if b >= 10 << 20 {
        format!("{:.0} MiB", b as f64 / (1 << 20) as f64)
    } else if b >= 10 << 10 {
        format!("{:.0} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// The human-readable tables, with their legends.
pub fn table(rep: &Report) -> String {
    let mut s = String::new();
    for u in &rep.unavailable {
        s += &format!("{}: {}: {}\n", u.server, u.status, u.reason);
    }
    if !rep.unavailable.is_empty() {
        s += "\n";
    }
    if !rep.rows.is_empty() {
        let mut t = Table::new([
            "test",
            "P",
            "size B",
            "keys",
            "N",
            "server",
            "requests/s",
            "elapsed ms",
            "p50 ms",
            "p99 ms",
            "max ms",
            "x none",
            "x always",
            "DBSIZE",
        ])
        .left(&[0, 3, 5]);
        let mut rows: Vec<&Row> = rep.rows.iter().collect();
        let order = |r: &Row| {
            (
                TESTS.iter().position(|t| *t == r.test),
                r.pipeline,
                r.value_size,
                KEY_MODES.iter().position(|k| *k == r.keys),
                r.requests,
                SERVERS.iter().position(|t| *t == r.server),
            )
        };
        rows.sort_by_key(|r| order(r));
        let mut last = None;
        for r in rows {
            let group = (
                r.test.clone(),
                r.pipeline,
                r.value_size,
                r.keys.clone(),
                r.requests,
            );
            if last.as_ref().is_some_and(|g| *g != group) {
                t.gap();
            }
            last = Some(group);
            let rps = if rep.runs > 1 {
                format!("{:.0} ({:.0}..{:.0})", r.rps, r.rps_min, r.rps_max)
            } else {
                format!("{:.0}", r.rps)
            };
            t.row([
                r.test.to_uppercase(),
                r.pipeline.to_string(),
                r.value_size.to_string(),
                r.keys.clone(),
                r.requests.to_string(),
                r.server.clone(),
                rps,
                format!(
                    "{}{}",
                    if r.sampled { "~" } else { "" },
                    fmt_ms(r.elapsed_ms)
                ),
                fmt_ms(r.p50_ms),
                fmt_ms(r.p99_ms),
                fmt_ms(r.max_ms),
                fmt_ratio(r.vs_redis_none),
                fmt_ratio(r.vs_redis_aof_always),
                r.keys_after.to_string(),
            ]);
        }
        s += &t.text();
        s += "\nrequests/s, p50/p99/max: redis-benchmark's figures (median of the runs); \
              elapsed ms = N / requests/s; ~ = sampled: run on fewer requests (see \
              requests_run in --format json), elapsed projected to N; x none, x always = \
              requests/s / redis-none's, redis-aof-always's in the same case (above 1: faster); \
              keys: mixed (-r 100,000 on an empty keyspace), new (-r 2^31-1: nearly every SET \
              creates a key), update (keys preloaded: every SET replaces a value, every GET finds \
              one); DBSIZE after the case: for mixed keys GET and INCR pick among 100,000, so \
              about DBSIZE / 100,000 of the GETs find a value; MSET counts commands of 10 keys \
              each\n";
        if let Some(note) = rep.steal_percent.and_then(steal_note) {
            s += &format!("{note}\n");
        }
    }
    if !rep.memory.is_empty() || !rep.restarts.is_empty() {
        s += &format!(
            "\n{} keys key:<i> = 8-byte values, loaded pipelined into a fresh server:\n",
            rep.restart_keys
        );
        let mut t = Table::new([
            "server",
            "load ms",
            "keys/s",
            "used B/key",
            "restart ms",
            "x daisy",
            "DBSIZE",
            "files",
        ])
        .left(&[0]);
        let killed: Vec<&RestartRow> = rep
            .restarts
            .iter()
            .filter(|r| r.after == "sigkill")
            .collect();
        for (name, after) in SERVERS
            .iter()
            .map(|n| (*n, "shutdown"))
            .chain(killed.iter().map(|r| (r.server.as_str(), "sigkill")))
        {
            let m = rep
                .memory
                .iter()
                .find(|m| m.server == name && m.kind == "memory" && after == "shutdown");
            let r = rep
                .restarts
                .iter()
                .find(|r| r.server == name && r.after == after);
            if m.is_none() && r.is_none() {
                continue;
            }
            let label = if after == "sigkill" {
                format!("{name}, SIGKILL")
            } else {
                name.to_string()
            };
            let name = label.as_str();
            let restart = r
                .map(|r| {
                    if r.runs > 1 {
                        format!(
                            "{} ({}..{})",
                            fmt_ms(r.restart_ms),
                            fmt_ms(r.restart_ms_min),
                            fmt_ms(r.restart_ms_max)
                        )
                    } else {
                        fmt_ms(r.restart_ms)
                    }
                })
                .unwrap_or_else(|| "-".into());
            t.row([
                name.to_string(),
                m.map(|m| fmt_ms(m.load_ms)).unwrap_or_else(|| "-".into()),
                m.map(|m| format!("{:.0}", m.keys as f64 / (m.load_ms / 1e3)))
                    .unwrap_or_else(|| "-".into()),
                m.map(|m| format!("{:.1}", m.bytes_per_key))
                    .unwrap_or_else(|| "-".into()),
                restart,
                fmt_ratio(r.and_then(|r| r.vs_daisy)),
                r.map(|r| format!("{}{}", r.dbsize, if r.dbsize_ok { " ok" } else { " WRONG" }))
                    .unwrap_or_else(|| "-".into()),
                r.map(|r| fmt_bytes(r.data_bytes))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        s += &t.text();
        s += "\nused B/key = (INFO used_memory after loading - when empty) / keys (daisy: pool \
              bytes in use; Redis: its allocator's bytes); restart ms = spawn until the first \
              +PONG on the same files (redis-rdb: after SAVE + SHUTDOWN; AOF: SHUTDOWN NOSAVE; \
              daisy: SHUTDOWN), median of the runs; x daisy = restart ms / daisy's; files = \
              bytes of the pool, RDB or AOF files restarted from\n";
        if let Some(t) = types_table(rep) {
            s += "\nData types: bytes per hash field (INFO used_memory growth / fields; one \
                  field per HSET, 8-byte values), and daisy's restart with keys of mixed types \
                  (strings; hashes of 4 fields; sets, lists and sorted sets of 4; ten hashes, \
                  sets, lists and sorted sets of 10,000 each):\n";
            s += &t.text();
        }
        for r in &killed {
            s += &format!(
                "{}, SIGKILL: killed while {KILL_LOAD_CLIENTS} clients pipelined SETs (depth \
                 {KILL_LOAD_PIPELINE}) of the loaded keys, then restarted on its pool; the \
                 server's own open (INFO daisy_recovery_ms) took {} ms and replayed {} \
                 transactions\n",
                r.server,
                r.recovery_ms.map(fmt_ms).unwrap_or_else(|| "-".into()),
                r.replayed
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
        }
    }
    s
}

/// The data-type measurements (`--types-memory`): bytes per field of small and large hashes
/// per server, and daisy's restart with keys of mixed types. None when not measured.
pub fn types_table(rep: &Report) -> Option<Table> {
    let per = |server: &str, kind: &str| {
        rep.memory
            .iter()
            .find(|m| m.server == server && m.kind == kind)
            .map(|m| format!("{:.1}", m.bytes_per_key))
    };
    let mixed = rep
        .restarts
        .iter()
        .find(|r| r.after == "shutdown, mixed types");
    if mixed.is_none() && !rep.memory.iter().any(|m| m.kind != "memory") {
        return None;
    }
    let mut t = Table::new([
        "server",
        "small hashes B/field",
        "large hashes B/field",
        "restart ms, mixed types",
        "DBSIZE",
    ])
    .left(&[0]);
    for name in ["daisy", "redis-none"] {
        let small = per(name, "memory-hash-small");
        let large = per(name, "memory-hash-large");
        let r = mixed.filter(|r| r.server == name);
        if small.is_none() && large.is_none() && r.is_none() {
            continue;
        }
        t.row([
            name.to_string(),
            small.unwrap_or_else(|| "-".into()),
            large.unwrap_or_else(|| "-".into()),
            r.map(|r| {
                format!(
                    "{} ({}..{}; open {} ms)",
                    fmt_ms(r.restart_ms),
                    fmt_ms(r.restart_ms_min),
                    fmt_ms(r.restart_ms_max),
                    r.recovery_ms.map(fmt_ms).unwrap_or_else(|| "-".into())
                )
            })
            .unwrap_or_else(|| "-".into()),
            r.map(|r| format!("{}{}", r.dbsize, if r.dbsize_ok { " ok" } else { " WRONG" }))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    Some(t)
}
