//! The event loop: one thread, non-blocking sockets (mio/epoll), like Redis's own.
//!
//! A round: wait for events; read what every ready connection sent; parse the complete
//! requests; run them in arrival order inside as few transactions as the redo log allows
//! (group commit); only then write the replies. So no reply leaves before the
//! transaction that holds its command is durable, and one fence covers a whole round.
//!
//! When a group's transaction fails (a full pool, a command too large for one redo record),
//! nothing of it is applied: what it changed in DRAM is restored, the commands before the
//! failing one run again as a group and the failing one alone, answering with an error if it
//! fails again (see `run_work`). A
//! request that has not fully arrived is never run, so a client that disconnects
//! mid-command loses only that command.

#![expect(
    unsafe_code,
    reason = "system calls libc only offers: online CPUs, TCP keepalive options, the file-descriptor limit, CPU times, uname, the page size"
)]

use crate::admin::{ClientRow, ConnStats, ReplyMode};
use crate::commands::{self as cmd, Action, Client, ServerState};
use crate::keyspace::{Keyspace, LAYOUT};
use crate::log;
use crate::resp::{self, Limits, Parsed};
use crate::types::Type;
use daisy::{ModeChoice, Pool, PoolOptions};
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `daisy serve`'s settings.
#[derive(Clone, Debug)]
pub struct Options {
    pub pool: PathBuf,
    pub bind: String,
    pub port: u16,
    pub requirepass: Option<String>,
    pub max_clients: usize,
    /// Size of a new pool (it grows on demand up to `max_size`); an existing smaller pool
    /// grows to it at open.
    pub size: u64,
    /// The size the pool may grow to (Redis's `maxmemory`; CONFIG SET maxmemory changes it at
    /// run time). Applies at every open, up to the pool's capacity; `None`: the capacity. A
    /// new pool's capacity is the larger of this and [`NEW_POOL_CAPACITY`].
    pub max_size: Option<u64>,
    pub mode: ModeChoice,
    /// Print nothing but errors.
    pub quiet: bool,
    /// Bytes read from one connection per event-loop round ([`READ_ROUND_CAP`] by default).
    pub read_round_cap: usize,
    /// TCP keepalive time of client connections in seconds (0: off). As Redis's
    /// `tcp-keepalive` (default 300): a client whose host vanished while idle is found dead
    /// and its connection closed, instead of holding a client slot forever.
    pub tcp_keepalive: u32,
    /// Busy-poll window in microseconds, 0 for none (see [`BUSY_POLL_US`]).
    pub busy_poll_us: u32,
    /// Number of databases (SELECT 0 to n-1), as Redis's `databases` (16).
    pub databases: usize,
    /// The config file given at start (`conffile::load`): CONFIG REWRITE rewrites it.
    pub config_file: Option<PathBuf>,
    /// Other CONFIG parameters the config file set (checked), applied before the settings
    /// above.
    pub config: Vec<(String, String)>,
    /// `loglevel` (debug, verbose, notice, warning) and `logfile` (empty: standard error).
    pub loglevel: String,
    pub logfile: String,
    /// `daemonize yes`: fork and detach once the address is bound and the pool open.
    pub daemonize: bool,
    /// `pidfile`: written at start, removed at exit.
    pub pidfile: Option<PathBuf>,
    /// `unixsocket` and `unixsocketperm` (octal; 0: as the umask leaves it).
    pub unixsocket: Option<PathBuf>,
    pub unixsocketperm: u32,
    /// Redis's `aclfile`: users loaded at start, by ACL LOAD, written by ACL SAVE.
    pub aclfile: Option<PathBuf>,
    /// The config file's `user <name> <rules...>` lines (checked), created at start; not
    /// with an `aclfile` (Redis refuses the mix).
    pub users: Vec<Vec<String>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool: PathBuf::from(daisy::DEFAULT_DIR).join("daisy-kv.pool"),
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            max_clients: 10_000,
            size: 64 << 20,
            max_size: None,
            mode: ModeChoice::Auto,
            quiet: false,
            read_round_cap: READ_ROUND_CAP,
            tcp_keepalive: 300,
            busy_poll_us: BUSY_POLL_US,
            databases: 16,
            config_file: None,
            config: Vec::new(),
            loglevel: "notice".into(),
            logfile: String::new(),
            daemonize: false,
            pidfile: None,
            unixsocket: None,
            unixsocketperm: 0,
            aclfile: None,
            users: Vec::new(),
        }
    }
}

/// The capacity of a pool `daisy serve` creates, unless `--max-size` asks for more: the size
/// that `--max-size` and CONFIG SET maxmemory can raise the limit to later. Its chunk table
/// costs 8 bytes per 256 KiB (2 MiB of the file), and its address reservation is virtual.
pub const NEW_POOL_CAPACITY: u64 = 64 << 30;

/// Redo log bytes one transaction may hold. Large, so a pipeline round or a big MSET fits
/// one record; the server runs a single thread, so few lanes are needed.
const LOG_SLOT: u32 = 1 << 20;
const LANES: u32 = 2;
/// Start a new transaction when less redo log than this is left (a command that needs more
/// fails the group and then runs alone with the whole record).
const LOG_RESERVE: usize = 32 << 10;
/// A group's transaction ends once it has logged this much (more commands per fence gain
/// little, and a transaction's bookkeeping grows with its size: freeing an object it
/// allocated itself, as when one key is written twice in a round, scans its allocations).
const GROUP_LOG_BYTES: usize = 64 << 10;
/// Bytes read from one connection per round. A client that pipelines faster than the server
/// runs its commands is read in slices, its next slice in the next round, so the other
/// clients' requests are not queued behind all of its input.
pub const READ_ROUND_CAP: usize = 1 << 20;

/// Default busy-poll window in microseconds. When the last wait for events was shorter than
/// the window (the server is under load), the next wait first polls without sleeping
/// (epoll_wait with a zero timeout, yielding the CPU every few polls) for up to the window,
/// and only then sleeps in epoll_wait.
///
/// Why: a request that finds the server asleep must wake it, and on loopback that wake-up
/// (an inter-processor interrupt, a VM exit in a virtual machine) is paid inside the
/// *client's* send system call. With redis-benchmark at pipeline 1 the client's CPU sets the
/// pace, so the wake-ups cost throughput: on the 2-core VM, polling cut the client's CPU per
/// request by about 10% and raised GET by about 12% (README, `daisy serve`, "Busy polling").
/// Under light load (gaps longer than the window) the loop sleeps at once and spends
/// nothing; on a machine with one CPU it never polls (the clients need that CPU). It is Linux's
/// epoll busy polling (`busy_poll_usecs`, which loopback sockets do not get) in user space.
pub const BUSY_POLL_US: u32 = 50;
/// Zero-timeout polls between two yields of the CPU while busy-polling.
const POLLS_PER_YIELD: u32 = 8;

const LISTENER: Token = Token(usize::MAX);
const UNIX_LISTENER: Token = Token(usize::MAX - 1);

/// A client's socket: TCP, or the `unixsocket`.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(t) => t.read(buf),
            Stream::Unix(u) => u.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(t) => t.write(buf),
            Stream::Unix(u) => u.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for Stream {
    fn register(&mut self, r: &mio::Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &mio::Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &mio::Registry) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}
/// Active expiry runs every this often, for at most `EXPIRE_BUDGET`.
const EXPIRE_PERIOD: Duration = Duration::from_millis(100);
const EXPIRE_BUDGET: Duration = Duration::from_millis(2);
/// Lazyfree runs at most this long per event-loop round while collections wait to be freed:
/// a request that arrives meanwhile waits at most about this long (measured with a 10-million
/// field hash: PING 0.25-0.3 ms while it is freed, 1.05 ms with a 1 ms budget).
const LAZYFREE_BUDGET: Duration = Duration::from_micros(250);
/// While a background backup runs, the event loop looks at its copier at least this often.
const BACKUP_POLL: Duration = Duration::from_millis(5);
/// Objects one lazyfree transaction frees at most.
const LAZYFREE_STEP: u32 = 128;

struct Conn {
    stream: Stream,
    /// Input buffer: `rbuf[..rlen]` holds received bytes. Its length is its capacity,
    /// zeroed once when it grows, so a read never clears memory first.
    rbuf: Vec<u8>,
    rlen: usize,
    /// Bytes of `rbuf` already parsed and run.
    rpos: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    cl: Client,
    /// Close once `wbuf` is written (QUIT, protocol error).
    close_after: bool,
    /// The peer is gone or the socket failed: close now.
    dead: bool,
    /// Registered for writability: a write would have blocked, and the rest of `wbuf` goes
    /// when the socket drains. Otherwise only readability is registered, so the event loop is
    /// not woken by every ACK that frees send-buffer space (as Redis does it).
    want_write: bool,
    /// The last read stopped at [`READ_ROUND_CAP`] with input possibly left in the socket:
    /// no new edge will announce it, so the next round reads again unasked.
    unread: bool,
    /// A request at `rpos` that is not complete yet: where its parse stopped, and the ranges
    /// of its arguments so far (relative to `rpos`), so more bytes resume it.
    resume: resp::Resume,
    partial: Vec<Range<usize>>,
    /// The most input held since the last clients cron (Redis's `querybuf_peak`): the input
    /// buffer shrinks to it when it is less than half the buffer.
    qb_peak: usize,
    /// The most reply bytes pending since `wpeak_ms` (CLIENT LIST's rbp; reset every 5 s).
    wpeak: usize,
    wpeak_ms: i64,
    /// Since when (ms) a subscriber's pending replies exceed the soft output-buffer limit
    /// (0: they do not).
    soft_since: i64,
}

/// Redis's reply buffer size: replies beyond it count as its list of blocks (obl, oll, omem).
const REPLY_CHUNK: usize = 16 << 10;

impl Conn {
    /// The connection's buffers as CLIENT LIST shows them; `running`: its command is running,
    /// so its whole input buffer is the query buffer (Redis trims it after the command).
    fn stats(&self, running: bool) -> ConnStats {
        let qbuf = if running {
            self.rlen
        } else {
            self.rlen - self.rpos
        };
        let pending = self.wbuf.len() - self.wpos;
        let obl = pending.min(REPLY_CHUNK);
        let omem = pending - obl;
        ConnStats {
            qbuf,
            qbuf_free: self.rbuf.len() - qbuf,
            rbs: self.wbuf.capacity(),
            rbp: self.wpeak.max(pending),
            obl,
            oll: omem.div_ceil(REPLY_CHUNK),
            omem,
            tot_mem: omem + self.rbuf.len() + self.wbuf.capacity() + std::mem::size_of::<Conn>(),
            writing: self.want_write,
        }
    }

    /// Write pending replies until the socket would block, without changing what the
    /// connection is registered for (the end of the round's `Server::write` does that).
    fn write_now(&mut self, stats: &mut crate::admin::LoopStats) {
        stats.writes_processed += 1;
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => {
                    self.dead = true;
                    return;
                }
                Ok(n) => {
                    self.wpos += n;
                    stats.net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.dead = true;
                    return;
                }
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
    }

    /// Give the input buffer `size` bytes (at least the input it holds), keeping that input.
    fn resize_input(&mut self, size: usize) {
        let pending = self.rlen - self.rpos;
        let mut buf = vec![0; size.max(pending)];
        buf[..pending].copy_from_slice(&self.rbuf[self.rpos..self.rlen]);
        self.rbuf = buf;
        self.rlen = pending;
        self.rpos = 0;
    }

    /// Parse the complete requests in the input (connection number `i`) into `work`, their
    /// arguments into `ranges`; stop after the first when `one_only` (a client that must still
    /// authenticate). A request parsed in part in an earlier round goes on from where it
    /// stopped. True when `one_only` left input unparsed.
    fn parse_requests(
        &mut self,
        i: usize,
        lim: &Limits,
        one_only: bool,
        one: &mut Vec<Range<usize>>,
        ranges: &mut Vec<Range<usize>>,
        work: &mut Vec<Work>,
    ) -> bool {
        let mut pos = self.rpos;
        let mut more = false;
        loop {
            if self.resume.in_progress() {
                std::mem::swap(one, &mut self.partial);
            }
            match resp::parse_resume(&mut self.rbuf[pos..self.rlen], one, lim, &mut self.resume) {
                Parsed::Incomplete => {
                    if self.resume.in_progress() {
                        std::mem::swap(one, &mut self.partial);
                    }
                    break;
                }
                Parsed::Request { consumed } => {
                    if !one.is_empty() {
                        let start = ranges.len();
                        ranges.extend(one.iter().map(|r| r.start + pos..r.end + pos));
                        work.push(Work {
                            conn: i,
                            args: start..ranges.len(),
                            proto_error: None,
                            owned: false,
                        });
                    }
                    pos += consumed;
                    if one_only {
                        more = pos < self.rlen;
                        break;
                    }
                }
                Parsed::Error(e) => {
                    work.push(Work {
                        conn: i,
                        args: 0..0,
                        proto_error: Some(e),
                        owned: false,
                    });
                    pos = self.rlen;
                    break;
                }
            }
        }
        self.rpos = pos;
        more
    }
}

