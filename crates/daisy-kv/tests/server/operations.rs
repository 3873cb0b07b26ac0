//! Running the server in production: backups (SAVE, BGSAVE, LASTSAVE, INFO persistence), the
//! size limit (--max-size at every start, CONFIG SET maxmemory, the OOM reply agreeing with
//! INFO), and the durability statement in INFO.

use super::*;

fn info_text(c: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).unwrap()
}

fn info_str(c: &mut Connection, section: &str, field: &str) -> String {
    let text = info_text(c, section);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {text}"))
}

fn wait_bgsave(c: &mut Connection) {
    let t0 = std::time::Instant::now();
    while info_field(c, "persistence", "rdb_bgsave_in_progress") != 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "BGSAVE never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The keys and string values of a stopped pool (served again on another thread).
fn served_strings(pool: &Path, keys: &[String]) -> Vec<Option<String>> {
    let srv = Server::start(pool);
    let mut c = srv.client();
    let out = keys
        .iter()
        .map(|k| c.get::<_, Option<String>>(k).unwrap())
        .collect();
    drop(c);
    srv.stop();
    out
}

/// SAVE writes `dir`/`dbfilename` before it replies, with everything the client sent before
/// it (in the same pipeline too), and its reply keeps its place among the client's replies.
/// The copy is a pool that passes every check and serves those keys; LASTSAVE moves.
#[test]
fn save_writes_a_servable_copy_with_every_earlier_write_before_it_replies() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut c)
        .unwrap();
    let name: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dbfilename")
        .query(&mut c)
        .unwrap();
    let backup = Path::new(&dir[1]).join(&name[1]);
    assert_eq!(name[1], "kv.pool.backup");
    assert_eq!(
        std::fs::canonicalize(d.path()).unwrap(),
        Path::new(&dir[1]),
        "dir is the pool's directory"
    );
    let started: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    for i in 0..1000 {
        let _: () = c.set(format!("k{i}"), format!("v{i}")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1100)); // LASTSAVE has one-second steps
    let mut s = srv.raw();
    let got = roundtrip(&mut s, b"SET late 1\r\nSAVE\r\nGET late\r\n", 17);
    assert_eq!(got, b"+OK\r\n+OK\r\n$1\r\n1\r\n");
    assert!(backup.exists());
    let last: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(
        last > started,
        "LASTSAVE {last} after a SAVE, {started} at start"
    );
    assert_eq!(info_field(&mut c, "persistence", "rdb_saves"), 1);
    assert_eq!(
        info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    assert_eq!(
        info_str(&mut c, "persistence", "daisy_backup_last_path"),
        backup.display().to_string()
    );
    // Writes after the SAVE are not in the copy.
    let _: () = c.set("after", "x").unwrap();
    drop(c);
    srv.stop();
    check_pool(&backup);
    let keys: Vec<String> = ["k0", "k999", "late", "after"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        served_strings(&backup, &keys),
        vec![
            Some("v0".into()),
            Some("v999".into()),
            Some("1".into()),
            None
        ]
    );
}

