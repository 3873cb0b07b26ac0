//! Pub/sub and keyspace notifications as Redis 7.0 answers them: SUBSCRIBE/PUBLISH across
//! connections, patterns, sharded channels, RESP3 pushes, the RESP2 subscriber mode's
//! errors, PUBSUB introspection, notifications of every type family, expired events, a slow
//! subscriber closed at its output-buffer limit, CLIENT KILL and RESET of a subscriber, no
//! message from a transaction that failed, and redis-cli's `subscribe`.

use super::*;

/// A reply read off a raw socket (what a subscriber gets).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum R {
    Bulk(Option<String>),
    Int(i64),
    Simple(String),
    Err(String),
    /// An array (`*`) or a RESP3 push (`>`, marked true).
    Arr(bool, Vec<R>),
    Null,
}

/// Reads whole replies from a raw connection.
pub(crate) struct Reader {
    pub(crate) s: TcpStream,
    pub(crate) buf: Vec<u8>,
}

impl Reader {
    pub(crate) fn new(s: TcpStream) -> Reader {
        Reader { s, buf: Vec::new() }
    }

    pub(crate) fn send(&mut self, args: &[&str]) {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.s.write_all(req.as_bytes()).unwrap();
    }

    pub(crate) fn fill(&mut self) -> bool {
        let mut b = [0u8; 65536];
        match self.s.read(&mut b) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
        }
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return l;
            }
            assert!(self.fill(), "connection closed before a whole reply");
        }
    }

    pub(crate) fn read(&mut self) -> R {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => R::Simple(rest.into()),
            "-" => R::Err(rest.into()),
            ":" => R::Int(rest.parse().unwrap()),
            "_" => R::Null,
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return R::Bulk(None);
                }
                while self.buf.len() < n as usize + 2 {
                    assert!(self.fill(), "connection closed inside a bulk string");
                }
                let v = String::from_utf8_lossy(&self.buf[..n as usize]).into_owned();
                self.buf.drain(..n as usize + 2);
                R::Bulk(Some(v))
            }
            "*" | ">" | "~" => {
                let n: usize = rest.parse().unwrap();
                R::Arr(t == ">", (0..n).map(|_| self.read()).collect())
            }
            // A RESP3 map, read as its key-value pairs in a row.
            "%" => {
                let n: usize = rest.parse().unwrap();
                R::Arr(false, (0..2 * n).map(|_| self.read()).collect())
            }
            // A RESP3 verbatim string: its text without the format.
            "=" => {
                let n: usize = rest.parse().unwrap();
                while self.buf.len() < n + 2 {
                    assert!(self.fill(), "connection closed inside a verbatim string");
                }
                let v = String::from_utf8_lossy(&self.buf[4..n]).into_owned();
                self.buf.drain(..n + 2);
                R::Bulk(Some(v))
            }
            _ => panic!("unexpected reply line {l:?}"),
        }
    }

    /// A reply that must be an array of bulk strings and integers, as words.
    pub(crate) fn words(&mut self) -> Vec<String> {
        match self.read() {
            R::Arr(_, v) => v.into_iter().map(word).collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    /// Whether the server closed the connection (reads until end of file, at most `secs`).
    pub(crate) fn closed_within(&mut self, secs: u64) -> bool {
        self.s
            .set_read_timeout(Some(Duration::from_secs(secs)))
            .unwrap();
        let mut b = vec![0u8; 1 << 20];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

pub(crate) fn word(r: R) -> String {
    match r {
        R::Bulk(Some(s)) | R::Simple(s) => s,
        R::Bulk(None) | R::Null => "(nil)".into(),
        R::Int(n) => n.to_string(),
        other => panic!("not a word: {other:?}"),
    }
}

pub(crate) fn w(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
}

/// The CLIENT LIST line of the connection named `name`.
fn client_line(c: &mut Connection, name: &str) -> String {
    let list: String = q(c, &["CLIENT", "LIST"]);
    list.lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name} in {list}"))
        .to_string()
}

#[test]
fn subscribe_and_publish_across_connections() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut sub = Reader::new(srv.raw());
    sub.send(&["CLIENT", "SETNAME", "sub1"]);
    assert_eq!(sub.read(), R::Simple("OK".into()));
    // Exactly Redis's bytes for the confirmations.
    sub.send(&["SUBSCRIBE", "a", "b", "a"]);
    let mut want = Vec::new();
    for (ch, n) in [("a", 1), ("b", 2), ("a", 2)] {
        want.extend_from_slice(
            format!("*3\r\n$9\r\nsubscribe\r\n$1\r\n{ch}\r\n:{n}\r\n").as_bytes(),
        );
    }
    while sub.buf.len() < want.len() {
        assert!(sub.fill());
    }
    assert_eq!(
        String::from_utf8_lossy(&sub.buf),
        String::from_utf8_lossy(&want)
    );
    sub.buf.clear();

    let n: i64 = q(&mut c, &["PUBLISH", "a", "hello"]);
    assert_eq!(n, 1);
    assert_eq!(sub.words(), w(&["message", "a", "hello"]));
    let n: i64 = q(&mut c, &["PUBLISH", "nobody", "x"]);
    assert_eq!(n, 0);

    // A second subscriber: both get it, in subscription order of the publish's receivers.
    let mut sub2 = Reader::new(srv.raw());
    sub2.send(&["SUBSCRIBE", "b"]);
    assert_eq!(sub2.words(), w(&["subscribe", "b", "1"]));
    let n: i64 = q(&mut c, &["PUBLISH", "b", "two"]);
    assert_eq!(n, 2);
    assert_eq!(sub.words(), w(&["message", "b", "two"]));
    assert_eq!(sub2.words(), w(&["message", "b", "two"]));

    // Introspection.
    let numsub: Vec<redis::Value> = q(&mut c, &["PUBSUB", "NUMSUB", "a", "b", "zz"]);
    assert_eq!(
        numsub,
        vec![
            redis::Value::BulkString(b"a".to_vec()),
            redis::Value::Int(1),
            redis::Value::BulkString(b"b".to_vec()),
            redis::Value::Int(2),
            redis::Value::BulkString(b"zz".to_vec()),
            redis::Value::Int(0),
        ]
    );
    let mut chans: Vec<String> = q(&mut c, &["PUBSUB", "CHANNELS"]);
    chans.sort();
    assert_eq!(chans, w(&["a", "b"]));
    let chans: Vec<String> = q(&mut c, &["PUBSUB", "CHANNELS", "a*"]);
    assert_eq!(chans, w(&["a"]));
    assert_eq!(info_field(&mut c, "stats", "pubsub_channels"), 2);
    assert_eq!(info_field(&mut c, "stats", "pubsub_patterns"), 0);
    let line = client_line(&mut c, "sub1");
    assert!(
        line.contains(" flags=P ") && line.contains(" sub=2 psub=0 ssub=0 "),
        "{line}"
    );
    let e = err_text(
        redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("a")
            .arg("b")
            .query::<redis::Value>(&mut c),
    );
    assert!(
        e.contains("unknown subcommand or wrong number of arguments for 'CHANNELS'"),
        "{e}"
    );

    // UNSUBSCRIBE without arguments: from every channel (any order), then nothing arrives.
    sub.send(&["UNSUBSCRIBE"]);
    let mut gone = [sub.words(), sub.words()];
    gone.sort();
    assert_eq!(gone[0][..2], w(&["unsubscribe", "a"])[..]);
    assert_eq!(gone[1][..2], w(&["unsubscribe", "b"])[..]);
    assert_eq!(gone.iter().map(|g| g[2].clone()).min().unwrap(), "0");
    sub.send(&["UNSUBSCRIBE"]);
    assert_eq!(sub.words(), w(&["unsubscribe", "(nil)", "0"]));
    let n: i64 = q(&mut c, &["PUBLISH", "a", "late"]);
    assert_eq!(n, 0);
    // Out of subscriber mode, PING is PONG again.
    sub.send(&["PING"]);
    assert_eq!(sub.read(), R::Simple("PONG".into()));
    assert_eq!(info_field(&mut c, "stats", "pubsub_channels"), 1);
}

#[test]
fn patterns_and_shard_channels() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut sub = Reader::new(srv.raw());
    sub.send(&["PSUBSCRIBE", "news.*", "x?"]);
    assert_eq!(sub.words(), w(&["psubscribe", "news.*", "1"]));
    assert_eq!(sub.words(), w(&["psubscribe", "x?", "2"]));
    sub.send(&["SUBSCRIBE", "news.art"]);
    assert_eq!(sub.words(), w(&["subscribe", "news.art", "3"]));
    // Channel first, then the matching pattern: two receivers.
    let n: i64 = q(&mut c, &["PUBLISH", "news.art", "m"]);
    assert_eq!(n, 2);
    assert_eq!(sub.words(), w(&["message", "news.art", "m"]));
    assert_eq!(sub.words(), w(&["pmessage", "news.*", "news.art", "m"]));
    let n: i64 = q(&mut c, &["PUBLISH", "xyz", "m"]);
    assert_eq!(n, 0, "x? matches two-byte names only");
    let n: i64 = q(&mut c, &["PUBSUB", "NUMPAT"]);
    assert_eq!(n, 2);
    sub.send(&["PUNSUBSCRIBE", "x?", "nope"]);
    assert_eq!(sub.words(), w(&["punsubscribe", "x?", "2"]));
    assert_eq!(sub.words(), w(&["punsubscribe", "nope", "2"]));

    // Sharded channels are apart from the others, and have their own count.
    sub.send(&["SSUBSCRIBE", "s1"]);
    assert_eq!(sub.words(), w(&["ssubscribe", "s1", "1"]));
    let n: i64 = q(&mut c, &["SPUBLISH", "s1", "hi"]);
    assert_eq!(n, 1);
    assert_eq!(sub.words(), w(&["smessage", "s1", "hi"]));
    let n: i64 = q(&mut c, &["PUBLISH", "s1", "hi"]);
    assert_eq!(n, 0);
    let chans: Vec<String> = q(&mut c, &["PUBSUB", "SHARDCHANNELS"]);
    assert_eq!(chans, w(&["s1"]));
    let ns: Vec<redis::Value> = q(&mut c, &["PUBSUB", "SHARDNUMSUB", "s1"]);
    assert_eq!(ns[1], redis::Value::Int(1));
    sub.send(&["SUNSUBSCRIBE"]);
    assert_eq!(sub.words(), w(&["sunsubscribe", "s1", "0"]));
    sub.send(&["PUNSUBSCRIBE"]);
    assert_eq!(sub.words(), w(&["punsubscribe", "news.*", "1"]));
    let n: i64 = q(&mut c, &["PUBSUB", "NUMPAT"]);
    assert_eq!(n, 0);
}

