//! `daisy pool create|info|check|backup|resize`.

use crate::output::Format;
use crate::size::{fmt_size, parse_size};
use anyhow::{anyhow, Result};
use clap::{Subcommand, ValueEnum};
use daisy::{ModeChoice, Pool, PoolOptions};
use daisy_bench::crashtest;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--mode` of `pool create` and `serve`.
#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Auto,
    Pmem,
    Msync,
}

impl From<ModeArg> for ModeChoice {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Auto => ModeChoice::Auto,
            ModeArg::Pmem => ModeChoice::Pmem,
            ModeArg::Msync => ModeChoice::Msync,
        }
    }
}

#[derive(Subcommand)]
pub enum PoolCmd {
    /// Create a new pool file.
    Create {
        path: PathBuf,
        /// Initial size (e.g. 64MiB, 1GiB).
        #[arg(long, default_value = "1GiB", value_parser = parse_size)]
        size: u64,
        /// The pool grows on demand up to this size [default: max(size, 64GiB)].
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
        /// Layout name that programs must ask for when they open the pool: `daisy.kv` for a
        /// pool that `daisy serve` will serve (serve also creates its own pool when the file
        /// does not exist, with 1 MiB log slots; smaller slots work too, since larger
        /// transactions use overflow records).
        #[arg(long, default_value = "")]
        layout: String,
        /// Persistence mode [auto: pmem on tmpfs/DAX, msync elsewhere].
        #[arg(long, value_enum, default_value = "auto")]
        mode: ModeArg,
        /// Log lanes (concurrent transactions).
        #[arg(long, default_value_t = daisy::internals::DEFAULT_LANES)]
        lanes: u32,
        /// Redo-log slot size: the largest transaction's log.
        #[arg(long, default_value = "16KiB", value_parser = parse_size)]
        log_slot_size: u64,
        /// Redo-log slots per lane (4-64). A lane writes back the lines its transactions
        /// changed slots-2 commits later, so a line changed again meanwhile is written back
        /// once [default: 32 when lanes x 32 slots fit in a quarter of --size, else 8].
        #[arg(long)]
        log_slots: Option<u32>,
    },
    /// Print size, usage, persistence mode, layout and identity of a pool. Reads the file
    /// only; a pool in use by a server is read without its lock (the figures may then include
    /// transactions in flight).
    Info {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Verify headers, logs, allocator metadata and (for known layouts) reachability.
    /// Exits non-zero on any inconsistency. Reads the file only (a read-only file will do);
    /// a pool in use by a server is checked without its lock, and the report says that it
    /// may then show transactions in flight.
    Check {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// Print every problem (text format; by default the first 100 after the summary).
        #[arg(long)]
        all: bool,
    },
    /// Grow a pool (not in use) to SIZE now: the file is extended and allocated, so later
    /// growth on demand is not needed up to there. A pool never shrinks, and never grows past
    /// its capacity, which is fixed at creation (`pool info` shows it; `daisy serve --max-size`
    /// and CONFIG SET maxmemory set the limit below it).
    Resize {
        path: PathBuf,
        /// The size to grow to (e.g. 1GiB).
        #[arg(long, value_parser = parse_size)]
        size: u64,
    },
    /// Write a consistent copy of a pool to DST, also while the pool is in use.
    ///
    /// A pool nobody has open is copied directly. A pool that `daisy serve` has open is backed
    /// up through that server (BGSAVE on --port: the server copies it while it keeps
    /// serving, pausing writes only for a final pass), then its backup file is copied to DST.
    /// `cp` of a live pool is NOT a backup: it mixes states and may be unreadable. Restore by
    /// serving the copy: `daisy serve --pool DST`.
    Backup {
        src: PathBuf,
        dst: PathBuf,
        /// Port of the `daisy serve` that has SRC open (on 127.0.0.1).
        #[arg(long, default_value_t = 6379)]
        port: u16,
        /// Its password (default: $REDISCLI_AUTH).
        #[arg(long)]
        password: Option<String>,
        /// Replace DST if it exists.
        #[arg(long)]
        force: bool,
    },
}

pub fn run(p: PoolCmd) -> Result<ExitCode> {
    match p {
        PoolCmd::Resize { path, size } => {
            let pool = Pool::open_with(&path, None, ModeChoice::Auto)?;
            if size > pool.capacity() {
                return Err(anyhow!(
                    "{}: {} is more than the pool's capacity of {}, which was fixed when it was created (create a pool with a larger --max-size and copy the data)",
                    path.display(),
                    fmt_size(size),
                    fmt_size(pool.capacity())
                ));
            }
            let before = pool.size();
            pool.grow_to(size)?;
            println!(
                "{}: size {} (was {}), capacity {}",
                path.display(),
                fmt_size(pool.size()),
                fmt_size(before),
                fmt_size(pool.capacity())
            );
            pool.close()?;
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Backup {
            src,
            dst,
            port,
            password,
            force,
        } => {
            if dst.exists() && !force {
                return Err(anyhow!(
                    "{}: file already exists (--force replaces it)",
                    dst.display()
                ));
            }
            match Pool::open_with(&src, None, ModeChoice::Auto) {
                Ok(pool) => {
                    let rep = pool.backup_to(&dst)?;
                    pool.close()?;
                    println!(
                        "backed up {} to {}: {} in {:.1} ms",
                        src.display(),
                        dst.display(),
                        fmt_size(rep.file_size),
                        rep.elapsed.as_secs_f64() * 1e3
                    );
                }
                Err(daisy::Error::AlreadyOpen { .. }) => {
                    let password = password.or_else(|| std::env::var("REDISCLI_AUTH").ok());
                    backup_through_server(&src, &dst, port, password.as_deref())?;
                }
                Err(e) => return Err(e.into()),
            }
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Create {
            path,
            size,
            max_size,
            layout,
            mode,
            lanes,
            log_slot_size,
            log_slots,
        } => {
            let slot = u32::try_from(log_slot_size)
                .map_err(|_| anyhow!("--log-slot-size {log_slot_size} is too large"))?;
            let mut opts = PoolOptions::new(&layout)
                .size(size)
                .mode(mode.into())
                .lanes(lanes)
                .log_slot_size(slot);
            opts.max_size = max_size;
            opts.log_slots_per_lane = log_slots;
            let pool = Pool::create(&path, &opts)?;
            let i = pool.info();
            println!(
                "created {}: {} (max {}), layout {:?}, {}, uuid {}",
                path.display(),
                fmt_size(i.size),
                fmt_size(i.max_size),
                i.layout,
                i.mode.describe(),
                i.uuid
            );
            pool.close()?;
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Info { path, format } => {
            // Read-only: recovery runs in this process's copy-on-write mapping.
            let pool = Pool::open_snapshot(&path, None)?;
            let i = pool.info();
            let rec = pool.recovery_report().clone();
            if format == Format::Json {
                let v = serde_json::json!({
                    "path": i.path, "layout": i.layout, "format_version": i.format_version,
                    "uuid": i.uuid, "mode": i.mode.name(),
                    "flush_instruction": match i.mode { daisy::Mode::Pmem(f) => Some(f.name()), _ => None },
                    "map_sync": i.map_sync, "fs": i.fs_type, "size": i.size, "file_size": i.file_size,
                    "max_size": i.max_size, "heap_size": i.heap_size, "used": i.used, "free": i.free,
                    "objects": i.objects, "lanes": i.lanes, "log_slot_size": i.log_slot_size,
                    "log_slots_per_lane": i.log_slots_per_lane,
                    "root_offset": i.root.map(|r| r.0), "root_size": i.root.map(|r| r.1),
                    "open_micros": rec.open_micros, "recovered_transactions": rec.records_replayed,
                    "in_use": rec.opened_in_use,
                });
                println!("{v}");
            } else {
                println!("path:            {}", i.path.display());
                println!("layout:          {:?}", i.layout);
                println!("format version:  {}", i.format_version);
                println!("uuid:            {}", i.uuid);
                println!(
                    "persistence:     {} on {}{}",
                    i.mode.describe(),
                    i.fs_type,
                    if i.map_sync { " (DAX, MAP_SYNC)" } else { "" }
                );
                println!(
                    "size:            {} (file {}), grows up to {} (its capacity, fixed at creation){}",
                    fmt_size(i.size),
                    fmt_size(i.file_size),
                    fmt_size(i.max_size),
                    // The limit a server sets (--max-size, CONFIG SET maxmemory) lives in that
                    // process only: the file cannot tell it.
                    if rec.opened_in_use {
                        "; the process using it may hold it to a lower limit (a server: INFO maxmemory)"
                    } else {
                        ""
                    }
                );
                println!(
                    "used:            {} in {} objects",
                    fmt_size(i.used),
                    i.objects
                );
                println!(
                    "free:            {} of {} heap",
                    fmt_size(i.free),
                    fmt_size(i.heap_size)
                );
                println!(
                    "log:             {} lanes x {} slots of {}",
                    i.lanes,
                    i.log_slots_per_lane,
                    fmt_size(i.log_slot_size as u64)
                );
                match i.root {
                    Some((off, size)) => println!("root:            offset {off:#x}, {size} bytes"),
                    None => println!("root:            none"),
                }
                println!(
                    "opened in:       {} us (recovery would re-apply {} committed transactions)",
                    rec.open_micros, rec.records_replayed
                );
                if rec.opened_in_use {
                    println!("in use:          yes: another process has the pool open (a server?); read without its lock, so these figures may include transactions in flight");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Check { path, format, all } => {
            // Checked as recovery would leave it, without writing the file.
            let pool = Pool::open_snapshot(&path, None)?;
            let layout = pool.layout();
            let mut layout_problems = Vec::new();
            let reach = match layout.as_str() {
                crashtest::LAYOUT => Some(crashtest::reachable(&pool)?),
                daisy_kv::keyspace::LAYOUT => {
                    let (reach, problems) =
                        daisy_kv::keyspace::check(&pool).map_err(|e| anyhow!(e))?;
                    layout_problems = problems;
                    Some(reach)
                }
                _ => None,
            };
            let mut rep = pool.check(reach.as_deref());
            rep.problems.extend(layout_problems);
            // Every hash map, ordered map and sequence in the pool (found by its header)
            // checks its own invariants.
            // Damaged allocator metadata can keep the collections from being found: that is
            // one more problem, not a reason to stop reporting.
            let maps = daisy::check_all(&pool).unwrap_or_else(|e| {
                rep.problems.push(format!("collections not checked: {e}"));
                Vec::new()
            });
            for m in &maps {
                rep.problems.extend(
                    m.problems
                        .iter()
                        .map(|p| format!("{} at {:#x}: {p}", m.kind, m.header)),
                );
            }
            let maps_json: Vec<_> = maps
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "header": m.header, "kind": m.kind, "entries": m.entries,
                        "segments": m.segments, "depth": m.depth, "problems": m.problems,
                    })
                })
                .collect();
            if format == Format::Json {
                let v = serde_json::json!({
                    "path": path, "ok": rep.ok(), "in_use": pool.recovery_report().opened_in_use,
                    "problem_kinds": problem_kinds(&rep.problems).into_iter()
                        .map(|(k, n)| serde_json::json!({"kind": k, "count": n})).collect::<Vec<_>>(),
                    "problems": rep.problems, "objects": rep.objects,
                    "used": rep.used, "log_records": rep.log_records,
                    "reachability_checked": rep.reachability_checked, "reachable": rep.reachable,
                    "hash_maps": maps_json,
                });
                println!("{v}");
            } else {
                // The verdict first: a broken pool can have thousands of problems.
                if rep.ok() {
                    println!("{}: check: OK", path.display());
                } else {
                    println!(
                        "{}: check: FAILED: {} problems ({})",
                        path.display(),
                        rep.problems.len(),
                        problem_kinds(&rep.problems)
                            .iter()
                            .map(|(k, n)| format!("{n} x {k}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                    );
                }
                if pool.recovery_report().opened_in_use {
                    println!("note: the pool is in use by another process (a server?): it was read without its lock, so transactions in flight may show as problems; for an exact check, back it up (`daisy pool backup`) and check the copy");
                }
                println!(
                    "{}: header ok, logs ok ({} records), {} objects, {} used",
                    path.display(),
                    rep.log_records,
                    rep.objects,
                    fmt_size(rep.used)
                );
                if rep.reachability_checked {
                    println!(
                        "reachability: {} objects reachable from the root",
                        rep.reachable
                    );
                } else {
                    println!("reachability: not checked (no walker for layout {layout:?})");
                }
                for m in &maps {
                    let verdict = if m.problems.is_empty() {
                        "invariants hold"
                    } else {
                        "PROBLEMS below"
                    };
                    // A sequence's report counts items and chunks (collections/mod.rs).
                    if m.kind == "sequence" {
                        println!(
                            "{} at {:#x}: {} items in {} chunks: {verdict}",
                            m.kind, m.header, m.entries, m.segments
                        );
                        continue;
                    }
                    // MapCheck's counts mean nodes and levels for an ordered map.
                    let shape = if m.kind == "ordered map" {
                        format!("{} nodes ({} levels)", m.segments, m.depth)
                    } else {
                        format!("{} segments (depth {})", m.segments, m.depth)
                    };
                    println!(
                        "{} at {:#x}: {} entries in {shape}: {verdict}",
                        m.kind, m.header, m.entries,
                    );
                }
                let shown = if all {
                    rep.problems.len()
                } else {
                    rep.problems.len().min(MAX_PROBLEMS_SHOWN)
                };
                for p in &rep.problems[..shown] {
                    println!("PROBLEM: {p}");
                }
                if shown < rep.problems.len() {
                    println!(
                        "... and {} more problems (--all prints them all)",
                        rep.problems.len() - shown
                    );
                }
                println!(
                    "{}",
                    if rep.ok() {
                        "check: OK"
                    } else {
                        "check: FAILED"
                    }
                );
            }
            Ok(if rep.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

/// `pool backup` of a pool that a server has open: BGSAVE on that server, wait, copy its
/// finished backup file (a closed file, renamed into place whole) to `dst`.
fn backup_through_server(
    src: &std::path::Path,
    dst: &std::path::Path,
    port: u16,
    password: Option<&str>,
) -> Result<()> {
    use daisy_bench::kvbench::{Conn, Reply};
    let served_elsewhere = || {
        anyhow!(
            "{} is open in another process, and no daisy serve on port {port} serves it \
             (a pool in use can only be backed up by the program using it: --port names the server)",
            src.display()
        )
    };
    let mut c =
        Conn::connect(port, std::time::Duration::from_secs(2)).map_err(|_| served_elsewhere())?;
    if let Some(p) = password {
        c.ok(&["AUTH", p])?;
    }
    let info = |c: &mut Conn| -> Result<String> {
        match c.ok(&["INFO", "persistence"])? {
            Reply::Bulk(Some(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
            r => Err(anyhow!("INFO: unexpected reply {r:?}")),
        }
    };
    let field = |text: &str, name: &str| -> Option<String> {
        text.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')
                .map(|v| v.trim().to_string())
        })
    };
    let text = info(&mut c)?;
    let served = field(&text, "daisy_pool").ok_or_else(served_elsewhere)?;
    let same = |a: &std::path::Path, b: &std::path::Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y);
    if !same(std::path::Path::new(&served), src) {
        return Err(anyhow!(
            "{} is open in another process; the server on port {port} serves {served}, not it",
            src.display()
        ));
    }
    let saves_before = field(&text, "rdb_saves")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let t0 = std::time::Instant::now();
    loop {
        match c.cmd(&["BGSAVE"])? {
            Reply::Simple(_) => break,
            // Another backup runs: wait for it, then start ours (it must begin after now).
            Reply::Error(e) if e.contains("already in progress") => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return Err(anyhow!("BGSAVE: {r:?}")),
        }
    }
    let text = loop {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let text = info(&mut c)?;
        if field(&text, "rdb_bgsave_in_progress").as_deref() == Some("0") {
            break text;
        }
    };
    let saves = field(&text, "rdb_saves")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if field(&text, "rdb_last_bgsave_status").as_deref() != Some("ok") || saves <= saves_before {
        return Err(anyhow!(
            "the server's backup failed: {}",
            field(&text, "daisy_backup_last_error").unwrap_or_default()
        ));
    }
    let made = field(&text, "daisy_backup_last_path")
        .ok_or_else(|| anyhow!("INFO lacks daisy_backup_last_path"))?;
    let pause_us = field(&text, "daisy_backup_last_pause_us").unwrap_or_default();
    let made = std::path::PathBuf::from(made);
    if same(&made, dst) {
        println!(
            "backed up {} to {} through the server on port {port}",
            src.display(),
            dst.display()
        );
        return Ok(());
    }
    // Open first: a later BGSAVE renames a new file over the name, this handle keeps ours.
    let mut from = std::fs::File::open(&made).map_err(|e| anyhow!("{}: {e}", made.display()))?;
    let tmp = dst.with_file_name(format!(
        ".{}.copy-{}",
        dst.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let copy = (|| -> std::io::Result<u64> {
        let mut to = std::fs::File::create(&tmp)?;
        let n = std::io::copy(&mut from, &mut to)?;
        to.sync_all()?;
        std::fs::rename(&tmp, dst)?;
        Ok(n)
    })();
    let n = copy.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!("copying {} to {}: {e}", made.display(), dst.display())
    })?;
    println!(
        "backed up {} to {} through the server on port {port} (its backup {}; {} in {:.1} ms, writes paused {pause_us} us)",
        src.display(),
        dst.display(),
        made.display(),
        fmt_size(n),
        t0.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// Problems `pool check` prints without `--all`.
const MAX_PROBLEMS_SHOWN: usize = 100;

/// Problems grouped by kind (the text before its first colon, numbers replaced by `N`), the
/// commonest first.
fn problem_kinds(problems: &[String]) -> Vec<(String, usize)> {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for p in problems {
        let head = p.split(": ").next().unwrap_or(p);
        // Words that are numbers (chunk 12, 0x1f00, 3,) become one `N` per run of them.
        let is_number = |w: &str| {
            w.starts_with("0x")
                || (w.chars().any(|c| c.is_ascii_digit())
                    && w.chars()
                        .all(|c| c.is_ascii_hexdigit() || ",.()#x".contains(c)))
        };
        let mut words: Vec<&str> = Vec::new();
        for w in head.split(' ') {
            let w = if is_number(w) { "N" } else { w };
            if !(w == "N" && words.last() == Some(&"N")) {
                words.push(w);
            }
        }
        let k = words.join(" ");
        *kinds.entry(k).or_default() += 1;
    }
    let mut v: Vec<_> = kinds.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}
