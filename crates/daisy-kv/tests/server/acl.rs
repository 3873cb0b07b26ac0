//! Access control as Redis 7.0: the scenarios of Redis's unit/acl, unit/acl-v2 and unit/auth
//! suites (users, passwords, command, key and channel rules, selectors, GETUSER's format,
//! the ACL log, the ACL file, AUTH and HELLO AUTH), through real connections.

use super::*;
use redis::Value;
use std::collections::HashMap;

fn q(c: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok(c: &mut Connection, args: &[&str]) {
    let v = q(c, args);
    assert!(
        matches!(v, Value::Okay) || v == Value::SimpleString("OK".into()),
        "{args:?}: {v:?}"
    );
}

fn err(c: &mut Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    err_text(cmd.query::<Value>(c))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::Nil => String::new(),
        other => panic!("not text: {other:?}"),
    }
}

/// A RESP2 map (a flat array of pairs) by field name.
fn map(v: Value) -> HashMap<String, Value> {
    let Value::Array(items) = v else {
        panic!("not a map: {v:?}")
    };
    items
        .chunks(2)
        .map(|p| (text(&p[0]), p[1].clone()))
        .collect()
}

fn getuser(c: &mut Connection, name: &str) -> HashMap<String, Value> {
    map(q(c, &["ACL", "GETUSER", name]))
}

fn field(c: &mut Connection, user: &str, f: &str) -> String {
    text(&getuser(c, user)[f])
}

fn list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().map(text).collect(),
        other => panic!("not a list: {other:?}"),
    }
}

fn log_entries(c: &mut Connection) -> Vec<HashMap<String, Value>> {
    let Value::Array(e) = q(c, &["ACL", "LOG"]) else {
        panic!()
    };
    e.into_iter().map(map).collect()
}

