//! The simulator must catch the bugs it exists for. Each workload runs clean at its share of
//! the default budget (no failure, no fence without a crash point), which tells the rules it
//! exercises; then every one of those rules is broken in turn (`daisy::sim::Fault`) and the
//! same run must report a failure with its replay command, within the same budget. (One test
//! per file: the simulator and the fault switches are process-wide.) DAISY_POWERFAIL_WORKLOAD
//! names one workload to try alone.

use daisy::sim::{self, Fault};
use daisy_powerfail::{canary, run_workload, Workload, DEFAULT_BUDGET};

#[test]
fn every_rule_a_workload_exercises_has_a_canary_the_simulator_catches() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let seed = std::env::var("DAISY_POWERFAIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261124u64);
    let budget = DEFAULT_BUDGET / Workload::ALL.len() as u64;
    eprintln!("seed {seed}, {budget} images per workload");
    // DAISY_POWERFAIL_WORKLOAD=kv: that workload's canaries only.
    let only = std::env::var("DAISY_POWERFAIL_WORKLOAD").ok();
    let mut caught = vec![];
    for w in Workload::ALL {
        if only.as_ref().is_some_and(|o| o != w.name()) {
            continue;
        }
        sim::clear_faults();
        let clean = run_workload(d.path(), seed, w, budget, 32).unwrap();
        assert_eq!(
            clean.failures, 0,
            "{w:?} fails without a fault: {:?}",
            clean.messages
        );
        assert_eq!(clean.fences_without_point, 0, "{w:?}: {clean:?}");
        assert!(clean.images >= budget, "{w:?}: {clean:?}");
        let exercised: Vec<Fault> = Fault::ALL
            .into_iter()
            .filter(|f| clean.reached.get(&format!("{f:?}")).copied().unwrap_or(0) > 0)
            .filter(|&f| !canary::harmless(f, w))
            .collect();
        for f in canary::expected(w) {
            assert!(
                exercised.contains(&f),
                "the {w:?} workload no longer exercises the rule of {f:?}: {:?}",
                clean.reached
            );
        }
        for f in exercised {
            sim::clear_faults();
            sim::inject(f);
            let r = run_workload(d.path(), seed, w, budget, 32).unwrap();
            sim::clear_faults();
            assert!(
                r.failures > 0,
                "{f:?} on the {w:?} workload was not caught in {} images",
                r.images
            );
            assert!(
                r.messages[0].contains("replay: daisy crashtest --power-fail --seed"),
                "{r:?}"
            );
            eprintln!(
                "{:<24} {:<10} caught after {:>5} images: {}",
                format!("{f:?}"),
                w.name(),
                r.images,
                r.messages[0].chars().take(160).collect::<String>()
            );
            caught.push((f, w));
        }
    }
    eprintln!("{} canaries caught", caught.len());
    if only.is_some() {
        return;
    }
    // Every fault is a canary somewhere.
    for f in Fault::ALL {
        assert!(caught.iter().any(|c| c.0 == f), "{f:?} was never tried");
    }
}
