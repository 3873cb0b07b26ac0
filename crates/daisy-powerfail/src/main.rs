//! `daisy-powerfail`: the power-failure simulator (what `daisy crashtest --power-fail` runs).

use clap::{Parser, ValueEnum};
use daisy::sim::Fault;
use daisy_powerfail::{Config, Workload, WorkloadResult};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum WorkloadArg {
    All,
    Single,
    /// Three threads taking turns in bursts (idle lanes, helping, slot reuse).
    Threads,
    /// Four threads committing at the same time, on own and shared data under locks.
    Concurrent,
    /// Hash-map inserts, removes, batches and growth.
    Hashmap,
    /// The KV server's commands in group transactions on a keyspace pool.
    Kv,
    /// `single` on a pool in msync mode.
    Msync,
    /// Sequence pushes, pops, middle edits, trims and bounded freeing.
    Seq,
    /// Ordered-map inserts, removals, pops, range removals and ranks (splits and merges).
    Tree,
    /// A block store written by three threads at once (no torn block, no lost write).
    Blocks,
    /// `single` with online backups taken while it runs, each copy checked at its pause.
    Backup,
}

/// Simulate power failures at every fence: build crash images from what may or may not have
/// reached the media, recover each with Daisy's real recovery, and verify it against a model.
#[derive(Parser)]
#[command(name = "daisy-powerfail", version)]
struct Cli {
    /// Crash images to check in all (split evenly between the workloads).
    #[arg(long, default_value_t = daisy_powerfail::DEFAULT_BUDGET)]
    budget: u64,
    /// Seed of the workload and of the image sampling [default: random]; printed for replay.
    #[arg(long)]
    seed: Option<u64>,
    /// Directory for the pools and scratch images.
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    #[arg(long, value_enum, default_value = "all")]
    workload: WorkloadArg,
    /// Most images per crash point (all combinations are checked when there are fewer).
    #[arg(long, default_value_t = 32)]
    per_point: usize,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// (testing) inject a bug, by its name in `daisy::sim::Fault` (NoCommitFence, ...); the
    /// simulator must then report failures.
    #[arg(long, hide = true)]
    inject_fault: Option<String>,
}

fn print_workload(r: &WorkloadResult) {
    // The fixed-size map's shape means something only where the workload fills it (the seq
    // and tree workloads' roots hold an untouched map), the ordered map's where it has one.
    let shape = if r.map_after.2 > 0 {
        format!(
            "; hash map {} -> {} segments (depth {} -> {}, {} -> {} entries)",
            r.map_before.0,
            r.map_after.0,
            r.map_before.1,
            r.map_after.1,
            r.map_before.2,
            r.map_after.2
        )
    } else if r.tree_after.0 > 0 {
        format!(
            "; ordered map {} nodes, {} levels, {} entries",
            r.tree_after.0, r.tree_after.1, r.tree_after.2
        )
    } else {
        String::new()
    };
    println!(
        "workload {:<10} {:>6} transactions, {:>6} crash points, {:>7} images, {} failures{shape}",
        r.workload, r.transactions, r.crash_points, r.images, r.failures,
    );
    let threads: Vec<String> = r
        .threads
        .iter()
        .map(|t| format!("{} {}", t.thread, t.crash_points))
        .collect();
    println!(
        "    crash points per thread: {}; fences {}, fences without a crash point: {}",
        threads.join(", "),
        r.fences,
        r.fences_without_point
    );
    if let Some(from) = r.second_life_from {
        println!(
            "    second life: from an image holding {from} transactions, {} crash points inside its recovery",
            r.recovery_points
        );
    }
    let events: Vec<String> = r
        .events
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!("    events: {}", events.join(", "));
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            % 1_000_000_007
    });
    if let Some(name) = &cli.inject_fault {
        let Some(f) = Fault::ALL.into_iter().find(|f| format!("{f:?}") == *name) else {
            eprintln!(
                "daisy-powerfail: unknown fault {name:?}; known: {}",
                Fault::ALL.map(|f| format!("{f:?}")).join(", ")
            );
            return ExitCode::from(2);
        };
        daisy::sim::inject(f);
    }
    let workloads = match cli.workload {
        WorkloadArg::All => Workload::ALL.to_vec(),
        WorkloadArg::Hashmap => vec![Workload::HashMap],
        WorkloadArg::Single => vec![Workload::Single],
        WorkloadArg::Threads => vec![Workload::Threads],
        WorkloadArg::Concurrent => vec![Workload::Concurrent],
        WorkloadArg::Kv => vec![Workload::Kv],
        WorkloadArg::Msync => vec![Workload::Msync],
        WorkloadArg::Seq => vec![Workload::Seq],
        WorkloadArg::Tree => vec![Workload::Tree],
        WorkloadArg::Blocks => vec![Workload::Blocks],
        WorkloadArg::Backup => vec![Workload::Backup],
    };
    let cfg = Config {
        dir: cli.dir,
        seed,
        budget: cli.budget.max(1),
        workloads,
        per_point: cli.per_point.max(1),
    };
    let json = cli.format == Format::Json;
    if !json {
        println!(
            "daisy crashtest --power-fail: budget {} crash images, seed {seed} (replay: daisy crashtest --power-fail --seed {seed} --budget {})",
            cfg.budget, cfg.budget
        );
    }
    let res = daisy_powerfail::run(&cfg, |r| {
        if !json {
            print_workload(r);
        }
    });
    let sum = match res {
        Ok(s) => s,
        Err(e) => {
            eprintln!("daisy-powerfail: error: {e}");
            return ExitCode::from(1);
        }
    };
    if json {
        println!("{}", serde_json::to_string(&sum).unwrap());
    } else {
        for w in &sum.workloads {
            for m in &w.messages {
                println!("FAILURE: {m}");
            }
        }
        println!(
            "crash points: {}, crash images checked: {}, failures: {}, fences without a crash point: {} ({:.1} s, {})",
            sum.crash_points, sum.images, sum.failures, sum.fences_without_point, sum.seconds, sum.mode
        );
    }
    if sum.failures == 0 && sum.fences_without_point == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