#[test]
fn users_start_disabled_and_passwords_plain_or_hashed_are_checked() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    assert_eq!(text(&q(&mut c, &["ACL", "WHOAMI"])), "default");
    ok(&mut c, &["ACL", "SETUSER", "newuser"]);
    assert!(err(&mut c, &["ACL", "SETUSER", "a a"])
        .contains("Usernames can't contain spaces or null characters"));
    ok(&mut c, &["ACL", "SETUSER", "newuser", ">passwd1"]);
    assert!(err(&mut c, &["AUTH", "newuser", "passwd1"]).starts_with("WRONGPASS"));
    // Enabled: the login works.
    ok(&mut c, &["ACL", "SETUSER", "newuser", "on", "+acl"]);
    ok(&mut c, &["AUTH", "newuser", "passwd1"]);
    assert_eq!(text(&q(&mut c, &["ACL", "WHOAMI"])), "newuser");
    // Only the set of passwords.
    ok(&mut c, &["ACL", "SETUSER", "newuser", ">passwd2"]);
    ok(&mut c, &["AUTH", "newuser", "passwd1"]);
    ok(&mut c, &["AUTH", "newuser", "passwd2"]);
    assert_eq!(
        err(&mut c, &["AUTH", "newuser", "passwd3"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    ok(&mut c, &["ACL", "SETUSER", "newuser", "<passwd1"]);
    assert!(err(&mut c, &["AUTH", "newuser", "passwd1"]).starts_with("WRONGPASS"));
    assert!(err(&mut c, &["ACL", "SETUSER", "newuser", "<passwd1"])
        .contains("The password you are trying to remove from the user does not exist"));
    // Hashes: added, validated, shown instead of the password, removed.
    let h = "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6";
    ok(&mut c, &["ACL", "SETUSER", "newuser", &format!("#{h}")]);
    ok(&mut c, &["AUTH", "newuser", "passwd4"]);
    for bad in [&h[..63], &format!("{}q", &h[..63])] {
        assert!(
            err(&mut c, &["ACL", "SETUSER", "newuser", &format!("#{bad}")])
                .contains("Error in ACL SETUSER modifier")
        );
    }
    let pw = format!("{:?}", getuser(&mut c, "newuser")["passwords"]);
    assert!(!pw.contains("passwd4"));
    let pw = list(&getuser(&mut c, "newuser")["passwords"]);
    assert!(pw.contains(&h.to_string()), "{pw:?}");
    ok(&mut c, &["ACL", "SETUSER", "newuser", &format!("!{h}")]);
    assert!(!list(&getuser(&mut c, "newuser")["passwords"]).contains(&h.to_string()));
    // nopass: any password.
    ok(&mut c, &["ACL", "SETUSER", "newuser", "nopass"]);
    ok(&mut c, &["AUTH", "newuser", "zipzapblabla"]);
    assert_eq!(list(&getuser(&mut c, "newuser")["flags"]), ["on", "nopass"]);
    // A user that does not exist: a null GETUSER, WRONGPASS.
    assert_eq!(q(&mut c, &["ACL", "GETUSER", "nobody"]), Value::Nil);
    assert!(err(&mut c, &["AUTH", "nobody", "x"]).starts_with("WRONGPASS"));
    ok(&mut c, &["AUTH", "default", "whatever"]);
    srv.stop();
}

#[test]
fn command_and_key_rules_refuse_with_noperm() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut admin = srv.client();
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "on", "nopass", "+acl"],
    );
    ok(&mut c, &["AUTH", "newuser", "x"]);
    assert_eq!(
        err(&mut c, &["SET", "foo", "bar"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    ok(&mut c, &["ACL", "SETUSER", "newuser", "+set"]);
    assert_eq!(
        err(&mut c, &["SET", "foo", "bar"]),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "newuser",
            "allcommands",
            "~foo:*",
            "~bar:*",
        ],
    );
    ok(&mut c, &["SET", "foo:1", "a"]);
    ok(&mut c, &["SET", "bar:2", "b"]);
    assert!(err(&mut c, &["SET", "zap:3", "c"]).contains("NOPERM"));
    assert!(err(&mut c, &["MSET", "foo:1", "a", "zap:3", "c"]).contains("keys"));
    ok(&mut c, &["ACL", "SETUSER", "newuser", "allkeys"]);
    // Single commands, categories.
    ok(&mut c, &["ACL", "SETUSER", "newuser", "-ping"]);
    assert_eq!(text(&q(&mut c, &["INCR", "mycounter"])), "1");
    assert!(err(&mut c, &["PING"]).contains("'ping'"));
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "-@all", "+@set", "+acl"],
    );
    assert_eq!(text(&q(&mut c, &["SADD", "myset", "a", "b", "c"])), "3");
    ok(&mut c, &["ACL", "SETUSER", "newuser", "+@all", "-@string"]);
    q(&mut c, &["SADD", "myset", "a"]);
    assert!(err(&mut c, &["SET", "foo", "bar"]).contains("'set'"));
    // Subcommands.
    ok(&mut c, &["ACL", "SETUSER", "newuser", "+@all", "-client"]);
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "+client|id", "+client|setname"],
    );
    let cmds = field(&mut c, "newuser", "commands");
    assert!(
        cmds.starts_with("+@all") && cmds.contains("-client") && cmds.contains("+client|id"),
        "{cmds}"
    );
    q(&mut c, &["CLIENT", "ID"]);
    ok(&mut c, &["CLIENT", "SETNAME", "foo"]);
    assert!(err(&mut c, &["CLIENT", "KILL", "type", "master"]).contains("'client|kill'"));
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "+@all", "-client|kill"],
    );
    assert_eq!(field(&mut c, "newuser", "commands"), "+@all -client|kill");
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "newuser",
            "-@all",
            "+acl",
            "+config",
            "-config|set",
        ],
    );
    q(&mut c, &["CONFIG", "GET", "loglevel"]);
    assert!(err(&mut c, &["CONFIG", "SET", "loglevel", "debug"]).contains("'config|set'"));
    // Rules Redis refuses.
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "+@all", "-config|get"],
    );
    assert!(err(
        &mut c,
        &["ACL", "SETUSER", "newuser", "+config|get|appendonly"]
    )
    .contains("Allowing first-arg of a subcommand is not supported"));
    for r in [
        "+config|asdf",
        "-config|asdf",
        "+get|key1|key2",
        "-get|key1|key2",
        "+nosuch",
        "+@nosuch",
    ] {
        assert!(
            err(&mut c, &["ACL", "SETUSER", "newuser", "+@all", r])
                .contains("Unknown command or category name in ACL"),
            "{r}"
        );
    }
    // A refused SETUSER changes nothing.
    assert_eq!(field(&mut c, "newuser", "commands"), "+@all -config|get");
    // A first argument of an otherwise denied command.
    ok(
        &mut c,
        &["ACL", "SETUSER", "newuser", "-@all", "+acl", "+select|0"],
    );
    assert!(field(&mut c, "newuser", "commands").contains("+select|0"));
    ok(&mut c, &["SELECT", "0"]);
    assert!(err(&mut c, &["SELECT", "1"]).contains("'select'"));
    // Container rules engulf their subcommands' rules; +@all engulfs everything.
    ok(&mut admin, &["ACL", "SETUSER", "bob", "+memory|doctor"]);
    assert_eq!(field(&mut admin, "bob", "commands"), "-@all +memory|doctor");
    ok(&mut admin, &["ACL", "SETUSER", "bob", "+memory"]);
    assert_eq!(field(&mut admin, "bob", "commands"), "-@all +memory");
    ok(
        &mut admin,
        &["ACL", "SETUSER", "bob", "+@all", "+client|id"],
    );
    assert_eq!(field(&mut admin, "bob", "commands"), "+@all");
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "alice",
            "on",
            ">p",
            "+@all",
            "-memory|doctor",
        ],
    );
    let mut alice = srv.client();
    ok(&mut alice, &["AUTH", "alice", "p"]);
    assert!(err(&mut alice, &["MEMORY", "DOCTOR"]).contains("'memory|doctor'"));
    q(&mut alice, &["MEMORY", "STATS"]);
    ok(&mut admin, &["ACL", "SETUSER", "alice", "-memory"]);
    assert_eq!(field(&mut admin, "alice", "commands"), "+@all -memory");
    assert!(err(&mut alice, &["MEMORY", "STATS"]).contains("'memory|stats'"));
    // Commands without authentication are never refused by the rules.
    ok(&mut admin, &["ACL", "SETUSER", "alice", "-@all"]);
    ok(&mut alice, &["AUTH", "alice", "p"]);
    assert!(err(&mut alice, &["GET", "key"]).contains("'get'"));
    srv.stop();
}

