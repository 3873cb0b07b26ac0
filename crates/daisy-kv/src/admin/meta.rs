//! What Redis 7.0 says about its commands (COMMAND INFO, DOCS, LIST, GETKEYS): the table of
//! Redis's own command descriptions (`redis_commands.json`, made from Redis 7.0.15's
//! src/commands/*.json by `crates/daisy-kv/scripts/redis_commands.py`), read the first time it
//! is needed, and what Redis derives from it at startup (server.c's
//! `populateCommandStructure`): the reply flags with `movablekeys`, the legacy (first, last,
//! step) key range, the implicit ACL categories, and the keys of a command line found through
//! its key specs (db.c's `getKeysUsingKeySpecs`).
//!
//! Which of these commands this server has is the command table's business (`commands::
//! COMMANDS`); a container command present there has all of its Redis subcommands.

use serde::Deserialize;
use std::sync::OnceLock;

/// Argument flags (COMMAND DOCS).
pub const OPTIONAL: u8 = 1;
pub const MULTIPLE: u8 = 2;
pub const MULTIPLE_TOKEN: u8 = 4;

/// A command argument as COMMAND DOCS describes it.
#[derive(Debug, Deserialize)]
pub struct Arg {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    /// Index of the key spec this key argument belongs to, or -1.
    #[serde(default = "no_key_spec")]
    pub key_spec: i32,
    #[serde(default)]
    pub token: String,
    #[serde(default)]
    pub since: String,
    #[serde(default)]
    pub deprecated_since: String,
    #[serde(default)]
    pub flags: u8,
    /// The arguments of a `oneof` or `block`.
    #[serde(default)]
    pub args: Vec<Arg>,
}

fn no_key_spec() -> i32 {
    -1
}

/// Where a key spec's search begins.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bs {
    Unknown,
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from `startfrom` (negative: from the end, backwards).
    Keyword(String, i32),
}

/// How a key spec finds its keys from where the search began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fk {
    Unknown,
    /// (lastkey, keystep, limit): keys up to `lastkey` (relative; negative: from the end).
    Range(i32, i32, i32),
    /// (keynumidx, firstkey, keystep): the number of keys is an argument.
    Keynum(i32, i32, i32),
}

/// A key spec: which arguments are keys, and what the command does to them.
#[derive(Debug, Deserialize)]
pub struct KeySpec {
    #[serde(default)]
    pub notes: String,
    /// Redis's names (RO, RW, OW, RM, ACCESS, UPDATE, INSERT, DELETE, NOT_KEY, INCOMPLETE,
    /// VARIABLE_FLAGS).
    pub flags: Vec<String>,
    pub bs: Bs,
    pub fk: Fk,
}

impl KeySpec {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// One command or subcommand (`container|sub`) as Redis 7.0 declares it.
#[derive(Debug, Deserialize)]
pub struct Cmd {
    pub name: String,
    pub arity: i32,
    pub group: String,
    pub since: String,
    pub summary: String,
    #[serde(default)]
    pub complexity: String,
    /// Declared flags, lowercase (including those COMMAND INFO hides).
    #[serde(default)]
    pub flags: Vec<String>,
    /// Declared ACL categories, lowercase (the implicit ones come from the flags).
    #[serde(default)]
    pub acl: Vec<String>,
    #[serde(default)]
    pub tips: Vec<String>,
    /// Redis finds its keys with a function of its own (SET, SORT, EVAL, ...).
    #[serde(default)]
    pub getkeys: bool,
    #[serde(default)]
    pub doc_flags: Vec<String>,
    #[serde(default)]
    pub deprecated_since: String,
    #[serde(default)]
    pub replaced_by: String,
    #[serde(default)]
    pub history: Vec<(String, String)>,
    #[serde(default)]
    pub key_specs: Vec<KeySpec>,
    #[serde(default)]
    pub args: Vec<Arg>,
}

/// COMMAND INFO's flags, in the order Redis prints them (server.c's
/// `addReplyFlagsForCommand`); `movablekeys` is derived, the declared flags missing here
/// (may_replicate, sentinel, protected, ...) are hidden.
const REPLY_FLAGS: &[&str] = &[
    "write",
    "readonly",
    "denyoom",
    "module",
    "admin",
    "pubsub",
    "noscript",
    "blocking",
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "asking",
    "fast",
    "no_auth",
    "no_mandatory_keys",
    "no_async_loading",
    "no_multi",
    "movablekeys",
    "allow_busy",
];

/// ACL categories in Redis's order (acl.c's `ACLCommandCategories`).
pub const ACL_CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Key spec flags in the order Redis prints them (`addReplyFlagsForKeyArgs`), with the
/// reply's spelling.
const KEY_FLAGS: &[(&str, &str)] = &[
    ("RO", "RO"),
    ("RW", "RW"),
    ("OW", "OW"),
    ("RM", "RM"),
    ("ACCESS", "access"),
    ("UPDATE", "update"),
    ("INSERT", "insert"),
    ("DELETE", "delete"),
    ("NOT_KEY", "not_key"),
    ("INCOMPLETE", "incomplete"),
    ("VARIABLE_FLAGS", "variable_flags"),
];

/// A key spec's flags as a reply prints them (declared as Redis names).
pub fn key_flags_reply(flags: &[String]) -> Vec<&'static str> {
    KEY_FLAGS
        .iter()
        .filter(|(n, _)| flags.iter().any(|f| f == n))
        .map(|&(_, r)| r)
        .collect()
}

