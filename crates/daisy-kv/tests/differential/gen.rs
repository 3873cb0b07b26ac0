//! The seeded generator: random commands over a small keyspace (so that commands collide,
//! across types too), with the arguments Redis's edge cases live in (non-integers, out of
//! range numbers, wrong arity, bad options), each with how its replies are compared.
//!
//! The generator draws only from its own generator state, never from replies, so a seed is
//! one sequence of operations. Expiry times are far away (relative ones between 1 and 4 days,
//! absolute ones between 11 and 35 days from the start, or in the past, which deletes), so
//! no key expires by the clock during a run and the two servers' answers do not depend on
//! when each got the command; TTL readings are compared with a tolerance.

pub type Args = Vec<Vec<u8>>;

/// SplitMix64: a seed is one sequence, whatever `rand`'s version.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u32) -> bool {
        self.below(100) < p as usize
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// How the two replies to a command are compared.
#[derive(Clone, Debug, PartialEq)]
pub enum Cmp {
    /// Byte for byte.
    Exact,
    /// HGETALL (pairs), HKEYS, HVALS: exact while Redis keeps the hash in a listpack (its
    /// order is insertion order), the same multiset once it is a hash table.
    HashOrder { key: Vec<u8>, pairs: bool },
    /// SMEMBERS, SINTER, SUNION, SDIFF: exact while every set named is an intset in Redis
    /// (ascending order) and the result could be one; the same multiset otherwise.
    SetOrder { keys: Vec<Vec<u8>> },
    /// KEYS: the same multiset.
    Sorted,
    /// A hash's fields and values, the same pairs in any order.
    SortedPairs,
    /// OBJECT ENCODING: exact, except that a small set of strings is `listpack` in Daisy
    /// where Redis 7.0 says `hashtable` (see types/set.rs).
    Encoding { key: Vec<u8> },
    /// TTL and friends: exact when negative, else within `tol`.
    Ttl { tol: i64 },
    /// Stream replies that carry clock readings (XPENDING's idle times, XINFO CONSUMERS'
    /// idle, XINFO STREAM FULL's delivery and seen times): the same shape and values, those
    /// readings within a tolerance.
    StreamTimes,
}

/// What a SCAN-family iteration collects.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScanKind {
    Keys,
    Pairs,
    Members,
}

/// Which connection a step of a transaction scenario uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Who {
    A,
    B,
}

#[derive(Clone, Debug)]
pub enum Op {
    Cmd(Args, Cmp),
    /// Commands sent in one write; every reply exact.
    Pipeline(Vec<Args>),
    /// SRANDMEMBER key [count]: checked by property.
    SrandMember(Args),
    /// HRANDFIELD key [count [WITHVALUES]]: checked by property.
    HrandField(Args),
    /// SPOP key [count]: checked by property, then the popped members are added back on
    /// each server so that both hold the same set again.
    Spop(Args),
    RandomKey,
    /// A whole SCAN/HSCAN/SSCAN iteration (the cursor is at `cursor_at`), compared as sets.
    Scan {
        args: Args,
        cursor_at: usize,
        kind: ScanKind,
    },
    /// DUMP `src` on both; RESTORE Redis's payload into Daisy at `dst` and Daisy's into Redis,
    /// with `opts` (ttl and options); payloads equal where Redis's encoding is compact.
    DumpRestore {
        src: Vec<u8>,
        dst: Vec<u8>,
        opts: Args,
        corrupt: bool,
    },
    /// A lex-range command (ZRANGEBYLEX and friends): run and compared exactly unless Redis
    /// holds the key in a skiplist whose scores differ (Redis leaves the answer to its
    /// skiplist's random levels then), in which case it is not sent at all.
    Lex(Args, Vec<u8>),
    /// MULTI/EXEC/WATCH from two connections.
    Multi(Vec<(Who, Args)>),
    /// Compare every key of the first databases (type, encoding, value, expiry).
    Check,
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

macro_rules! args {
    ($($e:expr),* $(,)?) => { vec![$(AsArg::arg($e)),*] };
}

pub trait AsArg {
    fn arg(self) -> Vec<u8>;
}
impl AsArg for &str {
    fn arg(self) -> Vec<u8> {
        b(self)
    }
}
impl AsArg for String {
    fn arg(self) -> Vec<u8> {
        self.into_bytes()
    }
}
impl AsArg for Vec<u8> {
    fn arg(self) -> Vec<u8> {
        self
    }
}
impl AsArg for &Vec<u8> {
    fn arg(self) -> Vec<u8> {
        self.clone()
    }
}

const KEYS: &[&str] = &[
    "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11",
];

const VALUES: &[&str] = &[
    "v",
    "",
    "0",
    "1",
    "-1",
    "7",
    "42",
    "100",
    "9999",
    "10000",
    "-0",
    "01",
    "1.5",
    "3.0e2",
    "abc",
    "hello world",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "12345678901234567890",
    " 1",
    "0x10",
    "inf",
];

/// The set key whose members are integers (see [`Gen::member`]).
const INT_KEY: &str = "k4";

const INT_MEMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7",
    "8",
    "9",
    "10",
    "11",
    "12",
    "-1",
    "-2",
    "100",
    "-70000",
    "70000",
    "4294967296",
    "-9223372036854775808",
    "9223372036854775807",
];

const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "f4", "1", "2", "-3", ""];

const MEMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "7",
    "-1",
    "100",
    "01",
    "1.0",
    "a",
    "b",
    "c",
    "d",
    "",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    " 2",
];

/// Integer arguments: small ones mostly, and the edges of what parses.
const INT_EDGES: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "abc",
    "1.5",
    "",
    "01",
    " 1",
    "+1",
    "1 ",
    "0x1",
    "-0",
];

const FLOATS: &[&str] = &[
    "1",
    "1.5",
    "-0.25",
    "3",
    "1e2",
    "0.1",
    "-7",
    "2.5e-3",
    "10.000",
    "-0",
    "1e400",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "abc",
    "",
    " 1",
    "0x10",
    "1.7976931348623157e308",
    "5.0e3",
    "1e-400",
    ".5",
    "5.",
];

pub struct Gen {
    pub rng: Rng,
    /// Seconds since the epoch at the start: absolute expiry times are counted from it.
    base_s: i64,
    /// Draw only commands whose replies compare exactly (transaction steps, pipelines).
    exact_only: bool,
    /// Inside a transaction scenario: no MULTI/EXEC/DISCARD/WATCH/UNWATCH of its own.
    in_multi: bool,
    /// The type family of the command being drawn: its keys lean to that family's own.
    fam: Fam,
    /// The key drawn last (a member drawn after it is for it).
    last_key: Vec<u8>,
    /// Streams: the millisecond part of the IDs drawn lately (it mostly grows, so that most
    /// explicit IDs are new).
    stream_ms: u64,
}

/// Type families: string, hash and set commands draw most keys from two keys of their own
/// (so most commands find their type), the rest from the whole keyspace (WRONGTYPE).
#[derive(Clone, Copy, PartialEq)]
enum Fam {
    Str,
    Hash,
    Set,
    List,
    ZSet,
    Stream,
    Any,
}

type Maker = fn(&mut Gen) -> Op;
use Fam::{Any, Hash as H, List as L, Set as S, Str, Stream as X, ZSet as Z};

