//! The commands: Redis's names, arities, replies and error texts, over the keyspace in
//! [`Store`]. Every handler runs inside the caller's transaction (the event loop's group
//! commit); a handler that returns `Err` aborts that transaction, and the loop replays the
//! group's commands one by one so only the failing command answers with an error.

use crate::glob;
use crate::longdouble;
use crate::resp::{self, parse_i64};
use crate::store::{SetOpts, Store, Val};
use daisy::Tx;
use std::collections::HashMap;

pub const E_INT: &str = "ERR value is not an integer or out of range";
pub const E_SYNTAX: &str = "ERR syntax error";
pub const E_NOAUTH: &str = "NOAUTH Authentication required.";
/// Largest string value (proto-max-bulk-len).
pub const MAX_STRING: usize = 512 << 20;

/// Per-connection state.
#[derive(Clone, Debug, Default)]
pub struct Client {
    pub id: u64,
    pub name: Vec<u8>,
    pub authed: bool,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: i64,
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
    pub last_cmd: String,
    /// RESP3 after `HELLO 3` (nulls and maps have their own types); RESP2 otherwise.
    pub resp3: bool,
}

/// Server-wide settings and counters the commands report.
pub struct ServerState {
    /// The keyspace's pool (INFO memory scans its allocator for `used_memory`).
    pub pool: daisy::Pool,
    pub bind: String,
    pub port: u16,
    pub requirepass: Option<Vec<u8>>,
    pub max_clients: usize,
    pub pool_path: String,
    pub pool_mode: String,
    pub started_ms: i64,
    pub connected_clients: usize,
    pub total_connections: u64,
    pub total_commands: u64,
    pub rejected_connections: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub group_commits: u64,
    pub pool_size: u64,
    pub pool_max_size: u64,
    pub recovery_ms: f64,
    pub rng: u64,
}

