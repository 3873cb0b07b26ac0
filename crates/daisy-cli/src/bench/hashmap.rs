//! `daisy bench hashmap`: seed 000's hash-map table, every persistence mechanism side by side.

use crate::output::{Stages, TableFormat};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use daisy_bench::hashbench;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str = "Seed 000's table: random insertion of N key-value pairs (two u32s), \
measured for every mechanism side by side in one run, on the same file system and with the same \
random distinct keys (a seeded generator).\n\n\
Mechanisms (--mechanisms):\n\
  daisy        Daisy's persistent hash map (PHashMap<u32, u32>) in a pool: every insert its own \
transaction, durable when it returns\n\
  daisy-batch  the same map, the whole run as one batch: one durability point at the end (a \
crash keeps a prefix of the inserts); the batch fills the empty map's segments in place\n\
  store-flush  simple table in a mapped file: 8-byte store + flush of its line + fence per \
operation, no transaction (the physical floor of per-operation durability)\n\
  store-end    the same table: plain 8-byte stores, then every written line flushed and one \
fence at the end (the floor of one durability point)\n\
  pmdk-tx      the same table in a PMDK libpmemobj pool, one transaction per operation (skipped \
when libpmemobj is not installed)\n\
  msync-op     the table in a mapped file, msync of the touched page after each operation\n\
  msync-end    the table in a mapped file, one msync of the whole table at the end (seed 000's \
baseline)\n\
  fsync-op     table in DRAM plus a file: pwrite of the slot + fdatasync per operation\n\
  fsync-end    pwrite per operation, one fsync at the end\n\
  dram         std::collections::HashMap, nothing persisted (the floor for batched work)\n\
  lmdb-op      LMDB (heed, its bundled mdb.master), one write transaction per insert with \
LMDB's default sync (durable when commit returns)\n\
  lmdb-end     LMDB, one write transaction for the whole run, committed at the end\n\
  redb-op      redb, one write transaction per insert at Durability::Immediate\n\
  redb-end     redb, one write transaction (Durability::Immediate) for the whole run\n\
  sqlite-op    SQLite (rusqlite, the system's libsqlite3), journal_mode=WAL, synchronous=FULL, \
kv(k INTEGER PRIMARY KEY, v), each INSERT its own transaction\n\
  sqlite-end   SQLite, the same settings, BEGIN, every INSERT, COMMIT\n\n\
The databases' -op mechanisms commit durably (an fsync or more) per insert: each run is timed \
on at most the first 20,000 inserts and projected to N (marked ~). Their bytes per entry are \
the sizes of all their files (data, lock, WAL, shared memory) after a run, over the entries; \
their versions (crate and C library) are printed and carried in the JSON rows.\n\n\
Every table is sized for N before the run, for every mechanism alike: the simple tables get 2N \
slots, the HashMap with_capacity(N), Daisy's map create_in_with_seed_and_capacity(N). \
The simple table: open addressing over 8-byte slots, 2N rounded up to a power of two slots, \
linear probing, a multiplicative hash. Each row is the median of --runs timed runs on fresh \
tables (total time only), with the spread; one more run times each operation for p99 and max. \
A mechanism whose projected run exceeds --max-secs is timed on a prefix of the operations and \
marked ~ (extrapolated). On tmpfs (the default /dev/shm, DRAM emulating NVM as in seed 000) \
msync and fsync persist nothing beyond the page cache; use --dir for a disk.";

#[derive(Clone, Copy, ValueEnum)]
pub enum OpArg {
    /// Insert the N keys into an empty table.
    Insert,
    /// Look the N keys up (table built first, untimed); values are checked.
    Get,
    /// Remove the N keys (table built first, untimed).
    Remove,
}

#[derive(Args)]
pub struct HashmapArgs {
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

/// One size N: digits, with underscores allowed (1_000_000); commas separate sizes.
pub fn parse_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .replace('_', "")
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected a whole number such as 100000"))?;
    if n == 0 || n > hashbench::MAX_N {
        return Err(format!("N must be between 1 and {}", hashbench::MAX_N));
    }
    Ok(n)
}

pub fn run(a: HashmapArgs) -> Result<ExitCode> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(a.max_secs > 0.0 && a.max_secs.is_finite()) {
        bail!("--max-secs must be a positive number of seconds");
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

#[cfg(test)]
mod tests {
    /// The help names the databases' cap as the benchmark applies it.
    #[test]
    fn help_states_the_databases_cap() {
        let cap = daisy_bench::dbrivals::PER_OP_MAX_OPS;
        let text = format!("{},{:03}", cap / 1000, cap % 1000);
        assert!(
            super::ABOUT.contains(&format!("at most the first {text} inserts")),
            "ABOUT must say {text}"
        );
    }
}
