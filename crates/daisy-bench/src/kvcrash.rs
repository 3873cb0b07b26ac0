//! Kill torture of `daisy serve` (`daisy crashtest --server`): the server is killed with
//! SIGKILL at random moments while clients write, restarted, and checked.
//!
//! The clients speak RESP over raw sockets so they know exactly which replies arrived before
//! the kill. Each owns its keys, pipelines 1-8 random commands (SET, SET PX, DEL, INCR,
//! APPEND, MSET, EXPIRE, PERSIST; values up to 120 KB) and checks every reply against a
//! model. Replies come in order, so after a restart each client's keys must be its
//! acknowledged writes plus some prefix of the commands it still had in flight; between the
//! kill and the restart, `daisy pool check` must pass.

use crate::kvbench::{encode, Conn, Reply};
use anyhow::{anyhow, Result};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub kills: u64,
    pub seed: u64,
    /// The `daisy` binary (`serve` and `pool check`).
    pub daisy_exe: PathBuf,
    pub clients: usize,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub kills: u64,
    /// Acknowledged commands whose effect was verified after a restart.
    pub acknowledged_verified: u64,
    /// Commands in flight at a kill that were found applied (each whole).
    pub in_flight_applied: u64,
    /// Clients whose keys were not their acknowledged writes plus a prefix of those in flight.
    pub lost: u64,
    pub failures: u64,
    pub messages: Vec<String>,
    pub seed: u64,
    pub seconds: f64,
}

/// A `daisy serve` child on a free port (read back from its start-up line); killed when
/// dropped.
pub struct Served {
    pub child: Child,
    pub port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `exe serve --port 0 --pool POOL EXTRA...`.
pub fn serve(exe: &Path, pool: &Path, extra: &[&str]) -> Result<Served> {
    let mut child = Command::new(exe)
        .args(["serve", "--port", "0", "--pool"])
        .arg(pool)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow!("{}: {e}", exe.display()))?;
    let mut err = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    let port = line
        .rsplit_once("listening on ")
        .and_then(|(_, a)| a.split_whitespace().next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok());
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    let mut served = Served { child, port: 0 };
    match port {
        Some(port) => {
            served.port = port;
            Ok(served)
        }
        None => Err(anyhow!("daisy serve did not start: {}", line.trim())),
    }
}

/// One command on a new connection (the benchmark's RESP client); its reply.
pub fn call(port: u16, args: &[&str]) -> Result<Reply> {
    Conn::connect(port, Duration::from_secs(5))?.cmd(args)
}

// ---- the model -----------------------------------------------------------------------------

/// A key's value and whether it has an expiry time.
pub type Model = BTreeMap<Vec<u8>, (Vec<u8>, bool)>;

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
const KEYS: u64 = 24;

/// A random command on client `c`'s keys.
fn random_command(rng: &mut Rng, c: usize) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| format!("c{c}:k{}", rng.below(KEYS)).into_bytes();
    let value = |rng: &mut Rng| {
        let n = match rng.below(50) {
            0 => 60_000 + rng.below(60_000),
            _ => 1 + rng.below(600),
        } as usize;
        vec![b'a' + rng.below(26) as u8; n]
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
    match &cmd[0][..] {
        b"SET" => {
            m.insert(cmd[1].clone(), (cmd[2].clone(), cmd.len() > 3));
            Reply::Simple("OK".into())
        }
        b"DEL" => Reply::Int(m.remove(&cmd[1]).is_some() as i64),
        b"INCR" => {
            let e = m.entry(cmd[1].clone()).or_insert((b"0".to_vec(), false));
            let n = String::from_utf8_lossy(&e.0).parse::<i64>().unwrap_or(0) + 1;
            e.0 = n.to_string().into_bytes();
            Reply::Int(n)
        }
        b"APPEND" => {
            let e = m.entry(cmd[1].clone()).or_insert((Vec::new(), false));
            e.0.extend_from_slice(&cmd[2]);
            Reply::Int(e.0.len() as i64)
        }
        b"MSET" => {
            for kv in cmd[1..].chunks(2) {
                m.insert(kv[0].clone(), (kv[1].clone(), false));
            }
            Reply::Simple("OK".into())
        }
        b"EXPIRE" => match m.get_mut(&cmd[1]) {
            Some(e) => {
                e.1 = true;
                Reply::Int(1)
            }
            None => Reply::Int(0),
        },
        _ => match m.get_mut(&cmd[1]) {
            // PERSIST
            Some(e) if e.1 => {
                e.1 = false;
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        },
    }
}

/// A client's keys as the server holds them.
fn server_state(port: u16, c: usize) -> Result<Model> {
    let mut m = Model::new();
    let mut keys: Vec<String> = (0..KEYS).map(|i| format!("c{c}:k{i}")).collect();
    keys.push(format!("c{c}:n"));
    for k in keys {
        if let Reply::Bulk(Some(v)) = call(port, &["GET", &k])? {
            let ttl = match call(port, &["PTTL", &k])? {
                Reply::Int(-1) => false,
                Reply::Int(t) if t > 0 && t as u64 <= TTL_MS => true,
                r => return Err(anyhow!("PTTL {k}: {r:?}")),
            };
            m.insert(k.into_bytes(), (v, ttl));
        }
    }
    Ok(m)
}

/// What one writer saw: the model of its acknowledged writes, the commands still in flight
/// when the connection broke, how many replies it checked, and a wrong reply if any.
struct Written {
    model: Model,
    in_flight: Vec<Vec<Vec<u8>>>,
    acked: u64,
    wrong: Option<String>,
}

fn writer(port: u16, c: usize, seed: u64, mut m: Model) -> Written {
    let mut rng = Rng(seed | 1);
    let Ok(mut conn) = Conn::connect(port, Duration::from_secs(5)) else {
        return Written {
            model: m,
            in_flight: vec![],
            acked: 0,
            wrong: None,
        };
    };
    conn.set_read_timeout(Duration::from_secs(20));
    let mut acked = 0;
    loop {
        let batch: Vec<Vec<Vec<u8>>> = (0..1 + rng.below(8))
            .map(|_| random_command(&mut rng, c))
            .collect();
        let mut wire = Vec::new();
        for cmd in &batch {
            let args: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
            encode(&mut wire, &args);
        }
        if conn.send(&wire).is_err() {
            return Written {
                model: m,
                in_flight: batch,
                acked,
                wrong: None,
            };
        }
        for (i, cmd) in batch.iter().enumerate() {
            match conn.read_reply() {
                Ok(got) => {
                    let want = apply(&mut m, cmd);
                    acked += 1;
                    if got != want {
                        let wrong = format!(
                            "client {c}: {} answered {got:?}, expected {want:?}",
                            String::from_utf8_lossy(&cmd[0])
                        );
                        return Written {
                            model: m,
                            in_flight: vec![],
                            acked,
                            wrong: Some(wrong),
                        };
                    }
                }
                Err(_) => {
                    return Written {
                        model: m,
                        in_flight: batch[i..].to_vec(),
                        acked,
                        wrong: None,
                    }
                }
            }
        }
    }
}

/// Run the torture; `progress` gets the kills done so far.
pub fn run(cfg: &Config, mut progress: impl FnMut(u64)) -> Result<Summary> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let pool = cfg.dir.join(format!(
        "daisy-kvcrash-{}-{}.pool",
        std::process::id(),
        cfg.seed
    ));
    let _ = std::fs::remove_file(&pool);
    let r = torture(cfg, &pool, &mut progress);
    let _ = std::fs::remove_file(&pool);
    r.map(|mut s| {
        s.seconds = t0.elapsed().as_secs_f64();
        s
    })
}

