//! The KV server's workload under the simulator: numbered transactions, each a group of one
//! to six real server commands run by `daisy_kv::commands::execute`, as the event loop's
//! group commit runs them, on a keyspace pool: strings (SET, SET PX, INCR, APPEND, MSET,
//! GETEX, SETBIT, PFADD on HyperLogLogs that go sparse -> dense), hashes (HSET, HSETNX, HDEL, HINCRBY, HINCRBYFLOAT) and sets (SADD, SREM, SMOVE,
//! SINTERSTORE, SUNIONSTORE, SDIFFSTORE) that cross every encoding threshold a hash or set can
//! (packed -> table by size and by length, intset -> packed -> table; the thresholds are set
//! low, as CONFIG SET would), lists (RPUSH, LPUSH, LPOP, RPOP, LSET, LREM, LTRIM, LMOVE) that
//! outgrow a packed record and become sequences, grow and lose chunks, and a big one freed
//! lazily, streams (XADD with exact trimming, XDEL, XTRIM, COPY, and the consumer group
//! commands XGROUP CREATE/DESTROY/DELCONSUMER, XREADGROUP with and without NOACK, XACK,
//! XCLAIM, XAUTOCLAIM) on nodes of two entries, a big stream and a big group freed lazily,
//! sorted sets (ZADD, ZINCRBY, ZREM, ZPOPMIN, ZPOPMAX, ZREMRANGEBYSCORE, ZUNIONSTORE)
//! that go packed -> skiplist by size and by length (and GEOADD on them), and a big one of 400 members freed lazily
//! (its ZADD's redo record outgrows the workload's 64 KiB log slot: an overflow record),
//! keys of any type (DEL, EXPIRE, PERSIST, RENAME, COPY, MOVE,
//! RESTORE of a DUMP payload), databases (SELECT, SWAPDB, FLUSHDB, FLUSHALL), MULTI/EXEC
//! blocks, scripts (EVAL of one that writes several keys, and of one that fails after writing:
//! its writes before the error stay, as in Redis), and collections big enough to be freed lazily: after each transaction one bounded
//! lazyfree step runs in a transaction of its own, so the simulator crashes inside it too.
//! (SPOP, SRANDMEMBER and HRANDFIELD are random, so no model predicts them; SPOP's write is the
//! removal SREM makes, and the differential test checks their replies.)
//!
//! The model replays the same commands (a function of the seed and the transaction id) on a
//! `BTreeMap`; a crash image must recover to a keyspace that passes `pool check` (records,
//! types, expiry counts, the lazyfree queue, reachability) and equals the model after the
//! transactions that returned, or after the one in flight too (so an EXEC is whole or
//! absent). Commands that would fail on the model's state (a type clash) are left out, so
//! every command sent must succeed.

use anyhow::{anyhow, bail, Result};
use daisy::{Pool, PoolOptions};
use daisy_kv::commands::{self as cmd, Client, ServerState};
use daisy_kv::keyspace::{self, Keyspace, LAYOUT};
use daisy_kv::types::stream::{id::StreamId, GroupValue, StreamValue};
use daisy_kv::types::{Score, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// (database, key) -> value and whether an expiry time is set.
type Keys = BTreeMap<(u32, Vec<u8>), (Value, bool)>;

/// The keyspace after `applied` transactions.
#[derive(Clone, Debug, Default)]
pub struct KvModel {
    pub applied: u64,
    pub keys: Keys,
}

/// Encoding thresholds of the workload's server (low, so conversions happen often).
pub const CONFIG: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "6"),
    ("hash-max-listpack-value", "24"),
    ("set-max-intset-entries", "6"),
    ("set-max-listpack-entries", "8"),
    ("set-max-listpack-value", "24"),
    ("zset-max-listpack-entries", "8"),
    ("zset-max-listpack-value", "24"),
    ("list-max-listpack-size", "8"),
    ("stream-node-max-entries", "2"),
];

/// A script that writes several keys (EVAL): INCR of KEYS[1], HSET of KEYS[2] `script` to
/// that number, SET of each further key to ARGV[1]:number. A crash leaves all of it or none.
pub const SCRIPT_WRITES: &str = "local n = redis.call('INCR', KEYS[1]) \
    redis.call('HSET', KEYS[2], 'script', n) \
    for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[1] .. ':' .. n) end return n";
/// A script that fails after writing: SET KEYS[1] and APPEND to KEYS[2] stay (as in Redis,
/// nothing is rolled back), then HINCRBY by a non-number raises an error.
pub const SCRIPT_FAILS: &str = "redis.call('SET', KEYS[1], ARGV[1]) \
    redis.call('APPEND', KEYS[2], ARGV[1]) \
    return redis.call('HINCRBY', KEYS[3], 'n', 'x')";