/// One parsed request: which connection, and its arguments (ranges into that connection's
/// input buffer, stored in the round's shared `args` vector).
struct Work {
    conn: usize,
    args: Range<usize>,
    /// A protocol error instead of a request.
    proto_error: Option<String>,
    /// A command CLIENT PAUSE postponed: its argument ranges are into `Server::owned`, not
    /// into the connection's input buffer.
    owned: bool,
}

/// The busy-poll window for `--busy-poll-us`: none on a machine with one CPU online, where
/// polling would only delay the clients that must share it. (A server pinned to one CPU of
/// several still polls: its clients run on the others.)
fn busy_poll_window(us: u32) -> Duration {
    // SAFETY: sysconf only reads a system value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if online < 2 {
        return Duration::ZERO;
    }
    Duration::from_micros(u64::from(us))
}

/// Poll for events without sleeping until `until`; true when some arrived (in `events`).
/// Yields the CPU every few polls, so a client that shares this CPU still gets to run. Stops
/// when `stop` is set: a zero-timeout epoll_wait does not end with EINTR when a signal comes.
fn busy_poll(poll: &mut Poll, events: &mut Events, until: Instant, stop: &AtomicBool) -> bool {
    let mut polls = 0u32;
    loop {
        // An error ends the polling; the sleeping wait that follows reports it.
        match poll.poll(events, Some(Duration::ZERO)) {
            Ok(()) if !events.is_empty() => return true,
            Ok(()) => {}
            Err(_) => return false,
        }
        if Instant::now() >= until || stop.load(Ordering::Relaxed) {
            return false;
        }
        polls += 1;
        if polls.is_multiple_of(POLLS_PER_YIELD) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn open_pool(o: &Options) -> Result<Pool, String> {
    let pool = if o.pool.exists() {
        let pool = Pool::open_with(&o.pool, Some(LAYOUT), o.mode).map_err(|e| e.to_string())?;
        if pool.size() < o.size && o.max_size.is_none_or(|m| m >= o.size) {
            pool.grow_to(o.size.min(pool.capacity()))
                .map_err(|e| e.to_string())?;
        }
        pool
    } else {
        let cap = o.max_size.unwrap_or(0).max(o.size).max(NEW_POOL_CAPACITY);
        let opts = PoolOptions::new(LAYOUT)
            .size(o.size)
            .max_size(cap)
            .mode(o.mode)
            .lanes(LANES)
            .log_slot_size(LOG_SLOT);
        Pool::create(&o.pool, &opts).map_err(|e| e.to_string())?
    };
    if let Some(m) = o.max_size {
        pool.set_max_size(m.max(1))
            .map_err(|e| format!("--max-size: {e}"))?;
    }
    Ok(pool)
}

/// Run the server until SIGTERM, SIGINT or SHUTDOWN. `ready` is called with the bound
/// address once the server accepts connections.
pub fn serve(o: &Options, ready: impl FnOnce(SocketAddr)) -> Result<(), String> {
    let level = if o.quiet {
        log::Level::Warning
    } else {
        log::Level::parse(&o.loglevel)
            .ok_or_else(|| format!("loglevel {}: not a level", o.loglevel))?
    };
    log::set_level(level);
    log::set_file(&o.logfile);
    let addr: SocketAddr = format!("{}:{}", o.bind, o.port)
        .parse()
        .or_else(|_| {
            std::net::ToSocketAddrs::to_socket_addrs(&(o.bind.as_str(), o.port))
                .map_err(|e| e.to_string())?
                .next()
                .ok_or_else(|| "no address".to_string())
        })
        .map_err(|e| format!("--bind {}: not an address ({e})", o.bind))?;
    let mut listener =
        TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut unix = match &o.unixsocket {
        Some(path) => Some(listen_unix(path, o.unixsocketperm)?),
        None => None,
    };
    // The address is checked and bound first, so a wrong --bind or a busy port leaves no
    // new pool file behind; connections wait in the backlog until the loop runs.
    let t0 = Instant::now();
    let pool = open_pool(o)?;
    let store = Keyspace::open(&pool, o.databases)?;
    // Detached only now, so that a wrong address or pool fails in the foreground (exit 1).
    if o.daemonize {
        crate::daemon::daemonize()?;
    }
    if let Some(p) = &o.pidfile {
        crate::daemon::write_pidfile(p);
    }
    let recovery_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(|e| format!("epoll: {e}"))?;
    if let Some(u) = unix.as_mut() {
        poll.registry()
            .register(u, UNIX_LISTENER, Interest::READABLE)
            .map_err(|e| format!("epoll: {e}"))?;
    }

    raise_fd_limit(o.max_clients);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    // SIGHUP is ignored, as Redis ignores it (with a log line here).
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
        .map_err(|e| e.to_string())?;

    let keys = store.total_keys().map_err(|e| e.to_string())?;
    {
        let rep = pool.recovery_report();
        log::notice(&format!(
            "daisy serve: pool {} ({}, {} keys, opened in {:.1} ms{}); listening on {addr}{}",
            o.pool.display(),
            pool.mode().describe(),
            keys,
            recovery_ms,
            if rep.records_replayed > 0 {
                format!(
                    ", recovery replayed {} transactions, {} lines",
                    rep.records_replayed, rep.replayed_lines
                )
            } else {
                String::new()
            },
            if o.requirepass.is_some() {
                " (password required)"
            } else {
                ""
            },
        ));
        if let Some(p) = &o.unixsocket {
            log::notice(&format!(
                "The server is now ready to accept connections at {}",
                p.display()
            ));
        }
        if let Some(f) = &o.config_file {
            log::notice(&format!("Configuration loaded from {}", f.display()));
        }
    }
    // Absolute, so that INFO's daisy_pool and the backup directory mean the same to every
    // process (`daisy pool backup` compares them).
    let pool_abs = std::fs::canonicalize(&o.pool).unwrap_or_else(|_| o.pool.clone());
    let (durability, survives_power_loss) = pool.durability();
    if !o.quiet {
        log::notice(&format!("durability: every write is durable in the pool before its reply; the pool is on {durability}"));
        if !survives_power_loss {
            log::warning("WARNING: this pool does not survive a power failure or a reboot; back it up (BGSAVE, `daisy pool backup`) to a disk, or serve a pool on persistent memory (DAX) or a disk file (--mode msync)");
        }
        // Redis's own line, its last at start: tools (and Redis's test harness) wait for it.
        log::notice("Ready to accept connections");
    }
    let mut sv = ServerState {
        pool_path: pool_abs.display().to_string(),
        bind: o.bind.clone(),
        port: addr.port(),
        requirepass: o.requirepass.clone().map(String::into_bytes),
        max_clients: o.max_clients,
        recovery_ms,
        ..ServerState::new(&pool, now_ms())
    };
    for (k, v) in &o.config {
        sv.config.set_internal(k, v);
    }
    sv.admin.config_file = o.config_file.clone();
    for (k, v) in [
        ("bind", o.bind.clone()),
        ("port", addr.port().to_string()),
        ("databases", o.databases.to_string()),
        ("maxclients", o.max_clients.to_string()),
        (
            "maxmemory",
            if pool.max_size() == pool.capacity() {
                0
            } else {
                pool.max_size()
            }
            .to_string(),
        ),
        ("tcp-keepalive", o.tcp_keepalive.to_string()),
        ("requirepass", o.requirepass.clone().unwrap_or_default()),
        (
            "dir",
            pool_abs
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        (
            // Where SAVE/BGSAVE write the backup (a pool file, not an RDB file).
            "dbfilename",
            o.pool
                .file_name()
                .map(|p| format!("{}.backup", p.to_string_lossy()))
                .unwrap_or_default(),
        ),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("loglevel", o.loglevel.to_ascii_lowercase()),
        ("logfile", o.logfile.clone()),
        ("daemonize", if o.daemonize { "yes" } else { "no" }.into()),
        (
            "pidfile",
            o.pidfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        (
            "unixsocket",
            o.unixsocket
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("unixsocketperm", format!("{:o}", o.unixsocketperm)),
    ] {
        // Where backups go: the config file's `dir` and `dbfilename` when it names them
        // (checked when it was read), else beside the pool.
        if matches!(k, "dir" | "dbfilename") && o.config.iter().any(|(n, _)| n == k) {
            continue;
        }
        sv.config.set_internal(k, &v);
    }
    // Users: requirepass is the default user's password, then the ACL file's users (its
    // default user, if it has one, wins), as Redis loads them.
    sv.acl
        .set_requirepass(o.requirepass.as_deref().map(str::as_bytes));
    if o.aclfile.is_some() && !o.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    // The config file's users (Redis's `ACLLoadConfiguredUsers`): `default` is reset first.
    let all_channels = sv.config.get("acl-pubsub-default") == Some("allchannels");
    for u in &o.users {
        let mut rules: Vec<&[u8]> = Vec::new();
        if u[0] == "default" {
            rules.push(b"reset");
        }
        rules.extend(u[1..].iter().map(|r| r.as_bytes()));
        sv.acl
            .set_user(u[0].as_bytes(), &rules, all_channels)
            .map_err(|e| format!("Critical error while loading ACLs ({e}). Exiting."))?;
    }
    if !o.users.is_empty() {
        sv.acl.committed();
        sv.admin.config_users = true;
    }
    if let Some(f) = &o.aclfile {
        let abs = std::path::absolute(f).unwrap_or_else(|_| f.clone());
        let abs = abs.display().to_string();
        sv.config.set_internal("aclfile", &abs);
        sv.acl
            .load_file(&abs, false)
            .map_err(|e| format!("aborting startup because of ACL errors: {e}"))?;
        sv.acl.committed();
    }
    let mut s = Server {
        pool,
        store,
        sv,
        table: cmd::Table::new(),
        conns: Vec::new(),
        by_id: HashMap::new(),
        free: Vec::new(),
        next_id: 1,
        limits: Limits::default(),
        shutdown: false,
        expire_cursor: 0,
        expire_db: 0,
        accept_pending: false,
        work_buf: Vec::new(),
        ranges_buf: Vec::new(),
        one_buf: Vec::new(),
        saved_buf: Vec::new(),
        specs_buf: Vec::new(),
        carry: Vec::new(),
        read_cap: o.read_round_cap.max(1),
        tcp_keepalive: o.tcp_keepalive,
        pass_buf: Vec::new(),
        next_pass_buf: Vec::new(),
        saved_mark: Vec::new(),
        group_no: 0,
        busy_poll: busy_poll_window(o.busy_poll_us),
        lazy_work: false,
        lazy_error_at: None,
        query_limit: 1 << 30,
        round_ms: now_ms(),
        killed: Vec::new(),
        woken: Vec::new(),
        postponed: Vec::new(),
        owned: Vec::new(),
        metrics: Metrics::default(),
        blocking: HashMap::new(),
        blocked: Vec::new(),
        block_seq: 0,
        unblocked: Vec::new(),
        backup: None,
        backup_completing: None,
        backup_dirty: 0,
        save_conn: usize::MAX,
        oom_logged_ms: 0,
        obuf_limits: (0, 0, 0),
        unix: None,
        hup: Arc::new(AtomicBool::new(false)),
        answered: Vec::new(),
    };
    s.apply_pubsub_config();
    s.lazy_work = s.store.lazy_pending() > 0;
    s.unix = unix;
    s.hup = hup;
    s.sv.scripting.busy.borrow_mut().stop = Some(Arc::clone(&stop));
    ready(addr);
    let r = s.run(&mut poll, &mut listener, &stop);
    if stop.load(Ordering::Relaxed) {
        log::warning("Received SIGTERM or SIGINT, scheduling shutdown...");
    }
    log::notice(&format!(
        "daisy serve: shutting down ({} keys)",
        s.store.total_keys().unwrap_or(0)
    ));
    if let Some(p) = &o.unixsocket {
        let _ = std::fs::remove_file(p);
    }
    if let Some(p) = &o.pidfile {
        let _ = std::fs::remove_file(p);
    }
    log::notice("Daisy is now ready to exit, bye bye...");
    r
}

/// Listen on the Unix socket `path` (a stale socket file there is removed first, as Redis
/// does), with permissions `perm` when not 0.
fn listen_unix(path: &std::path::Path, perm: u32) -> Result<UnixListener, String> {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path)
        .map_err(|e| format!("Failed opening Unix socket {}: {e}", path.display()))?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))
            .map_err(|e| format!("unixsocketperm {perm:o} on {}: {e}", path.display()))?;
    }
    Ok(l)
}

struct Server {
    /// A background backup (BGSAVE) in progress: finished between two transactions once its
    /// copier is done (`backup.rs`).
    backup: Option<daisy::Backup>,
    /// A background backup past its pause: its copy's sync and rename run on this thread
    /// while the server serves; BGSAVE is still in progress until it ends.
    backup_completing: Option<(
        PathBuf,
        std::thread::JoinHandle<Result<daisy::BackupReport, String>>,
    )>,
    /// The keyspace's change count at the last backup's pause (what its copy holds).
    backup_dirty: u64,
    /// The connection whose SAVE waits for its reply.
    save_conn: usize,
    /// When a full pool was last logged (ms since the epoch).
    oom_logged_ms: i64,
    pool: Pool,
    store: Keyspace,
    sv: ServerState,
    table: cmd::Table,
    conns: Vec<Option<Conn>>,
    /// Client id -> its connection (invalidations find their receivers by id).
    by_id: HashMap<u64, usize>,
    free: Vec<usize>,
    next_id: u64,
    limits: Limits,
    shutdown: bool,
    expire_cursor: u64,
    /// The database active expiry looks at next.
    expire_db: usize,
    /// An accept failed (out of file descriptors): connections may wait in the backlog.
    accept_pending: bool,
    /// Buffers of a round, kept between rounds so that a round allocates nothing.
    work_buf: Vec<Work>,
    ranges_buf: Vec<Range<usize>>,
    one_buf: Vec<Range<usize>>,
    saved_buf: Vec<(usize, usize, bool, Client)>,
    /// Each request's command in `run_work` (kept for its capacity).
    specs_buf: Vec<Option<&'static cmd::Spec>>,
    /// Connections whose capped read left input in the socket: read again next round.
    carry: Vec<usize>,
    read_cap: usize,
    tcp_keepalive: u32,
    /// Connections to parse in this pass of a round, and in the next (see `process`).
    pass_buf: Vec<usize>,
    next_pass_buf: Vec<usize>,
    /// Per connection, the number of the last group that saved its state (`saved_buf`).
    saved_mark: Vec<u64>,
    group_no: u64,
    /// Busy-poll window (zero: never poll without sleeping).
    busy_poll: Duration,
    /// Collections wait in the lazyfree queue.
    lazy_work: bool,
    /// When a lazyfree step last failed (its message is rate-limited).
    lazy_error_at: Option<Instant>,
    /// Close a client whose unparsed input exceeds this (client-query-buffer-limit).
    query_limit: usize,
    /// The time of this event-loop round (ms since the epoch).
    round_ms: i64,
    /// Connections closed outside their own round (CLIENT KILL, timeout), to reap.
    killed: Vec<usize>,
    /// Connections given replies outside their own round (MONITOR), to write.
    woken: Vec<usize>,
    /// Connections with commands CLIENT PAUSE postponed, and the arguments of those
    /// commands while they run.
    postponed: Vec<usize>,
    owned: Vec<u8>,
    /// INFO's instantaneous metrics and recent client buffer peaks (`clients_cron`).
    metrics: Metrics,
    /// Blocked clients (see "Blocked clients" below): per (database, key), the connections
    /// waiting on it in arrival order; every blocked connection; the arrival counter.
    blocking: HashMap<(usize, Vec<u8>), VecDeque<usize>>,
    blocked: Vec<usize>,
    block_seq: u64,
    /// Connections unblocked in this round: the commands that waited behind their blocking
    /// command run at its end.
    unblocked: Vec<usize>,
    /// The pubsub class of client-output-buffer-limit: (hard, soft, soft seconds).
    obuf_limits: (u64, u64, i64),
    /// The `unixsocket` listener.
    unix: Option<UnixListener>,
    /// SIGHUP arrived (it is logged and ignored).
    hup: Arc<AtomicBool>,
    /// Per request of the batch `run_work` runs: a busy script answered it already
    /// (`scripting::busy`), so it does not run. Empty until a script answers one.
    answered: Vec<bool>,
}

/// Samples behind INFO's instantaneous metrics (Redis's `trackInstantaneousMetric`: the
/// average rate over the last 16 samples, one per clients cron) and the largest client
/// buffers of the last 8 seconds (Redis's `CLIENTS_PEAK_MEM_USAGE_SLOTS`).
#[derive(Default)]
struct Metrics {
    last: Option<(i64, [u64; 3])>,
    samples: [[f64; 16]; 3],
    next: usize,
    /// Per second (slot = second % 8): (second, largest input buffer, largest output).
    peaks: [(i64, usize, usize); 8],
}

impl Server {
    fn run(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
        stop: &AtomicBool,
    ) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        let mut next_expire = Instant::now() + EXPIRE_PERIOD;
        let mut ready = Vec::new();
        let mut written = Vec::new();
        let mut carry = Vec::new();
        // How long the last wait for events took (MAX after one that found none).
        let mut last_gap = Duration::MAX;
        while !self.shutdown && !stop.load(Ordering::Relaxed) {
            // When the wait for events must end: at the next expiry run, sooner while accepts
            // are pending, at once for connections with input left from a capped read.
            let waited = Instant::now();
            let mut deadline = next_expire.max(waited);
            std::mem::swap(&mut carry, &mut self.carry);
            if !carry.is_empty() || self.lazy_work {
                deadline = waited;
            }
            if self.backup.is_some() || self.backup_completing.is_some() {
                // Look at the backup's copier often: its pause is due when it is done (and
                // its completion, to report it).
                deadline = deadline.min(waited + BACKUP_POLL);
            }
            if self.accept_pending {
                deadline = deadline.min(waited + Duration::from_millis(10));
                self.accept(poll, listener);
            }
            if let Some(t) = self.next_block_deadline() {
                let left = t.saturating_sub(now_ms()).max(0) as u64;
                deadline = deadline.min(waited + Duration::from_millis(left));
            }
            if !self.postponed.is_empty() {
                // Wake when CLIENT PAUSE ends (at once after CLIENT UNPAUSE).
                let left = self.sv.admin.pause.map_or(0, |p| p.until_ms - now_ms());
                deadline = deadline.min(waited + Duration::from_millis(left.max(0) as u64));
            }
            let polled = last_gap < self.busy_poll
                && deadline > waited
                && busy_poll(
                    poll,
                    &mut events,
                    deadline.min(waited + self.busy_poll),
                    stop,
                );
            if !polled {
                if stop.load(Ordering::Relaxed) {
                    break; // a signal that came while polling (no EINTR to end the wait)
                }
                let wait = deadline.saturating_duration_since(Instant::now());
                if let Err(e) = poll.poll(&mut events, Some(wait)) {
                    if e.kind() == ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(format!("epoll_wait: {e}"));
                }
            }
            last_gap = if events.is_empty() {
                Duration::MAX
            } else {
                waited.elapsed()
            };
            self.round_ms = now_ms();
            if self.hup.swap(false, Ordering::Relaxed) {
                log::notice("Received SIGHUP, ignoring it (as Redis does)");
            }
            ready.clear();
            written.clear();
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    self.accept(poll, listener);
                    continue;
                }
                if ev.token() == UNIX_LISTENER {
                    self.accept_unix(poll);
                    continue;
                }
                let i = ev.token().0;
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read_ready(i, ev.is_read_closed() || ev.is_error(), &mut ready);
                }
                if ev.is_writable() {
                    self.write(i, poll.registry());
                    written.push(i);
                }
            }
            for i in carry.drain(..) {
                if !ready.contains(&i) {
                    self.read_ready(i, false, &mut ready);
                }
            }
            self.process(&ready);
            if self.backup.as_ref().is_some_and(daisy::Backup::is_ready) {
                self.finish_backup();
            }
            if self
                .backup_completing
                .as_ref()
                .is_some_and(|(_, h)| h.is_finished())
            {
                self.backup_completed();
            }
            if !self.blocked.is_empty() {
                self.time_out_blocked(self.round_ms.max(now_ms()));
            }
            if !self.unblocked.is_empty() {
                self.resume_unblocked();
            }
            if !self.postponed.is_empty()
                && self
                    .sv
                    .admin
                    .pause
                    .is_none_or(|p| self.round_ms >= p.until_ms)
            {
                self.sv.admin.pause = None;
                self.resume_postponed();
            }
            let woken = std::mem::take(&mut self.woken);
            for &i in ready.iter().chain(&woken) {
                self.write(i, poll.registry());
            }
            // Only connections that had an event or a request can have died or finished, or
            // were closed by another's command.
            let killed = std::mem::take(&mut self.killed);
            self.reap(
                poll,
                ready.iter().chain(&written).chain(&killed).chain(&woken),
            );
            if let Some(l) = self.sv.admin.listener.take() {
                self.switch_listener(poll, listener, l);
            }
            if Instant::now() >= next_expire {
                // No key expires while CLIENT PAUSE holds writes (as Redis).
                if self
                    .sv
                    .admin
                    .pause
                    .is_none_or(|p| self.round_ms >= p.until_ms)
                {
                    self.active_expire();
                }
                self.clients_cron(now_ms());
                // Messages of keys active expiry removed.
                let woken = std::mem::take(&mut self.woken);
                for &i in &woken {
                    self.write(i, poll.registry());
                }
                let killed = std::mem::take(&mut self.killed);
                self.reap(poll, killed.iter().chain(&woken));
                next_expire = Instant::now() + EXPIRE_PERIOD;
            }
            if self.lazy_work || (!ready.is_empty() && self.store.lazy_pending() > 0) {
                self.lazy_work = self.lazyfree();
            }
        }
        // Flush what is pending (a SHUTDOWN's round may hold replies of other clients).
        for i in 0..self.conns.len() {
            self.write(i, poll.registry());
        }
        // A backup past its pause is a finished copy: let its sync and rename end.
        if self.backup_completing.is_some() {
            self.backup_completed();
        }
        Ok(())
    }

    /// Listen on the socket CONFIG SET port or bind opened, instead of `listener`.
    fn switch_listener(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
        new: std::net::TcpListener,
    ) {
        if new.set_nonblocking(true).is_err() {
            return;
        }
        let mut new = TcpListener::from_std(new);
        if poll
            .registry()
            .register(&mut new, LISTENER, Interest::READABLE)
            .is_err()
        {
            return;
        }
        let _ = poll.registry().deregister(listener);
        *listener = new;
    }

    /// What Redis's `clientsCron` does every 100 ms for each connection: shrink an input
    /// buffer that is idle or much larger than recent requests needed, reset the reply
    /// buffer's peak every 5 s, close clients idle longer than `timeout`; and the figures
    /// INFO reports (instantaneous rates, recent largest buffers, clients' memory).
    fn clients_cron(&mut self, now: i64) {
        let timeout_s: i64 = self
            .sv
            .config
            .get("timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let (mut max_in, mut max_out, mut memory) = (0, 0, 0);
        for (i, slot) in self.conns.iter_mut().enumerate() {
            let Some(c) = slot else { continue };
            let idle_s = (now - c.cl.last_ms.max(c.cl.created_ms)).max(0) / 1000;
            // As Redis, neither a MONITOR connection nor one whose commands CLIENT PAUSE
            // holds is closed for being idle.
            let waiting = c.cl.admin.monitor || !c.cl.admin.postponed.is_empty();
            if timeout_s > 0 && idle_s > timeout_s && !c.dead && !waiting {
                c.dead = true;
                self.killed.push(i);
                continue;
            }
            let pending = c.rlen - c.rpos;
            let size = c.rbuf.len();
            if size - pending > 4 << 10 {
                if idle_s > 2 {
                    c.resize_input(pending);
                } else if size > 32 << 10 && size / 2 > c.qb_peak {
                    c.resize_input(c.qb_peak.max(pending));
                }
            }
            c.qb_peak = pending;
            if now - c.wpeak_ms >= 5000 {
                c.wpeak = c.wbuf.len() - c.wpos;
                c.wpeak_ms = now;
            }
            max_in = max_in.max(c.rbuf.len());
            max_out = max_out.max(c.wbuf.len() - c.wpos);
            memory += c.stats(false).tot_mem;
        }
        let m = &mut self.metrics;
        let sec = now / 1000;
        let slot = &mut m.peaks[(sec % 8) as usize];
        if slot.0 != sec {
            *slot = (sec, 0, 0);
        }
        slot.1 = slot.1.max(max_in);
        slot.2 = slot.2.max(max_out);
        let st = &mut self.sv.admin.stats;
        let live = m.peaks.iter().filter(|p| sec - p.0 < 8);
        st.recent_max_input = live.clone().map(|p| p.1).max().unwrap_or(0);
        st.recent_max_output = live.map(|p| p.2).max().unwrap_or(0);
        st.clients_memory = memory;
        let totals = [
            self.sv.counters.total_commands,
            st.net_input_bytes,
            st.net_output_bytes,
        ];
        if let Some((t0, last)) = m.last {
            if now > t0 {
                for k in 0..3 {
                    let rate =
                        totals[k].saturating_sub(last[k]) as f64 * 1000.0 / (now - t0) as f64;
                    m.samples[k][m.next] = rate;
                }
                m.next = (m.next + 1) % 16;
            }
        }
        m.last = Some((now, totals));
        let avg = |k: usize| m.samples[k].iter().sum::<f64>() / 16.0;
        st.ops_per_sec = avg(0) as u64;
        st.input_kbps = avg(1) / 1024.0;
        st.output_kbps = avg(2) / 1024.0;
        // Keys beyond tracking-table-max-keys are forgotten in batches, also while no
        // command runs (Redis's serverCron).
        if self.sv.tracking.active() {
            self.deliver_tracking();
        }
    }

    fn accept(&mut self, poll: &mut Poll, listener: &mut TcpListener) {
        loop {
            let (stream, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) => {
                    // EMFILE and the like: the rest stay in the backlog. The listener is
                    // edge-triggered and will not report them again, so retry every round.
                    if !self.accept_pending {
                        log::warning(&format!(
                            "Error accepting a client connection: {e} (retrying)"
                        ));
                    }
                    self.accept_pending = true;
                    return;
                }
            };
            let _ = stream.set_nodelay(true);
            if self.tcp_keepalive > 0 {
                set_keepalive(&stream, self.tcp_keepalive);
            }
            let laddr = stream
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            self.add_conn(poll, Stream::Tcp(stream), peer.to_string(), laddr);
        }
    }

    /// Accept what waits on the Unix socket.
    fn accept_unix(&mut self, poll: &mut Poll) {
        let Some(l) = self.unix.take() else { return };
        loop {
            match l.accept() {
                Ok((stream, _)) => {
                    let path = l
                        .local_addr()
                        .ok()
                        .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                        .unwrap_or_default();
                    let addr = format!("{path}:0");
                    self.add_conn(poll, Stream::Unix(stream), addr.clone(), addr);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.unix = Some(l);
    }

    /// A new client on `stream` (refused with Redis's error beyond maxclients).
    fn add_conn(&mut self, poll: &mut Poll, mut stream: Stream, addr: String, laddr: String) {
        {
            if self.sv.connected_clients >= self.sv.max_clients {
                let _ = stream.write(b"-ERR max number of clients reached\r\n");
                self.sv.rejected_connections += 1;
                return;
            }
            let i = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if poll
                .registry()
                .register(&mut stream, Token(i), Interest::READABLE)
                .is_err()
            {
                self.free.push(i);
                return;
            }
            let fd = match &stream {
                Stream::Tcp(t) => t.as_raw_fd(),
                Stream::Unix(u) => u.as_raw_fd(),
            };
            let cl = Client {
                id: self.next_id,
                addr,
                laddr,
                fd,
                created_ms: now_ms(),
                authed: !self.sv.acl.auth_required(),
                pubsub: crate::pubsub::ClientSubs {
                    conn: i,
                    ..Default::default()
                },
                ..Client::default()
            };
            self.by_id.insert(self.next_id, i);
            self.next_id += 1;
            self.sv.connected_clients += 1;
            self.sv.total_connections += 1;
            self.conns[i] = Some(Conn {
                stream,
                rbuf: vec![0; 16 << 10],
                rlen: 0,
                rpos: 0,
                wbuf: Vec::new(),
                wpos: 0,
                cl,
                close_after: false,
                dead: false,
                want_write: false,
                unread: false,
                resume: resp::Resume::default(),
                partial: Vec::new(),
                qb_peak: 0,
                wpeak: 0,
                wpeak_ms: now_ms(),
                soft_since: 0,
            });
        }
    }

    /// Read connection `i` and list it for this round; remember it for the next round when
    /// its read stopped at the cap.
    fn read_ready(&mut self, i: usize, hup: bool, ready: &mut Vec<usize>) {
        self.read(i, hup);
        ready.push(i);
        if let Some(Some(c)) = self.conns.get(i) {
            if c.unread && !c.dead {
                self.carry.push(i);
            }
        }
    }

    /// Read what the socket has (edge-triggered: until it would block, or a short read), at
    /// most about [`READ_ROUND_CAP`] bytes per round.
    fn read(&mut self, i: usize, hup: bool) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        // Drop what was run already, so the buffer holds only unparsed bytes.
        if c.rpos > 0 {
            c.rbuf.copy_within(c.rpos..c.rlen, 0);
            c.rlen -= c.rpos;
            c.rpos = 0;
        }
        if c.rlen == 0 && c.rbuf.len() > 1 << 20 {
            c.rbuf = vec![0; 16 << 10]; // after a large request: give the memory back
        }
        c.unread = false;
        let stats = &mut self.sv.admin.stats;
        let mut taken = 0;
        loop {
            if taken >= self.read_cap {
                c.unread = true;
                return;
            }
            if c.rbuf.len() - c.rlen < 4 << 10 {
                let grown = (c.rbuf.len() * 2).max(16 << 10);
                c.rbuf.resize(grown, 0);
            }
            let mut drained = false;
            match c.stream.read(&mut c.rbuf[c.rlen..]) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(n) => {
                    let room = c.rbuf.len() - c.rlen;
                    c.qb_peak = c.qb_peak.max(c.rlen + n.max(16 << 10));
                    c.rlen += n;
                    taken += n;
                    c.cl.last_ms = self.round_ms;
                    stats.net_input_bytes += n as u64;
                    stats.reads_processed += 1;
                    // A short read took everything the socket held: data arriving later
                    // raises a new edge, so there is no need to read again until EAGAIN
                    // (that would cost a second system call per request).
                    // (A peer that also closed must be read to its end of file.)
                    drained = n < room && !hup;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
            if c.rlen > self.query_limit {
                log::warning(&format!(
                    "Closing client that reached max query buffer length: id={} addr={} (qbuf over {} bytes)",
                    c.cl.id, c.cl.addr, self.query_limit
                ));
                c.dead = true;
                return;
            }
            if drained {
                return;
            }
        }
    }

    /// Write pending replies until the socket would block.
    fn write(&mut self, i: usize, reg: &mio::Registry) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        c.wpeak = c.wpeak.max(c.wbuf.len() - c.wpos);
        if c.wpos < c.wbuf.len() {
            self.sv.admin.stats.writes_processed += 1;
        }
        while c.wpos < c.wbuf.len() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(n) => {
                    c.wpos += n;
                    self.sv.admin.stats.net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !c.want_write {
                        let both = Interest::READABLE | Interest::WRITABLE;
                        if reg.reregister(&mut c.stream, Token(i), both).is_err() {
                            c.dead = true;
                        }
                        c.want_write = true;
                    }
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
        }
        c.wbuf.clear();
        c.wpos = 0;
        if c.want_write {
            c.want_write = false;
            if reg
                .reregister(&mut c.stream, Token(i), Interest::READABLE)
                .is_err()
            {
                c.dead = true;
            }
        }
        if c.wbuf.capacity() > 1 << 20 {
            c.wbuf.shrink_to(64 << 10);
        }
    }

    /// Close connections that are gone, or done after QUIT or a protocol error.
    fn reap<'a>(&mut self, poll: &mut Poll, touched: impl Iterator<Item = &'a usize>) {
        for &i in touched {
            let close = match self.conns.get(i) {
                Some(Some(c)) => c.dead || (c.close_after && c.wpos >= c.wbuf.len()),
                _ => false,
            };
            if close {
                let mut c = self.conns[i].take().unwrap();
                let _ = poll.registry().deregister(&mut c.stream);
                self.store.watches.unwatch_all(c.cl.id);
                self.free.push(i);
                self.sv.connected_clients -= 1;
                if c.cl.admin.monitor {
                    self.sv.admin.monitors -= 1;
                }
                if !c.cl.admin.postponed.is_empty() {
                    self.sv.admin.blocked_clients -= 1;
                }
                if c.cl.blocked.is_some() {
                    self.unregister_blocked(i, &c.cl);
                }
                if c.cl.pubsub.active() {
                    self.sv.pubsub.remove_client(&c.cl);
                }
                self.by_id.remove(&c.cl.id);
                if c.cl.tracking.on {
                    self.sv.tracking.forget(&c.cl);
                    self.store.track = self.sv.tracking.active();
                }
            }
        }
    }

    /// Parse every complete request of the ready connections and run them.
    fn process(&mut self, ready: &[usize]) {
        let mut work = std::mem::take(&mut self.work_buf);
        let mut ranges = std::mem::take(&mut self.ranges_buf);
        let mut one = std::mem::take(&mut self.one_buf);
        // A client that must still authenticate gets Redis's small request limits and has one
        // request parsed per pass: the next is parsed only after this one ran, so a request
        // pipelined right after AUTH gets the limits of an authenticated client, as in Redis.
        let need_auth = self.sv.acl.auth_required();
        let unauth_limits = Limits {
            unauthenticated: true,
            ..self.limits
        };
        let mut cur = std::mem::take(&mut self.pass_buf);
        let mut next = std::mem::take(&mut self.next_pass_buf);
        cur.clear();
        cur.extend_from_slice(ready);
        loop {
            work.clear();
            ranges.clear();
            next.clear();
            for &i in &cur {
                let Some(Some(c)) = self.conns.get_mut(i) else {
                    continue;
                };
                // A connection with commands CLIENT PAUSE postponed runs those first: its input
                // waits until they ran.
                if c.close_after
                    || !c.cl.admin.postponed.is_empty()
                    || c.cl.blocked.is_some()
                    || !c.cl.admin.resume.is_empty()
                {
                    continue;
                }
                let unauth = need_auth && !c.cl.authed;
                let lim = if unauth { &unauth_limits } else { &self.limits };
                if c.parse_requests(i, lim, unauth, &mut one, &mut ranges, &mut work) {
                    next.push(i);
                }
            }
            if !work.is_empty() {
                self.run_work(&work, &ranges);
                if !self.sv.admin.feed.is_empty() {
                    self.feed_monitors();
                }
            }
            if next.is_empty() || self.shutdown {
                break;
            }
            std::mem::swap(&mut cur, &mut next);
        }
        (self.pass_buf, self.next_pass_buf) = (cur, next);
        (self.work_buf, self.ranges_buf, self.one_buf) = (work, ranges, one);
    }

    /// Run a round's requests in order, grouped into transactions.
    ///
    /// When a group's transaction fails at command f, nothing of it is applied: what its
    /// commands changed in DRAM (reply buffers, close flags, client state such as AUTH, the
    /// protocol, the selected database or a MULTI queue, counters, the keyspace's handles
    /// and WATCH marks) is restored, commands start..f run again as a group (they fit
    /// before), and f runs alone, answering with the error if it fails again. So each command
    /// runs at most three times, whatever the failure.
    fn run_work(&mut self, work: &[Work], ranges: &[Range<usize>]) {
        let now = now_ms();
        // Each request's command, looked up once (for its prefetch hints and its run).
        let mut specs = std::mem::take(&mut self.specs_buf);
        specs.clear();
        specs.extend(work.iter().map(|w| self.spec_of(w, ranges)));
        let mut i = 0;
        self.answered.clear();
        // The command a failed group stopped at: the groups before it end there, then it
        // runs alone.
        let mut stop_at: Option<usize> = None;
        while i < work.len() && !self.shutdown {
            if stop_at.is_some_and(|f| f < i) {
                stop_at = None;
            }
            let alone = stop_at == Some(i);
            let end = if alone {
                i + 1
            } else {
                stop_at.unwrap_or(work.len())
            };
            // What a failed group must undo, per connection it touched.
            let mut saved = std::mem::take(&mut self.saved_buf);
            saved.clear();
            self.group_no += 1;
            let group = self.group_no;
            let counters = (self.sv.counters, self.store.expired_keys, self.store.dirty);
            let feed_len = self.sv.admin.feed.len();
            self.sv.pubsub.changed = false;
            let pool = self.pool.clone();
            let start = i;
            let failed_at = std::cell::Cell::new(start);
            let res = pool.transaction(|tx| {
                let mut j = start;
                let room0 = tx.log_room();
                // The connection of the group's requests so far, None once there are several.
                let mut group_conn: Option<Option<usize>> = None;
                while j < end && !self.shutdown {
                    let room = tx.log_room();
                    if j > start && (room < LOG_RESERVE || room0 - room > GROUP_LOG_BYTES) {
                        break;
                    }
                    if self.answered.get(j) == Some(&true) {
                        j += 1;
                        continue;
                    }
                    // A script that runs past the busy threshold answers the other
                    // connections (`scripting::busy`), which needs their earlier replies
                    // durable and written first: in a group that holds other connections'
                    // requests before it, such a script is stopped instead, the group fails
                    // (`BUSY_RESTART`), and the retry runs it in a group of its own.
                    let scripted = self.runs_script(&work[j], ranges);
                    let shared = group_conn.is_some_and(|g| g != Some(work[j].conn));
                    group_conn = match group_conn {
                        None => Some(Some(work[j].conn)),
                        Some(g) if g == Some(work[j].conn) => Some(g),
                        Some(_) => Some(None),
                    };
                    // Overlap the cache misses of the commands ahead with this one's work:
                    // bucket of the command 8 ahead, entry of the one 4 ahead.
                    self.prefetch(work.get(j + 8), specs.get(j + 8), ranges, 1);
                    self.prefetch(work.get(j + 4), specs.get(j + 4), ranges, 2);
                    let w = &work[j];
                    if let Some(Some(c)) = self.conns.get(w.conn) {
                        if self.saved_mark.len() <= w.conn {
                            self.saved_mark.resize(w.conn + 1, 0);
                        }
                        if self.saved_mark[w.conn] != group {
                            self.saved_mark[w.conn] = group;
                            saved.push((w.conn, c.wbuf.len(), c.close_after, c.cl.clone()));
                        }
                    }
                    failed_at.set(j);
                    if scripted {
                        self.before_script(work, j, ranges, group, shared);
                    }
                    let r = self.exec(tx, w, specs[j], ranges, now);
                    if scripted {
                        self.after_script(work);
                    }
                    r?;
                    if !self.store.ready.is_empty() {
                        self.serve_blocked(tx, now, &mut saved, group)?;
                    }
                    j += 1;
                    if self.sv.save.request.is_some() {
                        // SAVE/BGSAVE: the group ends here, so the backup starts right after
                        // this command and before the next one (and SAVE's reply, written
                        // after the backup, keeps its place among the client's replies).
                        self.save_conn = w.conn;
                        break;
                    }
                }
                Ok::<_, daisy::Error>(j)
            });
            match res {
                Ok(j) => {
                    self.store.committed();
                    self.sv.acl.committed();
                    if !self.sv.acl.kill_users.is_empty() {
                        self.apply_acl_kills();
                    }
                    if !self.sv.acl.kill_subscribers.is_empty() {
                        self.close_revoked_subscribers();
                    }
                    self.sv.group_commits += 1;
                    if !self.sv.admin.kill.is_empty() {
                        self.apply_kills();
                    }
                    if !self.sv.admin.unblock.is_empty() {
                        self.apply_unblocks();
                    }
                    if !self.sv.pubsub.outbox.is_empty() || !self.store.events.is_empty() {
                        self.deliver_pubsub();
                    }
                    if self.store.track || !self.sv.tracking.outbox.is_empty() {
                        self.deliver_tracking();
                    }
                    if let Some(kind) = self.sv.save.request.take() {
                        self.run_save(kind);
                    }
                    if self.sv.over_maxmemory() {
                        self.evict();
                    }
                    i = j;
                }
                Err(e) => {
                    self.sv.group_retries += 1;
                    self.shutdown = false;
                    self.sv.acl.rollback();
                    self.sv.save.request = None;
                    self.sv.admin.kill.clear();
                    self.sv.admin.unblock.clear();
                    self.store.ready.clear();
                    self.sv.admin.feed.truncate(feed_len);
                    self.sv.pubsub.discard();
                    let restored_postponed = !self.postponed.is_empty();
                    (self.sv.counters, self.store.expired_keys, self.store.dirty) = counters;
                    self.store.resync();
                    for (ci, len, close, cl) in saved.drain(..) {
                        if let Some(Some(c)) = self.conns.get_mut(ci) {
                            c.wbuf.truncate(len);
                            c.close_after = close;
                            c.cl = cl;
                        }
                    }
                    if restored_postponed {
                        self.recount_blocked();
                    }
                    // Clients the group blocked or served are as they were before it.
                    self.rebuild_blocked();
                    if self.sv.pubsub.changed {
                        let clients = self.conns.iter().flatten().map(|c| &c.cl);
                        self.sv.pubsub.rebuild(clients);
                    }
                    // Invalidations the group queued stay (see `tracking`); the clients'
                    // tracking was restored, so the counts follow them.
                    if self.sv.tracking.changed {
                        let clients = self.conns.iter().flatten().map(|c| &c.cl);
                        self.sv.tracking.rebuild(clients);
                        self.store.track = self.sv.tracking.active();
                    }
                    if alone {
                        // Failed on its own: its error is its reply. A failed EXEC ends the
                        // client's transaction, as any EXEC does.
                        let is_exec = specs[i].is_some_and(|s| s.name == "exec");
                        if let Some(Some(c)) = self.conns.get_mut(work[i].conn) {
                            let msg = error_reply(&e);
                            log_pool_full(&e, &mut self.oom_logged_ms);
                            resp::error(&mut c.wbuf, &msg);
                            self.sv.count_error(&msg);
                            if is_exec {
                                c.cl.multi = None;
                                self.store.watches.unwatch_all(c.cl.id);
                            }
                        }
                        i += 1;
                        stop_at = None;
                    } else {
                        stop_at = Some(failed_at.get());
                    }
                }
            }
            self.saved_buf = saved;
        }
        if !self.sv.tracking.outbox.is_empty() {
            self.deliver_tracking(); // what a failed group queued, if nothing committed since
        }
        self.specs_buf = specs;
    }

    /// SAVE (back up now, then reply) or BGSAVE (start the copier), after the command's
    /// transaction committed: between two transactions, as `daisy::Pool::begin_backup` needs.
    fn run_save(&mut self, kind: crate::backup::SaveKind) {
        let dst = crate::backup::destination(&self.sv.config);
        let now = now_ms();
        match kind {
            crate::backup::SaveKind::Save => {
                self.sv.save.running_since_ms = Some(now);
                let r = self.pool.backup_to(&dst).map_err(|e| e.to_string());
                self.sv.save.finished(now_ms(), &r, self.store.dirty);
                let reply = match &r {
                    Ok(rep) => {
                        log_backup("DB saved on disk", rep);
                        None
                    }
                    Err(e) => {
                        log::warning(&format!("SAVE to {} failed: {e}", dst.display()));
                        Some(format!("ERR {e}"))
                    }
                };
                if let Some(Some(c)) = self.conns.get_mut(self.save_conn) {
                    match &reply {
                        None => resp::ok(&mut c.wbuf),
                        Some(msg) => resp::error(&mut c.wbuf, msg),
                    }
                }
                if let Some(msg) = reply {
                    self.sv.count_error(&msg);
                }
            }
            crate::backup::SaveKind::Bgsave => match self.pool.begin_backup(&dst) {
                Ok(b) => {
                    log::notice(&format!(
                        "Background saving started: backup of the pool to {}",
                        dst.display()
                    ));
                    self.sv.save.running_since_ms = Some(now);
                    self.backup = Some(b);
                }
                Err(e) => {
                    log::warning(&format!(
                        "Background saving to {} failed: {e}",
                        dst.display()
                    ));
                    self.sv
                        .save
                        .finished(now, &Err(e.to_string()), self.store.dirty);
                }
            },
        }
    }

    /// The background backup's pause: between two transactions, the copier done. The copy
    /// is final after it; its sync and rename run on a thread of their own
    /// (`backup_completed` reports them), so the pause does not wait for the backup's disk.
    fn finish_backup(&mut self) {
        let Some(b) = self.backup.take() else { return };
        let dst = b.destination().to_path_buf();
        match b.freeze() {
            Ok(frozen) => {
                // The changes counted now are those in the copy.
                self.backup_dirty = self.store.dirty;
                let spawned = std::thread::Builder::new()
                    .name("daisy-backup-sync".into())
                    .spawn(move || frozen.complete().map_err(|e| e.to_string()));
                match spawned {
                    Ok(h) => self.backup_completing = Some((dst, h)),
                    Err(e) => self.backup_done(&dst, Err(format!("spawn: {e}"))),
                }
            }
            Err(e) => {
                self.backup_dirty = self.store.dirty;
                self.backup_done(&dst, Err(e.to_string()));
            }
        }
    }

    /// The background backup's sync and rename ended (or the server stops: wait for them).
    fn backup_completed(&mut self) {
        let Some((dst, h)) = self.backup_completing.take() else {
            return;
        };
        let r = h
            .join()
            .unwrap_or_else(|_| Err("the backup's sync thread panicked".into()));
        self.backup_done(&dst, r);
    }

    /// Record and log a finished BGSAVE, then start a scheduled one.
    fn backup_done(&mut self, dst: &Path, r: Result<daisy::BackupReport, String>) {
        self.sv.save.finished(now_ms(), &r, self.backup_dirty);
        match &r {
            Ok(rep) => log_backup("Background saving terminated with success", rep),
            Err(e) => log::warning(&format!(
                "Background saving to {} failed: {e}",
                dst.display()
            )),
        }
        if std::mem::take(&mut self.sv.save.scheduled) {
            self.run_save(crate::backup::SaveKind::Bgsave);
        }
    }

    /// The command request `w` names (None: a protocol error, or no such command).
    fn spec_of(&self, w: &Work, ranges: &[Range<usize>]) -> Option<&'static cmd::Spec> {
        if w.proto_error.is_some() {
            return None;
        }
        let c = self.conns.get(w.conn)?.as_ref()?;
        let r = ranges.get(w.args.start)?;
        let src: &[u8] = if w.owned { &self.owned } else { &c.rbuf };
        self.table.find(src.get(r.clone())?)
    }

    /// Prefetch the key of request `w` (its first argument, for commands whose key is it),
    /// whose command is `spec`.
    #[inline]
    fn prefetch(
        &self,
        w: Option<&Work>,
        spec: Option<&Option<&'static cmd::Spec>>,
        ranges: &[Range<usize>],
        stage: u8,
    ) {
        let (Some(w), Some(&spec)) = (w, spec) else {
            return;
        };
        if w.args.len() < 2 || w.proto_error.is_some() {
            return;
        }
        let Some(Some(c)) = self.conns.get(w.conn) else {
            return;
        };
        // A postponed request's arguments live in `owned`, as in `spec_of`.
        let src: &[u8] = if w.owned { &self.owned } else { &c.rbuf };
        let arg = |k: usize| {
            ranges
                .get(w.args.start + k)
                .and_then(|r| src.get(r.clone()))
        };
        let Some(key) = arg(1) else { return };
        self.store.prefetch(c.cl.db, key, stage);
        // Commands on one field or member of a collection: that entry of its table too.
        if w.args.len() >= 3 && spec.is_some_and(cmd::member_arg) {
            if let Some(member) = arg(2) {
                self.store.prefetch_member(c.cl.db, key, member, stage);
            }
        }
    }

    /// Run one request inside `tx`, appending its reply; `spec` is its command
    /// (`spec_of`).
    fn exec(
        &mut self,
        tx: &mut daisy::Tx,
        w: &Work,
        spec: Option<&'static cmd::Spec>,
        ranges: &[Range<usize>],
        now: i64,
    ) -> daisy::Result<()> {
        let Some(Some(c)) = self.conns.get(w.conn) else {
            return Ok(());
        };
        if c.close_after || self.sv.admin.kill.contains(&c.cl.id) {
            // After QUIT or a protocol error, or killed by CLIENT KILL: ignored, as in Redis.
            return Ok(());
        }
        let src: &[u8] = if w.owned { &self.owned } else { &c.rbuf };
        // A CLIENT command sees every connection, its own buffers included.
        let introspect =
            w.proto_error.is_none() && wants_others(&src[ranges[w.args.start].clone()], &c.cl);
        if introspect {
            self.list_others(w.conn, now);
        }
        let Some(Some(c)) = self.conns.get_mut(w.conn) else {
            return Ok(());
        };
        if let Some(e) = &w.proto_error {
            let msg = format!("ERR {e}");
            resp::error(&mut c.wbuf, &msg);
            self.sv.count_error(&msg);
            c.close_after = true;
            return Ok(());
        }
        if introspect {
            c.cl.admin.conn = c.stats(true);
        }
        c.cl.last_ms = now;
        // Arguments as slices of the input buffer: on the stack for the usual few.
        let src: &[u8] = if w.owned { &self.owned } else { &c.rbuf };
        let mut small: [&[u8]; 8] = [&[]; 8];
        let big: Vec<&[u8]>;
        let n = w.args.len();
        let args: &[&[u8]] = if n <= small.len() {
            for (slot, r) in small.iter_mut().zip(&ranges[w.args.clone()]) {
                *slot = &src[r.clone()];
            }
            &small[..n]
        } else {
            big = ranges[w.args.clone()]
                .iter()
                .map(|r| &src[r.clone()])
                .collect();
            &big
        };
        // A blocked client's commands that came after its blocking command wait for it.
        if let Some(b) = c.cl.blocked.as_mut() {
            b.pending.push(args.iter().map(|a| a.to_vec()).collect());
            return Ok(());
        }
        // CLIENT PAUSE: the command waits (every command, or those that may write), and so
        // do the ones after it from the same connection (Redis's `blockPostponeClient`).
        // A command refused anyway (unknown, arity, ...) answers at once.
        let paused = self.sv.admin.pause.filter(|p| now < p.until_ms);
        if !c.cl.admin.postponed.is_empty()
            || paused.is_some_and(|p| {
                (p.all || may_write(&self.table, args, &c.cl, &self.sv.scripting))
                    && cmd::precheck(spec, args, &c.cl, &self.sv).is_none()
            })
        {
            if c.cl.admin.postponed.is_empty() {
                self.postponed.push(w.conn);
                self.sv.admin.blocked_clients += 1;
            }
            c.cl.admin
                .postponed
                .push(args.iter().map(|a| a.to_vec()).collect());
            return Ok(());
        }
        if introspect {
            c.cl.admin.argv_mem = args.iter().map(|a| a.len()).sum();
        }
        self.store.expire_paused = paused.is_some();
        let before = c.wbuf.len();
        c.cl.pubsub.pushed = 0;
        let action = cmd::execute_found(
            &self.table,
            spec,
            &mut self.store,
            tx,
            &mut c.cl,
            &mut self.sv,
            args,
            now,
            &mut c.wbuf,
        )?;
        c.cl.admin.argv_mem = 0;
        if c.cl.blocked.is_some() {
            self.register_blocked(w.conn);
            return Ok(());
        }
        // CLIENT REPLY OFF / SKIP: the reply is dropped (Redis's `prepareClientToWrite`); a
        // SKIP covers the command after it.
        // Pub/sub pushes (subscription confirmations, messages) are kept (Redis's
        // `CLIENT_PUSHING`).
        let mode = c.cl.admin.reply;
        if matches!(mode, ReplyMode::Off | ReplyMode::Skip) {
            c.wbuf.truncate(before.max(c.cl.pubsub.pushed));
        }
        c.cl.admin.reply = match mode {
            ReplyMode::Skip => ReplyMode::On,
            ReplyMode::SkipNext => ReplyMode::Skip,
            m => m,
        };
        match action {
            Action::Continue => {}
            Action::Close => c.close_after = true,
            Action::Shutdown => self.shutdown = true,
        }
        if !self.sv.admin.others.is_empty() {
            self.sv.admin.others.clear();
        }
        if self.sv.admin.config_changed {
            self.apply_config();
        }
        Ok(())
    }

    /// Whether request `w` may run a script (EVAL, FCALL, ..., or an EXEC with one queued).
    fn runs_script(&self, w: &Work, ranges: &[Range<usize>]) -> bool {
        if w.proto_error.is_some() {
            return false;
        }
        let Some(Some(c)) = self.conns.get(w.conn) else {
            return false;
        };
        let src: &[u8] = if w.owned { &self.owned } else { &c.rbuf };
        crate::scripting::runs_script(&src[ranges[w.args.start].clone()], &c.cl)
    }

    /// Before request `j` of `work`, one that may run a script. When the group holds requests of
    /// other connections before it (`shared`), a script past the busy threshold is stopped
    /// and fails the group (`scripting::BUSY_RESTART`: the retry runs it in a group of its
    /// own); otherwise the other connections are handed to the script (`scripting::busy`):
    /// one past the busy threshold answers them.
    #[cold]
    fn before_script(
        &mut self,
        work: &[Work],
        j: usize,
        ranges: &[Range<usize>],
        group: u64,
        shared: bool,
    ) {
        if shared {
            self.sv.scripting.busy.borrow_mut().restart = true;
        } else {
            self.lend_peers(work, j, ranges, group);
        }
    }

    /// After a request that may run a script (see `before_script`).
    #[cold]
    fn after_script(&mut self, work: &[Work]) {
        self.sv.scripting.busy.borrow_mut().restart = false;
        self.take_back_peers(work);
    }

    /// Before a script: write the other connections' committed replies, and hand those the
    /// script may answer to it, with their unrun input (see `scripting::busy` for which).
    /// Connections the current group touched are left out: their replies are not durable yet.
    fn lend_peers(&mut self, work: &[Work], j: usize, ranges: &[Range<usize>], group: u64) {
        use crate::scripting::busy::{Outcome, Peer};
        use std::os::fd::AsRawFd;
        let me = work[j].conn;
        // The requests of this batch after the script, per connection, in order.
        let mut later: Vec<(usize, usize)> = (j + 1..work.len())
            .filter(|&k| self.answered.get(k) != Some(&true) && work[k].conn != me)
            .map(|k| (work[k].conn, k))
            .collect();
        later.sort_by_key(|&(conn, _)| conn);
        let need_auth = self.sv.acl.auth_required();
        let acl_free = self.sv.acl.default_unrestricted;
        let mut list = Vec::new();
        let mut later_at = 0;
        for i in 0..self.conns.len() {
            let from = later_at;
            while later_at < later.len() && later[later_at].0 == i {
                later_at += 1;
            }
            let mine = &later[from..later_at];
            if i == me || self.saved_mark.get(i) == Some(&group) {
                continue;
            }
            let Some(Some(c)) = self.conns.get_mut(i) else {
                continue;
            };
            if c.wpos < c.wbuf.len() && !c.dead {
                c.write_now(&mut self.sv.admin.stats);
                if c.wpos < c.wbuf.len() {
                    self.woken.push(i);
                }
            }
            let eligible = !c.dead
                && !c.close_after
                && c.wpos >= c.wbuf.len()
                && c.cl.blocked.is_none()
                && c.cl.admin.postponed.is_empty()
                && c.cl.admin.resume.is_empty()
                && !c.cl.admin.monitor
                && (c.cl.authed || !need_auth)
                && c.cl.user.id == 0
                && acl_free
                && (c.cl.resp3 || !c.cl.pubsub.active())
                && mine.iter().all(|&(_, k)| !work[k].owned);
            if !eligible {
                continue;
            }
            let mut peer = Peer {
                conn: i,
                fd: c.stream.as_raw_fd(),
                input: Vec::new(),
                limits: self.limits,
                parsed: Vec::with_capacity(mine.len()),
                arg_ranges: Vec::new(),
                tail: c.rpos..c.rlen,
                outcome: Outcome {
                    in_multi: c.cl.multi.is_some(),
                    ..Default::default()
                },
            };
            for &(_, k) in mine {
                let at = peer.arg_ranges.len();
                peer.arg_ranges
                    .extend_from_slice(&ranges[work[k].args.clone()]);
                peer.parsed.push((k, at..peer.arg_ranges.len()));
            }
            if !mine.is_empty() || c.rpos < c.rlen {
                peer.input = std::mem::take(&mut c.rbuf);
            } else {
                peer.tail = 0..0;
            }
            list.push(peer);
        }
        let mut peers = self.sv.scripting.busy.borrow_mut();
        peers.list = list;
    }

    /// After a script: the connections lent to it get their input back; the requests it
    /// answered are marked done, and what they changed is applied.
    fn take_back_peers(&mut self, work: &[Work]) {
        let list = std::mem::take(&mut self.sv.scripting.busy.borrow_mut().list);
        for p in list {
            let Some(Some(c)) = self.conns.get_mut(p.conn) else {
                continue;
            };
            if !p.input.is_empty() {
                c.rbuf = p.input;
            }
            let o = p.outcome;
            if o.parsed_done > 0 {
                if self.answered.len() < work.len() {
                    self.answered.resize(work.len(), false);
                }
                for &(k, _) in &p.parsed[..o.parsed_done] {
                    self.answered[k] = true;
                }
            }
            if o.tail_used > 0 {
                c.rpos += o.tail_used;
                c.resume = Default::default();
                c.partial.clear();
            }
            if o.unwatch {
                self.store.watches.unwatch_all(c.cl.id);
            }
            if o.multi_ended {
                c.cl.multi = None;
            }
            if o.in_multi {
                let m = c.cl.multi.get_or_insert_with(Default::default);
                m.error |= o.multi_flagged;
                for q in &o.queued {
                    let argv: Vec<&[u8]> = q.iter().map(|a| &a[..]).collect();
                    // Queued by the busy script's handling only once found in the table.
                    if let Some(s) = self.table.find(argv[0]) {
                        m.push(s, &argv);
                    }
                }
            }
            if !o.unsent.is_empty() {
                c.wbuf.extend_from_slice(&o.unsent);
                self.woken.push(p.conn);
            }
            if o.quit {
                c.close_after = true;
                self.killed.push(p.conn);
            }
            for args in &o.rejected {
                let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                self.sv.counters.rejected_calls += 1;
                if let Some(s) = self.table.find(argv[0]) {
                    self.sv.cmdstat(s, &argv).rejected += 1;
                }
            }
            for e in &o.errors {
                self.sv.count_error(e);
            }
        }
    }

    /// List every connection but `me` in `AdminState::others`, for a CLIENT command.
    fn list_others(&mut self, me: usize, now: i64) {
        let mut rows = Vec::new();
        for (i, slot) in self.conns.iter_mut().enumerate() {
            let Some(x) = slot else { continue };
            if i == me || x.dead || self.sv.admin.kill.contains(&x.cl.id) {
                continue;
            }
            x.cl.admin.conn = x.stats(false);
            let dirty = self.store.watches.is_dirty(x.cl.id);
            rows.push(ClientRow::of(&x.cl, now, dirty, x.close_after));
        }
        self.sv.admin.others = rows;
    }

    /// The connections whose commands CLIENT PAUSE holds, after a failed group restored them.
    fn recount_blocked(&mut self) {
        self.postponed.sort_unstable();
        self.postponed.dedup();
        let conns = &self.conns;
        self.postponed
            .retain(|&i| matches!(conns.get(i), Some(Some(c)) if !c.cl.admin.postponed.is_empty()));
        self.sv.admin.blocked_clients = self.postponed.len() + self.blocked.len();
    }

    /// Run the commands CLIENT PAUSE postponed, once the pause is over, then the rest of those
    /// connections' input.
    fn resume_postponed(&mut self) {
        let conns = std::mem::take(&mut self.postponed);
        self.sv.admin.blocked_clients = self.blocked.len();
        self.run_saved(conns, |c| std::mem::take(&mut c.cl.admin.postponed));
    }

    /// Run the commands `take` hands over from each of `conns` (saved by CLIENT PAUSE, or by
    /// a blocked client), in order, as one batch, then the rest of those connections' input.
    fn run_saved(&mut self, conns: Vec<usize>, take: impl Fn(&mut Conn) -> Vec<Vec<Vec<u8>>>) {
        let (mut work, mut ranges) = (Vec::new(), Vec::new());
        let mut owned = std::mem::take(&mut self.owned);
        owned.clear();
        for &i in &conns {
            let Some(Some(c)) = self.conns.get_mut(i) else {
                continue;
            };
            for cmd in take(c) {
                let start = ranges.len();
                for a in cmd {
                    ranges.push(owned.len()..owned.len() + a.len());
                    owned.extend_from_slice(&a);
                }
                work.push(Work {
                    conn: i,
                    args: start..ranges.len(),
                    proto_error: None,
                    owned: true,
                });
            }
        }
        self.owned = owned;
        if !work.is_empty() {
            self.run_work(&work, &ranges);
        }
        self.process(&conns);
        self.woken.extend(conns);
    }

    // ---- Blocked clients ----------------------------------------------------------------
    //
    // A blocking command that finds nothing (BLPOP on empty lists) sets `Client::blocked`
    // and answers nothing; `exec` then registers the connection under each of its keys, in
    // arrival order, and the connection's later commands wait in `Blocked::pending`, its
    // input unparsed. A command that stores a list or sorted set under a key clients wait on
    // marks it ready (`Keyspace::signal_ready`); right after that command, inside the same
    // group transaction, `serve_blocked` runs the waiting clients' commands again, oldest
    // first, each looking at the ready key only (Redis's `handleClientsBlockedOnKeys`). A
    // served client's reply goes out with the group, after its commit, like any reply: the
    // pop it reports is durable. Its waiting commands run at the end of the round
    // (`resume_unblocked`). When a group fails, the clients it touched are restored with
    // the rest of its state and the registry is rebuilt from them. A timeout, CLIENT UNBLOCK
    // or a disconnect ends the wait without touching the pool. Nothing about blocked clients
    // is persistent: after a restart they are simply gone (their connections were).

    /// Register connection `i`, whose command just blocked it.
    fn register_blocked(&mut self, i: usize) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        let Some(b) = c.cl.blocked.as_mut() else {
            return;
        };
        self.block_seq += 1;
        b.seq = self.block_seq;
        for k in &b.keys {
            self.blocking
                .entry((b.db, k.clone()))
                .or_default()
                .push_back(i);
            let dbs = self.store.blocking.entry(k.clone()).or_default();
            if !dbs.contains(&b.db) {
                dbs.push(b.db);
            }
        }
        self.blocked.push(i);
        self.sv.admin.blocked_clients = self.postponed.len() + self.blocked.len();
    }

    /// Remove connection `i` (whose client is `cl`) from the registry.
    fn unregister_blocked(&mut self, i: usize, cl: &Client) {
        if let Some(b) = &cl.blocked {
            for k in &b.keys {
                let key = (b.db, k.clone());
                if let Some(q) = self.blocking.get_mut(&key) {
                    q.retain(|&x| x != i);
                    if q.is_empty() {
                        self.blocking.remove(&key);
                        if let Some(dbs) = self.store.blocking.get_mut(k) {
                            dbs.retain(|&d| d != b.db);
                            if dbs.is_empty() {
                                self.store.blocking.remove(k);
                            }
                        }
                    }
                }
            }
        }
        self.blocked.retain(|&x| x != i);
        self.sv.admin.blocked_clients = self.postponed.len() + self.blocked.len();
    }

    /// The registry again from the clients' own state (after a failed group restored them).
    fn rebuild_blocked(&mut self) {
        self.blocking.clear();
        self.store.blocking.clear();
        self.blocked.clear();
        let mut waiting: Vec<(u64, usize)> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.as_ref()?.cl.blocked.as_ref()?.seq, i)))
            .collect();
        waiting.sort_unstable();
        for (_, i) in waiting {
            let b = self.conns[i].as_ref().unwrap().cl.blocked.as_ref().unwrap();
            for k in &b.keys {
                self.blocking
                    .entry((b.db, k.clone()))
                    .or_default()
                    .push_back(i);
                let dbs = self.store.blocking.entry(k.clone()).or_default();
                if !dbs.contains(&b.db) {
                    dbs.push(b.db);
                }
            }
            self.blocked.push(i);
        }
        let conns = &self.conns;
        self.unblocked.retain(|&i| {
            matches!(conns.get(i), Some(Some(c)) if c.cl.blocked.is_none() && !c.cl.admin.resume.is_empty())
        });
        self.sv.admin.blocked_clients = self.postponed.len() + self.blocked.len();
    }

    /// End connection `i`'s wait: its waiting commands run at the end of the round.
    fn end_block(&mut self, i: usize) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        let cl = c.cl.clone();
        self.unregister_blocked(i, &cl);
        let c = self.conns[i].as_mut().unwrap();
        if let Some(b) = c.cl.blocked.take() {
            c.cl.admin.resume = b.pending;
        }
        self.unblocked.push(i);
        self.woken.push(i);
    }

    /// Serve the clients waiting on the keys that became ready (inside the group's
    /// transaction `tx`, right after the command that made them ready).
    fn serve_blocked(
        &mut self,
        tx: &mut daisy::Tx,
        now: i64,
        saved: &mut Vec<(usize, usize, bool, Client)>,
        group: u64,
    ) -> daisy::Result<()> {
        // Serving may make more keys ready (BLMOVE pushes): loop until none is.
        while !self.store.ready.is_empty() {
            let ready = std::mem::take(&mut self.store.ready);
            for (db, key) in ready {
                let Some(q) = self.blocking.get(&(db, key.clone())) else {
                    continue;
                };
                let waiting: Vec<usize> = q.iter().copied().collect();
                for i in waiting {
                    let v = self.store.lookup(tx, db, &key, now, false)?;
                    let Some(Some(c)) = self.conns.get_mut(i) else {
                        continue;
                    };
                    let Some(b) = c.cl.blocked.as_ref() else {
                        continue;
                    };
                    // A stream reader looks at the key whatever it holds now (it may answer
                    // that the stream or its group is gone); a pop only at its own type.
                    if b.ty != Type::Stream {
                        let Some(v) = v else {
                            continue; // emptied: it keeps waiting
                        };
                        if b.ty != v.ty {
                            continue; // waits for another type (Redis 7.0's `btype`)
                        }
                    }
                    if self.saved_mark.len() <= i {
                        self.saved_mark.resize(i + 1, 0);
                    }
                    if self.saved_mark[i] != group {
                        self.saved_mark[i] = group;
                        saved.push((i, c.wbuf.len(), c.close_after, c.cl.clone()));
                    }
                    let args = b.args.clone();
                    let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                    c.cl.serving = Some(key.clone());
                    let before = c.wbuf.len();
                    let r = cmd::execute(
                        &self.table,
                        &mut self.store,
                        tx,
                        &mut c.cl,
                        &mut self.sv,
                        &argv,
                        now,
                        &mut c.wbuf,
                    );
                    c.cl.serving = None;
                    r?;
                    if c.wbuf.len() > before {
                        self.end_block(i);
                    }
                }
            }
        }
        Ok(())
    }

    /// The earliest deadline of a blocked client, if any has one.
    fn next_block_deadline(&self) -> Option<i64> {
        self.blocked
            .iter()
            .filter_map(|&i| {
                let d = self
                    .conns
                    .get(i)?
                    .as_ref()?
                    .cl
                    .blocked
                    .as_ref()?
                    .deadline_ms;
                (d != 0).then_some(d)
            })
            .min()
    }

    /// Answer the blocked clients whose timeout passed (a null reply).
    fn time_out_blocked(&mut self, now: i64) {
        let due: Vec<usize> = self
            .blocked
            .iter()
            .copied()
            .filter(|&i| {
                matches!(self.conns.get(i), Some(Some(c))
                    if c.cl.blocked.as_ref().is_some_and(|b| b.deadline_ms != 0 && b.deadline_ms <= now))
            })
            .collect();
        for i in due {
            self.reply_timeout(i);
            self.end_block(i);
        }
    }

    /// A blocked client's timeout reply.
    fn reply_timeout(&mut self, i: usize) {
        if let Some(Some(c)) = self.conns.get_mut(i) {
            if let Some(b) = &c.cl.blocked {
                if b.null_bulk {
                    resp::null(&mut c.wbuf, c.cl.resp3);
                } else {
                    resp::null_array(&mut c.wbuf, c.cl.resp3);
                }
            }
        }
    }

    /// Release the clients CLIENT UNBLOCK named, now that its transaction committed.
    fn apply_unblocks(&mut self) {
        for (id, error) in std::mem::take(&mut self.sv.admin.unblock) {
            let Some(i) = self.conns.iter().position(|c| {
                c.as_ref()
                    .is_some_and(|c| c.cl.id == id && c.cl.blocked.is_some())
            }) else {
                continue;
            };
            if error {
                let c = self.conns[i].as_mut().unwrap();
                let msg = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
                resp::error(&mut c.wbuf, msg);
                self.sv.count_error(msg);
            } else {
                self.reply_timeout(i);
            }
            self.end_block(i);
        }
    }

    /// Run the commands that waited behind the blocking commands of the clients unblocked in
    /// this round, then the rest of their input.
    fn resume_unblocked(&mut self) {
        while !self.unblocked.is_empty() {
            let mut conns = std::mem::take(&mut self.unblocked);
            conns.sort_unstable();
            conns.dedup();
            self.run_saved(conns, |c| std::mem::take(&mut c.cl.admin.resume));
        }
    }

    /// Hand the pub/sub messages of a committed transaction to their connections (their
    /// replies are written at the end of the round), and close a subscriber whose pending
    /// replies pass the pubsub class of client-output-buffer-limit (the hard limit, or the
    /// soft one for longer than its seconds), as Redis does, rather than let it grow without
    /// bound.
    fn deliver_pubsub(&mut self) {
        if !self.store.events.is_empty() {
            crate::pubsub::flush_key_events(&mut self.store, &mut self.sv);
        }
        let mut outbox = std::mem::take(&mut self.sv.pubsub.outbox);
        let mut bodies = std::mem::take(&mut self.sv.pubsub.bodies);
        let (hard, soft, secs) = self.obuf_limits;
        let now = now_ms();
        for d in &outbox {
            let Some(Some(c)) = self.conns.get_mut(d.conn) else {
                continue;
            };
            if c.cl.id != d.id || c.dead || c.close_after {
                continue;
            }
            crate::pubsub::push_header(&mut c.wbuf, d.len as usize, c.cl.resp3);
            c.wbuf.extend_from_slice(&bodies[d.body.clone()]);
            if self.woken.last() != Some(&d.conn) {
                self.woken.push(d.conn);
            }
            // As Redis's getClientOutputBufferMemoryUsage: beyond the first reply block.
            let used = (c.wbuf.len() - c.wpos).saturating_sub(REPLY_CHUNK) as u64;
            let over_soft = soft > 0 && used >= soft;
            if !over_soft {
                c.soft_since = 0;
            } else if c.soft_since == 0 {
                c.soft_since = now;
            }
            if (hard > 0 && used >= hard) || (over_soft && (now - c.soft_since) / 1000 > secs) {
                log::warning(&format!(
                    "Client id={} addr={} closed for overcoming of output buffer limits.",
                    c.cl.id, c.cl.addr
                ));
                c.dead = true;
                self.killed.push(d.conn);
            }
        }
        outbox.clear();
        bodies.clear();
        self.sv.pubsub.outbox = outbox;
        self.sv.pubsub.bodies = bodies;
    }

    /// After a group committed: forget keys beyond `tracking-table-max-keys`, then hand the
    /// invalidations (the group's, and the BCAST prefixes' keys) to their receivers (see
    /// `tracking` for who gets what, and how).
    fn deliver_tracking(&mut self) {
        self.sv.tracking.current = 0;
        if self.sv.tracking.active() {
            self.sv
                .tracking
                .limit(self.sv.config.tracking_table_max_keys);
        }
        if self.sv.tracking.broadcast_due() {
            let (conns, by_id) = (&self.conns, &self.by_id);
            self.sv.tracking.broadcast(|id| {
                by_id
                    .get(&id)
                    .and_then(|&i| conns[i].as_ref())
                    .is_some_and(|c| c.cl.tracking.noloop)
            });
        }
        if self.sv.tracking.outbox.is_empty() {
            return;
        }
        let outbox = std::mem::take(&mut self.sv.tracking.outbox);
        let bodies = std::mem::take(&mut self.sv.tracking.bodies);
        for m in &outbox {
            match &m.what {
                crate::tracking::What::All => {
                    let all: Vec<usize> = (0..self.conns.len())
                        .filter(|&i| {
                            self.conns[i]
                                .as_ref()
                                .is_some_and(|c| c.cl.tracking.on && !c.dead)
                        })
                        .collect();
                    for i in all {
                        let resp3 = self.conns[i].as_ref().is_some_and(|c| c.cl.resp3);
                        let null: &[u8] = if resp3 { b"_\r\n" } else { b"$-1\r\n" };
                        self.send_invalidation(i, null);
                    }
                }
                crate::tracking::What::Key(key) => {
                    let Some(&i) = self.by_id.get(&m.to) else {
                        continue;
                    };
                    let Some(c) = self.conns[i].as_ref() else {
                        continue;
                    };
                    let t = &c.cl.tracking;
                    // Keys remembered before the client switched to BCAST, or turned
                    // tracking off, are not sent; nor, with NOLOOP, its own writes.
                    if !t.on || t.bcast || (t.noloop && m.current == m.to) {
                        continue;
                    }
                    let mut v = Vec::with_capacity(key.len() + 16);
                    resp::array(&mut v, 1);
                    resp::bulk(&mut v, key);
                    self.send_invalidation(i, &v);
                }
                crate::tracking::What::Keys(r) => {
                    if let Some(&i) = self.by_id.get(&m.to) {
                        self.send_invalidation(i, &bodies[r.clone()]);
                    }
                }
            }
        }
        self.sv.tracking.outbox = outbox;
        self.sv.tracking.bodies = bodies;
        self.sv.tracking.delivered();
    }

    /// Send the invalidation `value` (its array of keys, or a null) for the tracking client of
    /// connection `i`: to it, or to the client it redirects to (`tracking::header` says
    /// which receivers can take one). A redirection to a client that is gone marks it.
    fn send_invalidation(&mut self, i: usize, value: &[u8]) {
        let Some(c) = self.conns[i].as_ref() else {
            return;
        };
        if c.dead || !c.cl.tracking.on {
            return;
        }
        let redirect = c.cl.tracking.redirect;
        let mut target = i;
        if redirect != 0 {
            let alive = self.by_id.get(&redirect).copied().filter(|&r| {
                self.conns[r]
                    .as_ref()
                    .is_some_and(|x| !x.dead && !x.close_after)
            });
            match alive {
                Some(r) => target = r,
                None => {
                    let c = self.conns[i].as_mut().expect("checked above");
                    c.cl.tracking.broken_redir = true;
                    if c.cl.resp3 {
                        crate::tracking::redir_broken(&mut c.wbuf, redirect);
                        if self.woken.last() != Some(&i) {
                            self.woken.push(i);
                        }
                    }
                    return;
                }
            }
        }
        let Some(r) = self.conns[target].as_mut() else {
            return;
        };
        if crate::tracking::header(&mut r.wbuf, r.cl.resp3, redirect != 0, r.cl.pubsub.active()) {
            r.wbuf.extend_from_slice(value);
            if self.woken.last() != Some(&target) {
                self.woken.push(target);
            }
        }
    }

    /// Send MONITOR's lines to the connections in MONITOR mode.
    fn feed_monitors(&mut self) {
        let feed = std::mem::take(&mut self.sv.admin.feed);
        for (i, slot) in self.conns.iter_mut().enumerate() {
            if let Some(c) = slot.as_mut().filter(|c| c.cl.admin.monitor && !c.dead) {
                c.wbuf.extend_from_slice(&feed);
                self.woken.push(i);
            }
        }
    }

    /// Close the connections CLIENT KILL named, now that its transaction committed.
    fn apply_kills(&mut self) {
        for id in std::mem::take(&mut self.sv.admin.kill) {
            for (i, slot) in self.conns.iter_mut().enumerate() {
                if let Some(x) = slot.as_mut().filter(|x| x.cl.id == id) {
                    x.dead = true;
                    self.killed.push(i);
                }
            }
        }
    }

    /// Close the connections of users ACL DELUSER or ACL LOAD removed (the one that ran the
    /// command closes after its reply: `acl::acl` set that).
    fn apply_acl_kills(&mut self) {
        let ids = std::mem::take(&mut self.sv.acl.kill_users);
        for (i, slot) in self.conns.iter_mut().enumerate() {
            if let Some(x) = slot.as_mut().filter(|x| ids.contains(&x.cl.user.id)) {
                x.dead = true;
                self.killed.push(i);
            }
        }
    }

    /// Close the subscribers of users whose channel permissions ACL SETUSER narrowed that
    /// listen to a channel, shard channel or pattern no longer allowed (Redis 7.0's
    /// `ACLKillPubsubClientsIfNeeded`, with the user as it is now). The connection that ran
    /// the command gets its reply first.
    fn close_revoked_subscribers(&mut self) {
        let users = std::mem::take(&mut self.sv.acl.kill_subscribers);
        for (i, slot) in self.conns.iter_mut().enumerate() {
            let Some(x) = slot.as_mut() else { continue };
            let ps = &x.cl.pubsub;
            if x.dead || !ps.active() || !users.contains(&x.cl.user.id) {
                continue;
            }
            let Some(u) = self.sv.acl.user_by_id(x.cl.user.id) else {
                continue;
            };
            let denied = ps.patterns.iter().any(|p| !u.may_use_channel(p, true))
                || ps
                    .channels
                    .iter()
                    .chain(&ps.shard)
                    .any(|c| !u.may_use_channel(c, false));
            if denied {
                x.close_after = true;
                self.killed.push(i);
                self.woken.push(i);
            }
        }
    }

    /// Take the settings CONFIG SET changed that the event loop keeps copies of.
    fn apply_config(&mut self) {
        self.sv.admin.config_changed = false;
        let num = |name: &str| self.sv.config.get(name).and_then(|v| v.parse::<u64>().ok());
        if let Some(v) = num("proto-max-bulk-len") {
            self.limits.max_bulk_len = v;
        }
        if let Some(v) = num("client-query-buffer-limit") {
            self.query_limit = v as usize;
        }
        if let Some(v) = num("tcp-keepalive") {
            self.tcp_keepalive = v.min(u32::MAX as u64) as u32;
        }
        self.apply_pubsub_config();
    }

    /// Take notify-keyspace-events (what the keyspace must note) and the pubsub class of
    /// client-output-buffer-limit.
    fn apply_pubsub_config(&mut self) {
        let f = self.sv.config.notify_flags;
        self.store.note_expired = f & crate::pubsub::N_EXPIRED != 0;
        self.store.note_new = f & crate::pubsub::N_NEW != 0;
        self.obuf_limits = crate::pubsub::obuf_limits(&self.sv.config);
    }

    /// The group just committed left memory past maxmemory: remove keys by the policy in a
    /// transaction of their own (evict.rs), and tell subscribers and tracking clients now,
    /// so a client reads the invalidation of an evicted key before its next reply. While
    /// collections wait in the lazyfree queue, their bytes are on the way out: nothing more
    /// is evicted for them.
    fn evict(&mut self) {
        if self.store.lazy_pending() > 0 {
            return;
        }
        let pool = self.pool.clone();
        let counters = self.sv.counters;
        let r = pool.transaction(|tx| crate::evict::perform(&mut self.store, tx, &mut self.sv));
        if r.is_err() {
            self.sv.counters = counters;
            self.sv.pubsub.discard();
            self.store.resync();
            return;
        }
        self.store.committed();
        if !self.sv.pubsub.outbox.is_empty() || !self.store.events.is_empty() {
            self.deliver_pubsub();
        }
        if !self.sv.tracking.outbox.is_empty() {
            self.deliver_tracking();
        }
    }

    /// Remove keys whose time passed, a bounded amount of work per call (Redis's active
    /// expiry): continue while a quarter or more of the keys looked at were expired.
    fn active_expire(&mut self) {
        let t0 = Instant::now();
        self.active_expire_step();
        let ms = t0.elapsed().as_millis() as u64;
        crate::admin::slowlog::latency_sample(&mut self.sv, "expire-cycle", ms);
    }

    fn active_expire_step(&mut self) {
        let pool = self.pool.clone();
        let t0 = Instant::now();
        let now = now_ms();
        for _ in 0..self.store.databases() {
            let db = self.expire_db;
            let has = pool
                .transaction(|tx| self.store.expires(tx, db))
                .unwrap_or(0);
            if has > 0 {
                loop {
                    let cursor = self.expire_cursor;
                    let r = pool.transaction(|tx| self.store.expire_step(tx, db, cursor, 200, now));
                    let Ok((next, seen, removed)) = r else {
                        self.store.resync();
                        return;
                    };
                    self.store.committed();
                    if !self.store.events.is_empty() {
                        self.deliver_pubsub();
                    }
                    if !self.store.touched.is_empty() {
                        // Removed by no client's command (Redis's current_client is NULL).
                        self.sv.tracking.current = 0;
                        crate::tracking::keys_written(&mut self.store, &mut self.sv, 0);
                        self.deliver_tracking();
                    }
                    self.expire_cursor = next;
                    if t0.elapsed() > EXPIRE_BUDGET {
                        return;
                    }
                    if removed * 4 < seen.max(1) || next == 0 {
                        break;
                    }
                }
            }
            // Next database, from the start of its hash space.
            self.expire_db = (self.expire_db + 1) % self.store.databases();
            self.expire_cursor = 0;
        }
    }

    /// Free queued collections for up to [`LAZYFREE_BUDGET`] (Redis's lazyfree thread, in
    /// bounded steps of the event loop). False when the queue is empty.
    fn lazyfree(&mut self) -> bool {
        let t0 = Instant::now();
        loop {
            match self.store.lazyfree_step(LAZYFREE_STEP) {
                Ok(true) => return false,
                Ok(false) => {}
                Err(e) => {
                    // A step that cannot run (a damaged queue entry): say so once a second at
                    // most, and try again later; the data is not at risk.
                    if self
                        .lazy_error_at
                        .is_none_or(|t| t.elapsed() > Duration::from_secs(1))
                    {
                        log::warning(&format!(
                            "daisy serve: freeing a deleted collection failed: {e}"
                        ));
                        self.lazy_error_at = Some(Instant::now());
                    }
                    return true;
                }
            }
            if t0.elapsed() > LAZYFREE_BUDGET {
                return true;
            }
        }
    }
}

