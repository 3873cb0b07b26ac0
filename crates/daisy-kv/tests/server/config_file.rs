//! `daisy serve redis.conf`: Redis's config file read (`daisy_kv::conffile`), its errors, the
//! Unix socket and pidfile it names, and CONFIG REWRITE writing it back. (As a process, with
//! the command line overriding the file, daemonize, SIGHUP and the log: daisy-cli's
//! tests/serve_config.rs.)

use super::*;
use std::process::Command;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    v[1].clone()
}

/// Every directive the server reads, with Redis's syntax (quotes, units, a repeated
/// directive, an include): the server runs as the file says.
#[test]
fn a_config_file_with_every_supported_directive_is_honoured() {
    let d = tmp();
    let dir = d.path();
    let sock = dir.join("daisy.sock");
    let pidfile = dir.join("daisy.pid");
    let log = dir.join("daisy.log");
    write(
        dir,
        "extra.conf",
        "hash-max-listpack-entries 5\nzset-max-listpack-value 32\n",
    );
    let conf = write(
        dir,
        "redis.conf",
        &format!(
            "# Daisy's test config\n\
             port 6380\n\
             port 0\n\
             bind 127.0.0.1 -::1\n\
             requirepass \"secret#pass\"\n\
             maxclients 77\n\
             timeout 50\n\
             tcp-keepalive 60\n\
             loglevel verbose\n\
             logfile '{}'\n\
             daemonize no\n\
             pidfile {}\n\
             unixsocket {}\n\
             unixsocketperm 700\n\
             databases 4\n\
             maxmemory 1gb\n\
             slowlog-max-len 17\n\
             include {}\n\
             pool {}\n\
             size 32mb\n\
             busy-poll-us 0\n",
            log.display(),
            pidfile.display(),
            sock.display(),
            dir.join("extra.conf").display(),
            pool_in(&d).display(),
        ),
    );
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut o).unwrap();
    assert_eq!(o.port, 0);
    assert_eq!(o.bind, "127.0.0.1");
    assert_eq!(o.requirepass.as_deref(), Some("secret#pass"));
    assert_eq!((o.max_clients, o.tcp_keepalive, o.databases), (77, 60, 4));
    assert_eq!(
        (o.max_size, o.size, o.busy_poll_us),
        (Some(1 << 30), 32 << 20, 0)
    );
    assert_eq!(o.pool, pool_in(&d));
    let srv = Server::start_with(&pool_in(&d), |x| {
        *x = o;
        x.quiet = false;
    });
    let mut c = redis::Client::open(format!("redis://:secret%23pass@{}/", srv.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    for (name, want) in [
        ("maxclients", "77"),
        ("timeout", "50"),
        ("tcp-keepalive", "60"),
        ("loglevel", "verbose"),
        ("databases", "4"),
        ("slowlog-max-len", "17"),
        ("hash-max-listpack-entries", "5"),
        ("zset-max-listpack-value", "32"),
        ("unixsocketperm", "700"),
        ("requirepass", "secret#pass"),
    ] {
        assert_eq!(config_get(&mut c, name), want, "{name}");
    }
    assert_eq!(config_get(&mut c, "unixsocket"), sock.display().to_string());
    // The file's threshold took effect: 6 fields no longer fit a listpack.
    for i in 0..6 {
        let _: () = c.hset("h", format!("f{i}"), "v").unwrap();
    }
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("h")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "hashtable");
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    let canon = std::fs::canonicalize(&conf).unwrap();
    assert!(
        info.contains(&format!("config_file:{}\r\n", canon.display())),
        "{info}"
    );
    // The Unix socket, with its permissions, answers redis-cli -s.
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    if let Ok(out) = Command::new("redis-cli")
        .arg("-s")
        .arg(&sock)
        .args([
            "-a",
            "secret#pass",
            "--no-auth-warning",
            "ECHO",
            "over-unix",
        ])
        .output()
    {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "over-unix");
    }
    let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    u.write_all(b"AUTH secret#pass\r\nCLIENT INFO\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("cmd=client|info") {
        let n = u.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains(&format!("addr={}:0", sock.display())),
        "{text}"
    );
    assert!(text.contains("flags=U"), "{text}");
    // The pidfile holds this process's id (the server runs on a thread here).
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(pid.trim(), std::process::id().to_string());
    drop(c);
    srv.stop();
    // At exit the pidfile and the socket are gone; the log has Redis-format lines.
    assert!(!pidfile.exists() && !sock.exists());
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap();
    let (pid_role, rest) = first.split_once(' ').unwrap();
    assert_eq!(pid_role, format!("{}:M", std::process::id()));
    // "25 Nov 2026 17:01:02.123 * message"
    let w: Vec<&str> = rest.splitn(6, ' ').collect();
    assert!(
        w[0].parse::<u32>().is_ok_and(|d| (1..=31).contains(&d)),
        "{first}"
    );
    assert_eq!(w[1].len(), 3, "{first}");
    assert!(w[2].parse::<u32>().is_ok(), "{first}");
    assert_eq!(w[3].len(), "17:01:02.123".len(), "{first}");
    assert_eq!(w[4], "*", "{first}");
    assert!(text.contains("listening on"), "{text}");
    assert!(text.contains("bye bye"), "{text}");
}