/// The commands of transaction `id`.
pub fn commands(seed: u64, id: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xA076_1D64_78BD_642F));
    let v = |s: &str| s.as_bytes().to_vec();
    let skey = |rng: &mut SmallRng| format!("k{}", rng.gen_range(0..10)).into_bytes();
    let hkey = |rng: &mut SmallRng| format!("h{}", rng.gen_range(0..4)).into_bytes();
    let setkey = |rng: &mut SmallRng| format!("s{}", rng.gen_range(0..4)).into_bytes();
    let lkey = |rng: &mut SmallRng| format!("l{}", rng.gen_range(0..4)).into_bytes();
    let zkey = |rng: &mut SmallRng| format!("z{}", rng.gen_range(0..4)).into_bytes();
    let any_key = |rng: &mut SmallRng| match rng.gen_range(0..5) {
        0 => skey(rng),
        1 => hkey(rng),
        2 => lkey(rng),
        3 => zkey(rng),
        _ => setkey(rng),
    };
    // List items: a few distinct short ones (LREM finds them), now and then a long one (a
    // chunk of its own).
    let item = |rng: &mut SmallRng| {
        if rng.gen_range(0..10) == 0 {
            vec![b'L'; rng.gen_range(500..3000)]
        } else {
            format!("i{}", rng.gen_range(0..5)).into_bytes()
        }
    };
    let value = |rng: &mut SmallRng| {
        // Mostly small; now and then a few KB (a new, larger block).
        let n = if rng.gen_range(0..10) == 0 {
            rng.gen_range(1000..5000)
        } else {
            rng.gen_range(1..80)
        };
        vec![b'a' + rng.gen_range(0..26u8); n]
    };
    let field = |rng: &mut SmallRng| format!("f{}", rng.gen_range(0..12)).into_bytes();
    let member = |rng: &mut SmallRng| {
        if rng.gen_range(0..3) == 0 {
            format!("m{}", rng.gen_range(0..12)).into_bytes()
        } else {
            rng.gen_range(-20i32..20).to_string().into_bytes()
        }
    };
    let one = |rng: &mut SmallRng| -> Vec<Vec<Vec<u8>>> {
        match rng.gen_range(0..46) {
            0 | 1 => vec![vec![v("SET"), skey(rng), value(rng)]],
            2 => vec![vec![v("SET"), skey(rng), value(rng), v("PX"), v("3600000")]],
            3 => vec![vec![v("DEL"), any_key(rng)]],
            4 => vec![vec![v("INCR"), v("counter")]],
            5 => vec![vec![v("APPEND"), skey(rng), value(rng)]],
            6 => vec![vec![
                v("MSET"),
                skey(rng),
                value(rng),
                skey(rng),
                value(rng),
            ]],
            7 => vec![vec![v("EXPIRE"), any_key(rng), v("3600")]],
            8 => vec![vec![v("PERSIST"), any_key(rng)]],
            9 | 10 => {
                // A long value now and then converts a packed hash by length.
                let mut c = vec![v("HSET"), hkey(rng)];
                for _ in 0..rng.gen_range(1..4) {
                    c.push(field(rng));
                    let n = if rng.gen_range(0..8) == 0 { 40 } else { 5 };
                    c.push(vec![b'a' + rng.gen_range(0..26u8); n]);
                }
                vec![c]
            }
            11 => vec![vec![v("HDEL"), hkey(rng), field(rng), field(rng)]],
            12 => vec![vec![v("HINCRBY"), hkey(rng), v("n"), v("3")]],
            13 | 14 => {
                let mut c = vec![v("SADD"), setkey(rng)];
                for _ in 0..rng.gen_range(1..4) {
                    c.push(member(rng));
                }
                vec![c]
            }
            15 => vec![vec![v("SREM"), setkey(rng), member(rng), member(rng)]],
            16 => {
                // A collection big enough to be freed lazily when it goes.
                let big = format!("big{}", rng.gen_range(0..2)).into_bytes();
                let mut c = vec![v("SADD"), big];
                for i in 0..80 {
                    c.push(format!("x{}-{i}", rng.gen_range(0..1000)).into_bytes());
                }
                vec![c]
            }
            17 => vec![vec![v("RENAME"), any_key(rng), any_key(rng)]],
            20 => vec![vec![v("SMOVE"), setkey(rng), setkey(rng), member(rng)]],
            21 => {
                let op = ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"][rng.gen_range(0..3)];
                vec![vec![v(op), setkey(rng), setkey(rng), setkey(rng)]]
            }
            22 => vec![vec![v("COPY"), any_key(rng), any_key(rng), v("REPLACE")]],
            23 => vec![vec![v("MOVE"), any_key(rng), v("1")]],
            24 => vec![vec![v("SWAPDB"), v("0"), v("1")]],
            25 => vec![vec![v("HSETNX"), hkey(rng), field(rng), value(rng)]],
            26 => vec![vec![v("HINCRBYFLOAT"), hkey(rng), v("fl"), v("2")]],
            27 => vec![vec![v("GETEX"), skey(rng), v("PERSIST")]],
            28 => vec![vec![v("GETEX"), skey(rng), v("EX"), v("3600")]],
            29 => {
                // RESTORE of a value serialized by DUMP's format (a hash or a set).
                let k = if rng.gen_range(0..2) == 0 {
                    hkey(rng)
                } else {
                    setkey(rng)
                };
                let val = if k[0] == b'h' {
                    daisy_kv::rdb::Value::Hash(
                        (0..rng.gen_range(1..10))
                            .map(|i| (format!("r{i}").into_bytes(), value(rng)))
                            .collect(),
                    )
                } else {
                    daisy_kv::rdb::Value::Set(
                        (0..rng.gen_range(1..20))
                            .map(|i| format!("{}", i * 7).into_bytes())
                            .collect(),
                    )
                };
                let payload = daisy_kv::rdb::dump(&val, daisy_kv::rdb::Encoding::Compact);
                vec![vec![v("RESTORE"), k, v("0"), payload, v("REPLACE")]]
            }
            18 => {
                // The second database: write there, and now and then empty it.
                let mut c = vec![vec![v("SELECT"), v("1")]];
                if rng.gen_range(0..6) == 0 {
                    c.push(vec![v("FLUSHDB")]);
                } else {
                    c.push(vec![v("HSET"), hkey(rng), field(rng), value(rng)]);
                    c.push(vec![v("SADD"), setkey(rng), member(rng)]);
                }
                c.push(vec![v("SELECT"), v("0")]);
                c
            }
            19 => {
                // The big sets go whole.
                vec![vec![v("DEL"), v("big0"), v("big1")]]
            }
            30 if rng.gen_range(0..8) == 0 => vec![vec![v("FLUSHALL")]],
            31 => {
                // A set that outgrows one segment (a new key: its table is built fresh), then
                // loses half of it...
                let mut add = vec![v("SADD"), v("huge")];
                add.extend((0..1400).map(|i| format!("h{i}").into_bytes()));
                let mut rem = vec![v("SREM"), v("huge")];
                rem.extend((0..700).map(|i| format!("h{i}").into_bytes()));
                vec![vec![v("DEL"), v("huge")], add, rem]
            }
            32 => {
                // ...and most of the rest: 100 members are left in a table made for 1,400, so
                // this removal rebuilds it smaller (shrink). (700 removals a command: their log
                // fits the workload's record.)
                let mut rem = vec![v("SREM"), v("huge")];
                rem.extend((700..1300).map(|i| format!("h{i}").into_bytes()));
                vec![rem]
            }
            33 => vec![vec![v("DEL"), v("huge")]],
            34 | 35 => {
                let mut c = vec![v(["RPUSH", "LPUSH"][rng.gen_range(0..2)]), lkey(rng)];
                for _ in 0..rng.gen_range(1..6) {
                    c.push(item(rng));
                }
                vec![c]
            }
            36 => vec![vec![
                v(["LPOP", "RPOP"][rng.gen_range(0..2)]),
                lkey(rng),
                rng.gen_range(1..4).to_string().into_bytes(),
            ]],
            37 => match rng.gen_range(0..4) {
                0 => vec![vec![v("LSET"), lkey(rng), v("-1"), item(rng)]],
                1 => vec![vec![v("LREM"), lkey(rng), v("0"), item(rng)]],
                2 => vec![vec![v("LTRIM"), lkey(rng), v("1"), v("-2")]],
                _ => vec![vec![
                    v("LMOVE"),
                    lkey(rng),
                    lkey(rng),
                    v("LEFT"),
                    v("RIGHT"),
                ]],
            },
            38 => {
                // A list of a hundred chunks (items of 3,000 bytes, one a chunk), trimmed
                // (whole chunks onto the garbage chain) and pushed again (garbage freed)...
                let mut add = vec![v("RPUSH"), v("biglist")];
                add.extend((0..100).map(|i| vec![b'a' + (i % 26) as u8; 3000]));
                vec![
                    vec![v("DEL"), v("biglist")],
                    add,
                    vec![v("LTRIM"), v("biglist"), v("30"), v("-30")],
                    vec![v("LPUSH"), v("biglist"), v("head")],
                ]
            }
            39 => {
                // ...and deleted: freed lazily, in bounded steps.
                vec![vec![v("DEL"), v("biglist")]]
            }
            40 | 41 => {
                // A long member now and then converts a packed sorted set by length.
                let mut c = vec![v("ZADD"), zkey(rng)];
                for _ in 0..rng.gen_range(1..4) {
                    c.push(rng.gen_range(-5i32..5).to_string().into_bytes());
                    c.push(if rng.gen_range(0..10) == 0 {
                        vec![b'L'; 30]
                    } else {
                        member(rng)
                    });
                }
                vec![c]
            }
            42 => match rng.gen_range(0..3) {
                0 => vec![vec![v("ZINCRBY"), zkey(rng), v("2"), member(rng)]],
                1 => vec![vec![v("ZREM"), zkey(rng), member(rng), member(rng)]],
                _ => vec![vec![v("ZREMRANGEBYSCORE"), zkey(rng), v("-1"), v("1")]],
            },
            43 => {
                let name = if rng.gen_range(0..2) == 0 {
                    "ZPOPMIN"
                } else {
                    "ZPOPMAX"
                };
                vec![vec![v(name), zkey(rng), v("2")]]
            }
            44 => vec![vec![
                v("ZUNIONSTORE"),
                zkey(rng),
                v("2"),
                zkey(rng),
                zkey(rng),
            ]],
            45 => {
                // A sorted set big enough to be freed lazily (map and ordered index), then
                // gone again now and then. Its ZADD's record (about 100 KB) continues in an
                // overflow extent, so crashes land in big commits too.
                if rng.gen_range(0..3) == 0 {
                    vec![vec![v("DEL"), v("zbig")]]
                } else {
                    let mut c = vec![v("ZADD"), v("zbig")];
                    for i in 0..400 {
                        c.push(rng.gen_range(0..50).to_string().into_bytes());
                        c.push(format!("y{i}").into_bytes());
                    }
                    vec![c]
                }
            }
            _ => vec![vec![v("PERSIST"), any_key(rng)]],
        }
    };
    // The string-encoded types (SETBIT, PFADD, GEOADD on sorted sets) come from a random
    // stream of their own, appended to a group now and then, so that the commands above (and
    // the crash points the canaries were tuned on) stay what they were.
    let bitops = |rng: &mut SmallRng| -> Vec<Vec<Vec<u8>>> {
        match rng.gen_range(0..2) {
            0 => vec![vec![
                v("SETBIT"),
                skey(rng),
                rng.gen_range(0..300).to_string().into_bytes(),
                v(if rng.gen_range(0..3) == 0 { "0" } else { "1" }),
            ]],
            _ => {
                if rng.gen_range(0..2) == 0 {
                    // HyperLogLogs that go sparse -> dense (past hll-sparse-max-bytes).
                    let mut c = vec![v("PFADD"), format!("p{}", rng.gen_range(0..2)).into_bytes()];
                    for _ in 0..rng.gen_range(0..60) {
                        c.push(rng.gen_range(0..100_000).to_string().into_bytes());
                    }
                    vec![c]
                } else {
                    let lon = format!("{:.4}", rng.gen_range(-180.0..180.0f64)).into_bytes();
                    let lat = format!("{:.4}", rng.gen_range(-85.0..85.0f64)).into_bytes();
                    vec![vec![v("GEOADD"), zkey(rng), lon, lat, member(rng)]]
                }
            }
        }
    };
    let mut side = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xB17);
    let mut out = Vec::new();
    if side.gen_range(0..6) == 0 {
        out.extend(bitops(&mut side));
    }
    // Scripts (EVAL) come from a random stream of their own too, first in a group now and
    // then: one that writes several keys, or one that fails after writing.
    let mut scripts =
        SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5C41);
    if scripts.gen_range(0..8) == 0 {
        let rng = &mut scripts;
        if rng.gen_range(0..3) == 0 {
            let k1 = skey(rng);
            let k2 = skey(rng);
            out.push(vec![
                v("EVAL"),
                v(SCRIPT_FAILS),
                v("3"),
                k1,
                k2,
                hkey(rng),
                value(rng),
            ]);
        } else {
            let mut c = vec![
                v("EVAL"),
                v(SCRIPT_WRITES),
                Vec::new(),
                v("counter"),
                hkey(rng),
            ];
            for _ in 0..rng.gen_range(1..4) {
                c.push(skey(rng));
            }
            c[2] = (c.len() - 3).to_string().into_bytes();
            c.push(format!("v{}", rng.gen_range(0..100)).into_bytes());
            out.push(c);
        }
    }
    // Streams: a random stream of their own too, ahead of the rest.
    let mut xs = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ 0x57E);
    if xs.gen_range(0..3) == 0 {
        out.extend(stream_commands(&mut xs, id));
    }
    for _ in 0..rng.gen_range(1..=6) {
        if rng.gen_range(0..8) == 0 {
            // A MULTI/EXEC block.
            out.push(vec![v("MULTI")]);
            for _ in 0..rng.gen_range(1..4) {
                let mut c = one(&mut rng);
                c.retain(|x| x[0] != b"SELECT"); // SELECT inside MULTI is queued: keep it simple
                out.extend(c.into_iter().filter(|x| x[0] != b"FLUSHDB"));
            }
            out.push(vec![v("EXEC")]);
        } else {
            out.extend(one(&mut rng));
        }
    }
    out
}

