//! `daisy bench seq`: the persistent sequence against std's VecDeque and a PMDK list.

use super::hashmap::parse_count;
use crate::output::TableFormat;
use anyhow::{bail, Result};
use clap::Args;
use daisy_bench::seqbench;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str = "Daisy's persistent sequence (PSeq, a deque of chunks of packed items \
as Redis's quicklist) against std's VecDeque in DRAM and, for the end operations, PMDK: \
libpmemobj has no deque, so its natural equivalent is measured, a doubly linked list of one \
object per item (the shape of its POBJ_TAILQ macros) with one transaction per push or pop \
(skipped, saying why, when libpmemobj is not installed).\n\n\
Operations on one structure, in order: push_back N items onto an empty sequence (RPUSH, \
durable per operation for Daisy and PMDK), index (min(N, 10000) LINDEX of random indexes), \
range (as many LRANGE of 100 items from a random index), pop_front the N items (LPOP, checked \
in order), push_front N (LPUSH), pop_back N (RPOP). PMDK's list has no index or range rows: a \
linked list walks from an end. The environment (pool mode with its flush instruction, file \
system) is printed first; ratios are time per operation over VecDeque's and over PMDK's.";

#[derive(Args)]
pub struct SeqArgs {
    /// Sizes N, comma-separated [default: 100000,1000000].
    #[arg(long = "n", value_delimiter = ',', value_parser = parse_count)]
    ns: Vec<usize>,
    /// Structures to measure, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(seqbench::STRUCTURES))]
    structures: Vec<String>,
    /// Daisy's chunk size in bytes (one of the allocator's size classes from 128 to 32768:
    /// 128, 256, 512, 1024, 2048, 4096, ...; others are refused when the sequence is created).
    #[arg(long, default_value_t = daisy::PSeq::DEFAULT_CHUNK_BYTES)]
    chunk_bytes: u32,
    /// Bytes per item (at least 8).
    #[arg(long, default_value_t = 16)]
    value_size: usize,
    /// Directory for the pools (tmpfs emulates NVM).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Seed of the indexes the reads visit.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
}

pub fn run(a: SeqArgs) -> Result<ExitCode> {
    if a.value_size < 8 || a.value_size > 1 << 20 {
        bail!("--value-size must be from 8 bytes to 1 MiB");
    }
    let cfg = seqbench::Config {
        dir: a.dir,
        ns: if a.ns.is_empty() {
            seqbench::DEFAULT_NS.to_vec()
        } else {
            a.ns.into_iter().map(|n| n as u64).collect()
        },
        structures: if a.structures.is_empty() {
            seqbench::STRUCTURES.iter().map(|s| s.to_string()).collect()
        } else {
            a.structures
        },
        chunk_bytes: a.chunk_bytes,
        value_size: a.value_size,
        seed: a.seed,
    };
    let json = a.format == TableFormat::Json;
    // The environment and progress go to stderr in JSON mode (stdout is one row a line).
    let rows = seqbench::run(&cfg, |s| {
        if json {
            eprintln!("{s}")
        } else {
            println!("{s}")
        }
    })?;
    if json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        println!();
        print!("{}", seqbench::table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}