impl ServerState {
    /// Defaults for a server (or a test driver) on `pool`: loopback, port 6379, no password.
    pub fn new(pool: &daisy::Pool, now_ms: i64) -> ServerState {
        ServerState {
            pool: pool.clone(),
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            max_clients: 10_000,
            pool_path: pool.path().display().to_string(),
            pool_mode: pool.mode().describe(),
            started_ms: now_ms,
            connected_clients: 0,
            total_connections: 0,
            total_commands: 0,
            rejected_connections: 0,
            keyspace_hits: 0,
            keyspace_misses: 0,
            group_commits: 0,
            pool_size: pool.size(),
            pool_max_size: pool.max_size(),
            recovery_ms: 0.0,
            rng: now_ms as u64 ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub fn next_random(&mut self) -> u64 {
        // xorshift64*: RANDOMKEY only needs a spread, not a secret.
        let mut x = self.rng | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// What the event loop must do after a command's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    /// Close the connection once its replies are written (QUIT).
    Close,
    /// Stop the server (SHUTDOWN).
    Shutdown,
    /// The loop fills in the reply (CLIENT LIST needs every connection).
    ClientList,
}

/// How the loop must run a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Inside the group transaction.
    Normal,
    /// Outside any transaction, after the group before it committed (FLUSHALL, FLUSHDB).
    Barrier,
}

type Handler = fn(&mut Ctx, &[&[u8]]) -> daisy::Result<()>;

/// A command's table entry (also what COMMAND reports).
pub struct Spec {
    pub name: &'static str,
    /// Redis arity: n = exactly n arguments with the name, -n = at least n.
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub kind: Kind,
    pub handler: Handler,
}

/// Everything a handler sees.
pub struct Ctx<'a, 'p> {
    pub store: &'a mut Store,
    pub tx: &'a mut Tx<'p>,
    pub cl: &'a mut Client,
    pub sv: &'a mut ServerState,
    pub out: &'a mut Vec<u8>,
    pub now_ms: i64,
    pub action: Action,
}

impl Ctx<'_, '_> {
    fn err(&mut self, msg: &str) -> daisy::Result<()> {
        resp::error(self.out, msg);
        Ok(())
    }

    fn lookup(&mut self, key: &[u8]) -> daisy::Result<Option<Val>> {
        self.store.lookup(self.tx, key, self.now_ms, false)
    }

    /// [`Self::lookup`] for commands that only read many keys (MGET, EXISTS): see
    /// `Store::lookup` on why lazy expiry may step aside for them.
    fn lookup_read(&mut self, key: &[u8]) -> daisy::Result<Option<Val>> {
        self.store.lookup(self.tx, key, self.now_ms, true)
    }

    fn payload(&self, v: &Val) -> daisy::Result<Vec<u8>> {
        self.store.payload(self.tx, v)
    }

    /// Reply with `v`'s payload as a bulk string, copied from the pool straight into the
    /// output buffer.
    fn bulk_val(&mut self, v: &Val) -> daisy::Result<()> {
        resp::bulk_header(self.out, v.len);
        self.store.read_into(self.tx, v, 0, v.len, self.out)?;
        resp::crlf(self.out);
        Ok(())
    }

    fn bulk_opt(&mut self, v: Option<Val>) -> daisy::Result<()> {
        match v {
            Some(v) => self.bulk_val(&v),
            None => {
                self.nil();
                Ok(())
            }
        }
    }

    /// The null reply of the client's protocol.
    fn nil(&mut self) {
        resp::null(self.out, self.cl.resp3);
    }

    /// A map of `n` pairs (a flat array of 2n elements in RESP2).
    fn map(&mut self, n: usize) {
        resp::map(self.out, n, self.cl.resp3);
    }

    /// Add `delta` (milliseconds) to now, or an error when it would overflow.
    fn abs_time(&self, base: i64, amount: i64, unit_ms: i64) -> Option<i64> {
        amount.checked_mul(unit_ms)?.checked_add(base)
    }
}

fn upper(a: &[u8]) -> Vec<u8> {
    a.to_ascii_uppercase()
}

/// A client's bytes for an error text or a listing: at most 128 of them, as Redis shows them
/// (an unknown 512 MB command name must not become gigabytes of reply).
fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned()
}

// ---- the table -------------------------------------------------------------------------

macro_rules! spec {
    ($name:literal, $arity:expr, [$($f:literal),*], $fk:expr, $lk:expr, $st:expr, $kind:ident, $h:expr) => {
        Spec { name: $name, arity: $arity, flags: &[$($f),*], first_key: $fk, last_key: $lk,
               step: $st, kind: Kind::$kind, handler: $h }
    };
}

pub static COMMANDS: &[Spec] = &[
    // strings
    spec!("get", 2, ["readonly", "fast"], 1, 1, 1, Normal, get),
    spec!("set", -3, ["write", "denyoom"], 1, 1, 1, Normal, set),
    spec!(
        "setnx",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        setnx
    ),
    spec!("setex", 4, ["write", "denyoom"], 1, 1, 1, Normal, setex),
    spec!("psetex", 4, ["write", "denyoom"], 1, 1, 1, Normal, psetex),
    spec!(
        "getset",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        getset
    ),
    spec!("getdel", 2, ["write", "fast"], 1, 1, 1, Normal, getdel),
    spec!("mget", -2, ["readonly", "fast"], 1, -1, 1, Normal, mget),
    spec!("mset", -3, ["write", "denyoom"], 1, -1, 2, Normal, mset),
    spec!("msetnx", -3, ["write", "denyoom"], 1, -1, 2, Normal, msetnx),
    spec!(
        "append",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        append
    ),
    spec!("strlen", 2, ["readonly", "fast"], 1, 1, 1, Normal, strlen),
    spec!("getrange", 4, ["readonly"], 1, 1, 1, Normal, getrange),
    spec!("substr", 4, ["readonly"], 1, 1, 1, Normal, getrange),
    spec!(
        "setrange",
        4,
        ["write", "denyoom"],
        1,
        1,
        1,
        Normal,
        setrange
    ),
    spec!(
        "incr",
        2,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        incr
    ),
    spec!(
        "decr",
        2,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        decr
    ),
    spec!(
        "incrby",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        incrby
    ),
    spec!(
        "decrby",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        decrby
    ),
    spec!(
        "incrbyfloat",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        Normal,
        incrbyfloat
    ),
    // keys
    spec!("del", -2, ["write"], 1, -1, 1, Normal, del),
    spec!("unlink", -2, ["write", "fast"], 1, -1, 1, Normal, del),
    spec!("exists", -2, ["readonly", "fast"], 1, -1, 1, Normal, exists),
    spec!("type", 2, ["readonly", "fast"], 1, 1, 1, Normal, type_),
    spec!("keys", 2, ["readonly"], 0, 0, 0, Normal, keys),
    spec!("scan", -2, ["readonly"], 0, 0, 0, Normal, scan),
    spec!("rename", 3, ["write"], 1, 2, 1, Normal, rename),
    spec!("renamenx", 3, ["write", "fast"], 1, 2, 1, Normal, renamenx),
    spec!("dbsize", 1, ["readonly", "fast"], 0, 0, 0, Normal, dbsize),
    spec!("randomkey", 1, ["readonly"], 0, 0, 0, Normal, randomkey),
    spec!("flushdb", -1, ["write"], 0, 0, 0, Barrier, flushall),
    spec!("flushall", -1, ["write"], 0, 0, 0, Barrier, flushall),
    // expiry
    spec!("expire", -3, ["write", "fast"], 1, 1, 1, Normal, expire),
    spec!("pexpire", -3, ["write", "fast"], 1, 1, 1, Normal, pexpire),
    spec!("expireat", -3, ["write", "fast"], 1, 1, 1, Normal, expireat),
    spec!(
        "pexpireat",
        -3,
        ["write", "fast"],
        1,
        1,
        1,
        Normal,
        pexpireat
    ),
    spec!("ttl", 2, ["readonly", "fast"], 1, 1, 1, Normal, ttl),
    spec!("pttl", 2, ["readonly", "fast"], 1, 1, 1, Normal, pttl),
    spec!("persist", 2, ["write", "fast"], 1, 1, 1, Normal, persist),
    // connection and server
    spec!("ping", -1, ["fast", "stale"], 0, 0, 0, Normal, ping),
    spec!("echo", 2, ["fast"], 0, 0, 0, Normal, echo),
    spec!(
        "select",
        2,
        ["loading", "stale", "fast"],
        0,
        0,
        0,
        Normal,
        select
    ),
    spec!(
        "auth",
        -2,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        0,
        0,
        0,
        Normal,
        auth
    ),
    spec!(
        "hello",
        -1,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        0,
        0,
        0,
        Normal,
        hello
    ),
    spec!(
        "quit",
        -1,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        0,
        0,
        0,
        Normal,
        quit
    ),
    spec!(
        "client",
        -2,
        ["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        Normal,
        client
    ),
    spec!(
        "command",
        -1,
        ["loading", "stale"],
        0,
        0,
        0,
        Normal,
        command
    ),
    spec!(
        "config",
        -2,
        ["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        Normal,
        config
    ),
    spec!("info", -1, ["loading", "stale"], 0, 0, 0, Normal, info),
    spec!(
        "time",
        1,
        ["loading", "stale", "fast"],
        0,
        0,
        0,
        Normal,
        time
    ),
    spec!("save", 1, ["admin", "noscript"], 0, 0, 0, Normal, save),
    spec!(
        "shutdown",
        -1,
        ["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        Normal,
        shutdown
    ),
];

/// Name (lowercase) to table index. Command names are few and short and not secret, so a
/// cheap hash serves (SipHash showed in profiles of pipelined rounds).
pub struct Table {
    by_name: HashMap<Vec<u8>, usize, std::hash::BuildHasherDefault<NameHasher>>,
    /// The last name looked up, exactly as sent (zero-padded, with its length), and its
    /// command: a pipeline repeats one command, and a round looks each one up more than once.
    last: std::cell::Cell<([u8; 16], usize, Option<&'static Spec>)>,
}

#[derive(Default)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
}

impl Table {
    pub fn new() -> Table {
        Table {
            by_name: COMMANDS
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_bytes().to_vec(), i))
                .collect(),
            last: std::cell::Cell::new(([0; 16], usize::MAX, None)),
        }
    }

    /// The command named by `name` (any case).
    pub fn find(&self, name: &[u8]) -> Option<&'static Spec> {
        let mut buf = [0u8; 16];
        if name.len() > buf.len() {
            return None;
        }
        buf[..name.len()].copy_from_slice(name);
        let (last, last_len, last_spec) = self.last.get();
        if last_len == name.len() && last == buf {
            return last_spec;
        }
        let key = buf;
        let lower = &mut buf[..name.len()];
        lower.make_ascii_lowercase();
        let spec = self.by_name.get(&lower[..]).map(|&i| &COMMANDS[i]);
        self.last.set((key, name.len(), spec));
        spec
    }
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

/// The checks before a command runs (unknown, arity, authentication): an error reply, or
/// `None` to go ahead.
pub fn precheck(
    spec: Option<&Spec>,
    args: &[&[u8]],
    cl: &Client,
    sv: &ServerState,
) -> Option<String> {
    let Some(spec) = spec else {
        // Redis 7's text: the name, then up to the first arguments, each quoted.
        let mut m = format!(
            "ERR unknown command '{}', with args beginning with: ",
            lossy(args[0])
        );
        for a in args[1..].iter().take(8) {
            m.push_str(&format!("'{}' ", lossy(a)));
        }
        return Some(m);
    };
    // Redis 7 checks the argument count before authentication.
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Some(format!(
            "ERR wrong number of arguments for '{}' command",
            lossy(args[0]).to_ascii_lowercase()
        ));
    }
    if sv.requirepass.is_some() && !cl.authed && !spec.flags.contains(&"no_auth") {
        return Some(E_NOAUTH.into());
    }
    None
}

/// Run one request inside `tx`: the checks (unknown, arity, authentication), then its
/// handler; the reply is appended to `out`. What the event loop (and the power-failure
/// workload) calls for every command but the barriers (see [`Kind`]).
#[allow(clippy::too_many_arguments)]
pub fn execute(
    table: &Table,
    store: &mut Store,
    tx: &mut Tx,
    cl: &mut Client,
    sv: &mut ServerState,
    args: &[&[u8]],
    now_ms: i64,
    out: &mut Vec<u8>,
) -> daisy::Result<Action> {
    let spec = table.find(args[0]);
    sv.total_commands += 1;
    if let Some(e) = precheck(spec, args, cl, sv) {
        resp::error(out, &e);
        return Ok(Action::Continue);
    }
    let spec = spec.expect("precheck passed");
    cl.last_cmd = spec.name.to_string();
    let mut ctx = Ctx {
        store,
        tx,
        cl,
        sv,
        out,
        now_ms,
        action: Action::Continue,
    };
    (spec.handler)(&mut ctx, args)?;
    Ok(ctx.action)
}

// ---- strings ---------------------------------------------------------------------------

fn get(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let v = c.lookup(a[1])?;
    if v.is_some() {
        c.sv.keyspace_hits += 1;
    } else {
        c.sv.keyspace_misses += 1;
    }
    c.bulk_opt(v)
}

fn set(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut expire: Option<i64> = None;
    let mut i = 3;
    while i < a.len() {
        let opt = upper(a[i]);
        let has_next = i + 1 < a.len();
        match &opt[..] {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if expire.is_none() => keepttl = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !keepttl && expire.is_none() && has_next => {
                let Some(n) = parse_i64(a[i + 1]) else {
                    return c.err(E_INT);
                };
                let (base, unit) = match &opt[..] {
                    b"EX" => (c.now_ms, 1000),
                    b"PX" => (c.now_ms, 1),
                    b"EXAT" => (0, 1000),
                    _ => (0, 1),
                };
                match c.abs_time(base, n, unit) {
                    Some(t) if n > 0 => expire = Some(t),
                    _ => return c.err("ERR invalid expire time in 'set' command"),
                }
                i += 1;
            }
            _ => return c.err(E_SYNTAX),
        }
        i += 1;
    }
    let o = SetOpts {
        nx,
        xx,
        get,
        keepttl,
        expire,
    };
    let r = c.store.set(c.tx, a[1], a[2], c.now_ms, &o)?;
    if get {
        match r.old {
            Some(v) => resp::bulk(c.out, &v),
            None => c.nil(),
        }
    } else if r.written {
        resp::ok(c.out);
    } else {
        c.nil();
    }
    Ok(())
}

fn setnx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let o = SetOpts {
        nx: true,
        ..SetOpts::default()
    };
    let r = c.store.set(c.tx, a[1], a[2], c.now_ms, &o)?;
    resp::int(c.out, r.written as i64);
    Ok(())
}

