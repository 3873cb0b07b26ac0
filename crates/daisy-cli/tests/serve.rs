//! `daisy serve` as a process: killed with SIGKILL at random moments while clients write
//! (every acknowledged write must survive, nothing unacknowledged half-applied), stopped with
//! SIGTERM, and driven by Debian's redis-cli and redis-benchmark.
//!
//! The crash test's clients speak RESP over raw sockets so they know exactly which replies
//! arrived before the kill: replies are in order, so after a restart each client's keys must
//! show its acknowledged writes plus some prefix of the commands still in flight.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn tmpdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// A `daisy serve` child on a free port (read back from its start-up line).
struct Served {
    child: Child,
    port: u16,
}

fn serve(pool: &Path, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_daisy"))
        .args(["serve", "--port", "0", "--pool"])
        .arg(pool)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .rsplit_once("listening on ")
        .and_then(|(_, a)| a.split_whitespace().next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in the start-up line {line:?}"));
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    Served { child, port }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- a minimal RESP client ---------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_reply(r: &mut BufReader<TcpStream>) -> std::io::Result<Reply> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
    }
    let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    Ok(match line[0] {
        b'+' => Reply::Simple(body),
        b'-' => Reply::Error(body),
        b':' => Reply::Int(body.parse().unwrap()),
        b'$' => {
            let n: i64 = body.parse().unwrap();
            if n < 0 {
                Reply::Bulk(None)
            } else {
                let mut v = vec![0u8; n as usize + 2];
                r.read_exact(&mut v)?;
                v.truncate(n as usize);
                Reply::Bulk(Some(v))
            }
        }
        b'*' => {
            let n: i64 = body.parse().unwrap();
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(r)?);
            }
            Reply::Array(items)
        }
        c => panic!("bad reply type {c}"),
    })
}

fn connect(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

fn call(port: u16, args: &[&str]) -> Reply {
    let (mut s, mut r) = connect(port);
    let a: Vec<Vec<u8>> = args.iter().map(|x| x.as_bytes().to_vec()).collect();
    s.write_all(&encode(&a)).unwrap();
    read_reply(&mut r).unwrap()
}

// ---- the model -----------------------------------------------------------------------------

/// A key's value and whether it has an expiry time.
type Model = BTreeMap<Vec<u8>, (Vec<u8>, bool)>;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TTL_MS: u64 = 3_600_000;

/// A random command on client `c`'s keys.
fn random_command(rng: &mut Rng, c: usize) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| format!("c{c}:k{}", rng.below(24)).into_bytes();
    let value = |rng: &mut Rng| {
        let n = match rng.below(50) {
            0 => 60_000 + rng.below(60_000),
            _ => 1 + rng.below(600),
        } as usize;
        let b = b'a' + rng.below(26) as u8;
        vec![b; n]
    };
    let v = |s: &str| s.as_bytes().to_vec();
    match rng.below(9) {
        0 | 1 => vec![v("SET"), key(rng), value(rng)],
        2 => vec![
            v("SET"),
            key(rng),
            value(rng),
            v("PX"),
            v(&TTL_MS.to_string()),
        ],
        3 => vec![v("DEL"), key(rng)],
        4 => vec![v("INCR"), format!("c{c}:n").into_bytes()],
        5 => vec![v("APPEND"), key(rng), value(rng)],
        6 => vec![
            v("MSET"),
            key(rng),
            value(rng),
            key(rng),
            value(rng),
            key(rng),
            value(rng),
        ],
        7 => vec![v("EXPIRE"), key(rng), v("3600")],
        _ => vec![v("PERSIST"), key(rng)],
    }
}