/// One to three stream commands of transaction `id`. XADD's IDs are `<id>-<n>`: they grow
/// from one transaction to the next. Idle times are 0, so nothing depends on the clock.
fn stream_commands(rng: &mut SmallRng, id: u64) -> Vec<Vec<Vec<u8>>> {
    let v = |s: &str| s.as_bytes().to_vec();
    let mut out = Vec::new();
    let mut n = 0;
    for _ in 0..rng.gen_range(1..=3) {
        let key = v(["x0", "x1"][rng.gen_range(0..2)]);
        let group = v(["ga", "gb"][rng.gen_range(0..2)]);
        let consumer = v(["c1", "c2", "c3"][rng.gen_range(0..3)]);
        let recent = |rng: &mut SmallRng| {
            format!(
                "{}-{}",
                id.saturating_sub(rng.gen_range(0..20)),
                rng.gen_range(1..3)
            )
            .into_bytes()
        };
        let cmd = match rng.gen_range(0..20) {
            0..=5 => {
                n += 1;
                let mut c = vec![v("XADD"), key];
                if rng.gen_range(0..6) == 0 {
                    c.extend([v("MAXLEN"), rng.gen_range(3..12).to_string().into_bytes()]);
                }
                c.push(format!("{id}-{n}").into_bytes());
                for f in 0..rng.gen_range(1..3) {
                    c.push(format!("f{f}").into_bytes());
                    let len = if rng.gen_range(0..12) == 0 {
                        3000
                    } else {
                        rng.gen_range(1..30)
                    };
                    c.push(vec![b'a' + rng.gen_range(0..26u8); len]);
                }
                c
            }
            6 => vec![v("XDEL"), key, recent(rng), recent(rng)],
            7 => vec![
                v("XTRIM"),
                key,
                v("MAXLEN"),
                rng.gen_range(2..15).to_string().into_bytes(),
            ],
            8 => vec![v("XGROUP"), v("CREATE"), key, group, v("0"), v("MKSTREAM")],
            9 => vec![v("XGROUP"), v("DELCONSUMER"), key, group, consumer],
            10 => vec![v("XGROUP"), v("DESTROY"), key, group],
            11..=13 => {
                let mut c = vec![v("XREADGROUP"), v("GROUP"), group, consumer, v("COUNT")];
                c.push(rng.gen_range(1..5).to_string().into_bytes());
                if rng.gen_range(0..5) == 0 {
                    c.push(v("NOACK"));
                }
                c.extend([v("STREAMS"), key, v(">")]);
                c
            }
            14 | 15 => vec![v("XACK"), key, group, recent(rng), recent(rng)],
            16 => {
                let mut c = vec![v("XCLAIM"), key, group, consumer, v("0"), recent(rng)];
                if rng.gen_range(0..3) == 0 {
                    c.push(v("FORCE"));
                }
                c.push(v("JUSTID"));
                c
            }
            17 => vec![
                v("XAUTOCLAIM"),
                key,
                group,
                consumer,
                v("0"),
                v("0-0"),
                v("COUNT"),
                rng.gen_range(1..4).to_string().into_bytes(),
                v("JUSTID"),
            ],
            18 => vec![v("COPY"), v("x0"), v("x1"), v("REPLACE")],
            _ => {
                // A stream of many nodes with a group holding many pending entries: its
                // deletion and the group's are freed lazily, in bounded steps.
                match rng.gen_range(0..8) {
                    0 => vec![v("DEL"), v("xbig")],
                    1 => vec![v("XGROUP"), v("DESTROY"), v("xbig"), v("gbig")],
                    2 => vec![
                        v("XGROUP"),
                        v("CREATE"),
                        v("xbig"),
                        v("gbig"),
                        v("0"),
                        v("MKSTREAM"),
                    ],
                    3 => vec![
                        v("XREADGROUP"),
                        v("GROUP"),
                        v("gbig"),
                        v("c1"),
                        v("COUNT"),
                        v("100"),
                        v("STREAMS"),
                        v("xbig"),
                        v(">"),
                    ],
                    _ => {
                        n += 1;
                        vec![
                            v("XADD"),
                            v("xbig"),
                            format!("{id}-{n}").into_bytes(),
                            v("f"),
                            v("v"),
                        ]
                    }
                }
            }
        };
        out.push(cmd);
    }
    out
}