#[test]
fn getuser_translates_rules_back_as_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "newuser",
            "reset",
            "+@all",
            "~*",
            "-@string",
            "+incr",
            "-debug",
            "+debug|digest",
        ],
    );
    let s = field(&mut c, "newuser", "commands");
    for part in ["+@all", "-@string", "+incr", "-debug +debug|digest"] {
        assert!(s.contains(part), "{s}");
    }
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "newuser",
            "reset",
            "+@string",
            "-incr",
            "+acl",
            "+debug|digest",
            "+debug|segfault",
        ],
    );
    let s = field(&mut c, "newuser", "commands");
    for part in [
        "-@all",
        "+@string",
        "-incr",
        "+debug|digest",
        "+debug|segfault",
        "+acl",
    ] {
        assert!(s.contains(part), "{s}");
    }
    let cats = list(&q(&mut c, &["ACL", "CAT"]));
    assert_eq!(cats.len(), 21);
    for cat in &cats {
        ok(
            &mut c,
            &[
                "ACL",
                "SETUSER",
                "additive",
                "reset",
                "+@all",
                &format!("-@{cat}"),
            ],
        );
        assert_eq!(
            field(&mut c, "additive", "commands"),
            format!("+@all -@{cat}")
        );
        ok(
            &mut c,
            &[
                "ACL",
                "SETUSER",
                "restrictive",
                "reset",
                "-@all",
                &format!("+@{cat}"),
            ],
        );
        assert_eq!(
            field(&mut c, "restrictive", "commands"),
            format!("-@all +@{cat}")
        );
    }
    // ACL CAT.
    assert_eq!(
        err(&mut c, &["ACL", "CAT", "NON_EXISTS"]),
        "ERR Unknown category 'NON_EXISTS'"
    );
    assert!(err(&mut c, &["ACL", "CAT", "A", "B"])
        .contains("unknown subcommand or wrong number of arguments for 'CAT'"));
    assert!(cats.contains(&"keyspace".to_string()) && cats.contains(&"connection".to_string()));
    assert!(list(&q(&mut c, &["ACL", "CAT", "transaction"])).contains(&"multi".to_string()));
    assert!(list(&q(&mut c, &["ACL", "CAT", "scripting"])).contains(&"function|list".to_string()));
    assert!(!list(&q(&mut c, &["ACL", "CAT", "keyspace"])).contains(&"set".to_string()));
    assert!(!list(&q(&mut c, &["ACL", "CAT", "stream"])).contains(&"get".to_string()));
    // The categories COMMAND INFO shows are the ones the rules use.
    ok(
        &mut c,
        &[
            "ACL", "SETUSER", "scripter", "on", "nopass", "allkeys", "+@read",
        ],
    );
    assert_eq!(
        text(&q(
            &mut c,
            &["ACL", "DRYRUN", "scripter", "EVAL_RO", "", "0"]
        )),
        "This user has no permissions to run the 'eval_ro' command"
    );
    assert_eq!(
        text(&q(&mut c, &["ACL", "DRYRUN", "scripter", "GET", "k"])),
        "OK"
    );
    // ACL LIST: config-file form, sorted by name.
    let l = list(&q(&mut c, &["ACL", "LIST"]));
    assert_eq!(l[1], "user default on nopass ~* &* +@all");
    assert!(
        l.iter()
            .any(|u| u == "user restrictive off sanitize-payload resetchannels -@all +@scripting"),
        "{l:?}"
    );
    assert_eq!(
        list(&q(&mut c, &["ACL", "USERS"])),
        ["additive", "default", "newuser", "restrictive", "scripter"]
    );
    srv.stop();
}

