//! `daisy pool create|info|check`.

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
        /// Layout name that programs must ask for when they open the pool.
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
    /// Print size, usage, persistence mode, layout and identity of a pool.
    Info {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Verify headers, logs, allocator metadata and (for known layouts) reachability.
    /// Exits non-zero on any inconsistency.
    Check {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

pub fn run(p: PoolCmd) -> Result<ExitCode> {
    match p {
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
            let pool = Pool::open_with(&path, None, ModeChoice::Auto)?;
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
                    "size:            {} (file {}), grows up to {}",
                    fmt_size(i.size),
                    fmt_size(i.file_size),
                    fmt_size(i.max_size)
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
                    "opened in:       {} us (recovery re-applied {} committed transactions)",
                    rec.open_micros, rec.records_replayed
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Check { path, format } => {
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
            let maps = daisy::check_all(&pool)?;
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
                    "path": path, "ok": rep.ok(), "problems": rep.problems, "objects": rep.objects,
                    "used": rep.used, "log_records": rep.log_records,
                    "reachability_checked": rep.reachability_checked, "reachable": rep.reachable,
                    "hash_maps": maps_json,
                });
                println!("{v}");
            } else {
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
                for p in &rep.problems {
                    println!("PROBLEM: {p}");
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
