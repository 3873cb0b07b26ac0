//! Sorted sets: conversion from listpack to skiplist at exactly Redis's thresholds (and the
//! STORE destinations and RESTOREd values that come back packed), a 100,000-member set that
//! survives a restart with its order, ranks and ranges and is freed lazily when deleted,
//! WRONGTYPE, blocking pops served by another client's ZADD or timing out, a server
//! stopped without a clean shutdown mid-stream keeping every acknowledged write, and members
//! of a big set moved to new scores many times keeping the order and ranks.

use super::*;

fn enc(c: &mut Connection, k: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(k)
        .query(c)
        .unwrap()
}

/// 128 members stay a listpack, the 129th makes a skiplist; a 64-byte member fits, a 65-byte
/// one converts; lowered thresholds (the ziplist aliases too) apply to the next write; a STORE
/// destination and a RESTOREd small set are packed again; the replies are the same bytes
/// before and after the conversion.
#[test]
fn conversion_at_the_thresholds() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let cfg: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("zset-max-ziplist-entries")
        .query(&mut c)
        .unwrap();
    assert_eq!(cfg, vec!["zset-max-ziplist-entries", "128"]);
    for i in 0..128 {
        let _: i64 = c.zadd("z", format!("m{i:03}"), i % 10).unwrap();
    }
    assert_eq!(enc(&mut c, "z"), "listpack");
    let before: Vec<(String, f64)> = c.zrange_withscores("z", 0, -1).unwrap();
    let _: i64 = c.zadd("z", "m128", 5).unwrap();
    assert_eq!(enc(&mut c, "z"), "skiplist", "the 129th member converts");
    let after: Vec<(String, f64)> = c.zrange_withscores("z", 0, -1).unwrap();
    let mut want = before.clone();
    want.push(("m128".into(), 5.0));
    want.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.0.cmp(&b.0)));
    assert_eq!(after, want, "same order after the conversion");
    let r: Option<i64> = c.zrank("z", "m128").unwrap();
    assert_eq!(
        r,
        Some(want.iter().position(|e| e.0 == "m128").unwrap() as i64)
    );
    // Members by length.
    let _: i64 = c.zadd("v", "x".repeat(64), 1).unwrap();
    assert_eq!(enc(&mut c, "v"), "listpack", "64 bytes fit");
    let _: i64 = c.zadd("v", "y".repeat(65), 2).unwrap();
    assert_eq!(enc(&mut c, "v"), "skiplist", "65 bytes do not");
    // Lowered thresholds, through the old names.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-ziplist-entries")
        .arg("3")
        .query(&mut c)
        .unwrap();
    let _: i64 = c
        .zadd_multiple("w", &[(1, "a"), (2, "b"), (3, "c")])
        .unwrap();
    assert_eq!(enc(&mut c, "w"), "listpack");
    let _: i64 = c.zadd("w", "d", 4).unwrap();
    assert_eq!(enc(&mut c, "w"), "skiplist");
    // A destination that fits is packed again, whatever its sources.
    let n: i64 = redis::cmd("ZRANGESTORE")
        .arg("dst")
        .arg("w")
        .arg(0)
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(enc(&mut c, "dst"), "listpack");
    let n: i64 = redis::cmd("ZUNIONSTORE")
        .arg("u")
        .arg(1)
        .arg("w")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 4);
    assert_eq!(enc(&mut c, "u"), "skiplist", "4 members exceed 3");
    // DUMP of a skiplist, RESTOREd small: packed, same elements.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-listpack-entries")
        .arg("128")
        .query(&mut c)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("w2")
        .arg(0)
        .arg(payload)
        .query(&mut c)
        .unwrap();
    assert_eq!(enc(&mut c, "w2"), "listpack");
    let a: Vec<(String, f64)> = c.zrange_withscores("w", 0, -1).unwrap();
    let b: Vec<(String, f64)> = c.zrange_withscores("w2", 0, -1).unwrap();
    assert_eq!(a, b);
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// 100,000 members (a skiplist: map and ordered index) survive a restart with their order,
/// ranks, score ranges and counts; DEL answers at once and leaves the set to lazyfree, which
/// frees everything; the pool is sound at each step.
#[test]
fn a_big_sorted_set_survives_restart_and_is_freed_lazily() {
    const N: i64 = 100_000;
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let empty = info_field(&mut c, "memory", "used_memory");
    let mut p = redis::pipe();
    for i in 0..N {
        // Scores descend as members ascend: the index order is not insertion order.
        p.zadd("big", format!("m{i:06}"), (N - i) / 3).ignore();
        if i % 10_000 == 9_999 {
            let _: () = p.query(&mut c).unwrap();
            p = redis::pipe();
        }
    }
    assert_eq!(c.zcard::<_, i64>("big").unwrap(), N);
    assert_eq!(enc(&mut c, "big"), "skiplist");
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    assert_eq!(c.zcard::<_, i64>("big").unwrap(), N);
    // Lowest score: (N - i) / 3 == 0 for i > N - 3.
    let first: Vec<(String, f64)> = c.zrange_withscores("big", 0, 2).unwrap();
    assert_eq!(
        first,
        vec![
            ("m099998".to_string(), 0.0),
            ("m099999".to_string(), 0.0),
            ("m099995".to_string(), 1.0)
        ]
    );
    // m000000 and m000001 share the top score: the greater member is last.
    let last: Vec<(String, f64)> = c.zrevrange_withscores("big", 0, 0).unwrap();
    assert_eq!(last, vec![("m000001".to_string(), (N / 3) as f64)]);
    let r: Option<i64> = c.zrank("big", "m000000").unwrap();
    assert_eq!(r, Some(N - 2));
    let r: Option<i64> = c.zrevrank("big", "m050000").unwrap();
    // Above m050000 in reverse order: scores above its 16666, and m050001, m050002 (the same
    // score, greater members).
    let above: i64 = c.zcount("big", "(16666", "+inf").unwrap();
    let same_before: i64 = 2;
    assert_eq!(r, Some(above + same_before));
    let n: i64 = c.zcount("big", 100, 199).unwrap();
    assert_eq!(n, 300, "three members per score");
    let got: Vec<String> = redis::cmd("ZRANGEBYSCORE")
        .arg("big")
        .arg("(100")
        .arg(200)
        .arg("LIMIT")
        .arg(3)
        .arg(2)
        .query(&mut c)
        .unwrap();
    let mut want: Vec<(i64, String)> = (0..N)
        .filter(|i| (N - i) / 3 > 100 && (N - i) / 3 <= 200)
        .map(|i| ((N - i) / 3, format!("m{i:06}")))
        .collect();
    want.sort();
    assert_eq!(got, vec![want[3].1.clone(), want[4].1.clone()]);
    let n: i64 = c.del("big").unwrap();
    assert_eq!(n, 1);
    assert!(info_field(&mut c, "memory", "lazyfree_pending_objects") >= 1);
    wait_lazyfree(&mut c);
    let used = info_field(&mut c, "memory", "used_memory");
    assert!(
        used <= empty + (64 << 10),
        "{used} bytes left after freeing (empty: {empty})"
    );
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// Sorted-set commands on other types and other commands on sorted sets answer WRONGTYPE and
/// change nothing; TYPE and SCAN TYPE say zset.
#[test]
fn wrongtype_both_ways() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = c.set("s", "v").unwrap();
    let _: i64 = c.zadd("z", "a", 1).unwrap();
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(err_text(c.zadd::<_, _, _, i64>("s", "a", 1)), wt);
    assert_eq!(err_text(c.zrange::<_, Vec<String>>("s", 0, -1)), wt);
    assert_eq!(err_text(c.get::<_, String>("z")), wt);
    assert_eq!(err_text(c.sadd::<_, _, i64>("z", "x")), wt);
    let r: RedisResult<i64> = redis::cmd("ZUNIONSTORE")
        .arg("d")
        .arg(2)
        .arg("z")
        .arg("s")
        .query(&mut c);
    assert_eq!(err_text(r), wt);
    assert_eq!(c.exists::<_, i64>("d").unwrap(), 0);
    let t: String = redis::cmd("TYPE").arg("z").query(&mut c).unwrap();
    assert_eq!(t, "zset");
    let (_, keys): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("TYPE")
        .arg("zset")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["z"]);
    let v: Vec<(String, f64)> = c.zrange_withscores("z", 0, -1).unwrap();
    assert_eq!(v, vec![("a".to_string(), 1.0)]);
}

