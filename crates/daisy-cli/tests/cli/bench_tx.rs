//! `daisy bench tx`: every mechanism measured, with deterministic flush and fence counts;
//! thread scaling.

use super::*;

fn rows_by(rows: &[Value], case: &str, mech: &str) -> Option<Value> {
    rows.iter()
        .find(|r| r["case"] == case && r["mechanism"] == mech)
        .cloned()
}

#[test]
fn bench_tx_reports_all_mechanisms_and_counts() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "tx",
            "--ops",
            "3000",
            "--runs",
            "1",
            "--format",
            "json",
            "--case",
            "update-1",
            "--case",
            "alloc-free",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    for mech in ["daisy", "store-flush", "msync", "fsync"] {
        let r = rows_by(&rows, "update-1", mech)
            .unwrap_or_else(|| panic!("no {mech} row: {}", text(&o)));
        for field in [
            "bench",
            "case",
            "mechanism",
            "ns_per_op",
            "ops_per_s",
            "runs",
            "mode",
        ] {
            assert!(!r[field].is_null(), "{field} missing in {r}");
        }
        assert!(r["ns_per_op"].as_f64().unwrap() > 0.0);
    }
    // Deterministic counts (not timings): one fence per transaction, at most two lines.
    let dz = rows_by(&rows, "update-1", "daisy").unwrap();
    if dz["mode"].as_str().unwrap().starts_with("pmem") {
        assert_eq!(dz["fences_per_op"].as_f64().unwrap(), 1.0, "{dz}");
        assert!(dz["flushes_per_op"].as_f64().unwrap() <= 2.0, "{dz}");
    }
    let af = rows_by(&rows, "alloc-free", "daisy").unwrap();
    assert!(af["fences_per_op"].as_f64().unwrap() <= 1.01, "{af}");
    // PMDK rows exist exactly when the library is installed.
    let have_pmdk = Path::new("/usr/lib/x86_64-linux-gnu/libpmemobj.so.1").exists();
    assert_eq!(
        rows_by(&rows, "update-1", "pmdk").is_some(),
        have_pmdk,
        "{}",
        text(&o)
    );
    // Nothing left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn bench_tx_threads_reports_scaling() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "tx",
            "--threads",
            "2",
            "--ops",
            "2000",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 2, "{}", text(&o));
    assert_eq!(rows[0]["threads"], 1);
    assert_eq!(rows[0]["scaling"], 1.0);
    assert_eq!(rows[1]["threads"], 2);
    assert!(rows[1]["ops_per_s"].as_f64().unwrap() > 0.0);
    let o = run(daisy().args(["bench", "tx", "--threads", "0"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}
