//! The page cache's write-back knobs (seed 004), read from `/proc/sys/vm` and printed with
//! every file-I/O result: they decide when the kernel writes dirty pages of a file written
//! without a sync, so they decide what a power failure takes.
//!
//! They are changed only behind an explicit flag (`daisy bench io --vm-knob dirty_ratio=5`):
//! [`KnobGuard::apply`] reads every knob's old value first, writes the new ones, and puts the
//! old ones back when the guard is dropped (the run ended, failed or panicked) or when the
//! process gets SIGINT, SIGTERM or SIGHUP (a thread restores them, then the signal takes its
//! default course). A knob that cannot be written (not root, a read-only `/proc/sys` in a
//! container) is a clear error, and the knobs already written are put back first.
//!
//! The directory is `/proc/sys/vm`, or [`DIR_ENV`] when set: the tests point it at a
//! temporary directory, so the set-and-restore logic is tested without root.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The knobs seed 004 names, in its order.
pub const KNOBS: [&str; 4] = [
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
];

/// An environment variable naming another directory to read and write the knobs in instead
/// of `/proc/sys/vm` (for tests).
pub const DIR_ENV: &str = "DAISY_SYSCTL_VM_DIR";

/// Where the knobs are: `/proc/sys/vm`, or [`DIR_ENV`].
pub fn vm_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/proc/sys/vm"))
}

/// Each knob's value (None where it cannot be read, e.g. no /proc).
pub fn read() -> Vec<(&'static str, Option<u64>)> {
    read_in(&vm_dir())
}

/// [`read`] in `dir`.
pub fn read_in(dir: &Path) -> Vec<(&'static str, Option<u64>)> {
    KNOBS
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(dir.join(k))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            (*k, v)
        })
        .collect()
}

/// Knob guards alive in this process (the printed line says the knobs were set).
static GUARDS: AtomicUsize = AtomicUsize::new(0);

/// One line: `vm.dirty_ratio=20 vm.dirty_background_ratio=10 ...`, with what they mean and
/// whether this run changed them (a [`KnobGuard`] is alive).
pub fn describe() -> String {
    describe_in(&vm_dir(), GUARDS.load(Ordering::Relaxed) > 0)
}

/// [`describe`] in `dir`; `changed`: this run set some of them (`--vm-knob`).
pub fn describe_in(dir: &Path, changed: bool) -> String {
    let kv: Vec<String> = read_in(dir)
        .into_iter()
        .map(|(k, v)| {
            format!(
                "vm.{k}={}",
                v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
            )
        })
        .collect();
    let how = if changed {
        "set by --vm-knob for this run, restored afterwards"
    } else {
        "read only, not changed"
    };
    format!(
        "page cache ({how}): {} (dirty pages older than dirty_expire are written back by the \
         flusher, which wakes every dirty_writeback; a writer is throttled above dirty_ratio \
         percent of memory dirty)",
        kv.join(" ")
    )
}

/// One `--vm-knob` setting: a knob of [`KNOBS`] and its new value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub knob: &'static str,
    pub value: u64,
}

impl std::str::FromStr for Setting {
    type Err = String;

    /// `dirty_ratio=5` (or `vm.dirty_ratio=5`): one of the four knobs, a value in its range
    /// (the ratios are percents, 0-100; the centiseconds at most 2^31 - 1).
    fn from_str(s: &str) -> std::result::Result<Setting, String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected KNOB=VALUE, e.g. dirty_ratio=5"))?;
        let k = k.trim();
        let k = k.strip_prefix("vm.").unwrap_or(k);
        let knob = KNOBS.iter().find(|n| **n == k).ok_or_else(|| {
            format!(
                "{k:?} is not one of the page-cache knobs this flag sets: {}",
                KNOBS.join(", ")
            )
        })?;
        let value: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{k}: expected a whole number, got {:?}", v.trim()))?;
        let max = if knob.ends_with("_ratio") {
            100
        } else {
            i32::MAX as u64
        };
        if value > max {
            return Err(format!("{k}: at most {max}, got {value}"));
        }
        Ok(Setting { knob, value })
    }
}

/// The old values to put back, shared by the guard and its signal thread (whoever comes
/// first takes them).
type Saved = Arc<Mutex<Option<Vec<(PathBuf, String)>>>>;

