//! `daisy bench kv`: redis-benchmark against redis-server and `daisy serve`; the key
//! patterns; a server that does not start reported unavailable; nothing left running.

use super::*;

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
    let o = run(daisy().args(["bench", "kv", "--tests", "hincrby"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(daisy().args(["bench", "kv", "--runs", "0"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--runs"), "{}", text(&o));
}
