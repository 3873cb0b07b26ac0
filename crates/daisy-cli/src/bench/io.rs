//! `daisy bench io`: seed 002's fio matrix, Daisy's block store against libpmemblk and fio's
//! engines on the same directory.

use crate::output::TableFormat;
use anyhow::{bail, Result};
use clap::Args;
use daisy_bench::iobench;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str = "Seed 002's fio matrix: NVM used as a block store, bandwidth in MB/s \
(10^6 bytes/s) for rw in {read, write, randread, randwrite} x block sizes {512 B .. 8 KiB} x \
jobs {1, 2, 4, 8} (more jobs than cores is part of the seed's finding), for each mechanism on \
the same directory (tmpfs emulates NVM):\n\n\
daisy: Daisy's block store (PBlockStore: every write atomic under power failure and durable \
when it returns; block translation with one 8-byte map word per write). \
libpmemblk: PMDK's block store, called in process by the same load generator (atomic and \
durable too; skipped, saying why, when libpmemblk is not installed). \
fio-pmemblk, fio-libpmem (--sync=1), fio-mmap, fio-psync, fio-psync-fsync (--fsync=1): the \
real fio binary's engines on the same directory (mmap and psync without a sync are not durable \
when a write returns). pwrite: this load generator on pwrite/pread of a file, the path \
fio-psync takes: its cross-check against fio is printed per cell (pwrite / fio-psync, ✓ within 10%, ✗ outside).\n\n\
Each cell runs its jobs for --seconds on one store of --size-mib shared by all jobs (fio: \
--numjobs on one file with --thread); stores are filled before their first read cell. The \
output is the seed's table per mechanism (type-jobs rows, block-size columns), then Daisy's \
ratio over each rival per cell and the smallest over the write cells. --quick: random writes \
and reads of 512 B and 4 KiB by 1 and 4 jobs, 0.5 s a cell, 64 MiB stores.\n\n\
Other modes (seeds 003 and 004, see README.md \"daisy bench io\"):\n\
--workload FILE: run a vdbench-style workload file (read and seek percentages, transfer-size \
distribution, threads, a fixed rate, a list of rates, max, or a curve of percents of the max; \
examples in examples/workloads/) open loop against Daisy's block store and pwrite with and \
without fdatasync, in --dir and --disk-dir; prints the iorate curve (requested and achieved \
rate, p50/p99/p99.9/max latency from each operation's intended start).\n\
--validate: data validation: self-describing blocks written by a child process killed with \
SIGKILL (--kills times) for Daisy's block store and the file paths, and a power failure: the \
file paths under a model that drops unsynced pages, Daisy's block store under the power-failure \
simulator (the daisy-powerfail binary next to this one); lost and corrupt blocks counted.\n\
--methods: seed 004's file-I/O methods (write, pwrite, fwrite, mmap-msync, mmap-pmem, O_DIRECT) \
x sync policy (none, end, op) x offsets (seq, rand, sorted) x threads (--jobs), then random \
reads by many threads with latency percentiles.\n\n\
Every mode prints the page cache's write-back knobs (vm.dirty_ratio, dirty_background_ratio, \
dirty_expire_centisecs, dirty_writeback_centisecs). They are read only, unless --vm-knob \
KNOB=VALUE (repeatable, those four knobs only, needs root) sets them for the run: the old \
values are read first and written back when the run ends, fails or is interrupted (Ctrl-C, \
SIGTERM, SIGHUP); a knob that cannot be written (not root, /proc/sys read-only) is an error \
and nothing stays changed. The environment variable DAISY_SYSCTL_VM_DIR replaces \
/proc/sys/vm (for tests).";