#[test]
fn resp3_pushes_and_any_command_while_subscribed() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut s = srv.raw();
    let hello = roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(
        hello.starts_with(b"%"),
        "{}",
        String::from_utf8_lossy(&hello)
    );
    let mut sub = Reader::new(s);
    sub.buf.clear();
    // The HELLO map may still be arriving: skip to the end of it by a PING marker.
    sub.send(&["PING", "mark"]);
    loop {
        if let R::Bulk(Some(m)) = sub.read() {
            if m == "mark" {
                break;
            }
        }
    }
    sub.send(&["SUBSCRIBE", "ch"]);
    let want = b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
    while sub.buf.len() < want.len() {
        assert!(sub.fill());
    }
    assert_eq!(&sub.buf[..want.len()], want);
    sub.buf.drain(..want.len());
    // Any command runs in RESP3 subscriber mode; PING answers PONG.
    sub.send(&["SET", "k", "v"]);
    assert_eq!(sub.read(), R::Simple("OK".into()));
    sub.send(&["PING"]);
    assert_eq!(sub.read(), R::Simple("PONG".into()));
    // Its own PUBLISH: the push first, then the count.
    sub.send(&["PUBLISH", "ch", "me"]);
    assert_eq!(
        sub.read(),
        R::Arr(
            true,
            vec![
                R::Bulk(Some("message".into())),
                R::Bulk(Some("ch".into())),
                R::Bulk(Some("me".into()))
            ]
        )
    );
    assert_eq!(sub.read(), R::Int(1));
    let n: i64 = q(&mut c, &["PUBLISH", "ch", "other"]);
    assert_eq!(n, 1);
    assert!(matches!(sub.read(), R::Arr(true, v) if v.len() == 3));
    // CLIENT REPLY OFF drops replies, never pushes.
    sub.send(&["CLIENT", "REPLY", "OFF"]);
    sub.send(&["GET", "k"]);
    sub.send(&["UNSUBSCRIBE", "ch"]);
    assert_eq!(
        sub.read(),
        R::Arr(
            true,
            vec![
                R::Bulk(Some("unsubscribe".into())),
                R::Bulk(Some("ch".into())),
                R::Int(0)
            ]
        )
    );
}

