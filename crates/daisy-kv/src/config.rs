//! CONFIG GET / CONFIG SET: Redis's parameters, with their names, aliases, defaults and
//! validation (Redis's config.c is the specification). Values are kept as Redis prints them;
//! the ones the server reads on hot paths (the encoding thresholds) are also kept parsed.
//!
//! Parameters that describe the server itself (port, bind, maxclients, the pool) are set
//! from `daisy serve`'s command line and read-only here ("can't set immutable config", as
//! Redis answers for its immutable ones). Persistence parameters (save, appendonly, ...) are
//! accepted and reported, but Daisy has no snapshot or log to configure: every write is
//! durable before its reply.

use crate::glob;

/// How a parameter's value is checked.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// An integer in a range.
    Int(i64, i64),
    /// A byte size ("1mb", "512k", a plain number).
    Memory,
    Bool,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
}

/// A parameter.
pub struct Param {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub default: &'static str,
    pub kind: Kind,
    /// Settable with CONFIG SET.
    pub mutable: bool,
}

const fn p(name: &'static str, default: &'static str, kind: Kind) -> Param {
    Param {
        name,
        alias: None,
        default,
        kind,
        mutable: true,
    }
}

const fn alias(name: &'static str, alias: &'static str, default: &'static str, kind: Kind) -> Param {
    Param {
        name,
        alias: Some(alias),
        default,
        kind,
        mutable: true,
    }
}

const fn fixed(name: &'static str, default: &'static str, kind: Kind) -> Param {
    Param {
        name,
        alias: None,
        default,
        kind,
        mutable: false,
    }
}

const INT: Kind = Kind::Int(0, i64::MAX);
const YESNO: Kind = Kind::Bool;

/// Redis 7.0's parameters that this server knows (a superset grows with the server).
pub static PARAMS: &[Param] = &[
    // encodings (read by the type modules)
    alias("hash-max-listpack-entries", "hash-max-ziplist-entries", "128", INT),
    alias("hash-max-listpack-value", "hash-max-ziplist-value", "64", INT),
    p("set-max-intset-entries", "512", INT),
    p("set-max-listpack-entries", "128", INT),
    p("set-max-listpack-value", "64", INT),
    alias("zset-max-listpack-entries", "zset-max-ziplist-entries", "128", INT),
    alias("zset-max-listpack-value", "zset-max-ziplist-value", "64", INT),
    alias("list-max-listpack-size", "list-max-ziplist-size", "-2", Kind::Int(i64::MIN, i64::MAX)),
    p("list-compress-depth", "0", INT),
    p("stream-node-max-bytes", "4096", Kind::Memory),
    p("stream-node-max-entries", "100", INT),
    p("hll-sparse-max-bytes", "3000", Kind::Memory),
    // server (from the command line)
    fixed("bind", "127.0.0.1", Kind::Str),
    fixed("port", "6379", Kind::Int(0, 65535)),
    fixed("databases", "16", Kind::Int(1, i64::MAX)),
    fixed("maxclients", "10000", Kind::Int(1, i64::MAX)),
    fixed("dir", "", Kind::Str),
    fixed("io-threads", "1", INT),
    fixed("cluster-enabled", "no", YESNO),
    fixed("daemonize", "no", YESNO),
    fixed("supervised", "no", Kind::Enum(&["upstart", "systemd", "auto", "no"])),
    fixed("unixsocket", "", Kind::Str),
    fixed("logfile", "", Kind::Str),
    fixed("pidfile", "", Kind::Str),
    // memory: maxmemory is the pool's maximum size
    fixed("maxmemory", "0", Kind::Memory),
    p("maxmemory-policy", "noeviction", Kind::Enum(&["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"])),
    p("maxmemory-samples", "5", Kind::Int(1, 64)),
    p("maxmemory-eviction-tenacity", "10", Kind::Int(0, 100)),
    p("lazyfree-lazy-eviction", "no", YESNO),
    p("lazyfree-lazy-expire", "no", YESNO),
    p("lazyfree-lazy-server-del", "no", YESNO),
    p("lazyfree-lazy-user-del", "no", YESNO),
    p("lazyfree-lazy-user-flush", "no", YESNO),
    p("activedefrag", "no", YESNO),
    // limits
    p("proto-max-bulk-len", "536870912", Kind::Memory),
    p("client-query-buffer-limit", "1073741824", Kind::Memory),
    p("timeout", "0", INT),
    p("tcp-keepalive", "300", INT),
    p("hz", "10", Kind::Int(1, 500)),
    p("dynamic-hz", "yes", YESNO),
    p("active-expire-effort", "1", Kind::Int(1, 10)),
    p("lua-time-limit", "5000", INT),
    p("busy-reply-threshold", "5000", INT),
    p("slowlog-log-slower-than", "10000", Kind::Int(-1, i64::MAX)),
    p("slowlog-max-len", "128", INT),
    p("latency-monitor-threshold", "0", INT),
    p("latency-tracking", "yes", YESNO),
    p("notify-keyspace-events", "", Kind::Str),
    p("requirepass", "", Kind::Str),
    p("protected-mode", "no", YESNO),
    p("enable-debug-command", "no", Kind::Enum(&["yes", "no", "local"])),
    p("enable-protected-configs", "no", Kind::Enum(&["yes", "no", "local"])),
    p("enable-module-command", "no", Kind::Enum(&["yes", "no", "local"])),
    p("loglevel", "notice", Kind::Enum(&["debug", "verbose", "notice", "warning"])),
    // persistence: accepted and reported; every write is durable before its reply anyway
    p("save", "", Kind::Str),
    p("appendonly", "no", YESNO),
    p("appendfsync", "everysec", Kind::Enum(&["always", "everysec", "no"])),
    p("appendfilename", "appendonly.aof", Kind::Str),
    p("dbfilename", "dump.rdb", Kind::Str),
    p("rdbcompression", "yes", YESNO),
    p("rdbchecksum", "yes", YESNO),
    p("stop-writes-on-bgsave-error", "yes", YESNO),
    p("aof-use-rdb-preamble", "yes", YESNO),
    p("auto-aof-rewrite-percentage", "100", INT),
    p("auto-aof-rewrite-min-size", "67108864", Kind::Memory),
    p("no-appendfsync-on-rewrite", "no", YESNO),
    // replication and cluster (standalone server)
    p("replica-read-only", "yes", YESNO),
    p("replica-serve-stale-data", "yes", YESNO),
    p("repl-backlog-size", "1048576", Kind::Memory),
    p("min-replicas-to-write", "0", INT),
    p("min-replicas-max-lag", "10", INT),
    // clients
    p("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", Kind::Str),
    p("tracking-table-max-keys", "1000000", INT),
    p("acllog-max-len", "128", INT),
    p("lfu-log-factor", "10", INT),
    p("lfu-decay-time", "1", INT),
    p("close-on-replica-write", "yes", YESNO),
];

