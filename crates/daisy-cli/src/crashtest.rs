//! `daisy crashtest`: the kill torture (here), the power-failure simulator (the
//! daisy-powerfail binary beside this one) and the server's kill torture; and the hidden
//! `crashtest-child` that the kill torture kills.

use crate::output::Format;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use daisy_bench::crashtest;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct CrashtestArgs {
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
    /// Validate a block store's data after SIGKILL instead (seed 003): a child writes
    /// self-describing blocks (LBA, version, checksum) on four threads and prints each
    /// acknowledged write; after each kill every block is read back: lost (older than
    /// acknowledged) and corrupt (not whole) blocks are counted and must be 0 (`--kills`).
    #[arg(long, conflicts_with_all = ["power_fail", "server"])]
    blocks: bool,
    /// (--blocks) bytes per block: a multiple of 64. The size also picks the store's format:
    /// 2 (one fence per write) up to 512 B, 1 (two fences) above; run both to cover both.
    #[arg(long, default_value_t = 512, requires = "blocks")]
    block_size: u32,
    /// (--power-fail) crash images to check, split evenly between the workloads [default:
    /// the simulator's, 100000: every canary is caught within it; about 30 s].
    #[arg(long, requires = "power_fail")]
    budget: Option<u64>,
    /// (--power-fail) workloads to run: single, threads (three taking turns), concurrent
    /// (four committing at once), hashmap, kv (the server's commands), msync (single in msync
    /// mode), seq (sequence operations), tree (ordered-map operations: splits, merges), blocks
    /// (a block store written by three threads at once), backup (single with online backups
    /// taken while it runs), or all.
    #[arg(long, default_value = "all", value_parser = ["all", "single", "threads", "concurrent", "hashmap", "kv", "msync", "seq", "tree", "blocks", "backup"], requires = "power_fail")]
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

pub fn run(a: CrashtestArgs) -> Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(random_seed);
    if a.power_fail {
        return power_fail_cmd(&a, seed);
    }
    if a.server {
        return server_crash_cmd(&a, seed);
    }
    if a.blocks {
        return blocks_crash_cmd(&a, seed);
    }
    std::fs::create_dir_all(&a.dir).with_context(|| a.dir.display().to_string())?;
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
    let sum = sum?;
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
        println!(
            "sequence after the last recovery: {} items in {} chunks (most after a recovery: {} chunks)",
            sum.seq_items, sum.seq_chunks, sum.seq_max_chunks
        );
        println!(
            "ordered map after the last recovery: {} entries in {} nodes ({} levels)",
            sum.tree_entries, sum.tree_nodes, sum.tree_height
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

/// `daisy crashtest-child POOL --seed S [--blocks]`: run transactions (or block writes) until
/// killed.
pub fn child(pool: &Path, seed: u64, blocks: bool, file_method: Option<&str>) -> Result<()> {
    use daisy_bench::blockcrash::{self, Backend};
    if let Some(m) = file_method {
        let b = Backend::parse(m).ok_or_else(|| anyhow!("--file-method {m}: unknown"))?;
        return blockcrash::child_backend(pool, seed, b);
    }
    if blocks {
        return blockcrash::child(pool, seed);
    }
    crashtest::child(pool, seed)?;
    Ok(())
}

/// `daisy crashtest --blocks`: the block store's data validation after SIGKILL.
fn blocks_crash_cmd(a: &CrashtestArgs, seed: u64) -> Result<ExitCode> {
    use daisy_bench::blockcrash;
    std::fs::create_dir_all(&a.dir).with_context(|| a.dir.display().to_string())?;
    let cfg = blockcrash::Config {
        pool: a
            .dir
            .join(format!("daisy-blockcrash-{}.pool", std::process::id())),
        kills: a.kills,
        seed,
        max_delay: std::time::Duration::from_millis(a.max_delay_ms.max(2)),
        child_cmd: child_cmd()?,
        backend: blockcrash::Backend::Daisy,
        block_size: a.block_size,
    };
    let json = a.format == Format::Json;
    if !json {
        println!(
            "daisy crashtest --blocks: {} kills, {} B blocks, seed {seed} (replay: daisy crashtest --blocks --block-size {} --seed {seed} --kills {})",
            a.kills, a.block_size, a.block_size, a.kills
        );
    }
    let bar = daisy_bench::progress::bar(a.kills, "kills");
    let sum = blockcrash::run(&cfg, |s| bar.set_position(s.kills));
    bar.finish_and_clear();
    let _ = std::fs::remove_file(&cfg.pool);
    let sum = sum?;
    if json {
        println!("{}", serde_json::to_string(&sum)?);
    } else {
        for m in &sum.messages {
            println!("FAILURE: {m}");
        }
        println!(
            "kills: {}, acknowledged writes: {}, blocks verified: {}, lost: {}, corrupt: {}, failures: {} (writes in flight found complete: {}; {})",
            sum.kills, sum.writes_acked, sum.blocks_verified, sum.lost, sum.corrupt, sum.failures, sum.in_flight_present, sum.mode
        );
    }
    Ok(
        if sum.lost == 0 && sum.corrupt == 0 && sum.failures == 0 && sum.kills == a.kills {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

/// `daisy crashtest --power-fail`: run the simulator binary that sits next to this one.
fn power_fail_cmd(a: &CrashtestArgs, seed: u64) -> Result<ExitCode> {
    let exe = std::env::current_exe()?;
    let sim = exe.with_file_name("daisy-powerfail");
    if !sim.exists() {
        return Err(anyhow!(
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
        .with_context(|| sim.display().to_string())?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

fn server_crash_cmd(a: &CrashtestArgs, seed: u64) -> Result<ExitCode> {
    use daisy_bench::kvcrash;
    let cfg = kvcrash::Config {
        dir: a.dir.clone(),
        kills: a.kills,
        seed,
        daisy_exe: std::env::current_exe().context("current_exe")?,
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

pub fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        % 1_000_000_007
}

pub fn child_cmd() -> Result<Vec<String>> {
    let exe = std::env::current_exe()?;
    Ok(vec![
        exe.to_string_lossy().into_owned(),
        "crashtest-child".into(),
    ])
}
