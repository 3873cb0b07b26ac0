//! FUNCTION and FCALL (Redis 7.0's functions.c, function_lua.c): libraries of Lua functions,
//! loaded with `FUNCTION LOAD "#!lua name=lib\n..."`, whose code is stored in the pool (the
//! keyspace's function map, docs/FORMAT.md section 8b) and loaded again at the first
//! scripting command after a restart, as Redis loads them from its RDB or AOF.

use super::lua::{self, parse_shebang_flags_table, RunKind, ScriptFlags};
use crate::commands::{lossy, Ctx};
use crate::keyspace::FUNCTIONS_SLOT;
use crate::resp;
use mlua::Function;
use std::collections::{BTreeMap, HashMap};

/// A function a library registered.
#[derive(Clone)]
pub struct Func {
    pub name: String,
    pub f: Function,
    pub flags: ScriptFlags,
    pub desc: Option<String>,
}

/// A loaded library: its code and functions.
#[derive(Clone)]
pub struct Library {
    pub code: Vec<u8>,
    pub funcs: Vec<Func>,
}

#[derive(Default)]
pub struct Libraries {
    pub libs: BTreeMap<String, Library>,
    /// Function name -> library name.
    pub by_func: HashMap<String, String>,
}

impl Libraries {
    pub fn functions_count(&self) -> usize {
        self.by_func.len()
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `#!lua name=x` (functions.c `functionExtractLibMetaData`): engine, name and where the code
/// starts.
fn metadata(code: &[u8]) -> Result<(String, String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let line = String::from_utf8_lossy(&code[..end]).into_owned();
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    if parts.is_empty() {
        return Err("ERR Invalid library metadata".into());
    }
    let engine = parts[0][2..].to_string();
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            // sdssplitargs: a quoted part of a word loses its quotes.
            name = Some(p[5..].replace('"', ""));
            continue;
        }
        return Err(format!("ERR Invalid metadata value given: {p}"));
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    Ok((engine, name, end))
}

/// Compile and run a library's code, collecting what it registers.
fn compile(c: &mut Ctx, code: &[u8]) -> Result<(String, Library), String> {
    let (engine, name, start) = metadata(code)?;
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let s = &c.sv.scripting;
    let f = s
        .lua()
        .load(&code[start..])
        .set_name("@user_function")
        .set_mode(mlua::ChunkMode::Text)
        .set_environment(s.env().clone())
        .into_function()
        .map_err(|e| format!("ERR Error compiling function: {}", lua::lua_error_text(&e)))?;
    s.begin_load();
    // A library's code gets 500 ms (Redis's LOAD_TIMEOUT_MS).
    let t0 = std::time::Instant::now();
    s.lua().set_hook(
        mlua::HookTriggers::new().every_nth_instruction(100_000),
        move |_, _| {
            if t0.elapsed() > std::time::Duration::from_millis(500) {
                return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
            }
            Ok(mlua::VmState::Continue)
        },
    );
    let r = lua::call_loader(s, f);
    s.lua().remove_hook();
    let registered = s.end_load();
    if let Err(e) = r {
        let e = e.strip_prefix("ERR ").unwrap_or(&e).to_string();
        return Err(format!("ERR Error registering functions: {e}"));
    }
    let registered = registered?;
    if registered.is_empty() {
        return Err("ERR No functions registered".into());
    }
    Ok((
        name,
        Library {
            code: code.to_vec(),
            funcs: registered,
        },
    ))
}

/// Install a compiled library (replacing one of the same name when `replace`).
fn install(c: &mut Ctx, name: String, lib: Library, replace: bool) -> Result<(), String> {
    install_as(c, name, lib, replace, true)
}

/// `quoted`: FUNCTION LOAD's words for an existing library; RESTORE's lack the quotes.
fn install_as(
    c: &mut Ctx,
    name: String,
    lib: Library,
    replace: bool,
    quoted: bool,
) -> Result<(), String> {
    let libs = &mut c.sv.scripting.functions;
    if libs.libs.contains_key(&name) && !replace {
        return Err(if quoted {
            format!("ERR Library '{name}' already exists")
        } else {
            format!("ERR Library {name} already exists")
        });
    }
    for f in &lib.funcs {
        if let Some(owner) = libs.by_func.get(&f.name.to_ascii_lowercase()) {
            if *owner != name {
                return Err(format!("ERR Function {} already exists", f.name));
            }
        }
    }
    if let Some(old) = libs.libs.remove(&name) {
        for f in old.funcs {
            libs.by_func.remove(&f.name.to_ascii_lowercase());
        }
    }
    for f in &lib.funcs {
        libs.by_func
            .insert(f.name.to_ascii_lowercase(), name.clone());
    }
    libs.libs.insert(name, lib);
    Ok(())
}

/// Load the libraries stored in the pool into a new interpreter.
pub(crate) fn load_stored(c: &mut Ctx, stored: Vec<(Vec<u8>, Vec<u8>)>) -> daisy::Result<()> {
    c.sv.scripting.functions = Libraries::default();
    for (_, code) in stored {
        if let Ok((name, lib)) = compile(c, &code) {
            let _ = install(c, name, lib, true);
        }
    }
    Ok(())
}

/// The libraries' (name, code), to load them into a new interpreter.
pub(crate) fn stored_libraries(c: &Ctx) -> Vec<(Vec<u8>, Vec<u8>)> {
    c.sv.scripting
        .functions
        .libs
        .iter()
        .map(|(n, l)| (n.as_bytes().to_vec(), l.code.clone()))
        .collect()
}

pub fn fcall(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    fcall_generic(c, a, false)
}

pub fn fcall_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    fcall_generic(c, a, true)
}

