//! Lua scripting: EVAL's replies and conversions byte for byte as Redis 7.0.15 gives them,
//! `redis.call` errors, the sandbox, EVAL inside MULTI, a script's writes surviving a restart
//! (and a failing script keeping the writes before its error), the script cache and the
//! function libraries surviving a restart, SCRIPT FLUSH, FUNCTION and FCALL, the Lua
//! libraries (`struct` byte for byte as Redis), SCRIPT KILL of a busy script, what a busy
//! script answers the other clients (a request read in the same event-loop round, MULTI and
//! EXEC), and CLIENT PAUSE WRITE letting scripts that declare no writes run.

use super::*;

/// One request as RESP.
fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Length of the first complete reply in `b`, if it is all there.
fn reply_len(b: &[u8]) -> Option<usize> {
    fn at(b: &[u8], i: usize) -> Option<usize> {
        let end = i + b.get(i..)?.windows(2).position(|w| w == b"\r\n")?;
        let line = &b[i + 1..end];
        let n: i64 = std::str::from_utf8(line).ok()?.parse().unwrap_or(0);
        let next = end + 2;
        match b[i] {
            b'$' | b'=' => {
                if n < 0 {
                    Some(next)
                } else if b.len() >= next + n as usize + 2 {
                    Some(next + n as usize + 2)
                } else {
                    None
                }
            }
            b'*' | b'~' | b'>' => {
                let mut j = next;
                for _ in 0..n.max(0) {
                    j = at(b, j)?;
                }
                Some(j)
            }
            b'%' => {
                let mut j = next;
                for _ in 0..2 * n.max(0) {
                    j = at(b, j)?;
                }
                Some(j)
            }
            _ => Some(next),
        }
    }
    at(b, 0)
}

/// Send one request, read exactly one reply.
fn ask(s: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    s.write_all(&encode(args)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        if let Some(n) = reply_len(&out) {
            assert_eq!(n, out.len(), "one reply: {}", String::from_utf8_lossy(&out));
            return out;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("connection ended: {}", String::from_utf8_lossy(&out)),
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn eval(s: &mut TcpStream, script: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    let nk = keys.len().to_string();
    let mut a: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), nk.as_bytes()];
    a.extend(keys.iter().map(|k| k.as_bytes()));
    a.extend(args.iter().map(|k| k.as_bytes()));
    ask(s, &a)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn eval_converts_lua_values_to_replies_as_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let cases: &[(&str, &[u8])] = &[
        ("return 'hello'", b"$5\r\nhello\r\n"),
        ("return 100.5", b":100\r\n"),
        ("return -3.9", b":-3\r\n"),
        ("return true", b":1\r\n"),
        ("return false", b"$-1\r\n"),
        ("return nil", b"$-1\r\n"),
        ("return {ok='fine'}", b"+fine\r\n"),
        (
            "return {err='ERR this is an error'}",
            b"-ERR this is an error\r\n",
        ),
        (
            "return {1,2,3,'ciao',{1,2}}",
            b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n",
        ),
        ("return {1,2,nil,4}", b"*2\r\n:1\r\n:2\r\n"),
        ("return _G", b"*0\r\n"),
        (
            "local a = {}; setmetatable(a,{__index=function() foo() end}) return a",
            b"*0\r\n",
        ),
        (
            "return redis.status_reply('MY_OK custom')",
            b"+MY_OK custom\r\n",
        ),
        (
            "return redis.error_reply('MY_ERR custom msg')",
            b"-MY_ERR custom msg\r\n",
        ),
        ("return redis.error_reply('no code')", b"-no code\r\n"),
        (
            "return redis.sha1hex('Pizza & Mandolino')",
            b"$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n",
        ),
        ("return {double=3.5}", b"$3\r\n3.5\r\n"),
        ("return 'hello' --trailing comment", b"$5\r\nhello\r\n"),
    ];
    for (script, want) in cases {
        assert_eq!(
            text(&eval(&mut s, script, &[], &[])),
            text(want),
            "{script}"
        );
    }
    assert_eq!(
        eval(
            &mut s,
            "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
            &["a", "b"],
            &["c", "d"]
        ),
        b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    // RESP3: booleans and doubles of their own type once the script and the client ask.
    assert!(ask(&mut s, &[b"HELLO", b"3"]).starts_with(b"%"));
    assert_eq!(
        eval(&mut s, "redis.setresp(3); return true", &[], &[]),
        b"#t\r\n"
    );
    assert_eq!(eval(&mut s, "return false", &[], &[]), b"_\r\n");
    assert_eq!(eval(&mut s, "return {double=3.5}", &[], &[]), b",3.5\r\n");
    assert_eq!(
        eval(&mut s, "return {map={a=1}}", &[], &[]),
        b"%1\r\n$1\r\na\r\n:1\r\n"
    );
    srv.stop();
}

#[test]
fn redis_call_converts_replies_to_lua_values() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    ask(&mut s, &[b"SET", b"x", b"0"]);
    assert_eq!(
        eval(
            &mut s,
            "local v = redis.call('incr', KEYS[1]) return {type(v), v}",
            &["x"],
            &[]
        ),
        b"*2\r\n$6\r\nnumber\r\n:1\r\n"
    );
    assert_eq!(
        eval(
            &mut s,
            "local v = redis.call('get', 'nosuch') return {type(v), v == false}",
            &[],
            &[]
        ),
        b"*2\r\n$7\r\nboolean\r\n:1\r\n"
    );
    assert_eq!(
        eval(
            &mut s,
            "local v = redis.call('set', 'k', 'v') return {type(v), v['ok']}",
            &[],
            &[]
        ),
        b"*2\r\n$5\r\ntable\r\n$2\r\nOK\r\n"
    );
    ask(&mut s, &[b"RPUSH", b"l", b"a", b"b", b"c"]);
    assert_eq!(
        eval(
            &mut s,
            "local v = redis.call('lrange', 'l', 0, -1) return {#v, v[3]}",
            &[],
            &[]
        ),
        b"*2\r\n:3\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        eval(
            &mut s,
            "local v = redis.pcall('incr', 'k') return v['err']",
            &[],
            &[]
        ),
        b"$43\r\nERR value is not an integer or out of range\r\n"
    );
    // Numbers keep 17 significant digits; big numbers in strings stay strings.
    assert_eq!(
        eval(
            &mut s,
            "redis.call('set','f',9007199254740991) return redis.call('get','f')",
            &[],
            &[]
        ),
        b"$16\r\n9007199254740991\r\n"
    );
    // RESP3 inside the script: HGETALL gives a map.
    ask(&mut s, &[b"HSET", b"h", b"f", b"v"]);
    assert_eq!(
        eval(
            &mut s,
            "redis.setresp(3); return redis.call('hgetall','h')",
            &[],
            &[]
        ),
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        "a RESP2 client gets the map flattened"
    );
    srv.stop();
}

