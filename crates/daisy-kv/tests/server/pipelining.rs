//! Pipelines: shared transactions, a client that stops reading, and a flooding client.

use super::*;

#[test]
fn pipelines_share_transactions() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let mut req = Vec::new();
    for i in 0..2000 {
        req.extend_from_slice(format!("SET key:{i} {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"DBSIZE\r\n");
    let got = roundtrip(&mut s, &req, 2000 * 5 + 7);
    assert_eq!(got.len(), 2000 * 5 + 7);
    assert!(got.ends_with(b":2000\r\n"));
    let mut c = srv.client();
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    let commits: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("daisy_group_commits:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        commits < 1000,
        "2000 pipelined SETs took {commits} transactions"
    );
    // A pipeline bigger than one redo record still runs (split into several groups), and a
    // huge MSET runs alone.
    let mut mset = redis::cmd("MSET");
    for i in 0..20_000 {
        mset.arg(format!("m:{i}")).arg(i);
    }
    let _: () = mset.query(&mut c).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 22_000);
    srv.stop();
}

/// A client that stops reading: its replies back up until the socket would block, the server
/// keeps serving others meanwhile, and the rest is sent, in order, once the client reads again.
#[test]
fn slow_reader_gets_every_reply_in_order() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut c = srv.client();
    let big = vec![b'x'; 1 << 20];
    let _: () = c.set("big", &big[..]).unwrap();
    let mut slow = srv.raw();
    const N: usize = 40;
    let mut req = Vec::new();
    for i in 0..N {
        req.extend_from_slice(b"GET big\r\n");
        req.extend_from_slice(format!("ECHO m{i:03}\r\n").as_bytes());
    }
    slow.write_all(&req).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // 40 MiB are waiting for the slow client; another client is served at once.
    let _: () = c.set("other", "v").unwrap();
    assert_eq!(c.get::<_, String>("other").unwrap(), "v");
    let bulk = format!("${}\r\n", big.len());
    let mut want = Vec::new();
    for i in 0..N {
        want.extend_from_slice(bulk.as_bytes());
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\r\n");
        want.extend_from_slice(format!("$4\r\nm{i:03}\r\n").as_bytes());
    }
    let mut got = vec![0u8; want.len()];
    slow.read_exact(&mut got).unwrap();
    assert!(got == want, "replies out of order or damaged");
    srv.stop();
}

/// A client that pipelines far more than one round reads in one go: it is read in
/// slices over several rounds without waiting for new input, gets every reply in order, and
/// another client is answered meanwhile.
#[test]
fn flooding_client_is_read_in_slices_and_gets_every_reply() {
    let d = tmp();
    let pool = pool_in(&d);
    // A small slice, so that reads stop at the cap with input left whatever the timing.
    let srv = Server::start_with(&pool, |o| o.read_round_cap = 4096);
    let mut flood = srv.raw();
    const N: usize = 100_000;
    let mut req = Vec::with_capacity(N * 48);
    for i in 0..N {
        let k = format!("f:{i:06}");
        req.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$8\r\nvalue{:03}\r\n",
                k.len(),
                i % 1000
            )
            .as_bytes(),
        );
    }
    assert!(req.len() > 3 << 20, "more than three rounds' worth");
    // Write it all from another thread while this one reads the replies.
    let mut w = flood.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&req).unwrap());
    let mut c = srv.client();
    assert_eq!(redis::cmd("PING").query::<String>(&mut c).unwrap(), "PONG");
    let want = b"+OK\r\n".repeat(N);
    let mut got = vec![0u8; want.len()];
    flood.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == want);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), N as i64);
    assert_eq!(c.get::<_, String>("f:099999").unwrap(), "value999");
    srv.stop();
}

/// One whole RESP2 reply's raw bytes.
fn read_reply(r: &mut std::io::BufReader<TcpStream>) -> Vec<u8> {
    use std::io::BufRead;
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).unwrap();
    assert!(line.ends_with(b"\r\n"), "a reply line: {line:?}");
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    match line[0] {
        b'$' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            r.read_exact(&mut body).unwrap();
            line.extend_from_slice(&body);
        }
        b'*' if n > 0 => {
            for _ in 0..n {
                line.extend(read_reply(r));
            }
        }
        _ => {}
    }
    line
}

