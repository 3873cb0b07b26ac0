//! Memory per key and restart time: K keys loaded into a fresh server, which is then shut
//! down and started again on its files (and, for daisy, killed under a write load).

use super::client::{encode, load_keys, load_value, pipelined, Conn, Reply};
use super::server::{dir_bytes, Server, Tools, LOG};
use super::{Config, MemoryRow, Partial, RestartRow, RESTART_SERVERS};
use crate::stats::Spread;
use anyhow::{anyhow, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// A server's memory row and its restart row (none for servers not restarted).
pub(super) type MemoryAndRestart = (MemoryRow, Vec<RestartRow>);

/// Load K keys into a fresh server (memory per key), then restart it (restart servers only).
pub(super) fn memory_and_restart(
    cfg: &Config,
    tools: &Tools,
    name: &str,
    sub: &Path,
    fs: &str,
) -> Result<MemoryAndRestart, Partial<Option<Box<MemoryRow>>>> {
    let k = cfg.restart_keys;
    let server = Server::start(tools, name, sub, Duration::from_secs(10))
        .map_err(|e| (None, format!("{e:#}"), false))?;
    let dir = cfg.dir.display().to_string();
    let mem = (|| -> Result<MemoryRow> {
        let mut c = server.conn()?;
        let empty = c.info_field("memory", "used_memory")?;
        let t = Instant::now();
        load_keys(&mut c, k, |_| {})?;
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        let loaded = c.info_field("memory", "used_memory")?;
        let dbsize = c.int(&["DBSIZE"])?;
        if dbsize as u64 != k {
            return Err(anyhow!("DBSIZE {dbsize} after loading {k} keys"));
        }
        Ok(MemoryRow {
            bench: "kv",
            kind: "memory",
            server: name.to_string(),
            keys: k,
            used_memory_empty: empty,
            used_memory_loaded: loaded,
            bytes_per_key: (loaded as f64 - empty as f64) / k as f64,
            load_ms,
            dir: dir.clone(),
            fs: fs.to_string(),
        })
    })();
    let mem = match mem {
        Ok(m) => m,
        Err(e) => {
            let _ = server.stop(&["SHUTDOWN", "NOSAVE"]);
            return Err((None, format!("loading {k} keys: {e}"), true));
        }
    };
    if !RESTART_SERVERS.contains(&name) {
        return match server.stop(&["SHUTDOWN", "NOSAVE"]) {
            Ok(()) => Ok((mem, vec![])),
            Err(e) => Err((Some(Box::new(mem)), format!("{e:#}"), true)),
        };
    }
    let res = (|| -> Result<RestartRow> {
        // The data on the files: SAVE + SHUTDOWN (rdb); the AOF already has every write
        // (always: fsynced before each reply); daisy's writes are durable when answered.
        let first_stop: &[&str] = if name == "redis-rdb" {
            server.conn()?.ok(&["SAVE"])?;
            &["SHUTDOWN"]
        } else {
            &["SHUTDOWN", "NOSAVE"]
        };
        server.stop(first_stop)?;
        let data_bytes = dir_bytes(sub, LOG);
        let mut times = vec![];
        let mut dbsize = 0;
        let mut port = 0;
        let mut recovery = None;
        for _ in 0..cfg.runs {
            let mut s = Server::spawn(tools, name, sub)?;
            let t = s
                .wait_ready(Duration::from_secs(300))
                .map_err(|e| anyhow!("restart with {k} keys: {e}"))?;
            times.push(t.as_secs_f64() * 1e3);
            port = s.port;
            let mut c = s.conn()?;
            dbsize = c.int(&["DBSIZE"])? as u64;
            if name == "daisy" {
                recovery = Some(daisy_recovery(&mut c)?);
            }
            drop(c);
            s.stop(&["SHUTDOWN", "NOSAVE"])?;
        }
        Ok(restart_row(
            name,
            "shutdown",
            k,
            &times,
            (dbsize, port, recovery),
            data_bytes,
            (dir.clone(), fs),
            cfg.runs,
        ))
    })();
    let clean = match res {
        Ok(r) => r,
        Err(e) => return Err((Some(Box::new(mem)), format!("{e:#}"), true)),
    };
    if name != "daisy" {
        return Ok((mem, vec![clean]));
    }
    match crash_restarts(cfg, tools, sub, k, fs) {
        Ok(r) => Ok((mem, vec![clean, r])),
        Err(e) => Err((
            Some(Box::new(mem)),
            format!("restart after SIGKILL: {e}"),
            true,
        )),
    }
}

/// A restart row from the times of its runs and what the last run found: (DBSIZE, port,
/// daisy's own recovery figures).
#[allow(clippy::too_many_arguments)]
fn restart_row(
    server: &str,
    after: &'static str,
    keys: u64,
    times: &[f64],
    (dbsize, port, recovery): (u64, u16, Option<(f64, u64)>),
    data_bytes: u64,
    (dir, fs): (String, &str),
    runs: usize,
) -> RestartRow {
    let ms = Spread::of(times);
    RestartRow {
        bench: "kv",
        kind: "restart",
        server: server.to_string(),
        after,
        keys,
        restart_ms: ms.median,
        restart_ms_min: ms.min,
        restart_ms_max: ms.max,
        runs,
        dbsize,
        dbsize_ok: dbsize == keys,
        data_bytes,
        recovery_ms: recovery.map(|r| r.0),
        replayed: recovery.map(|r| r.1),
        vs_daisy: None,
        port,
        dir,
        fs: fs.to_string(),
    }
}

/// Clients and pipeline depth of the write load under which `daisy serve` is killed.
pub(super) const KILL_LOAD_CLIENTS: usize = 8;
pub(super) const KILL_LOAD_PIPELINE: usize = 100;

/// What a daisy server reported of its last open: (INFO `daisy_recovery_ms`, transactions
/// replayed).
fn daisy_recovery(c: &mut Conn) -> Result<(f64, u64)> {
    let text = match c.ok(&["INFO", "persistence"])? {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        r => {
            return Err(anyhow!(
                "INFO persistence: expected a bulk string, got {r:?}"
            ))
        }
    };
    let field = |f: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{f}:")))
            .map(str::trim)
            .ok_or_else(|| anyhow!("INFO persistence has no {f}"))
    };
    let ms = field("daisy_recovery_ms")?
        .parse::<f64>()
        .map_err(|e| anyhow!("daisy_recovery_ms: {e}"))?;
    let n = field("daisy_recovery_transactions_replayed")?
        .parse::<u64>()
        .map_err(|e| anyhow!("daisy_recovery_transactions_replayed: {e}"))?;
    Ok((ms, n))
}