/// BZPOPMIN waits until another client's ZADD, and gets the lowest member; one with a short
/// timeout answers a null array after about that long; BZMPOP is served the same way.
#[test]
fn blocking_pops_served_by_zadd_and_timing_out() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut waiter = srv.raw();
    waiter
        .write_all(b"*3\r\n$8\r\nBZPOPMIN\r\n$1\r\nq\r\n$1\r\n0\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = srv.client();
    let n: i64 = c.zadd_multiple("q", &[(5, "five"), (2, "two")]).unwrap();
    assert_eq!(n, 2);
    let mut buf = vec![0u8; 256];
    let mut got = Vec::new();
    let want = b"*3\r\n$1\r\nq\r\n$3\r\ntwo\r\n$1\r\n2\r\n";
    while got.len() < want.len() {
        let k = waiter.read(&mut buf).unwrap();
        assert!(k > 0, "closed");
        got.extend_from_slice(&buf[..k]);
    }
    assert_eq!(got, want);
    let left: Vec<String> = c.zrange("q", 0, -1).unwrap();
    assert_eq!(left, vec!["five"], "the served pop is durable");
    // A timeout.
    let t0 = std::time::Instant::now();
    let r = roundtrip(
        &mut srv.raw(),
        b"*3\r\n$8\r\nBZPOPMAX\r\n$5\r\nempty\r\n$3\r\n0.2\r\n",
        5,
    );
    assert_eq!(r, b"*-1\r\n");
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(190) && el < Duration::from_secs(5),
        "{el:?}"
    );
    // BZMPOP served by a ZADD on its second key.
    let mut w = srv.raw();
    w.write_all(
        b"*7\r\n$6\r\nBZMPOP\r\n$1\r\n0\r\n$1\r\n2\r\n$2\r\nx1\r\n$2\r\nx2\r\n$3\r\nMAX\r\n$1\r\n0\r\n",
    )
    .unwrap();
    // (COUNT needs its keyword: "0" alone is a syntax error.)
    let r = {
        let mut b = vec![0u8; 64];
        let k = w.read(&mut b).unwrap();
        b.truncate(k);
        b
    };
    assert_eq!(r, b"-ERR syntax error\r\n");
    w.write_all(
        b"*6\r\n$6\r\nBZMPOP\r\n$1\r\n0\r\n$1\r\n2\r\n$2\r\nx1\r\n$2\r\nx2\r\n$3\r\nMAX\r\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let _: i64 = c.zadd_multiple("x2", &[(1, "a"), (3, "c")]).unwrap();
    let want = b"*2\r\n$2\r\nx2\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n";
    let mut got = Vec::new();
    while got.len() < want.len() {
        let k = w.read(&mut buf).unwrap();
        assert!(k > 0, "closed");
        got.extend_from_slice(&buf[..k]);
    }
    assert_eq!(got, want);
}

