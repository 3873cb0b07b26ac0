//! The `daisy` command as a user runs it: real processes, real pool files.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn daisy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_daisy"))
}

fn tmpdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run daisy")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad json {l}: {e}")))
        .collect()
}

#[test]
fn pool_create_info_check() {
    let d = tmpdir();
    let p = d.path().join("a.pool");
    let o = run(daisy().args(["pool", "create"]).arg(&p).args([
        "--size",
        "16MiB",
        "--max-size",
        "1GiB",
        "--layout",
        "demo",
    ]));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("created"), "{}", text(&o));

    let o = run(daisy()
        .args(["pool", "info"])
        .arg(&p)
        .args(["--format", "json"]));
    assert!(o.status.success(), "{}", text(&o));
    let v = &json_lines(&o)[0];
    assert_eq!(v["layout"], "demo");
    assert_eq!(v["format_version"], 3);
    assert_eq!(v["objects"], 0);
    assert!(v["max_size"].as_u64().unwrap() <= 1 << 30);
    assert!(v["uuid"].as_str().unwrap().len() == 36);
    if v["fs"] == "tmpfs" {
        assert_eq!(v["mode"], "pmem");
        assert!(
            ["clwb", "clflushopt", "clflush"].contains(&v["flush_instruction"].as_str().unwrap())
        );
    }
    let o = run(daisy().args(["pool", "info"]).arg(&p));
    assert!(text(&o).contains("persistence:"), "{}", text(&o));

    let o = run(daisy().args(["pool", "check"]).arg(&p));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("check: OK"));

    // The mode override is honoured and printed.
    let q = d.path().join("m.pool");
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(&q)
        .args(["--size", "16MiB", "--mode", "msync"]));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "info"])
        .arg(&q)
        .args(["--format", "json"])
        .env("DAISY_MODE", "msync"));
    assert_eq!(json_lines(&o)[0]["mode"], "msync");
}

#[test]
fn pool_commands_refuse_bad_input_clearly() {
    let d = tmpdir();
    let p = d.path().join("a.pool");
    assert!(run(daisy()
        .args(["pool", "create"])
        .arg(&p)
        .args(["--size", "16MiB"]))
    .status
    .success());

    // Existing file.
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(&p)
        .args(["--size", "16MiB"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("already exists") && text(&o).contains("a.pool"),
        "{}",
        text(&o)
    );
    // Unparseable and too small sizes.
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(d.path().join("b.pool"))
        .args(["--size", "12XB"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("invalid size"), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(d.path().join("b.pool"))
        .args(["--size", "4KiB"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("too small"), "{}", text(&o));
    assert!(!d.path().join("b.pool").exists());
    // A file that is not a pool.
    let junk = d.path().join("junk");
    std::fs::write(&junk, b"definitely not a pool").unwrap();
    for cmd in ["info", "check"] {
        let o = run(daisy().args(["pool", cmd]).arg(&junk));
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert!(
            text(&o).contains("not a Daisy pool") && text(&o).contains("junk"),
            "{}",
            text(&o)
        );
    }
    // A directory, a missing file.
    let o = run(daisy().args(["pool", "info"]).arg(d.path()));
    assert!(text(&o).contains("is a directory"), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "info"])
        .arg(d.path().join("missing.pool")));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("missing.pool"), "{}", text(&o));
    // Wrong arguments.
    let o = run(daisy().args(["pool", "frobnicate"]));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn pool_check_reports_damaged_allocator_metadata() {
    let d = tmpdir();
    let p = d.path().join("dmg.pool");
    {
        let pool = daisy::Pool::create(
            &p,
            &daisy::PoolOptions::new("x")
                .size(16 << 20)
                .max_size(64 << 20)
                .lanes(4),
        )
        .unwrap();
        let _root = pool.root::<[u64; 4]>().unwrap();
    }
    let o = run(daisy().args(["pool", "check"]).arg(&p));
    assert!(o.status.success(), "{}", text(&o));
    // Set a bitmap bit past the last block of the root's run: allocator metadata now lies.
    let mut bytes = std::fs::read(&p).unwrap();
    let hdr: daisy::internals::Header =
        bytemuck::pod_read_unaligned(&bytes[..std::mem::size_of::<daisy::internals::Header>()]);
    let chunk0 = hdr.heap_off as usize;
    let entry = u64::from_le_bytes(
        bytes[hdr.chunk_table_off as usize..][..8]
            .try_into()
            .unwrap(),
    );
    let Some(daisy::internals::ChunkEntry::Run { class }) =
        daisy::internals::ChunkEntry::decode(entry)
    else {
        panic!("chunk 0 should hold the root's run");
    };
    let (n, data_off) = daisy::internals::run_geometry(class as usize);
    let word = (n as usize / 64) * 8;
    assert!(word < data_off as usize);
    let mut w = u64::from_le_bytes(bytes[chunk0 + word..][..8].try_into().unwrap());
    w |= 1 << 63;
    if n % 64 == 0 {
        // No spare bit in the last word: flip a whole spare word instead.
        w = u64::MAX;
    }
    bytes[chunk0 + word..chunk0 + word + 8].copy_from_slice(&w.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let o = run(daisy()
        .args(["pool", "check"])
        .arg(&p)
        .args(["--format", "json"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = &json_lines(&o)[0];
    assert_eq!(v["ok"], false);
    assert!(v["problems"][0].as_str().unwrap().contains("bitmap"), "{v}");
}

#[test]
fn crashtest_loses_nothing() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "crashtest",
            "--kills",
            "150",
            "--seed",
            "20261122",
            "--format",
            "json",
            "--max-delay-ms",
            "20",
        ])
        .arg("--dir")
        .arg(d.path()));
    let v = json_lines(&o)
        .pop()
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(v["kills"], 150, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["failures"], 0, "{v}");
    assert!(v["transactions_verified"].as_u64().unwrap() > 150, "{v}");
    assert_eq!(v["seed"], 20261122);
    // The workload's hash map grew (split) while processes were being killed.
    assert!(v["map_segments"].as_u64().unwrap() >= 2, "{v}");
    // The pool is cleaned up.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn crashtest_in_msync_mode() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "crashtest",
            "--kills",
            "30",
            "--seed",
            "7",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path())
        .env("DAISY_MODE", "msync"));
    let v = json_lines(&o)
        .pop()
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(v["mode"], "msync", "{v}");
    assert_eq!(v["lost"], 0, "{v}");
}

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

