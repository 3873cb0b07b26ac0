//! The `daisy` command: one module per subcommand (pool, serve, crashtest, report, bench),
//! each holding its arguments and what it runs; the work itself is in the library crates
//! (daisy, daisy-kv, daisy-bench).

mod bench;
mod crashtest;
mod output;
mod pool;
mod report;
mod serve;
mod size;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

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
    Pool(pool::PoolCmd),
    /// Kill torture: kill a process running transactions at random moments and verify that
    /// nothing committed is lost and nothing uncommitted is half-applied.
    Crashtest(crashtest::CrashtestArgs),
    /// Benchmarks: Daisy against its rivals, measured side by side in one run.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// A Redis-protocol server whose keyspace lives in a pool: every write is durable before
    /// it is acknowledged, and a restart serves at once (no snapshot or log to load).
    /// Stops on SIGTERM, SIGINT or SHUTDOWN.
    Serve(serve::ServeArgs),
    /// The test report: the persistence functional test and the performance tests, written to
    /// report.md, report.html, results.json and CSV files, opening with a scoreboard of
    /// verdicts (PASS, TIE, FAIL) against seed 000's requirement and the issues' targets.
    /// Exits 1 when the functional test failed, 3 when a performance verdict is FAIL.
    Report(report::ReportArgs),
    /// (internal) the child process of `daisy crashtest`.
    #[command(hide = true)]
    CrashtestChild {
        pool: PathBuf,
        #[arg(long)]
        seed: u64,
        /// Write blocks of a block store instead (`daisy crashtest --blocks`).
        #[arg(long)]
        blocks: bool,
        /// With --blocks: write a plain file this way instead of a block store (pwrite,
        /// pwrite-fdatasync, mmap, mmap-msync: `daisy bench io --validate`).
        #[arg(long, requires = "blocks")]
        file_method: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // `{:#}`: the error with its causes ("opening x: permission denied").
            eprintln!("daisy: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Pool(p) => pool::run(p),
        Cmd::Crashtest(a) => crashtest::run(a),
        Cmd::Report(a) => report::run(a),
        Cmd::Serve(a) => serve::run(a).map(|()| ExitCode::SUCCESS),
        Cmd::CrashtestChild {
            pool,
            seed,
            blocks,
            file_method,
        } => crashtest::child(&pool, seed, blocks, file_method.as_deref())
            .map(|()| ExitCode::SUCCESS),
        Cmd::Bench(b) => bench::run(b),
    }
}
