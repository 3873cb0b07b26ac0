//! Online backup: a consistent copy of a pool, taken while the pool is in use.
//!
//! `cp` of a live pool is not a backup: it reads the file over a span of time while
//! transactions keep changing it, so the copy mixes states (an object freed and reused, a
//! table half rewritten) that no crash could produce. A [`Backup`] instead:
//!
//! 1. starts tracking the pages the pool flushes (`persist::dirty`), then copies the whole file
//!    to a temporary file beside the destination while the pool keeps working (a background
//!    thread), and syncs that bulk copy;
//! 2. copies the pages flushed meanwhile again, in passes, while more than
//!    [`FINAL_PAGES`] are flagged (at most [`LIVE_PASSES`] passes);
//! 3. at [`Backup::finish`], called where no transaction is running (the pause): makes every
//!    committed transaction's data durable (a drain: deferred flushes happen now, and flag
//!    their pages), copies the flagged pages and stops tracking ([`Backup::freeze`]); then,
//!    the pool in use again, sets the copy's length, syncs it and renames it into place
//!    ([`FrozenBackup::complete`]).
//!
//! Why the copy is a valid pool: after the drain, every page whose bytes changed since the
//! copier last read it is flagged (a durable store is always flushed, and the flag is set after
//! the store; see `persist::dirty`), and the final pass copies those pages while nothing
//! writes. So the copy holds the pool's bytes as of the pause, exactly, except for stores never
//! flushed, which no crash image guarantees either. The pool at the pause, with every
//! committed transaction durable, is a valid crash image; its records above the watermark (none
//! after the drain) would be replayed idempotently. Opening the copy therefore shows the state
//! after the last transaction committed before the pause. Pages of a pool that grew meanwhile
//! are zero in the source until written, and written ones are flagged: the copy is extended
//! to the source's length at the end.
//!
//! The pause is the drain plus the copy of at most about [`FINAL_PAGES`] pages (more only
//! when the writers dirty pages faster than the copier copies them for [`LIVE_PASSES`]
//! passes). The sync of the copy and its rename come after it ([`FrozenBackup::complete`]):
//! they touch only the copy, whose bytes are final once the pause is over.

use crate::error::{Error, Result};
use crate::persist::dirty::PAGE;
use crate::pool::Pool;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The copier stops its live passes once at most this many pages are flagged (16 MiB): the
/// final pass, inside the pause, copies them. Under the power-failure simulator (feature
/// `sim`), whose pools are a few MiB, none: live passes run while any page is flagged (each
/// after a short wait that lets the slowed-down writer dirty pages), racing with the writer.
pub const FINAL_PAGES: usize = if cfg!(feature = "sim") { 0 } else { 4096 };
/// Live passes over the flagged pages before the copier gives up converging (writers that
/// dirty pages faster than they are copied make the pause longer, not the copy wrong).
pub const LIVE_PASSES: u32 = 16;
/// How much lower the copier thread's CPU priority is than its process's.
const COPIER_NICE: i32 = 10;
/// Bytes per copy call of the first, whole-file pass.
const SWEEP_STEP: usize = 1 << 20;

/// What a finished backup did.
#[derive(Clone, Debug)]
pub struct BackupReport {
    /// The backup file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub file_size: u64,
    /// Bytes copied in all (the first pass, the live passes and the final one).
    pub copied_bytes: u64,
    /// Live passes over flagged pages after the first whole-file pass.
    pub live_passes: u32,
    /// Pages copied inside the pause.
    pub final_pages: u64,
    /// How long the pause held the pool ([`Backup::freeze`]; nothing may write meanwhile).
    pub pause: Duration,
    /// Of the pause: the drain, the final copy, and the rest (taking the flagged pages, the
    /// pool's length).
    pub pause_parts: [Duration; 3],
    /// After the pause ([`FrozenBackup::complete`], the pool in use again): the copy's sync
    /// and its rename into place.
    pub completion: Duration,
    /// From [`Pool::begin_backup`] to the end of [`Backup::finish`].
    pub elapsed: Duration,
}

