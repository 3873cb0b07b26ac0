//! `daisy bench tree`: the persistent ordered map against std's BTreeMap and PMDK's B-tree.

use super::hashmap::parse_count;
use crate::output::TableFormat;
use anyhow::{bail, Result};
use clap::Args;
use daisy_bench::treebench;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str = "Daisy's persistent ordered map (PTreeMap, a B+-tree with ranks) on \
sorted-set shaped data, against std's BTreeMap in DRAM and PMDK's own persistent B-tree (the \
btree_map example Debian's libpmemobj-dev ships, compiled at run time with cc; skipped, saying \
why, when either is missing).\n\n\
Keys: an 8-byte order-preserving score (distinct random u64s) followed by the member \
(member:<i>), values empty; PMDK's example takes u64 keys, so it gets the score alone. \
Operations, over all N keys in a seeded random order: insert (into an empty map; durable per \
operation for Daisy and PMDK: one transaction each), get, rank (ZRANK: Daisy only), range \
(min(N, 100000) scans of 10 entries from a random key: ZRANGEBYSCORE LIMIT 0 10; not in PMDK's \
example), remove (durable per operation). Each row is one timed run; lines/op and fences/op \
count Daisy's cache-line write-backs and fences.";

#[derive(Args)]
pub struct TreeArgs {
    /// Sizes N, comma-separated [default: 100000,1000000].
    #[arg(long = "n", value_delimiter = ',', value_parser = parse_count)]
    ns: Vec<usize>,
    /// Structures to measure, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(treebench::STRUCTURES))]
    structures: Vec<String>,
    /// Daisy's node size in bytes (256, 512, 1024 or 2048).
    #[arg(long, default_value_t = daisy::PTreeMap::DEFAULT_NODE_SIZE)]
    node_size: u32,
    /// Directory for the pools (tmpfs emulates NVM).
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    dir: PathBuf,
    /// Seed of the keys and of the visiting orders.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
}

pub fn run(a: TreeArgs) -> Result<ExitCode> {
    if !daisy::PTreeMap::NODE_SIZES.contains(&a.node_size) {
        bail!(
            "--node-size must be one of {:?}",
            daisy::PTreeMap::NODE_SIZES
        );
    }
    let cfg = treebench::Config {
        dir: a.dir,
        ns: if a.ns.is_empty() {
            treebench::DEFAULT_NS.to_vec()
        } else {
            a.ns.into_iter().map(|n| n as u64).collect()
        },
        structures: if a.structures.is_empty() {
            treebench::STRUCTURES
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            a.structures
        },
        node_size: a.node_size,
        seed: a.seed,
    };
    let json = a.format == TableFormat::Json;
    // What was measured and how, and progress: above the table, or on stderr when stdout
    // carries JSON.
    let rows = treebench::run(&cfg, |s| {
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
        print!("{}", treebench::table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}