/// Knobs set for a run; dropping it (or a SIGINT, SIGTERM, SIGHUP) restores the old values.
pub struct KnobGuard {
    saved: Saved,
    signals: Option<signal_hook::iterator::Handle>,
    /// What was set, for the output: `vm.dirty_ratio=5 (was 20)`.
    pub changes: Vec<String>,
    /// Counted in [`GUARDS`] until restored.
    counted: bool,
}

/// Why a knob could not be read or written, in words a user can act on.
fn why(path: &Path, e: &std::io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            ": permission denied (changing the page-cache knobs needs root)"
        }
        Some(libc::EROFS) => {
            ": read-only file system (/proc/sys is mounted read-only, as in most containers)"
        }
        Some(libc::EINVAL) => ": the kernel refused the value",
        _ => "",
    };
    format!("{}: {e}{hint}", path.display())
}

/// Put the saved values back; every failure is reported, none stops the others.
fn restore_saved(saved: &Saved) -> Result<()> {
    let Some(list) = saved.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return Ok(());
    };
    let mut errors = vec![];
    for (path, old) in list.iter().rev() {
        if let Err(e) = std::fs::write(path, old) {
            errors.push(why(path, &e));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "could not restore the page-cache knobs: {}",
            errors.join("; ")
        ))
    }
}