/// Progress shared by the copier thread and the handle.
#[derive(Default)]
struct Progress {
    /// The handle gives up: the copier stops at once.
    abandon: AtomicBool,
    /// Finish was called: no more live passes.
    finishing: AtomicBool,
    /// The copier is done with its passes (or failed).
    ready: AtomicBool,
    copied: AtomicU64,
    passes: AtomicU64,
    error: Mutex<Option<std::io::Error>>,
}

/// An online backup in progress (see the module documentation). Dropping it abandons the
/// backup and removes its temporary file.
pub struct Backup {
    pool: Pool,
    dst: PathBuf,
    tmp: PathBuf,
    file: Arc<File>,
    progress: Arc<Progress>,
    copier: Option<JoinHandle<()>>,
    started: Instant,
}

impl std::fmt::Debug for Backup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backup")
            .field("dst", &self.dst)
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl Pool {
    /// Start an online backup of this pool to `dst` (replaced atomically when the backup
    /// finishes; a file there stays untouched until then). The copying runs on a background
    /// thread while the pool is used; end it with [`Backup::finish`] at a moment when no
    /// transaction is running.
    ///
    /// Precondition: no other thread is inside a transaction of this pool while this runs
    /// (a server's event loop calls it between its transactions; a program with threads takes
    /// its own lock around the call). Only one backup of a pool runs at a time.
    pub fn begin_backup(&self, dst: impl AsRef<Path>) -> Result<Backup> {
        let dst = dst.as_ref().to_path_buf();
        let tmp = prepare_destination(self, &dst)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, "create backup file", e))?;
        let dirty = &self.inner.persist.dirty;
        if !dirty.start(self.inner.map.base(), self.inner.map.reserved()) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Unsupported(format!(
                "{}: a backup of this pool is already running",
                self.path().display()
            )));
        }
        let file = Arc::new(file);
        let progress = Arc::new(Progress::default());
        let copier = {
            let (pool, file, progress) = (self.clone(), Arc::clone(&file), Arc::clone(&progress));
            std::thread::Builder::new()
                .name("daisy-backup".into())
                .spawn(move || {
                    // The copy is background work: requests come first on a busy machine.
                    crate::map::lower_thread_priority(COPIER_NICE);
                    if let Err(e) = copy_live(&pool, &file, &progress) {
                        *progress.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                    progress.ready.store(true, Ordering::Release);
                })
        };
        let copier = match copier {
            Ok(h) => h,
            Err(e) => {
                dirty.stop();
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::io(&tmp, "start backup thread", e));
            }
        };
        Ok(Backup {
            pool: self.clone(),
            dst,
            tmp,
            file,
            progress,
            copier: Some(copier),
            started: Instant::now(),
        })
    }

    /// Back this pool up to `dst` and wait for it: [`begin_backup`](Self::begin_backup) then
    /// [`Backup::finish`]. The same precondition holds for the whole call: no transaction of
    /// the pool may run meanwhile.
    pub fn backup_to(&self, dst: impl AsRef<Path>) -> Result<BackupReport> {
        let b = self.begin_backup(dst)?;
        b.finish()
    }
}

impl Backup {
    /// Whether the live copying is done, so that [`finish`](Self::finish) pauses only for the
    /// final pass. (Finish may be called earlier: it then waits for the first whole-file pass.)
    pub fn is_ready(&self) -> bool {
        self.progress.ready.load(Ordering::Acquire)
    }

    /// Bytes copied so far.
    pub fn copied_bytes(&self) -> u64 {
        self.progress.copied.load(Ordering::Relaxed)
    }

    /// Where the backup goes.
    pub fn destination(&self) -> &Path {
        &self.dst
    }

    /// Complete the backup: [`freeze`](Self::freeze), then [`FrozenBackup::complete`]. Call
    /// it where no transaction of the pool is running, and start none until it returns. The
    /// file at the destination then holds the pool as of this call, a pool that opens (and
    /// passes `daisy pool check`) like the original.
    pub fn finish(self) -> Result<BackupReport> {
        self.freeze()?.complete()
    }