#[test]
fn subscriber_mode_refuses_other_commands() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut sub = Reader::new(srv.raw());
    sub.send(&["SUBSCRIBE", "ch"]);
    assert_eq!(sub.words(), w(&["subscribe", "ch", "1"]));
    sub.send(&["GET", "k"]);
    assert_eq!(
        sub.read(),
        R::Err("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context".into())
    );
    sub.send(&["CLIENT", "LIST"]);
    assert!(
        matches!(sub.read(), R::Err(e) if e.starts_with("ERR Can't execute 'client|list'")),
        "a subcommand is named by its full name"
    );
    sub.send(&["PING"]);
    assert_eq!(sub.words(), w(&["pong", ""]));
    sub.send(&["PING", "hi"]);
    assert_eq!(sub.words(), w(&["pong", "hi"]));
    sub.send(&["QUIT"]);
    assert_eq!(sub.read(), R::Simple("OK".into()));
    assert!(sub.closed_within(5));
}

#[test]
fn reset_leaves_subscriber_mode() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut sub = Reader::new(srv.raw());
    sub.send(&["SUBSCRIBE", "a"]);
    sub.send(&["PSUBSCRIBE", "p*"]);
    assert_eq!(sub.words(), w(&["subscribe", "a", "1"]));
    assert_eq!(sub.words(), w(&["psubscribe", "p*", "2"]));
    sub.send(&["RESET"]);
    assert_eq!(sub.read(), R::Simple("RESET".into()));
    sub.send(&["SET", "key", "val"]);
    assert_eq!(sub.read(), R::Simple("OK".into()));
    let n: i64 = q(&mut c, &["PUBLISH", "a", "x"]);
    assert_eq!(n, 0);
    let n: i64 = q(&mut c, &["PUBSUB", "NUMPAT"]);
    assert_eq!(n, 0);
}