fn log_backup(what: &str, rep: &daisy::BackupReport) {
    log::notice(&format!(
        "{what}: {} ({} bytes; {:.1} ms in all, writes paused {:.2} ms for the last {} pages: drain {:.2}, copy {:.2} ms; then, serving, sync and rename {:.2} ms)",
        rep.path.display(),
        rep.file_size,
        rep.elapsed.as_secs_f64() * 1e3,
        rep.pause.as_secs_f64() * 1e3,
        rep.final_pages,
        rep.pause_parts[0].as_secs_f64() * 1e3,
        rep.pause_parts[1].as_secs_f64() * 1e3,
        rep.completion.as_secs_f64() * 1e3,
    ));
}

/// Turn on TCP keepalive as Redis's `anetKeepAlive` does: probes after `secs` idle, then every
/// `secs / 3`, and the connection is dropped after 3 unanswered. Best effort: a socket that
/// refuses an option keeps working without it.
fn set_keepalive(stream: &TcpStream, secs: u32) {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let secs = secs.min(i32::MAX as u32) as libc::c_int;
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (secs / 3).max(1)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
    ] {
        // SAFETY: `fd` is an open socket owned by `stream` for the whole call; the option
        // value is a c_int passed by pointer with its exact size.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// A (seconds, microseconds) time.
pub type TimeVal = (i64, i64);

/// CPU time (system, user) of this process, of its waited-for children and of the calling
/// thread (INFO cpu: the event loop's thread is the main thread).
pub fn cpu_times() -> [(TimeVal, TimeVal); 3] {
    let get = |who: libc::c_int| {
        // SAFETY: an all-zero rusage is a valid value of the plain C struct.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage only writes the struct passed by pointer.
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return ((0, 0), (0, 0));
        }
        let tv = |t: libc::timeval| (t.tv_sec, t.tv_usec);
        (tv(u.ru_stime), tv(u.ru_utime))
    };
    [
        get(libc::RUSAGE_SELF),
        get(libc::RUSAGE_CHILDREN),
        get(libc::RUSAGE_THREAD),
    ]
}