#[test]
fn report_quick_writes_files_and_verdicts() {
    let d = tmpdir();
    let out: PathBuf = d.path().join("out");
    let pools = d.path().join("pools");
    let o = run(daisy()
        .args(["report", "--quick", "--seed", "3"])
        .arg("--out")
        .arg(&out)
        .arg("--dir")
        .arg(&pools));
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("Persistence functional test") && t.contains("PASS"),
        "{t}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| kills |") && md.contains("## 2. Persistence performance test"),
        "{md}"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["functional"]["lost"], 0);
    // The KV server's kill torture, part of the functional test.
    assert!(
        t.contains("KV server kill torture: daisy serve killed 10 times"),
        "{t}"
    );
    assert_eq!(v["server_crash"]["Ok"]["lost"], 0);
    assert!(md.contains("| server kills |"), "{md}");
    assert!(v["tx"].as_array().unwrap().len() >= 6);
    assert!(std::fs::read_to_string(out.join("tx.csv"))
        .unwrap()
        .starts_with("case,mechanism"));
    // Seed 000's hash-map table, with its verdicts.
    assert!(
        md.contains("## 3. Persistence performance test: hash map"),
        "{md}"
    );
    assert!(t.contains("Hash map, N = 100000"), "{t}");
    let rows = v["hashmap"].as_array().unwrap();
    for m in [
        "daisy",
        "daisy-batch",
        "store-flush",
        "msync-op",
        "msync-end",
        "dram",
    ] {
        assert!(
            rows.iter().any(|r| r["mechanism"] == m && r["n"] == 100000),
            "{m} missing"
        );
    }
    assert!(std::fs::read_to_string(out.join("hashmap.csv"))
        .unwrap()
        .starts_with("n,mechanism"));
    // One self-contained page: the verdicts, the tables and the charts (SVG).
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    // Seed 000's Redis table, when redis-server and redis-benchmark are installed (CI
    // installs them): two more charts, the table, kv.csv and the restart verdict.
    assert!(
        md.contains("## 4. Persistence performance test: Redis"),
        "{md}"
    );
    let kv_ran = v["kv"]["Ok"].is_object();
    if kv_ran {
        assert!(t.contains("Restart with 100000 keys"), "{t}");
        assert!(
            t.contains("Restart with 100000 keys after SIGKILL under a pipelined SET load"),
            "{t}"
        );
        assert!(md.contains("daisy after SIGKILL under load"), "{md}");
        assert!(std::fs::read_to_string(out.join("kv.csv"))
            .unwrap()
            .starts_with("server,test"));
        let kv_rows = v["kv"]["Ok"]["rows"].as_array().unwrap();
        assert!(kv_rows
            .iter()
            .any(|r| r["server"] == "daisy" && r["rps"].as_f64().unwrap() > 0.0));
        assert!(kv_rows.iter().any(|r| r["server"] == "redis-aof-always"));
    } else {
        println!("Redis benchmark not run: {}", v["kv"]);
    }
    let charts = if kv_ran { 5 } else { 3 };
    assert_eq!(page.matches("<svg").count(), charts, "charts");
    assert!(page.matches("<table>").count() >= 5, "tables");
    assert!(page.contains("ns per insert") && page.contains("daisy-batch"));
    assert!(!page.contains("<script"), "no scripts: readable offline");
    look_at_it_in_chromium(&out.join("report.html"), charts);
}

