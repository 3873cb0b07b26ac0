//! `daisy bench`: Daisy against its rivals, measured side by side in one run. The
//! measurements live in the daisy-bench crate; these modules are their command lines.

mod hashmap;
mod io;
mod kv;
mod open;
mod seq;
mod tree;
mod tx;

use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Recovery time: fill a pool with N small objects, then time opening it after a clean
    /// close and after a crash. Opening never scans the heap, so this must not grow with N.
    Open(open::OpenArgs),
    /// Small transactions: Daisy, PMDK's libpmemobj and the bare store+flush+fence floor.
    Tx(tx::TxArgs),
    /// Seed 000's table: random insertion of N (u32, u32) pairs, persisted by each mechanism
    /// (store+flush+fence, PMDK transactions, msync, fsync) and in a DRAM HashMap, side by side.
    #[command(long_about = hashmap::ABOUT)]
    Hashmap(hashmap::HashmapArgs),
    /// Seed 000's Redis table: the real redis-benchmark against `daisy serve` and against
    /// redis-server in each persistence mode (none, rdb, aof everysec, aof always), side by
    /// side in one run; plus memory per key and restart time.
    #[command(long_about = kv::ABOUT)]
    Kv(kv::KvArgs),
    /// The persistent sequence (Redis's lists): pushes and pops at both ends, index and range
    /// against std's VecDeque and a PMDK list.
    #[command(long_about = seq::ABOUT)]
    Seq(seq::SeqArgs),
    /// The persistent ordered map (sorted-set shaped keys): inserts, gets, ranks, range scans
    /// and removals against std's BTreeMap and PMDK's B-tree.
    #[command(long_about = tree::ABOUT)]
    Tree(tree::TreeArgs),
    /// Seed 002's fio matrix: Daisy's block store against libpmemblk and fio's engines
    /// (pmemblk, libpmem, mmap, psync with and without fsync), MB/s per rw x block size x jobs.
    #[command(long_about = io::ABOUT)]
    Io(io::IoArgs),
}

pub fn run(b: BenchCmd) -> Result<ExitCode> {
    match b {
        BenchCmd::Open(a) => open::run(a),
        BenchCmd::Tx(a) => tx::run(a),
        BenchCmd::Hashmap(a) => hashmap::run(a),
        BenchCmd::Kv(a) => kv::run(a),
        BenchCmd::Seq(a) => seq::run(a),
        BenchCmd::Tree(a) => tree::run(a),
        BenchCmd::Io(a) => io::run(a),
    }
}
