//! Connection and server commands (Redis's networking.c, server.c, config.c): PING, ECHO,
//! AUTH, HELLO, QUIT, RESET, CLIENT, COMMAND, CONFIG, INFO, TIME, LASTSAVE, SAVE, BGSAVE,
//! SHUTDOWN, MEMORY; and what they keep: per connection ([`ClientState`]: reply mode, the
//! buffers CLIENT LIST shows), per server ([`AdminState`]: subcommand counters, the other
//! connections for CLIENT LIST and KILL, the event loop's figures for INFO).
//!
//! Submodules: `meta` (Redis's command table, `redis_commands.json`, made from Redis's own
//! command descriptions) behind `command` (COMMAND); `client` (CLIENT); `info` (INFO).

use crate::commands::{
    lossy, parse_i64, upper, Action, Client, CmdStat, Ctx, ServerState, Spec, COMMANDS, E_SYNTAX,
};
use crate::resp;
use std::io::Write as _;
use std::sync::OnceLock;

mod client;
mod command;
mod info;
pub mod meta;
pub mod slowlog;

pub use client::{client, client_line, ClientRow};
pub use command::command;
pub use info::info;
pub use slowlog::{latency, slowlog};

// ---- state -----------------------------------------------------------------------------

/// CLIENT REPLY's modes (Redis's CLIENT_REPLY_OFF, _SKIP_NEXT, _SKIP flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    /// No replies until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP ran: the next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped.
    Skip,
}

/// A connection's buffers as CLIENT LIST shows them, set by the event loop.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnStats {
    /// Input bytes held (qbuf) and the input buffer's room beyond them (qbuf-free).
    pub qbuf: usize,
    pub qbuf_free: usize,
    /// The reply buffer's size (rbs) and its peak use lately (rbp).
    pub rbs: usize,
    pub rbp: usize,
    /// Replies not yet written: the first 16 KiB (obl) as Redis's reply buffer, the rest as
    /// its list of 16 KiB blocks (oll blocks, omem bytes).
    pub obl: usize,
    pub oll: usize,
    pub omem: usize,
    /// Everything the connection holds (tot-mem).
    pub tot_mem: usize,
    /// A write is waiting for the socket (events=rw).
    pub writing: bool,
}

/// What the connection commands keep per connection.
#[derive(Clone, Debug, Default)]
pub struct ClientState {
    pub reply: ReplyMode,
    /// CLIENT NO-EVICT ON (flag e).
    pub no_evict: bool,
    /// MONITOR ran: every command the server runs is sent to this connection (flag O).
    pub monitor: bool,
    pub conn: ConnStats,
    /// Bytes of the arguments of the command running (argv-mem).
    pub argv_mem: usize,
    /// Commands CLIENT PAUSE holds, in order: they run when it ends.
    pub postponed: Vec<Vec<Vec<u8>>>,
    /// Commands that waited behind a blocking command, to run now that it was answered.
    pub resume: Vec<Vec<Vec<u8>>>,
}

/// The event loop's figures INFO reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoopStats {
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub reads_processed: u64,
    pub writes_processed: u64,
    /// Over the last seconds, the largest input and output buffer of a client.
    pub recent_max_input: usize,
    pub recent_max_output: usize,
    /// Averages over the last samples (Redis's instantaneous metrics).
    pub ops_per_sec: u64,
    pub input_kbps: f64,
    pub output_kbps: f64,
    pub peak_memory: u64,
    /// Memory of the normal clients' connections (INFO's mem_clients_normal).
    pub clients_memory: usize,
}

/// CLIENT PAUSE in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    pub until_ms: i64,
    /// Every command waits (ALL), or only those that may write (WRITE).
    pub all: bool,
}

