//! `daisy bench io --validate` (seed 003's data validation): every written block carries its
//! block number, a version and a checksum (`blockcrash::block`); after a failure every
//! acknowledged block is read back and the **lost** (older than acknowledged, or zeros) and
//! **corrupt** (torn, mixed, another block's) ones are counted.
//!
//! * After SIGKILL of the writer (`blockcrash`, four writer threads in a child process):
//!   Daisy's block store, and a file written by `pwrite`, `pwrite` + `fdatasync`, stores into
//!   a shared mapping, stores + `msync`. A kill leaves the page cache to the kernel, so the
//!   file paths are expected to lose nothing here either: the page cache survives a process.
//! * After a power failure: the file paths under the model of `powerfail` (unsynced pages
//!   are lost; an upper bound, see there), by sync policy; Daisy's block store under the real
//!   power-failure simulator's `blocks` workload (run by the command line, which owns the
//!   simulator binary), whose every crash image must hold every acknowledged block whole.

use super::powerfail::{self, SyncEvery};
use crate::blockcrash::{self, Backend};
use crate::table::{grouped, Table};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// One line of the validation table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ValidationRow {
    pub kind: &'static str,
    pub mechanism: String,
    /// "SIGKILL", "power failure (model)", "power failure (simulator)".
    pub failure: String,
    /// Kills, power failures or crash images.
    pub runs: u64,
    pub writes_acked: u64,
    /// Acknowledged blocks read back and compared (crash images for the simulator).
    pub blocks_checked: u64,
    pub lost: u64,
    pub corrupt: u64,
    /// Blocks torn by a write never acknowledged (file paths: a write is not atomic).
    pub torn_in_flight: u64,
    pub where_: String,
    pub note: String,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub kills: u64,
    pub seed: u64,
    pub child_cmd: Vec<String>,
    pub backends: Vec<Backend>,
    /// Power failures per sync policy in the model.
    pub power_failures: u64,
    /// Writes per power-failure run.
    pub writes: u64,
}

/// The kill rows and the model's rows.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<ValidationRow>> {
    std::fs::create_dir_all(&cfg.dir)?;
    let fs = super::methods::fs_of(&cfg.dir);
    let mut rows = vec![];
    for &b in &cfg.backends {
        let c = blockcrash::Config {
            pool: cfg.dir.join(format!(
                "daisy-bench-io-validate-{}-{}",
                std::process::id(),
                b.name()
            )),
            kills: cfg.kills,
            seed: cfg.seed,
            max_delay: std::time::Duration::from_millis(40),
            child_cmd: cfg.child_cmd.clone(),
            backend: b,
            block_size: blockcrash::BLOCK,
        };
        let s = blockcrash::run(&c, |_| {});
        let _ = std::fs::remove_file(&c.pool);
        let s = s?;
        let row = ValidationRow {
            kind: "validation",
            mechanism: b.name().into(),
            failure: "SIGKILL".into(),
            runs: s.kills,
            writes_acked: s.writes_acked,
            blocks_checked: s.blocks_verified,
            lost: s.lost,
            corrupt: s.corrupt,
            torn_in_flight: s.torn_in_flight,
            where_: s.mode.clone(),
            note: s.messages.first().cloned().unwrap_or_default(),
        };
        progress(&format!(
            "{:<17} SIGKILL x{}: {} writes acknowledged, lost {}, corrupt {}, torn unacknowledged {}",
            row.mechanism, row.runs, row.writes_acked, row.lost, row.corrupt, row.torn_in_flight
        ));
        rows.push(row);
    }
    for sync in [
        SyncEvery::Never,
        SyncEvery::Writes(64),
        SyncEvery::Writes(1),
    ] {
        let mut row = ValidationRow {
            kind: "validation",
            mechanism: format!("file, {}", sync.describe()),
            failure: "power failure (model)".into(),
            runs: 0,
            writes_acked: 0,
            blocks_checked: 0,
            lost: 0,
            corrupt: 0,
            torn_in_flight: 0,
            where_: format!("a file on {fs}, unsynced pages dropped"),
            note: String::new(),
        };
        for k in 0..cfg.power_failures {
            let o = powerfail::run(
                &model_path(&cfg.dir),
                blockcrash::BLOCK as usize,
                blockcrash::NBLOCKS,
                cfg.writes,
                sync,
                cfg.seed.wrapping_add(k),
                None,
            )?;
            row.runs += 1;
            row.writes_acked += o.writes_acked;
            row.blocks_checked += o.blocks_acked;
            row.lost += o.lost;
            row.corrupt += o.corrupt;
            if row.note.is_empty() {
                row.note = o.problems.first().cloned().unwrap_or_default();
            }
        }
        progress(&format!(
            "{:<32} power failure (model) x{}: {} acknowledged blocks, lost {}, corrupt {}",
            row.mechanism, row.runs, row.blocks_checked, row.lost, row.corrupt
        ));
        rows.push(row);
    }
    Ok(rows)
}

