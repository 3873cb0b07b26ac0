//! The `daisy` command.

use clap::{Args, Parser, Subcommand, ValueEnum};
use daisy::{ModeChoice, Pool, PoolOptions};
use daisy_bench::{crashtest, hashbench, kvbench, txbench};
use std::path::PathBuf;
use std::process::ExitCode;

mod size;
use size::{fmt_size, parse_size};

#[derive(Parser)]
#[command(
    name = "daisy",
    version,
    about = "Crash-consistent persistent memory: pools, transactions, crash tests and benchmarks",
    long_about = "Daisy keeps program data in a pool: a file mapped into memory (on /dev/shm it \
                  emulates NVM). Transactions survive process crashes and power failures.\n\n\
                  Environment: DAISY_MODE=auto|pmem|msync overrides the persistence mode; \
                  DAISY_FLUSH=clwb|clflushopt|clflush overrides the flush instruction."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create, inspect and check pool files.
    #[command(subcommand)]
    Pool(PoolCmd),
    /// Kill torture: kill a process running transactions at random moments and verify that
    /// nothing committed is lost and nothing uncommitted is half-applied.
    Crashtest(CrashtestArgs),
    /// Benchmarks: Daisy against its rivals, measured side by side in one run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// A Redis-protocol server whose keyspace lives in a pool: every write is durable before
    /// it is acknowledged, and a restart serves at once (no snapshot or log to load).
    /// Stops on SIGTERM, SIGINT or SHUTDOWN.
    Serve(ServeArgs),
    /// The test report: the persistence functional test and the performance tests, written to
    /// report.md, results.json and CSV files, with verdicts against seed 000's requirement.
    /// Exits non-zero when the functional test failed.
    Report(ReportArgs),
    /// (internal) the child process of `daisy crashtest`.
    #[command(hide = true)]
    CrashtestChild {
        pool: PathBuf,
        #[arg(long)]
        seed: u64,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Auto,
    Pmem,
    Msync,
}

impl From<ModeArg> for ModeChoice {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Auto => ModeChoice::Auto,
            ModeArg::Pmem => ModeChoice::Pmem,
            ModeArg::Msync => ModeChoice::Msync,
        }
    }
}

