//! `daisy report`: the test report of seed 000, from measurements taken in this run.
//!
//! It covers what exists: the persistence functional test (kill torture and power-failure
//! simulation) and the persistence performance tests: small transactions (Daisy against msync,
//! fsync, PMDK and the store+flush floor) and seed 000's hash-map table (`bench hashmap`). It
//! writes `report.md`, `results.json`, `tx.csv` and `hashmap.csv`, prints verdicts against the
//! seed's requirement, and fails when the functional test lost anything.

use crate::kvbench;
use crate::{crashtest, hashbench, progress, txbench};
use anyhow::{anyhow, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Level {
    Quick,
    Default,
    Full,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub out: PathBuf,
    pub dir: PathBuf,
    pub level: Level,
    /// Command that starts a crash-test child (`daisy crashtest-child`).
    pub child_cmd: Vec<String>,
    /// The power-failure simulator binary (`daisy-powerfail`), when it was built.
    pub powerfail: Option<PathBuf>,
    /// The `daisy` binary (its `serve` command is the server of the Redis benchmark).
    pub daisy_exe: PathBuf,
    /// `daisy serve --busy-poll-us` for the Redis benchmark (the command line passes the
    /// server's default).
    pub daisy_busy_poll_us: u32,
    pub seed: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Environment {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub flush_instructions: Vec<String>,
    pub dir: PathBuf,
    pub fs: String,
    pub daisy_version: String,
    pub pmdk: String,
    /// `redis-server --version`, or why it is missing.
    pub redis: String,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    pub name: String,
    pub passed: bool,
    pub text: String,
}

/// A part of the report: what it measured, or why it could not run (the error's text, kept
/// for the report files).
pub type Outcome<T> = std::result::Result<T, String>;

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub level: Level,
    pub environment: Environment,
    pub functional: crashtest::Summary,
    /// Summary printed by the power-failure simulator (crash_points, images, failures, ...),
    /// or why it did not run.
    pub power_fail: Outcome<serde_json::Value>,
    /// The KV server's kill torture (`daisy crashtest --server`), or why it could not run.
    pub server_crash: Outcome<crate::kvcrash::Summary>,
    pub tx: Vec<txbench::Row>,
    /// Seed 000's hash-map insert benchmark (`daisy bench hashmap`).
    pub hashmap: Vec<hashbench::Row>,
    /// What the hash-map benchmark printed about how it measured.
    pub hashmap_notes: Vec<String>,
    /// Seed 000's own setting for the baseline: the file rivals (msync, fsync) on a disk file
    /// system, when the pools are on tmpfs and the output directory is on a disk.
    pub hashmap_disk: Vec<hashbench::Row>,
    /// The disk directory used and its file system.
    pub hashmap_disk_dir: Option<(PathBuf, String)>,
    /// Seed 000's Redis benchmark (`daisy bench kv`), or why it could not run.
    pub kv: Outcome<kvbench::Report>,
    /// More rounds of the pipeline-1 cases on daisy and redis-none alone, for the target
    /// verdict (at the default level only): see [`P1_TARGET_ROUNDS`].
    pub kv_p1: Option<Outcome<kvbench::Report>>,
    pub verdicts: Vec<Verdict>,
    pub seconds: f64,
}

impl Report {
    pub fn functional_passed(&self) -> bool {
        self.verdicts
            .iter()
            .filter(|v| v.name.starts_with("functional"))
            .all(|v| v.passed)
    }
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn environment(dir: &Path) -> Environment {
    let cpuinfo = read_trim("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mem_kib: f64 = read_trim("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let fs = std::fs::File::open(dir)
        .map(|f| daisy::internals::fs_type_name(&f).to_string())
        .unwrap_or_else(|_| "unknown".into());
    Environment {
        cpu,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_gib: mem_kib / 1024.0 / 1024.0,
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        flush_instructions: daisy::FlushInstr::available()
            .iter()
            .map(|f| f.name().to_string())
            .collect(),
        dir: dir.to_path_buf(),
        fs,
        daisy_version: env!("CARGO_PKG_VERSION").to_string(),
        pmdk: match crate::pmdk::Pmdk::load() {
            Ok(p) => p.version,
            Err(e) => format!("not available: {e}"),
        },
        redis: std::process::Command::new("redis-server")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| {
                "not available (Debian package redis-server; scripts/install-deps.sh installs it)"
                    .into()
            }),
    }
}

/// Run the report. `note` receives progress lines for the terminal.
pub fn run(cfg: &Config, mut note: impl FnMut(&str)) -> Result<Report> {
    let t0 = std::time::Instant::now();
    std::fs::create_dir_all(&cfg.out).map_err(|e| anyhow!("{}: {e}", cfg.out.display()))?;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| anyhow!("{}: {e}", cfg.dir.display()))?;
    let env = environment(&cfg.dir);
    note(&format!(
        "environment: {} ({} cores, {:.1} GiB), kernel {}, flush instructions [{}], pools in {} ({})",
        env.cpu,
        env.cores,
        env.memory_gib,
        env.kernel,
        env.flush_instructions.join(", "),
        env.dir.display(),
        env.fs
    ));

    // 1. Persistence functional test.
    let kills = match cfg.level {
        Level::Quick => 100,
        Level::Default => 500,
        Level::Full => 2000,
    };
    note(&format!(
        "functional test: kill torture, {kills} kills (seed {})",
        cfg.seed
    ));
    let ct = crashtest::Config {
        pool: cfg.dir.join(format!(
            "daisy-report-crashtest-{}.pool",
            std::process::id()
        )),
        kills,
        seed: cfg.seed,
        max_delay: std::time::Duration::from_millis(30),
        child_cmd: cfg.child_cmd.clone(),
        pool_size: 32 << 20,
    };
    let bar = progress::bar(kills, "kills");
    let functional = crashtest::run(&ct, |s| bar.set_position(s.kills));
    bar.finish_and_clear();
    let _ = std::fs::remove_file(&ct.pool);
    let functional = functional.map_err(|e| anyhow!("functional test could not run: {e}"))?;

    // 1b. Power-failure simulation.
    // Default: the simulator's own default (every canary is caught within it, about 20 s);
    // full: the million images of a release check (about 6 minutes).
    let budget = match cfg.level {
        Level::Quick => 6_000,
        Level::Default => 60_000,
        Level::Full => 1_000_000,
    };
    let power_fail = match &cfg.powerfail {
        None => Err(
            "daisy-powerfail was not built (cargo build --release -p daisy-powerfail)".to_string(),
        ),
        Some(bin) => {
            note(&format!(
                "functional test: power-failure simulation, {budget} crash images"
            ));
            std::process::Command::new(bin)
                .args([
                    "--budget",
                    &budget.to_string(),
                    "--seed",
                    &cfg.seed.to_string(),
                    "--format",
                    "json",
                    "--dir",
                ])
                .arg(&cfg.dir)
                .output()
                .map_err(|e| anyhow!("{}: {e}", bin.display()))
                .and_then(|o| {
                    let out = String::from_utf8_lossy(&o.stdout);
                    out.lines()
                        .rev()
                        .find(|l| l.starts_with('{'))
                        .ok_or_else(|| {
                            anyhow!(
                                "no summary from daisy-powerfail: {}",
                                String::from_utf8_lossy(&o.stderr)
                            )
                        })
                        .and_then(|l| {
                            serde_json::from_str::<serde_json::Value>(l)
                                .map_err(anyhow::Error::from)
                        })
                })
                .map_err(|e| format!("{e:#}"))
        }
    };

    // 1c. The KV server: killed while clients write.
    let server_kills = match cfg.level {
        Level::Quick => 10,
        Level::Default => 30,
        Level::Full => 100,
    };
    note(&format!(
        "functional test: daisy serve killed {server_kills} times under pipelining clients"
    ));
    let bar = progress::bar(server_kills, "kills");
    let server_crash = crate::kvcrash::run(
        &crate::kvcrash::Config {
            dir: cfg.dir.clone(),
            kills: server_kills,
            seed: cfg.seed,
            daisy_exe: cfg.daisy_exe.clone(),
            clients: 3,
        },
        |k| bar.set_position(k),
    )
    .map_err(|e| format!("{e:#}"));
    bar.finish_and_clear();

    // 2. Persistence performance test: small transactions.
    let (ops, runs) = match cfg.level {
        Level::Quick => (20_000, 3),
        Level::Default => (200_000, 5),
        Level::Full => (500_000, 7),
    };
    note(&format!(
        "performance test: small transactions, {ops} per run, {runs} runs"
    ));
    let tcfg = txbench::Config {
        dir: cfg.dir.clone(),
        ops,
        runs,
        cases: txbench::CASES.iter().map(|s| s.to_string()).collect(),
    };
    let bar = progress::bar(txbench::CASES.len() as u64, "cases");
    let mut done = 0;
    let tx = txbench::run(
        &tcfg,
        |_| {},
        |r| {
            if r.mechanism == "daisy" {
                done += 1;
                bar.set_position(done);
            }
        },
    )?;
    bar.finish_and_clear();

    // 3. Seed 000's hash-map benchmark: insert N random pairs.
    let (ns, runs): (Vec<usize>, usize) = match cfg.level {
        Level::Quick => (vec![1_000, 100_000], 1),
        Level::Default => (vec![1_000, 10_000, 100_000, 1_000_000], 3),
        Level::Full => (vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000], 3),
    };
    note(&format!(
        "performance test: hash map (seed 000), N = {ns:?}, {runs} run(s) per figure"
    ));
    let hcfg = hashbench::Config {
        dir: cfg.dir.clone(),
        ns,
        mechanisms: hashbench::mechanism_names()
            .into_iter()
            .map(String::from)
            .collect(),
        op: hashbench::Op::Insert,
        runs,
        seed: cfg.seed,
        max_secs: 20.0,
    };
    let bar = progress::bar(1, "stages");
    let mut hashmap_notes = vec![];
    let hashmap = hashbench::run(
        &hcfg,
        |n| hashmap_notes.push(n.to_string()),
        |done, total, _| {
            bar.set_length(total);
            bar.set_position(done);
        },
        |_| {},
    )?;
    bar.finish_and_clear();

    // 3b. The seed's baseline is file persistence on a file system with a device behind it;
    // on tmpfs msync persists nothing. When the pools are on tmpfs and the output directory is
    // on a disk, the file rivals run there too (largest N, timed on a prefix if slow).
    let mut hashmap_disk = vec![];
    let mut hashmap_disk_dir = None;
    let out_fs = std::fs::File::open(&cfg.out)
        .map(|f| daisy::internals::fs_type_name(&f).to_string())
        .unwrap_or_default();
    if env.fs == "tmpfs" && !out_fs.is_empty() && out_fs != "tmpfs" {
        let ddir = cfg.out.join("disk-baseline");
        let n = *hcfg.ns.iter().max().unwrap_or(&100_000);
        note(&format!(
            "performance test: msync and fsync on a disk file ({out_fs}, {}), N = {n}",
            ddir.display()
        ));
        let dcfg = hashbench::Config {
            dir: ddir.clone(),
            ns: vec![n],
            mechanisms: ["msync-op", "msync-end", "fsync-op", "fsync-end"]
                .iter()
                .map(|m| m.to_string())
                .collect(),
            op: hashbench::Op::Insert,
            runs: 1,
            seed: cfg.seed,
            max_secs: 5.0,
        };
        let r = hashbench::run(&dcfg, |_| {}, |_, _, _| {}, |_| {});
        let _ = std::fs::remove_dir_all(&ddir);
        match r {
            Ok(rows) => {
                hashmap_disk = rows;
                hashmap_disk_dir = Some((ddir, out_fs));
            }
            Err(e) => note(&format!("disk baseline not measured: {e}")),
        }
    }

    // 4. Seed 000's Redis benchmark: daisy serve against redis-server without persistence,
    // with RDB snapshots and with an AOF (every second, and fsynced before every reply).
    let (ns, runs, restart_keys) = match cfg.level {
        Level::Quick => (vec![10_000], 1, 100_000),
        // Five rounds over all servers (kvbench::run interleaves them), so one slow spell of
        // a shared machine cannot decide a verdict alone: at pipeline 1 redis-benchmark's own
        // CPU sets the pace for every server, and on a 2-core VM single rounds swing by
        // 10-30%, as much as the differences measured; the median of five moves less than
        // that of three (about 40 s more).
        Level::Default => (vec![100_000], 5, 1_000_000),
        Level::Full => (vec![100_000, 1_000_000], 5, 1_000_000),
    };
    note(&format!(
        "performance test: Redis benchmark (seed 000): redis-benchmark against daisy serve and \
         redis-server (none, rdb, aof), N = {ns:?}, restart with {restart_keys} keys"
    ));
    let kcfg = kvbench::Config {
        dir: cfg.dir.clone(),
        ns,
        tests: vec!["set".into(), "get".into()],
        keys: vec!["mixed".into()],
        pipelines: kvbench::DEFAULT_PIPELINES.to_vec(),
        sizes: kvbench::DEFAULT_SIZES.to_vec(),
        clients: 50,
        runs,
        restart_keys,
        servers: kvbench::SERVERS.iter().map(|s| s.to_string()).collect(),
        max_secs: kvbench::DEFAULT_MAX_SECS,
        daisy_exe: cfg.daisy_exe.clone(),
        daisy_busy_poll_us: cfg.daisy_busy_poll_us,
        pin: true,
    };
    let kv = run_kv(&kcfg);

    // 4b. The target against redis-none at pipeline 1: more paired rounds (see
    // P1_TARGET_ROUNDS).
    // Only at the default level: --quick stays short, and --full's verdicts are taken at
    // N = 1,000,000, runs several seconds long that average the spells out themselves.
    let kv_p1 = (cfg.level == Level::Default).then(|| {
        note(&format!(
            "performance test: Redis benchmark target at pipeline 1: {P1_TARGET_ROUNDS} more \
             rounds of daisy serve and redis-none back to back"
        ));
        let pcfg = kvbench::Config {
            // The main run's N, never sampled: both servers of a pair run the same requests.
            max_secs: 60.0,
            pipelines: vec![1],
            runs: P1_TARGET_ROUNDS,
            restart_keys: 0,
            servers: vec!["daisy".into(), "redis-none".into()],
            ..kcfg.clone()
        };
        run_kv(&pcfg)
    });

    let mut verdicts = verdicts(&functional, &tx, &env);
    verdicts.extend(hashmap_verdicts(&hashmap, &env));
    verdicts.extend(kv_verdicts(&kv, kv_p1.as_ref()));
    verdicts.extend(disk_verdicts(&hashmap, &hashmap_disk, &hashmap_disk_dir));
    verdicts.insert(
        1,
        match &power_fail {
            Ok(v) => {
                let failures = v["failures"].as_u64().unwrap_or(1);
                let unchecked = v["fences_without_point"].as_u64().unwrap_or(1);
                let passed = failures == 0 && unchecked == 0;
                Verdict {
                    name: "functional: data survives power failures".into(),
                    passed,
                    text: format!(
                        "Power-failure simulation: {} crash images at {} crash points (every fence of every thread, {} without one) recovered and verified, {} failures: {}",
                        v["images"], v["crash_points"], unchecked, failures,
                        if passed { "PASS" } else { "FAIL" }
                    ),
                }
            }
            // Not a failure of the product: the simulator binary was not built.
            Err(e) => Verdict {
                name: "not run: power-failure simulation".into(),
                passed: false,
                text: format!("Power-failure simulation: {e}: NOT RUN"),
            },
        },
    );
    verdicts.insert(
        2,
        match &server_crash {
            Ok(s) => {
                let ok = s.lost == 0 && s.failures == 0 && s.kills == server_kills;
                Verdict {
                    name: "functional: the KV server loses no acknowledged write".into(),
                    passed: ok,
                    text: format!(
                        "KV server kill torture: daisy serve killed {} times under 3 pipelining \
                         clients, {} acknowledged commands verified after the restarts, {} lost: {}",
                        s.kills,
                        s.acknowledged_verified,
                        s.lost,
                        if ok { "PASS" } else { "FAIL" }
                    ),
                }
            }
            Err(e) => Verdict {
                name: "functional: the KV server loses no acknowledged write".into(),
                passed: false,
                text: format!("KV server kill torture could not run: {e}: FAIL"),
            },
        },
    );
    Ok(Report {
        level: cfg.level,
        environment: env,
        functional,
        power_fail,
        server_crash,
        tx,
        hashmap,
        hashmap_notes,
        hashmap_disk,
        hashmap_disk_dir,
        kv,
        kv_p1,
        verdicts,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Daisy on (emulated) NVM against file persistence that really persists: on a disk. (Seed 000
/// itself ran its file rivals on a tmpfs RAMDISK carved from the same battery-backed NVDIMM, so
/// that only the mechanism differed: the tmpfs rows reproduce that. Here tmpfs is plain DRAM and
/// persists nothing, hence these rows as well.)
fn disk_verdicts(
    pm: &[hashbench::Row],
    disk: &[hashbench::Row],
    dir: &Option<(PathBuf, String)>,
) -> Vec<Verdict> {
    let mut v = vec![];
    let Some((_, fs)) = dir else {
        return v;
    };
    for (ours, theirs, what) in [
        (
            "daisy-batch",
            "msync-end",
            "insert all, then one durability point",
        ),
        ("daisy", "msync-op", "every insert durable"),
    ] {
        let Some(m) = disk.iter().find(|r| r.mechanism == theirs) else {
            continue;
        };
        let Some(d) = pm.iter().find(|r| r.mechanism == ours && r.n == m.n) else {
            continue;
        };
        let ratio = m.total_ms / d.total_ms;
        v.push(Verdict {
            name: format!("performance: {ours} vs {theirs} on disk"),
            passed: ratio >= 1.05,
            text: format!(
                "File persistence on a disk, hash map N = {} ({what}): Daisy on NVM (tmpfs) {:.1} ms, \
                 {theirs} on a disk file ({fs}) {}{:.1} ms: {ratio:.1}x (requirement: at least \
                 1.05x): {}",
                m.n,
                d.total_ms,
                if m.extrapolated { "~" } else { "" },
                m.total_ms,
                if ratio >= 1.05 { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

/// Seed 000's comparison at the largest N: "insert all pairs and persist" (daisy-batch against
/// msync-end, the seed's comparison), per-insert durability (daisy against msync-op), and PMDK.
fn hashmap_verdicts(rows: &[hashbench::Row], env: &Environment) -> Vec<Verdict> {
    let mut v = vec![];
    let Some(n) = rows.iter().map(|r| r.n).max() else {
        return v;
    };
    let at = |m: &str| rows.iter().find(|r| r.n == n && r.mechanism == m);
    let tmpfs_note = if env.fs == "tmpfs" {
        " (on tmpfs msync writes nothing to any device: the rival persists nothing here, so \
         this comparison is the rival's best case (seed 000's tmpfs sat on a battery-backed \
         NVDIMM); the rows on a disk, when the report found one, show file persistence that \
         persists)"
    } else {
        ""
    };
    for (name, ours, theirs, what) in [
        (
            "performance: hash map, insert all and persist, vs msync",
            "daisy-batch",
            "msync-end",
            "insert all N pairs, then one durability point",
        ),
        (
            "performance: hash map, every insert durable, vs msync",
            "daisy",
            "msync-op",
            "every insert durable when it returns",
        ),
    ] {
        if let (Some(d), Some(m)) = (at(ours), at(theirs)) {
            let ratio = m.total_ms / d.total_ms;
            v.push(Verdict {
                name: name.into(),
                passed: ratio >= 1.05,
                text: format!(
                    "Hash map, N = {n} ({what}): Daisy {:.1} ms, {theirs} {:.1} ms: {}x \
                     (requirement: at least 1.05x){tmpfs_note}: {}",
                    d.total_ms,
                    m.total_ms,
                    verdict_ratio(ratio),
                    if ratio >= 1.05 { "PASS" } else { "FAIL" }
                ),
            });
        }
    }
    if let (Some(d), Some(p)) = (at("daisy"), at("pmdk-tx")) {
        let ratio = p.total_ms / d.total_ms;
        v.push(Verdict {
            name: "comparison: hash map vs PMDK".into(),
            passed: ratio >= 1.0,
            text: format!(
                "Hash map, N = {n}, one transaction per insert: Daisy {:.0} ns, PMDK libpmemobj \
                 {:.0} ns per insert: {ratio:.1}x faster",
                d.ns_per_op, p.ns_per_op
            ),
        });
    }
    v
}

/// `daisy bench kv` with a progress bar over its stages.
fn run_kv(kcfg: &kvbench::Config) -> Outcome<kvbench::Report> {
    let bar = progress::bar(1, "stages");
    let r = kvbench::run(
        kcfg,
        |_| {},
        |done, total, _| {
            bar.set_length(total);
            bar.set_position(done);
        },
    );
    bar.finish_and_clear();
    r.map_err(|e| format!("{e:#}"))
}

/// Extra rounds of the pipeline-1 cases for the target against redis-none (default level).
/// At pipeline 1 redis-benchmark's own CPU sets the pace for every server (its system calls
/// per request are the same whichever server answers), so the servers differ by a few
/// percent while single runs on a shared 2-core VM swing by 10-30% in spells lasting
/// seconds. Measured there (eighth session, 67 paired rounds of GET and as many of SET over
/// eight runs): Daisy the faster in about 3 rounds of 4, by 5-10% in the median, but 9 of 15
/// in one report. The verdict takes the median of the paired rounds' ratios. If each round
/// independently favoured Daisy with p = 0.75 (a binomial model, not a measurement), a report
/// would read one of the two pipeline-1 figures below 1.00 in about 1 in 5 with the main
/// run's 5 rounds and about 1 in 30 with 15; at p = 0.6 still in about 1 in 3 with 15. This
/// stage takes 1-2 minutes.
pub const P1_TARGET_ROUNDS: usize = 10;

/// Each round's requests/s of one server over another's: in a round the servers run a case
/// back to back, so a round's ratio compares runs made seconds apart, in the same spell of
/// the machine. Runs are kept in round order, so when a server failed part-way the rounds
/// both finished are the first ones: those are paired.
fn per_round_ratios(d: &[f64], r: &[f64]) -> Vec<f64> {
    d.iter().zip(r).map(|(a, b)| a / b).collect()
}

/// How much faster `d` is than `r`: the median of the rounds' ratios, with `more` ratios from
/// other paired rounds; the ratio of the medians when no rounds pair (no runs kept).
fn paired_ratio(d: &kvbench::Row, r: &kvbench::Row, more: &[f64]) -> f64 {
    let mut ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
    ratios.extend_from_slice(more);
    if ratios.is_empty() {
        d.rps / r.rps
    } else {
        crate::stats::median(&ratios)
    }
}

/// Numbers joined by spaces, with `prec` decimals.
fn join_fixed(v: &[f64], prec: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.prec$}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Seed 000's Redis test: Daisy's server (every write durable) against Redis with RDB and
/// with AOF, the target against Redis with no persistence, and the restart time.
fn kv_verdicts(
    kv: &Outcome<kvbench::Report>,
    kv_p1: Option<&Outcome<kvbench::Report>>,
) -> Vec<Verdict> {
    let rep = match kv {
        Ok(r) => r,
        Err(e) => {
            return vec![Verdict {
                name: "not run: Redis benchmark".into(),
                passed: false,
                text: format!("Redis benchmark: {e}: NOT RUN"),
            }]
        }
    };
    let mut v = vec![];
    for u in &rep.unavailable {
        v.push(Verdict {
            name: format!("not run: Redis benchmark, {}", u.server),
            passed: u.status != "failed",
            text: format!("Redis benchmark: {} {}: {}", u.server, u.status, u.reason),
        });
    }
    // The extra pipeline-1 rounds: a server that failed there, or the stage not run.
    match kv_p1 {
        Some(Ok(p)) => {
            for u in &p.unavailable {
                v.push(Verdict {
                    name: format!("not run: Redis benchmark pipeline-1 rounds, {}", u.server),
                    passed: u.status != "failed",
                    text: format!(
                        "Redis benchmark, pipeline-1 target rounds: {} {}: {}",
                        u.server, u.status, u.reason
                    ),
                });
            }
        }
        Some(Err(e)) => v.push(Verdict {
            name: "not run: Redis benchmark pipeline-1 rounds".into(),
            passed: false,
            text: format!("Redis benchmark, pipeline-1 target rounds: {e}: NOT RUN"),
        }),
        None => {}
    }
    let Some(n) = rep.rows.iter().map(|r| r.requests).max() else {
        return v;
    };
    let at = |server: &str, test: &str, p: usize| {
        rep.rows.iter().find(|r| {
            r.requests == n
                && r.server == server
                && r.test.eq_ignore_ascii_case(test)
                && r.pipeline == p
        })
    };
    for rival in ["redis-rdb", "redis-aof-always"] {
        let mut parts = vec![];
        let mut all = true;
        for test in ["SET", "GET"] {
            for p in kvbench::DEFAULT_PIPELINES {
                if let (Some(d), Some(r)) = (at("daisy", test, p), at(rival, test, p)) {
                    // As for the target below: the median of the rounds' ratios.
                    let ratio = paired_ratio(d, r, &[]);
                    all &= ratio >= 1.05;
                    parts.push(format!(
                        "{test} P{p}: {:.0} vs {:.0} req/s = {}x",
                        d.rps,
                        r.rps,
                        verdict_ratio(ratio)
                    ));
                }
            }
        }
        if parts.is_empty() {
            continue;
        }
        v.push(Verdict {
            name: format!("performance: Redis benchmark vs {rival}"),
            passed: all,
            text: format!(
                "Redis benchmark, N = {n}, 50 clients, 8-byte values: daisy serve (every write \
                 durable before its reply) against {rival}: {} (medians of the runs; each \
                 ratio is the median of the rounds' ratios; requirement: at least 1.05x in \
                 each): {}",
                parts.join("; "),
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    // The issue's own target: as fast as Redis with no persistence at all, judged on the
    // paired rounds (see P1_TARGET_ROUNDS).
    let extra = |test: &str| -> Option<(&kvbench::Row, &kvbench::Row)> {
        let rows = &kv_p1?.as_ref().ok()?.rows;
        let find = |server: &str| {
            rows.iter().find(|r| {
                r.requests == n
                    && r.server == server
                    && r.test.eq_ignore_ascii_case(test)
                    && r.pipeline == 1
            })
        };
        Some((find("daisy")?, find("redis-none")?))
    };
    let mut parts = vec![];
    let mut all = true;
    for test in ["SET", "GET"] {
        for p in kvbench::DEFAULT_PIPELINES {
            if let (Some(d), Some(r)) = (at("daisy", test, p), at("redis-none", test, p)) {
                let mut ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
                let mut more = vec![];
                if p == 1 {
                    if let Some((d1, r1)) = extra(test) {
                        more = per_round_ratios(&d1.rps_runs, &r1.rps_runs);
                    }
                }
                let ratio = paired_ratio(d, r, &more);
                ratios.extend(more);
                all &= ratio >= 1.0;
                let rounds = if ratios.len() > 1 {
                    format!(
                        " (faster in {} of {} rounds: {})",
                        ratios.iter().filter(|&&x| x >= 1.0).count(),
                        ratios.len(),
                        join_fixed(&ratios, 2)
                    )
                } else {
                    String::new()
                };
                parts.push(format!("{test} P{p} {}x{rounds}", verdict_ratio(ratio)));
            }
        }
    }
    if !parts.is_empty() {
        v.push(Verdict {
            name: "target: Redis benchmark vs Redis without persistence".into(),
            passed: all,
            text: format!(
                "Redis benchmark against redis-none (nothing persisted), N = {n}: {} (target: \
                 at least 1.00x in each; each figure is the median of the rounds' ratios: in a \
                 round the two servers run the case back to back, seconds apart{}): {}",
                parts.join("; "),
                if kv_p1.is_some() {
                    format!(
                        "; at pipeline 1, where redis-benchmark's own CPU sets the pace for every \
                         server and single runs on a shared 2-core machine swing by 10-30%, the \
                         report ran {P1_TARGET_ROUNDS} more rounds of the two servers alone"
                    )
                } else {
                    String::new()
                },
                if all { "PASS" } else { "FAIL" }
            ),
        });
    }
    let restart = |s: &str| {
        rep.restarts
            .iter()
            .find(|r| r.server == s && r.after == "shutdown")
    };
    if let Some(k) = rep
        .restarts
        .iter()
        .find(|r| r.server == "daisy" && r.after == "sigkill")
    {
        let rec = k.recovery_ms.unwrap_or(f64::INFINITY);
        let ok = k.dbsize_ok && k.restart_ms <= 12.0 && rec < 5.0;
        v.push(Verdict {
            name: "performance: Redis restart after a crash".into(),
            passed: ok,
            text: format!(
                "Restart with {} keys after SIGKILL under a pipelined SET load, until the first \
                 PONG: daisy serve {:.1} ms (its own open {:.2} ms, {} transactions replayed; {}) \
                 (target: within 12 ms, the open under 5 ms): {}",
                k.keys,
                k.restart_ms,
                rec,
                k.replayed.unwrap_or(0),
                if k.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
                if ok { "PASS" } else { "FAIL" }
            ),
        });
    }
    if let Some(d) = restart("daisy") {
        let others: Vec<String> = ["redis-rdb", "redis-aof-always"]
            .iter()
            .filter_map(|s| restart(s).map(|r| format!("{s} {:.0} ms", r.restart_ms)))
            .collect();
        let ok = d.dbsize_ok && d.restart_ms <= 12.0 * (d.keys as f64 / 1e6).max(1.0);
        v.push(Verdict {
            name: "performance: Redis restart time".into(),
            passed: ok,
            text: format!(
                "Restart with {} keys until the first PONG: daisy serve {:.1} ms ({}), {} \
                 (target: within 12 ms at 1,000,000 keys): {}",
                d.keys,
                d.restart_ms,
                if d.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
                others.join(", "),
                if ok { "PASS" } else { "FAIL" }
            ),
        });
    }
    v
}

fn find<'a>(rows: &'a [txbench::Row], case: &str, mech: &str) -> Option<&'a txbench::Row> {
    rows.iter().find(|r| r.case == case && r.mechanism == mech)
}

/// A ratio in a verdict, cut (not rounded) to two decimals: 1.048 against a requirement of
/// 1.05 reads 1.04, never a passing-looking 1.05 next to FAIL.
fn verdict_ratio(r: f64) -> String {
    format!("{:.2}", (r * 100.0).floor() / 100.0)
}

fn verdicts(f: &crashtest::Summary, tx: &[txbench::Row], env: &Environment) -> Vec<Verdict> {
    let mut v = vec![];
    let ok = f.lost == 0 && f.failures == 0;
    v.push(Verdict {
        name: "functional: data survives crashes".into(),
        passed: ok,
        text: format!(
            "Persistence functional test: {} kills, {} committed transactions verified after recovery, {} lost, {} inconsistencies: {}",
            f.kills,
            f.transactions_verified,
            f.lost,
            f.failures,
            if ok { "PASS" } else { "FAIL" }
        ),
    });
    if let (Some(d), Some(m)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "msync")) {
        let ratio = m.ns_per_op / d.ns_per_op;
        let tmpfs_note = if env.fs == "tmpfs" {
            " (on tmpfs msync writes nothing to any device, so this baseline is optimistic for msync)"
        } else {
            ""
        };
        v.push(Verdict {
            name: "performance: faster than msync".into(),
            passed: ratio >= 1.05,
            text: format!(
                "Persistence performance: Daisy per-transaction durability {:.1}x faster than msync ({:.0} ns vs {:.0} ns per 8-byte update; requirement: at least 1.05x){tmpfs_note}: {}",
                ratio,
                d.ns_per_op,
                m.ns_per_op,
                if ratio >= 1.05 { "PASS" } else { "FAIL" }
            ),
        });
    }
    if let (Some(d), Some(fs)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "fsync")) {
        let ratio = fs.ns_per_op / d.ns_per_op;
        v.push(Verdict {
            name: "performance: faster than fsync".into(),
            passed: ratio >= 1.05,
            text: format!(
                "Persistence performance: Daisy {:.1}x faster than write+fdatasync ({:.0} ns vs {:.0} ns): {}",
                ratio,
                d.ns_per_op,
                fs.ns_per_op,
                if ratio >= 1.05 { "PASS" } else { "FAIL" }
            ),
        });
    }
    for case in txbench::CASES {
        if let Some(d) = find(tx, case, "daisy") {
            if let Some(s) = d.speedup_vs_pmdk {
                v.push(Verdict {
                    name: format!("comparison: {case} vs PMDK"),
                    passed: s >= 1.0,
                    text: format!(
                        "Transactions ({case}): Daisy {:.0} ns, PMDK libpmemobj {:.0} ns: {:.1}x faster",
                        d.ns_per_op,
                        d.ns_per_op * s,
                        s
                    ),
                });
            }
        }
    }
    v
}

/// The Markdown report.
pub fn markdown(r: &Report) -> String {
    let e = &r.environment;
    let mut s = String::new();
    let _ = writeln!(s, "# Daisy test report\n");
    let _ = writeln!(
        s,
        "Generated by `daisy report` ({:?} level) in {:.0} s. Every figure below was measured in this run.\n",
        r.level, r.seconds
    );
    let _ = writeln!(s, "## Environment\n");
    let _ = writeln!(s, "| item | value |\n|---|---|");
    let _ = writeln!(s, "| CPU | {} ({} cores) |", e.cpu, e.cores);
    let _ = writeln!(s, "| memory | {:.1} GiB |", e.memory_gib);
    let _ = writeln!(s, "| kernel | {} |", e.kernel);
    let _ = writeln!(
        s,
        "| flush instructions | {} |",
        e.flush_instructions.join(", ")
    );
    let _ = writeln!(
        s,
        "| pool directory | {} ({}{}) |",
        e.dir.display(),
        e.fs,
        if e.fs == "tmpfs" {
            ": DRAM emulating NVM, as in seed 000"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "| Daisy | {} |", e.daisy_version);
    let _ = writeln!(s, "| PMDK | {} |", e.pmdk);
    let _ = writeln!(s, "| Redis | {} |\n", e.redis);
    let _ = writeln!(s, "## Verdicts\n");
    for v in &r.verdicts {
        let _ = writeln!(s, "- {}", v.text);
    }
    let f = &r.functional;
    let _ = writeln!(s, "\n## 1. Persistence functional test\n");
    let _ = writeln!(
        s,
        "A child process runs transactions (updates of 1-64 words in different cache lines, list \
         pushes and pops with allocation and free, replacement of a blob of 1 byte to 700 KB, large \
         multi-part transactions) and reports each committed transaction; the parent kills it with \
         SIGKILL at a random moment, reopens the pool (recovery), and compares the whole pool with a \
         model: every reported transaction present, nothing partial, no leaked or dangling object, \
         `pool check` clean.\n"
    );
    let _ = writeln!(s, "| kills | transactions verified | lost | inconsistencies | recoveries that re-applied transactions | slowest open | mode | seed |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} | {} us | {} on {} | {} |\n",
        f.kills,
        f.transactions_verified,
        f.lost,
        f.failures,
        f.recoveries_replayed,
        f.max_open_micros,
        f.mode,
        f.fs,
        f.seed
    );
    for m in &f.messages {
        let _ = writeln!(s, "- FAILURE: {m}");
    }
    let _ = writeln!(s, "\n### Power-failure simulation\n");
    match &r.power_fail {
        Ok(v) => {
            let _ = writeln!(
                s,
                "At every fence of every thread of a workload, crash images are built from the \
                 surely-persisted image plus, for each cache line that may hold something else, \
                 any value it held since its last sure write-back (flushed, stored, overwritten \
                 before any flush), several lines torn at 8-byte granularity, the file cut to its \
                 durable length; each is recovered with the real recovery code and compared with \
                 the model. Workloads: one thread; three threads taking turns; four threads \
                 committing at once on own and shared data; hash maps; the server's commands; \
                 msync mode. All but the concurrent one recover a kept crash image under the \
                 simulator (crash points inside recovery) and run on. Injected bugs the simulator \
                 must catch run in the test suite (`crates/daisy-powerfail/tests/must_fail.rs`).\n"
            );
            let _ = writeln!(
                s,
                "| workload | transactions | crash points | fences without one | images | failures |\n|---|---|---|---|---|---|"
            );
            for w in v["workloads"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} |",
                    w["workload"].as_str().unwrap_or("?"),
                    w["transactions"],
                    w["crash_points"],
                    w["fences_without_point"],
                    w["images"],
                    w["failures"]
                );
            }
            let _ = writeln!(
                s,
                "| **all** | | {} | {} | {} | {} |\n\n{:.1} s, seed {}, {}.",
                v["crash_points"],
                v["fences_without_point"],
                v["images"],
                v["failures"],
                v["seconds"].as_f64().unwrap_or(0.0),
                v["seed"],
                v["mode"].as_str().unwrap_or("")
            );
        }
        Err(e) => {
            let _ = writeln!(s, "Not run: {e}.");
        }
    }
    let _ = writeln!(s, "\n### KV server kill torture\n");
    match &r.server_crash {
        Ok(k) => {
            let _ = writeln!(
                s,
                "`daisy serve` is killed with SIGKILL at random moments while three clients \
                 pipeline writes (SET, SET PX, DEL, INCR, APPEND, MSET, EXPIRE, PERSIST) and check \
                 every reply; after each restart every client's keys must be its acknowledged \
                 writes plus a prefix of the commands it had in flight, and `pool check` must \
                 pass in between.\n"
            );
            let _ = writeln!(
                s,
                "| server kills | acknowledged commands verified | in flight, found applied | lost | failures | seconds | seed |\n|---|---|---|---|---|---|---|"
            );
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.1} | {} |",
                k.kills,
                k.acknowledged_verified,
                k.in_flight_applied,
                k.lost,
                k.failures,
                k.seconds,
                k.seed
            );
            for m in &k.messages {
                let _ = writeln!(s, "\n- FAILURE: {m}");
            }
        }
        Err(e) => {
            let _ = writeln!(s, "Not run: {e}.");
        }
    }
    let _ = writeln!(
        s,
        "\n## 2. Persistence performance test: small transactions\n"
    );
    let _ = writeln!(
        s,
        "Each row is the median of several timed runs (spread: fastest..slowest run). \
         `store-flush` is a bare 8-byte store + cache-line flush + fence with no transaction: the \
         physical floor. `msync` and `fsync` make the same 8-byte update durable the traditional \
         way (seed 000's baseline). PMDK runs in forced pmem mode on the same file system.\n"
    );
    let _ = writeln!(s, "| case | mechanism | ns/op | ops/s | spread (ns) | flushes/op | fences/op | mode | Daisy faster by |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for row in &r.tx {
        let faster = match (row.mechanism, row.speedup_vs_daisy, row.speedup_vs_pmdk) {
            (_, Some(x), _) => format!("{x:.1}x"),
            ("pmdk", _, _) => find(&r.tx, &row.case, "daisy")
                .and_then(|d| d.speedup_vs_pmdk)
                .map(|x| format!("{x:.1}x"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        let f = row_fields(row);
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0}..{:.0} | {} | {} | {} | {} |",
            f.case,
            f.mechanism,
            row.ns_per_op,
            row.ops_per_s,
            row.spread_min_ns,
            row.spread_max_ns,
            f.flushes,
            f.fences,
            f.mode,
            faster
        );
    }
    let _ = writeln!(
        s,
        "\n## 3. Persistence performance test: hash map (seed 000's table)\n"
    );
    for n in &r.hashmap_notes {
        let _ = writeln!(s, "- {n}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| N | mechanism | total ms | ns/insert | spread ns | x msync-op | x msync-end | p99 ns | max ns | flushes+fences (or syncs) per insert | bytes per entry |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &r.hashmap {
        let x = |v: Option<f64>| v.map(|v| format!("{v:.2}x")).unwrap_or_default();
        let per = match (row.flushes_per_op, row.fences_per_op, row.syncs_per_op) {
            (Some(f), Some(g), _) => format!("{f:.2}+{g:.2}"),
            (_, _, Some(y)) => format!("{y:.2} sync"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {}{:.2} | {:.0} | {:.0}..{:.0} | {} | {} | {:.0} | {:.0} | {} | {} |",
            row.n,
            row.mechanism,
            if row.extrapolated { "~" } else { "" },
            row.total_ms,
            row.ns_per_op,
            row.spread_min_ns,
            row.spread_max_ns,
            x(row.speedup_vs_msync_op),
            x(row.speedup_vs_msync_end),
            row.p99_ns,
            row.max_ns,
            per,
            row.bytes_per_entry
                .map(|b| format!("{b:.1}{}", if row.bytes_estimated { " (est)" } else { "" }))
                .unwrap_or_else(|| "-".into()),
        );
    }
    let _ = writeln!(
        s,
        "\n`~`: timed on a prefix and projected to N (too slow for the time limit). The charts \
         are in report.html."
    );
    if let Some((dir, fs)) = &r.hashmap_disk_dir {
        let _ = writeln!(
            s,
            "\n### File persistence on a disk\n\nSeed 000 ran its file rivals on a RAMDISK \
             (tmpfs) carved from the same battery-backed NVDIMM as its NVM, so that only the \
             persistence mechanism differed; the tables above reproduce that. On this machine \
             tmpfs is plain DRAM, where msync and fsync persist nothing (no device), so the file \
             rivals also ran on a disk file system ({fs}, {}), where they persist for real:\n",
            dir.display()
        );
        let _ = writeln!(
            s,
            "| N (disk) | mechanism | total ms | ns/insert | syncs per insert |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|");
        for row in &r.hashmap_disk {
            let _ = writeln!(
                s,
                "| {} | {} | {}{:.1} | {:.0} | {} |",
                row.n,
                row.mechanism,
                if row.extrapolated { "~" } else { "" },
                row.total_ms,
                row.ns_per_op,
                row.syncs_per_op
                    .map(|v| format!("{v:.6}"))
                    .unwrap_or_else(|| "-".into())
            );
        }
    }
    let poll = match &r.kv {
        Ok(k) => format!("for up to {} us", k.daisy_busy_poll_us),
        Err(_) => "briefly".to_string(),
    };
    let _ = writeln!(
        s,
        "\n## 4. Persistence performance test: Redis (seed 000's table)\n\nThe real \
         redis-benchmark against `daisy serve` (every write durable in the pool before its \
         reply; under load it polls for the next requests {poll} before it sleeps) \
         and against redis-server with no persistence, RDB snapshots, and an AOF \
         (fsync every second, and before every reply), each started by the benchmark on the \
         same file system; then memory per key and the restart time with many keys. The \
         runs go in rounds, and in each round every case runs on all servers back to back \
         (runs seconds apart share the machine's fast and slow spells); on a machine with two \
         CPUs or more \
         the servers run pinned to one CPU and redis-benchmark to the others, the same for \
         every server.\n"
    );
    match &r.kv {
        Ok(k) => kv_markdown(&mut s, k),
        Err(e) => {
            let _ = writeln!(s, "Not run: {e}");
        }
    }
    match &r.kv_p1 {
        Some(Ok(k)) => {
            let _ = writeln!(
                s,
                "\nPipeline 1, {P1_TARGET_ROUNDS} more rounds of daisy and redis-none alone (for \
                 the target verdict, which pairs them with the rounds above):\n\n\
                 | test | server | requests/s (median) | each round |\n|---|---|---|---|"
            );
            for row in &k.rows {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {} |",
                    row.test.to_ascii_uppercase(),
                    row.server,
                    row.rps,
                    join_fixed(&row.rps_runs, 0)
                );
            }
            for u in &k.unavailable {
                let _ = writeln!(s, "\n- {} {}: {}", u.server, u.status, u.reason);
            }
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "\nPipeline-1 target rounds not run: {e}");
        }
        None => {}
    }
    s
}

/// The Redis section's tables: requests per case and server, then memory and restart.
fn kv_markdown(s: &mut String, k: &kvbench::Report) {
    for u in &k.unavailable {
        let _ = writeln!(s, "- {} {}: {}", u.server, u.status, u.reason);
    }
    if let Some(note) = k.steal_percent.and_then(kvbench::steal_note) {
        let _ = writeln!(s, "- {note}");
    }
    let _ = writeln!(
        s,
        "\n| test | pipeline | value B | N | server | requests/s | elapsed ms | p50 ms | p99 ms | max ms | x redis-none | x redis-aof-always |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    let x = |v: Option<f64>| v.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into());
    // Case by case (the servers side by side), in the order the tests were given.
    let mut tests: Vec<&str> = vec![];
    for r in &k.rows {
        if !tests.contains(&r.test.as_str()) {
            tests.push(&r.test);
        }
    }
    let mut rows: Vec<&kvbench::Row> = k.rows.iter().collect();
    rows.sort_by_key(|r| {
        let t = tests.iter().position(|t| *t == r.test);
        (t, r.pipeline, r.value_size, r.requests)
    });
    for row in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {}{:.0} | {:.1} | {:.3} | {:.3} | {:.3} | {} | {} |",
            row.test.to_ascii_uppercase(),
            row.pipeline,
            row.value_size,
            row.requests,
            row.server,
            if row.sampled { "~" } else { "" },
            row.rps,
            row.elapsed_ms,
            row.p50_ms,
            row.p99_ms,
            row.max_ms,
            x(row.vs_redis_none),
            x(row.vs_redis_aof_always),
        );
    }
    if k.memory.is_empty() && k.restarts.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n{} keys with 8-byte values, loaded pipelined into a fresh server; memory = (used_memory \
         loaded - empty) / keys (Daisy: pool bytes in use); restart = spawn to the first PONG on \
         the same files:\n",
        k.restart_keys
    );
    let _ = writeln!(
        s,
        "| server | keys | load ms | bytes per key | restart ms | DBSIZE after restart | files |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for m in &k.memory {
        let r = k
            .restarts
            .iter()
            .find(|r| r.server == m.server && r.after == "shutdown");
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.1} | {} | {} | {} |",
            m.server,
            m.keys,
            m.load_ms,
            m.bytes_per_key,
            r.map(|r| format!("{:.1}", r.restart_ms))
                .unwrap_or_else(|| "-".into()),
            r.map(|r| format!("{}{}", r.dbsize, if r.dbsize_ok { " ok" } else { " WRONG" }))
                .unwrap_or_else(|| "-".into()),
            r.map(|r| format!("{:.1} MiB", r.data_bytes as f64 / (1u64 << 20) as f64))
                .unwrap_or_else(|| "-".into()),
        );
    }
    for r in k.restarts.iter().filter(|r| r.after == "sigkill") {
        let _ = writeln!(
            s,
            "| {} after SIGKILL under load | {} | - | - | {:.1} (its open {} ms, {} transactions replayed) | {}{} | {:.1} MiB |",
            r.server,
            r.keys,
            r.restart_ms,
            r.recovery_ms.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into()),
            r.replayed.unwrap_or(0),
            r.dbsize,
            if r.dbsize_ok { " ok" } else { " WRONG" },
            r.data_bytes as f64 / (1u64 << 20) as f64,
        );
    }
}

/// The text fields of a tx row shared by the Markdown and CSV outputs.
struct RowFields<'a> {
    case: &'a str,
    mechanism: &'a str,
    flushes: String,
    fences: String,
    mode: &'a str,
}

fn row_fields(row: &txbench::Row) -> RowFields<'_> {
    let num = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    RowFields {
        case: &row.case,
        mechanism: row.mechanism,
        flushes: num(row.flushes_per_op),
        fences: num(row.fences_per_op),
        mode: &row.mode,
    }
}

/// An SVG chart inline in the page, or a line saying why it is not there.
fn embed_chart(h: &mut String, chart: Result<String>) {
    let _ = match chart {
        Ok(svg) => writeln!(h, "<div class=\"chart\">{svg}</div>"),
        Err(e) => writeln!(h, "<p>(chart not drawn: {})</p>", esc(&format!("{e:#}"))),
    };
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Markdown table of `md` (the `| a | b |` lines from the one starting with `header`) as an
/// HTML table.
fn md_table(md: &str, header: &str) -> String {
    let mut out = String::from("<table>\n");
    let mut first = true;
    for l in md.lines().skip_while(|l| !l.starts_with(header)) {
        if !l.starts_with('|') {
            break;
        }
        if l.starts_with("|---") {
            continue;
        }
        let tag = if first { "th" } else { "td" };
        out.push_str("<tr>");
        for c in l.trim().trim_matches('|').split(" | ") {
            let _ = write!(out, "<{tag}>{}</{tag}>", esc(c.trim()));
        }
        out.push_str("</tr>\n");
        first = false;
    }
    out.push_str("</table>\n");
    out
}

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}\
td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}th{background:#eee}\
td:first-child,td:nth-child(2){text-align:left}\
li.pass{color:#106010}li.fail{color:#b01010}li.na{color:#777}.chart{margin:1em 0}";

/// The HTML report: one self-contained page (inline CSS and SVG charts, no scripts), readable
/// offline. The tables are the Markdown report's.
pub fn html(r: &Report) -> String {
    let md = markdown(r);
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Daisy test report</title><style>{CSS}</style></head><body>"
    );
    let _ = writeln!(h, "<h1>Daisy test report</h1>");
    let _ = writeln!(
        h,
        "<p>Generated by <code>daisy report</code> ({:?} level) in {:.0} s. Every figure below \
         was measured in this run.</p>",
        r.level, r.seconds
    );
    let _ = writeln!(h, "<h2>Verdicts</h2><ul>");
    for v in &r.verdicts {
        let class = if v.name.starts_with("not run") {
            "na"
        } else if v.passed {
            "pass"
        } else {
            "fail"
        };
        let _ = writeln!(h, "<li class=\"{class}\">{}</li>", esc(&v.text));
    }
    let _ = writeln!(h, "</ul>");
    let _ = writeln!(h, "<h2>Environment</h2>{}", md_table(&md, "| item |"));
    let _ = writeln!(
        h,
        "<h2>1. Persistence functional test</h2>{}<h3>Power-failure simulation</h3>{}\
         <h3>KV server kill torture</h3>{}",
        md_table(&md, "| kills |"),
        md_table(&md, "| crash points |"),
        md_table(&md, "| server kills |")
    );
    let _ = writeln!(
        h,
        "<h2>2. Persistence performance test: small transactions</h2>"
    );
    embed_chart(&mut h, crate::charts::tx_ns(&r.tx));
    let _ = writeln!(h, "{}", md_table(&md, "| case |"));
    let _ = writeln!(
        h,
        "<h2>3. Persistence performance test: hash map (seed 000's table)</h2><ul>"
    );
    for n in &r.hashmap_notes {
        let _ = writeln!(h, "<li>{}</li>", esc(n.trim()));
    }
    let _ = writeln!(h, "</ul>");
    embed_chart(&mut h, crate::charts::hashmap_ns(&r.hashmap));
    embed_chart(&mut h, crate::charts::hashmap_vs_msync(&r.hashmap));
    let _ = writeln!(h, "{}", md_table(&md, "| N |"));
    if r.hashmap_disk_dir.is_some() {
        let _ = writeln!(
            h,
            "<h3>File persistence on a disk</h3>{}",
            md_table(&md, "| N (disk) |")
        );
    }
    let _ = writeln!(
        h,
        "<h2>4. Persistence performance test: Redis (seed 000's table)</h2>"
    );
    match &r.kv {
        Ok(k) => {
            embed_chart(&mut h, crate::charts::kv_rps(&k.rows));
            embed_chart(&mut h, crate::charts::kv_latency(&k.rows));
            let _ = writeln!(h, "{}", md_table(&md, "| test | pipeline |"));
            if !k.memory.is_empty() {
                let _ = writeln!(h, "{}", md_table(&md, "| server | keys |"));
            }
            for u in &k.unavailable {
                let _ = writeln!(
                    h,
                    "<p>{} {}: {}</p>",
                    esc(&u.server),
                    u.status,
                    esc(&u.reason)
                );
            }
        }
        Err(e) => {
            let _ = writeln!(h, "<p>Not run: {}</p>", esc(e));
        }
    }
    let _ = writeln!(h, "</body></html>");
    h
}

/// Write report.md, report.html, results.json and the CSV files into `out`.
pub fn write(r: &Report, out: &Path) -> Result<Vec<PathBuf>> {
    let md = out.join("report.md");
    let json = out.join("results.json");
    let csv = out.join("tx.csv");
    let w = |p: &Path, data: String| {
        std::fs::write(p, data).map_err(|e| anyhow!("{}: {e}", p.display()))
    };
    w(&md, markdown(r))?;
    let page = out.join("report.html");
    w(&page, html(r))?;
    w(&json, serde_json::to_string_pretty(r)?)?;
    let mut c = String::from("case,mechanism,ns_per_op,ops_per_s,spread_min_ns,spread_max_ns,flushes_per_op,fences_per_op,runs,ops,mode,fs\n");
    for row in &r.tx {
        let f = row_fields(row);
        let _ = writeln!(
            c,
            "{},{},{:.1},{:.0},{:.1},{:.1},{},{},{},{},{},{}",
            f.case,
            f.mechanism,
            row.ns_per_op,
            row.ops_per_s,
            row.spread_min_ns,
            row.spread_max_ns,
            f.flushes,
            f.fences,
            row.runs,
            row.ops,
            f.mode,
            row.fs
        );
    }
    w(&csv, c)?;
    let hcsv = out.join("hashmap.csv");
    let mut c = String::from("n,mechanism,total_ms,ns_per_op,spread_min_ns,spread_max_ns,p99_ns,max_ns,flushes_per_op,fences_per_op,syncs_per_op,bytes_per_entry,bytes_estimated,extrapolated,runs,mode,fs\n");
    let o = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for row in &r.hashmap {
        let _ = writeln!(
            c,
            "{},{},{:.3},{:.1},{:.1},{:.1},{:.0},{:.0},{},{},{},{},{},{},{},{},{}",
            row.n,
            row.mechanism,
            row.total_ms,
            row.ns_per_op,
            row.spread_min_ns,
            row.spread_max_ns,
            row.p99_ns,
            row.max_ns,
            o(row.flushes_per_op),
            o(row.fences_per_op),
            o(row.syncs_per_op),
            o(row.bytes_per_entry),
            row.bytes_estimated,
            row.extrapolated,
            row.runs,
            row.mode,
            row.fs
        );
    }
    w(&hcsv, c)?;
    let mut out_files = vec![md, page, json, csv, hcsv];
    if let Ok(k) = &r.kv {
        let kcsv = out.join("kv.csv");
        let mut c = String::from(
            "server,test,pipeline,value_size,requests,rps,p50_ms,p99_ms,max_ms,runs,rps_runs,sampled,fs\n",
        );
        for row in &k.rows {
            let _ = writeln!(
                c,
                "{},{},{},{},{},{:.0},{},{},{},{},{},{},{}",
                row.server,
                row.test,
                row.pipeline,
                row.value_size,
                row.requests,
                row.rps,
                row.p50_ms,
                row.p99_ms,
                row.max_ms,
                row.runs,
                // Each round's requests/s, space-separated (no comma inside the field).
                join_fixed(&row.rps_runs, 0),
                row.sampled,
                row.fs
            );
        }
        w(&kcsv, c)?;
        out_files.push(kcsv);
    }
    Ok(out_files)
}

#[cfg(test)]
mod tests {
    use super::{kv_verdicts, per_round_ratios, verdict_ratio};
    use crate::kvbench;

    /// A requests row of `server` with these rounds' requests/s.
    fn row(server: &str, test: &str, pipeline: usize, runs: &[f64]) -> kvbench::Row {
        let spread = crate::stats::Spread::of(runs);
        kvbench::Row {
            bench: "kv",
            kind: "requests",
            server: server.into(),
            test: test.into(),
            pipeline,
            value_size: 8,
            keys: "mixed".into(),
            keyspace: 100_000,
            requests: 100_000,
            requests_run: 100_000,
            sampled: false,
            clients: 50,
            rps: spread.median,
            rps_min: spread.min,
            rps_max: spread.max,
            rps_runs: runs.to_vec(),
            elapsed_ms: 1.0,
            avg_ms: 0.1,
            p50_ms: 0.1,
            p99_ms: 0.2,
            max_ms: 1.0,
            keys_after: 1,
            runs: runs.len(),
            vs_redis_none: None,
            vs_redis_aof_always: None,
            port: 1,
            dir: "/dev/shm".into(),
            fs: "tmpfs".into(),
        }
    }

    fn target(v: &[super::Verdict]) -> &super::Verdict {
        v.iter()
            .find(|v| v.name.starts_with("target: Redis benchmark"))
            .expect("a target verdict")
    }

    #[test]
    fn the_target_verdict_takes_the_median_of_paired_rounds() {
        // Daisy's median (100) equals redis-none's, but Daisy is the faster in 2 of the 3
        // paired rounds: the ratios 1.25, 0.90, 1.11 have the median 1.11.
        let main = |d: [f64; 3], r: [f64; 3]| kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [1, 16]
                        .into_iter()
                        .flat_map(move |p| [row("daisy", t, p, &d), row("redis-none", t, p, &r)])
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(main([100.0, 90.0, 111.0], [80.0, 100.0, 100.0])), None);
        let t = target(&v);
        assert!(t.passed, "{}", t.text);
        assert!(
            t.text
                .contains("SET P1 1.11x (faster in 2 of 3 rounds: 1.25 0.90 1.11)"),
            "{}",
            t.text
        );
        // Daisy slower in 2 of 3 rounds: FAIL, though its best round is far ahead.
        let slow = main([150.0, 95.0, 95.0], [100.0, 100.0, 100.0]);
        let v = kv_verdicts(&Ok(slow.clone()), None);
        assert!(!target(&v).passed, "{}", target(&v).text);
        // The pipeline-1 target rounds are paired with the main ones: 3 more rounds where
        // Daisy is faster make 4 of 6; ratios 0.95 0.95 1.05 1.10 1.20 1.50, median 1.075.
        let extra = kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [
                        row("daisy", t, 1, &[105.0, 110.0, 120.0]),
                        row("redis-none", t, 1, &[100.0, 100.0, 100.0]),
                    ]
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(slow.clone()), Some(&Ok(extra)));
        let t = target(&v);
        assert!(
            t.text.contains("SET P1 1.07x (faster in 4 of 6 rounds"),
            "{}",
            t.text
        );
        // Pipeline 16 has no extra rounds and stays at 1 of 3.
        assert!(
            t.text.contains("SET P16 0.95x (faster in 1 of 3 rounds"),
            "{}",
            t.text
        );
        assert!(!t.passed, "{}", t.text);
        // Extra rounds that did not run leave the main rounds' verdict.
        let v = kv_verdicts(&Ok(slow), Some(&Err("no redis".to_string())));
        assert!(target(&v)
            .text
            .contains("SET P1 0.95x (faster in 1 of 3 rounds"));
        // ... and are a failing verdict of their own: a crash there is not hidden.
        assert!(v
            .iter()
            .any(|x| x.name == "not run: Redis benchmark pipeline-1 rounds" && !x.passed));
    }

    #[test]
    fn per_round_ratios_pair_the_rounds_in_order() {
        assert_eq!(
            per_round_ratios(&[110.0, 90.0, 100.0], &[100.0, 100.0, 80.0]),
            vec![1.1, 0.9, 1.25]
        );
        assert_eq!(per_round_ratios(&[3.0], &[2.0]), vec![1.5]);
        // A server that failed after its first round: the rounds both ran are paired.
        assert_eq!(per_round_ratios(&[1.0, 2.0], &[2.0]), vec![0.5]);
    }

    #[test]
    fn verdict_ratios_never_read_as_passing_when_below_the_requirement() {
        assert_eq!(verdict_ratio(1.0476), "1.04");
        assert_eq!(verdict_ratio(0.996), "0.99");
        assert_eq!(verdict_ratio(1.05), "1.05");
        assert_eq!(verdict_ratio(2.6), "2.60");
    }
}