fn setex_generic(c: &mut Ctx, a: &[&[u8]], unit: i64, name: &str) -> daisy::Result<()> {
    let Some(n) = parse_i64(a[2]) else {
        return c.err(E_INT);
    };
    let Some(t) = c.abs_time(c.now_ms, n, unit).filter(|_| n > 0) else {
        return c.err(&format!("ERR invalid expire time in '{name}' command"));
    };
    let o = SetOpts {
        expire: Some(t),
        ..SetOpts::default()
    };
    c.store.set(c.tx, a[1], a[3], c.now_ms, &o)?;
    resp::ok(c.out);
    Ok(())
}

fn setex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    setex_generic(c, a, 1000, "setex")
}

fn psetex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    setex_generic(c, a, 1, "psetex")
}

fn getset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let o = SetOpts {
        get: true,
        ..SetOpts::default()
    };
    match c.store.set(c.tx, a[1], a[2], c.now_ms, &o)?.old {
        Some(p) => resp::bulk(c.out, &p),
        None => c.nil(),
    }
    Ok(())
}

fn getdel(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(v) = c.lookup(a[1])? else {
        c.nil();
        return Ok(());
    };
    c.bulk_val(&v)?;
    c.store.delete(c.tx, a[1], &v)
}

fn mget(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    resp::array(c.out, a.len() - 1);
    for k in &a[1..] {
        let v = c.lookup_read(k)?;
        c.bulk_opt(v)?;
    }
    Ok(())
}