fn sid(b: &[u8]) -> StreamId {
    daisy_kv::types::stream::id::parse(
        b,
        daisy_kv::types::stream::id::IdRules {
            missing_seq: 0,
            strict: true,
            seq_star: false,
        },
    )
    .expect("the workload's IDs are IDs")
    .0
}

/// The stream at `k` in `m`, if it holds one.
fn stream_of<'m>(m: &'m mut Keys, k: &(u32, Vec<u8>)) -> Option<&'m mut StreamValue> {
    match m.get_mut(k) {
        Some((Value::Stream(s), _)) => Some(s),
        _ => None,
    }
}

/// After a change: the first ID is the first live entry's (0-0 when empty), as Redis keeps it.
fn settle(s: &mut StreamValue) {
    s.first_id = s.entries.first().map_or(StreamId::MIN, |e| e.0);
}

/// Trim to the newest `max` entries.
fn trim(s: &mut StreamValue, max: usize) {
    if s.entries.len() > max {
        s.entries.drain(..s.entries.len() - max);
    }
}

/// The model's state, and the client's current database within a transaction.
struct Apply<'a> {
    m: &'a mut Keys,
    db: u32,
}

impl Apply<'_> {
    fn key(&self, k: &[u8]) -> (u32, Vec<u8>) {
        (self.db, k.to_vec())
    }

    fn apply(&mut self, cmd: &[Vec<u8>]) {
        let k = |i: usize| cmd[i].clone();
        match &cmd[0][..] {
            b"SET" => {
                self.m
                    .insert(self.key(&cmd[1]), (Value::String(k(2)), cmd.len() > 3));
            }
            b"DEL" => {
                for key in &cmd[1..] {
                    self.m.remove(&self.key(key));
                }
            }
            b"INCR" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::String(b"0".to_vec()), false));
                let Value::String(s) = &mut e.0 else {
                    unreachable!()
                };
                let n: i64 = String::from_utf8_lossy(s).parse().unwrap_or(0);
                *s = (n + 1).to_string().into_bytes();
            }
            b"APPEND" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::String(Vec::new()), false));
                if let Value::String(s) = &mut e.0 {
                    s.extend_from_slice(&cmd[2]);
                }
            }
            b"MSET" => {
                for kv in cmd[1..].chunks(2) {
                    self.m
                        .insert(self.key(&kv[0]), (Value::String(kv[1].clone()), false));
                }
            }
            b"EXPIRE" => {
                if let Some(e) = self.m.get_mut(&self.key(&cmd[1])) {
                    e.1 = true;
                }
            }
            b"PERSIST" => {
                if let Some(e) = self.m.get_mut(&self.key(&cmd[1])) {
                    e.1 = false;
                }
            }
            b"HSET" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::Hash(BTreeMap::new()), false));
                if let Value::Hash(h) = &mut e.0 {
                    for fv in cmd[2..].chunks(2) {
                        h.insert(fv[0].clone(), fv[1].clone());
                    }
                }
            }
            b"HDEL" => {
                let key = self.key(&cmd[1]);
                if let Some((Value::Hash(h), _)) = self.m.get_mut(&key) {
                    for f in &cmd[2..] {
                        h.remove(f);
                    }
                    if h.is_empty() {
                        self.m.remove(&key);
                    }
                }
            }
            b"HINCRBY" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::Hash(BTreeMap::new()), false));
                if let Value::Hash(h) = &mut e.0 {
                    let cur: i64 = h
                        .get(&cmd[2])
                        .map(|v| String::from_utf8_lossy(v).parse().unwrap())
                        .unwrap_or(0);
                    let by: i64 = String::from_utf8_lossy(&cmd[3]).parse().unwrap();
                    h.insert(cmd[2].clone(), (cur + by).to_string().into_bytes());
                }
            }
            b"SADD" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::Set(BTreeSet::new()), false));
                if let Value::Set(s) = &mut e.0 {
                    for x in &cmd[2..] {
                        s.insert(x.clone());
                    }
                }
            }
            b"SREM" => {
                let key = self.key(&cmd[1]);
                if let Some((Value::Set(s), _)) = self.m.get_mut(&key) {
                    for x in &cmd[2..] {
                        s.remove(x);
                    }
                    if s.is_empty() {
                        self.m.remove(&key);
                    }
                }
            }
            b"RENAME" => {
                let (src, dst) = (self.key(&cmd[1]), self.key(&cmd[2]));
                if let Some(v) = self.m.remove(&src) {
                    self.m.insert(dst, v);
                }
            }
            b"SMOVE" if cmd[1] == cmd[2] => {} // a member "moved" to its own set: no change
            b"SMOVE" => {
                let (src, dst) = (self.key(&cmd[1]), self.key(&cmd[2]));
                let removed = match self.m.get_mut(&src) {
                    Some((Value::Set(s), _)) => s.remove(&cmd[3]),
                    _ => false,
                };
                if removed {
                    if matches!(self.m.get(&src), Some((Value::Set(s), _)) if s.is_empty()) {
                        self.m.remove(&src);
                    }
                    let e = self
                        .m
                        .entry(dst)
                        .or_insert((Value::Set(BTreeSet::new()), false));
                    if let Value::Set(s) = &mut e.0 {
                        s.insert(cmd[3].clone());
                    }
                }
            }
            b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" => {
                let set = |k: &[u8]| match self.m.get(&self.key(k)) {
                    Some((Value::Set(s), _)) => s.clone(),
                    _ => BTreeSet::new(),
                };
                let (a, b) = (set(&cmd[2]), set(&cmd[3]));
                let r: BTreeSet<Vec<u8>> = match &cmd[0][..] {
                    b"SINTERSTORE" => a.intersection(&b).cloned().collect(),
                    b"SUNIONSTORE" => a.union(&b).cloned().collect(),
                    _ => a.difference(&b).cloned().collect(),
                };
                let dst = self.key(&cmd[1]);
                if r.is_empty() {
                    self.m.remove(&dst);
                } else {
                    self.m.insert(dst, (Value::Set(r), false));
                }
            }
            b"COPY" => {
                let (src, dst) = (self.key(&cmd[1]), self.key(&cmd[2]));
                if src != dst {
                    if let Some(v) = self.m.get(&src).cloned() {
                        self.m.insert(dst, v);
                    }
                }
            }
            b"MOVE" => {
                let src = self.key(&cmd[1]);
                let dst = (1, cmd[1].clone());
                if self.db != 1 && !self.m.contains_key(&dst) {
                    if let Some(v) = self.m.remove(&src) {
                        self.m.insert(dst, v);
                    }
                }
            }
            b"SWAPDB" => {
                let all = std::mem::take(self.m);
                *self.m = all
                    .into_iter()
                    .map(|((d, k), v)| {
                        (
                            (
                                if d == 0 {
                                    1
                                } else if d == 1 {
                                    0
                                } else {
                                    d
                                },
                                k,
                            ),
                            v,
                        )
                    })
                    .collect();
            }
            b"FLUSHALL" => self.m.clear(),
            b"HSETNX" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::Hash(BTreeMap::new()), false));
                if let Value::Hash(h) = &mut e.0 {
                    h.entry(cmd[2].clone()).or_insert_with(|| cmd[3].clone());
                }
            }
            b"HINCRBYFLOAT" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::Hash(BTreeMap::new()), false));
                if let Value::Hash(h) = &mut e.0 {
                    // Whole numbers only: the long double prints them without a point.
                    let cur: i64 = h
                        .get(&cmd[2])
                        .map(|v| String::from_utf8_lossy(v).parse().unwrap())
                        .unwrap_or(0);
                    let by: i64 = String::from_utf8_lossy(&cmd[3]).parse().unwrap();
                    h.insert(cmd[2].clone(), (cur + by).to_string().into_bytes());
                }
            }
            b"GETEX" => {
                if let Some(e) = self.m.get_mut(&self.key(&cmd[1])) {
                    e.1 = cmd[2] == b"EX";
                }
            }
            b"RESTORE" => {
                let v = match daisy_kv::rdb::restore(&cmd[3]).expect("the workload's own payload") {
                    daisy_kv::rdb::Value::Hash(p) => Value::Hash(p.into_iter().collect()),
                    daisy_kv::rdb::Value::Set(m) => Value::Set(m.into_iter().collect()),
                    other => unreachable!("{other:?}"),
                };
                self.m.insert(self.key(&cmd[1]), (v, false));
            }
            b"SETBIT" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::String(Vec::new()), false));
                if let Value::String(b) = &mut e.0 {
                    let off: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap();
                    if b.len() <= off / 8 {
                        b.resize(off / 8 + 1, 0);
                    }
                    let mask = 0x80u8 >> (off % 8);
                    if cmd[3] == b"1" {
                        b[off / 8] |= mask;
                    } else {
                        b[off / 8] &= !mask;
                    }
                }
            }
            b"PFADD" => {
                let k = self.key(&cmd[1]);
                let old = match self.m.get(&k) {
                    Some((Value::String(s), _)) => Some(s.clone()),
                    _ => None,
                };
                let elems: Vec<&[u8]> = cmd[2..].iter().map(|e| &e[..]).collect();
                let new = daisy_kv::types::hll::pfadd_value(old.as_deref(), &elems, 3000)
                    .expect("applicable() checked");
                let ttl = self.m.get(&k).is_some_and(|e| e.1);
                self.m.insert(k, (Value::String(new), ttl));
            }
            b"GEOADD" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::ZSet(BTreeMap::new()), false));
                if let Value::ZSet(z) = &mut e.0 {
                    let lon: f64 = String::from_utf8_lossy(&cmd[2]).parse().unwrap();
                    let lat: f64 = String::from_utf8_lossy(&cmd[3]).parse().unwrap();
                    let s = daisy_kv::types::geo::encode(lon, lat) as f64;
                    z.insert(cmd[4].clone(), Score(s));
                }
            }
            b"ZADD" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::ZSet(BTreeMap::new()), false));
                if let Value::ZSet(z) = &mut e.0 {
                    for sm in cmd[2..].chunks(2) {
                        let s: f64 = String::from_utf8_lossy(&sm[0]).parse().unwrap();
                        z.insert(sm[1].clone(), Score(s));
                    }
                }
            }
            b"ZINCRBY" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::ZSet(BTreeMap::new()), false));
                if let Value::ZSet(z) = &mut e.0 {
                    let by: f64 = String::from_utf8_lossy(&cmd[2]).parse().unwrap();
                    let s = z.entry(cmd[3].clone()).or_insert(Score(0.0));
                    s.0 += by;
                }
            }
            b"ZREM" | b"ZPOPMIN" | b"ZPOPMAX" | b"ZREMRANGEBYSCORE" => {
                let key = self.key(&cmd[1]);
                if let Some((Value::ZSet(z), _)) = self.m.get_mut(&key) {
                    let mut order: Vec<(Score, Vec<u8>)> =
                        z.iter().map(|(m, s)| (*s, m.clone())).collect();
                    order.sort();
                    let gone: Vec<Vec<u8>> = match &cmd[0][..] {
                        b"ZREM" => cmd[2..].to_vec(),
                        b"ZPOPMIN" => order.iter().take(2).map(|x| x.1.clone()).collect(),
                        b"ZPOPMAX" => order.iter().rev().take(2).map(|x| x.1.clone()).collect(),
                        _ => order
                            .iter()
                            .filter(|x| (-1.0..=1.0).contains(&x.0 .0))
                            .map(|x| x.1.clone())
                            .collect(),
                    };
                    for m in gone {
                        z.remove(&m);
                    }
                    if z.is_empty() {
                        self.m.remove(&key);
                    }
                }
            }
            b"ZUNIONSTORE" => {
                let get = |k: &[u8]| match self.m.get(&(self.db, k.to_vec())) {
                    Some((Value::ZSet(z), _)) => z.clone(),
                    _ => BTreeMap::new(),
                };
                let mut r = get(&cmd[3]);
                for (m, s) in get(&cmd[4]) {
                    r.entry(m).or_insert(Score(0.0)).0 += s.0;
                }
                let dst = self.key(&cmd[1]);
                if r.is_empty() {
                    self.m.remove(&dst);
                } else {
                    self.m.insert(dst, (Value::ZSet(r), false));
                }
            }
            b"SELECT" => self.db = String::from_utf8_lossy(&cmd[1]).parse().unwrap(),
            b"FLUSHDB" => {
                let db = self.db;
                self.m.retain(|(d, _), _| *d != db);
            }
            b"RPUSH" | b"LPUSH" => {
                let e = self
                    .m
                    .entry(self.key(&cmd[1]))
                    .or_insert((Value::List(Vec::new()), false));
                if let Value::List(l) = &mut e.0 {
                    for x in &cmd[2..] {
                        if cmd[0] == b"RPUSH" {
                            l.push(x.clone());
                        } else {
                            l.insert(0, x.clone());
                        }
                    }
                }
            }
            b"LPOP" | b"RPOP" | b"LSET" | b"LREM" | b"LTRIM" => {
                let key = self.key(&cmd[1]);
                if let Some((Value::List(l), _)) = self.m.get_mut(&key) {
                    match &cmd[0][..] {
                        b"LPOP" | b"RPOP" => {
                            let n: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap();
                            let n = n.min(l.len());
                            if cmd[0] == b"LPOP" {
                                l.drain(..n);
                            } else {
                                l.truncate(l.len() - n);
                            }
                        }
                        b"LSET" => *l.last_mut().expect("lists are never empty") = cmd[3].clone(),
                        b"LREM" => l.retain(|x| *x != cmd[3]),
                        _ => {
                            // LTRIM key 1 -2 (the workload's only form), or 30 -30.
                            let s: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap();
                            let e: i64 = String::from_utf8_lossy(&cmd[3]).parse().unwrap();
                            let end = l.len() as i64 + e; // inclusive
                            if (s as i64) > end {
                                l.clear();
                            } else {
                                l.truncate(end as usize + 1);
                                l.drain(..s);
                            }
                        }
                    }
                    if l.is_empty() {
                        self.m.remove(&key);
                    }
                }
            }
            b"LMOVE" => {
                let src = self.key(&cmd[1]);
                let Some((Value::List(l), _)) = self.m.get_mut(&src) else {
                    return;
                };
                let x = l.remove(0);
                if l.is_empty() {
                    self.m.remove(&src);
                }
                let e = self
                    .m
                    .entry(self.key(&cmd[2]))
                    .or_insert((Value::List(Vec::new()), false));
                if let Value::List(d) = &mut e.0 {
                    d.push(x);
                }
            }
            b"MULTI" | b"EXEC" => {}
            b"EVAL" => {
                let n: usize = String::from_utf8_lossy(&cmd[2]).parse().unwrap_or(0);
                let (keys, argv) = (&cmd[3..3 + n], &cmd[3 + n..]);
                if cmd[1] == SCRIPT_WRITES.as_bytes() {
                    self.apply(&[b"INCR".to_vec(), keys[0].clone()]);
                    let Some((Value::String(num), _)) = self.m.get(&self.key(&keys[0])) else {
                        unreachable!("INCR made a string")
                    };
                    let num = num.clone();
                    self.apply(&[
                        b"HSET".to_vec(),
                        keys[1].clone(),
                        b"script".to_vec(),
                        num.clone(),
                    ]);
                    for k in &keys[2..] {
                        let mut val = argv[0].clone();
                        val.push(b':');
                        val.extend_from_slice(&num);
                        self.apply(&[b"SET".to_vec(), k.clone(), val]);
                    }
                } else {
                    // The writes before the error stay.
                    self.apply(&[b"SET".to_vec(), keys[0].clone(), argv[0].clone()]);
                    self.apply(&[b"APPEND".to_vec(), keys[1].clone(), argv[0].clone()]);
                }
            }
            x if x.starts_with(b"X") => self.apply_stream(cmd),
            other => unreachable!("{other:?}"),
        }
    }

    fn apply_stream(&mut self, cmd: &[Vec<u8>]) {
        let key = self.key(match &cmd[0][..] {
            b"XGROUP" => &cmd[2],
            b"XREADGROUP" => &cmd[cmd.len() - 2],
            _ => &cmd[1],
        });
        match &cmd[0][..] {
            b"XADD" => {
                let e = self.m.entry(key.clone()).or_insert((
                    Value::Stream(Box::new(StreamValue {
                        entries: Vec::new(),
                        last_id: StreamId::MIN,
                        first_id: StreamId::MIN,
                        max_deleted: StreamId::MIN,
                        entries_added: 0,
                        groups: BTreeMap::new(),
                    })),
                    false,
                ));
                let Value::Stream(s) = &mut e.0 else {
                    unreachable!("stream keys hold streams")
                };
                let (max, at) = if cmd[2] == b"MAXLEN" {
                    (
                        Some(String::from_utf8_lossy(&cmd[3]).parse::<usize>().unwrap()),
                        4,
                    )
                } else {
                    (None, 2)
                };
                let id = sid(&cmd[at]);
                let fields: Vec<(Vec<u8>, Vec<u8>)> = cmd[at + 1..]
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect();
                s.entries.push((id, fields));
                s.last_id = id;
                s.entries_added += 1;
                if let Some(max) = max {
                    trim(s, max);
                }
                settle(s);
            }
            b"XDEL" => {
                let Some(s) = stream_of(self.m, &key) else {
                    return;
                };
                for a in &cmd[2..] {
                    let id = sid(a);
                    if let Some(i) = s.entries.iter().position(|e| e.0 == id) {
                        s.entries.remove(i);
                        s.max_deleted = s.max_deleted.max(id);
                    }
                }
                settle(s);
            }
            b"XTRIM" => {
                if let Some(s) = stream_of(self.m, &key) {
                    trim(s, String::from_utf8_lossy(&cmd[3]).parse().unwrap());
                    settle(s);
                }
            }
            b"XGROUP" => {
                let group = cmd[3].clone();
                match &cmd[1][..] {
                    b"CREATE" => {
                        if !self.m.contains_key(&key) {
                            self.m.insert(
                                key.clone(),
                                (
                                    Value::Stream(Box::new(StreamValue {
                                        entries: Vec::new(),
                                        last_id: StreamId::MIN,
                                        first_id: StreamId::MIN,
                                        max_deleted: StreamId::MIN,
                                        entries_added: 0,
                                        groups: BTreeMap::new(),
                                    })),
                                    false,
                                ),
                            );
                        }
                        let s = stream_of(self.m, &key).expect("just made");
                        s.groups.insert(
                            group,
                            GroupValue {
                                last_id: StreamId::MIN,
                                entries_read: 0,
                                pending: BTreeMap::new(),
                                consumers: Vec::new(),
                            },
                        );
                    }
                    b"DESTROY" => {
                        stream_of(self.m, &key)
                            .expect("applicable")
                            .groups
                            .remove(&group);
                    }
                    _ => {
                        let s = stream_of(self.m, &key).expect("applicable");
                        let g = s.groups.get_mut(&group).expect("applicable");
                        let who = &cmd[4];
                        if let Some(i) = g.consumers.iter().position(|c| c == who) {
                            g.consumers.remove(i);
                            g.pending.retain(|_, p| p.0 != *who);
                        }
                    }
                }
            }
            b"XREADGROUP" => {
                let (group, consumer) = (&cmd[2], &cmd[3]);
                let count: usize = String::from_utf8_lossy(&cmd[5]).parse().unwrap();
                let noack = cmd.iter().any(|a| a == b"NOACK");
                let s = stream_of(self.m, &key).expect("applicable");
                let g = s.groups.get_mut(group).expect("applicable");
                let new: Vec<StreamId> = s
                    .entries
                    .iter()
                    .map(|e| e.0)
                    .filter(|id| *id > g.last_id)
                    .take(count)
                    .collect();
                if new.is_empty() {
                    return;
                }
                if !g.consumers.contains(consumer) {
                    g.consumers.push(consumer.clone());
                    g.consumers.sort();
                }
                for id in new {
                    g.last_id = id;
                    if !noack {
                        g.pending.insert(id, (consumer.clone(), 1));
                    }
                }
            }
            b"XACK" => {
                if let Some(g) = stream_of(self.m, &key).and_then(|s| s.groups.get_mut(&cmd[2])) {
                    for a in &cmd[3..] {
                        g.pending.remove(&sid(a));
                    }
                }
            }
            b"XCLAIM" | b"XAUTOCLAIM" => {
                let (group, consumer) = (&cmd[2], &cmd[3]);
                let s = stream_of(self.m, &key).expect("applicable");
                let live: BTreeSet<StreamId> = s.entries.iter().map(|e| e.0).collect();
                let g = s.groups.get_mut(group).expect("applicable");
                let mut claimed = false;
                if cmd[0] == b"XCLAIM" {
                    let force = cmd.iter().any(|a| a == b"FORCE");
                    let id = sid(&cmd[5]);
                    if !live.contains(&id) {
                        g.pending.remove(&id);
                    } else if let Some(p) = g.pending.get_mut(&id) {
                        p.0 = consumer.clone();
                        claimed = true;
                    } else if force {
                        g.pending.insert(id, (consumer.clone(), 1));
                        claimed = true;
                    }
                } else {
                    let mut count: usize = String::from_utf8_lossy(&cmd[7]).parse().unwrap();
                    let ids: Vec<StreamId> = g.pending.keys().copied().collect();
                    for id in ids {
                        if count == 0 {
                            break;
                        }
                        count -= 1;
                        if !live.contains(&id) {
                            g.pending.remove(&id);
                        } else {
                            g.pending.get_mut(&id).expect("listed").0 = consumer.clone();
                            claimed = true;
                        }
                    }
                }
                if claimed && !g.consumers.contains(consumer) {
                    g.consumers.push(consumer.clone());
                    g.consumers.sort();
                }
            }
            other => unreachable!("{other:?}"),
        }
    }
}