/// What the connection and server commands keep for the server.
#[derive(Debug, Default)]
pub struct AdminState {
    /// Counters of subcommands (`client|list`), indexed as `meta::all()`.
    pub sub_stats: Vec<CmdStat>,
    /// The other connections (not the one running the command), filled by the event loop
    /// before a CLIENT command runs.
    pub others: Vec<ClientRow>,
    /// Connections CLIENT KILL closed (ids): the event loop closes them once the command's
    /// transaction commits, and runs none of their commands meanwhile.
    pub kill: Vec<u64>,
    pub pause: Option<Pause>,
    pub stats: LoopStats,
    /// A listener bound by CONFIG SET port or bind: the event loop switches to it.
    pub listener: Option<std::net::TcpListener>,
    /// CONFIG SET changed a setting the event loop keeps a copy of.
    pub config_changed: bool,
    /// Connections in MONITOR mode, and the lines for them not sent yet (the event loop
    /// sends them once the commands' transaction commits).
    pub monitors: usize,
    pub feed: Vec<u8>,
    /// Connections whose commands CLIENT PAUSE holds or that a blocking command blocks
    /// (INFO's blocked_clients).
    pub blocked_clients: usize,
    /// Blocked clients CLIENT UNBLOCK released: (id, with an error instead of a timeout
    /// reply). The event loop answers them once the command's transaction commits.
    pub unblock: Vec<(u64, bool)>,
    /// The config file given at start (CONFIG REWRITE rewrites it).
    pub config_file: Option<std::path::PathBuf>,
    /// The config file declared users (`user` lines): CONFIG REWRITE writes the users there
    /// (without an `aclfile`, as Redis does).
    pub config_users: bool,
    /// SLOWLOG's entries and LATENCY's events.
    pub monitoring: slowlog::Monitoring,
    /// Latency histograms (INFO latencystats), by stat slot: a command's index in
    /// `COMMANDS`, or `COMMANDS.len()` + a subcommand's index in `meta::all()`.
    pub latency: Vec<Option<Box<Histogram>>>,
}

/// Sub-buckets per power of two of a latency histogram (about 3% precision).
const SUB: usize = 32;

/// Latencies of one command in nanoseconds, in buckets of about 3% (as the HDR histograms
/// Redis keeps for INFO latencystats; its percentiles come out within that precision).
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            counts: vec![0; 2 * SUB + (64 - 6) * SUB],
            total: 0,
        }
    }

    /// The bucket of `ns`: values below 64 have one each; above, 32 buckets split each
    /// power of two.
    fn bucket(ns: u64) -> usize {
        if ns < 2 * SUB as u64 {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros() as usize;
        2 * SUB + (e - 6) * SUB + ((ns >> (e - 5)) as usize & (SUB - 1))
    }

    /// The largest value bucket `b` holds.
    fn upper(b: usize) -> u64 {
        if b < 2 * SUB {
            return b as u64;
        }
        let (e, m) = ((b - 2 * SUB) / SUB + 6, ((b - 2 * SUB) % SUB) as u64);
        let step = 1u64 << (e - 5);
        ((1u64 << e) - 1) + (m + 1) * step
    }

    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
    }

    /// The latency at percentile `p` (0 to 100), in nanoseconds (HDR's highest equivalent
    /// value of the bucket it falls in).
    pub fn percentile(&self, p: f64) -> u64 {
        let want = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Self::upper(b);
            }
        }
        0
    }
}

// ---- subcommands: names, checks, counters -------------------------------------------------

/// Redis 7.0's container commands (those with subcommands; a test checks the list against
/// `meta`). Known without reading Redis's command table, which a plain command never needs.
const CONTAINERS: &[&str] = &[
    "acl", "client", "cluster", "command", "config", "function", "latency", "memory", "module",
    "object", "pubsub", "script", "slowlog", "xgroup", "xinfo",
];

