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

pub mod alloc;
pub mod checksum;
pub mod collections;
pub mod error;
pub mod layout;
pub mod lock;
pub mod log;
pub mod map;
pub mod persist;
pub mod pool;
pub mod ptr;
pub mod recovery;
#[cfg(feature = "sim")]
pub mod sim;
pub mod tx;

pub use bytemuck;
/// The traits (and, with the attribute `#[bytemuck(crate = "daisy::bytemuck")]`, the derives)
/// for plain old data that may live in a pool; a program needs no dependency of its own on
/// bytemuck (see the crate example).
pub use bytemuck::{Pod, Zeroable};
pub use collections::{
    bytesmap::{EntryRef, Upsert},
    PBytesMap, PHashMap,
};
pub use error::{Error, Result};
pub use persist::{counters, FlushInstr, Mode, Persister};
pub use pool::{CheckReport, ModeChoice, ObjectInfo, Pool, PoolInfo, PoolOptions};
pub use ptr::{PBytes, PPtr};
pub use recovery::RecoveryReport;
pub use tx::Tx;

/// The README's example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
