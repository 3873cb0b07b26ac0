//! `daisy bench kv`: seed 000's Redis table, the real redis-benchmark against `daisy serve`
//! and redis-server in each persistence mode.

use super::hashmap::parse_count;
use crate::output::{Stages, TableFormat};
use crate::size::parse_size;
use anyhow::{Context, Result};
use clap::Args;
use daisy_bench::kvbench;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str = "Seed 000's Redis table: the real redis-benchmark (Debian redis-tools) \
against `daisy serve` and against a real redis-server (Debian redis-server) in each persistence \
mode, side by side in one run. Every server is started here, one at a time, on a free \
127.0.0.1 port, in its own directory under --dir (removed afterwards), and stopped when its \
measurements are done.\n\n\
Servers (--servers):\n\
  daisy               this binary's `daisy serve --pool <dir>/kv.pool`: every write durable \
before its reply (reported unavailable, with the reason, when it does not answer PING)\n\
  redis-none          --save \"\" --appendonly no: nothing persisted\n\
  redis-rdb           Redis's default save points --save \"3600 1 300 100 60 10000\"\n\
  redis-aof-everysec  --appendonly yes --appendfsync everysec --save \"\"\n\
  redis-aof-always    --appendonly yes --appendfsync always --save \"\" (every write durable)\n\
(AOF modes also get --aof-use-rdb-preamble no: a pure command log.)\n\n\
Requests: for each pipeline, value size, keys and N (ascending): FLUSHALL, then \
`redis-benchmark -c C -n N -r KEYSPACE -P pipeline -d size -t TESTS --csv`; requests/s and \
p50/p99/max latency are redis-benchmark's, elapsed = N / requests/s, with the ratios to \
redis-none and redis-aof-always. A case projected (from the previous N) past --max-secs is run \
on fewer requests and marked ~ (sampled).\n\n\
Keys (--keys): mixed: -r 100000 on an empty keyspace (seed 000's table); new: -r 2147483647, so \
nearly every SET creates a key (seed 001's new keys); update: key:000000000000.. preloaded \
with values of the case's size (100,000 keys, fewer for large values: at most 64 MiB) and -r \
that many, so every SET replaces a value and every GET finds one (seed 001's updates).\n\n\
Memory and restart (--restart-keys K, 0 skips): K keys key:<i> with 8-byte values loaded by a \
pipelined writer into a fresh server; bytes per key from INFO used_memory (loaded - empty); \
for daisy, redis-rdb (SAVE, SHUTDOWN) and redis-aof-always (SHUTDOWN NOSAVE): the time from \
spawning the server again on the same files to its first +PONG, and DBSIZE = K checked; \
for daisy also after SIGKILL: killed while 8 clients pipeline SETs (100 deep) of the loaded keys, then \
spawned again (the row `daisy, SIGKILL`, with the server's own INFO daisy_recovery_ms).\n\n\
The default run (N up to 1,000,000, sampled past --max-secs) takes about 2-3 minutes on a \
2-core machine; redis-benchmark and the server share the CPU.";