fn mset_pairs(c: &mut Ctx, a: &[&[u8]], name: &str) -> Option<()> {
    if a.len().is_multiple_of(2) {
        resp::error(
            c.out,
            &format!("ERR wrong number of arguments for '{name}' command"),
        );
        return None;
    }
    Some(())
}

fn mset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if mset_pairs(c, a, "mset").is_none() {
        return Ok(());
    }
    for kv in a[1..].chunks(2) {
        c.store
            .set(c.tx, kv[0], kv[1], c.now_ms, &SetOpts::default())?;
    }
    resp::ok(c.out);
    Ok(())
}

fn msetnx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if mset_pairs(c, a, "msetnx").is_none() {
        return Ok(());
    }
    for kv in a[1..].chunks(2) {
        if c.lookup(kv[0])?.is_some() {
            resp::int(c.out, 0);
            return Ok(());
        }
    }
    for kv in a[1..].chunks(2) {
        // A key given twice: the later value wins, as in Redis.
        let had = c
            .store
            .peek(c.tx, kv[0])?
            .is_some_and(|v| v.expire_ms.is_some());
        c.store.put(c.tx, kv[0], kv[1], None, had)?;
    }
    resp::int(c.out, 1);
    Ok(())
}

fn too_big(c: &mut Ctx) -> daisy::Result<()> {
    c.err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

fn append(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let old = c.lookup(a[1])?;
    let (mut val, exp) = match &old {
        Some(v) => (c.payload(v)?, v.expire_ms),
        None => (Vec::new(), None),
    };
    if val.len() + a[2].len() > MAX_STRING {
        return too_big(c);
    }
    val.extend_from_slice(a[2]);
    c.store.put(c.tx, a[1], &val, exp, exp.is_some())?;
    resp::int(c.out, val.len() as i64);
    Ok(())
}

fn strlen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = c.lookup(a[1])?.map_or(0, |v| v.len);
    resp::int(c.out, n as i64);
    Ok(())
}

fn getrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (Some(mut s), Some(mut e)) = (parse_i64(a[2]), parse_i64(a[3])) else {
        return c.err(E_INT);
    };
    let Some(v) = c.lookup(a[1])? else {
        resp::bulk(c.out, b"");
        return Ok(());
    };
    let len = v.len as i64;
    if s < 0 && e < 0 && s > e {
        resp::bulk(c.out, b"");
        return Ok(());
    }
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if len == 0 || s > e {
        resp::bulk(c.out, b"");
        return Ok(());
    }
    let n = (e - s + 1) as usize;
    resp::bulk_header(c.out, n);
    c.store.read_into(c.tx, &v, s as usize, n, c.out)?;
    resp::crlf(c.out);
    Ok(())
}

fn setrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(off) = parse_i64(a[2]) else {
        return c.err(E_INT);
    };
    if off < 0 {
        return c.err("ERR offset is out of range");
    }
    let old = c.lookup(a[1])?;
    let value = a[3];
    if value.is_empty() {
        // Nothing to write: no key is created, the length is reported.
        resp::int(c.out, old.map_or(0, |v| v.len) as i64);
        return Ok(());
    }
    let off = off as usize;
    if off.saturating_add(value.len()) > MAX_STRING {
        return too_big(c);
    }
    let (mut val, exp) = match &old {
        Some(v) => (c.payload(v)?, v.expire_ms),
        None => (Vec::new(), None),
    };
    if val.len() < off + value.len() {
        val.resize(off + value.len(), 0);
    }
    val[off..off + value.len()].copy_from_slice(value);
    c.store.put(c.tx, a[1], &val, exp, exp.is_some())?;
    resp::int(c.out, val.len() as i64);
    Ok(())
}

fn incr_by(c: &mut Ctx, key: &[u8], by: i64) -> daisy::Result<()> {
    // One probe: the old value is read, parsed and replaced where it lies.
    let r = c.store.rewrite(c.tx, key, c.now_ms, |old| {
        let cur = match old {
            Some(v) if v.len() > 20 => return Err(E_INT.to_string()),
            Some(v) => parse_i64(v).ok_or_else(|| E_INT.to_string())?,
            None => 0,
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| "ERR increment or decrement would overflow".to_string())?;
        Ok(n.to_string().into_bytes())
    })?;
    match r {
        Ok(v) => resp::int(c.out, parse_i64(&v).expect("just formatted")),
        Err(e) => resp::error(c.out, &e),
    }
    Ok(())
}

fn incr(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    incr_by(c, a[1], 1)
}

fn decr(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    incr_by(c, a[1], -1)
}

fn incrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match parse_i64(a[2]) {
        Some(n) => incr_by(c, a[1], n),
        None => c.err(E_INT),
    }
}

fn decrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match parse_i64(a[2]).map(|n| n.checked_neg()) {
        Some(Some(n)) => incr_by(c, a[1], n),
        // Redis 7.0's text for the one decrement that cannot be negated.
        Some(None) => c.err("ERR decrement would overflow"),
        None => c.err(E_INT),
    }
}