/// A server whose thread is abandoned without SHUTDOWN (as a crash leaves the pool: every
/// acknowledged write is in it) restarts with every sorted set as acknowledged, in both
/// encodings, and the pool checks sound.
#[test]
fn crash_restart_keeps_acknowledged_zsets() {
    let d = tmp();
    let pool = pool_in(&d);
    {
        let srv = Server::start(&pool);
        let mut c = srv.client();
        for i in 0..300 {
            let _: i64 = c.zadd("big", format!("e{i}"), i as f64 * 0.5).unwrap();
            if i < 50 {
                let _: i64 = c.zadd("small", format!("e{i}"), -i).unwrap();
            }
        }
        let _: f64 = c.zincr("big", "e7", 1000).unwrap();
        let _: i64 = c.zrem("big", "e8").unwrap();
        let _: Vec<String> = c.zpopmin("small", 1).unwrap();
        // Copy the pool while the server runs: that copy is what a crash would leave.
        std::fs::copy(&pool, d.path().join("crash.pool")).unwrap();
        drop(c);
        srv.stop();
    }
    let crashed = d.path().join("crash.pool");
    check_pool(&crashed);
    let srv = Server::start(&crashed);
    let mut c = srv.client();
    assert_eq!(c.zcard::<_, i64>("big").unwrap(), 299);
    assert_eq!(enc(&mut c, "big"), "skiplist");
    assert_eq!(c.zscore::<_, _, f64>("big", "e7").unwrap(), 1003.5);
    assert_eq!(c.zscore::<_, _, Option<f64>>("big", "e8").unwrap(), None);
    let top: Vec<String> = c.zrevrange("big", 0, 0).unwrap();
    assert_eq!(top, vec!["e7"]);
    assert_eq!(c.zcard::<_, i64>("small").unwrap(), 49);
    assert_eq!(enc(&mut c, "small"), "listpack");
    let low: Vec<(String, f64)> = c.zrange_withscores("small", 0, 0).unwrap();
    assert_eq!(low, vec![("e48".to_string(), -48.0)]);
}

/// Members of a big sorted set given new scores again and again (ZADD, ZINCRBY, pipelined so
/// that many moves share a group's transaction; the ordered index moves each entry in one
/// pass) stay in (score, member) order with the right ranks, as a model says; the pool checks
/// sound after a restart.
#[test]
fn score_updates_in_a_big_set_keep_order_and_ranks() {
    let d = tmp();
    let pool = pool_in(&d);
    let seed = 20261128u64;
    eprintln!("seed {seed}");
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = 2000u64;
    let mut model = std::collections::BTreeMap::<String, f64>::new();
    {
        let srv = Server::start(&pool);
        let mut c = srv.client();
        let mut p = redis::pipe();
        for i in 0..n {
            let sc = (next() % 1000) as f64;
            model.insert(format!("m{i}"), sc);
            p.zadd("z", format!("m{i}"), sc).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        for _ in 0..5 {
            let mut p = redis::pipe();
            for _ in 0..800 {
                let m = format!("m{}", next() % n);
                if next() % 3 == 0 {
                    let by = (next() % 50) as f64 - 25.0;
                    *model.get_mut(&m).unwrap() += by;
                    p.cmd("ZINCRBY").arg("z").arg(by).arg(&m).ignore();
                } else {
                    let sc = (next() % 1000) as f64;
                    model.insert(m.clone(), sc);
                    p.zadd("z", &m, sc).ignore();
                }
            }
            let _: () = p.query(&mut c).unwrap();
        }
        srv.stop();
    }
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let mut want: Vec<(String, f64)> = model.into_iter().collect();
    want.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let got: Vec<(String, f64)> = c.zrange_withscores("z", 0, -1).unwrap();
    assert_eq!(got, want);
    for r in [0, 1, 777, n as usize - 1] {
        let rank: Option<usize> = c.zrank("z", &want[r].0).unwrap();
        assert_eq!(rank, Some(r), "{}", want[r].0);
    }
}
