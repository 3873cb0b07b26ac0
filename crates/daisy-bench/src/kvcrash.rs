//! Kill torture of `daisy serve` (`daisy crashtest --server`): the server is killed with
//! SIGKILL at random moments while clients write, restarted, and checked.
//!
//! The clients speak RESP over raw sockets so they know exactly which replies arrived before
//! the kill. Each owns its keys, pipelines 1-8 random requests and checks every reply against
//! a model. A request is a command (SET, SET PX, DEL, INCR, APPEND, MSET, EXPIRE, PERSIST on
//! strings with values up to 120 KB; HSET, HDEL, HINCRBY on hashes that grow past 128 fields
//! and become tables; SADD, SREM on sets of integers and strings that go intset -> listpack ->
//! table; RPUSH, LPUSH, LPOP, RPOP with counts, LSET, LREM, LTRIM, LMOVE on lists that
//! outgrow a packed record and become sequences; ZADD, ZINCRBY, ZREM, ZPOPMIN on sorted sets
//! that grow past 128 members and become skiplists (map + ordered index); SETBIT on a bitmap
//! that grows to 8 KB; GEOADD of known places on the sorted sets; XADD (explicit IDs, values
//! up to 6 KB, exact MAXLEN trimming), XDEL, XTRIM, XGROUP CREATE/DESTROY/DELCONSUMER,
//! XREADGROUP (with and without NOACK), XACK, XCLAIM and XAUTOCLAIM on streams of small nodes,
//! their consumer groups checked whole: pending entries with owners and delivery counts,
//! consumers, last delivered IDs; DEL of any of them, big ones freed lazily), a MULTI/EXEC
//! block of up to four, or a script (EVALSHA of one that INCRs a counter, HSETs a hash and
//! SETs two or three strings; or of one that SETs and APPENDs, then fails: its writes before
//! the error stay, as in Redis).
//! Replies come in order, so after a restart each client's keys must be its acknowledged
//! requests plus some prefix of the requests it still had in flight: an EXEC, and a
//! script, is whole or absent. Between the kill and the restart, `daisy pool check` must pass (records, types,
//! expiry counts, the lazyfree queue, reachability).

use crate::kvbench::{encode, Conn, Reply};
use anyhow::{anyhow, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub kills: u64,
    pub seed: u64,
    /// The `daisy` binary (`serve` and `pool check`).
    pub daisy_exe: PathBuf,
    pub clients: usize,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub kills: u64,
    /// Acknowledged commands whose effect was verified after a restart.
    pub acknowledged_verified: u64,
    /// Commands in flight at a kill that were found applied (each whole).
    pub in_flight_applied: u64,
    /// Clients whose keys were not their acknowledged writes plus a prefix of those in flight.
    pub lost: u64,
    pub failures: u64,
    pub messages: Vec<String>,
    pub seed: u64,
    pub seconds: f64,
}

/// A `daisy serve` child on a free port (read back from its start-up line); killed when
/// dropped.
pub struct Served {
    pub child: Child,
    pub port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `exe serve --port 0 --pool POOL EXTRA...`.
pub fn serve(exe: &Path, pool: &Path, extra: &[&str]) -> Result<Served> {
    let mut child = Command::new(exe)
        .args(["serve", "--port", "0", "--pool"])
        .arg(pool)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow!("{}: {e}", exe.display()))?;
    let mut err = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    let port = line
        .rsplit_once("listening on ")
        .and_then(|(_, a)| a.split_whitespace().next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok());
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    let mut served = Served { child, port: 0 };
    match port {
        Some(port) => {
            served.port = port;
            Ok(served)
        }
        None => Err(anyhow!("daisy serve did not start: {}", line.trim())),
    }
}

/// One command on a new connection (the benchmark's RESP client); its reply.
pub fn call(port: u16, args: &[&str]) -> Result<Reply> {
    Conn::connect(port, Duration::from_secs(5))?.cmd(args)
}

// ---- the model -----------------------------------------------------------------------------

/// A value as the model keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    List(std::collections::VecDeque<Vec<u8>>),
    /// member -> score (the torture's scores are integers).
    ZSet(BTreeMap<Vec<u8>, i64>),
    Stream(StreamModel),
}

/// A stream ID as the model keeps it: (ms, seq).
type Sid = (u64, u64);

fn sid(id: Sid) -> Vec<u8> {
    format!("{}-{}", id.0, id.1).into_bytes()
}

fn parse_sid(b: &[u8]) -> Option<Sid> {
    let s = std::str::from_utf8(b).ok()?;
    let (ms, seq) = s.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// A stream as the model keeps it: live entries, the last ID, the consumer groups.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StreamModel {
    entries: BTreeMap<Sid, Vec<Vec<u8>>>,
    last: Sid,
    groups: BTreeMap<Vec<u8>, GroupModel>,
}

/// A consumer group: its last delivered ID, pending entries (owner, delivery count), and its
/// consumers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GroupModel {
    last: Sid,
    pending: BTreeMap<Sid, (Vec<u8>, u64)>,
    consumers: BTreeSet<Vec<u8>>,
}