#[test]
fn redis_call_errors_read_as_redis_writes_them() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let sha = |script: &str| daisy_kv::scripting::sha1_hex(script.as_bytes());
    let script = "redis.call('nosuchcommand')";
    assert_eq!(
        text(&eval(&mut s, script, &[], &[])),
        format!(
            "-ERR Unknown Redis command called from script script: {}, on @user_script:1.\r\n",
            sha(script)
        )
    );
    let script = "redis.call('get','a','b','c')";
    assert_eq!(
        text(&eval(&mut s, script, &[], &[])),
        format!(
            "-ERR Wrong number of args calling Redis command from script script: {}, on @user_script:1.\r\n",
            sha(script)
        )
    );
    ask(&mut s, &[b"SET", b"foo", b"bar"]);
    let script = "\nredis.call('lpush',KEYS[1],'val')";
    assert_eq!(
        text(&eval(&mut s, script, &["foo"], &[])),
        format!(
            "-WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:2.\r\n",
            sha(script)
        )
    );
    assert!(text(&eval(&mut s, "return redis.call()", &[], &[])).contains("one argument"));
    assert!(
        text(&eval(&mut s, "return redis.pcall('blpop','x',0)", &[], &[]))
            .starts_with("-ERR This Redis command is not allowed from script")
    );
    assert!(
        text(&eval(&mut s, "return redis.call('ping', {})", &[], &[]))
            .starts_with("-ERR Lua redis lib command arguments must be strings or integers")
    );
    assert_eq!(
        ask(
            &mut s,
            &[b"EVAL_RO", b"redis.call('del', KEYS[1])", b"1", b"foo"]
        )[..60],
        b"-ERR Write commands are not allowed from read-only scripts. "[..]
    );
    assert_eq!(
        ask(&mut s, &[b"EVAL", b"return 1", b"-12"]),
        b"-ERR Number of keys can't be negative\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"EVAL", b"return 1", b"2", b"a"]),
        b"-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert!(text(&eval(&mut s, "return +", &[], &[]))
        .starts_with("-ERR Error compiling script (new function): user_script:1:"));
    assert!(text(&eval(&mut s, "#!lua flags=what?\nreturn 1", &[], &[]))
        .starts_with("-ERR Unexpected flag in script shebang: what?"));
    assert!(text(&eval(
        &mut s,
        "#!lua flags=no-writes\nredis.call('set','x',1)",
        &[],
        &[]
    ))
    .starts_with("-ERR Write commands are not allowed from read-only scripts."));
    srv.stop();
}

#[test]
fn the_sandbox_refuses_globals_bytecode_and_missing_libraries() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    let refused: &[(&str, &str)] = &[
        ("a = 10", "Attempt to modify a readonly table"),
        (
            "return a",
            "Script attempted to access nonexistent global variable 'a'",
        ),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "local g = getmetatable(_G); g.__index = {}",
            "Attempt to modify a readonly table",
        ),
        (
            "redis.call = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        (
            "cjson.encode = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        (
            "bit.lshift = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("_G = {}", "Attempt to modify a readonly table"),
        ("print('x')", "nonexistent global variable 'print'"),
        ("os.exit()", "nonexistent global variable 'os'"),
        ("io.write('x')", "nonexistent global variable 'io'"),
        ("loadfile('x')", "nonexistent global variable 'loadfile'"),
        (
            "return loadstring(string.dump(function() return 1 end))()",
            "attempt to call a nil value",
        ),
    ];
    for (script, want) in refused {
        let r = text(&eval(&mut s, script, &[], &[]));
        assert!(r.starts_with("-ERR ") && r.contains(want), "{script}: {r}");
    }
    // pcall gives the message of Redis's error tables; the protection holds inside it.
    assert_eq!(
        text(&eval(
            &mut s,
            "local ok, e = pcall(function() return foo end) return tostring(ok) .. ' ' .. e",
            &[],
            &[]
        )),
        "$81\r\nfalse user_script:1: Script attempted to access nonexistent global variable 'foo'\r\n"
    );
    assert_eq!(
        eval(&mut s, "return loadstring('return 7')()", &[], &[]),
        b":7\r\n"
    );
    srv.stop();
}

