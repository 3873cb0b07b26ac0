//! `daisy report`: the test report of seed 000, from measurements taken in this run.
//!
//! It covers what exists: the persistence functional test (kill torture and power-failure
//! simulation) and the persistence performance tests: small transactions (Daisy against msync,
//! fsync, PMDK and the store+flush floor), seed 000's hash-map table (`bench hashmap`) and its
//! Redis table (`bench kv`). It writes `report.md`, `report.html`, `results.json`, `tx.csv`,
//! `hashmap.csv` and `kv.csv`, prints verdicts against the seed's requirement, and fails when
//! the functional test lost anything.
//!
//! The modules: this one runs the report (its settings, the environment, every measurement);
//! `verdicts` judges the figures against the requirements (PASS, TIE, FAIL); `tables` builds
//! each section's tables once ([`crate::table::Table`]); `content` puts everything the report
//! says into one document tree (`doc`: the scoreboard, headings, paragraphs, tables, figures,
//! notes), which `markdown` (report.md) and `html` (report.html, with the charts) render;
//! `files` writes every file.

mod content;
mod doc;
mod files;
mod html;
mod markdown;
mod tables;
#[cfg(test)]
mod tests;
mod verdicts;

pub use files::write;
pub use verdicts::{capi_checks, Check, Counts, Status, Target, Verdict};

/// report.md: the report's document tree in Markdown.
pub fn markdown(r: &Report) -> String {
    markdown::render(&content::document(r))
}

/// report.html: the same document tree as one self-contained page, with the charts.
pub fn html(r: &Report) -> String {
    html::render(&content::document(r))
}

/// How to read the scoreboard (the TIE rule) and the exit status, as the report prints it.
pub const READING: &str = content::READING;

/// Exit status when a functional test failed (nothing lost may be lost).
pub const EXIT_FUNCTIONAL_FAIL: u8 = 1;
/// Exit status when a performance verdict is FAIL (and `--allow-perf-fail` was not given).
pub const EXIT_PERF_FAIL: u8 = 3;

use crate::kvbench;
use crate::{crashtest, hashbench, iobench, progress, txbench};
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};
use verdicts::{
    capi_verdicts, disk_verdicts, hashmap_verdicts, io_verdicts, kv_verdicts, power_fail_verdict,
    server_crash_verdict, types_memory_verdicts, types_verdicts, verdicts,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Level {
    Quick,
    Default,
    Full,
}

/// The hash-map mechanisms the report also runs on a disk: the file rivals and the embedded
/// databases (Daisy's figures there are its NVM ones: see `disk_verdicts`).
pub const DISK_MECHANISMS: [&str; 10] = [
    "msync-op",
    "msync-end",
    "fsync-op",
    "fsync-end",
    "lmdb-op",
    "lmdb-end",
    "redb-op",
    "redb-end",
    "sqlite-op",
    "sqlite-end",
];

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
    /// The embedded databases measured as rivals: each one's crate and library version.
    pub databases: Vec<String>,
}

/// The I/O lab (issue 24), measured by `daisy bench io`'s own code: seed 002's matrix (the
/// cells of `matrix`), seed 003's data validation, and at `--full` seed 004's file-I/O
/// methods.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IoLab {
    pub matrix: iobench::Config,
    pub cells: Vec<iobench::Cell>,
    /// `fio --version`, or why fio is missing.
    pub fio: String,
    /// The page cache's write-back knobs as the run found them (read only).
    pub page_cache: String,
    /// The file system of the matrix's directory, and of the disk directory when there is one.
    pub fs: String,
    pub disk_fs: Option<String>,
    /// Kills per mechanism of the validation, and crash images of the simulator's run.
    pub kills: u64,
    pub sim_budget: u64,
    /// Lost and corrupt blocks after SIGKILL and power failure, or why it could not run.
    pub validation: Outcome<Vec<iobench::validate::ValidationRow>>,
    /// Seed 004's survey (`--full` only): the write cells and the random reads.
    pub methods: Option<Outcome<IoMethods>>,
}

