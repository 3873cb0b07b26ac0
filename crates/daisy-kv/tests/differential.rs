//! Differential test: the same seeded random command sequences go to a real `redis-server`
//! (7.0, the specification) started by the test and to `daisy serve` in this process, over
//! raw RESP, and the replies must be the same bytes; except where Redis itself is random
//! (SPOP, SRANDMEMBER, HRANDFIELD, RANDOMKEY, SCAN cursors) or answers in a hash table's
//! order, where they are compared by property (see `gen::Cmp` and the checks below).
//!
//! * `resp2`: RESP2, with the encoding thresholds switched (CONFIG SET on both) between
//!   Redis's defaults and tiny ones every `SWITCH_EVERY` operations, so that conversions
//!   happen all the time and collections outgrow a lowered threshold;
//! * `resp3`: the same after `HELLO 3` on every connection (nulls, maps, sets, doubles).
//!
//! Each run prints its seed. Environment:
//! * `DAISY_DIFF_SEED=<n>` replays a seed (decimal or 0x-hex); `random` draws one from the
//!   clock. Unset: a fixed seed, so CI runs one known sequence.
//! * `DAISY_DIFF_OPS=<n>`: operations per test (default 10000; a longer hunt:
//!   `DAISY_DIFF_OPS=200000 DAISY_DIFF_SEED=random cargo test --release -p daisy-kv --test
//!   differential -- --nocapture`).
//! * `DAISY_DIFF_TRACE=<path>`: write every command sent to `<path>.resp2` / `.resp3`.
//! * `DAISY_DIFF_KEEP_GOING=1`: report every mismatch instead of stopping at the first
//!   (both servers are flushed after each, to carry on from the same state).
//!
//! Without `redis-server` 7.0 (on PATH or `$REDIS_SERVER`) the tests say so and pass without
//! running.

#[path = "common/serve.rs"]
mod common;
#[path = "differential/gen.rs"]
mod gen;
#[path = "differential/resp.rs"]
mod resp;
#[path = "differential/servers.rs"]
mod servers;

use gen::{Args, Cmp, Gen, Op, ScanKind, Who};
use resp::{show, show_cmd, Conn, Reply, V};
use servers::{redis_binary, Daisy, Redis};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

const DEFAULT_SEED: u64 = 0x0018_D1FF;
const DEFAULT_OPS: usize = 10_000;
/// Databases the generator uses (SELECT 0..3) and the state checks read.
const DBS: usize = 4;
/// Operations between two whole-state comparisons.
const CHECK_EVERY: usize = 100;
/// Operations between two switches of the encoding thresholds.
const SWITCH_EVERY: usize = 1000;
/// The encoding thresholds a run switches between: Redis's defaults (hash-max-listpack-entries
/// as its redis.conf and Daisy have it, see servers.rs) and tiny ones.
const THRESHOLDS: [&[(&str, &str)]; 2] = [
    &[
        ("hash-max-listpack-entries", "128"),
        ("hash-max-listpack-value", "64"),
        ("set-max-intset-entries", "512"),
        ("stream-node-max-entries", "100"),
    ],
    &[
        ("hash-max-listpack-entries", "4"),
        ("hash-max-listpack-value", "8"),
        ("set-max-intset-entries", "5"),
        ("stream-node-max-entries", "3"),
    ],
];

#[test]
fn resp2() {
    run("resp2", false, 0);
}

#[test]
fn resp3() {
    run("resp3", true, 0x3333_3333);
}

