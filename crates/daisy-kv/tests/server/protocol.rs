//! The protocol: malformed requests, RESP3, and a request that arrives in pieces.

use super::*;

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
