//! `daisy bench kv`: the real `redis-benchmark` against `daisy serve` and against a real
//! `redis-server` in each of its persistence modes, side by side in one run (seed 000's Redis
//! table, seed 001's methods).
//!
//! Every server is started by the benchmark itself, one at a time, on a loopback port picked
//! as free, in its own subdirectory of `--dir` (under `daisy-kvbench-<pid>/`), and stopped and
//! removed when its measurements are done, on errors too ([`Proc`] kills a process that is
//! still running when it is dropped, [`Workdir`] removes the directory). Children also get
//! `PR_SET_PDEATHSIG`, so they die with the benchmark; a directory left by a benchmark that was
//! killed is removed by the next run.
//!
//! How it measures:
//! 1. requests, in rounds: each of the `--runs` rounds runs every case once on every server,
//!    case by case (pipeline, value size, keys), the servers of a case back to back, each
//!    started for the case on a fresh directory (every other round in reverse order). So
//!    the runs of one case are spread over the whole benchmark, and a slow or fast spell of
//!    a shared machine, which lasts seconds, falls on the runs of all servers alike, not on
//!    one server's (the figures are the medians over the rounds; `rps_runs` keeps each
//!    round's). For each N, ascending: FLUSHALL, then
//!    `redis-benchmark -h 127.0.0.1 -p P -c C -n N -r 100000 -P p -d size -t <tests> --csv`,
//!    one invocation for all tests (redis-benchmark runs them in its own order, SET before GET,
//!    so GET finds the keys SET wrote, as in its canonical runs). Requests/s and latencies are
//!    redis-benchmark's own figures; elapsed ms = N / requests/s. A case whose projected time
//!    (from the previous N's requests/s) exceeds `--max-secs` is run with fewer requests and
//!    marked sampled (`~`): its elapsed time is projected to N;
//! 2. memory: on a fresh server, `used_memory` (INFO memory) when empty and after loading K
//!    keys `key:<i>` with 8-byte values through a pipelined RESP writer (batches of 1000 SETs),
//!    divided by K;
//! 3. restart (daisy, redis-rdb, redis-aof-always): on that loaded server, SAVE (rdb only),
//!    SHUTDOWN (rdb, daisy) or SHUTDOWN NOSAVE (AOF), start again on the same files and time
//!    spawn -> first +PONG (a fresh connection every ~1 ms; Redis answers -LOADING until its
//!    data are in), then DBSIZE must equal K.

#![expect(
    unsafe_code,
    reason = "process control std does not offer: CPU affinity, signals other than SIGKILL, sync(2)"
)]
use anyhow::{anyhow, Result};

use crate::stats::Spread;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every server, in table order.
pub const SERVERS: &[&str] = &[
    "daisy",
    "redis-none",
    "redis-rdb",
    "redis-aof-everysec",
    "redis-aof-always",
];
/// Servers whose restart time is measured (the others only their memory).
pub const RESTART_SERVERS: &[&str] = &["daisy", "redis-rdb", "redis-aof-always"];
/// redis-benchmark tests `--tests` accepts.
pub const TESTS: &[&str] = &["set", "get", "incr", "mset"];
/// Requests per case by default (seed 000's Redis table without its largest).
pub const DEFAULT_NS: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// The N `--full` adds.
pub const FULL_N: usize = 10_000_000;
pub const DEFAULT_PIPELINES: [usize; 2] = [1, 16];
pub const DEFAULT_SIZES: [usize; 1] = [8];
/// `-r`: redis-benchmark's random keys come from this many (the `mixed` keys).
pub const KEYSPACE: usize = 100_000;
/// Which keys the requests of a case touch (`--keys`), seed 000's and seed 001's cases:
/// - `mixed`: an empty keyspace and `-r 100000` (seed 000's table): the first SETs create
///   keys, later ones mostly replace values, and GETs find the keys SETs wrote;
/// - `new`: an empty keyspace and `-r` [`NEW_KEYSPACE`]: nearly every SET creates a key that
///   was not there (seed 001's "new keys"); GETs look up keys that are mostly absent;
/// - `update`: [`update_keyspace`] keys preloaded with values of the case's size, and `-r` that
///   many: every SET replaces an existing value and every GET finds one (seed 001's updates).
pub const KEY_MODES: &[&str] = &["mixed", "new", "update"];
/// `-r` of the `new` keys: the largest redis-benchmark accepts (it parses `-r` with atoi, and
/// draws keys with random() modulo it, below 2^31); 1,000,000 SETs repeat about 230 keys.
pub const NEW_KEYSPACE: usize = i32::MAX as usize;
/// Bytes of values one run of a `new` or `mixed` case may add: N is cut (and the case marked
/// sampled) so that N x value size stays within this, keeping the pool and Redis well inside
/// memory (100 KiB values: 20,971 requests).
pub const NEW_BYTES_BUDGET: usize = 2 << 30;
/// Bytes of values preloaded for the `update` keys (see [`update_keyspace`]).
pub const UPDATE_PRELOAD_BYTES: usize = 64 << 20;

/// Keys preloaded for the `update` keys of values of `size` bytes: 100,000, fewer for large
/// values so the preload stays within [`UPDATE_PRELOAD_BYTES`] (1 KiB: 65,536; 100 KiB: 655).
pub fn update_keyspace(size: usize) -> usize {
    (UPDATE_PRELOAD_BYTES / size.max(1)).clamp(1, KEYSPACE)
}

/// `-r` of a case: the range its keys are drawn from.
fn keyspace_of(keys: &str, size: usize) -> usize {
    match keys {
        "new" => NEW_KEYSPACE,
        "update" => update_keyspace(size),
        _ => KEYSPACE,
    }
}
/// Default seconds a redis-benchmark invocation may take before N is sampled.
pub const DEFAULT_MAX_SECS: f64 = 4.0;
/// Requests of the probe that estimates a case's time when no smaller N was measured.
const PROBE_N: usize = 10_000;
/// Largest value size accepted (redis-benchmark's own limit is far higher; the keyspace of
/// 100,000 keys must fit in memory twice: server and tmpfs).
pub const MAX_SIZE: usize = 1 << 20;