/// A sorted set's members in ZRANGE order (score, then member).
fn zset_order(z: &BTreeMap<Vec<u8>, i64>) -> Vec<(Vec<u8>, i64)> {
    let mut v: Vec<(Vec<u8>, i64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// A key's value and whether it has an expiry time.
pub type Model = BTreeMap<Vec<u8>, (Val, bool)>;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TTL_MS: u64 = 3_600_000;
/// String keys per client (`c<c>:k<i>`); hashes and sets have `COLL_KEYS` each.
const KEYS: u64 = 24;
/// GEOADD's places: longitude, latitude and the score Redis 7.0.15 stores for them.
const PLACES: [(&str, &str, i64); 3] = [
    ("13.361389", "38.115556", 3_479_099_956_230_698),
    ("15.087269", "37.502669", 3_479_447_370_796_909),
    ("-0.1275", "51.507222", 2_163_557_714_840_001),
];
const COLL_KEYS: u64 = 6;
/// Stream keys per client (`c<c>:x<i>`), their groups and consumers.
const STREAM_KEYS: u64 = 3;
const GROUPS: [&str; 2] = ["ga", "gb"];
const CONSUMERS: [&str; 3] = ["alice", "bob", "carol"];

/// One random command on client `c`'s keys (strings, hashes that outgrow their packed
/// encoding, sets of integers and strings, big sets freed lazily when deleted).
fn one_command(rng: &mut Rng, c: usize, next_ms: &mut u64) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| format!("c{c}:k{}", rng.below(KEYS)).into_bytes();
    let hkey = |rng: &mut Rng| format!("c{c}:h{}", rng.below(COLL_KEYS)).into_bytes();
    let skey = |rng: &mut Rng| format!("c{c}:s{}", rng.below(COLL_KEYS)).into_bytes();
    let lkey = |rng: &mut Rng| format!("c{c}:l{}", rng.below(COLL_KEYS)).into_bytes();
    // List items: few distinct short ones (LREM finds them), now and then a long one (a list
    // passes 8 KiB of items, the packed limit, after a few dozen pushes).
    let item = |rng: &mut Rng| match rng.below(10) {
        0 => vec![b'A' + rng.below(26) as u8; 300 + rng.below(1500) as usize],
        _ => format!("i{}", rng.below(8)).into_bytes(),
    };
    let zkey = |rng: &mut Rng| format!("c{c}:z{}", rng.below(COLL_KEYS)).into_bytes();
    let value = |rng: &mut Rng| {
        let n = match rng.below(50) {
            0 => 60_000 + rng.below(60_000),
            _ => 1 + rng.below(600),
        } as usize;
        vec![b'a' + rng.below(26) as u8; n]
    };
    let member = |rng: &mut Rng| match rng.below(3) {
        0 => format!("m{}", rng.below(300)).into_bytes(),
        _ => rng.below(1000).to_string().into_bytes(),
    };
    let v = |s: &str| s.as_bytes().to_vec();
    if rng.below(4) == 0 {
        return stream_command(rng, c, next_ms);
    }
    match rng.below(26) {
        0 | 1 => vec![v("SET"), key(rng), value(rng)],
        2 => vec![
            v("SET"),
            key(rng),
            value(rng),
            v("PX"),
            v(&TTL_MS.to_string()),
        ],
        3 => {
            let k = match rng.below(6) {
                0 => key(rng),
                1 => hkey(rng),
                2 => lkey(rng),
                3 => zkey(rng),
                4 => format!("c{c}:x{}", rng.below(STREAM_KEYS)).into_bytes(),
                _ => skey(rng),
            };
            vec![v("DEL"), k]
        }
        4 => vec![v("INCR"), format!("c{c}:n").into_bytes()],
        5 => vec![v("APPEND"), key(rng), value(rng)],
        6 => vec![
            v("MSET"),
            key(rng),
            value(rng),
            key(rng),
            value(rng),
            key(rng),
            value(rng),
        ],
        7 => vec![v("EXPIRE"), key(rng), v("3600")],
        8 => vec![v("PERSIST"), key(rng)],
        9 | 10 => {
            // Up to 30 fields a call: hashes cross 128 fields and become tables.
            let mut cmd = vec![v("HSET"), hkey(rng)];
            for _ in 0..1 + rng.below(30) {
                cmd.push(format!("f{}", rng.below(400)).into_bytes());
                let n = if rng.below(20) == 0 { 100 } else { 8 };
                cmd.push(vec![b'a' + rng.below(26) as u8; n]);
            }
            cmd
        }
        11 => vec![
            v("HDEL"),
            hkey(rng),
            format!("f{}", rng.below(400)).into_bytes(),
        ],
        12 => vec![v("HINCRBY"), hkey(rng), v("count"), v("7")],
        13 => {
            let mut cmd = vec![v("SADD"), skey(rng)];
            for _ in 0..1 + rng.below(40) {
                cmd.push(member(rng));
            }
            cmd
        }
        14 => vec![v("SREM"), skey(rng), member(rng), member(rng)],
        16 | 17 => {
            let mut cmd = vec![
                v(if rng.below(2) == 0 { "RPUSH" } else { "LPUSH" }),
                lkey(rng),
            ];
            for _ in 0..1 + rng.below(12) {
                cmd.push(item(rng));
            }
            cmd
        }
        18 => vec![
            v(if rng.below(2) == 0 { "LPOP" } else { "RPOP" }),
            lkey(rng),
            (1 + rng.below(6)).to_string().into_bytes(),
        ],
        19 => match rng.below(3) {
            0 => vec![v("LSET"), lkey(rng), v("0"), item(rng)],
            1 => vec![v("LREM"), lkey(rng), v("0"), item(rng)],
            _ => vec![v("LTRIM"), lkey(rng), v("1"), v("-2")],
        },
        20 => vec![v("LMOVE"), lkey(rng), lkey(rng), v("LEFT"), v("RIGHT")],
        22 | 23 => {
            // Up to 40 members a call: sorted sets cross 128 and become skiplists.
            let mut cmd = vec![v("ZADD"), zkey(rng)];
            for _ in 0..1 + rng.below(40) {
                cmd.push((rng.below(200) as i64 - 100).to_string().into_bytes());
                cmd.push(member(rng));
            }
            cmd
        }
        24 => vec![v("ZINCRBY"), zkey(rng), v("3"), member(rng)],
        21 => match rng.below(2) {
            // A bitmap that grows to 8 KB, one bit at a time.
            0 => vec![
                v("SETBIT"),
                format!("c{c}:b").into_bytes(),
                rng.below(65_536).to_string().into_bytes(),
                v(if rng.below(3) == 0 { "0" } else { "1" }),
            ],
            // A place on a sorted set (its score is the place's 52-bit geohash).
            _ => {
                let (lon, lat, _) = PLACES[rng.below(PLACES.len() as u64) as usize];
                vec![v("GEOADD"), zkey(rng), v(lon), v(lat), member(rng)]
            }
        },
        25 => match rng.below(2) {
            0 => vec![v("ZREM"), zkey(rng), member(rng), member(rng)],
            _ => vec![v("ZPOPMIN"), zkey(rng), v("2")],
        },
        _ => vec![v("EXPIRE"), hkey(rng), v("3600")],
    }
}

/// A script that writes several keys: INCR of KEYS[1], HSET of KEYS[2] `script` to that
/// number, SET of each further key to ARGV[1]:number; its reply is the number.
const SCRIPT_WRITES: &str = "local n = redis.call('INCR', KEYS[1]) redis.call('HSET', KEYS[2], 'script', n) for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[1] .. ':' .. n) end return n";
/// A script that fails after writing: SET of KEYS[1] and APPEND to KEYS[2] stay, then HINCRBY
/// by a non-number raises (the error names the script's SHA-1 and line 1).
const SCRIPT_FAILS: &str = "redis.call('SET', KEYS[1], ARGV[1]) redis.call('APPEND', KEYS[2], ARGV[1]) return redis.call('HINCRBY', KEYS[3], 'count', 'x')";

/// The SHA-1s of [`SCRIPT_WRITES`] and [`SCRIPT_FAILS`], as SCRIPT LOAD gave them.
type Shas = [String; 2];

/// A script request (EVALSHA) on client `c`'s keys.
fn script_request(rng: &mut Rng, c: usize, shas: &Shas) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| format!("c{c}:k{}", rng.below(KEYS)).into_bytes();
    let hkey = |rng: &mut Rng| format!("c{c}:h{}", rng.below(COLL_KEYS)).into_bytes();
    let arg = |rng: &mut Rng| format!("v{}", rng.below(1000)).into_bytes();
    if rng.below(3) == 0 {
        let (k1, k2, h) = (key(rng), key(rng), hkey(rng));
        vec![
            b"EVALSHA".to_vec(),
            shas[1].clone().into_bytes(),
            b"3".to_vec(),
            k1,
            k2,
            h,
            arg(rng),
        ]
    } else {
        let mut cmd = vec![
            b"EVALSHA".to_vec(),
            shas[0].clone().into_bytes(),
            Vec::new(),
            format!("c{c}:n").into_bytes(),
            hkey(rng),
        ];
        // Two or three strings: 4 or 5 keys in all (3 names SCRIPT_FAILS in `apply_one`).
        for _ in 0..2 + rng.below(2) {
            cmd.push(key(rng));
        }
        cmd[2] = (cmd.len() - 3).to_string().into_bytes();
        cmd.push(arg(rng));
        cmd
    }
}