#[test]
fn lua_libraries_cjson_cmsgpack_bit() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    assert_eq!(
        text(&eval(
            &mut s,
            "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
            &[],
            &[]
        )),
        "$26\r\n0 -5000 -1 0.0003 1023.2 0\r\n"
    );
    assert_eq!(
        text(&eval(&mut s, "return cjson.encode({1,'a',true})", &[], &[])),
        "$12\r\n[1,\"a\",true]\r\n"
    );
    let hex = "local e = cmsgpack.pack(ARGV[1] + 0) local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h";
    assert_eq!(
        text(&eval(&mut s, hex, &[], &["0.1"])),
        "$18\r\ncb3fb999999999999a\r\n"
    );
    assert_eq!(
        text(&eval(&mut s, hex, &[], &["-1099511627776"])),
        "$18\r\nd3ffffff0000000000\r\n"
    );
    assert_eq!(
        eval(
            &mut s,
            "local t = cmsgpack.unpack(cmsgpack.pack({1,2,{a=3}})) return t[3].a",
            &[],
            &[]
        ),
        b":3\r\n"
    );
    assert_eq!(
        eval(&mut s, "return {bit.band(7, 3), bit.bor(1,2,4,8,16,32,64,128), bit.bxor(1,2), bit.tobit(2^32 + 1)}", &[], &[]),
        b"*4\r\n:3\r\n:255\r\n:3\r\n:1\r\n"
    );
    srv.stop();
}

#[test]
fn eval_inside_multi_runs_at_exec() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut s = srv.raw();
    assert_eq!(ask(&mut s, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(
        ask(
            &mut s,
            &[b"EVAL", b"return redis.call('incr', KEYS[1])", b"1", b"n"]
        ),
        b"+QUEUED\r\n"
    );
    assert_eq!(ask(&mut s, &[b"INCR", b"n"]), b"+QUEUED\r\n");
    assert_eq!(ask(&mut s, &[b"EXEC"]), b"*2\r\n:1\r\n:2\r\n");
    srv.stop();
}

#[test]
fn a_scripts_writes_survive_a_restart_and_an_error_keeps_the_earlier_ones() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    assert_eq!(
        eval(&mut s, "for i = 1, 100 do redis.call('rpush', KEYS[1], i) end return redis.call('llen', KEYS[1])", &["list"], &[]),
        b":100\r\n"
    );
    // Redis's rule: the writes before a failing call stay.
    let r = eval(
        &mut s,
        "redis.call('set', 'a', '1') redis.call('nosuch') redis.call('set', 'b', '2')",
        &[],
        &[],
    );
    assert!(r.starts_with(b"-ERR Unknown Redis command"), "{}", text(&r));
    drop(s);
    srv.stop();
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    assert_eq!(ask(&mut s, &[b"LLEN", b"list"]), b":100\r\n");
    assert_eq!(ask(&mut s, &[b"GET", b"a"]), b"$1\r\n1\r\n");
    assert_eq!(ask(&mut s, &[b"GET", b"b"]), b"$-1\r\n");
    drop(s);
    srv.stop();
    check_pool(&pool);
}

#[test]
fn the_script_cache_survives_a_restart_until_script_flush() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    let sha = ask(&mut s, &[b"SCRIPT", b"LOAD", b"return 'loaded'"]);
    assert_eq!(sha, b"$40\r\nb534286061d4b9e4026607613b95c06c06015ae8\r\n");
    eval(&mut s, "return 1+1", &[], &[]);
    drop(s);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    // Redis would answer NOSCRIPT here: its cache lives in memory only.
    assert_eq!(
        ask(
            &mut s,
            &[
                b"EVALSHA",
                b"B534286061D4B9E4026607613B95C06C06015AE8",
                b"0"
            ]
        ),
        b"$6\r\nloaded\r\n"
    );
    assert_eq!(
        ask(
            &mut s,
            &[
                b"SCRIPT",
                b"EXISTS",
                b"a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9",
                b"a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bda"
            ]
        ),
        b"*2\r\n:1\r\n:0\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"EVALSHA", b"NotValidShaSUM", b"0"])[..9],
        b"-NOSCRIPT"[..]
    );
    assert_eq!(ask(&mut s, &[b"SCRIPT", b"FLUSH"]), b"+OK\r\n");
    assert_eq!(
        ask(
            &mut s,
            &[
                b"EVALSHA",
                b"b534286061d4b9e4026607613b95c06c06015ae8",
                b"0"
            ]
        ),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    drop(s);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    assert_eq!(
        ask(
            &mut s,
            &[
                b"SCRIPT",
                b"EXISTS",
                b"b534286061d4b9e4026607613b95c06c06015ae8"
            ]
        ),
        b"*1\r\n:0\r\n"
    );
    drop(s);
    srv.stop();
}

