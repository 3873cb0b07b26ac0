//! Client-side caching (CLIENT TRACKING) as Redis 7.0 answers it, over raw RESP2 and RESP3
//! connections: invalidations redirected to a RESP2 subscriber of `__redis__:invalidate` and
//! pushed to a RESP3 client (bytes as Redis 7.0.15 sends them), each key once until read
//! again; a client's own invalidation after its reply (and after EXEC's); FLUSHDB's null;
//! BCAST prefixes grouped per prefix, NOLOOP, OPTIN/OPTOUT with CLIENT CACHING; keys removed
//! by expiry; a redirection to a client that left; scripts; the table's key limit; CLIENT
//! LIST flags, GETREDIR, TRACKINGINFO and INFO's counters; RESET and a disconnect ending it.
//!
//! Every "nothing arrived" check sends PING afterwards and expects its reply next: a message
//! of the earlier write would have been queued before it (messages leave when the write's
//! group commits, before the writer even gets its reply).

use super::pubsub::{q, w, word, Reader, R};
use super::*;

fn bulk(s: &str) -> R {
    R::Bulk(Some(s.into()))
}

/// A RESP3 `invalidate` push of `keys`.
fn push_of(keys: &[&str]) -> R {
    R::Arr(
        true,
        vec![
            bulk("invalidate"),
            R::Arr(false, keys.iter().map(|k| bulk(k)).collect()),
        ],
    )
}

/// The `__redis__:invalidate` message a RESP2 subscriber gets for `keys`.
fn message_of(keys: &[&str]) -> R {
    R::Arr(
        false,
        vec![
            bulk("message"),
            bulk("__redis__:invalidate"),
            R::Arr(false, keys.iter().map(|k| bulk(k)).collect()),
        ],
    )
}

/// A raw connection switched to RESP3.
fn resp3(srv: &Server) -> Reader {
    let mut r = Reader::new(srv.raw());
    r.send(&["HELLO", "3"]);
    let R::Arr(false, hello) = r.read() else {
        panic!("HELLO 3 answers a map")
    };
    assert_eq!(hello[4..6], [bulk("proto"), R::Int(3)]);
    r
}

/// TRACKINGINFO's flags, redirect and prefixes (RESP2 or RESP3).
fn trackinginfo(r: &mut Reader) -> (Vec<String>, i64, Vec<String>) {
    r.send(&["CLIENT", "TRACKINGINFO"]);
    let R::Arr(false, m) = r.read() else {
        panic!("TRACKINGINFO is a map")
    };
    let list = |x: &R| match x {
        R::Arr(false, v) => v.iter().cloned().map(word).collect::<Vec<_>>(),
        other => panic!("not a list: {other:?}"),
    };
    assert_eq!(
        (&m[0], &m[2], &m[4]),
        (&bulk("flags"), &bulk("redirect"), &bulk("prefixes"))
    );
    let R::Int(redirect) = m[3] else {
        panic!("redirect is an integer")
    };
    (list(&m[1]), redirect, list(&m[5]))
}

/// The CLIENT LIST line of the client with this id.
fn line_of(c: &mut Connection, id: &str) -> String {
    let list: String = q(c, &["CLIENT", "LIST"]);
    list.lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("no client {id} in {list}"))
        .to_string()
}

/// A RESP2 connection subscribed to `__redis__:invalidate`, and its id.
fn redirect_target(srv: &Server) -> (Reader, String) {
    let mut r = Reader::new(srv.raw());
    r.send(&["CLIENT", "ID"]);
    let id = word(r.read());
    r.send(&["SUBSCRIBE", "__redis__:invalidate"]);
    assert_eq!(r.words(), w(&["subscribe", "__redis__:invalidate", "1"]));
    (r, id)
}

/// Send `args` and expect `want` as the reply.
fn expect(r: &mut Reader, args: &[&str], want: R) {
    r.send(args);
    assert_eq!(r.read(), want, "{args:?}");
}

fn ok() -> R {
    R::Simple("OK".into())
}

/// Nothing is pending on a RESP3 client: PING's reply comes next.
fn nothing_pending3(r: &mut Reader) {
    expect(r, &["PING"], R::Simple("PONG".into()));
}

/// Nothing is pending on a RESP2 subscriber: its PING reply comes next.
fn nothing_pending_sub(r: &mut Reader) {
    r.send(&["PING"]);
    assert_eq!(r.words(), w(&["pong", ""]));
}