fn fcall_generic(c: &mut Ctx, a: &[&[u8]], ro: bool) -> daisy::Result<()> {
    // MONITOR shows FCALL before the commands the function runs (functions.c).
    crate::admin::monitor_script(c.sv, c.cl, a);
    super::ready(c)?;
    let name = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    let Some(lib) = c.sv.scripting.functions.by_func.get(&name).cloned() else {
        return c.err("ERR Function not found");
    };
    let func = c.sv.scripting.functions.libs[&lib]
        .funcs
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(&name))
        .cloned()
        .expect("indexed function");
    let name = func.name.clone();
    let Some((keys, args)) = super::split_keys(c, a, "ERR Bad number of keys provided")? else {
        return Ok(());
    };
    if let Some(e) = super::check_flags(c.sv, func.flags, ro) {
        return c.err(e);
    }
    lua::run(
        c,
        func.f,
        &keys,
        &args,
        RunKind::Function,
        &name,
        ro || func.flags.no_writes,
        func.flags.allow_oom,
        a,
    )
}

pub fn function(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = a[1].to_ascii_lowercase();
    match &sub[..] {
        b"load" => {
            super::ready(c)?;
            let mut replace = false;
            let mut i = 2;
            while i < a.len() - 1 {
                if a[i].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    i += 1;
                } else {
                    return c.err(&format!("ERR Unknown option given: {}", lossy(a[i])));
                }
            }
            if i >= a.len() {
                return c.err("ERR Function code is missing");
            }
            let code = a[i];
            match compile(c, code)
                .and_then(|(name, lib)| install(c, name.clone(), lib, replace).map(|_| name))
            {
                Ok(name) => {
                    super::store_put(c, FUNCTIONS_SLOT, name.as_bytes(), code)?;
                    resp::bulk(c.out, name.as_bytes());
                    Ok(())
                }
                Err(e) => c.err(&e),
            }
        }
        b"delete" if a.len() == 3 => {
            super::ready(c)?;
            let name = String::from_utf8_lossy(a[2]).into_owned();
            let libs = &mut c.sv.scripting.functions;
            let Some(old) = libs.libs.remove(&name) else {
                return c.err("ERR Library not found");
            };
            for f in old.funcs {
                libs.by_func.remove(&f.name.to_ascii_lowercase());
            }
            super::store_remove(c, FUNCTIONS_SLOT, name.as_bytes())?;
            resp::ok(c.out);
            Ok(())
        }
        b"flush" if a.len() <= 3 => {
            if a.len() == 3
                && !a[2].eq_ignore_ascii_case(b"sync")
                && !a[2].eq_ignore_ascii_case(b"async")
            {
                return c.err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            super::ready(c)?;
            c.sv.scripting.functions = Libraries::default();
            c.ks.drop_internal_map(c.tx, FUNCTIONS_SLOT)?;
            resp::ok(c.out);
            Ok(())
        }
        b"kill" if a.len() == 2 => c.err("NOTBUSY No scripts in execution right now."),
        b"stats" if a.len() == 2 => {
            super::ready(c)?;
            let r3 = c.cl.resp3;
            c.map(2);
            resp::bulk(c.out, b"running_script");
            resp::null(c.out, r3);
            resp::bulk(c.out, b"engines");
            c.map(1);
            resp::bulk(c.out, b"LUA");
            c.map(2);
            resp::bulk(c.out, b"libraries_count");
            resp::int(c.out, c.sv.scripting.functions.libs.len() as i64);
            resp::bulk(c.out, b"functions_count");
            resp::int(c.out, c.sv.scripting.functions.functions_count() as i64);
            Ok(())
        }
        b"list" => list(c, a),
        b"dump" if a.len() == 2 => {
            super::ready(c)?;
            let mut payload = Vec::new();
            for lib in c.sv.scripting.functions.libs.values() {
                payload.extend_from_slice(&(lib.code.len() as u64).to_le_bytes());
                payload.extend_from_slice(&lib.code);
            }
            let sum = super::sha1::sha1(&payload);
            payload.extend_from_slice(b"DAISYFN1");
            payload.extend_from_slice(&sum[..8]);
            resp::bulk(c.out, &payload);
            Ok(())
        }
        b"restore" if a.len() == 3 || a.len() == 4 => restore(c, a),
        b"help" => {
            let lines = [
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "DELETE <LIBRARY NAME>",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "FLUSH [ASYNC|SYNC]",
                "KILL",
                "STATS",
                "DUMP",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "HELP",
            ];
            resp::array(c.out, lines.len());
            for l in lines {
                resp::simple(c.out, l);
            }
            Ok(())
        }
        _ => c.err(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            lossy(a[1])
        )),
    }
}

