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
