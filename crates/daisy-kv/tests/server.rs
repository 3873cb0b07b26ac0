//! `daisy serve` behaviour through real clients over TCP: the `redis` crate, and raw sockets
//! for what a client library would never send (malformed protocol, partial commands).
//! The server runs in this process on a thread, on a port the OS picks.

use redis::{Commands, Connection, RedisResult, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct Server {
    addr: SocketAddr,
    password: Option<String>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Server {
    fn start(pool: &Path) -> Server {
        Self::start_with(pool, |_| {})
    }

    fn start_with(pool: &Path, f: impl FnOnce(&mut daisy_kv::Options)) -> Server {
        let mut o = daisy_kv::Options {
            pool: pool.to_path_buf(),
            port: 0,
            quiet: true,
            ..Default::default()
        };
        f(&mut o);
        let password = o.requirepass.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let r = daisy_kv::serve(&o, |a| tx.send(a).unwrap());
            if let Err(e) = &r {
                eprintln!("server error: {e}");
            }
            r
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server did not start");
        Server {
            addr,
            password,
            thread: Some(thread),
        }
    }

    fn client(&self) -> Connection {
        redis::Client::open(format!("redis://{}/", self.addr))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// SHUTDOWN and wait for the thread.
    fn stop(mut self) {
        let mut s = self.raw();
        if let Some(p) = &self.password {
            let ok = roundtrip(&mut s, format!("AUTH {p}\r\n").as_bytes(), 5);
            assert_eq!(ok, b"+OK\r\n");
        }
        s.write_all(b"SHUTDOWN\r\n").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            s.read(&mut buf).unwrap_or(0),
            0,
            "SHUTDOWN closes without a reply"
        );
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                if let Some(p) = &self.password {
                    let _ = s.write_all(format!("AUTH {p}\r\n").as_bytes());
                }
                let _ = s.write_all(b"SHUTDOWN\r\n");
            }
            let _ = self.thread.take().unwrap().join();
        }
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-kv-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn pool_in(d: &tempfile::TempDir) -> PathBuf {
    d.path().join("kv.pool")
}

/// Send raw bytes, read until `want` bytes of reply or the peer closes.
fn roundtrip(s: &mut TcpStream, req: &[u8], want: usize) -> Vec<u8> {
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < want {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

fn err_text<T: std::fmt::Debug>(r: RedisResult<T>) -> String {
    let e = r.expect_err("expected an error reply");
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}

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

#[test]
fn protocol_errors_close_only_that_client() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut good = srv.client();
    let _: () = good.set("k", "v").unwrap();

    let cases: [(&[u8], &str); 5] = [
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n+PING\r\n",
            "-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        // Over proto-max-bulk-len: refused from the header alone (nothing allocated).
        (
            b"*2\r\n$3\r\nSET\r\n$600000000\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nabc\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
    ];
    for (req, want) in cases {
        let mut s = srv.raw();
        let got = roundtrip(&mut s, req, usize::MAX);
        assert_eq!(
            String::from_utf8_lossy(&got),
            want,
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }
    // Commands before the error in the same packet run; nothing after it does.
    let mut s = srv.raw();
    let got = roundtrip(&mut s, b"PING\r\n*1\r\n$x\r\nSET k2 v\r\n", usize::MAX);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(!good.exists::<_, bool>("k2").unwrap());

    // Inline commands and a raw pipeline.
    let mut s = srv.raw();
    let got = roundtrip(&mut s, b"SET a 1\r\nINCR a\r\nGET a\r\n", 16);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n:2\r\n$1\r\n2\r\n");
    // Unknown commands and wrong arity: Redis's texts, the connection stays open.
    let got = roundtrip(&mut s, b"FOO bar baz\r\nGET\r\nPING\r\n", 113);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' \r\n\
         -ERR wrong number of arguments for 'get' command\r\n+PONG\r\n"
    );

    // A client that disconnects mid-command loses only that command.
    let mut s = srv.raw();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nab")
        .unwrap();
    drop(s);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!good.exists::<_, bool>("half").unwrap());
    assert_eq!(
        good.get::<_, String>("k").unwrap(),
        "v",
        "the server serves the others"
    );
    srv.stop();
}

#[test]
fn connection_and_server_commands() {
    let d = tmp();
    let srv = Server::start_with(&pool_in(&d), |o| o.max_clients = 3);
    let mut c = srv.client();
    assert_eq!(redis::cmd("PING").query::<String>(&mut c).unwrap(), "PONG");
    assert_eq!(
        redis::cmd("PING")
            .arg("hi")
            .query::<String>(&mut c)
            .unwrap(),
        "hi"
    );
    assert_eq!(
        redis::cmd("ECHO")
            .arg("x y")
            .query::<String>(&mut c)
            .unwrap(),
        "x y"
    );
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    assert!(err_text(redis::cmd("SELECT").arg(1).query::<()>(&mut c))
        .contains("DB index is out of range"));
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("tester")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        redis::cmd("CLIENT")
            .arg("GETNAME")
            .query::<String>(&mut c)
            .unwrap(),
        "tester"
    );
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    assert!(id > 0);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains("name=tester"), "{list}");
    let n: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    assert!(n > 50);
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("get")
        .query(&mut c)
        .unwrap();
    assert!(format!("{v:?}").contains("get"), "{v:?}");
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut c)
        .unwrap();
    assert_eq!(save, vec!["save".to_string(), String::new()]);
    let all: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut c)
        .unwrap();
    assert!(all.contains(&"appendonly".to_string()));
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Keyspace",
    ] {
        assert!(info.contains(section), "INFO lacks {section}");
    }
    assert!(info.contains("daisy_persistence:"));
    let t: Vec<String> = redis::cmd("TIME").query(&mut c).unwrap();
    assert_eq!(t.len(), 2);
    // With no password configured, the default user takes any password (clients configured
    // with a username connect); AUTH with a password alone is Redis's configuration error.
    let mut a = srv.raw();
    assert_eq!(
        roundtrip(&mut a, b"AUTH default anything\r\n", 5),
        b"+OK\r\n"
    );
    let got = roundtrip(&mut a, b"AUTH anything\r\n", 20);
    assert!(
        got.starts_with(b"-ERR AUTH <password> called without"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    std::thread::sleep(Duration::from_millis(50));
    let mut rest = [0u8; 512];
    a.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let _ = a.read(&mut rest);
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // An unknown command's name is echoed at most 128 bytes long, and names are checked.
    let long = format!("{}\r\n", "x".repeat(5000));
    let got = roundtrip(&mut a, long.as_bytes(), 100);
    assert!(
        got.len() < 300 && got.starts_with(b"-ERR unknown command"),
        "{} bytes",
        got.len()
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(50));
    // max-clients: the fourth connection is refused with Redis's error.
    let _c2 = srv.raw();
    let _c3 = srv.raw();
    std::thread::sleep(Duration::from_millis(50));
    let mut c4 = srv.raw();
    let got = roundtrip(&mut c4, b"PING\r\n", usize::MAX);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR max number of clients reached\r\n"
    );
    // QUIT answers then closes.
    let mut q = {
        drop(_c2);
        std::thread::sleep(Duration::from_millis(50));
        srv.raw()
    };
    let got = roundtrip(&mut q, b"QUIT\r\nPING\r\n", usize::MAX);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n");
    srv.stop();
}

