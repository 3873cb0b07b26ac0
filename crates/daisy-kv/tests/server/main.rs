//! `daisy serve` behaviour through real clients over TCP: the `redis` crate, and raw sockets
//! for what a client library would never send (malformed protocol, partial commands).
//! The server runs in this process on a thread, on a port the OS picks.
//!
//! One test binary (`cargo test -p daisy-kv --test server`), its tests grouped by scenario:
//!
//! - `acl`: access control as Redis 7.0 (users, rules, selectors, the ACL log and file).
//! - `bitops`: bitmaps, BITFIELD, HyperLogLog (Redis's bytes and estimates) and geo (to the
//!   digit), across a restart.
//! - `strings`: string commands (SET options, counters, ranges, MSET, binary values).
//! - `keyspace`: key commands, SCAN, FLUSHALL; expiry (lazy, active, options) across a
//!   restart; Redis's answers in corners.
//! - `protocol`: malformed requests close only that client; RESP3 through HELLO 3; a long
//!   request arriving in pieces.
//! - `collections`: every encoding survives a restart, a big DEL is freed in the background,
//!   an EXEC that meets a full pool stores nothing, huge HSET/SREM applied whole, a client
//!   gone inside MULTI, a version-1 pool upgraded.
//! - `config_file`: a Redis config file with every directive the server reads, its errors
//!   naming file and line, CONFIG REWRITE round trips, the Unix socket, pidfile and log.
//! - `connection`: connection and server commands, max-clients; `requirepass` and AUTH.
//! - `inline`: inline commands quoted as Redis reads them; unbalanced quotes.
//! - `introspection`: CLIENT (LIST, INFO, KILL, REPLY, PAUSE), COMMAND, CONFIG, INFO and
//!   MONITOR as Redis 7.0 answers them.
//! - `monitoring`: SLOWLOG, LATENCY, INFO and MEMORY STATS under load, redis-cli --stat,
//!   --memkeys and --bigkeys, Debian's prometheus-redis-exporter.
//! - `operations`: SAVE/BGSAVE copies (a prefix of a writer's acknowledged writes), the size
//!   limit at restart and at run time with the OOM reply matching INFO, the durability line.
//! - `pipelining`: pipelines share transactions; a slow reader and a flooding client.
//! - `limits`: a full pool answers OOM, FLUSHALL of a full pool, commands over more keys
//!   than one log slot describes.
//! - `lists`: both list encodings against a model, a big list across a restart and freed,
//!   blocking pops served, timed out, refused in MULTI and unblocked.
//! - `pubsub`: SUBSCRIBE/PUBLISH across connections, patterns and shard channels, RESP3
//!   pushes, the RESP2 subscriber mode, keyspace notifications of each type family and of
//!   expiry, a slow subscriber closed at its output-buffer limit, CLIENT KILL and RESET.
//! - `redis_py`: Debian's python3-redis runs tests/python/redis_py_check.py against the server.
//! - `redis_replies`: replies the differential test found wrong, pinned to Redis 7.0.15's bytes.
//! - `scripting`: EVAL, SCRIPT, FUNCTION and FCALL: replies, conversions, errors, the sandbox,
//!   MULTI, writes and the script cache across a restart, SCRIPT KILL.
//! - `tracking`: client-side caching (CLIENT TRACKING): invalidations to a RESP2 subscriber
//!   and as RESP3 pushes after the reply, BCAST prefixes, NOLOOP, OPTIN/OPTOUT, expiry,
//!   FLUSHDB's null, a broken redirection, scripts, the table's key limit, the counters.
//! - `streams`: stream commands and consumer groups as Redis answers them, their state whole
//!   across a restart and in a crash image, blocking reads, a big stream and group freed
//!   lazily, DUMP bytes, the version-5 upgrade, damage `pool check` finds.
//! - `zsets`: sorted sets converting at the thresholds, a 100,000-member set across a restart
//!   and lazyfree, WRONGTYPE, blocking pops served or timing out, a crash image kept whole.
//!
//! The server harness (`Server`) and the raw-socket helpers live here.

use redis::{Commands, Connection, RedisResult};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

mod acl;
mod bitops;
mod collections;
#[path = "../common/serve.rs"]
mod common;
mod config_file;
mod connection;
mod inline;
mod introspection;
mod keyspace;
mod limits;
mod lists;
mod monitoring;
mod operations;
mod pipelining;
mod protocol;
mod pubsub;
mod redis_py;
mod redis_replies;
mod scripting;
mod streams;
mod strings;
mod tracking;
mod zsets;

struct Server {
    addr: SocketAddr,
    password: Option<String>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Server {
    fn start(pool: &Path) -> Server {
        Self::start_with(pool, |_| {})
    }

    fn start_with(pool: &Path, f: impl FnOnce(&mut daisy_kv::Options)) -> Server {
        let mut o = daisy_kv::Options {
            pool: pool.to_path_buf(),
            port: 0,
            quiet: true,
            ..Default::default()
        };
        f(&mut o);
        let password = o.requirepass.clone();
        let (addr, thread) = common::spawn(o);
        Server {
            addr,
            password,
            thread: Some(thread),
        }
    }

    fn client(&self) -> Connection {
        redis::Client::open(format!("redis://{}/", self.addr))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// SHUTDOWN and wait for the thread.
    fn stop(mut self) {
        let mut s = self.raw();
        if let Some(p) = &self.password {
            let ok = roundtrip(&mut s, format!("AUTH {p}\r\n").as_bytes(), 5);
            assert_eq!(ok, b"+OK\r\n");
        }
        s.write_all(b"SHUTDOWN\r\n").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            s.read(&mut buf).unwrap_or(0),
            0,
            "SHUTDOWN closes without a reply"
        );
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                if let Some(p) = &self.password {
                    let _ = s.write_all(format!("AUTH {p}\r\n").as_bytes());
                }
                let _ = s.write_all(b"SHUTDOWN\r\n");
            }
            let _ = self.thread.take().unwrap().join();
        }
    }
}

fn tmp() -> tempfile::TempDir {
    common::tmp("daisy-kv-")
}

fn pool_in(d: &tempfile::TempDir) -> PathBuf {
    d.path().join("kv.pool")
}

/// Send raw bytes, read until `want` bytes of reply or the peer closes.
fn roundtrip(s: &mut TcpStream, req: &[u8], want: usize) -> Vec<u8> {
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < want {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// The keyspace's own check and the pool check with its reachability, on a stopped server's
/// pool: both clean.
fn check_pool(pool: &Path) {
    let p = daisy::Pool::open(pool, daisy_kv::keyspace::LAYOUT).unwrap();
    let (reach, problems) = daisy_kv::keyspace::check(&p).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let report = p.check(Some(&reach));
    assert!(report.ok(), "{:?}", report.problems);
}

/// A numeric field of INFO `section`.
fn info_field(c: &mut Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {text}"))
}

/// Wait (at most a minute) until the background freeing has nothing queued.
fn wait_lazyfree(c: &mut Connection) {
    let t0 = std::time::Instant::now();
    while info_field(c, "memory", "lazyfree_pending_objects") > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "lazyfree never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn err_text<T: std::fmt::Debug>(r: RedisResult<T>) -> String {
    let e = r.expect_err("expected an error reply");
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}
