//! Daisy: crash-consistent persistent memory for ordinary programs.
//!
//! A [`Pool`] is a file mapped into memory. Programs allocate persistent objects in it, reach
//! them through typed [`PPtr`]s from a root object, and change them inside transactions that
//! survive process crashes and power failures: all of a transaction or none of it.
//!
//! ```no_run
//! use daisy::{PPtr, Pod, Pool, PoolOptions, Zeroable};
//!
//! #[repr(C)]
//! #[derive(Clone, Copy, Pod, Zeroable)]
//! #[bytemuck(crate = "daisy::bytemuck")]
//! struct Root { counter: u64, head: PPtr<Node> }
//!
//! #[repr(C)]
//! #[derive(Clone, Copy, Pod, Zeroable)]
//! #[bytemuck(crate = "daisy::bytemuck")]
//! struct Node { value: u64, next: PPtr<Node> }
//!
//! # fn main() -> daisy::Result<()> {
//! let pool = Pool::open_or_create("/dev/shm/example.pool", &PoolOptions::new("example"))?;
//! let root = pool.root::<Root>()?;
//! pool.transaction(|tx| {
//!     let r = tx.read(root)?;
//!     let node = tx.alloc(&Node { value: r.counter, next: r.head })?;
//!     tx.write(root, &Root { counter: r.counter + 1, head: node })
//! })?;
//! # Ok(()) }
//! ```
//!
//! # The durability contract
//!
//! When [`Pool::transaction`] returns `Ok`, every change the closure made is durable: after any
//! later crash or power failure, opening the pool shows all of it. When the closure returns an
//! error or panics, or the process dies before the commit point, none of it is visible and no
//! allocation it made leaks. A transaction running when the process died is wholly present or
//! wholly absent after the next open, which recovers in milliseconds without reading the data.
//! Isolation between threads is the program's: hold your own locks across transactions that
//! touch the same data. The format and the argument are in docs/FORMAT.md.
//!
//! # Collections
//!
//! Built on transactions, each with its invariants checked by `check` (and by `daisy pool
//! check`, which finds them by their headers: [`check_all`]), its operations self-durable or
//! joined to a caller's transaction, and its crash reasoning beside its code:
//! * [`PHashMap`] (plain-old-data keys and values) and [`PBytesMap`] (byte strings):
//!   extendible hash tables (docs/FORMAT.md section 8a);
//! * [`PTreeMap`]: a B+-tree from byte strings to byte strings with ranks (section 8c);
//! * [`PSeq`]: a deque of byte strings in chunks of packed items, as Redis's quicklist: O(1)
//!   pushes and pops at both ends, index, set, insert, remove by value, trim and ranges
//!   (section 8d).

// Module map. Each module uses only modules listed below it (`sim`, the simulator's hooks in
// builds with feature `sim`, is called from everywhere and calls nothing back but `map`):
//
//   collections  persistent hash maps, ordered maps and sequences, on transactions (formats:
//                collections/table.rs, collections/tree/, collections/seq.rs)
//   pool         Pool: create, open, info, the API handle
//   check        pool check: allocator metadata, logs, reachability
//   backup       online backup: a consistent copy of a pool in use (dirty pages + a pause)
//   tx           Tx: reads, writes, allocation, commit
//   recovery     what open does after validation: the log scan, replay, retiring
//   shared       PoolInner: the open pool (Media + Lanes + heap index), growth, chunk walk
//   lanes        log lanes, claims, helping, the watermark (FORMAT.md sections 5 and 6)
//   buffers      a transaction's write buffers and read-your-writes indexes (DRAM only)
//   media        the pool file as every layer sees it: mapping, header, persister, bounds
//   alloc        allocator state: heap extents, lane caches, block addressing
//   log          redo records: parse, validate, apply (commit and replay share `apply`)
//   layout       the on-media structures and constants
//   persist      Persister: flush and fence (pmem or msync), counters
//   map          the mapping of the file and raw access to it
//   persist::arch  the CPU's write-back, fence and non-temporal store instructions
//   lock, checksum, ptr, error: leaf utilities
//
// `unsafe` is denied by the workspace lints except in map, persist::arch, checksum (the
// SSE4.2 instruction), lock and ptr, each of which says why.

#![warn(missing_docs)]

/// True when the power-failure simulator injects `fault` (test builds with feature `sim`
/// only; always false otherwise, and compiled away).
macro_rules! sim_fault {
    ($f:ident) => {{
        #[cfg(feature = "sim")]
        {
            crate::sim::fault(crate::sim::Fault::$f)
        }
        #[cfg(not(feature = "sim"))]
        {
            false
        }
    }};
}

/// Count a [`sim::Event`] (builds with feature `sim` only; nothing otherwise).
macro_rules! sim_event {
    ($e:ident) => {{
        #[cfg(feature = "sim")]
        crate::sim::event(crate::sim::Event::$e);
    }};
}

mod alloc;
mod backup;
mod buffers;
mod check;
mod checksum;
mod collections;
mod error;
mod lanes;
mod layout;
mod lock;
mod log;
mod map;
mod media;
mod persist;
mod pool;
mod ptr;
mod recovery;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;
mod tx;
mod undo;

pub use backup::{Backup, BackupReport};
pub use bytemuck;
/// The traits (and, with the attribute `#[bytemuck(crate = "daisy::bytemuck")]`, the derives)
/// for plain old data that may live in a pool; a program needs no dependency of its own on
/// bytemuck (see the crate example).
pub use bytemuck::{Pod, Zeroable};
pub use check::CheckReport;
pub use collections::{
    bytes_map_entries,
    bytesmap::{EntryRef, Upsert},
    check_all, map_objects, seq_items, seq_objects, tree_entries, tree_objects, Batch,
    BytesMapView, MapCheck, PBytesMap, PHashMap, PSeq, PTreeMap, SeqIter, SeqView, TreeIter,
    TreeMapView,
};
pub use error::{Error, Result};
pub use layout::{DEFAULT_LANES, DEFAULT_SLOT_SIZE};
pub use persist::{counters, FlushInstr, Mode};
pub use pool::{
    ModeChoice, Pool, PoolInfo, PoolOptions, DEFAULT_DIR, DEFAULT_MAX_SIZE, DEFAULT_SIZE,
};
pub use ptr::{PBytes, PPtr};
pub use recovery::RecoveryReport;
pub use shared::ObjectInfo;
pub use tx::Tx;

/// Daisy's internals that its own tests, benchmarks, fuzz targets and tools use: the on-media
/// structures, the mapping, persistence primitives, record checksums. Not part of the API
/// (hidden from the documentation; it changes without notice).
#[doc(hidden)]
#[allow(missing_docs)]
pub mod internals {
    pub use crate::checksum::crc32c_append;
    pub use crate::layout::*;
    pub use crate::log::{
        overflow_checksum, record_checksum, EntryHeader, EntryKind, LogHeader, OverflowDesc,
        ENTRY_HEADER_SIZE, LOG_HEADER_SIZE, LOG_MAGIC, LOG_OVERFLOW_MAGIC, MAX_SEQ,
        OVERFLOW_DESC_SIZE, OVERFLOW_PREFIX, TARGET_MASK, WORD_ENTRY_SIZE, WORD_ENTRY_TAG,
    };
    pub use crate::map::{fs_type_name, is_tmpfs, msync, page_size, Mapping};
    pub use crate::persist::Persister;
}

/// The README's example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
