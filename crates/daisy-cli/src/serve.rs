//! `daisy serve`: the Redis-protocol server (the daisy-kv crate) with its command line.

use crate::pool::ModeArg;
use crate::size::parse_size;
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    /// The keyspace's pool: opened when it exists, created otherwise.
    #[arg(long, default_value = "/dev/shm/daisy-kv.pool")]
    pool: PathBuf,
    /// Address to listen on (loopback by default: expose it deliberately).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// TCP port (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Require AUTH with this password before any other command.
    #[arg(long, env = "DAISY_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// Users from this ACL file (Redis's aclfile: `user <name> <rules>` lines), loaded at
    /// start; ACL LOAD reads it again, ACL SAVE writes it.
    #[arg(long)]
    aclfile: Option<std::path::PathBuf>,
    /// Most clients connected at once (more are refused with Redis's error).
    #[arg(long, default_value_t = 10_000)]
    max_clients: usize,
    /// TCP keepalive of client connections, in seconds (0: off), as Redis's tcp-keepalive:
    /// connections of clients that vanished while idle are found dead and closed.
    #[arg(long, default_value_t = 300)]
    tcp_keepalive: u32,
    /// Under load, poll for new requests this many microseconds before sleeping (0: always
    /// sleep). Saves clients on this machine the cost of waking the server; an idle server
    /// spends nothing, and with one CPU it never polls.
    #[arg(long, default_value_t = daisy_kv::BUSY_POLL_US, value_name = "US")]
    busy_poll_us: u32,
    /// Number of databases (SELECT 0 to N-1), as Redis's `databases`. A pool keeps the
    /// databases it was given; starting with fewer than one that holds keys is refused.
    #[arg(long, default_value_t = 16)]
    databases: usize,
    /// Initial size of a new pool.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    size: u64,
    /// The pool grows on demand up to this size; when it is full, writes answer -OOM (Redis's
    /// maxmemory; CONFIG SET maxmemory changes it while serving). Applies at every start, up
    /// to the pool's capacity: the larger of this and 64GiB for a pool this command creates,
    /// fixed then [default: the capacity].
    #[arg(long, value_parser = parse_size)]
    max_size: Option<u64>,
    /// Persistence mode [auto: pmem on tmpfs/DAX, msync elsewhere].
    #[arg(long, value_enum, default_value = "auto")]
    mode: ModeArg,
    /// Print only errors.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let o = daisy_kv::Options {
        pool: a.pool,
        bind: a.bind,
        port: a.port,
        requirepass: a.requirepass,
        max_clients: a.max_clients,
        tcp_keepalive: a.tcp_keepalive,
        busy_poll_us: a.busy_poll_us,
        size: a.size,
        max_size: a.max_size,
        mode: a.mode.into(),
        quiet: a.quiet,
        databases: a.databases,
        aclfile: a.aclfile,
        ..Default::default()
    };
    daisy_kv::serve(&o, |_| {}).map_err(|e| anyhow!(e))
}