    /// The pause: call it where no transaction of the pool is running, and start none until
    /// it returns. The drain and the final copy of the flagged pages make the temporary copy
    /// hold the pool as of this call; nothing reads the pool after it. What is left, the
    /// copy's sync and its rename into place ([`FrozenBackup::complete`]), touches only the
    /// copy, so it may run on another thread while the pool is used again: the pause does not
    /// wait for the backup's medium (0.3 s of a 1 GiB copy's pages on a disk).
    pub fn freeze(mut self) -> Result<FrozenBackup> {
        self.progress.finishing.store(true, Ordering::Release);
        let copier = self.copier.take();
        if let Some(h) = copier {
            let _ = h.join();
        }
        let pause_start = Instant::now();
        let failed = self
            .progress
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = failed {
            return Err(Error::io(&self.tmp, "write backup", e));
        }
        let inner = &self.pool.inner;
        // Every committed transaction's lines flushed now: their pages are flagged.
        inner.drain_all()?;
        let t_drained = Instant::now();
        let pages = inner.persist.dirty.take();
        inner.persist.dirty.stop();
        let final_pages = pages.len() as u64;
        let mapped = inner.map.len();
        copy_pages(&self.pool, &self.file, &pages, mapped)
            .map_err(|e| Error::io(&self.tmp, "write backup", e))?;
        let t_copied = Instant::now();
        let file_size = inner
            .file
            .metadata()
            .map_err(|e| Error::io(&inner.path, "stat", e))?
            .len();
        sim_event!(Backup);
        let frozen = FrozenBackup {
            dst: self.dst.clone(),
            tmp: std::mem::take(&mut self.tmp), // now the frozen copy's to remove
            file: Arc::clone(&self.file),
            file_size,
            report: BackupReport {
                path: self.dst.clone(),
                file_size,
                copied_bytes: self.progress.copied.load(Ordering::Relaxed)
                    + final_pages * PAGE as u64,
                live_passes: self.progress.passes.load(Ordering::Relaxed) as u32,
                final_pages,
                pause: pause_start.elapsed(),
                pause_parts: [
                    t_drained - pause_start,
                    t_copied - t_drained,
                    t_copied.elapsed(),
                ],
                completion: Duration::ZERO,
                elapsed: Duration::ZERO,
            },
            started: self.started,
        };
        Ok(frozen)
    }
}

/// A backup whose copy is complete ([`Backup::freeze`]): its sync and its rename into place
/// are left, which [`complete`](Self::complete) does on any thread, the pool in use again.
/// Dropping it abandons the backup and removes its temporary file.
pub struct FrozenBackup {
    dst: PathBuf,
    tmp: PathBuf,
    file: Arc<File>,
    file_size: u64,
    report: BackupReport,
    started: Instant,
}

impl std::fmt::Debug for FrozenBackup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenBackup")
            .field("dst", &self.dst)
            .finish()
    }
}

impl FrozenBackup {
    /// Where the backup goes.
    pub fn destination(&self) -> &Path {
        &self.dst
    }

    /// Sync the copy and rename it over the destination (atomically: a crash meanwhile
    /// leaves the previous backup, or none, under that name, and a temporary file beside it).
    pub fn complete(mut self) -> Result<BackupReport> {
        let t0 = Instant::now();
        let tmp = self.tmp.clone();
        let file_size = self.file_size;
        self.file
            .set_len(file_size)
            .and_then(|_| self.file.sync_all())
            .map_err(|e| Error::io(&tmp, "sync backup", e))?;
        // Replacing a big old backup would free all of its pages inside the rename (about
        // 0.2 s per GiB on tmpfs), in the pause: keep a second link to it, so the rename only
        // drops a name, and free the old file on a thread of its own afterwards.
        let mut old = self.tmp.clone().into_os_string();
        old.push(".old");
        let old = PathBuf::from(old);
        let kept_old = std::fs::hard_link(&self.dst, &old).is_ok();
        std::fs::rename(&self.tmp, &self.dst)
            .map_err(|e| Error::io(&self.dst, "rename backup into place", e))?;
        if let Some(dir) = self.dst.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        if kept_old {
            let _ = std::thread::Builder::new()
                .name("daisy-backup-free".into())
                .spawn(move || {
                    let _ = std::fs::remove_file(old);
                });
        }
        let mut report = self.report.clone();
        report.completion = t0.elapsed();
        report.elapsed = self.started.elapsed();
        self.tmp = PathBuf::new(); // renamed: nothing for Drop to remove
        Ok(report)
    }
}