#[test]
fn acl_log_records_refusals_by_context_and_groups_repeats() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut admin = srv.client();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "antirez",
            ">foo",
            "on",
            "+set",
            "~object:1234",
            "+multi",
            "+exec",
            "+acl",
        ],
    );
    ok(&mut c, &["AUTH", "antirez", "foo"]);
    assert!(err(&mut c, &["GET", "foo"]).contains("'get'"));
    let e = &log_entries(&mut admin)[0];
    assert_eq!(text(&e["username"]), "antirez");
    assert_eq!(text(&e["context"]), "toplevel");
    assert_eq!(text(&e["reason"]), "command");
    assert_eq!(text(&e["object"]), "get");
    let info = text(&e["client-info"]);
    assert!(
        info.contains("user=antirez") && info.contains(" cmd=get "),
        "{info}"
    );
    for f in [
        "age-seconds",
        "entry-id",
        "timestamp-created",
        "timestamp-last-updated",
    ] {
        assert!(e.contains_key(f), "{f}");
    }
    // Subcommands by their full name.
    assert!(err(&mut c, &["CLIENT", "HELP"]).contains("'client|help'"));
    assert_eq!(text(&log_entries(&mut admin)[0]["object"]), "client|help");
    // Similar events: one entry, counted.
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    for _ in 0..3 {
        err(&mut c, &["GET", "foo"]);
    }
    let l = log_entries(&mut admin);
    assert_eq!(l.len(), 1);
    assert_eq!(text(&l[0]["count"]), "3");
    // Keys.
    err(&mut c, &["SET", "somekeynotallowed", "1234"]);
    let e = &log_entries(&mut admin)[0];
    assert_eq!(text(&e["reason"]), "key");
    assert_eq!(text(&e["object"]), "somekeynotallowed");
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    assert!(log_entries(&mut admin).is_empty());
    // MULTI: refused while queued, and at EXEC when the rules changed meanwhile.
    ok(&mut c, &["MULTI"]);
    assert!(err(&mut c, &["INCR", "foo"]).contains("NOPERM"));
    assert!(err(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    let e = &log_entries(&mut admin)[0];
    assert_eq!(text(&e["context"]), "multi");
    assert_eq!(text(&e["object"]), "incr");
    ok(&mut admin, &["ACL", "SETUSER", "antirez", "+incr"]);
    ok(&mut c, &["MULTI"]);
    assert_eq!(
        q(&mut c, &["INCR", "object:1234"]),
        Value::SimpleString("QUEUED".into())
    );
    ok(&mut admin, &["ACL", "SETUSER", "antirez", "-incr"]);
    // EXEC's reply holds the error (the client library reports the first error in it).
    let e = err(&mut c, &["EXEC"]);
    assert!(
        e.contains("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand"),
        "{e}"
    );
    let e = &log_entries(&mut admin)[0];
    assert_eq!(text(&e["context"]), "multi");
    assert_eq!(text(&e["object"]), "incr");
    // A count, failed AUTH, the length limit.
    for _ in 0..2 {
        err(&mut c, &["GET", "a"]);
        err(&mut c, &["SET", "b", "1"]);
    }
    assert!(log_entries(&mut admin).len() > 1);
    let Value::Array(two) = q(&mut admin, &["ACL", "LOG", "2"]) else {
        panic!()
    };
    assert_eq!(two.len(), 2);
    assert!(err(&mut admin, &["ACL", "LOG", "x"]).contains("not an integer"));
    err(&mut admin, &["AUTH", "antirez", "wrong-password"]);
    let e = &log_entries(&mut admin)[0];
    assert_eq!(text(&e["reason"]), "auth");
    assert_eq!(text(&e["object"]), "AUTH");
    assert_eq!(text(&e["username"]), "antirez");
    assert_eq!(text(&e["context"]), "toplevel");
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    ok(&mut admin, &["CONFIG", "SET", "acllog-max-len", "5"]);
    for j in 0..10 {
        err(&mut c, &["SET", &format!("obj:{j}"), "123"]);
    }
    assert_eq!(log_entries(&mut admin).len(), 5);
    srv.stop();
}

#[test]
fn default_user_password_requirepass_and_hello_auth() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    // AUTH with one argument and no password configured; arity; HELLO AUTH.
    assert!(err(&mut c, &["AUTH", "foo"])
        .contains("AUTH <password> called without any password configured for the default user"));
    assert!(err(&mut c, &["AUTH", "a", "b", "c"]).contains("syntax error"));
    ok(
        &mut c,
        &["ACL", "SETUSER", "secure-user", ">supass", "on", "+@all"],
    );
    ok(&mut c, &["ACL", "SETUSER", "default", "-@all"]);
    let Value::Array(h) = q(&mut c, &["HELLO", "2", "AUTH", "secure-user", "supass"]) else {
        panic!()
    };
    assert_eq!(h.len(), 14);
    assert_eq!(text(&q(&mut c, &["ACL", "WHOAMI"])), "secure-user");
    assert!(err(&mut c, &["HELLO", "2", "AUTH", "secure-user", "nope"]).starts_with("WRONGPASS"));
    ok(&mut c, &["ACL", "SETUSER", "default", "nopass", "+@all"]);
    // The default user off: new connections are not authenticated.
    ok(&mut c, &["ACL", "SETUSER", "default", "off"]);
    let mut s = srv.raw();
    let got = roundtrip(&mut s, b"PING\r\n", 10);
    assert!(
        got.starts_with(b"-NOAUTH"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    ok(&mut c, &["ACL", "SETUSER", "default", "on"]);
    // requirepass is the default user's password, through CONFIG SET too.
    ok(&mut c, &["CONFIG", "SET", "requirepass", "s3cret"]);
    assert_eq!(list(&getuser(&mut c, "default")["flags"]), ["on"]);
    let mut u = srv.raw();
    let got = roundtrip(&mut u, b"GET k\r\n", 10);
    assert!(got.starts_with(b"-NOAUTH"));
    let got = roundtrip(&mut u, b"AUTH wrong\r\n", 20);
    assert!(got.starts_with(b"-WRONGPASS"));
    let got = roundtrip(&mut u, b"AUTH s3cret\r\nPING\r\n", 12);
    assert_eq!(got, b"+OK\r\n+PONG\r\n");
    // Binary passwords.
    ok(&mut c, &["CONFIG", "SET", "requirepass", "abc\x00def"]);
    let got = roundtrip(&mut u, b"*2\r\n$4\r\nAUTH\r\n$3\r\nabc\r\n", 10);
    assert!(got.starts_with(b"-WRONGPASS"));
    let got = roundtrip(&mut u, b"*2\r\n$4\r\nAUTH\r\n$7\r\nabc\x00def\r\n", 5);
    assert_eq!(got, b"+OK\r\n");
    // RESET: back to the default user, unauthenticated while it has a password.
    let got = roundtrip(&mut u, b"RESET\r\nPING\r\n", 20);
    assert!(
        got.starts_with(b"+RESET\r\n-NOAUTH"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    ok(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    assert_eq!(list(&getuser(&mut c, "default")["flags"]), ["on", "nopass"]);
    srv.stop();
}

#[test]
fn deleting_a_user_closes_its_connections_only() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(&mut c, &["ACL", "SETUSER", "not_used", "on", ">passwd"]);
    assert_eq!(
        q(&mut c, &["ACL", "DELUSER", "not_used", "nobody"]),
        Value::Int(1)
    );
    assert_eq!(text(&q(&mut c, &["PING"])), "PONG");
    ok(
        &mut c,
        &[
            "ACL", "SETUSER", "using", "on", "+acl", "+client", ">passwd",
        ],
    );
    let mut other = srv.client();
    ok(&mut other, &["AUTH", "using", "passwd"]);
    ok(&mut c, &["AUTH", "using", "passwd"]);
    let l = text(&q(&mut c, &["CLIENT", "LIST"]));
    assert_eq!(l.matches("user=using").count(), 2, "{l}");
    assert_eq!(q(&mut c, &["ACL", "DELUSER", "using"]), Value::Int(1));
    assert!(redis::cmd("PING").query::<String>(&mut c).is_err());
    assert!(redis::cmd("PING").query::<String>(&mut other).is_err());
    let mut c = srv.client();
    assert_eq!(
        err(&mut c, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    assert!(err(&mut c, &["ACL", "GENPASS", "-236"])
        .contains("ACL GENPASS argument must be the number"));
    assert!(err(&mut c, &["ACL", "GENPASS", "5000"])
        .contains("ACL GENPASS argument must be the number"));
    assert_eq!(text(&q(&mut c, &["ACL", "GENPASS"])).len(), 64);
    assert_eq!(text(&q(&mut c, &["ACL", "GENPASS", "5"])).len(), 2);
    assert!(err(&mut c, &["ACL", "HELP", "xxx"])
        .contains("wrong number of arguments for 'acl|help' command"));
    assert!(err(&mut c, &["ACL", "LOAD"]).contains("not configured to use an ACL file"));
    assert!(err(&mut c, &["CLIENT", "KILL", "USER", "nobody"]).contains("No such user 'nobody'"));
    srv.stop();
}

#[test]
fn selectors_and_read_write_key_permissions() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    let mut r2 = srv.client();
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-1",
            "on",
            "-@all",
            "resetkeys",
            "nopass",
        ],
    );
    ok(&mut r2, &["AUTH", "selector-1", "password"]);
    for cmd in [
        &["PING"][..],
        &["SET", "write::foo", "bar"],
        &["GET", "read::foo"],
    ] {
        assert!(err(&mut r2, cmd).contains("command"));
    }
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-1",
            "(+@write ~write::*)",
            "(+@read ~read::*)",
        ],
    );
    ok(&mut r2, &["SET", "write::foo", "bar"]);
    assert_eq!(q(&mut r2, &["GET", "read::foo"]), Value::Nil);
    assert!(err(&mut r2, &["GET", "write::foo"]).contains("keys"));
    assert!(err(&mut r2, &["SET", "read::foo", "bar"]).contains("keys"));
    // Selectors start empty; clearselectors; errors name the selector.
    ok(
        &mut c,
        &["ACL", "SETUSER", "selector-default", "reset", "()"],
    );
    let s = list_of_maps(&getuser(&mut c, "selector-default")["selectors"]);
    assert_eq!(s.len(), 1);
    assert_eq!(text(&s[0]["keys"]), "");
    assert_eq!(text(&s[0]["channels"]), "");
    assert_eq!(text(&s[0]["commands"]), "-@all");
    ok(
        &mut c,
        &["ACL", "SETUSER", "selector-del", "on", "(~added-selector)"],
    );
    let s = list_of_maps(&getuser(&mut c, "selector-del")["selectors"]);
    assert_eq!(text(&s[0]["keys"]), "~added-selector");
    ok(
        &mut c,
        &["ACL", "SETUSER", "selector-del", "clearselectors"],
    );
    assert!(list_of_maps(&getuser(&mut c, "selector-del")["selectors"]).is_empty());
    let e = err(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-syntax",
            "on",
            "(this-is-invalid)",
        ],
    );
    assert!(
        e.contains("Error in ACL SETUSER modifier '(this-is-invalid)'") && e.contains("Syntax"),
        "{e}"
    );
    let e = err(
        &mut c,
        &["ACL", "SETUSER", "selector-syntax", "on", "(&* &fail)"],
    );
    assert!(e.contains("Adding a pattern after the"), "{e}");
    assert_eq!(
        q(&mut c, &["ACL", "GETUSER", "selector-syntax"]),
        Value::Nil
    );
    // Selectors written over several arguments.
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-2",
            "(~key1 +get )",
            "( ~key2 +get )",
            "( ~key3 +get)",
            "(~key4 +get)",
        ],
    );
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-2",
            "(~key5",
            "+get",
            ")",
            "(",
            "~key6",
            "+get",
            ")",
            "(",
            "~key7",
            "+get)",
            "(~key8",
            "+get)",
        ],
    );
    let s = list_of_maps(&getuser(&mut c, "selector-2")["selectors"]);
    for (i, sel) in s.iter().enumerate() {
        assert_eq!(text(&sel["keys"]), format!("~key{}", i + 1));
    }
    assert_eq!(s.len(), 8);
    assert!(err(&mut c, &["ACL", "SETUSER", "invalid-selector", " () "]).contains("Syntax error"));
    assert!(
        err(&mut c, &["ACL", "SETUSER", "invalid-selector", "("]).contains("Unmatched parenthesis")
    );
    assert!(err(&mut c, &["ACL", "SETUSER", "invalid-selector", ")"]).contains("Syntax error"));
    // %R~ and %W~.
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "rw",
            "on",
            "nopass",
            "+@all",
            "%R~read*",
            "%W~write*",
            "%RW~rw*",
        ],
    );
    let mut u = srv.client();
    ok(&mut u, &["AUTH", "rw", "x"]);
    ok(&mut c, &["SET", "read", "1"]);
    assert_eq!(text(&q(&mut u, &["GET", "read"])), "1");
    assert!(err(&mut u, &["SET", "read", "2"]).contains("keys"));
    ok(&mut u, &["SET", "write", "2"]);
    assert!(err(&mut u, &["GET", "write"]).contains("keys"));
    // SET ... GET reads as well as writes; EXISTS needs neither.
    assert!(err(&mut u, &["SET", "write", "3", "GET"]).contains("keys"));
    q(&mut u, &["SET", "rw", "3", "GET"]);
    assert_eq!(q(&mut u, &["EXISTS", "read", "write"]), Value::Int(2));
    assert!(err(&mut u, &["LPUSH", "read", "x"]).contains("keys"));
    assert_eq!(
        text(&q(&mut c, &["ACL", "DRYRUN", "rw", "GET", "read"])),
        "OK"
    );
    assert_eq!(
        text(&q(&mut c, &["ACL", "DRYRUN", "rw", "GET", "write"])),
        "This user has no permissions to access the 'write' key"
    );
    assert_eq!(
        text(&q(
            &mut c,
            &["ACL", "DRYRUN", "rw", "COPY", "read", "write"]
        )),
        "OK"
    );
    assert_eq!(
        text(&q(
            &mut c,
            &["ACL", "DRYRUN", "rw", "COPY", "write", "read"]
        )),
        "This user has no permissions to access the 'write' key"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "not-a-user", "GET", "read"]),
        "ERR User 'not-a-user' not found"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "rw", "not-a-command", "read"]),
        "ERR Command 'not-a-command' not found"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "rw", "SET", "v"]),
        "ERR wrong number of arguments for 'set' command"
    );
    // Channels (publish is checked by DRYRUN even where this server has no pub/sub yet).
    ok(
        &mut c,
        &["ACL", "SETUSER", "ps", "resetchannels", "&foo:*", "+@all"],
    );
    assert_eq!(
        text(&q(
            &mut c,
            &["ACL", "DRYRUN", "ps", "PUBLISH", "foo:1", "m"]
        )),
        "OK"
    );
    assert_eq!(
        text(&q(&mut c, &["ACL", "DRYRUN", "ps", "PUBLISH", "bar", "m"])),
        "This user has no permissions to access the 'bar' channel"
    );
    assert_eq!(
        text(&q(&mut c, &["ACL", "DRYRUN", "ps", "PSUBSCRIBE", "foo:*"])),
        "OK"
    );
    assert!(text(&q(&mut c, &["ACL", "DRYRUN", "ps", "PSUBSCRIBE", "foo:1"])).contains("channel"));
    // GETUSER and LIST of selectors; R+W is all.
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-info",
            "-@all",
            "+get",
            "resetchannels",
            "&channel1",
            "%R~foo1",
            "%W~bar1",
            "~baz1",
        ],
    );
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-info",
            "(-@all +set resetchannels &channel2 %R~foo2 %W~bar2 ~baz2)",
        ],
    );
    let u = getuser(&mut c, "selector-info");
    assert_eq!(text(&u["keys"]), "%R~foo1 %W~bar1 ~baz1");
    assert_eq!(text(&u["channels"]), "&channel1");
    assert_eq!(text(&u["commands"]), "-@all +get");
    let s = list_of_maps(&u["selectors"]);
    assert_eq!(text(&s[0]["keys"]), "%R~foo2 %W~bar2 ~baz2");
    assert_eq!(text(&s[0]["channels"]), "&channel2");
    assert_eq!(text(&s[0]["commands"]), "-@all +set");
    let l = list(&q(&mut c, &["ACL", "LIST"]));
    let line = l
        .iter()
        .find(|x| x.starts_with("user selector-info "))
        .unwrap();
    assert_eq!(
        line,
        "user selector-info off %R~foo1 %W~bar1 ~baz1 resetchannels &channel1 -@all +get (%R~foo2 %W~bar2 ~baz2 resetchannels &channel2 -@all +set)"
    );
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "selector-rw-info",
            "%R~foo",
            "%W~foo",
            "%RW~bar",
        ],
    );
    assert_eq!(field(&mut c, "selector-rw-info", "keys"), "~foo ~bar");
    // The log names the item no selector allowed.
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "log-sel",
            "on",
            "nopass",
            "+mget",
            "~key",
            "(+mget ~key ~otherkey)",
        ],
    );
    ok(&mut r2, &["AUTH", "log-sel", "x"]);
    ok(&mut c, &["ACL", "LOG", "RESET"]);
    assert!(err(&mut r2, &["GET", "key"]).contains("command"));
    assert_eq!(text(&log_entries(&mut c)[0]["object"]), "get");
    assert!(err(&mut r2, &["MGET", "otherkey", "someotherkey"]).contains("keys"));
    assert_eq!(text(&log_entries(&mut c)[0]["object"]), "someotherkey");
    assert!(err(&mut r2, &["MGET", "key", "otherkey", "someotherkey"]).contains("keys"));
    assert_eq!(text(&log_entries(&mut c)[0]["object"]), "someotherkey");
    srv.stop();
}