/// Open the report as a person would: headless Chromium renders it (tables and charts in the
/// DOM after layout) and takes a screenshot, kept at target/report-screenshot.png to look at.
fn look_at_it_in_chromium(page: &Path, charts: usize) {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(chromium) = chromium else {
        println!("SKIPPED the Chromium check: no chromium (Debian package chromium; scripts/install-deps.sh installs it)");
        return;
    };
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ];
    let dom = std::process::Command::new(chromium)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<h1>Daisy test report</h1>"),
        "chromium rendered: {dom:.300}"
    );
    assert!(
        dom.matches("<table>").count() >= 5,
        "tables in the rendered page"
    );
    assert_eq!(
        dom.matches("<svg").count(),
        charts,
        "charts in the rendered page"
    );
    let shot = page.with_file_name("screenshot.png");
    let o = std::process::Command::new(chromium)
        .args(common)
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,6000")
        .arg(&url)
        .output()
        .unwrap();
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {}", text(&o)));
    assert_eq!(&png[1..4], b"PNG");
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1280, 6000), "screenshot size");
    // A blank page compresses to a few KB; tables, text and charts do not.
    assert!(
        png.len() > 100_000,
        "screenshot of {} bytes looks blank",
        png.len()
    );
    let keep = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshot.png");
    let _ = std::fs::copy(&shot, keep);
}

/// `pool check` finds hash maps in any pool and verifies their invariants; damage fails it.
#[test]
fn pool_check_verifies_hash_maps() {
    use daisy::{PHashMap, PPtr, Pool, PoolOptions};
    let d = tmpdir();
    let path = d.path().join("maps.pool");
    {
        let pool = Pool::create(&path, &PoolOptions::new("app").size(16 << 20)).unwrap();
        let root = pool.root::<PPtr<PHashMap<u32, u32>>>().unwrap();
        let id = pool
            .transaction(|tx| {
                let id = PHashMap::<u32, u32>::create_in_with_seed(tx, 1)?;
                tx.write(root, &id)?;
                Ok::<_, daisy::Error>(id)
            })
            .unwrap();
        let mut m = PHashMap::open(&pool, id).unwrap();
        for k in 0..5000 {
            m.insert(k, k * 3).unwrap();
        }
    }
    let o = run(daisy().args(["pool", "check"]).arg(&path));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("fixed-size hash map at")
            && t.contains("5000 entries")
            && t.contains("invariants hold"),
        "{t}"
    );
    // Damage: one entry's key overwritten with another's (a key stored twice, one lost).
    {
        let pool = Pool::open(&path, "app").unwrap();
        let seg = pool
            .objects()
            .unwrap()
            .into_iter()
            .find(|o| o.size == 16384)
            .unwrap()
            .off;
        let mut img = vec![0u8; 16384];
        pool.read_bytes(seg, &mut img);
        let live: Vec<usize> = (0..2048)
            .map(|i| i * 8)
            .filter(|&o| img[o..o + 4] != [0xFF; 4])
            .collect();
        let (a, b) = (live[0], live[1]);
        let key_a = img[a..a + 4].to_vec();
        pool.transaction(|tx| tx.write_bytes(seg + b as u64, &key_a))
            .unwrap();
    }
    let o = run(daisy()
        .args(["pool", "check", "--format", "json"])
        .arg(&path));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: Value = json_lines(&o).pop().unwrap();
    assert_eq!(v["ok"], false);
    let maps = v["hash_maps"].as_array().unwrap();
    assert_eq!(maps.len(), 1);
    let problems = maps[0]["problems"].to_string();
    assert!(
        problems.contains("stored twice")
            || problems.contains("another segment")
            || problems.contains("home"),
        "{problems}"
    );
}

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