#[test]
fn a_read_key_is_invalidated_once_on_the_redirected_subscriber() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let (mut sub, id) = redirect_target(&srv);
    let mut t = Reader::new(srv.raw());
    expect(&mut t, &["CLIENT", "TRACKING", "on", "REDIRECT", &id], ok());
    expect(&mut t, &["SET", "a", "1"], ok());
    expect(&mut t, &["GET", "a"], bulk("1"));
    // b was never read: no message; a was: one, in Redis 7.0.15's exact bytes.
    let _: i64 = q(&mut c, &["INCR", "b"]);
    let _: i64 = q(&mut c, &["INCR", "a"]);
    let want = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\na\r\n";
    while sub.buf.len() < want.len() {
        assert!(sub.fill());
    }
    assert_eq!(&sub.buf[..want.len()], &want[..]);
    sub.buf.drain(..want.len());
    // Forgotten after the first write: a second one sends nothing until a is read again.
    let _: i64 = q(&mut c, &["INCR", "a"]);
    nothing_pending_sub(&mut sub);
    expect(
        &mut t,
        &["MGET", "a", "b", "c"],
        R::Arr(false, vec![bulk("3"), bulk("1"), R::Bulk(None)]),
    );
    let _: () = q(&mut c, &["DEL", "c"]); // c did not exist: DEL wrote nothing
    let _: () = q(&mut c, &["MSET", "b", "x", "c", "y"]);
    assert_eq!(sub.read(), message_of(&["b"]));
    assert_eq!(sub.read(), message_of(&["c"]));
    nothing_pending_sub(&mut sub);
    // Turned off: nothing more, and INFO counts no tracking client.
    expect(&mut t, &["GET", "a"], bulk("3"));
    expect(&mut t, &["CLIENT", "TRACKING", "off"], ok());
    let _: i64 = q(&mut c, &["INCR", "a"]);
    nothing_pending_sub(&mut sub);
    assert_eq!(info_field(&mut c, "clients", "tracking_clients"), 0);
    assert_eq!(info_field(&mut c, "stats", "tracking_total_keys"), 0);
}

#[test]
fn resp3_invalidations_follow_the_reply_that_caused_them() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut t = resp3(&srv);
    expect(&mut t, &["CLIENT", "TRACKING", "on"], ok());
    // Its own write: the reply first, then the push (Redis's pending keys).
    expect(&mut t, &["HSET", "h", "f", "1"], R::Int(1));
    expect(&mut t, &["HGET", "h", "f"], bulk("1"));
    t.send(&["HDEL", "h", "f"]);
    let want = b":1\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nh\r\n";
    while t.buf.len() < want.len() {
        assert!(t.fill());
    }
    assert_eq!(&t.buf[..want.len()], &want[..]);
    t.buf.drain(..want.len());
    // Inside a transaction: after EXEC's whole reply.
    expect(&mut t, &["MSET", "a", "1", "b", "2"], ok());
    expect(&mut t, &["GET", "a"], bulk("1"));
    expect(&mut t, &["MULTI"], ok());
    expect(&mut t, &["INCR", "a"], R::Simple("QUEUED".into()));
    expect(&mut t, &["GET", "b"], R::Simple("QUEUED".into()));
    expect(&mut t, &["EXEC"], R::Arr(false, vec![R::Int(2), bulk("2")]));
    assert_eq!(t.read(), push_of(&["a"]));
    // Another client's write reaches it between its own replies.
    let _: () = q(&mut c, &["SET", "b", "3"]);
    assert_eq!(t.read(), push_of(&["b"]));
    nothing_pending3(&mut t);
    // FLUSHDB (even of an empty database, as Redis) and FLUSHALL: a null, "every key".
    expect(&mut t, &["MULTI"], ok());
    expect(&mut t, &["FLUSHDB"], R::Simple("QUEUED".into()));
    expect(&mut t, &["EXEC"], R::Arr(false, vec![ok()]));
    let want = b">2\r\n$10\r\ninvalidate\r\n_\r\n";
    while t.buf.len() < want.len() {
        assert!(t.fill());
    }
    assert_eq!(&t.buf[..want.len()], &want[..]);
    t.buf.drain(..want.len());
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert_eq!(t.read(), R::Arr(true, vec![bulk("invalidate"), R::Null]));
    // A key expired by active expiry: the same push.
    expect(&mut t, &["SET", "e", "v", "PX", "30"], ok());
    expect(&mut t, &["GET", "e"], bulk("v"));
    assert_eq!(t.read(), push_of(&["e"]));
    // RESP2 without a redirection: tracked, but nothing can be sent.
    let mut r2 = Reader::new(srv.raw());
    expect(&mut r2, &["CLIENT", "TRACKING", "on"], ok());
    expect(&mut r2, &["GET", "a"], R::Bulk(None));
    let _: () = q(&mut c, &["SET", "a", "1"]);
    expect(&mut r2, &["PING"], R::Simple("PONG".into()));
}