fn load_err(text: &str) -> String {
    let d = tmp();
    let conf = write(d.path(), "bad.conf", text);
    let mut o = daisy_kv::Options::default();
    let e = daisy_kv::conffile::load(&conf, &mut o).unwrap_err();
    assert!(
        e.contains(&format!(
            "Reading the configuration file {}",
            conf.display()
        )),
        "{e}"
    );
    assert!(e.contains("*** FATAL CONFIG FILE ERROR"), "{e}");
    e
}

/// Redis's fatal error names the file, the line and the line's text; bad values give
/// CONFIG SET's reason; an error in an included file names that file.
#[test]
fn an_unknown_directive_fails_naming_file_and_line() {
    let e = load_err("port 0\n# comment\n\nnosuchthing 1 2\n");
    assert!(
        e.contains("at line 4\n>>> 'nosuchthing 1 2'\nBad directive or wrong number of arguments"),
        "{e}"
    );
    let e = load_err("maxclients lots\n");
    assert!(
        e.contains("at line 1\n>>> 'maxclients lots'\nargument couldn't be parsed into an integer"),
        "{e}"
    );
    let e = load_err("timeout 1 2\n");
    assert!(
        e.contains("Bad directive or wrong number of arguments"),
        "{e}"
    );
    let e = load_err("requirepass \"open\n");
    assert!(e.contains("Unbalanced quotes in configuration line"), "{e}");
    let e = load_err("appendonly maybe\n");
    assert!(e.contains("argument must be 'yes' or 'no'"), "{e}");
    let d = tmp();
    let inner = write(d.path(), "inner.conf", "port 0\nbogus\n");
    let outer = write(
        d.path(),
        "outer.conf",
        &format!("include {}\n", inner.display()),
    );
    let e = daisy_kv::conffile::load(&outer, &mut daisy_kv::Options::default()).unwrap_err();
    assert!(
        e.contains(&format!("{}, at line 2", inner.display())),
        "{e}"
    );
    let missing = d.path().join("missing.conf");
    let e = daisy_kv::conffile::load(&missing, &mut daisy_kv::Options::default()).unwrap_err();
    assert!(e.contains("can't open config file"), "{e}");
}