fn list_of_maps(v: &Value) -> Vec<HashMap<String, Value>> {
    match v {
        Value::Array(a) => a.iter().cloned().map(map).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_acl_file_loads_at_start_saves_and_reloads() {
    let d = tmp();
    let file = d.path().join("users.acl");
    std::fs::write(
        &file,
        "user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\n\
         user default on nopass ~* &* +@all\nuser sel on nopass -@all (+set %W~w*) (+get %R~r*)\n",
    )
    .unwrap();
    let f2 = file.clone();
    let srv = Server::start_with(&pool_in(&d), move |o| o.aclfile = Some(f2));
    let mut c = srv.client();
    ok(&mut c, &["AUTH", "alice", "alice"]);
    assert_eq!(text(&q(&mut c, &["ACL", "WHOAMI"])), "alice");
    ok(&mut c, &["SET", "key", "value"]);
    ok(&mut c, &["AUTH", "bob", "bob"]);
    assert_eq!(q(&mut c, &["SADD", "set", "1", "2", "3"]), Value::Int(3));
    assert!(err(&mut c, &["SET", "key", "value"]).contains("'set'"));
    let s = list_of_maps(&getuser(&mut c, "sel")["selectors"]);
    assert_eq!(text(&s[0]["commands"]), "-@all +set");
    assert_eq!(text(&s[0]["keys"]), "%W~w*");
    assert_eq!(text(&s[1]["keys"]), "%R~r*");
    // SAVE, then LOAD: every connection of a user other than default closes.
    ok(
        &mut c,
        &["ACL", "SETUSER", "eve", "+get", "allkeys", ">eve", "on"],
    );
    ok(&mut c, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("user eve on #"), "{saved}");
    assert!(!saved.contains(">eve"));
    ok(&mut c, &["ACL", "LOAD"]);
    assert!(redis::cmd("ACL")
        .arg("LIST")
        .query::<Value>(&mut c)
        .is_err());
    let mut c = srv.client();
    ok(&mut c, &["AUTH", "eve", "eve"]);
    assert_eq!(text(&q(&mut c, &["GET", "key"])), "value");
    assert!(err(&mut c, &["SET", "key", "value"]).contains("'set'"));
    // A file with errors changes nothing.
    let mut c = srv.client();
    std::fs::write(&file, format!("{saved}user alice on nopass ~* -@all\n")).unwrap();
    let e = err(&mut c, &["ACL", "LOAD"]);
    assert!(e.contains("Duplicate user 'alice' found"), "{e}");
    assert_eq!(field(&mut c, "alice", "commands"), "+@all");
    std::fs::write(&file, "user x on +nosuch\nnot a user line\n").unwrap();
    let e = err(&mut c, &["ACL", "LOAD"]);
    assert!(
        e.contains("Error in applying operation '+nosuch'")
            && e.contains("should start with user keyword"),
        "{e}"
    );
    assert!(getuser(&mut c, "eve").contains_key("flags"));
    // A file without the default user: the default default.
    std::fs::write(&file, "user solo on nopass +@all ~*\n").unwrap();
    ok(&mut c, &["ACL", "LOAD"]);
    assert_eq!(list(&q(&mut c, &["ACL", "USERS"])), ["default", "solo"]);
    assert_eq!(field(&mut c, "solo", "channels"), "");
    assert_eq!(field(&mut c, "default", "channels"), "&*");
    srv.stop();
    // Errors in the file stop the server at start.
    std::fs::write(&file, "user a on +nosuch\n").unwrap();
    let o = daisy_kv::Options {
        pool: pool_in(&d),
        port: 0,
        quiet: true,
        aclfile: Some(file.clone()),
        ..Default::default()
    };
    let e = daisy_kv::serve(&o, |_| {}).expect_err("bad ACL file");
    assert!(e.contains("ACL errors"), "{e}");
}

#[test]
fn acl_pubsub_default_sets_new_users_channels() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(
        &mut c,
        &["CONFIG", "SET", "acl-pubsub-default", "allchannels"],
    );
    ok(&mut c, &["ACL", "SETUSER", "mydefault"]);
    assert_eq!(field(&mut c, "mydefault", "channels"), "&*");
    assert!(err(&mut c, &["ACL", "SETUSER", "onechannel", "&test"])
        .contains("start with an empty list of channels"));
    ok(
        &mut c,
        &["CONFIG", "SET", "acl-pubsub-default", "resetchannels"],
    );
    assert_eq!(field(&mut c, "mydefault", "channels"), "&*");
    ok(&mut c, &["ACL", "SETUSER", "onechannel", "&test"]);
    assert_eq!(field(&mut c, "onechannel", "channels"), "&test");
    srv.stop();
}

/// A subscriber whose user loses the permission for a channel, shard channel or pattern it
/// listens to is disconnected when ACL SETUSER takes it away (Redis 7.0's
/// `ACLKillPubsubClientsIfNeeded`); subscribers still allowed, other users' subscribers and
/// a SETUSER that only adds channels close nothing; DELUSER closes them all.
#[test]
fn subscribers_that_lose_a_channel_permission_are_disconnected() {
    use super::pubsub::{w, Reader, R};
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut c = srv.client();
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "psuser",
            "on",
            "nopass",
            "resetchannels",
            "&foo:1",
            "&bar:*",
            "&sh",
            "+@all",
        ],
    );
    let sub = |args: &[&str]| {
        let mut r = Reader::new(srv.raw());
        r.send(&["AUTH", "psuser", "x"]);
        assert_eq!(r.read(), R::Simple("OK".into()));
        r.send(args);
        let kind = args[0].to_ascii_lowercase();
        assert_eq!(r.words(), w(&[&kind, args[1], "1"]));
        r
    };
    let mut on_foo = sub(&["SUBSCRIBE", "foo:1"]);
    let mut on_pattern = sub(&["PSUBSCRIBE", "bar:*"]);
    let mut on_shard = sub(&["SSUBSCRIBE", "sh"]);
    let mut by_default = Reader::new(srv.raw());
    by_default.send(&["SUBSCRIBE", "foo:1"]);
    assert_eq!(by_default.words(), w(&["subscribe", "foo:1", "1"]));
    // Adding a channel takes nothing away.
    ok(&mut c, &["ACL", "SETUSER", "psuser", "&more"]);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("foo:1")
        .arg("m1")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(on_foo.words(), w(&["message", "foo:1", "m1"]));
    assert_eq!(by_default.words(), w(&["message", "foo:1", "m1"]));
    // foo:1 goes: its subscriber is closed, the others stay.
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "psuser",
            "resetchannels",
            "&bar:*",
            "&sh",
            "&more",
        ],
    );
    assert!(on_foo.closed_within(5), "the foo:1 subscriber is closed");
    let n: i64 = redis::cmd("PUBLISH")
        .arg("bar:x")
        .arg("m2")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(on_pattern.words(), w(&["pmessage", "bar:*", "bar:x", "m2"]));
    // A pattern is compared literally: bar:* is not allowed by bar:x.
    ok(
        &mut c,
        &["ACL", "SETUSER", "psuser", "resetchannels", "&bar:x", "&sh"],
    );
    assert!(
        on_pattern.closed_within(5),
        "the bar:* subscriber is closed"
    );
    ok(
        &mut c,
        &["ACL", "SETUSER", "psuser", "resetchannels", "&bar:x"],
    );
    assert!(on_shard.closed_within(5), "the sh subscriber is closed");
    // The default user's subscriber never was concerned.
    let n: i64 = redis::cmd("PUBLISH")
        .arg("foo:1")
        .arg("m3")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(by_default.words(), w(&["message", "foo:1", "m3"]));
    srv.stop();
}