/// In x87 long double, as Redis computes it (see [`crate::longdouble`]).
fn incrbyfloat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(by) = longdouble::parse(a[2]) else {
        return c.err("ERR value is not a valid float");
    };
    let old = c.lookup(a[1])?;
    let (cur, exp) = match &old {
        Some(v) => match longdouble::parse(&c.payload(v)?) {
            Some(n) => (n, v.expire_ms),
            None => return c.err("ERR value is not a valid float"),
        },
        None => (longdouble::parse(b"0").expect("zero"), None),
    };
    let Some(n) = longdouble::add(cur, by) else {
        return c.err("ERR increment would produce NaN or Infinity");
    };
    let s = longdouble::format(n);
    c.store.put(c.tx, a[1], s.as_bytes(), exp, exp.is_some())?;
    resp::bulk(c.out, s.as_bytes());
    Ok(())
}

// ---- keys ------------------------------------------------------------------------------

fn del(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut n = 0;
    for k in &a[1..] {
        if let Some(v) = c.lookup(k)? {
            c.store.delete(c.tx, k, &v)?;
            n += 1;
        }
    }
    resp::int(c.out, n);
    Ok(())
}

fn exists(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut n = 0;
    for k in &a[1..] {
        n += c.lookup_read(k)?.is_some() as i64;
    }
    resp::int(c.out, n);
    Ok(())
}

fn type_(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let t = if c.lookup(a[1])?.is_some() {
        "string"
    } else {
        "none"
    };
    resp::simple(c.out, t);
    Ok(())
}

/// Live keys of one scan step that match `pat`.
fn scan_step(
    c: &mut Ctx,
    cursor: u64,
    count: usize,
    pat: Option<&[u8]>,
    keys: &mut Vec<Vec<u8>>,
) -> daisy::Result<u64> {
    let mut found = Vec::new();
    let next = c.store.scan(c.tx, cursor, count, &mut found)?;
    for (k, e) in found {
        if pat.is_some_and(|p| !glob::matches(p, &k)) {
            continue;
        }
        let v = c.store.val_of(c.tx, e)?;
        if v.expire_ms.is_some_and(|t| t < c.now_ms) {
            continue;
        }
        keys.push(k);
    }
    Ok(next)
}

fn keys(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let pat = if a[1] == b"*" { None } else { Some(a[1]) };
    let mut keys = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = scan_step(c, cursor, 4096, pat, &mut keys)?;
        if cursor == 0 {
            break;
        }
    }
    resp::array(c.out, keys.len());
    for k in keys {
        resp::bulk(c.out, &k);
    }
    Ok(())
}

fn scan(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(cursor) = std::str::from_utf8(a[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return c.err("ERR invalid cursor");
    };
    let (mut pat, mut count, mut ty) = (None, 10usize, None);
    let mut i = 2;
    while i < a.len() {
        if i + 1 >= a.len() {
            return c.err(E_SYNTAX);
        }
        match &upper(a[i])[..] {
            b"MATCH" => pat = Some(a[i + 1]),
            b"COUNT" => match parse_i64(a[i + 1]) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => return c.err(E_SYNTAX),
                None => return c.err(E_INT),
            },
            b"TYPE" => ty = Some(a[i + 1].to_ascii_lowercase()),
            _ => return c.err(E_SYNTAX),
        }
        i += 2;
    }
    let pat = pat.filter(|p| *p != b"*");
    let mut keys = Vec::new();
    let next = scan_step(c, cursor, count, pat, &mut keys)?;
    if ty.is_some_and(|t| t != b"string") {
        keys.clear();
    }
    resp::array(c.out, 2);
    resp::bulk(c.out, next.to_string().as_bytes());
    resp::array(c.out, keys.len());
    for k in keys {
        resp::bulk(c.out, &k);
    }
    Ok(())
}

fn rename_generic(c: &mut Ctx, a: &[&[u8]], nx: bool) -> daisy::Result<()> {
    let Some(v) = c.lookup(a[1])? else {
        return c.err("ERR no such key");
    };
    if a[1] == a[2] {
        if nx {
            resp::int(c.out, 0);
        } else {
            resp::ok(c.out);
        }
        return Ok(());
    }
    let dst = c.lookup(a[2])?;
    if nx && dst.is_some() {
        resp::int(c.out, 0);
        return Ok(());
    }
    let payload = c.payload(&v)?;
    if let Some(d) = dst {
        c.store.delete(c.tx, a[2], &d)?;
    }
    c.store.delete(c.tx, a[1], &v)?;
    c.store.put(c.tx, a[2], &payload, v.expire_ms, false)?;
    if nx {
        resp::int(c.out, 1);
    } else {
        resp::ok(c.out);
    }
    Ok(())
}

fn rename(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    rename_generic(c, a, false)
}

fn renamenx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    rename_generic(c, a, true)
}

fn dbsize(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let n = c.store.len_tx(c.tx)?;
    resp::int(c.out, n as i64);
    Ok(())
}

fn randomkey(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    // As Redis does on a master: an expired key that is picked is removed, and picking goes
    // on until a live key turns up or the keyspace is empty. Each removal takes redo log, so
    // this ends: once the group's record runs low, picks go on without removing for a while,
    // and then a scan finds a live key if there is one. Nil only for a keyspace whose keys
    // have all expired.
    loop {
        let r = c.sv.next_random();
        let Some(k) = c.store.random_key(c.tx, r)? else {
            c.nil();
            return Ok(());
        };
        if c.tx.log_room() < crate::store::LAZY_EXPIRY_MIN_ROOM {
            break;
        }
        if c.lookup(&k)?.is_some() {
            resp::bulk(c.out, &k);
            return Ok(());
        }
    }
    for _ in 0..100 {
        let r = c.sv.next_random();
        let Some(k) = c.store.random_key(c.tx, r)? else {
            break;
        };
        if c.lookup_read(&k)?.is_some() {
            resp::bulk(c.out, &k);
            return Ok(());
        }
    }
    let mut cursor = 0;
    loop {
        let mut live = Vec::new();
        cursor = scan_step(c, cursor, 1024, None, &mut live)?;
        if let Some(k) = live.first() {
            resp::bulk(c.out, k);
            return Ok(());
        }
        if cursor == 0 {
            break;
        }
    }
    c.nil();
    Ok(())
}