/// Every command and subcommand Redis 7.0 has, sorted by full name.
pub fn all() -> &'static [Cmd] {
    static TABLE: OnceLock<Vec<Cmd>> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(include_str!("redis_commands.json"))
            .expect("redis_commands.json is the generator's output")
    })
}

/// The command with this full name (lowercase: `get`, `client|list`).
pub fn lookup(name: &str) -> Option<&'static Cmd> {
    let all = all();
    all.binary_search_by(|c| c.name.as_str().cmp(name))
        .ok()
        .map(|i| &all[i])
}

/// A container's subcommands (empty for a plain command), sorted by name.
pub fn subcommands(container: &str) -> &'static [Cmd] {
    let all = all();
    let start = all.partition_point(|c| c.name.as_str() <= container);
    let rest = &all[start..];
    let n = rest
        .iter()
        .take_while(|c| {
            c.name
                .strip_prefix(container)
                .is_some_and(|s| s.starts_with('|'))
        })
        .count();
    &rest[..n]
}

/// The command a command line names (Redis's `lookupCommand`): for a container with a
/// second argument, that subcommand; None when either is unknown.
pub fn lookup_argv(args: &[&[u8]]) -> Option<&'static Cmd> {
    let name = std::str::from_utf8(args.first()?)
        .ok()?
        .to_ascii_lowercase();
    let base = lookup(&name)?;
    if args.len() == 1 || !base.is_container() {
        return Some(base);
    }
    let sub = std::str::from_utf8(args[1]).ok()?.to_ascii_lowercase();
    lookup(&format!("{name}|{sub}"))
}

/// A name as COMMAND INFO and COMMAND DOCS take it (`get`, `config|get`; any case); None for
/// an unknown one or a deeper path (`config|get|x`).
pub fn lookup_by_fullname(name: &[u8]) -> Option<&'static Cmd> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let mut parts = name.split('|');
    let base = lookup(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(base),
        (Some(sub), None) if base.is_container() => lookup(&format!("{}|{sub}", base.name)),
        _ => None,
    }
}

impl Cmd {
    /// A container command (CLIENT, CONFIG, ...): it has subcommands.
    pub fn is_container(&self) -> bool {
        !self.name.contains('|') && !subcommands(&self.name).is_empty()
    }

    /// Declares `flag` (lowercase Redis name).
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// The legacy key range (first, last, step) COMMAND INFO prints, and whether the keys
    /// move (`movablekeys`): server.c's `populateCommandLegacyRangeSpec`.
    pub fn legacy_range(&self) -> ((i32, i32, i32), bool) {
        let specs = &self.key_specs;
        if specs.is_empty() {
            return ((0, 0, 0), false);
        }
        let plain = |k: &KeySpec| match (&k.bs, k.fk) {
            (&Bs::Index(pos), Fk::Range(last, step, _)) => Some((pos, last, step)),
            _ => None,
        };
        if specs.len() == 1 {
            if let Some((pos, last, step)) = plain(&specs[0]) {
                let last = if last >= 0 { last + pos } else { last };
                return ((pos, last, step), specs[0].has("INCOMPLETE"));
            }
        }
        let (mut first, mut last_abs, mut prev_last) = (i32::MAX, 0i32, 0i32);
        let mut movable = false;
        for k in specs.iter() {
            let Some((pos, last, step)) = plain(k) else {
                movable = true;
                continue;
            };
            if step != 1 || (prev_last != 0 && prev_last != pos - 1) {
                movable = true;
                continue;
            }
            if k.has("INCOMPLETE") {
                movable = true;
            }
            first = first.min(pos);
            let abs = if last >= 0 { last + pos } else { last };
            // Compared as unsigned, as Redis does: a negative (from the end) wins.
            last_abs = (last_abs as u32).max(abs as u32) as i32;
            prev_last = last_abs;
        }
        if first == i32::MAX {
            return ((0, 0, 0), true);
        }
        ((first, last_abs, 1), movable)
    }

