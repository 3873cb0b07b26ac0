//! Canaries: for every rule of the crash-consistency argument, an injected bug that breaks it
//! (`daisy::sim::Fault`), which the simulator must catch on every workload that exercises the
//! rule, within the workload's share of the default budget. `tests/must_fail.rs` runs them in
//! CI: a clean run of each workload tells which rules it exercised (the fault's place was
//! reached, `daisy::sim::reached`); each of those faults is then injected and must be reported.
//!
//! The tables below say which rules each workload must keep exercising (so a change that stops
//! a workload from reaching a rule fails the test instead of silently losing a canary), and
//! where a fault's place is reached although the fault cannot change anything there.

use crate::Workload::{self, *};
use daisy::sim::Fault::{self, *};

/// Rules each workload must exercise (its canaries run in CI). A workload may exercise more;
/// those run too.
pub fn expected(w: Workload) -> Vec<Fault> {
    // Every workload commits through the log.
    const LOGGED: &[Fault] = &[NoRecordFlush, NoCommitFence, ApplyBeforeCommit, NoDataFlush];
    // Hash maps' in-place slot writes and one-word transactions in place (not in kv, whose
    // byte map always logs).
    const IN_PLACE: &[Fault] = &[
        NoInPlaceBarrier,
        NoInPlaceFlush,
        InPlaceUncovered,
        TransientStore,
    ];
    let own: &[Fault] = match w {
        // Transaction 6 is a batch filling the empty map in place.
        Single => &[
            FillWithoutFlag,
            FillNoFlush,
            EarlyBlockReuse,
            NoRunBitmapZero,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            OverflowEarlyReuse,
            UndoNotNamed,
        ],
        Threads => &[
            SkipSlotReuseCheck,
            EarlyBlockReuse,
            NoRunBitmapZero,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            OverflowEarlyReuse,
            UndoNotNamed,
        ],
        Concurrent => &[
            SkipSlotReuseCheck,
            EarlyBlockReuse,
            NoRunBitmapZero,
            LateInflightBound,
            GrowWithoutSync,
        ],
        HashMap => &[EarlyBlockReuse, EarlyRecoveryWatermark],
        Kv => &[
            EarlyBlockReuse,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            GarbageSlotKept,
            LazyQueueLate,
            ShrinkHeaderEarly,
            StreamAppendOutsideTx,
        ],
        Msync => &[
            EarlyBlockReuse,
            NoRunBitmapZero,
            SharedMsyncPending,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            OverflowEarlyReuse,
            UndoNotNamed,
        ],
        Seq => &[
            EarlyBlockReuse,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            SeqLinkOutsideTx,
        ],
        Tree => &[
            EarlyBlockReuse,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            TreeSplitEarly,
        ],
        // The store's creation is the one transaction (it grows the pool); then data copies
        // and map words in place.
        Blocks => &[
            GrowWithoutSync,
            BlockSwapBeforeData,
            BlockNoBarrier,
            BlockRecoveryNoCrc,
        ],
        Backup => &[
            EarlyBlockReuse,
            NoRunBitmapZero,
            GrowWithoutSync,
            EarlyRecoveryWatermark,
            OverflowEarlyReuse,
            UndoNotNamed,
            BackupPageUnflagged,
        ],
    };
    let in_place = match w {
        Kv => &[][..],
        // No hash map: only one-word transactions go in place (a free step with nothing to
        // free writes the transaction id alone).
        Seq => &[NoInPlaceFlush, InPlaceUncovered, TransientStore][..],
        // No hash-map write in place; a transaction that changes the id alone (removals of
        // absent keys, an empty range) is a one-word transaction, whose in-place test is
        // reached (the test the canary breaks; it finds a record left to replay).
        Tree => &[InPlaceUncovered][..],
        // The map words: stored in place, flushed, fenced (no one-word transaction).
        Blocks => &[NoInPlaceFlush, TransientStore][..],
        _ => IN_PLACE,
    };
    // The block store's creation writes only new objects (no data write-back to defer).
    let logged = match w {
        Blocks => &LOGGED[..3],
        _ => LOGGED,
    };
    logged.iter().chain(in_place).chain(own).copied().collect()
}

/// Faults whose place a workload reaches although they cannot do harm there, and why.
pub const HARMLESS: &[(Fault, &[Workload], &str)] = &[(
    LateInflightBound,
    &[
        Single, Threads, HashMap, Kv, Msync, Seq, Tree, Blocks, Backup,
    ],
    "one transaction runs at a time: no other lane computes a claim while the bound is late",
)];

/// Whether `f` is harmless on `w` (see [`HARMLESS`]).
pub fn harmless(f: Fault, w: Workload) -> bool {
    HARMLESS.iter().any(|(h, ws, _)| *h == f && ws.contains(&w))
}
