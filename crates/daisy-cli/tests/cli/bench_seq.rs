//! `daisy bench seq`: every operation's row for Daisy, VecDeque and (when installed) PMDK's
//! list, with the environment and the ratios; bad input refused.

use super::*;

#[test]
fn bench_seq_reports_every_row() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "seq",
            "--n",
            "2000",
            "--chunk-bytes",
            "256",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let rows = json_lines(&o);
    let have_pmdk = Path::new("/usr/lib/x86_64-linux-gnu/libpmemobj.so.1").exists();
    let row = |s: &str, op: &str| {
        rows.iter()
            .find(|r| r["structure"] == s && r["op"] == op)
            .unwrap_or_else(|| panic!("no {s} {op} row: {t}"))
    };
    let ops = [
        "push_back",
        "index",
        "range",
        "pop_front",
        "push_front",
        "pop_back",
    ];
    for op in ops {
        for s in ["daisy", "dram"] {
            let r = row(s, op);
            assert_eq!(r["bench"], "seq", "{r}");
            assert_eq!(r["n"], 2000, "{r}");
            assert_eq!(r["value_size"], 16, "{r}");
            let ns = r["ns_per_op"].as_f64().unwrap();
            assert!(ns > 0.0 && ns.is_finite(), "{r}");
            // Every op is timed over N operations, the reads over min(N, 10000).
            assert_eq!(r["ops"], 2000, "{r}");
            // VecDeque is its own baseline.
            if s == "dram" {
                assert_eq!(r["vs_dram"], 1.0, "{r}");
            }
        }
        let dz = row("daisy", op);
        let vs = dz["vs_dram"].as_f64().unwrap();
        assert!(vs > 0.0 && vs.is_finite(), "{dz}");
        assert!(dz["lines_per_op"].as_f64().is_some(), "{dz}");
        assert!(dz["fs"].as_str().is_some_and(|f| !f.is_empty()), "{dz}");
        let mode = dz["mode"].as_str().unwrap();
        assert!(
            mode.starts_with("pmem") || mode.starts_with("msync"),
            "{dz}"
        );
    }
    // Durable pushes write back lines and fence; reads do neither.
    for op in ["push_back", "push_front", "pop_front", "pop_back"] {
        let dz = row("daisy", op);
        assert!(dz["fences_per_op"].as_f64().unwrap() >= 1.0, "{dz}");
        assert!(dz["lines_per_op"].as_f64().unwrap() >= 1.0, "{dz}");
    }
    for op in ["index", "range"] {
        assert_eq!(row("daisy", op)["fences_per_op"], 0.0);
    }
    // The environment line: mode with its flush instruction, file system.
    assert!(t.contains("mode ") && t.contains(" on "), "{t}");
    if have_pmdk {
        for op in ["push_back", "pop_front", "push_front", "pop_back"] {
            let p = row("pmdk-list", op);
            assert_eq!(p["vs_pmdk"], 1.0, "{p}");
            assert!(row("daisy", op)["vs_pmdk"].as_f64().unwrap() > 0.0);
        }
        // A linked list has no index or range row.
        assert!(!rows
            .iter()
            .any(|r| r["structure"] == "pmdk-list" && (r["op"] == "index" || r["op"] == "range")));
    } else {
        assert!(t.contains("pmdk-list skipped"), "{t}");
    }
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn bench_seq_table_and_errors() {
    let d = tmpdir();
    let o = run(daisy()
        .args(["bench", "seq", "--n", "300", "--structures", "daisy,dram"])
        .arg("--dir")
        .arg(d.path()));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("vs VecDeque") && t.contains("PMDK has no deque"),
        "{t}"
    );
    // Table rows: a border, then op, N, structure.
    let names: Vec<&str> = t
        .lines()
        .map(|l| l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|l| l.split_whitespace().nth(1) == Some("300"))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(names.len(), 12, "{t}");
    assert!(!names.contains(&"pmdk-list"), "{t}");
    let o = run(daisy().args(["bench", "seq", "--structures", "bogus"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(daisy().args(["bench", "seq", "--value-size", "4"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = run(daisy()
        .args(["bench", "seq", "--n", "10", "--chunk-bytes", "100"])
        .arg("--dir")
        .arg(d.path()));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("chunk size"), "{}", text(&o));
}
