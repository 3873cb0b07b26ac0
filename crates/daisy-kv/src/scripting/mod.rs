//! Lua scripting (Redis 7.0's eval.c, script.c, script_lua.c, function_lua.c, functions.c):
//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL, FCALL_RO.
//!
//! Scripts run in one Lua 5.1 interpreter (the `mlua` crate, Lua built from its C sources), in
//! Redis's sandbox: the globals and the library tables are read-only, reading an undeclared
//! global is an error, `os`, `io`, `print`, `loadfile`, `dofile`, `require` are absent, and
//! `loadstring` refuses bytecode. `redis.call`/`redis.pcall` run commands through the same
//! table and handlers as clients do, inside the calling command's transaction: a script's
//! writes are part of the event loop's group transaction, so after a crash all of a script's
//! writes are there or none, and its reply leaves only once they are durable. A script that
//! fails after writing keeps what it wrote, as in Redis (the transaction commits; Redis
//! has no rollback either).
//!
//! The script cache and the function libraries are stored in the pool (keyspace format 4,
//! docs/FORMAT.md section 8b), so EVALSHA and FCALL work after a restart, where Redis loses
//! its script cache.
//!
//! Modules: `lua` (the interpreter, the sandbox, conversions both ways, running a script),
//! `libs` (cjson, cmsgpack, bit), `struct_lib` (struct), `function` (FUNCTION and FCALL), `sha1`.

pub mod busy;
mod ccall;
mod function;
mod libs;
mod lua;
mod sha1;
mod struct_lib;

pub use function::{fcall, fcall_ro, function};
pub use lua::{Scripting, SCRIPT_KILLED_MSG};
pub use sha1::sha1_hex;

use crate::commands::{parse_i64, Ctx, E_INT};
use crate::keyspace::SCRIPTS_SLOT;
use crate::resp;
use daisy::{PBytesMap, PPtr};
use lua::{RunKind, ScriptFlags};

/// The id of the client a script's commands run as (no connection has it).
pub const SCRIPT_CLIENT_ID: u64 = u64::MAX;

const E_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Why a script's command failed its event-loop group (`daisy::Error::Aborted`): it ran past
/// the busy threshold in a group holding other connections' requests (`busy`). Nothing of the
/// group is kept; the event loop runs the requests before it as a group, then the script's
/// alone, where it can answer the other connections.
pub const BUSY_RESTART: &str =
    "a script ran past the busy threshold in a shared group: it runs again in a group of its own";

/// Whether a request (its command's name, sent by `cl`) may run a script: the event loop
/// then lists the other connections' sockets in `Scripting::peers` first.
pub fn runs_script(name: &[u8], cl: &crate::commands::Client) -> bool {
    // Every such name starts with an E or an F: the others (nearly every request) stop here.
    if !matches!(name.first().map(|c| c | 0x20), Some(b'e' | b'f')) {
        return false;
    }
    let is = |n: &[u8]| {
        [
            &b"eval"[..],
            b"evalsha",
            b"eval_ro",
            b"evalsha_ro",
            b"fcall",
            b"fcall_ro",
        ]
        .iter()
        .any(|s| n.eq_ignore_ascii_case(s))
    };
    is(name)
        || (name.eq_ignore_ascii_case(b"exec")
            && cl.multi.as_ref().is_some_and(|m| m.any(|_, q| is(q[0]))))
}

/// The flags a script command's script declares (Redis's `evalGetCommandFlags` and
/// `fcallGetCommandFlags`: declared flags replace the command's own `write`, `denyoom` and
/// `may_replicate`); None when the command's own flags hold: not a script command, a script
/// without a shebang (or with an invalid one), an unknown EVALSHA or FCALL.
pub fn declared_flags(s: &Scripting, args: &[&[u8]]) -> Option<ScriptFlags> {
    if args.len() < 2 {
        return None;
    }
    let name = args[0].to_ascii_lowercase();
    let flags = match &name[..] {
        b"eval" | b"eval_ro" => match s.script(&sha1_hex(args[1])) {
            Some((_, f)) => f,
            None => lua::parse_shebang(args[1]).ok()?.0,
        },
        b"evalsha" | b"evalsha_ro" if args[1].len() == 40 => {
            s.script(&String::from_utf8_lossy(args[1]).to_ascii_lowercase())?
                .1
        }
        b"fcall" | b"fcall_ro" => {
            let f = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
            let lib = s.functions.by_func.get(&f)?;
            // Functions always declare (no flags: may write, not when out of memory).
            s.functions.libs[lib]
                .funcs
                .iter()
                .find(|x| x.name.eq_ignore_ascii_case(&f))?
                .flags
        }
        _ => return None,
    };
    (!flags.compat).then_some(flags)
}