/// A stream command on client `c`'s streams: XADD with the next ID (`next_ms` grows), XDEL,
/// XTRIM, and the consumer group commands. Idle times are 0, so replies do not depend on the
/// clock.
fn stream_command(rng: &mut Rng, c: usize, next_ms: &mut u64) -> Vec<Vec<u8>> {
    let v = |s: &str| s.as_bytes().to_vec();
    let key = format!("c{c}:x{}", rng.below(STREAM_KEYS)).into_bytes();
    let group = v(GROUPS[rng.below(GROUPS.len() as u64) as usize]);
    let consumer = v(CONSUMERS[rng.below(CONSUMERS.len() as u64) as usize]);
    // An ID of an entry added lately (or not: then nothing matches).
    let recent = |rng: &mut Rng| sid((next_ms.saturating_sub(rng.below(40)), 1));
    match rng.below(20) {
        0..=6 => {
            *next_ms += 1;
            let mut cmd = vec![v("XADD"), key];
            if rng.below(8) == 0 {
                cmd.extend([v("MAXLEN"), (5 + rng.below(30)).to_string().into_bytes()]);
            }
            cmd.push(sid((*next_ms, 1)));
            for f in 0..1 + rng.below(3) {
                cmd.push(format!("f{f}").into_bytes());
                let n = if rng.below(30) == 0 {
                    6000
                } else {
                    1 + rng.below(40)
                };
                cmd.push(vec![b'a' + rng.below(26) as u8; n as usize]);
            }
            cmd
        }
        7 => vec![v("XDEL"), key, recent(rng), recent(rng)],
        8 => vec![
            v("XTRIM"),
            key,
            v("MAXLEN"),
            (10 + rng.below(40)).to_string().into_bytes(),
        ],
        9 => vec![v("XGROUP"), v("CREATE"), key, group, v("0"), v("MKSTREAM")],
        10 => match rng.below(4) {
            0 => vec![v("XGROUP"), v("DESTROY"), key, group],
            _ => vec![v("XGROUP"), v("DELCONSUMER"), key, group, consumer],
        },
        11..=13 => {
            let mut cmd = vec![v("XREADGROUP"), v("GROUP"), group, consumer];
            cmd.extend([v("COUNT"), (1 + rng.below(5)).to_string().into_bytes()]);
            if rng.below(6) == 0 {
                cmd.push(v("NOACK"));
            }
            cmd.extend([v("STREAMS"), key, v(">")]);
            cmd
        }
        14..=16 => vec![v("XACK"), key, group, recent(rng), recent(rng), recent(rng)],
        17 | 18 => {
            let mut cmd = vec![
                v("XCLAIM"),
                key,
                group,
                consumer,
                v("0"),
                recent(rng),
                recent(rng),
            ];
            if rng.below(3) == 0 {
                cmd.push(v("FORCE"));
            }
            cmd.push(v("JUSTID"));
            cmd
        }
        _ => vec![
            v("XAUTOCLAIM"),
            key,
            group,
            consumer,
            v("0"),
            recent(rng),
            v("COUNT"),
            (1 + rng.below(4)).to_string().into_bytes(),
            v("JUSTID"),
        ],
    }
}

/// A random request on client `c`'s keys: one command, a MULTI/EXEC block of a few, or a
/// script.
fn random_request(rng: &mut Rng, c: usize, shas: &Shas, next_ms: &mut u64) -> Vec<Vec<Vec<u8>>> {
    if rng.below(10) == 0 {
        return vec![script_request(rng, c, shas)];
    }
    if rng.below(6) == 0 {
        let mut block = vec![vec![b"MULTI".to_vec()]];
        for _ in 0..1 + rng.below(4) {
            block.push(one_command(rng, c, next_ms));
        }
        block.push(vec![b"EXEC".to_vec()]);
        block
    } else {
        vec![one_command(rng, c, next_ms)]
    }
}

/// The stream at `key` in the model (None when the key holds none).
fn stream_mut<'m>(m: &'m mut Model, key: &[u8]) -> Option<&'m mut StreamModel> {
    match m.get_mut(key) {
        Some((Val::Stream(s), _)) => Some(s),
        _ => None,
    }
}

/// Trim to the newest `max` entries; how many went.
fn trim_model(s: &mut StreamModel, max: usize) -> usize {
    let mut n = 0;
    while s.entries.len() > max {
        let first = *s.entries.keys().next().expect("not empty");
        s.entries.remove(&first);
        n += 1;
    }
    n
}