fn restore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    super::ready(c)?;
    let policy = if a.len() == 4 {
        let p = a[3].to_ascii_uppercase();
        match &p[..] {
            b"FLUSH" | b"APPEND" | b"REPLACE" => p,
            _ => return c.err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        }
    } else {
        b"APPEND".to_vec()
    };
    let p = a[2];
    let bad = || "ERR DUMP payload version or checksum are wrong";
    if p.len() < 16 || &p[p.len() - 16..p.len() - 8] != b"DAISYFN1" {
        return c.err(bad());
    }
    let body = &p[..p.len() - 16];
    if super::sha1::sha1(body)[..8] != p[p.len() - 8..] {
        return c.err(bad());
    }
    let mut codes = Vec::new();
    let mut i = 0;
    while i < body.len() {
        if i + 8 > body.len() {
            return c.err(bad());
        }
        let n = u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes")) as usize;
        i += 8;
        if i + n > body.len() {
            return c.err(bad());
        }
        codes.push(body[i..i + n].to_vec());
        i += n;
    }
    let mut compiled = Vec::new();
    for code in &codes {
        match compile(c, code) {
            Ok(x) => compiled.push(x),
            Err(e) => return c.err(&e),
        }
    }
    let saved = std::mem::take(&mut c.sv.scripting.functions);
    if policy != b"FLUSH" {
        c.sv.scripting.functions = Libraries {
            libs: saved.libs.clone(),
            by_func: saved.by_func.clone(),
        };
    }
    for (name, lib) in compiled {
        if let Err(e) = install_as(c, name, lib, policy == b"REPLACE", false) {
            c.sv.scripting.functions = saved;
            return c.err(&e);
        }
    }
    // Store the result: the whole map is rewritten.
    c.ks.drop_internal_map(c.tx, FUNCTIONS_SLOT)?;
    for (n, code) in stored_libraries(c) {
        super::store_put(c, FUNCTIONS_SLOT, &n, &code)?;
    }
    resp::ok(c.out);
    Ok(())
}