#[test]
fn help_is_available_everywhere() {
    for args in [
        vec!["--help"],
        vec!["pool", "--help"],
        vec!["pool", "create", "--help"],
        vec!["pool", "info", "--help"],
        vec!["pool", "check", "--help"],
        vec!["crashtest", "--help"],
        vec!["bench", "tx", "--help"],
        vec!["bench", "hashmap", "--help"],
        vec!["bench", "kv", "--help"],
        vec!["report", "--help"],
    ] {
        let o = run(daisy().args(&args));
        assert!(o.status.success(), "{args:?}");
        assert!(text(&o).contains("Usage"), "{args:?}");
    }
}

/// With the pools on tmpfs and the report written to a disk, the file rivals also run on the
/// disk (seed 000's setting) and get verdicts of their own. Skipped where the temporary
/// directory is itself on tmpfs.
#[test]
fn report_measures_file_rivals_on_a_disk() {
    let out = tempfile::tempdir().unwrap();
    let fs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(out.path())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if fs == "tmpfs" || fs.is_empty() {
        eprintln!("skipped: {} is on {fs:?}", out.path().display());
        return;
    }
    let pools = tmpdir();
    let o = run(daisy()
        .args(["report", "--quick", "--seed", "4"])
        .arg("--out")
        .arg(out.path())
        .arg("--dir")
        .arg(pools.path()));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("File persistence on a disk") && t.contains("on a disk file"),
        "{t}"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    let rows = v["hashmap_disk"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["mechanism"] == "msync-op"), "{v}");
    assert!(
        !out.path().join("disk-baseline").exists(),
        "scratch files removed"
    );
}

/// Whether redis-server and redis-benchmark are installed (Debian redis-server, redis-tools).
fn have_redis() -> bool {
    let found = |name: &str| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
            .unwrap_or(false)
    };
    found("redis-server") && found("redis-benchmark")
}

/// Processes whose command line mentions `dir` or that run in it (redis-server rewrites its
/// command line but works in its --dir): servers the benchmark started there.
fn processes_in(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let c = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let c = String::from_utf8_lossy(&c).replace('\0', " ");
        let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
        if c.contains(&needle) || cwd.starts_with(dir) {
            v.push(format!("{c} (in {})", cwd.display()));
        }
    }
    v
}

fn port_accepts(port: u64) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port as u16)),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

