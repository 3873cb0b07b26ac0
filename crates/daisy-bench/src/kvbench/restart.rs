//! Memory per key and restart time: K keys loaded into a fresh server, which is then shut
//! down and started again on its files (and, for daisy, killed under a write load).

use super::client::{encode, load_keys, load_value, Conn, Reply};
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
