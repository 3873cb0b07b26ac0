//! Connections: connection and server commands, max-clients, and `requirepass`.

use super::*;
use redis::Value;

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
    // Redis's 16 databases.
    let _: () = redis::cmd("SELECT").arg(15).query(&mut c).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    assert!(err_text(redis::cmd("SELECT").arg(16).query::<()>(&mut c))
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

    // As Redis 7.0: the argument count is checked before authentication; HELLO without
    // AUTH needs an authenticated client; HELLO's options take effect in order (AUTH then a
    // bad option: authenticated, and the protocol unchanged).
    let mut v = srv.raw();
    for (req, want) in [
        (
            &b"GET\r\n"[..],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            b"HELLO 3\r\n",
            "-NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
             the RESP protocol version at the same time\r\n",
        ),
        (b"GET k\r\n", noauth),
        (
            b"HELLO 3 AUTH default s3cret BOGUS\r\n",
            "-ERR Syntax error in HELLO option 'BOGUS'\r\n",
        ),
        (b"GET k\r\n", "$1\r\nv\r\n"),
        (
            b"HELLO x\r\n",
            "-ERR Protocol version is not an integer or out of range\r\n",
        ),
        (b"AUTH a b c\r\n", "-ERR syntax error\r\n"),
        (
            b"AUTH nobody s3cret\r\n",
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        ),
        (b"RESET\r\n", "+RESET\r\n"),
        (b"GET k\r\n", noauth),
    ] {
        let got = roundtrip(&mut v, req, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
    srv.stop();
}
