//! Introspection as Redis 7.0 answers it: CLIENT (LIST, INFO, KILL, REPLY, PAUSE), COMMAND
//! (INFO, LIST, DOCS, GETKEYS), CONFIG (every parameter, several at once), INFO (sections,
//! commandstats, errorstats) and MONITOR.

use super::*;
use redis::Value;

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// A `field=value` of a CLIENT LIST line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

#[test]
fn client_list_info_and_kill() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let me: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    // Redis 7.0's fields, in order; qbuf is the request itself (26 bytes), cmd the subcommand.
    let mut s = srv.raw();
    let got = roundtrip(&mut s, b"*2\r\n$6\r\nclient\r\n$4\r\nlist\r\n", 400);
    let text = String::from_utf8_lossy(&got);
    let line = text
        .lines()
        .find(|l| l.contains("cmd=client|list"))
        .unwrap_or_else(|| panic!("{text}"));
    let names: Vec<&str> = line
        .split(' ')
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp"
        ]
    );
    assert_eq!(field(line, "qbuf"), "26");
    assert_eq!(field(line, "argv-mem"), "10");
    assert_eq!(field(line, "flags"), "N");
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    assert_eq!(field(&info, "cmd"), "client|info");
    assert_eq!(field(&info, "id"), me.to_string());
    // Inside MULTI: flags x and the number queued; d once a watched key is touched.
    let mut m = srv.client();
    let m_id: i64 = q(&mut m, &["CLIENT", "ID"]).unwrap();
    let _: () = q(&mut m, &["WATCH", "w"]).unwrap();
    let _: () = q(&mut c, &["SET", "w", "1"]).unwrap();
    let _: () = q(&mut m, &["MULTI"]).unwrap();
    let _: Value = q(&mut m, &["GET", "w"]).unwrap();
    let list: String = q(&mut c, &["CLIENT", "LIST", "ID", &m_id.to_string()]).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert_eq!(field(&list, "flags"), "xd");
    assert_eq!(field(&list, "multi"), "1");
    let _: Value = q(&mut m, &["DISCARD"]).unwrap();
    let all: String = q(&mut c, &["CLIENT", "LIST", "TYPE", "normal"]).unwrap();
    assert!(all.lines().count() >= 3, "{all}");
    let none: String = q(&mut c, &["CLIENT", "LIST", "TYPE", "pubsub"]).unwrap();
    assert_eq!(none, "");
    for (args, want) in [
        (
            &["CLIENT", "LIST", "TYPE", "x"][..],
            "ERR Unknown client type 'x'",
        ),
        (&["CLIENT", "LIST", "ID", "x"], "ERR Invalid client ID"),
        (&["CLIENT", "LIST", "x"], "ERR syntax error"),
        (
            &["CLIENT", "KILL"],
            "ERR wrong number of arguments for 'client|kill' command",
        ),
        (
            &["CLIENT", "KILL", "id", "10", "wrong_arg"],
            "ERR syntax error",
        ),
        (
            &["CLIENT", "KILL", "id", "0"],
            "ERR client-id should be greater than 0",
        ),
        (
            &["CLIENT", "KILL", "user", "nobody"],
            "ERR No such user 'nobody'",
        ),
        (&["CLIENT", "KILL", "1.2.3.4:5"], "ERR No such client"),
        (
            &["CLIENT", "NOSUCH"],
            "ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.",
        ),
        (
            &["CLIENT", "TRACKING", "on", "REDIRECT", "99999"],
            "ERR The client ID you want redirect to does not exist",
        ),
    ] {
        assert_eq!(err_text(q::<Value>(&mut c, args)), want, "{args:?}");
    }
    // KILL by ID and by address; SKIPME.
    let mut v = srv.raw();
    let vid = {
        let got = roundtrip(&mut v, b"CLIENT ID\r\n", 3);
        String::from_utf8_lossy(&got[1..]).trim().to_string()
    };
    let killed: i64 = q(&mut c, &["CLIENT", "KILL", "ID", &vid]).unwrap();
    assert_eq!(killed, 1);
    let mut buf = [0u8; 16];
    assert_eq!(
        v.read(&mut buf).unwrap_or(0),
        0,
        "the killed connection is closed"
    );
    let mut v = srv.raw();
    let addr = v.local_addr().unwrap().to_string();
    let _ = roundtrip(&mut v, b"PING\r\n", 7);
    let _: () = q(&mut c, &["CLIENT", "KILL", &addr]).unwrap();
    assert_eq!(v.read(&mut buf).unwrap_or(0), 0);
    let n: i64 = q(&mut c, &["CLIENT", "KILL", "ID", &me.to_string()]).unwrap();
    assert_eq!(n, 0, "SKIPME yes by default");
    srv.stop();
}

