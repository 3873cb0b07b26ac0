//! The default budget, as CI runs it: at least 10,000 crash images over both workloads, no
//! failure. (One test per file: the simulator is process-wide.)

#[test]
fn default_budget_passes() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let seed = std::env::var("DAISY_POWERFAIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122);
    let cfg = daisy_powerfail::Config {
        dir: d.path().to_path_buf(),
        seed,
        budget: 10_000,
        workloads: vec![
            daisy_powerfail::Workload::Single,
            daisy_powerfail::Workload::Threads,
        ],
        per_point: 32,
    };
    let s = daisy_powerfail::run(&cfg, |_| {}).unwrap();
    eprintln!(
        "seed {seed}: {} crash points, {} images, {} failures in {:.1} s",
        s.crash_points, s.images, s.failures, s.seconds
    );
    for w in &s.workloads {
        for m in &w.messages {
            eprintln!("{m}");
        }
    }
    assert!(s.images >= 10_000, "{s:?}");
    assert!(s.crash_points > 100, "{s:?}");
    assert_eq!(s.failures, 0);
}