/// Whether a script command's script declared that it may write ([`declared_flags`]); None
/// when the command's own flags hold. CLIENT PAUSE WRITE holds what may write.
pub fn declared_writes(s: &Scripting, args: &[&[u8]]) -> Option<bool> {
    declared_flags(s, args).map(|f| !f.no_writes)
}

/// `numkeys` of EVAL/FCALL: the keys and the arguments, or None after the error reply.
#[allow(clippy::type_complexity)]
pub(crate) fn split_keys<'a>(
    c: &mut Ctx,
    a: &'a [&'a [u8]],
    bad_int: &str,
) -> daisy::Result<Option<(Vec<&'a [u8]>, Vec<&'a [u8]>)>> {
    let Some(n) = parse_i64(a[2]) else {
        c.err(bad_int)?;
        return Ok(None);
    };
    if n > (a.len() - 3) as i64 {
        c.err("ERR Number of keys can't be greater than number of args")?;
        return Ok(None);
    }
    if n < 0 {
        c.err("ERR Number of keys can't be negative")?;
        return Ok(None);
    }
    let n = n as usize;
    Ok(Some((a[3..3 + n].to_vec(), a[3 + n..].to_vec())))
}

pub fn eval(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    eval_generic(c, a, false, false)
}

pub fn eval_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    eval_generic(c, a, false, true)
}

pub fn evalsha(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    eval_generic(c, a, true, false)
}

pub fn evalsha_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    eval_generic(c, a, true, true)
}

