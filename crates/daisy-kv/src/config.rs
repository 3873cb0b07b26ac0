//! CONFIG GET / CONFIG SET: every parameter Redis 7.0 has (config.c's table; the TLS ones too, which change nothing: there is no TLS here),
//! with its name, alias, default, type, limits, and Redis's error texts for bad values; the
//! values are kept as CONFIG GET prints them, and the ones the server reads on hot paths
//! (the encoding thresholds) also parsed.
//!
//! What a parameter changes here: the encoding thresholds (the type modules read them),
//! `requirepass`, `maxclients`, `port` and `bind` (the server listens anew), `timeout`,
//! `tcp-keepalive`, `proto-max-bulk-len`, `client-query-buffer-limit` (the event loop), and
//! what INFO and CLIENT report. The rest (snapshots and the append-only file, replication,
//! cluster, scripting, eviction) are accepted, checked and reported as Redis does, and change
//! nothing: every write is durable before its reply, and there is nothing else to configure.
//! Parameters `daisy serve` sets from its command line (port, bind, databases, maxclients,
//! dir, ...) start from there.

use crate::glob;

/// Parameter flags (config.c's `*_CONFIG`).
pub const IMMUTABLE: u8 = 1;
/// Only named exactly, never matched by a pattern.
pub const HIDDEN: u8 = 2;
/// Settable only with `enable-protected-configs` (which is `no` here, and immutable).
pub const PROTECTED: u8 = 4;
pub const SENSITIVE: u8 = 8;
pub const DENY_LOADING: u8 = 16;
/// The value is a space-separated list.
pub const MULTI_ARG: u8 = 32;

/// Number formats (config.c's `MEMORY_CONFIG`, `PERCENT_CONFIG`, `OCTAL_CONFIG`).
pub const MEMORY: u8 = 1;
pub const PERCENT: u8 = 2;
pub const OCTAL: u8 = 4;

const I32_MAX: i128 = i32::MAX as i128;
const I32_MIN: i128 = i32::MIN as i128;
const U32_MAX: i128 = u32::MAX as i128;
const I64_MAX: i128 = i64::MAX as i128;
const U64_MAX: i128 = u64::MAX as i128;

/// How a parameter's value is read and printed.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// yes / no.
    Bool,
    /// Any string (some checked by name, as Redis's `is_valid_fn`).
    Str,
    /// One of these names (names sharing a value are aliases: GET prints the first).
    Enum(&'static [(&'static str, u32)]),
    /// Several of these names, their values or-ed (a `MULTI_ARG` enum).
    Flags(&'static [(&'static str, u32)]),
    /// An integer in [min, max]; `unsigned`: Redis's unsigned types (their range error
    /// prints as unsigned); `fmt`: MEMORY, PERCENT, OCTAL.
    Num {
        min: i128,
        max: i128,
        unsigned: bool,
        fmt: u8,
    },
    /// A format of its own (save, bind, client-output-buffer-limit, ...), by name.
    Special,
}

/// A parameter.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub flags: u8,
    /// As CONFIG GET prints it.
    pub default: &'static str,
    pub kind: Kind,
}

use Kind::*;
use Param as P;

const E_SUPERVISED_MODE: &[(&str, u32)] = &[("upstart", 1), ("systemd", 2), ("auto", 3), ("no", 0)];
const E_SYSLOG_FACILITY: &[(&str, u32)] = &[
    ("user", 8),
    ("local0", 128),
    ("local1", 136),
    ("local2", 144),
    ("local3", 152),
    ("local4", 160),
    ("local5", 168),
    ("local6", 176),
    ("local7", 184),
];
const E_REPL_DISKLESS_LOAD: &[(&str, u32)] = &[("disabled", 0), ("on-empty-db", 1), ("swapdb", 2)];
const E_LOGLEVEL: &[(&str, u32)] = &[("debug", 0), ("verbose", 1), ("notice", 2), ("warning", 3)];
const E_MAXMEMORY_POLICY: &[(&str, u32)] = &[
    ("volatile-lru", 1),
    ("volatile-lfu", 2),
    ("volatile-random", 3),
    ("volatile-ttl", 4),
    ("allkeys-lru", 5),
    ("allkeys-lfu", 6),
    ("allkeys-random", 7),
    ("noeviction", 8),
];
const E_AOF_FSYNC: &[(&str, u32)] = &[("everysec", 2), ("always", 1), ("no", 0)];
const E_OOM_SCORE_ADJ: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("relative", 1), ("absolute", 2)];
const E_ACL_PUBSUB_DEFAULT: &[(&str, u32)] = &[("allchannels", 1), ("resetchannels", 0)];
const E_SANITIZE_DUMP_PAYLOAD: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("clients", 2)];
const E_PROTECTED_ACTION: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("local", 2)];
const E_CLUSTER_PREFERRED_ENDPOINT_TYPE: &[(&str, u32)] =
    &[("ip", 0), ("hostname", 1), ("unknown-endpoint", 2)];
const E_PROPAGATION_ERROR_BEHAVIOR: &[(&str, u32)] =
    &[("ignore", 0), ("panic", 1), ("panic-on-replicas", 2)];
const E_TLS_AUTH_CLIENTS: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("optional", 2)];
const SHUTDOWN_SAVE: u32 = 1;
const SHUTDOWN_NOSAVE: u32 = 2;
const E_SHUTDOWN_ON_SIG: &[(&str, u32)] = &[
    ("default", 0),
    ("save", SHUTDOWN_SAVE),
    ("nosave", SHUTDOWN_NOSAVE),
    ("now", 4),
    ("force", 8),
];

