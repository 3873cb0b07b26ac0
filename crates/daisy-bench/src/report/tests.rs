//! A report with every part filled in (and one with every part failed), for the tests of its
//! renderings.

use super::*;
use crate::kvbench;

fn tx(case: &str, mechanism: &'static str, ns: f64) -> txbench::Row {
    tx_row(case, mechanism, ns)
}

/// A transaction benchmark row of `ns` per operation (its runs around it).
pub(super) fn tx_row(case: &str, mechanism: &'static str, ns: f64) -> txbench::Row {
    txbench::Row {
        bench: "tx",
        case: case.into(),
        mechanism,
        ns_per_op: ns,
        ops_per_s: 1e9 / ns,
        spread_min_ns: ns * 0.9,
        spread_max_ns: ns * 1.2,
        pairs_per_s: None,
        flushes_per_op: (mechanism != "pmdk").then_some(1.5),
        fences_per_op: (mechanism != "pmdk").then_some(1.0),
        runs: 5,
        ops: 200_000,
        mode: "pmem, clwb".into(),
        fs: "tmpfs".into(),
        speedup_vs_pmdk: (mechanism == "daisy").then_some(2.5),
        speedup_vs_daisy: (mechanism == "msync").then_some(30.0),
        x_store_flush: (mechanism == "daisy").then_some(1.9),
        x_rust: None,
        version: None,
        runs_ns: vec![ns * 0.9, ns, ns, ns * 1.1, ns * 1.2],
    }
}

fn hm(n: u64, mechanism: &'static str, ms: f64) -> hashbench::Row {
    hashbench::Row {
        bench: "hashmap",
        op: "insert",
        n,
        mechanism,
        ns_per_op: ms * 1e6 / n as f64,
        ops_per_s: n as f64 / ms * 1e3,
        total_ms: ms,
        spread_min_ns: 10.5,
        spread_max_ns: 12.25,
        spread_min_ms: ms * 0.9,
        spread_max_ms: ms * 1.1,
        p99_ns: 300.0,
        max_ns: 9000.0,
        flushes_per_op: (mechanism == "daisy").then_some(1.43),
        fences_per_op: (mechanism == "daisy").then_some(1.0),
        syncs_per_op: mechanism.starts_with("msync").then_some(1.0 / 3.0),
        bytes_per_entry: (mechanism != "msync-op").then_some(16.384),
        bytes_estimated: mechanism == "dram",
        runs: 3,
        mode: "pmem".into(),
        fs: "tmpfs".into(),
        extrapolated: mechanism == "msync-op",
        ops_timed: n / 2,
        seed: 1,
        speedup_vs_msync_op: Some(3.25),
        speedup_vs_msync_end: None,
        version: None,
    }
}

