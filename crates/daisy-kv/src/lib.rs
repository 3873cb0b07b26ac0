//! `daisy serve`: a Redis-protocol (RESP2) server whose keyspace lives in a Daisy pool.
//!
//! Every write command is a crash-consistent transaction, and no reply leaves the server
//! before the transaction it belongs to is durable. Commands that arrive together (a
//! pipeline, or several clients served in one event-loop round) share one transaction and
//! so one durability point: group commit. A restart opens the pool (recovery does not grow
//! with the data) and serves at once: there is no snapshot or log to load.
//!
//! Modules: `resp` (framing), `cmd` (commands), `store` (the keyspace in the pool),
//! `server` (the event loop and group commit), `glob` (patterns).

pub mod cmd;
pub mod glob;
pub mod longdouble;
pub mod resp;
pub mod server;
pub mod store;

pub use server::{serve, Options, BUSY_POLL_US};

/// The Redis version the server reports (the command set and replies follow Redis 7.0).
pub const REDIS_VERSION: &str = "7.0.0";
