//! The `tree` workload on its own: at its share of the default budget it passes without a
//! fault while its ordered map grows to three levels or more under the simulator (splits of
//! leaves and internal nodes, new roots; merges and frees as ranges are removed), and the
//! canary of its rule, `TreeSplitEarly` (a split that makes the old leaf's shrunken header
//! durable before the commit), is caught with a replay command. `must_fail.rs` runs every
//! canary of every workload; this test says what the tree workload itself must show. (One
//! test per file: the simulator and the fault switches are process-wide.)

use daisy::sim::{self, Fault};
use daisy_powerfail::{run_workload, Workload, DEFAULT_BUDGET};

#[test]
fn tree_workload_passes_clean_and_catches_an_early_split() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let seed = std::env::var("DAISY_POWERFAIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261125u64);
    let budget = DEFAULT_BUDGET / Workload::ALL.len() as u64;
    eprintln!("seed {seed}, {budget} images");
    sim::clear_faults();
    let clean = run_workload(d.path(), seed, Workload::Tree, budget, 32).unwrap();
    eprintln!(
        "clean: {} transactions, {} crash points, {} images, tree {:?} (nodes, levels, entries), reached {:?}",
        clean.transactions, clean.crash_points, clean.images, clean.tree_after, clean.reached
    );
    assert_eq!(clean.failures, 0, "{:?}", clean.messages);
    assert_eq!(clean.fences_without_point, 0, "{clean:?}");
    assert!(clean.images >= budget, "{clean:?}");
    assert!(
        clean.tree_after.1 >= 3,
        "tree levels: {:?}",
        clean.tree_after
    );
    assert!(clean.second_life_from.is_some(), "{clean:?}");
    for f in [Fault::TreeSplitEarly, Fault::EarlyBlockReuse] {
        assert!(
            clean.reached[&format!("{f:?}")] > 0,
            "{f:?}: {:?}",
            clean.reached
        );
    }
    sim::inject(Fault::TreeSplitEarly);
    let r = run_workload(d.path(), seed, Workload::Tree, budget, 32).unwrap();
    sim::clear_faults();
    eprintln!("injected: {} images; {:?}", r.images, r.messages.first());
    assert!(
        r.failures > 0,
        "TreeSplitEarly not caught in {} images",
        r.images
    );
    assert!(
        r.messages[0].contains("replay: daisy crashtest --power-fail --seed")
            && r.messages[0].contains("--workload tree"),
        "{r:?}"
    );
}