#[test]
fn bcast_prefixes_noloop_and_their_errors() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let (mut sub, id) = redirect_target(&srv);
    let mut t = Reader::new(srv.raw());
    // Every key (the empty prefix), the keys of one write together.
    expect(
        &mut t,
        &["CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id],
        ok(),
    );
    let _: () = q(&mut c, &["MSET", "b", "1", "a", "2", "c", "3"]);
    assert_eq!(sub.read(), message_of(&["a", "b", "c"]));
    // Prefixes: one message per prefix, c:... not sent.
    expect(&mut t, &["CLIENT", "TRACKING", "off"], ok());
    expect(
        &mut t,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "PREFIX", "a:", "PREFIX", "b:",
        ],
        ok(),
    );
    expect(&mut t, &["MULTI"], ok());
    for k in ["a:1", "a:2", "b:1", "c:1"] {
        expect(&mut t, &["INCR", k], R::Simple("QUEUED".into()));
    }
    t.send(&["EXEC"]);
    assert_eq!(
        t.read(),
        R::Arr(false, vec![R::Int(1), R::Int(1), R::Int(1), R::Int(1)])
    );
    assert_eq!(sub.read(), message_of(&["a:1", "a:2"]));
    assert_eq!(sub.read(), message_of(&["b:1"]));
    nothing_pending_sub(&mut sub);
    // Overlapping prefixes are refused, with Redis's texts; switching modes too.
    t.send(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]);
    assert_eq!(t.read(), R::Err("ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.".into()));
    let mut o = Reader::new(srv.raw());
    o.send(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO",
    ]);
    assert_eq!(o.read(), R::Err("ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap.".into()));
    o.send(&["CLIENT", "TRACKING", "on", "PREFIX", "x"]);
    assert_eq!(
        o.read(),
        R::Err("ERR PREFIX option requires BCAST mode to be enabled".into())
    );
    o.send(&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]);
    assert_eq!(
        o.read(),
        R::Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into())
    );
    o.send(&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"]);
    assert_eq!(
        o.read(),
        R::Err("ERR The client ID you want redirect to does not exist".into())
    );
    t.send(&["CLIENT", "TRACKING", "on"]);
    assert!(matches!(t.read(), R::Err(e) if e.starts_with("ERR You can't switch BCAST mode")));
    // NOLOOP: its own writes are left out, others' are sent.
    expect(&mut t, &["CLIENT", "TRACKING", "off"], ok());
    expect(
        &mut t,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "NOLOOP",
        ],
        ok(),
    );
    let _: () = q(&mut c, &["SET", "other1", "1"]);
    expect(&mut t, &["SET", "loop", "1"], ok());
    let _: () = q(&mut c, &["SET", "other2", "1"]);
    assert_eq!(sub.read(), message_of(&["other1"]));
    assert_eq!(sub.read(), message_of(&["other2"]));
    nothing_pending_sub(&mut sub);
    // Its own key that expires is sent: an expiry has no writer.
    expect(&mut t, &["SET", "mykey", "v", "PX", "20"], ok());
    expect(&mut t, &["SET", "mykeyother", "v"], ok());
    assert_eq!(sub.read(), message_of(&["mykey"]));
    // INFO and CLIENT LIST.
    assert_eq!(info_field(&mut c, "stats", "tracking_total_prefixes"), 1);
    assert_eq!(
        trackinginfo(&mut t),
        (w(&["on", "bcast", "noloop"]), id.parse().unwrap(), w(&[""]))
    );
    t.send(&["CLIENT", "INFO"]);
    let line = word(t.read());
    assert!(
        line.contains(" flags=tB ") && line.contains(&format!(" redir={id} ")),
        "{line}"
    );
}

