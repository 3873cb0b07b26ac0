//! `daisy serve` as a process: killed with SIGKILL at random moments while clients write
//! (every acknowledged write must survive, nothing unacknowledged half-applied), stopped with
//! SIGTERM, and driven by Debian's redis-cli and redis-benchmark.
//!
//! The crash test's clients speak RESP over raw sockets so they know exactly which replies
//! arrived before the kill: replies are in order, so after a restart each client's keys must
//! show its acknowledged writes plus some prefix of the commands still in flight.

use daisy_bench::kvbench::{encode, Reply};
use daisy_bench::kvcrash;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn tmpdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn serve(pool: &Path, extra: &[&str]) -> kvcrash::Served {
    kvcrash::serve(Path::new(env!("CARGO_BIN_EXE_daisy")), pool, extra).unwrap()
}

/// One command on a new connection (the kill torture's RESP client).
fn call(port: u16, args: &[&str]) -> Reply {
    kvcrash::call(port, args).unwrap()
}

/// The kill torture (`daisy_bench::kvcrash`, also `daisy crashtest --server`): SIGKILL at
/// random moments under three pipelining clients; after each restart every client's keys are
/// its acknowledged writes plus a prefix of what it had in flight, and `pool check` passes
/// between the kill and the restart. A server that replied before committing fails this in its
/// first round (tried by mutation).
#[test]
fn kill9_loses_no_acknowledged_write() {
    let seed: u64 = std::env::var("DAISY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("serve crash test seed {seed} (DAISY_SEED={seed} replays the kill schedule)");
    let dir = tmpdir();
    let kills = std::env::var("DAISY_SERVE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let cfg = daisy_bench::kvcrash::Config {
        dir: dir.path().to_path_buf(),
        kills,
        seed,
        daisy_exe: env!("CARGO_BIN_EXE_daisy").into(),
        clients: 3,
    };
    let sum = daisy_bench::kvcrash::run(&cfg, |_| {}).unwrap();
    println!("{sum:?}");
    assert_eq!((sum.lost, sum.failures), (0, 0), "{:?}", sum.messages);
    assert_eq!(sum.kills, kills);
    assert!(
        sum.acknowledged_verified > 100,
        "too few commands ran: {sum:?}"
    );
}

#[test]
fn sigterm_stops_cleanly_and_keeps_everything() {
    let dir = tmpdir();
    let pool = dir.path().join("kv.pool");
    let mut srv = serve(&pool, &[]);
    assert_eq!(
        call(srv.port, &["SET", "k", "v"]),
        Reply::Simple("OK".into())
    );
    unsafe_sigterm(srv.child.id());
    let st = srv.child.wait().unwrap();
    assert!(st.success(), "exit status {st:?}");
    let srv = serve(&pool, &[]);
    assert_eq!(
        call(srv.port, &["GET", "k"]),
        Reply::Bulk(Some(b"v".to_vec()))
    );
    // A second server on the same pool is refused with a clear message (the pool is locked).
    let out = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["serve", "--port", "0", "--pool"])
        .arg(&pool)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already open"), "{err}");
    // A pool of another program is refused, not misread.
    let other = dir.path().join("other.pool");
    let mk = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["pool", "create", "--size", "64MiB", "--layout", "something"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(mk.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["serve", "--port", "0", "--pool"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("layout"), "{err}");
    drop(srv);
}

fn unsafe_sigterm(pid: u32) {
    let st = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn redis_cli_and_redis_benchmark_work() {
    if !have("redis-cli") || !have("redis-benchmark") {
        println!("SKIPPED: redis-cli/redis-benchmark missing (Debian redis-tools; scripts/install-deps.sh installs it)");
        return;
    }
    let dir = tmpdir();
    let pool = dir.path().join("kv.pool");
    let srv = serve(&pool, &[]);
    let p = srv.port.to_string();
    let cli = |args: &[&str]| {
        let o = Command::new("redis-cli")
            .args(["-p", &p])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(cli(&["set", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["get", "greeting"]), "hello world");
    assert_eq!(cli(&["incrby", "n", "5"]), "5");
    assert!(cli(&["info", "server"]).contains("redis_version"));
    // redis-cli --pipe (mass insertion) reports every reply and no error.
    let mut pipe = Vec::new();
    for i in 0..5000 {
        encode(&mut pipe, &[b"SET", format!("mass:{i}").as_bytes(), b"v"]);
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &p, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&pipe).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("errors: 0, replies: 5000"), "{out}");
    // redis-benchmark's start-up queries and workloads run, and its writes land.
    let o = Command::new("redis-benchmark")
        .args([
            "-p",
            &p,
            "-n",
            "20000",
            "-c",
            "20",
            "-P",
            "8",
            "-r",
            "1000",
            "-t",
            "set,get,incr,mset",
            "--csv",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for t in ["\"SET\"", "\"GET\"", "\"INCR\"", "\"MSET (10 keys)\""] {
        assert!(out.contains(t), "redis-benchmark did not run {t}: {out}");
    }
    let n: u64 = cli(&["dbsize"]).parse().unwrap();
    assert!(n > 5000, "dbsize {n}");
    drop(srv);
    let check = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["pool", "check"])
        .arg(&pool)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[test]
fn bad_bind_or_busy_port_fails_clearly_and_creates_nothing() {
    let dir = tmpdir();
    let pool = dir.path().join("kv.pool");
    let out = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["serve", "--bind", "no such host!", "--port", "0", "--pool"])
        .arg(&pool)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--bind"),
        "{out:?}"
    );
    assert!(!pool.exists(), "a failed start left a pool file");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["serve", "--port", &port, "--pool"])
        .arg(&pool)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot listen") && err.contains(&port),
        "{err}"
    );
    assert!(!pool.exists(), "a failed start left a pool file");
}

/// CPU time (user + system, in clock ticks) the process has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The server busy-polls only under load: with the default window and with polling off it
/// answers a burst of request-reply commands, and once the load stops it sleeps (a server
/// that kept polling would burn a whole CPU second here; an idle one spends almost nothing).
#[test]
fn busy_polling_serves_and_stops_when_the_load_stops() {
    use std::io::Read;
    for extra in [&[][..], &["--busy-poll-us", "0"][..]] {
        let dir = tmpdir();
        let srv = serve(&dir.path().join("kv.pool"), extra);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_nodelay(true).unwrap();
        let mut reply = [0u8; 5];
        let mut req = Vec::new();
        for i in 0..3000 {
            req.clear();
            encode(&mut req, &[b"SET", b"k", i.to_string().as_bytes()]);
            s.write_all(&req).unwrap();
            s.read_exact(&mut reply).unwrap();
            assert_eq!(&reply, b"+OK\r\n", "{extra:?}");
        }
        assert_eq!(
            call(srv.port, &["GET", "k"]),
            Reply::Bulk(Some(b"2999".to_vec())),
            "{extra:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
        let before = cpu_ticks(srv.child.id());
        std::thread::sleep(std::time::Duration::from_secs(1));
        let idle = cpu_ticks(srv.child.id()) - before;
        // Ticks are 10 ms: an idle second costs 0-1 of them (the 100 ms expiry timer).
        assert!(
            idle <= 15,
            "{extra:?}: {idle} ticks of CPU in an idle second"
        );
        drop(s);
    }
}
