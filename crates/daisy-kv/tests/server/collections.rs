//! Hashes, sets and transactions at their edges: every encoding survives a restart, a big
//! collection is deleted at once and freed in the background, an EXEC that meets a full pool
//! stores nothing, a command too big for one redo record is refused whole, a client that
//! disconnects inside MULTI leaves nothing behind, and a pool written by the previous keyspace
//! format (one database of strings) is upgraded and served.

use super::*;

/// Each encoding of each type, with an expiry time on some, comes back after a restart with
/// the same contents, encoding and TTL; `pool check` finds the keyspace sound.
#[test]
fn every_encoding_survives_a_restart() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let _: () = c
        .hset_multiple("h:small", &[("a", "1"), ("b", "2")])
        .unwrap();
    let big: Vec<(String, String)> = (0..600)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    let _: () = c.hset_multiple("h:big", &big).unwrap();
    let _: () = c.hset("h:long", "f", "x".repeat(100)).unwrap();
    let _: () = c.sadd("s:ints", &[3, 1, 2]).unwrap();
    let _: () = c.sadd("s:small", &["a", "b"]).unwrap();
    let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let _: () = c.sadd("s:big", &members).unwrap();
    let _: () = c.expire("h:big", 3600).unwrap();
    let _: () = c.expire("s:ints", 3600).unwrap();
    let enc = |c: &mut Connection, k: &str| -> String {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(k)
            .query(c)
            .unwrap()
    };
    let want = [
        ("h:small", "listpack"),
        ("h:big", "hashtable"),
        ("h:long", "hashtable"),
        ("s:ints", "intset"),
        ("s:small", "listpack"),
        ("s:big", "hashtable"),
    ];
    for (k, e) in want {
        assert_eq!(enc(&mut c, k), e, "{k}");
    }
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    for (k, e) in want {
        assert_eq!(enc(&mut c, k), e, "{k} after the restart");
    }
    let h: Vec<(String, String)> = c.hgetall("h:small").unwrap();
    assert_eq!(
        h,
        vec![("a".into(), "1".into()), ("b".into(), "2".into())],
        "in order"
    );
    let mut h: Vec<(String, String)> = c.hgetall("h:big").unwrap();
    h.sort();
    let mut want_big = big.clone();
    want_big.sort();
    assert_eq!(h, want_big);
    let s: Vec<i64> = c.smembers("s:ints").unwrap();
    assert_eq!(s, vec![1, 2, 3], "intsets answer in order");
    let mut s: Vec<String> = c.smembers("s:big").unwrap();
    s.sort();
    let mut m = members.clone();
    m.sort();
    assert_eq!(s, m);
    let ttl: i64 = c.ttl("h:big").unwrap();
    assert!((3590..=3600).contains(&ttl), "{ttl}");
    assert_eq!(c.ttl::<_, i64>("h:small").unwrap(), -1);
    drop(c);
    srv.stop();
}

/// DEL of a big hash answers at once and leaves it to lazyfree: the pending count is 1 right
/// after (a 200,000-field table needs thousands of bounded steps), then everything is freed
/// and the pool is sound. A restart in the middle resumes the freeing.
#[test]
fn deleting_a_big_hash_is_immediate_and_freed_in_the_background() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let empty = info_field(&mut c, "memory", "used_memory");
    let mut p = redis::pipe();
    for i in 0..200_000 {
        p.hset("big", format!("field:{i}"), i).ignore();
        if i % 10_000 == 9_999 {
            let _: () = p.query(&mut c).unwrap();
            p = redis::pipe();
        }
    }
    assert_eq!(c.hlen::<_, i64>("big").unwrap(), 200_000);
    let n: i64 = c.del("big").unwrap();
    assert_eq!(n, 1);
    assert_eq!(c.exists::<_, i64>("big").unwrap(), 0);
    assert_eq!(info_field(&mut c, "memory", "lazyfree_pending_objects"), 1);
    // Stop while freeing: the queue is in the pool, and the next start resumes it.
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
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