impl Gen {
    pub fn new(seed: u64, base_s: i64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            base_s,
            exact_only: false,
            in_multi: false,
            fam: Fam::Any,
            last_key: Vec::new(),
            stream_ms: 1,
        }
    }

    // ---- vocabulary ------------------------------------------------------------------

    pub fn key(&mut self) -> Vec<u8> {
        let own = match self.fam {
            Fam::Str => &KEYS[0..2],
            Fam::Hash => &KEYS[2..4],
            Fam::Set => &KEYS[4..6],
            Fam::List => &KEYS[6..8],
            Fam::ZSet => &KEYS[8..10],
            Fam::Stream => &KEYS[10..12],
            Fam::Any => KEYS,
        };
        let k = match self.rng.below(200) {
            0 => b(""),
            1 => b"bin\x00\r\nkey".to_vec(),
            2..=169 => b(self.rng.pick(own)),
            _ => b(self.rng.pick(KEYS)),
        };
        self.last_key = k.clone();
        k
    }

    fn keys(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.key()).collect()
    }

    fn long(&mut self, c: u8) -> Vec<u8> {
        let n = self.rng.pick(&[20usize, 21, 44, 45, 64, 65, 100]);
        vec![c; n]
    }

    pub fn value(&mut self) -> Vec<u8> {
        match self.rng.below(20) {
            0 => self.long(b'x'),
            1 => b"\x00\xff\r\n".to_vec(),
            2 => format!("{}", self.rng.below(100_000) as i64 - 50_000).into_bytes(),
            _ => b(self.rng.pick(VALUES)),
        }
    }

    pub fn field(&mut self) -> Vec<u8> {
        match self.rng.below(25) {
            0 => self.long(b'F'),
            _ => b(self.rng.pick(FIELDS)),
        }
    }

    /// A set member. Those for the key INT_KEY are integers almost always, so that it is
    /// mostly an intset and the integer-set paths (order, width, conversions) get exercised.
    pub fn member(&mut self) -> Vec<u8> {
        if self.last_key == INT_KEY.as_bytes() && self.rng.pct(95) {
            return b(self.rng.pick(INT_MEMBERS));
        }
        match self.rng.below(30) {
            0 => self.long(b'm'),
            1 => format!("{}", self.rng.below(2000)).into_bytes(),
            _ => b(self.rng.pick(MEMBERS)),
        }
    }

    /// An integer argument: usually in `lo..=hi`, sometimes an edge.
    fn int(&mut self, lo: i64, hi: i64) -> Vec<u8> {
        if self.rng.pct(8) {
            b(self.rng.pick(INT_EDGES))
        } else {
            (lo + self.rng.below((hi - lo + 1) as usize) as i64)
                .to_string()
                .into_bytes()
        }
    }

    fn float(&mut self) -> Vec<u8> {
        b(self.rng.pick(FLOATS))
    }

    /// A relative expiry in seconds (or ms): far away, and from a few distinct values.
    fn rel(&mut self, ms: bool) -> Vec<u8> {
        let s = 100_000 * (1 + self.rng.below(3) as i64);
        if ms { s * 1000 + 500 } else { s }.to_string().into_bytes()
    }

    /// An absolute expiry time: far away (never near a relative one), or in the past.
    fn abs(&mut self, ms: bool) -> Vec<u8> {
        self.abs_or_past(ms, 10)
    }

    /// An absolute expiry time in the future. (SET stores a key with a time already past, and
    /// DBSIZE then counts it until active expiry, a clock-driven background task, removes it.)
    fn future(&mut self, ms: bool) -> Vec<u8> {
        self.abs_or_past(ms, 0)
    }

    fn abs_or_past(&mut self, ms: bool, past_pct: u32) -> Vec<u8> {
        let s = if self.rng.pct(past_pct) {
            1 + self.rng.below(1000) as i64
        } else {
            self.base_s + 1_000_000 * (1 + self.rng.below(3) as i64)
        };
        if ms { s * 1000 + 7 } else { s }.to_string().into_bytes()
    }

    /// A bad time argument.
    fn bad_time(&mut self) -> Vec<u8> {
        b(self.rng.pick(&[
            "0",
            "-1",
            "abc",
            "9223372036854775807",
            "-9223372036854775808",
            "1.5",
            "",
            "9223372036854775",
            "9223372036854776",
            "-100",
        ]))
    }

    /// A count (SPOP, SRANDMEMBER, HRANDFIELD). Never a huge negative one that Redis accepts:
    /// it would answer with that many elements.
    fn count(&mut self) -> Vec<u8> {
        match self.rng.below(40) {
            0 => b("-9223372036854775808"),
            1 => b("9223372036854775807"),
            2 => b("abc"),
            3 => b("1.5"),
            _ => (self.rng.below(16) as i64 - 5).to_string().into_bytes(),
        }
    }

    /// A sorted set's score (or an increment, a weight).
    fn score(&mut self) -> Vec<u8> {
        if self.rng.pct(70) {
            (self.rng.below(10) as i64 - 3).to_string().into_bytes()
        } else {
            self.float()
        }
    }

    /// A score range's bound.
    fn bound(&mut self) -> Vec<u8> {
        let mut v = match self.rng.below(10) {
            0 => b(self
                .rng
                .pick(&["-inf", "+inf", "inf", "abc", "(", "nan", "1e400"])),
            _ => (self.rng.below(10) as i64 - 3).to_string().into_bytes(),
        };
        if self.rng.pct(30) {
            v.insert(0, b'(');
        }
        v
    }

    /// A lex range's bound.
    fn lex(&mut self) -> Vec<u8> {
        match self.rng.below(10) {
            0 => b("-"),
            1 => b("+"),
            2 => b(self.rng.pick(&["a", "", "(", "[", "x"])),
            _ => {
                let m = self.member();
                [if self.rng.pct(50) { &b"["[..] } else { b"(" }, &m[..]].concat()
            }
        }
    }

    /// A list index or range bound: mostly small, either sign, now and then far out or not a
    /// number.
    fn index(&mut self) -> Vec<u8> {
        match self.rng.below(40) {
            0 => b("-9223372036854775808"),
            1 => b("9223372036854775807"),
            2 => b("x"),
            3 => b("100"),
            _ => (self.rng.below(14) as i64 - 7).to_string().into_bytes(),
        }
    }

    /// A list item: few distinct ones (LREM, LPOS, LINSERT find them), now and then long or
    /// binary.
    fn item(&mut self) -> Vec<u8> {
        match self.rng.below(30) {
            0 => self.long(b'i'),
            1 => b"\x00\r\n".to_vec(),
            2 => format!("{}", self.rng.below(100)).into_bytes(),
            _ => b(self.rng.pick(&["a", "b", "c", "d", "e"])),
        }
    }

    fn end(&mut self) -> Vec<u8> {
        b(self.rng.pick(&["LEFT", "RIGHT", "left", "Right", "UP"]))
    }

    fn pattern(&mut self) -> Vec<u8> {
        b(self.rng.pick(&[
            "*", "k*", "k[0-2]", "*1*", "?", "f*", "[a-c]", "k?", "*[!0]", "\\k*", "", "1*",
            "[^k]*", "k[1-]",
        ]))
    }

    // ---- the operations ----------------------------------------------------------------

    /// The next operation.
    pub fn op(&mut self) -> Op {
        let table = Self::table();
        let total: u32 = table.iter().map(|t| t.0).sum();
        loop {
            let mut r = self.rng.below(total as usize) as u32;
            let (mut fam, mut make) = (table[0].1, table[0].2);
            for (w, f, m) in &table {
                if r < *w {
                    (fam, make) = (*f, *m);
                    break;
                }
                r -= w;
            }
            let outer = self.fam;
            self.fam = fam;
            let op = make(self);
            self.fam = outer;
            if self.exact_only && !matches!(op, Op::Cmd(_, Cmp::Exact)) {
                continue;
            }
            if let Op::Cmd(args, Cmp::Exact) = op {
                return Op::Cmd(self.mutate(args), Cmp::Exact);
            }
            return op;
        }
    }

    /// A command whose replies compare exactly.
    pub fn exact(&mut self) -> Args {
        let (e, m) = (self.exact_only, self.in_multi);
        self.exact_only = true;
        self.in_multi = true;
        let Op::Cmd(a, _) = self.op() else {
            unreachable!()
        };
        self.exact_only = e;
        self.in_multi = m;
        a
    }

    /// Now and then: a wrong number of arguments, a lowercase or mixed-case name.
    fn mutate(&mut self, mut a: Args) -> Args {
        match self.rng.below(100) {
            0 => a.truncate(1),
            1 if a.len() > 2 => a.truncate(a.len() - 1),
            2 => a.push(b("extra")),
            3 => a[0] = a[0].to_ascii_lowercase(),
            _ => {}
        }
        a
    }

    fn table() -> Vec<(u32, Fam, Maker)> {
        vec![
            // strings
            (30, Str, |g| {
                let k = g.key();
                Op::Cmd(args!["GET", k], Cmp::Exact)
            }),
            (40, Str, Self::set),
            (6, Str, |g| {
                let (k, v) = (g.key(), g.value());
                Op::Cmd(args!["SETNX", k, v], Cmp::Exact)
            }),
            (6, Str, |g| {
                let name = if g.rng.pct(50) { "SETEX" } else { "PSETEX" };
                let ms = name == "PSETEX";
                let t = if g.rng.pct(80) {
                    g.rel(ms)
                } else {
                    g.bad_time()
                };
                let (k, v) = (g.key(), g.value());
                Op::Cmd(args![name, k, t, v], Cmp::Exact)
            }),
            (6, Str, |g| {
                Op::Cmd(g.key_items("GETSET", Gen::value, 1), Cmp::Exact)
            }),
            (5, Str, |g| Op::Cmd(args!["GETDEL", g.key()], Cmp::Exact)),
            (10, Str, Self::getex),
            (8, Str, |g| {
                let mut a = args!["MGET"];
                a.extend(g.keys(4));
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Str, |g| {
                let name = if g.rng.pct(70) { "MSET" } else { "MSETNX" };
                let mut a = args![name];
                g.pairs(&mut a, Gen::key);
                Op::Cmd(a, Cmp::Exact)
            }),
            (12, Str, |g| {
                Op::Cmd(g.key_items("APPEND", Gen::value, 1), Cmp::Exact)
            }),
            (6, Str, |g| Op::Cmd(args!["STRLEN", g.key()], Cmp::Exact)),
            (8, Str, |g| {
                let name = if g.rng.pct(80) { "GETRANGE" } else { "SUBSTR" };
                let (k, s, e) = (g.key(), g.int(-12, 12), g.int(-12, 12));
                Op::Cmd(args![name, k, s, e], Cmp::Exact)
            }),
            (8, Str, |g| {
                let k = g.key();
                let off = match g.rng.below(20) {
                    0 => b("536870912"),
                    1 => b("536870911"),
                    2 => b("-1"),
                    3 => b("abc"),
                    _ => g.rng.below(12).to_string().into_bytes(),
                };
                let v = if g.rng.pct(10) { b("") } else { g.value() };
                // Huge offsets only where Redis refuses them (past 512 MB), never a 512 MB value.
                let v = if off.starts_with(b"53687091") {
                    b("ab")
                } else {
                    v
                };
                Op::Cmd(args!["SETRANGE", k, off, v], Cmp::Exact)
            }),
            (20, Str, |g| {
                let k = g.key();
                let a = match g.rng.below(4) {
                    0 => args!["INCR", k],
                    1 => args!["DECR", k],
                    2 => {
                        let n = g.int(-100, 100);
                        args!["INCRBY", k, n]
                    }
                    _ => {
                        let n = g.int(-100, 100);
                        args!["DECRBY", k, n]
                    }
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Str, |g| {
                let (k, f) = (g.key(), g.float());
                Op::Cmd(args!["INCRBYFLOAT", k, f], Cmp::Exact)
            }),
            (5, Str, |g| {
                let (k1, k2) = (g.key(), g.key());
                let mut a = args!["LCS", k1, k2];
                for _ in 0..g.rng.below(3) {
                    match g.rng.below(5) {
                        0 => a.push(b("LEN")),
                        1 => a.push(b("IDX")),
                        2 => a.push(b("WITHMATCHLEN")),
                        3 => {
                            a.push(b("MINMATCHLEN"));
                            a.push(g.int(0, 3));
                        }
                        _ => a.push(b("BAD")),
                    }
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            // bitmaps and HyperLogLog (types::bitops, types::hll): strings
            (8, Str, |g| {
                let k = g.key();
                let off = match g.rng.below(20) {
                    0 => b("4294967296"),
                    1 => b("-1"),
                    2 => b("x"),
                    _ => g.rng.below(100).to_string().into_bytes(),
                };
                let bit = match g.rng.below(10) {
                    0 => b("2"),
                    1..=5 => b("1"),
                    _ => b("0"),
                };
                Op::Cmd(args!["SETBIT", k, off, bit], Cmp::Exact)
            }),
            (4, Str, |g| {
                let (k, off) = (g.key(), g.int(0, 100));
                Op::Cmd(args!["GETBIT", k, off], Cmp::Exact)
            }),
            (5, Str, |g| {
                let mut a = args!["BITCOUNT", g.key()];
                if g.rng.pct(70) {
                    a.push(g.int(-20, 20));
                    a.push(g.int(-20, 20));
                    if g.rng.pct(50) {
                        a.push(b(g.rng.pick(&["BIT", "BYTE", "bit", "BAD"])));
                    }
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Str, |g| {
                let mut a = args!["BITPOS", g.key(), g.int(0, 1)];
                for _ in 0..g.rng.below(4) {
                    a.push(g.int(-20, 20));
                }
                if a.len() == 6 {
                    a[5] = b(g.rng.pick(&["BIT", "BYTE", "BAD"]));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, Str, |g| {
                let op = g.rng.pick(&["AND", "OR", "XOR", "NOT", "NAND"]);
                let mut a = args!["BITOP", op, g.key()];
                a.extend(g.keys(3));
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Str, |g| {
                let name = if g.rng.pct(80) {
                    "BITFIELD"
                } else {
                    "BITFIELD_RO"
                };
                let mut a = args![name, g.key()];
                for _ in 0..g.rng.below(4) {
                    let t = format!("{}{}", g.rng.pick(&["i", "u"]), 1 + g.rng.below(64));
                    let off = if g.rng.pct(30) {
                        format!("#{}", g.rng.below(8))
                    } else {
                        g.rng.below(80).to_string()
                    };
                    match g.rng.below(4) {
                        0 => a.extend([b("GET"), b(&t), b(&off)]),
                        1 => a.extend([b("SET"), b(&t), b(&off), g.int(-300, 300)]),
                        2 => a.extend([b("INCRBY"), b(&t), b(&off), g.int(-300, 300)]),
                        _ => a.extend([b("OVERFLOW"), b(g.rng.pick(&["WRAP", "SAT", "FAIL"]))]),
                    }
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (8, Str, |g| {
                let mut a = args!["PFADD", g.key()];
                for _ in 0..g.rng.below(40) {
                    a.push(g.int(0, 5000));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, Str, |g| {
                let mut a = args!["PFCOUNT"];
                a.extend(g.keys(2));
                Op::Cmd(a, Cmp::Exact)
            }),
            (3, Str, |g| {
                let mut a = args!["PFMERGE", g.key()];
                a.extend(g.keys(2));
                Op::Cmd(a, Cmp::Exact)
            }),
            // geo (types::geo): sorted sets
            (8, Z, |g| {
                let mut a = args!["GEOADD", g.key()];
                for _ in 0..1 + g.rng.below(3) {
                    a.push(g.int(-180, 180));
                    a.push(g.int(-85, 85));
                    a.push(g.member());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, Z, |g| {
                let name = g.rng.pick(&["GEOPOS", "GEOHASH"]);
                let mut a = args![name, g.key()];
                for _ in 0..g.rng.below(3) {
                    a.push(g.member());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (3, Z, |g| {
                let (k, m1, m2) = (g.key(), g.member(), g.member());
                let mut a = args!["GEODIST", k, m1, m2];
                if g.rng.pct(50) {
                    a.push(b(g.rng.pick(&["m", "km", "ft", "mi", "yd"])));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Z, |g| {
                let k = g.key();
                let mut a = match g.rng.below(3) {
                    0 => args!["GEORADIUS", k, g.int(-180, 180), g.int(-85, 85)],
                    1 => args!["GEORADIUSBYMEMBER", k, g.member()],
                    _ => {
                        let mut a = args!["GEOSEARCH", k];
                        if g.rng.pct(50) {
                            a.extend([b("FROMLONLAT"), g.int(-180, 180), g.int(-85, 85)]);
                        } else {
                            a.extend([b("FROMMEMBER"), g.member()]);
                        }
                        if g.rng.pct(50) {
                            a.push(b("BYBOX"));
                            a.push(g.int(0, 20000));
                        } else {
                            a.push(b("BYRADIUS"));
                        }
                        a
                    }
                };
                a.push(g.int(0, 10000));
                a.push(b(g.rng.pick(&["km", "mi"])));
                for _ in 0..g.rng.below(3) {
                    match g.rng.below(6) {
                        0 => a.push(b("WITHDIST")),
                        1 => a.push(b("WITHCOORD")),
                        2 => a.push(b("WITHHASH")),
                        3 => a.push(b(g.rng.pick(&["ASC", "DESC"]))),
                        4 => {
                            a.push(b("COUNT"));
                            a.push(g.int(0, 4));
                        }
                        _ => a.push(b("ANY")),
                    }
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            // hashes
            (40, H, |g| {
                let name = if g.rng.pct(85) { "HSET" } else { "HMSET" };
                let mut a = args![name, g.key()];
                g.pairs(&mut a, Gen::field);
                Op::Cmd(a, Cmp::Exact)
            }),
            (2, H, |g| {
                // Past the listpack thresholds at once.
                let mut a = args!["HSET", g.key()];
                for i in 0..130 + g.rng.below(5) {
                    a.push(format!("bulk{i}").into_bytes());
                    a.push(i.to_string().into_bytes());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, H, |g| {
                let (k, f, v) = (g.key(), g.field(), g.value());
                Op::Cmd(args!["HSETNX", k, f, v], Cmp::Exact)
            }),
            (15, H, |g| {
                let (k, f) = (g.key(), g.field());
                Op::Cmd(args!["HGET", k, f], Cmp::Exact)
            }),
            (6, H, |g| {
                Op::Cmd(g.key_items("HMGET", Gen::field, 3), Cmp::Exact)
            }),
            (12, H, |g| {
                Op::Cmd(g.key_items("HDEL", Gen::field, 3), Cmp::Exact)
            }),
            (10, H, |g| {
                let name = g.rng.pick(&["HLEN", "HSTRLEN", "HEXISTS"]);
                let k = g.key();
                let a = if name == "HLEN" {
                    args![name, k]
                } else {
                    args![name, k, g.field()]
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (12, H, |g| {
                let name = g.rng.pick(&["HGETALL", "HKEYS", "HVALS"]);
                let k = g.key();
                Op::Cmd(
                    args![name, &k],
                    Cmp::HashOrder {
                        key: k,
                        pairs: name == "HGETALL",
                    },
                )
            }),
            (10, H, |g| {
                let (k, f, n) = (g.key(), g.field(), g.int(-50, 50));
                Op::Cmd(args!["HINCRBY", k, f, n], Cmp::Exact)
            }),
            (8, H, |g| {
                let (k, f, n) = (g.key(), g.field(), g.float());
                Op::Cmd(args!["HINCRBYFLOAT", k, f, n], Cmp::Exact)
            }),
            (8, H, |g| {
                let mut a = args!["HRANDFIELD", g.key()];
                if g.rng.pct(75) {
                    a.push(g.count());
                    if g.rng.pct(50) {
                        a.push(b(if g.rng.pct(90) { "WITHVALUES" } else { "bad" }));
                        if g.rng.pct(5) {
                            // Out of WITHVALUES's range (half of LONG_MAX).
                            a[2] = b(g.rng.pick(&["-4611686018427387904", "4611686018427387904"]));
                        }
                    }
                }
                Op::HrandField(a)
            }),
            (6, H, |g| {
                let k = g.key();
                g.scan(args!["HSCAN", k], ScanKind::Pairs)
            }),
            // scripts: the same script text gives the same SHA-1, so even error replies
            // (which name it) compare exactly, those of tail calls (`return redis.call(...)`)
            // and of the struct library included.
            (8, Any, |g| {
                const SCRIPTS: &[&str] = &[
                    "local r = redis.call('GET', KEYS[1]) return r",
                    "local r = redis.call('INCR', KEYS[1]) return r",
                    "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('STRLEN', KEYS[1])",
                    "return {KEYS[1], ARGV[1], 3.7, true, false, {ok='fine'}}",
                    "return redis.pcall('LPUSH', KEYS[1], ARGV[1])",
                    "local r = redis.call('HLEN', KEYS[1]) return r",
                    "return {err='ERR custom'}",
                    "return redis.status_reply('FINE')",
                    "return cjson.encode({1, 2, 'x'})",
                    "return undeclared",
                    "return redis.call('INCR', KEYS[1])",
                    "return redis.call('HGET', KEYS[1], ARGV[1])",
                    "return redis.call('LLEN', KEYS[1])",
                    "return {struct.unpack('>i2 c0', struct.pack('>i2', 3) .. ARGV[1])}",
                    "return struct.pack('<I4', tonumber(ARGV[1]))",
                ];
                let script = g.rng.pick(SCRIPTS);
                let name = if g.rng.pct(85) { "EVAL" } else { "EVAL_RO" };
                let (k, v) = (g.key(), g.value());
                Op::Cmd(args![name, script, "1", k, v], Cmp::Exact)
            }),
            // lists
            (30, L, |g| {
                let name = g.rng.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                Op::Cmd(g.key_items(name, Gen::item, 4), Cmp::Exact)
            }),
            (2, L, |g| {
                // Past a packed record's limit at once (the sequence encoding).
                let mut a = args![if g.rng.pct(50) { "RPUSH" } else { "LPUSH" }, g.key()];
                for i in 0..300 {
                    a.push(format!("item-{}", i % 37).into_bytes());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (16, L, |g| {
                let name = g.rng.pick(&["LPOP", "RPOP"]);
                Op::Cmd(g.key_count(name, 40), Cmp::Exact)
            }),
            (16, L, |g| {
                let (k, s, e) = (g.key(), g.index(), g.index());
                Op::Cmd(args!["LRANGE", k, s, e], Cmp::Exact)
            }),
            (8, L, |g| {
                let a = match g.rng.below(3) {
                    0 => args!["LLEN", g.key()],
                    1 => args!["LINDEX", g.key(), g.index()],
                    _ => args!["LSET", g.key(), g.index(), g.item()],
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, L, |g| {
                let k = g.key();
                let w = g.rng.pick(&["BEFORE", "AFTER", "after", "NEAR"]);
                let (p, v) = (g.item(), g.item());
                Op::Cmd(args!["LINSERT", k, w, p, v], Cmp::Exact)
            }),
            (6, L, |g| {
                let (k, n, v) = (g.key(), g.index(), g.item());
                Op::Cmd(args!["LREM", k, n, v], Cmp::Exact)
            }),
            (4, L, |g| {
                let (k, s, e) = (g.key(), g.index(), g.index());
                Op::Cmd(args!["LTRIM", k, s, e], Cmp::Exact)
            }),
            (6, L, |g| {
                let mut a = args!["LPOS", g.key(), g.item()];
                for _ in 0..g.rng.below(3) {
                    let opt = g.rng.pick(&["RANK", "COUNT", "MAXLEN", "rank", "BAD"]);
                    a.push(b(opt));
                    a.push(g.index());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, L, |g| {
                let (s, d) = (g.key(), g.key());
                let a = if g.rng.pct(70) {
                    let (f, t) = (g.end(), g.end());
                    args!["LMOVE", s, d, f, t]
                } else {
                    args!["RPOPLPUSH", s, d]
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, L, |g| {
                let n = 1 + g.rng.below(3);
                let mut a = args!["LMPOP", n.to_string()];
                for _ in 0..n {
                    a.push(g.key());
                }
                a.push(g.end());
                if g.rng.pct(50) {
                    a.push(b("COUNT"));
                    a.push(g.count());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, L, |g| {
                // Blocking pops that find an item, or (timeout 0.01) time out with a null.
                let name = g.rng.pick(&["BLPOP", "BRPOP"]);
                let mut a = args![name];
                for _ in 0..1 + g.rng.below(2) {
                    a.push(g.key());
                }
                a.push(b(g.rng.pick(&["0.01", "0.01", "-1", "x"])));
                Op::Cmd(a, Cmp::Exact)
            }),
            // sets
            (40, S, |g| {
                Op::Cmd(g.key_items("SADD", Gen::member, 4), Cmp::Exact)
            }),
            (2, S, |g| {
                // Past set-max-intset-entries (or the listpack's) at once.
                let mut a = args!["SADD", g.key()];
                let n = if g.rng.pct(50) { 520 } else { 130 };
                for i in 0..n {
                    a.push(i.to_string().into_bytes());
                }
                if g.rng.pct(50) {
                    a.push(b("str"));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (15, S, |g| {
                Op::Cmd(g.key_items("SREM", Gen::member, 3), Cmp::Exact)
            }),
            (12, S, |g| {
                let a = match g.rng.below(3) {
                    0 => args!["SCARD", g.key()],
                    1 => args!["SISMEMBER", g.key(), g.member()],
                    _ => g.key_items("SMISMEMBER", Gen::member, 3),
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (12, S, |g| {
                let k = g.key();
                Op::Cmd(args!["SMEMBERS", &k], Cmp::SetOrder { keys: vec![k] })
            }),
            (8, S, |g| Op::SrandMember(g.key_count("SRANDMEMBER", 75))),
            (8, S, |g| Op::Spop(g.key_count("SPOP", 60))),
            (8, S, |g| {
                let (s, d, m) = (g.key(), g.key(), g.member());
                Op::Cmd(args!["SMOVE", s, d, m], Cmp::Exact)
            }),
            (12, S, |g| {
                let name = g.rng.pick(&["SINTER", "SUNION", "SDIFF"]);
                let keys = g.keys(3);
                let mut a = args![name];
                a.extend(keys.iter().cloned());
                Op::Cmd(a, Cmp::SetOrder { keys })
            }),
            (10, S, |g| {
                let name = g.rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let mut a = args![name, g.key()];
                a.extend(g.keys(3));
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, S, |g| {
                let keys = g.keys(3);
                let n = if g.rng.pct(90) {
                    keys.len().to_string().into_bytes()
                } else {
                    g.int(-1, 5)
                };
                let mut a = args!["SINTERCARD", n];
                a.extend(keys);
                if g.rng.pct(40) {
                    a.push(b(if g.rng.pct(90) { "LIMIT" } else { "LIMITS" }));
                    a.push(g.int(-1, 4));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, S, |g| {
                let k = g.key();
                g.scan(args!["SSCAN", k], ScanKind::Members)
            }),
            // sorted sets
            (40, Z, |g| {
                let mut a = args!["ZADD", g.key()];
                for f in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                    if g.rng.pct(8) {
                        a.push(b(f));
                    }
                }
                for _ in 0..1 + g.rng.below(3) {
                    a.push(g.score());
                    a.push(g.member());
                }
                if g.rng.pct(3) {
                    a.pop();
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (2, Z, |g| {
                // Past zset-max-listpack-entries at once.
                let mut a = args!["ZADD", g.key()];
                for i in 0..130 {
                    a.push((i % 7).to_string().into_bytes());
                    a.push(format!("m{i}").into_bytes());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Z, |g| {
                let (k, n, m) = (g.key(), g.score(), g.member());
                Op::Cmd(args!["ZINCRBY", k, n, m], Cmp::Exact)
            }),
            (12, Z, |g| {
                Op::Cmd(g.key_items("ZREM", Gen::member, 3), Cmp::Exact)
            }),
            (15, Z, |g| {
                let a = match g.rng.below(7) {
                    0 => args!["ZCARD", g.key()],
                    1 => args!["ZSCORE", g.key(), g.member()],
                    2 => g.key_items("ZMSCORE", Gen::member, 3),
                    3 => args!["ZRANK", g.key(), g.member()],
                    4 => args!["ZREVRANK", g.key(), g.member()],
                    _ => {
                        let (k, lo, hi) = (g.key(), g.bound(), g.bound());
                        args!["ZCOUNT", k, lo, hi]
                    }
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (20, Z, |g| {
                let k = g.key();
                let (a, cmp) = match g.rng.below(6) {
                    0 => (args!["ZRANGE", k, g.int(-5, 5), g.int(-5, 5)], true),
                    1 => (args!["ZREVRANGE", k, g.int(-5, 5), g.int(-5, 5)], true),
                    2 => (args!["ZRANGEBYSCORE", k, g.bound(), g.bound()], true),
                    3 => (args!["ZREVRANGEBYSCORE", k, g.bound(), g.bound()], true),
                    4 => (args!["ZRANGE", k, g.bound(), g.bound(), "BYSCORE"], true),
                    _ => (args!["ZRANGE", k, g.int(-5, 5), g.int(-5, 5)], false),
                };
                let mut a = a;
                if g.rng.pct(30) && cmp {
                    a.push(b("REV"));
                }
                if g.rng.pct(40) {
                    a.push(b("WITHSCORES"));
                }
                if g.rng.pct(30) {
                    a.extend([b("LIMIT"), g.int(-1, 4), g.int(-2, 4)]);
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Z, |g| {
                let k = g.key();
                let (lo, hi) = (g.lex(), g.lex());
                let a = match g.rng.below(6) {
                    0 => args!["ZRANGEBYLEX", &k, lo, hi],
                    1 => args!["ZREVRANGEBYLEX", &k, hi, lo],
                    2 => args!["ZLEXCOUNT", &k, lo, hi],
                    3 => args!["ZREMRANGEBYLEX", &k, lo, hi],
                    _ => args!["ZRANGE", &k, lo, hi, "BYLEX"],
                };
                let mut a = a;
                if a[0] != b"ZLEXCOUNT" && a[0] != b"ZREMRANGEBYLEX" && g.rng.pct(30) {
                    a.extend([b("LIMIT"), g.int(-1, 3), g.int(-2, 3)]);
                }
                Op::Lex(a, k)
            }),
            (8, Z, |g| {
                let k = g.key();
                let a = if g.rng.pct(50) {
                    args!["ZREMRANGEBYSCORE", k, g.bound(), g.bound()]
                } else {
                    args!["ZREMRANGEBYRANK", k, g.int(-4, 4), g.int(-4, 4)]
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Z, |g| {
                let name = g.rng.pick(&["ZPOPMIN", "ZPOPMAX"]);
                let mut a = args![name, g.key()];
                if g.rng.pct(50) {
                    a.push(g.int(-1, 4));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Z, |g| {
                let keys = g.keys(3);
                let (name, first) = if g.in_multi || g.rng.pct(60) {
                    ("ZMPOP", None)
                } else {
                    // Never waits long: an empty key times out at once in both.
                    ("BZMPOP", Some(b("0.01")))
                };
                let mut a = args![name];
                a.extend(first);
                a.push(keys.len().to_string().into_bytes());
                a.extend(keys);
                a.push(b(g.rng.pick(&["MIN", "MAX", "min", "bad"])));
                if g.rng.pct(40) {
                    a.extend([b("COUNT"), g.int(0, 4)]);
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, Z, |g| {
                let name = g.rng.pick(&["BZPOPMIN", "BZPOPMAX"]);
                let mut a = args![name];
                a.extend(g.keys(2));
                a.push(b(g.rng.pick(&["0.01", "-1", "abc"])));
                Op::Cmd(a, Cmp::Exact)
            }),
            (12, Z, |g| {
                let store = g.rng.pct(40);
                let op = g.rng.pick(&["UNION", "INTER", "DIFF"]);
                let keys = g.keys(3);
                let mut a = if store {
                    args![format!("Z{op}STORE"), g.key()]
                } else {
                    args![format!("Z{op}")]
                };
                a.push(if g.rng.pct(95) {
                    keys.len().to_string().into_bytes()
                } else {
                    g.int(-1, 5)
                });
                a.extend(keys.iter().cloned());
                if op != "DIFF" && g.rng.pct(30) {
                    a.push(b("WEIGHTS"));
                    for _ in 0..keys.len() {
                        a.push(g.score());
                    }
                }
                if op != "DIFF" && g.rng.pct(30) {
                    a.push(b("AGGREGATE"));
                    a.push(b(g.rng.pick(&["SUM", "MIN", "MAX", "bad"])));
                }
                if !store && g.rng.pct(40) {
                    a.push(b("WITHSCORES"));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (4, Z, |g| {
                let keys = g.keys(3);
                let mut a = args!["ZINTERCARD", keys.len().to_string()];
                a.extend(keys);
                if g.rng.pct(40) {
                    a.extend([b("LIMIT"), g.int(-1, 3)]);
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, Z, |g| {
                let mut a = args!["ZRANGESTORE", g.key(), g.key()];
                if g.rng.pct(50) {
                    a.extend([g.bound(), g.bound(), b("BYSCORE")]);
                } else {
                    a.extend([g.int(-4, 4), g.int(-4, 4)]);
                }
                if g.rng.pct(20) {
                    a.push(b("REV"));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Z, |g| {
                let k = g.key();
                g.scan(args!["ZSCAN", k], ScanKind::Pairs)
            }),
            // keys
            (15, Any, |g| {
                let name = if g.rng.pct(70) { "DEL" } else { "UNLINK" };
                let mut a = args![name];
                a.extend(g.keys(3));
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Any, |g| {
                let name = if g.rng.pct(70) { "EXISTS" } else { "TOUCH" };
                let mut a = args![name];
                a.extend(g.keys(3));
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Any, |g| {
                let k = g.key();
                Op::Cmd(args!["TYPE", k], Cmp::Exact)
            }),
            (4, Any, |g| {
                let p = g.pattern();
                Op::Cmd(args!["KEYS", p], Cmp::Sorted)
            }),
            (5, Any, |g| g.scan(args!["SCAN"], ScanKind::Keys)),
            (8, Any, |g| {
                let name = if g.rng.pct(60) { "RENAME" } else { "RENAMENX" };
                let (s, d) = (g.key(), g.key());
                Op::Cmd(args![name, s, d], Cmp::Exact)
            }),
            (8, Any, |g| {
                let mut a = args!["COPY", g.key(), g.key()];
                for _ in 0..g.rng.below(3) {
                    match g.rng.below(6) {
                        0 | 1 => a.push(b("REPLACE")),
                        2 | 3 => {
                            a.push(b("DB"));
                            a.push(g.int(0, 3));
                        }
                        4 => a.push(b("DB")),
                        _ => a.push(b("BAD")),
                    }
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Any, |g| {
                let (k, db) = (g.key(), g.int(0, 3));
                Op::Cmd(args!["MOVE", k, db], Cmp::Exact)
            }),
            (15, Any, |g| {
                let k = g.key();
                match g.rng.below(12) {
                    // Not inside a transaction: until EXEC ends, Redis's queued commands
                    // still hold the values they stored (REFCOUNT 2, an artifact).
                    0 if !g.in_multi => Op::Cmd(args!["OBJECT", "REFCOUNT", k], Cmp::Exact),
                    1 => Op::Cmd(args!["OBJECT", "FREQ", k], Cmp::Exact),
                    2 => Op::Cmd(args!["OBJECT", "HELP"], Cmp::Exact),
                    3 => Op::Cmd(args!["OBJECT", "NOSUCH", k], Cmp::Exact),
                    4 => Op::Cmd(args!["OBJECT", "ENCODING"], Cmp::Exact),
                    _ => Op::Cmd(args!["OBJECT", "ENCODING", &k], Cmp::Encoding { key: k }),
                }
            }),
            (10, Any, |g| {
                let (src, dst) = (g.key(), g.key());
                let mut opts = Vec::new();
                let ttl = match g.rng.below(6) {
                    0 => g.rel(true),
                    1 => {
                        opts.push(b("ABSTTL"));
                        g.abs(true)
                    }
                    2 => g.bad_time(),
                    _ => b("0"),
                };
                opts.insert(0, ttl);
                if g.rng.pct(85) {
                    opts.push(b("REPLACE"));
                }
                match g.rng.below(12) {
                    0 => opts.extend([b("IDLETIME"), g.int(-1, 100)]),
                    1 => opts.extend([b("FREQ"), g.int(-1, 300)]),
                    2 => opts.push(b("BAD")),
                    _ => {}
                }
                Op::DumpRestore {
                    src,
                    dst,
                    opts,
                    corrupt: g.rng.pct(5),
                }
            }),
            (3, Any, |g| {
                let _ = g.rng.next();
                Op::Cmd(args!["DBSIZE"], Cmp::Exact)
            }),
            (3, Any, |_| Op::RandomKey),
            // Pub/sub with nobody subscribed (the model has no subscriber): the counts, the
            // introspection and their argument errors.
            (3, Any, |g| {
                let ch = g.key();
                let a = match g.rng.below(8) {
                    0 => args!["PUBLISH", ch, g.value()],
                    1 => args!["SPUBLISH", ch, g.value()],
                    2 => {
                        let mut a = args!["PUBSUB", "NUMSUB"];
                        a.extend(g.keys(3));
                        a
                    }
                    3 => {
                        let mut a = args!["PUBSUB", "SHARDNUMSUB"];
                        a.extend(g.keys(2));
                        a
                    }
                    4 => args!["PUBSUB", "NUMPAT"],
                    5 => args!["PUBSUB", "CHANNELS", g.pattern()],
                    6 => args!["PUBSUB", "SHARDCHANNELS"],
                    _ => args![
                        "PUBSUB",
                        g.rng.pick(&["NUMPAT", "CHANNELS", "nosuch"]),
                        "a",
                        "b"
                    ],
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, Any, |g| {
                let db = if g.rng.pct(90) {
                    g.rng.below(4).to_string().into_bytes()
                } else {
                    b(g.rng.pick(&["16", "-1", "abc", "99999999999", "15"]))
                };
                Op::Cmd(args!["SELECT", db], Cmp::Exact)
            }),
            (3, Any, |g| {
                let (x, y) = (g.int(0, 3), g.int(0, 3));
                let (x, y) = if g.rng.pct(5) { (b("16"), y) } else { (x, y) };
                Op::Cmd(args!["SWAPDB", x, y], Cmp::Exact)
            }),
            (2, Any, |g| {
                let mut a = args!["FLUSHDB"];
                match g.rng.below(5) {
                    0 => a.push(b("ASYNC")),
                    1 => a.push(b("sync")),
                    2 => a.push(b("bad")),
                    _ => {}
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (1, Any, |g| {
                if g.rng.pct(20) {
                    Op::Cmd(args!["FLUSHALL"], Cmp::Exact)
                } else {
                    // Rare: almost always a harmless form.
                    Op::Cmd(args!["FLUSHALL", "bad"], Cmp::Exact)
                }
            }),
            (25, Any, Self::expire),
            (15, Any, |g| {
                let k = g.key();
                let (name, tol) = g.rng.pick(&[
                    ("TTL", 3),
                    ("PTTL", 3000),
                    ("EXPIRETIME", 3),
                    ("PEXPIRETIME", 3000),
                ]);
                Op::Cmd(args![name, k], Cmp::Ttl { tol })
            }),
            (8, Any, |g| {
                let k = g.key();
                Op::Cmd(args!["PERSIST", k], Cmp::Exact)
            }),
            // streams (types::stream): explicit IDs only (`*` takes the clock)
            (30, X, Self::xadd),
            (6, X, |g| Op::Cmd(args!["XLEN", g.key()], Cmp::Exact)),
            (14, X, |g| {
                let rev = g.rng.pct(30);
                let (lo, hi) = (g.xbound(true), g.xbound(false));
                let mut a = if rev {
                    args!["XREVRANGE", g.key(), hi, lo]
                } else {
                    args!["XRANGE", g.key(), lo, hi]
                };
                if g.rng.pct(40) {
                    a.push(b("COUNT"));
                    a.push(g.int(-1, 5));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (8, X, |g| {
                let mut a = args!["XDEL", g.key()];
                for _ in 0..1 + g.rng.below(3) {
                    a.push(g.xid());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (6, X, |g| {
                let mut a = args!["XTRIM", g.key()];
                a.extend(g.xtrim_opts(true));
                Op::Cmd(a, Cmp::Exact)
            }),
            (8, X, |g| {
                let mut a = args!["XREAD"];
                if g.rng.pct(50) {
                    a.push(b("COUNT"));
                    a.push(g.int(0, 4));
                }
                if g.rng.pct(3) {
                    a.push(b(g.rng.pick(&["NOACK", "GROUP", "BAD"])));
                }
                a.push(b("STREAMS"));
                let keys = g.keys(2);
                let ids: Vec<Vec<u8>> = keys
                    .iter()
                    .map(|_| if g.rng.pct(20) { b("$") } else { g.xid() })
                    .collect();
                a.extend(keys);
                a.extend(ids);
                if g.rng.pct(3) {
                    a.pop();
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (14, X, |g| {
                let k = g.key();
                let a = match g.rng.below(12) {
                    0..=4 => {
                        let id = match g.rng.below(4) {
                            0 => b("$"),
                            1 => b("0"),
                            _ => g.xid(),
                        };
                        let mut a = args!["XGROUP", "CREATE", k, g.xgroup(), id];
                        if g.rng.pct(60) {
                            a.push(b("MKSTREAM"));
                        }
                        if g.rng.pct(15) {
                            a.push(b("ENTRIESREAD"));
                            a.push(g.int(-2, 5));
                        }
                        a
                    }
                    5 | 6 => {
                        let id = if g.rng.pct(20) { b("$") } else { g.xid() };
                        let mut a = args!["XGROUP", "SETID", k, g.xgroup(), id];
                        if g.rng.pct(30) {
                            a.push(b("ENTRIESREAD"));
                            a.push(g.int(-1, 5));
                        }
                        a
                    }
                    7 => args!["XGROUP", "DESTROY", k, g.xgroup()],
                    8 | 9 => args!["XGROUP", "CREATECONSUMER", k, g.xgroup(), g.xconsumer()],
                    10 => args!["XGROUP", "DELCONSUMER", k, g.xgroup(), g.xconsumer()],
                    _ => args!["XGROUP", g.rng.pick(&["HELP", "NOSUCH", "create"])],
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (16, X, |g| {
                let mut a = args!["XREADGROUP", "GROUP", g.xgroup(), g.xconsumer()];
                if g.rng.pct(50) {
                    a.push(b("COUNT"));
                    a.push(g.int(0, 4));
                }
                if g.rng.pct(15) {
                    a.push(b("NOACK"));
                }
                a.push(b("STREAMS"));
                let keys = g.keys(2);
                let ids: Vec<Vec<u8>> = keys
                    .iter()
                    .map(|_| match g.rng.below(10) {
                        0 => b("0"),
                        1 => g.xid(),
                        2 if g.rng.pct(20) => b("$"),
                        _ => b(">"),
                    })
                    .collect();
                a.extend(keys);
                a.extend(ids);
                Op::Cmd(a, Cmp::Exact)
            }),
            (10, X, |g| {
                let mut a = args!["XACK", g.key(), g.xgroup()];
                for _ in 0..1 + g.rng.below(3) {
                    a.push(g.xid());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (8, X, |g| {
                let (k, grp) = (g.key(), g.xgroup());
                if g.rng.pct(40) {
                    return Op::Cmd(args!["XPENDING", k, grp], Cmp::Exact);
                }
                let mut a = args!["XPENDING", k, grp];
                if g.rng.pct(30) {
                    a.push(b("IDLE"));
                    a.push(g.xidle());
                }
                a.push(g.xbound(true));
                a.push(g.xbound(false));
                a.push(g.int(-1, 6));
                if g.rng.pct(40) {
                    a.push(g.xconsumer());
                }
                Op::Cmd(a, Cmp::StreamTimes)
            }),
            (8, X, |g| {
                let mut a = args!["XCLAIM", g.key(), g.xgroup(), g.xconsumer(), g.xidle()];
                for _ in 0..1 + g.rng.below(3) {
                    a.push(g.xid());
                }
                for _ in 0..g.rng.below(3) {
                    match g.rng.below(8) {
                        0 => a.push(b("FORCE")),
                        1 => a.push(b("JUSTID")),
                        2 => a.extend([b("RETRYCOUNT"), g.int(0, 5)]),
                        3 => a.extend([b("IDLE"), g.xidle()]),
                        4 => a.extend([b("TIME"), b(g.rng.pick(&["1000", "5", "-1"]))]),
                        5 => a.extend([b("LASTID"), g.xid()]),
                        6 => a.push(b("BAD")),
                        _ => {}
                    }
                }
                Op::Cmd(a, Cmp::StreamTimes)
            }),
            (6, X, |g| {
                let start = g.xbound(true);
                let mut a = args![
                    "XAUTOCLAIM",
                    g.key(),
                    g.xgroup(),
                    g.xconsumer(),
                    g.xidle(),
                    start
                ];
                if g.rng.pct(50) {
                    a.push(b("COUNT"));
                    a.push(g.int(0, 4));
                }
                if g.rng.pct(30) {
                    a.push(b("JUSTID"));
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (3, X, |g| {
                let mut a = args!["XSETID", g.key(), g.xid()];
                if g.rng.pct(40) {
                    a.push(b("ENTRIESADDED"));
                    a.push(g.int(-1, 30));
                }
                if g.rng.pct(30) {
                    a.push(b("MAXDELETEDID"));
                    a.push(g.xid());
                }
                Op::Cmd(a, Cmp::Exact)
            }),
            (8, X, |g| {
                let k = g.key();
                match g.rng.below(8) {
                    0..=2 => Op::Cmd(args!["XINFO", "STREAM", k], Cmp::Exact),
                    3 => {
                        let mut a = args!["XINFO", "STREAM", k, "FULL"];
                        if g.rng.pct(50) {
                            a.extend([b("COUNT"), g.int(0, 3)]);
                        }
                        Op::Cmd(a, Cmp::StreamTimes)
                    }
                    4 | 5 => Op::Cmd(args!["XINFO", "GROUPS", k], Cmp::Exact),
                    6 => Op::Cmd(args!["XINFO", "CONSUMERS", k, g.xgroup()], Cmp::StreamTimes),
                    _ => Op::Cmd(
                        args!["XINFO", g.rng.pick(&["HELP", "NOSUCH", "STREAM"])],
                        Cmp::Exact,
                    ),
                }
            }),
            // connection and transactions
            (2, Any, |g| {
                let a = match g.rng.below(3) {
                    0 => args!["PING"],
                    1 => args!["PING", g.value()],
                    _ => args!["ECHO", g.value()],
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (12, Any, |g| {
                if g.in_multi {
                    let k = g.key();
                    return Op::Cmd(args!["EXISTS", k], Cmp::Exact);
                }
                g.multi()
            }),
            (2, Any, |g| {
                if g.in_multi {
                    let k = g.key();
                    return Op::Cmd(args!["GET", k], Cmp::Exact);
                }
                let a = match g.rng.below(5) {
                    0 => args!["EXEC"],
                    1 => args!["DISCARD"],
                    2 => args!["UNWATCH"],
                    _ => {
                        let mut a = args!["WATCH"];
                        a.extend(g.keys(2));
                        a
                    }
                };
                Op::Cmd(a, Cmp::Exact)
            }),
            (5, Any, |g| {
                if g.exact_only {
                    let k = g.key();
                    return Op::Cmd(args!["TYPE", k], Cmp::Exact);
                }
                let n = 2 + g.rng.below(5);
                let cmds = (0..n).map(|_| g.exact()).collect();
                Op::Pipeline(cmds)
            }),
        ]
    }

    // ---- streams -------------------------------------------------------------------------

    /// A stream entry ID: mostly near the IDs drawn lately (new ones, ones that exist, ones
    /// just behind), now and then an edge or not an ID.
    fn xid(&mut self) -> Vec<u8> {
        match self.rng.below(40) {
            0 => b(self.rng.pick(&[
                "0-0",
                "0",
                "18446744073709551615-18446744073709551615",
                "abc",
                "1-x",
                "-",
                "+",
                "5-18446744073709551615",
            ])),
            _ => {
                let ms = self.stream_ms.saturating_sub(self.rng.below(6) as u64);
                if self.rng.pct(50) {
                    ms.to_string().into_bytes()
                } else {
                    format!("{ms}-{}", self.rng.below(3)).into_bytes()
                }
            }
        }
    }

    /// A range bound of XRANGE and friends (`start`: the low one).
    fn xbound(&mut self, start: bool) -> Vec<u8> {
        match self.rng.below(10) {
            0..=3 => b(if start { "-" } else { "+" }),
            4 => b(self.rng.pick(&[
                "(-",
                "(+",
                "(0-0",
                "(18446744073709551615-18446744073709551615",
            ])),
            _ => {
                let id = self.xid();
                if self.rng.pct(25) {
                    [&b"("[..], &id[..]].concat()
                } else {
                    id
                }
            }
        }
    }

    fn xgroup(&mut self) -> Vec<u8> {
        b(self.rng.pick(&["g0", "g0", "g1", "g2"]))
    }

    fn xconsumer(&mut self) -> Vec<u8> {
        b(self.rng.pick(&["alice", "bob", "carol", ""]))
    }

    /// A minimum idle time: none, or one nothing reaches (what is idle that long cannot depend
    /// on when each server got the command), now and then a bad one.
    fn xidle(&mut self) -> Vec<u8> {
        b(self.rng.pick(&["0", "0", "0", "100000000", "-5", "abc"]))
    }

    /// XADD's and XTRIM's trimming options (XTRIM's are never empty).
    fn xtrim_opts(&mut self, required: bool) -> Args {
        let mut a = Vec::new();
        if !required && self.rng.pct(70) {
            return a;
        }
        if self.rng.pct(60) {
            a.push(b("MAXLEN"));
            if self.rng.pct(50) {
                a.push(b(self.rng.pick(&["~", "="])));
            }
            a.push(self.int(-1, 8));
        } else {
            a.push(b("MINID"));
            if self.rng.pct(50) {
                a.push(b(self.rng.pick(&["~", "="])));
            }
            a.push(self.xid());
        }
        if self.rng.pct(20) {
            a.push(b("LIMIT"));
            a.push(self.int(-1, 5));
        }
        a
    }

    /// XADD with an explicit (or `<ms>-*`) ID, options, and fields; the IDs drawn mostly grow.
    fn xadd(&mut self) -> Op {
        self.stream_ms += self.rng.pick(&[0u64, 1, 1, 2, 1000]);
        let mut a = args!["XADD", self.key()];
        if self.rng.pct(10) {
            a.push(b("NOMKSTREAM"));
        }
        a.extend(self.xtrim_opts(false));
        let id = match self.rng.below(20) {
            0 => format!("{}-*", self.stream_ms).into_bytes(),
            1 => self.xid(),
            2 => b("0-0"),
            _ => format!("{}-{}", self.stream_ms, self.rng.below(3)).into_bytes(),
        };
        a.push(id);
        let n = 1 + self.rng.below(3);
        let same = self.rng.pct(60);
        for i in 0..n {
            let f = if same {
                b(["f0", "f1", "f2"][i])
            } else {
                self.field()
            };
            a.push(f);
            a.push(self.value());
        }
        if self.rng.pct(3) {
            a.pop();
        }
        Op::Cmd(a, Cmp::Exact)
    }

    /// One to three (`first`, value) pairs onto `a` (MSET's keys, HSET's fields); now and then
    /// the last value missing.
    fn pairs(&mut self, a: &mut Args, first: fn(&mut Gen) -> Vec<u8>) {
        for _ in 0..1 + self.rng.below(3) {
            a.push(first(self));
            a.push(self.value());
        }
        if self.rng.pct(4) {
            a.pop();
        }
    }

    /// `name key item...`: one to `n` items.
    fn key_items(&mut self, name: &str, item: fn(&mut Gen) -> Vec<u8>, n: usize) -> Args {
        let mut a = args![name, self.key()];
        for _ in 0..1 + self.rng.below(n) {
            a.push(item(self));
        }
        a
    }

    /// `name key [count]`: a count `pct` percent of the time, now and then one argument more.
    fn key_count(&mut self, name: &str, pct: u32) -> Args {
        let mut a = args![name, self.key()];
        if self.rng.pct(pct) {
            a.push(self.count());
        }
        if self.rng.pct(3) {
            a.push(b("x"));
        }
        a
    }

    fn scan(&mut self, mut a: Args, kind: ScanKind) -> Op {
        let cursor_at = a.len();
        a.push(if self.rng.pct(5) { b("abc") } else { b("0") });
        for _ in 0..self.rng.below(3) {
            match self.rng.below(7) {
                0 | 1 => {
                    a.push(b("MATCH"));
                    a.push(self.pattern());
                }
                2 | 3 => {
                    a.push(b("COUNT"));
                    a.push(self.int(1, 20));
                }
                4 if kind == ScanKind::Keys => {
                    a.push(b("TYPE"));
                    a.push(b(self.rng.pick(&[
                        "string", "hash", "set", "zset", "list", "HASH", "nosuch", "stream",
                    ])));
                }
                5 => a.push(b("COUNT")),
                _ => a.push(b("BAD")),
            }
        }
        Op::Scan {
            args: a,
            cursor_at,
            kind,
        }
    }

    /// An EX, PX, EXAT or PXAT option and its time; an absolute time in the past only when
    /// `past` (GETEX deletes the key; SET would store it expired, see [`Self::future`]).
    fn expiry(&mut self, past: bool) -> Args {
        let unit = self.rng.pick(&["EX", "PX", "EXAT", "PXAT"]);
        let ms = unit.starts_with('P');
        let t = match unit {
            "EX" | "PX" => self.rel(ms),
            _ if past => self.abs(ms),
            _ => self.future(ms),
        };
        vec![b(unit), t]
    }

    fn set(&mut self) -> Op {
        let mut a = args!["SET", self.key(), self.value()];
        for _ in 0..self.rng.below(3) {
            match self.rng.below(12) {
                0 => a.push(b("NX")),
                1 => a.push(b("XX")),
                2 | 3 => a.push(b("GET")),
                4 => a.push(b("KEEPTTL")),
                5..=8 => a.extend(self.expiry(false)),
                9 => {
                    a.push(b(self.rng.pick(&["EX", "PX", "EXAT", "PXAT"])));
                    a.push(self.bad_time());
                }
                10 => a.push(b(self.rng.pick(&["ex", "BAD", "PERSIST"]))),
                _ => {}
            }
        }
        Op::Cmd(a, Cmp::Exact)
    }

    fn getex(&mut self) -> Op {
        let mut a = args!["GETEX", self.key()];
        for _ in 0..self.rng.below(3) {
            match self.rng.below(8) {
                0..=3 => a.extend(self.expiry(true)),
                4 => a.push(b("PERSIST")),
                5 => {
                    a.push(b(self.rng.pick(&["EX", "PXAT"])));
                    a.push(self.bad_time());
                }
                6 => a.push(b(self.rng.pick(&["KEEPTTL", "NX", "BAD"]))),
                _ => {}
            }
        }
        Op::Cmd(a, Cmp::Exact)
    }

    /// EXPIRE family. GT and LT only with absolute times: two relative expiry times set a
    /// few milliseconds apart would compare differently on the two servers.
    fn expire(&mut self) -> Op {
        let k = self.key();
        let absolute = self.rng.pct(50);
        let ms = self.rng.pct(50);
        let name = match (absolute, ms) {
            (false, false) => "EXPIRE",
            (false, true) => "PEXPIRE",
            (true, false) => "EXPIREAT",
            (true, true) => "PEXPIREAT",
        };
        let t = match self.rng.below(10) {
            0 => self.bad_time(),
            1 if !absolute => b(self.rng.pick(&["-1", "0", "-100"])),
            _ if absolute => self.abs(ms),
            _ => self.rel(ms),
        };
        let mut a = args![name, k, t];
        let opts: &[&str] = if absolute {
            &["NX", "XX", "GT", "LT", "gt", "BAD"]
        } else {
            &["NX", "XX", "xx"]
        };
        for _ in 0..self.rng.below(3) {
            if self.rng.pct(85) {
                a.push(b(self.rng.pick(opts)));
            } else {
                // Conflicting options are refused before the time is looked at.
                a.push(b(self.rng.pick(&["NX", "GT", "LT", "XX"])));
                a.push(b(self.rng.pick(&["GT", "LT", "NX"])));
            }
        }
        // A relative time with GT/LT is fine when the options are refused anyway.
        if !absolute && a.iter().any(|x| x == b"GT" || x == b"LT") {
            let refused = a.iter().any(|x| x == b"NX")
                || (a.iter().any(|x| x == b"GT") && a.iter().any(|x| x == b"LT"));
            if !refused {
                a.truncate(3);
            }
        }
        Op::Cmd(a, Cmp::Exact)
    }

    /// A transaction scenario: WATCH (or not), writes from either connection, MULTI, queued
    /// commands (some refused at queuing, some failing at EXEC), writes from the other
    /// connection meanwhile, then EXEC or DISCARD.
    fn multi(&mut self) -> Op {
        let mut steps = Vec::new();
        let mut watched = Vec::new();
        if self.rng.pct(70) {
            watched = self.keys(2);
            let mut w = args!["WATCH"];
            w.extend(watched.iter().cloned());
            steps.push((Who::A, w));
        }
        for _ in 0..self.rng.below(3) {
            let who = if self.rng.pct(70) { Who::B } else { Who::A };
            let cmd = self.step(&watched);
            steps.push((who, cmd));
        }
        if self.rng.pct(10) {
            steps.push((Who::A, args!["UNWATCH"]));
        }
        steps.push((Who::A, args!["MULTI"]));
        for _ in 0..self.rng.below(6) {
            let step = match self.rng.below(100) {
                0..=2 => (Who::A, args!["NOSUCHCMD", "x"]),
                3..=5 => (Who::A, args!["GET"]),
                6..=7 => (Who::A, args!["MULTI"]),
                8..=9 => (Who::A, args!["WATCH", self.key()]),
                10..=29 => (Who::B, self.step(&watched)),
                _ => (Who::A, self.exact()),
            };
            steps.push(step);
        }
        steps.push((
            Who::A,
            args![if self.rng.pct(90) { "EXEC" } else { "DISCARD" }],
        ));
        Op::Multi(steps)
    }

    /// A command of a transaction scenario outside the queued ones: often one on a watched
    /// key (a write that may or may not change it, or a read), else any.
    fn step(&mut self, watched: &[Vec<u8>]) -> Args {
        if watched.is_empty() || self.rng.pct(40) {
            return self.exact();
        }
        let key = watched[self.rng.below(watched.len())].clone();
        match self.rng.below(20) {
            18 => args!["XADD", key, format!("{}-*", self.stream_ms + 1), "f", "v"],
            0 => args!["SET", key, self.value()],
            1 => args!["DEL", key],
            2 => args!["EXPIRE", key, self.rel(false)],
            3 => args!["PERSIST", key],
            4 => args!["HSET", key, self.field(), self.value()],
            5 => args!["HDEL", key, self.field()],
            6 => args!["SADD", key, self.member()],
            7 if self.rng.pct(50) => args!["ZADD", key, self.score(), self.member()],
            7 => args!["SREM", key, self.member()],
            8 => args!["INCR", key],
            9 => args!["APPEND", key, "x"],
            10 => args!["RENAME", key, self.key()],
            11 => args!["MOVE", key, self.int(0, 3)],
            12 => args!["SINTERSTORE", key, self.key(), self.key()],
            13 => args!["EXPIRE", key, "-1"],
            14 => args!["SET", key, self.value(), "NX"],
            15 => args!["FLUSHDB"],
            16 => args!["RPUSH", key, self.item()],
            17 => args!["LPOP", key],
            _ => args!["GET", key],
        }
    }
}
