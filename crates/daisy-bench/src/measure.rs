//! Small pieces the library benchmarks share: a timed loop with the flush and fence counts
//! it caused, a scratch file removed however a measurement ends, and a directory's file
//! system name.

use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Run `f`, `ops` operations: (ops, seconds, cache lines flushed, fences) it took.
pub fn timed(ops: u64, f: impl FnOnce() -> Result<()>) -> Result<(u64, f64, u64, u64)> {
    daisy::counters::take();
    let t0 = Instant::now();
    f()?;
    let secs = t0.elapsed().as_secs_f64();
    let c = daisy::counters::take();
    Ok((ops, secs, c.flushes, c.fences))
}

/// A file (a pool, or one PMDK created) removed when dropped.
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The file system `dir` is on ("?" when it cannot be opened).
pub fn fs_of(dir: &Path) -> String {
    std::fs::File::open(dir)
        .map(|f| daisy::internals::fs_type_name(&f).to_string())
        .unwrap_or_else(|_| "?".into())
}