/// The Redis subcommands of each entry of `COMMANDS` (empty for a plain command).
fn subcommands_of(spec: &'static Spec) -> &'static [meta::Cmd] {
    static IS_CONTAINER: OnceLock<Vec<bool>> = OnceLock::new();
    static SUBS: OnceLock<Vec<&'static [meta::Cmd]>> = OnceLock::new();
    let containers = IS_CONTAINER.get_or_init(|| {
        COMMANDS
            .iter()
            .map(|s| CONTAINERS.contains(&s.name))
            .collect()
    });
    if !containers[spec.index()] {
        return &[];
    }
    let subs = SUBS.get_or_init(|| COMMANDS.iter().map(|s| meta::subcommands(s.name)).collect());
    subs[spec.index()]
}

/// The subcommand a container command's line names, if it is one Redis has.
fn subcommand(spec: &'static Spec, args: &[&[u8]]) -> Option<&'static meta::Cmd> {
    let subs = subcommands_of(spec);
    if subs.is_empty() || args.len() < 2 {
        return None;
    }
    let prefix = spec.name.len() + 1;
    subs.iter()
        .find(|s| s.name.as_bytes()[prefix..].eq_ignore_ascii_case(args[1]))
}

/// A command's full name as Redis reports it: `name|subcommand` for a container command's
/// subcommand (CLIENT LIST's cmd=, INFO commandstats, arity errors).
pub fn full_name(spec: &'static Spec, args: &[&[u8]]) -> &'static str {
    subcommand(spec, args).map_or(spec.name, |s| &s.name)
}

/// Redis's checks of a command's name and argument count (`commandCheckExistence`,
/// `commandCheckArity`): a container command's subcommand must exist and has its own arity.
pub fn arity_error(spec: &'static Spec, args: &[&[u8]]) -> Option<String> {
    let mut arity = spec.arity;
    let mut name = spec.name;
    if !subcommands_of(spec).is_empty() && args.len() >= 2 {
        let Some(sub) = subcommand(spec, args) else {
            return Some(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                lossy(args[1]),
                lossy(args[0]).to_ascii_uppercase()
            ));
        };
        arity = sub.arity;
        name = &sub.name;
    }
    let n = args.len() as i32;
    ((arity > 0 && n != arity) || n < -arity)
        .then(|| format!("ERR wrong number of arguments for '{name}' command"))
}

impl ServerState {
    /// The counters of the command a line runs: a subcommand's own for a container's.
    pub fn cmdstat(&mut self, spec: &'static Spec, args: &[&[u8]]) -> &mut CmdStat {
        match subcommand(spec, args) {
            None => &mut self.cmdstats[spec.index()],
            Some(sub) => {
                let i = meta_index(sub);
                let stats = &mut self.admin.sub_stats;
                if stats.len() < meta::all().len() {
                    stats.resize(meta::all().len(), CmdStat::default());
                }
                &mut stats[i]
            }
        }
    }
}

// ---- commands ----------------------------------------------------------------------------

pub fn ping(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if c.cl.pubsub.active() && !c.cl.resp3 && a.len() <= 2 {
        // In subscriber mode (RESP2), as a push: ["pong", argument or ""].
        resp::array(c.out, 2);
        resp::bulk(c.out, b"pong");
        resp::bulk(c.out, a.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match a.len() {
        1 => resp::simple(c.out, "PONG"),
        2 => resp::bulk(c.out, a[1]),
        _ => return c.err("ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

pub fn echo(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    resp::bulk(c.out, a[1]);
    Ok(())
}

const E_WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Authenticate as `user` (the default user when None) with `pass`: `acl::authenticate`
/// (acl.c's `ACLAuthenticateUser`). False when refused (and logged in the ACL log); the
/// client's state is then unchanged.
fn try_auth(c: &mut Ctx, user: Option<&[u8]>, pass: &[u8], cmd: &[u8]) -> bool {
    crate::acl::authenticate(c, user.unwrap_or(b"default"), pass, cmd)
}

pub fn auth(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() > 3 {
        return c.err(E_SYNTAX);
    }
    if a.len() == 2 && crate::acl::default_nopass(c.sv) {
        return c.err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    let user = (a.len() == 3).then(|| a[1]);
    if try_auth(c, user, a[a.len() - 1], a[0]) {
        resp::ok(c.out);
        Ok(())
    } else {
        c.err(E_WRONGPASS)
    }
}

pub fn hello(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut ver = None;
    if a.len() > 1 {
        match parse_i64(a[1]) {
            Some(v @ 2..=3) => ver = Some(v),
            Some(_) => return c.err("NOPROTO unsupported protocol version"),
            None => return c.err("ERR Protocol version is not an integer or out of range"),
        }
    }
    // Options take effect in order, as in Redis 7.0: AUTH authenticates at once, and a bad
    // option after it answers its error with the client authenticated.
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        match &upper(a[i])[..] {
            b"AUTH" if more >= 2 => {
                if !try_auth(c, Some(a[i + 1]), a[i + 2], a[0]) {
                    return c.err(E_WRONGPASS);
                }
                i += 3;
            }
            b"SETNAME" if more >= 1 => {
                if !set_name(c, a[i + 1])? {
                    return Ok(());
                }
                i += 2;
            }
            _ => {
                return c.err(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    lossy(a[i])
                ))
            }
        }
    }
    if c.sv.acl.auth_required() && !c.cl.authed {
        return c.err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
             the RESP protocol version at the same time",
        );
    }
    if let Some(v) = ver {
        c.cl.resp3 = v == 3;
    }
    c.map(7);
    for (k, v) in [
        ("server", "redis"),
        ("version", crate::REDIS_VERSION),
        ("proto", ""),
        ("id", ""),
        ("mode", "standalone"),
        ("role", "master"),
    ] {
        resp::bulk(c.out, k.as_bytes());
        match k {
            "proto" => resp::int(c.out, if c.cl.resp3 { 3 } else { 2 }),
            "id" => resp::int(c.out, c.cl.id as i64),
            _ => resp::bulk(c.out, v.as_bytes()),
        }
    }
    resp::bulk(c.out, b"modules");
    resp::array(c.out, 0);
    Ok(())
}

pub fn quit(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::ok(c.out);
    c.action = Action::Close;
    Ok(())
}

/// MONITOR: this connection receives a line for every command the server runs.
pub fn monitor(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    if !c.cl.admin.monitor {
        c.cl.admin.monitor = true;
        c.sv.admin.monitors += 1;
        resp::ok(c.out);
    }
    Ok(())
}

/// What follows a command that ran: its latency into its histogram when it was timed (INFO
/// latencystats), and its line for the connections in MONITOR mode.
pub fn after_call(
    sv: &mut ServerState,
    cl: &Client,
    spec: &'static Spec,
    args: &[&[u8]],
    elapsed: Option<std::time::Duration>,
) {
    if let Some(d) = elapsed {
        slowlog::record(sv, cl, spec, args, d.as_micros() as u64);
        if sv.config.latency_tracking {
            let slot = stat_slot(spec, args);
            let h = &mut sv.admin.latency;
            if h.len() <= slot {
                h.resize(slot + 1, None);
            }
            h[slot]
                .get_or_insert_with(|| Box::new(Histogram::new()))
                .record(d.as_nanos() as u64);
        }
    }
    if sv.admin.monitors > 0 {
        feed_monitors(sv, cl, spec, args);
    }
}

/// A command's slot among the stats: its index in `COMMANDS`, or for a subcommand
/// `COMMANDS.len()` + its index in `meta::all()`.
pub fn stat_slot(spec: &'static Spec, args: &[&[u8]]) -> usize {
    match subcommand(spec, args) {
        None => spec.index(),
        Some(sub) => COMMANDS.len() + meta_index(sub),
    }
}

/// `cmd`'s position in `meta::all()`.
fn meta_index(cmd: &'static meta::Cmd) -> usize {
    let all = meta::all();
    (cmd as *const meta::Cmd as usize - all.as_ptr() as usize) / std::mem::size_of::<meta::Cmd>()
}

/// Add the line MONITOR shows for a command that ran (replication.c's
/// `replicationFeedMonitors`); none for administrative commands, as Redis, nor for scripts'
/// commands (EVAL, FCALL: [`monitor_script`] shows them before they run).
fn feed_monitors(sv: &mut ServerState, cl: &Client, spec: &'static Spec, args: &[&[u8]]) {
    let Some(cmd) = subcommand(spec, args).or_else(|| meta::lookup(spec.name)) else {
        return;
    };
    if cmd.has("admin") || cmd.has("skip_monitor") {
        return;
    }
    monitor_line(sv, cl, args);
}

/// EVAL, EVALSHA, FCALL and their read-only forms show in MONITOR when they start, before
/// the commands they run (eval.c's and functions.c's explicit feed).
pub fn monitor_script(sv: &mut ServerState, cl: &Client, args: &[&[u8]]) {
    if sv.admin.monitors > 0 {
        monitor_line(sv, cl, args);
    }
}

/// MONITOR's line for `args` run by `cl`: `+<time> [<db> <client>] "arg" ...`, the client
/// being `lua` for a script's commands and `unix:<path>` for the Unix socket.
fn monitor_line(sv: &mut ServerState, cl: &Client, args: &[&[u8]]) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let feed = &mut sv.admin.feed;
    let _ = write!(
        feed,
        "+{}.{:06} [{} ",
        t.as_secs(),
        t.subsec_micros(),
        cl.db
    );
    if cl.id == crate::scripting::SCRIPT_CLIENT_ID {
        feed.extend_from_slice(b"lua]");
    } else if cl.addr.starts_with('/') {
        let path = cl.addr.strip_suffix(":0").unwrap_or(&cl.addr);
        let _ = write!(feed, "unix:{path}]");
    } else {
        let _ = write!(feed, "{}]", cl.addr);
    }
    for a in args {
        feed.extend_from_slice(b" \"");
        for &b in *a {
            match b {
                b'\\' | b'"' => feed.extend_from_slice(&[b'\\', b]),
                b'\n' => feed.extend_from_slice(b"\\n"),
                b'\r' => feed.extend_from_slice(b"\\r"),
                b'\t' => feed.extend_from_slice(b"\\t"),
                0x07 => feed.extend_from_slice(b"\\a"),
                0x08 => feed.extend_from_slice(b"\\b"),
                b' '..=b'~' => feed.push(b),
                _ => {
                    let _ = write!(feed, "\\x{b:02x}");
                }
            }
        }
        feed.push(b'"');
    }
    feed.extend_from_slice(b"\r\n");
}

/// RESET (networking.c's `clearClientConnectionState`): the connection back to its
/// defaults: MULTI discarded, WATCH forgotten, database 0, RESP2, no name, replies on, and
/// unauthenticated when a password is required.
pub fn reset(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    c.ks.watches.unwatch_all(c.cl.id);
    c.cl.multi = None;
    c.cl.db = 0;
    c.cl.resp3 = false;
    c.cl.name.clear();
    c.cl.admin.reply = ReplyMode::On;
    if c.cl.admin.monitor {
        c.cl.admin.monitor = false;
        c.sv.admin.monitors -= 1;
    }
    crate::pubsub::unsubscribe_all(c);
    crate::tracking::disable(c);
    c.cl.user = crate::acl::UserRef::default();
    c.cl.authed = !c.sv.acl.auth_required();
    resp::simple(c.out, "RESET");
    Ok(())
}

/// CLIENT SETNAME and HELLO SETNAME (networking.c's `clientSetNameOrReply`): an empty name
/// removes it; false (after the error reply) for a name with spaces or special characters.
fn set_name(c: &mut Ctx, name: &[u8]) -> daisy::Result<bool> {
    if !name.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        c.err("ERR Client names cannot contain spaces, newlines or special characters.")?;
        return Ok(false);
    }
    c.cl.name = name.to_vec();
    Ok(true)
}

/// A container command's HELP reply, for commands outside this module (ACL HELP).
pub fn help_reply(c: &mut Ctx, name: &[u8], lines: &[&str]) {
    help(c, name, lines)
}

/// A container command's HELP reply (networking.c's `addReplyHelp`); `name` as the client
/// sent it.
pub(crate) fn help(c: &mut Ctx, name: &[u8], lines: &[&str]) {
    resp::array(c.out, lines.len() + 3);
    resp::simple(
        c.out,
        &format!(
            "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            lossy(name).to_ascii_uppercase()
        ),
    );
    for l in lines {
        resp::simple(c.out, l);
    }
    resp::simple(c.out, "HELP");
    resp::simple(c.out, "    Prints this help.");
}

/// Redis's `addReplySubcommandSyntaxError`: a subcommand with arguments it does not take.
pub(crate) fn subcommand_error(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    c.err(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        lossy(a[1]),
        lossy(a[0]).to_ascii_uppercase()
    ))
}

/// What a changed parameter changes now (config.c's apply functions): Redis's reason when
/// it cannot, with the parameter's name.
fn apply_config(c: &mut Ctx, changed: &[usize]) -> Result<(), (&'static str, &'static str)> {
    let names: Vec<&str> = changed.iter().map(|&i| crate::config::name_of(i)).collect();
    let cfg = &c.sv.config;
    if names.iter().any(|n| matches!(*n, "port" | "bind")) {
        let port: u16 = cfg.get("port").and_then(|p| p.parse().ok()).unwrap_or(0);
        let binds: Vec<&str> = cfg
            .get("bind")
            .unwrap_or("")
            .split(' ')
            .filter(|w| !w.is_empty())
            .collect();
        // One address here (a leading '-' marks an optional one in Redis); '*' is all IPv4.
        let addr = match binds[..] {
            [one] => match one.trim_start_matches('-') {
                "*" => "0.0.0.0".to_string(),
                "::*" => "::".to_string(),
                a => a.to_string(),
            },
            _ => return Err(("bind", "Failed to bind to specified addresses.")),
        };
        let why = if names.contains(&"port") {
            ("port", "Unable to listen on this port. Check server logs.")
        } else {
            ("bind", "Failed to bind to specified addresses.")
        };
        if port == 0 {
            return Err(why);
        }
        let l = std::net::TcpListener::bind((addr.as_str(), port)).map_err(|_| why)?;
        c.sv.port = port;
        c.sv.bind = addr;
        c.sv.admin.listener = Some(l);
    }
    for n in names {
        match n {
            "requirepass" => {
                let p = c.sv.config.get("requirepass").unwrap_or("");
                c.sv.requirepass = (!p.is_empty()).then(|| p.as_bytes().to_vec());
                let pass = c.sv.requirepass.clone();
                c.sv.acl.set_requirepass(pass.as_deref());
            }
            "maxclients" => {
                c.sv.max_clients =
                    c.sv.config
                        .get(n)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(c.sv.max_clients)
            }
            // The pool's size limit (0: its capacity); it cannot pass the capacity fixed when
            // the pool was created.
            "maxmemory" => {
                let v: u64 = c.sv.config.get(n).and_then(|v| v.parse().ok()).unwrap_or(0);
                if c.sv.pool.set_max_size(v).is_err() {
                    return Err((
                        "maxmemory",
                        "larger than the pool's capacity (INFO daisy_pool_capacity), which is fixed when the pool is created (daisy serve --max-size)",
                    ));
                }
            }
            "loglevel" => {
                if let Some(l) = c.sv.config.get(n).and_then(crate::log::Level::parse) {
                    crate::log::set_level(l);
                }
            }
            "tcp-keepalive"
            | "proto-max-bulk-len"
            | "client-query-buffer-limit"
            | "notify-keyspace-events"
            | "client-output-buffer-limit" => c.sv.admin.config_changed = true,
            _ => {}
        }
    }
    Ok(())
}

pub fn config(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"GET", _) => {
            let hits = c.sv.config.matching(&a[2..]);
            c.map(hits.len());
            for (k, v) in hits {
                resp::bulk(c.out, k.as_bytes());
                resp::bulk(c.out, v.as_bytes());
            }
        }
        (b"SET", n) => {
            if n % 2 == 1 {
                return c.err(E_SYNTAX);
            }
            let pairs: Vec<(&[u8], &[u8])> = a[2..].chunks(2).map(|p| (p[0], p[1])).collect();
            let before = c.sv.config.clone();
            let allowed = c.sv.config.protected_allowed(&c.cl.addr);
            let changed = match c.sv.config.set_many(&pairs, allowed) {
                Ok(changed) => changed,
                Err(e) => return c.err(&e),
            };
            if let Err((name, why)) = apply_config(c, &changed) {
                c.sv.config = before;
                return c.err(&format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                ));
            }
            resp::ok(c.out);
        }
        (b"RESETSTAT", 2) => {
            let sv = &mut *c.sv;
            sv.counters = Default::default();
            sv.total_connections = 0;
            sv.rejected_connections = 0;
            sv.errorstats.clear();
            sv.cmdstats.iter_mut().for_each(|s| *s = Default::default());
            sv.admin.sub_stats.clear();
            sv.admin.latency.clear();
            let st = &mut sv.admin.stats;
            (st.net_input_bytes, st.net_output_bytes) = (0, 0);
            (st.reads_processed, st.writes_processed, st.peak_memory) = (0, 0, 0);
            c.ks.expired_keys = 0;
            c.ks.lazyfreed_objects = 0;
            resp::ok(c.out);
        }
        (b"REWRITE", 2) => {
            let Some(path) = c.sv.admin.config_file.clone() else {
                return c.err("ERR The server is running without a config file");
            };
            // Without an ACL file, the users go into the config file as `user` lines (as
            // Redis's `rewriteConfigUserOption`); with one, the file has none.
            let users: Vec<String> = if c.sv.config.get("aclfile").unwrap_or("").is_empty() {
                let lines = c.sv.acl.list_lines();
                lines
                    .iter()
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect()
            } else {
                Vec::new()
            };
            match crate::conffile::rewrite(&path, &c.sv.config, &users) {
                Ok(()) => {
                    crate::log::notice("CONFIG REWRITE executed with success.");
                    resp::ok(c.out);
                }
                Err(e) => {
                    crate::log::warning(&format!("CONFIG REWRITE failed: {e}"));
                    return c.err(&format!("ERR Rewriting config file: {e}"));
                }
            }
        }
        (b"HELP", 2) => help(
            c,
            a[0],
            &[
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
            ],
        ),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}