/// Whether RESP output `out` holds an error reply at any depth (a bulk string that starts with
/// '-', a sorted set's member or score, is not one).
fn has_error_reply(out: &[u8]) -> bool {
    fn line(out: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let end = at + out.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        Some((&out[at..end], end + 2))
    }
    fn num(b: &[u8]) -> Option<i64> {
        std::str::from_utf8(b).ok()?.parse().ok()
    }
    /// One reply from `at`: (whether it holds an error, where the next starts).
    fn one(out: &[u8], at: usize) -> Option<(bool, usize)> {
        let (l, next) = line(out, at)?;
        let (kind, rest) = l.split_first()?;
        match kind {
            b'-' | b'!' => Some((true, next)),
            b'$' | b'=' | b'(' if rest != b"-1" && *kind != b'(' => {
                let n = usize::try_from(num(rest)?).ok()?;
                Some((false, next + n + 2))
            }
            b'*' | b'~' | b'>' | b'%' => {
                let n = num(rest)?;
                let n = if *kind == b'%' { 2 * n } else { n };
                let (mut err, mut at) = (false, next);
                for _ in 0..n.max(0) {
                    let (e, a) = one(out, at)?;
                    err |= e;
                    at = a;
                }
                Some((err, at))
            }
            _ => Some((false, next)),
        }
    }
    let mut at = 0;
    while at < out.len() {
        match one(out, at) {
            Some((false, next)) => at = next,
            _ => return true,
        }
    }
    false
}

