//! `daisy report`: the test report of seed 000.

use crate::crashtest::{child_cmd, random_seed};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
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

pub fn run(a: ReportArgs) -> Result<ExitCode> {
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
        daisy_exe: std::env::current_exe().context("current_exe")?,
        daisy_busy_poll_us: daisy_kv::BUSY_POLL_US,
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
