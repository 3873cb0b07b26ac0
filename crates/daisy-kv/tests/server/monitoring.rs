//! Monitoring as Redis: SLOWLOG, LATENCY, INFO's figures under load, and the tools that read
//! them (redis-cli --stat, --memkeys, --bigkeys; Debian's prometheus-redis-exporter).

use super::*;
use std::process::{Command, Stdio};

fn cmd(c: &mut Connection, args: &[&str]) -> redis::Value {
    let mut k = redis::cmd(args[0]);
    for a in &args[1..] {
        k.arg(*a);
    }
    k.query(c).unwrap()
}

fn ok(c: &mut Connection, args: &[&str]) {
    assert_eq!(cmd(c, args), redis::Value::Okay, "{args:?}");
}

/// A slow log entry: (id, duration in µs, arguments, client name).
type Entry = (i64, i64, i64, Vec<Vec<u8>>, String, String);

fn slowlog(c: &mut Connection, n: i64) -> Vec<Entry> {
    redis::cmd("SLOWLOG").arg("GET").arg(n).query(c).unwrap()
}

fn args_of(e: &Entry) -> Vec<String> {
    e.3.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// SLOWLOG as Redis keeps it: every command at threshold 0 (newest first, with the client's
/// name), none at -1, at most slowlog-max-len, long argument lists and long arguments trimmed,
/// passwords redacted, RESET and LEN, GET's count checked.
#[test]
fn slowlog_logs_trims_and_redacts() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(&mut c, &["CLIENT", "SETNAME", "watcher"]);
    ok(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    ok(&mut c, &["SLOWLOG", "RESET"]);
    ok(&mut c, &["SET", "k", "v"]);
    let _: i64 = c.incr("n", 1).unwrap();
    let log = slowlog(&mut c, -1);
    assert_eq!(args_of(&log[0]), ["INCRBY", "n", "1"]);
    assert_eq!(log[1].3[0], b"SET");
    assert_eq!(log[1].5, "watcher");
    assert!(log[0].0 > log[1].0, "newest first: {log:?}");
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert!(len >= 3, "{len}");
    // Trimming: 33 arguments keep 31 and a count; 129 bytes keep 128 and a count.
    ok(&mut c, &["SLOWLOG", "RESET"]);
    let mut big = redis::cmd("SADD");
    big.arg("set");
    for i in 3..=33 {
        big.arg(i);
    }
    let _: i64 = big.query(&mut c).unwrap();
    let long = "A".repeat(129);
    let _: i64 = redis::cmd("SADD")
        .arg("set")
        .arg("foo")
        .arg(&long)
        .query(&mut c)
        .unwrap();
    let log = slowlog(&mut c, 10);
    let a = args_of(&log[0]);
    assert_eq!(a[3], format!("{}... (1 more bytes)", &long[..128]));
    let a = args_of(&log[1]);
    assert_eq!(a.len(), 32);
    assert_eq!(a[31], "... (2 more arguments)");
    assert_eq!(a[30], "31");
    // Secrets never reach the log.
    ok(&mut c, &["SLOWLOG", "RESET"]);
    ok(&mut c, &["CONFIG", "SET", "masterauth", "hunter2"]);
    let log = slowlog(&mut c, 1);
    assert_eq!(
        args_of(&log[0]),
        ["CONFIG", "SET", "masterauth", "(redacted)"]
    );
    // At most slowlog-max-len entries; none when the threshold is -1.
    ok(&mut c, &["CONFIG", "SET", "slowlog-max-len", "5"]);
    for _ in 0..20 {
        let _: String = redis::cmd("PING").query(&mut c).unwrap();
    }
    assert_eq!(slowlog(&mut c, -1).len(), 5);
    ok(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    ok(&mut c, &["SLOWLOG", "RESET"]);
    let _: String = redis::cmd("PING").query(&mut c).unwrap();
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert_eq!(len, 0);
    let e = err_text(redis::cmd("SLOWLOG").arg("GET").arg(-2).query::<()>(&mut c));
    assert_eq!(e, "ERR count should be greater than or equal to -1");
    drop(c);
    srv.stop();
}

/// LATENCY: HISTOGRAM counts every call of the commands asked for (a container's
/// subcommands each), a slow command over the threshold is a "command" event in LATEST and
/// HISTORY, DOCTOR says something, RESET clears.
#[test]
fn latency_monitor_records_events_and_histograms() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    ok(&mut c, &["SET", "a", "b"]);
    ok(&mut c, &["SET", "c", "d"]);
    let _: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    let h: Vec<redis::Value> = redis::cmd("LATENCY")
        .arg("HISTOGRAM")
        .arg("set")
        .arg("client")
        .arg("nosuch")
        .query(&mut c)
        .unwrap();
    let text = format!("{h:?}");
    assert_eq!(h.len(), 4, "{text}");
    assert_eq!(h[0], redis::Value::BulkString(b"set".to_vec()), "{text}");
    assert_eq!(
        h[2],
        redis::Value::BulkString(b"client|id".to_vec()),
        "{text}"
    );
    let redis::Value::Array(set) = &h[1] else {
        panic!("{text}")
    };
    assert_eq!(set[0], redis::Value::BulkString(b"calls".to_vec()));
    assert_eq!(set[1], redis::Value::Int(2));
    // A command slower than 1 ms is an event.
    ok(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    let mut p = redis::pipe();
    for chunk in 0..50 {
        let mut k = redis::cmd("RPUSH");
        k.arg("big");
        for i in 0..2000 {
            k.arg(chunk * 2000 + i);
        }
        p.add_command(k).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    // SORT of 100,000 numbers takes well over a millisecond.
    let _: Vec<String> = redis::cmd("SORT")
        .arg("big")
        .arg("LIMIT")
        .arg(0)
        .arg(1)
        .query(&mut c)
        .unwrap();
    let latest: Vec<(String, i64, i64, i64)> =
        redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    let ev = latest
        .iter()
        .find(|e| e.0 == "command")
        .unwrap_or_else(|| panic!("no command event: {latest:?}"));
    assert!(ev.2 >= 1 && ev.3 >= ev.2, "{latest:?}");
    let hist: Vec<(i64, i64)> = redis::cmd("LATENCY")
        .arg("HISTORY")
        .arg("command")
        .query(&mut c)
        .unwrap();
    assert!(
        !hist.is_empty() && hist.iter().all(|s| s.1 >= 1),
        "{hist:?}"
    );
    let graph: String = redis::cmd("LATENCY")
        .arg("GRAPH")
        .arg("command")
        .query(&mut c)
        .unwrap();
    assert!(graph.starts_with("command - high "), "{graph}");
    let doc: String = redis::cmd("LATENCY").arg("DOCTOR").query(&mut c).unwrap();
    assert!(doc.contains("command"), "{doc}");
    let n: i64 = redis::cmd("LATENCY").arg("RESET").query(&mut c).unwrap();
    assert!(n >= 1);
    let latest: Vec<redis::Value> = redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    assert!(latest.is_empty());
    let e = err_text(
        redis::cmd("LATENCY")
            .arg("GRAPH")
            .arg("command")
            .query::<()>(&mut c),
    );
    assert_eq!(e, "ERR No samples available for event 'command'");
    drop(c);
    srv.stop();
}

/// INFO's figures a monitoring tool reads are there and move: every section, ops per second
/// above zero under load, network bytes, memory with its RSS and peak, a master with no
/// replicas, command and error stats.
#[test]
fn info_fields_present_and_sane_under_load() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let addr = srv.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let batch = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".repeat(100);
            let mut buf = vec![0u8; 1 << 16];
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.write_all(&batch).unwrap();
                let mut got = 0;
                while got < 500 {
                    got += s.read(&mut buf).unwrap();
                }
                sent += 100;
            }
            sent
        })
    };
    let t0 = std::time::Instant::now();
    let mut ops = 0;
    while ops == 0 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(300));
        ops = info_field(&mut c, "stats", "instantaneous_ops_per_sec");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = load.join().unwrap();
    assert!(ops > 0, "instantaneous_ops_per_sec stayed 0 under load");
    assert!(info_field(&mut c, "stats", "total_commands_processed") >= sent);
    assert!(info_field(&mut c, "stats", "total_net_input_bytes") >= sent * 25);
    assert!(info_field(&mut c, "stats", "total_net_output_bytes") >= sent * 5);
    assert!(info_field(&mut c, "memory", "used_memory_rss") > 1 << 20);
    assert!(
        info_field(&mut c, "memory", "used_memory_peak")
            >= info_field(&mut c, "memory", "used_memory")
    );
    assert_eq!(info_field(&mut c, "replication", "connected_slaves"), 0);
    // MEMORY STATS: Redis's fields, the same figures.
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(&mut c).unwrap();
    let field = |name: &str| -> i64 {
        let at = stats
            .iter()
            .position(|v| *v == redis::Value::BulkString(name.as_bytes().to_vec()))
            .unwrap_or_else(|| panic!("MEMORY STATS has no {name}: {stats:?}"));
        match &stats[at + 1] {
            redis::Value::Int(n) => *n,
            v => panic!("{name}: {v:?}"),
        }
    };
    assert_eq!(field("keys.count"), 1);
    assert!(field("total.allocated") >= field("dataset.bytes"));
    assert!(field("dataset.bytes") > 0 && field("peak.allocated") > 0);
    assert!(stats.contains(&redis::Value::BulkString(b"db.0".to_vec())));
    let all: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Modules",
        "# Commandstats",
        "# Errorstats",
        "# Latencystats",
        "# Cluster",
        "# Keyspace",
    ] {
        assert!(all.contains(section), "{section} missing");
    }
    for field in [
        "role:master",
        "cmdstat_set:calls=",
        "latency_percentiles_usec_set:p50=",
        "used_cpu_sys:",
        "db0:keys=1,",
        "uptime_in_seconds:",
        "connected_clients:",
    ] {
        assert!(all.contains(field), "{field} missing:\n{all}");
    }
    drop(c);
    srv.stop();
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// redis-cli's monitoring modes read the server: --stat's rows count the keys and clients,
/// --memkeys reports non-zero bytes for the biggest key, --bigkeys finds the biggest of each
/// type.
#[test]
fn redis_cli_stat_memkeys_and_bigkeys() {
    if !have("redis-cli") {
        eprintln!("redis-cli missing (apt-get install redis-tools): skipped");
        return;
    }
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = c.set("small", "x").unwrap();
    let _: () = c.set("large-string", "y".repeat(10_000)).unwrap();
    let _: () = c.rpush("list", (0..500).collect::<Vec<i32>>()).unwrap();
    let _: () = c.hset("hash", "f", "v").unwrap();
    let port = srv.addr.port().to_string();
    let run = |mode: &str| -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &port, mode])
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let big = run("--bigkeys");
    assert!(
        big.contains("Biggest string found '\"large-string\"' has 10000 bytes"),
        "{big}"
    );
    assert!(
        big.contains("Biggest   list found '\"list\"' has 500 items"),
        "{big}"
    );
    assert!(
        big.contains("Biggest   hash found '\"hash\"' has 1 fields"),
        "{big}"
    );
    assert!(big.contains("Sampled 4 keys in the keyspace!"), "{big}");
    let mem = run("--memkeys");
    assert!(mem.contains("Sampled 4 keys in the keyspace!"), "{mem}");
    let line = mem
        .lines()
        .find(|l| l.starts_with("Biggest string found '\"large-string\"' has "))
        .unwrap_or_else(|| panic!("{mem}"));
    let bytes: u64 = line
        .split(" has ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(bytes >= 10_000, "{line}");
    // --stat runs until stopped: read its first rows (line-buffered: it never flushes).
    let mut child = Command::new("stdbuf")
        .args(["-oL", "redis-cli", "-p", &port, "--stat", "-i", "0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert!(lines.next().unwrap_or_default().contains("data"), "{text}");
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header[..3], ["keys", "mem", "clients"], "{text}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert!(rows.len() >= 2, "{text}");
    for row in &rows {
        assert_eq!(row[0], "4", "keys: {text}");
        assert!(
            row[1].ends_with('B') || row[1].ends_with('K') || row[1].ends_with('M'),
            "{text}"
        );
        let clients: u64 = row[2].parse().unwrap();
        assert!(clients >= 2, "{text}");
    }
    // Its requests column counts up (each row's INFO is a request).
    let req = |r: &Vec<&str>| r[4].parse::<u64>().unwrap();
    assert!(req(&rows[rows.len() - 1]) > req(&rows[0]), "{text}");
    drop(c);
    srv.stop();
}

/// Debian's prometheus-redis-exporter scrapes the server: up, its key count, its command
/// counters.
#[test]
fn prometheus_redis_exporter_scrapes_the_server() {
    let exe = "prometheus-redis-exporter";
    if Command::new(exe).arg("--version").output().is_err() {
        eprintln!("{exe} missing (apt-get install prometheus-redis-exporter): skipped");
        return;
    }
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    for i in 0..7 {
        let _: () = c.set(format!("k{i}"), i).unwrap();
    }
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let web = listen.local_addr().unwrap();
    drop(listen);
    let mut child = Command::new(exe)
        .arg("-redis.addr")
        .arg(format!("redis://{}", srv.addr))
        .arg("-web.listen-address")
        .arg(web.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let metrics = loop {
        let got = TcpStream::connect(web).ok().and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
                .ok()?;
            let mut text = String::new();
            s.read_to_string(&mut text).ok()?;
            Some(text)
        });
        if let Some(t) = got.filter(|t| t.contains("redis_up")) {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "exporter never answered"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}:\n{metrics}"))
    };
    assert_eq!(value("redis_up "), 1.0);
    assert_eq!(value("redis_db_keys{db=\"db0\"}"), 7.0);
    assert!(value("redis_commands_total{cmd=\"set\"}") >= 7.0);
    assert!(value("redis_memory_used_bytes ") > 0.0);
    assert!(value("redis_connected_clients ") >= 1.0);
    drop(c);
    srv.stop();
}
