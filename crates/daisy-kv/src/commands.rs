//! Running a command: the command table (Redis's names, arities, flags), the checks before a
//! command runs (unknown, arity, authentication, MULTI queueing, then the ACL permission
//! check of `acl::check`), and the context a handler
//! gets ([`Ctx`]). The handlers live with what they work on: `types::string`, `types::hash`,
//! `types::set` (the types' commands), `keys` (key and database commands), `multi`
//! (MULTI/EXEC/WATCH) and `admin` (connection and server commands).
//!
//! Every handler runs inside the caller's transaction (the event loop's group commit); a
//! handler that returns `Err` aborts that transaction, and the loop replays the group's
//! commands so that only the failing command answers with an error. Replies for the client
//! are appended to `out`; a Redis error reply is a reply, not an `Err`.

use crate::config::Config;
use crate::keyspace::{Keyspace, Val};
use crate::resp;
use crate::types::Type;
use daisy::Tx;
use std::collections::HashMap;
use std::ops::Range;

pub const E_INT: &str = "ERR value is not an integer or out of range";
pub const E_SYNTAX: &str = "ERR syntax error";
pub const E_NOAUTH: &str = "NOAUTH Authentication required.";
/// Redis's reply to a command that may grow memory past `maxmemory` (`shared.oomerr`).
pub const E_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Redis's reply to a write while `min-replicas-to-write` is not met (`shared.noreplicaserr`).
pub const E_NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
pub const E_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const E_FLOAT: &str = "ERR value is not a valid float";
/// Largest string value (proto-max-bulk-len).
pub const MAX_STRING: usize = 512 << 20;

/// Commands queued by MULTI: their arguments back to back in one buffer (not a vector per
/// argument: queuing allocated for every argument, and the event loop clones a client's
/// state, queue included, for each round that runs its requests), and each one's table entry,
/// found when it was queued.
#[derive(Clone, Debug, Default)]
pub struct Multi {
    /// Every queued argument's bytes, back to back.
    bytes: Vec<u8>,
    /// Where each argument ends in `bytes`.
    ends: Vec<usize>,
    /// Each queued command: its index in [`COMMANDS`] and its number of arguments.
    cmds: Vec<(usize, usize)>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    pub error: bool,
}

impl Multi {
    /// An empty queue with room for a few small commands (each growth step of its buffers
    /// showed in profiles of short transactions).
    pub fn with_capacity() -> Multi {
        Multi {
            bytes: Vec::with_capacity(256),
            ends: Vec::with_capacity(16),
            cmds: Vec::with_capacity(8),
            error: false,
        }
    }

    /// Queue the command `spec` with its arguments (its name first).
    pub fn push(&mut self, spec: &'static Spec, args: &[&[u8]]) {
        for a in args {
            self.bytes.extend_from_slice(a);
            self.ends.push(self.bytes.len());
        }
        self.cmds.push((spec.index(), args.len()));
    }

    /// Queued commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Every queued argument, in order (the commands' arguments are consecutive runs of
    /// them: see [`Multi::commands`]).
    pub fn argv(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let a = &self.bytes[start..end];
                start = end;
                a
            })
            .collect()
    }

    /// Every queued command: its table entry and where its arguments are in [`Multi::argv`].
    pub fn commands(&self) -> impl Iterator<Item = (&'static Spec, Range<usize>)> + '_ {
        let mut start = 0;
        self.cmds.iter().map(move |&(i, n)| {
            let r = start..start + n;
            start += n;
            (&COMMANDS[i], r)
        })
    }

    /// Whether a queued command satisfies `f` (given its table entry and arguments).
    pub fn any(&self, mut f: impl FnMut(&'static Spec, &[&[u8]]) -> bool) -> bool {
        let argv = self.argv();
        self.commands().any(|(s, r)| f(s, &argv[r]))
    }

    /// Bytes of the queued arguments, as CLIENT LIST's `multi-mem` counts them (each
    /// argument's length plus 8).
    pub fn arg_bytes(&self) -> usize {
        self.bytes.len() + 8 * self.ends.len()
    }
}

/// Per-connection state.
#[derive(Clone, Debug, Default)]
pub struct Client {
    pub id: u64,
    pub name: Vec<u8>,
    pub authed: bool,
    /// The user it runs as (`acl`): `default` until AUTH names another.
    pub user: crate::acl::UserRef,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: i64,
    pub last_ms: i64,
    /// Full name of the last command (`client|list` for a subcommand), as CLIENT LIST shows.
    pub last_cmd: &'static str,
    /// RESP3 after `HELLO 3` (nulls and maps have their own types); RESP2 otherwise.
    pub resp3: bool,
    /// The selected database.
    pub db: usize,
    /// Inside MULTI: the queued commands.
    pub multi: Option<Multi>,
    /// What CLIENT, INFO and the event loop keep per connection (`admin::ClientState`).
    pub admin: crate::admin::ClientState,
    /// A blocking command (BLPOP, BZPOPMIN, ...) waits for one of its keys (Redis's
    /// `blockForKeys`): set by the command, managed by the event loop (`server.rs`, "Blocked
    /// clients").
    pub blocked: Option<Box<Blocked>>,
    /// While the event loop runs a blocked command again because `serving` (one of its keys)
    /// got elements: the command looks at that key only, and when it finds nothing there (or
    /// a value of another type) it answers nothing and stays blocked.
    pub serving: Option<Vec<u8>>,
    /// Inside EXEC: a blocking command answers as if it timed out at once (Redis's
    /// `CLIENT_DENY_BLOCKING`).
    pub deny_blocking: bool,
    /// Its channels and patterns (`pubsub`).
    pub pubsub: crate::pubsub::ClientSubs,
    /// The client a script's `redis.call` runs as (Redis's `CLIENT_SCRIPT`).
    pub script: bool,
    /// Client-side caching (`tracking`).
    pub tracking: crate::tracking::ClientTracking,
}

/// What a blocked client waits for.
#[derive(Clone, Debug)]
pub struct Blocked {
    /// The type the command pops (a list or a sorted set); a key that gets a value of
    /// another type does not serve it.
    pub ty: Type,
    pub db: usize,
    /// Its keys, each once, in the command's order.
    pub keys: Vec<Vec<u8>>,
    /// When it times out (ms since the epoch); 0: never.
    pub deadline_ms: i64,
    /// Its timeout reply is a null bulk string (BLMOVE, BRPOPLPUSH), else a null array.
    pub null_bulk: bool,
    /// The command, run again when a key is ready.
    pub args: Vec<Vec<u8>>,
    /// Arrival order among blocked clients (set by the event loop).
    pub seq: u64,
    /// Commands of the client that arrived after it: they run once it is served.
    pub pending: Vec<Vec<Vec<u8>>>,
}

/// Counters of one command (INFO commandstats).
#[derive(Clone, Copy, Debug, Default)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// Server-wide counters that a failed group restores (see `server::run_work`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub total_commands: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Keys removed by the maxmemory policy (INFO evicted_keys).
    pub evicted_keys: u64,
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
    /// What survives what (`daisy::Pool::durability`), for INFO.
    pub durability: String,
    pub survives_power_loss: bool,
    pub started_ms: i64,
    pub connected_clients: usize,
    pub total_connections: u64,
    pub rejected_connections: u64,
    pub counters: Counters,
    /// Per command (index into [`COMMANDS`]): not restored by a failed group (a rare
    /// double count on that path).
    pub cmdstats: Vec<CmdStat>,
    /// Error replies by their first word (INFO errorstats).
    pub errorstats: HashMap<String, u64>,
    pub group_commits: u64,
    /// Groups that failed (a full pool, a command too big for the record left, a collection
    /// in use) and were run again, the failing command alone (INFO `daisy_group_retries`).
    pub group_retries: u64,
    pub pool_size: u64,
    pub recovery_ms: f64,
    pub rng: u64,
    pub config: Config,
    /// What the connection and server commands keep (`admin::AdminState`).
    pub admin: crate::admin::AdminState,
    /// SAVE/BGSAVE requests and the backups' history (`backup.rs`).
    pub save: crate::backup::SaveState,
    /// Who listens to which channels and patterns, and the messages waiting for their
    /// group's commit (`pubsub`).
    pub pubsub: crate::pubsub::PubSub,
    /// Users, the ACL log (`acl.rs`).
    pub acl: crate::acl::Acl,
    /// Client-side caching: who may cache which keys, and the invalidations waiting for
    /// their group's commit (`tracking`).
    pub tracking: crate::tracking::Tracking,
    /// The Lua interpreter, the script cache and the function libraries (`scripting`).
    pub scripting: crate::scripting::Scripting,
    /// The database a random eviction looks at first (they are taken in turn).
    pub evict_db: usize,
}