/// An entry as a reply: `[id, [field, value, ...]]`.
fn entry_reply(id: Sid, fields: &[Vec<u8>]) -> Reply {
    Reply::Array(Some(vec![
        Reply::Bulk(Some(sid(id))),
        Reply::Array(Some(
            fields
                .iter()
                .map(|f| Reply::Bulk(Some(f.clone())))
                .collect(),
        )),
    ]))
}

fn bulk_ids(ids: &[Sid]) -> Reply {
    Reply::Array(Some(
        ids.iter().map(|i| Reply::Bulk(Some(sid(*i)))).collect(),
    ))
}

fn nogroup(key: &[u8], group: &[u8]) -> Reply {
    Reply::Error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Apply a stream command to the model; the reply the server must give.
fn apply_stream(m: &mut Model, cmd: &[Vec<u8>]) -> Reply {
    let key = &cmd[1];
    let id_arg = |b: &[u8]| parse_sid(b).expect("the torture's IDs are full");
    match &cmd[0][..] {
        b"XADD" => {
            let s = match m.get_mut(key) {
                Some((Val::Stream(s), _)) => s,
                _ => {
                    m.insert(key.clone(), (Val::Stream(StreamModel::default()), false));
                    stream_mut(m, key).expect("just made")
                }
            };
            let (max, at) = if cmd[2] == b"MAXLEN" {
                (
                    Some(
                        String::from_utf8_lossy(&cmd[3])
                            .parse::<usize>()
                            .expect("n"),
                    ),
                    4,
                )
            } else {
                (None, 2)
            };
            let id = id_arg(&cmd[at]);
            assert!(id > s.last, "the torture's IDs grow");
            s.entries.insert(id, cmd[at + 1..].to_vec());
            s.last = id;
            if let Some(max) = max {
                trim_model(s, max);
            }
            Reply::Bulk(Some(cmd[at].clone()))
        }
        b"XDEL" => {
            let Some(s) = stream_mut(m, key) else {
                return Reply::Int(0);
            };
            let mut n = 0;
            for a in &cmd[2..] {
                n += s.entries.remove(&id_arg(a)).is_some() as i64;
            }
            Reply::Int(n)
        }
        b"XTRIM" => match stream_mut(m, key) {
            None => Reply::Int(0),
            Some(s) => {
                let max: usize = String::from_utf8_lossy(&cmd[3]).parse().expect("n");
                Reply::Int(trim_model(s, max) as i64)
            }
        },
        b"XGROUP" => {
            let group = &cmd[3];
            match &cmd[1][..] {
                b"CREATE" => {
                    let key = &cmd[2];
                    if !m.contains_key(key) {
                        m.insert(key.clone(), (Val::Stream(StreamModel::default()), false));
                    }
                    let s = stream_mut(m, key).expect("stream keys hold streams");
                    if s.groups.contains_key(group) {
                        return Reply::Error("BUSYGROUP Consumer Group name already exists".into());
                    }
                    s.groups.insert(group.clone(), GroupModel::default());
                    Reply::Simple("OK".into())
                }
                sub => {
                    let key = &cmd[2];
                    let Some(s) = stream_mut(m, key) else {
                        return Reply::Error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.".into());
                    };
                    if sub == b"DESTROY" {
                        return Reply::Int(s.groups.remove(group).is_some() as i64);
                    }
                    let Some(g) = s.groups.get_mut(group) else {
                        return Reply::Error(format!(
                            "NOGROUP No such consumer group '{}' for key name '{}'",
                            String::from_utf8_lossy(group),
                            String::from_utf8_lossy(key)
                        ));
                    };
                    // DELCONSUMER
                    let who = &cmd[4];
                    if !g.consumers.remove(who) {
                        return Reply::Int(0);
                    }
                    let before = g.pending.len();
                    g.pending.retain(|_, (o, _)| o != who);
                    Reply::Int((before - g.pending.len()) as i64)
                }
            }
        }
        b"XREADGROUP" => {
            let (group, consumer) = (&cmd[2], &cmd[3]);
            let count: usize = String::from_utf8_lossy(&cmd[5]).parse().expect("count");
            let noack = cmd.iter().any(|a| a == b"NOACK");
            let key = &cmd[cmd.len() - 2];
            let Some(s) = stream_mut(m, key) else {
                return Reply::Error(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                ));
            };
            let entries = &s.entries;
            let Some(g) = s.groups.get_mut(group) else {
                return Reply::Error(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                ));
            };
            let new: Vec<(Sid, Vec<Vec<u8>>)> = entries
                .range((
                    std::ops::Bound::Excluded(g.last),
                    std::ops::Bound::Unbounded,
                ))
                .take(count)
                .map(|(i, f)| (*i, f.clone()))
                .collect();
            if new.is_empty() {
                return Reply::Array(None);
            }
            g.consumers.insert(consumer.clone());
            let mut out = Vec::new();
            for (id, f) in &new {
                g.last = *id;
                if !noack {
                    g.pending.insert(*id, (consumer.clone(), 1));
                }
                out.push(entry_reply(*id, f));
            }
            Reply::Array(Some(vec![Reply::Array(Some(vec![
                Reply::Bulk(Some(key.clone())),
                Reply::Array(Some(out)),
            ]))]))
        }
        b"XACK" => {
            let group = &cmd[2];
            let Some(g) = stream_mut(m, key).and_then(|s| s.groups.get_mut(group)) else {
                return Reply::Int(0);
            };
            let mut n = 0;
            for a in &cmd[3..] {
                n += g.pending.remove(&id_arg(a)).is_some() as i64;
            }
            Reply::Int(n)
        }
        b"XCLAIM" => {
            let (group, consumer) = (&cmd[2], &cmd[3]);
            let force = cmd.iter().any(|a| a == b"FORCE");
            let Some(s) = stream_mut(m, key) else {
                return nogroup(key, group);
            };
            let entries = &s.entries;
            let Some(g) = s.groups.get_mut(group) else {
                return nogroup(key, group);
            };
            let mut out = Vec::new();
            for a in &cmd[5..] {
                let Some(id) = parse_sid(a) else {
                    break;
                };
                if !entries.contains_key(&id) {
                    g.pending.remove(&id);
                    continue;
                }
                let count = match g.pending.get(&id) {
                    Some((_, n)) => *n,
                    None if force => 1,
                    None => continue,
                };
                g.consumers.insert(consumer.clone());
                g.pending.insert(id, (consumer.clone(), count));
                out.push(id);
            }
            bulk_ids(&out)
        }
        b"XAUTOCLAIM" => {
            let (group, consumer) = (&cmd[2], &cmd[3]);
            let start = id_arg(&cmd[5]);
            let mut count: usize = String::from_utf8_lossy(&cmd[7]).parse().expect("count");
            let Some(s) = stream_mut(m, key) else {
                return nogroup(key, group);
            };
            let entries = &s.entries;
            let Some(g) = s.groups.get_mut(group) else {
                return nogroup(key, group);
            };
            let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
            let mut cursor = start;
            let mut eof = false;
            while count > 0 {
                let Some((&id, _)) = g.pending.range(cursor..).next() else {
                    eof = true;
                    break;
                };
                cursor = (id.0, id.1 + 1);
                if !entries.contains_key(&id) {
                    g.pending.remove(&id);
                    deleted.push(id);
                } else {
                    let n = g.pending[&id].1;
                    g.consumers.insert(consumer.clone());
                    g.pending.insert(id, (consumer.clone(), n));
                    claimed.push(id);
                }
                count -= 1;
            }
            let next = if eof {
                (0, 0)
            } else {
                g.pending.range(cursor..).next().map_or((0, 0), |(i, _)| *i)
            };
            Reply::Array(Some(vec![
                Reply::Bulk(Some(sid(next))),
                bulk_ids(&claimed),
                bulk_ids(&deleted),
            ]))
        }
        other => unreachable!("{}", String::from_utf8_lossy(other)),
    }
}