    /// The flags COMMAND INFO prints, in Redis's order.
    pub fn reply_flags(&self) -> Vec<&'static str> {
        let movable = self.legacy_range().1;
        REPLY_FLAGS
            .iter()
            .copied()
            .filter(|f| {
                if *f == "movablekeys" {
                    movable
                } else {
                    self.has(f)
                }
            })
            .collect()
    }

    /// The ACL categories COMMAND INFO prints: the declared ones and those Redis implies
    /// from the flags (acl.c's `setImplicitACLCategories`), in Redis's order.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut cats: Vec<&str> = self.acl.iter().map(String::as_str).collect();
        let mut add = |c: &'static str| {
            if !cats.contains(&c) {
                cats.push(c);
            }
        };
        if self.has("write") {
            add("write");
        }
        if self.has("readonly") && !self.acl.iter().any(|c| c == "scripting") {
            add("read");
        }
        if self.has("admin") {
            add("admin");
            add("dangerous");
        }
        if self.has("pubsub") {
            add("pubsub");
        }
        if self.has("fast") {
            add("fast");
        }
        if self.has("blocking") {
            add("blocking");
        }
        if !cats.contains(&"fast") {
            cats.push("slow");
        }
        ACL_CATEGORIES
            .iter()
            .copied()
            .filter(|c| cats.contains(c))
            .collect()
    }

    /// Some key spec names real keys (db.c's `doesCommandHaveKeys`, for a native command).
    pub fn has_keys(&self) -> bool {
        self.getkeys || self.key_specs.iter().any(|k| !k.has("NOT_KEY"))
    }

    /// The keys of a whole command line `args` (its name first) with their flags: db.c's
    /// `getKeysFromCommandWithSpecs`. None when the arguments do not fit the key specs
    /// (Redis: "Invalid arguments specified for command").
    pub fn keys(&self, args: &[&[u8]]) -> Option<Vec<(usize, Vec<&'static str>)>> {
        // SORT and SORT_RO name keys their specs cannot find (BY and GET patterns, STORE
        // anywhere): db.c's `sortGetKeys` / `sortROGetKeys`.
        match self.name.as_str() {
            "sort_ro" => return Some(vec![(1, vec!["RO", "access"])]),
            "sort" => return Some(sort_keys(args)),
            _ => {}
        }
        let variable = self.key_specs.iter().any(|k| k.has("VARIABLE_FLAGS"));
        if !variable && self.key_specs.iter().any(|k| !k.has("NOT_KEY")) {
            if let Some(keys) = keys_from_specs(self, args) {
                return Some(keys);
            }
        }
        // The commands' own functions; of those with variable flags, SET and BITFIELD.
        let key1 = |flags: &[&'static str]| Some(vec![(1, flags.to_vec())]);
        match self.name.as_str() {
            "set" => {
                let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
                key1(if get {
                    &["RW", "access", "update"]
                } else {
                    &["OW", "update"]
                })
            }
            "bitfield" => key1(if bitfield_readonly(args) {
                &["RO", "access"]
            } else {
                &["RW", "access", "update"]
            }),
            _ => None,
        }
    }
}

/// SORT's keys: the sorted key, then the destination of the last STORE (db.c's `sortGetKeys`:
/// the words after LIMIT, GET and BY are skipped, so a key named "store" is not mistaken).
fn sort_keys(args: &[&[u8]]) -> Vec<(usize, Vec<&'static str>)> {
    let mut out = vec![(1, vec!["RO", "access"])];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        let skip = if a.eq_ignore_ascii_case(b"limit") {
            2
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            1
        } else if a.eq_ignore_ascii_case(b"store") {
            if i + 1 < args.len() {
                store = Some(i + 1);
            }
            1
        } else {
            0
        };
        i += 1 + skip;
    }
    if let Some(s) = store {
        out.push((s, vec!["OW", "update"]));
    }
    out
}