/// MIGRATE both ways between a real redis-server and `daisy serve`: every type Daisy sends
/// arrives as the same value with its TTL (and leaves the source unless COPY), what Redis
/// sends arrives here, and the error replies (BUSYKEY from the target, NOKEY, KEYS with a key)
/// are Redis's, byte for byte where both answer the same case.
#[test]
fn migrate_moves_keys_both_ways_with_redis() {
    let Some(bin) = redis_binary() else {
        eprintln!("SKIPPED differential::migrate: redis-server is not installed");
        return;
    };
    let redis = Redis::start(&bin);
    let daisy = Daisy::start();
    let mut r = Conn::connect(redis.addr, "redis");
    let mut d = Conn::connect(daisy.addr, "daisy");
    let cmd = |args: &[&str]| args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
    for c in [
        &["SET", "s", "hello"][..],
        &["SET", "n", "12345"],
        &["HSET", "h", "f", "v", "g", "w"],
        &["SADD", "st", "1", "2", "3"],
        &["SADD", "sm", "a", "b"],
        &["RPUSH", "l", "x", "y", "z"],
        &["ZADD", "z", "1.5", "a", "2", "b"],
        &["XADD", "x", "1-1", "f", "v"],
        &["PFADD", "p", "a", "b", "c"],
        &["SET", "t", "v", "EX", "1000"],
    ] {
        assert!(!d.call(&cmd(c)).is_error(), "{c:?}");
    }
    let dumps: Vec<Reply> = ["s", "n", "h", "st", "sm", "l", "z", "x", "p", "t"]
        .iter()
        .map(|k| d.call(&cmd(&["DUMP", k])))
        .collect();
    let port = redis.addr.port().to_string();
    let mig = |c: &mut Conn, port: &str, rest: &[&str]| {
        let mut a = vec!["MIGRATE", "127.0.0.1", port];
        a.extend_from_slice(rest);
        c.call(&cmd(&a))
    };
    // One key, then many with COPY into database 2.
    assert_eq!(mig(&mut d, &port, &["s", "0", "5000"]).raw, b"+OK\r\n");
    assert!(d.call(&cmd(&["EXISTS", "s"])).int() == Some(0), "moved: gone here");
    let keys = ["n", "h", "st", "sm", "l", "z", "x", "p", "t", "missing"];
    let mut a = vec!["", "2", "5000", "COPY", "KEYS"];
    a.extend_from_slice(&keys);
    assert_eq!(mig(&mut d, &port, &a).raw, b"+OK\r\n");
    assert_eq!(r.call(&cmd(&["GET", "s"])).bytes(), Some(&b"hello"[..]));
    r.call(&cmd(&["SELECT", "2"]));
    for (k, dump) in keys.iter().zip(&dumps[1..]) {
        if *k == "sm" {
            // A set in a hash table: Redis serializes it in its own order.
            let mut m = r.call(&cmd(&["SMEMBERS", k])).strings().unwrap();
            m.sort();
            assert_eq!(m, cmd(&["a", "b"]));
        } else {
            // The same serialized value arrived (Redis re-serializes it identically).
            assert_eq!(r.call(&cmd(&["DUMP", k])).raw, dump.raw, "{k}");
        }
        assert_eq!(d.call(&cmd(&["EXISTS", k])).int(), Some(1), "COPY keeps {k}");
    }
    let ttl = r.call(&cmd(&["TTL", "t"])).int().unwrap();
    assert!((990..=1000).contains(&ttl), "TTL sent: {ttl}");
    // The target's BUSYKEY comes back as Redis sends it; REPLACE overwrites.
    let busy = mig(&mut d, &port, &["h", "2", "5000"]);
    let mut a = vec!["", "2", "5000", "COPY", "KEYS", "h"];
    assert_eq!(
        busy.raw,
        b"-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    a.insert(3, "REPLACE");
    assert_eq!(mig(&mut d, &port, &a).raw, b"+OK\r\n");
    // NOKEY and the KEYS/key error, as Redis.
    for case in [&["nokey", "0", "100"][..], &["x", "0", "100", "KEYS", "n"]] {
        let (ra, da) = (mig(&mut r, &port, case), mig(&mut d, &port, case));
        assert_eq!(da.raw, ra.raw, "{case:?}");
    }
    // Redis -> Daisy.
    r.call(&cmd(&["SELECT", "0"]));
    r.call(&cmd(&["ZADD", "fromredis", "1", "a", "2", "b"]));
    let dport = daisy.addr.port().to_string();
    assert_eq!(mig(&mut r, &dport, &["fromredis", "0", "5000"]).raw, b"+OK\r\n");
    let got = d.call(&cmd(&["ZRANGE", "fromredis", "0", "-1", "WITHSCORES"]));
    assert_eq!(got.strings().unwrap(), cmd(&["a", "1", "b", "2"]));
}

fn env_seed() -> u64 {
    match std::env::var("DAISY_DIFF_SEED") {
        Err(_) => DEFAULT_SEED,
        Ok(s) if s == "random" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        Ok(s) => {
            let s = s.trim();
            let n = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            n.unwrap_or_else(|_| panic!("DAISY_DIFF_SEED={s}: not a number"))
        }
    }
}

fn run(name: &'static str, resp3: bool, salt: u64) {
    let Some(bin) = redis_binary() else {
        eprintln!(
            "SKIPPED differential::{name}: redis-server is not installed (apt-get install \
             redis-server, or set REDIS_SERVER); Daisy was not compared with Redis"
        );
        return;
    };
    // Redis 7.0 is the specification: another version answers differently by design.
    match servers::redis_version(&bin) {
        Some(v) if v.starts_with("7.0.") => {}
        v => {
            let what = match v {
                Some(v) => format!("is Redis {v}, not 7.0 (the specification)"),
                None => "does not tell its version (redis-server --version)".into(),
            };
            eprintln!(
                "SKIPPED differential::{name}: {} {what}; set REDIS_SERVER to a 7.0 redis-server",
                bin.display()
            );
            return;
        }
    }
    let seed = env_seed();
    let ops: usize = std::env::var("DAISY_DIFF_OPS")
        .ok()
        .map(|s| s.parse().expect("DAISY_DIFF_OPS: a number"))
        .unwrap_or(DEFAULT_OPS);
    eprintln!("differential::{name}: seed {seed} ({seed:#x}), {ops} operations");
    let t0 = Instant::now();
    let redis = Redis::start(&bin);
    let daisy = Daisy::start();
    let base_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut gen = Gen::new(seed ^ salt, base_s);
    let mut run = Run {
        name,
        seed,
        ops,
        r: Side::connect(&redis, "redis"),
        d: Side::connect_daisy(&daisy),
        history: VecDeque::new(),
        intset_max: 512,
        keep_going: std::env::var_os("DAISY_DIFF_KEEP_GOING").is_some(),
        failures: Vec::new(),
        counts: BTreeMap::new(),
        outcomes: BTreeMap::new(),
        resp3,
        trace: std::env::var_os("DAISY_DIFF_TRACE").map(|p| {
            let p = std::path::PathBuf::from(p).with_extension(name);
            std::io::BufWriter::new(std::fs::File::create(p).expect("DAISY_DIFF_TRACE: a file"))
        }),
    };
    run.hello();
    for i in 0..ops {
        if i > 0 && i % SWITCH_EVERY == 0 {
            run.thresholds(THRESHOLDS[(i / SWITCH_EVERY) % 2]);
        }
        let op = gen.op();
        run.exec(op);
        if (i + 1) % CHECK_EVERY == 0 {
            run.exec(Op::Check);
        }
    }
    run.exec(Op::Check);
    let took = t0.elapsed();
    let mut counts: Vec<_> = run.counts.iter().collect();
    counts.sort_by(|a, b| b.1.cmp(a.1));
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let outcomes: Vec<String> = run
        .outcomes
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "differential::{name}: seed {seed}: {ops} operations, {} commands to each server in {:.1} s\n  \
         commands: {}\n  answers: {}",
        run.counts.values().sum::<usize>(),
        took.as_secs_f64(),
        summary.join(", "),
        outcomes.join(", ")
    );
    assert!(
        run.failures.is_empty(),
        "differential::{name}: {} mismatches (seed {seed}):\n{}",
        run.failures.len(),
        run.failures.join("\n")
    );
    drop(run);
    drop(daisy);
    drop(redis);
}

