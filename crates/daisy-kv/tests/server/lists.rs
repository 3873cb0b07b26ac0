//! Lists: both encodings against a model, conversion at `list-max-listpack-size`, a big list
//! across a restart and its deletion, blocking pops served, timed out, refused in MULTI and
//! unblocked, WRONGTYPE.

use super::*;
use std::collections::VecDeque;

/// A small deterministic generator (xorshift), seeded and printed.
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

fn lrange(c: &mut Connection, key: &str) -> Vec<String> {
    c.lrange(key, 0, -1).unwrap()
}

/// Random list commands on keys that stay packed and keys that become sequences (the limit
/// set to 16 items), each reply and the whole list compared with a VecDeque model; the lists
/// are the same after a restart and the pool checks clean.
#[test]
fn list_commands_match_a_model_on_both_encodings() {
    let seed = 0x5eed_1157_u64;
    println!("seed {seed:#x}");
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("list-max-listpack-size")
        .arg(16)
        .query(&mut c)
        .unwrap();
    let mut rng = Rng(seed);
    let keys = ["small", "big", "bigger"];
    let mut model: Vec<VecDeque<String>> = vec![VecDeque::new(); keys.len()];
    // The big keys start long (pushes dominate); the small one stays short.
    for step in 0..3000 {
        let k = rng.below(keys.len() as u64) as usize;
        let key = keys[k];
        let m = &mut model[k];
        let cap = if k == 0 { 12 } else { 400 };
        let v = format!("v{}", rng.below(20));
        let op = rng.below(12);
        let ctx = format!("step {step} op {op} key {key}");
        match op {
            0 | 1 if m.len() < cap => {
                let n: usize = c.lpush(key, &v).unwrap();
                m.push_front(v);
                assert_eq!(n, m.len(), "{ctx}");
            }
            2 | 3 if m.len() < cap => {
                let items = [v.clone(), format!("{v}x")];
                let n: usize = c.rpush(key, &items).unwrap();
                m.extend(items);
                assert_eq!(n, m.len(), "{ctx}");
            }
            4 => {
                let got: Option<String> = c.lpop(key, None).unwrap();
                assert_eq!(got, m.pop_front(), "{ctx}");
            }
            5 => {
                let n = rng.below(4) as usize + 1;
                let got: Option<Vec<String>> =
                    redis::cmd("RPOP").arg(key).arg(n).query(&mut c).unwrap();
                let want: Vec<String> = (0..n).map_while(|_| m.pop_back()).collect();
                assert_eq!(got.unwrap_or_default(), want, "{ctx}");
            }
            6 if !m.is_empty() => {
                let i = rng.below(m.len() as u64) as isize;
                let _: () = c.lset(key, i, &v).unwrap();
                m[i as usize] = v;
            }
            7 => {
                let pivot = format!("v{}", rng.below(20));
                let after = rng.below(2) == 0;
                let r: i64 = redis::cmd("LINSERT")
                    .arg(key)
                    .arg(if after { "AFTER" } else { "BEFORE" })
                    .arg(&pivot)
                    .arg(&v)
                    .query(&mut c)
                    .unwrap();
                match m.iter().position(|x| *x == pivot) {
                    Some(p) => {
                        m.insert(p + after as usize, v);
                        assert_eq!(r, m.len() as i64, "{ctx}");
                    }
                    None if m.is_empty() => assert_eq!(r, 0, "{ctx}"),
                    None => assert_eq!(r, -1, "{ctx}"),
                }
            }
            8 => {
                let count = rng.below(5) as i64 - 2;
                let r: usize = c.lrem(key, count as isize, &v).unwrap();
                let mut removed = 0;
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                if count >= 0 {
                    let mut i = 0;
                    while i < m.len() {
                        if removed < limit && m[i] == v {
                            m.remove(i);
                            removed += 1;
                        } else {
                            i += 1;
                        }
                    }
                } else {
                    let mut i = m.len();
                    while i > 0 {
                        i -= 1;
                        if removed < limit && m[i] == v {
                            m.remove(i);
                            removed += 1;
                        }
                    }
                }
                assert_eq!(r, removed, "{ctx}");
            }
            9 if rng.below(8) == 0 => {
                let s = rng.below(5) as isize;
                let e = -(rng.below(5) as isize) - 1;
                let _: () = c.ltrim(key, s, e).unwrap();
                let len = m.len() as isize;
                let (s2, e2) = (s.min(len), (len + e).max(-1));
                let keep: VecDeque<String> = if s2 > e2 {
                    VecDeque::new()
                } else {
                    m.range(s2 as usize..=e2 as usize).cloned().collect()
                };
                *m = keep;
            }
            10 => {
                let i = rng.below(m.len() as u64 + 2) as isize - 1;
                let got: Option<String> = c.lindex(key, i).unwrap();
                let idx = if i < 0 { m.len() as isize + i } else { i };
                let want = (idx >= 0).then(|| m.get(idx as usize).cloned()).flatten();
                assert_eq!(got, want, "{ctx}");
            }
            11 => {
                let got: Option<usize> = redis::cmd("LPOS").arg(key).arg(&v).query(&mut c).unwrap();
                assert_eq!(got, m.iter().position(|x| *x == v), "{ctx}");
            }
            _ => {}
        }
        if step % 97 == 0 {
            assert_eq!(lrange(&mut c, key), Vec::from(m.clone()), "{ctx}");
        }
    }
    for (k, key) in keys.iter().enumerate() {
        assert_eq!(lrange(&mut c, key), Vec::from(model[k].clone()), "{key}");
        let n: usize = c.llen(key).unwrap();
        assert_eq!(n, model[k].len());
    }
    let enc: Option<String> = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("big")
        .query(&mut c)
        .unwrap();
    if !model[1].is_empty() {
        assert_eq!(enc.as_deref(), Some("quicklist"));
    }
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    for (k, key) in keys.iter().enumerate() {
        assert_eq!(
            lrange(&mut c, key),
            Vec::from(model[k].clone()),
            "{key} after restart"
        );
    }
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// A list of 200,000 items (a sequence of many chunks) answers at both ends and in the
/// middle, survives a restart, copies, trims, and is freed whole by DEL (in the background:
/// the pool's objects return to what they were).
#[test]
fn a_big_list_survives_restart_and_is_freed() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    // The database's own map exists before the baseline is taken.
    let _: () = c.set("anchor", "x").unwrap();
    let objects_before: i64 = memory_objects(&mut c);
    let n = 200_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let items: Vec<String> = chunk.iter().map(|i| format!("item:{i}")).collect();
        let _: () = c.rpush("big", &items).unwrap();
    }
    assert_eq!(c.llen::<_, usize>("big").unwrap(), n);
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    assert_eq!(c.llen::<_, usize>("big").unwrap(), n);
    assert_eq!(c.lindex::<_, String>("big", 0).unwrap(), "item:0");
    assert_eq!(
        c.lindex::<_, String>("big", -1).unwrap(),
        format!("item:{}", n - 1)
    );
    assert_eq!(
        c.lindex::<_, String>("big", 123_456).unwrap(),
        "item:123456"
    );
    let mid: Vec<String> = c.lrange("big", 100_000, 100_002).unwrap();
    assert_eq!(mid, ["item:100000", "item:100001", "item:100002"]);
    let _: () = redis::cmd("COPY")
        .arg("big")
        .arg("copy")
        .query(&mut c)
        .unwrap();
    let _: () = c.ltrim("copy", 1000, -1001).unwrap();
    assert_eq!(c.llen::<_, usize>("copy").unwrap(), n - 2000);
    assert_eq!(c.lindex::<_, String>("copy", 0).unwrap(), "item:1000");
    assert_eq!(c.llen::<_, usize>("big").unwrap(), n, "the copy is its own");
    let popped: Vec<String> = redis::cmd("LPOP").arg("big").arg(3).query(&mut c).unwrap();
    assert_eq!(popped, ["item:0", "item:1", "item:2"]);
    let _: () = c.del(&["big", "copy"]).unwrap();
    // Lazyfree drains in the background; wait for the pool's objects to come back.
    let mut left = 0;
    for _ in 0..200 {
        left = memory_objects(&mut c) - objects_before;
        if left <= 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(left <= 0, "{left} objects still allocated after DEL");
    drop(c);
    srv.stop();
    check_pool(&pool);
}