/// Make sure the interpreter exists and holds the pool's scripts and libraries.
pub(crate) fn ready(c: &mut Ctx) -> daisy::Result<()> {
    if c.sv.scripting.started() {
        return Ok(());
    }
    let mut scripts = Vec::new();
    let mut libs = Vec::new();
    for (slot, into) in [
        (SCRIPTS_SLOT, &mut scripts),
        (crate::keyspace::FUNCTIONS_SLOT, &mut libs),
    ] {
        let off = c.ks.internal_map(c.tx, slot)?;
        if off != 0 {
            let view = PBytesMap::view(c.ks.pool(), c.tx, PPtr::from_offset(off))?;
            let mut cursor = 0;
            loop {
                let mut found = Vec::new();
                let next = view.scan(c.tx, cursor, 1000, &mut found)?;
                for (k, _) in found {
                    if let Some(v) = view.get(c.tx, &k)? {
                        into.push((k, v));
                    }
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    c.sv.scripting.start(scripts);
    function::load_stored(c, libs)
}

/// Store `value` under `key` in a scripting map of the pool, in the command's transaction.
pub(crate) fn store_put(c: &mut Ctx, slot: usize, key: &[u8], value: &[u8]) -> daisy::Result<()> {
    let mut off = c.ks.internal_map(c.tx, slot)?;
    if off == 0 {
        off = PBytesMap::create_in(c.tx)?.offset();
        c.ks.set_internal_map(c.tx, slot, off)?;
    }
    let mut view = PBytesMap::view(c.ks.pool(), c.tx, PPtr::from_offset(off))?;
    view.insert(c.tx, key, value)?;
    Ok(())
}

/// Remove `key` from a scripting map of the pool.
pub(crate) fn store_remove(c: &mut Ctx, slot: usize, key: &[u8]) -> daisy::Result<()> {
    let off = c.ks.internal_map(c.tx, slot)?;
    if off != 0 {
        let mut view = PBytesMap::view(c.ks.pool(), c.tx, PPtr::from_offset(off))?;
        view.remove(c.tx, key)?;
    }
    Ok(())
}

fn eval_generic(c: &mut Ctx, a: &[&[u8]], by_sha: bool, ro: bool) -> daisy::Result<()> {
    // MONITOR shows the script's command before the commands it runs (eval.c).
    crate::admin::monitor_script(c.sv, c.cl, a);
    let Some((keys, args)) = split_keys(c, a, E_INT)? else {
        return Ok(());
    };
    ready(c)?;
    let sha = if by_sha {
        if a[1].len() != 40 {
            return c.err(E_NOSCRIPT);
        }
        String::from_utf8_lossy(a[1]).to_ascii_lowercase()
    } else {
        sha1_hex(a[1])
    };
    if !c.sv.scripting.has_script(&sha) {
        if by_sha {
            return c.err(E_NOSCRIPT);
        }
        match c.sv.scripting.create_script(&sha, a[1]) {
            Ok(()) => store_put(c, SCRIPTS_SLOT, sha.as_bytes(), a[1])?,
            Err(e) => return c.err(&e),
        }
    }
    let (func, flags) = c.sv.scripting.script(&sha).expect("just created");
    if let Some(e) = check_flags(c.sv, flags, ro) {
        return c.err(e);
    }
    lua::run(
        c,
        func,
        &keys,
        &args,
        RunKind::Eval,
        &sha,
        ro || flags.no_writes,
        !flags.compat && flags.allow_oom,
        a,
    )
}

/// The checks of a script's flags before it runs (script.c `scriptPrepareForRun`; the command
/// checks before it, [`crate::commands::state_refusal`], do not run for a script inside
/// EXEC): the ones that apply to a server without replicas or persistence errors. A script
/// without a shebang is checked command by command instead (`redis.call`).
pub(crate) fn check_flags(
    sv: &crate::commands::ServerState,
    flags: ScriptFlags,
    ro: bool,
) -> Option<&'static str> {
    if flags.compat {
        return None;
    }
    if !flags.no_writes {
        if ro {
            return Some("ERR Can not execute a script with write flag using *_ro command.");
        }
        if sv.config.no_good_replicas {
            return Some(crate::commands::E_NOREPLICAS);
        }
    }
    // no-writes implies allow-oom.
    if !flags.no_writes && !flags.allow_oom && sv.over_maxmemory() {
        return Some(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
        );
    }
    None
}

pub fn script(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = a[1].to_ascii_lowercase();
    match &sub[..] {
        b"help" => {
            let lines = [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ];
            resp::array(c.out, lines.len());
            for l in lines {
                resp::simple(c.out, l);
            }
            Ok(())
        }
        b"flush" => {
            if a.len() > 3
                || (a.len() == 3
                    && !a[2].eq_ignore_ascii_case(b"sync")
                    && !a[2].eq_ignore_ascii_case(b"async"))
            {
                return c.err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            ready(c)?;
            c.ks.drop_internal_map(c.tx, SCRIPTS_SLOT)?;
            c.sv.scripting.flush_scripts();
            // Redis starts a new interpreter: the libraries are loaded into it again.
            let libs = function::stored_libraries(c);
            c.sv.scripting.restart();
            function::load_stored(c, libs)?;
            resp::ok(c.out);
            Ok(())
        }
        b"exists" if a.len() >= 3 => {
            ready(c)?;
            resp::array(c.out, a.len() - 2);
            for s in &a[2..] {
                let sha = String::from_utf8_lossy(s).to_ascii_lowercase();
                let has = s.len() == 40 && c.sv.scripting.has_script(&sha);
                resp::int(c.out, has as i64);
            }
            Ok(())
        }
        b"load" if a.len() == 3 => {
            ready(c)?;
            let sha = sha1_hex(a[2]);
            if !c.sv.scripting.has_script(&sha) {
                match c.sv.scripting.create_script(&sha, a[2]) {
                    Ok(()) => store_put(c, SCRIPTS_SLOT, sha.as_bytes(), a[2])?,
                    Err(e) => return c.err(&e),
                }
            }
            resp::bulk(c.out, sha.as_bytes());
            Ok(())
        }
        b"kill" if a.len() == 2 => c.err("NOTBUSY No scripts in execution right now."),
        b"debug" if a.len() == 3 => {
            let m = a[2].to_ascii_lowercase();
            if m == b"no" {
                resp::ok(c.out);
                Ok(())
            } else if m == b"yes" || m == b"sync" {
                c.err("ERR SCRIPT DEBUG is not supported by this server")
            } else {
                c.err("ERR Use SCRIPT DEBUG YES/SYNC/NO")
            }
        }
        _ => c.err(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            crate::commands::lossy(a[1])
        )),
    }
}
