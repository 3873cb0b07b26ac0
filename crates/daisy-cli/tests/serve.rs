//! `daisy serve` as a process: killed with SIGKILL at random moments while clients write
//! (every acknowledged write must survive, nothing unacknowledged half-applied; scripts whole
//! or absent), stopped with SIGTERM (also while a script is busy), and driven by Debian's
//! redis-cli and redis-benchmark.
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

/// SIGTERM while a script runs past the busy threshold: one that has not written is killed
/// and the server stops cleanly; one that has written cannot be killed, so the server exits at
/// once and its writes are not kept (its transaction never committed).
#[test]
fn sigterm_ends_a_busy_script() {
    let dir = tmpdir();
    let pool = dir.path().join("kv.pool");
    for (script, keys) in [
        ("while true do end", &[][..]),
        (
            "redis.call('set', KEYS[1], 'w') while true do end",
            &["w"][..],
        ),
    ] {
        let mut srv = serve(&pool, &[]);
        assert_eq!(
            call(srv.port, &["CONFIG", "SET", "lua-time-limit", "50"]),
            Reply::Simple("OK".into())
        );
        // Opened before the script: a busy script answers the connections it knows.
        let mut probe =
            daisy_bench::kvbench::Conn::connect(srv.port, std::time::Duration::from_secs(10))
                .unwrap();
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        let n = keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
        args.extend(keys.iter().map(|k| k.as_bytes()));
        let mut req = Vec::new();
        encode(&mut req, &args);
        conn.write_all(&req).unwrap();
        let t0 = std::time::Instant::now();
        loop {
            match probe.cmd(&["PING"]).unwrap() {
                Reply::Error(e) if e.starts_with("BUSY") => break,
                r => assert!(t0.elapsed().as_secs() < 20, "no BUSY: {r:?}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        unsafe_sigterm(srv.child.id());
        let st = srv.child.wait().unwrap();
        assert!(st.success(), "{script}: exit status {st:?}");
        drop(srv);
    }
    let srv = serve(&pool, &[]);
    assert_eq!(call(srv.port, &["GET", "w"]), Reply::Bulk(None));
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

/// RESP requests pipelined on one connection; their replies in order.
fn pipeline(port: u16, cmds: &[Vec<String>]) -> Vec<Reply> {
    let mut conn =
        daisy_bench::kvbench::Conn::connect(port, std::time::Duration::from_secs(5)).unwrap();
    let mut buf = Vec::new();
    for c in cmds {
        let a: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
        encode(&mut buf, &a);
    }
    conn.send(&buf).unwrap();
    (0..cmds.len())
        .map(|_| conn.read_reply().unwrap())
        .collect()
}

fn info_field(port: u16, field: &str) -> String {
    let Reply::Bulk(Some(b)) = call(port, &["INFO", "persistence"]) else {
        panic!("INFO")
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim()
        .to_string()
}

/// The backup an operator takes: BGSAVE while a writer runs, then the server is killed with
/// SIGKILL; the copy passes `pool check`, and `daisy serve` on it has exactly a prefix of the
/// writer's sequence (everything acknowledged before BGSAVE, nothing sent after it was seen
/// done). The original pool keeps every acknowledged write too. Then `daisy pool backup` of
/// the live pool goes through the server, `pool check` of the live pool says it is in use, and
/// after the server stops `pool backup` copies the pool directly.
#[test]
fn a_backup_under_writes_survives_a_kill_and_serves_a_prefix_of_them() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;
    let dir = tmpdir();
    let pool = dir.path().join("kv.pool");
    let srv = serve(&pool, &[]);
    let port = srv.port;
    let blob = "x".repeat(2000);
    for chunk in 0..20 {
        let cmds: Vec<Vec<String>> = (0..500)
            .map(|i| {
                vec![
                    "SET".into(),
                    format!("blob:{}", chunk * 500 + i),
                    blob.clone(),
                ]
            })
            .collect();
        assert!(pipeline(port, &cmds)
            .iter()
            .all(|r| *r == Reply::Simple("OK".into())));
    }
    let (sent, acked, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writer = {
        let (sent, acked, stop) = (sent.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                let cmds: Vec<Vec<String>> = (i..i + 8)
                    .flat_map(|j| {
                        [
                            vec!["SET".into(), format!("seq:{j}"), j.to_string()],
                            vec!["SET".into(), "last".into(), j.to_string()],
                        ]
                    })
                    .collect();
                sent.store(i + 8, SeqCst);
                let r = std::panic::catch_unwind(|| pipeline(port, &cmds));
                if r.is_err() {
                    return; // the server was killed
                }
                i += 8;
                acked.store(i, SeqCst);
            }
        })
    };
    while acked.load(SeqCst) < 400 {
        std::thread::yield_now();
    }
    let low = acked.load(SeqCst);
    assert_eq!(
        call(port, &["BGSAVE"]),
        Reply::Simple("Background saving started".into())
    );
    let t0 = std::time::Instant::now();
    while info_field(port, "rdb_bgsave_in_progress") != "0" {
        assert!(t0.elapsed().as_secs() < 60);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let high = sent.load(SeqCst);
    assert_eq!(info_field(port, "rdb_last_bgsave_status"), "ok");
    let backup = std::path::PathBuf::from(info_field(port, "daisy_backup_last_path"));
    assert_eq!(
        backup,
        std::fs::canonicalize(dir.path())
            .unwrap()
            .join("kv.pool.backup")
    );
    // Keep writing a little, then kill the server in the middle of it.
    let acked_at_done = acked.load(SeqCst);
    while acked.load(SeqCst) < acked_at_done + 200 {
        std::thread::yield_now();
    }
    drop(srv); // SIGKILL
    stop.store(true, SeqCst);
    writer.join().unwrap();
    let acked_final = acked.load(SeqCst);

    let check = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["pool", "check"])
        .arg(&backup)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{text}");
    assert!(
        text.lines().next().unwrap().ends_with("check: OK"),
        "{text}"
    );

    let copy = serve(&backup, &[]);
    let Reply::Bulk(Some(last)) = call(copy.port, &["GET", "last"]) else {
        panic!("no `last` in the backup")
    };
    let last: u64 = String::from_utf8(last).unwrap().parse().unwrap();
    println!("backup holds seq:0..={last}; {low} acknowledged before BGSAVE, {high} sent when it was seen done");
    assert!(
        last + 1 >= low,
        "acknowledged writes before BGSAVE are missing: last {last}, {low}"
    );
    assert!(
        last < high,
        "writes sent after the backup finished are in it: last {last}, {high}"
    );
    for j in [0, last / 2, last] {
        assert_eq!(
            call(copy.port, &["GET", &format!("seq:{j}")]),
            Reply::Bulk(Some(j.to_string().into_bytes()))
        );
    }
    assert_eq!(
        call(copy.port, &["EXISTS", &format!("seq:{}", last + 1)]),
        Reply::Int(0)
    );
    assert_eq!(
        call(copy.port, &["DBSIZE"]),
        Reply::Int(10_000 + last as i64 + 2)
    );
    drop(copy);

    // The original, restarted after the kill, has every acknowledged write.
    let orig = serve(&pool, &[]);
    let n = acked_final - 1;
    assert_eq!(
        call(orig.port, &["GET", &format!("seq:{n}")]),
        Reply::Bulk(Some(n.to_string().into_bytes()))
    );
    // `pool check` of a pool in use reads it without its lock and says so.
    let check = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["pool", "check"])
        .arg(&pool)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("in use by another process"), "{text}");
    // `pool backup` of the live pool goes through the server.
    let dst = dir.path().join("copy.pool");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_daisy"))
            .args(["pool", "backup"])
            .arg(&pool)
            .arg(&dst)
            .args(args)
            .output()
            .unwrap()
    };
    let port_arg = orig.port.to_string();
    let out = run(&["--port", &port_arg]);
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && msg.contains("through the server"),
        "{msg}"
    );
    let out = run(&["--port", &port_arg]);
    assert!(
        !out.status.success(),
        "an existing destination is kept without --force"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    // Without the right server: a clear error, nothing copied.
    let out = run(&["--port", "1", "--force"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is open in another process"));
    drop(orig);
    // Stopped (killed): copied directly, and the copy serves.
    let out = run(&["--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = serve(&dst, &[]);
    assert_eq!(
        call(c.port, &["GET", &format!("seq:{n}")]),
        Reply::Bulk(Some(n.to_string().into_bytes()))
    );
}
