//! Issue 16, bug 2: growth must make the file's new length durable before the state page's
//! heap end names it. The simulator keeps the file's durable length apart (a file sync makes
//! the length durable, as on a DAX file system whose block allocation lives in the journal),
//! so a crash image after a growth that skipped the sync is cut to the old length and refused
//! as truncated. The growth code of earlier builds is the fault `GrowWithoutSync`: this test
//! fails with it and passes with the fix. (One test per file: the simulator is process-wide.)

use daisy::sim::{self, Fault};
use daisy_powerfail::{run_workload, Workload};

#[test]
fn growth_is_durable_before_the_heap_end_is_published() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let r = run_workload(d.path(), 16, Workload::Single, 3000, 32).unwrap();
    assert_eq!(r.failures, 0, "{:?}", r.messages);
    assert!(
        r.events["grow"] > 0,
        "the pool grew under the simulator: {:?}",
        r.events
    );

    sim::inject(Fault::GrowWithoutSync);
    let r = run_workload(d.path(), 16, Workload::Single, 3000, 32).unwrap();
    sim::clear_faults();
    assert!(
        r.failures > 0,
        "growth without the sync was not caught: {r:?}"
    );
    assert!(r.messages[0].contains("truncated"), "{}", r.messages[0]);
}
