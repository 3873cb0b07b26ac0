//! Bitmaps, HyperLogLog and geo: replies pinned to Redis 7.0.15's (the differential test
//! compares them with a live redis-server; these keep the scenarios in the quick suite), and
//! values that survive a restart byte for byte.

use super::*;

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

#[test]
fn bitmaps_set_count_find_and_combine_bits() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "100", "1"]).unwrap(), 0);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "b"]).unwrap().len(), 13);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "100"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "99999"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "b"]).unwrap(), 2);
    assert_eq!(
        q::<i64>(&mut c, &["BITCOUNT", "b", "8", "100", "BIT"]).unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "b", "1"]).unwrap(), 7);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "b", "1", "1"]).unwrap(), 100);
    assert_eq!(
        q::<i64>(&mut c, &["BITPOS", "b", "0", "0", "-1", "BIT"]).unwrap(),
        0
    );
    // No clear bit in an explicit range of set bits: -1; with no end: past the string.
    let _: () = q(&mut c, &["SET", "ones", "\u{7f}"]).unwrap();
    let _: i64 = q(&mut c, &["SETBIT", "ones", "0", "1"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["BITPOS", "ones", "0", "0", "0"]).unwrap(),
        -1
    );
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "ones", "0"]).unwrap(), 8);
    let _: () = q(&mut c, &["SET", "s", "foobar"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "n", "s"]).unwrap(), 6);
    let n: Vec<u8> = q(&mut c, &["GET", "n"]).unwrap();
    assert_eq!(n, b"foobar".iter().map(|b| !b).collect::<Vec<_>>());
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "AND", "n", "nope1", "nope2"]).unwrap(),
        0
    );
    assert!(!q::<bool>(&mut c, &["EXISTS", "n"]).unwrap());
    // Redis's limits and errors.
    let e = q::<i64>(&mut c, &["SETBIT", "b", "4294967296", "1"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("bit offset is not an integer or out of range"));
    let e = q::<i64>(&mut c, &["SETBIT", "b", "1", "2"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("bit is not an integer or out of range"));
    let e = q::<i64>(&mut c, &["BITOP", "NOT", "x", "a", "b"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("BITOP NOT must be called with a single source key."));
    let _: i64 = q(&mut c, &["LPUSH", "l", "x"]).unwrap();
    let e = q::<i64>(&mut c, &["SETBIT", "l", "1", "1"]).unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"));
    // A bitmap keeps its bytes and TTL across a restart.
    let _: i64 = q(&mut c, &["EXPIRE", "b", "1000"]).unwrap();
    let before: Vec<u8> = q(&mut c, &["GET", "b"]).unwrap();
    drop(c);
    srv.stop();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "b"]).unwrap(), before);
    assert!(q::<i64>(&mut c, &["TTL", "b"]).unwrap() > 0);
    srv.stop();
}

#[test]
fn bitfield_overflow_modes_match_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "bf", "SET", "u8", "0", "255", "INCRBY", "u8", "0", "10", "GET", "i8", "0",
            "OVERFLOW", "SAT", "INCRBY", "i4", "#1", "100", "OVERFLOW", "FAIL", "INCRBY", "u2",
            "10", "5",
        ],
    )
    .unwrap();
    assert_eq!(r, [Some(0), Some(9), Some(9), Some(7), None]);
    let r: Vec<i64> = q(
        &mut c,
        &["BITFIELD_RO", "bf", "GET", "u8", "0", "GET", "i4", "#1"],
    )
    .unwrap();
    assert_eq!(r, [7, 7]);
    let e = q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("BITFIELD_RO only supports the GET subcommand"));
    let e = q::<Vec<i64>>(&mut c, &["BITFIELD", "bf", "GET", "u64", "0"]).unwrap_err();
    assert!(e.to_string().contains("Invalid bitfield type"));
    let e = q::<Vec<i64>>(&mut c, &["BITFIELD", "bf", "SET", "u8", "4294967296", "1"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("bit offset is not an integer or out of range"));
    // i64 wraps at its limits.
    let r: Vec<i64> = q(
        &mut c,
        &[
            "BITFIELD",
            "w",
            "SET",
            "i64",
            "0",
            "9223372036854775807",
            "INCRBY",
            "i64",
            "0",
            "1",
        ],
    )
    .unwrap();
    assert_eq!(r, [0, i64::MIN]);
    srv.stop();
}