/// Whether `cmd` would fail on `m` (a type clash, RENAME of a missing key): such commands are
/// left out, so that every command the workload sends succeeds. Both the model and the
/// workload filter with this on the model's state, so they agree.
fn applicable(m: &Keys, db: u32, cmd: &[Vec<u8>]) -> bool {
    let ty = |k: &[u8]| {
        m.get(&(db, k.to_vec())).map(|v| match v.0 {
            Value::String(_) => 0,
            Value::Hash(_) => 1,
            Value::Set(_) => 2,
            Value::List(_) => 3,
            Value::ZSet(_) => 4,
            Value::Stream(_) => 5,
        })
    };
    let is = |k: &[u8], t: i32| ty(k).is_none_or(|x| x == t);
    match &cmd[0][..] {
        b"INCR" => match m.get(&(db, cmd[1].clone())) {
            None => true,
            Some((Value::String(s), _)) => String::from_utf8_lossy(s).parse::<i64>().is_ok(),
            _ => false,
        },
        b"APPEND" | b"SETBIT" => is(&cmd[1], 0),
        b"PFADD" => match m.get(&(db, cmd[1].clone())) {
            None => true,
            Some((Value::String(s), _)) => {
                let elems: Vec<&[u8]> = cmd[2..].iter().map(|e| &e[..]).collect();
                daisy_kv::types::hll::pfadd_value(Some(s), &elems, 3000).is_some()
            }
            _ => false,
        },
        b"GEOADD" => is(&cmd[1], 4),
        b"HSET" | b"HDEL" | b"HINCRBY" | b"HSETNX" => is(&cmd[1], 1),
        b"HINCRBYFLOAT" => match m.get(&(db, cmd[1].clone())) {
            None => true,
            Some((Value::Hash(h), _)) => h
                .get(&cmd[2])
                .is_none_or(|v| String::from_utf8_lossy(v).parse::<i64>().is_ok()),
            _ => false,
        },
        b"SADD" | b"SREM" => is(&cmd[1], 2),
        b"RPUSH" | b"LPUSH" | b"LPOP" | b"RPOP" | b"LREM" | b"LTRIM" => is(&cmd[1], 3),
        // LSET of a missing key is an error.
        b"LSET" => ty(&cmd[1]) == Some(3),
        b"LMOVE" => is(&cmd[1], 3) && is(&cmd[2], 3),
        b"ZADD" | b"ZINCRBY" | b"ZREM" | b"ZPOPMIN" | b"ZPOPMAX" | b"ZREMRANGEBYSCORE" => {
            is(&cmd[1], 4)
        }
        // ZUNIONSTORE reads sorted sets (or sets: none here) and replaces any destination.
        b"ZUNIONSTORE" => is(&cmd[3], 4) && is(&cmd[4], 4),
        b"SMOVE" => ty(&cmd[1]).is_none_or(|t| t == 2) && is(&cmd[2], 2),
        b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" => is(&cmd[2], 2) && is(&cmd[3], 2),
        b"GETEX" => is(&cmd[1], 0),
        b"MOVE" => db != 1,
        // COPY of a key onto itself is an error.
        b"COPY" => cmd[1] != cmd[2],
        b"RENAME" => ty(&cmd[1]).is_some(),
        // The scripts' commands in turn (SCRIPT_WRITES: the counter is a number, KEYS[2] a
        // hash or nothing; SCRIPT_FAILS: what it appends to is a string, what it fails on a
        // hash, so the error is the one expected). Their SETs always apply.
        b"EVAL" if cmd[1] == SCRIPT_WRITES.as_bytes() => {
            applicable(m, db, &[b"INCR".to_vec(), cmd[3].clone()]) && is(&cmd[4], 1)
        }
        b"EVAL" => cmd[3] != cmd[4] && is(&cmd[4], 0) && is(&cmd[5], 1),
        // Consumer group commands need their stream (and most their group): else an error.
        b"XGROUP" => {
            let s = match m.get(&(db, cmd[2].clone())) {
                Some((Value::Stream(s), _)) => Some(s),
                _ => None,
            };
            match &cmd[1][..] {
                b"CREATE" => s.is_none_or(|s| !s.groups.contains_key(&cmd[3])),
                b"DESTROY" => s.is_some(),
                _ => s.is_some_and(|s| s.groups.contains_key(&cmd[3])),
            }
        }
        b"XREADGROUP" | b"XCLAIM" | b"XAUTOCLAIM" => {
            let (k, g) = if cmd[0] == b"XREADGROUP" {
                (&cmd[cmd.len() - 2], &cmd[2])
            } else {
                (&cmd[1], &cmd[2])
            };
            matches!(m.get(&(db, k.clone())), Some((Value::Stream(s), _)) if s.groups.contains_key(g))
        }
        _ => true,
    }
}