impl Drop for FrozenBackup {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Drop for Backup {
    fn drop(&mut self) {
        self.progress.abandon.store(true, Ordering::Release);
        if let Some(h) = self.copier.take() {
            let _ = h.join();
        }
        self.pool.inner.persist.dirty.stop();
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Refuse a destination that is the pool itself (renaming over it would detach the live file
/// from its name) or a pool open elsewhere; return the temporary name beside `dst`.
fn prepare_destination(pool: &Pool, dst: &Path) -> Result<PathBuf> {
    let bad =
        |why: String| Error::InvalidOption(format!("backup destination {}: {why}", dst.display()));
    let name = dst
        .file_name()
        .ok_or_else(|| bad("not a file name".into()))?
        .to_string_lossy()
        .into_owned();
    let dir = match dst.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
    }
    let src_meta = pool
        .inner
        .file
        .metadata()
        .map_err(|e| Error::io(pool.path(), "stat", e))?;
    if let Ok(m) = std::fs::metadata(dst) {
        if m.is_dir() {
            return Err(Error::IsADirectory {
                path: dst.to_path_buf(),
            });
        }
        if m.dev() == src_meta.dev() && m.ino() == src_meta.ino() {
            return Err(bad("that is the pool being backed up".into()));
        }
        if let Ok(f) = File::open(dst) {
            if !crate::map::try_lock_shared(&f).map_err(|e| Error::io(dst, "lock", e))? {
                return Err(bad("it is a pool that is open (served or in use)".into()));
            }
        }
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    Ok(dir.join(format!(
        ".{name}.backup-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )))
}

/// The copier thread: the whole file once, then the flagged pages until few are left.
fn copy_live(pool: &Pool, file: &File, progress: &Progress) -> std::io::Result<()> {
    let map = &pool.inner.map;
    let len = map.len();
    let mut off = 0usize;
    while off < len {
        if progress.abandon.load(Ordering::Acquire) {
            return Ok(());
        }
        let n = SWEEP_STEP.min(len - off);
        map.copy_to_file(file, off as u64, n)?;
        progress.copied.fetch_add(n as u64, Ordering::Relaxed);
        off += n;
    }
    // The bulk reaches the backup's medium before the pause, which then syncs little.
    file.sync_data()?;
    let dirty = &pool.inner.persist.dirty;
    for _ in 0..LIVE_PASSES {
        if progress.abandon.load(Ordering::Acquire) || progress.finishing.load(Ordering::Acquire) {
            break;
        }
        #[cfg(feature = "sim")]
        std::thread::sleep(Duration::from_millis(2));
        // FINAL_PAGES is 0 under the simulator (`sim`): then "none left".
        #[allow(clippy::absurd_extreme_comparisons)]
        let few_left = dirty.count() <= FINAL_PAGES;
        if few_left {
            break;
        }
        let pages = dirty.take();
        copy_pages(pool, file, &pages, map.len())?;
        progress
            .copied
            .fetch_add((pages.len() * PAGE) as u64, Ordering::Relaxed);
        progress.passes.fetch_add(1, Ordering::Relaxed);
        sim_event!(BackupLivePass);
    }
    // What the live passes wrote reaches the medium now; the pause syncs only its own pages.
    file.sync_data()?;
    Ok(())
}

/// Copy the listed pages (increasing numbers), runs of adjacent pages in one call, within the
/// mapped length.
fn copy_pages(pool: &Pool, file: &File, pages: &[usize], mapped: usize) -> std::io::Result<()> {
    let map = &pool.inner.map;
    let mut i = 0;
    while i < pages.len() {
        let mut j = i + 1;
        while j < pages.len() && pages[j] == pages[j - 1] + 1 && (j - i) * PAGE < SWEEP_STEP {
            j += 1;
        }
        let start = pages[i] * PAGE;
        let end = ((pages[j - 1] + 1) * PAGE).min(mapped);
        if start < end {
            map.copy_to_file(file, start as u64, end - start)?;
        }
        i = j;
    }
    Ok(())
}