#[test]
fn hyperloglog_estimates_and_bytes_are_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "h"]).unwrap(), 0);
    // Redis 7.0.15's value after PFADD h a b c (sparse): header, then the opcodes.
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h", "a", "b", "c"]).unwrap(), 1);
    let v: Vec<u8> = q(&mut c, &["GET", "h"]).unwrap();
    assert_eq!(&v[..5], b"HYLL\x01");
    assert_eq!(v[15] & 0x80, 0x80, "the cached cardinality is stale");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "h"]).unwrap(), 3);
    let v: Vec<u8> = q(&mut c, &["GET", "h"]).unwrap();
    assert_eq!(&v[8..16], &3u64.to_le_bytes(), "PFCOUNT caches, as Redis");
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h", "a"]).unwrap(), 0);
    // 10,000 elements: dense, and Redis 7.0.15's estimate.
    let mut cmd = redis::cmd("PFADD");
    cmd.arg("big");
    for i in 0..10_000 {
        cmd.arg(format!("e{i}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let v: Vec<u8> = q(&mut c, &["GET", "big"]).unwrap();
    assert_eq!((v[4], v.len()), (0, 12304), "dense");
    let est: i64 = q(&mut c, &["PFCOUNT", "big"]).unwrap();
    assert_eq!(est, 9973, "redis-server 7.0.15 answers 9973");
    // PFADD on a dense value writes the registers in place: one element a command, and many
    // in one command (registers sharing bytes), give the registers of one PFADD of all of
    // them into a new key (the whole-value path), with the cache marked stale; an element
    // that grows nothing answers 0 and changes no byte.
    for i in 10_000..10_300 {
        let _: i64 = q(&mut c, &["PFADD", "big", &format!("e{i}")]).unwrap();
    }
    let mut cmd = redis::cmd("PFADD");
    cmd.arg("big");
    for i in 10_300..11_000 {
        cmd.arg(format!("e{i}"));
    }
    assert_eq!(cmd.query::<i64>(&mut c).unwrap(), 1);
    let mut cmd = redis::cmd("PFADD");
    cmd.arg("whole");
    for i in 0..11_000 {
        cmd.arg(format!("e{i}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let (v, w): (Vec<u8>, Vec<u8>) = (
        q(&mut c, &["GET", "big"]).unwrap(),
        q(&mut c, &["GET", "whole"]).unwrap(),
    );
    assert_eq!(v[15] & 0x80, 0x80, "the cached cardinality is stale");
    assert_eq!(&v[16..], &w[16..], "the same registers");
    let est: i64 = q(&mut c, &["PFCOUNT", "big"]).unwrap();
    assert_eq!(est, q::<i64>(&mut c, &["PFCOUNT", "whole"]).unwrap());
    let v: Vec<u8> = q(&mut c, &["GET", "big"]).unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["PFADD", "big", "e5", "e10500"]).unwrap(),
        0
    );
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "big"]).unwrap(), v);
    let _: () = q(&mut c, &["PFMERGE", "m", "h", "big"]).unwrap();
    let union: i64 = q(&mut c, &["PFCOUNT", "h", "big"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "m"]).unwrap(), union);
    // Not an HLL: Redis's error; a corrupt one: INVALIDOBJ.
    let _: () = q(&mut c, &["SET", "s", "hello"]).unwrap();
    let e = q::<i64>(&mut c, &["PFADD", "s", "x"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("Key is not a valid HyperLogLog string value."));
    let _: i64 = q(&mut c, &["PFADD", "h2", "x", "y"]).unwrap();
    let _: i64 = q(&mut c, &["APPEND", "h2", "hello"]).unwrap();
    let e = q::<i64>(&mut c, &["PFCOUNT", "h2"]).unwrap_err();
    assert!(e.to_string().contains("Corrupted HLL object detected"));
    drop(c);
    srv.stop();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let after: i64 = q(&mut c, &["PFCOUNT", "big"]).unwrap();
    assert_eq!(after, q::<i64>(&mut c, &["PFCOUNT", "whole"]).unwrap());
    srv.stop();
}

#[test]
fn geo_commands_answer_to_the_digit() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let n: i64 = q(
        &mut c,
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "Sicily"]).unwrap(), "zset");
    // The values Redis's documentation (and redis-server 7.0.15) give.
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania"]).unwrap(),
        "166274.1516"
    );
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]).unwrap(),
        "166.2742"
    );
    let h: Vec<String> = q(&mut c, &["GEOHASH", "Sicily", "Palermo", "Catania"]).unwrap();
    assert_eq!(h, ["sqc8b49rny0", "sqdtr74hyu0"]);
    let p: Vec<Option<Vec<String>>> = q(&mut c, &["GEOPOS", "Sicily", "Palermo", "nope"]).unwrap();
    assert_eq!(
        p,
        [
            Some(vec![
                "13.36138933897018433".to_string(),
                "38.11555639549629859".to_string()
            ]),
            None
        ]
    );
    let r: Vec<(String, String)> = q(
        &mut c,
        &[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "WITHDIST",
            "ASC",
        ],
    )
    .unwrap();
    assert_eq!(
        r,
        [
            ("Catania".to_string(), "56.4413".to_string()),
            ("Palermo".to_string(), "190.4424".to_string())
        ]
    );
    let r: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "DESC",
        ],
    )
    .unwrap();
    assert_eq!(r, ["Palermo", "Catania"]);
    let n: i64 = q(
        &mut c,
        &[
            "GEOSEARCHSTORE",
            "d",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
            "STOREDIST",
        ],
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "d", "Palermo"]).unwrap(),
        "0"
    );
    let e = q::<Vec<String>>(&mut c, &["GEORADIUS", "Sicily", "200", "37", "1", "km"]).unwrap_err();
    assert!(e
        .to_string()
        .contains("invalid longitude,latitude pair 200.000000,37.000000"));
    let e = q::<Vec<String>>(
        &mut c,
        &[
            "GEORADIUS_RO",
            "Sicily",
            "15",
            "37",
            "1",
            "km",
            "STORE",
            "x",
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("syntax error"));
    let e = q::<Vec<String>>(
        &mut c,
        &["GEOSEARCH", "Sicily", "BYBOX", "1", "1", "km", "ASC"],
    )
    .unwrap_err();
    assert!(e
        .to_string()
        .contains("exactly one of FROMMEMBER or FROMLONLAT"));
    srv.stop();
}
