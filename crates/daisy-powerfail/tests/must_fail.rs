//! The simulator must catch the bugs it exists for: with one flush removed, the commit fence
//! removed, the transaction applied before its record is durable, applied data never flushed,
//! a hash map's in-place write unflushed or done without its barrier, or a one-word transaction
//! stored in place while a record may still be replayed over it, it reports failures
//! with a replay command. (One test per file: the simulator and the fault switches are
//! process-wide.)

use daisy::sim::{self, Fault};
use daisy_powerfail::{run_workload, Workload};

#[test]
fn injected_bugs_are_caught() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    for (fault, workload) in [
        (Fault::NoRecordFlush, Workload::Single),
        (Fault::NoCommitFence, Workload::Single),
        (Fault::ApplyBeforeCommit, Workload::Single),
        // Applied data never flushed, with the shortest deferral (single: 4 log slots per
        // lane) and a long one (threads: 32).
        (Fault::NoDataFlush, Workload::Single),
        (Fault::NoDataFlush, Workload::Threads),
        // The KV server's group transactions: a missing commit fence, and applied data
        // never flushed, are caught by comparing the recovered keyspace with its model.
        (Fault::NoCommitFence, Workload::Kv),
        (Fault::NoDataFlush, Workload::Kv),
        // Hash maps' in-place slot writes: without the barrier, recovery replays an older
        // transaction over them; without their flush, they may not survive.
        (Fault::NoInPlaceBarrier, Workload::HashMap),
        (Fault::NoInPlaceFlush, Workload::HashMap),
        // One-word transactions stored in place while an older record may still be replayed
        // over them, by the same lane and by another.
        (Fault::InPlaceUncovered, Workload::Single),
        (Fault::InPlaceUncovered, Workload::Threads),
    ] {
        sim::clear_faults();
        sim::inject(fault);
        let r = run_workload(d.path(), 77, workload, 3000, 32).unwrap();
        sim::clear_faults();
        assert!(r.failures > 0, "{fault:?} was not detected: {r:?}");
        assert!(
            r.messages[0].contains("replay: daisy crashtest --power-fail --seed"),
            "{r:?}"
        );
        eprintln!(
            "{fault:?}: {} failures in {} images; first: {}",
            r.failures, r.images, r.messages[0]
        );
    }
    // And without a fault, the same runs pass.
    for workload in [
        Workload::Single,
        Workload::Threads,
        Workload::Kv,
        Workload::HashMap,
    ] {
        let r = run_workload(d.path(), 77, workload, 600, 32).unwrap();
        assert_eq!(r.failures, 0, "{r:?}");
    }
}