/// CONFIG REWRITE puts the running values into the file given at start: changed lines in
/// place, duplicates gone, new ones appended, the rest (comments, Daisy's own) kept; the
/// file read again gives the same values.
#[test]
fn config_rewrite_round_trips() {
    let d = tmp();
    let conf = write(
        d.path(),
        "redis.conf",
        &format!(
            "# keep me\nmaxclients 50\nmaxclients 60\ntimeout 5\npool {}\n",
            pool_in(&d).display()
        ),
    );
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut o).unwrap();
    let srv = Server::start_with(&pool_in(&d), |x| {
        *x = daisy_kv::Options {
            pool: x.pool.clone(),
            port: 0,
            quiet: true,
            ..o
        };
    });
    let mut c = srv.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("123")
        .arg("hash-max-listpack-value")
        .arg("99")
        .arg("masterauth")
        .arg("two words \"q\"")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.starts_with("# keep me\nmaxclients 123\ntimeout 5\npool "),
        "{text}"
    );
    assert_eq!(text.matches("maxclients").count(), 1, "{text}");
    assert!(text.contains("# Generated by CONFIG REWRITE\n"), "{text}");
    assert!(text.contains("hash-max-listpack-value 99\n"), "{text}");
    let mut again = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut again).unwrap();
    assert_eq!(again.max_clients, 123);
    assert!(again
        .config
        .contains(&("masterauth".to_string(), "two words \"q\"".to_string())));
    assert!(again
        .config
        .contains(&("hash-max-listpack-value".to_string(), "99".to_string())));
    assert!(again
        .config
        .contains(&("timeout".to_string(), "5".to_string())));
    drop(c);
    srv.stop();
}

/// Without a config file, CONFIG REWRITE is Redis's error.
#[test]
fn config_rewrite_without_a_file_is_redis_error() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let e = err_text(redis::cmd("CONFIG").arg("REWRITE").query::<()>(&mut c));
    assert_eq!(e, "ERR The server is running without a config file");
    drop(c);
    srv.stop();
}

/// `user` lines in a config file create users at start, as Redis's do (`default` reset first),
/// each checked when the file is read (a bad rule or a user declared twice stops the start
/// with Redis's message); mixed with an `aclfile` the start is refused; CONFIG REWRITE writes
/// the users as they are then, in place of the old lines. A relative `aclfile` is found in
/// `dir`, where Redis has changed directory by the time it reads it.
#[test]
fn users_in_the_config_file_and_the_acl_file_beside_it() {
    let d = tmp();
    let conf = write(
        d.path(),
        "redis.conf",
        "user default on nopass ~* &* +@all -flushdb\nuser alice on >secret ~* &* +@all\n",
    );
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut o).unwrap();
    assert_eq!(o.users.len(), 2);
    let srv = Server::start_with(&pool_in(&d), |x| {
        *x = daisy_kv::Options {
            pool: x.pool.clone(),
            port: 0,
            quiet: true,
            ..o
        };
    });
    let mut c = srv.client();
    let e = err_text(redis::cmd("FLUSHDB").query::<()>(&mut c));
    assert!(e.starts_with("NOPERM"), "{e}");
    let _: () = redis::cmd("AUTH")
        .arg("alice")
        .arg("secret")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("bob")
        .arg("on")
        .arg(">b")
        .arg("+get")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    let users: Vec<&str> = text.lines().filter(|l| l.starts_with("user ")).collect();
    assert_eq!(users.len(), 3, "{text}");
    assert!(users[0].starts_with("user alice on #"), "{text}");
    assert!(
        users[1].starts_with("user bob on #") && users[1].ends_with("-@all +get"),
        "{text}"
    );
    assert!(users[2].starts_with("user default on nopass"), "{text}");
    let mut again = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut again).unwrap();
    assert_eq!(again.users.len(), 3);
    drop(c);
    srv.stop();

    // Errors, as Redis's.
    let e = load_err("user foo on\nuser foo off\n");
    assert!(
        e.contains("Error in user declaration 'foo': Duplicate user found"),
        "{e}"
    );
    let e = load_err("user foo on +nosuchcommand\n");
    assert!(
        e.contains(
            "Error in user declaration '+nosuchcommand': Unknown command or category name in ACL"
        ),
        "{e}"
    );
    let acl = write(d.path(), "users.acl", "user carol on nopass ~* +@all\n");
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(
        &write(
            d.path(),
            "mixed.conf",
            &format!("aclfile {}\nuser foo on\n", acl.display()),
        ),
        &mut o,
    )
    .unwrap();
    let mixed = daisy_kv::Options {
        pool: d.path().join("mixed.pool"),
        port: 0,
        quiet: true,
        ..o
    };
    let e = daisy_kv::serve(&mixed, |_| panic!("started")).unwrap_err();
    assert!(
        e.contains("users defined in redis.conf and at the same setting an ACL file"),
        "{e}"
    );

    // A relative aclfile is in `dir`.
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(
        &write(
            d.path(),
            "rel.conf",
            &format!("dir {}\naclfile users.acl\n", d.path().display()),
        ),
        &mut o,
    )
    .unwrap();
    assert_eq!(o.aclfile.as_deref(), Some(acl.as_path()));
}

