//! String commands, as Redis answers them.

use super::*;

#[test]
fn string_commands_match_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = c.set("k", "v1").unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v1");
    // SET options: NX, XX, GET, EX/PX/KEEPTTL.
    let r: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v2")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None);
    let r: Option<String> = redis::cmd("SET")
        .arg("new")
        .arg("x")
        .arg("XX")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None);
    assert!(!c.exists::<_, bool>("new").unwrap());
    let r: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v3")
        .arg("GET")
        .query(&mut c)
        .unwrap();
    assert_eq!(r.as_deref(), Some("v1"));
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("x")
        .arg("EX")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let ttl: i64 = c.ttl("t").unwrap();
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("y")
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    assert!(c.pttl::<_, i64>("t").unwrap() > 90_000);
    let _: () = c.set("t", "z").unwrap();
    assert_eq!(
        c.ttl::<_, i64>("t").unwrap(),
        -1,
        "a plain SET clears the TTL"
    );
    assert!(err_text(
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("EX")
            .arg(0)
            .query::<()>(&mut c)
    )
    .contains("invalid expire time in 'set' command"));
    assert!(err_text(
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("EX")
            .arg("x")
            .query::<()>(&mut c)
    )
    .contains("not an integer"));
    assert!(err_text(
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("NX")
            .arg("XX")
            .query::<()>(&mut c)
    )
    .contains("syntax error"));

    // Counters.
    assert_eq!(c.incr::<_, _, i64>("n", 1).unwrap(), 1);
    assert_eq!(
        redis::cmd("INCRBY")
            .arg("n")
            .arg(41)
            .query::<i64>(&mut c)
            .unwrap(),
        42
    );
    assert_eq!(
        redis::cmd("DECR").arg("n").query::<i64>(&mut c).unwrap(),
        41
    );
    assert_eq!(
        redis::cmd("DECRBY")
            .arg("n")
            .arg(1)
            .query::<i64>(&mut c)
            .unwrap(),
        40
    );
    assert!(err_text(redis::cmd("INCR").arg("k").query::<i64>(&mut c)).contains("not an integer"));
    let _: () = c.set("big", i64::MAX).unwrap();
    assert!(err_text(redis::cmd("INCR").arg("big").query::<i64>(&mut c)).contains("overflow"));
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("10.5")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "10.5");
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("0.5")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "11");
    // Redis's long double arithmetic and digits (a 64-bit double would say
    // 0.30000000000000004, then 12345.1).
    let _: () = c.set("g", "0.1").unwrap();
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("g")
        .arg("0.2")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "0.3");
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("h")
        .arg("12345.1")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "12345.09999999999999964");
    assert_eq!(c.get::<_, String>("h").unwrap(), "12345.09999999999999964");

    // Strings.
    assert_eq!(c.append::<_, _, i64>("s", "Hello").unwrap(), 5);
    assert_eq!(c.append::<_, _, i64>("s", " World").unwrap(), 11);
    assert_eq!(c.strlen::<_, i64>("s").unwrap(), 11);
    assert_eq!(c.getrange::<_, String>("s", 0, 4).unwrap(), "Hello");
    assert_eq!(c.getrange::<_, String>("s", -5, -1).unwrap(), "World");
    assert_eq!(c.getrange::<_, String>("s", 5, 3).unwrap(), "");
    assert_eq!(c.setrange::<_, _, i64>("s", 6, "Redis").unwrap(), 11);
    assert_eq!(c.get::<_, String>("s").unwrap(), "Hello Redis");
    assert_eq!(c.setrange::<_, _, i64>("pad", 3, "x").unwrap(), 4);
    assert_eq!(c.get::<_, Vec<u8>>("pad").unwrap(), b"\0\0\0x");
    assert_eq!(c.getset::<_, _, String>("s", "new").unwrap(), "Hello Redis");
    assert_eq!(
        redis::cmd("GETDEL")
            .arg("s")
            .query::<String>(&mut c)
            .unwrap(),
        "new"
    );
    assert!(!c.exists::<_, bool>("s").unwrap());
    assert!(c.set_nx::<_, _, bool>("nx", 1).unwrap());
    assert!(!c.set_nx::<_, _, bool>("nx", 2).unwrap());
    let _: () = c.set_ex("ex", "v", 50).unwrap();
    assert!(c.ttl::<_, i64>("ex").unwrap() > 40);
    let _: () = c.mset(&[("a", "1"), ("b", "2")]).unwrap();
    let v: Vec<Option<String>> = c.mget(&["a", "nope", "b"]).unwrap();
    assert_eq!(v, vec![Some("1".into()), None, Some("2".into())]);
    assert!(!c.mset_nx::<_, _, bool>(&[("a", "9"), ("zz", "9")]).unwrap());
    assert!(
        !c.exists::<_, bool>("zz").unwrap(),
        "MSETNX is all or nothing"
    );
    assert!(err_text(redis::cmd("MSET").arg("a").query::<()>(&mut c))
        .contains("wrong number of arguments for 'mset' command"));

    // Binary-safe keys and values, and a large value.
    let key = vec![0u8, 255, 13, 10, 42];
    let val: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    let _: () = c.set(&key, &val).unwrap();
    assert_eq!(c.get::<_, Vec<u8>>(&key).unwrap(), val);
    srv.stop();
}