/// The commands of transaction `id` that apply to `m` (see [`applicable`]), and the state
/// after them.
fn run_model(m: &mut Keys, seed: u64, id: u64) -> Vec<Vec<Vec<u8>>> {
    let mut a = Apply { m, db: 0 };
    let mut sent = Vec::new();
    for c in commands(seed, id) {
        if applicable(a.m, a.db, &c) {
            a.apply(&c);
            sent.push(c);
        }
    }
    sent
}

impl KvModel {
    pub fn advance_to(&mut self, seed: u64, id: u64) {
        while self.applied < id {
            self.applied += 1;
            run_model(&mut self.keys, seed, self.applied);
        }
    }
}

/// The recovered keyspace as the model keeps it: a group's read counter is Redis's estimate,
/// which the model does not follow (the differential test compares it with Redis), so it is
/// left out (0 on both sides).
fn to_model(d: keyspace::Dump) -> Keys {
    d.into_iter()
        .map(|(k, (mut v, ttl))| {
            if let Value::Stream(s) = &mut v {
                for g in s.groups.values_mut() {
                    g.entries_read = 0;
                }
            }
            (k, (v, ttl))
        })
        .collect()
}

/// Recover the image at `path` and compare it with `model` (transactions that returned) or
/// `next` (and the one in flight); Ok: the transactions the image holds. (When both states
/// are equal, the one in flight changed nothing the keyspace shows, so running it again from
/// here gives the same state: either count is right.)
pub fn verify(path: &Path, model: &KvModel, next: &KvModel) -> Result<u64> {
    let pool =
        Pool::open_snapshot(path, Some(LAYOUT)).map_err(|e| anyhow!("recovery failed: {e}"))?;
    let (reach, problems) = keyspace::check(&pool).map_err(|e| anyhow!("{e}"))?;
    if let Some(p) = problems.first() {
        bail!("keyspace check: {p}");
    }
    let rep = pool.check(Some(&reach));
    if let Some(p) = rep.problems.first() {
        bail!("pool check: {p}");
    }
    let got = to_model(keyspace::dump(&pool).map_err(|e| anyhow!("{e}"))?);
    if got == model.keys {
        return Ok(model.applied);
    }
    if got == next.keys {
        return Ok(next.applied);
    }
    let diff: Vec<String> = model
        .keys
        .keys()
        .chain(got.keys())
        .filter(|k| got.get(*k) != model.keys.get(*k))
        .take(3)
        .map(|(d, k)| format!("db{d}:{}", String::from_utf8_lossy(k)))
        .collect();
    Err(anyhow!(
        "keyspace is neither the state after transaction {} nor after {}; keys differing from the first: {diff:?}",
        model.applied, next.applied
    ))
}