fn memory_objects(c: &mut Connection) -> i64 {
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(c).unwrap();
    let mut it = stats.iter();
    while let Some(k) = it.next() {
        let v = it.next().unwrap();
        if let (redis::Value::BulkString(k), redis::Value::Int(n)) = (k, v) {
            if k == b"daisy.pool.objects" {
                return *n;
            }
        }
    }
    panic!("MEMORY STATS has no daisy.pool.objects: {stats:?}");
}

/// BLPOP waits for a push from another client and gets it; BRPOP times out with a null;
/// BLMOVE moves as soon as the source gets an item; inside MULTI a blocking pop answers at
/// once; CLIENT UNBLOCK ends a wait with a null; a pushed list a blocked client took is gone.
#[test]
fn blocking_pops_are_served_time_out_and_unblock() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();

    let addr = srv.addr;
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let got: Option<(String, String)> = redis::cmd("BLPOP")
            .arg("q1")
            .arg("q2")
            .arg(5)
            .query(&mut w)
            .unwrap();
        got
    });
    wait_blocked(&mut c, 1);
    let n: i64 = c.rpush("q2", "job").unwrap();
    assert_eq!(n, 1);
    assert_eq!(waiter.join().unwrap(), Some(("q2".into(), "job".into())));
    assert_eq!(
        c.exists::<_, i64>("q2").unwrap(),
        0,
        "the popped list is deleted"
    );

    let t = std::time::Instant::now();
    let got: Option<(String, String)> = redis::cmd("BRPOP")
        .arg("none")
        .arg(0.2)
        .query(&mut c)
        .unwrap();
    assert_eq!(got, None);
    assert!(
        t.elapsed() >= Duration::from_millis(190),
        "{:?}",
        t.elapsed()
    );

    let mover = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let got: Option<String> = redis::cmd("BLMOVE")
            .arg("src")
            .arg("dst")
            .arg("LEFT")
            .arg("RIGHT")
            .arg(5)
            .query(&mut w)
            .unwrap();
        got
    });
    wait_blocked(&mut c, 1);
    let _: () = c.rpush("src", &["a", "b"]).unwrap();
    assert_eq!(mover.join().unwrap().as_deref(), Some("a"));
    assert_eq!(lrange(&mut c, "src"), ["b"]);
    assert_eq!(lrange(&mut c, "dst"), ["a"]);

    // In MULTI a blocking command never blocks: it answers as its timeout passed.
    let r: (Option<(String, String)>,) = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("empty")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(r.0, None);

    // CLIENT UNBLOCK ends a wait with a null.
    let stuck = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).unwrap();
        let got: Option<(String, String)> = redis::cmd("BLPOP")
            .arg("never")
            .arg(0)
            .query(&mut w)
            .unwrap_or_else(|e| panic!("client {id}: {e}"));
        got
    });
    wait_blocked(&mut c, 1);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    let id = list
        .lines()
        .find(|l| l.contains("cmd=blpop"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .unwrap_or_else(|| panic!("no blocked client in {list}"))
        .to_string();
    let n: i64 = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(&id)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(stuck.join().unwrap(), None);

    // A blocking pop on a key of another type is WRONGTYPE, at once.
    let _: () = c.set("str", "x").unwrap();
    let e = err_text(redis::cmd("BLPOP").arg("str").arg(1).query::<()>(&mut c));
    assert!(e.starts_with("WRONGTYPE"), "{e}");
    drop(c);
    srv.stop();
    check_pool(&pool);
}

/// Wait until INFO clients shows `n` blocked clients.
fn wait_blocked(c: &mut Connection, n: u64) {
    for _ in 0..500 {
        let text: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
        let b = text
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if b >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no client blocked");
}

/// List commands on a key of another type answer WRONGTYPE and change nothing.
#[test]
fn list_commands_on_other_types_are_wrongtype() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let _: () = c.hset("h", "f", "v").unwrap();
    for cmd in [
        vec!["LPUSH", "h", "x"],
        vec!["RPOP", "h"],
        vec!["LRANGE", "h", "0", "-1"],
        vec!["LLEN", "h"],
        vec!["LMOVE", "h", "d", "LEFT", "LEFT"],
    ] {
        let e = err_text(redis::cmd(cmd[0]).arg(&cmd[1..]).query::<()>(&mut c));
        assert!(
            e.contains("WRONGTYPE Operation against a key holding the wrong kind of value"),
            "{cmd:?}: {e}"
        );
    }
    let _: () = c.rpush("l", "x").unwrap();
    let e = err_text(
        redis::cmd("LMOVE")
            .arg("l")
            .arg("h")
            .arg("LEFT")
            .arg("LEFT")
            .query::<()>(&mut c),
    );
    assert!(e.contains("WRONGTYPE"), "{e}");
    assert_eq!(lrange(&mut c, "l"), ["x"], "a refused LMOVE pops nothing");
    drop(c);
    srv.stop();
}

/// Pushes of several items at once, in both directions, onto a packed list (spliced into its
/// blob), across the default byte limit (8 KiB of items: the push that crosses it converts the
/// list) and onto the sequence after: the order is Redis's (LPUSH a b c leaves c first), a TTL
/// stays, LPUSHX/RPUSHX add only to an existing list, and the list is the same after a
/// restart and the pool checks clean.
#[test]
fn multi_item_pushes_keep_order_and_ttl_across_conversion() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let mut model: VecDeque<String> = VecDeque::new();
    let n: usize = redis::cmd("RPUSHX")
        .arg("l")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0, "RPUSHX on a missing key");
    let _: () = c.rpush("l", "first").unwrap();
    model.push_back("first".into());
    let _: () = c.pexpire("l", 100_000_000).unwrap();
    // 3 items of 40 bytes per step: 8 KiB of items is passed around step 60.
    for step in 0..120 {
        let items: Vec<String> = (0..3)
            .map(|i| format!("{step:04}-{i}-{}", "p".repeat(33)))
            .collect();
        let n: usize = if step % 3 == 0 {
            let n = c.lpush("l", &items).unwrap();
            for it in &items {
                model.push_front(it.clone());
            }
            n
        } else if step % 3 == 1 {
            let n = c.rpush("l", &items).unwrap();
            model.extend(items.iter().cloned());
            n
        } else {
            let n = redis::cmd("LPUSHX")
                .arg("l")
                .arg(&items)
                .query(&mut c)
                .unwrap();
            for it in &items {
                model.push_front(it.clone());
            }
            n
        };
        assert_eq!(n, model.len(), "step {step}");
        if step % 7 == 0 {
            assert_eq!(lrange(&mut c, "l"), Vec::from(model.clone()), "step {step}");
        }
        let ttl: i64 = c.pttl("l").unwrap();
        assert!(ttl > 90_000_000, "step {step}: the TTL stays ({ttl})");
    }
    assert_eq!(lrange(&mut c, "l"), Vec::from(model.clone()));
    drop(c);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    assert_eq!(
        lrange(&mut c, "l"),
        Vec::from(model.clone()),
        "after restart"
    );
    drop(c);
    srv.stop();
    check_pool(&pool);
}