/// Apply `cmd` to the model; the reply the server must give.
fn apply(m: &mut Model, cmd: &[Vec<u8>]) -> Reply {
    let name = String::from_utf8_lossy(&cmd[0]).to_string();
    match name.as_str() {
        "SET" => {
            m.insert(cmd[1].clone(), (cmd[2].clone(), cmd.len() > 3));
            Reply::Simple("OK".into())
        }
        "DEL" => Reply::Int(m.remove(&cmd[1]).is_some() as i64),
        "INCR" => {
            let cur = m.get(&cmd[1]).map_or(0, |(v, _)| {
                String::from_utf8_lossy(v).parse::<i64>().unwrap()
            });
            let ttl = m.get(&cmd[1]).is_some_and(|e| e.1);
            m.insert(cmd[1].clone(), ((cur + 1).to_string().into_bytes(), ttl));
            Reply::Int(cur + 1)
        }
        "APPEND" => {
            let e = m.entry(cmd[1].clone()).or_insert((Vec::new(), false));
            e.0.extend_from_slice(&cmd[2]);
            Reply::Int(e.0.len() as i64)
        }
        "MSET" => {
            for kv in cmd[1..].chunks(2) {
                m.insert(kv[0].clone(), (kv[1].clone(), false));
            }
            Reply::Simple("OK".into())
        }
        "EXPIRE" => match m.get_mut(&cmd[1]) {
            Some(e) => {
                e.1 = true;
                Reply::Int(1)
            }
            None => Reply::Int(0),
        },
        "PERSIST" => match m.get_mut(&cmd[1]) {
            Some(e) if e.1 => {
                e.1 = false;
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        },
        _ => unreachable!(),
    }
}

/// A client's keys as the server holds them: value and whether a TTL (within an hour) is set.
fn server_state(port: u16, c: usize) -> Model {
    let mut m = Model::new();
    let mut keys: Vec<String> = (0..24).map(|i| format!("c{c}:k{i}")).collect();
    keys.push(format!("c{c}:n"));
    for k in keys {
        if let Reply::Bulk(Some(v)) = call(port, &["GET", &k]) {
            let ttl = match call(port, &["PTTL", &k]) {
                Reply::Int(-1) => false,
                Reply::Int(t) if t > 0 && t as u64 <= TTL_MS => true,
                r => panic!("PTTL {k}: {r:?}"),
            };
            m.insert(k.into_bytes(), (v, ttl));
        }
    }
    m
}

/// One writer: pipelines of 1-8 random commands; each reply checked against the model
/// and acknowledged into it. Returns (model of acknowledged writes, commands in flight).
fn writer(port: u16, c: usize, seed: u64, mut m: Model) -> (Model, Vec<Vec<Vec<u8>>>, u64) {
    let mut rng = Rng(seed | 1);
    let (mut s, mut r) = connect(port);
    let mut acked = 0;
    loop {
        let batch: Vec<Vec<Vec<u8>>> = (0..1 + rng.below(8))
            .map(|_| random_command(&mut rng, c))
            .collect();
        let mut wire = Vec::new();
        for cmd in &batch {
            wire.extend_from_slice(&encode(cmd));
        }
        if s.write_all(&wire).is_err() {
            return (m, batch, acked);
        }
        for (i, cmd) in batch.iter().enumerate() {
            match read_reply(&mut r) {
                Ok(got) => {
                    let want = apply(&mut m, cmd);
                    assert_eq!(
                        got,
                        want,
                        "client {c}: reply to {:?}",
                        String::from_utf8_lossy(&cmd[0])
                    );
                    acked += 1;
                }
                Err(_) => return (m, batch[i..].to_vec(), acked),
            }
        }
    }
}

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
    let pool = dir.path().join("kv.pool");
    const CLIENTS: usize = 3;
    let kills: u64 = std::env::var("DAISY_SERVE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut models: Vec<Model> = vec![Model::new(); CLIENTS];
    let mut rng = Rng(seed | 1);
    let mut total_acked = 0;
    let mut in_flight_applied = 0;
    for round in 0..kills {
        let mut srv = serve(&pool, &[]);
        let port = srv.port;
        // After a restart the server holds exactly the models (checked below); write on.
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let m = models[c].clone();
                let s = rng.next();
                std::thread::spawn(move || writer(port, c, s, m))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50 + rng.below(400)));
        srv.child.kill().unwrap(); // SIGKILL
        srv.child.wait().unwrap();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();

        // The pool is consistent before anything reopens it for writing.
        let check = Command::new(env!("CARGO_BIN_EXE_daisy"))
            .args(["pool", "check"])
            .arg(&pool)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "round {round}: pool check failed:\n{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );

        let srv = serve(&pool, &[]);
        for (c, (acked_model, in_flight, acked)) in results.into_iter().enumerate() {
            total_acked += acked;
            let got = server_state(srv.port, c);
            // Acknowledged state plus some prefix of the in-flight commands.
            let mut candidate = acked_model.clone();
            let mut matched = (candidate == got).then_some(0);
            for (j, cmd) in in_flight.iter().enumerate() {
                if matched.is_some() {
                    break;
                }
                apply(&mut candidate, cmd);
                if candidate == got {
                    matched = Some(j + 1);
                }
            }
            let Some(j) = matched else {
                let lost: Vec<_> = acked_model
                    .iter()
                    .filter(|(k, v)| got.get(*k) != Some(v))
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                    .collect();
                panic!(
                    "seed {seed} round {round} client {c}: the server's state is not the \
                     acknowledged writes plus a prefix of the {} in flight; keys differing \
                     from the acknowledged state: {lost:?}",
                    in_flight.len()
                );
            };
            in_flight_applied += j;
            models[c] = got;
        }
        drop(srv);
    }
    println!(
        "{kills} kills, {total_acked} acknowledged commands verified, {in_flight_applied} \
         unacknowledged ones found applied (whole), 0 lost"
    );
    assert!(total_acked > 100, "too few commands ran: {total_acked}");
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
        pipe.extend_from_slice(&encode(&[
            b"SET".to_vec(),
            format!("mass:{i}").into_bytes(),
            b"v".to_vec(),
        ]));
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