/// A requests row of `server` with these rounds' requests/s (the verdicts' tests use it too).
pub(super) fn kv_row(server: &str, test: &str, pipeline: usize, runs: &[f64]) -> kvbench::Row {
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

/// A requests row as a run fills it in: latencies, a sampled case (redis-rdb), ratios.
fn measured_row(server: &str, test: &str, pipeline: usize, runs: &[f64]) -> kvbench::Row {
    kvbench::Row {
        requests_run: 50_000,
        sampled: server == "redis-rdb",
        elapsed_ms: 812.5,
        p50_ms: 0.199,
        p99_ms: 0.455,
        max_ms: 8.94,
        keys_after: 63_126,
        vs_redis_none: (server != "redis-none").then_some(1.15),
        ..kv_row(server, test, pipeline, runs)
    }
}

fn restart(server: &str, after: &'static str, ms: f64) -> kvbench::RestartRow {
    kvbench::RestartRow {
        bench: "kv",
        kind: "restart",
        server: server.into(),
        after,
        keys: 1_000_000,
        restart_ms: ms,
        restart_ms_min: ms,
        restart_ms_max: ms,
        runs: 1,
        dbsize: 1_000_000,
        dbsize_ok: server != "redis-rdb",
        data_bytes: 123 << 20,
        recovery_ms: (server == "daisy").then_some(0.25),
        replayed: (server == "daisy").then_some(2),
        vs_daisy: None,
        port: 1,
        dir: "/dev/shm".into(),
        fs: "tmpfs".into(),
    }
}

fn memory(server: &str) -> kvbench::MemoryRow {
    kvbench::MemoryRow {
        bench: "kv",
        kind: "memory",
        server: server.into(),
        keys: 1_000_000,
        used_memory_empty: 1000,
        used_memory_loaded: 80_001_000,
        bytes_per_key: 80.0,
        load_ms: 1234.5,
        dir: "/dev/shm".into(),
        fs: "tmpfs".into(),
    }
}

fn unavailable(server: &str, status: &'static str) -> kvbench::Unavailable {
    kvbench::Unavailable {
        bench: "kv",
        kind: "unavailable",
        server: server.into(),
        status,
        reason: "it <did> not start & said | so".into(),
        dir: "/dev/shm".into(),
    }
}

/// The I/O lab's matrix as a quick run fills it in: `daisy` at `d` MB/s in every cell, each
/// rival at its share of that (`None`: not installed).
pub(super) fn io_lab(shares: &[(&str, Option<f64>)]) -> IoLab {
    let matrix = crate::iobench::Config {
        rws: vec!["write".into(), "randwrite".into()],
        block_sizes: vec![512, 4096],
        jobs: vec![1, 4],
        mechanisms: shares.iter().map(|(m, _)| m.to_string()).collect(),
        seconds: 0.2,
        size: 16 << 20,
        ..crate::iobench::Config::full("/dev/shm".into())
    };
    let mut cells = vec![];
    for (m, share) in shares {
        for rw in &matrix.rws {
            for &bs in &matrix.block_sizes {
                for &jobs in &matrix.jobs {
                    let d = 100.0 * bs as f64 / 512.0 * jobs as f64;
                    cells.push(crate::iobench::Cell {
                        mechanism: m.to_string(),
                        rw: rw.clone(),
                        bs,
                        jobs,
                        mb_s: share.map(|s| d * s),
                        fio_harness_ns: (*m == "fio-psync").then_some(140.0),
                        note: if share.is_some() {
                            String::new()
                        } else {
                            "fio is not installed (scripts/install-deps.sh installs Debian's fio)"
                                .into()
                        },
                    });
                }
            }
        }
    }
    let row = |mechanism: &str, failure: &str, lost: u64| crate::iobench::validate::ValidationRow {
        kind: "validation",
        mechanism: mechanism.into(),
        failure: failure.into(),
        runs: 5,
        writes_acked: 1000,
        blocks_checked: 4096,
        lost,
        corrupt: 0,
        torn_in_flight: 0,
        where_: "pmem".into(),
        note: String::new(),
    };
    IoLab {
        matrix,
        cells,
        fio: "fio-3.33".into(),
        page_cache: "page cache (read only, not changed): vm.dirty_ratio=20".into(),
        fs: "tmpfs".into(),
        disk_fs: None,
        kills: 5,
        sim_budget: 3000,
        validation: Ok(vec![
            row("daisy", "SIGKILL", 0),
            row("pwrite", "SIGKILL", 0),
            row("file, never synced", "power failure (model)", 1234),
            row("daisy", "power failure (simulator)", 0),
        ]),
        methods: None,
    }
}

/// Every part measured.
fn full() -> Report {
    let kv = kvbench::Report {
        rows: ["SET", "GET"]
            .iter()
            .flat_map(|t| {
                [1, 16].into_iter().flat_map(move |p| {
                    [
                        measured_row("daisy", t, p, &[120_000.0, 110_000.0, 130_000.0]),
                        measured_row("redis-none", t, p, &[100_000.0, 105_000.0, 95_000.0]),
                        measured_row("redis-rdb", t, p, &[90_000.0, 91_000.0, 92_000.0]),
                    ]
                })
            })
            .collect(),
        memory: vec![memory("daisy"), memory("redis-none"), memory("redis-rdb")],
        restarts: vec![
            restart("daisy", "shutdown", 2.5),
            restart("redis-rdb", "shutdown", 700.0),
            restart("daisy", "sigkill", 4.5),
        ],
        unavailable: vec![unavailable("redis-aof-always", "failed")],
        restart_keys: 1_000_000,
        daisy_busy_poll_us: 50,
        runs: 3,
        steal_percent: Some(1.25),
    };
    let kv_p1 = kvbench::Report {
        rows: vec![
            measured_row("daisy", "set", 1, &[101.0, 99.0]),
            measured_row("redis-none", "set", 1, &[100.0, 100.0]),
        ],
        unavailable: vec![unavailable("redis-none", "failed")],
        runs: 2,
        ..Default::default()
    };
    let power_fail = serde_json::json!({
        "crash_points": 1200, "fences_without_point": 0, "images": 60000, "failures": 0,
        "seconds": 19.54, "seed": 3, "mode": "pmem (clwb)",
        "workloads": [
            {"workload": "single", "transactions": 500, "crash_points": 700,
             "fences_without_point": 0, "images": 30000, "failures": 0},
            {"workload": "kv", "transactions": 100, "crash_points": 500,
             "fences_without_point": 0, "images": 30000, "failures": 0}
        ]
    });
    let mut r = Report {
        level: Level::Default,
        environment: Environment {
            cpu: "Some CPU @ 2.0GHz".into(),
            cores: 2,
            memory_gib: 23.4,
            kernel: "6.1.0".into(),
            flush_instructions: vec!["clwb".into(), "clflushopt".into()],
            dir: "/dev/shm".into(),
            fs: "tmpfs".into(),
            daisy_version: "0.1.0".into(),
            pmdk: "1.12.1".into(),
            redis: "Redis server v=7.0.15".into(),
            databases: vec!["redb 2.6.4 (pure Rust)".into()],
        },
        functional: crashtest::Summary {
            kills: 500,
            transactions_verified: 123_456,
            lost: 0,
            failures: 1,
            recoveries_replayed: 77,
            max_open_micros: 950,
            map_entries: 10,
            map_segments: 2,
            map_depth: 1,
            seq_items: 40,
            seq_chunks: 5,
            seq_max_chunks: 9,
            tree_entries: 300,
            tree_nodes: 60,
            tree_height: 3,
            seed: 3,
            mode: "pmem".into(),
            fs: "tmpfs".into(),
            messages: vec!["kill 3: <lost> & found".into()],
        },
        power_fail: Ok(power_fail),
        server_crash: Ok(crate::kvcrash::Summary {
            kills: 30,
            acknowledged_verified: 4567,
            in_flight_applied: 12,
            lost: 0,
            failures: 0,
            messages: vec!["one".into()],
            seed: 3,
            seconds: 12.34,
        }),
        tx: vec![
            tx("update-1", "daisy", 180.0),
            tx("update-1", "pmdk", 450.0),
            tx("update-1", "store-flush", 95.0),
            tx("update-1", "msync", 5400.0),
            tx("update-1", "daisy-c", 190.0),
        ],
        c_api: Ok("/x/libdaisy.so".into()),
        hashmap: vec![
            hm(1000, "daisy", 0.2),
            hm(1000, "msync-op", 50.0),
            hm(100_000, "daisy", 20.0),
            hm(100_000, "dram", 5.0),
            hm(100_000, "msync-end", 30.0),
        ],
        hashmap_notes: vec!["a note <with> markup".into(), "  another  ".into()],
        hashmap_disk: vec![hm(100_000, "msync-op", 5000.0), hm(100_000, "daisy", 20.0)],
        hashmap_disk_dir: Some(("/home/x/out/disk-baseline".into(), "ext4".into())),
        kv: Ok(kv),
        kv_p1: Some(Ok(kv_p1)),
        kv_types: Some(Ok(kvbench::Report {
            rows: vec![
                measured_row("daisy", "hset", 16, &[105.0, 98.0, 110.0]),
                measured_row("redis-none", "hset", 16, &[100.0, 100.0, 100.0]),
                measured_row("daisy", "multi", 1, &[90.0, 95.0, 80.0]),
                measured_row("redis-aof-always", "multi", 1, &[100.0, 100.0, 100.0]),
            ],
            runs: 3,
            ..Default::default()
        })),
        io: Ok(io_lab(&[
            ("daisy", Some(1.0)),
            ("libpmemblk", Some(0.5)),
            ("fio-pmemblk", Some(0.9)),
            ("fio-libpmem", None),
            ("fio-psync", Some(2.0)),
            ("pwrite", Some(2.1)),
        ])),
        verdicts: vec![],
        seconds: 95.2,
    };
    r.verdicts = vec![
        verdict("functional: data survives crashes", Status::Pass),
        verdict("not run: x", Status::NotRun),
        verdict("performance: y", Status::Fail),
        verdict("performance: z", Status::Tie),
    ];
    r
}

/// A verdict with this status, its text marked up as verdicts' texts can be.
fn verdict(name: &str, status: Status) -> Verdict {
    Verdict {
        name: name.into(),
        status,
        passed: status == Status::Pass,
        test: format!("test <{name}>"),
        requirement: "≥ 1.05x".into(),
        measured: "1,234 ns vs 5,678 ns".into(),
        checks: vec![],
        text: format!("{name}: `a` & <b>: {}", status.label()),
    }
}

/// Every part that can fail to run failed.
fn failed() -> Report {
    Report {
        power_fail: Err("daisy-powerfail was not built".into()),
        server_crash: Err("no daisy binary".into()),
        kv: Err("redis <missing>".into()),
        kv_p1: Some(Err("no redis".into())),
        kv_types: Some(Err("no redis either".into())),
        io: Err("the I/O lab <could not> run".into()),
        hashmap_disk: vec![],
        hashmap_disk_dir: None,
        level: Level::Quick,
        ..full()
    }
}

/// The text a reader sees in report.md: Markdown's marks (bold, italics, code spans, quote
/// and list markers, table pipes) dropped, whitespace collapsed.
fn md_text(md: &str) -> String {
    let lines: Vec<String> = md
        .lines()
        .map(
            |l| match l.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")) {
                // A table row: its cells, the escaped pipes in them restored.
                Some(cells) => cells
                    .split(" | ")
                    .collect::<Vec<_>>()
                    .join("  ")
                    .replace("\\|", "|"),
                // A figure's caption, in italics.
                None if l.starts_with("*Figure ") => l[1..].replacen("* (chart", " (chart", 1),
                None => l.strip_prefix("> ").unwrap_or(l).to_string(),
            },
        )
        .collect();
    collapse(&lines.join("\n").replace("**", "").replace('`', ""))
}