fn model_path(dir: &Path) -> PathBuf {
    dir.join(format!(
        "daisy-bench-io-powerfail-{}.data",
        std::process::id()
    ))
}

/// The row of Daisy's block store under the power-failure simulator (`blocks` workload).
/// `images` crash images checked, `failures` of them with a lost or torn block (or another
/// failed check), `writes` the workload's block writes.
pub fn simulator_row(
    images: u64,
    failures: u64,
    writes: u64,
    seed: u64,
    note: String,
) -> ValidationRow {
    ValidationRow {
        kind: "validation",
        mechanism: "daisy".into(),
        failure: "power failure (simulator)".into(),
        runs: images,
        writes_acked: writes,
        blocks_checked: images,
        lost: failures,
        corrupt: 0,
        torn_in_flight: 0,
        where_: format!(
            "daisy-powerfail --workload blocks --seed {seed}: runs = crash images, each read back LBA by LBA; lost = images with a lost or torn block"
        ),
        note,
    }
}

/// Run the power-failure simulator binary `sim` (`daisy-powerfail`) on its `blocks` workload
/// in `dir` with `budget` crash images: Daisy's row (a row saying why when it could not run,
/// `where_` = "not run").
pub fn simulator_run(sim: &Path, dir: &Path, budget: u64, seed: u64) -> ValidationRow {
    let missing = |why: String| {
        let mut r = simulator_row(0, 0, 0, seed, why);
        r.where_ = "not run".into();
        r
    };
    let out = std::process::Command::new(sim)
        .args(["--workload", "blocks", "--format", "json"])
        .arg("--budget")
        .arg(budget.max(1).to_string())
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--dir")
        .arg(dir)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return missing(format!("{}: {e}", sim.display())),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(v) = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    else {
        return missing(format!(
            "the simulator printed no summary: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    let w = &v["workloads"][0];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let note = w["messages"][0].as_str().unwrap_or("").to_string();
    simulator_row(
        n(&w["images"]),
        n(&w["failures"]),
        n(&w["transactions"]),
        seed,
        note,
    )
}

/// The validation table: a row per mechanism and failure.
pub fn table(rows: &[ValidationRow]) -> Table {
    let mut t = Table::new([
        "mechanism",
        "failure",
        "runs",
        "writes acked",
        "blocks checked",
        "lost",
        "corrupt",
        "torn unacked",
        "where",
    ])
    .left(&[0, 1, 8]);
    for r in rows {
        t.row([
            r.mechanism.clone(),
            r.failure.clone(),
            grouped(r.runs as f64, 0),
            grouped(r.writes_acked as f64, 0),
            grouped(r.blocks_checked as f64, 0),
            grouped(r.lost as f64, 0),
            grouped(r.corrupt as f64, 0),
            grouped(r.torn_in_flight as f64, 0),
            r.where_.clone(),
        ]);
    }
    t
}

/// What the columns mean (printed above the table).
pub fn legend() -> String {
    format!(
        "data validation (seed 003): {} B self-describing blocks (block number, version, checksum); \
         lost = a block older than its acknowledged version after the failure, corrupt = a block not whole \
         (for Daisy also one torn by a write in flight: its blocks are atomic), torn unacked = a file block torn \
         by a write never acknowledged (a store sequence or write cut by the kill: not atomic, but nothing \
         acknowledged was lost)",
        blockcrash::BLOCK
    )
}

/// What the failures can and cannot show (printed under the table).
pub const CAVEAT: &str = "SIGKILL leaves the page cache to the kernel: a file written without \
any sync loses nothing to a killed process. The power-failure model drops every page not synced \
(the kernel's own write-back after vm.dirty_expire_centisecs is not modelled, so the file rows \
are an upper bound); Daisy's row is the real simulator's, which checks every cache line's \
possible states.";

/// The printed table.
pub fn report(rows: &[ValidationRow]) -> String {
    let mut out = format!("{}\n", legend());
    out += &table(rows).text();
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        out += &format!("  {} / {}: {}\n", r.mechanism, r.failure, r.note);
    }
    out += &format!("  {CAVEAT}\n");
    out
}
