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

/// A stand-in for /proc/sys/vm (DAISY_SYSCTL_VM_DIR) with the kernel's defaults, so that the
/// knobs' set-and-restore runs without root.
fn fake_vm() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (k, v) in [
        ("dirty_ratio", "20"),
        ("dirty_background_ratio", "10"),
        ("dirty_expire_centisecs", "3000"),
        ("dirty_writeback_centisecs", "500"),
    ] {
        std::fs::write(d.path().join(k), format!("{v}\n")).unwrap();
    }
    d
}

fn knob(d: &Path, k: &str) -> String {
    std::fs::read_to_string(d.join(k))
        .unwrap()
        .trim()
        .to_string()
}

/// One short matrix cell with knobs set: `extra` arguments after it.
fn knob_run(vm: &Path, pools: &Path, seconds: &str) -> Command {
    let mut c = daisy();
    c.env("DAISY_SYSCTL_VM_DIR", vm)
        .args([
            "bench",
            "io",
            "--mechanisms",
            "daisy",
            "--rw",
            "randwrite",
            "--bs",
            "512",
            "--jobs",
            "1",
            "--size-mib",
            "1",
            "--seconds",
            seconds,
            "--vm-knob",
            "dirty_ratio=5",
            "--vm-knob",
            "vm.dirty_expire_centisecs=100",
        ])
        .arg("--dir")
        .arg(pools);
    c
}

#[test]
fn io_vm_knobs_are_set_for_the_run_and_restored_after_it() {
    let vm = fake_vm();
    let pools = tmpdir();
    let o = run(&mut knob_run(vm.path(), pools.path(), "0.05"));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("set vm.dirty_ratio=5 (was 20), vm.dirty_expire_centisecs=100 (was 3000)"),
        "{t}"
    );
    // The line printed during the run shows the values in force, and says they were set.
    assert!(
        t.contains(
            "page cache (set by --vm-knob for this run, restored afterwards): vm.dirty_ratio=5 "
        ),
        "{t}"
    );
    assert_eq!(knob(vm.path(), "dirty_ratio"), "20");
    assert_eq!(knob(vm.path(), "dirty_expire_centisecs"), "3000");
    assert_eq!(knob(vm.path(), "dirty_background_ratio"), "10");
}

#[test]
fn io_vm_knobs_are_restored_when_the_run_is_interrupted() {
    use std::io::BufRead;
    let vm = fake_vm();
    let pools = tmpdir();
    let mut child = knob_run(vm.path(), pools.path(), "60")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    // The cell starts after the knobs are set and the page-cache line is printed.
    while !seen.contains("page cache (set by --vm-knob") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early: {seen}");
        seen += &line;
    }
    assert_eq!(knob(vm.path(), "dirty_ratio"), "5");
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(!status.success(), "interrupted: {status:?}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("the page-cache knobs are restored"), "{err}");
    assert_eq!(knob(vm.path(), "dirty_ratio"), "20");
    assert_eq!(knob(vm.path(), "dirty_expire_centisecs"), "3000");
}

#[test]
fn io_vm_knobs_refuse_other_knobs_and_say_why_they_cannot_be_set() {
    let vm = fake_vm();
    let o = run(daisy().env("DAISY_SYSCTL_VM_DIR", vm.path()).args([
        "bench",
        "io",
        "--vm-knob",
        "swappiness=1",
    ]));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("not one of the page-cache knobs this flag sets"),
        "{}",
        text(&o)
    );
    let o = run(daisy().env("DAISY_SYSCTL_VM_DIR", vm.path()).args([
        "bench",
        "io",
        "--vm-knob",
        "dirty_ratio=150",
    ]));
    assert!(text(&o).contains("at most 100"), "{}", text(&o));
    // No such directory (no /proc/sys/vm): a clear error before anything runs.
    let o = run(daisy()
        .env("DAISY_SYSCTL_VM_DIR", vm.path().join("missing"))
        .args(["bench", "io", "--vm-knob", "dirty_ratio=5"]));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("cannot read vm.dirty_ratio"),
        "{}",
        text(&o)
    );
}