fn int_ok(n: usize) -> Reply {
    Reply::Int(n as i64)
}

/// Apply `cmd` to the model; the reply the server must give.
fn apply_one(m: &mut Model, cmd: &[Vec<u8>]) -> Reply {
    if cmd[0].starts_with(b"X") {
        return apply_stream(m, cmd);
    }
    match &cmd[0][..] {
        b"SET" => {
            m.insert(cmd[1].clone(), (Val::Str(cmd[2].clone()), cmd.len() > 3));
            Reply::Simple("OK".into())
        }
        b"DEL" => int_ok(m.remove(&cmd[1]).is_some() as usize),
        b"INCR" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Str(b"0".to_vec()), false));
            let Val::Str(s) = &mut e.0 else {
                unreachable!("counters are strings")
            };
            let n = String::from_utf8_lossy(s).parse::<i64>().unwrap_or(0) + 1;
            *s = n.to_string().into_bytes();
            Reply::Int(n)
        }
        b"APPEND" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Str(Vec::new()), false));
            let Val::Str(s) = &mut e.0 else {
                unreachable!("string keys hold strings")
            };
            s.extend_from_slice(&cmd[2]);
            int_ok(s.len())
        }
        b"MSET" => {
            for kv in cmd[1..].chunks(2) {
                m.insert(kv[0].clone(), (Val::Str(kv[1].clone()), false));
            }
            Reply::Simple("OK".into())
        }
        b"EXPIRE" => match m.get_mut(&cmd[1]) {
            Some(e) => {
                e.1 = true;
                Reply::Int(1)
            }
            None => Reply::Int(0),
        },
        b"PERSIST" => match m.get_mut(&cmd[1]) {
            Some(e) if e.1 => {
                e.1 = false;
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        },
        b"HSET" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Hash(BTreeMap::new()), false));
            let Val::Hash(h) = &mut e.0 else {
                unreachable!("hash keys hold hashes")
            };
            let mut new = 0;
            for fv in cmd[2..].chunks(2) {
                new += h.insert(fv[0].clone(), fv[1].clone()).is_none() as usize;
            }
            int_ok(new)
        }
        b"HDEL" => {
            let mut n = 0;
            if let Some((Val::Hash(h), _)) = m.get_mut(&cmd[1]) {
                n = h.remove(&cmd[2]).is_some() as usize;
                if h.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            int_ok(n)
        }
        b"HINCRBY" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Hash(BTreeMap::new()), false));
            let Val::Hash(h) = &mut e.0 else {
                unreachable!("hash keys hold hashes")
            };
            let cur: i64 = h
                .get(&cmd[2])
                .map_or(0, |v| String::from_utf8_lossy(v).parse().unwrap_or(0));
            let n = cur + 7;
            h.insert(cmd[2].clone(), n.to_string().into_bytes());
            Reply::Int(n)
        }
        b"SADD" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Set(BTreeSet::new()), false));
            let Val::Set(s) = &mut e.0 else {
                unreachable!("set keys hold sets")
            };
            int_ok(cmd[2..].iter().filter(|x| s.insert(x.to_vec())).count())
        }
        b"SREM" => {
            let mut n = 0;
            if let Some((Val::Set(s), _)) = m.get_mut(&cmd[1]) {
                n = cmd[2..].iter().filter(|x| s.remove(*x)).count();
                if s.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            int_ok(n)
        }
        b"RPUSH" | b"LPUSH" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::List(Default::default()), false));
            let Val::List(l) = &mut e.0 else {
                unreachable!("list keys hold lists")
            };
            for x in &cmd[2..] {
                if cmd[0] == b"RPUSH" {
                    l.push_back(x.clone());
                } else {
                    l.push_front(x.clone());
                }
            }
            int_ok(l.len())
        }
        b"LPOP" | b"RPOP" => {
            let Some((Val::List(l), _)) = m.get_mut(&cmd[1]) else {
                return Reply::Array(None);
            };
            let n: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap_or(1);
            let mut out = Vec::new();
            for _ in 0..n {
                let x = if cmd[0] == b"LPOP" {
                    l.pop_front()
                } else {
                    l.pop_back()
                };
                match x {
                    Some(x) => out.push(Reply::Bulk(Some(x))),
                    None => break,
                }
            }
            if l.is_empty() {
                m.remove(&cmd[1]);
            }
            Reply::Array(Some(out))
        }
        b"LSET" => match m.get_mut(&cmd[1]) {
            Some((Val::List(l), _)) => {
                l[0] = cmd[3].clone();
                Reply::Simple("OK".into())
            }
            _ => Reply::Error("ERR no such key".into()),
        },
        b"LREM" => {
            let mut n = 0;
            if let Some((Val::List(l), _)) = m.get_mut(&cmd[1]) {
                let before = l.len();
                l.retain(|x| *x != cmd[3]);
                n = before - l.len();
                if l.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            int_ok(n)
        }
        b"LTRIM" => {
            if let Some((Val::List(l), _)) = m.get_mut(&cmd[1]) {
                l.pop_front();
                l.pop_back();
                if l.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            Reply::Simple("OK".into())
        }
        b"LMOVE" => {
            let Some((Val::List(l), _)) = m.get_mut(&cmd[1]) else {
                return Reply::Bulk(None);
            };
            let x = l.pop_front().expect("lists in the model are never empty");
            if l.is_empty() {
                m.remove(&cmd[1]);
            }
            let e = m
                .entry(cmd[2].clone())
                .or_insert((Val::List(Default::default()), false));
            let Val::List(d) = &mut e.0 else {
                unreachable!("list keys hold lists")
            };
            d.push_back(x.clone());
            Reply::Bulk(Some(x))
        }
        b"SETBIT" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::Str(Vec::new()), false));
            let Val::Str(b) = &mut e.0 else {
                unreachable!("the bitmap key holds a string")
            };
            let off: usize = String::from_utf8_lossy(&cmd[2]).parse().expect("offset");
            let (byte, mask) = (off / 8, 0x80u8 >> (off % 8));
            if b.len() <= byte {
                b.resize(byte + 1, 0);
            }
            let old = b[byte] & mask != 0;
            if cmd[3] == b"1" {
                b[byte] |= mask;
            } else {
                b[byte] &= !mask;
            }
            int_ok(old as usize)
        }
        b"GEOADD" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::ZSet(BTreeMap::new()), false));
            let Val::ZSet(z) = &mut e.0 else {
                unreachable!("zset keys hold sorted sets")
            };
            let score = PLACES
                .iter()
                .find(|p| p.0.as_bytes() == cmd[2])
                .expect("a known place")
                .2;
            int_ok(z.insert(cmd[4].clone(), score).is_none() as usize)
        }
        b"ZADD" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::ZSet(BTreeMap::new()), false));
            let Val::ZSet(z) = &mut e.0 else {
                unreachable!("zset keys hold sorted sets")
            };
            let mut new = 0;
            for sm in cmd[2..].chunks(2) {
                let s: i64 = String::from_utf8_lossy(&sm[0]).parse().unwrap_or(0);
                new += z.insert(sm[1].clone(), s).is_none() as usize;
            }
            int_ok(new)
        }
        b"ZINCRBY" => {
            let e = m
                .entry(cmd[1].clone())
                .or_insert((Val::ZSet(BTreeMap::new()), false));
            let Val::ZSet(z) = &mut e.0 else {
                unreachable!("zset keys hold sorted sets")
            };
            let s = z.entry(cmd[3].clone()).or_insert(0);
            *s += 3;
            Reply::Bulk(Some(s.to_string().into_bytes()))
        }
        b"ZREM" => {
            let mut n = 0;
            if let Some((Val::ZSet(z), _)) = m.get_mut(&cmd[1]) {
                for x in &cmd[2..] {
                    n += z.remove(x).is_some() as usize;
                }
                if z.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            int_ok(n)
        }
        b"ZPOPMIN" => {
            let mut out = Vec::new();
            if let Some((Val::ZSet(z), _)) = m.get_mut(&cmd[1]) {
                for (mem, s) in zset_order(z).into_iter().take(2) {
                    z.remove(&mem);
                    out.push(Reply::Bulk(Some(mem)));
                    out.push(Reply::Bulk(Some(s.to_string().into_bytes())));
                }
                if z.is_empty() {
                    m.remove(&cmd[1]);
                }
            }
            Reply::Array(Some(out))
        }
        b"EVALSHA" => {
            let n: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap_or(0);
            let (keys, argv) = (&cmd[3..3 + n], &cmd[3 + n..]);
            if n == 3 {
                // SCRIPT_FAILS (SCRIPT_WRITES has 4 or 5 keys): the writes before the error
                // stay.
                apply_one(m, &[b"SET".to_vec(), keys[0].clone(), argv[0].clone()]);
                apply_one(m, &[b"APPEND".to_vec(), keys[1].clone(), argv[0].clone()]);
                return Reply::Error(format!(
                    "ERR value is not an integer or out of range script: {}, on @user_script:1.",
                    String::from_utf8_lossy(&cmd[1])
                ));
            }
            let Reply::Int(num) = apply_one(m, &[b"INCR".to_vec(), keys[0].clone()]) else {
                unreachable!("INCR answers a number")
            };
            let num = num.to_string().into_bytes();
            let hset = [
                b"HSET".to_vec(),
                keys[1].clone(),
                b"script".to_vec(),
                num.clone(),
            ];
            apply_one(m, &hset);
            for k in &keys[2..] {
                let mut val = argv[0].clone();
                val.push(b':');
                val.extend_from_slice(&num);
                apply_one(m, &[b"SET".to_vec(), k.clone(), val]);
            }
            Reply::Int(String::from_utf8_lossy(&num).parse().unwrap_or(0))
        }
        other => unreachable!("{}", String::from_utf8_lossy(other)),
    }
}