const INSTALL_HINT: &str = "install the Debian package with `sudo apt-get install {pkg}` \
     (scripts/install-deps.sh installs it)";

/// Benchmark settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Parent of the servers' directories (`--dir`).
    pub dir: PathBuf,
    /// Requests per case.
    pub ns: Vec<usize>,
    /// redis-benchmark tests (lower case, from [`TESTS`]).
    pub tests: Vec<String>,
    /// Which keys the requests touch (from [`KEY_MODES`]).
    pub keys: Vec<String>,
    pub pipelines: Vec<usize>,
    /// Value sizes in bytes (`-d`).
    pub sizes: Vec<usize>,
    pub clients: usize,
    /// Runs per case (median reported, with min..max of requests/s); also restarts per server.
    pub runs: usize,
    /// Keys loaded for the memory and restart measurements; 0 skips both.
    pub restart_keys: u64,
    /// Servers to measure (from [`SERVERS`]).
    pub servers: Vec<String>,
    /// Longest a redis-benchmark invocation may take before N is sampled.
    pub max_secs: f64,
    /// The `daisy` binary that has the `serve` command (`std::env::current_exe()`).
    pub daisy_exe: PathBuf,
    /// `daisy serve --busy-poll-us`: how long the server polls for requests before it sleeps
    /// (the command line passes `daisy serve`'s default, so the benchmark measures it).
    pub daisy_busy_poll_us: u32,
    /// Pin the servers to one CPU and redis-benchmark to the others (when there are two or
    /// more), so the two never compete for a core and the scheduler's placement does not
    /// decide the comparison; every server gets the same treatment.
    pub pin: bool,
}

/// Where the servers and redis-benchmark run when pinned: the last CPU this process may use
/// for the server, the rest for the client.
#[derive(Clone, Copy)]
struct Pinning {
    server: libc::cpu_set_t,
    client: libc::cpu_set_t,
}