#[test]
fn client_reply_and_pause() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let got = roundtrip(
        &mut s,
        b"CLIENT REPLY OFF\r\nPING a\r\nPING b\r\nCLIENT REPLY ON\r\nPING c\r\n",
        12,
    );
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n$1\r\nc\r\n");
    let got = roundtrip(&mut s, b"CLIENT REPLY SKIP\r\nPING a\r\nPING b\r\n", 7);
    assert_eq!(String::from_utf8_lossy(&got), "$1\r\nb\r\n");
    // PAUSE WRITE: reads go on, a write waits for UNPAUSE (and then runs).
    let mut c = srv.client();
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]).unwrap();
    let mut w = srv.raw();
    w.write_all(b"SET paused 1\r\nGET paused\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "paused"]).unwrap(),
        None
    );
    let clients: String = q(&mut c, &["INFO", "clients"]).unwrap();
    assert!(clients.contains("blocked_clients:1\r\n"), "{clients}");
    // A command refused anyway answers at once.
    assert_eq!(
        err_text(q::<Value>(&mut c, &["SET", "x"])),
        "ERR wrong number of arguments for 'set' command"
    );
    let _: () = q(&mut c, &["CLIENT", "UNPAUSE"]).unwrap();
    let got = roundtrip(&mut w, b"", 12);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n$1\r\n1\r\n");
    // PAUSE ALL ends by itself.
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "200"]).unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    assert!(
        t0.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["CLIENT", "PAUSE", "10", "x"])),
        "ERR CLIENT PAUSE mode must be WRITE or ALL"
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["CLIENT", "PAUSE", "-1"])),
        "ERR timeout is negative"
    );
    srv.stop();
}

#[test]
fn command_introspection() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    for args in [
        &["COMMAND", "LIST", "bad_arg"][..],
        &["COMMAND", "LIST", "FILTERBY", "bad_arg"],
        &["COMMAND", "LIST", "FILTERBY", "bad_arg", "bad_arg2"],
    ] {
        assert_eq!(err_text(q::<Value>(&mut c, args)), "ERR syntax error");
    }
    let all: Vec<String> = q(&mut c, &["COMMAND", "LIST"]).unwrap();
    assert!(all.contains(&"set".into()) && all.contains(&"client|list".into()));
    let n: usize = q(&mut c, &["COMMAND", "COUNT"]).unwrap();
    assert_eq!(n, all.iter().filter(|n| !n.contains('|')).count());
    let set: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "set"]).unwrap();
    assert_eq!(set, ["set"]);
    let cfg: Vec<String> = q(
        &mut c,
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*re*"],
    )
    .unwrap();
    assert_eq!(cfg, ["config|resetstat", "config|rewrite"]);
    let conn: Vec<String> = q(
        &mut c,
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"],
    )
    .unwrap();
    assert!(conn.contains(&"ping".into()) && !conn.contains(&"set".into()));
    let none: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nope"]).unwrap();
    assert!(none.is_empty());
    // COMMAND INFO: Redis's entry, byte for byte in RESP2.
    let mut s = srv.raw();
    let want = "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
                *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n\
                +RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n\
                $4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n\
                $5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n\
                $5\r\nlimit\r\n:0\r\n*0\r\n";
    let got = roundtrip(&mut s, b"COMMAND INFO get\r\n", want.len());
    assert_eq!(String::from_utf8_lossy(&got), want);
    let v: Value = q(
        &mut c,
        &[
            "COMMAND",
            "INFO",
            "get|key",
            "config|get|key",
            "client|list",
        ],
    )
    .unwrap();
    let Value::Array(items) = v else { panic!() };
    assert_eq!(items[0], Value::Nil);
    assert_eq!(items[1], Value::Nil);
    assert!(format!("{:?}", items[2]).contains("client|list"));
    let v: Value = q(&mut c, &["COMMAND", "DOCS", "get", "nosuch"]).unwrap();
    let text = format!("{v:?}");
    assert!(
        text.contains("Get the value of a key") && !text.contains("nosuch"),
        "{text}"
    );
    // GETKEYS and GETKEYSANDFLAGS.
    let k: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"]).unwrap();
    assert_eq!(k, ["a", "b"]);
    let k: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "memory", "usage", "key"]).unwrap();
    assert_eq!(k, ["key"]);
    let v: Value = q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1"]).unwrap();
    assert_eq!(
        format!("{v:?}"),
        format!(
            "{:?}",
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"k1".to_vec()),
                Value::Array(vec![
                    Value::SimpleString("OW".into()),
                    Value::SimpleString("update".into())
                ])
            ])])
        )
    );
    for (args, want) in [
        (
            &["COMMAND", "GETKEYS", "nosuch", "x"][..],
            "ERR Invalid command specified",
        ),
        (
            &["COMMAND", "GETKEYS", "ping", "x"],
            "ERR The command has no key arguments",
        ),
        (
            &["COMMAND", "GETKEYS", "get", "a", "b"],
            "ERR Invalid number of arguments specified for command",
        ),
        (
            &["COMMAND", "GETKEYS", "get"],
            "ERR wrong number of arguments for 'command|getkeys' command",
        ),
        (
            &["COMMAND", "GETKEYS", "sintercard", "x", "a"],
            "ERR Invalid arguments specified for command",
        ),
    ] {
        assert_eq!(err_text(q::<Value>(&mut c, args)), want, "{args:?}");
    }
    srv.stop();
}