#[test]
fn bench_kv_against_redis() {
    if !have_redis() {
        eprintln!(
            "skipped: redis-server or redis-benchmark not installed (Debian redis-server, \
             redis-tools; scripts/install-deps.sh installs them)"
        );
        return;
    }
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "kv",
            "--n",
            "2000",
            "--tests",
            "set,get",
            "--pipeline",
            "1",
            "--servers",
            "redis-none,redis-aof-always",
            "--restart-keys",
            "2000",
            "--runs",
            "2",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let lines = json_lines(&o);
    let mut ports = vec![];
    for server in ["redis-none", "redis-aof-always"] {
        for test in ["set", "get"] {
            let r = lines
                .iter()
                .find(|r| r["kind"] == "requests" && r["server"] == server && r["test"] == test)
                .unwrap_or_else(|| panic!("no {server} {test} row: {}", text(&o)));
            assert_eq!(r["bench"], "kv", "{r}");
            assert_eq!(r["requests"], 2000, "{r}");
            assert_eq!(r["pipeline"], 1, "{r}");
            assert_eq!(r["value_size"], 8, "{r}");
            assert_eq!(r["clients"], 50, "{r}");
            // Two rounds over both servers, merged into one row per case.
            assert_eq!(r["runs"], 2, "{r}");
            let (lo, mid, hi) = (
                r["rps_min"].as_f64(),
                r["rps"].as_f64(),
                r["rps_max"].as_f64(),
            );
            assert!(lo <= mid && mid <= hi, "min <= median <= max: {r}");
            // Each round's figure is kept, in round order; the row's figures are theirs.
            let each: Vec<f64> = r["rps_runs"]
                .as_array()
                .unwrap_or_else(|| panic!("rps_runs missing in {r}"))
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert_eq!(each.len(), 2, "{r}");
            assert_eq!(lo, Some(each[0].min(each[1])), "{r}");
            assert_eq!(hi, Some(each[0].max(each[1])), "{r}");
            assert!(
                (mid.unwrap() - (each[0] + each[1]) / 2.0).abs() < 1e-6,
                "{r}"
            );
            for f in ["rps", "p50_ms", "p99_ms", "max_ms", "elapsed_ms"] {
                let v = r[f]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{f} missing in {r}"));
                assert!(v > 0.0 && v.is_finite(), "{f} = {v} in {r}");
            }
            assert!(r["max_ms"].as_f64() >= r["p99_ms"].as_f64(), "{r}");
            assert!(r["vs_redis_none"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["vs_redis_aof_always"].as_f64().unwrap() > 0.0, "{r}");
            assert_eq!(r["dir"], d.path().to_string_lossy().as_ref(), "{r}");
            // 2000 SETs on 100,000 random keys leave between 1 and 2000 of them.
            let keys = r["keys_after"].as_u64().unwrap();
            assert!(keys > 0 && keys <= 2000, "{r}");
            ports.push(r["port"].as_u64().unwrap());
        }
        let m = lines
            .iter()
            .find(|r| r["kind"] == "memory" && r["server"] == server)
            .unwrap_or_else(|| panic!("no {server} memory line: {}", text(&o)));
        assert_eq!(m["keys"], 2000, "{m}");
        assert!(m["bytes_per_key"].as_f64().unwrap() > 8.0, "{m}");
    }
    // Restart: only the modes that keep data (redis-none has nothing to restart from).
    let r = lines
        .iter()
        .find(|r| r["kind"] == "restart" && r["server"] == "redis-aof-always")
        .unwrap_or_else(|| panic!("no restart line: {}", text(&o)));
    assert_eq!(r["keys"], 2000, "{r}");
    assert_eq!(r["dbsize"], 2000, "{r}");
    assert_eq!(r["dbsize_ok"], true, "{r}");
    assert!(r["restart_ms"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["data_bytes"].as_u64().unwrap() > 2000 * 8, "{r}");
    ports.push(r["port"].as_u64().unwrap());
    assert!(
        !lines
            .iter()
            .any(|r| r["kind"] == "restart" && r["server"] == "redis-none"),
        "{}",
        text(&o)
    );
    assert!(
        !lines.iter().any(|r| r["kind"] == "unavailable"),
        "{}",
        text(&o)
    );
    // Nothing left running, nothing left behind.
    for p in ports {
        assert!(!port_accepts(p), "port {p} still accepts connections");
    }
    assert_eq!(processes_in(d.path()), Vec::<String>::new());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    // Table output says how it measured.
    let o = run(daisy()
        .args([
            "bench",
            "kv",
            "--n",
            "1000",
            "--tests",
            "incr",
            "--pipeline",
            "4",
            "--servers",
            "redis-none",
            "--restart-keys",
            "0",
        ])
        .arg("--dir")
        .arg(d.path()));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("redis-benchmark") && t.contains("7."), "{t}");
    assert!(t.contains("tmpfs") || t.contains("disk"), "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("INCR") && l.contains("redis-none")),
        "{t}"
    );
    assert!(!t.contains("restart ms"), "{t}");
}

/// Seed 001's key patterns: `--keys new` draws keys from 2^31 - 1 so nearly every SET creates
/// one; `--keys update` preloads the keys (100,000 for 8-byte values), so every SET replaces a
/// value and the keyspace ends exactly that size. Measured on daisy and Redis alike.
#[test]
fn bench_kv_new_keys_and_updates() {
    if !have_redis() {
        eprintln!("skipped: redis-server or redis-benchmark not installed");
        return;
    }
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "kv",
            "--n",
            "3000",
            "--tests",
            "set,get",
            "--pipeline",
            "1",
            "--keys",
            "new,update",
            "--servers",
            "daisy,redis-none",
            "--restart-keys",
            "0",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    assert!(o.status.success(), "{}", text(&o));
    let lines = json_lines(&o);
    for server in ["daisy", "redis-none"] {
        for test in ["set", "get"] {
            let row = |keys: &str| {
                lines
                    .iter()
                    .find(|r| r["server"] == server && r["test"] == test && r["keys"] == keys)
                    .unwrap_or_else(|| panic!("no {server} {test} {keys} row: {}", text(&o)))
            };
            let new = row("new");
            assert_eq!(new["keyspace"], 2147483647u64, "{new}");
            // 3000 SETs drawn from 2^31 - 1 keys: a repeat is a one-in-hundreds event.
            let k = new["keys_after"].as_u64().unwrap();
            assert!((2990..=3000).contains(&k), "{new}");
            let upd = row("update");
            assert_eq!(upd["keyspace"], 100000, "{upd}");
            assert_eq!(upd["keys_after"], 100000, "{upd}");
            for r in [new, upd] {
                assert!(r["rps"].as_f64().unwrap() > 0.0, "{r}");
                assert!(r["vs_redis_none"].as_f64().unwrap() > 0.0, "{r}");
            }
        }
    }
    assert!(
        !lines.iter().any(|r| r["kind"] == "unavailable"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

/// `daisy serve` is measured when it answers, and otherwise reported unavailable with the
/// reason; the run goes on either way.
#[test]
fn bench_kv_reports_daisy_measured_or_unavailable() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "bench",
            "kv",
            "--n",
            "1000",
            "--pipeline",
            "1",
            "--servers",
            "daisy",
            "--restart-keys",
            "1000",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path()));
    let lines = json_lines(&o);
    let unavailable = lines
        .iter()
        .find(|r| r["kind"] == "unavailable" && r["server"] == "daisy");
    match unavailable {
        Some(u) => {
            assert!(o.status.success(), "{}", text(&o));
            assert_eq!(u["status"], "unavailable", "{u}");
            let why = u["reason"].as_str().unwrap();
            assert!(why.contains("daisy serve") && why.len() > 30, "{u}");
        }
        None => {
            assert!(o.status.success(), "{}", text(&o));
            if have_redis() {
                for test in ["set", "get"] {
                    let r = lines
                        .iter()
                        .find(|r| r["kind"] == "requests" && r["test"] == test)
                        .unwrap_or_else(|| panic!("no daisy {test} row: {}", text(&o)));
                    assert_eq!(r["server"], "daisy", "{r}");
                    assert!(r["rps"].as_f64().unwrap() > 0.0, "{r}");
                }
            }
            let r = lines
                .iter()
                .find(|r| r["kind"] == "restart" && r["server"] == "daisy")
                .unwrap_or_else(|| panic!("no daisy restart line: {}", text(&o)));
            assert_eq!(r["dbsize_ok"], true, "{r}");
            assert_eq!(r["after"], "shutdown", "{r}");
            // And after SIGKILL under a write load: every key there, the server's own open
            // reported.
            let k = lines
                .iter()
                .find(|r| r["kind"] == "restart" && r["after"] == "sigkill")
                .unwrap_or_else(|| panic!("no restart after SIGKILL: {}", text(&o)));
            assert_eq!(k["server"], "daisy", "{k}");
            assert_eq!(k["dbsize_ok"], true, "{k}");
            assert!(k["recovery_ms"].as_f64().unwrap() > 0.0, "{k}");
            assert!(k["restart_ms"].as_f64().unwrap() > 0.0, "{k}");
        }
    }
    assert_eq!(processes_in(d.path()), Vec::<String>::new());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    // Bad input is refused clearly.
    let o = run(daisy().args(["bench", "kv", "--servers", "bogus"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("redis-aof-always"), "{}", text(&o));
    let o = run(daisy().args(["bench", "kv", "--tests", "lpush"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(daisy().args(["bench", "kv", "--runs", "0"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--runs"), "{}", text(&o));
}
