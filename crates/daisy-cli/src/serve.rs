//! `daisy serve [redis.conf]`: the Redis-protocol server (the daisy-kv crate) with its
//! command line. A config file (Redis's format, `daisy_kv::conffile`) is read first; the
//! options given on the command line override it.

use crate::pool::ModeArg;
use crate::size::parse_size;
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    /// A Redis configuration file (port, bind, requirepass, maxclients, timeout, loglevel,
    /// logfile, daemonize, pidfile, unixsocket, ..., and Daisy's pool, size, max-size,
    /// busy-poll-us, mode). Options given here override it.
    config: Option<PathBuf>,
    /// The keyspace's pool: opened when it exists, created otherwise
    /// [default: /dev/shm/daisy-kv.pool].
    #[arg(long)]
    pool: Option<PathBuf>,
    /// Address to listen on (loopback by default: expose it deliberately) [default: 127.0.0.1].
    #[arg(long)]
    bind: Option<String>,
    /// TCP port (0 picks a free one; the address is printed) [default: 6379].
    #[arg(long)]
    port: Option<u16>,
    /// Require AUTH with this password before any other command.
    #[arg(long, env = "DAISY_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// Users from this ACL file (Redis's aclfile: `user <name> <rules>` lines), loaded at
    /// start; ACL LOAD reads it again, ACL SAVE writes it.
    #[arg(long)]
    aclfile: Option<std::path::PathBuf>,
    /// Most clients connected at once (more are refused with Redis's error) [default: 10000].
    #[arg(long)]
    max_clients: Option<usize>,
    /// TCP keepalive of client connections, in seconds (0: off), as Redis's tcp-keepalive:
    /// connections of clients that vanished while idle are found dead and closed
    /// [default: 300].
    #[arg(long)]
    tcp_keepalive: Option<u32>,
    /// Under load, poll for new requests this many microseconds before sleeping (0: always
    /// sleep). Saves clients on this machine the cost of waking the server; an idle server
    /// spends nothing, and with one CPU it never polls [default: 50].
    #[arg(long, value_name = "US")]
    busy_poll_us: Option<u32>,
    /// Number of databases (SELECT 0 to N-1), as Redis's `databases`. A pool keeps the
    /// databases it was given; starting with fewer than one that holds keys is refused
    /// [default: 16].
    #[arg(long)]
    databases: Option<usize>,
    /// Initial size of a new pool [default: 64MiB].
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// The pool grows on demand up to this size; when it is full, writes answer -OOM (Redis's
    /// maxmemory; CONFIG SET maxmemory changes it while serving). Applies at every start, up
    /// to the pool's capacity: the larger of this and 64GiB for a pool this command creates,
    /// fixed then [default: the capacity].
    #[arg(long, value_parser = parse_size)]
    max_size: Option<u64>,
    /// Persistence mode [default: auto: pmem on tmpfs/DAX, msync elsewhere].
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Log level, as Redis's loglevel: debug, verbose, notice, warning [default: notice].
    #[arg(long)]
    loglevel: Option<String>,
    /// Log to this file (appended) instead of standard error.
    #[arg(long)]
    logfile: Option<String>,
    /// Write the server's process id to this file (removed at exit).
    #[arg(long)]
    pidfile: Option<PathBuf>,
    /// Also listen on this Unix socket (redis-cli -s PATH).
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// Detach from the terminal once started, as Redis's `daemonize yes` (log to --logfile).
    #[arg(long)]
    daemonize: bool,
    /// Print only errors (loglevel warning).
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let mut o = daisy_kv::Options::default();
    if let Some(path) = &a.config {
        if let Err(e) = daisy_kv::conffile::load(path, &mut o) {
            // Redis's own text, as redis-server prints it, and a failed start.
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    macro_rules! over {
        ($($f:ident),*) => { $( if let Some(v) = a.$f { o.$f = v; } )* };
    }
    over!(
        pool,
        bind,
        port,
        max_clients,
        tcp_keepalive,
        busy_poll_us,
        databases,
        size
    );
    if a.max_size.is_some() {
        o.max_size = a.max_size;
    }
    over!(loglevel, logfile);
    if let Some(m) = a.mode {
        o.mode = m.into();
    }
    if a.requirepass.is_some() {
        o.requirepass = a.requirepass;
    }
    if a.pidfile.is_some() {
        o.pidfile = a.pidfile;
    }
    if a.unixsocket.is_some() {
        o.unixsocket = a.unixsocket;
    }
    o.daemonize |= a.daemonize;
    o.quiet = a.quiet;
    if daisy_kv::log::Level::parse(&o.loglevel).is_none() {
        return Err(anyhow!(
            "--loglevel {}: must be one of debug, verbose, notice, warning",
            o.loglevel
        ));
    }
    if a.aclfile.is_some() {
        o.aclfile = a.aclfile;
    }
    daisy_kv::serve(&o, |_| {}).map_err(|e| anyhow!(e))
}