#[test]
fn client_kill_of_a_subscriber() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut sub = Reader::new(srv.raw());
    sub.send(&["CLIENT", "ID"]);
    let R::Int(id) = sub.read() else {
        panic!("CLIENT ID")
    };
    sub.send(&["SUBSCRIBE", "a"]);
    assert_eq!(sub.words(), w(&["subscribe", "a", "1"]));
    let n: i64 = q(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert_eq!(n, 1);
    assert!(sub.closed_within(5));
    let n: i64 = q(&mut c, &["PUBLISH", "a", "x"]);
    assert_eq!(n, 0);
    // A subscriber's type is pubsub: CLIENT LIST and KILL TYPE pubsub find it, normal not.
    let mut sub2 = Reader::new(srv.raw());
    sub2.send(&["CLIENT", "SETNAME", "sub2"]);
    assert_eq!(sub2.read(), R::Simple("OK".into()));
    sub2.send(&["PSUBSCRIBE", "b*"]);
    assert_eq!(sub2.words(), w(&["psubscribe", "b*", "1"]));
    let list: String = q(&mut c, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(
        list.contains(" name=sub2 ") && list.contains(" flags=P "),
        "{list}"
    );
    let list: String = q(&mut c, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(!list.contains("name=sub2"), "{list}");
    let n: i64 = q(&mut c, &["CLIENT", "KILL", "TYPE", "normal"]);
    assert_eq!(n, 0, "the caller is skipped, the subscriber is not normal");
    let n: i64 = q(&mut c, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(n, 1);
    assert!(sub2.closed_within(5));
    let n: i64 = q(&mut c, &["PUBSUB", "NUMPAT"]);
    assert_eq!(n, 0);
    assert_eq!(info_field(&mut c, "stats", "pubsub_channels"), 0);
}

#[test]
fn slow_subscriber_is_disconnected_at_its_output_limit() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0",
        ],
    );
    let mut sub = Reader::new(srv.raw());
    sub.send(&["SUBSCRIBE", "flood"]);
    assert_eq!(sub.words(), w(&["subscribe", "flood", "1"]));
    // The subscriber reads nothing; the socket buffers fill, then the server's copy passes
    // 1 MB and the subscriber is closed instead of growing without bound.
    let big = "x".repeat(256 << 10);
    let mut receivers = 1;
    for _ in 0..1000 {
        receivers = q(&mut c, &["PUBLISH", "flood", &big]);
        if receivers == 0 {
            break;
        }
    }
    assert_eq!(receivers, 0, "the slow subscriber was never closed");
    let n: Vec<redis::Value> = q(&mut c, &["PUBSUB", "NUMSUB", "flood"]);
    assert_eq!(n[1], redis::Value::Int(0));
    assert!(sub.closed_within(10), "its connection ends");
}