/// The workload's pool, keyspace and server state, and its model (to know which commands
/// apply: see [`applicable`]).
pub struct KvWork {
    pub pool: Pool,
    ks: Keyspace,
    sv: ServerState,
    cl: Client,
    table: cmd::Table,
    model: KvModel,
}

impl KvWork {
    /// A new keyspace pool for the workload (small, growing on demand; 8 log slots of 64 KiB
    /// per lane: a command over hundreds of members fits one record, as the server's 1 MiB
    /// slots hold a round of them).
    pub fn create_pool(path: &Path) -> Result<Pool> {
        Pool::create(
            path,
            &PoolOptions::new(LAYOUT)
                .size(2 << 20)
                .max_size(32 << 20)
                .lanes(2)
                .log_slot_size(64 << 10)
                .log_slots_per_lane(8),
        )
        .map_err(anyhow::Error::from)
    }

    /// The workload on `pool` (a new keyspace is created in it on first use), whose keyspace
    /// holds the transactions up to `applied`.
    pub fn open(pool: &Pool, seed: u64, applied: u64) -> Result<KvWork> {
        let pool = pool.clone();
        let ks = Keyspace::open(&pool, 2).map_err(|e| anyhow!("{e}"))?;
        let mut sv = ServerState::new(&pool, 0);
        for (k, v) in CONFIG {
            sv.config.set_internal(k, v);
        }
        let mut model = KvModel::default();
        model.advance_to(seed, applied);
        Ok(KvWork {
            pool,
            ks,
            sv,
            cl: Client::default(),
            table: cmd::Table::new(),
            model,
        })
    }

    /// Run transaction `id`: its commands in one transaction, replies checked for errors;
    /// then one bounded lazyfree step in a transaction of its own.
    pub fn run_tx(&mut self, seed: u64, id: u64) -> Result<()> {
        let mut next = self.model.clone();
        next.applied = id - 1;
        next.keys = self.model.keys.clone();
        if self.model.applied + 1 != id {
            bail!("kv workload: transaction {id} after {}", self.model.applied);
        }
        let cmds = run_model(&mut next.keys, seed, id);
        next.applied = id;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let pool = self.pool.clone();
        let mut out = Vec::new();
        self.cl.db = 0;
        self.cl.multi = None;
        // Where each command's reply starts.
        let mut starts = Vec::with_capacity(cmds.len());
        let r = pool.transaction(|tx| {
            out.clear();
            starts.clear();
            for c in &cmds {
                let args: Vec<&[u8]> = c.iter().map(|a| &a[..]).collect();
                starts.push(out.len());
                cmd::execute(
                    &self.table,
                    &mut self.ks,
                    tx,
                    &mut self.cl,
                    &mut self.sv,
                    &args,
                    now,
                    &mut out,
                )?;
            }
            Ok::<_, daisy::Error>(())
        });
        if let Err(e) = r {
            self.ks.resync();
            return Err(e.into());
        }
        self.ks.committed();
        starts.push(out.len());
        for (i, c) in cmds.iter().enumerate() {
            let reply = &out[starts[i]..starts[i + 1]];
            // SCRIPT_FAILS answers its error; every other command succeeds.
            let fails = c[0] == b"EVAL" && c[1] == SCRIPT_FAILS.as_bytes();
            let ok = if fails {
                reply.starts_with(b"-ERR value is not an integer or out of range script: ")
            } else {
                !has_error_reply(reply)
            };
            if !ok {
                bail!(
                    "transaction {id}: {} answered {}",
                    String::from_utf8_lossy(&c[0]),
                    String::from_utf8_lossy(&reply[..reply.len().min(2000)])
                );
            }
        }
        self.model = next;
        // Lazyfree, a few objects at a time (so a table takes several steps).
        if self.ks.lazyfree_step(16).is_err() {
            self.ks.resync();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workload sends both scripts (each applicable now and then), the server runs them as
    /// the model does (the one that fails keeps its writes), and the keyspace then equals the
    /// model's.
    #[test]
    fn scripts_run_and_the_keyspace_equals_the_model() {
        let seed = 20261124;
        let d = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let path = d.path().join("kv.pool");
        let pool = KvWork::create_pool(&path).unwrap();
        let mut work = KvWork::open(&pool, seed, 0).unwrap();
        let mut model = Keys::new();
        let (mut writes, mut fails, mut seen) = (0, 0, false);
        for id in 1..=300 {
            work.run_tx(seed, id).unwrap();
            for c in run_model(&mut model, seed, id) {
                if c[0] == b"EVAL" {
                    if c[1] == SCRIPT_WRITES.as_bytes() {
                        writes += 1;
                    } else {
                        fails += 1;
                    }
                }
            }
            seen |= model
                .values()
                .any(|(v, _)| matches!(v, Value::Hash(h) if h.contains_key(&b"script"[..])));
        }
        assert!(
            writes >= 5 && fails >= 2,
            "scripts sent: {writes} + {fails}"
        );
        assert!(seen, "a script's HSET was in the keyspace");
        drop(work); // its keyspace holds the maps open
        assert_eq!(to_model(keyspace::dump(&pool).unwrap()), model);
    }
}
