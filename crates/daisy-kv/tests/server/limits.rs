//! Limits: a full pool, and commands over more keys than one redo record can change.

use super::*;

#[test]
fn a_full_pool_answers_oom_and_keeps_what_it_has() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |o| {
        o.size = 160 << 20;
        o.max_size = Some(160 << 20);
    });
    let mut c = srv.client();
    let val = vec![7u8; 1 << 20];
    let mut stored = 0;
    let oom = loop {
        match c.set::<_, _, ()>(format!("big:{stored}"), &val) {
            Ok(()) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 1000, "the pool never filled");
    };
    assert_eq!(oom.code(), Some("OOM"), "{oom}");
    assert!(stored > 10);
    // Everything stored before is intact, reads work, and freeing space lets writes in.
    for i in 0..stored {
        assert_eq!(
            c.get::<_, Vec<u8>>(format!("big:{i}")).unwrap().len(),
            val.len()
        );
    }
    let _: () = c.del("big:0").unwrap();
    let _: () = c.set("small", "fits").unwrap();
    drop(c);
    srv.stop();
    let p = daisy::Pool::open(&pool, daisy_kv::keyspace::LAYOUT).unwrap();
    let report = p.check(None);
    assert!(report.ok(), "{:?}", report.problems);
    let (_, problems) = daisy_kv::keyspace::check(&p).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let ks = daisy_kv::keyspace::Keyspace::open(&p, 16).unwrap();
    assert_eq!(ks.total_keys().unwrap(), stored as u64);
}

/// Commands that touch more keys than one redo record can change: reads over many expired
/// keys still answer (lazy expiry steps aside when the record runs low), and a DEL of more
/// keys than one log slot can describe deletes them all in one transaction.
#[test]
fn huge_commands_over_many_keys() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    const N: usize = 60_000;
    let keys: Vec<String> = (0..N).map(|i| format!("e:{i:06}")).collect();
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("SET").arg(k).arg("v").arg("PX").arg(300).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(350));
    // Every key has expired; most are still in the pool (active expiry works in small steps).
    let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
    assert_eq!(got.len(), N);
    assert!(got.iter().all(|v| v.is_none()));
    let n: i64 = redis::cmd("EXISTS").arg(&keys).query(&mut c).unwrap();
    assert_eq!(n, 0);

    // Live keys: a DEL of all of them in one command is one transaction (its redo record
    // continues in an overflow extent).
    let live: Vec<String> = (0..N).map(|i| format!("l:{i:06}")).collect();
    let mut p = redis::pipe();
    for k in &live {
        p.cmd("SET").arg(k).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let n: i64 = redis::cmd("DEL").arg(&live).query(&mut c).unwrap();
    assert_eq!(n, N as i64);
    let n: i64 = redis::cmd("EXISTS").arg(&live).query(&mut c).unwrap();
    assert_eq!(n, 0);
    assert_eq!(c.get::<_, Option<String>>("l:000001").unwrap(), None);
    srv.stop();
}

/// A pool filled to the last small block still empties with FLUSHALL (it must not need room
/// for the new empty table first) and takes writes again.
#[test]
fn flushall_empties_a_completely_full_pool() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |o| {
        o.size = 24 << 20;
        o.max_size = Some(24 << 20);
    });
    let mut c = srv.client();
    let mut n = 0;
    for size in [1 << 16, 1 << 10, 16] {
        let val = vec![1u8; size];
        loop {
            match c.set::<_, _, ()>(format!("k:{n}"), &val) {
                Ok(()) => n += 1,
                Err(e) => {
                    assert_eq!(e.code(), Some("OOM"), "{e}");
                    break;
                }
            }
            assert!(n < 1_000_000, "the pool never filled");
        }
    }
    assert!(n > 100);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    let _: () = c.set("after", "yes").unwrap();
    assert_eq!(c.get::<_, String>("after").unwrap(), "yes");
    drop(c);
    srv.stop();
    let p = daisy::Pool::open(&pool, daisy_kv::keyspace::LAYOUT).unwrap();
    let report = p.check(None);
    assert!(report.ok(), "{:?}", report.problems);
}