/// Redis 7.0's parameters, in config.c's order (and Daisy's two set-max-listpack ones).
#[rustfmt::skip]
pub static PARAMS: &[Param] = &[
    P { name: "rdbchecksum", alias: None, flags: IMMUTABLE, default: "yes", kind: Bool },
    P { name: "daemonize", alias: None, flags: IMMUTABLE, default: "no", kind: Bool },
    P { name: "io-threads-do-reads", alias: None, flags: IMMUTABLE, default: "no", kind: Bool },
    P { name: "always-show-logo", alias: None, flags: IMMUTABLE, default: "no", kind: Bool },
    P { name: "protected-mode", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "rdbcompression", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "rdb-del-sync-files", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "activerehashing", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "stop-writes-on-bgsave-error", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "set-proc-title", alias: None, flags: IMMUTABLE, default: "yes", kind: Bool },
    P { name: "dynamic-hz", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "lazyfree-lazy-eviction", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "lazyfree-lazy-expire", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "lazyfree-lazy-server-del", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "lazyfree-lazy-user-del", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "lazyfree-lazy-user-flush", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "repl-disable-tcp-nodelay", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "repl-diskless-sync", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "aof-rewrite-incremental-fsync", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "no-appendfsync-on-rewrite", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "cluster-require-full-coverage", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "rdb-save-incremental-fsync", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "aof-load-truncated", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "aof-use-rdb-preamble", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "aof-timestamp-enabled", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "cluster-replica-no-failover", alias: Some("cluster-slave-no-failover"), flags: 0, default: "no", kind: Bool },
    P { name: "replica-lazy-flush", alias: Some("slave-lazy-flush"), flags: 0, default: "no", kind: Bool },
    P { name: "replica-serve-stale-data", alias: Some("slave-serve-stale-data"), flags: 0, default: "yes", kind: Bool },
    P { name: "replica-read-only", alias: Some("slave-read-only"), flags: 0, default: "yes", kind: Bool },
    P { name: "replica-ignore-maxmemory", alias: Some("slave-ignore-maxmemory"), flags: 0, default: "yes", kind: Bool },
    P { name: "jemalloc-bg-thread", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "activedefrag", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "syslog-enabled", alias: None, flags: IMMUTABLE, default: "no", kind: Bool },
    P { name: "cluster-enabled", alias: None, flags: IMMUTABLE, default: "no", kind: Bool },
    P { name: "appendonly", alias: None, flags: DENY_LOADING, default: "no", kind: Bool },
    P { name: "cluster-allow-reads-when-down", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "cluster-allow-pubsubshard-when-down", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "crash-log-enabled", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "crash-memcheck-enabled", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "use-exit-on-panic", alias: None, flags: HIDDEN, default: "no", kind: Bool },
    P { name: "disable-thp", alias: None, flags: IMMUTABLE, default: "yes", kind: Bool },
    P { name: "cluster-allow-replica-migration", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "replica-announced", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "latency-tracking", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "aof-disable-auto-gc", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "replica-ignore-disk-write-errors", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "aclfile", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "unixsocket", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "pidfile", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "replica-announce-ip", alias: Some("slave-announce-ip"), flags: 0, default: "", kind: Str },
    P { name: "masteruser", alias: None, flags: SENSITIVE, default: "", kind: Str },
    P { name: "cluster-announce-ip", alias: None, flags: 0, default: "", kind: Str },
    P { name: "cluster-config-file", alias: None, flags: IMMUTABLE, default: "nodes.conf", kind: Str },
    P { name: "cluster-announce-hostname", alias: None, flags: 0, default: "", kind: Str },
    P { name: "syslog-ident", alias: None, flags: IMMUTABLE, default: "redis", kind: Str },
    P { name: "dbfilename", alias: None, flags: PROTECTED, default: "dump.rdb", kind: Str },
    P { name: "appendfilename", alias: None, flags: IMMUTABLE, default: "appendonly.aof", kind: Str },
    P { name: "appenddirname", alias: None, flags: IMMUTABLE, default: "appendonlydir", kind: Str },
    P { name: "server_cpulist", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "bio_cpulist", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "aof_rewrite_cpulist", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "bgsave_cpulist", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "ignore-warnings", alias: None, flags: 0, default: "", kind: Str },
    P { name: "proc-title-template", alias: None, flags: 0, default: "{title} {listen-addr} {server-mode}", kind: Str },
    P { name: "bind-source-addr", alias: None, flags: 0, default: "", kind: Str },
    P { name: "logfile", alias: None, flags: IMMUTABLE, default: "", kind: Str },
    P { name: "masterauth", alias: None, flags: SENSITIVE, default: "", kind: Str },
    P { name: "requirepass", alias: None, flags: SENSITIVE, default: "", kind: Str },
    P { name: "supervised", alias: None, flags: IMMUTABLE, default: "no", kind: Enum(E_SUPERVISED_MODE) },
    P { name: "syslog-facility", alias: None, flags: IMMUTABLE, default: "local0", kind: Enum(E_SYSLOG_FACILITY) },
    P { name: "repl-diskless-load", alias: None, flags: DENY_LOADING, default: "disabled", kind: Enum(E_REPL_DISKLESS_LOAD) },
    P { name: "loglevel", alias: None, flags: 0, default: "notice", kind: Enum(E_LOGLEVEL) },
    P { name: "maxmemory-policy", alias: None, flags: 0, default: "noeviction", kind: Enum(E_MAXMEMORY_POLICY) },
    P { name: "appendfsync", alias: None, flags: 0, default: "everysec", kind: Enum(E_AOF_FSYNC) },
    P { name: "oom-score-adj", alias: None, flags: 0, default: "no", kind: Enum(E_OOM_SCORE_ADJ) },
    P { name: "acl-pubsub-default", alias: None, flags: 0, default: "resetchannels", kind: Enum(E_ACL_PUBSUB_DEFAULT) },
    P { name: "sanitize-dump-payload", alias: None, flags: 0, default: "no", kind: Enum(E_SANITIZE_DUMP_PAYLOAD) },
    P { name: "enable-protected-configs", alias: None, flags: IMMUTABLE, default: "no", kind: Enum(E_PROTECTED_ACTION) },
    P { name: "enable-debug-command", alias: None, flags: IMMUTABLE, default: "no", kind: Enum(E_PROTECTED_ACTION) },
    P { name: "enable-module-command", alias: None, flags: IMMUTABLE, default: "no", kind: Enum(E_PROTECTED_ACTION) },
    P { name: "cluster-preferred-endpoint-type", alias: None, flags: 0, default: "ip", kind: Enum(E_CLUSTER_PREFERRED_ENDPOINT_TYPE) },
    P { name: "propagation-error-behavior", alias: None, flags: 0, default: "ignore", kind: Enum(E_PROPAGATION_ERROR_BEHAVIOR) },
    P { name: "shutdown-on-sigint", alias: None, flags: MULTI_ARG, default: "default", kind: Flags(E_SHUTDOWN_ON_SIG) },
    P { name: "shutdown-on-sigterm", alias: None, flags: MULTI_ARG, default: "default", kind: Flags(E_SHUTDOWN_ON_SIG) },
    P { name: "databases", alias: None, flags: IMMUTABLE, default: "16", kind: Num { min: 1, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "port", alias: None, flags: 0, default: "6379", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "io-threads", alias: None, flags: IMMUTABLE, default: "1", kind: Num { min: 1, max: 128, unsigned: false, fmt: 0 } },
    P { name: "auto-aof-rewrite-percentage", alias: None, flags: 0, default: "100", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "cluster-replica-validity-factor", alias: Some("cluster-slave-validity-factor"), flags: 0, default: "10", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "list-max-listpack-size", alias: Some("list-max-ziplist-size"), flags: 0, default: "-2", kind: Num { min: I32_MIN, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "tcp-keepalive", alias: None, flags: 0, default: "300", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "cluster-migration-barrier", alias: None, flags: 0, default: "1", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "active-defrag-cycle-min", alias: None, flags: 0, default: "1", kind: Num { min: 1, max: 99, unsigned: false, fmt: 0 } },
    P { name: "active-defrag-cycle-max", alias: None, flags: 0, default: "25", kind: Num { min: 1, max: 99, unsigned: false, fmt: 0 } },
    P { name: "active-defrag-threshold-lower", alias: None, flags: 0, default: "10", kind: Num { min: 0, max: 1000, unsigned: false, fmt: 0 } },
    P { name: "active-defrag-threshold-upper", alias: None, flags: 0, default: "100", kind: Num { min: 0, max: 1000, unsigned: false, fmt: 0 } },
    P { name: "lfu-log-factor", alias: None, flags: 0, default: "10", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "lfu-decay-time", alias: None, flags: 0, default: "1", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "replica-priority", alias: Some("slave-priority"), flags: 0, default: "100", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "repl-diskless-sync-delay", alias: None, flags: 0, default: "5", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "maxmemory-samples", alias: None, flags: 0, default: "5", kind: Num { min: 1, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "maxmemory-eviction-tenacity", alias: None, flags: 0, default: "10", kind: Num { min: 0, max: 100, unsigned: false, fmt: 0 } },
    P { name: "timeout", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "replica-announce-port", alias: Some("slave-announce-port"), flags: 0, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "tcp-backlog", alias: None, flags: IMMUTABLE, default: "511", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "cluster-port", alias: None, flags: IMMUTABLE, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "cluster-announce-bus-port", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "cluster-announce-port", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "cluster-announce-tls-port", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "repl-timeout", alias: None, flags: 0, default: "60", kind: Num { min: 1, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "repl-ping-replica-period", alias: Some("repl-ping-slave-period"), flags: 0, default: "10", kind: Num { min: 1, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "list-compress-depth", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "rdb-key-save-delay", alias: None, flags: HIDDEN, default: "0", kind: Num { min: I32_MIN, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "key-load-delay", alias: None, flags: HIDDEN, default: "0", kind: Num { min: I32_MIN, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "active-expire-effort", alias: None, flags: 0, default: "1", kind: Num { min: 1, max: 10, unsigned: false, fmt: 0 } },
    P { name: "hz", alias: None, flags: 0, default: "10", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "min-replicas-to-write", alias: Some("min-slaves-to-write"), flags: 0, default: "0", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "min-replicas-max-lag", alias: Some("min-slaves-max-lag"), flags: 0, default: "10", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "watchdog-period", alias: None, flags: HIDDEN, default: "0", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "shutdown-timeout", alias: None, flags: 0, default: "10", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "repl-diskless-sync-max-replicas", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "maxclients", alias: None, flags: 0, default: "10000", kind: Num { min: 1, max: U32_MAX, unsigned: true, fmt: 0 } },
    P { name: "unixsocketperm", alias: None, flags: IMMUTABLE, default: "0", kind: Num { min: 0, max: 0o777, unsigned: true, fmt: OCTAL } },
    P { name: "socket-mark-id", alias: None, flags: IMMUTABLE, default: "0", kind: Num { min: 0, max: U32_MAX, unsigned: true, fmt: 0 } },
    P { name: "active-defrag-max-scan-fields", alias: None, flags: 0, default: "1000", kind: Num { min: 1, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "slowlog-max-len", alias: None, flags: 0, default: "128", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "acllog-max-len", alias: None, flags: 0, default: "128", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "busy-reply-threshold", alias: Some("lua-time-limit"), flags: 0, default: "5000", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "cluster-node-timeout", alias: None, flags: 0, default: "15000", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "slowlog-log-slower-than", alias: None, flags: 0, default: "10000", kind: Num { min: -1, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "latency-monitor-threshold", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "proto-max-bulk-len", alias: None, flags: 0, default: "536870912", kind: Num { min: 1 << 20, max: I64_MAX, unsigned: false, fmt: MEMORY } },
    P { name: "stream-node-max-entries", alias: None, flags: 0, default: "100", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "repl-backlog-size", alias: None, flags: 0, default: "1048576", kind: Num { min: 1, max: I64_MAX, unsigned: false, fmt: MEMORY } },
    P { name: "maxmemory", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: U64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "cluster-link-sendbuf-limit", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: U64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "hash-max-listpack-entries", alias: Some("hash-max-ziplist-entries"), flags: 0, default: "512", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "set-max-intset-entries", alias: None, flags: 0, default: "512", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    // Daisy's packed sets of strings (Redis 7.2's listpack sets, and its parameters).
    P { name: "set-max-listpack-entries", alias: None, flags: 0, default: "128", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "set-max-listpack-value", alias: None, flags: 0, default: "64", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "zset-max-listpack-entries", alias: Some("zset-max-ziplist-entries"), flags: 0, default: "128", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "active-defrag-ignore-bytes", alias: None, flags: 0, default: "104857600", kind: Num { min: 1, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "hash-max-listpack-value", alias: Some("hash-max-ziplist-value"), flags: 0, default: "64", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "stream-node-max-bytes", alias: None, flags: 0, default: "4096", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "zset-max-listpack-value", alias: Some("zset-max-ziplist-value"), flags: 0, default: "64", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "hll-sparse-max-bytes", alias: None, flags: 0, default: "3000", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "tracking-table-max-keys", alias: None, flags: 0, default: "1000000", kind: Num { min: 0, max: I64_MAX, unsigned: true, fmt: 0 } },
    P { name: "client-query-buffer-limit", alias: None, flags: 0, default: "1073741824", kind: Num { min: 1 << 20, max: I64_MAX, unsigned: true, fmt: MEMORY } },
    P { name: "maxmemory-clients", alias: None, flags: 0, default: "0", kind: Num { min: -100, max: I64_MAX, unsigned: false, fmt: MEMORY | PERCENT } },
    P { name: "repl-backlog-ttl", alias: None, flags: 0, default: "3600", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: 0 } },
    P { name: "auto-aof-rewrite-min-size", alias: None, flags: 0, default: "67108864", kind: Num { min: 0, max: I64_MAX, unsigned: false, fmt: MEMORY } },
    P { name: "loading-process-events-interval-bytes", alias: None, flags: HIDDEN, default: "2097152", kind: Num { min: 1024, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "dir", alias: None, flags: PROTECTED|DENY_LOADING, default: "", kind: Special },
    P { name: "save", alias: None, flags: MULTI_ARG, default: "3600 1 300 100 60 10000", kind: Special },
    P { name: "client-output-buffer-limit", alias: None, flags: MULTI_ARG, default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", kind: Special },
    P { name: "oom-score-adj-values", alias: None, flags: MULTI_ARG, default: "0 200 800", kind: Special },
    P { name: "notify-keyspace-events", alias: None, flags: 0, default: "", kind: Special },
    P { name: "bind", alias: None, flags: MULTI_ARG, default: "* -::*", kind: Special },
    P { name: "replicaof", alias: Some("slaveof"), flags: IMMUTABLE|MULTI_ARG, default: "", kind: Special },
    P { name: "latency-tracking-info-percentiles", alias: None, flags: MULTI_ARG, default: "50 99 99.9", kind: Special },
    // TLS (Redis built with it, as Debian's is): accepted and reported; there is no TLS here,
    // so they change nothing.


    P { name: "tls-port", alias: None, flags: 0, default: "0", kind: Num { min: 0, max: 65535, unsigned: false, fmt: 0 } },
    P { name: "tls-session-caching", alias: None, flags: 0, default: "yes", kind: Bool },
    P { name: "tls-session-cache-size", alias: None, flags: 0, default: "20480", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "tls-session-cache-timeout", alias: None, flags: 0, default: "300", kind: Num { min: 0, max: I32_MAX, unsigned: false, fmt: 0 } },
    P { name: "tls-cluster", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "tls-replication", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "tls-auth-clients", alias: None, flags: 0, default: "yes", kind: Enum(E_TLS_AUTH_CLIENTS) },
    P { name: "tls-prefer-server-ciphers", alias: None, flags: 0, default: "no", kind: Bool },
    P { name: "tls-cert-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-key-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-key-file-pass", alias: None, flags: SENSITIVE, default: "", kind: Str },
    P { name: "tls-client-cert-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-client-key-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-client-key-file-pass", alias: None, flags: SENSITIVE, default: "", kind: Str },
    P { name: "tls-dh-params-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-ca-cert-file", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-ca-cert-dir", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-protocols", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-ciphers", alias: None, flags: 0, default: "", kind: Str },
    P { name: "tls-ciphersuites", alias: None, flags: 0, default: "", kind: Str },
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
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// list-max-listpack-size: a packed list's limit (negative: -1..-5 = 4..64 KiB of items,
    /// positive: that many items).
    pub list_max_listpack_size: i64,
    /// stream-node-max-bytes and stream-node-max-entries: when a stream starts a new node
    /// (0: no limit).
    pub stream_node_max_bytes: usize,
    pub stream_node_max_entries: usize,
    /// latency-tracking: INFO latencystats is kept.
    pub latency_tracking: bool,
    /// notify-keyspace-events as `pubsub::N_*` flags (0: no notification is published).
    pub notify_flags: u32,
    /// slowlog-log-slower-than (µs; negative: off), slowlog-max-len,
    /// latency-monitor-threshold (ms; 0: off).
    pub slowlog_slower_than: i64,
    pub slowlog_max_len: usize,
    pub latency_threshold_ms: u64,
    /// Every command call is timed (slowlog-log-slower-than 0 logs every command; the
    /// latency monitor is on): otherwise one call in 8 of each command.
    pub time_every_call: bool,
    /// min-replicas-to-write (with a nonzero min-replicas-max-lag) asks for replicas this
    /// server never has: every write is refused `-NOREPLICAS`, as on a Redis master without
    /// enough good replicas (Redis's `checkGoodReplicasStatus`).
    pub no_good_replicas: bool,
    /// tracking-table-max-keys (0: no limit).
    pub tracking_table_max_keys: u64,
    /// A config file's `save` lines so far add to each other (the first replaces the default).
    file_saves: bool,
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
            zset_max_listpack_entries: 0,
            zset_max_listpack_value: 0,
            list_max_listpack_size: -2,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            latency_tracking: true,
            notify_flags: 0,
            slowlog_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_threshold_ms: 0,
            time_every_call: false,
            no_good_replicas: false,
            tracking_table_max_keys: 1_000_000,
            file_saves: false,
        };
        c.refresh();
        c
    }
}

/// Redis's `memtoull`: digits, then an optional unit (b, k, kb, m, mb, g, gb; any case).
pub fn parse_memory(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let mul: u64 = match s[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return None,
    };
    // strtoull: an empty number is 0; overflow saturates (and the product wraps, as in C).
    let n = if digits == 0 {
        0
    } else {
        s[..digits].parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(n.wrapping_mul(mul))
}

/// C's `strtoll(s, &end, 10)` that must consume all of `s`: leading blanks and a sign are
/// allowed; an empty string is 0.
fn strtoll_whole(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return (s.is_empty()).then_some(0);
    }
    let (neg, digits) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v = digits
        .parse::<i128>()
        .unwrap_or(i128::MAX)
        .min(i64::MAX as i128 + 1);
    let v = if neg { -v } else { v };
    Some(v.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

/// Redis's `string2ll` (no blanks, no '+', no leading zeros).
fn string2ll(s: &str) -> Option<i64> {
    crate::resp::parse_i64(s.as_bytes())
}

/// A MULTI_ARG value's words (Redis splits on single spaces; one empty value is no words).
fn words(v: &str) -> Vec<&str> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.split(' ').collect()
    }
}

/// A number as its format prints it (config.c's `numericConfigGet`).
fn print_num(v: i64, fmt: u8) -> String {
    if fmt & PERCENT != 0 && v < 0 {
        format!("{}%", -v)
    } else if fmt & MEMORY != 0 {
        (v as u64).to_string()
    } else if fmt & OCTAL != 0 {
        format!("{v:o}")
    } else {
        v.to_string()
    }
}

/// A number parameter's value (config.c's `numericParseString` and `numericBoundaryCheck`).
fn parse_num(v: &str, min: i128, max: i128, unsigned: bool, fmt: u8) -> Result<i64, String> {
    let mut parsed = None;
    if fmt & MEMORY != 0 && !v.starts_with('-') {
        parsed = parse_memory(v).map(|n| n as i64);
    }
    if parsed.is_none() && fmt & PERCENT != 0 && v.len() > 1 && v.ends_with('%') {
        parsed = string2ll(&v[..v.len() - 1]).filter(|&n| n >= 0).map(|n| -n);
    }
    if parsed.is_none() && fmt & OCTAL != 0 {
        parsed = i64::from_str_radix(v.trim_start(), 8).ok();
    }
    if parsed.is_none() && fmt == 0 {
        parsed = string2ll(v);
    }
    let Some(n) = parsed else {
        return Err(if fmt & MEMORY != 0 && fmt & PERCENT != 0 {
            "argument must be a memory or percent value"
        } else if fmt & MEMORY != 0 {
            "argument must be a memory value"
        } else if fmt & OCTAL != 0 {
            "argument couldn't be parsed as an octal number"
        } else {
            "argument couldn't be parsed into an integer"
        }
        .to_string());
    };
    if unsigned {
        let u = n as u64 as i128;
        if u > max || u < min {
            return Err(if fmt & OCTAL != 0 {
                format!("argument must be between {min:o} and {max:o} inclusive")
            } else {
                format!("argument must be between {min} and {max} inclusive")
            });
        }
    } else if fmt & PERCENT != 0 && n < 0 {
        if (n as i128) < min {
            return Err(format!(
                "percentage argument must be less or equal to {}",
                -min
            ));
        }
    } else if (n as i128) > max || (n as i128) < min {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// An enum's value for `ws` (or-ed for flags), as `configEnumGetValue`.
fn enum_value(names: &[(&str, u32)], ws: &[&str], flags: bool) -> Option<u32> {
    if ws.is_empty() || (!flags && ws.len() != 1) {
        return None;
    }
    let mut v = 0;
    for w in ws {
        v |= names.iter().find(|(n, _)| n.eq_ignore_ascii_case(w))?.1;
    }
    Some(v)
}

/// An enum's value as CONFIG GET prints it (`configEnumGetName`).
fn enum_name(names: &[(&str, u32)], v: u32, flags: bool) -> String {
    if let Some((n, _)) = names.iter().find(|(_, x)| *x == v) {
        return n.to_string();
    }
    let mut out: Vec<&str> = Vec::new();
    let mut left = v;
    if flags {
        for (n, x) in names {
            if *x != 0 && left & x == *x {
                out.push(n);
                left &= !x;
            }
        }
    }
    if out.is_empty() || left != 0 {
        "unknown".into()
    } else {
        out.join(" ")
    }
}

/// A proc-title template Redis accepts: `{title}`-style variables it knows, braces balanced
/// (`{{`, `}}` for braces themselves), and something left once expanded.
fn valid_title_template(t: &str) -> bool {
    const VARS: &[&str] = &[
        "title",
        "listen-addr",
        "server-mode",
        "config-file",
        "port",
        "tls-port",
        "unixsocket",
    ];
    let b = t.as_bytes();
    let (mut i, mut literal) = (0, String::new());
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => {
                literal.push('{');
                i += 2;
            }
            b'}' if b.get(i + 1) == Some(&b'}') => {
                literal.push('}');
                i += 2;
            }
            b'{' => {
                let Some(end) = t[i + 1..].find('}') else {
                    return false;
                };
                let var = &t[i + 1..i + 1 + end];
                if !VARS.contains(&var) {
                    return false;
                }
                // What the variables expand to when the template is checked (title ""):
                // only listen-addr, port and config-file are never empty.
                if matches!(var, "listen-addr" | "port" | "config-file" | "tls-port") {
                    literal.push('x');
                }
                i += end + 2;
            }
            b'}' => return false,
            c => {
                literal.push(c as char);
                i += 1;
            }
        }
    }
    !literal.trim_matches(' ').is_empty()
}

/// A special parameter's value in its canonical form (config.c's special set functions).
/// An OS error as C's `strerror` prints it ("No such file or directory"), without Rust's
/// " (os error 2)".
fn os_error_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.find(" (os error ") {
        Some(i) => t[..i].to_string(),
        None => t,
    }
}

fn parse_special(name: &str, v: &str) -> Result<String, String> {
    let ws = words(v);
    let bad = |e: &str| Err(e.to_string());
    match name {
        "save" => {
            if ws.len() % 2 == 1 {
                return bad("Invalid save parameters");
            }
            let mut out = Vec::new();
            for (j, w) in ws.iter().enumerate() {
                match strtoll_whole(w) {
                    Some(n) if (j % 2 == 0 && n >= 1) || (j % 2 == 1 && n >= 0) => {
                        out.push(if j % 2 == 1 {
                            (n as i32).to_string()
                        } else {
                            n.to_string()
                        })
                    }
                    _ => return bad("Invalid save parameters"),
                }
            }
            Ok(out.join(" "))
        }
        "client-output-buffer-limit" => {
            if !ws.len().is_multiple_of(4) {
                return bad("Wrong number of arguments in buffer limit configuration.");
            }
            let mut parsed = Vec::new();
            for g in ws.chunks(4) {
                let class = match g[0].to_ascii_lowercase().as_str() {
                    "normal" => 0,
                    "slave" | "replica" => 1,
                    "pubsub" => 2,
                    _ => {
                        return bad("Invalid client class specified in buffer limit configuration.")
                    }
                };
                match (parse_memory(g[1]), parse_memory(g[2]), strtoll_whole(g[3])) {
                    (Some(h), Some(s), Some(secs)) if secs >= 0 && !g[1].starts_with('-') && !g[2].starts_with('-') => {
                        parsed.push((class, h, s, secs))
                    }
                    _ => {
                        return bad(
                            "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
                        )
                    }
                }
            }
            Ok(parsed
                .iter()
                .map(|(c, h, s, secs)| format!("{c} {h} {s} {secs}"))
                .collect::<Vec<_>>()
                .join(" "))
        }
        "oom-score-adj-values" => {
            if ws.len() != 3 {
                return bad("wrong number of arguments");
            }
            let mut out = Vec::new();
            for w in ws {
                match strtoll_whole(w) {
                    Some(n) if (-2000..=2000).contains(&n) => out.push(n.to_string()),
                    _ => return bad(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
                    ),
                }
            }
            Ok(out.join(" "))
        }
        "notify-keyspace-events" => {
            const ALL: &str = "g$lshzxetd";
            let mut set = String::new();
            for ch in v.chars() {
                match ch {
                    'A' => set.push_str(ALL),
                    'g' | '$' | 'l' | 's' | 'h' | 'z' | 'x' | 'e' | 't' | 'd' | 'n' | 'K' | 'E'
                    | 'm' => set.push(ch),
                    _ => return bad("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
                }
            }
            // Printed as keyspaceEventsFlagsToString does.
            let mut out = String::new();
            if ALL.chars().all(|c| set.contains(c)) {
                out.push('A');
            } else {
                out.extend("g$lshzxetdn".chars().filter(|&c| set.contains(c)));
            }
            if ALL.chars().all(|c| set.contains(c)) && set.contains('n') {
                // 'n' is not part of A: Redis prints it only without A.
            }
            out.extend("KEm".chars().filter(|&c| set.contains(c)));
            Ok(out)
        }
        "bind" => {
            if ws.len() > 16 {
                return bad("Too many bind addresses specified.");
            }
            Ok(ws.join(" "))
        }
        "replicaof" => {
            if ws.len() != 2 {
                return bad("wrong number of arguments");
            }
            if ws[0].eq_ignore_ascii_case("no") && ws[1].eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match strtoll_whole(ws[1]) {
                Some(p) if (0..=65535).contains(&p) => Ok(format!("{} {p}", ws[0])),
                _ => bad("Invalid master port"),
            }
        }
        "latency-tracking-info-percentiles" => {
            let mut out = Vec::new();
            for w in ws {
                let Some(p) = w.parse::<f64>().ok().filter(|p| p.is_finite()) else {
                    return bad("Invalid latency-tracking-info-percentiles parameters");
                };
                if !(0.0..=100.0).contains(&p) {
                    return bad(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                    );
                }
                let s = format!("{p:.6}");
                out.push(s.trim_end_matches('0').trim_end_matches('.').to_string());
            }
            Ok(out.join(" "))
        }
        // Where SAVE/BGSAVE write (protected: CONFIG SET needs `enable-protected-configs`).
        // Redis changes directory into it, and refuses with chdir's error; here it is
        // checked the same way and kept absolute (CONFIG GET shows Redis's getcwd()).
        "dir" => {
            let path = std::fs::canonicalize(v).map_err(|e| os_error_text(&e))?;
            if !path.is_dir() {
                return bad("Not a directory");
            }
            Ok(path.display().to_string())
        }
        _ => Ok(v.to_string()),
    }
}

/// Client output buffer limit classes as CONFIG GET names them.
const OBUF_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

impl Config {
    /// The parameter named `name` (or its alias; any case): its index, and whether the name
    /// was the alias.
    fn lookup(name: &str) -> Option<(usize, bool)> {
        PARAMS.iter().enumerate().find_map(|(i, p)| {
            if p.name.eq_ignore_ascii_case(name) {
                Some((i, false))
            } else if p.alias.is_some_and(|a| a.eq_ignore_ascii_case(name)) {
                Some((i, true))
            } else {
                None
            }
        })
    }

    fn num(&self, name: &str) -> usize {
        let i = Self::lookup(name).expect("known parameter").0;
        self.values[i].parse::<i64>().unwrap_or(0).max(0) as usize
    }

    fn refresh(&mut self) {
        self.hash_max_listpack_entries = self.num("hash-max-listpack-entries");
        self.hash_max_listpack_value = self.num("hash-max-listpack-value");
        self.set_max_intset_entries = self.num("set-max-intset-entries");
        self.set_max_listpack_entries = self.num("set-max-listpack-entries");
        self.set_max_listpack_value = self.num("set-max-listpack-value");
        self.zset_max_listpack_entries = self.num("zset-max-listpack-entries");
        self.zset_max_listpack_value = self.num("zset-max-listpack-value");
        let i = Self::lookup("list-max-listpack-size")
            .expect("known parameter")
            .0;
        self.list_max_listpack_size = self.values[i].parse::<i64>().unwrap_or(-2);
        self.stream_node_max_bytes = self
            .get("stream-node-max-bytes")
            .and_then(parse_memory)
            .unwrap_or(4096)
            .min(usize::MAX as u64) as usize;
        self.stream_node_max_entries = self.num("stream-node-max-entries");
        self.latency_tracking = self.get("latency-tracking") == Some("yes");
        self.notify_flags =
            crate::pubsub::notify_flags(self.get("notify-keyspace-events").unwrap_or(""));
        self.slowlog_slower_than = self
            .get("slowlog-log-slower-than")
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        self.slowlog_max_len = self.num("slowlog-max-len");
        self.latency_threshold_ms = self.num("latency-monitor-threshold") as u64;
        self.time_every_call = self.slowlog_slower_than == 0 || self.latency_threshold_ms > 0;
        self.no_good_replicas =
            self.num("min-replicas-to-write") > 0 && self.num("min-replicas-max-lag") > 0;
        self.tracking_table_max_keys = self
            .get("tracking-table-max-keys")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
    }

    /// A parameter's value by name (or alias).
    pub fn get(&self, name: &str) -> Option<&str> {
        Self::lookup(name).map(|(i, _)| self.values[i].as_str())
    }

    /// Set a parameter from the server's own settings (command line), mutable or not.
    pub fn set_internal(&mut self, name: &str, value: &str) {
        if let Some((i, _)) = Self::lookup(name) {
            self.values[i] = value.to_string();
            self.refresh();
        }
    }

    /// A parameter from a config file line (`name` and its arguments; any case, aliases
    /// too): checked as CONFIG SET checks it, immutable ones included, and set. A MULTI_ARG
    /// parameter takes its arguments as one list (`save` lines add to each other, as in
    /// Redis, until a `save ""`); any other takes exactly one. None: not a parameter.
    pub fn set_from_file(&mut self, name: &str, args: &[String]) -> Option<Result<(), String>> {
        let (i, _) = Self::lookup(name)?;
        let p = &PARAMS[i];
        let multi = p.flags & MULTI_ARG != 0;
        if args.is_empty() || (!multi && args.len() != 1) {
            return Some(Err("wrong number of arguments".into()));
        }
        let mut value = args.join(" ");
        if p.name == "save" && !value.is_empty() && self.file_saves {
            value = format!("{} {value}", self.values[i]).trim().to_string();
        }
        Some(self.parse(i, &value).map(|v| {
            if p.name == "save" {
                self.file_saves = !v.is_empty();
            }
            self.values[i] = v;
            self.refresh();
        }))
    }

    /// Parameter names (and their current values) whose value differs from the default,
    /// in the table's order (CONFIG REWRITE's additions).
    pub fn changed(&self) -> Vec<(&'static str, &str)> {
        PARAMS
            .iter()
            .zip(&self.values)
            .filter(|(p, v)| p.flags & HIDDEN == 0 && p.default != v.as_str())
            .map(|(p, v)| (p.name, v.as_str()))
            .collect()
    }

    /// The canonical name of a parameter given by name or alias (any case), and whether its
    /// value is a list of words.
    pub fn canonical(name: &str) -> Option<(&'static str, bool)> {
        Self::lookup(name).map(|(i, _)| (PARAMS[i].name, PARAMS[i].flags & MULTI_ARG != 0))
    }

    /// CONFIG GET (config.c's `configGetCommand`): (name, value) of every parameter named by
    /// one of `patterns`, each once. A name without glob characters is looked up (alias and
    /// hidden parameters included) and answered as it was written; a pattern matches names
    /// and aliases, any case, but never a hidden parameter.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for pat in patterns {
            let text = String::from_utf8_lossy(pat).into_owned();
            if !pat.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
                if out.iter().any(|(n, _)| *n == text) {
                    continue;
                }
                if let Some((i, _)) = Self::lookup(&text) {
                    out.push((text, self.values[i].clone()));
                }
                continue;
            }
            let pat = pat.to_ascii_lowercase();
            for (i, p) in PARAMS.iter().enumerate() {
                if p.flags & HIDDEN != 0 {
                    continue;
                }
                for n in std::iter::once(p.name).chain(p.alias) {
                    if glob::matches(&pat, n.as_bytes()) && !out.iter().any(|(o, _)| o == n) {
                        out.push((n.to_string(), self.values[i].clone()));
                    }
                }
            }
        }
        out
    }

    /// A value for parameter `i` in the form CONFIG GET prints, or Redis's reason for
    /// refusing it.
    fn parse(&self, i: usize, v: &str) -> Result<String, String> {
        let p = &PARAMS[i];
        match p.kind {
            Kind::Bool => match v.to_ascii_lowercase().as_str() {
                "yes" if p.name == "activedefrag" => Err(
                    "Active defragmentation cannot be enabled: it requires a Redis server \
                     compiled with a modified Jemalloc like the one shipped by default with \
                     the Redis source distribution"
                        .into(),
                ),
                b @ ("yes" | "no") => Ok(b.to_string()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Kind::Str => {
                let host_ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
                match p.name {
                    "dbfilename" if v.contains(['/', '\\']) => {
                        Err("dbfilename can't be a path, just a filename".into())
                    }
                    "cluster-announce-hostname" if v.len() >= 256 => {
                        Err("Hostnames must be less than 256 characters".into())
                    }
                    "cluster-announce-hostname" if !v.chars().all(host_ok) => Err(
                        "Hostnames may only contain alphanumeric characters, hyphens or dots"
                            .into(),
                    ),
                    "proc-title-template" if !valid_title_template(v) => {
                        Err("template format is invalid or contains unknown variables".into())
                    }
                    _ => Ok(v.to_string()),
                }
            }
            Kind::Enum(names) | Kind::Flags(names) => {
                let flags = matches!(p.kind, Kind::Flags(_));
                let ws = if flags { words(v) } else { vec![v] };
                let Some(n) = enum_value(names, &ws, flags) else {
                    let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        all.join(", ")
                    ));
                };
                if flags && n & SHUTDOWN_SAVE != 0 && n & SHUTDOWN_NOSAVE != 0 {
                    return Err(
                        "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
                    );
                }
                Ok(enum_name(names, n, flags))
            }
            Kind::Num {
                min,
                max,
                unsigned,
                fmt,
            } => {
                let n = parse_num(v, min, max, unsigned, fmt)?;
                // hz is a hint: values out of 1..=500 are taken and capped (`updateHZ`).
                let n = if p.name == "hz" { n.clamp(1, 500) } else { n };
                Ok(print_num(n, fmt))
            }
            Kind::Special => {
                // A relative `dir` is relative to the current one (Redis has changed
                // directory into it).
                let cur = &self.values[i];
                if p.name == "dir" && !cur.is_empty() && std::path::Path::new(v).is_relative() {
                    let joined = std::path::Path::new(cur).join(v);
                    return parse_special(p.name, &joined.to_string_lossy());
                }
                let s = parse_special(p.name, v)?;
                if p.name != "client-output-buffer-limit" {
                    return Ok(s);
                }
                // Only the classes named change.
                let mut cur: Vec<String> = words(&self.values[i])
                    .iter()
                    .map(|w| w.to_string())
                    .collect();
                let new = words(&s);
                for g in new.chunks(4) {
                    let class: usize = g[0].parse().unwrap_or(0);
                    for k in 0..3 {
                        cur[class * 4 + 1 + k] = g[1 + k].to_string();
                    }
                }
                for (k, name) in OBUF_CLASSES.iter().enumerate() {
                    cur[k * 4] = name.to_string();
                }
                Ok(cur.join(" "))
            }
        }
    }

    /// Whether a client may set protected parameters (Redis's `allowProtectedAction`):
    /// `enable-protected-configs yes`, or `local` and the client connected over loopback or
    /// a Unix socket (`addr`: `ip:port`, or the socket's path).
    pub fn protected_allowed(&self, addr: &str) -> bool {
        match self.get("enable-protected-configs").unwrap_or("no") {
            "yes" => true,
            "local" => {
                let ip = addr.rsplit_once(':').map_or(addr, |(ip, _)| ip);
                addr.starts_with('/')
                    || ip
                        .trim_matches(['[', ']'])
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|a| a.is_loopback())
            }
            _ => false,
        }
    }

    /// CONFIG SET of several parameters, all or none (config.c's `configSetCommand`): the
    /// indexes of the parameters whose value changed, or Redis's error text. Every name is
    /// checked first (unknown, immutable or protected, given twice), then every value.
    /// `protected_allowed`: this client may set protected parameters (`dir`, `dbfilename`):
    /// Redis's `enable-protected-configs` is `yes`, or `local` and the client is local
    /// ([`Config::protected_allowed`]).
    pub fn set_many(
        &mut self,
        pairs: &[(&[u8], &[u8])],
        protected_allowed: bool,
    ) -> Result<Vec<usize>, String> {
        let mut found: Vec<(usize, bool)> = Vec::new();
        let mut unknown = None;
        let mut refused = None;
        for (name, _) in pairs {
            let n = String::from_utf8_lossy(name).into_owned();
            let Some(entry) = Self::lookup(&n) else {
                if unknown.is_none() && refused.is_none() {
                    unknown = Some(n);
                }
                continue;
            };
            if unknown.is_some() || refused.is_some() {
                continue;
            }
            let p = &PARAMS[entry.0];
            if p.flags & IMMUTABLE != 0 {
                refused = Some((n, "can't set immutable config"));
            } else if p.flags & PROTECTED != 0 && !protected_allowed {
                refused = Some((n, "can't set protected config"));
            } else if found.contains(&entry) {
                refused = Some((n, "duplicate parameter"));
            }
            found.push(entry);
        }
        if let Some(n) = unknown {
            return Err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{n}'"
            ));
        }
        if let Some((n, why)) = refused {
            return Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{n}') - {why}"
            ));
        }
        let mut next = self.clone();
        let mut changed = Vec::new();
        for (&(i, alias), (_, value)) in found.iter().zip(pairs) {
            let p = &PARAMS[i];
            let v = next
                .parse(i, &String::from_utf8_lossy(value))
                .map_err(|why| {
                    let name = if alias {
                        p.alias.unwrap_or(p.name)
                    } else {
                        p.name
                    };
                    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
                })?;
            if next.values[i] != v {
                next.values[i] = v;
                changed.push(i);
            }
        }
        next.refresh();
        *self = next;
        Ok(changed)
    }
}

/// The name of parameter `i` (for the server's apply step).
pub fn name_of(i: usize) -> &'static str {
    PARAMS[i].name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(c: &mut Config, pairs: &[(&str, &str)]) -> Result<Vec<usize>, String> {
        let p: Vec<(&[u8], &[u8])> = pairs
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
            .collect();
        c.set_many(&p, false)
    }

    #[test]
    fn aliases_defaults_and_validation() {
        let mut c = Config::default();
        assert_eq!(c.hash_max_listpack_entries, 512);
        assert_eq!(c.get("hash-max-ziplist-value"), Some("64"));
        set(&mut c, &[("hash-max-ziplist-entries", "5")]).unwrap();
        assert_eq!(c.hash_max_listpack_entries, 5);
        assert_eq!(
            set(&mut c, &[("set-max-intset-entries", "x")]).unwrap_err(),
            "ERR CONFIG SET failed (possibly related to argument 'set-max-intset-entries') - \
             argument couldn't be parsed into an integer"
        );
        assert_eq!(
            set(&mut c, &[("daemonize", "yes")]).unwrap_err(),
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
        );
        // All or nothing.
        assert!(set(&mut c, &[("set-max-intset-entries", "7"), ("nope", "1")]).is_err());
        assert!(set(
            &mut c,
            &[
                ("set-max-intset-entries", "7"),
                ("maxmemory-clients", "200%")
            ]
        )
        .unwrap_err()
        .ends_with("- percentage argument must be less or equal to 100"));
        assert_eq!(c.set_max_intset_entries, 512);
        assert!(set(&mut c, &[("maxmemory", "1"), ("maxmemory", "2")])
            .unwrap_err()
            .contains("duplicate parameter"));
        let m = c.matching(&[b"hash-max-*"]);
        assert_eq!(m.len(), 4, "names and aliases: {m:?}");
        let m = c.matching(&[b"HASH-MAX-ZIPLIST-ENTRIES"]);
        assert_eq!(
            m,
            vec![("HASH-MAX-ZIPLIST-ENTRIES".to_string(), "5".to_string())]
        );
        assert!(c
            .matching(&[b"*"])
            .iter()
            .all(|(n, _)| n != "key-load-delay"));
        assert_eq!(c.matching(&[b"key-load-delay"]).len(), 1);
        assert_eq!(parse_memory("1mb"), Some(1 << 20));
        assert_eq!(parse_memory("5"), Some(5));
        assert_eq!(parse_memory("1x"), None);
    }

    #[test]
    fn values_print_as_redis_prints_them() {
        let mut c = Config::default();
        let get = |c: &Config, n: &str| c.get(n).unwrap().to_string();
        set(
            &mut c,
            &[
                ("maxmemory", "1gb"),
                ("maxmemory-clients", "10%"),
                ("hz", "1000"),
            ],
        )
        .unwrap();
        assert_eq!(get(&c, "maxmemory"), "1073741824");
        assert_eq!(get(&c, "maxmemory-clients"), "10%");
        assert_eq!(get(&c, "hz"), "500");
        set(
            &mut c,
            &[("oom-score-adj", "relative"), ("loglevel", "WARNING")],
        )
        .unwrap();
        assert_eq!(get(&c, "oom-score-adj"), "yes");
        assert_eq!(get(&c, "loglevel"), "warning");
        set(&mut c, &[("shutdown-on-sigterm", "force nosave")]).unwrap();
        assert_eq!(get(&c, "shutdown-on-sigterm"), "nosave force");
        assert!(set(&mut c, &[("shutdown-on-sigint", "save nosave")]).is_err());
        set(
            &mut c,
            &[("save", "3600 1 300 100"), ("notify-keyspace-events", "KA")],
        )
        .unwrap();
        assert_eq!(get(&c, "save"), "3600 1 300 100");
        assert_eq!(get(&c, "notify-keyspace-events"), "AK");
        assert!(set(&mut c, &[("save", "0 1")]).is_err());
        set(&mut c, &[("client-output-buffer-limit", "pubsub 1mb 2 3")]).unwrap();
        assert_eq!(
            get(&c, "client-output-buffer-limit"),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2 3"
        );
        set(
            &mut c,
            &[("latency-tracking-info-percentiles", "50.5 99 100")],
        )
        .unwrap();
        assert_eq!(get(&c, "latency-tracking-info-percentiles"), "50.5 99 100");
        assert_eq!(
            set(&mut c, &[("unixsocketperm", "1000")]).unwrap_err(),
            "ERR CONFIG SET failed (possibly related to argument 'unixsocketperm') - can't set immutable config"
        );
        assert!(set(&mut c, &[("dbfilename", "x")])
            .unwrap_err()
            .contains("protected"));
        // Every parameter takes the value it prints (CONFIG sanity).
        let all = c.matching(&[b"*"]);
        for (n, v) in all {
            let p = &PARAMS[Config::lookup(&n).unwrap().0];
            if p.flags & (IMMUTABLE | PROTECTED) == 0 {
                set(&mut c, &[(&n, &v)]).unwrap_or_else(|e| panic!("{n} {v:?}: {e}"));
                assert_eq!(get(&c, &n), v, "{n}");
            }
        }
    }
}
