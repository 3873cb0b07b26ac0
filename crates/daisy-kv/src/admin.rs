//! Connection and server commands (Redis's networking.c, server.c, config.c): PING, ECHO,
//! AUTH, HELLO, QUIT, RESET, CLIENT, COMMAND, CONFIG, INFO, TIME, LASTSAVE, SAVE, BGSAVE,
//! SHUTDOWN, MEMORY.

use crate::commands::{lossy, parse_i64, upper, Action, Client, Ctx, Spec, COMMANDS, E_NOAUTH, E_SYNTAX};
use crate::resp;
use std::fmt::Write as _;

/// Commands whose second argument names a subcommand (`config|get` in CLIENT LIST's cmd=,
/// COMMAND INFO, INFO commandstats).
const CONTAINERS: &[&str] = &["client", "command", "config", "object", "memory"];

/// A command's full name: `name|subcommand` for a container command with a subcommand.
pub fn full_name(spec: &Spec, args: &[&[u8]]) -> String {
    if args.len() >= 2 && CONTAINERS.contains(&spec.name) {
        format!("{}|{}", spec.name, lossy(args[1]).to_ascii_lowercase())
    } else {
        spec.name.to_string()
    }
}

pub fn ping(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match a.len() {
        1 => resp::simple(c.out, "PONG"),
        2 => resp::bulk(c.out, a[1]),
        _ => return c.err("ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

pub fn echo(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    resp::bulk(c.out, a[1]);
    Ok(())
}

/// Check a password for the default user; replies on failure.
fn try_auth(c: &mut Ctx, user: Option<&[u8]>, pass: &[u8]) -> bool {
    let Some(want) = c.sv.requirepass.clone() else {
        if user.is_some_and(|u| u == b"default") {
            // No password configured: the default user takes any (Redis's `nopass`), so
            // clients configured with a username and password still connect.
            c.cl.authed = true;
            return true;
        }
        let _ = c.err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
        return false;
    };
    // Compare in constant time over the longer length (no early exit on the first byte).
    let n = want.len().max(pass.len());
    let mut diff = (want.len() != pass.len()) as u8;
    for i in 0..n {
        diff |= want.get(i).copied().unwrap_or(0) ^ pass.get(i).copied().unwrap_or(1);
    }
    if user.is_some_and(|u| u != b"default") || diff != 0 {
        let _ = c.err("WRONGPASS invalid username-password pair or user is disabled.");
        return false;
    }
    c.cl.authed = true;
    true
}

pub fn auth(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let ok = match a.len() {
        2 => try_auth(c, None, a[1]),
        3 => try_auth(c, Some(a[1]), a[2]),
        _ => return c.err(E_SYNTAX),
    };
    if ok {
        resp::ok(c.out);
    }
    Ok(())
}

pub fn hello(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut i = 1;
    let mut resp3 = c.cl.resp3;
    if a.len() > 1 {
        match parse_i64(a[1]) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return c.err("NOPROTO unsupported protocol version"),
            None => return c.err("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    // Every option is checked before any takes effect (as Redis does): a request with a
    // correct password and a bad option leaves the client as it was.
    let mut name = None;
    let mut auth = None;
    while i < a.len() {
        match &upper(a[i])[..] {
            b"AUTH" if i + 2 < a.len() => {
                auth = Some((a[i + 1], a[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                if !valid_client_name(a[i + 1]) {
                    return c.err(E_CLIENT_NAME);
                }
                name = Some(a[i + 1].to_vec());
                i += 2;
            }
            _ => {
                return c.err(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    lossy(a[i])
                ))
            }
        }
    }
    if let Some((user, pass)) = auth {
        if !try_auth(c, Some(user), pass) {
            return Ok(());
        }
    }
    if c.sv.requirepass.is_some() && !c.cl.authed {
        return c.err(E_NOAUTH);
    }
    if let Some(n) = name {
        c.cl.name = n;
    }
    c.cl.resp3 = resp3;
    c.map(7);
    for (k, v) in [
        ("server", "redis"),
        ("version", crate::REDIS_VERSION),
        ("proto", ""),
        ("id", ""),
        ("mode", "standalone"),
        ("role", "master"),
    ] {
        resp::bulk(c.out, k.as_bytes());
        match k {
            "proto" => resp::int(c.out, if resp3 { 3 } else { 2 }),
            "id" => resp::int(c.out, c.cl.id as i64),
            _ => resp::bulk(c.out, v.as_bytes()),
        }
    }
    resp::bulk(c.out, b"modules");
    resp::array(c.out, 0);
    Ok(())
}

pub fn quit(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::ok(c.out);
    c.action = Action::Close;
    Ok(())
}

/// RESET: the connection back to its defaults (MULTI discarded, WATCH forgotten, database
/// 0, RESP2, no name, and unauthenticated when a password is required).
pub fn reset(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    c.ks.watches.unwatch_all(c.cl.id);
    c.cl.multi = None;
    c.cl.db = 0;
    c.cl.resp3 = false;
    c.cl.name.clear();
    c.cl.authed = c.sv.requirepass.is_none();
    resp::simple(c.out, "RESET");
    Ok(())
}

const E_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// Names and library fields show in CLIENT LIST lines: printable, no spaces.
fn valid_client_name(n: &[u8]) -> bool {
    n.iter().all(|&b| b > b' ' && b <= b'~')
}

/// One client's line of CLIENT LIST / CLIENT INFO (Redis 7.0's fields, then 7.2's lib-name
/// and lib-ver).
pub fn client_line(cl: &Client, now_ms: i64) -> String {
    let flags = if cl.multi.is_some() { "x" } else { "N" };
    let multi = cl.multi.as_ref().map_or(-1, |m| m.queued.len() as i64);
    let multi_mem: usize = cl
        .multi
        .as_ref()
        .map_or(0, |m| m.queued.iter().flatten().map(|a| a.len()).sum());
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub=0 psub=0 \
         ssub=0 multi={multi} qbuf={} qbuf-free={} argv-mem=0 multi-mem={multi_mem} rbs={} rbp={} \
         obl=0 oll=0 omem=0 tot-mem={} events=r cmd={} user=default redir=-1 resp={} \
         lib-name={} lib-ver={}\n",
        cl.id,
        cl.addr,
        cl.laddr,
        cl.fd,
        lossy(&cl.name),
        (now_ms - cl.created_ms).max(0) / 1000,
        (now_ms - cl.last_ms.max(cl.created_ms)).max(0) / 1000,
        cl.db,
        cl.qbuf,
        cl.rbs.saturating_sub(cl.qbuf),
        cl.rbs,
        cl.rbs,
        cl.rbs + multi_mem,
        if cl.last_cmd.is_empty() { "NULL" } else { &cl.last_cmd },
        if cl.resp3 { 3 } else { 2 },
        lossy(&cl.lib_name),
        lossy(&cl.lib_ver),
    )
}

fn help(c: &mut Ctx, cmd: &str, lines: &[&str]) {
    resp::array(c.out, lines.len() + 3);
    resp::simple(
        c.out,
        &format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
    );
    for l in lines {
        resp::simple(c.out, l);
    }
    resp::simple(c.out, "HELP");
    resp::simple(c.out, "    Print this help.");
}

fn subcommand_error(c: &mut Ctx, sub: &[u8], cmd: &str) -> daisy::Result<()> {
    c.err(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        lossy(sub)
    ))
}

pub fn client(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = upper(a[1]);
    match (&sub[..], a.len()) {
        (b"ID", 2) => resp::int(c.out, c.cl.id as i64),
        (b"GETNAME", 2) => {
            if c.cl.name.is_empty() {
                c.nil();
            } else {
                resp::bulk(c.out, &c.cl.name.clone());
            }
        }
        (b"SETNAME", 3) => {
            if !valid_client_name(a[2]) {
                return c.err(E_CLIENT_NAME);
            }
            c.cl.name = a[2].to_vec();
            resp::ok(c.out);
        }
        (b"SETINFO", 4) => {
            if !valid_client_name(a[3]) {
                return c.err(&format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    lossy(a[2])
                ));
            }
            match &upper(a[2])[..] {
                b"LIB-NAME" => c.cl.lib_name = a[3].to_vec(),
                b"LIB-VER" => c.cl.lib_ver = a[3].to_vec(),
                _ => {
                    return c.err(&format!("ERR Unrecognized option '{}'", lossy(a[2])));
                }
            }
            resp::ok(c.out);
        }
        (b"INFO", 2) => {
            let line = client_line(c.cl, c.now_ms);
            resp::bulk(c.out, line.as_bytes());
        }
        (b"LIST", 2) => c.action = Action::ClientList,
        (b"NO-EVICT", 3) | (b"NO-TOUCH", 3) => resp::ok(c.out),
        (b"HELP", 2) => help(
            c,
            "CLIENT",
            &[
                "ID",
                "    Return the ID of the current connection.",
                "GETNAME",
                "    Return the name of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "LIST",
                "    Return information about client connections.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "    Set client library name or version.",
            ],
        ),
        _ => return subcommand_error(c, a[1], "CLIENT"),
    }
    Ok(())
}

fn command_entry(out: &mut Vec<u8>, s: &Spec) {
    resp::array(out, 10);
    resp::bulk(out, s.name.as_bytes());
    resp::int(out, s.arity as i64);
    resp::array(out, s.flags.len());
    for f in s.flags {
        resp::simple(out, f);
    }
    resp::int(out, s.first_key as i64);
    resp::int(out, s.last_key as i64);
    resp::int(out, s.step as i64);
    for _ in 0..4 {
        resp::array(out, 0); // ACL categories, tips, key specs, subcommands
    }
}

/// The keys of a command's arguments, from its table entry (COMMAND GETKEYS); None when the
/// command has no key arguments.
fn keys_of(s: &Spec, a: &[&[u8]]) -> Option<Vec<usize>> {
    if s.name == "sintercard" {
        let n = parse_i64(a.get(1)?)? as usize;
        return Some((2..(2 + n).min(a.len())).collect());
    }
    if s.first_key <= 0 {
        return None;
    }
    let last = if s.last_key < 0 {
        a.len() as i32 + s.last_key
    } else {
        s.last_key.min(a.len() as i32 - 1)
    };
    Some((s.first_key..=last).step_by(s.step.max(1) as usize).map(|i| i as usize).collect())
}

pub fn command(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() == 1 {
        resp::array(c.out, COMMANDS.len());
        for s in COMMANDS {
            command_entry(c.out, s);
        }
        return Ok(());
    }
    match (&upper(a[1])[..], a.len()) {
        (b"COUNT", 2) => resp::int(c.out, COMMANDS.len() as i64),
        (b"LIST", n) => {
            // COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern]
            let names: Vec<&str> = match n {
                2 => COMMANDS.iter().map(|s| s.name).collect(),
                5 if a[2].eq_ignore_ascii_case(b"FILTERBY") => match &upper(a[3])[..] {
                    b"PATTERN" => COMMANDS
                        .iter()
                        .map(|s| s.name)
                        .filter(|n| crate::glob::matches(&a[4].to_ascii_lowercase(), n.as_bytes()))
                        .collect(),
                    // No modules; ACL categories are not modelled.
                    b"MODULE" | b"ACLCAT" => Vec::new(),
                    _ => return c.err(E_SYNTAX),
                },
                _ => return c.err(E_SYNTAX),
            };
            resp::array(c.out, names.len());
            for n in names {
                resp::bulk(c.out, n.as_bytes());
            }
        }
        (b"INFO", _) => {
            let names: Vec<Vec<u8>> = if a.len() == 2 {
                COMMANDS.iter().map(|s| s.name.as_bytes().to_vec()).collect()
            } else {
                a[2..].iter().map(|n| n.to_ascii_lowercase()).collect()
            };
            resp::array(c.out, names.len());
            for n in names {
                match COMMANDS.iter().find(|s| s.name.as_bytes() == n) {
                    Some(s) => command_entry(c.out, s),
                    None => c.null_array(),
                }
            }
        }
        (b"GETKEYS", n) | (b"GETKEYSANDFLAGS", n) if n >= 3 => {
            let flags = a[1].eq_ignore_ascii_case(b"GETKEYSANDFLAGS");
            let args = &a[2..];
            let Some(s) = c.table.find(args[0]) else {
                return c.err("ERR Invalid command specified");
            };
            let na = args.len() as i32;
            if (s.arity > 0 && na != s.arity) || (s.arity < 0 && na < -s.arity) {
                return c.err("ERR Invalid number of arguments specified for command");
            }
            let Some(keys) = keys_of(s, args).filter(|k| !k.is_empty()) else {
                return c.err("ERR The command has no key arguments");
            };
            resp::array(c.out, keys.len());
            for i in keys {
                if flags {
                    resp::array(c.out, 2);
                    resp::bulk(c.out, args[i]);
                    let f = if s.has("write") { "RW" } else { "RO" };
                    resp::array(c.out, 1);
                    resp::simple(c.out, f);
                } else {
                    resp::bulk(c.out, args[i]);
                }
            }
        }
        // No documentation records: clients fall back to their own help.
        (b"DOCS", _) => c.map(0),
        (b"HELP", 2) => help(
            c,
            "COMMAND",
            &[
                "(no subcommand)",
                "    Return details about all Redis commands.",
                "COUNT",
                "    Return the total number of commands in this Redis server.",
                "LIST",
                "    Return a list of all commands in this Redis server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple Redis commands.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple Redis commands.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Redis command.",
                "GETKEYSANDFLAGS <full-command>",
                "    Return the keys and the access flags from a full Redis command.",
            ],
        ),
        _ => return subcommand_error(c, a[1], "COMMAND"),
    }
    Ok(())
}

pub fn config(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match &upper(a[1])[..] {
        b"GET" if a.len() >= 3 => {
            let hits = c.sv.config.matching(&a[2..]);
            c.map(hits.len());
            for (k, v) in hits {
                resp::bulk(c.out, k.as_bytes());
                resp::bulk(c.out, v.as_bytes());
            }
        }
        b"SET" if a.len() >= 4 && a.len().is_multiple_of(2) => {
            let pairs: Vec<(&[u8], &[u8])> = a[2..].chunks(2).map(|p| (p[0], p[1])).collect();
            match c.sv.config.set_many(&pairs) {
                Ok(()) => {
                    if let Some(p) = c.sv.config.get("requirepass") {
                        c.sv.requirepass = (!p.is_empty()).then(|| p.as_bytes().to_vec());
                    }
                    resp::ok(c.out)
                }
                Err(e) => return c.err(&e),
            }
        }
        b"RESETSTAT" if a.len() == 2 => {
            c.sv.counters = Default::default();
            c.sv.total_connections = 0;
            c.sv.rejected_connections = 0;
            c.sv.errorstats.clear();
            for s in c.sv.cmdstats.iter_mut() {
                *s = Default::default();
            }
            c.ks.expired_keys = 0;
            c.ks.lazyfreed_objects = 0;
            resp::ok(c.out);
        }
        b"REWRITE" if a.len() == 2 => {
            return c.err("ERR The server is running without a config file")
        }
        b"HELP" if a.len() == 2 => help(
            c,
            "CONFIG",
            &[
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
            ],
        ),
        _ => return subcommand_error(c, a[1], "CONFIG"),
    }
    Ok(())
}

fn section(t: &mut String, name: &str) {
    if !t.is_empty() {
        t.push_str("\r\n");
    }
    let _ = write!(t, "# {name}\r\n");
}

pub fn info(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let want: Vec<String> = a[1..]
        .iter()
        .map(|s| lossy(s).to_ascii_lowercase())
        .collect();
    let everything = want.iter().any(|w| w == "everything" || w == "all");
    let default = want.is_empty() || want.iter().any(|w| w == "default");
    const DEFAULT: &[&str] = &[
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "modules",
        "errorstats",
        "cluster",
        "keyspace",
    ];
    let on = |s: &str| everything || (default && DEFAULT.contains(&s)) || want.iter().any(|w| w == s);
    let mut t = String::new();
    let now = c.now_ms;
    let sv = &*c.sv;
    if on("server") {
        section(&mut t, "Server");
        let _ = write!(
            t,
            "redis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
             redis_build_id:0\r\nredis_mode:standalone\r\ndaisy_version:{}\r\nos:{} {}\r\n\
             arch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n\
             atomicvar_api:c11-builtin\r\nprocess_id:{}\r\nprocess_supervised:no\r\n\
             run_id:{:040x}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\n\
             uptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nexecutable:daisy\r\n\
             config_file:\r\nio_threads_active:0\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            sv.started_ms as u128 * 0x9E37_79B9_7F4A_7C15,
            sv.port,
            now * 1000,
            (now - sv.started_ms) / 1000,
            (now - sv.started_ms) / 86_400_000,
        );
    }
    if on("clients") {
        section(&mut t, "Clients");
        let _ = write!(
            t,
            "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
             client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n\
             blocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
            sv.connected_clients, sv.max_clients
        );
    }
    if on("memory") {
        // used_memory: bytes allocated in the pool (the keyspace lives there, not in DRAM).
        let (used, objects) = sv.pool.usage()?;
        section(&mut t, "Memory");
        let _ = write!(
            t,
            "used_memory:{used}\r\nused_memory_human:{:.2}M\r\nused_memory_peak:{used}\r\n\
             used_memory_dataset:{used}\r\nused_memory_lua:0\r\nused_memory_scripts:0\r\n\
             number_of_cached_scripts:0\r\ndaisy_pool_objects:{objects}\r\ndaisy_pool_size:{}\r\n\
             maxmemory:{}\r\nmaxmemory_policy:{}\r\nmem_allocator:daisy\r\n\
             lazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
            used as f64 / (1 << 20) as f64,
            sv.pool_size,
            sv.pool_max_size,
            sv.config.get("maxmemory-policy").unwrap_or("noeviction"),
            c.ks.lazy_pending(),
            c.ks.lazyfreed_objects,
        );
    }
    if on("persistence") {
        let rec = sv.pool.recovery_report();
        section(&mut t, "Persistence");
        let _ = write!(
            t,
            "loading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\nrdb_changes_since_last_save:0\r\n\
             rdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\n\
             aof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_last_write_status:ok\r\n\
             daisy_durability:every write durable before its reply\r\n\
             daisy_pool:{}\r\ndaisy_persistence:{}\r\ndaisy_recovery_ms:{:.3}\r\n\
             daisy_recovery_transactions_replayed:{}\r\ndaisy_recovery_lines_replayed:{}\r\n\
             daisy_recovery_log_bytes_read:{}\r\ndaisy_group_commits:{}\r\n",
            now / 1000,
            sv.pool_path,
            sv.pool_mode,
            sv.recovery_ms,
            rec.records_replayed,
            rec.replayed_lines,
            rec.log_bytes_read,
            sv.group_commits
        );
    }
    if on("stats") {
        let errors: u64 = sv.errorstats.values().sum();
        section(&mut t, "Stats");
        let _ = write!(
            t,
            "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             instantaneous_ops_per_sec:0\r\nrejected_connections:{}\r\nexpired_keys:{}\r\n\
             expired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\nevicted_keys:0\r\n\
             keyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:0\r\npubsub_patterns:0\r\n\
             total_error_replies:{errors}\r\ntotal_reads_processed:0\r\ntotal_writes_processed:0\r\n",
            sv.total_connections,
            sv.counters.total_commands,
            sv.rejected_connections,
            c.ks.expired_keys,
            sv.counters.keyspace_hits,
            sv.counters.keyspace_misses,
        );
    }
    if on("replication") {
        section(&mut t, "Replication");
        t.push_str(
            "role:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n\
             master_repl_offset:0\r\nrepl_backlog_active:0\r\n",
        );
    }
    if on("cpu") {
        let (sys, user) = crate::server::cpu_times();
        section(&mut t, "CPU");
        let _ = write!(
            t,
            "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\n\
             used_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{sys:.6}\r\n\
             used_cpu_user_main_thread:{user:.6}\r\n"
        );
    }
    if on("modules") {
        section(&mut t, "Modules");
    }
    if on("commandstats") {
        section(&mut t, "Commandstats");
        for (i, s) in COMMANDS.iter().enumerate() {
            let st = sv.cmdstats[i];
            if st.calls == 0 && st.failed == 0 && st.rejected == 0 {
                continue;
            }
            let per = if st.calls == 0 { 0.0 } else { st.usec as f64 / st.calls as f64 };
            let _ = write!(
                t,
                "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
                s.name, st.calls, st.usec, st.rejected, st.failed
            );
        }
    }
    if on("errorstats") {
        section(&mut t, "Errorstats");
        let mut e: Vec<(&String, &u64)> = sv.errorstats.iter().collect();
        e.sort();
        for (k, n) in e {
            let k: String = k.chars().map(|ch| if "#:\n\r".contains(ch) { '_' } else { ch }).collect();
            let _ = write!(t, "errorstat_{k}:count={n}\r\n");
        }
    }
    if on("cluster") {
        section(&mut t, "Cluster");
        t.push_str("cluster_enabled:0\r\n");
    }
    if on("keyspace") {
        section(&mut t, "Keyspace");
        for db in 0..c.ks.databases() {
            let n = c.ks.len(c.tx, db)?;
            let e = c.ks.expires(c.tx, db)?;
            if n > 0 || e > 0 {
                let _ = write!(t, "db{db}:keys={n},expires={e},avg_ttl=0\r\n");
            }
        }
    }
    resp::bulk(c.out, t.as_bytes());
    Ok(())
}

pub fn time(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    resp::array(c.out, 2);
    resp::bulk(c.out, d.as_secs().to_string().as_bytes());
    resp::bulk(c.out, d.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// LASTSAVE: every acknowledged write is durable, so "the last save" is now.
pub fn lastsave(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::int(c.out, c.now_ms / 1000);
    Ok(())
}

/// SAVE, BGSAVE: every acknowledged write is already durable, so there is nothing to save.
/// (A consistent copy of the pool for backups is `daisy pool backup`.)
pub fn save(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a[0].eq_ignore_ascii_case(b"bgsave") {
        if a.len() > 2 || (a.len() == 2 && !a[1].eq_ignore_ascii_case(b"SCHEDULE")) {
            return c.err(E_SYNTAX);
        }
        resp::simple(c.out, "Background saving started");
        return Ok(());
    }
    resp::ok(c.out);
    Ok(())
}

pub fn shutdown(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    for opt in &a[1..] {
        match &upper(opt)[..] {
            b"NOSAVE" | b"SAVE" | b"NOW" | b"FORCE" => {}
            b"ABORT" => return c.err("ERR No shutdown in progress."),
            _ => return c.err(E_SYNTAX),
        }
    }
    // No reply: the connection closes as the server stops, as with Redis.
    c.action = Action::Shutdown;
    Ok(())
}

/// MEMORY USAGE key [SAMPLES n] | DOCTOR | PURGE | STATS | HELP.
pub fn memory(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"USAGE", n) if n == 3 || n == 5 => {
            if n == 5 {
                if !a[3].eq_ignore_ascii_case(b"SAMPLES") {
                    return c.err(E_SYNTAX);
                }
                if parse_i64(a[4]).is_none() {
                    return c.err(crate::commands::E_INT);
                }
            }
            let Some(v) = c.lookup_read(a[2])? else {
                c.nil();
                return Ok(());
            };
            // The key's entry object (header, key, record) rounded to the allocator's
            // 16 bytes, its slot, and every object its value owns.
            let mut bytes = (8 + a[2].len() + v.off + v.len).div_ceil(16) * 16 + 16;
            let p = c.payload(&v)?;
            let owned = crate::types::of(v.ty)
                .owned(c.ks.pool(), v.enc, &p)
                .map_err(daisy::Error::Unsupported)?;
            for o in owned {
                bytes += c.tx.usable_size(daisy::PPtr::<u8>::from_offset(o))? as usize;
            }
            resp::int(c.out, bytes as i64);
        }
        (b"DOCTOR", 2) => resp::bulk(
            c.out,
            b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.",
        ),
        (b"PURGE", 2) => resp::ok(c.out),
        (b"STATS", 2) => {
            let (used, objects) = c.sv.pool.usage()?;
            c.map(3);
            resp::bulk(c.out, b"total.allocated");
            resp::int(c.out, used as i64);
            resp::bulk(c.out, b"keys.count");
            let mut keys = 0;
            for db in 0..c.ks.databases() {
                keys += c.ks.len(c.tx, db)?;
            }
            resp::int(c.out, keys as i64);
            resp::bulk(c.out, b"daisy.pool.objects");
            resp::int(c.out, objects as i64);
        }
        (b"HELP", 2) => help(
            c,
            "MEMORY",
            &[
                "DOCTOR",
                "    Return memory problems reports.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
            ],
        ),
        _ => return subcommand_error(c, a[1], "MEMORY"),
    }
    Ok(())
}