/// Apply a request (a command, or a MULTI/EXEC block) to the model; the replies the server
/// must give, one per command sent.
fn apply(m: &mut Model, req: &[Vec<Vec<u8>>]) -> Vec<Reply> {
    if req.len() == 1 {
        return vec![apply_one(m, &req[0])];
    }
    let mut out = vec![Reply::Simple("OK".into())];
    out.extend(
        req[1..req.len() - 1]
            .iter()
            .map(|_| Reply::Simple("QUEUED".into())),
    );
    let exec: Vec<Reply> = req[1..req.len() - 1]
        .iter()
        .map(|c| apply_one(m, c))
        .collect();
    out.push(Reply::Array(Some(exec)));
    out
}

/// A client's keys as the server holds them.
fn server_state(port: u16, c: usize) -> Result<Model> {
    let mut m = Model::new();
    let mut keys: Vec<String> = (0..KEYS).map(|i| format!("c{c}:k{i}")).collect();
    keys.push(format!("c{c}:n"));
    keys.push(format!("c{c}:b"));
    for i in 0..COLL_KEYS {
        keys.push(format!("c{c}:h{i}"));
        keys.push(format!("c{c}:s{i}"));
        keys.push(format!("c{c}:l{i}"));
        keys.push(format!("c{c}:z{i}"));
    }
    for i in 0..STREAM_KEYS {
        keys.push(format!("c{c}:x{i}"));
    }
    let bulk = |r: &Reply| match r {
        Reply::Bulk(Some(b)) => Ok(b.clone()),
        r => Err(anyhow!("expected a bulk string, got {r:?}")),
    };
    for k in keys {
        let val = match call(port, &["TYPE", &k])? {
            Reply::Simple(t) if t == "none" => continue,
            Reply::Simple(t) if t == "string" => Val::Str(bulk(&call(port, &["GET", &k])?)?),
            Reply::Simple(t) if t == "hash" => match call(port, &["HGETALL", &k])? {
                Reply::Array(Some(a)) => Val::Hash(
                    a.chunks(2)
                        .map(|p| Ok((bulk(&p[0])?, bulk(&p[1])?)))
                        .collect::<Result<_>>()?,
                ),
                r => return Err(anyhow!("HGETALL {k}: {r:?}")),
            },
            Reply::Simple(t) if t == "list" => match call(port, &["LRANGE", &k, "0", "-1"])? {
                Reply::Array(Some(a)) => Val::List(a.iter().map(bulk).collect::<Result<_>>()?),
                r => return Err(anyhow!("LRANGE {k}: {r:?}")),
            },
            Reply::Simple(t) if t == "set" => match call(port, &["SMEMBERS", &k])? {
                Reply::Array(Some(a)) => Val::Set(a.iter().map(bulk).collect::<Result<_>>()?),
                r => return Err(anyhow!("SMEMBERS {k}: {r:?}")),
            },
            Reply::Simple(t) if t == "zset" => {
                match call(port, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])? {
                    Reply::Array(Some(a)) => {
                        let mut z = BTreeMap::new();
                        let mut last: Option<(i64, Vec<u8>)> = None;
                        for p in a.chunks(2) {
                            let (mem, s) = (bulk(&p[0])?, bulk(p.get(1).unwrap_or(&p[0]))?);
                            let s: i64 = String::from_utf8_lossy(&s)
                                .parse()
                                .map_err(|_| anyhow!("ZRANGE {k}: a score that is no integer"))?;
                            // The server's order must be (score, member).
                            if last.as_ref().is_some_and(|l| *l >= (s, mem.clone())) {
                                return Err(anyhow!("ZRANGE {k}: out of order"));
                            }
                            last = Some((s, mem.clone()));
                            z.insert(mem, s);
                        }
                        Val::ZSet(z)
                    }
                    r => return Err(anyhow!("ZRANGE {k}: {r:?}")),
                }
            }
            Reply::Simple(t) if t == "stream" => Val::Stream(stream_state(port, &k)?),
            r => return Err(anyhow!("TYPE {k}: {r:?}")),
        };
        let ttl = match call(port, &["PTTL", &k])? {
            Reply::Int(-1) => false,
            Reply::Int(t) if t > 0 && t as u64 <= TTL_MS => true,
            r => return Err(anyhow!("PTTL {k}: {r:?}")),
        };
        m.insert(k.into_bytes(), (val, ttl));
    }
    Ok(m)
}

