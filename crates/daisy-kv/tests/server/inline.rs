//! Inline commands: arguments quoted as Redis's `sdssplitargs` reads them, and unbalanced
//! quotes answered with Redis's protocol error before the connection closes.

use super::*;

#[test]
fn inline_quoting_and_unbalanced_quotes() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let got = roundtrip(
        &mut s,
        b"set \"hello world\" x\r\nset 'it\\'s' \"\\x41\\tb\"\r\nget \"hello world\"\r\n",
        17,
    );
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+OK\r\n$1\r\nx\r\n");
    let mut c = srv.client();
    assert_eq!(c.get::<_, String>("it's").unwrap(), "A\tb");
    assert_eq!(c.get::<_, String>("hello world").unwrap(), "x");
    // Unbalanced quotes: the error, then the connection closes (the PING is never run).
    let mut s = srv.raw();
    let got = roundtrip(
        &mut s,
        b"set \"\"\"test-key\"\"\" test-value\r\nping\r\n",
        usize::MAX,
    );
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unbalanced quotes in request\r\n"
    );
    assert!(!c.exists::<_, bool>("test-key").unwrap());
    srv.stop();
}