/// The pinning plan, and its description; None on a single CPU (or when the affinity cannot
/// be read).
fn pinning() -> Option<(Pinning, String)> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the size given into `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    let cpus: Vec<usize> = (0..max)
        // SAFETY: every index is below the set's size in bits.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    let (&last, rest) = cpus.split_last()?;
    if rest.is_empty() {
        return None;
    }
    // SAFETY: as above: an all-zero cpu_set_t is the empty set.
    let mut server: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `last` is below the set's size in bits.
    unsafe { libc::CPU_SET(last, &mut server) };
    let mut client = set;
    // SAFETY: `last` is below the size in bits.
    unsafe { libc::CPU_CLR(last, &mut client) };
    let list = rest
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    Some((
        Pinning { server, client },
        format!("servers pinned to CPU {last}, redis-benchmark to CPU {list}"),
    ))
}

/// One result row of the requests table (one server, one test, one case).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bench: &'static str,
    pub kind: &'static str,
    pub server: String,
    pub test: String,
    pub pipeline: usize,
    pub value_size: usize,
    /// Which keys the requests touched (`mixed`, `new`, `update`: see [`KEY_MODES`]).
    pub keys: String,
    /// `-r`: the range the keys were drawn from (the preloaded keys for `update`).
    pub keyspace: u64,
    /// N, the requests of the case.
    pub requests: u64,
    /// Requests actually sent (fewer than N when `sampled`).
    pub requests_run: u64,
    pub sampled: bool,
    pub clients: usize,
    /// Median over the runs (redis-benchmark's figure).
    pub rps: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    /// Each run's requests/s, in the order of the rounds (the median is `rps`).
    pub rps_runs: Vec<f64>,
    /// N / rps (projected to N when sampled).
    pub elapsed_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// DBSIZE after the case (the last run). For `mixed` keys: the keys its writes left; GET
    /// and INCR draw keys from the 100,000 of `-r`, so about keys_after / 100,000 of the GETs
    /// find a value. For `new`: about the number of SETs; for `update`: `keyspace`.
    pub keys_after: u64,
    pub runs: usize,
    /// rps / redis-none's rps in the same case.
    pub vs_redis_none: Option<f64>,
    /// rps / redis-aof-always's rps in the same case.
    pub vs_redis_aof_always: Option<f64>,
    /// The loopback port the server listened on (closed when the benchmark ends).
    pub port: u16,
    pub dir: String,
    pub fs: String,
}

/// Memory per key after loading K keys.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemoryRow {
    pub bench: &'static str,
    pub kind: &'static str,
    pub server: String,
    pub keys: u64,
    pub used_memory_empty: u64,
    pub used_memory_loaded: u64,
    pub bytes_per_key: f64,
    /// Time to load the K keys (pipelined, batches of 1000 SETs).
    pub load_ms: f64,
    pub dir: String,
    pub fs: String,
}

/// Restart time with K keys.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RestartRow {
    pub bench: &'static str,
    pub kind: &'static str,
    pub server: String,
    /// What ended the server before the restart: "shutdown" (SHUTDOWN, after SAVE for
    /// redis-rdb) or "sigkill" (daisy only: SIGKILL while clients pipelined SETs).
    pub after: &'static str,
    pub keys: u64,
    /// Spawn until the first +PONG: median over the restarts, with min..max.
    pub restart_ms: f64,
    pub restart_ms_min: f64,
    pub restart_ms_max: f64,
    pub runs: usize,
    /// DBSIZE after the (last) restart.
    pub dbsize: u64,
    pub dbsize_ok: bool,
    /// Bytes of the server's files (pool, RDB or AOF) it restarted from.
    pub data_bytes: u64,
    /// daisy: what the server reported of its open (INFO `daisy_recovery_ms`, and the
    /// transactions its recovery replayed), from the last restart.
    pub recovery_ms: Option<f64>,
    pub replayed: Option<u64>,
    /// restart_ms / daisy's restart_ms (after a shutdown).
    pub vs_daisy: Option<f64>,
    /// The port of the last restart (closed when the benchmark ends).
    pub port: u16,
    pub dir: String,
    pub fs: String,
}

/// A server that could not be measured (or failed part-way), and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unavailable {
    pub bench: &'static str,
    pub kind: &'static str,
    pub server: String,
    /// "unavailable" (never measured) or "failed" (stopped part-way; rows before it stand).
    pub status: &'static str,
    pub reason: String,
    pub dir: String,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub memory: Vec<MemoryRow>,
    pub restarts: Vec<RestartRow>,
    pub unavailable: Vec<Unavailable>,
    pub restart_keys: u64,
    /// The `--busy-poll-us` daisy was started with.
    pub daisy_busy_poll_us: u32,
    pub runs: usize,
    /// Percent of the machine's CPU time that the hypervisor gave to other guests while the
    /// request cases ran (/proc/stat steal); None where not measured.
    pub steal_percent: Option<f64>,
}

impl Report {
    /// Every line of `--format json`, in order: requests, memory, restart, unavailable.
    pub fn json_lines(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![];
        v.extend(self.rows.iter().map(|r| serde_json::to_string(r).unwrap()));
        v.extend(
            self.memory
                .iter()
                .map(|r| serde_json::to_string(r).unwrap()),
        );
        v.extend(
            self.restarts
                .iter()
                .map(|r| serde_json::to_string(r).unwrap()),
        );
        v.extend(
            self.unavailable
                .iter()
                .map(|r| serde_json::to_string(r).unwrap()),
        );
        v
    }

    /// Whether something that was running failed (a server that never started is only
    /// unavailable).
    pub fn failed(&self) -> bool {
        self.unavailable.iter().any(|u| u.status == "failed")
            || self.restarts.iter().any(|r| !r.dbsize_ok)
    }
}

// ---------------------------------------------------------------------------------------------
// RESP client

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// Append the RESP encoding of one command to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection to a server.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    pub fn connect(port: u16, timeout: Duration) -> std::io::Result<Conn> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(120)))?;
        s.set_write_timeout(Some(Duration::from_secs(120)))?;
        Ok(Conn {
            r: BufReader::with_capacity(1 << 16, s.try_clone()?),
            w: s,
        })
    }

    pub fn set_read_timeout(&self, t: Duration) {
        let _ = self.w.set_read_timeout(Some(t));
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.w.write_all(bytes).map_err(|e| anyhow!("write: {e}"))
    }

    fn line(&mut self) -> Result<String> {
        let mut l = String::new();
        let n = self.r.read_line(&mut l).map_err(|e| anyhow!("read: {e}"))?;
        if n == 0 {
            return Err(anyhow!("the server closed the connection"));
        }
        if !l.ends_with("\r\n") {
            return Err(anyhow!("malformed reply line {l:?}"));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    pub fn read_reply(&mut self) -> Result<Reply> {
        let l = self.line()?;
        let (tag, rest) = l.split_at(l.len().min(1));
        let int = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| anyhow!("malformed reply {l:?}"))
        };
        Ok(match tag {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(int(rest)?),
            "$" => {
                let n = int(rest)?;
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut b = vec![0; n as usize + 2];
                    self.r
                        .read_exact(&mut b)
                        .map_err(|e| anyhow!("read: {e}"))?;
                    if &b[n as usize..] != b"\r\n" {
                        return Err(anyhow!("malformed bulk reply"));
                    }
                    b.truncate(n as usize);
                    Reply::Bulk(Some(b))
                }
            }
            "*" => {
                let n = int(rest)?;
                if n < 0 {
                    Reply::Array(None)
                } else {
                    let mut v = Vec::with_capacity(n.min(1024) as usize);
                    for _ in 0..n {
                        v.push(self.read_reply()?);
                    }
                    Reply::Array(Some(v))
                }
            }
            _ => return Err(anyhow!("malformed reply {l:?}")),
        })
    }

    /// One command, its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Result<Reply> {
        let mut b = vec![];
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        encode(&mut b, &a);
        self.send(&b)?;
        self.read_reply()
    }

    /// One command that must not answer with an error.
    pub fn ok(&mut self, args: &[&str]) -> Result<Reply> {
        match self.cmd(args)? {
            Reply::Error(e) => Err(anyhow!("{}: -{e}", args.join(" "))),
            r => Ok(r),
        }
    }

    /// An integer reply (DBSIZE).
    pub fn int(&mut self, args: &[&str]) -> Result<i64> {
        match self.ok(args)? {
            Reply::Int(i) => Ok(i),
            r => Err(anyhow!(
                "{}: expected an integer, got {r:?}",
                args.join(" ")
            )),
        }
    }

    /// One field of INFO (`used_memory`): the number after `field:`.
    pub fn info_field(&mut self, section: &str, field: &str) -> Result<u64> {
        let text = match self.ok(&["INFO", section])? {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            r => return Err(anyhow!("INFO {section}: expected a bulk string, got {r:?}")),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("INFO {section} has no numeric {field}: field"))
    }
}

/// The value of `key:<i>` in the memory and restart loads: 8 bytes.
pub fn load_value(i: u64) -> String {
    format!("{:08}", i % 100_000_000)
}

/// SET the keys 0..k that `key_value` names, pipelined: batches of at most `per_batch`
/// commands written at once, then their replies read (each must be +OK); `progress` gets the
/// number of keys set after each batch.
fn set_pipelined(
    c: &mut Conn,
    k: u64,
    per_batch: u64,
    key_value: impl Fn(u64) -> (String, Vec<u8>),
    mut progress: impl FnMut(u64),
) -> Result<()> {
    let mut buf = Vec::new();
    let mut i = 0;
    while i < k {
        let end = (i + per_batch.max(1)).min(k);
        buf.clear();
        for j in i..end {
            let (key, val) = key_value(j);
            encode(&mut buf, &[b"SET", key.as_bytes(), &val]);
        }
        c.send(&buf)?;
        for j in i..end {
            match c.read_reply()? {
                Reply::Simple(s) if s == "OK" => {}
                r => return Err(anyhow!("SET {}: expected +OK, got {r:?}", key_value(j).0)),
            }
        }
        i = end;
        progress(i);
    }
    Ok(())
}

/// SET `key:<i>` = [`load_value`]`(i)` for i in 0..k, batches of 1000 commands written at once,
/// then their replies read (each must be +OK).
pub fn load_keys(c: &mut Conn, k: u64, progress: impl FnMut(u64)) -> Result<()> {
    set_pipelined(
        c,
        k,
        1000,
        |j| (format!("key:{j}"), load_value(j).into_bytes()),
        progress,
    )
}

/// Preload the `update` keys: `key:<i>` for i in 0..k, named as redis-benchmark names its
/// `-r` keys (`key:` and 12 digits), each with `size` bytes of `x` (redis-benchmark's value),
/// pipelined in batches of at most 1000 commands or 4 MiB.
pub fn preload_keys(c: &mut Conn, k: usize, size: usize) -> Result<()> {
    let per_batch = (1000).min((4 << 20) / size.max(1)).max(1) as u64;
    set_pipelined(
        c,
        k as u64,
        per_batch,
        |j| (format!("key:{j:012}"), vec![b'x'; size]),
        |_| {},
    )
}

// ---------------------------------------------------------------------------------------------
// Processes and directories

/// A child process that is killed (SIGKILL) and reaped when dropped, unless it has exited.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Spawn `cmd`, dying with this process, on the CPUs of `cpus` when given.
    fn spawn(cmd: &mut Command, cpus: Option<libc::cpu_set_t>) -> std::io::Result<Proc> {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl and sched_setaffinity are plain system calls: async-signal-safe, and
        // they read only the set copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(set) = &cpus {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                Ok(())
            });
        }
        Ok(Proc {
            child: cmd.spawn()?,
        })
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait up to `t` for it to exit on its own.
    fn wait_for(&mut self, t: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if t0.elapsed() > t {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid (not yet reaped, so not reused).
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A directory removed (with everything in it) when dropped.
pub struct Workdir {
    pub path: PathBuf,
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Directory prefix of the benchmark's files in `--dir`.
pub const DIR_PREFIX: &str = "daisy-kvbench-";

/// Remove `daisy-kvbench-<pid>` directories of benchmarks that no longer run (killed ones).
fn remove_stale(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(DIR_PREFIX) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| anyhow!("bind: {e}"))?;
    Ok(l.local_addr()?.port())
}

/// Whether something accepts connections on the loopback port.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// `name` in $PATH.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The last `n` lines of a file (a server's log), for error messages.
fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let t = lines[lines.len().saturating_sub(n)..].join(" | ");
    if t.is_empty() {
        "(no output)".into()
    } else {
        t
    }
}

fn dir_bytes(dir: &Path, skip: &str) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                total += dir_bytes(&e.path(), skip);
            } else if e.file_name().to_string_lossy() != skip {
                total += m.len();
            }
        }
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Servers

/// The programs the benchmark runs.
struct Tools {
    redis_server: Option<PathBuf>,
    redis_benchmark: Option<PathBuf>,
    daisy: PathBuf,
    daisy_busy_poll_us: u32,
    pin: Option<Pinning>,
}

const LOG: &str = "server.log";

/// The command line of `name` on `port` with its files in `sub`.
fn server_command(tools: &Tools, name: &str, port: u16, sub: &Path) -> Result<Command> {
    let log = std::fs::File::create(sub.join(LOG))
        .map_err(|e| anyhow!("{}: {e}", sub.join(LOG).display()))?;
    let log2 = log.try_clone()?;
    let mut c;
    if name == "daisy" {
        c = Command::new(&tools.daisy);
        c.arg("serve")
            .arg("--pool")
            .arg(sub.join("kv.pool"))
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .arg("--busy-poll-us")
            .arg(tools.daisy_busy_poll_us.to_string());
    } else {
        let exe = tools.redis_server.as_ref().ok_or_else(|| {
            anyhow!(
                "redis-server not found in PATH: {}",
                INSTALL_HINT.replace("{pkg}", "redis-server")
            )
        })?;
        c = Command::new(exe);
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(sub)
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .args(redis_mode_args(name));
    }
    c.stdin(Stdio::null()).stdout(log).stderr(log2);
    Ok(c)
}

/// The persistence flags of each Redis mode.
pub fn redis_mode_args(name: &str) -> Vec<&'static str> {
    match name {
        "redis-none" => vec!["--save", "", "--appendonly", "no"],
        "redis-rdb" => vec!["--save", "3600 1 300 100 60 10000", "--appendonly", "no"],
        "redis-aof-everysec" => vec![
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--aof-use-rdb-preamble",
            "no",
        ],
        "redis-aof-always" => vec![
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--aof-use-rdb-preamble",
            "no",
        ],
        _ => vec![],
    }
}

/// What each server is, in words (printed before the tables).
pub fn describe_server(name: &str, daisy_busy_poll_us: u32) -> String {
    match name {
        "daisy" => format!(
            "`daisy serve --pool <dir>/kv.pool`: every write durable in the pool before its \
             reply; under load it polls for requests up to {} us before sleeping (the \
             default --busy-poll-us; Redis always sleeps in epoll_wait)",
            daisy_busy_poll_us
        ),
        "redis-none" => "redis-server --save \"\" --appendonly no: nothing persisted".into(),
        "redis-rdb" => "redis-server with Redis's default save points (--save \"3600 1 300 100 \
                        60 10000\"): a snapshot now and then, writes since it lost on a crash"
            .into(),
        "redis-aof-everysec" => "redis-server --appendonly yes --appendfsync everysec: the log \
                                 fsynced once a second (up to a second lost)"
            .into(),
        "redis-aof-always" => "redis-server --appendonly yes --appendfsync always: the log \
                               fsynced before replies (every write durable)"
            .into(),
        _ => String::new(),
    }
}

/// A running server.
struct Server {
    name: String,
    port: u16,
    sub: PathBuf,
    proc: Proc,
    spawned: Instant,
}

impl Server {
    /// Spawn `name` with its files in `sub` (created if needed) on a free port. Does not wait.
    fn spawn(tools: &Tools, name: &str, sub: &Path) -> Result<Server> {
        std::fs::create_dir_all(sub).map_err(|e| anyhow!("{}: {e}", sub.display()))?;
        let port = free_port()?;
        let mut cmd = server_command(tools, name, port, sub)?;
        let spawned = Instant::now();
        let proc = Proc::spawn(&mut cmd, tools.pin.map(|p| p.server))
            .map_err(|e| anyhow!("{}: {e}", cmd.get_program().to_string_lossy().into_owned()))?;
        Ok(Server {
            name: name.to_string(),
            port,
            sub: sub.to_path_buf(),
            proc,
            spawned,
        })
    }

    /// Spawn and wait until it answers PING (a port taken meanwhile is retried).
    fn start(tools: &Tools, name: &str, sub: &Path, timeout: Duration) -> Result<Server> {
        let mut last = anyhow!("{name} did not start");
        for _ in 0..3 {
            let mut s = Server::spawn(tools, name, sub)?;
            match s.wait_ready(timeout) {
                Ok(_) => return Ok(s),
                Err(e) => {
                    if !e.to_string().contains("in use") {
                        return Err(e);
                    }
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Poll with a fresh connection every ~1 ms until PING answers +PONG; the time since
    /// spawn. -LOADING (Redis reading its files) and refused connections keep polling.
    fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        loop {
            if let Ok(mut c) = Conn::connect(self.port, Duration::from_millis(100)) {
                c.set_read_timeout(Duration::from_secs(5));
                if let Ok(Reply::Simple(s)) = c.cmd(&["PING"]) {
                    if s == "PONG" {
                        return Ok(self.spawned.elapsed());
                    }
                }
            }
            if let Some(st) = self.proc.exited() {
                return Err(anyhow!(
                    "{} exited ({st}) before answering PING; its output: {}",
                    self.what(),
                    tail(&self.sub.join(LOG), 6)
                ));
            }
            if self.spawned.elapsed() > timeout {
                return Err(anyhow!(
                    "{} did not answer PING within {:.0} s; its output: {}",
                    self.what(),
                    timeout.as_secs_f64(),
                    tail(&self.sub.join(LOG), 6)
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn what(&self) -> String {
        if self.name == "daisy" {
            format!("`daisy serve` on port {}", self.port)
        } else {
            format!("redis-server ({}) on port {}", self.name, self.port)
        }
    }

    fn conn(&self) -> Result<Conn> {
        Conn::connect(self.port, Duration::from_secs(2))
            .map_err(|e| anyhow!("connect to {}: {e}", self.what()))
    }

    /// Stop it with `shutdown` (e.g. ["SHUTDOWN", "NOSAVE"]; daisy gets plain SHUTDOWN: its
    /// writes are durable when answered); SIGTERM if it refuses the command or does not exit
    /// within 30 s, SIGKILL 10 s later, which is reported as an error.
    fn stop(mut self, shutdown: &[&str]) -> Result<()> {
        let shutdown = if self.name == "daisy" {
            &["SHUTDOWN"][..]
        } else {
            shutdown
        };
        if let Ok(mut c) = self.conn() {
            c.set_read_timeout(Duration::from_secs(30));
            // A server that exits answers nothing (connection closed): that is success. One
            // that refuses the command gets SIGTERM.
            if let Ok(Reply::Error(_)) = c.cmd(shutdown) {
                self.proc.signal(libc::SIGTERM);
            }
        }
        if self.proc.wait_for(Duration::from_secs(30)).is_some() {
            return Ok(());
        }
        self.proc.signal(libc::SIGTERM);
        if self.proc.wait_for(Duration::from_secs(10)).is_some() {
            return Ok(());
        }
        Err(anyhow!(
            "{} did not exit after {} and SIGTERM (killed)",
            self.what(),
            shutdown.join(" ")
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

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

/// Parse redis-benchmark 7's `--csv` output: a header
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
/// "p99_latency_ms","max_latency_ms"`, then one row per test (`"MSET (10 keys)"` -> mset).
pub fn parse_csv(out: &str) -> Result<Vec<CsvRow>> {
    let split = |l: &str| -> Vec<String> {
        l.split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .collect()
    };
    let mut header: Option<Vec<String>> = None;
    let mut rows = vec![];
    for l in out.lines().map(str::trim).filter(|l| l.starts_with('"')) {
        let f = split(l);
        if f.first().map(String::as_str) == Some("test") {
            header = Some(f);
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
        let test = f[0].split_whitespace().next().unwrap_or("").to_lowercase();
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
        "-t".into(),
        cfg.tests.join(","),
        "--csv".into(),
    ]
    .into_iter()
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

/// `-v`/`--version` of a program: the first line.
fn version(exe: &Path) -> Option<String> {
    let o = Command::new(exe).arg("--version").output().ok()?;
    let s = String::from_utf8_lossy(&o.stdout);
    s.lines().next().map(|l| l.trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// The run

/// A number rounded down to two significant digits (sampled request counts).
fn round2(n: usize) -> usize {
    let mut p = 1;
    while n / p >= 100 {
        p *= 10;
    }
    n / p * p
}

/// Stages of the progress bar for one server.
fn stages_per_server(cfg: &Config, with_requests: bool) -> u64 {
    let cases = if with_requests {
        (cfg.pipelines.len() * cfg.sizes.len() * cfg.keys.len() * cfg.ns.len() * cfg.runs) as u64
    } else {
        0
    };
    cases + if cfg.restart_keys > 0 { 1 } else { 0 }
}

/// Progress over the stages of all servers.
struct Progress<'a> {
    done: u64,
    total: u64,
    f: &'a mut dyn FnMut(u64, u64, &str),
}

impl Progress<'_> {
    fn tick(&mut self, what: &str) {
        self.done += 1;
        (self.f)(self.done, self.total, what);
    }

    fn show(&mut self, what: &str) {
        (self.f)(self.done, self.total, what);
    }

    /// Count `n` stages that will not run (a server left out).
    fn skip(&mut self, n: u64, what: &str) {
        self.done += n;
        (self.f)(self.done, self.total, what);
    }
}

/// Run the benchmark. `note` receives the lines that describe it, `progress` (done, total,
/// what) each finished stage.
pub fn run(
    cfg: &Config,
    mut note: impl FnMut(&str),
    mut progress: impl FnMut(u64, u64, &str),
) -> Result<Report> {
    validate(cfg)?;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let f = std::fs::File::open(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let fs = daisy::internals::fs_type_name(&f).to_string();
    let tmpfs = daisy::internals::is_tmpfs(&f);
    drop(f);
    remove_stale(&cfg.dir);
    let pin = if cfg.pin { pinning() } else { None };
    let tools = Tools {
        redis_server: find_in_path("redis-server"),
        redis_benchmark: find_in_path("redis-benchmark"),
        daisy: cfg.daisy_exe.clone(),
        daisy_busy_poll_us: cfg.daisy_busy_poll_us,
        pin: pin.as_ref().map(|p| p.0),
    };
    let dir_s = cfg.dir.display().to_string();

    let mut ns = cfg.ns.clone();
    ns.sort_unstable();
    ns.dedup();
    let cfg = &Config { ns, ..cfg.clone() };

    note(&format!(
        "daisy bench kv: redis-benchmark against daisy serve and redis-server, one server at a \
         time, each started here on a free 127.0.0.1 port in its own directory under {}; the \
         runs go in rounds, each round running every case on all servers back to back (every \
         other round in reverse order), so that a slow spell of the machine falls on all of \
         them",
        cfg.dir.display()
    ));
    note(&match (&pin, cfg.pin) {
        (Some((_, how)), _) => format!("CPUs: {how} (--no-pin to let the scheduler place them)"),
        (None, true) => "CPUs: one CPU, nothing pinned".into(),
        (None, false) => "CPUs: not pinned (--no-pin)".into(),
    });
    note(&format!(
        "dir {} on {} ({})",
        cfg.dir.display(),
        fs,
        if tmpfs {
            "tmpfs: DRAM emulating NVM, as in seed 000; fsync and msync persist nothing beyond \
             the page cache here, so AOF always costs its system calls only"
        } else {
            "a disk: fsync reaches the device"
        }
    ));
    match &tools.redis_server {
        Some(p) => note(&format!(
            "redis-server: {} ({})",
            p.display(),
            version(p).unwrap_or_else(|| "version unknown".into())
        )),
        None => note(&format!(
            "redis-server: not found in PATH; the redis-* servers are not measured: {}",
            INSTALL_HINT.replace("{pkg}", "redis-server")
        )),
    }
    match &tools.redis_benchmark {
        Some(p) => note(&format!(
            "redis-benchmark: {} ({}): -c {} -n N -r <keyspace> -P <pipeline> -d <size> -t {} \
             --csv; FLUSHALL before each case; requests/s and latencies are redis-benchmark's; \
             elapsed = N / requests/s",
            p.display(),
            version(p).unwrap_or_else(|| "version unknown".into()),
            cfg.clients,
            cfg.tests.join(",")
        )),
        None => note(&format!(
            "redis-benchmark: not found in PATH; no request rates measured (memory and restart \
             only): {}",
            INSTALL_HINT.replace("{pkg}", "redis-tools")
        )),
    }
    for k in &cfg.keys {
        note(&match k.as_str() {
            "new" => format!(
                "keys new: -r {NEW_KEYSPACE} on an empty keyspace: nearly every SET creates a \
                 key (redis-benchmark draws keys below 2^31); GETs mostly miss"
            ),
            "update" => format!(
                "keys update: key:000000000000.. preloaded (pipelined, before each run) with \
                 values of the case's size, at most {} MiB of them ({}), and -r that many: \
                 every SET replaces a value, every GET finds one",
                UPDATE_PRELOAD_BYTES >> 20,
                cfg.sizes
                    .iter()
                    .map(|&z| format!("{} keys of {z} B", update_keyspace(z)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => format!(
                "keys mixed: -r {KEYSPACE} on an empty keyspace (seed 000's table): early SETs \
                 create keys, later ones mostly replace values; GETs find the keys SETs wrote"
            ),
        });
    }
    note(&format!(
        "cases: N = {}; pipeline {}; value size {} B; {} run(s) each (median of requests/s, \
         min..max shown when more than one); a case projected past {} s, or whose new values \
         would pass {} GiB, is run on fewer requests and marked ~ (sampled)",
        join(&cfg.ns),
        join(&cfg.pipelines),
        join(&cfg.sizes),
        cfg.runs,
        cfg.max_secs,
        NEW_BYTES_BUDGET >> 30
    ));
    if cfg.restart_keys > 0 {
        note(&format!(
            "memory and restart: {} keys key:<i> with 8-byte values loaded by a pipelined RESP \
             writer (batches of 1000 SETs) into a fresh server; memory = (used_memory loaded - \
             empty) / keys; restart ({}) = spawn to first +PONG on the same files, DBSIZE \
             checked",
            cfg.restart_keys,
            RESTART_SERVERS
                .iter()
                .filter(|s| cfg.servers.iter().any(|x| x == *s))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for s in &cfg.servers {
        note(&format!("  {s}: {}", describe_server(s, cfg.daisy_busy_poll_us)));
    }

    let base = cfg.dir.join(format!("{DIR_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&base).map_err(|e| anyhow!("{}: {e}", base.display()))?;
    let _work = Workdir { path: base.clone() };

    let per_server = stages_per_server(cfg, tools.redis_benchmark.is_some());
    let mut prog = Progress {
        done: 0,
        total: per_server * cfg.servers.len() as u64,
        f: &mut progress,
    };
    let mut rep = Report {
        restart_keys: cfg.restart_keys,
        runs: cfg.runs,
        daisy_busy_poll_us: cfg.daisy_busy_poll_us,
        ..Report::default()
    };
    let unavailable = |name: &str, reason: String, status: &'static str| Unavailable {
        bench: "kv",
        kind: "unavailable",
        server: name.to_string(),
        status,
        reason,
        dir: dir_s.clone(),
    };
    // Servers that cannot run (no redis-server) or failed: left out of later rounds.
    let mut out: Vec<bool> = vec![false; cfg.servers.len()];
    for (i, name) in cfg.servers.iter().enumerate() {
        if name != "daisy" && tools.redis_server.is_none() {
            rep.unavailable.push(unavailable(
                name,
                format!(
                    "redis-server not found in PATH: {}",
                    INSTALL_HINT.replace("{pkg}", "redis-server")
                ),
                "unavailable",
            ));
            out[i] = true;
            prog.skip(per_server, name);
        }
    }
    // 1. Requests, round by round, and in each round case by case (pipeline, value size,
    // keys) over all servers: one server's runs of a case and the next server's are seconds
    // apart, so a slow or fast spell of a shared machine, which lasts seconds, falls on
    // both. Each server is started for each case (a fresh pool or data directory).
    if let Some(bench) = &tools.redis_benchmark {
        let mut runs: Vec<Vec<Row>> = vec![vec![]; cfg.servers.len()];
        // Stages done per server, to skip the rest of one that fails.
        let mut done_by = vec![0u64; cfg.servers.len()];
        // Dirty pages left by earlier work (the report's disk baseline) would be written back
        // during the first rounds, slowing whichever server runs then: write them now.
        // SAFETY: sync takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let cpu_before = crate::stats::CpuTimes::now();
        for round in 0..cfg.runs {
            // Every other round goes through the servers in reverse, so that no server always
            // runs first, right after the previous stage, or always after the same server.
            let order: Vec<usize> = if round % 2 == 0 {
                (0..cfg.servers.len()).collect()
            } else {
                (0..cfg.servers.len()).rev().collect()
            };
            for &pipeline in &cfg.pipelines {
                for &size in &cfg.sizes {
                    for keys in &cfg.keys {
                        let one = Config {
                            runs: 1,
                            pipelines: vec![pipeline],
                            sizes: vec![size],
                            keys: vec![keys.clone()],
                            ..cfg.clone()
                        };
                        for &i in &order {
                            if out[i] {
                                continue;
                            }
                            let name = cfg.servers[i].as_str();
                            let sub = base.join(name);
                            let before = prog.done;
                            let r =
                                measure_requests(&one, &tools, bench, name, &sub, &fs, &mut |w| {
                                    prog.tick(&format!(
                                        "{name}: {w} (round {}/{})",
                                        round + 1,
                                        cfg.runs
                                    ))
                                });
                            let _ = std::fs::remove_dir_all(&sub);
                            done_by[i] += prog.done - before;
                            match r {
                                Ok(rows) => runs[i].extend(rows),
                                Err((rows, e, started)) => {
                                    runs[i].extend(rows);
                                    // A server that ran earlier cases and then did not start
                                    // failed: only one never measured is unavailable.
                                    let status = if started || done_by[i] > 0 {
                                        "failed"
                                    } else {
                                        "unavailable"
                                    };
                                    rep.unavailable.push(unavailable(name, e, status));
                                    out[i] = true;
                                    // Its unfinished cases and its restart stage.
                                    prog.skip(per_server - done_by[i], name);
                                }
                            }
                        }
                    }
                }
            }
        }
        rep.steal_percent = match (cpu_before, crate::stats::CpuTimes::now()) {
            (Some(a), Some(b)) => b.steal_percent_since(&a),
            _ => None,
        };
        for r in runs {
            rep.rows.extend(merge_runs(r));
        }
    }
    // 2. and 3. Memory and restart.
    if cfg.restart_keys > 0 {
        for (i, name) in cfg.servers.iter().enumerate() {
            if out[i] {
                continue;
            }
            let name = name.as_str();
            prog.show(&format!(
                "{name}: loading {} keys (memory{})",
                cfg.restart_keys,
                if RESTART_SERVERS.contains(&name) {
                    ", restart"
                } else {
                    ""
                }
            ));
            let sub = base.join(format!("{name}-restart"));
            let r = memory_and_restart(cfg, &tools, name, &sub, &fs);
            let _ = std::fs::remove_dir_all(&sub);
            match r {
                Ok((m, rs)) => {
                    rep.memory.push(m);
                    rep.restarts.extend(rs);
                }
                Err((m, e, started)) => {
                    rep.memory.extend(m.map(|m| *m));
                    let status = if started { "failed" } else { "unavailable" };
                    rep.unavailable.push(unavailable(name, e, status));
                }
            }
            prog.tick(&format!("{name}: done"));
        }
    }
    ratios(&mut rep);
    Ok(rep)
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn validate(cfg: &Config) -> Result<()> {
    if cfg.runs == 0 {
        return Err(anyhow!("--runs must be at least 1"));
    }
    if !(cfg.max_secs > 0.0 && cfg.max_secs.is_finite()) {
        return Err(anyhow!("--max-secs must be a positive number of seconds"));
    }
    if cfg.clients == 0 || cfg.clients > 10_000 {
        return Err(anyhow!("--clients must be between 1 and 10000"));
    }
    if cfg.ns.is_empty() || cfg.ns.contains(&0) {
        return Err(anyhow!("--n: each N must be at least 1"));
    }
    if cfg.pipelines.is_empty() || cfg.pipelines.iter().any(|&p| p == 0 || p > 10_000) {
        return Err(anyhow!("--pipeline: each must be between 1 and 10000"));
    }
    if cfg.sizes.is_empty() || cfg.sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
        return Err(anyhow!(
            "--sizes: each must be between 1 and {MAX_SIZE} bytes"
        ));
    }
    if cfg.tests.is_empty() {
        return Err(anyhow!("--tests: at least one test"));
    }
    if cfg.keys.is_empty() {
        return Err(anyhow!("--keys: at least one of mixed, new, update"));
    }
    if let Some(k) = cfg.keys.iter().find(|k| !KEY_MODES.contains(&k.as_str())) {
        return Err(anyhow!(
            "unknown keys {k:?}; known: {}",
            KEY_MODES.join(", ")
        ));
    }
    if let Some(t) = cfg.tests.iter().find(|t| !TESTS.contains(&t.as_str())) {
        return Err(anyhow!("unknown test {t:?}; known: {}", TESTS.join(", ")));
    }
    if cfg.servers.is_empty() {
        return Err(anyhow!("--servers: at least one server"));
    }
    if let Some(s) = cfg.servers.iter().find(|s| !SERVERS.contains(&s.as_str())) {
        return Err(anyhow!(
            "unknown server {s:?}; known: {}",
            SERVERS.join(", ")
        ));
    }
    Ok(())
}

/// One row per case from the rows of single runs (one per round): requests/s as the median
/// with min..max over the runs, latencies as medians, DBSIZE of the last run.
fn merge_runs(rows: Vec<Row>) -> Vec<Row> {
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

/// Error of a server's measurement: the rows measured before it, why, and whether the server
/// had started (failed) or never did (unavailable).
type Partial<T> = (T, String, bool);

/// The requests cases of one server: one server process for all of them.
fn measure_requests(
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

/// A server's memory row and its restart row (none for servers not restarted).
type MemoryAndRestart = (MemoryRow, Vec<RestartRow>);

/// Load K keys into a fresh server (memory per key), then restart it (restart servers only).
fn memory_and_restart(
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
const KILL_LOAD_CLIENTS: usize = 8;
const KILL_LOAD_PIPELINE: usize = 100;

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

/// Fill in the ratios against redis-none, redis-aof-always and daisy.
fn ratios(rep: &mut Report) {
    type CaseKey = (String, usize, usize, String, u64);
    let key = |r: &Row| -> CaseKey {
        (
            r.test.clone(),
            r.pipeline,
            r.value_size,
            r.keys.clone(),
            r.requests,
        )
    };
    let rps_of = |rows: &[Row], server: &str, k: &CaseKey| {
        rows.iter()
            .find(|r| r.server == server && &key(r) == k)
            .map(|r| r.rps)
    };
    let snapshot = rep.rows.clone();
    for r in rep.rows.iter_mut() {
        let k = key(r);
        r.vs_redis_none = rps_of(&snapshot, "redis-none", &k).map(|x| r.rps / x);
        r.vs_redis_aof_always = rps_of(&snapshot, "redis-aof-always", &k).map(|x| r.rps / x);
    }
    let daisy = rep
        .restarts
        .iter()
        .find(|r| r.server == "daisy" && r.after == "shutdown")
        .map(|r| r.restart_ms);
    for r in rep.restarts.iter_mut() {
        r.vs_daisy = daisy.map(|d| r.restart_ms / d);
    }
}

// ---------------------------------------------------------------------------------------------
// Output

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

fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{ms:.0}")
    } else if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
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
        let w = if rep.runs > 1 { 24 } else { 11 };
        s += &format!(
            "{:<6} {:>4} {:>7} {:<6} {:>9} {:<19} {:>w$} {:>11} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}\n",
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
            "DBSIZE"
        );
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
                s += "\n";
            }
            last = Some(group);
            let rps = if rep.runs > 1 {
                format!("{:.0} ({:.0}..{:.0})", r.rps, r.rps_min, r.rps_max)
            } else {
                format!("{:.0}", r.rps)
            };
            s += &format!(
                "{:<6} {:>4} {:>7} {:<6} {:>9} {:<19} {:>w$} {:>11} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}\n",
                r.test.to_uppercase(),
                r.pipeline,
                r.value_size,
                r.keys,
                r.requests,
                r.server,
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
                r.keys_after,
            );
        }
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
        let w = if rep.runs > 1 { 24 } else { 11 };
        s += &format!(
            "\n{} keys key:<i> = 8-byte values, loaded pipelined into a fresh server:\n",
            rep.restart_keys
        );
        s += &format!(
            "{:<19} {:>10} {:>12} {:>11} {:>w$} {:>9} {:>11} {:>10}\n",
            "server", "load ms", "keys/s", "used B/key", "restart ms", "x daisy", "DBSIZE", "files"
        );
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
                .find(|m| m.server == name && after == "shutdown");
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
            s += &format!(
                "{:<19} {:>10} {:>12} {:>11} {:>w$} {:>9} {:>11} {:>10}\n",
                name,
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
            );
        }
        s += "\nused B/key = (INFO used_memory after loading - when empty) / keys (daisy: pool \
              bytes in use; Redis: its allocator's bytes); restart ms = spawn until the first \
              +PONG on the same files (redis-rdb: after SAVE + SHUTDOWN; AOF: SHUTDOWN NOSAVE; \
              daisy: SHUTDOWN), median of the runs; x daisy = restart ms / daisy's; files = \
              bytes of the pool, RDB or AOF files restarted from\n";
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_of_redis_benchmark_7() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"52356.02\",\"0.667\",\"0.120\",\"0.511\",\"1.527\",\"5.247\",\"7.607\"\n\
                   \"MSET (10 keys)\",\"56179.77\",\"12.767\",\"0.776\",\"9.311\",\"33.663\",\
                   \"34.303\",\"34.559\"\n";
        let r = parse_csv(out).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].test, "set");
        assert_eq!(r[0].rps, 52356.02);
        assert_eq!(r[0].p50_ms, 0.511);
        assert_eq!(r[0].p99_ms, 5.247);
        assert_eq!(r[0].max_ms, 7.607);
        assert_eq!(r[1].test, "mset");
        assert!(parse_csv("Could not connect to Redis at 127.0.0.1:1\n").is_err());
    }

    #[test]
    fn resp_encoding_and_rounding() {
        let mut b = vec![];
        encode(&mut b, &[b"SET", b"key:1", b"00000001"]);
        assert_eq!(b, b"*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$8\r\n00000001\r\n");
        assert_eq!(load_value(7).len(), 8);
        assert_eq!(round2(123_456), 120_000);
        assert_eq!(round2(99), 99);
    }
}