/// FLUSHALL/FLUSHDB [ASYNC|SYNC]: run by the loop outside any transaction (see [`Kind`]);
/// this handler only validates and replies.
fn flushall(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() > 2 || (a.len() == 2 && !matches!(&upper(a[1])[..], b"ASYNC" | b"SYNC")) {
        return c.err(E_SYNTAX);
    }
    resp::ok(c.out);
    Ok(())
}

/// Whether a barrier command's arguments are valid (so the loop runs its effect).
pub fn flushall_valid(a: &[&[u8]]) -> bool {
    a.len() == 1 || (a.len() == 2 && matches!(&upper(a[1])[..], b"ASYNC" | b"SYNC"))
}

// ---- expiry ----------------------------------------------------------------------------

fn expire_generic(c: &mut Ctx, a: &[&[u8]], base: i64, unit: i64, name: &str) -> daisy::Result<()> {
    // Redis checks the options before the time argument.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[3..] {
        match &upper(opt)[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => return c.err(&format!("ERR Unsupported option {}", lossy(opt))),
        }
    }
    if nx && (xx || gt || lt) {
        return c.err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return c.err("ERR GT and LT options at the same time are not compatible");
    }
    let Some(n) = parse_i64(a[2]) else {
        return c.err(E_INT);
    };
    let Some(when) = c.abs_time(base, n, unit) else {
        return c.err(&format!("ERR invalid expire time in '{name}' command"));
    };
    let Some(v) = c.lookup(a[1])? else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let cur = v.expire_ms;
    let refuse = (nx && cur.is_some())
        || (xx && cur.is_none())
        || (gt && cur.is_none_or(|t| when <= t))
        || (lt && cur.is_some_and(|t| when >= t));
    if refuse {
        resp::int(c.out, 0);
        return Ok(());
    }
    if when <= c.now_ms {
        c.store.delete(c.tx, a[1], &v)?;
    } else {
        let p = c.payload(&v)?;
        c.store.put(c.tx, a[1], &p, Some(when), cur.is_some())?;
    }
    resp::int(c.out, 1);
    Ok(())
}

fn expire(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, c.now_ms, 1000, "expire")
}

fn pexpire(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, c.now_ms, 1, "pexpire")
}

fn expireat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, 0, 1000, "expireat")
}

fn pexpireat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, 0, 1, "pexpireat")
}

fn ttl_generic(c: &mut Ctx, a: &[&[u8]], ms: bool) -> daisy::Result<()> {
    let r = match c.lookup(a[1])? {
        None => -2,
        Some(Val {
            expire_ms: None, ..
        }) => -1,
        Some(Val {
            expire_ms: Some(t), ..
        }) => {
            let left = (t - c.now_ms).max(0);
            if ms {
                left
            } else {
                (left + 500) / 1000
            }
        }
    };
    resp::int(c.out, r);
    Ok(())
}

fn ttl(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, false)
}

fn pttl(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, true)
}

fn persist(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match c.lookup(a[1])? {
        Some(v) if v.expire_ms.is_some() => {
            let p = c.payload(&v)?;
            c.store.put(c.tx, a[1], &p, None, true)?;
            resp::int(c.out, 1);
        }
        _ => resp::int(c.out, 0),
    }
    Ok(())
}

// ---- connection and server -------------------------------------------------------------