#[test]
fn config_get_and_set() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let get = |c: &mut Connection, name: &str| -> String {
        let v: Vec<String> = q(c, &["CONFIG", "GET", name]).unwrap();
        v[1].clone()
    };
    // Several at once, all or nothing, with Redis's texts.
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "hash-max-ziplist-entries",
            "7",
            "set-max-intset-entries",
            "9",
        ],
    )
    .unwrap();
    assert_eq!(get(&mut c, "hash-max-listpack-entries"), "7");
    assert_eq!(get(&mut c, "set-max-intset-entries"), "9");
    assert_eq!(
        err_text(q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "1mb", "maxmemory-clients", "200%"])),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"
    );
    assert_ne!(get(&mut c, "maxmemory"), "1048576", "rolled back");
    assert_eq!(
        err_text(q::<()>(&mut c, &["CONFIG", "SET", "nosuch", "1"])),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        err_text(q::<()>(&mut c, &["CONFIG", "SET", "daemonize", "yes"])),
        "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
    );
    assert_eq!(
        err_text(q::<()>(&mut c, &["CONFIG", "SET", "a", "b", "c"])),
        "ERR syntax error"
    );
    // Several patterns; names and aliases; hidden parameters only by name.
    let v: Vec<String> = q(
        &mut c,
        &["CONFIG", "GET", "maxmemory", "maxmemory*", "bind", "*of"],
    )
    .unwrap();
    for name in [
        "maxmemory",
        "maxmemory-samples",
        "maxmemory-clients",
        "bind",
        "slaveof",
        "replicaof",
    ] {
        assert!(v.iter().step_by(2).any(|n| n == name), "{name} in {v:?}");
    }
    let all: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]).unwrap();
    assert!(all.len() > 300 && !all.contains(&"key-load-delay".into()));
    assert_eq!(get(&mut c, "key-load-delay"), "0");
    // Every parameter takes back the value it shows (Redis's "CONFIG sanity").
    let skip = ["daemonize", "databases", "dir", "dbfilename", "requirepass"];
    for pair in all.chunks(2) {
        if skip.contains(&pair[0].as_str()) {
            continue;
        }
        let r: RedisResult<()> = q(&mut c, &["CONFIG", "SET", &pair[0], &pair[1]]);
        if let Err(e) = r {
            assert!(format!("{e:?}").contains("immutable"), "{pair:?}: {e:?}");
        }
    }
    // A port another socket holds: refused, everything rolled back; a free one: moved.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    assert_eq!(
        err_text(q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "10000001", "port", &busy_port])),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    assert_ne!(get(&mut c, "maxmemory"), "10000001");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free_port = free.local_addr().unwrap().port();
    drop(free);
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &free_port.to_string()]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut moved = TcpStream::connect(("127.0.0.1", free_port)).unwrap();
    moved
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(roundtrip(&mut moved, b"PING\r\n", 7), b"+PONG\r\n");
    let _ = roundtrip(&mut moved, b"SHUTDOWN\r\n", usize::MAX);
}