#[test]
fn functions_load_call_list_and_survive_a_restart() {
    let d = tmp();
    let pool = pool_in(&d);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    let lib = b"#!lua name=mylib\nredis.register_function('incr2', function(keys, args) return redis.call('incrby', keys[1], 2) end)\nredis.register_function{function_name='get_ro', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    assert_eq!(
        ask(&mut s, &[b"FUNCTION", b"LOAD", lib]),
        b"$5\r\nmylib\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"FUNCTION", b"LOAD", lib]),
        b"-ERR Library 'mylib' already exists\r\n"
    );
    assert_eq!(ask(&mut s, &[b"FCALL", b"incr2", b"1", b"n"]), b":2\r\n");
    assert_eq!(
        ask(&mut s, &[b"FCALL_RO", b"get_ro", b"1", b"n"]),
        b"$1\r\n2\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"FCALL_RO", b"incr2", b"1", b"n"]),
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"FCALL", b"nosuch", b"0"]),
        b"-ERR Function not found\r\n"
    );
    assert_eq!(
        ask(&mut s, &[b"FUNCTION", b"LOAD", b"return 1"]),
        b"-ERR Missing library metadata\r\n"
    );
    assert_eq!(
        ask(
            &mut s,
            &[b"FUNCTION", b"LOAD", b"#!lua name=empty\nlocal a = 1"]
        ),
        b"-ERR No functions registered\r\n"
    );
    drop(s);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    assert_eq!(ask(&mut s, &[b"FCALL", b"incr2", b"1", b"n"]), b":4\r\n");
    let list = text(&ask(&mut s, &[b"FUNCTION", b"LIST"]));
    assert!(
        list.contains("mylib") && list.contains("get_ro") && list.contains("no-writes"),
        "{list}"
    );
    let dump = ask(&mut s, &[b"FUNCTION", b"DUMP"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
    assert_eq!(ask(&mut s, &[b"FUNCTION", b"FLUSH"]), b"+OK\r\n");
    assert_eq!(
        ask(&mut s, &[b"FCALL", b"incr2", b"1", b"n"]),
        b"-ERR Function not found\r\n"
    );
    assert_eq!(ask(&mut s, &[b"FUNCTION", b"RESTORE", payload]), b"+OK\r\n");
    assert_eq!(ask(&mut s, &[b"FCALL", b"incr2", b"1", b"n"]), b":6\r\n");
    assert_eq!(ask(&mut s, &[b"FUNCTION", b"DELETE", b"mylib"]), b"+OK\r\n");
    drop(s);
    srv.stop();
    check_pool(&pool);
    let srv = Server::start(&pool);
    let mut s = srv.raw();
    assert_eq!(
        ask(&mut s, &[b"FCALL", b"incr2", b"1", b"n"]),
        b"-ERR Function not found\r\n"
    );
    drop(s);
    srv.stop();
}

#[test]
fn a_busy_script_answers_busy_and_script_kill_stops_it_unless_it_wrote() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut rd = srv.raw();
    assert_eq!(ask(&mut r, &[b"SCRIPT", b"KILL"])[..8], b"-NOTBUSY"[..]);
    assert_eq!(
        ask(&mut r, &[b"CONFIG", b"SET", b"lua-time-limit", b"10"]),
        b"+OK\r\n"
    );
    // A read-only script that never ends, and a PING pipelined behind it.
    let mut req = encode(&[
        b"EVAL",
        b"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        b"0",
    ]);
    req.extend_from_slice(&encode(&[b"PING"]));
    rd.write_all(&req).unwrap();
    assert_eq!(
        wait_busy(&mut r),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(
        ask(&mut r, &[b"FUNCTION", b"KILL"])[..5],
        b"-BUSY"[..],
        "FUNCTION KILL does not stop EVAL"
    );
    assert_eq!(ask(&mut r, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let killed = text(&read_reply(&mut rd));
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    assert_eq!(read_reply(&mut rd), b"+PONG\r\n", "the connection goes on");
    assert_eq!(ask(&mut r, &[b"PING"]), b"+PONG\r\n");
    // A script that wrote cannot be killed; it runs to its end and its write stays.
    rd.write_all(&encode(&[b"EVAL", b"redis.call('set', KEYS[1], 'y') local function now() local t = redis.call('time') return tonumber(t[1]) * 1000000 + tonumber(t[2]) end local t0 = now() while now() - t0 < 1500000 do end return 'done'", b"1", b"w"])).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let busy = wait_busy(&mut r);
    assert!(busy.starts_with(b"-BUSY"), "{}", text(&busy));
    assert_eq!(
        ask(&mut r, &[b"SCRIPT", b"KILL"])[..12],
        b"-UNKILLABLE "[..]
    );
    assert_eq!(read_reply(&mut rd), b"$4\r\ndone\r\n");
    assert_eq!(ask(&mut r, &[b"GET", b"w"]), b"$1\r\ny\r\n");
    drop((r, rd));
    srv.stop();
}

/// Ask GET until the server answers BUSY (a script running past the busy threshold), at most
/// 20 s: how long a script takes to start depends on the machine's load, not a fixed sleep.
fn wait_busy(r: &mut TcpStream) -> Vec<u8> {
    let t0 = std::time::Instant::now();
    loop {
        let got = ask(r, &[b"GET", b"busy-probe"]);
        if got.starts_with(b"-BUSY") || t0.elapsed() > Duration::from_secs(20) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Read one reply (nothing sent).
fn read_reply(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if let Some(n) = reply_len(&out) {
            assert_eq!(n, out.len());
            return out;
        }
        match s.read(&mut byte) {
            Ok(0) | Err(_) => panic!("connection ended: {}", text(&out)),
            Ok(_) => out.push(byte[0]),
        }
    }
}

/// A script that loops `ms` milliseconds by the server's clock (TIME), then returns `ret`.
fn spin_script(ms: u64, ret: &str) -> String {
    format!(
        "local function now() local t = redis.call('time') return tonumber(t[1]) * 1000000 + tonumber(t[2]) end \
         local t0 = now() while now() - t0 < {} do end return '{ret}'",
        ms * 1000
    )
}

/// Nothing arrives on `s` within `ms` (it waits: paused, or behind a script).
fn silent_for(s: &mut TcpStream, ms: u64) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(ms))).unwrap();
    let mut b = [0u8; 1];
    let r = s.read(&mut b);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut)
}