#[derive(Args)]
pub struct IoArgs {
    /// A few cells (see above) instead of the whole matrix.
    #[arg(long)]
    quick: bool,
    /// Kinds of I/O, comma-separated [default: read,write,randread,randwrite].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::RWS))]
    rw: Vec<String>,
    /// Block sizes in bytes, comma-separated (multiples of 64) [default: 512,1024,2048,4096,8192].
    #[arg(long, value_delimiter = ',')]
    bs: Vec<u32>,
    /// Job (thread) counts, comma-separated [default: 1,2,4,8].
    #[arg(long, value_delimiter = ',')]
    jobs: Vec<u32>,
    /// Mechanisms, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::MECHANISMS))]
    mechanisms: Vec<String>,
    /// Seconds per cell [default: 1; --quick 0.5].
    #[arg(long)]
    seconds: Option<f64>,
    /// MiB of data per store [default: 256; --quick 64].
    #[arg(long)]
    size_mib: Option<u64>,
    /// Directory for the stores (tmpfs emulates NVM).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
    /// Run these workload files (see above) instead of the matrix.
    #[arg(long, value_name = "FILE")]
    workload: Vec<PathBuf>,
    /// With --workload: the mechanisms [default: daisy,pwrite,pwrite-fdatasync].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::openloop::WORKLOAD_TARGETS))]
    targets: Vec<String>,
    /// A directory on a disk file system: the file paths of --workload and --methods run
    /// there too, and the matrix adds seed 002's disk rows (fio-psync-disk,
    /// fio-psync-fsync-disk).
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// Data validation after SIGKILL and power failure instead of the matrix.
    #[arg(long)]
    validate: bool,
    /// With --validate: kills per mechanism.
    #[arg(long, default_value_t = 5)]
    kills: u64,
    /// With --validate: crash images of Daisy's block store in the power-failure simulator.
    #[arg(long, default_value_t = 3000)]
    sim_budget: u64,
    /// Seed 004's file-I/O methods instead of the matrix (--quick: smaller).
    #[arg(long)]
    methods: bool,
    /// With --methods: the write methods [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::methods::METHODS))]
    method: Vec<String>,
    /// With --methods: sync policies [default: none,end,op].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::methods::SYNCS))]
    sync: Vec<String>,
    /// With --methods: offset patterns [default: seq,rand,sorted].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(iobench::methods::OFFSETS))]
    offsets: Vec<String>,
    /// With --methods: MiB written per cell [default: 8; 32 without --quick].
    #[arg(long)]
    write_mib: Option<u64>,
    /// Set a page-cache knob for this run and restore its old value afterwards (also when the
    /// run fails or gets Ctrl-C): dirty_ratio, dirty_background_ratio, dirty_expire_centisecs
    /// or dirty_writeback_centisecs (/proc/sys/vm; needs root). Repeatable.
    #[arg(long = "vm-knob", value_name = "KNOB=VALUE")]
    vm_knob: Vec<iobench::pagecache::Setting>,
}

pub fn run(a: IoArgs) -> Result<ExitCode> {
    let modes = [!a.workload.is_empty(), a.validate, a.methods];
    if modes.iter().filter(|&&m| m).count() > 1 {
        bail!("--workload, --validate and --methods are separate runs: give one");
    }
    // The knobs are set for the whole run; the guard puts them back when `run` returns (or
    // fails), a signal handler when the run is interrupted.
    let _knobs = if a.vm_knob.is_empty() {
        None
    } else {
        let dir = iobench::pagecache::vm_dir();
        let g = iobench::pagecache::KnobGuard::apply(&dir, &a.vm_knob, true)?;
        let say = say_fn(a.format == TableFormat::Json);
        say(&format!(
            "page cache: set {} for this run (restored when it ends)",
            g.changes.join(", ")
        ));
        Some(g)
    };
    if !a.workload.is_empty() {
        return workloads(a);
    }
    if a.validate {
        return validate(a);
    }
    if a.methods {
        return methods(a);
    }
    let mut cfg = if a.quick {
        iobench::Config::quick(a.dir)
    } else {
        iobench::Config::full(a.dir)
    };
    if let Some(d) = &a.disk_dir {
        cfg = cfg.with_disk(d.clone());
    }
    if !a.rw.is_empty() {
        cfg.rws = a.rw;
    }
    if !a.bs.is_empty() {
        if let Some(b) =
            a.bs.iter()
                .find(|&&b| !(64..=1 << 20).contains(&b) || b % 64 != 0)
        {
            bail!("--bs {b}: block sizes are multiples of 64 bytes from 64 to 1 MiB");
        }
        cfg.block_sizes = a.bs;
    }
    if !a.jobs.is_empty() {
        if a.jobs.iter().any(|&j| j == 0 || j > 256) {
            bail!("--jobs: from 1 to 256");
        }
        cfg.jobs = a.jobs;
    }
    if !a.mechanisms.is_empty() {
        cfg.mechanisms = a.mechanisms;
    }
    if let Some(s) = a.seconds {
        if !(0.05..=600.0).contains(&s) {
            bail!("--seconds: from 0.05 to 600");
        }
        cfg.seconds = s;
    }
    if let Some(m) = a.size_mib {
        if !(1..=1 << 20).contains(&m) {
            bail!("--size-mib: from 1 to 1048576");
        }
        cfg.size = m << 20;
    }
    cfg.seed = a.seed;
    let json = a.format == TableFormat::Json;
    let say = |s: &str| {
        if json {
            eprintln!("{s}")
        } else {
            println!("{s}")
        }
    };
    let probe = cfg
        .dir
        .join(format!("daisy-bench-io-probe-{}.pool", std::process::id()));
    if let Ok(p) = daisy::Pool::create(&probe, &daisy::PoolOptions::new("probe").size(1 << 20)) {
        say(&format!(
            "directory {}: Daisy's pools in {} mode; {}",
            cfg.dir.display(),
            p.mode().describe(),
            iobench::fio_version().unwrap_or_else(|e| e.to_string())
        ));
    }
    let _ = std::fs::remove_file(&probe);
    say(&iobench::pagecache::describe());
    let cells = iobench::run(&cfg, say)?;
    if json {
        for c in &cells {
            println!("{}", serde_json::to_string(c)?);
        }
    } else {
        print!("{}", iobench::report(&cfg, &cells));
    }
    Ok(ExitCode::SUCCESS)
}