/// Seed 004's file-I/O methods as `daisy bench io --methods` measures them.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IoMethods {
    pub config: iobench::methods::Config,
    pub cells: Vec<iobench::methods::MethodCell>,
    pub reads: Vec<iobench::methods::ReadCell>,
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
    /// The C API library whose `daisy-c` rows `tx` holds (issue 23's targets), or why it was
    /// not measured.
    pub c_api: Outcome<String>,
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
    /// Redis's data types and MULTI/EXEC (issue 18's targets): hset, sadd, spop and the
    /// bench's MULTI/EXEC loader against redis-none and redis-aof-always.
    pub kv_types: Option<Outcome<kvbench::Report>>,
    /// The I/O lab of seeds 002-004 (`daisy bench io`), or why it could not run.
    pub io: Outcome<IoLab>,
    pub verdicts: Vec<Verdict>,
    pub seconds: f64,
}

impl Report {
    pub fn functional_passed(&self) -> bool {
        self.verdicts
            .iter()
            .filter(|v| v.is_functional())
            .all(|v| v.passed)
    }

    /// How many verdicts say PASS, TIE, FAIL and NOT RUN.
    pub fn counts(&self) -> Counts {
        Counts::of(&self.verdicts)
    }

    /// The exit status a script can use: [`EXIT_FUNCTIONAL_FAIL`] when a functional test
    /// failed, else [`EXIT_PERF_FAIL`] when any verdict is FAIL (unless `allow_perf_fail`),
    /// else 0. TIE and NOT RUN do not fail it.
    pub fn exit_status(&self, allow_perf_fail: bool) -> u8 {
        if !self.functional_passed() {
            EXIT_FUNCTIONAL_FAIL
        } else if !allow_perf_fail && self.verdicts.iter().any(|v| v.status == Status::Fail) {
            EXIT_PERF_FAIL
        } else {
            0
        }
    }

    /// One line for the terminal: the counts, and the tests that failed.
    pub fn status_line(&self) -> String {
        content::status_line(&self.verdicts)
    }