#[derive(Args)]
pub struct KvArgs {
    /// Requests per case, comma-separated [default: 1000,10000,100000,1000000].
    #[arg(long = "n", value_delimiter = ',', value_parser = parse_count, conflicts_with = "full")]
    ns: Vec<usize>,
    /// The default N plus 10,000,000 (seed 000's largest; sampled past --max-secs).
    #[arg(long)]
    full: bool,
    /// Tests, comma-separated: redis-benchmark's set, get, incr, mset, hset and sadd (one big
    /// hash and set), spop (pops what sadd added), the lists', sorted sets' and pfadd's, xadd
    /// (redis-benchmark running XADD stream:bench * field __rand_int__), xreadgroup (the
    /// bench's own consumer-group loader: XREADGROUP ... COUNT 1 then XACK; messages per
    /// second), multi, the bench's own MULTI/EXEC loader (MULTI, SET, INCR, HSET, EXEC;
    /// transactions per second), and pubsub, the bench's own publisher and --clients
    /// subscribers of one channel (messages published per second, each delivered to every
    /// subscriber before the time stops).
    #[arg(long, value_delimiter = ',', default_value = "set,get", value_parser = clap::builder::PossibleValuesParser::new(kvbench::TESTS))]
    tests: Vec<String>,
    /// Which keys the requests touch, comma-separated: mixed (-r 100000 on an empty keyspace,
    /// seed 000's table), new (nearly every SET creates a key), update (keys preloaded: every
    /// SET replaces a value, every GET finds one) (seed 001's new keys and updates).
    #[arg(long, value_delimiter = ',', default_value = "mixed", value_parser = clap::builder::PossibleValuesParser::new(kvbench::KEY_MODES))]
    keys: Vec<String>,
    /// Pipeline depths (-P), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pipeline: Vec<usize>,
    /// Value sizes in bytes (-d), comma-separated (e.g. 8,1024,10240,102400 for seed 001's
    /// 1 KB/10 KB/100 KB values).
    #[arg(long, value_delimiter = ',', default_value = "8", value_parser = parse_size_usize)]
    sizes: Vec<usize>,
    /// Parallel connections of redis-benchmark (-c).
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Runs per case (median of requests/s, with min..max); also restarts per server.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Parent directory of the servers' files (tmpfs emulates NVM; a disk path measures the
    /// disk's fsync).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Keys loaded for memory per key and restart time (e.g. 1000000 or 1_000_000); 0 skips both.
    #[arg(long, default_value = "1000000", value_parser = parse_count_or_zero)]
    restart_keys: u64,
    /// Also measure memory per hash field (20,000 hashes of 10 fields, and 2 of 100,000;
    /// daisy and redis-none) and daisy's restart with --restart-keys keys of mixed types
    /// (strings, small hashes and sets, ten large hashes and sets).
    #[arg(long)]
    types_memory: bool,
    /// Servers to measure, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(kvbench::SERVERS))]
    servers: Vec<String>,
    /// Longest a redis-benchmark invocation may take, in seconds; larger N are run on fewer
    /// requests and marked sampled.
    #[arg(long, default_value_t = kvbench::DEFAULT_MAX_SECS)]
    max_secs: f64,
    /// Do not pin the servers to one CPU and redis-benchmark to the others (by default they
    /// are, when there are two CPUs or more, so they never compete for a core).
    #[arg(long)]
    no_pin: bool,
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
}

fn parse_size_usize(s: &str) -> Result<usize, String> {
    let v = parse_size(s)?;
    usize::try_from(v).map_err(|_| format!("{s}: too large"))
}

fn parse_count_or_zero(s: &str) -> Result<u64, String> {
    s.replace('_', "")
        .parse()
        .map_err(|_| format!("invalid count {s:?}: expected a whole number such as 1000000"))
}

pub fn run(a: KvArgs) -> Result<ExitCode> {
    let mut ns = if a.ns.is_empty() {
        kvbench::DEFAULT_NS.to_vec()
    } else {
        a.ns
    };
    if a.full {
        ns.push(kvbench::FULL_N);
    }
    let servers = if a.servers.is_empty() {
        kvbench::SERVERS.iter().map(|s| s.to_string()).collect()
    } else {
        a.servers
    };
    let cfg = kvbench::Config {
        dir: a.dir,
        ns,
        tests: a.tests,
        keys: a.keys,
        pipelines: a.pipeline,
        sizes: a.sizes,
        clients: a.clients,
        runs: a.runs,
        restart_keys: a.restart_keys,
        types_memory: a.types_memory,
        servers,
        max_secs: a.max_secs,
        daisy_exe: std::env::current_exe().context("current_exe")?,
        daisy_busy_poll_us: daisy_kv::BUSY_POLL_US,
        pin: !a.no_pin,
    };
    let json = a.format == TableFormat::Json;
    let out = Stages::new(json);
    let rep = kvbench::run(
        &cfg,
        |n| out.note(n),
        |done, total, what| out.stage(done, total, what),
    );
    out.bar.finish_and_clear();
    let rep = rep?;
    if json {
        for l in rep.json_lines() {
            println!("{l}");
        }
    } else {
        println!();
        print!("{}", kvbench::table(&rep));
    }
    Ok(if rep.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