impl ServerState {
    /// Defaults for a server (or a test driver) on `pool`: loopback, port 6379, no password.
    pub fn new(pool: &daisy::Pool, now_ms: i64) -> ServerState {
        let (durability, survives_power_loss) = pool.durability();
        ServerState {
            pool: pool.clone(),
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            max_clients: 10_000,
            pool_path: pool.path().display().to_string(),
            pool_mode: pool.mode().describe(),
            durability,
            survives_power_loss,
            started_ms: now_ms,
            connected_clients: 0,
            total_connections: 0,
            rejected_connections: 0,
            counters: Counters::default(),
            cmdstats: vec![CmdStat::default(); COMMANDS.len()],
            errorstats: HashMap::new(),
            group_commits: 0,
            group_retries: 0,
            pool_size: pool.size(),
            recovery_ms: 0.0,
            rng: (now_ms as u64 ^ 0x9E37_79B9_7F4A_7C15) | 1,
            config: Config::default(),
            admin: Default::default(),
            save: crate::backup::SaveState::new(now_ms),
            pubsub: Default::default(),
            acl: crate::acl::Acl::new(),
            tracking: Default::default(),
            scripting: Default::default(),
            evict_db: 0,
        }
    }

    /// `maxmemory` when one is set: the pool's size limit, when below its capacity (CONFIG
    /// SET maxmemory, `--max-size` at a reopen). None: no limit (Redis's `maxmemory 0`).
    #[inline]
    pub fn memory_limit(&self) -> Option<u64> {
        let max = self.pool.max_size();
        (max < self.pool.capacity()).then_some(max)
    }

    /// INFO's `used_memory`: the bytes allocated in the pool (the keyspace lives there), as
    /// committed. The maxmemory rule measures the same figure (see evict.rs). A damaged chunk
    /// table (which `pool check` reports) reads as 0 here rather than failing every command.
    pub fn used_memory(&self) -> u64 {
        self.pool.allocated_bytes().unwrap_or(0)
    }

    /// Whether the used bytes are past maxmemory (Redis's "used memory > maxmemory"), as
    /// committed: scripts ask before they run; commands ask `evict::perform` first, which
    /// also removes keys by the maxmemory policy.
    pub fn over_maxmemory(&self) -> bool {
        self.memory_limit()
            .is_some_and(|max| self.used_memory() > max)
    }

    /// A random word (xorshift64*: random keys and members need a spread, not a secret).
    pub fn next_random(&mut self) -> u64 {
        let mut x = self.rng | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Count an error reply (INFO errorstats: by its first word).
    pub fn count_error(&mut self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        *self.errorstats.entry(code.to_string()).or_default() += 1;
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
}

pub type Handler = fn(&mut Ctx, &[&[u8]]) -> daisy::Result<()>;

/// A command's table entry (also what COMMAND reports).
pub struct Spec {
    pub name: &'static str,
    /// Redis arity: n = exactly n arguments with the name, -n = at least n.
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
}

impl Spec {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// Position in [`COMMANDS`].
    pub fn index(&'static self) -> usize {
        let base = COMMANDS.as_ptr() as usize;
        (self as *const Spec as usize - base) / std::mem::size_of::<Spec>()
    }
}

/// Whether the command's second argument is a field or member of the collection at its key
/// (the event loop prefetches that entry of the collection's table ahead of the command).
pub fn member_arg(s: &Spec) -> bool {
    matches!(
        s.name,
        "hset"
            | "hsetnx"
            | "hget"
            | "hmget"
            | "hdel"
            | "hexists"
            | "hstrlen"
            | "hincrby"
            | "hincrbyfloat"
            | "sadd"
            | "srem"
            | "sismember"
            | "smismember"
    )
}

/// Everything a handler sees.
pub struct Ctx<'a, 'p> {
    pub table: &'a Table,
    pub ks: &'a mut Keyspace,
    pub tx: &'a mut Tx<'p>,
    pub cl: &'a mut Client,
    pub sv: &'a mut ServerState,
    pub out: &'a mut Vec<u8>,
    pub now_ms: i64,
    pub action: Action,
}

/// A key's value of the wanted type, or the key holds another type.
pub type Typed = Result<Option<Val>, WrongType>;

/// A key and its record (`Ctx::first_of_type`).
pub type KeyVal<'k> = (&'k [u8], Val);

/// The key holds a value of another type (the caller replies WRONGTYPE).
#[derive(Debug, Clone, Copy)]
pub struct WrongType;

impl Ctx<'_, '_> {
    /// Reply with an error (counted for INFO errorstats).
    pub fn err(&mut self, msg: &str) -> daisy::Result<()> {
        resp::error(self.out, msg);
        self.sv.count_error(msg);
        Ok(())
    }

    /// The selected database.
    #[inline]
    pub fn db(&self) -> usize {
        self.cl.db
    }

    /// The key's live value, for a command that may write it.
    pub fn lookup(&mut self, key: &[u8]) -> daisy::Result<Option<Val>> {
        let db = self.cl.db;
        self.ks.lookup(self.tx, db, key, self.now_ms, false)
    }

    /// [`Self::lookup`] for commands that only read many keys (MGET, EXISTS): see
    /// `Keyspace::lookup` on why lazy expiry may step aside for them.
    pub fn lookup_read(&mut self, key: &[u8]) -> daisy::Result<Option<Val>> {
        let db = self.cl.db;
        self.ks.lookup(self.tx, db, key, self.now_ms, true)
    }