/// A new keyspace starts with database 0's table, and FLUSHALL of an empty one-segment table
/// keeps it, so INFO's used_memory comes back to its starting figure once a big key is
/// freed (Redis's unit/lazyfree compares with twice the start); a database with keys is
/// still freed whole by FLUSHALL.
#[test]
fn used_memory_returns_to_the_start_after_a_big_key_and_a_flush() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let start = info_field(&mut c, "memory", "used_memory");
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "memory", "used_memory"), start);
    let members: Vec<u64> = (0..100_000).collect();
    let _: i64 = c.sadd("myset", &members).unwrap();
    let peak = info_field(&mut c, "memory", "used_memory");
    assert!(peak > start + 1_000_000, "peak {peak}, start {start}");
    let _: i64 = c.unlink("myset").unwrap();
    wait_lazyfree(&mut c);
    let after = info_field(&mut c, "memory", "used_memory");
    assert!(
        after < peak && after < start * 2,
        "after {after}, start {start}"
    );
    let _: () = c.set("k", "v").unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    wait_lazyfree(&mut c);
    assert!(info_field(&mut c, "memory", "used_memory") < start);
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// A pool too full for an EXEC's writes: EXEC answers the OOM error and none of its commands
/// is stored (the SET before the big one included); the connection and the pool go on.
#[test]
fn an_exec_that_meets_a_full_pool_stores_nothing() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |o| {
        o.size = 24 << 20;
        o.max_size = Some(24 << 20);
    });
    let mut c = srv.client();
    let val = vec![1u8; 256 << 10];
    let mut n = 0;
    while c.set::<_, _, ()>(format!("fill:{n}"), &val).is_ok() {
        n += 1;
        assert!(n < 1000, "the pool never filled");
    }
    let _: () = c.del("fill:0").unwrap();
    // Raw RESP, so the EXEC's own reply is seen as sent.
    let resp = |args: &[&[u8]]| -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    };
    let mut req = resp(&[b"MULTI"]);
    req.extend(resp(&[b"SET", b"tx:small", b"1"]));
    req.extend(resp(&[b"HSET", b"tx:hash", b"f", b"v"]));
    for k in ["tx:big1", "tx:big2", "tx:big3"] {
        req.extend(resp(&[b"SET", k.as_bytes(), &val]));
    }
    req.extend(resp(&[b"EXEC"]));
    let want: &[u8] = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    let mut s = srv.raw();
    assert_eq!(
        String::from_utf8_lossy(&roundtrip(&mut s, &req, want.len())),
        String::from_utf8_lossy(want)
    );
    // That client is out of MULTI.
    assert_eq!(
        roundtrip(&mut s, b"EXEC\r\n", 22),
        b"-ERR EXEC without MULTI\r\n"
    );
    for k in ["tx:small", "tx:hash", "tx:big1", "tx:big2", "tx:big3"] {
        assert_eq!(
            c.exists::<_, i64>(k).unwrap(),
            0,
            "{k} of a failed EXEC is there"
        );
    }
    // The server takes small writes.
    let _: () = c.set("after", "ok").unwrap();
    assert_eq!(c.get::<_, String>("after").unwrap(), "ok");
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// An HSET or SREM whose writes are far more than one log slot holds (a new entry and a freed
/// one per field, each logged) applies whole: the library's transactions have no size limit
/// (their redo record continues in an overflow extent), so the command answers like Redis and
/// every change is there after a restart.
#[test]
fn a_huge_hset_or_srem_applies_whole_and_survives_restart() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let n = 100_000;
    for chunk in 0..10 {
        let f: Vec<(String, String)> = (chunk * n / 10..(chunk + 1) * n / 10)
            .map(|i| (format!("f{i}"), "1".into()))
            .collect();
        let _: () = c.hset_multiple("h", &f).unwrap();
        let m: Vec<String> = (chunk * n / 10..(chunk + 1) * n / 10)
            .map(|i| format!("m{i}"))
            .collect();
        let _: () = c.sadd("s", &m).unwrap();
    }
    let longer: Vec<(String, String)> = (0..n).map(|i| (format!("f{i}"), "22".into())).collect();
    let _: () = c.hset_multiple("h", &longer).unwrap();
    let gone: Vec<String> = (0..n - 1).map(|i| format!("m{i}")).collect();
    let removed: i64 = c.srem("s", &gone).unwrap();
    assert_eq!(removed, (n - 1) as i64);
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    assert_eq!(c.hlen::<_, i64>("h").unwrap(), n as i64);
    for i in [0, 777, n - 1] {
        assert_eq!(c.hget::<_, _, String>("h", format!("f{i}")).unwrap(), "22");
    }
    let left: Vec<String> = c.smembers("s").unwrap();
    assert_eq!(left, vec![format!("m{}", n - 1)]);
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// A client that disconnects inside MULTI (with WATCHed keys) leaves nothing: its queued
/// writes never run, and another client's WATCH and EXEC are unaffected.
#[test]
fn a_client_that_disconnects_inside_multi_leaves_nothing() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    let r = roundtrip(
        &mut s,
        b"WATCH w\r\nMULTI\r\nSET gone 1\r\nHSET gone:h f v\r\n",
        b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n".len(),
    );
    assert_eq!(r, b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n");
    drop(s);
    std::thread::sleep(Duration::from_millis(100));
    let mut c = srv.client();
    assert_eq!(c.exists::<_, i64>(&["gone", "gone:h"]).unwrap(), 0);
    // Another client's transaction on the same key works as usual.
    let _: () = redis::cmd("WATCH").arg("w").query(&mut c).unwrap();
    let r: Option<(String,)> = redis::pipe()
        .atomic()
        .set("w", "mine")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, Some(("OK".to_string(),)));
    assert_eq!(c.get::<_, String>("w").unwrap(), "mine");
    drop(c);
    srv.stop();
}