fn list(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    super::ready(c)?;
    let mut with_code = false;
    let mut pattern: Option<Vec<u8>> = None;
    let mut i = 2;
    while i < a.len() {
        if a[i].eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
            i += 1;
        } else if a[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            if i + 1 >= a.len() {
                return c.err("ERR library name argument was not given");
            }
            pattern = Some(a[i + 1].to_vec());
            i += 2;
        } else {
            return c.err(&format!("ERR Unknown argument {}", lossy(a[i])));
        }
    }
    let libs: Vec<(String, Library)> =
        c.sv.scripting
            .functions
            .libs
            .iter()
            .filter(|(n, _)| {
                pattern
                    .as_ref()
                    .is_none_or(|p| crate::glob::matches(p, n.as_bytes()))
            })
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
    let r3 = c.cl.resp3;
    resp::array(c.out, libs.len());
    for (name, lib) in libs {
        c.map(if with_code { 4 } else { 3 });
        resp::bulk(c.out, b"library_name");
        resp::bulk(c.out, name.as_bytes());
        resp::bulk(c.out, b"engine");
        resp::bulk(c.out, b"LUA");
        resp::bulk(c.out, b"functions");
        resp::array(c.out, lib.funcs.len());
        for f in &lib.funcs {
            c.map(3);
            resp::bulk(c.out, b"name");
            resp::bulk(c.out, f.name.as_bytes());
            resp::bulk(c.out, b"description");
            match &f.desc {
                Some(d) => resp::bulk(c.out, d.as_bytes()),
                None => resp::null(c.out, r3),
            }
            resp::bulk(c.out, b"flags");
            let names = f.flags.names();
            c.set_header(names.len());
            for n in names {
                resp::bulk(c.out, n.as_bytes());
            }
        }
        if with_code {
            resp::bulk(c.out, b"library_code");
            resp::bulk(c.out, &lib.code);
        }
    }
    Ok(())
}

/// What `redis.register_function` got (function_lua.c's argument rules): a function, or the
/// error text.
pub(crate) fn read_register_args(args: mlua::MultiValue) -> Result<Func, String> {
    use mlua::Value;
    let argv: Vec<Value> = args.into_iter().collect();
    if argv.is_empty() || argv.len() > 2 {
        return Err("wrong number of arguments to redis.register_function".into());
    }
    let (name, f, flags, desc) = if argv.len() == 1 {
        let Value::Table(t) = &argv[0] else {
            return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
        };
        let mut name = None;
        let mut f = None;
        let mut flags = ScriptFlags::default();
        let mut desc = None;
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair.map_err(|e| e.to_string())?;
            let Value::String(k) = k else {
                return Err(
                    "named argument key given to redis.register_function is not a string".into(),
                );
            };
            let key = k.to_string_lossy().to_ascii_lowercase();
            match key.as_str() {
                "function_name" => match v {
                    Value::String(s) => name = Some(s.to_string_lossy()),
                    Value::Integer(i) => name = Some(i.to_string()),
                    _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                },
                "description" => match v {
                    Value::String(s) => desc = Some(s.to_string_lossy()),
                    _ => return Err("description argument given to redis.register_function must be a string".into()),
                },
                "callback" => match v {
                    Value::Function(func) => f = Some(func),
                    _ => return Err("callback argument given to redis.register_function must be a function".into()),
                },
                "flags" => match v {
                    Value::Table(ft) => {
                        flags = parse_shebang_flags_table(&ft).ok_or("unknown flag given")?;
                    }
                    _ => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
                },
                _ => return Err("unknown argument given to redis.register_function".into()),
            }
        }
        let Some(name) = name else {
            return Err("redis.register_function must get a function name argument".into());
        };
        let Some(f) = f else {
            return Err("redis.register_function must get a callback argument".into());
        };
        (name, f, flags, desc)
    } else {
        let name = match &argv[0] {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(i) => i.to_string(),
            _ => return Err("first argument to redis.register_function must be a string".into()),
        };
        let Value::Function(f) = &argv[1] else {
            return Err("second argument to redis.register_function must be a function".into());
        };
        (name, f.clone(), ScriptFlags::default(), None)
    };
    if !valid_name(&name) {
        // Redis's text for a function name says "Library" too (functions.c).
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok(Func {
        name,
        f,
        flags,
        desc,
    })
}