#[test]
fn requirepass_guards_every_command() {
    let d = tmp();
    let srv = Server::start_with(&pool_in(&d), |o| o.requirepass = Some("s3cret".into()));
    let mut s = srv.raw();
    let noauth = "-NOAUTH Authentication required.\r\n";
    let got = roundtrip(&mut s, b"GET k\r\n", noauth.len());
    assert_eq!(String::from_utf8_lossy(&got), noauth);
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    let got = roundtrip(&mut s, b"AUTH wrong\r\n", wrongpass.len());
    assert_eq!(String::from_utf8_lossy(&got), wrongpass);
    let got = roundtrip(&mut s, b"AUTH s3cret\r\nSET k v\r\n", 10);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+OK\r\n");
    // HELLO with AUTH, through a client library.
    let mut c = redis::Client::open(format!("redis://default:s3cret@{}/", srv.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v");
    let mut h = srv.raw();
    let got = roundtrip(&mut h, b"HELLO 2 AUTH default s3cret\r\n", 20);
    assert!(
        got.starts_with(b"*14\r\n$6\r\nserver\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );

    // Before AUTH a client gets Redis's small limits: at most 10 arguments of 16 KiB each;
    // more is a protocol error that closes only that connection.
    let mut u = srv.raw();
    let got = roundtrip(&mut u, b"*11\r\n", 200);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    let mut u = srv.raw();
    let got = roundtrip(&mut u, b"*2\r\n$3\r\nGET\r\n$16385\r\n", 200);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    // A big request pipelined right behind AUTH, in the same packet, is parsed after AUTH
    // ran, with an authenticated client's limits.
    let mut a = srv.raw();
    let big = "x".repeat(100_000);
    let mut req = b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n".to_vec();
    req.extend_from_slice(
        format!(
            "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n{big}\r\n",
            big.len()
        )
        .as_bytes(),
    );
    let mut args = String::from("*12\r\n$4\r\nMGET\r\n");
    for _ in 0..11 {
        args.push_str("$3\r\nbig\r\n");
    }
    req.extend_from_slice(args.as_bytes());
    let want_tail = format!("${}\r\n{big}\r\n", big.len());
    let want = format!("+OK\r\n+OK\r\n*11\r\n{}", want_tail.repeat(11));
    let got = roundtrip(&mut a, &req, want.len());
    assert!(
        got == want.as_bytes(),
        "pipelined after AUTH: {:?}",
        String::from_utf8_lossy(&got[..got.len().min(80)])
    );

    // As Redis 7: the argument count is checked before authentication, and HELLO checks all
    // its options before it authenticates (a bad option leaves the client as it was).
    let mut v = srv.raw();
    for (req, want) in [
        (
            &b"GET\r\n"[..],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            b"HELLO 3 AUTH default s3cret BOGUS\r\n",
            "-ERR Syntax error in HELLO option 'BOGUS'\r\n",
        ),
        (b"GET k\r\n", noauth),
        (
            b"HELLO x\r\n",
            "-ERR Protocol version is not an integer or out of range\r\n",
        ),
    ] {
        let got = roundtrip(&mut v, req, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
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

#[test]
fn a_full_pool_answers_oom_and_keeps_what_it_has() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |o| {
        o.size = 160 << 20;
        o.max_size = 160 << 20;
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
    let p = daisy::Pool::open(&pool, daisy_kv::store::LAYOUT).unwrap();
    let report = p.check(None);
    assert!(report.ok(), "{:?}", report.problems);
    let store = daisy_kv::store::Store::open(&p).unwrap();
    assert!(store.check().problems.is_empty());
    assert_eq!(store.len().unwrap(), stored as u64);
}

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

#[test]
fn hello_3_switches_to_resp3() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    // Everything the server sends until it goes quiet for 200 ms.
    let drain = |s: &mut TcpStream, req: &[u8]| -> Vec<u8> {
        s.write_all(req).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    };
    let got = drain(&mut s, b"HELLO 3\r\n");
    assert!(
        got.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(String::from_utf8_lossy(&got).contains("$5\r\nproto\r\n:3\r\n"));
    // A null and a map in RESP3's own types.
    assert_eq!(drain(&mut s, b"GET nope\r\n"), b"_\r\n");
    assert_eq!(
        drain(&mut s, b"CONFIG GET save\r\n"),
        b"%1\r\n$4\r\nsave\r\n$0\r\n\r\n"
    );
    // And back to RESP2.
    assert!(drain(&mut s, b"HELLO 2\r\n").starts_with(b"*14\r\n"));
    assert_eq!(drain(&mut s, b"GET nope\r\n"), b"$-1\r\n");
    assert_eq!(
        String::from_utf8_lossy(&drain(&mut s, b"HELLO 4\r\n")),
        "-NOPROTO unsupported protocol version\r\n"
    );
    srv.stop();
}

/// Commands that touch more keys than one redo record can change: reads over many expired
/// keys still answer (lazy expiry steps aside when the record runs low), and a DEL too big
/// for one atomic record is refused whole with a clear error, deleting nothing.
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

    // Live keys: a DEL of all of them in one command does not fit one redo record.
    let live: Vec<String> = (0..N).map(|i| format!("l:{i:06}")).collect();
    let mut p = redis::pipe();
    for k in &live {
        p.cmd("SET").arg(k).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let e = redis::cmd("DEL").arg(&live).query::<i64>(&mut c);
    let text = err_text(e);
    assert!(text.contains("too large"), "{text}");
    let n: i64 = redis::cmd("EXISTS").arg(&live).query(&mut c).unwrap();
    assert_eq!(n, N as i64, "a refused DEL deletes nothing");
    // The same keys in smaller commands go.
    for chunk in live.chunks(5_000) {
        let n: i64 = redis::cmd("DEL").arg(chunk).query(&mut c).unwrap();
        assert_eq!(n, chunk.len() as i64);
    }
    assert_eq!(c.get::<_, Option<String>>("l:000001").unwrap(), None);
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

/// A request with many arguments that arrives in many small pieces is parsed where it stopped
/// each time (not from its start again), and runs whole when its last byte is in.
#[test]
fn a_long_request_arriving_in_pieces() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    s.set_nodelay(true).unwrap();
    const PAIRS: usize = 3000;
    let mut req = format!("*{}\r\n$4\r\nMSET\r\n", 1 + 2 * PAIRS).into_bytes();
    for i in 0..PAIRS {
        let (k, v) = (format!("p:{i}"), format!("v{i}"));
        req.extend_from_slice(format!("${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).as_bytes());
    }
    for (n, piece) in req.chunks(337).enumerate() {
        s.write_all(piece).unwrap();
        if n % 8 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = roundtrip(&mut s, b"", 5);
    assert_eq!(got, b"+OK\r\n");
    let mut c = srv.client();
    assert_eq!(
        redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(),
        PAIRS as i64
    );
    for i in [0, 1, 1234, PAIRS - 1] {
        assert_eq!(
            c.get::<_, String>(format!("p:{i}")).unwrap(),
            format!("v{i}")
        );
    }
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
        o.max_size = 24 << 20;
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
    let p = daisy::Pool::open(&pool, daisy_kv::store::LAYOUT).unwrap();
    let report = p.check(None);
    assert!(report.ok(), "{:?}", report.problems);
}
