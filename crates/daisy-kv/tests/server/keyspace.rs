//! The keyspace: key commands, SCAN and FLUSHALL; expiry (lazy, active, EXPIRE options)
//! and TTLs across a restart; Redis's answers in corners.

use super::*;
use std::time::Instant;

#[test]
fn key_commands_scan_and_flush() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    for i in 0..500 {
        let _: () = c.set(format!("user:{i}"), i).unwrap();
    }
    let _: () = c.set("other", 1).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 501);
    let mut keys: Vec<String> = c.keys("user:1?").unwrap();
    keys.sort();
    assert_eq!(
        keys,
        (10..20).map(|i| format!("user:{i}")).collect::<Vec<_>>()
    );
    // SCAN returns every key exactly once, in small steps.
    let mut seen = std::collections::HashMap::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("user:*")
            .arg("COUNT")
            .arg(20)
            .query(&mut c)
            .unwrap();
        calls += 1;
        for k in batch {
            *seen.entry(k).or_insert(0) += 1;
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert!(calls > 5, "COUNT 20 over 500 keys took {calls} calls");
    assert_eq!(seen.len(), 500);
    assert!(seen.values().all(|&n| n == 1));
    assert!(err_text(redis::cmd("SCAN").arg("abc").query::<()>(&mut c)).contains("invalid cursor"));

    assert_eq!(
        c.exists::<_, i64>(&["user:1", "user:2", "nope", "user:1"])
            .unwrap(),
        3
    );
    assert_eq!(c.key_type::<_, String>("user:1").unwrap(), "string");
    assert_eq!(c.key_type::<_, String>("nope").unwrap(), "none");
    assert_eq!(c.del::<_, i64>(&["user:1", "user:2", "nope"]).unwrap(), 2);
    assert_eq!(
        redis::cmd("UNLINK")
            .arg("user:3")
            .query::<i64>(&mut c)
            .unwrap(),
        1
    );
    let _: () = redis::cmd("SET")
        .arg("r")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let _: () = c.rename("r", "r2").unwrap();
    assert_eq!(c.get::<_, String>("r2").unwrap(), "v");
    assert!(c.ttl::<_, i64>("r2").unwrap() > 900, "RENAME keeps the TTL");
    assert!(!c.rename_nx::<_, _, bool>("r2", "other").unwrap());
    assert!(err_text(c.rename::<_, _, ()>("nope", "x")).contains("no such key"));
    let k: String = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
    assert!(c.exists::<_, bool>(&k).unwrap());

    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    assert_eq!(
        redis::cmd("RANDOMKEY")
            .query::<Option<String>>(&mut c)
            .unwrap(),
        None
    );
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(!info.contains("db0:"), "{info}");
    // The map is usable after a flush.
    let _: () = c.set("after", "flush").unwrap();
    assert_eq!(c.get::<_, String>("after").unwrap(), "flush");
    srv.stop();
}

#[test]
fn expiry_lazy_active_options_and_restart() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let _: () = c.set("k", "v").unwrap();
    assert_eq!(c.ttl::<_, i64>("k").unwrap(), -1);
    assert_eq!(c.ttl::<_, i64>("nope").unwrap(), -2);
    assert!(c.expire::<_, bool>("k", 100).unwrap());
    // EXPIRE options (Redis 7): NX, XX, GT, LT.
    assert!(!redis::cmd("EXPIRE")
        .arg("k")
        .arg(200)
        .arg("NX")
        .query::<bool>(&mut c)
        .unwrap());
    assert!(redis::cmd("EXPIRE")
        .arg("k")
        .arg(200)
        .arg("GT")
        .query::<bool>(&mut c)
        .unwrap());
    assert!(!redis::cmd("EXPIRE")
        .arg("k")
        .arg(300)
        .arg("LT")
        .query::<bool>(&mut c)
        .unwrap());
    assert!(redis::cmd("EXPIRE")
        .arg("k")
        .arg(150)
        .arg("XX")
        .query::<bool>(&mut c)
        .unwrap());
    assert!((149..=150).contains(&c.ttl::<_, i64>("k").unwrap()));
    assert!(c.persist::<_, bool>("k").unwrap());
    assert_eq!(c.ttl::<_, i64>("k").unwrap(), -1);
    assert!(!c.persist::<_, bool>("k").unwrap());
    // Absolute times; a time in the past deletes.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(c.expire_at::<_, bool>("k", now_s + 1000).unwrap());
    assert!(c.ttl::<_, i64>("k").unwrap() > 990);
    assert!(c.expire_at::<_, bool>("k", now_s - 10).unwrap());
    assert!(!c.exists::<_, bool>("k").unwrap());

    // Lazy expiry: a key read after its time is gone.
    let _: () = c.pset_ex("short", "v", 50).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(c.get::<_, Option<String>>("short").unwrap(), None);
    // Active expiry: keys never read again are removed too.
    for i in 0..300 {
        let _: () = c.pset_ex(format!("tmp:{i}"), "v", 30).unwrap();
    }
    let _: () = c.set_ex("keep", "v", 1000).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap() > 1 {
        assert!(
            Instant::now() < deadline,
            "active expiry did not remove the keys"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(info.contains("db0:keys=1,expires=1"), "{info}");
    let stats: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    let expired: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(expired >= 301, "{stats}");

    // Values and TTLs survive a restart (the expiry time is absolute and persistent).
    let _: () = c.set("durable", "yes").unwrap();
    drop(c);
    srv.stop();
    let srv = Server::start(&pool);
    let mut c = srv.client();
    assert_eq!(c.get::<_, String>("durable").unwrap(), "yes");
    let t: i64 = c.ttl("keep").unwrap();
    assert!((990..=1000).contains(&t), "ttl after restart {t}");
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(info.contains("db0:keys=2,expires=1"), "{info}");
    srv.stop();
}

/// Redis 7.0's answers in corners: the one decrement that cannot be negated, EXPIRE options
/// checked before its time, and RANDOMKEY finding the one live key among many expired ones
/// (Redis removes expired picks and keeps picking).
#[test]
fn redis_corner_answers() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    for (req, want) in [
        (
            &b"DECRBY n -9223372036854775808\r\n"[..],
            "-ERR decrement would overflow\r\n",
        ),
        (b"EXPIRE k abc FOO\r\n", "-ERR Unsupported option FOO\r\n"),
    ] {
        let got = roundtrip(&mut s, req, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
    let n = 5000;
    let mut req = String::new();
    for i in 0..n {
        req.push_str(&format!("SET k{i} v PX 1\r\n"));
    }
    req.push_str("SET live v\r\n");
    let got = roundtrip(&mut s, req.as_bytes(), 5 * (n + 1));
    assert!(got.iter().filter(|&&b| b == b'+').count() == n + 1);
    std::thread::sleep(Duration::from_millis(30));
    for _ in 0..5 {
        let want = "$4\r\nlive\r\n";
        let got = roundtrip(&mut s, b"RANDOMKEY\r\n", want.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
    srv.stop();
}
