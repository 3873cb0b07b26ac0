//! `daisy bench hashmap`: every rival measured; get and remove; bad input refused.

use super::*;

#[test]
fn bench_hashmap_reports_every_rival() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench", "hashmap", "--n", "1000", "--runs", "1", "--format", "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    let have_pmdk = Path::new("/usr/lib/x86_64-linux-gnu/libpmemobj.so.1").exists();
    let mut mechs = vec![
        "store-flush",
        "msync-op",
        "msync-end",
        "fsync-op",
        "fsync-end",
        "dram",
    ];
    if have_pmdk {
        mechs.push("pmdk-tx");
    }
    for mech in mechs {
        let r = rows
            .iter()
            .find(|r| r["mechanism"] == mech)
            .unwrap_or_else(|| panic!("no {mech} row: {}", text(&o)));
        assert_eq!(r["bench"], "hashmap", "{r}");
        assert_eq!(r["op"], "insert", "{r}");
        assert_eq!(r["n"], 1000, "{r}");
        assert_eq!(r["runs"], 1, "{r}");
        for field in [
            "ns_per_op",
            "ops_per_s",
            "total_ms",
            "spread_min_ns",
            "spread_max_ns",
            "p99_ns",
            "max_ns",
            "speedup_vs_msync_op",
            "speedup_vs_msync_end",
            "bytes_per_entry",
        ] {
            let v = r[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{field} missing in {r}"));
            assert!(v > 0.0 && v.is_finite(), "{field} = {v} in {r}");
        }
        assert!(r["max_ns"].as_f64() >= r["p99_ns"].as_f64(), "{r}");
        assert!(!r["mode"].is_null() && !r["fs"].is_null(), "{r}");
        assert!(r["extrapolated"].is_boolean(), "{r}");
    }
    let row = |m: &str| rows.iter().find(|r| r["mechanism"] == m).unwrap();
    // The reference rows compare with themselves.
    assert_eq!(row("msync-op")["speedup_vs_msync_op"], 1.0);
    assert_eq!(row("msync-end")["speedup_vs_msync_end"], 1.0);
    // Deterministic counts: one msync per insert; one sync for the whole run at the end.
    assert_eq!(row("msync-op")["syncs_per_op"], 1.0);
    assert_eq!(row("fsync-op")["syncs_per_op"], 1.0);
    assert_eq!(row("msync-end")["syncs_per_op"], 0.001);
    let sf = row("store-flush");
    if sf["mode"].as_str().unwrap().starts_with("pmem") {
        assert_eq!(sf["flushes_per_op"], 1.0, "{sf}");
        assert_eq!(sf["fences_per_op"], 1.0, "{sf}");
    }
    // 2048 slots of 8 bytes for 1000 entries.
    assert_eq!(sf["bytes_per_entry"], 16.384);
    assert_eq!(row("dram")["bytes_estimated"], true);
    // Nothing left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn bench_hashmap_get_and_errors() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "hashmap",
            "--n",
            "500",
            "--runs",
            "1",
            "--op",
            "get",
            "--mechanisms",
            "store-flush,dram",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    // Rows only for the mechanisms asked for.
    let row_mechs: Vec<&str> = t
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("500"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(row_mechs, ["store-flush", "dram"], "{t}");
    assert!(t.contains("tmpfs") || t.contains("disk"), "{t}");
    // Unknown names and operations are refused with the known ones listed.
    let o = run(daisy().args(["bench", "hashmap", "--mechanisms", "bogus"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("bogus") && text(&o).contains("msync-end"),
        "{}",
        text(&o)
    );
    let o = run(daisy().args(["bench", "hashmap", "--op", "upsert"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("upsert"), "{}", text(&o));
    let o = run(daisy().args(["bench", "hashmap", "--n", "0"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(daisy().args(["bench", "hashmap", "--runs", "0"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}