pub fn time(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    resp::array(c.out, 2);
    resp::bulk(c.out, d.as_secs().to_string().as_bytes());
    resp::bulk(c.out, d.subsec_micros().to_string().as_bytes());
    Ok(())
}

pub fn shutdown(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    for opt in &a[1..] {
        match &upper(opt)[..] {
            b"NOSAVE" | b"SAVE" | b"NOW" | b"FORCE" => {}
            b"ABORT" => return c.err("ERR No shutdown in progress."),
            _ => return c.err(E_SYNTAX),
        }
    }
    // No reply: the connection closes as the server stops, as with Redis.
    c.action = Action::Shutdown;
    Ok(())
}

/// MEMORY USAGE key [SAMPLES n] | DOCTOR | PURGE | STATS | HELP.
pub fn memory(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"USAGE", n) if n >= 3 => {
            let mut j = 3;
            while j < n {
                if a[j].eq_ignore_ascii_case(b"SAMPLES") && j + 1 < n {
                    match parse_i64(a[j + 1]) {
                        None => return c.err(crate::commands::E_INT),
                        Some(s) if s < 0 => return c.err(E_SYNTAX),
                        Some(_) => {}
                    }
                    j += 2;
                } else {
                    return c.err(E_SYNTAX);
                }
            }
            let Some(v) = c.lookup_read(a[2])? else {
                c.nil();
                return Ok(());
            };
            let bytes = crate::evict::key_memory(c.ks, c.tx, a[2], &v)?;
            resp::int(c.out, bytes as i64);
        }
        (b"DOCTOR", 2) => resp::bulk(
            c.out,
            b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.",
        ),
        (b"PURGE", 2) => resp::ok(c.out),
        (b"MALLOC-STATS", 2) => resp::bulk(c.out, b"Stats not supported for the current allocator"),
        (b"STATS", 2) => memory_stats(c)?,
        (b"HELP", 2) => help(
            c,
            a[0],
            &[
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
            ],
        ),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}