fn ping(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match a.len() {
        1 => resp::simple(c.out, "PONG"),
        2 => resp::bulk(c.out, a[1]),
        _ => return c.err("ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

fn echo(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    resp::bulk(c.out, a[1]);
    Ok(())
}

fn select(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match parse_i64(a[1]) {
        Some(0) => resp::ok(c.out),
        Some(_) => return c.err("ERR DB index is out of range"),
        None => return c.err(E_INT),
    }
    Ok(())
}

/// Check a password for the default user; replies on failure.
fn try_auth(c: &mut Ctx, user: Option<&[u8]>, pass: &[u8]) -> bool {
    let Some(want) = c.sv.requirepass.clone() else {
        if user.is_some_and(|u| u == b"default") {
            // No password configured: the default user takes any (Redis's `nopass`), so
            // clients configured with a username and password still connect.
            c.cl.authed = true;
            return true;
        }
        resp::error(
            c.out,
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
        return false;
    };
    // Compare in constant time over the longer length (no early exit on the first byte).
    let n = want.len().max(pass.len());
    let mut diff = (want.len() != pass.len()) as u8;
    for i in 0..n {
        diff |= want.get(i).copied().unwrap_or(0) ^ pass.get(i).copied().unwrap_or(1);
    }
    if user.is_some_and(|u| u != b"default") || diff != 0 {
        resp::error(
            c.out,
            "WRONGPASS invalid username-password pair or user is disabled.",
        );
        return false;
    }
    c.cl.authed = true;
    true
}

fn auth(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let ok = match a.len() {
        2 => try_auth(c, None, a[1]),
        3 => try_auth(c, Some(a[1]), a[2]),
        _ => return c.err(E_SYNTAX),
    };
    if ok {
        resp::ok(c.out);
    }
    Ok(())
}

fn hello(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut i = 1;
    let mut resp3 = c.cl.resp3;
    if a.len() > 1 {
        match parse_i64(a[1]) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return c.err("NOPROTO unsupported protocol version"),
            None => return c.err("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    // Every option is checked before any takes effect (as Redis does): a request with a
    // correct password and a bad option leaves the client as it was.
    let mut name = None;
    let mut auth = None;
    while i < a.len() {
        match &upper(a[i])[..] {
            b"AUTH" if i + 2 < a.len() => {
                auth = Some((a[i + 1], a[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                if !valid_client_name(a[i + 1]) {
                    return c.err(E_CLIENT_NAME);
                }
                name = Some(a[i + 1].to_vec());
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
    if let Some((user, pass)) = auth {
        if !try_auth(c, Some(user), pass) {
            return Ok(());
        }
    }
    if c.sv.requirepass.is_some() && !c.cl.authed {
        return c.err(E_NOAUTH);
    }
    if let Some(n) = name {
        c.cl.name = n;
    }
    c.cl.resp3 = resp3;
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
            "proto" => resp::int(c.out, if resp3 { 3 } else { 2 }),
            "id" => resp::int(c.out, c.cl.id as i64),
            _ => resp::bulk(c.out, v.as_bytes()),
        }
    }
    resp::bulk(c.out, b"modules");
    resp::array(c.out, 0);
    Ok(())
}

fn quit(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::ok(c.out);
    c.action = Action::Close;
    Ok(())
}

const E_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// Names and library fields show in CLIENT LIST lines: printable, no spaces.
fn valid_client_name(n: &[u8]) -> bool {
    n.iter().all(|&b| b > b' ' && b <= b'~')
}

/// One client's line of CLIENT LIST / CLIENT INFO.
pub fn client_line(cl: &Client, now_ms: i64) -> String {
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle=0 flags=N db=0 sub=0 psub=0 ssub=0 \
         multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 \
         events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        cl.id,
        cl.addr,
        cl.laddr,
        cl.fd,
        lossy(&cl.name),
        (now_ms - cl.created_ms).max(0) / 1000,
        cl.last_cmd,
        if cl.resp3 { 3 } else { 2 },
        lossy(&cl.lib_name),
        lossy(&cl.lib_ver),
    )
}

fn client(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = upper(a[1]);
    match (&sub[..], a.len()) {
        (b"ID", 2) => resp::int(c.out, c.cl.id as i64),
        (b"GETNAME", 2) => {
            if c.cl.name.is_empty() {
                c.nil();
            } else {
                resp::bulk(c.out, &c.cl.name.clone());
            }
        }
        (b"SETNAME", 3) => {
            if !valid_client_name(a[2]) {
                return c.err(E_CLIENT_NAME);
            }
            c.cl.name = a[2].to_vec();
            resp::ok(c.out);
        }
        (b"SETINFO", 4) => {
            if !valid_client_name(a[3]) {
                return c.err(&format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    lossy(a[2])
                ));
            }
            match &upper(a[2])[..] {
                b"LIB-NAME" => c.cl.lib_name = a[3].to_vec(),
                b"LIB-VER" => c.cl.lib_ver = a[3].to_vec(),
                _ => {
                    return c.err(&format!("ERR Unrecognized option '{}'", lossy(a[2])));
                }
            }
            resp::ok(c.out);
        }
        (b"INFO", 2) => {
            let line = client_line(c.cl, c.now_ms);
            resp::bulk(c.out, line.as_bytes());
        }
        (b"LIST", 2) => c.action = Action::ClientList,
        (b"NO-EVICT", 3) | (b"NO-TOUCH", 3) => resp::ok(c.out),
        (b"HELP", _) => {
            let lines = [
                "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
                "ID, GETNAME, SETNAME <name>, SETINFO <LIB-NAME|LIB-VER> <value>, INFO, LIST",
            ];
            resp::array(c.out, lines.len());
            for l in lines {
                resp::simple(c.out, l);
            }
        }
        _ => {
            return c.err(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                lossy(a[1])
            ))
        }
    }
    Ok(())
}

fn command_entry(out: &mut Vec<u8>, s: &Spec) {
    resp::array(out, 10);
    resp::bulk(out, s.name.as_bytes());
    resp::int(out, s.arity as i64);
    resp::array(out, s.flags.len());
    for f in s.flags {
        resp::simple(out, f);
    }
    resp::int(out, s.first_key as i64);
    resp::int(out, s.last_key as i64);
    resp::int(out, s.step as i64);
    for _ in 0..4 {
        resp::array(out, 0); // ACL categories, tips, key specs, subcommands
    }
}

fn command(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() == 1 {
        resp::array(c.out, COMMANDS.len());
        for s in COMMANDS {
            command_entry(c.out, s);
        }
        return Ok(());
    }
    match &upper(a[1])[..] {
        b"COUNT" => resp::int(c.out, COMMANDS.len() as i64),
        b"LIST" => {
            resp::array(c.out, COMMANDS.len());
            for s in COMMANDS {
                resp::bulk(c.out, s.name.as_bytes());
            }
        }
        b"INFO" => {
            let names: Vec<Vec<u8>> = if a.len() == 2 {
                COMMANDS
                    .iter()
                    .map(|s| s.name.as_bytes().to_vec())
                    .collect()
            } else {
                a[2..].iter().map(|n| n.to_ascii_lowercase()).collect()
            };
            resp::array(c.out, names.len());
            for n in names {
                match COMMANDS.iter().find(|s| s.name.as_bytes() == n) {
                    Some(s) => command_entry(c.out, s),
                    None => resp::null_array(c.out, c.cl.resp3),
                }
            }
        }
        // No documentation records: clients fall back to their own help.
        b"DOCS" => c.map(0),
        _ => {
            return c.err(&format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                lossy(a[1])
            ))
        }
    }
    Ok(())
}

/// The CONFIG GET parameters (what redis-benchmark and client libraries ask for).
fn config_params(sv: &ServerState) -> Vec<(&'static str, String)> {
    vec![
        ("bind", sv.bind.clone()),
        ("port", sv.port.to_string()),
        ("databases", "1".into()),
        ("maxclients", sv.max_clients.to_string()),
        ("maxmemory", sv.pool_max_size.to_string()),
        ("maxmemory-policy", "noeviction".into()),
        ("proto-max-bulk-len", (512u64 << 20).to_string()),
        ("client-query-buffer-limit", (1u64 << 30).to_string()),
        ("requirepass", String::new()),
        ("timeout", "0".into()),
        // Every write is durable before its reply; there is no snapshot or log to configure.
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("appendfsync", "no".into()),
        ("dir", sv.pool_path.clone()),
        ("dbfilename", String::new()),
        ("cluster-enabled", "no".into()),
        ("protected-mode", "no".into()),
        ("io-threads", "1".into()),
    ]
}

fn config(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match &upper(a[1])[..] {
        b"GET" if a.len() >= 3 => {
            let params = config_params(c.sv);
            let mut hits: Vec<&(&str, String)> = Vec::new();
            for pat in &a[2..] {
                let pat = pat.to_ascii_lowercase();
                for p in &params {
                    if glob::matches(&pat, p.0.as_bytes()) && !hits.iter().any(|h| h.0 == p.0) {
                        hits.push(p);
                    }
                }
            }
            c.map(hits.len());
            for (k, v) in hits {
                resp::bulk(c.out, k.as_bytes());
                resp::bulk(c.out, v.as_bytes());
            }
        }
        b"SET" if a.len() >= 4 && a.len().is_multiple_of(2) => {
            return c.err(&format!(
                "ERR Unsupported CONFIG parameter: {} (daisy serve is configured by its \
                 command-line options)",
                lossy(a[2])
            ))
        }
        b"RESETSTAT" if a.len() == 2 => {
            c.sv.keyspace_hits = 0;
            c.sv.keyspace_misses = 0;
            c.sv.total_commands = 0;
            c.sv.total_connections = 0;
            c.store.expired_keys = 0;
            resp::ok(c.out);
        }
        _ => {
            return c.err(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
                lossy(a[1])
            ))
        }
    }
    Ok(())
}

fn info(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let want: Vec<String> = a[1..]
        .iter()
        .map(|s| lossy(s).to_ascii_lowercase())
        .collect();
    let all = want.is_empty()
        || want
            .iter()
            .any(|w| w == "all" || w == "everything" || w == "default");
    let on = |s: &str| all || want.iter().any(|w| w == s);
    let mut t = String::new();
    let now = c.now_ms;
    if on("server") {
        t += &format!(
            "# Server\r\nredis_version:{}\r\ndaisy_version:{}\r\nredis_mode:standalone\r\n\
             os:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\n\
             tcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nexecutable:daisy\r\n\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            c.sv.port,
            (now - c.sv.started_ms) / 1000,
            (now - c.sv.started_ms) / 86_400_000,
        );
    }
    if on("clients") {
        t += &format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            c.sv.connected_clients, c.sv.max_clients
        );
    }
    if on("memory") {
        // used_memory: bytes allocated in the pool (the keyspace lives there, not in DRAM).
        let (used, objects) = c.sv.pool.usage()?;
        t += &format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{:.2}M\r\n\
             daisy_pool_objects:{objects}\r\ndaisy_pool_size:{}\r\nmaxmemory:{}\r\n\
             maxmemory_policy:noeviction\r\n\r\n",
            used as f64 / (1 << 20) as f64,
            c.sv.pool_size,
            c.sv.pool_max_size,
        );
    }
    if on("persistence") {
        let rec = c.sv.pool.recovery_report();
        t += &format!(
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\n\
             rdb_bgsave_in_progress:0\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\n\
             aof_rewrite_in_progress:0\r\ndaisy_durability:every write durable before its reply\r\n\
             daisy_pool:{}\r\ndaisy_persistence:{}\r\ndaisy_recovery_ms:{:.3}\r\n\
             daisy_recovery_transactions_replayed:{}\r\ndaisy_recovery_lines_replayed:{}\r\n\
             daisy_recovery_log_bytes_read:{}\r\ndaisy_group_commits:{}\r\n\r\n",
            c.sv.pool_path,
            c.sv.pool_mode,
            c.sv.recovery_ms,
            rec.records_replayed,
            rec.replayed_lines,
            rec.log_bytes_read,
            c.sv.group_commits
        );
    }
    if on("stats") {
        t += &format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\n\
             keyspace_misses:{}\r\n\r\n",
            c.sv.total_connections,
            c.sv.total_commands,
            c.sv.rejected_connections,
            c.store.expired_keys,
            c.sv.keyspace_hits,
            c.sv.keyspace_misses
        );
    }
    if on("replication") {
        t += "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n";
    }
    if on("keyspace") {
        t += "# Keyspace\r\n";
        let n = c.store.len_tx(c.tx)?;
        if n > 0 {
            let e = c.store.expires(c.tx)?;
            t += &format!("db0:keys={n},expires={e},avg_ttl=0\r\n");
        }
        t += "\r\n";
    }
    let t = t.trim_end_matches("\r\n").to_string() + "\r\n";
    resp::bulk(c.out, t.as_bytes());
    Ok(())
}

fn time(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    resp::array(c.out, 2);
    resp::bulk(c.out, d.as_secs().to_string().as_bytes());
    resp::bulk(c.out, d.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// SAVE: every acknowledged write is already durable, so there is nothing to save.
fn save(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::ok(c.out);
    Ok(())
}

fn shutdown(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let t = Table::new();
        assert_eq!(t.by_name.len(), COMMANDS.len(), "a name appears twice");
        assert!(t.find(b"GeT").is_some());
        assert!(t.find(b"nosuchcommand").is_none());
        assert!(t.find(&[b'g'; 100]).is_none());
        // The one-entry cache answers repeats, and never across different names or cases
        // that name different commands (a shorter name must not match a longer one's prefix).
        for _ in 0..2 {
            assert_eq!(t.find(b"get").unwrap().name, "get");
            assert_eq!(t.find(b"GET").unwrap().name, "get");
            assert_eq!(t.find(b"getset").unwrap().name, "getset");
            assert_eq!(t.find(b"ge").map(|s| s.name), None);
            assert_eq!(t.find(b"set").unwrap().name, "set");
            assert_eq!(t.find(b"set\0").map(|s| s.name), None);
        }
        for s in COMMANDS {
            assert!(s.arity != 0 && s.name.len() <= 16, "{}", s.name);
        }
    }
}