/// The text a reader sees in report.html: tags (and the SVG charts) dropped, entities
/// decoded, whitespace collapsed.
fn html_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    // The charts' own text (axis labels) is not report text.
    while let Some(i) = rest.find("<svg") {
        out += &rest[..i];
        rest = rest[i..].split_once("</svg>").map_or("", |(_, r)| r);
    }
    out += rest;
    // Block tags separate words; inline ones (badges, code, bold) do not.
    let mut text = String::new();
    let mut tag: Option<String> = None;
    for c in out.chars() {
        match (&mut tag, c) {
            (None, '<') => tag = Some(String::new()),
            (Some(t), '>') => {
                let name = t.trim_start_matches('/');
                let name = name.split_whitespace().next().unwrap_or("");
                if !["span", "code", "strong"].contains(&name) {
                    text.push(' ');
                }
                tag = None;
            }
            (Some(t), c) => t.push(c),
            (None, c) => text.push(c),
        }
    }
    collapse(
        &text
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

fn collapse(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// report.md and report.html render one document: every piece of text of the document
/// (headings, paragraphs, notes, list items, table cells, figure captions, glossary, verdicts)
/// is in both, and every table of the report is in the document.
#[test]
fn markdown_and_html_show_the_same_content() {
    for r in [full(), failed()] {
        let doc = content::document(&r);
        let (md, page) = (md_text(&markdown(&r)), html_text(&html(&r)));
        let texts = doc.texts();
        assert!(texts.len() > 100, "{}", texts.len());
        for t in &texts {
            let t = collapse(&t.replace('`', ""));
            assert!(md.contains(&t), "report.md lacks {t:?}");
            assert!(page.contains(&t), "report.html lacks {t:?}");
        }
        let t = tables::Tables::of(&r);
        let all: Vec<&crate::table::Table> = [
            Some(&t.environment),
            Some(&t.functional),
            t.power_fail.as_ref(),
            t.server_crash.as_ref(),
            Some(&t.tx),
            Some(&t.hashmap),
            t.hashmap_disk.as_ref(),
            t.kv.as_ref(),
            t.kv_memory.as_ref(),
            t.kv_types_memory.as_ref(),
            t.kv_p1.as_ref(),
            t.kv_types.as_ref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        // The I/O lab's tables, built by `daisy bench io`'s code.
        let mut io_tables = vec![];
        if let Ok(io) = &r.io {
            let m = &io.matrix;
            for rival in ["libpmemblk", "fio-pmemblk", "fio-libpmem"] {
                io_tables.push(crate::iobench::ratio_table(m, &io.cells, rival).0);
            }
            io_tables.push(crate::iobench::cross_check_table(m, &io.cells));
            io_tables.push(crate::iobench::cross_check_gap_table(m, &io.cells));
            for mech in &m.mechanisms {
                io_tables.push(crate::iobench::mechanism_table(m, &io.cells, mech));
            }
            io_tables.push(crate::iobench::validate::table(
                io.validation.as_ref().unwrap(),
            ));
        }
        let all: Vec<&crate::table::Table> = all.into_iter().chain(&io_tables).collect();
        let (md, page) = (markdown(&r), html(&r));
        for table in &all {
            assert!(md.contains(&table.markdown()), "{md}");
            assert!(page.contains(&table.html()), "{page}");
        }
        // The tables, and the scoreboard.
        assert_eq!(page.matches("<table").count(), all.len() + 1);
        assert_eq!(
            md.lines().filter(|l| l.starts_with("|---|")).count(),
            all.len() + 1
        );
    }
    // What report.md had and report.html lacked before they shared one document: the `~`
    // legend, the CPU-steal note, the restart caption, the method paragraphs, the extra
    // pipeline-1 table and its caption.
    let page = html(&full());
    for item in [
        "<code>~</code>: timed on a prefix and projected to N",
        "CPU steal during the request cases: 1.2%",
        "keys with 8-byte values, loaded pipelined into a fresh server",
        "A child process runs transactions",
        "At every fence of every thread of a workload",
        "<code>store-flush</code> is a bare 8-byte store",
        "more rounds of daisy and redis-none alone",
        ">101 99</td>",
        "19.5 s, seed 3, pmem (clwb).",
    ] {
        assert!(page.contains(item), "report.html lacks {item:?}");
    }
    // Seven charts in the page (the I/O lab's random writes by 1 and 4 jobs), their captions
    // in both.
    assert_eq!(page.matches("<svg").count(), 7);
    assert!(markdown(&full()).contains("*Figure 7: randwrite by 4 jobs"));
    assert!(markdown(&full()).contains("*Figure 5: latency percentiles"));
    let md = markdown(&full());
    assert!(
        md.contains("| kills |") && md.contains("| server kills |"),
        "{md}"
    );
    assert!(
        md.contains("\n| **all** |  | 1,200 | 0 | 60,000 | 0 |\n\n> 19.5 s, seed 3"),
        "{md}"
    );
    assert!(md.contains("| daisy after SIGKILL under load | 1,000,000 | - | - | 4.5 (its open 0.25 ms, 2 transactions replayed) | 1,000,000 ok | 123.0 MiB |"), "{md}");
    // What did not run says why, in both.
    let (md, page) = (markdown(&failed()), html(&failed()));
    assert!(
        md.contains("Not run: daisy-powerfail was not built."),
        "{md}"
    );
    assert!(
        page.contains("<p>Not run: daisy-powerfail was not built.</p>"),
        "{page}"
    );
    assert!(
        page.contains("<p>Pipeline-1 target rounds not run: no redis</p>"),
        "{page}"
    );
}

/// The report opens with the scoreboard: the counts of each status, then one row per verdict
/// with its badge, in both files, before any section.
#[test]
fn the_scoreboard_opens_the_report_and_counts_the_verdicts() {
    let r = full();
    let c = r.counts();
    assert_eq!(
        (c.pass, c.tie, c.fail, c.not_run),
        (1, 1, 1, 1),
        "{:?}",
        r.verdicts
    );
    let md = markdown(&r);
    let first_section = md.find("## Environment").unwrap();
    let counts = md
        .find("**1 PASS** · **1 TIE** · **1 FAIL** · **1 NOT RUN**")
        .unwrap();
    assert!(counts < first_section, "{md}");
    for v in &r.verdicts {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", v.test)))
            .unwrap_or_else(|| panic!("no scoreboard row for {}: {md}", v.test));
        assert!(
            row.ends_with(&format!("| **{}** |", v.status.label())),
            "{row}"
        );
    }
    let page = html(&r);
    assert!(
        page.find("<table class=\"scoreboard\">").unwrap() < page.find("<h2>Environment").unwrap()
    );
    for (class, label) in [
        ("pass", "PASS"),
        ("tie", "TIE"),
        ("fail", "FAIL"),
        ("notrun", "NOT RUN"),
    ] {
        // One badge in the scoreboard, one in the details, and the count.
        assert_eq!(
            page.matches(&format!("<span class=\"badge {class}\">{label}</span>"))
                .count(),
            2,
            "{class}"
        );
        assert!(page.contains(&format!("<span class=\"badge {class}\">1 {label}</span>")));
    }
    // The counts follow the verdicts.
    let mut r = full();
    r.verdicts.push(verdict("performance: w", Status::Fail));
    assert!(markdown(&r).contains("**1 PASS** · **1 TIE** · **2 FAIL** · **1 NOT RUN**"));
}

/// The exit status: a functional failure is 1 whatever the flag; a FAIL verdict is 3, or 0
/// with --allow-perf-fail; TIE and NOT RUN are 0.
#[test]
fn the_exit_status_follows_the_verdicts() {
    let mut r = full();
    assert_eq!(r.exit_status(false), EXIT_PERF_FAIL);
    assert_eq!(r.exit_status(true), 0);
    r.verdicts.retain(|v| v.status != Status::Fail);
    assert_eq!(r.exit_status(false), 0, "TIE and NOT RUN do not fail it");
    r.verdicts[0] = verdict("functional: data survives crashes", Status::Fail);
    assert_eq!(r.exit_status(false), EXIT_FUNCTIONAL_FAIL);
    assert_eq!(r.exit_status(true), EXIT_FUNCTIONAL_FAIL);
    assert!(
        r.status_line()
            .contains("(FAIL: test <functional: data survives crashes>)"),
        "{}",
        r.status_line()
    );
}

/// The CSV files keep their columns and number formats; a field with a comma is quoted; a
/// file whose rows are all missing still has its header.
#[test]
fn csv_files_keep_their_columns() {
    let d = tempfile::tempdir().unwrap();
    let mut r = full();
    let mut redb = tx("update-1", "redb", 20_000.0);
    redb.version = Some("redb 2.6.4 (pure Rust)".into());
    r.tx.push(redb);
    write(&r, d.path()).unwrap();
    let read = |name: &str| std::fs::read_to_string(d.path().join(name)).unwrap();
    let tx = read("tx.csv");
    assert!(
        tx.lines().any(|l| l.starts_with("update-1,redb,20000.0,")
            && l.ends_with(",tmpfs,redb 2.6.4 (pure Rust)")),
        "{tx}"
    );
    assert_eq!(
        tx.lines().take(3).collect::<Vec<_>>(),
        [
            "case,mechanism,ns_per_op,ops_per_s,spread_min_ns,spread_max_ns,flushes_per_op,\
             fences_per_op,runs,ops,mode,fs,version",
            "update-1,daisy,180.0,5555556,162.0,216.0,1.50,1.00,5,200000,\"pmem, clwb\",tmpfs,",
            "update-1,pmdk,450.0,2222222,405.0,540.0,-,-,5,200000,\"pmem, clwb\",tmpfs,",
        ]
    );
    let hashmap = read("hashmap.csv");
    assert_eq!(
        hashmap.lines().take(3).collect::<Vec<_>>(),
        [
            "n,mechanism,total_ms,ns_per_op,spread_min_ns,spread_max_ns,p99_ns,max_ns,\
             flushes_per_op,fences_per_op,syncs_per_op,bytes_per_entry,bytes_estimated,\
             extrapolated,runs,mode,fs,version",
            "1000,daisy,0.200,200.0,10.5,12.2,300,9000,1.43,1,,16.384,false,false,3,pmem,tmpfs,",
            "1000,msync-op,50.000,50000.0,10.5,12.2,300,9000,,,0.3333333333333333,,false,true,3,\
             pmem,tmpfs,",
        ]
    );
    let kv = read("kv.csv");
    assert_eq!(
        kv.lines().take(2).collect::<Vec<_>>(),
        [
            "server,test,pipeline,value_size,requests,rps,p50_ms,p99_ms,max_ms,runs,rps_runs,\
             sampled,fs",
            "daisy,SET,1,8,100000,120000,0.199,0.455,8.94,3,120000 110000 130000,false,tmpfs",
        ]
    );
    assert_eq!(kv.lines().count(), 13);
    // No rows: the header alone.
    if let Ok(k) = &mut r.kv {
        k.rows.clear();
    }
    write(&r, d.path()).unwrap();
    assert_eq!(read("kv.csv"), format!("{}\n", kv.lines().next().unwrap()));
    // kv.csv only when the Redis benchmark ran.
    let files = write(&failed(), d.path()).unwrap();
    assert!(!files.iter().any(|f| f.ends_with("kv.csv")), "{files:?}");
}

/// Issue 22's database verdicts: per-insert durable Daisy needs 10x each `-op` database,
/// the batch 1.05x each `-end` one; on tmpfs and, against the rows on a disk, there too.
#[test]
fn database_verdicts_need_ten_times_per_insert_and_1_05_in_bulk() {
    let env = full().environment;
    let mut rows = vec![
        hm(1000, "daisy", 1.0),
        hm(1000, "daisy-batch", 1.0),
        hm(1000, "lmdb-op", 8.0),
        hm(1000, "lmdb-end", 1.5),
        hm(1000, "redb-op", 13.0),
        hm(1000, "redb-end", 0.8),
    ];
    rows[2].version = Some("heed 0.23.1, LMDB 0.9.70".into());
    let v = verdicts::hashmap_verdicts(&rows, &env);
    let get = |v: &[Verdict], name: &str| {
        v.iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no verdict {name}: {v:?}"))
            .clone()
    };
    let l = get(&v, "performance: hash map, daisy vs lmdb-op");
    assert!(
        !l.passed && l.text.contains("8.00x") && l.text.contains("LMDB 0.9.70"),
        "{l:?}"
    );
    assert!(
        l.text.contains("at least 10x") && l.text.ends_with("FAIL"),
        "{l:?}"
    );
    assert!(get(&v, "performance: hash map, daisy-batch vs lmdb-end").passed);
    assert!(get(&v, "performance: hash map, daisy vs redb-op").passed);
    assert!(!get(&v, "performance: hash map, daisy-batch vs redb-end").passed);
    // No sqlite rows: no sqlite verdicts.
    assert!(!v.iter().any(|v| v.name.contains("sqlite")), "{v:?}");
    // On a disk: the rivals' disk rows against Daisy's NVM rows.
    let disk = vec![hm(1000, "sqlite-op", 25.0), hm(1000, "sqlite-end", 1.0)];
    let d = verdicts::disk_verdicts(&rows, &disk, &Some(("/tmp/x".into(), "ext4".into())));
    assert!(get(&d, "performance: daisy vs sqlite-op on disk").passed);
    let e = get(&d, "performance: daisy-batch vs sqlite-end on disk");
    assert!(!e.passed && e.text.contains("at least 1.05x"), "{e:?}");
}

/// Issue 24's targets: Daisy's block store at least 1.2x libpmemblk and fio's pmemblk engine
/// and at least fio's libpmem engine in every write cell, the cells that miss named with their
/// ratios; a rival that is not installed is NOT RUN with the reason; an acknowledged block lost
/// in any validation run fails the functional verdict.
#[test]
fn io_verdicts_judge_every_write_cell_and_count_lost_blocks() {
    let mut io = io_lab(&[
        ("daisy", Some(1.0)),
        ("libpmemblk", Some(0.5)),
        ("fio-pmemblk", Some(0.9)),
        ("fio-libpmem", None),
    ]);
    // One write cell where libpmemblk comes close: 1.0 / 0.85 = 1.17x, below 1.2.
    for c in io.cells.iter_mut() {
        if c.mechanism == "libpmemblk" && c.rw == "randwrite" && c.bs == 4096 && c.jobs == 4 {
            c.mb_s = c.mb_s.map(|v| v / 0.5 * 0.85);
        }
        // Read cells do not count (none in this matrix but make sure a slow one would not).
    }
    let (functional, perf) = verdicts::io_verdicts(&Ok(io.clone()));
    assert!(
        functional.passed && functional.is_functional(),
        "{functional:?}"
    );
    assert!(
        functional.measured.contains("0 lost or corrupt"),
        "{functional:?}"
    );
    let get = |name: &str| {
        perf.iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no verdict {name}: {perf:?}"))
            .clone()
    };
    let l = get("performance: block store vs libpmemblk");
    assert_eq!(l.status, Status::Fail, "{l:?}");
    assert_eq!(
        l.checks.len(),
        8,
        "every write cell: 2 kinds x 2 sizes x 2 job counts"
    );
    assert!(
        l.text.contains("below it: randwrite-4 4096 B 1.17x") && l.measured.starts_with("7 of 8"),
        "{l:?}"
    );
    assert_eq!(l.ratio_text(), "1.17x randwrite-4 4096 B (worst of 8)");
    let p = get("performance: block store vs fio-pmemblk");
    assert_eq!(p.status, Status::Fail, "1.11x everywhere: {p:?}");
    assert!(p.requirement.contains("≥ 1.20x"), "{p:?}");
    let n = get("not run: daisy vs fio-libpmem");
    assert_eq!(n.status, Status::NotRun);
    assert!(n.measured.contains("fio is not installed"), "{n:?}");
    // A lost block in Daisy's kill runs fails the functional verdict (exit status 1).
    if let Ok(rows) = &mut io.validation {
        rows[0].lost = 1;
    }
    let (functional, _) = verdicts::io_verdicts(&Ok(io));
    assert_eq!(functional.status, Status::Fail, "{functional:?}");
    // The lab could not run: the functional verdict fails, the matrix is NOT RUN.
    let (functional, perf) = verdicts::io_verdicts(&Err("no space".into()));
    assert_eq!(functional.status, Status::Fail);
    assert_eq!(perf[0].status, Status::NotRun);
}
