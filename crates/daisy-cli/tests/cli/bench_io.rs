//! `daisy bench io`: seed 002's matrix, a cell per mechanism x rw x block size x jobs, each
//! measured or skipped with its reason; bad input refused.

use super::*;

#[test]
fn bench_io_measures_every_cell() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "io",
            "--quick",
            "--seconds",
            "0.05",
            "--size-mib",
            "4",
            "--mechanisms",
            "daisy,libpmemblk,pwrite,fio-psync",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 4 * 2 * 2 * 2, "{}", text(&o));
    for r in &rows {
        let m = r["mechanism"].as_str().unwrap();
        match r["mb_s"].as_f64() {
            Some(v) => assert!(v > 0.0 && v.is_finite(), "{r}"),
            // Only a rival that is not installed may be skipped, and it says why.
            None => {
                assert!(m != "daisy" && m != "pwrite", "{r}");
                assert!(r["note"].as_str().unwrap().contains("install"), "{r}");
            }
        }
    }
    for rw in ["randwrite", "randread"] {
        for bs in [512, 4096] {
            for jobs in [1, 4] {
                assert!(
                    rows.iter().any(|r| r["mechanism"] == "daisy"
                        && r["rw"] == rw
                        && r["bs"] == bs
                        && r["jobs"] == jobs
                        && r["mb_s"].as_f64().is_some()),
                    "daisy {rw} {bs} {jobs}: {}",
                    text(&o)
                );
            }
        }
    }
    // Nothing left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn bench_io_refuses_bad_input() {
    for args in [
        &["--bs", "100"][..],
        &["--jobs", "0"],
        &["--seconds", "0"],
        &["--mechanisms", "nope"],
        &["--rw", "trim"],
    ] {
        let o = run(daisy().args(["bench", "io"]).args(args));
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
    }
}