/// A stream as the server holds it: entries, last ID, groups with their last delivered IDs,
/// pending entries (owner, delivery count) and consumers.
fn stream_state(port: u16, k: &str) -> Result<StreamModel> {
    let bulk = |r: &Reply| match r {
        Reply::Bulk(Some(b)) => Ok(b.clone()),
        r => Err(anyhow!("{k}: expected a bulk string, got {r:?}")),
    };
    let arr = |r: Reply| match r {
        Reply::Array(Some(a)) => Ok(a),
        r => Err(anyhow!("{k}: expected an array, got {r:?}")),
    };
    let id = |r: &Reply| parse_sid(&bulk(r)?).ok_or_else(|| anyhow!("{k}: a bad ID"));
    // A flat (field, value, ...) reply's value for `name`.
    let field = |pairs: &[Reply], name: &str| -> Result<Reply> {
        pairs
            .chunks(2)
            .find(|p| matches!(&p[0], Reply::Bulk(Some(b)) if b == name.as_bytes()))
            .map(|p| p[1].clone())
            .ok_or_else(|| anyhow!("{k}: no {name}"))
    };
    let mut s = StreamModel::default();
    for e in arr(call(port, &["XRANGE", k, "-", "+"])?)? {
        let e = arr(e)?;
        let fields = arr(e[1].clone())?.iter().map(bulk).collect::<Result<_>>()?;
        s.entries.insert(id(&e[0])?, fields);
    }
    let info = arr(call(port, &["XINFO", "STREAM", k])?)?;
    s.last = id(&field(&info, "last-generated-id")?)?;
    for g in arr(call(port, &["XINFO", "GROUPS", k])?)? {
        let g = arr(g)?;
        let name = bulk(&field(&g, "name")?)?;
        let gname = String::from_utf8_lossy(&name).into_owned();
        let mut gm = GroupModel {
            last: id(&field(&g, "last-delivered-id")?)?,
            ..Default::default()
        };
        for p in arr(call(port, &["XPENDING", k, &gname, "-", "+", "1000000"])?)? {
            let p = arr(p)?;
            let count = match p[3] {
                Reply::Int(n) => n as u64,
                ref r => return Err(anyhow!("{k}: a delivery count {r:?}")),
            };
            gm.pending.insert(id(&p[0])?, (bulk(&p[1])?, count));
        }
        for cons in arr(call(port, &["XINFO", "CONSUMERS", k, &gname])?)? {
            gm.consumers.insert(bulk(&field(&arr(cons)?, "name")?)?);
        }
        s.groups.insert(name, gm);
    }
    Ok(s)
}

/// What one writer saw: the model of its acknowledged writes, the commands still in flight
/// when the connection broke, how many replies it checked, and a wrong reply if any.
struct Written {
    model: Model,
    /// Requests (commands, or MULTI/EXEC blocks) whose replies had not all arrived.
    in_flight: Vec<Vec<Vec<Vec<u8>>>>,
    acked: u64,
    wrong: Option<String>,
}