#[test]
fn a_request_read_in_the_same_round_as_a_script_that_never_ends_is_answered_busy() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut m = srv.raw();
    let mut blocker = srv.raw();
    let mut rd = srv.raw();
    assert_eq!(
        ask(&mut r, &[b"CONFIG", b"SET", b"lua-time-limit", b"500"]),
        b"+OK\r\n"
    );
    assert_eq!(ask(&mut m, &[b"MULTI"]), b"+OK\r\n");
    // While a 300 ms script (under the threshold) holds the event loop, a script that never
    // ends, then a PING and a command inside MULTI, arrive: the next round reads all three,
    // the script first.
    let spin = spin_script(300, "blocker");
    blocker
        .write_all(&encode(&[b"EVAL", spin.as_bytes(), b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    rd.write_all(&encode(&[b"EVAL", b"while true do end", b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    r.write_all(&encode(&[b"PING"])).unwrap();
    m.write_all(&encode(&[b"INCR", b"x"])).unwrap();
    let busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(
        read_reply(&mut r),
        busy,
        "the PING is answered by the busy script"
    );
    assert_eq!(read_reply(&mut m), busy);
    assert_eq!(read_reply(&mut blocker), b"$7\r\nblocker\r\n");
    // Inside MULTI, the refused INCR marks the transaction.
    assert_eq!(
        ask(&mut m, &[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(ask(&mut m, &[b"PING", b"after"]), busy, "MULTI has ended");
    assert_eq!(ask(&mut r, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let killed = text(&read_reply(&mut rd));
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{killed}"
    );
    assert_eq!(ask(&mut r, &[b"PING"]), b"+PONG\r\n");
    assert_eq!(
        ask(&mut r, &[b"GET", b"x"]),
        b"$-1\r\n",
        "the INCR never ran"
    );
    let info = text(&ask(&mut r, &[b"INFO", b"errorstats"]));
    assert!(info.contains("errorstat_BUSY:count=3"), "{info}");
    assert!(info.contains("errorstat_EXECABORT:count=1"), "{info}");
    drop((r, m, blocker, rd));
    srv.stop();
}

#[test]
fn multi_and_exec_while_a_script_is_busy_answer_as_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut rd = srv.raw();
    let mut a = srv.raw();
    let mut b = srv.raw();
    assert_eq!(
        ask(&mut r, &[b"CONFIG", b"SET", b"lua-time-limit", b"10"]),
        b"+OK\r\n"
    );
    assert_eq!(ask(&mut r, &[b"SET", b"xx", b"1"]), b"+OK\r\n");
    // `b` is inside MULTI with one command queued before the script starts.
    assert_eq!(ask(&mut b, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ask(&mut b, &[b"INCR", b"xx"]), b"+QUEUED\r\n");
    rd.write_all(&encode(&[b"EVAL", b"while true do end", b"0"]))
        .unwrap();
    wait_busy(&mut r);
    let busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    // MULTI is allowed while busy; what follows is refused and marks the transaction.
    assert_eq!(ask(&mut a, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ask(&mut a, &[b"INCR", b"xx"]), busy);
    assert_eq!(
        ask(&mut a, &[b"MULTI"]),
        b"-ERR MULTI calls can not be nested\r\n"
    );
    // Allowed commands that do not run at once inside MULTI are queued, as always.
    assert_eq!(ask(&mut a, &[b"UNWATCH"]), b"+QUEUED\r\n");
    // EXEC is not allowed: it ends the transaction with EXECABORT ... BUSY.
    assert_eq!(
        ask(&mut b, &[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(
        ask(&mut b, &[b"DISCARD"]),
        b"-ERR DISCARD without MULTI\r\n"
    );
    assert_eq!(
        ask(&mut r, &[b"FUNCTION", b"KILL"]),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(ask(&mut r, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    assert!(text(&read_reply(&mut rd)).starts_with("-ERR Script killed by user"));
    // After the script, `a`'s transaction goes on, marked by the refused INCR.
    assert_eq!(ask(&mut a, &[b"INCR", b"xx"]), b"+QUEUED\r\n");
    assert_eq!(
        ask(&mut a, &[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(ask(&mut a, &[b"PING", b"asdf"]), b"$4\r\nasdf\r\n");
    assert_eq!(ask(&mut b, &[b"PING", b"asdf"]), b"$4\r\nasdf\r\n");
    assert_eq!(ask(&mut r, &[b"GET", b"xx"]), b"$1\r\n1\r\n", "no INCR ran");
    drop((r, rd, a, b));
    srv.stop();
}

#[test]
fn client_pause_write_lets_scripts_that_declare_no_writes_run() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut rr = srv.raw();
    let mut held = srv.raw();
    assert_eq!(ask(&mut r, &[b"SET", b"x", b"y"]), b"+OK\r\n");
    assert_eq!(
        ask(
            &mut r,
            &[
                b"FUNCTION",
                b"LOAD",
                b"#!lua name=f1\nredis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}\nredis.register_function('f2', function() return 'w' end)"
            ]
        ),
        b"$2\r\nf1\r\n"
    );
    assert_eq!(
        ask(&mut r, &[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
        b"+OK\r\n"
    );
    let ro = b"#!lua flags=no-writes\nreturn 'unique script'";
    assert_eq!(
        ask(&mut rr, &[b"EVAL", ro, b"0"]),
        b"$13\r\nunique script\r\n"
    );
    assert_eq!(
        ask(&mut rr, &[b"EVAL", ro, b"0"]),
        b"$13\r\nunique script\r\n",
        "cached"
    );
    assert_eq!(
        ask(
            &mut rr,
            &[b"EVAL_RO", b"return redis.call('GeT', KEYS[1])", b"1", b"x"]
        ),
        b"$1\r\ny\r\n"
    );
    let sha = ask(
        &mut rr,
        &[b"SCRIPT", b"LOAD", b"#!lua flags=no-writes\nreturn 2"],
    );
    let sha = &sha[5..45];
    assert_eq!(ask(&mut rr, &[b"EVALSHA", sha, b"0"]), b":2\r\n");
    assert_eq!(ask(&mut rr, &[b"FCALL", b"f1", b"0"]), b"$5\r\nhello\r\n");
    assert_eq!(
        ask(&mut rr, &[b"FCALL_RO", b"f1", b"0"]),
        b"$5\r\nhello\r\n"
    );
    assert_eq!(ask(&mut rr, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ask(&mut rr, &[b"EVAL", ro, b"0"]), b"+QUEUED\r\n");
    assert_eq!(
        ask(&mut rr, &[b"EXEC"]),
        b"*1\r\n$13\r\nunique script\r\n",
        "an EXEC of no-writes scripts is not held"
    );
    // A script without flags, with flags that allow writes, or a function without
    // no-writes, may write: held until the pause ends.
    for req in [
        &[&b"EVAL"[..], b"return 1", b"0"][..],
        &[b"EVAL", b"#!lua\nreturn 1", b"0"],
        &[b"FCALL", b"f2", b"0"],
    ] {
        held.write_all(&encode(req)).unwrap();
    }
    assert!(
        silent_for(&mut held, 200),
        "write scripts wait for the pause"
    );
    assert_eq!(ask(&mut r, &[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    assert_eq!(read_reply(&mut held), b":1\r\n");
    assert_eq!(read_reply(&mut held), b":1\r\n");
    assert_eq!(read_reply(&mut held), b"$1\r\nw\r\n");
    // A read-only script refuses may-replicate commands such as PUBLISH.
    let e = text(&ask(
        &mut r,
        &[b"EVAL_RO", b"return redis.call('publish','ch','msg')", b"0"],
    ));
    assert!(
        e.starts_with("-ERR Write commands are not allowed from read-only scripts. script: "),
        "{e}"
    );
    drop((r, rr, held));
    srv.stop();
}

#[test]
fn the_struct_library_packs_and_unpacks_as_redis() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    // Each reply as Redis 7.0.15 gives it (x86-64).
    let cases: &[(&str, &[u8])] = &[
        ("return struct.pack('>I4', 258)", b"$4\r\n\0\0\x01\x02\r\n"),
        ("return {struct.unpack('<hH', '\\255\\255\\1\\0')}", b"*3\r\n:-1\r\n:1\r\n:5\r\n"),
        ("return struct.size('!4 b i')", b":8\r\n"),
        ("return {struct.unpack('b c0', '\\3abc')}", b"*2\r\n$3\r\nabc\r\n:5\r\n"),
        ("return struct.pack('s', 'ab')", b"$3\r\nab\0\r\n"),
        ("return struct.pack('>d', 1.5)", b"$8\r\n?\xf8\0\0\0\0\0\0\r\n"),
        ("return tostring(struct.unpack('<f', struct.pack('<f', 0.1)))", b"$16\r\n0.10000000149012\r\n"),
        ("return struct.pack('>l', -1)", b"$8\r\n\xff\xff\xff\xff\xff\xff\xff\xff\r\n"),
        ("return struct.pack('>L', 1e20)", b"$8\r\n\0\0\0\0\0\0\0\0\r\n"),
        ("return struct.pack('b', 300)", b"$1\r\n,\r\n"),
        ("return tostring(struct.unpack('>L', struct.pack('>L', -1)))", b"$18\r\n1.844674407371e+19\r\n"),
        ("return {struct.unpack('<i3 >i3 I9 i12', struct.pack('<i3 >i3 I9 i12', -2, -2, 5, -1))}", b"*5\r\n:-2\r\n:-2\r\n:5\r\n:-1\r\n:28\r\n"),
        ("return struct.size('!2 b d c3 x T')", b":22\r\n"),
        ("return {struct.unpack('i', 'abcdefgh', 5)}", b"*2\r\n:1751606885\r\n:9\r\n"),
        ("return {struct.unpack('f d', struct.pack('f d', 1/0, -1/0))}", b"*3\r\n:-9223372036854775808\r\n:-9223372036854775808\r\n:13\r\n"),
        ("return {pcall(struct.pack, 'y')}", b"*2\r\n$-1\r\n$50\r\nbad argument #1 to '?' (invalid format option 'y')\r\n"),
    ];
    for (script, want) in cases {
        assert_eq!(
            text(&ask(&mut r, &[b"EVAL", script.as_bytes(), b"0"])),
            text(want),
            "{script}"
        );
    }
    let errors: &[(&str, &str)] = &[
        (
            "return struct.pack('y', 1)",
            "-ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'y') script: ",
        ),
        (
            "local p = struct.pack; return p('y')",
            "-ERR user_script:1: bad argument #1 to 'p' (invalid format option 'y')",
        ),
        (
            "return struct.size('s')",
            "-ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)",
        ),
        (
            "return struct.unpack('>I2', 'a')",
            "-ERR user_script:1: bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "return struct.pack('i40', 1)",
            "-ERR user_script:1: integral size 40 is larger than limit of 32",
        ),
        (
            "return struct.pack('!3i', 1)",
            "-ERR user_script:1: alignment 3 is not a power of 2",
        ),
        (
            "return struct.unpack('c0', 'abc')",
            "-ERR user_script:1: format 'c0' needs a previous size",
        ),
        (
            "return struct.unpack('s', 'ab')",
            "-ERR user_script:1: unfinished string in data",
        ),
        (
            "return struct.pack('c5', 'ab')",
            "-ERR user_script:1: bad argument #3 to 'pack' (string too short)",
        ),
        (
            "return struct.pack('!i')",
            "-ERR user_script:1: bad argument #2 to 'pack' (number expected, got nil)",
        ),
        (
            "return struct.pack()",
            "-ERR user_script:1: bad argument #1 to 'pack' (string expected, got no value)",
        ),
        (
            "return struct.unpack('i', 'abcd', 0)",
            "-ERR user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ),
        (
            "return struct.size('i99999999999')",
            "-ERR user_script:1: integral size overflow",
        ),
    ];
    for (script, want) in errors {
        let got = text(&ask(&mut r, &[b"EVAL", script.as_bytes(), b"0"]));
        assert!(got.starts_with(want), "{script}: {got}");
    }
    drop(r);
    srv.stop();
}

#[test]
fn a_script_busy_behind_another_clients_request_in_its_group_runs_again_alone() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut blocker = srv.raw();
    let mut rd = srv.raw();
    assert_eq!(
        ask(&mut r, &[b"CONFIG", b"SET", b"lua-time-limit", b"500"]),
        b"+OK\r\n"
    );
    // While a 300 ms script holds the event loop, an INCR and then a script that never ends
    // arrive: the next round runs them in one group, the script behind the INCR.
    let spin = spin_script(300, "blocker");
    blocker
        .write_all(&encode(&[b"EVAL", spin.as_bytes(), b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    r.write_all(&encode(&[b"INCR", b"c"])).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    rd.write_all(&encode(&[
        b"EVAL",
        b"redis.call('get', KEYS[1]) while true do end",
        b"1",
        b"c",
    ]))
    .unwrap();
    assert_eq!(read_reply(&mut blocker), b"$7\r\nblocker\r\n");
    // At the threshold the script is stopped and its group fails; the INCR runs again in a
    // group of its own, commits and answers (once); then the script runs alone, and goes busy.
    assert_eq!(read_reply(&mut r), b":1\r\n");
    let busy = wait_busy(&mut r);
    assert_eq!(
        busy,
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(ask(&mut r, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let killed = text(&read_reply(&mut rd));
    assert!(killed.starts_with("-ERR Script killed by user"), "{killed}");
    assert_eq!(
        ask(&mut r, &[b"GET", b"c"]),
        b"$1\r\n1\r\n",
        "the INCR ran once"
    );
    drop((r, blocker, rd));
    srv.stop();
}

#[test]
fn monitor_shows_the_script_command_then_its_commands_as_lua() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut m = srv.raw();
    let mut r = srv.raw();
    assert_eq!(
        ask(
            &mut r,
            &[
                b"FUNCTION",
                b"LOAD",
                b"#!lua name=test\nredis.register_function('test', function() return redis.call('set', 'foo', 'baz') end)"
            ]
        ),
        b"$4\r\ntest\r\n"
    );
    assert_eq!(ask(&mut m, &[b"MONITOR"]), b"+OK\r\n");
    assert_eq!(
        ask(
            &mut r,
            &[
                b"EVAL",
                b"redis.call('set',KEYS[1],ARGV[1])",
                b"1",
                b"foo",
                b"bar"
            ]
        ),
        b"$-1\r\n"
    );
    assert_eq!(ask(&mut r, &[b"FCALL", b"test", b"0"]), b"+OK\r\n");
    let lines: Vec<String> = (0..4).map(|_| text(&read_reply(&mut m))).collect();
    let tail = |l: &str| {
        l.split_once(" [")
            .map(|x| x.1.to_string())
            .unwrap_or_default()
    };
    assert!(lines[0].starts_with('+'), "{lines:?}");
    let eval_line = tail(&lines[0]);
    assert!(eval_line.starts_with("0 127.0.0.1:"), "{lines:?}");
    assert!(
        eval_line.ends_with(
            "] \"EVAL\" \"redis.call('set',KEYS[1],ARGV[1])\" \"1\" \"foo\" \"bar\"\r\n"
        ),
        "{lines:?}"
    );
    assert_eq!(
        tail(&lines[1]),
        "0 lua] \"set\" \"foo\" \"bar\"\r\n",
        "{lines:?}"
    );
    assert!(
        tail(&lines[2]).ends_with("] \"FCALL\" \"test\" \"0\"\r\n"),
        "{lines:?}"
    );
    assert_eq!(
        tail(&lines[3]),
        "0 lua] \"set\" \"foo\" \"baz\"\r\n",
        "{lines:?}"
    );
    drop((m, r));
    srv.stop();
}

/// What Redis 7.0.15 answers (checked byte for byte against it, INFO commandstats' counts
/// too) while `min-replicas-to-write` asks for replicas (a server without any refuses every
/// write) and while maxmemory is below the pool's size (a pool never shrinks: commands that
/// may grow memory are refused until maxmemory is raised): top-level commands, MULTI and
/// EXEC, scripts by their declared flags, `redis.call` in scripts without a shebang, and
/// functions.
#[test]
fn writes_answer_noreplicas_and_oom_as_redis_scripts_by_their_flags() {
    let d = tmp();
    let srv = Server::start(&pool_in(&d));
    let mut r = srv.raw();
    let mut other = srv.raw();
    let lib = "#!lua name=lib\n\
        redis.register_function('w', function() return redis.call('set','y','1') end)\n\
        redis.register_function{function_name='r', callback=function() return redis.call('get','y') end, flags={'no-writes'}}\n\
        redis.register_function{function_name='o', callback=function() return redis.call('set','y','2') end, flags={'allow-oom'}}";
    assert_eq!(
        ask(&mut r, &[b"FUNCTION", b"LOAD", lib.as_bytes()]),
        b"$3\r\nlib\r\n"
    );
    assert_eq!(ask(&mut r, &[b"SET", b"x", b"some value"]), b"+OK\r\n");
    let norepl: &[u8] = b"-NOREPLICAS Not enough good replicas to write.\r\n";
    let oom: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    let aborted: &[u8] = b"-EXECABORT Transaction discarded because of previous errors.\r\n";
    let config = |s: &mut TcpStream, name: &str, v: &str| {
        assert_eq!(
            ask(s, &[b"CONFIG", b"SET", name.as_bytes(), v.as_bytes()]),
            b"+OK\r\n"
        );
    };

    config(&mut r, "min-replicas-to-write", "1");
    let get_x = "return redis.call('get','x')";
    assert_eq!(
        eval(
            &mut r,
            &format!("#!lua flags=no-writes\n{get_x}"),
            &["x"],
            &[]
        ),
        b"$10\r\nsome value\r\n"
    );
    assert_eq!(eval(&mut r, get_x, &["x"], &[]), b"$10\r\nsome value\r\n");
    assert_eq!(
        eval(&mut r, &format!("#!lua\n{get_x}"), &["x"], &[]),
        norepl
    );
    assert_eq!(
        text(&eval(&mut r, "return redis.call('set','x', 1)", &["x"], &[])),
        "-NOREPLICAS Not enough good replicas to write. script: edc6c778efe97d7b082a13bb199c772df244ec15, on @user_script:1.\r\n"
    );
    assert_eq!(
        eval(&mut r, "return redis.pcall('set','x', 1)", &["x"], &[]),
        norepl
    );
    assert_eq!(ask(&mut r, &[b"DEL", b"x"]), norepl);
    assert_eq!(ask(&mut r, &[b"PUBLISH", b"c", b"m"]), b":0\r\n");
    assert_eq!(ask(&mut r, &[b"FCALL", b"w", b"0"]), norepl);
    assert_eq!(ask(&mut r, &[b"FCALL", b"r", b"0"]), b"$-1\r\n");
    assert_eq!(ask(&mut r, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ask(&mut r, &[b"SET", b"x", b"1"]), norepl);
    assert_eq!(ask(&mut r, &[b"EXEC"]), aborted);
    config(&mut r, "min-replicas-to-write", "0");

    assert_eq!(ask(&mut r, &[b"SET", b"x", b"v"]), b"+OK\r\n");
    config(&mut r, "maxmemory", "1");
    assert_eq!(ask(&mut r, &[b"SET", b"x", b"2"]), oom);
    assert_eq!(ask(&mut r, &[b"LPUSH", b"l", b"a"]), oom);
    assert_eq!(ask(&mut r, &[b"GET", b"x"]), b"$1\r\nv\r\n");
    assert_eq!(ask(&mut r, &[b"EXPIRE", b"x", b"100"]), b":1\r\n");
    assert_eq!(ask(&mut r, &[b"DEL", b"nosuch"]), b":0\r\n");
    assert_eq!(eval(&mut r, "#!lua\nreturn 1", &[], &[]), oom);
    assert_eq!(
        eval(
            &mut r,
            "#!lua flags=allow-oom\nreturn redis.call('set','x','3')",
            &[],
            &[]
        ),
        b"+OK\r\n"
    );
    assert_eq!(
        text(&eval(&mut r, "redis.call('set','x',1) return 1", &["x"], &[])),
        "-OOM command not allowed when used memory > 'maxmemory'. script: e50389d7724274719d9b4e35a25d4cc4ca908c7a, on @user_script:1.\r\n"
    );
    assert_eq!(
        eval(
            &mut r,
            "local t = redis.pcall('set','x','y') return t['err']",
            &["x"],
            &[]
        ),
        b"$55\r\nOOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(eval(&mut r, get_x, &["x"], &[]), b"$1\r\n3\r\n");
    assert_eq!(ask(&mut r, &[b"FCALL", b"w", b"0"]), oom);
    assert_eq!(ask(&mut r, &[b"FCALL_RO", b"r", b"0"]), b"$-1\r\n");
    assert_eq!(ask(&mut r, &[b"FCALL", b"o", b"0"]), b"+OK\r\n");
    assert_eq!(
        ask(
            &mut r,
            &[
                b"FUNCTION",
                b"LOAD",
                b"#!lua name=lib2\nredis.register_function('z', function() return 1 end)"
            ]
        ),
        oom
    );
    // Queuing takes memory: any command but EXEC, DISCARD, QUIT and RESET is refused.
    assert_eq!(ask(&mut r, &[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ask(&mut r, &[b"GET", b"x"]), oom);
    assert_eq!(ask(&mut r, &[b"DISCARD"]), b"+OK\r\n");
    config(&mut r, "maxmemory", "0");
    assert_eq!(ask(&mut r, &[b"SET", b"x", b"4"]), b"+OK\r\n");

    // The state that counts for EXEC is the one when it runs: its queue's flags decide.
    for (name, value, why) in [
        ("maxmemory", "1", &oom[1..]),
        ("min-replicas-to-write", "1", &norepl[1..]),
    ] {
        assert_eq!(ask(&mut r, &[b"MULTI"]), b"+OK\r\n");
        assert_eq!(eval(&mut r, "#!lua\nreturn 1", &[], &[]), b"+QUEUED\r\n");
        assert_eq!(ask(&mut r, &[b"SET", b"x", b"8"]), b"+QUEUED\r\n");
        config(&mut other, name, value);
        let mut want = b"-EXECABORT Transaction discarded because of: ".to_vec();
        want.extend_from_slice(why);
        assert_eq!(text(&ask(&mut r, &[b"EXEC"])), text(&want));
        config(&mut other, name, "0");
    }
    assert_eq!(ask(&mut r, &[b"GET", b"x"]), b"$1\r\n4\r\n");
    // The counts as Redis's: refused commands (in scripts too) are rejected calls.
    let stats = text(&ask(&mut r, &[b"INFO", b"commandstats"]));
    for want in [
        "cmdstat_set:calls=5,",
        "cmdstat_eval:calls=8,",
        "cmdstat_fcall:calls=2,",
        "cmdstat_exec:calls=1,",
        "cmdstat_function|load:calls=1,",
    ] {
        assert!(stats.contains(want), "{want} in {stats}");
    }
    for (cmd, counts) in [
        ("set", "rejected_calls=6,failed_calls=0"),
        ("eval", "rejected_calls=2,failed_calls=3"),
        ("fcall", "rejected_calls=2,failed_calls=0"),
        ("exec", "rejected_calls=2,failed_calls=1"),
        ("function|load", "rejected_calls=1,failed_calls=0"),
    ] {
        let line = stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
            .unwrap_or_else(|| panic!("{cmd} in {stats}"));
        assert!(line.ends_with(counts), "{line}: {counts}");
    }
    drop((r, other));
    srv.stop();
}