/// Read `n` messages of a PSUBSCRIBE `*` subscriber as (channel, payload).
fn events(sub: &mut Reader, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|_| {
            let m = sub.words();
            assert_eq!(m[0], "pmessage", "{m:?}");
            (m[2].clone(), m[3].clone())
        })
        .collect()
}

fn ks(key: &str, ev: &str) -> (String, String) {
    (format!("__keyspace@0__:{key}"), ev.to_string())
}

fn ke(ev: &str, key: &str) -> (String, String) {
    (format!("__keyevent@0__:{ev}"), key.to_string())
}

#[test]
fn notifications_of_each_type_family() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let flags: Vec<String> = q(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(flags, w(&["notify-keyspace-events", "AK"]));
    let mut sub = Reader::new(srv.raw());
    sub.send(&["PSUBSCRIBE", "*"]);
    assert_eq!(sub.words(), w(&["psubscribe", "*", "1"]));

    let run = |c: &mut Connection, args: &[&str]| {
        let _: redis::Value = q(c, args);
    };
    // Strings and generic commands.
    run(&mut c, &["SET", "s", "1"]);
    run(&mut c, &["INCRBY", "s", "2"]);
    run(&mut c, &["APPEND", "s", "x"]);
    run(&mut c, &["EXPIRE", "s", "100"]);
    run(&mut c, &["PERSIST", "s"]);
    run(&mut c, &["RENAME", "s", "t"]);
    run(&mut c, &["DEL", "t", "missing"]);
    assert_eq!(
        events(&mut sub, 8),
        vec![
            ks("s", "set"),
            ks("s", "incrby"),
            ks("s", "append"),
            ks("s", "expire"),
            ks("s", "persist"),
            ks("s", "rename_from"),
            ks("t", "rename_to"),
            ks("t", "del"),
        ]
    );
    // Lists: the pop that empties the list, then its deletion.
    run(&mut c, &["RPUSH", "l", "a", "b"]);
    run(&mut c, &["LPOP", "l"]);
    run(&mut c, &["RPOP", "l"]);
    assert_eq!(
        events(&mut sub, 4),
        vec![
            ks("l", "rpush"),
            ks("l", "lpop"),
            ks("l", "rpop"),
            ks("l", "del")
        ]
    );
    // Sets (no event for a removal that removed nothing), hashes, sorted sets.
    run(&mut c, &["SADD", "st", "a"]);
    run(&mut c, &["SREM", "st", "zz"]);
    run(&mut c, &["SREM", "st", "a"]);
    run(&mut c, &["HSET", "h", "f", "1"]);
    run(&mut c, &["HINCRBY", "h", "f", "1"]);
    run(&mut c, &["HDEL", "h", "f"]);
    run(&mut c, &["ZADD", "z", "1", "a"]);
    run(&mut c, &["ZINCRBY", "z", "1", "a"]);
    run(&mut c, &["ZREM", "z", "a"]);
    assert_eq!(
        events(&mut sub, 11),
        vec![
            ks("st", "sadd"),
            ks("st", "srem"),
            ks("st", "del"),
            ks("h", "hset"),
            ks("h", "hincrby"),
            ks("h", "hdel"),
            ks("h", "del"),
            ks("z", "zadd"),
            ks("z", "zincr"),
            ks("z", "zrem"),
            ks("z", "del"),
        ]
    );
    // Keyevent channels and the `new` class, which A leaves out.
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "En$"]);
    run(&mut c, &["SET", "n", "1"]);
    run(&mut c, &["SET", "n", "2"]);
    run(&mut c, &["LPUSH", "nl", "x"]);
    assert_eq!(
        events(&mut sub, 4),
        vec![
            ke("new", "n"),
            ke("set", "n"),
            ke("set", "n"),
            ke("new", "nl")
        ]
    );
    // Off: nothing more (a PUBLISH marks where the stream stands).
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    run(&mut c, &["SET", "quiet", "1"]);
    run(&mut c, &["PUBLISH", "mark", "m"]);
    assert_eq!(
        events(&mut sub, 1),
        vec![("mark".to_string(), "m".to_string())]
    );
}