/// MEMORY STATS (object.c's `memoryCommand`): Redis 7.0's fields, in its order, with the
/// values INFO memory reports (the pool's bytes in use are the dataset; the clients'
/// buffers the overhead), plus Daisy's pool objects.
fn memory_stats(c: &mut Ctx) -> daisy::Result<()> {
    let (_, objects) = c.sv.pool.usage()?;
    let used = c.sv.used_memory();
    let stats = &mut c.sv.admin.stats;
    stats.peak_memory = stats.peak_memory.max(used);
    let peak = stats.peak_memory;
    let clients = stats.clients_memory as u64;
    let rss = crate::server::rss_bytes();
    let resident = c.sv.pool_size.max(c.sv.pool.size());
    let mut dbs = Vec::new();
    let mut keys = 0;
    for db in 0..c.ks.databases() {
        let n = c.ks.len(c.tx, db)?;
        if n > 0 {
            dbs.push(db);
        }
        keys += n;
    }
    let total = used + clients;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let ints: [(&str, u64); 10] = [
        ("peak.allocated", peak),
        ("total.allocated", total),
        ("startup.allocated", 0),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", clients),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", 0),
        ("functions.caches", 0),
    ];
    c.map(ints.len() + dbs.len() + 19);
    for (k, v) in ints {
        resp::bulk(c.out, k.as_bytes());
        resp::int(c.out, v as i64);
    }
    for db in dbs {
        resp::bulk(c.out, format!("db.{db}").as_bytes());
        c.map(2);
        resp::bulk(c.out, b"overhead.hashtable.main");
        resp::int(c.out, 0);
        resp::bulk(c.out, b"overhead.hashtable.expires");
        resp::int(c.out, 0);
    }
    let resp3 = c.cl.resp3;
    let double = |out: &mut Vec<u8>, k: &str, v: f64| {
        resp::bulk(out, k.as_bytes());
        resp::double(out, &format!("{v}"), resp3);
    };
    let int = |out: &mut Vec<u8>, k: &str, v: i64| {
        resp::bulk(out, k.as_bytes());
        resp::int(out, v);
    };
    int(c.out, "overhead.total", clients as i64);
    int(c.out, "keys.count", keys as i64);
    int(
        c.out,
        "keys.bytes-per-key",
        total.checked_div(keys).unwrap_or(0) as i64,
    );
    int(c.out, "dataset.bytes", used as i64);
    double(c.out, "dataset.percentage", 100.0 * ratio(used, total));
    double(
        c.out,
        "peak.percentage",
        100.0 * ratio(total, peak.max(total)),
    );
    int(c.out, "allocator.allocated", used as i64);
    int(c.out, "allocator.active", used as i64);
    int(c.out, "allocator.resident", resident as i64);
    double(c.out, "allocator-fragmentation.ratio", 1.0);
    int(c.out, "allocator-fragmentation.bytes", 0);
    double(c.out, "allocator.rss-ratio", ratio(resident, used));
    int(c.out, "allocator.rss-bytes", resident as i64 - used as i64);
    double(c.out, "rss-overhead.ratio", 1.0);
    int(c.out, "rss-overhead.bytes", 0);
    double(c.out, "fragmentation", ratio(rss, used));
    int(c.out, "fragmentation.bytes", rss as i64 - used as i64);
    int(c.out, "daisy.pool.objects", objects as i64);
    int(c.out, "daisy.pool.size", resident as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles_within_three_percent() {
        let mut h = Histogram::new();
        for ns in 1..=100_000u64 {
            h.record(ns * 10);
        }
        for (p, want) in [(50.0, 500_000.0), (99.0, 990_000.0), (99.9, 999_000.0)] {
            let got = h.percentile(p) as f64;
            assert!(got >= want && got <= want * 1.035, "p{p}: {got} for {want}");
        }
        for ns in [0, 1, 63, 64, 65, 1000, u64::MAX] {
            let b = Histogram::bucket(ns);
            assert!(Histogram::upper(b) >= ns, "{ns}");
            assert!(b == 0 || Histogram::upper(b - 1) < ns.max(1), "{ns}");
        }
    }

    #[test]
    fn containers_are_redis_containers() {
        let mut from_table: Vec<&str> = meta::all()
            .iter()
            .filter_map(|c| Some(c.name.split_once('|')?.0))
            .collect();
        from_table.dedup();
        assert_eq!(from_table, CONTAINERS);
    }
}