#[test]
fn optin_optout_and_caching() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut t = resp3(&srv);
    let _: () = q(&mut c, &["MSET", "k1", "1", "k2", "2", "k3", "3"]);
    // OPTIN: only a read after CLIENT CACHING yes is remembered, and only that one.
    expect(&mut t, &["CLIENT", "TRACKING", "on", "OPTIN"], ok());
    expect(&mut t, &["GET", "k1"], bulk("1"));
    expect(&mut t, &["CLIENT", "CACHING", "yes"], ok());
    expect(&mut t, &["GET", "k2"], bulk("2"));
    expect(&mut t, &["GET", "k3"], bulk("3"));
    let _: () = q(&mut c, &["MSET", "k1", "x", "k2", "x", "k3", "x"]);
    assert_eq!(t.read(), push_of(&["k2"]));
    nothing_pending3(&mut t);
    // CACHING yes covers a whole MULTI ... EXEC.
    expect(&mut t, &["CLIENT", "CACHING", "yes"], ok());
    expect(&mut t, &["MULTI"], ok());
    expect(&mut t, &["GET", "k1"], R::Simple("QUEUED".into()));
    expect(&mut t, &["GET", "k3"], R::Simple("QUEUED".into()));
    expect(&mut t, &["EXEC"], R::Arr(false, vec![bulk("x"), bulk("x")]));
    let _: () = q(&mut c, &["MSET", "k1", "y", "k3", "y"]);
    assert_eq!(t.read(), push_of(&["k1"]));
    assert_eq!(t.read(), push_of(&["k3"]));
    assert_eq!(trackinginfo(&mut t), (w(&["on", "optin"]), 0, vec![]));
    expect(&mut t, &["CLIENT", "CACHING", "yes"], ok());
    assert_eq!(
        trackinginfo(&mut t),
        (w(&["on", "optin", "caching-yes"]), 0, vec![])
    );
    t.send(&["CLIENT", "CACHING", "no"]);
    assert_eq!(
        t.read(),
        R::Err(
            "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.".into()
        )
    );
    t.send(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    assert!(matches!(t.read(), R::Err(e) if e.starts_with("ERR You can't switch OPTIN/OPTOUT")));
    // OPTOUT: every read but one after CLIENT CACHING no.
    expect(&mut t, &["CLIENT", "TRACKING", "off"], ok());
    expect(&mut t, &["CLIENT", "TRACKING", "on", "OPTOUT"], ok());
    expect(&mut t, &["CLIENT", "CACHING", "no"], ok());
    expect(&mut t, &["GET", "k1"], bulk("y"));
    expect(&mut t, &["GET", "k2"], bulk("x"));
    let _: () = q(&mut c, &["MSET", "k1", "z", "k2", "z"]);
    assert_eq!(t.read(), push_of(&["k2"]));
    nothing_pending3(&mut t);
    t.send(&["CLIENT", "CACHING", "maybe"]);
    assert_eq!(t.read(), R::Err("ERR syntax error".into()));
}

#[test]
fn a_redirection_to_a_client_that_left_is_reported() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let (sub, id) = redirect_target(&srv);
    let mut t = resp3(&srv);
    expect(
        &mut t,
        &["CLIENT", "TRACKING", "on", "REDIRECT", &id, "NOLOOP"],
        ok(),
    );
    expect(&mut t, &["CLIENT", "GETREDIR"], R::Int(id.parse().unwrap()));
    expect(&mut t, &["GET", "k"], R::Null);
    drop(sub);
    // Wait until the server has closed it.
    let t0 = std::time::Instant::now();
    while info_field(&mut c, "clients", "connected_clients") > 2 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let _: () = q(&mut c, &["SET", "k", "1"]);
    assert_eq!(
        t.read(),
        R::Arr(
            true,
            vec![bulk("tracking-redir-broken"), R::Int(id.parse().unwrap())]
        )
    );
    let redir: i64 = id.parse().unwrap();
    assert_eq!(
        trackinginfo(&mut t),
        (w(&["on", "noloop", "broken_redirect"]), redir, vec![])
    );
    t.send(&["CLIENT", "INFO"]);
    let line = word(t.read());
    assert!(line.contains(" flags=tR "), "{line}");
    // RESET ends tracking.
    expect(&mut t, &["RESET"], R::Simple("RESET".into()));
    expect(&mut t, &["CLIENT", "GETREDIR"], R::Int(-1));
    assert_eq!(trackinginfo(&mut t), (w(&["off"]), -1, vec![]));
    assert_eq!(info_field(&mut c, "clients", "tracking_clients"), 0);
}

