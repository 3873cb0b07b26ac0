//! `daisy serve [redis.conf]` as a process, as redis-server runs: the command line overrides
//! the config file, a bad file stops the start with Redis's message and a non-zero status,
//! the log lines are Redis's, SIGHUP is logged and ignored, SIGTERM stops cleanly, and
//! `daemonize yes` detaches with a pidfile that goes at exit.

use daisy_bench::kvbench::Reply;
use daisy_bench::kvcrash;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tmpdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn daisy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_daisy"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn call(port: u16, args: &[&str]) -> Reply {
    kvcrash::call(port, args).unwrap()
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

/// The port in a "listening on ADDR:PORT" log line.
fn port_of(line: &str) -> Option<u16> {
    line.rsplit_once("listening on ")?
        .1
        .split_whitespace()
        .next()?
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// Start `daisy serve ARGS`, read stderr's lines until the "listening on" one: the child,
/// its port, the lines so far and the rest of stderr.
#[expect(
    clippy::zombie_processes,
    reason = "the child is handed to the caller, which waits for it"
)]
fn start(
    args: &[&str],
) -> (
    Child,
    u16,
    Vec<String>,
    BufReader<std::process::ChildStderr>,
) {
    let mut child = daisy()
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no start: {lines:?}");
        }
        let port = port_of(&l);
        lines.push(l.trim_end().to_string());
        if let Some(p) = port {
            return (child, p, lines, err);
        }
    }
}

/// `12345:M 25 Nov 2026 17:01:02.123 * message`, for this pid and mark.
fn assert_redis_log_line(line: &str, pid: u32, mark: &str) {
    let w: Vec<&str> = line.splitn(7, ' ').collect();
    assert_eq!(w[0], format!("{pid}:M"), "{line}");
    assert!(
        w[1].parse::<u32>().is_ok_and(|d| (1..=31).contains(&d)),
        "{line}"
    );
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    assert!(months.contains(&w[2]), "{line}");
    assert!(w[3].len() == 4 && w[3].parse::<u32>().is_ok(), "{line}");
    let t = w[4].as_bytes();
    assert!(
        t.len() == 12 && t[2] == b':' && t[5] == b':' && t[8] == b'.',
        "{line}"
    );
    assert_eq!(w[5], mark, "{line}");
}

/// The options on the command line win over the file's; the file's others hold.
#[test]
fn command_line_overrides_the_config_file() {
    let d = tmpdir();
    let conf = write(
        d.path(),
        "redis.conf",
        &format!(
            "port 1\nmaxclients 50\ntimeout 70\npool {}\n",
            d.path().join("file.pool").display()
        ),
    );
    let pool = d.path().join("cli.pool");
    let (mut child, port, lines, _err) = start(&[
        conf.to_str().unwrap(),
        "--port",
        "0",
        "--max-clients",
        "60",
        "--pool",
        pool.to_str().unwrap(),
    ]);
    assert_ne!(port, 1);
    let arr = |name: &str, v: &str| Reply::Array(Some(vec![bulk(name), bulk(v)]));
    assert_eq!(
        call(port, &["CONFIG", "GET", "maxclients"]),
        arr("maxclients", "60")
    );
    assert_eq!(
        call(port, &["CONFIG", "GET", "timeout"]),
        arr("timeout", "70")
    );
    assert!(pool.exists() && !d.path().join("file.pool").exists());
    assert!(lines[0].contains(&pool.display().to_string()), "{lines:?}");
    signal(child.id(), "-TERM");
    assert!(child.wait().unwrap().success());
}

/// An unknown directive (or a bad value) stops the start: Redis's message with the file and
/// line on standard error, exit status 1.
#[test]
fn a_bad_config_file_fails_the_start_naming_file_and_line() {
    let d = tmpdir();
    for (text, why) in [
        (
            "port 0\nnot-a-directive yes\n",
            "Bad directive or wrong number of arguments",
        ),
        (
            "port 0\nmaxclients -5\n",
            "argument must be between 1 and 4294967295 inclusive",
        ),
    ] {
        let conf = write(d.path(), "bad.conf", text);
        let out = daisy().arg("serve").arg(&conf).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("*** FATAL CONFIG FILE ERROR"), "{err}");
        assert!(
            err.contains(&format!(
                "Reading the configuration file {}, at line 2",
                conf.display()
            )),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
    }
    // A start that fails later (a port in use) exits non-zero too.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = daisy()
        .args(["serve", "--port", &port, "--pool"])
        .arg(d.path().join("p.pool"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// The log is Redis's format; SIGHUP is logged and the server keeps serving; SIGTERM stops
/// it cleanly, with its last lines.
#[test]
fn sighup_does_not_stop_the_server_and_sigterm_does() {
    let d = tmpdir();
    let pool = d.path().join("kv.pool");
    let (mut child, port, lines, mut err) =
        start(&["--port", "0", "--pool", pool.to_str().unwrap()]);
    assert_redis_log_line(&lines[0], child.id(), "*");
    assert_eq!(call(port, &["SET", "k", "v"]), Reply::Simple("OK".into()));
    signal(child.id(), "-HUP");
    // The lines after the start (the durability statement, ...) come first, Redis's "Ready
    // to accept connections" last of them (tools wait for it).
    let mut l = String::new();
    let mut before = Vec::new();
    for _ in 0..10 {
        l.clear();
        err.read_line(&mut l).unwrap();
        if l.contains("SIGHUP") {
            break;
        }
        before.push(l.clone());
    }
    assert!(
        before
            .last()
            .is_some_and(|r| r.trim_end().ends_with("* Ready to accept connections")),
        "{before:?}"
    );
    assert!(l.contains("Received SIGHUP"), "{l}");
    assert_redis_log_line(l.trim_end(), child.id(), "*");
    assert_eq!(call(port, &["GET", "k"]), bulk("v"));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP stopped the server"
    );
    signal(child.id(), "-TERM");
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(rest.contains("# Received SIGTERM or SIGINT"), "{rest}");
    assert!(rest.contains("shutting down (1 keys)"), "{rest}");
}

/// `daemonize yes`: the command returns at once (status 0) while the server runs detached,
/// its pid in the pidfile, its log in the logfile; the pidfile goes when it stops.
#[test]
fn daemonize_detaches_with_pidfile_and_logfile() {
    let d = tmpdir();
    let pidfile = d.path().join("daisy.pid");
    let log = d.path().join("daisy.log");
    let conf = write(
        d.path(),
        "redis.conf",
        &format!(
            "daemonize yes\nport 0\npidfile {}\nlogfile {}\npool {}\n",
            pidfile.display(),
            log.display(),
            d.path().join("kv.pool").display()
        ),
    );
    let st = daisy()
        .arg("serve")
        .arg(&conf)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let port = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(p) = text.lines().find_map(port_of) {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no log: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let info = call(port, &["INFO", "server"]);
    let Reply::Bulk(Some(text)) = info else {
        panic!("{info:?}")
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    assert!(text.contains(&format!("process_id:{pid}\r\n")), "{text}");
    let first = std::fs::read_to_string(&log).unwrap();
    assert_redis_log_line(first.lines().next().unwrap(), pid, "*");
    signal(pid, "-TERM");
    let t0 = Instant::now();
    while pidfile.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "pidfile stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("bye bye"), "{text}");
}