/// Commands of one round reuse the views of the collections earlier commands of the round
/// opened (crates/daisy-kv/src/views.rs): a round that works on the same big hash, set, list
/// and sorted set again and again, and copies, renames, dumps, moves, deletes and recreates
/// them in between, must answer exactly as the same commands sent one at a time (one group
/// each, nothing kept between them), and leave a sound pool.
#[test]
fn collections_reused_within_one_round_answer_as_one_by_one() {
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let mut c = |s: &str| cmds.push(s.split(' ').map(String::from).collect());
    // Small thresholds: every collection here is a table, a sequence or a big sorted set.
    c("CONFIG SET hash-max-listpack-entries 2");
    c("CONFIG SET set-max-intset-entries 2");
    c("CONFIG SET set-max-listpack-entries 2");
    c("CONFIG SET list-max-listpack-size 2");
    c("CONFIG SET zset-max-listpack-entries 2");
    for i in 0..40 {
        c(&format!("HSET h f{i} v{i}"));
        c(&format!("SADD s m{i}"));
        c(&format!("RPUSH l i{i}"));
        c(&format!("ZADD z {i} m{i}"));
        // Streams keep their groups' maps' views between commands (`Group::release`).
        c(&format!("XADD x {}-1 f v{i}", i + 1));
        if i % 5 == 2 {
            c("XGROUP CREATE x g 0");
            c("XREADGROUP GROUP g c1 COUNT 2 STREAMS x >");
            c("XACK x g 1-1 2-1 3-1");
            c("XPENDING x g");
            c("XINFO GROUPS x");
            c("XREADGROUP GROUP g c2 COUNT 1 STREAMS x >");
            c("XCLAIM x g c1 0 3-1 JUSTID");
            c("COPY x x2 REPLACE");
            c("XPENDING x2 g");
            c("XGROUP DELCONSUMER x g c2");
            c("XREADGROUP GROUP g c1 COUNT 1 STREAMS x 0");
            c("XINFO STREAM x");
            c("XGROUP CREATECONSUMER x g c3");
            c("XINFO GROUPS x");
        }
        if i % 7 == 3 {
            // Each right after a write that kept the collection's view.
            c("COPY h h2");
            c("HSET h2 only-in-copy 1");
            c("HLEN h2");
            c("HLEN h");
            c("HGET h f1");
            c("SMOVE s s2 m1");
            c("SADD s m1");
            c("SINTERSTORE s3 s s");
            c("SADD s m1");
            c("SMOVE s s2 m1");
            c("SCARD s3");
            c("SCARD s");
            c("LMOVE l l LEFT RIGHT");
            c("LPUSH l x");
            c("COPY l l2");
            c("LPOP l2 2");
            c("RPUSH l y");
            c("LRANGE l 0 3");
            c("LLEN l");
            c("ZADD z 1.5 m1");
            c("ZUNIONSTORE z2 2 z z");
            c("ZRANGE z2 0 2 WITHSCORES");
            c("ZINCRBY z 0.5 m2");
            c("COPY z z3");
            c("ZREM z3 m0");
            c("ZCARD z3");
            c("ZADD z 2 m2");
            c("ZRANGE z 0 3 WITHSCORES");
            c("ZCARD z");
            c("RPUSH l z");
            c("DUMP l");
            c("HSET h g 1");
            c("RENAME h h4");
            c("HSET h4 renamed 1");
            c("HLEN h4");
            c("RENAME h4 h");
        }
        if i % 13 == 12 {
            c("HSET h2 x 1");
            c("DEL h2 s3 l2 z2 z3");
            c("SADD s gone");
            c("DEL s");
            c("SADD s back");
            c("SCARD s");
            c("RPUSH l gone");
            c("UNLINK l");
            c("RPUSH l again");
            c("LLEN l");
            c("ZADD z 9 gone");
            c("SET z str");
            c("ZADD z 1 x");
            c("DEL z");
            c("ZADD z 1 x 2 y 3 w");
            c("ZRANGE z 0 -1");
            c("XREADGROUP GROUP g c1 STREAMS x >");
            c("XGROUP DESTROY x g");
            c("XGROUP CREATE x g 0");
            c("XREADGROUP GROUP g c1 COUNT 1 STREAMS x >");
            c("XPENDING x g");
            c("DEL x2");
            c("DEL x");
            c("XGROUP CREATE x g $ MKSTREAM");
            c("XINFO GROUPS x");
        }
    }
    c("HLEN h");
    c("SCARD s");
    c("LRANGE l 0 -1");
    c("ZRANGE z 0 -1 WITHSCORES");
    c("XRANGE x - +");
    c("XPENDING x g - + 100");
    let reqs: Vec<Vec<u8>> = cmds
        .iter()
        .map(|a| {
            let mut out = format!("*{}\r\n", a.len()).into_bytes();
            for x in a {
                out.extend_from_slice(format!("${}\r\n{x}\r\n", x.len()).as_bytes());
            }
            out
        })
        .collect();
    // One at a time: each command its own round.
    let d1 = tmp();
    let one = Server::start(&pool_in(&d1));
    let mut r1 = std::io::BufReader::new(one.raw());
    let mut want = Vec::new();
    for q in &reqs {
        r1.get_mut().write_all(q).unwrap();
        want.push(read_reply(&mut r1));
    }
    one.stop();
    // All at once: one write, read back reply by reply.
    let d2 = tmp();
    let all = Server::start(&pool_in(&d2));
    let mut r2 = std::io::BufReader::new(all.raw());
    r2.get_mut().write_all(&reqs.concat()).unwrap();
    for (i, w) in want.iter().enumerate() {
        let got = read_reply(&mut r2);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(w),
            "command {i}: {}",
            cmds[i].join(" ")
        );
    }
    // A group that fails is run again, the failing command alone, so its replies would come
    // out right all the same: none may have failed (a view still claimed by the cache, say).
    let mut info = all.client();
    assert_eq!(
        info_field(&mut info, "persistence", "daisy_group_retries"),
        0
    );
    assert!(info_field(&mut info, "persistence", "daisy_group_commits") < cmds.len() as u64 / 4);
    all.stop();
    check_pool(&pool_in(&d1));
    check_pool(&pool_in(&d2));
}