/// INFO's rdb_changes_since_last_save counts the keys writes changed, as Redis's dirty
/// counter (a write that changes nothing counts nothing; FLUSHALL counts the keys it removed),
/// and a successful BGSAVE or SAVE takes it back to 0 (the copy holds every change until then).
#[test]
fn changes_since_the_last_save_count_writes_until_a_backup() {
    let d = tmp();
    let srv = Server::start_with(&pool_in(&d), |o| {
        o.size = 24 << 20;
        o.max_size = Some(32 << 20);
    });
    let mut c = srv.client();
    let changes = |c: &mut Connection| info_field(c, "persistence", "rdb_changes_since_last_save");
    assert_eq!(changes(&mut c), 0);
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut c).unwrap();
    let _: () = redis::cmd("MSET")
        .arg("b")
        .arg(1)
        .arg("c")
        .arg(2)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg("a")
        .arg("b")
        .arg("zz")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        changes(&mut c),
        5,
        "SET 1, MSET 2, DEL of two keys 2 (as Redis)"
    );
    for _ in 0..2 {
        let _: i64 = redis::cmd("SETBIT")
            .arg("s")
            .arg(0)
            .arg(0)
            .query(&mut c)
            .unwrap();
    }
    assert_eq!(changes(&mut c), 6, "the second SETBIT changed nothing");
    // BITFIELD counts each operation that changed a value (or created the key), as Redis's
    // bitfieldGeneric: measured against redis-server 7.0.15.
    let bf = |c: &mut Connection, args: &[&str]| {
        let _: redis::Value = redis::cmd("BITFIELD").arg("f").arg(args).query(c).unwrap();
    };
    bf(&mut c, &["SET", "u8", "0", "1"]);
    assert_eq!(changes(&mut c), 7, "BITFIELD created the key");
    bf(&mut c, &["SET", "u8", "0", "1"]);
    assert_eq!(changes(&mut c), 7, "the same value again changed nothing");
    bf(&mut c, &["SET", "u8", "0", "2", "SET", "u8", "8", "1"]);
    assert_eq!(changes(&mut c), 9, "two operations changed values");
    bf(&mut c, &["OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300"]);
    bf(&mut c, &["INCRBY", "u8", "0", "0"]);
    assert_eq!(
        changes(&mut c),
        9,
        "a failed overflow and INCRBY 0 change nothing"
    );
    let _: i64 = redis::cmd("DEL").arg("f").query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(changes(&mut c), 12, "DEL 1, FLUSHALL removed two keys");
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    wait_bgsave(&mut c);
    assert_eq!(changes(&mut c), 0);
    let _: () = redis::cmd("SET").arg("x").arg(1).query(&mut c).unwrap();
    assert_eq!(changes(&mut c), 1);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    assert_eq!(changes(&mut c), 0);
    // A transaction that fails (a full pool) counts nothing.
    let big = "x".repeat(40 << 20);
    let e = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("OOM"), "{e}");
    assert_eq!(changes(&mut c), 0);
    srv.stop();
}

/// BGSAVE under a pipelined writer: the writer's keys go up one by one (`seq:i`, and `last`
/// = i), so the copy must hold exactly a prefix: every write acknowledged before BGSAVE was
/// sent, none sent after the backup was seen finished, and `last` naming the prefix's end.
/// A second BGSAVE while one runs is refused; SCHEDULE queues one.
#[test]
fn bgsave_under_writes_copies_a_prefix_of_them_and_refuses_a_second_one() {
    let seed = 20261125;
    println!("seed {seed}");
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    // Some bulk, so the copier has work while the writer runs.
    let blob = vec![b'x'; 4000];
    for i in 0..3000 {
        let _: () = c.set(format!("blob:{i}"), &blob).unwrap();
    }
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (sent, acked, stop) = (sent.clone(), acked.clone(), stop.clone());
        let mut w = srv.client();
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering::SeqCst;
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                let mut p = redis::pipe();
                for j in i..i + 16 {
                    p.set(format!("seq:{j}"), j)
                        .ignore()
                        .set("last", j)
                        .ignore();
                }
                sent.store(i + 16, SeqCst);
                let _: () = p.query(&mut w).unwrap();
                i += 16;
                acked.store(i, SeqCst);
            }
        })
    };
    use std::sync::atomic::Ordering::SeqCst;
    while acked.load(SeqCst) < 500 {
        std::thread::yield_now();
    }
    let low = acked.load(SeqCst);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    // A second one while it runs (or just queued) is refused; SCHEDULE is accepted.
    let second: RedisResult<String> = redis::cmd("BGSAVE").query(&mut c);
    let scheduled: Option<String> = match second {
        Err(e) => {
            assert!(
                e.to_string()
                    .contains("Background save already in progress"),
                "{e}"
            );
            Some(redis::cmd("BGSAVE").arg("SCHEDULE").query(&mut c).unwrap())
        }
        // The first one finished already (a fast machine): nothing to check there.
        Ok(_) => None,
    };
    wait_bgsave(&mut c);
    let high = sent.load(SeqCst);
    if let Some(s) = scheduled {
        assert_eq!(s, "Background saving scheduled");
        wait_bgsave(&mut c);
    }
    // Let the scheduled backup (if any) finish: then the file holds one of the two states;
    // only the first is bounded by (low, high), so wait until nothing is scheduled anymore
    // and judge the newest file by the rule for whichever came last.
    let high2 = sent.load(SeqCst);
    stop.store(true, SeqCst);
    writer.join().unwrap();
    assert_eq!(
        info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    let backup = PathBuf::from(info_str(&mut c, "persistence", "daisy_backup_last_path"));
    drop(c);
    srv.stop();
    check_pool(&backup);
    let srv = Server::start(&backup);
    let mut c = srv.client();
    let last: u64 = c.get("last").unwrap();
    assert!(
        last + 1 >= low,
        "the backup lost writes acknowledged before BGSAVE: last {last}, {low} acknowledged"
    );
    assert!(last < high2, "the backup holds writes sent after it finished: last {last}, {high2} sent (first backup: {high})");
    for j in (0..=last).step_by(7).chain([last]) {
        assert_eq!(
            c.get::<_, Option<u64>>(format!("seq:{j}")).unwrap(),
            Some(j),
            "seq:{j}"
        );
    }
    for j in last + 1..last + 40 {
        assert_eq!(
            c.get::<_, Option<u64>>(format!("seq:{j}")).unwrap(),
            None,
            "seq:{j} after last {last}"
        );
    }
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 3000 + last + 1 + 1, "blobs, seq:0..=last and `last`");
    drop(c);
    srv.stop();
}

