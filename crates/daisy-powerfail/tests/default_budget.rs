//! The default run, as CI runs it: every workload at its share of the default budget, no
//! failure, and every fence of every thread a crash point; the concurrent workload's threads
//! really commit at the same time and make the library help, wait for slots and commit one
//! word in place; the blocks workload's three writers all fence; every other workload has a second life whose recovery had crash points.
//! (One test per file: the simulator is process-wide.)

use daisy_powerfail::{Workload, DEFAULT_BUDGET};

#[test]
fn default_budget_passes_on_every_workload() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let seed = std::env::var("DAISY_POWERFAIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122);
    let cfg = daisy_powerfail::Config {
        dir: d.path().to_path_buf(),
        seed,
        budget: DEFAULT_BUDGET,
        workloads: Workload::ALL.to_vec(),
        per_point: 32,
    };
    let s = daisy_powerfail::run(&cfg, |_| {}).unwrap();
    eprintln!(
        "seed {seed}: {} crash points, {} images, {} failures in {:.1} s",
        s.crash_points, s.images, s.failures, s.seconds
    );
    for w in &s.workloads {
        eprintln!(
            "{}: {} transactions, {} crash points, threads {:?}, events {:?}",
            w.workload, w.transactions, w.crash_points, w.threads, w.events
        );
        for m in &w.messages {
            eprintln!("{m}");
        }
    }
    assert_eq!(s.failures, 0);
    assert!(s.images >= DEFAULT_BUDGET, "{s:?}");
    assert_eq!(s.fences_without_point, 0, "{s:?}");
    for w in &s.workloads {
        // Every fence of every thread was a crash point (plus the points taken between fences).
        let points: u64 = w.threads.iter().map(|t| t.crash_points).sum();
        let fences: u64 = w.threads.iter().map(|t| t.fences).sum();
        assert_eq!(fences, w.fences, "{w:?}");
        assert!(points >= fences, "{w:?}");
        if w.workload == "concurrent" {
            let busy = w.threads.iter().filter(|t| t.crash_points > 10).count();
            assert_eq!(busy, 4, "every thread fences: {:?}", w.threads);
            for e in [
                "overlapping-commit",
                "help",
                "slot-wait",
                "in-place-word",
                "watermark-write",
            ] {
                assert!(
                    w.events[e] > 0,
                    "the concurrent workload made no {e}: {:?}",
                    w.events
                );
            }
        } else if w.workload == "blocks" {
            // Three writers on a format 1 store, then three on a format 2 store (threads
            // named `v2/...`): every one of them fences.
            for v2 in [false, true] {
                let busy = w
                    .threads
                    .iter()
                    .filter(|t| t.thread.starts_with("v2/") == v2 && t.crash_points > 10)
                    .count();
                assert_eq!(
                    busy, 3,
                    "every writer fences (format 2: {v2}): {:?}",
                    w.threads
                );
            }
        } else {
            assert!(w.second_life_from.is_some(), "{w:?}");
            assert!(w.recovery_points > 0, "{w:?}");
        }
        if w.workload == "backup" {
            // Copies finished and checked, and copier passes that raced with the writer.
            for e in ["backup", "backup-live-pass"] {
                assert!(
                    w.events[e] > 0,
                    "the backup workload made no {e}: {:?}",
                    w.events
                );
            }
        }
    }
}