#[test]
fn info_sections_and_stats() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    let _: Value = q(&mut c, &["CLIENT", "LIST"]).unwrap();
    let _ = q::<Value>(&mut c, &["CLIENT", "KILL"]);
    let _ = q::<Value>(&mut c, &["GET"]);
    let _ = q::<Value>(&mut c, &["SET", "k", "v", "XX", "NX"]);
    let stats: String = q(&mut c, &["INFO", "commandstats", "errorstats", "cpu"]).unwrap();
    // Redis's order of sections, whatever the order asked.
    assert!(stats.starts_with("# CPU\r\n"), "{stats}");
    assert!(stats.find("# Commandstats").unwrap() < stats.find("# Errorstats").unwrap());
    for want in [
        "cmdstat_client|list:calls=1,",
        "cmdstat_client|kill:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0",
        "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0",
        ",rejected_calls=0,failed_calls=1\r\n",
        "errorstat_ERR:count=3",
        "# CPU\r\nused_cpu_sys:",
        "used_cpu_user_main_thread:",
    ] {
        assert!(stats.contains(want), "{want} not in {stats}");
    }
    assert!(!stats.contains("# Server"));
    // The first call of a command is timed: its latency percentiles show.
    let lat: String = q(&mut c, &["INFO", "latencystats"]).unwrap();
    let line = lat
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_client|list:"))
        .unwrap_or_else(|| panic!("{lat}"));
    let names: Vec<&str> = line
        .split(':')
        .nth(1)
        .unwrap()
        .split(',')
        .map(|p| p.split('=').next().unwrap())
        .collect();
    assert_eq!(names, ["p50", "p99", "p99.9"]);
    let default: String = q(&mut c, &["INFO"]).unwrap();
    let everything: String = q(&mut c, &["INFO", "everything"]).unwrap();
    for s in [
        "Server",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Replication",
        "CPU",
        "Modules",
        "Errorstats",
        "Cluster",
        "Keyspace",
    ] {
        assert!(default.contains(&format!("# {s}\r\n")), "{s}");
    }
    assert!(!default.contains("rejected_calls") && everything.contains("rejected_calls"));
    for f in [
        "redis_git_sha1:",
        "lazyfree_pending_objects:",
        "total_error_replies:3",
        "master_repl_offset:",
        "instantaneous_ops_per_sec:",
    ] {
        assert!(everything.contains(f), "{f}");
    }
    srv.stop();
}

#[test]
fn monitor_sees_commands_in_order() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut m = srv.raw();
    assert_eq!(roundtrip(&mut m, b"MONITOR\r\n", 5), b"+OK\r\n");
    let mut c = srv.client();
    let _: () = q(&mut c, &["SET", "foo", "b\"a r\n"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "timeout", "0"]).unwrap();
    let _: Value = redis::pipe()
        .atomic()
        .set("foo", "bar")
        .get("foo")
        .query(&mut c)
        .unwrap();
    let mut got = String::new();
    while got.matches("\r\n").count() < 5 {
        got += &String::from_utf8_lossy(&roundtrip(&mut m, b"", 1));
    }
    let lines: Vec<&str> = got.lines().collect();
    assert!(
        lines[0].starts_with('+') && lines[0].contains(" [0 127.0.0.1:"),
        "{got}"
    );
    assert!(lines[0].ends_with(r#"] "SET" "foo" "b\"a r\n""#), "{got}");
    // CONFIG (an administrative command) is not shown; EXEC after what it ran.
    let tails: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split("] ").nth(1).unwrap())
        .collect();
    assert_eq!(
        tails,
        [
            r#""MULTI""#,
            r#""SET" "foo" "bar""#,
            r#""GET" "foo""#,
            r#""EXEC""#
        ]
    );
    srv.stop();
}