/// Restart after a crash: `cfg.runs` times, start `daisy serve` on the loaded pool, let
/// [`KILL_LOAD_CLIENTS`] clients pipeline SETs of the loaded keys (the same values, so the
/// keyspace stays the one loaded) at depth [`KILL_LOAD_PIPELINE`], SIGKILL the server under
/// that load after 300 ms, and time spawning it again to the first PONG (DBSIZE checked).
fn crash_restarts(cfg: &Config, tools: &Tools, sub: &Path, k: u64, fs: &str) -> Result<RestartRow> {
    let data_bytes = dir_bytes(sub, LOG);
    let mut times = vec![];
    let (mut dbsize, mut port, mut recovery) = (0, 0, None);
    for round in 0..cfg.runs {
        let s = Server::start(tools, "daisy", sub, Duration::from_secs(60))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let load: Vec<_> = (0..KILL_LOAD_CLIENTS)
            .map(|t| {
                let (stop, sent) = (stop.clone(), sent.clone());
                let port = s.port;
                std::thread::spawn(move || {
                    let Ok(mut c) = Conn::connect(port, Duration::from_secs(2)) else {
                        return;
                    };
                    let mut rng =
                        (round as u64 * 7 + t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let mut buf = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        buf.clear();
                        for _ in 0..KILL_LOAD_PIPELINE {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            let i = rng % k.max(1);
                            encode(
                                &mut buf,
                                &[
                                    b"SET",
                                    format!("key:{i}").as_bytes(),
                                    load_value(i).as_bytes(),
                                ],
                            );
                        }
                        if c.send(&buf).is_err() {
                            return;
                        }
                        for _ in 0..KILL_LOAD_PIPELINE {
                            if c.read_reply().is_err() {
                                return;
                            }
                        }
                        sent.fetch_add(
                            KILL_LOAD_PIPELINE as u64,
                            std::sync::atomic::Ordering::Relaxed,
                        );
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut s = s;
        s.proc.signal(libc::SIGKILL);
        let killed = s.proc.wait_for(Duration::from_secs(10));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in load {
            let _ = h.join();
        }
        if killed.is_none() {
            return Err(anyhow!("daisy serve did not die from SIGKILL"));
        }
        if sent.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return Err(anyhow!("the write load made no progress before the kill"));
        }
        drop(s);
        let mut s = Server::spawn(tools, "daisy", sub)?;
        let t = s
            .wait_ready(Duration::from_secs(60))
            .map_err(|e| anyhow!("with {k} keys: {e}"))?;
        times.push(t.as_secs_f64() * 1e3);
        port = s.port;
        let mut c = s.conn()?;
        dbsize = c.int(&["DBSIZE"])? as u64;
        recovery = Some(daisy_recovery(&mut c)?);
        drop(c);
        s.stop(&["SHUTDOWN"])?;
    }
    Ok(restart_row(
        "daisy",
        "sigkill",
        k,
        &times,
        (dbsize, port, recovery),
        data_bytes,
        (cfg.dir.display().to_string(), fs),
        cfg.runs,
    ))
}

// ---- data types: memory per field, restart of a keyspace of mixed types ----------------------

/// Small hashes of the per-field memory measurement, and their fields (8-byte values): Redis
/// keeps them in listpacks, daisy packs them into the record.
pub const SMALL_HASHES: u64 = 20_000;
pub const SMALL_HASH_FIELDS: u64 = 10;
/// Large hashes (Redis's hashtable, daisy's table per hash) and their fields.
pub const LARGE_HASHES: u64 = 2;
pub const LARGE_HASH_FIELDS: u64 = 100_000;

/// Bytes per field of small and of large hashes on a fresh server: used_memory before and
/// after loading each kind, divided by the fields loaded.
pub(super) fn hash_memory(
    tools: &Tools,
    name: &str,
    sub: &Path,
    cfg: &Config,
    fs: &str,
) -> Result<Vec<MemoryRow>> {
    let server = Server::start(tools, name, sub, Duration::from_secs(10))?;
    let res = (|| -> Result<Vec<MemoryRow>> {
        let mut c = server.conn()?;
        let mut rows = vec![];
        let mut before = c.info_field("memory", "used_memory")?;
        for (kind, hashes, fields) in [
            ("memory-hash-small", SMALL_HASHES, SMALL_HASH_FIELDS),
            ("memory-hash-large", LARGE_HASHES, LARGE_HASH_FIELDS),
        ] {
            let t = Instant::now();
            // One field per command (HSET of one field, as applications add them).
            pipelined(&mut c, hashes * fields, 1000, |j, buf| {
                let key = format!("{kind}:{}", j % hashes);
                let field = format!("field:{}", j / hashes);
                encode(
                    buf,
                    &[
                        b"HSET",
                        key.as_bytes(),
                        field.as_bytes(),
                        load_value(j).as_bytes(),
                    ],
                );
            })?;
            let load_ms = t.elapsed().as_secs_f64() * 1e3;
            let after = c.info_field("memory", "used_memory")?;
            rows.push(MemoryRow {
                bench: "kv",
                kind,
                server: name.to_string(),
                keys: hashes * fields,
                used_memory_empty: before,
                used_memory_loaded: after,
                bytes_per_key: (after as f64 - before as f64) / (hashes * fields) as f64,
                load_ms,
                dir: cfg.dir.display().to_string(),
                fs: fs.to_string(),
            });
            before = after;
        }
        Ok(rows)
    })();
    let stopped = server.stop(&["SHUTDOWN", "NOSAVE"]);
    let rows = res?;
    stopped?;
    Ok(rows)
}

/// Keys of the mixed-type restart: strings, small hashes (4 fields), small sets, lists and
/// sorted sets (4 members or items each), and a few large hashes, sets, lists and sorted sets
/// (10,000 fields, members or items each), `k` in all.
fn load_mixed(c: &mut Conn, k: u64) -> Result<()> {
    const LARGE: u64 = 10;
    const LARGE_SIZE: u64 = 10_000;
    let small = k.saturating_sub(4 * LARGE);
    let (hashes, sets, lists, zsets) = (small / 5, small / 10, small / 10, small / 10);
    let strings = small - hashes - sets - lists - zsets;
    pipelined(c, strings, 1000, |j, buf| {
        encode(
            buf,
            &[
                b"SET",
                format!("key:{j}").as_bytes(),
                load_value(j).as_bytes(),
            ],
        )
    })?;
    pipelined(c, hashes, 500, |j, buf| {
        let v = load_value(j);
        let key = format!("hash:{j}");
        encode(
            buf,
            &[
                b"HSET",
                key.as_bytes(),
                b"a",
                v.as_bytes(),
                b"b",
                v.as_bytes(),
                b"c",
                b"1",
                b"d",
                b"2",
            ],
        )
    })?;
    pipelined(c, sets, 500, |j, buf| {
        let key = format!("set:{j}");
        let m: Vec<String> = (0..4).map(|i| (j * 4 + i).to_string()).collect();
        encode(
            buf,
            &[
                b"SADD",
                key.as_bytes(),
                m[0].as_bytes(),
                m[1].as_bytes(),
                m[2].as_bytes(),
                m[3].as_bytes(),
            ],
        )
    })?;
    pipelined(c, lists, 500, |j, buf| {
        let key = format!("list:{j}");
        let v = load_value(j);
        let items: [&[u8]; 4] = [v.as_bytes(), b"a", b"b", b"c"];
        let mut args: Vec<&[u8]> = vec![b"RPUSH", key.as_bytes()];
        args.extend(items);
        encode(buf, &args)
    })?;
    pipelined(c, zsets, 500, |j, buf| {
        let key = format!("zset:{j}");
        let m: Vec<String> = (0..4).map(|i| format!("m{}", j * 4 + i)).collect();
        encode(
            buf,
            &[
                b"ZADD",
                key.as_bytes(),
                b"1",
                m[0].as_bytes(),
                b"2",
                m[1].as_bytes(),
                b"3",
                m[2].as_bytes(),
                b"4",
                m[3].as_bytes(),
            ],
        )
    })?;
    pipelined(c, LARGE * LARGE_SIZE, 1000, |j, buf| {
        let key = format!("biglist:{}", j % LARGE);
        encode(buf, &[b"RPUSH", key.as_bytes(), load_value(j).as_bytes()])
    })?;
    pipelined(c, LARGE * LARGE_SIZE, 1000, |j, buf| {
        let (key, m) = (format!("bigzset:{}", j % LARGE), format!("m{}", j / LARGE));
        let score = (j / LARGE).to_string();
        encode(
            buf,
            &[b"ZADD", key.as_bytes(), score.as_bytes(), m.as_bytes()],
        )
    })?;
    pipelined(c, LARGE * LARGE_SIZE, 1000, |j, buf| {
        let (key, f) = (format!("bighash:{}", j % LARGE), format!("f{}", j / LARGE));
        encode(
            buf,
            &[
                b"HSET",
                key.as_bytes(),
                f.as_bytes(),
                load_value(j).as_bytes(),
            ],
        )
    })?;
    pipelined(c, LARGE * LARGE_SIZE, 1000, |j, buf| {
        let (key, m) = (
            format!("bigset:{}", j % LARGE),
            format!("member:{}", j / LARGE),
        );
        encode(buf, &[b"SADD", key.as_bytes(), m.as_bytes()])
    })
}

/// daisy's restart with `k` keys of mixed types (see [`load_mixed`]): loaded into a fresh
/// pool, SHUTDOWN, then started `cfg.runs` times and timed from spawn to the first PONG.
pub(super) fn mixed_restart(
    cfg: &Config,
    tools: &Tools,
    sub: &Path,
    fs: &str,
) -> Result<RestartRow> {
    let k = cfg.restart_keys;
    let server = Server::start(tools, "daisy", sub, Duration::from_secs(10))?;
    let loaded = (|| -> Result<()> {
        let mut c = server.conn()?;
        load_mixed(&mut c, k)?;
        let n = c.int(&["DBSIZE"])? as u64;
        if n != k {
            return Err(anyhow!("DBSIZE {n} after loading {k} keys of mixed types"));
        }
        Ok(())
    })();
    server.stop(&["SHUTDOWN"])?;
    loaded?;
    let data_bytes = dir_bytes(sub, LOG);
    let mut times = vec![];
    let (mut dbsize, mut port, mut recovery) = (0, 0, None);
    for _ in 0..cfg.runs {
        let mut s = Server::spawn(tools, "daisy", sub)?;
        let t = s
            .wait_ready(Duration::from_secs(60))
            .map_err(|e| anyhow!("restart with {k} keys of mixed types: {e}"))?;
        times.push(t.as_secs_f64() * 1e3);
        port = s.port;
        let mut c = s.conn()?;
        dbsize = c.int(&["DBSIZE"])? as u64;
        recovery = Some(daisy_recovery(&mut c)?);
        drop(c);
        s.stop(&["SHUTDOWN"])?;
    }
    Ok(restart_row(
        "daisy",
        "shutdown, mixed types",
        k,
        &times,
        (dbsize, port, recovery),
        data_bytes,
        (cfg.dir.display().to_string(), fs),
        cfg.runs,
    ))
}
