//! `daisy report`: the test report of seed 000.

use crate::crashtest::{child_cmd, random_seed};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit status, for `daisy report --help`.
const EXIT_HELP: &str = "\
Exit status: 0 when every verdict is PASS, TIE or NOT RUN; 1 when a functional test failed \
(data lost or inconsistent after a crash) or the report could not run; 3 when a performance \
verdict is FAIL (0 with --allow-perf-fail). The report files are written in every case.

Verdicts: each ratio comes with its rounds or runs and an interval (for paired rounds the \
distribution-free interval of their median, at least 90% confidence; for unpaired runs the \
ratio's range over them). PASS: the whole interval meets the requirement; FAIL: none of it \
does; TIE: the requirement lies inside the interval (this run cannot tell).";

#[derive(Args)]
#[command(after_help = EXIT_HELP)]
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
    /// Exit 0 when a performance verdict is FAIL (a functional failure still exits 1): the
    /// behaviour before exit statuses, for runs that only want the report.
    #[arg(long)]
    allow_perf_fail: bool,
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
    print!("{}", r.scoreboard_text());
    println!();
    for f in files {
        println!("wrote {}", f.display());
    }
    let status = r.exit_status(a.allow_perf_fail);
    println!("verdicts: {}", r.status_line());
    match status {
        0 => {}
        report::EXIT_PERF_FAIL => println!(
            "exit status {status}: a performance verdict is FAIL (--allow-perf-fail exits 0)"
        ),
        _ => println!("exit status {status}: a functional test failed"),
    }
    Ok(ExitCode::from(status))
}
