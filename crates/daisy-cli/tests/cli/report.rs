//! `daisy report`: the files, the verdicts and the page (opened in headless Chromium); the
//! file rivals on a disk.

use super::*;

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
    // The exit status a script can use: 3 when a verdict is FAIL (performance verdicts of a
    // quick debug run may well be), 0 otherwise; the functional tests pass.
    let verdicts = v["verdicts"].as_array().unwrap();
    let count = |s: &str| verdicts.iter().filter(|x| x["status"] == s).count();
    let expected = if count("Fail") > 0 { 3 } else { 0 };
    assert_eq!(o.status.code(), Some(expected), "{t}");
    assert!(
        t.contains(&format!(
            "verdicts: {} PASS, {} TIE, {} FAIL, {} NOT RUN",
            count("Pass"),
            count("Tie"),
            count("Fail"),
            count("NotRun")
        )),
        "{t}"
    );
    // The report opens with the scoreboard: the counts, one row per verdict.
    let board = md.find("## Scoreboard").expect("a scoreboard");
    assert!(board < md.find("## Environment").unwrap(), "{md}");
    assert!(
        md.contains(&format!(
            "**{} PASS** · **{} TIE**",
            count("Pass"),
            count("Tie")
        )),
        "{md}"
    );
    for x in verdicts {
        let test = x["test"].as_str().unwrap();
        assert!(
            md.contains(&format!("| {test} |")),
            "no scoreboard row for {test}"
        );
    }
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
    assert!(t.contains("Hash map, N = 100,000"), "{t}");
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
    // The I/O lab (seeds 002-004): a few cells of the matrix for every mechanism, with the
    // block store's verdicts, and the data validation (a functional verdict: nothing lost).
    assert!(
        md.contains("## 5. NVM as a block store and as files"),
        "{md}"
    );
    let io = &v["io"]["Ok"];
    let cells = io["cells"].as_array().expect("the I/O lab ran");
    for bs in [512, 4096] {
        assert!(
            cells.iter().any(|c| c["mechanism"] == "daisy"
                && c["rw"] == "randwrite"
                && c["bs"] == bs
                && c["mb_s"].as_f64().is_some_and(|x| x > 0.0)),
            "daisy randwrite {bs}: {io}"
        );
    }
    let io_functional = verdicts
        .iter()
        .find(|x| x["name"] == "functional: the block store loses no acknowledged block")
        .expect("the block store's validation verdict");
    assert_eq!(io_functional["status"], "Pass", "{io_functional}");
    assert!(
        verdicts
            .iter()
            .any(|x| x["name"] == "performance: block store vs libpmemblk"
                || x["name"] == "not run: daisy vs libpmemblk"),
        "{v}"
    );
    if io["fio"].as_str().is_some_and(|f| f.starts_with("fio-")) {
        assert!(
            md.contains("Cross-check of the load generator against fio"),
            "{md}"
        );
    }
    // Charts: transactions, two of the hash map, two of Redis when it ran, and the I/O lab's
    // random writes.
    let charts = if kv_ran { 6 } else { 4 };
    assert_eq!(page.matches("<svg").count(), charts, "charts");
    assert!(page.matches("<table>").count() >= 5, "tables");
    assert!(
        page.contains("<table class=\"scoreboard\">"),
        "the scoreboard"
    );
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
        .args(["report", "--quick", "--seed", "4", "--allow-perf-fail"])
        .arg("--out")
        .arg(out.path())
        .arg("--dir")
        .arg(pools.path()));
    let t = text(&o);
    // --allow-perf-fail: the run succeeds whatever the performance verdicts say.
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