fn torture(cfg: &Config, pool: &Path, progress: &mut impl FnMut(u64)) -> Result<Summary> {
    let mut sum = Summary {
        seed: cfg.seed,
        ..Default::default()
    };
    let mut models: Vec<Model> = vec![Model::new(); cfg.clients];
    let mut rng = Rng(cfg.seed | 1);
    let fail = |sum: &mut Summary, m: String| {
        sum.failures += 1;
        if sum.messages.len() < 10 {
            sum.messages.push(format!(
                "{m} (replay: daisy crashtest --server --seed {})",
                cfg.seed
            ));
        }
    };
    for round in 0..cfg.kills {
        let mut srv = serve(&cfg.daisy_exe, pool, &[])?;
        let port = srv.port;
        let handles: Vec<_> = (0..cfg.clients)
            .map(|c| {
                let m = models[c].clone();
                let s = rng.next();
                std::thread::spawn(move || writer(port, c, s, m))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50 + rng.below(400)));
        let _ = srv.child.kill(); // SIGKILL
        let _ = srv.child.wait();
        drop(srv);
        let results: Vec<Written> = handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a client thread panicked")))
            .collect::<Result<_, _>>()?;
        sum.kills += 1;

        let check = Command::new(&cfg.daisy_exe)
            .args(["pool", "check"])
            .arg(pool)
            .output()?;
        if !check.status.success() {
            fail(
                &mut sum,
                format!(
                    "kill {round}: pool check failed: {}",
                    String::from_utf8_lossy(&check.stdout)
                        .lines()
                        .last()
                        .unwrap_or("")
                ),
            );
            break;
        }
        let srv = serve(&cfg.daisy_exe, pool, &[])?;
        for (c, w) in results.into_iter().enumerate() {
            if let Some(wrong) = w.wrong {
                fail(&mut sum, format!("kill {round}: {wrong}"));
            }
            let got = server_state(srv.port, c)?;
            let mut candidate = w.model.clone();
            let mut matched = (candidate == got).then_some(0);
            for (j, cmd) in w.in_flight.iter().enumerate() {
                if matched.is_some() {
                    break;
                }
                apply(&mut candidate, cmd);
                if candidate == got {
                    matched = Some(j + 1);
                }
            }
            match matched {
                Some(j) => {
                    sum.acknowledged_verified += w.acked;
                    sum.in_flight_applied += j as u64;
                }
                None => {
                    sum.lost += 1;
                    let differ: Vec<String> = w
                        .model
                        .iter()
                        .filter(|(k, v)| got.get(*k) != Some(v))
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .take(5)
                        .collect();
                    fail(
                        &mut sum,
                        format!(
                            "kill {round}, client {c}: the keys are not the acknowledged writes \
                             plus a prefix of the {} in flight; differing: {differ:?}",
                            w.in_flight.len()
                        ),
                    );
                }
            }
            models[c] = got;
        }
        drop(srv);
        progress(sum.kills);
        if sum.failures > 0 {
            break;
        }
    }
    Ok(sum)
}
