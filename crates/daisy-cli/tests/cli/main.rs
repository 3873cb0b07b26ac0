//! The `daisy` command as a user runs it: real processes, real pool files.
//!
//! One test binary (`cargo test -p daisy-cli --test cli`), its tests grouped by scenario:
//!
//! - `pool`: `daisy pool create/info/check`, bad input, damaged allocator metadata, hash
//!   maps and sequences.
//! - `crashtest`: the kill torture (pmem and msync mode).
//! - `bench_tx`, `bench_hashmap`, `bench_kv`, `bench_seq`, `bench_tree`: `daisy bench tx`,
//!   `hashmap`, `kv` (against redis-server, skipped where it is not installed), `seq` and
//!   `tree` (against std's BTreeMap and PMDK's btree_map example).
//! - `report`: `daisy report --quick`: its files, verdicts and page (headless Chromium); the
//!   file rivals on a disk.
//! - `help`: `--help` everywhere.
//!
//! Shared helpers (`daisy`, `tmpdir`, `run`, `text`, `json_lines`) live here. The slow tests,
//! which `scripts/test.sh --quick` skips by name, are the `bench_*` and `report_*` ones and the
//! kill tortures (`crashtest_loses_nothing`, `crashtest_in_msync_mode`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod bench_hashmap;
mod bench_io;
mod bench_kv;
mod bench_seq;
mod bench_tree;
mod bench_tx;
mod crashtest;
mod help;
mod pool;
mod report;

fn daisy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_daisy"))
}

fn tmpdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run daisy")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad json {l}: {e}")))
        .collect()
}
