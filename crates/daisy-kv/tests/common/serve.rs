//! Shared by daisy-kv's test binaries (included with `#[path]`): a directory for a pool, and
//! `daisy serve` on a thread of the test process.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

/// A temporary directory in /dev/shm (pools live there), else the system's.
pub fn tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Start `daisy serve` with `o` (port 0: the OS picks one) on a thread: the address it
/// listens on, and the thread (its result is the server's).
pub fn spawn(o: daisy_kv::Options) -> (SocketAddr, JoinHandle<Result<(), String>>) {
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
    (addr, thread)
}