#[test]
fn scripts_track_their_declared_keys_when_they_read() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut t = resp3(&srv);
    expect(&mut t, &["CLIENT", "TRACKING", "on"], ok());
    // A script that only writes remembers nothing.
    expect(
        &mut t,
        &["EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"],
        R::Null,
    );
    let _: () = q(&mut c, &["MSET", "k2", "1", "k1", "1"]);
    nothing_pending3(&mut t);
    // One that reads remembers its declared keys (not the key it read).
    expect(
        &mut t,
        &["EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"],
        R::Null,
    );
    let _: () = q(&mut c, &["MSET", "k2", "2", "k1", "2", "k3", "2"]);
    assert_eq!(t.read(), push_of(&["k2"]));
    assert_eq!(t.read(), push_of(&["k1"]));
    nothing_pending3(&mut t);
    expect(
        &mut t,
        &["EVAL_RO", "redis.call('ping')", "1", "k1"],
        R::Null,
    );
    let _: () = q(&mut c, &["SET", "k1", "3"]);
    nothing_pending3(&mut t);
    expect(
        &mut t,
        &["EVAL_RO", "redis.call('get', 'k2')", "1", "k1"],
        R::Null,
    );
    let _: () = q(&mut c, &["SET", "k1", "4"]);
    assert_eq!(t.read(), push_of(&["k1"]));
}

#[test]
fn the_table_limit_forgets_keys_with_an_invalidation() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let (mut sub, id) = redirect_target(&srv);
    let mut t = Reader::new(srv.raw());
    expect(&mut t, &["CLIENT", "TRACKING", "on", "REDIRECT", &id], ok());
    for i in 0..250 {
        expect(&mut t, &["GET", &format!("key{i}")], R::Bulk(None));
    }
    assert_eq!(info_field(&mut c, "stats", "tracking_total_keys"), 250);
    assert_eq!(info_field(&mut c, "stats", "tracking_total_items"), 250);
    let _: () = q(&mut c, &["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..249 {
        let R::Arr(false, v) = sub.read() else {
            panic!("a message")
        };
        let R::Arr(false, keys) = &v[2] else {
            panic!("keys")
        };
        assert_eq!(keys.len(), 1);
        assert!(seen.insert(format!("{:?}", keys[0])));
    }
    nothing_pending_sub(&mut sub);
    assert_eq!(info_field(&mut c, "stats", "tracking_total_keys"), 1);
    // The redirect target itself tracks nothing; the tracking client shows flag t.
    let line = line_of(&mut c, &id);
    assert!(
        line.contains(" flags=P ") && line.contains(" redir=-1 "),
        "{line}"
    );
    t.send(&["CLIENT", "ID"]);
    let me = word(t.read());
    let line = line_of(&mut c, &me);
    assert!(
        line.contains(" flags=t ") && line.contains(&format!(" redir={id} ")),
        "{line}"
    );
}

#[test]
fn a_client_that_leaves_stops_tracking() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    {
        let mut t = Reader::new(srv.raw());
        expect(
            &mut t,
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p"],
            ok(),
        );
        assert_eq!(info_field(&mut c, "clients", "tracking_clients"), 1);
        assert_eq!(info_field(&mut c, "stats", "tracking_total_prefixes"), 1);
    }
    let t0 = std::time::Instant::now();
    while info_field(&mut c, "clients", "tracking_clients") > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "stats", "tracking_total_prefixes"), 0);
    let _: () = q(&mut c, &["SET", "p1", "1"]);
}

/// A write whose group fails (a full pool) changes nothing, and its invalidation still goes
/// out (a client told of a write that did not happen fetches the value again; a dropped one
/// would leave it a stale value). The key is then still tracked for the next reader.
#[test]
fn a_failed_write_still_invalidates_and_changes_nothing() {
    let d = tmp();
    let srv = Server::start_with(&pool_in(&d), |o| {
        o.size = 24 << 20;
        o.max_size = Some(32 << 20);
    });
    let mut c = srv.client();
    let mut t = resp3(&srv);
    expect(&mut t, &["CLIENT", "TRACKING", "on"], ok());
    let _: () = q(&mut c, &["SET", "k", "old"]);
    expect(&mut t, &["GET", "k"], bulk("old"));
    let big = "x".repeat(40 << 20);
    // EXEC answers the group's OOM (the commands ran; their transaction could not commit).
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["SET", "k", "new"]);
    let _: () = q(&mut c, &["SET", "big", &big]);
    let e = err_text(redis::cmd("EXEC").query::<()>(&mut c));
    assert!(e.starts_with("OOM "), "{e}");
    assert_eq!(t.read(), push_of(&["k"]));
    expect(&mut t, &["GET", "k"], bulk("old"));
    let _: () = q(&mut c, &["SET", "k", "new"]);
    assert_eq!(t.read(), push_of(&["k"]));
    expect(&mut t, &["GET", "k"], bulk("new"));
}