/// The operating system as INFO's `os` field prints it: `sysname release machine`.
pub fn uname() -> String {
    // SAFETY: an all-zero utsname is a valid value of the plain C struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname only writes the struct passed by pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

/// This process's resident memory in bytes (INFO's used_memory_rss), from /proc.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// The machine's memory in bytes (INFO's total_system_memory), from /proc.
pub fn system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Raise the soft limit on open files toward the hard limit, so that --max-clients
/// connections fit (Redis does the same); say so when they cannot.
fn raise_fd_limit(max_clients: usize) {
    let want = max_clients as u64 + 32;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    if !ok || lim.rlim_cur >= want {
        return;
    }
    let new = (want as libc::rlim_t).min(lim.rlim_max);
    let raised = libc::rlimit {
        rlim_cur: new,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: as above.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0;
    if !ok || new < want {
        log::warning(&format!(
            "daisy serve: only {} open files allowed (ulimit -n), fewer than --max-clients {max_clients} needs",
            if ok { new } else { lim.rlim_cur }
        ));
    }
}

/// Whether a command may write (Redis's `is_may_replicate_command`: flags write or
/// may_replicate, or an EXEC with such a command queued): CLIENT PAUSE WRITE holds it.
fn may_write(
    table: &cmd::Table,
    args: &[&[u8]],
    cl: &Client,
    scripts: &crate::scripting::Scripting,
) -> bool {
    // A script that declares its flags (`#!lua flags=no-writes`, a function's flags) replaces
    // the command's own (Redis's `getCommandFlags`).
    let writes = |a: &[&[u8]]| {
        crate::scripting::declared_writes(scripts, a).unwrap_or_else(|| {
            crate::admin::meta::lookup_argv(a)
                .is_some_and(|m| m.has("write") || m.has("may_replicate"))
        })
    };
    if table.find(args[0]).is_some_and(|s| s.name == "exec") {
        return cl.multi.as_ref().is_some_and(|m| m.any(|_, q| writes(q)));
    }
    writes(args)
}

/// Whether a command (named `name`, run by `cl`) needs the other connections listed: CLIENT,
/// or an EXEC with a CLIENT command queued.
fn wants_others(name: &[u8], cl: &Client) -> bool {
    name.eq_ignore_ascii_case(b"client")
        || (name.eq_ignore_ascii_case(b"exec")
            && cl
                .multi
                .as_ref()
                .is_some_and(|m| m.any(|s, _| s.name == "client")))
}

/// The reply for a failed transaction: Redis's OOM text for a full pool, and for a command
/// whose redo record needs more room than the pool has free (both are "out of memory" to a
/// Redis client, and the command changed nothing).
fn error_reply(e: &daisy::Error) -> String {
    match e {
        daisy::Error::PoolFull { .. } | daisy::Error::TxTooLargeForPool { .. } => {
            "OOM command not allowed when used memory > 'maxmemory'.".into()
        }
        e => format!("ERR daisy: {e}"),
    }
}

/// The log line of a full pool (at most one a minute): Redis's OOM reply says "used memory >
/// 'maxmemory'", and here the memory that maxmemory limits is the pool's size (INFO
/// `daisy_pool_size`), which counts the partly used runs of small blocks that `used_memory`
/// (bytes in objects) leaves out; the line gives the figures and the way out.
fn log_pool_full(e: &daisy::Error, last_ms: &mut i64) {
    let (size, max) = match e {
        daisy::Error::PoolFull { size, max_size, .. }
        | daisy::Error::TxTooLargeForPool { size, max_size, .. } => (*size, *max_size),
        _ => return,
    };
    let now = now_ms();
    if now - *last_ms < 60_000 {
        return;
    }
    *last_ms = now;
    log::warning(&format!(
        "the pool is at its size limit (daisy_pool_size {size}, maxmemory {max}): writes answer -OOM; raise it with CONFIG SET maxmemory or --max-size, up to INFO daisy_pool_capacity ({e})"
    ));
}