/// --max-size applies at every start (raising or lowering the limit within the pool's
/// capacity), CONFIG SET maxmemory changes it while serving, the OOM reply names the figures
/// INFO shows, and a limit beyond the capacity is refused with the reason.
#[test]
fn the_size_limit_is_raised_at_restart_and_at_run_time_and_oom_comes_at_it() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |o| {
        o.size = 24 << 20;
        o.max_size = Some(32 << 20);
    });
    let mut c = srv.client();
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), 32 << 20);
    let cap = info_field(&mut c, "memory", "daisy_pool_capacity");
    // The capacity in whole chunks after the header, logs and chunk table.
    assert!(
        cap <= daisy_kv::NEW_POOL_CAPACITY && cap + (1 << 20) > daisy_kv::NEW_POOL_CAPACITY,
        "{cap}"
    );
    let val = vec![1u8; 256 << 10];
    let mut n = 0;
    let oom = loop {
        match c.set::<_, _, ()>(format!("v{n}"), &val) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 1000);
    };
    // Redis's text, byte for byte; the memory it means is the pool's size, at the limit.
    assert_eq!(oom.code(), Some("OOM"), "{oom}");
    assert_eq!(
        oom.detail(),
        Some("command not allowed when used memory > 'maxmemory'.")
    );
    let size = info_field(&mut c, "memory", "daisy_pool_size");
    assert!(
        size <= 32 << 20 && size + (512 << 10) > 32 << 20,
        "the pool is full: {size}"
    );
    // Raised while serving: the same write now fits.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("80mb")
        .query(&mut c)
        .unwrap();
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), 80 << 20);
    let _: () = c.set(format!("v{n}"), &val).unwrap();
    let e = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1000gb")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("capacity"), "{e}");
    assert_eq!(
        info_field(&mut c, "memory", "maxmemory"),
        80 << 20,
        "a refused CONFIG SET changes nothing"
    );
    drop(c);
    srv.stop();
    // Raised at restart.
    let srv = Server::start_with(&pool, |o| o.max_size = Some(96 << 20));
    let mut c = srv.client();
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), 96 << 20);
    assert_eq!(c.strlen::<_, usize>("v0").unwrap(), val.len());
    drop(c);
    srv.stop();
    // Beyond the capacity: refused at start, naming it.
    let mut o = daisy_kv::Options {
        pool: pool.clone(),
        port: 0,
        quiet: true,
        max_size: Some(1 << 40),
        ..Default::default()
    };
    o.size = 1 << 20;
    let e = daisy_kv::serve(&o, |_| {}).unwrap_err();
    assert!(e.contains("--max-size") && e.contains("capacity"), "{e}");
    check_pool(&pool);
}

/// INFO says what survives what: a pool on tmpfs survives a crash of the process, not a power
/// failure.
#[test]
fn info_states_the_medium_and_what_survives() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let medium = info_str(&mut c, "persistence", "daisy_medium");
    let power = info_field(&mut c, "persistence", "daisy_survives_power_loss");
    let fs = daisy::internals::fs_type_name(&std::fs::File::open(&pool).unwrap());
    if fs == "tmpfs" {
        assert_eq!(power, 0, "{medium}");
        assert!(
            medium.starts_with("tmpfs") && medium.contains("NOT a reboot or a power failure"),
            "{medium}"
        );
    } else {
        assert_eq!(power, 1, "{medium}");
        assert!(medium.contains("msync"), "{medium}");
    }
    drop(c);
    srv.stop();
}

