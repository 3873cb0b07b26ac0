//! The online backup under the simulator (`daisy::Backup`, docs/FORMAT.md section 11): the
//! `single` workload's transactions on one thread, with a backup taken every [`PERIOD`]
//! transactions and finished [`SPAN`] transactions later, so its copier thread copies the
//! pool while the writer runs, and pages written meanwhile must be flagged and copied again
//! at the pause.
//!
//! Two things are checked. Every crash point of the writer, the backup's drain at the pause
//! included, is checked as in every workload: the source pool recovers to the transactions
//! that returned (a backup must not weaken its crash consistency). And every finished copy is
//! opened with the real recovery (copy-on-write, on a thread the simulator ignores: the copy is
//! another file) and must be exactly the state at its pause: `pool check` clean with every
//! object reachable, nothing to replay (the drain made every committed transaction durable and
//! raised the watermark), and equal to the model after the transactions that had returned
//! before `finish`. A copy that is not is reported as an error of the transaction after the
//! pause, with the workload's replay command. The canary `BackupPageUnflagged` (a page written
//! while the copier runs left unflagged) must be caught that way.

use anyhow::{anyhow, bail, Result};
use daisy::{Backup, Pool};
use daisy_bench::crashtest::{self, CtRoot, Model};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A backup begins before every transaction whose id is a multiple of this.
pub const PERIOD: u64 = 24;
/// Transactions the writer runs while a backup's copier copies.
pub const SPAN: u64 = 12;

/// The workload's runner: the mixed transactions, and the backups around them.
pub struct BackupRunner {
    ct: Arc<crashtest::Ct>,
    pool: Pool,
    dst: PathBuf,
    /// The model after `model.last_tx` transactions (advanced to each pause).
    model: Model,
    /// The backup running, and the transaction it began before.
    running: Option<(Backup, u64)>,
    /// Copies checked.
    pub checked: u64,
}

impl BackupRunner {
    /// On `pool`, which holds `applied` transactions of `seed`'s sequence.
    pub fn open(pool: &Pool, seed: u64, applied: u64) -> Result<BackupRunner> {
        let ct = Arc::new(crashtest::Ct::open_mix(pool, seed, crashtest::Mix::Mixed)?);
        let mut dst = pool.path().as_os_str().to_owned();
        dst.push(".backup");
        let mut model = Model::with_mix(crashtest::Mix::Mixed);
        model.advance_to(seed, applied);
        Ok(BackupRunner {
            ct,
            pool: pool.clone(),
            dst: PathBuf::from(dst),
            model,
            running: None,
            checked: 0,
        })
    }

    /// Before transaction `id` (the writer is between two transactions): finish a backup
    /// that has run for [`SPAN`] transactions and check its copy, or begin one.
    fn between(&mut self, seed: u64, id: u64) -> Result<()> {
        match self.running.take() {
            Some((b, began)) if id - began >= SPAN => {
                let report = b
                    .finish()
                    .map_err(|e| anyhow!("the backup begun before transaction {began}: {e}"))?;
                self.model.advance_to(seed, id - 1);
                let (dst, model) = (&self.dst, &self.model);
                let verdict = std::thread::scope(|s| {
                    s.spawn(|| {
                        daisy::sim::ignore_current_thread();
                        verify_copy(dst, model)
                    })
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("the copy's check panicked")))
                });
                verdict.map_err(|e| {
                    anyhow!(
                        "the backup begun before transaction {began} and finished after {} ({} pages copied at the pause) is not the state at its pause: {e}",
                        id - 1,
                        report.final_pages
                    )
                })?;
                self.checked += 1;
            }
            Some(running) => self.running = Some(running),
            None if id.is_multiple_of(PERIOD) => {
                let b = self
                    .pool
                    .begin_backup(&self.dst)
                    .map_err(|e| anyhow!("begin a backup before transaction {id}: {e}"))?;
                self.running = Some((b, id));
            }
            None => {}
        }
        Ok(())
    }
}

impl Drop for BackupRunner {
    fn drop(&mut self) {
        self.running = None; // abandons a backup running (its temporary file goes)
        let _ = std::fs::remove_file(&self.dst);
    }
}

impl crate::Runner for BackupRunner {
    fn run_tx(&mut self, seed: u64, id: u64) -> Result<()> {
        self.between(seed, id)?;
        self.ct.run_tx(seed, id).map_err(anyhow::Error::from)
    }
    fn map_shape(&self) -> (u64, u32, u64) {
        self.ct.map_shape()
    }
    fn tree_shape(&self) -> (u64, u32, u64) {
        self.ct.tree_shape()
    }
}

/// The copy at `path` must open with nothing to replay, pass `pool check` with every object
/// reachable, and hold exactly `model`.
fn verify_copy(path: &Path, model: &Model) -> Result<()> {
    let pool = Pool::open_snapshot(path, Some(crashtest::LAYOUT))
        .map_err(|e| anyhow!("the copy does not open: {e}"))?;
    let replayed = pool.recovery_report().records_replayed;
    if replayed > 0 {
        bail!("its recovery replayed {replayed} records (the drain should leave none)");
    }
    let last = pool.read(pool.root::<CtRoot>()?).last_tx;
    if last != model.last_tx {
        bail!(
            "it holds transaction {last}, the pause came after {}",
            model.last_tx
        );
    }
    let diffs = crashtest::verify(&pool, model)?;
    if let Some(d) = diffs.first() {
        bail!("{d} ({} differences in all)", diffs.len());
    }
    Ok(())
}
