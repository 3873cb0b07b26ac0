//! `daisy serve`: a Redis-protocol (RESP2) server whose keyspace lives in a Daisy pool.
//!
//! Every write command is a crash-consistent transaction, and no reply leaves the server
//! before the transaction it belongs to is durable. Commands that arrive together (a
//! pipeline, or several clients served in one event-loop round) share one transaction and
//! so one durability point: group commit. A restart opens the pool (recovery does not grow
//! with the data) and serves at once: there is no snapshot or log to load.
//!
//! Modules, top to bottom (each uses only those below it):
//! - `server`: the event loop and group commit;
//! - `commands`: the command table, the checks before a command runs, MULTI queueing, and
//!   the context handlers get; the handlers live with what they work on:
//!   - `types::{string, list, hash, set}`: each type's persistent layout, invariants and commands,
//!     behind the `types::DataType` trait (with `types::packed` and `types::intset`, the
//!     compact encodings);
//!   - `acl`: users, the permission check before a command, ACL, AUTH's user lookup;
//!   - `keys`: key and database commands; `sort`: SORT; `multi`: MULTI/EXEC/WATCH; `admin`: connection and
//!     server commands; `config`: CONFIG's parameters; `rdb`: DUMP/RESTORE's format;
//! - `keyspace`: databases in the pool, value records, lookup with lazy expiry, lazyfree,
//!   WATCH's registry (Redis's db.c); `access`: OBJECT IDLETIME's clock (DRAM);
//! - `resp` (framing and replies), `glob` (patterns), `longdouble` (INCRBYFLOAT's arithmetic);
//! - `tracking` (client-side caching: CLIENT TRACKING and the invalidation messages);
//! - `conffile` (`daisy serve redis.conf`, CONFIG REWRITE), `log` (Redis-format log lines),
//!   `daemon` (daemonize, pidfile).

pub mod access;
pub mod acl;
pub mod admin;
pub mod backup;
pub mod commands;
pub mod conffile;
pub mod config;
mod daemon;
pub mod evict;
pub mod glob;
pub mod keys;
pub mod keyspace;
pub mod listpack;
pub mod log;
pub mod longdouble;
pub mod multi;
pub mod pubsub;
pub mod rdb;
pub mod resp;
pub mod scripting;
pub mod server;
pub mod sort;
pub mod tracking;
pub mod types;
pub mod views;

pub use server::{serve, Options, BUSY_POLL_US, NEW_POOL_CAPACITY};

/// The Redis version the server reports (the command set and replies follow Redis 7.0).
pub const REDIS_VERSION: &str = "7.0.0";