/// maxmemory as Redis: the limit applies to INFO's used_memory (so the OOM refusal and INFO
/// agree); with `noeviction` a write past it is refused `-OOM` while reads go on; the
/// `volatile-*` policies remove only keys with a time to live (and refuse once none is
/// left), the `allkeys-*` ones any key; each eviction is counted (INFO evicted_keys) and
/// published (`evicted` keyspace events); memory ends under the limit, and the pool checks
/// clean after a restart.
#[test]
fn maxmemory_evicts_by_policy_and_refuses_with_noeviction() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let val = vec![7u8; 4000];
    for i in 0..100 {
        let _: () = c.set(format!("keep:{i}"), &val).unwrap();
        let _: () = c.set_ex(format!("ttl:{i}"), &val, 1000).unwrap();
    }
    let used = info_field(&mut c, "memory", "used_memory");
    // Room for ~25 more values, then the policy has to act.
    let limit = used + 100 * 1024;
    let cfg = |c: &mut Connection, k: &str, v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query(c)
            .unwrap();
    };
    cfg(&mut c, "maxmemory", &limit.to_string());
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), limit);
    // noeviction (the default): writes stop at the limit with Redis's error; reads go on.
    let mut n = 0;
    let oom = loop {
        match c.set::<_, _, ()>(format!("new:{n}"), &val) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 1000, "never refused");
    };
    assert_eq!(oom.code(), Some("OOM"), "{oom}");
    assert!(n > 10, "refused long before the limit: {n} writes");
    assert!(info_field(&mut c, "memory", "used_memory") > limit);
    assert_eq!(c.strlen::<_, usize>("keep:0").unwrap(), val.len());
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 0);

    // volatile-lru: only keys with a TTL go, and each is announced.
    cfg(&mut c, "notify-keyspace-events", "Ee");
    let mut sub = srv.client();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:evicted").unwrap();
    cfg(&mut c, "maxmemory-policy", "volatile-lru");
    for i in 0..40 {
        let _: () = c.set(format!("more:{i}"), &val).unwrap();
    }
    let evicted = info_field(&mut c, "stats", "evicted_keys");
    assert!(evicted > 0, "nothing evicted");
    let ttl_left: usize = (0..100)
        .filter(|i| c.exists::<_, bool>(format!("ttl:{i}")).unwrap())
        .count();
    assert_eq!(
        ttl_left as u64,
        100 - evicted,
        "only volatile keys were evicted"
    );
    for i in 0..100 {
        assert!(
            c.exists::<_, bool>(format!("keep:{i}")).unwrap(),
            "keep:{i} evicted"
        );
    }
    assert!(info_field(&mut c, "memory", "used_memory") <= limit);
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let m = ps.get_message().unwrap();
    let key: String = m.get_payload().unwrap();
    assert!(key.starts_with("ttl:"), "{key}");
    drop(ps);

    // With no volatile key left, volatile-random cannot free anything: -OOM again.
    cfg(&mut c, "maxmemory-policy", "volatile-random");
    let mut oom = None;
    for i in 0..200 {
        if let Err(e) = c.set::<_, _, ()>(format!("fill:{i}"), &val) {
            oom = Some(e);
            break;
        }
    }
    let oom = oom.expect("volatile-random never refused");
    assert_eq!(oom.code(), Some("OOM"), "{oom}");
    for i in 0..100 {
        assert!(
            !c.exists::<_, bool>(format!("ttl:{i}")).unwrap(),
            "ttl:{i} survived"
        );
    }

    // allkeys-random: any key goes, and the write succeeds.
    cfg(&mut c, "maxmemory-policy", "allkeys-random");
    let before: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    for i in 0..20 {
        let _: () = c.set(format!("last:{i}"), &val).unwrap();
    }
    let after: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(after < before + 20, "nothing evicted: {before} -> {after}");
    assert!(info_field(&mut c, "memory", "used_memory") <= limit);
    drop(c);
    srv.stop();
    check_pool(&pool);
}