/// A script shows in MONITOR before the commands it runs, and those show as `lua`'s (Redis's
/// eval.c and functions.c feed the monitors first).
#[test]
fn monitor_shows_scripts_before_their_commands() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut m = srv.raw();
    assert_eq!(roundtrip(&mut m, b"MONITOR\r\n", 5), b"+OK\r\n");
    let mut c = srv.client();
    let _: Value = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('set',KEYS[1],ARGV[1])",
            "1",
            "foo",
            "bar",
        ],
    )
    .unwrap();
    let _: String = q(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=t\nredis.register_function('f', function(k) return redis.call('get', k[1]) end)",
        ],
    )
    .unwrap();
    let _: Value = q(&mut c, &["FCALL", "f", "1", "foo"]).unwrap();
    let mut got = String::new();
    while got.matches("\r\n").count() < 5 {
        got += &String::from_utf8_lossy(&roundtrip(&mut m, b"", 1));
    }
    let lines: Vec<&str> = got.lines().collect();
    assert!(
        lines[0].contains(" [0 127.0.0.1:") && lines[0].contains(r#"] "EVAL" "#),
        "{got}"
    );
    assert!(lines[1].ends_with(r#" [0 lua] "set" "foo" "bar""#), "{got}");
    assert!(lines[2].contains(r#"] "FUNCTION" "LOAD" "#), "{got}");
    assert!(lines[3].ends_with(r#"] "FCALL" "f" "1" "foo""#), "{got}");
    assert!(lines[4].ends_with(r#" [0 lua] "get" "foo""#), "{got}");
    srv.stop();
}

/// OBJECT IDLETIME counts from a key's last read or write (a DRAM clock: `access.rs`); TTL,
/// TYPE, EXISTS and OBJECT only look and do not reset it, TOUCH and GET do; RESTORE IDLETIME
/// sets it; a key never accessed since the start reads as idle since then.
#[test]
fn object_idletime_counts_from_the_last_access() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let idle = |c: &mut Connection, k: &str| -> i64 { q(c, &["OBJECT", "IDLETIME", k]).unwrap() };
    let _: () = q(&mut c, &["SET", "foo", "bar"]).unwrap();
    let _: () = q(&mut c, &["SET", "other", "x"]).unwrap();
    assert!(idle(&mut c, "foo") <= 1);
    std::thread::sleep(Duration::from_millis(2100));
    let _: i64 = q(&mut c, &["TTL", "foo"]).unwrap();
    let _: String = q(&mut c, &["TYPE", "foo"]).unwrap();
    let _: i64 = q(&mut c, &["EXISTS", "foo"]).unwrap();
    let _: i64 = q(&mut c, &["PTTL", "foo"]).unwrap();
    assert!(idle(&mut c, "foo") >= 2, "inspections are no access");
    let _: i64 = q(&mut c, &["TOUCH", "foo"]).unwrap();
    assert!(idle(&mut c, "foo") < 2);
    assert!(idle(&mut c, "other") >= 2);
    let _: String = q(&mut c, &["GET", "other"]).unwrap();
    assert!(idle(&mut c, "other") < 2);
    // RESTORE ... IDLETIME sets the clock; a deleted key has none.
    let dump: Vec<u8> = q(&mut c, &["DUMP", "foo"]).unwrap();
    let _: i64 = q(&mut c, &["DEL", "foo"]).unwrap();
    let none: Option<i64> = q(&mut c, &["OBJECT", "IDLETIME", "foo"]).unwrap();
    assert_eq!(none, None);
    let _: () = redis::cmd("RESTORE")
        .arg("foo")
        .arg(0)
        .arg(dump)
        .arg("IDLETIME")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let i = idle(&mut c, "foo");
    assert!((1000..=1010).contains(&i), "{i}");
    // FREQ needs an LFU policy, as in Redis.
    let e = err_text(q::<i64>(&mut c, &["OBJECT", "FREQ", "foo"]));
    assert!(e.contains("An LFU maxmemory policy is not selected"), "{e}");
    srv.stop();
}

/// An idle connection's input buffer is given back after 2 seconds (Redis's
/// clientsCronResizeQueryBuffer), and `timeout` closes connections idle longer.
#[test]
fn idle_clients() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut idle = srv.raw();
    assert_eq!(
        roundtrip(&mut idle, b"CLIENT SETNAME idler\r\n", 5),
        b"+OK\r\n"
    );
    let idler = |c: &mut Connection| -> String {
        let list: String = q(c, &["CLIENT", "LIST"]).unwrap();
        list.lines()
            .find(|l| l.contains("name=idler"))
            .unwrap_or("")
            .to_string()
    };
    let line = idler(&mut c);
    assert_eq!(field(&line, "qbuf-free"), "16384", "{line}");
    let t0 = std::time::Instant::now();
    while field(&idler(&mut c), "qbuf-free") != "0" {
        assert!(t0.elapsed() < Duration::from_secs(6), "{}", idler(&mut c));
        std::thread::sleep(Duration::from_millis(100));
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "timeout", "1"]).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(idle.read(&mut buf).unwrap_or(0), 0, "closed for being idle");
    assert!(idler(&mut c).is_empty());
    srv.stop();
}