fn writer(port: u16, c: usize, seed: u64, mut m: Model) -> Written {
    let mut rng = Rng(seed | 1);
    let Ok(mut conn) = Conn::connect(port, Duration::from_secs(5)) else {
        return Written {
            model: m,
            in_flight: vec![],
            acked: 0,
            wrong: None,
        };
    };
    conn.set_read_timeout(Duration::from_secs(20));
    // The scripts' SHA-1s (the server keeps its script cache in the pool, so after a restart
    // they are there already; loading again changes nothing).
    let mut shas: Shas = Default::default();
    for (sha, body) in shas.iter_mut().zip([SCRIPT_WRITES, SCRIPT_FAILS]) {
        match conn.cmd(&["SCRIPT", "LOAD", body]) {
            Ok(Reply::Bulk(Some(s))) => *sha = String::from_utf8_lossy(&s).into_owned(),
            Ok(r) => {
                return Written {
                    model: m,
                    in_flight: vec![],
                    acked: 0,
                    wrong: Some(format!("client {c}: SCRIPT LOAD answered {r:?}")),
                }
            }
            Err(_) => {
                return Written {
                    model: m,
                    in_flight: vec![],
                    acked: 0,
                    wrong: None,
                }
            }
        }
    }
    // Small stream nodes: nodes start, fill, empty and go all the time. (Not persistent: set
    // again after every restart; it changes no reply.)
    if conn
        .cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"])
        .is_err()
    {
        return Written {
            model: m,
            in_flight: vec![],
            acked: 0,
            wrong: None,
        };
    }
    // Stream IDs continue after the largest this client's streams hold.
    let mut next_ms = m
        .values()
        .filter_map(|(v, _)| match v {
            Val::Stream(s) => Some(s.last.0),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        + 1;
    let mut acked = 0;
    loop {
        let batch: Vec<Vec<Vec<Vec<u8>>>> = (0..1 + rng.below(8))
            .map(|_| random_request(&mut rng, c, &shas, &mut next_ms))
            .collect();
        let mut wire = Vec::new();
        for cmd in batch.iter().flatten() {
            let args: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
            encode(&mut wire, &args);
        }
        if conn.send(&wire).is_err() {
            return Written {
                model: m,
                in_flight: batch,
                acked,
                wrong: None,
            };
        }
        for (i, req) in batch.iter().enumerate() {
            // A request counts as acknowledged when all its replies (EXEC's included) came.
            let mut got = Vec::with_capacity(req.len());
            for _ in req {
                match conn.read_reply() {
                    Ok(r) => got.push(r),
                    Err(_) => {
                        return Written {
                            model: m,
                            in_flight: batch[i..].to_vec(),
                            acked,
                            wrong: None,
                        }
                    }
                }
            }
            let want = apply(&mut m, req);
            acked += 1;
            if got != want {
                let wrong = format!(
                    "client {c}: {} answered {got:?}, expected {want:?}",
                    String::from_utf8_lossy(&req[0][0])
                );
                return Written {
                    model: m,
                    in_flight: vec![],
                    acked,
                    wrong: Some(wrong),
                };
            }
        }
    }
}

/// Run the torture; `progress` gets the kills done so far.
pub fn run(cfg: &Config, mut progress: impl FnMut(u64)) -> Result<Summary> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let pool = cfg.dir.join(format!(
        "daisy-kvcrash-{}-{}.pool",
        std::process::id(),
        cfg.seed
    ));
    let _ = std::fs::remove_file(&pool);
    let r = torture(cfg, &pool, &mut progress);
    let _ = std::fs::remove_file(&pool);
    r.map(|mut s| {
        s.seconds = t0.elapsed().as_secs_f64();
        s
    })
}

fn torture(cfg: &Config, pool: &Path, progress: &mut impl FnMut(u64)) -> Result<Summary> {
    let mut sum = Summary {
        seed: cfg.seed,
        ..Default::default()
    };
    let mut models: Vec<Model> = vec![Model::new(); cfg.clients];
    let mut rng = Rng(cfg.seed | 1);
    let fail = |sum: &mut Summary, m: String| {
        sum.failures += 1;
        if sum.messages.len() < 10 {
            sum.messages.push(format!(
                "{m} (replay: daisy crashtest --server --seed {})",
                cfg.seed
            ));
        }
    };
    for round in 0..cfg.kills {
        let mut srv = serve(&cfg.daisy_exe, pool, &[])?;
        let port = srv.port;
        let handles: Vec<_> = (0..cfg.clients)
            .map(|c| {
                let m = models[c].clone();
                let s = rng.next();
                std::thread::spawn(move || writer(port, c, s, m))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50 + rng.below(400)));
        let _ = srv.child.kill(); // SIGKILL
        let _ = srv.child.wait();
        drop(srv);
        let results: Vec<Written> = handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a client thread panicked")))
            .collect::<Result<_, _>>()?;
        sum.kills += 1;

        let check = Command::new(&cfg.daisy_exe)
            .args(["pool", "check"])
            .arg(pool)
            .output()?;
        if !check.status.success() {
            fail(
                &mut sum,
                format!(
                    "kill {round}: pool check failed: {}",
                    String::from_utf8_lossy(&check.stdout)
                        .lines()
                        .last()
                        .unwrap_or("")
                ),
            );
            break;
        }
        let srv = serve(&cfg.daisy_exe, pool, &[])?;
        for (c, w) in results.into_iter().enumerate() {
            if let Some(wrong) = w.wrong {
                fail(&mut sum, format!("kill {round}: {wrong}"));
            }
            let got = server_state(srv.port, c)?;
            let mut candidate = w.model.clone();
            let mut matched = (candidate == got).then_some(0);
            for (j, cmd) in w.in_flight.iter().enumerate() {
                if matched.is_some() {
                    break;
                }
                apply(&mut candidate, cmd);
                if candidate == got {
                    matched = Some(j + 1);
                }
            }
            match matched {
                Some(j) => {
                    sum.acknowledged_verified += w.acked;
                    sum.in_flight_applied += j as u64;
                }
                None => {
                    sum.lost += 1;
                    let differ: Vec<String> = w
                        .model
                        .iter()
                        .filter(|(k, v)| got.get(*k) != Some(v))
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .take(5)
                        .collect();
                    fail(
                        &mut sum,
                        format!(
                            "kill {round}, client {c}: the keys are not the acknowledged writes \
                             plus a prefix of the {} in flight; differing: {differ:?}",
                            w.in_flight.len()
                        ),
                    );
                }
            }
            models[c] = got;
        }
        drop(srv);
        progress(sum.kills);
        if sum.failures > 0 {
            break;
        }
    }
    Ok(sum)
}
