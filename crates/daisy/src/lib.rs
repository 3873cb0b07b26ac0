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
//! Module map (dependencies point down): `pool` (open, recovery, growth) -> `tx` (transactions)
//! -> `alloc` (allocator state) and `log` (redo records) -> `layout` (on-media format) ->
//! `persist` (flush and fence) -> `map` (the mapping; the only module with raw memory access).

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
mod checksum;
mod collections;
mod error;
mod layout;
mod lock;
mod log;
mod map;
mod persist;
mod pool;
mod ptr;
mod recovery;
#[cfg(feature = "sim")]
pub mod sim;
mod tx;

pub use bytemuck;
/// The traits (and, with the attribute `#[bytemuck(crate = "daisy::bytemuck")]`, the derives)
/// for plain old data that may live in a pool; a program needs no dependency of its own on
/// bytemuck (see the crate example).
pub use bytemuck::{Pod, Zeroable};
pub use collections::{
    bytesmap::{EntryRef, Upsert},
    check_all, map_objects, Batch, MapCheck, PBytesMap, PHashMap,
};
pub use error::{Error, Result};
pub use layout::{DEFAULT_LANES, DEFAULT_SLOT_SIZE};
pub use persist::{counters, FlushInstr, Mode};
pub use pool::{
    CheckReport, ModeChoice, ObjectInfo, Pool, PoolInfo, PoolOptions, DEFAULT_DIR,
    DEFAULT_MAX_SIZE, DEFAULT_SIZE,
};
pub use ptr::{PBytes, PPtr};
pub use recovery::RecoveryReport;
pub use tx::Tx;

/// Daisy's internals that its own tests, benchmarks, fuzz targets and tools use: the on-media
/// structures, the mapping, persistence primitives, record checksums. Not part of the API
/// (hidden from the documentation; it changes without notice).
#[doc(hidden)]
#[allow(missing_docs)]
pub mod internals {
    pub use crate::checksum::crc32c_append;
    pub use crate::layout::*;
    pub use crate::log::record_checksum;
    pub use crate::map::{fs_type_name, is_tmpfs, msync, page_size, Mapping};
    pub use crate::persist::Persister;
}

/// The README's example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
