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
//!
//! The modules: `server` (the server processes, their directories and ports), `client` (a
//! RESP client and the pipelined loads), `requests` (redis-benchmark: one server's cases, its
//! CSV, the rounds merged), `restart` (memory per key and restart times, after a shutdown and
//! after SIGKILL) and `table` (the text tables); this one holds the settings, the rows and the
//! run that orders the rounds.

mod client;
mod requests;
mod restart;
mod server;
mod table;

pub use client::{encode, load_keys, load_value, preload_keys, Conn, Reply};
pub use requests::{parse_csv, CsvRow};
pub use server::{
    describe_server, find_in_path, free_port, port_open, redis_mode_args, Proc, Workdir, DIR_PREFIX,
};
pub use table::{steal_note, table, types_table};

use anyhow::{anyhow, Result};
use requests::{measure_requests, merge_runs};
use restart::memory_and_restart;
pub use restart::{LARGE_HASHES, LARGE_HASH_FIELDS, SMALL_HASHES, SMALL_HASH_FIELDS};
use server::{pinning, remove_stale, sync_disks, version, Tools, INSTALL_HINT};
use std::path::PathBuf;

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
/// Tests `--tests` accepts: redis-benchmark's (`hset` and `sadd` write one big hash and set,
/// `spop` pops from the set `sadd` filled; `lpush`/`rpush` push onto one list, `lpop`/`rpop`
/// pop from it; each `lrange_N` first pushes N items onto a list of its own and then reads its
/// first N; `zadd` adds random members to one sorted set, `zpopmin` pops from it), `pfadd`
/// (redis-benchmark running the command `PFADD hll:bench __rand_int__`: random elements
/// into one HyperLogLog, which goes sparse -> dense early), `xadd` (redis-benchmark running
/// `XADD stream:bench * field __rand_int__`: entries appended to one stream), `xreadgroup`
/// (the bench's own consumer-group loader: messages read with XREADGROUP and acknowledged with
/// XACK per second; see `client::xreadgroup_load`), `multi`, the bench's own MULTI/EXEC
/// loader (transactions per second; see `client::multi_exec_load`), and `pubsub`, the bench's
/// own publisher and `-c` subscribers of one channel (messages published per second, each
/// delivered to every subscriber; see `client::pubsub_load`).
pub const TESTS: &[&str] = &[
    "set",
    "get",
    "incr",
    "mset",
    "hset",
    "sadd",
    "spop",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "lrange_100",
    "lrange_300",
    "lrange_600",
    "zadd",
    "zpopmin",
    "pfadd",
    "xadd",
    "xreadgroup",
    "multi",
    "pubsub",
];
/// The tests that only read (the report compares them with redis-none at every pipeline).
pub const READ_TESTS: &[&str] = &["get", "lrange_100", "lrange_300", "lrange_600"];
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
    /// Measure memory per hash field (small and large hashes, daisy and redis-none) and
    /// daisy's restart with `restart_keys` keys of mixed types.
    pub types_memory: bool,
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
        note(&format!(
            "  {s}: {}",
            describe_server(s, cfg.daisy_busy_poll_us)
        ));
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
        sync_disks();
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
    // 4. Data types: memory per hash field (small and large hashes) on each server, and
    // daisy's restart with keys of mixed types.
    if cfg.types_memory {
        for (i, name) in cfg.servers.iter().enumerate() {
            if out[i] || !matches!(name.as_str(), "daisy" | "redis-none") {
                continue;
            }
            prog.show(&format!("{name}: memory per hash field"));
            let sub = base.join(format!("{name}-hashes"));
            let r = restart::hash_memory(&tools, name, &sub, cfg, &fs);
            let _ = std::fs::remove_dir_all(&sub);
            match r {
                Ok(rows) => rep.memory.extend(rows),
                Err(e) => rep.unavailable.push(unavailable(
                    name,
                    format!("memory per hash field: {e:#}"),
                    "failed",
                )),
            }
        }
        if cfg.restart_keys > 0 && cfg.servers.iter().any(|s| s == "daisy") {
            prog.show(&format!(
                "daisy: restart with {} keys of mixed types",
                cfg.restart_keys
            ));
            let sub = base.join("daisy-mixed");
            let r = restart::mixed_restart(cfg, &tools, &sub, &fs);
            let _ = std::fs::remove_dir_all(&sub);
            match r {
                Ok(row) => rep.restarts.push(row),
                Err(e) => rep.unavailable.push(unavailable(
                    "daisy",
                    format!("restart with keys of mixed types: {e:#}"),
                    "failed",
                )),
            }
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

/// Error of a server's measurement: the rows measured before it, why, and whether the server
/// had started (failed) or never did (unavailable).
type Partial<T> = (T, String, bool);

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

#[cfg(test)]
mod tests {
    use super::requests::round2;
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
    fn csv_lrange_rows_name_their_test_and_drop_the_setup_push() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"LPUSH\",\"1000\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n\
                   \"LPUSH (needed to benchmark LRANGE)\",\"9\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n\
                   \"LRANGE_100 (first 100 elements)\",\"500\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n";
        let r = parse_csv(out).unwrap();
        let names: Vec<&str> = r.iter().map(|r| r.test.as_str()).collect();
        assert_eq!(names, ["lpush", "lrange_100"]);
        assert_eq!(r[0].rps, 1000.0);
        assert!(names.iter().all(|t| TESTS.contains(t)));
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