/// `dir` and `dbfilename` in the config file say where SAVE and BGSAVE write the backup (a
/// directory on a disk, beside a pool on tmpfs); `dir` must exist, as Redis's chdir requires.
/// Both are protected parameters, as in Redis: CONFIG SET refuses them unless
/// `enable-protected-configs` is `yes`, or `local` for a client on loopback; then `dir` is
/// checked (chdir's error text) and a relative one is relative to the current one.
#[test]
fn dir_and_dbfilename_from_the_file_place_backups_and_are_protected() {
    let d = tmp();
    let backups = d.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let conf = write(
        d.path(),
        "redis.conf",
        &format!("dir {}\ndbfilename kv.backup\n", backups.display()),
    );
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut o).unwrap();
    let pool = pool_in(&d);
    let srv = Server::start_with(&pool, |x| {
        *x = daisy_kv::Options {
            pool: x.pool.clone(),
            port: 0,
            quiet: true,
            ..o
        };
    });
    let mut c = srv.client();
    assert_eq!(config_get(&mut c, "dir"), backups.display().to_string());
    let _: () = c.set("k", "v").unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let copy = backups.join("kv.backup");
    assert!(copy.exists(), "no backup at {}", copy.display());
    assert!(
        !d.path()
            .join(format!(
                "{}.backup",
                pool.file_name().unwrap().to_string_lossy()
            ))
            .exists(),
        "the backup went beside the pool"
    );
    // Protected, with Redis's text.
    let e = err_text(
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("dir")
            .arg(d.path().to_str().unwrap())
            .query::<()>(&mut c),
    );
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    drop(c);
    srv.stop();
    check_pool(&copy);

    // `dir` must exist when the file is read.
    let e = load_err("dir /nonexistent/daisy-test\n");
    assert!(e.ends_with("No such file or directory"), "{e}");

    // enable-protected-configs local: a loopback client may move the backups.
    let conf = write(d.path(), "local.conf", "enable-protected-configs local\n");
    let mut o = daisy_kv::Options::default();
    daisy_kv::conffile::load(&conf, &mut o).unwrap();
    let srv = Server::start_with(&pool, |x| {
        *x = daisy_kv::Options {
            pool: x.pool.clone(),
            port: 0,
            quiet: true,
            ..o
        };
    });
    let mut c = srv.client();
    let set = |c: &mut Connection, k: &str, v: &str| {
        redis::cmd("CONFIG").arg("SET").arg(k).arg(v).query::<()>(c)
    };
    assert_eq!(
        err_text(set(&mut c, "dir", "/nonexistent/daisy-test")),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory"
    );
    assert_eq!(
        err_text(set(&mut c, "dir", &conf.display().to_string())),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - Not a directory"
    );
    set(&mut c, "dir", &d.path().display().to_string()).unwrap();
    set(&mut c, "dir", "backups").unwrap();
    assert_eq!(config_get(&mut c, "dir"), backups.display().to_string());
    set(&mut c, "dbfilename", "second.backup").unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    assert!(backups.join("second.backup").exists());
    drop(c);
    srv.stop();
}