/// A pool of keyspace format version 1 (one database of strings, as the previous builds wrote
/// it) is upgraded when the server opens it: its keys, values and expiry times are served from
/// database 0, and `pool check` passes.
#[test]
fn a_version_1_pool_is_upgraded_and_served() {
    use daisy::{PBytesMap, Pool, PoolOptions};
    let d = tmp();
    let path = pool_in(&d);
    {
        let pool = Pool::create(
            &path,
            &PoolOptions::new(daisy_kv::keyspace::LAYOUT)
                .size(32 << 20)
                .lanes(2)
                .log_slot_size(1 << 20),
        )
        .unwrap();
        let root = pool.root::<[u64; 4]>().unwrap();
        pool.transaction(|tx| {
            let map = PBytesMap::create_in(tx)?;
            let mut m = PBytesMap::view(&pool, tx, map)?;
            // Version-1 records: flags 0 (string), or 1 (string with an expiry time).
            m.insert(tx, b"plain", b"\x00hello")?;
            let mut rec = vec![1u8];
            rec.extend_from_slice(&(i64::MAX / 2).to_le_bytes());
            rec.extend_from_slice(b"later");
            m.insert(tx, b"timed", &rec)?;
            let magic = daisy_kv::keyspace::KV_MAGIC;
            tx.write(root, &[magic, 1, map.offset(), 1])
        })
        .unwrap();
    }
    let srv = Server::start(&path);
    let mut c = srv.client();
    assert_eq!(c.get::<_, String>("plain").unwrap(), "hello");
    assert_eq!(c.get::<_, String>("timed").unwrap(), "later");
    assert!(c.ttl::<_, i64>("timed").unwrap() > 1_000_000);
    let _: () = c.hset("new", "f", "v").unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let _: () = c.set("in3", "x").unwrap();
    drop(c);
    srv.stop();
    check_pool(&path);
}

/// A pool of keyspace format version 2 (no lists or sorted sets) is upgraded when the server
/// opens it: only the version word changes (to 3, in one transaction), every key is served,
/// and lists and sorted sets can then be stored; `pool check` passes.
#[test]
fn a_version_2_pool_is_upgraded_and_served() {
    use daisy::Pool;
    use daisy_kv::keyspace::{KvRoot, KV_VERSION, LAYOUT};
    let d = tmp();
    let path = pool_in(&d);
    let srv = Server::start(&path);
    let mut c = srv.client();
    let _: () = c.set("s", "v").unwrap();
    let _: () = c.hset("h", "f", "v").unwrap();
    drop(c);
    srv.stop();
    {
        // Written back as a version-2 build would have left it.
        let pool = Pool::open(&path, LAYOUT).unwrap();
        let root = pool.root::<KvRoot>().unwrap();
        pool.transaction(|tx| tx.update(root, |r| r.version = 2))
            .unwrap();
    }
    let srv = Server::start(&path);
    let mut c = srv.client();
    assert_eq!(c.get::<_, String>("s").unwrap(), "v");
    assert_eq!(c.hget::<_, _, String>("h", "f").unwrap(), "v");
    let _: () = c.rpush("l", "x").unwrap();
    let _: () = c.zadd("z", "m", 1).unwrap();
    drop(c);
    srv.stop();
    let pool = Pool::open(&path, LAYOUT).unwrap();
    let root = pool.root::<KvRoot>().unwrap();
    assert_eq!(pool.read(root).version, KV_VERSION);
    drop(pool);
    check_pool(&path);
}
