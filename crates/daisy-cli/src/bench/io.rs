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
fio-psync takes: its cross-check against fio is printed (cells within 10%).\n\n\
Each cell runs its jobs for --seconds on one store of --size-mib shared by all jobs (fio: \
--numjobs on one file with --thread); stores are filled before their first read cell. The \
output is the seed's table per mechanism (type-jobs rows, block-size columns), then Daisy's \
ratio over each rival per cell and the smallest over the write cells. --quick: random writes \
and reads of 512 B and 4 KiB by 1 and 4 jobs, 0.5 s a cell, 64 MiB stores.";

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
}

pub fn run(a: IoArgs) -> Result<ExitCode> {
    let mut cfg = if a.quick {
        iobench::Config::quick(a.dir)
    } else {
        iobench::Config::full(a.dir)
    };
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