/// BITFIELD only reads: GET and OVERFLOW subcommands only (db.c's `bitfieldGetKeys`).
fn bitfield_readonly(args: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let rem = args.len() - i - 1;
        let a = args[i];
        if a.eq_ignore_ascii_case(b"get") && rem >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && rem >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// db.c's `getKeysUsingKeySpecs` (without partial results).
fn keys_from_specs(cmd: &Cmd, args: &[&[u8]]) -> Option<Vec<(usize, Vec<&'static str>)>> {
    let argc = args.len() as i64;
    let mut out = Vec::new();
    for spec in &cmd.key_specs {
        if spec.has("NOT_KEY") {
            continue;
        }
        let mut first: i64 = match &spec.bs {
            &Bs::Index(pos) => pos as i64,
            Bs::Keyword(word, from) => {
                let from = *from;
                let (start, end) = if from > 0 {
                    (from as i64, argc - 1)
                } else {
                    (argc + from as i64, 1)
                };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if args[i as usize].eq_ignore_ascii_case(word.as_bytes()) {
                        found = i + 1;
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                if found == 0 {
                    continue; // keyword not there: no keys from this spec
                }
                found
            }
            Bs::Unknown => return None,
        };
        let (last, step) = match spec.fk {
            Fk::Range(lastkey, step, limit) => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit == 0 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (last, step as i64)
            }
            Fk::Keynum(idx, firstkey, step) => {
                if idx as i64 >= argc {
                    return None;
                }
                let n = args
                    .get((first + idx as i64) as usize)
                    .and_then(|a| crate::resp::parse_i64(a))
                    .filter(|&n| n >= 0)?;
                first += firstkey as i64;
                (first + n - 1, step as i64)
            }
            Fk::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let flags = key_flags_reply(&spec.flags);
        let mut i = first;
        while i <= last {
            out.push((i as usize, flags.clone()));
            i += step.max(1);
        }
        if spec.has("INCOMPLETE") {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(line: &str) -> Option<Vec<(String, String)>> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let cmd = lookup_argv(&args)?;
        Some(
            cmd.keys(&args)?
                .into_iter()
                .map(|(i, f)| (line.split(' ').nth(i).unwrap().to_string(), f.join(" ")))
                .collect(),
        )
    }

    #[test]
    fn table_is_sorted_and_complete() {
        assert!(all().windows(2).all(|w| w[0].name < w[1].name));
        assert!(all().len() > 350, "{}", all().len());
        assert!(lookup("get").is_some() && lookup("client|list").is_some());
        assert!(
            lookup("sentinel").is_none(),
            "Sentinel-only commands are left out"
        );
        let subs: Vec<&str> = subcommands("config")
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            subs,
            [
                "config|get",
                "config|help",
                "config|resetstat",
                "config|rewrite",
                "config|set"
            ]
        );
        assert!(lookup("client").unwrap().is_container());
        assert!(!lookup("get").unwrap().is_container());
        assert!(lookup_by_fullname(b"CONFIG|Get").is_some());
        assert!(lookup_by_fullname(b"get|key").is_none());
        assert!(lookup_by_fullname(b"config|get|key").is_none());
    }

    #[test]
    fn derived_as_redis_derives_them() {
        let info = |n: &str| {
            let c = lookup(n).unwrap();
            (c.legacy_range(), c.reply_flags(), c.acl_categories())
        };
        let (range, flags, acl) = info("set");
        assert_eq!(range, ((1, 1, 1), false));
        assert_eq!(flags, ["write", "denyoom"]);
        assert_eq!(acl, ["write", "string", "slow"]);
        assert_eq!(info("mset").0, ((1, -1, 2), false));
        assert_eq!(info("get").2, ["read", "string", "fast"]);
        for movable in [
            "zunionstore",
            "xread",
            "eval",
            "sort",
            "sort_ro",
            "migrate",
            "georadius",
        ] {
            assert!(info(movable).1.contains(&"movablekeys"), "{movable}");
        }
        for fixed in [
            "set", "get", "mset", "bitfield", "lmove", "lpop", "blpop", "ping", "rename",
        ] {
            assert!(!info(fixed).1.contains(&"movablekeys"), "{fixed}");
        }
        assert_eq!(info("lmove").0, ((1, 2, 1), false));
        assert_eq!(
            info("client|kill").2,
            ["admin", "slow", "dangerous", "connection"]
        );
    }

    #[test]
    fn keys_as_getkeys_finds_them() {
        let kv = |k: &str, f: &str| (k.to_string(), f.to_string());
        assert_eq!(keys("get key"), Some(vec![kv("key", "RO access")]));
        assert_eq!(keys("set k1 v1"), Some(vec![kv("k1", "OW update")]));
        assert_eq!(
            keys("set k1 v1 get"),
            Some(vec![kv("k1", "RW access update")])
        );
        assert_eq!(
            keys("mset k1 v1 k2 v2"),
            Some(vec![kv("k1", "OW update"), kv("k2", "OW update")])
        );
        assert_eq!(
            keys("lmove k1 k2 left right"),
            Some(vec![kv("k1", "RW access delete"), kv("k2", "RW insert")])
        );
        assert_eq!(keys("memory usage key").unwrap()[0].0, "key");
        assert_eq!(keys("eval x y key"), None, "numkeys not a number");
        assert_eq!(keys("eval x 1 key").unwrap()[0].0, "key");
        // No keys fit no spec: Redis's GETKEYS then answers from the flags (an empty list
        // for EVAL, which has no mandatory keys).
        assert_eq!(keys("eval x 0"), None);
        assert_eq!(keys("sintercard 2 a b LIMIT 1").unwrap().len(), 2);
        assert_eq!(keys("sintercard 3 a b"), None);
        assert_eq!(keys("lcs key1 key2").unwrap().len(), 2);
        assert_eq!(
            keys("bitfield k get u8 0").unwrap(),
            vec![kv("k", "RO access")]
        );
    }
}