    /// The key's live value if it has type `ty` (Redis's `lookupKey` + `checkType`).
    pub fn lookup_typed(&mut self, key: &[u8], ty: Type) -> daisy::Result<Typed> {
        Ok(match self.lookup(key)? {
            Some(v) if v.ty != ty => Err(WrongType),
            v => Ok(v),
        })
    }

    /// Like [`Self::lookup_typed`], counting a hit or a miss (read commands).
    pub fn lookup_typed_read(&mut self, key: &[u8], ty: Type) -> daisy::Result<Typed> {
        let r = self.lookup_typed(key, ty)?;
        match &r {
            Ok(Some(_)) | Err(_) => self.sv.counters.keyspace_hits += 1,
            Ok(None) => {
                self.sv.counters.keyspace_misses += 1;
                self.notify(crate::pubsub::N_KEY_MISS, "keymiss", key);
            }
        }
        Ok(r)
    }

    pub fn payload(&self, v: &Val) -> daisy::Result<Vec<u8>> {
        self.ks.payload(self.tx, v)
    }

    /// Signal that `key` (in the selected database) changed: WATCH.
    pub fn touch(&mut self, key: &[u8]) {
        let db = self.cl.db;
        self.ks.touch(self.tx, db, key);
    }

    /// Reply with `v`'s payload as a bulk string, copied from the pool straight into the
    /// output buffer.
    pub fn bulk_val(&mut self, v: &Val) -> daisy::Result<()> {
        resp::bulk_header(self.out, v.len);
        self.ks.read_into(self.tx, v, 0, v.len, self.out)?;
        resp::crlf(self.out);
        Ok(())
    }

    /// The null reply of the client's protocol.
    pub fn nil(&mut self) {
        resp::null(self.out, self.cl.resp3);
    }

    /// An empty array, or the null array for a missing key where Redis gives one.
    pub fn null_array(&mut self) {
        resp::null_array(self.out, self.cl.resp3);
    }

    /// A map of `n` pairs (a flat array of 2n elements in RESP2).
    pub fn map(&mut self, n: usize) {
        resp::map(self.out, n, self.cl.resp3);
    }

    /// A set reply of `n` elements (an array in RESP2).
    pub fn set_header(&mut self, n: usize) {
        resp::set_header(self.out, n, self.cl.resp3);
    }

    /// Add `amount` units to `base`, or None when it would overflow.
    pub fn abs_time(&self, base: i64, amount: i64, unit_ms: i64) -> Option<i64> {
        amount.checked_mul(unit_ms)?.checked_add(base)
    }

    /// A random word.
    pub fn random(&mut self) -> u64 {
        self.sv.next_random()
    }

    /// Block the client on `keys` until one gets a value of type `ty` or `deadline_ms` passes
    /// (0: never); the command answers nothing now. Where blocking is not allowed (inside
    /// EXEC) it answers as a timeout would, at once. While the event loop serves the client
    /// (it is blocked already), nothing changes: it stays blocked.
    pub fn block(
        &mut self,
        ty: Type,
        keys: &[&[u8]],
        deadline_ms: i64,
        null_bulk: bool,
        args: &[&[u8]],
    ) {
        if self.cl.serving.is_some() {
            return;
        }
        if self.cl.deny_blocking {
            if null_bulk {
                self.nil();
            } else {
                self.null_array();
            }
            return;
        }
        let mut unique: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        for k in keys {
            if !unique.iter().any(|u| u == k) {
                unique.push(k.to_vec());
            }
        }
        self.cl.blocked = Some(Box::new(Blocked {
            ty,
            db: self.cl.db,
            keys: unique,
            deadline_ms,
            null_bulk,
            args: args.iter().map(|a| a.to_vec()).collect(),
            seq: 0,
            pending: Vec::new(),
        }));
    }

    /// Whether `key` is one a blocking command may look at now: every key normally, only the
    /// ready key while the event loop serves the blocked client.
    pub fn may_serve(&self, key: &[u8]) -> bool {
        self.cl.serving.as_deref().is_none_or(|k| k == key)
    }

    /// The first of `keys` (that this client may serve now) holding a value of type `ty`, for
    /// the multi-key pops (LMPOP, BLPOP, ZMPOP, BZPOPMIN...): Ok(None) when none does; Err(())
    /// when a key holds another type: WRONGTYPE is replied, except while the event loop serves
    /// a blocked client, which then answers nothing and stays blocked (Redis's
    /// `serveClientsBlockedOn...` skips such keys).
    pub fn first_of_type<'k>(
        &mut self,
        keys: &[&'k [u8]],
        ty: Type,
    ) -> daisy::Result<Result<Option<KeyVal<'k>>, ()>> {
        for &k in keys {
            if !self.may_serve(k) {
                continue;
            }
            match self.lookup_typed(k, ty)? {
                Err(_) => {
                    if self.cl.serving.is_none() {
                        self.err(E_WRONGTYPE)?;
                        return Ok(Err(()));
                    }
                    return Ok(Ok(None));
                }
                Ok(None) => continue,
                Ok(Some(v)) => return Ok(Ok(Some((k, v)))),
            }
        }
        Ok(Ok(None))
    }

    /// A blocking command's timeout argument in seconds (a float, Redis's
    /// `getTimeoutFromObjectOrReply`): the deadline in ms since the epoch (0: none), or None
    /// after the error reply.
    pub fn timeout_arg(&mut self, arg: &[u8]) -> daisy::Result<Option<i64>> {
        let secs = crate::longdouble::parse(arg)
            .and_then(|_| std::str::from_utf8(arg).ok())
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|f| !f.is_nan());
        let Some(secs) = secs else {
            self.err("ERR timeout is not a float or out of range")?;
            return Ok(None);
        };
        let ms = (secs * 1000.0).ceil();
        if ms < 0.0 {
            self.err("ERR timeout is negative")?;
            return Ok(None);
        }
        if ms == 0.0 {
            return Ok(Some(0));
        }
        // Beyond any clock: never (Redis's deadline would overflow; it waits as long).
        Ok(Some(if ms >= (i64::MAX / 2) as f64 {
            i64::MAX
        } else {
            self.now_ms.saturating_add(ms as i64)
        }))
    }
}

/// Uppercase copy of an option argument.
pub fn upper(a: &[u8]) -> Vec<u8> {
    a.to_ascii_uppercase()
}

/// A client's bytes for an error text or a listing: at most 128 of them, as Redis shows them
/// (an unknown 512 MB command name must not become gigabytes of reply).
pub fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned()
}

pub use crate::resp::parse_i64;

/// An integer argument in `min..=max` (Redis's `getRangeLongFromObjectOrReply`): None after
/// the error reply, which is `msg` for either failure when given, else Redis's texts.
pub fn range_arg(
    c: &mut Ctx,
    arg: &[u8],
    min: i64,
    max: i64,
    msg: Option<&str>,
) -> daisy::Result<Option<i64>> {
    match parse_i64(arg) {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        parsed => {
            let text = match (msg, parsed) {
                (Some(m), _) => format!("ERR {m}"),
                (None, None) => E_INT.to_string(),
                (None, Some(_)) => {
                    format!("ERR value is out of range, value must between {min} and {max}")
                }
            };
            c.err(&text)?;
            Ok(None)
        }
    }
}