/// The server's configuration: every parameter's current value.
#[derive(Clone, Debug)]
pub struct Config {
    values: Vec<String>,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            values: PARAMS.iter().map(|p| p.default.to_string()).collect(),
            hash_max_listpack_entries: 0,
            hash_max_listpack_value: 0,
            set_max_intset_entries: 0,
            set_max_listpack_entries: 0,
            set_max_listpack_value: 0,
        };
        c.refresh();
        c
    }
}

/// Parse a Redis memory value ("1gb", "100mb", "10k", "42"): bytes.
pub fn parse_memory(s: &str) -> Option<i64> {
    let l = s.to_ascii_lowercase();
    let (num, mul) = [("gb", 1i64 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("g", 1_000_000_000), ("m", 1_000_000), ("k", 1000), ("b", 1)]
        .iter()
        .find_map(|(suf, m)| l.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .unwrap_or((l.clone(), 1));
    num.parse::<i64>().ok()?.checked_mul(mul)
}

impl Config {
    fn index(name: &str) -> Option<usize> {
        PARAMS
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name) || p.alias.is_some_and(|a| a.eq_ignore_ascii_case(name)))
    }

    fn num(&self, name: &str) -> usize {
        let i = Self::index(name).expect("known parameter");
        self.values[i].parse::<i64>().unwrap_or(0).max(0) as usize
    }

    fn refresh(&mut self) {
        self.hash_max_listpack_entries = self.num("hash-max-listpack-entries");
        self.hash_max_listpack_value = self.num("hash-max-listpack-value");
        self.set_max_intset_entries = self.num("set-max-intset-entries");
        self.set_max_listpack_entries = self.num("set-max-listpack-entries");
        self.set_max_listpack_value = self.num("set-max-listpack-value");
    }

    /// A parameter's value by name (or alias).
    pub fn get(&self, name: &str) -> Option<&str> {
        Self::index(name).map(|i| self.values[i].as_str())
    }

    /// Set a parameter from the server's own settings (command line), mutable or not.
    pub fn set_internal(&mut self, name: &str, value: &str) {
        if let Some(i) = Self::index(name) {
            self.values[i] = value.to_string();
            self.refresh();
        }
    }

    /// CONFIG GET: (name, value) of every parameter matching one of `patterns` (glob, any
    /// case), each once; an alias matches only when named exactly, as in Redis.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        for pat in patterns {
            let pat = pat.to_ascii_lowercase();
            let has_glob = pat.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
            for (i, p) in PARAMS.iter().enumerate() {
                let mut names = vec![p.name];
                if !has_glob {
                    names.extend(p.alias);
                }
                for n in names {
                    if glob::matches(&pat, n.as_bytes()) && !out.iter().any(|(o, _)| *o == n) {
                        out.push((n, self.values[i].clone()));
                    }
                }
            }
        }
        out
    }

    /// CONFIG SET of several parameters, all or none (as Redis 7): Ok, or Redis's error text.
    pub fn set_many(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut next = self.clone();
        let mut seen = Vec::new();
        for (name, value) in pairs {
            let n = String::from_utf8_lossy(name).to_ascii_lowercase();
            let v = String::from_utf8_lossy(value).into_owned();
            let Some(i) = Self::index(&n) else {
                return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{n}'"));
            };
            if seen.contains(&i) {
                return Err(format!("ERR Duplicate parameter - {n}"));
            }
            seen.push(i);
            let p = &PARAMS[i];
            if !p.mutable {
                return Err(format!("ERR CONFIG SET failed (possibly related to argument '{n}') - can't set immutable config"));
            }
            let bad = |why: &str| format!("ERR CONFIG SET failed (possibly related to argument '{n}') - {why}");
            let canon = match p.kind {
                Kind::Int(lo, hi) => match v.parse::<i64>() {
                    Ok(x) if x >= lo && x <= hi => x.to_string(),
                    Ok(_) => return Err(bad(&format!("argument must be between {lo} and {hi} inclusive"))),
                    Err(_) => return Err(bad("argument couldn't be parsed into an integer")),
                },
                Kind::Memory => match parse_memory(&v) {
                    Some(x) if x >= 0 => x.to_string(),
                    _ => return Err(bad("argument must be a memory value")),
                },
                Kind::Bool => match v.to_ascii_lowercase().as_str() {
                    "yes" | "no" => v.to_ascii_lowercase(),
                    _ => return Err(bad("argument must be 'yes' or 'no'")),
                },
                Kind::Enum(words) => {
                    let lv = v.to_ascii_lowercase();
                    if !words.contains(&lv.as_str()) {
                        return Err(bad(&format!(
                            "argument(s) must be one of the following: {}",
                            words.join(", ")
                        )));
                    }
                    lv
                }
                Kind::Str => v,
            };
            next.values[i] = canon;
        }
        next.refresh();
        *self = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_defaults_and_validation() {
        let mut c = Config::default();
        assert_eq!(c.hash_max_listpack_entries, 128);
        assert_eq!(c.get("hash-max-ziplist-value"), Some("64"));
        c.set_many(&[(b"hash-max-ziplist-entries", b"5")]).unwrap();
        assert_eq!(c.hash_max_listpack_entries, 5);
        assert!(c.set_many(&[(b"set-max-intset-entries", b"x")]).is_err());
        assert!(c.set_many(&[(b"port", b"1")]).unwrap_err().contains("immutable"));
        // All or nothing.
        assert!(c.set_many(&[(b"set-max-intset-entries", b"7"), (b"nope", b"1")]).is_err());
        assert_eq!(c.set_max_intset_entries, 512);
        let m = c.matching(&[b"hash-max-*"]);
        assert_eq!(m.len(), 2, "{m:?}");
        let m = c.matching(&[b"hash-max-ziplist-entries"]);
        assert_eq!(m, vec![("hash-max-ziplist-entries", "5".to_string())]);
        assert_eq!(parse_memory("1mb"), Some(1 << 20));
        assert_eq!(parse_memory("5"), Some(5));
    }
}