#[derive(Subcommand)]
enum PoolCmd {
    /// Create a new pool file.
    Create {
        path: PathBuf,
        /// Initial size (e.g. 64MiB, 1GiB).
        #[arg(long, default_value = "1GiB", value_parser = parse_size)]
        size: u64,
        /// The pool grows on demand up to this size [default: max(size, 64GiB)].
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
        /// Layout name that programs must ask for when they open the pool.
        #[arg(long, default_value = "")]
        layout: String,
        /// Persistence mode [auto: pmem on tmpfs/DAX, msync elsewhere].
        #[arg(long, value_enum, default_value = "auto")]
        mode: ModeArg,
        /// Log lanes (concurrent transactions).
        #[arg(long, default_value_t = daisy::internals::DEFAULT_LANES)]
        lanes: u32,
        /// Redo-log slot size: the largest transaction's log.
        #[arg(long, default_value = "16KiB", value_parser = parse_size)]
        log_slot_size: u64,
        /// Redo-log slots per lane (4-64). A lane writes back the lines its transactions
        /// changed slots-2 commits later, so a line changed again meanwhile is written back
        /// once [default: 32 when lanes x 32 slots fit in a quarter of --size, else 8].
        #[arg(long)]
        log_slots: Option<u32>,
    },
    /// Print size, usage, persistence mode, layout and identity of a pool.
    Info {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Verify headers, logs, allocator metadata and (for known layouts) reachability.
    /// Exits non-zero on any inconsistency.
    Check {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// The keyspace's pool: opened when it exists, created otherwise.
    #[arg(long, default_value = "/dev/shm/daisy-kv.pool")]
    pool: PathBuf,
    /// Address to listen on (loopback by default: expose it deliberately).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// TCP port (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Require AUTH with this password before any other command.
    #[arg(long, env = "DAISY_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// Most clients connected at once (more are refused with Redis's error).
    #[arg(long, default_value_t = 10_000)]
    max_clients: usize,
    /// TCP keepalive of client connections, in seconds (0: off), as Redis's tcp-keepalive:
    /// connections of clients that vanished while idle are found dead and closed.
    #[arg(long, default_value_t = 300)]
    tcp_keepalive: u32,
    /// Under load, poll for new requests this many microseconds before sleeping (0: always
    /// sleep). Saves clients on this machine the cost of waking the server; an idle server
    /// spends nothing, and with one CPU it never polls.
    #[arg(long, default_value_t = daisy_kv::BUSY_POLL_US, value_name = "US")]
    busy_poll_us: u32,
    /// Initial size of a new pool.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    size: u64,
    /// A new pool grows on demand up to this size; when it is full, writes answer -OOM.
    #[arg(long, default_value = "16GiB", value_parser = parse_size)]
    max_size: u64,
    /// Persistence mode [auto: pmem on tmpfs/DAX, msync elsewhere].
    #[arg(long, value_enum, default_value = "auto")]
    mode: ModeArg,
    /// Print only errors.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct CrashtestArgs {
    /// Simulate power failures instead of killing processes: crash images at every fence,
    /// each recovered and verified (runs the daisy-powerfail binary, which has the simulator
    /// compiled in).
    #[arg(long)]
    power_fail: bool,
    /// Kill `daisy serve` instead: SIGKILL at random moments while three clients pipeline
    /// writes; after each restart every acknowledged write must be there and nothing in flight
    /// half-applied (`--kills` rounds).
    #[arg(long, conflicts_with = "power_fail")]
    server: bool,
    /// (--power-fail) crash images to check, split evenly between the workloads [default:
    /// the simulator's, 60000: every canary is caught within it; about 20 s].
    #[arg(long, requires = "power_fail")]
    budget: Option<u64>,
    /// (--power-fail) workloads to run: single, threads (three taking turns), concurrent
    /// (four committing at once), hashmap, kv (the server's commands), msync (single in msync
    /// mode), or all.
    #[arg(long, default_value = "all", value_parser = ["all", "single", "threads", "concurrent", "hashmap", "kv", "msync"], requires = "power_fail")]
    workload: String,
    /// Number of kills.
    #[arg(long, default_value_t = 200)]
    kills: u64,
    /// Seed of the workload and of the kill times [default: random]; printed for replay.
    #[arg(long)]
    seed: Option<u64>,
    /// Directory of the pool.
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Longest time a child runs before it is killed, in milliseconds.
    #[arg(long, default_value_t = 30)]
    max_delay_ms: u64,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Args)]
struct ReportArgs {
    /// Directory for the report files.
    #[arg(long, default_value = "daisy-report")]
    out: PathBuf,
    /// Directory for the pools (default: tmpfs, DRAM emulating NVM as in seed 000).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Short run (under 2 minutes; what CI runs).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Longest run, with the largest cases.
    #[arg(long)]
    full: bool,
    /// Seed of the functional test [default: random]; printed for replay.
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Recovery time: fill a pool with N small objects, then time opening it after a clean
    /// close and after a crash. Opening never scans the heap, so this must not grow with N.
    Open {
        #[arg(long, default_value = daisy::DEFAULT_DIR)]
        dir: PathBuf,
        /// Objects to put in the pool.
        #[arg(long, default_value_t = 10_000_000)]
        objects: u64,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Small transactions: Daisy, PMDK's libpmemobj and the bare store+flush+fence floor.
    Tx {
        /// Directory for the pools (tmpfs emulates NVM; a disk path gives msync mode).
        #[arg(long, default_value = daisy::DEFAULT_DIR)]
        dir: PathBuf,
        /// Transactions per timed run.
        #[arg(long, default_value_t = 200_000)]
        ops: u64,
        /// Timed runs (the median is reported, with the spread).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Cases to run [default: all].
        #[arg(long = "case", value_parser = clap::builder::PossibleValuesParser::new(txbench::CASES))]
        cases: Vec<String>,
        /// Instead of the cases: one-update transactions on 1..=N threads, each on its own
        /// cache line, aggregate throughput and scaling (commits take no global lock).
        #[arg(long)]
        threads: Option<usize>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Seed 000's table: random insertion of N (u32, u32) pairs, persisted by each mechanism
    /// (store+flush+fence, PMDK transactions, msync, fsync) and in a DRAM HashMap, side by side.
    #[command(long_about = HASHMAP_ABOUT)]
    Hashmap(HashmapArgs),
    /// Seed 000's Redis table: the real redis-benchmark against `daisy serve` and against
    /// redis-server in each persistence mode (none, rdb, aof everysec, aof always), side by
    /// side in one run; plus memory per key and restart time.
    #[command(long_about = KV_ABOUT)]
    Kv(KvArgs),
}

const KV_ABOUT: &str = "Seed 000's Redis table: the real redis-benchmark (Debian redis-tools) \
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

const HASHMAP_ABOUT: &str = "Seed 000's table: random insertion of N key-value pairs (two u32s), \
measured for every mechanism side by side in one run, on the same file system and with the same \
random distinct keys (a seeded generator).\n\n\
Mechanisms (--mechanisms):\n\
  daisy        Daisy's persistent hash map (PHashMap<u32, u32>) in a pool: every insert its own \
transaction, durable when it returns\n\
  daisy-batch  the same map, the whole run as one batch: one durability point at the end (a \
crash keeps a prefix of the inserts)\n\
  store-flush  simple table in a mapped file: 8-byte store + flush of its line + fence per \
operation, no transaction (the physical floor of per-operation durability)\n\
  pmdk-tx      the same table in a PMDK libpmemobj pool, one transaction per operation (skipped \
when libpmemobj is not installed)\n\
  msync-op     the table in a mapped file, msync of the touched page after each operation\n\
  msync-end    the table in a mapped file, one msync of the whole table at the end (seed 000's \
baseline)\n\
  fsync-op     table in DRAM plus a file: pwrite of the slot + fdatasync per operation\n\
  fsync-end    pwrite per operation, one fsync at the end\n\
  dram         std::collections::HashMap, nothing persisted (the floor for batched work)\n\n\
The simple table: open addressing over 8-byte slots, 2N rounded up to a power of two slots, \
linear probing, a multiplicative hash. Each row is the median of --runs timed runs on fresh \
tables (total time only), with the spread; one more run times each operation for p99 and max. \
A mechanism whose projected run exceeds --max-secs is timed on a prefix of the operations and \
marked ~ (extrapolated). On tmpfs (the default /dev/shm, DRAM emulating NVM as in seed 000) \
msync and fsync persist nothing beyond the page cache; use --dir for a disk.";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum TableFormat {
    /// A human-readable table.
    #[value(alias = "text")]
    Table,
    /// One JSON object per row.
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum OpArg {
    /// Insert the N keys into an empty table.
    Insert,
    /// Look the N keys up (table built first, untimed); values are checked.
    Get,
    /// Remove the N keys (table built first, untimed).
    Remove,
}

#[derive(Args)]
struct HashmapArgs {
    /// Sizes N to measure, comma-separated [default: 1000,10000,100000,1000000].
    #[arg(long = "n", value_delimiter = ',', value_parser = parse_count, conflicts_with = "full")]
    ns: Vec<usize>,
    /// The default sizes plus 10,000,000 (seed 000's largest; each table then takes 256 MiB
    /// in --dir, about 2 minutes in all).
    #[arg(long)]
    full: bool,
    /// Mechanisms to measure, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(hashbench::mechanism_names()))]
    mechanisms: Vec<String>,
    /// Operation to time.
    #[arg(long, value_enum, default_value = "insert")]
    op: OpArg,
    /// Timed runs per mechanism and N (the median is reported, with min..max).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Directory for the tables' files (tmpfs emulates NVM; a disk path measures the disk).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Seed of the keys and of the get/remove order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Longest a timed run may take, in seconds; slower mechanisms are timed on a prefix of
    /// the operations and their rows marked extrapolated.
    #[arg(long, default_value_t = 20.0)]
    max_secs: f64,
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
}

#[derive(Args)]
struct KvArgs {
    /// Requests per case, comma-separated [default: 1000,10000,100000,1000000].
    #[arg(long = "n", value_delimiter = ',', value_parser = parse_count, conflicts_with = "full")]
    ns: Vec<usize>,
    /// The default N plus 10,000,000 (seed 000's largest; sampled past --max-secs).
    #[arg(long)]
    full: bool,
    /// redis-benchmark tests, comma-separated.
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

fn kv_cmd(a: KvArgs) -> Result<ExitCode, String> {
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
        servers,
        max_secs: a.max_secs,
        daisy_exe: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
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

/// One size N: digits, with underscores allowed (1_000_000); commas separate sizes.
fn parse_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .replace('_', "")
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected a whole number such as 100000"))?;
    if n == 0 || n > hashbench::MAX_N {
        return Err(format!("N must be between 1 and {}", hashbench::MAX_N));
    }
    Ok(n)
}

fn hashmap_cmd(a: HashmapArgs) -> Result<ExitCode, String> {
    if a.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if !(a.max_secs > 0.0 && a.max_secs.is_finite()) {
        return Err("--max-secs must be a positive number of seconds".into());
    }
    let mut ns = if a.ns.is_empty() {
        hashbench::DEFAULT_NS.to_vec()
    } else {
        a.ns
    };
    if a.full {
        ns.push(hashbench::FULL_N);
    }
    let mechanisms = if a.mechanisms.is_empty() {
        hashbench::mechanism_names()
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        a.mechanisms
    };
    let cfg = hashbench::Config {
        dir: a.dir,
        ns,
        mechanisms,
        op: match a.op {
            OpArg::Insert => hashbench::Op::Insert,
            OpArg::Get => hashbench::Op::Get,
            OpArg::Remove => hashbench::Op::Remove,
        },
        runs: a.runs,
        seed: a.seed,
        max_secs: a.max_secs,
    };
    let json = a.format == TableFormat::Json;
    let out = Stages::new(json);
    let rows = hashbench::run(
        &cfg,
        |n| out.note(n),
        |done, total, what| out.stage(done, total, what),
        |r| {
            if json {
                println!("{}", serde_json::to_string(r).unwrap());
            }
        },
    );
    out.bar.finish_and_clear();
    let rows = rows?;
    if !json {
        println!();
        print!("{}", hashbench::table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// Progress of a staged benchmark on the terminal: a bar of stages, with the benchmark's
/// notes printed above it (to stderr, and no bar, when stdout carries JSON).
struct Stages {
    bar: daisy_bench::progress::ProgressBar,
    json: bool,
}

impl Stages {
    fn new(json: bool) -> Stages {
        let bar = if json {
            daisy_bench::progress::hidden()
        } else {
            daisy_bench::progress::stages(0)
        };
        Stages { bar, json }
    }

    fn note(&self, n: &str) {
        if self.json {
            eprintln!("{n}")
        } else {
            self.bar.suspend(|| println!("{n}"))
        }
    }

    fn stage(&self, done: u64, total: u64, what: &str) {
        self.bar.set_length(total);
        self.bar.set_position(done);
        self.bar.set_message(what.to_string());
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("daisy: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.cmd {
        Cmd::Pool(p) => pool_cmd(p),
        Cmd::Crashtest(a) => crashtest_cmd(a),
        Cmd::Report(a) => report_cmd(a),
        Cmd::Serve(a) => {
            let o = daisy_kv::Options {
                pool: a.pool,
                bind: a.bind,
                port: a.port,
                requirepass: a.requirepass,
                max_clients: a.max_clients,
                tcp_keepalive: a.tcp_keepalive,
                busy_poll_us: a.busy_poll_us,
                size: a.size,
                max_size: a.max_size,
                mode: a.mode.into(),
                quiet: a.quiet,
                ..Default::default()
            };
            daisy_kv::serve(&o, |_| {})?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::CrashtestChild { pool, seed } => {
            crashtest::child(&pool, seed).map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Hashmap(a)) => hashmap_cmd(a),
        Cmd::Bench(BenchCmd::Kv(a)) => kv_cmd(a),
        Cmd::Bench(BenchCmd::Open {
            dir,
            objects,
            format,
        }) => {
            if objects == 0 {
                return Err("--objects must be at least 1".into());
            }
            let bar = daisy_bench::progress::bar(objects, "objects");
            let r = daisy_bench::openbench::run(&dir, objects, |n| bar.set_position(n));
            bar.finish_and_clear();
            let r = r?;
            if format == Format::Json {
                println!("{}", serde_json::to_string(&r).unwrap());
            } else {
                println!(
                    "daisy bench open: {} objects ({} pool, filled in {:.1} s), {} on {}",
                    r.objects,
                    fmt_size(r.pool_bytes),
                    r.fill_seconds,
                    r.mode,
                    r.fs
                );
                println!(
                    "open after a clean close: {:.2} ms (median of 5, slowest {:.2} ms)",
                    r.open_ms, r.open_ms_max
                );
                println!(
                    "open after a crash: {:.2} ms ({} committed transactions re-applied)",
                    r.crash_open_ms, r.crash_replayed
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Tx {
            dir,
            ops,
            runs,
            cases,
            threads,
            format,
        }) => {
            if ops == 0 || runs == 0 {
                return Err("--ops and --runs must be at least 1".into());
            }
            if let Some(n) = threads {
                if n == 0 || n > 1024 {
                    return Err("--threads must be between 1 and 1024".into());
                }
                let rows = txbench::thread_scaling(&dir, n, ops)?;
                for r in &rows {
                    if format == Format::Json {
                        println!("{}", serde_json::to_string(r).unwrap());
                    } else {
                        println!(
                            "update-1 on {:>3} threads: {:>12.0} transactions/s in all, scaling {:.2}x ({})",
                            r.threads, r.ops_per_s, r.scaling, r.mode
                        );
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let cases = if cases.is_empty() {
                txbench::CASES.iter().map(|s| s.to_string()).collect()
            } else {
                cases
            };
            let cfg = txbench::Config {
                dir,
                ops,
                runs,
                cases,
            };
            let json = format == Format::Json;
            if !json {
                println!(
                    "daisy bench tx: {} transactions per run, {} runs, median reported",
                    ops, runs
                );
            }
            let rows = txbench::run(
                &cfg,
                |n| {
                    if json {
                        eprintln!("{n}")
                    } else {
                        println!("{n}")
                    }
                },
                |r| {
                    if json {
                        println!("{}", serde_json::to_string(r).unwrap());
                    }
                },
            )?;
            if !json {
                print!("{}", txbench::table(&rows));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn pool_cmd(p: PoolCmd) -> Result<ExitCode, String> {
    match p {
        PoolCmd::Create {
            path,
            size,
            max_size,
            layout,
            mode,
            lanes,
            log_slot_size,
            log_slots,
        } => {
            let slot = u32::try_from(log_slot_size)
                .map_err(|_| format!("--log-slot-size {log_slot_size} is too large"))?;
            let mut opts = PoolOptions::new(&layout)
                .size(size)
                .mode(mode.into())
                .lanes(lanes)
                .log_slot_size(slot);
            opts.max_size = max_size;
            opts.log_slots_per_lane = log_slots;
            let pool = Pool::create(&path, &opts).map_err(|e| e.to_string())?;
            let i = pool.info();
            println!(
                "created {}: {} (max {}), layout {:?}, {}, uuid {}",
                path.display(),
                fmt_size(i.size),
                fmt_size(i.max_size),
                i.layout,
                i.mode.describe(),
                i.uuid
            );
            pool.close().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Info { path, format } => {
            let pool = Pool::open_with(&path, None, ModeChoice::Auto).map_err(|e| e.to_string())?;
            let i = pool.info();
            let rec = pool.recovery_report().clone();
            if format == Format::Json {
                let v = serde_json::json!({
                    "path": i.path, "layout": i.layout, "format_version": i.format_version,
                    "uuid": i.uuid, "mode": i.mode.name(),
                    "flush_instruction": match i.mode { daisy::Mode::Pmem(f) => Some(f.name()), _ => None },
                    "map_sync": i.map_sync, "fs": i.fs_type, "size": i.size, "file_size": i.file_size,
                    "max_size": i.max_size, "heap_size": i.heap_size, "used": i.used, "free": i.free,
                    "objects": i.objects, "lanes": i.lanes, "log_slot_size": i.log_slot_size,
                    "log_slots_per_lane": i.log_slots_per_lane,
                    "root_offset": i.root.map(|r| r.0), "root_size": i.root.map(|r| r.1),
                    "open_micros": rec.open_micros, "recovered_transactions": rec.records_replayed,
                });
                println!("{v}");
            } else {
                println!("path:            {}", i.path.display());
                println!("layout:          {:?}", i.layout);
                println!("format version:  {}", i.format_version);
                println!("uuid:            {}", i.uuid);
                println!(
                    "persistence:     {} on {}{}",
                    i.mode.describe(),
                    i.fs_type,
                    if i.map_sync { " (DAX, MAP_SYNC)" } else { "" }
                );
                println!(
                    "size:            {} (file {}), grows up to {}",
                    fmt_size(i.size),
                    fmt_size(i.file_size),
                    fmt_size(i.max_size)
                );
                println!(
                    "used:            {} in {} objects",
                    fmt_size(i.used),
                    i.objects
                );
                println!(
                    "free:            {} of {} heap",
                    fmt_size(i.free),
                    fmt_size(i.heap_size)
                );
                println!(
                    "log:             {} lanes x {} slots of {}",
                    i.lanes,
                    i.log_slots_per_lane,
                    fmt_size(i.log_slot_size as u64)
                );
                match i.root {
                    Some((off, size)) => println!("root:            offset {off:#x}, {size} bytes"),
                    None => println!("root:            none"),
                }
                println!(
                    "opened in:       {} us (recovery re-applied {} committed transactions)",
                    rec.open_micros, rec.records_replayed
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Check { path, format } => {
            // Checked as recovery would leave it, without writing the file.
            let pool = Pool::open_snapshot(&path, None).map_err(|e| e.to_string())?;
            let layout = pool.layout();
            let mut layout_problems = Vec::new();
            let reach = match layout.as_str() {
                crashtest::LAYOUT => Some(crashtest::reachable(&pool).map_err(|e| e.to_string())?),
                daisy_kv::store::LAYOUT => {
                    let (reach, problems) = daisy_kv::store::check(&pool)?;
                    layout_problems = problems;
                    Some(reach)
                }
                _ => None,
            };
            let mut rep = pool.check(reach.as_deref());
            rep.problems.extend(layout_problems);
            // Every hash map in the pool (found by its header) checks its own invariants.
            let maps = daisy::check_all(&pool).map_err(|e| e.to_string())?;
            for m in &maps {
                rep.problems.extend(
                    m.problems
                        .iter()
                        .map(|p| format!("{} at {:#x}: {p}", m.kind, m.header)),
                );
            }
            let maps_json: Vec<_> = maps
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "header": m.header, "kind": m.kind, "entries": m.entries,
                        "segments": m.segments, "depth": m.depth, "problems": m.problems,
                    })
                })
                .collect();
            if format == Format::Json {
                let v = serde_json::json!({
                    "path": path, "ok": rep.ok(), "problems": rep.problems, "objects": rep.objects,
                    "used": rep.used, "log_records": rep.log_records,
                    "reachability_checked": rep.reachability_checked, "reachable": rep.reachable,
                    "hash_maps": maps_json,
                });
                println!("{v}");
            } else {
                println!(
                    "{}: header ok, logs ok ({} records), {} objects, {} used",
                    path.display(),
                    rep.log_records,
                    rep.objects,
                    fmt_size(rep.used)
                );
                if rep.reachability_checked {
                    println!(
                        "reachability: {} objects reachable from the root",
                        rep.reachable
                    );
                } else {
                    println!("reachability: not checked (no walker for layout {layout:?})");
                }
                for m in &maps {
                    println!(
                        "{} at {:#x}: {} entries in {} segments (depth {}): {}",
                        m.kind,
                        m.header,
                        m.entries,
                        m.segments,
                        m.depth,
                        if m.problems.is_empty() {
                            "invariants hold"
                        } else {
                            "PROBLEMS below"
                        }
                    );
                }
                for p in &rep.problems {
                    println!("PROBLEM: {p}");
                }
                println!(
                    "{}",
                    if rep.ok() {
                        "check: OK"
                    } else {
                        "check: FAILED"
                    }
                );
            }
            Ok(if rep.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        % 1_000_000_007
}

fn child_cmd() -> Result<Vec<String>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(vec![
        exe.to_string_lossy().into_owned(),
        "crashtest-child".into(),
    ])
}

fn report_cmd(a: ReportArgs) -> Result<ExitCode, String> {
    use daisy_bench::report;
    let level = if a.quick {
        report::Level::Quick
    } else if a.full {
        report::Level::Full
    } else {
        report::Level::Default
    };
    let cfg = report::Config {
        out: a.out.clone(),
        dir: a.dir,
        level,
        child_cmd: child_cmd()?,
        powerfail: std::env::current_exe()
            .ok()
            .map(|e| e.with_file_name("daisy-powerfail"))
            .filter(|p| p.exists()),
        daisy_exe: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
        seed: a.seed.unwrap_or_else(random_seed),
    };
    println!("daisy report ({level:?}): writing {}", a.out.display());
    let r = report::run(&cfg, |n| println!("{n}"))?;
    let files = report::write(&r, &a.out)?;
    println!();
    print!("{}", daisy_bench::txbench::table(&r.tx));
    println!();
    for v in &r.verdicts {
        println!("{}", v.text);
    }
    println!();
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(if r.functional_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `daisy crashtest --power-fail`: run the simulator binary that sits next to this one.
fn power_fail_cmd(a: &CrashtestArgs, seed: u64) -> Result<ExitCode, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let sim = exe.with_file_name("daisy-powerfail");
    if !sim.exists() {
        return Err(format!(
            "{} not found: the power-failure simulator is a separate binary (the `daisy` binary \
             is built without simulator hooks); build it with `cargo build --release -p daisy-powerfail`",
            sim.display()
        ));
    }
    let mut cmd = std::process::Command::new(&sim);
    if let Some(b) = a.budget {
        cmd.arg("--budget").arg(b.to_string());
    }
    let status = cmd
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--dir")
        .arg(&a.dir)
        .arg("--workload")
        .arg(&a.workload)
        .arg("--format")
        .arg(if a.format == Format::Json {
            "json"
        } else {
            "text"
        })
        .status()
        .map_err(|e| format!("{}: {e}", sim.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

fn server_crash_cmd(a: &CrashtestArgs, seed: u64) -> Result<ExitCode, String> {
    use daisy_bench::kvcrash;
    let cfg = kvcrash::Config {
        dir: a.dir.clone(),
        kills: a.kills,
        seed,
        daisy_exe: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
        clients: 3,
    };
    let json = a.format == Format::Json;
    if !json {
        println!(
            "daisy crashtest --server: {} kills of daisy serve under 3 pipelining clients, seed {seed} (replay: daisy crashtest --server --seed {seed} --kills {})",
            a.kills, a.kills
        );
    }
    let bar = if json {
        daisy_bench::progress::hidden()
    } else {
        daisy_bench::progress::bar(a.kills, "kills")
    };
    let sum = kvcrash::run(&cfg, |k| bar.set_position(k));
    bar.finish_and_clear();
    let sum = sum?;
    if json {
        println!("{}", serde_json::to_string(&sum).unwrap());
    } else {
        for m in &sum.messages {
            println!("FAILURE: {m}");
        }
        println!(
            "kills: {}, acknowledged commands verified: {}, in-flight commands found applied (whole): {}, lost: {}, failures: {} ({:.1} s)",
            sum.kills, sum.acknowledged_verified, sum.in_flight_applied, sum.lost, sum.failures, sum.seconds
        );
    }
    Ok(
        if sum.lost == 0 && sum.failures == 0 && sum.kills == a.kills {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

fn crashtest_cmd(a: CrashtestArgs) -> Result<ExitCode, String> {
    let seed = a.seed.unwrap_or_else(random_seed);
    if a.power_fail {
        return power_fail_cmd(&a, seed);
    }
    if a.server {
        return server_crash_cmd(&a, seed);
    }
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let cfg = crashtest::Config {
        pool: a
            .dir
            .join(format!("daisy-crashtest-{}.pool", std::process::id())),
        kills: a.kills,
        seed,
        max_delay: std::time::Duration::from_millis(a.max_delay_ms.max(1)),
        child_cmd: child_cmd()?,
        pool_size: 32 << 20,
    };
    let json = a.format == Format::Json;
    if !json {
        println!("daisy crashtest: {} kills, seed {seed} (replay: daisy crashtest --seed {seed} --kills {})", a.kills, a.kills);
    }
    let bar = daisy_bench::progress::bar(a.kills, "kills");
    let sum = crashtest::run(&cfg, |s| bar.set_position(s.kills));
    bar.finish_and_clear();
    let _ = std::fs::remove_file(&cfg.pool);
    let sum = sum.map_err(|e| e.to_string())?;
    if json {
        println!("{}", serde_json::to_string(&sum).unwrap());
    } else {
        for m in &sum.messages {
            println!("FAILURE: {m}");
        }
        println!(
            "kills: {}, transactions verified: {}, lost: {}, failures: {} ({} recoveries re-applied committed transactions; slowest open {} us; {} on {})",
            sum.kills, sum.transactions_verified, sum.lost, sum.failures, sum.recoveries_replayed, sum.max_open_micros, sum.mode, sum.fs
        );
        println!(
            "hash map after the last recovery: {} entries in {} segments (directory depth {})",
            sum.map_entries, sum.map_segments, sum.map_depth
        );
    }
    Ok(
        if sum.lost == 0 && sum.failures == 0 && sum.kills == a.kills {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}