/// Reply WRONGTYPE and return from the handler when a lookup found another type; else the
/// `Option<Val>`.
#[macro_export]
macro_rules! typed {
    ($c:expr, $r:expr) => {
        match $r {
            Ok(v) => v,
            Err($crate::commands::WrongType) => {
                return $c.err($crate::commands::E_WRONGTYPE);
            }
        }
    };
}

// ---- the table -------------------------------------------------------------------------

macro_rules! spec {
    ($name:literal, $arity:expr, [$($f:literal),*], $fk:expr, $lk:expr, $st:expr, $h:expr) => {
        Spec { name: $name, arity: $arity, flags: &[$($f),*], first_key: $fk, last_key: $lk,
               step: $st, handler: $h }
    };
}

use crate::types::{hash as h, list as l, set as st, stream as x, string as s, zset as z};
use crate::{admin as a, keys as k, multi as m, pubsub as ps, scripting as sc};

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    // strings (types::string)
    spec!("get", 2, ["readonly", "fast"], 1, 1, 1, s::get),
    spec!("set", -3, ["write", "denyoom"], 1, 1, 1, s::set),
    spec!("setnx", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::setnx),
    spec!("setex", 4, ["write", "denyoom"], 1, 1, 1, s::setex),
    spec!("psetex", 4, ["write", "denyoom"], 1, 1, 1, s::psetex),
    spec!("getset", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::getset),
    spec!("getdel", 2, ["write", "fast"], 1, 1, 1, s::getdel),
    spec!("getex", -2, ["write", "fast"], 1, 1, 1, s::getex),
    spec!("mget", -2, ["readonly", "fast"], 1, -1, 1, s::mget),
    spec!("mset", -3, ["write", "denyoom"], 1, -1, 2, s::mset),
    spec!("msetnx", -3, ["write", "denyoom"], 1, -1, 2, s::msetnx),
    spec!("append", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::append),
    spec!("strlen", 2, ["readonly", "fast"], 1, 1, 1, s::strlen),
    spec!("getrange", 4, ["readonly"], 1, 1, 1, s::getrange),
    spec!("substr", 4, ["readonly"], 1, 1, 1, s::getrange),
    spec!("setrange", 4, ["write", "denyoom"], 1, 1, 1, s::setrange),
    spec!("incr", 2, ["write", "denyoom", "fast"], 1, 1, 1, s::incr),
    spec!("decr", 2, ["write", "denyoom", "fast"], 1, 1, 1, s::decr),
    spec!("incrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::incrby),
    spec!("decrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::decrby),
    spec!("incrbyfloat", 3, ["write", "denyoom", "fast"], 1, 1, 1, s::incrbyfloat),
    spec!("lcs", -3, ["readonly"], 1, 2, 1, s::lcs),
    // bitmaps (types::bitops) and HyperLogLog (types::hll): strings
    spec!("setbit", 4, ["write", "denyoom"], 1, 1, 1, crate::types::bitops::setbit),
    spec!("getbit", 3, ["readonly", "fast"], 1, 1, 1, crate::types::bitops::getbit),
    spec!("bitcount", -2, ["readonly"], 1, 1, 1, crate::types::bitops::bitcount),
    spec!("bitpos", -3, ["readonly"], 1, 1, 1, crate::types::bitops::bitpos),
    spec!("bitop", -4, ["write", "denyoom"], 2, -1, 1, crate::types::bitops::bitop),
    spec!("bitfield", -2, ["write", "denyoom"], 1, 1, 1, crate::types::bitops::bitfield),
    spec!("bitfield_ro", -2, ["readonly", "fast"], 1, 1, 1, crate::types::bitops::bitfield_ro),
    spec!("pfadd", -2, ["write", "denyoom", "fast"], 1, 1, 1, crate::types::hll::pfadd),
    spec!("pfcount", -2, ["readonly"], 1, -1, 1, crate::types::hll::pfcount),
    spec!("pfmerge", -2, ["write", "denyoom"], 1, -1, 1, crate::types::hll::pfmerge),
    spec!("pfdebug", 3, ["write", "denyoom", "admin"], 2, 2, 1, crate::types::hll::pfdebug),
    spec!("pfselftest", 1, ["admin"], 0, 0, 0, crate::types::hll::pfselftest),
    // lists (types::list)
    spec!("lpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, l::lpush),
    spec!("rpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, l::rpush),
    spec!("lpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, l::lpushx),
    spec!("rpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, l::rpushx),
    spec!("linsert", 5, ["write", "denyoom"], 1, 1, 1, l::linsert),
    spec!("lpop", -2, ["write", "fast"], 1, 1, 1, l::lpop),
    spec!("rpop", -2, ["write", "fast"], 1, 1, 1, l::rpop),
    spec!("lmpop", -4, ["write", "movablekeys"], 0, 0, 0, l::lmpop),
    spec!("brpop", -3, ["write", "noscript", "blocking"], 1, -2, 1, l::brpop),
    spec!("blpop", -3, ["write", "noscript", "blocking"], 1, -2, 1, l::blpop),
    spec!("blmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0, l::blmpop),
    spec!("brpoplpush", 4, ["write", "denyoom", "noscript", "blocking"], 1, 2, 1, l::brpoplpush),
    spec!("blmove", 6, ["write", "denyoom", "noscript", "blocking"], 1, 2, 1, l::blmove),
    spec!("llen", 2, ["readonly", "fast"], 1, 1, 1, l::llen),
    spec!("lindex", 3, ["readonly"], 1, 1, 1, l::lindex),
    spec!("lset", 4, ["write", "denyoom"], 1, 1, 1, l::lset),
    spec!("lrange", 4, ["readonly"], 1, 1, 1, l::lrange),
    spec!("ltrim", 4, ["write"], 1, 1, 1, l::ltrim),
    spec!("lpos", -3, ["readonly"], 1, 1, 1, l::lpos),
    spec!("lrem", 4, ["write"], 1, 1, 1, l::lrem),
    spec!("rpoplpush", 3, ["write", "denyoom"], 1, 2, 1, l::rpoplpush),
    spec!("lmove", 5, ["write", "denyoom"], 1, 2, 1, l::lmove),
    // SORT (sort)
    spec!("sort", -2, ["write", "denyoom", "movablekeys"], 1, 1, 1, crate::sort::sort),
    spec!("sort_ro", -2, ["readonly", "movablekeys"], 1, 1, 1, crate::sort::sort_ro),
    // sorted sets (types::zset)
    spec!("zadd", -4, ["write", "denyoom", "fast"], 1, 1, 1, z::zadd),
    spec!("zincrby", 4, ["write", "denyoom", "fast"], 1, 1, 1, z::zincrby),
    spec!("zrem", -3, ["write", "fast"], 1, 1, 1, z::zrem),
    spec!("zremrangebyscore", 4, ["write"], 1, 1, 1, z::zremrangebyscore),
    spec!("zremrangebyrank", 4, ["write"], 1, 1, 1, z::zremrangebyrank),
    spec!("zremrangebylex", 4, ["write"], 1, 1, 1, z::zremrangebylex),
    spec!("zunionstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, z::zunionstore),
    spec!("zinterstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, z::zinterstore),
    spec!("zdiffstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, z::zdiffstore),
    spec!("zunion", -3, ["readonly", "movablekeys"], 0, 0, 0, z::zunion),
    spec!("zinter", -3, ["readonly", "movablekeys"], 0, 0, 0, z::zinter),
    spec!("zintercard", -3, ["readonly", "movablekeys"], 0, 0, 0, z::zintercard),
    spec!("zdiff", -3, ["readonly", "movablekeys"], 0, 0, 0, z::zdiff),
    spec!("zrange", -4, ["readonly"], 1, 1, 1, z::zrange),
    spec!("zrangestore", -5, ["write", "denyoom"], 1, 2, 1, z::zrangestore),
    spec!("zrangebyscore", -4, ["readonly"], 1, 1, 1, z::zrangebyscore),
    spec!("zrevrangebyscore", -4, ["readonly"], 1, 1, 1, z::zrevrangebyscore),
    spec!("zrangebylex", -4, ["readonly"], 1, 1, 1, z::zrangebylex),
    spec!("zrevrangebylex", -4, ["readonly"], 1, 1, 1, z::zrevrangebylex),
    spec!("zcount", 4, ["readonly", "fast"], 1, 1, 1, z::zcount),
    spec!("zlexcount", 4, ["readonly", "fast"], 1, 1, 1, z::zlexcount),
    spec!("zrevrange", -4, ["readonly"], 1, 1, 1, z::zrevrange),
    spec!("zcard", 2, ["readonly", "fast"], 1, 1, 1, z::zcard),
    spec!("zscore", 3, ["readonly", "fast"], 1, 1, 1, z::zscore),
    spec!("zmscore", -3, ["readonly", "fast"], 1, 1, 1, z::zmscore),
    spec!("zrank", 3, ["readonly", "fast"], 1, 1, 1, z::zrank),
    spec!("zrevrank", 3, ["readonly", "fast"], 1, 1, 1, z::zrevrank),
    spec!("zscan", -3, ["readonly"], 1, 1, 1, z::zscan),
    spec!("zpopmin", -2, ["write", "fast"], 1, 1, 1, z::zpopmin),
    spec!("zpopmax", -2, ["write", "fast"], 1, 1, 1, z::zpopmax),
    spec!("zmpop", -4, ["write", "movablekeys"], 0, 0, 0, z::zmpop),
    spec!("bzpopmin", -3, ["write", "noscript", "fast", "blocking"], 1, -2, 1, z::bzpopmin),
    spec!("bzpopmax", -3, ["write", "noscript", "fast", "blocking"], 1, -2, 1, z::bzpopmax),
    spec!("bzmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0, z::bzmpop),
    spec!("zrandmember", -2, ["readonly"], 1, 1, 1, z::zrandmember),
    // geo (types::geo)
    spec!("geoadd", -5, ["write", "denyoom"], 1, 1, 1, crate::types::geo::geoadd),
    spec!("geopos", -2, ["readonly"], 1, 1, 1, crate::types::geo::geopos),
    spec!("geohash", -2, ["readonly"], 1, 1, 1, crate::types::geo::geohash),
    spec!("geodist", -4, ["readonly"], 1, 1, 1, crate::types::geo::geodist),
    spec!("georadius", -6, ["write", "denyoom", "movablekeys"], 1, 1, 1, crate::types::geo::georadius),
    spec!("georadius_ro", -6, ["readonly"], 1, 1, 1, crate::types::geo::georadius_ro),
    spec!("georadiusbymember", -5, ["write", "denyoom", "movablekeys"], 1, 1, 1, crate::types::geo::georadiusbymember),
    spec!("georadiusbymember_ro", -5, ["readonly"], 1, 1, 1, crate::types::geo::georadiusbymember_ro),
    spec!("geosearch", -7, ["readonly"], 1, 1, 1, crate::types::geo::geosearch),
    spec!("geosearchstore", -8, ["write", "denyoom"], 1, 2, 1, crate::types::geo::geosearchstore),
    // streams (types::stream)
    spec!("xadd", -5, ["write", "denyoom", "fast"], 1, 1, 1, x::xadd),
    spec!("xrange", -4, ["readonly"], 1, 1, 1, x::xrange),
    spec!("xrevrange", -4, ["readonly"], 1, 1, 1, x::xrevrange),
    spec!("xlen", 2, ["readonly", "fast"], 1, 1, 1, x::xlen),
    spec!("xread", -4, ["readonly", "blocking", "movablekeys"], 0, 0, 0, x::xread),
    spec!("xreadgroup", -7, ["write", "blocking", "movablekeys"], 0, 0, 0, x::xreadgroup),
    spec!("xgroup", -2, ["write"], 0, 0, 0, x::xgroup),
    spec!("xsetid", -3, ["write", "denyoom", "fast"], 1, 1, 1, x::xsetid),
    spec!("xack", -4, ["write", "fast"], 1, 1, 1, x::xack),
    spec!("xpending", -3, ["readonly"], 1, 1, 1, x::xpending),
    spec!("xclaim", -6, ["write", "fast"], 1, 1, 1, x::xclaim),
    spec!("xautoclaim", -6, ["write", "fast"], 1, 1, 1, x::xautoclaim),
    spec!("xinfo", -2, ["readonly"], 0, 0, 0, x::xinfo),
    spec!("xdel", -3, ["write", "fast"], 1, 1, 1, x::xdel),
    spec!("xtrim", -4, ["write"], 1, 1, 1, x::xtrim),
    // hashes (types::hash)
    spec!("hset", -4, ["write", "denyoom", "fast"], 1, 1, 1, h::hset),
    spec!("hmset", -4, ["write", "denyoom", "fast"], 1, 1, 1, h::hmset),
    spec!("hsetnx", 4, ["write", "denyoom", "fast"], 1, 1, 1, h::hsetnx),
    spec!("hget", 3, ["readonly", "fast"], 1, 1, 1, h::hget),
    spec!("hmget", -3, ["readonly", "fast"], 1, 1, 1, h::hmget),
    spec!("hdel", -3, ["write", "fast"], 1, 1, 1, h::hdel),
    spec!("hlen", 2, ["readonly", "fast"], 1, 1, 1, h::hlen),
    spec!("hstrlen", 3, ["readonly", "fast"], 1, 1, 1, h::hstrlen),
    spec!("hexists", 3, ["readonly", "fast"], 1, 1, 1, h::hexists),
    spec!("hkeys", 2, ["readonly"], 1, 1, 1, h::hkeys),
    spec!("hvals", 2, ["readonly"], 1, 1, 1, h::hvals),
    spec!("hgetall", 2, ["readonly"], 1, 1, 1, h::hgetall),
    spec!("hincrby", 4, ["write", "denyoom", "fast"], 1, 1, 1, h::hincrby),
    spec!("hincrbyfloat", 4, ["write", "denyoom", "fast"], 1, 1, 1, h::hincrbyfloat),
    spec!("hrandfield", -2, ["readonly"], 1, 1, 1, h::hrandfield),
    spec!("hscan", -3, ["readonly"], 1, 1, 1, h::hscan),
    // sets (types::set)
    spec!("sadd", -3, ["write", "denyoom", "fast"], 1, 1, 1, st::sadd),
    spec!("srem", -3, ["write", "fast"], 1, 1, 1, st::srem),
    spec!("scard", 2, ["readonly", "fast"], 1, 1, 1, st::scard),
    spec!("sismember", 3, ["readonly", "fast"], 1, 1, 1, st::sismember),
    spec!("smismember", -3, ["readonly", "fast"], 1, 1, 1, st::smismember),
    spec!("smembers", 2, ["readonly"], 1, 1, 1, st::smembers),
    spec!("srandmember", -2, ["readonly"], 1, 1, 1, st::srandmember),
    spec!("spop", -2, ["write", "fast"], 1, 1, 1, st::spop),
    spec!("smove", 4, ["write", "fast"], 1, 2, 1, st::smove),
    spec!("sinter", -2, ["readonly"], 1, -1, 1, st::sinter),
    spec!("sintercard", -3, ["readonly", "movablekeys"], 0, 0, 0, st::sintercard),
    spec!("sinterstore", -3, ["write", "denyoom"], 1, -1, 1, st::sinterstore),
    spec!("sunion", -2, ["readonly"], 1, -1, 1, st::sunion),
    spec!("sunionstore", -3, ["write", "denyoom"], 1, -1, 1, st::sunionstore),
    spec!("sdiff", -2, ["readonly"], 1, -1, 1, st::sdiff),
    spec!("sdiffstore", -3, ["write", "denyoom"], 1, -1, 1, st::sdiffstore),
    spec!("sscan", -3, ["readonly"], 1, 1, 1, st::sscan),
    // keys and databases (keys)
    spec!("del", -2, ["write"], 1, -1, 1, k::del),
    spec!("unlink", -2, ["write", "fast"], 1, -1, 1, k::del),
    spec!("exists", -2, ["readonly", "fast"], 1, -1, 1, k::exists),
    spec!("touch", -2, ["readonly", "fast"], 1, -1, 1, k::touch),
    spec!("type", 2, ["readonly", "fast"], 1, 1, 1, k::type_),
    spec!("keys", 2, ["readonly"], 0, 0, 0, k::keys),
    spec!("scan", -2, ["readonly"], 0, 0, 0, k::scan),
    spec!("rename", 3, ["write"], 1, 2, 1, k::rename),
    spec!("renamenx", 3, ["write", "fast"], 1, 2, 1, k::renamenx),
    spec!("copy", -3, ["write", "denyoom"], 1, 2, 1, k::copy),
    spec!("move", 3, ["write", "fast"], 1, 1, 1, k::move_),
    spec!("object", -2, ["readonly"], 2, 2, 1, k::object),
    spec!("dump", 2, ["readonly"], 1, 1, 1, k::dump),
    spec!("restore", -4, ["write", "denyoom"], 1, 1, 1, k::restore),
    spec!("migrate", -6, ["write", "movablekeys"], 3, 3, 1, k::migrate),
    spec!("cluster", -2, [], 0, 0, 0, k::cluster),
    spec!("readonly", 1, ["loading", "stale", "fast"], 0, 0, 0, k::cluster),
    spec!("readwrite", 1, ["loading", "stale", "fast"], 0, 0, 0, k::cluster),
    spec!("asking", 1, ["fast"], 0, 0, 0, k::cluster),
    spec!("dbsize", 1, ["readonly", "fast"], 0, 0, 0, k::dbsize),
    spec!("randomkey", 1, ["readonly"], 0, 0, 0, k::randomkey),
    spec!("select", 2, ["loading", "stale", "fast"], 0, 0, 0, k::select),
    spec!("swapdb", 3, ["write", "fast"], 0, 0, 0, k::swapdb),
    spec!("flushdb", -1, ["write"], 0, 0, 0, k::flushdb),
    spec!("flushall", -1, ["write"], 0, 0, 0, k::flushall),
    spec!("expire", -3, ["write", "fast"], 1, 1, 1, k::expire),
    spec!("pexpire", -3, ["write", "fast"], 1, 1, 1, k::pexpire),
    spec!("expireat", -3, ["write", "fast"], 1, 1, 1, k::expireat),
    spec!("pexpireat", -3, ["write", "fast"], 1, 1, 1, k::pexpireat),
    spec!("ttl", 2, ["readonly", "fast"], 1, 1, 1, k::ttl),
    spec!("pttl", 2, ["readonly", "fast"], 1, 1, 1, k::pttl),
    spec!("expiretime", 2, ["readonly", "fast"], 1, 1, 1, k::expiretime),
    spec!("pexpiretime", 2, ["readonly", "fast"], 1, 1, 1, k::pexpiretime),
    spec!("persist", 2, ["write", "fast"], 1, 1, 1, k::persist),
    // transactions (multi)
    spec!("multi", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, m::multi),
    spec!("exec", 1, ["noscript", "loading", "stale", "skip_slowlog"], 0, 0, 0, m::exec),
    spec!("discard", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, m::discard),
    spec!("watch", -2, ["noscript", "loading", "stale", "fast", "allow_busy"], 1, -1, 1, m::watch),
    spec!("unwatch", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, m::unwatch),
    // scripting (scripting)
    spec!("eval", -3, ["noscript", "skip_monitor", "may_replicate", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::eval),
    spec!("evalsha", -3, ["noscript", "skip_monitor", "may_replicate", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::evalsha),
    spec!("eval_ro", -3, ["readonly", "noscript", "skip_monitor", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::eval_ro),
    spec!("evalsha_ro", -3, ["readonly", "noscript", "skip_monitor", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::evalsha_ro),
    spec!("script", -2, ["noscript"], 0, 0, 0, sc::script),
    spec!("fcall", -3, ["noscript", "skip_monitor", "may_replicate", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::fcall),
    spec!("fcall_ro", -3, ["readonly", "noscript", "skip_monitor", "no_mandatory_keys", "stale", "movablekeys"], 0, 0, 0, sc::fcall_ro),
    spec!("function", -2, ["noscript"], 0, 0, 0, sc::function),
    // connection and server (admin)
    spec!("ping", -1, ["fast", "stale"], 0, 0, 0, a::ping),
    spec!("echo", 2, ["fast"], 0, 0, 0, a::echo),
    spec!("auth", -2, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, a::auth),
    spec!("hello", -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, a::hello),
    spec!("quit", -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, a::quit),
    spec!("reset", 1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, a::reset),
    spec!("client", -2, ["admin", "noscript", "loading", "stale"], 0, 0, 0, a::client),
    spec!("command", -1, ["loading", "stale"], 0, 0, 0, a::command),
    spec!("config", -2, ["admin", "noscript", "loading", "stale"], 0, 0, 0, a::config),
    spec!("info", -1, ["loading", "stale"], 0, 0, 0, a::info),
    spec!("time", 1, ["loading", "stale", "fast"], 0, 0, 0, a::time),
    spec!("lastsave", 1, ["loading", "stale", "fast"], 0, 0, 0, crate::backup::lastsave),
    spec!("save", 1, ["admin", "noscript", "no_async_loading", "no_multi"], 0, 0, 0, crate::backup::save),
    spec!("bgsave", -1, ["admin", "noscript", "no_async_loading"], 0, 0, 0, crate::backup::bgsave),
    spec!("shutdown", -1, ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], 0, 0, 0, a::shutdown),
    spec!("memory", -2, ["readonly"], 0, 0, 0, a::memory),
    // pub/sub (pubsub)
    spec!("subscribe", -2, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, ps::subscribe),
    spec!("unsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, ps::unsubscribe),
    spec!("psubscribe", -2, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, ps::psubscribe),
    spec!("punsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, ps::punsubscribe),
    spec!("ssubscribe", -2, ["pubsub", "noscript", "loading", "stale"], 1, -1, 1, ps::ssubscribe),
    spec!("sunsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 1, -1, 1, ps::sunsubscribe),
    spec!("publish", 3, ["pubsub", "loading", "stale", "fast", "may_replicate"], 0, 0, 0, ps::publish),
    spec!("spublish", 3, ["pubsub", "loading", "stale", "fast", "may_replicate"], 1, 1, 1, ps::spublish),
    spec!("pubsub", -2, ["pubsub", "loading", "stale"], 0, 0, 0, ps::pubsub),
    spec!("acl", -2, ["noscript", "loading", "stale"], 0, 0, 0, crate::acl::acl),
    spec!("monitor", 1, ["admin", "noscript", "loading", "stale"], 0, 0, 0, a::monitor),
    spec!("slowlog", -2, ["admin", "loading", "stale"], 0, 0, 0, a::slowlog),
    spec!("latency", -2, ["admin", "noscript", "loading", "stale"], 0, 0, 0, a::latency),
];

/// Name (lowercase) to table index. Command names are few and short and not secret, so a
/// cheap hash serves (SipHash showed in profiles of pipelined rounds).
pub struct Table {
    by_name: HashMap<Vec<u8>, usize, std::hash::BuildHasherDefault<NameHasher>>,
    /// Names recently looked up, exactly as sent (zero-padded, with their length), and their
    /// commands, direct-mapped by length and first letter: a pipeline repeats a few commands
    /// (MULTI, the queued ones, EXEC), and a round looks each one up more than once.
    recent: [std::cell::Cell<CachedName>; 8],
}

/// Longer than any command name (the longest, `georadiusbymember_ro`, has 20 bytes).
const NAME_MAX: usize = 24;

/// A name as sent (zero-padded), its length (`usize::MAX`: empty slot) and its command.
type CachedName = ([u8; NAME_MAX], usize, Option<&'static Spec>);

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
        assert!(
            COMMANDS.iter().all(|s| s.name.len() <= NAME_MAX),
            "a command name exceeds NAME_MAX"
        );
        Table {
            by_name: COMMANDS
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_bytes().to_vec(), i))
                .collect(),
            recent: Default::default(),
        }
    }

    /// The command named by `name` (any case).
    pub fn find(&self, name: &[u8]) -> Option<&'static Spec> {
        let mut buf = [0u8; NAME_MAX];
        if name.len() > buf.len() {
            return None;
        }
        buf[..name.len()].copy_from_slice(name);
        let slot =
            &self.recent[(name.len() + (name.first().map_or(0, |&c| c | 0x20) as usize)) & 7];
        let (cached, cached_len, cached_spec) = slot.get();
        if cached_len == name.len() && cached == buf {
            return cached_spec;
        }
        let key = buf;
        let lower = &mut buf[..name.len()];
        lower.make_ascii_lowercase();
        let spec = self.by_name.get(&lower[..]).map(|&i| &COMMANDS[i]);
        slot.set((key, name.len(), spec));
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
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    cl: &Client,
    sv: &ServerState,
) -> Option<String> {
    let Some(spec) = spec else {
        return Some(unknown_command_error(args));
    };
    // Redis 7 checks the argument count before authentication; a container's subcommand
    // is a command of its own (unknown, or its own arity), inside MULTI too.
    if let Some(e) = crate::admin::arity_error(spec, args) {
        return Some(e);
    }
    if sv.acl.auth_required() && !cl.authed && !spec.has("no_auth") {
        return Some(E_NOAUTH.into());
    }
    if cl.pubsub.active() && !cl.resp3 {
        if let Some(e) = crate::pubsub::subscriber_mode_error(spec, args) {
            return Some(e);
        }
    }
    if cl.multi.is_some() && spec.has("no_multi") {
        return Some("ERR Command not allowed inside a transaction".into());
    }
    None
}

/// Writes the server's state refuses (Redis's `processCommand`, after the ACL check): `-OOM`
/// for a command flagged `denyoom` (or any command queued in MULTI) while the used bytes are
/// past maxmemory after eviction (`over`, from `evict::perform`), `-NOREPLICAS` for a write while
/// `min-replicas-to-write` asks for replicas (this server has none). A script command counts
/// with the flags its script declares (a shebang's, a function's), EXEC with those of its
/// queue. None: go ahead (what is checked costs nothing while neither setting is in force).
pub fn state_refusal(
    spec: &Spec,
    args: &[&[u8]],
    cl: &Client,
    sv: &ServerState,
    over: bool,
) -> Option<&'static str> {
    let no_replicas = sv.config.no_good_replicas;
    if !no_replicas && !over {
        return None;
    }
    // (write, denyoom) of one command line.
    let flags = |a: &[&[u8]]| match crate::scripting::declared_flags(&sv.scripting, a) {
        Some(f) => (!f.no_writes, !f.no_writes && !f.allow_oom),
        None => crate::admin::meta::lookup_argv(a)
            .map_or((false, false), |m| (m.has("write"), m.has("denyoom"))),
    };
    let (write, denyoom) = match (&cl.multi, spec.name) {
        (Some(m), "exec") => {
            let argv = m.argv();
            m.commands().fold((false, false), |(w, d), (_, r)| {
                let (qw, qd) = flags(&argv[r]);
                (w || qw, d || qd)
            })
        }
        _ => flags(args),
    };
    // Queuing in MULTI takes memory too: only EXEC (when nothing queued is denyoom), DISCARD,
    // QUIT and RESET go ahead.
    let queues = cl.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
    if over && (denyoom || queues) {
        return Some(E_OOM);
    }
    if no_replicas && write {
        return Some(E_NOREPLICAS);
    }
    None
}

/// The reply to a command the table does not have: Redis 7's text, the name, then up to the
/// first arguments, each quoted.
pub fn unknown_command_error(args: &[&[u8]]) -> String {
    let mut m = format!(
        "ERR unknown command '{}', with args beginning with: ",
        lossy(args[0])
    );
    for a in args[1..].iter().take(8) {
        m.push_str(&format!("'{}' ", lossy(a)));
    }
    m
}

/// The command named `name` (any case), without a [`Table`]: a scan of [`COMMANDS`], for
/// the rare callers that hold no table (a busy script answering the other clients).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether a command runs at once inside MULTI instead of being queued.
pub fn runs_inside_multi(spec: &Spec) -> bool {
    matches!(
        spec.name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// Run one request inside `tx`: the checks (unknown, arity, authentication), MULTI's
/// queueing, then its handler; the reply is appended to `out`. What the event loop (and the
/// power-failure workload) calls for every command.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    table: &Table,
    ks: &mut Keyspace,
    tx: &mut Tx,
    cl: &mut Client,
    sv: &mut ServerState,
    args: &[&[u8]],
    now_ms: i64,
    out: &mut Vec<u8>,
) -> daisy::Result<Action> {
    let spec = table.find(args[0]);
    execute_found(table, spec, ks, tx, cl, sv, args, now_ms, out)
}

/// [`execute`] of a request whose command was already looked up (`spec` is
/// `table.find(args[0])`): the event loop finds each request's command once, for its
/// prefetch hints and its run.
#[allow(clippy::too_many_arguments)]
pub fn execute_found(
    table: &Table,
    spec: Option<&'static Spec>,
    ks: &mut Keyspace,
    tx: &mut Tx,
    cl: &mut Client,
    sv: &mut ServerState,
    args: &[&[u8]],
    now_ms: i64,
    out: &mut Vec<u8>,
) -> daisy::Result<Action> {
    sv.tracking.current = cl.id;
    let r = execute_checked(table, spec, ks, tx, cl, sv, args, now_ms, out);
    // CLIENT CACHING covers the next command, or the next MULTI ... EXEC, and any CLIENT
    // command between (networking.c's `resetClient`).
    if cl.tracking.caching && cl.multi.is_none() && !args[0].eq_ignore_ascii_case(b"client") {
        cl.tracking.caching = false;
    }
    r
}

#[allow(clippy::too_many_arguments)]
fn execute_checked(
    table: &Table,
    spec: Option<&'static Spec>,
    ks: &mut Keyspace,
    tx: &mut Tx,
    cl: &mut Client,
    sv: &mut ServerState,
    args: &[&[u8]],
    now_ms: i64,
    out: &mut Vec<u8>,
) -> daisy::Result<Action> {
    let mut refused = precheck(spec, args, cl, sv);
    if let (None, Some(s)) = (&refused, spec) {
        refused = crate::acl::check(s, args, cl, sv, now_ms);
    }
    if let (None, Some(s)) = (&refused, spec) {
        // Past maxmemory: keys go by the policy first (Redis's `performEvictions`, before
        // every command); `-OOM` only if that cannot bring memory under the limit.
        let over = sv.memory_limit().is_some() && !crate::evict::perform(ks, tx, sv)?;
        refused = state_refusal(s, args, cl, sv, over).map(String::from);
    }
    if let Some(mut e) = refused {
        if let Some(m) = cl.multi.as_mut() {
            m.error = true;
        }
        // A refused EXEC discards the transaction, MULTI or not (Redis's `execCommandAbort`).
        if spec.is_some_and(|s| s.name == "exec") {
            cl.multi = None;
            ks.watches.unwatch_all(cl.id);
            let why = e.strip_prefix("ERR ").unwrap_or(&e);
            e = format!("EXECABORT Transaction discarded because of: {why}");
        }
        sv.counters.rejected_calls += 1;
        if let Some(s) = spec {
            sv.cmdstat(s, args).rejected += 1;
        }
        sv.count_error(&e);
        resp::error(out, &e);
        return Ok(Action::Continue);
    }
    let spec = spec.expect("precheck passed");
    cl.last_cmd = crate::admin::full_name(spec, args);
    if let Some(m) = cl.multi.as_mut() {
        if !runs_inside_multi(spec) {
            m.push(spec, args);
            resp::simple(out, "QUEUED");
            return Ok(Action::Continue);
        }
    }
    call(table, spec, ks, tx, cl, sv, args, now_ms, out)
}

/// One call in this many of each command is timed for INFO commandstats.
const TIMING_SAMPLE: u64 = 8;

/// Run a command that passed the checks (Redis's `call`): its handler, and its counters.
#[allow(clippy::too_many_arguments)]
pub fn call(
    table: &Table,
    spec: &'static Spec,
    ks: &mut Keyspace,
    tx: &mut Tx,
    cl: &mut Client,
    sv: &mut ServerState,
    args: &[&[u8]],
    now_ms: i64,
    out: &mut Vec<u8>,
) -> daisy::Result<Action> {
    // Time one call in TIMING_SAMPLE (two clock reads per command cost ~4% of a pipelined
    // round); INFO commandstats' usec scales the sampled time up.
    let every = sv.config.time_every_call;
    let timed = every || sv.cmdstat(spec, args).calls.is_multiple_of(TIMING_SAMPLE);
    let t0 = timed.then(std::time::Instant::now);
    let errors_before = out.len();
    ks.clock.now_s = (now_ms / 1000) as u32;
    let mut ctx = Ctx {
        table,
        ks,
        tx,
        cl,
        sv,
        out,
        now_ms,
        action: Action::Continue,
    };
    let r = (spec.handler)(&mut ctx, args);
    let action = ctx.action;
    // A command that only inspected keys (TYPE, TTL, EXISTS, OBJECT) set this.
    ks.clock.no_touch = false;
    r?;
    if !ks.events.is_empty() {
        crate::pubsub::flush_key_events(ks, sv);
    }
    // Client-side caching: the keys written are invalidated, then those a read-only
    // command read are remembered (in Redis's order: a key a read expired is invalidated
    // for the others, then remembered for this client).
    if !ks.touched.is_empty() {
        crate::tracking::keys_written(ks, sv, cl.id);
    }
    if cl.tracking.remembers() {
        crate::tracking::after_read(sv, cl, args);
    } else if sv.tracking.script.is_some() && cl.id == crate::scripting::SCRIPT_CLIENT_ID {
        crate::tracking::script_read(sv, spec);
    }
    // A blocked command run again to serve it was counted when it was called (Redis counts
    // a served client's command once, and its error if serving fails).
    let serving = cl.serving.is_some();
    sv.counters.total_commands += !serving as u64;
    let elapsed = t0.map(|t0| t0.elapsed());
    let st = sv.cmdstat(spec, args);
    st.calls += !serving as u64;
    if let Some(d) = elapsed {
        let weight = if every { 1 } else { TIMING_SAMPLE };
        st.usec += d.as_micros() as u64 * weight;
    }
    // A reply that starts with an error (not EXEC's array of them) failed the call.
    if out.get(errors_before) == Some(&b'-') {
        st.failed += 1;
        sv.counters.failed_calls += 1;
    }
    if !serving {
        crate::admin::after_call(sv, cl, spec, args, elapsed);
    } else if let Some(d) = elapsed {
        // Served after blocking: the slow log gets it now, as Redis's
        // `updateStatsOnUnblock` (its MONITOR line went out when it was called).
        crate::admin::slowlog::record(sv, cl, spec, args, d.as_micros() as u64);
    }
    Ok(action)
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
        for (i, s) in COMMANDS.iter().enumerate() {
            assert!(s.arity != 0 && s.name.len() <= NAME_MAX, "{}", s.name);
            assert_eq!(s.index(), i);
        }
    }
}