#[test]
fn expired_events_from_lazy_and_active_expiry() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    let mut sub = Reader::new(srv.raw());
    sub.send(&["PSUBSCRIBE", "__keyevent@*"]);
    assert_eq!(sub.words(), w(&["psubscribe", "__keyevent@*", "1"]));
    // Active expiry finds it (nobody looks at the key).
    let _: () = q(&mut c, &["SET", "bg", "1", "PX", "50"]);
    let m = sub.words();
    assert_eq!(
        m,
        w(&["pmessage", "__keyevent@*", "__keyevent@0__:expired", "bg"])
    );
    // A read finds it expired (lazy expiry) or active expiry did: one event either way.
    let _: () = q(&mut c, &["SET", "lazy", "1", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    let v: Option<String> = q(&mut c, &["GET", "lazy"]);
    assert_eq!(v, None);
    let m = sub.words();
    assert_eq!(m[2..], w(&["__keyevent@0__:expired", "lazy"])[..]);
    let n: i64 = q(&mut c, &["PUBLISH", "__keyevent@0__:mark", "m"]);
    assert_eq!(n, 1);
    assert_eq!(sub.words()[3], "m", "no second expired event");
}

#[test]
fn redis_cli_subscribe_prints_messages() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let have = Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipped: redis-cli is not installed (Debian redis-tools)");
        return;
    }
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut child = Command::new("redis-cli")
        .args(["-p", &srv.addr.port().to_string(), "subscribe", "news"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("redis-cli printed nothing")
    };
    // Its confirmation (not a tty: one element per line), then each message.
    assert_eq!([next(), next(), next()], ["subscribe", "news", "1"]);
    let n: i64 = q(&mut c, &["PUBLISH", "news", "hello world"]);
    assert_eq!(n, 1);
    assert_eq!([next(), next(), next()], ["message", "news", "hello world"]);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A message caused by a write leaves only with that write: a command or an EXEC whose
/// transaction fails (a full pool) sends nothing to subscribers, not even its PUBLISH.
#[test]
fn no_message_from_a_failed_transaction() {
    let d = tmp();
    let srv = Server::start_with(&pool_in(&d), |o| {
        o.size = 24 << 20;
        o.max_size = Some(24 << 20);
    });
    let mut c = srv.client();
    let val = vec![1u8; 1 << 16];
    let mut n = 0;
    while c.set::<_, _, ()>(format!("k:{n}"), &val).is_ok() {
        n += 1;
        assert!(n < 100_000, "the pool never filled");
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = Reader::new(srv.raw());
    sub.send(&["SUBSCRIBE", "ch"]);
    assert_eq!(sub.words(), w(&["subscribe", "ch", "1"]));
    sub.send(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    assert_eq!(sub.words(), w(&["psubscribe", "__keyspace@0__:*", "2"]));
    let big = vec![b'b'; 4 << 20];
    let e = c.set::<_, _, ()>("big", &big).unwrap_err();
    assert_eq!(e.code(), Some("OOM"), "{e:?}");
    // EXEC's commands are one transaction: it fails whole, its PUBLISH with it.
    let mut m = Reader::new(srv.raw());
    let big = String::from_utf8(big).unwrap();
    m.send(&["MULTI"]);
    m.send(&["PUBLISH", "ch", "lost"]);
    m.send(&["SET", "big", &big]);
    m.send(&["EXEC"]);
    assert_eq!(m.read(), R::Simple("OK".into()));
    assert_eq!(m.read(), R::Simple("QUEUED".into()));
    assert_eq!(m.read(), R::Simple("QUEUED".into()));
    assert!(matches!(m.read(), R::Err(e) if e.starts_with("OOM")));
    let n: i64 = q(&mut c, &["PUBLISH", "ch", "kept"]);
    assert_eq!(n, 1);
    let _: i64 = q(&mut c, &["DEL", "k:0"]);
    assert_eq!(sub.words(), w(&["message", "ch", "kept"]));
    assert_eq!(
        sub.words(),
        w(&["pmessage", "__keyspace@0__:*", "__keyspace@0__:k:0", "del"])
    );
}
