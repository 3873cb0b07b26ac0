//! The two servers: a real `redis-server` on a free loopback port (no persistence), killed on
//! drop, and `daisy serve` on a thread of this process, on a pool in /dev/shm.

use crate::common;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn tmp() -> tempfile::TempDir {
    common::tmp("daisy-diff-")
}

/// The redis-server to run: `$REDIS_SERVER`, else the first `redis-server` on PATH.
pub fn redis_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("redis-server"))
            .find(|p| p.is_file())
    })
}

/// The version `redis-server --version` reports (`v=7.0.15`), if it runs.
pub fn redis_version(bin: &PathBuf) -> Option<String> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    Some(v.to_string())
}

/// A redis-server child process.
pub struct Redis {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Start one on a free port (a few tries, in case another process takes the port first).
    pub fn start(bin: &PathBuf) -> Redis {
        let dir = tmp();
        let mut last = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(st)) = child.try_wait() {
                    last = format!("redis-server exited at start ({st}); port {port} taken?");
                    break;
                }
                if ping(addr) {
                    return Redis {
                        child,
                        addr,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            if last.is_empty() {
                last = "redis-server did not answer PING within 10 s".into();
            }
        }
        panic!("{last}");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ping(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// `daisy serve` on a thread, on a fresh pool.
pub struct Daisy {
    pub addr: SocketAddr,
    thread: Option<JoinHandle<Result<(), String>>>,
    _dir: tempfile::TempDir,
}

impl Daisy {
    pub fn start() -> Daisy {
        let dir = tmp();
        let o = daisy_kv::Options {
            pool: dir.path().join("kv.pool"),
            port: 0,
            quiet: true,
            ..Default::default()
        };
        let (addr, thread) = common::spawn(o);
        Daisy {
            addr,
            thread: Some(thread),
            _dir: dir,
        }
    }
}

impl Drop for Daisy {
    fn drop(&mut self) {
        if let Ok(mut s) = TcpStream::connect(self.addr) {
            let _ = s.write_all(b"SHUTDOWN\r\n");
        }
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.expect("daisy serve's thread panicked")
                    .expect("daisy serve failed");
            }
        }
    }
}