    /// The scoreboard as text, for the terminal.
    pub fn scoreboard_text(&self) -> String {
        content::scoreboard(&self.verdicts).text()
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
        databases: crate::dbrivals::Db::ALL
            .iter()
            .map(|d| d.version())
            .collect(),
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
    // Default: the simulator's own default (every canary is caught within it, about 27 s);
    // full: the million images of a release check (about 6 minutes).
    let budget = match cfg.level {
        Level::Quick => 6_000,
        Level::Default => 80_000,
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
    // The C API (issue 23): libdaisy.so beside the daisy binary (`cargo build --release -p
    // daisy-c`; scripts/report.sh builds it), or $DAISY_LIB.
    let c_lib = crate::capi::DaisyC::default_path();
    let c_api = crate::capi::DaisyC::load(&c_lib)
        .map(|l| l.path.display().to_string())
        .map_err(|e| format!("{e:#}"));
    match &c_api {
        Ok(l) => note(&format!("performance test: the C API too ({l})")),
        Err(e) => note(&format!("performance test: the C API not measured: {e}")),
    }
    let tcfg = txbench::Config {
        dir: cfg.dir.clone(),
        ops,
        runs,
        cases: txbench::CASES.iter().map(|s| s.to_string()).collect(),
        c_lib: c_api.is_ok().then_some(c_lib),
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
    // on a disk, the file rivals and the embedded databases run there too (largest N, timed
    // on a prefix if slow; the databases' per-insert commits on at most
    // dbrivals::PER_OP_MAX_OPS).
    let mut hashmap_disk = vec![];
    let mut hashmap_disk_dir = None;
    let out_fs = std::fs::File::open(&cfg.out)
        .map(|f| daisy::internals::fs_type_name(&f).to_string())
        .unwrap_or_default();
    if env.fs == "tmpfs" && !out_fs.is_empty() && out_fs != "tmpfs" {
        let ddir = cfg.out.join("disk-baseline");
        let n = *hcfg.ns.iter().max().unwrap_or(&100_000);
        note(&format!(
            "performance test: msync, fsync and the embedded databases on a disk file ({out_fs}, \
             {}), N = {n}",
            ddir.display()
        ));
        let dcfg = hashbench::Config {
            dir: ddir.clone(),
            ns: vec![n],
            mechanisms: DISK_MECHANISMS.iter().map(|m| m.to_string()).collect(),
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
                hashmap_disk_dir = Some((ddir, out_fs.clone()));
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
        types_memory: true,
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
            types_memory: false,
            servers: vec!["daisy".into(), "redis-none".into()],
            ..kcfg.clone()
        };
        run_kv(&pcfg)
    });

    // 4c. Data types and transactions: hashes, sets, lists and sorted sets (redis-benchmark)
    // and MULTI/EXEC (the bench's loader), against Redis with no persistence and with an
    // fsynced AOF.
    let kv_types = {
        let (ns, runs) = match cfg.level {
            Level::Quick => (vec![10_000], 1),
            Level::Default | Level::Full => (vec![100_000], TYPES_ROUNDS),
        };
        note(&format!(
            "performance test: data types and MULTI/EXEC: {} against redis-none and \
             redis-aof-always, N = {ns:?}, {runs} rounds",
            TYPES_TESTS.join(", ")
        ));
        let tcfg = kvbench::Config {
            ns,
            tests: TYPES_TESTS.iter().map(|t| t.to_string()).collect(),
            runs,
            restart_keys: 0,
            types_memory: false,
            servers: vec![
                "daisy".into(),
                "redis-none".into(),
                "redis-aof-always".into(),
            ],
            ..kcfg.clone()
        };
        Some(run_kv(&tcfg))
    };

    // 5. The I/O lab (seeds 002-004): NVM as a block store and as files.
    let disk_dir = (env.fs == "tmpfs" && !out_fs.is_empty() && out_fs != "tmpfs")
        .then(|| (cfg.out.join("disk-io"), out_fs.clone()));
    let io = run_io(cfg, disk_dir, &mut note).map_err(|e| format!("{e:#}"));

    let mut verdicts = verdicts(&functional, &tx, &env);
    verdicts.extend(capi_verdicts(&tx, &c_api));
    verdicts.extend(hashmap_verdicts(&hashmap, &env));
    verdicts.extend(disk_verdicts(&hashmap, &hashmap_disk, &hashmap_disk_dir));
    verdicts.extend(kv_verdicts(&kv, kv_p1.as_ref()));
    verdicts.extend(types_verdicts(kv_types.as_ref()));
    verdicts.extend(types_memory_verdicts(&kv));
    let (io_functional, io_perf) = io_verdicts(&io);
    verdicts.extend(io_perf);
    verdicts.insert(1, power_fail_verdict(&power_fail));
    verdicts.insert(2, server_crash_verdict(&server_crash, server_kills));
    verdicts.insert(3, io_functional);
    Ok(Report {
        level: cfg.level,
        environment: env,
        functional,
        power_fail,
        server_crash,
        tx,
        c_api,
        hashmap,
        hashmap_notes,
        hashmap_disk,
        hashmap_disk_dir,
        kv,
        kv_p1,
        kv_types,
        io,
        verdicts,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
/// The I/O lab by level: `--quick` two randwrite cells of every mechanism and a short
/// validation; the default seed 002's whole matrix on tmpfs (0.5 s a cell) and the
/// validation; `--full` the matrix at `daisy bench io`'s own settings (1 s a cell, 256 MiB
/// stores), with the disk rows when `disk_dir` is given (the pools on tmpfs, the report on a
/// disk), and seed 004's methods. The code is `daisy bench io`'s.
fn run_io(
    cfg: &Config,
    disk_dir: Option<(PathBuf, String)>,
    note: &mut impl FnMut(&str),
) -> Result<IoLab> {
    let dir = cfg.dir.clone();
    let mut matrix = match cfg.level {
        // A smoke test that keeps --quick short (it runs in the test suite): two cells of
        // random writes per mechanism.
        Level::Quick => iobench::Config {
            rws: vec!["randwrite".into()],
            block_sizes: vec![512, 4096],
            jobs: vec![1],
            seconds: 0.1,
            size: 8 << 20,
            ..iobench::Config::full(dir.clone())
        },
        Level::Default => iobench::Config {
            seconds: 0.5,
            size: 64 << 20,
            ..iobench::Config::full(dir.clone())
        },
        Level::Full => iobench::Config::full(dir.clone()),
    };
    matrix.seed = cfg.seed;
    let disk = disk_dir.filter(|_| cfg.level == Level::Full);
    if let Some((d, _)) = &disk {
        matrix = matrix.with_disk(d.clone());
    }
    let fs = iobench::methods::fs_of(&dir);
    let fio = iobench::fio_version().unwrap_or_else(|e| format!("{e:#}"));
    let page_cache = iobench::pagecache::describe();
    let cells_total =
        (matrix.rws.len() * matrix.block_sizes.len() * matrix.jobs.len() * matrix.mechanisms.len())
            as u64;
    note(&format!(
        "performance test: I/O lab (seed 002): {} mechanisms x {} cells, {} s a cell, in {} \
         ({fs}){}",
        matrix.mechanisms.len(),
        cells_total / matrix.mechanisms.len() as u64,
        matrix.seconds,
        dir.display(),
        disk.as_ref()
            .map(|(d, f)| format!(", disk rows in {} ({f})", d.display()))
            .unwrap_or_default()
    ));
    let bar = progress::bar(cells_total, "cells");
    let mut done = 0;
    let cells = iobench::run(&matrix, |_| {
        done += 1;
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let cells = cells?;

    let (kills, power_failures, writes, sim_budget) = match cfg.level {
        Level::Quick => (2, 2, 5_000, 300),
        Level::Default => (5, 5, 20_000, 3_000),
        Level::Full => (20, 10, 20_000, 20_000),
    };
    note(&format!(
        "functional test: I/O lab data validation (seed 003): {kills} kills per mechanism, \
         {power_failures} modelled power failures per sync policy, {sim_budget} crash images \
         of Daisy's block store"
    ));
    let vcfg = iobench::validate::Config {
        dir: dir.clone(),
        kills,
        seed: cfg.seed,
        child_cmd: cfg.child_cmd.clone(),
        backends: crate::blockcrash::Backend::ALL.to_vec(),
        power_failures,
        writes,
    };
    let validation = iobench::validate::run(&vcfg, |_| {})
        .map(|mut rows| {
            rows.push(match &cfg.powerfail {
                Some(sim) => iobench::validate::simulator_run(sim, &dir, sim_budget, cfg.seed),
                None => {
                    let mut r = iobench::validate::simulator_row(
                        0,
                        0,
                        0,
                        cfg.seed,
                        "daisy-powerfail was not built (cargo build --release -p \
                         daisy-powerfail)"
                            .into(),
                    );
                    r.where_ = "not run".into();
                    r
                }
            });
            rows
        })
        .map_err(|e| format!("{e:#}"));

    let methods = (cfg.level == Level::Full).then(|| {
        let dirs: Vec<PathBuf> = std::iter::once(dir.clone())
            .chain(disk.as_ref().map(|(d, _)| d.clone()))
            .collect();
        let mut mcfg = iobench::methods::Config::full(dirs);
        mcfg.seed = cfg.seed;
        note("performance test: I/O lab file-I/O methods (seed 004)");
        iobench::methods::run(&mcfg, |_: &str| {})
            .map(|(cells, reads)| IoMethods {
                config: mcfg.clone(),
                cells,
                reads,
            })
            .map_err(|e| format!("{e:#}"))
    });
    if let Some((d, _)) = &disk {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(IoLab {
        matrix,
        cells,
        fio,
        page_cache,
        fs,
        disk_fs: disk.map(|(_, f)| f),
        kills,
        sim_budget,
        validation,
        methods,
    })
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
/// The data-type and MULTI/EXEC tests of the report (issues 18's and 19's targets).
pub const TYPES_TESTS: &[&str] = &[
    "hset",
    "sadd",
    "spop",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "lrange_100",
    "lrange_300",
    "lrange_600",
    "zadd",
    "zpopmin",
    "pfadd",
    "xadd",
    "xreadgroup",
    "multi",
];
/// Rounds of the data-type stage (paired, as the Redis benchmark's).
pub const TYPES_ROUNDS: usize = 5;
/// Numbers joined by spaces, with `prec` decimals.
fn join_fixed(v: &[f64], prec: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.prec$}"))
        .collect::<Vec<_>>()
        .join(" ")
}
