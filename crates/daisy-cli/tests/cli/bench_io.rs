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

/// Seed 003: a workload file runs at its fixed rates against each mechanism, one JSON row per
/// rate, and leaves nothing behind.
#[test]
fn bench_io_workload_runs_its_rates_against_each_mechanism() {
    let d = tmpdir();
    let wl = d.path().join("tiny.wl");
    std::fs::write(
        &wl,
        "# tiny\nrdpct = 50\nxfersize = 4k:3, 8k:1\nthreads = 2\niorate = 200, 400\n\
         elapsed = 0.05\nwarmup = 0\nsize = 256k\n",
    )
    .unwrap();
    let work = d.path().join("work");
    let o = run(daisy()
        .args([
            "bench",
            "io",
            "--targets",
            "daisy,pwrite",
            "--format",
            "json",
        ])
        .arg("--workload")
        .arg(&wl)
        .arg("--dir")
        .arg(&work));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 2 * 2, "{}", text(&o));
    for r in &rows {
        assert_eq!(r["kind"], "iorate", "{r}");
        assert_eq!(r["workload"], "tiny", "{r}");
        assert!(r["requested"].as_f64().unwrap() >= 200.0, "{r}");
        assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
        assert!(r["p99_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn bench_io_workload_file_errors_name_the_line_and_key() {
    let d = tmpdir();
    let wl = d.path().join("bad.wl");
    std::fs::write(&wl, "name = x\nrdpct = 120\n").unwrap();
    let o = run(daisy().args(["bench", "io", "--workload"]).arg(&wl));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("bad.wl:2: rdpct: expected a percentage from 0 to 100, got \"120\""),
        "{}",
        text(&o)
    );
    let o = run(daisy().args(["bench", "io", "--validate", "--methods"]));
    assert!(!o.status.success(), "two modes at once: {}", text(&o));
}

/// Seed 003's validation: nothing acknowledged lost by Daisy after SIGKILL; under the
/// power-failure model a file never synced loses every acknowledged block and one synced
/// after every write none.
#[test]
fn bench_io_validate_counts_lost_blocks_per_mechanism() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "io",
            "--validate",
            "--kills",
            "1",
            "--sim-budget",
            "20",
        ])
        .args(["--format", "json"])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    let row = |m: &str, f: &str| {
        rows.iter()
            .find(|r| r["mechanism"] == m && r["failure"] == f)
            .unwrap_or_else(|| panic!("no row {m} / {f}: {}", text(&o)))
    };
    for m in ["daisy", "pwrite", "pwrite-fdatasync", "mmap", "mmap-msync"] {
        let r = row(m, "SIGKILL");
        assert_eq!(r["runs"], 1, "{r}");
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["corrupt"], 0, "{r}");
    }
    let never = row("file, no sync", "power failure (model)");
    assert!(never["blocks_checked"].as_u64().unwrap() > 0, "{never}");
    assert_eq!(never["lost"], never["blocks_checked"], "{never}");
    assert_eq!(
        row("file, fdatasync every write", "power failure (model)")["lost"],
        0
    );
    let sim = row("daisy", "power failure (simulator)");
    assert_eq!(sim["lost"], 0, "{sim}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

/// Seed 004: every method x sync x offsets x threads cell measured, or "unsupported" where the
/// file system refuses O_DIRECT; random reads with latency percentiles.
#[test]
fn bench_io_methods_measure_every_cell() {
    let d = tmpdir();
    let o = run(daisy()
        .args(["bench", "io", "--methods", "--quick", "--size-mib", "1"])
        .args(["--write-mib", "1", "--jobs", "1,2", "--format", "json"])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_lines(&o);
    let writes: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "method").collect();
    assert_eq!(writes.len(), 6 * 3 * 3 * 2, "{}", text(&o));
    for r in &writes {
        if r["mb_s"].as_f64().is_none() {
            assert!(
                r["note"].as_str().unwrap().starts_with("unsupported"),
                "{r}"
            );
        }
    }
    assert!(writes
        .iter()
        .any(|r| r["method"] == "pwrite" && r["mb_s"].as_f64().is_some()));
    let reads: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "randread").collect();
    assert_eq!(reads.len(), 3 * 2, "{}", text(&o));
    assert!(reads
        .iter()
        .any(|r| r["method"] == "pread" && r["p99_us"].as_f64().is_some()));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
