//! `daisy bench tree`: the ordered map against std's BTreeMap and PMDK's B-tree, every row
//! there, what was measured and how printed; bad input refused.

use super::*;

#[test]
fn bench_tree_reports_every_structure() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench", "tree", "--n", "600", "--seed", "7", "--format", "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    // PMDK's example is compiled at run time: it needs the library, its examples and cc.
    let have_pmdk = Path::new("/usr/lib/x86_64-linux-gnu/libpmemobj.so").exists()
        && Path::new("/usr/share/doc/libpmemobj-dev/examples/tree_map/btree_map.c").exists()
        && Command::new("cc").arg("--version").output().is_ok();
    let mut want = vec![];
    for op in ["insert", "get", "rank", "range", "remove"] {
        want.push((op, "daisy"));
        if op != "rank" {
            want.push((op, "dram"));
        }
        if have_pmdk && matches!(op, "insert" | "get" | "remove") {
            want.push((op, "pmdk-btree"));
        }
    }
    for (op, s) in &want {
        let r = rows
            .iter()
            .find(|r| r["op"] == *op && r["structure"] == *s)
            .unwrap_or_else(|| panic!("no {op}/{s} row: {}", text(&o)));
        assert_eq!(r["n"], 600, "{r}");
        let ns = r["ns_per_op"].as_f64().unwrap();
        assert!(ns > 0.0 && ns.is_finite(), "{r}");
        let ops = r["ops"].as_u64().unwrap();
        assert_eq!(ops, 600, "{r}");
        assert!(!r["mode"].as_str().unwrap().is_empty(), "{r}");
        assert!(!r["fs"].as_str().unwrap().is_empty(), "{r}");
        if *op != "rank" {
            assert!(r["vs_dram"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    assert_eq!(rows.len(), want.len(), "{}", text(&o));
    let row = |op: &str, s: &str| {
        rows.iter()
            .find(|r| r["op"] == op && r["structure"] == s)
            .unwrap()
    };
    // Daisy's inserts and removals are durable one by one: a fence or so each, lines written
    // back; its reads write nothing back.
    let ins = row("insert", "daisy");
    if ins["mode"].as_str().unwrap().starts_with("pmem") {
        let fences = ins["fences_per_op"].as_f64().unwrap();
        assert!((1.0..2.0).contains(&fences), "{ins}");
        assert!(ins["lines_per_op"].as_f64().unwrap() >= 2.0, "{ins}");
    }
    assert_eq!(row("get", "daisy")["fences_per_op"], 0.0);
    assert_eq!(row("insert", "dram")["vs_dram"], 1.0);
    if have_pmdk {
        for op in ["insert", "get", "remove"] {
            let r = row(op, "daisy");
            let x = r["speedup_vs_pmdk"].as_f64().unwrap();
            let want = row(op, "pmdk-btree")["ns_per_op"].as_f64().unwrap()
                / r["ns_per_op"].as_f64().unwrap();
            assert!((x / want - 1.0).abs() < 1e-9, "{r}");
        }
    } else {
        assert!(text(&o).contains("pmdk-btree skipped"), "{}", text(&o));
    }
    // Nothing left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);

    // The table: what was measured and how, then the rows with their ratios.
    let o = run(daisy()
        .args(["bench", "tree", "--n", "300", "--structures", "daisy,dram"])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for s in [
        "sorted-set keys",
        "seed 1",
        "persistence mode",
        "CPU flush instructions",
        "vs BTreeMap",
        "PMDK / Daisy",
    ] {
        assert!(out.contains(s), "{s:?} missing: {out}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("insert") && l.contains("daisy")),
        "{out}"
    );
    assert!(!out.contains("pmdk-btree  "), "{out}");

    // Bad input is refused.
    let o = run(daisy()
        .args(["bench", "tree", "--n", "10", "--node-size", "300"])
        .arg("--dir")
        .arg(d.path()));
    assert!(!o.status.success());
    assert!(text(&o).contains("--node-size"), "{}", text(&o));
}