/// One server's connections: A (the main one), B (the other client of the transaction
/// scenarios), C (whole-state checks; always RESP2).
struct Side {
    a: Conn,
    b: Conn,
    c: Conn,
}

impl Side {
    fn connect(r: &Redis, who: &'static str) -> Side {
        Side {
            a: Conn::connect(r.addr, who),
            b: Conn::connect(r.addr, who),
            c: Conn::connect(r.addr, who),
        }
    }

    fn connect_daisy(d: &Daisy) -> Side {
        Side {
            a: Conn::connect(d.addr, "daisy"),
            b: Conn::connect(d.addr, "daisy"),
            c: Conn::connect(d.addr, "daisy"),
        }
    }

    fn conn(&mut self, id: Id) -> &mut Conn {
        match id {
            Id::A => &mut self.a,
            Id::B => &mut self.b,
            Id::C => &mut self.c,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Id {
    A,
    B,
    C,
}

struct Run {
    name: &'static str,
    seed: u64,
    ops: usize,
    r: Side,
    d: Side,
    /// The last commands sent (for the failure message).
    history: VecDeque<String>,
    /// Redis's set-max-intset-entries now.
    intset_max: usize,
    keep_going: bool,
    failures: Vec<String>,
    /// Commands sent, by name.
    counts: BTreeMap<String, usize>,
    /// Redis's answers by kind (errors by code, EXEC outcomes, encodings).
    outcomes: BTreeMap<String, usize>,
    resp3: bool,
    /// Every command sent, when DAISY_DIFF_TRACE names a file (`.resp2`/`.resp3` appended).
    trace: Option<std::io::BufWriter<std::fs::File>>,
}

/// Members of a reply as a sorted list (for set comparisons).
fn sorted(v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v = v;
    v.sort();
    v
}

/// An aggregate reply's elements (pairs when `pairs`: RESP2's flat field, value list or a
/// RESP3 map) as a sorted list of their bytes, with the header; None for a scalar.
fn multiset(r: &Reply, pairs: bool) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let items = r.items()?;
    let mut elems: Vec<Vec<u8>> = if pairs {
        items
            .chunks(2)
            .map(|p| p.iter().flat_map(|x| x.raw.clone()).collect())
            .collect()
    } else {
        items.iter().map(|x| x.raw.clone()).collect()
    };
    elems.sort();
    Some((r.header().to_vec(), elems))
}

/// Clock readings the two servers take a few milliseconds apart may differ by this much.
const CLOCK_TOLERANCE_MS: i64 = 3000;

/// Whether `d` is `r` but for clock readings (see `Cmp::StreamTimes`): absolute times (past
/// 10^12 ms), the value after an `idle` or `seen-time` label, and the idle time of an
/// XPENDING row (`[id, consumer, idle, count]`), each within [`CLOCK_TOLERANCE_MS`]. `clock`:
/// this integer is such a reading by its place.
fn times_close(r: &Reply, d: &Reply, clock: bool) -> bool {
    match (&r.v, &d.v) {
        (V::Int(x), V::Int(y)) => {
            x == y
                || ((clock || (*x > 1_000_000_000_000 && *y > 1_000_000_000_000))
                    && (x - y).abs() <= CLOCK_TOLERANCE_MS)
        }
        (V::Array(a), V::Array(b)) | (V::Map(a), V::Map(b)) | (V::Set(a), V::Set(b)) => {
            if a.len() != b.len() {
                return false;
            }
            let pending_row = a.len() == 4
                && a[0]
                    .bytes()
                    .is_some_and(|id| id.contains(&b'-') && id[0].is_ascii_digit())
                && a[2].int().is_some();
            (0..a.len()).all(|i| {
                let label = i > 0 && matches!(a[i - 1].bytes(), Some(b"idle" | b"seen-time"));
                times_close(&a[i], &b[i], label || (pending_row && i == 2))
            })
        }
        _ => r.raw == d.raw,
    }
}

/// How many elements SRANDMEMBER or HRANDFIELD answer with for `count` (None: the form
/// without one) from a collection of `size`: distinct ones up to the size for a positive
/// count, exactly that many for a negative one.
fn random_count(count: Option<i64>, size: usize) -> usize {
    match count {
        _ if size == 0 => 0,
        None => 1,
        Some(n) if n < 0 => n.unsigned_abs() as usize,
        Some(n) => (n as usize).min(size),
    }
}

fn int_of(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

impl Run {
    fn note(&mut self, who: Id, args: &[Vec<u8>]) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        *self.counts.entry(name).or_default() += 1;
        self.history
            .push_back(format!("[{who:?}] {}", show_cmd(args)));
        if let Some(t) = &mut self.trace {
            use std::io::Write;
            let _ = writeln!(t, "{}", self.history.back().unwrap());
        }
        if self.history.len() > 30 {
            self.history.pop_front();
        }
    }

    /// Send `args` on connection `id` of both servers; the replies (Redis's, Daisy's).
    fn both(&mut self, id: Id, args: &[Vec<u8>]) -> (Reply, Reply) {
        self.note(id, args);
        let r = self.r.conn(id).call(args);
        let d = self.d.conn(id).call(args);
        self.tally(args, &r);
        (r, d)
    }

    /// Count what Redis answered that shows the run reached the interesting paths.
    fn tally(&mut self, args: &[Vec<u8>], r: &Reply) {
        let name = args[0].to_ascii_uppercase();
        let what = match (&name[..], &r.v) {
            (_, V::Error(e)) => {
                let code = e.split(|&b| b == b' ').next().unwrap_or(b"");
                format!("error {}", String::from_utf8_lossy(code))
            }
            (b"EXEC", V::NilArray | V::Null) => "EXEC failed by WATCH".into(),
            (b"EXEC", V::Array(_)) => "EXEC ran".into(),
            (b"OBJECT", V::Bulk(enc)) if args.len() == 3 => {
                format!("encoding {}", String::from_utf8_lossy(enc))
            }
            _ => return,
        };
        *self.outcomes.entry(what).or_default() += 1;
    }

    /// A mismatch: stop with the seed, the command, both replies and what came before (or,
    /// with DAISY_DIFF_KEEP_GOING, note it and carry on from an emptied keyspace).
    fn fail(&mut self, what: &str, args: &[Vec<u8>], r: &Reply, d: &Reply) {
        let msg = format!(
            "MISMATCH ({what}) at {}\n  redis: {}\n  daisy: {}",
            show_cmd(args),
            show(&r.raw),
            show(&d.raw)
        );
        if self.keep_going {
            eprintln!("{msg}");
            self.failures.push(msg);
            self.resync();
            return;
        }
        let hist: Vec<String> = self.history.iter().cloned().collect();
        panic!(
            "differential::{}: {msg}\nlast commands:\n  {}\nreplay: DAISY_DIFF_SEED={} DAISY_DIFF_OPS={} \
             cargo test -p daisy-kv --test differential {} -- --nocapture",
            self.name,
            hist.join("\n  "),
            self.seed,
            self.ops,
            self.name
        );
    }

    /// After a mismatch (keep-going mode): the same empty state on both.
    fn resync(&mut self) {
        for side in [&mut self.r, &mut self.d] {
            for id in [Id::A, Id::B] {
                let c = side.conn(id);
                c.call(&[b"DISCARD".to_vec()]);
                c.call(&[b"UNWATCH".to_vec()]);
                c.call(&[b"SELECT".to_vec(), b"0".to_vec()]);
            }
            side.c.call(&[b"FLUSHALL".to_vec()]);
        }
    }

    fn hello(&mut self) {
        if !self.resp3 {
            return;
        }
        for id in [Id::A, Id::B] {
            // HELLO's reply names the server: not compared, only its type.
            let (r, d) = self.both(id, &[b"HELLO".to_vec(), b"3".to_vec()]);
            assert!(r.raw.starts_with(b"%"), "redis HELLO 3: {}", show(&r.raw));
            assert!(d.raw.starts_with(b"%"), "daisy HELLO 3: {}", show(&d.raw));
        }
    }

    fn thresholds(&mut self, values: &[(&str, &str)]) {
        for (p, v) in values {
            let args = vec![
                b"CONFIG".to_vec(),
                b"SET".to_vec(),
                p.as_bytes().to_vec(),
                v.as_bytes().to_vec(),
            ];
            let (r, d) = self.both(Id::C, &args);
            assert_eq!(r.raw, b"+OK\r\n", "redis: CONFIG SET {p} {v}");
            assert_eq!(d.raw, b"+OK\r\n", "daisy: CONFIG SET {p} {v}");
            if *p == "set-max-intset-entries" {
                self.intset_max = v.parse().unwrap();
            }
        }
    }

    fn exec(&mut self, op: Op) {
        match op {
            Op::Cmd(args, cmp) => {
                let (r, d) = self.both(Id::A, &args);
                self.compare(Id::A, &args, &cmp, &r, &d);
            }
            Op::Pipeline(cmds) => {
                for c in &cmds {
                    self.note(Id::A, c);
                }
                self.r.a.send_many(&cmds);
                let rs: Vec<Reply> = cmds.iter().map(|_| self.r.a.read()).collect();
                self.d.a.send_many(&cmds);
                let ds: Vec<Reply> = cmds.iter().map(|_| self.d.a.read()).collect();
                for ((c, r), d) in cmds.iter().zip(&rs).zip(&ds) {
                    if r.raw != d.raw {
                        self.fail("in a pipeline", c, r, d);
                        return;
                    }
                }
            }
            Op::SrandMember(args) => self.srandmember(&args),
            Op::HrandField(args) => self.hrandfield(&args),
            Op::Spop(args) => self.spop(&args),
            Op::RandomKey => self.randomkey(),
            Op::Lex(args, key) => {
                if self.lex_defined(&key) {
                    let (r, d) = self.both(Id::A, &args);
                    self.compare(Id::A, &args, &Cmp::Exact, &r, &d);
                }
            }
            Op::Scan {
                args,
                cursor_at,
                kind,
            } => self.scan(args, cursor_at, kind),
            Op::DumpRestore {
                src,
                dst,
                opts,
                corrupt,
            } => self.dump_restore(&src, &dst, &opts, corrupt),
            Op::Multi(steps) => {
                for (who, args) in steps {
                    let id = if who == Who::A { Id::A } else { Id::B };
                    let (r, d) = self.both(id, &args);
                    if r.raw != d.raw {
                        self.fail("in a transaction scenario", &args, &r, &d);
                        return;
                    }
                }
            }
            Op::Check => self.check_all(),
        }
    }

    /// Compare two replies to `args` (sent on `id`) as `cmp` says.
    fn compare(&mut self, id: Id, args: &[Vec<u8>], cmp: &Cmp, r: &Reply, d: &Reply) {
        if r.raw == d.raw {
            return;
        }
        let ok = match cmp {
            Cmp::Exact => false,
            Cmp::Sorted => multiset(r, false).is_some() && multiset(r, false) == multiset(d, false),
            Cmp::SortedPairs => {
                multiset(r, true).is_some() && multiset(r, true) == multiset(d, true)
            }
            Cmp::HashOrder { key, pairs } => {
                if multiset(r, *pairs).is_none() || multiset(r, *pairs) != multiset(d, *pairs) {
                    false
                } else if self.redis_encoding(id, key) == "listpack" {
                    self.fail("order differs from Redis's listpack order", args, r, d);
                    return;
                } else {
                    true
                }
            }
            Cmp::SetOrder { keys } => {
                if multiset(r, false).is_none() || multiset(r, false) != multiset(d, false) {
                    false
                } else if self.intset_ordered(id, keys, r) {
                    self.fail("order differs from Redis's intset order", args, r, d);
                    return;
                } else {
                    true
                }
            }
            Cmp::Encoding { key } => {
                d.bytes() == Some(b"listpack")
                    && r.bytes() == Some(b"hashtable")
                    && self.redis_type(id, key) == "set"
            }
            Cmp::Ttl { tol } => match (r.int(), d.int()) {
                (Some(x), Some(y)) => x >= 0 && y >= 0 && (x - y).abs() <= *tol,
                _ => false,
            },
            Cmp::StreamTimes => times_close(r, d, false),
        };
        if !ok {
            self.fail("replies differ", args, r, d);
        }
    }

    fn redis_query(&mut self, id: Id, args: &[&[u8]]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        self.r.conn(id).call(&args)
    }

    fn redis_encoding(&mut self, id: Id, key: &[u8]) -> String {
        let r = self.redis_query(id, &[b"OBJECT", b"ENCODING", key]);
        String::from_utf8_lossy(r.bytes().unwrap_or(b"")).into_owned()
    }

    /// Whether Redis defines a lex range's answer over `key`: not a skiplist whose first and
    /// last scores differ.
    fn lex_defined(&mut self, key: &[u8]) -> bool {
        if self.redis_encoding(Id::A, key) != "skiplist" {
            return true;
        }
        let lo = self.redis_query(Id::A, &[b"ZRANGE", key, b"0", b"0", b"WITHSCORES"]);
        let hi = self.redis_query(Id::A, &[b"ZRANGE", key, b"-1", b"-1", b"WITHSCORES"]);
        let score = |r: &Reply| r.strings().and_then(|v| v.get(1).cloned());
        score(&lo).is_some() && score(&lo) == score(&hi)
    }

    fn redis_type(&mut self, id: Id, key: &[u8]) -> String {
        let r = self.redis_query(id, &[b"TYPE", key]);
        String::from_utf8_lossy(r.bytes().unwrap_or(b"")).into_owned()
    }

    /// Whether Redis's reply over `keys` is in ascending integer order by design: every one of
    /// them that exists is an intset within `set-max-intset-entries` (one left larger by a
    /// lowered threshold makes SDIFF's copy of it a hash table), and the result is small
    /// enough to be one.
    fn intset_ordered(&mut self, id: Id, keys: &[Vec<u8>], r: &Reply) -> bool {
        if r.items().is_none_or(|x| x.len() > self.intset_max) {
            return false;
        }
        let mut any = false;
        for k in keys {
            match &self.redis_encoding(id, k)[..] {
                "" => {}
                "intset" => {
                    let n = self.redis_query(id, &[b"SCARD", k]).int().unwrap_or(0);
                    if n as usize > self.intset_max {
                        return false;
                    }
                    any = true
                }
                _ => return false,
            }
        }
        any
    }

    /// Both servers' contents of the collection at `key` (connection A) read by `cmd`
    /// (SMEMBERS, or HGETALL when `pairs`), checked equal: (member or field, value) sorted;
    /// None if they differ (after the failure).
    fn contents(&mut self, cmd: &[u8], key: &[u8], pairs: bool) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let args = vec![cmd.to_vec(), key.to_vec()];
        let (r, d) = self.both(Id::A, &args);
        let read = |x: &Reply| -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
            let s = x.strings()?;
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = if pairs {
                s.chunks(2)
                    .map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default()))
                    .collect()
            } else {
                s.into_iter().map(|m| (m, Vec::new())).collect()
            };
            v.sort();
            Some(v)
        };
        let (rs, ds) = (read(&r), read(&d));
        if rs.is_none() || rs != ds {
            self.fail("contents differ", &args, &r, &d);
            return None;
        }
        rs
    }

    /// The members of the set at `key`, sorted (see [`Self::contents`]).
    fn members(&mut self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let c = self.contents(b"SMEMBERS", key, false)?;
        Some(c.into_iter().map(|(m, _)| m).collect())
    }

    /// SRANDMEMBER: both replies are members of the set (distinct for a positive count), as
    /// many as Redis's rules say.
    fn srandmember(&mut self, args: &Args) {
        let (r, d) = self.both(Id::A, args);
        if r.is_error() || d.is_error() || r.is_null() || d.is_null() || r.shape() != d.shape() {
            return self.compare(Id::A, args, &Cmp::Exact, &r, &d);
        }
        let Some(members) = self.members(&args[1]) else {
            return;
        };
        let set: BTreeSet<&[u8]> = members.iter().map(|m| &m[..]).collect();
        let count = args.get(2).and_then(|c| int_of(c));
        for reply in [&r, &d] {
            let got: Vec<Vec<u8>> = match count {
                None => reply.bytes().map(|b| vec![b.to_vec()]).unwrap_or_default(),
                Some(_) => reply.strings().unwrap_or_default(),
            };
            let want = random_count(count, set.len());
            let distinct: BTreeSet<&Vec<u8>> = got.iter().collect();
            let bad = got.len() != want
                || got.iter().any(|m| !set.contains(&m[..]))
                || (count.is_some_and(|n| n > 0) && distinct.len() != got.len());
            if bad {
                return self.fail("not a valid SRANDMEMBER answer", args, &r, &d);
            }
        }
    }

    /// HRANDFIELD: fields of the hash with their values (distinct for a positive count).
    fn hrandfield(&mut self, args: &Args) {
        let (r, d) = self.both(Id::A, args);
        if r.is_error() || d.is_error() || r.is_null() || d.is_null() || r.shape() != d.shape() {
            return self.compare(Id::A, args, &Cmp::Exact, &r, &d);
        }
        let Some(hash) = self.contents(b"HGETALL", &args[1], true) else {
            return;
        };
        let hash: BTreeMap<Vec<u8>, Vec<u8>> = hash.into_iter().collect();
        let count = args.get(2).and_then(|c| int_of(c));
        let withvalues = args.len() == 4;
        for reply in [&r, &d] {
            // (field, value if given)
            let mut got: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            let mut shape_ok = true;
            match (count, reply.items()) {
                (None, _) => got.extend(reply.bytes().map(|f| (f.to_vec(), None))),
                (Some(_), Some(items)) if withvalues && self.resp3 => {
                    for it in items {
                        match it.strings() {
                            Some(p) if p.len() == 2 => got.push((p[0].clone(), Some(p[1].clone()))),
                            _ => shape_ok = false,
                        }
                    }
                }
                (Some(_), Some(items)) if withvalues => {
                    if items.len() % 2 != 0 {
                        shape_ok = false;
                    }
                    for p in items.chunks(2) {
                        match (p[0].bytes(), p.get(1).and_then(|x| x.bytes())) {
                            (Some(f), Some(v)) => got.push((f.to_vec(), Some(v.to_vec()))),
                            _ => shape_ok = false,
                        }
                    }
                }
                (Some(_), Some(items)) => {
                    for it in items {
                        match it.bytes() {
                            Some(f) => got.push((f.to_vec(), None)),
                            None => shape_ok = false,
                        }
                    }
                }
                (Some(_), None) => shape_ok = false,
            }
            let want = random_count(count, hash.len());
            let distinct: BTreeSet<&Vec<u8>> = got.iter().map(|g| &g.0).collect();
            let bad = !shape_ok
                || got.len() != want
                || got.iter().any(|(f, v)| match hash.get(f) {
                    None => true,
                    Some(hv) => v.as_ref().is_some_and(|v| v != hv),
                })
                || (count.is_some_and(|n| n > 0) && distinct.len() != got.len());
            if bad {
                return self.fail("not a valid HRANDFIELD answer", args, &r, &d);
            }
        }
    }

    /// SPOP: the popped members were in the set, are distinct and as many as asked (at most
    /// the set), and what each server has left is the set without them; then each server
    /// gets its popped members back, so both hold the same set again.
    fn spop(&mut self, args: &Args) {
        let is_set = self.redis_type(Id::A, &args[1]) == "set";
        let pre = if is_set && args.len() <= 3 {
            match self.members(&args[1]) {
                Some(m) => Some(m),
                None => return,
            }
        } else {
            None
        };
        let enc_before = self.redis_encoding(Id::A, &args[1]).into_bytes();
        let (r, d) = self.both(Id::A, args);
        let Some(pre) = pre else {
            return self.compare(Id::A, args, &Cmp::Exact, &r, &d);
        };
        if r.is_error() || d.is_error() || r.is_null() || d.is_null() || r.shape() != d.shape() {
            return self.compare(Id::A, args, &Cmp::Exact, &r, &d);
        }
        let count = args.get(2).and_then(|c| int_of(c));
        let want = count.map_or(1, |n| (n as usize).min(pre.len()));
        let mut popped = Vec::new();
        for reply in [&r, &d] {
            let got: Vec<Vec<u8>> = match count {
                None => reply.bytes().map(|b| vec![b.to_vec()]).unwrap_or_default(),
                Some(_) => reply.strings().unwrap_or_default(),
            };
            let distinct: BTreeSet<&Vec<u8>> = got.iter().collect();
            if got.len() != want
                || distinct.len() != got.len()
                || got.iter().any(|m| pre.binary_search(m).is_err())
            {
                return self.fail("not a valid SPOP answer", args, &r, &d);
            }
            popped.push(got);
        }
        // What is left on each server, and its encoding: Redis's third strategy (few members
        // left) builds a new set of them, an intset exactly when they fit one; otherwise the
        // set keeps its encoding.
        let sm = vec![b"SMEMBERS".to_vec(), args[1].clone()];
        let (rl, dl) = self.both(Id::A, &sm);
        let oe = vec![b"OBJECT".to_vec(), b"ENCODING".to_vec(), args[1].clone()];
        let (re, de) = self.both(Id::A, &oe);
        let rebuilt = pre.len() > want && (pre.len() - want) * 5 <= want;
        for (left, got, enc) in [(&rl, &popped[0], &re), (&dl, &popped[1], &de)] {
            let expect: Vec<Vec<u8>> = pre.iter().filter(|m| !got.contains(m)).cloned().collect();
            if left.strings().map(sorted).as_ref() != Some(&expect) {
                return self.fail("the set left after SPOP is wrong", &sm, &rl, &dl);
            }
            let intset = expect.len() <= self.intset_max
                && expect
                    .iter()
                    .all(|m| int_of(m).is_some_and(|n| n.to_string().as_bytes() == &m[..]));
            let enc = enc.bytes().map(|e| {
                if e == b"listpack" {
                    &b"hashtable"[..]
                } else {
                    e
                }
            });
            let ok = match enc {
                None => expect.is_empty(),
                Some(e) if rebuilt => e == if intset { &b"intset"[..] } else { b"hashtable" },
                Some(e) => {
                    e == if enc_before == b"listpack" {
                        &b"hashtable"[..]
                    } else {
                        &enc_before[..]
                    }
                }
            };
            if !ok {
                return self.fail("the set's encoding after SPOP", &oe, &re, &de);
            }
        }
        if want < pre.len() && want > 0 {
            for (side, got) in [(&mut self.r, &popped[0]), (&mut self.d, &popped[1])] {
                let mut add = vec![b"SADD".to_vec(), args[1].clone()];
                add.extend(got.iter().cloned());
                let n = side.a.call(&add);
                assert_eq!(
                    n.int(),
                    Some(got.len() as i64),
                    "{}: re-adding popped members",
                    side.a.who
                );
            }
        }
    }

    /// RANDOMKEY: nil exactly when the database is empty, else a key that exists.
    fn randomkey(&mut self) {
        let dbsize = vec![b"DBSIZE".to_vec()];
        let (r, d) = self.both(Id::A, &dbsize);
        if r.raw != d.raw {
            return self.fail("replies differ", &dbsize, &r, &d);
        }
        let args = vec![b"RANDOMKEY".to_vec()];
        let (r, d) = self.both(Id::A, &args);
        if r.is_null() || d.is_null() || r.is_error() || d.is_error() {
            return self.compare(Id::A, &args, &Cmp::Exact, &r, &d);
        }
        let exists = [(&mut self.r, &r), (&mut self.d, &d)].map(|(side, reply)| {
            let k = reply.bytes().map(|k| k.to_vec()).unwrap_or_default();
            side.a.call(&[b"EXISTS".to_vec(), k]).int() == Some(1)
        });
        if exists.contains(&false) {
            self.fail(
                "RANDOMKEY answered a key that does not exist",
                &args,
                &r,
                &d,
            );
        }
    }

    /// A whole SCAN iteration on each server: the same items (as a set; pairs with the same
    /// values), or the same error.
    fn scan(&mut self, mut args: Args, cursor_at: usize, kind: ScanKind) {
        let first = self.both(Id::A, &args);
        let (r0, d0) = (first.0.clone(), first.1.clone());
        if r0.is_error() || d0.is_error() {
            return self.compare(Id::A, &args, &Cmp::Exact, &r0, &d0);
        }
        let mut found: Vec<BTreeSet<(Vec<u8>, Vec<u8>)>> = Vec::new();
        for (n, (side, reply0)) in [(&mut self.r, r0.clone()), (&mut self.d, d0.clone())]
            .into_iter()
            .enumerate()
        {
            let mut items = BTreeSet::new();
            let mut reply = reply0;
            let mut rounds = 0;
            loop {
                let parts = reply.items().unwrap_or(&[]);
                let (Some(cursor), Some(list)) = (
                    parts.first().and_then(|c| c.bytes()),
                    parts.get(1).and_then(|l| l.strings()),
                ) else {
                    panic!("{}: not a SCAN reply: {}", side.a.who, show(&reply.raw));
                };
                if kind == ScanKind::Pairs {
                    assert!(list.len() % 2 == 0, "odd HSCAN reply {}", show(&reply.raw));
                    items.extend(list.chunks(2).map(|p| (p[0].clone(), p[1].clone())));
                } else {
                    items.extend(list.into_iter().map(|k| (k, Vec::new())));
                }
                if cursor == b"0" {
                    break;
                }
                rounds += 1;
                assert!(rounds < 100_000, "{}: SCAN does not end", side.a.who);
                args[cursor_at] = cursor.to_vec();
                reply = side.a.call(&args);
            }
            let _ = n;
            found.push(items);
        }
        if found[0] != found[1] {
            let show_set = |s: &BTreeSet<(Vec<u8>, Vec<u8>)>| -> Reply {
                let raw = s
                    .iter()
                    .map(|(a, b)| format!("{}={} ", show(a), show(b)))
                    .collect::<String>()
                    .into_bytes();
                Reply {
                    raw: raw.clone(),
                    v: V::Bulk(raw),
                }
            };
            let (a, b) = (show_set(&found[0]), show_set(&found[1]));
            self.fail("a whole iteration found different items", &args, &a, &b);
        }
    }

    /// DUMP on both, each payload RESTOREd into the other server, then the new key compared.
    fn dump_restore(&mut self, src: &[u8], dst: &[u8], opts: &[Vec<u8>], corrupt: bool) {
        let dump = vec![b"DUMP".to_vec(), src.to_vec()];
        let (r, d) = self.both(Id::A, &dump);
        if r.is_null() || d.is_null() {
            return self.compare(Id::A, &dump, &Cmp::Exact, &r, &d);
        }
        let (Some(mut rp), Some(mut dp)) =
            (r.bytes().map(|x| x.to_vec()), d.bytes().map(|x| x.to_vec()))
        else {
            return self.compare(Id::A, &dump, &Cmp::Exact, &r, &d);
        };
        // Compact encodings serialize in a defined order: the payloads must be the same bytes.
        let enc = self.redis_encoding(Id::A, src);
        if matches!(&enc[..], "int" | "embstr" | "raw" | "listpack" | "intset") && rp != dp {
            return self.fail(&format!("DUMP of a {enc} differs"), &dump, &r, &d);
        }
        if corrupt {
            let (i, j) = (rp.len() / 2, dp.len() / 2);
            rp[i] ^= 0x5a;
            dp[j] ^= 0x5a;
        }
        let restore = |payload: Vec<u8>| {
            let mut a = vec![b"RESTORE".to_vec(), dst.to_vec(), opts[0].clone(), payload];
            a.extend(opts[1..].iter().cloned());
            a
        };
        // Redis gets Daisy's payload and Daisy gets Redis's.
        let compact = matches!(&enc[..], "int" | "embstr" | "raw" | "listpack" | "intset");
        let (to_redis, to_daisy) = (restore(dp), restore(rp.clone()));
        self.note(Id::A, &to_redis);
        let r = self.r.a.call(&to_redis);
        let d = self.d.a.call(&to_daisy);
        if r.raw != d.raw {
            return self.fail("RESTORE of the other server's DUMP", &to_daisy, &r, &d);
        }
        if compact || r.raw != b"+OK\r\n" {
            return self.check_key(Id::A, dst, true);
        }
        // A hash table's payload lists its entries in that table's order, and a small hash
        // restored from it is a listpack in that order: the two servers now hold the same
        // fields in different orders, rightly. Compare regardless of order, then give both
        // Redis's payload so that they hold the same listpack again.
        self.check_key(Id::A, dst, false);
        let mut same = vec![
            b"RESTORE".to_vec(),
            dst.to_vec(),
            opts[0].clone(),
            rp,
            b"REPLACE".to_vec(),
        ];
        if opts.iter().any(|o| o == b"ABSTTL") {
            same.push(b"ABSTTL".to_vec());
        }
        let (r, d) = self.both(Id::A, &same);
        self.compare(Id::A, &same, &Cmp::Exact, &r, &d);
        self.check_key(Id::A, dst, true);
    }

    /// Type, encoding, expiry and value of `key` on connection `id` of both (a hash's fields
    /// in Redis's listpack order when `ordered`).
    fn check_key(&mut self, id: Id, key: &[u8], ordered: bool) {
        let a = |x: &[&[u8]]| -> Vec<Vec<u8>> { x.iter().map(|s| s.to_vec()).collect() };
        let (r, d) = self.both(id, &a(&[b"TYPE", key]));
        if r.raw != d.raw {
            return self.fail("types differ", &a(&[b"TYPE", key]), &r, &d);
        }
        let ty = r.bytes().unwrap_or(b"").to_vec();
        if ty == b"none" {
            return;
        }
        let mut checks: Vec<(Args, Cmp)> = vec![
            (
                a(&[b"OBJECT", b"ENCODING", key]),
                Cmp::Encoding { key: key.to_vec() },
            ),
            (a(&[b"PTTL", key]), Cmp::Ttl { tol: 3000 }),
        ];
        if ty == b"stream" {
            // Entries, counters, node shapes, groups and every pending entry.
            checks.push((a(&[b"XRANGE", key, b"-", b"+"]), Cmp::Exact));
            checks.push((a(&[b"XINFO", b"STREAM", key]), Cmp::Exact));
            checks.push((a(&[b"XINFO", b"GROUPS", key]), Cmp::Exact));
            for g in [&b"g0"[..], b"g1", b"g2"] {
                checks.push((a(&[b"XPENDING", key, g]), Cmp::Exact));
                checks.push((
                    a(&[b"XPENDING", key, g, b"-", b"+", b"1000"]),
                    Cmp::StreamTimes,
                ));
                checks.push((a(&[b"XINFO", b"CONSUMERS", key, g]), Cmp::StreamTimes));
            }
        } else {
            checks.push(match &ty[..] {
                b"string" => (a(&[b"GET", key]), Cmp::Exact),
                b"zset" => (a(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]), Cmp::Exact),
                b"hash" if !ordered => (a(&[b"HGETALL", key]), Cmp::SortedPairs),
                b"hash" => (
                    a(&[b"HGETALL", key]),
                    Cmp::HashOrder {
                        key: key.to_vec(),
                        pairs: true,
                    },
                ),
                _ => (
                    a(&[b"SMEMBERS", key]),
                    Cmp::SetOrder {
                        keys: vec![key.to_vec()],
                    },
                ),
            });
        }
        for (args, cmp) in checks {
            let (r, d) = self.both(id, &args);
            self.compare(id, &args, &cmp, &r, &d);
        }
    }

    /// Every key of the first databases, through connection C.
    fn check_all(&mut self) {
        for db in 0..DBS {
            let sel = vec![b"SELECT".to_vec(), db.to_string().into_bytes()];
            let (r, d) = self.both(Id::C, &sel);
            assert!(r.raw == b"+OK\r\n" && d.raw == b"+OK\r\n", "SELECT {db}");
            let keys = vec![b"KEYS".to_vec(), b"*".to_vec()];
            let (r, d) = self.both(Id::C, &keys);
            self.compare(Id::C, &keys, &Cmp::Sorted, &r, &d);
            for k in r.strings().unwrap_or_default() {
                self.check_key(Id::C, &k, true);
            }
            let n = vec![b"DBSIZE".to_vec()];
            let (r, d) = self.both(Id::C, &n);
            self.compare(Id::C, &n, &Cmp::Exact, &r, &d);
        }
    }
}