impl KnobGuard {
    /// Set `settings` in `dir` (each knob at most once) and return the guard that restores
    /// them. Every old value is read before anything is written; when a write fails, the
    /// knobs already written are put back and the error says why. With `on_signal`, SIGINT,
    /// SIGTERM and SIGHUP restore the knobs before the process ends.
    pub fn apply(dir: &Path, settings: &[Setting], on_signal: bool) -> Result<KnobGuard> {
        for (i, s) in settings.iter().enumerate() {
            if settings[..i].iter().any(|o| o.knob == s.knob) {
                bail!("--vm-knob {}: given twice", s.knob);
            }
        }
        let mut old = vec![];
        for s in settings {
            let path = dir.join(s.knob);
            let v = std::fs::read_to_string(&path)
                .map_err(|e| anyhow!("cannot read vm.{}: {}", s.knob, why(&path, &e)))?;
            old.push((path, v.trim().to_string()));
        }
        let saved: Saved = Arc::new(Mutex::new(Some(vec![])));
        GUARDS.fetch_add(1, Ordering::Relaxed);
        let mut guard = KnobGuard {
            saved: Arc::clone(&saved),
            signals: None,
            changes: vec![],
            counted: true,
        };
        if on_signal {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
                .context("registering the signal handler that restores the knobs")?;
            guard.signals = Some(signals.handle());
            let saved = Arc::clone(&saved);
            std::thread::spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    match restore_saved(&saved) {
                        Ok(()) => eprintln!("signal {sig}: the page-cache knobs are restored"),
                        Err(e) => eprintln!("signal {sig}: {e:#}"),
                    }
                    // The signal's own course (the process ends as it would have).
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                    std::process::exit(128 + sig);
                }
            });
        }
        for (s, (path, was)) in settings.iter().zip(&old) {
            // The write and its record under the lock: a signal's restore waits for both.
            let mut list = saved.lock().unwrap_or_else(|p| p.into_inner());
            let written = std::fs::write(path, s.value.to_string());
            if written.is_ok() {
                list.as_mut()
                    .expect("not restored yet")
                    .push((path.clone(), was.clone()));
            }
            drop(list);
            if let Err(e) = written {
                let msg = format!("cannot set vm.{}={}: {}", s.knob, s.value, why(path, &e));
                let restored = guard.restore();
                return Err(match restored {
                    Ok(()) => anyhow!("{msg}"),
                    Err(r) => anyhow!("{msg}; {r:#}"),
                });
            }
            guard
                .changes
                .push(format!("vm.{}={} (was {was})", s.knob, s.value));
        }
        Ok(guard)
    }

    /// Put the old values back now (a second call, and the drop, do nothing).
    pub fn restore(&mut self) -> Result<()> {
        let r = restore_saved(&self.saved);
        if let Some(h) = self.signals.take() {
            h.close();
        }
        if std::mem::take(&mut self.counted) {
            GUARDS.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for /proc/sys/vm with the kernel's defaults.
    fn fake_vm() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (k, v) in KNOBS.iter().zip(["20", "10", "3000", "500"]) {
            std::fs::write(d.path().join(k), format!("{v}\n")).unwrap();
        }
        d
    }

    fn value(d: &Path, k: &str) -> String {
        std::fs::read_to_string(d.join(k))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn the_knobs_are_read_from_proc_when_it_exists() {
        let got = super::read_in(Path::new("/proc/sys/vm"));
        assert_eq!(got.len(), 4);
        if std::path::Path::new("/proc/sys/vm/dirty_ratio").exists() {
            assert!(got.iter().all(|(_, v)| v.is_some()), "{got:?}");
            assert!(describe_in(Path::new("/proc/sys/vm"), false)
                .contains("vm.dirty_expire_centisecs="));
        }
    }

    #[test]
    fn settings_name_one_of_the_four_knobs_with_a_value_in_range() {
        let s: Setting = "dirty_ratio=5".parse().unwrap();
        assert_eq!(
            s,
            Setting {
                knob: "dirty_ratio",
                value: 5
            }
        );
        let s: Setting = "vm.dirty_expire_centisecs = 100".parse().unwrap();
        assert_eq!(s.value, 100);
        for (bad, says) in [
            ("swappiness=10", "not one of the page-cache knobs"),
            ("dirty_ratio", "expected KNOB=VALUE"),
            ("dirty_ratio=-1", "whole number"),
            ("dirty_ratio=101", "at most 100"),
            (
                "dirty_writeback_centisecs=99999999999",
                "at most 2147483647",
            ),
        ] {
            let e = bad.parse::<Setting>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_guard_sets_the_knobs_and_restores_them_when_dropped() {
        let d = fake_vm();
        let settings: Vec<Setting> = ["dirty_ratio=5", "dirty_expire_centisecs=100"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        {
            let g = KnobGuard::apply(d.path(), &settings, false).unwrap();
            assert_eq!(value(d.path(), "dirty_ratio"), "5");
            assert_eq!(value(d.path(), "dirty_expire_centisecs"), "100");
            assert_eq!(value(d.path(), "dirty_background_ratio"), "10");
            assert_eq!(
                g.changes,
                [
                    "vm.dirty_ratio=5 (was 20)",
                    "vm.dirty_expire_centisecs=100 (was 3000)"
                ]
            );
            assert!(describe_in(d.path(), true).contains("vm.dirty_ratio=5 "));
        }
        assert_eq!(value(d.path(), "dirty_ratio"), "20");
        assert_eq!(value(d.path(), "dirty_expire_centisecs"), "3000");
    }

    #[test]
    fn a_run_that_fails_restores_the_knobs_on_its_way_out() {
        let d = fake_vm();
        let settings = vec!["dirty_background_ratio=1".parse().unwrap()];
        let run = || -> Result<()> {
            let _g = KnobGuard::apply(d.path(), &settings, false)?;
            assert_eq!(value(d.path(), "dirty_background_ratio"), "1");
            bail!("the benchmark failed")
        };
        assert!(run().is_err());
        assert_eq!(value(d.path(), "dirty_background_ratio"), "10");
    }

    #[test]
    fn a_knob_that_cannot_be_written_is_an_error_and_undoes_the_others() {
        let d = fake_vm();
        // The third knob reads but cannot be written (a link to /proc/version: EIO for root,
        // EACCES for anyone else): the two before it were set and must be put back.
        let bad = d.path().join("dirty_expire_centisecs");
        std::fs::remove_file(&bad).unwrap();
        std::os::unix::fs::symlink("/proc/version", &bad).unwrap();
        let settings: Vec<Setting> = [
            "dirty_ratio=5",
            "dirty_background_ratio=2",
            "dirty_expire_centisecs=100",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let e = KnobGuard::apply(d.path(), &settings, false)
            .err()
            .expect("an error");
        assert!(
            format!("{e:#}").contains("vm.dirty_expire_centisecs"),
            "{e:#}"
        );
        assert_eq!(value(d.path(), "dirty_ratio"), "20");
        assert_eq!(value(d.path(), "dirty_background_ratio"), "10");
        // A directory without the knobs: nothing is written, the error names the file.
        let empty = tempfile::tempdir().unwrap();
        let e = KnobGuard::apply(empty.path(), &settings[..1], false)
            .err()
            .expect("an error");
        assert!(
            format!("{e:#}").contains("cannot read vm.dirty_ratio"),
            "{e:#}"
        );
        // A knob given twice is refused before anything is read.
        let twice: Vec<Setting> = vec![settings[0].clone(), settings[0].clone()];
        let e = KnobGuard::apply(d.path(), &twice, false)
            .err()
            .expect("an error");
        assert!(format!("{e:#}").contains("given twice"), "{e:#}");
    }
}