fn say_fn(json: bool) -> impl Fn(&str) {
    move |s: &str| {
        if json {
            eprintln!("{s}")
        } else {
            println!("{s}")
        }
    }
}

fn dirs_of(a: &IoArgs) -> Vec<PathBuf> {
    std::iter::once(a.dir.clone())
        .chain(a.disk_dir.clone())
        .collect()
}

/// `--workload FILE...`: each file's iorate curve per mechanism.
fn workloads(a: IoArgs) -> Result<ExitCode> {
    use iobench::openloop;
    let json = a.format == TableFormat::Json;
    let say = say_fn(json);
    let targets = if a.targets.is_empty() {
        openloop::WORKLOAD_TARGETS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.targets.clone()
    };
    let dirs = dirs_of(&a);
    let loaded: Vec<_> = a
        .workload
        .iter()
        .map(|p| iobench::workload::Workload::load(p))
        .collect::<Result<_>>()?;
    say(&iobench::pagecache::describe());
    for w in &loaded {
        let rows = openloop::run_workload(w, &targets, &dirs, a.seed, &say)?;
        if json {
            for r in &rows {
                println!("{}", serde_json::to_string(r)?);
            }
        } else {
            print!("\n{}", openloop::curve_report(w, &rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--validate`: lost and corrupt blocks after SIGKILL and power failure.
fn validate(a: IoArgs) -> Result<ExitCode> {
    use daisy_bench::blockcrash::Backend;
    use iobench::validate;
    let json = a.format == TableFormat::Json;
    let say = say_fn(json);
    let cfg = validate::Config {
        dir: a.dir.clone(),
        kills: a.kills.max(1),
        seed: a.seed,
        child_cmd: crate::crashtest::child_cmd()?,
        backends: Backend::ALL.to_vec(),
        power_failures: 5,
        writes: 20_000,
    };
    say(&iobench::pagecache::describe());
    let mut rows = validate::run(&cfg, &say)?;
    rows.push(simulator(&a, &say));
    if json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print!("\n{}", validate::report(&rows));
    }
    let daisy_bad = rows
        .iter()
        .any(|r| r.mechanism == "daisy" && r.lost + r.corrupt > 0);
    Ok(if daisy_bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Daisy's block store under the power-failure simulator: the `blocks` workload of the
/// daisy-powerfail binary next to this one.
fn simulator(a: &IoArgs, say: &impl Fn(&str)) -> iobench::validate::ValidationRow {
    use iobench::validate::{simulator_row, simulator_run};
    let sim = std::env::current_exe()
        .map(|exe| exe.with_file_name("daisy-powerfail"))
        .ok()
        .filter(|p| p.exists());
    let Some(sim) = sim else {
        let mut r = simulator_row(
            0,
            0,
            0,
            a.seed,
            "daisy-powerfail not found next to this binary: build it with `cargo build \
             --release -p daisy-powerfail`"
                .into(),
        );
        r.where_ = "not run".into();
        return r;
    };
    say(&format!(
        "daisy: power-failure simulator, workload blocks, budget {} crash images, seed {}",
        a.sim_budget, a.seed
    ));
    simulator_run(&sim, &a.dir, a.sim_budget, a.seed)
}

/// `--methods`: seed 004's survey.
fn methods(a: IoArgs) -> Result<ExitCode> {
    use iobench::methods;
    let json = a.format == TableFormat::Json;
    let say = say_fn(json);
    let dirs = dirs_of(&a);
    let mut cfg = if a.quick {
        methods::Config::quick(dirs)
    } else {
        methods::Config::full(dirs)
    };
    if !a.method.is_empty() {
        cfg.methods = a.method.clone();
    }
    if !a.sync.is_empty() {
        cfg.syncs = a.sync.clone();
    }
    if !a.offsets.is_empty() {
        cfg.offsets = a.offsets.clone();
    }
    if !a.jobs.is_empty() {
        if a.jobs.iter().any(|&j| j == 0 || j > 256) {
            bail!("--jobs: from 1 to 256");
        }
        cfg.threads = a.jobs.clone();
    }
    if let Some(&b) = a.bs.first() {
        if !b.is_multiple_of(512) || !(512..=1 << 20).contains(&b) {
            bail!("--bs {b}: with --methods, a multiple of 512 bytes up to 1 MiB");
        }
        cfg.bs = b;
    }
    if let Some(m) = a.size_mib {
        cfg.file_size = m.clamp(1, 1 << 20) << 20;
    }
    if let Some(m) = a.write_mib {
        cfg.write_size = m.clamp(1, 1 << 20) << 20;
    }
    cfg.write_size = cfg.write_size.min(cfg.file_size);
    cfg.seed = a.seed;
    let (cells, reads) = methods::run(&cfg, &say)?;
    if json {
        for c in &cells {
            println!("{}", serde_json::to_string(c)?);
        }
        for r in &reads {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print!("\n{}", methods::report(&cfg, &cells, &reads));
    }
    Ok(ExitCode::SUCCESS)
}
