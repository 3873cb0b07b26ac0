//! The Lua interpreter: the sandbox, the script cache, running a script with `redis.call`
//! bound to the calling command's context, and the conversions between Redis replies and Lua
//! values (script_lua.c's `redisProtocolToLuaType` and `luaReplyToRedisReply`).

use crate::commands::{self, Client, Ctx};
use crate::resp;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// The error a killed script ends with (without the "ERR " Redis adds).
pub const SCRIPT_KILLED_MSG: &str = "Script killed by user with SCRIPT KILL...";

/// A script's shebang flags (`#!lua flags=...`); `compat`: no shebang (Redis's
/// `SCRIPT_FLAG_EVAL_COMPAT_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    pub compat: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    /// A flag's name as Redis spells it; false when unknown.
    pub fn set(&mut self, name: &[u8]) -> bool {
        match name {
            b"no-writes" => self.no_writes = true,
            b"allow-oom" => self.allow_oom = true,
            b"allow-stale" => self.allow_stale = true,
            b"no-cluster" => self.no_cluster = true,
            b"allow-cross-slot-keys" => self.allow_cross_slot = true,
            _ => return false,
        }
        true
    }

    /// The names of the flags set, in Redis's order (FUNCTION LIST).
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.no_writes {
            v.push("no-writes");
        }
        if self.allow_oom {
            v.push("allow-oom");
        }
        if self.allow_stale {
            v.push("allow-stale");
        }
        if self.no_cluster {
            v.push("no-cluster");
        }
        if self.allow_cross_slot {
            v.push("allow-cross-slot-keys");
        }
        v
    }
}

/// What runs: an EVAL script (KEYS and ARGV are globals) or a function (they are arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    Eval,
    Function,
}

impl Running {
    /// Killed, or stopped for a restart: the script must end (pcall does not catch it).
    pub fn stopping(&self) -> bool {
        self.killed.get() || self.restart.get()
    }
}

/// The script running now (SCRIPT KILL, FUNCTION KILL, BUSY).
pub struct Running {
    pub kind: RunKind,
    pub started: Instant,
    pub killed: Cell<bool>,
    /// Stopped at the busy threshold for a restart in a group of its own (`busy`): its
    /// command fails with [`super::BUSY_RESTART`], failing the event loop's group.
    pub restart: Cell<bool>,
    /// It has run a write command (it cannot be killed any more).
    pub dirty: Cell<bool>,
    /// RESP version of its `redis.call` replies (`redis.setresp`).
    pub resp: Cell<u8>,
    pub name: String,
    /// The command that runs it (FUNCTION STATS).
    pub command: Vec<Vec<u8>>,
    /// Libraries and functions loaded (FUNCTION STATS).
    pub libraries: (usize, usize),
}

/// The interpreter and what it holds. Created at the first scripting command.
#[derive(Default)]
pub struct Scripting {
    lua: Option<Lua>,
    /// The sandboxed globals scripts see.
    env: Option<Table>,
    /// The real globals (KEYS and ARGV are set there).
    real: Option<Table>,
    /// The sandboxed globals' metatable and what its `__index` is during FUNCTION LOAD.
    load_swap: Option<(Table, Table)>,
    /// `xpcall(f(keys, args), handler)`.
    runner: Option<Function>,
    scripts: HashMap<String, (Function, ScriptFlags)>,
    /// Script bodies, total bytes (INFO).
    pub scripts_bytes: usize,
    pub running: Option<Rc<Running>>,
    /// Shared with the interpreter's callbacks: the script running now.
    current: Rc<std::cell::RefCell<Option<Rc<Running>>>>,
    /// FUNCTION's libraries.
    pub functions: super::function::Libraries,
    /// The other connections, set by the event loop before a command that runs a script: a
    /// script past `busy-reply-threshold` answers them (`busy`).
    pub busy: super::busy::Shared,
    /// While FUNCTION LOAD runs a library's code: what it registered, or its first error.
    loading: Loading,
    /// Scripts run (the garbage collector's pace).
    runs: u64,
}

/// Scripts between two garbage-collection steps (Redis's `LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u64 = 50;

type Loading = Rc<std::cell::RefCell<Option<Result<Vec<super::function::Func>, String>>>>;

/// Function flags given as a Lua table of names (`flags={'no-writes'}`); None for an unknown
/// one.
pub fn parse_shebang_flags_table(t: &Table) -> Option<ScriptFlags> {
    let mut f = ScriptFlags::default();
    for v in t.clone().sequence_values::<mlua::String>() {
        let v = v.ok()?;
        if !f.set(&v.as_bytes()) {
            return None;
        }
    }
    Some(f)
}

impl Scripting {
    /// FUNCTION LOAD starts running a library's code.
    pub fn begin_load(&self) {
        *self.loading.borrow_mut() = Some(Ok(Vec::new()));
        if let Some((gmt, load_index)) = &self.load_swap {
            let _ = gmt.raw_set("__index", load_index.clone());
        }
    }

    /// ... and ends: the functions it registered, or why they are refused.
    pub fn end_load(&self) -> Result<Vec<super::function::Func>, String> {
        if let (Some((gmt, _)), Some(real)) = (&self.load_swap, &self.real) {
            let _ = gmt.raw_set("__index", real.clone());
        }
        self.loading
            .borrow_mut()
            .take()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    pub fn started(&self) -> bool {
        self.lua.is_some()
    }

    /// Number of scripts in the cache (INFO's `number_of_cached_scripts`).
    pub fn cached_scripts(&self) -> usize {
        self.scripts.len()
    }

    /// Memory the interpreter uses (INFO's `used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.lua.as_ref().map_or(0, |l| l.used_memory())
    }

    pub fn lua(&self) -> &Lua {
        self.lua.as_ref().expect("interpreter started")
    }

    pub fn env(&self) -> &Table {
        self.env.as_ref().expect("interpreter started")
    }

    /// Create the interpreter and compile the stored scripts (`(sha, body)` pairs).
    pub fn start(&mut self, stored: Vec<(Vec<u8>, Vec<u8>)>) {
        self.new_vm();
        for (sha, body) in stored {
            let sha = String::from_utf8_lossy(&sha).into_owned();
            let _ = self.create_script(&sha, &body);
        }
    }

    /// A new interpreter without scripts (SCRIPT FLUSH; functions are loaded again by the
    /// caller).
    pub fn restart(&mut self) {
        self.scripts.clear();
        self.scripts_bytes = 0;
        self.new_vm();
    }

    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
        self.scripts_bytes = 0;
    }

    fn new_vm(&mut self) {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )
        .expect("Lua starts");
        let (env, real, runner, load_swap) =
            sandbox(&lua, self.current.clone(), self.loading.clone())
                .expect("the sandbox prelude runs");
        self.load_swap = Some(load_swap);
        // What setting up the sandbox left behind.
        let _ = lua.gc_collect();
        self.lua = Some(lua);
        self.env = Some(env);
        self.real = Some(real);
        self.runner = Some(runner);
    }

    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    pub fn script(&self, sha: &str) -> Option<(Function, ScriptFlags)> {
        self.scripts.get(sha).cloned()
    }

    /// Compile `body` into the cache under `sha` (Redis's `luaCreateFunction`): the error
    /// reply's text when its shebang or its code is refused.
    pub fn create_script(&mut self, sha: &str, body: &[u8]) -> Result<(), String> {
        let (flags, skip) = parse_shebang(body)?;
        let lua = self.lua();
        let f = lua
            .load(&body[skip..])
            .set_name("@user_script")
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env().clone())
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    lua_error_text(&e)
                )
            })?;
        self.scripts_bytes += body.len();
        self.scripts.insert(sha.to_string(), (f, flags));
        Ok(())
    }
}

/// The message of a Lua error as Lua would print it.
pub fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        mlua::Error::ExternalError(e) => e.to_string(),
        other => other.to_string(),
    }
}

/// `#!lua flags=a,b` (eval.c `evalExtractShebangFlags`): the flags and how many bytes the
/// shebang line takes (its newline stays, keeping line numbers); compat mode without one.
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    let mut flags = ScriptFlags {
        compat: true,
        ..Default::default()
    };
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    if parts.is_empty() {
        return Err("ERR Invalid engine in script shebang".into());
    }
    if parts[0] != "#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            parts[0]
        ));
    }
    flags.compat = false;
    for p in &parts[1..] {
        if let Some(list) = p.strip_prefix("flags=") {
            if list.is_empty() {
                continue;
            }
            for f in list.split(',') {
                if !flags.set(f.as_bytes()) {
                    return Err(format!("ERR Unexpected flag in script shebang: {f}"));
                }
            }
        } else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        }
    }
    Ok((flags, end))
}

/// Set up the globals, the libraries and the `redis` table; returns the sandboxed globals,
/// the real ones and the runner.
fn sandbox(
    lua: &Lua,
    current: Rc<std::cell::RefCell<Option<Rc<Running>>>>,
    loading: Loading,
) -> mlua::Result<(Table, Table, Function, (Table, Table))> {
    let real = lua.globals();
    super::libs::register(lua, &real)?;
    real.raw_set("REDIS_VERSION_STRING", crate::REDIS_VERSION)?;
    let num = crate::REDIS_VERSION
        .split('.')
        .fold(0u32, |acc, p| (acc << 8) | p.parse::<u32>().unwrap_or(0));
    real.raw_set("REDIS_VERSION_NUMBER", num)?;
    // The bridge: the dispatcher the running command placed in the registry.
    let bridge = lua.create_function(|lua, args: (usize, Table, bool)| {
        match lua.named_registry_value::<Option<Function>>("daisy.dispatch")? {
            Some(f) => f.call::<MultiValue>(args),
            None => {
                let t = lua.create_table()?;
                t.raw_set(
                    "err",
                    "ERR redis.call/pcall can only be called inside a script invocation",
                )?;
                Ok(MultiValue::from_iter([
                    Value::Boolean(true),
                    Value::Table(t),
                ]))
            }
        }
    })?;
    let sha1 = lua.create_function(|lua, v: Value| {
        let bytes = match &v {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => crate::rdb::format_g17(*n).into_bytes(),
            _ => Vec::new(),
        };
        lua.create_string(super::sha1_hex(&bytes))
    })?;
    let cur = current.clone();
    let killed =
        lua.create_function(move |_, ()| Ok(cur.borrow().as_ref().is_some_and(|r| r.stopping())))?;
    let cur = current.clone();
    let setresp = lua.create_function(move |_, v: u8| {
        Ok(match cur.borrow().as_ref() {
            Some(r) => {
                r.resp.set(v);
                (true, None)
            }
            None => (
                false,
                Some("redis.setresp can only be called inside a script invocation"),
            ),
        })
    })?;
    let register = lua.create_function(move |_, args: MultiValue| {
        let mut slot = loading.borrow_mut();
        let Some(state) = slot.as_mut() else {
            return Ok((
                false,
                Some(
                    "redis.register_function can only be called on FUNCTION LOAD command"
                        .to_string(),
                ),
            ));
        };
        let Ok(funcs) = state else {
            return Ok((true, None));
        };
        match super::function::read_register_args(args) {
            Ok(f) => {
                if funcs.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name)) {
                    return Ok((false, Some("Function already exists in the library".into())));
                }
                funcs.push(f);
                Ok((true, None))
            }
            Err(e) => Ok((false, Some(e))),
        }
    })?;
    // The message of an error a Rust function raised (what pcall returns for it).
    let errtext = lua.create_function(|_, v: Value| {
        Ok(match v {
            Value::Error(e) => lua_error_text(&e),
            other => other.to_string()?,
        })
    })?;
    for (key, acl) in [
        (super::ccall::HELPER, false),
        (super::ccall::ACL_HELPER, true),
    ] {
        let helper: Function = lua
            .load("local bridge, select, acl = ... return function(...) return bridge(select('#', ...), {...}, acl) end")
            .set_name("=daisy_call")
            .call((bridge.clone(), real.raw_get::<Function>("select")?, acl))?;
        lua.set_named_registry_value(key.to_str().expect("an ASCII key"), helper)?;
    }
    let [ccall, cpcall, acl_check] = super::ccall::functions(lua)?;
    let (env, gmt, load_index): (Table, Table, Table) = lua
        .load(include_str!("prelude.lua"))
        .set_name("=daisy_sandbox")
        .call((
            real.clone(),
            bridge,
            sha1,
            killed,
            setresp,
            register,
            errtext,
            ccall,
            cpcall,
            acl_check,
        ))?;
    // Errors become Redis's error tables, with the script's line (eval.c's
    // `__redis__err__handler`).
    let handler = lua.create_function(|lua, err: Value| error_table(lua, err))?;
    let runner: Function = lua
        .load(
            "local xpcall, handler = ...
             return function(f, k, a) return xpcall(function() return f(k, a) end, handler) end",
        )
        .set_name("=daisy_runner")
        .call((lua.globals().raw_get::<Function>("xpcall")?, handler))?;
    Ok((env, real, runner, (gmt, load_index)))
}

/// An error value as Redis's error table `{err=, source=, line=}`.
fn error_table(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let t = match err {
        Value::Table(t) => t,
        other => {
            let msg = match &other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(e) => lua_error_text(e),
                Value::Integer(i) => i.to_string(),
                Value::Number(n) => crate::rdb::format_g17(*n),
                Value::Nil => "nil".into(),
                Value::Boolean(b) => b.to_string(),
                v => v.type_name().to_string(),
            };
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {msg}"))?;
            t
        }
    };
    for level in 0..64 {
        let Some(d) = lua.inspect_stack(level) else {
            break;
        };
        let src = d.source();
        if let Some(s) = src.source.as_deref() {
            if s == "@user_script" || s == "@user_function" {
                t.raw_set("source", s)?;
                t.raw_set("line", d.curr_line())?;
                break;
            }
        }
    }
    Ok(t)
}

/// Why `redis.call` refused a command before running it (script.c `scriptCall`): `dirty`,
/// the script has written (the server-state checks no longer apply: it cannot stop half
/// way); `oom`, the pool was past maxmemory when the script started and it may not write
/// then (no `allow-oom` flag).
fn refuse(
    c: &mut Ctx,
    args: &[&[u8]],
    read_only: bool,
    dirty: bool,
    oom: bool,
) -> Result<&'static commands::Spec, (String, Option<&'static commands::Spec>)> {
    let Some(spec) = c.table.find(args[0]) else {
        return Err(("ERR Unknown Redis command called from script".into(), None));
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && spec.arity != n) || n < -spec.arity {
        return Err((
            "ERR Wrong number of args calling Redis command from script".into(),
            Some(spec),
        ));
    }
    // A container's subcommands may be refused on their own (CLUSTER RESET, where CLUSTER
    // INFO is not): their flags are in Redis's command table. Only keyless commands with an
    // argument can be such a subcommand, so the lookup stays off the path of data commands.
    let sub_noscript = || {
        spec.first_key == 0
            && args.len() > 1
            && crate::admin::meta::lookup_argv(args).is_some_and(|m| m.has("noscript"))
    };
    if spec.has("noscript") || sub_noscript() {
        return Err((
            "ERR This Redis command is not allowed from script".into(),
            Some(spec),
        ));
    }
    // The calling user's permissions hold inside the script too (logged with context `lua`).
    if let Some(e) = crate::acl::check_script(c, spec, args) {
        return Err((format!("ERR {e}"), Some(spec)));
    }
    let meta = crate::admin::meta::lookup_argv(args);
    // `may_replicate` commands (PUBLISH, PFCOUNT, ...) count as writes here, as in Redis's
    // `scriptVerifyWriteCommandAllow` (CLIENT PAUSE WRITE lets read-only scripts run).
    if read_only && (spec.has("write") || meta.is_some_and(|m| m.has("may_replicate"))) {
        return Err((
            "ERR Write commands are not allowed from read-only scripts.".into(),
            Some(spec),
        ));
    }
    if spec.has("write") && !dirty && c.sv.config.no_good_replicas {
        return Err((commands::E_NOREPLICAS.into(), Some(spec)));
    }
    if oom && !dirty && meta.is_some_and(|m| m.has("denyoom")) {
        return Err((commands::E_OOM.into(), Some(spec)));
    }
    Ok(spec)
}

/// An error table for Lua: `{err = msg}` (and the flag that it was counted already).
fn err_value(lua: &Lua, msg: &str, counted: bool) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    if counted {
        t.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(Value::Table(t))
}

/// Run a compiled script or function for `c`, replying with its result.
#[allow(clippy::too_many_arguments)]
pub fn run(
    c: &mut Ctx,
    func: Function,
    keys: &[&[u8]],
    args: &[&[u8]],
    kind: RunKind,
    name: &str,
    read_only: bool,
    allow_oom: bool,
    command: &[&[u8]],
) -> daisy::Result<()> {
    let lua = c.sv.scripting.lua().clone();
    let runner = c.sv.scripting.runner.clone().expect("started");
    let real = c.sv.scripting.real.clone().expect("started");
    let running = Rc::new(Running {
        kind,
        started: Instant::now(),
        killed: Cell::new(false),
        restart: Cell::new(false),
        dirty: Cell::new(false),
        resp: Cell::new(2),
        name: name.to_string(),
        command: command.iter().map(|a| a.to_vec()).collect(),
        libraries: (
            c.sv.scripting.functions.libs.len(),
            c.sv.scripting.functions.functions_count(),
        ),
    });
    c.sv.scripting.running = Some(running.clone());
    *c.sv.scripting.current.borrow_mut() = Some(running.clone());
    // Client-side caching: a read-only command of the script makes the caller's declared
    // keys remembered for it (Redis's rule for scripts: `call` tracks the caller's command).
    if c.cl.tracking.remembers() {
        c.sv.tracking.script = Some((c.cl.id, keys.iter().map(|k| k.to_vec()).collect()));
    }
    let caller_resp3 = c.cl.resp3;
    // Redis's `pre_command_oom_state`: the pool's state when the script starts decides.
    let oom = !allow_oom && c.sv.over_maxmemory();
    let mut fatal: Option<daisy::Error> = None;
    let mut reply = Vec::new();
    let mut reply_errors: Vec<String> = Vec::new();
    let threshold =
        c.sv.config
            .get("busy-reply-threshold")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(5000);
    if threshold > 0 {
        let r = running.clone();
        let peers = c.sv.scripting.busy.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(100_000),
            move |_, _| {
                if !r.stopping() && r.started.elapsed().as_millis() >= threshold as u128 {
                    super::busy::serve_peers(&peers, &r);
                }
                if r.stopping() {
                    return Err(mlua::Error::RuntimeError(SCRIPT_KILLED_MSG.into()));
                }
                Ok(VmState::Continue)
            },
        );
    }
    let result: mlua::Result<()> = (|| {
        let to_table = |items: &[&[u8]]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, a) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(a)?)?;
            }
            Ok(t)
        };
        let keys_t = to_table(keys)?;
        let args_t = to_table(args)?;
        if kind == RunKind::Eval {
            real.raw_set("KEYS", keys_t.clone())?;
            real.raw_set("ARGV", args_t.clone())?;
        }
        let mut script_client = Client {
            id: super::SCRIPT_CLIENT_ID,
            authed: true,
            db: c.cl.db,
            deny_blocking: true,
            script: true,
            ..Default::default()
        };
        let fatal_ref = &mut fatal;
        let out = lua.scope(|scope| {
            let dispatch =
                scope.create_function_mut(|lua, (n, t, acl_check): (usize, Table, bool)| {
                    let mut argv = Vec::with_capacity(n);
                    for i in 1..=n {
                        argv.push(t.raw_get::<Value>(i)?);
                    }
                    let raise = |v: Value| Ok(MultiValue::from_iter([Value::Boolean(true), v]));
                    if let Some(e) = fatal_ref.as_ref() {
                        return raise(err_value(lua, &format!("ERR {e}"), true)?);
                    }
                    if running.stopping() {
                        return raise(err_value(lua, &format!("ERR {SCRIPT_KILLED_MSG}"), true)?);
                    }
                    if argv.is_empty() {
                        return raise(err_value(
                            lua,
                            "ERR Please specify at least one argument for this redis lib call",
                            false,
                        )?);
                    }
                    let mut owned: Vec<Vec<u8>> = Vec::with_capacity(argv.len());
                    for v in argv.iter() {
                        match v {
                            Value::String(s) => owned.push(s.as_bytes().to_vec()),
                            Value::Integer(i) => {
                                owned.push(crate::rdb::format_g17(*i as f64).into_bytes())
                            }
                            Value::Number(n) => owned.push(fmt_number(*n).into_bytes()),
                            _ => return raise(err_value(
                                lua,
                                "ERR Lua redis lib command arguments must be strings or integers",
                                false,
                            )?),
                        }
                    }
                    let argv: Vec<&[u8]> = owned.iter().map(|a| &a[..]).collect();
                    if acl_check {
                        // redis.acl_check_cmd: may the caller's user run it (Redis's
                        // `ACLCheckAllUserCommandPerm`, nothing logged)?
                        let Some(spec) = c.table.find(argv[0]).filter(|s| {
                            crate::admin::arity_error(s, &argv)
                                .is_none_or(|e| !e.starts_with("ERR unknown subcommand"))
                        }) else {
                            return raise(err_value(
                                lua,
                                "ERR Invalid command passed to redis.acl_check_cmd()",
                                false,
                            )?);
                        };
                        let ok = (c.cl.user.id == 0 && c.sv.acl.default_unrestricted)
                            || c.sv.acl.check(c.cl, spec, &argv).is_ok();
                        return Ok(MultiValue::from_iter([
                            Value::Boolean(false),
                            Value::Boolean(ok),
                        ]));
                    }
                    let spec = match refuse(c, &argv, read_only, running.dirty.get(), oom) {
                        Ok(s) => s,
                        Err((msg, spec)) => {
                            c.sv.counters.rejected_calls += 1;
                            if let Some(s) = spec {
                                c.sv.cmdstat(s, &argv).rejected += 1;
                            }
                            c.sv.count_error(&msg);
                            return raise(err_value(lua, &msg, true)?);
                        }
                    };
                    if spec.has("write") {
                        running.dirty.set(true);
                    }
                    script_client.resp3 = running.resp.get() == 3;
                    let mut buf = Vec::new();
                    if let Err(e) = commands::call(
                        c.table,
                        spec,
                        c.ks,
                        c.tx,
                        &mut script_client,
                        c.sv,
                        &argv,
                        c.now_ms,
                        &mut buf,
                    ) {
                        let v = err_value(lua, &format!("ERR {e}"), true)?;
                        *fatal_ref = Some(e);
                        return raise(v);
                    }
                    let mut pos = 0;
                    let v = reply_to_lua(lua, &buf, &mut pos)?;
                    let is_err = buf.first() == Some(&b'-');
                    if is_err {
                        if let Value::Table(t) = &v {
                            t.raw_set("ignore_error_stats_update", true)?;
                        }
                    }
                    Ok(MultiValue::from_iter([Value::Boolean(is_err), v]))
                })?;
            lua.set_named_registry_value("daisy.dispatch", dispatch)?;
            let r = runner.call::<(bool, Value)>((func, keys_t, args_t));
            lua.unset_named_registry_value("daisy.dispatch")?;
            r
        });
        let (ok, value) = out?;
        if ok {
            to_reply(
                &value,
                &mut reply,
                caller_resp3,
                running.resp.get() == 3,
                &mut reply_errors,
                0,
            )?;
        } else {
            let (msg, counted) = final_error(&value, name);
            resp::error(&mut reply, &msg);
            if !counted {
                reply_errors.push(msg);
            }
        }
        Ok(())
    })();
    if threshold > 0 {
        lua.remove_hook();
    }
    // A garbage-collection step every GC_PERIOD scripts, as Redis's eval.c does (a full cycle
    // at Lua's own pace would cost latency, one step per script too much time).
    c.sv.scripting.runs += 1;
    if c.sv.scripting.runs.is_multiple_of(GC_PERIOD) {
        let _ = lua.gc_step_kbytes(GC_PERIOD as i32);
    }
    c.sv.scripting.running = None;
    *c.sv.scripting.current.borrow_mut() = None;
    c.sv.tracking.script = None;
    if let Some(e) = fatal {
        return Err(e);
    }
    if running.restart.get() {
        return Err(daisy::Error::Aborted(super::BUSY_RESTART.into()));
    }
    if let Err(e) = result {
        reply.clear();
        let msg = format!(
            "ERR Error running script {name}, {}",
            lua_error_text(&e).chars().take(100).collect::<String>()
        );
        resp::error(&mut reply, &msg);
        reply_errors.push(msg);
    }
    for e in &reply_errors {
        c.sv.count_error(e);
    }
    c.out.extend_from_slice(&reply);
    Ok(())
}

/// A number argument of `redis.call` as Redis prints it (`%.17g`).
fn fmt_number(n: f64) -> String {
    if n.is_nan() {
        if n.is_sign_negative() { "-nan" } else { "nan" }.into()
    } else if n.is_infinite() {
        if n > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        crate::rdb::format_g17(n)
    }
}

/// The error reply of a script that raised `err` (script_lua.c `luaCallFunction`), and
/// whether it was counted already.
fn final_error(err: &Value, name: &str) -> (String, bool) {
    match err {
        Value::Table(t) => {
            let msg: String = match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => s.to_string_lossy(),
                Ok(Value::Integer(i)) => i.to_string(),
                Ok(Value::Number(n)) => crate::rdb::format_g17(n),
                _ => "ERR unknown error".into(),
            };
            let counted = matches!(
                t.raw_get::<Value>("ignore_error_stats_update"),
                Ok(Value::Boolean(true))
            );
            let source: Option<String> = t.raw_get("source").ok();
            let line: Option<i64> = t.raw_get("line").ok();
            let msg = match (source, line) {
                (Some(s), Some(l)) => format!("{msg} script: {name}, on {s}:{l}."),
                _ => msg,
            };
            (msg, counted)
        }
        other => {
            let text = match other {
                Value::String(s) => s.to_string_lossy(),
                _ => "execution failure".into(),
            };
            (
                format!("ERR Error running script {name}, {text:.100}"),
                false,
            )
        }
    }
}

/// Deepest nesting a reply may have (Redis: its Lua stack limit).
const MAX_DEPTH: usize = 1000;

/// A Lua value as a reply (script_lua.c `luaReplyToRedisReply`). `caller3`: the client speaks
/// RESP3; `script3`: the script chose RESP3 (`redis.setresp(3)`).
fn to_reply(
    v: &Value,
    out: &mut Vec<u8>,
    caller3: bool,
    script3: bool,
    errors: &mut Vec<String>,
    depth: usize,
) -> mlua::Result<()> {
    if depth > MAX_DEPTH {
        let m = "ERR reached lua stack limit";
        resp::error(out, m);
        errors.push(m.into());
        return Ok(());
    }
    match v {
        Value::String(s) => resp::bulk(out, &s.as_bytes()),
        Value::Boolean(b) => {
            if !script3 {
                if *b {
                    resp::int(out, 1);
                } else {
                    resp::null(out, caller3);
                }
            } else if caller3 {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                resp::int(out, *b as i64);
            }
        }
        Value::Integer(i) => resp::int(out, *i),
        // C's (long long) cast, as Redis converts a Lua number.
        Value::Number(n) => resp::int(out, super::struct_lib::c_long_long(*n)),
        Value::Table(t) => {
            if let Value::String(e) = t.raw_get::<Value>("err")? {
                let msg = e.to_string_lossy();
                resp::error(out, &msg);
                if !matches!(
                    t.raw_get::<Value>("ignore_error_stats_update")?,
                    Value::Boolean(true)
                ) {
                    errors.push(msg);
                }
                return Ok(());
            }
            if let Value::String(s) = t.raw_get::<Value>("ok")? {
                resp::simple(out, &s.to_string_lossy().replace(['\r', '\n'], " "));
                return Ok(());
            }
            if let Value::Number(_) | Value::Integer(_) = t.raw_get::<Value>("double")? {
                let d: f64 = t.raw_get("double")?;
                resp::double(out, &crate::types::zset::score::fmt_score(d), caller3);
                return Ok(());
            }
            if let Value::String(s) = t.raw_get::<Value>("big_number")? {
                let text = s.to_string_lossy().replace(['\r', '\n'], " ");
                if caller3 {
                    out.push(b'(');
                    out.extend_from_slice(text.as_bytes());
                    resp::crlf(out);
                } else {
                    resp::bulk(out, text.as_bytes());
                }
                return Ok(());
            }
            if let Value::Table(vt) = t.raw_get::<Value>("verbatim_string")? {
                if let (Value::String(f), Value::String(s)) = (
                    vt.raw_get::<Value>("format")?,
                    vt.raw_get::<Value>("string")?,
                ) {
                    let s = s.as_bytes();
                    if caller3 {
                        let f = f.as_bytes();
                        let f3: Vec<u8> = f.iter().chain(b"   ".iter()).take(3).copied().collect();
                        out.extend_from_slice(format!("={}\r\n", s.len() + 4).as_bytes());
                        out.extend_from_slice(&f3);
                        out.push(b':');
                        out.extend_from_slice(&s);
                        resp::crlf(out);
                    } else {
                        resp::bulk(out, &s);
                    }
                    return Ok(());
                }
            }
            if let Value::Table(m) = t.raw_get::<Value>("map")? {
                // Counted first: holding every pair at once exhausts Lua's reference stack.
                let n = m.pairs::<Value, Value>().count();
                resp::map(out, n, caller3);
                for pair in m.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    to_reply(&k, out, caller3, script3, errors, depth + 1)?;
                    to_reply(&v, out, caller3, script3, errors, depth + 1)?;
                }
                return Ok(());
            }
            if let Value::Table(s) = t.raw_get::<Value>("set")? {
                let n = s.pairs::<Value, Value>().count();
                resp::set_header(out, n, caller3);
                for pair in s.pairs::<Value, Value>() {
                    let (k, _) = pair?;
                    to_reply(&k, out, caller3, script3, errors, depth + 1)?;
                }
                return Ok(());
            }
            let mut n = 0i64;
            while !t.raw_get::<Value>(n + 1)?.is_nil() {
                n += 1;
            }
            resp::array(out, n as usize);
            for j in 1..=n {
                let v: Value = t.raw_get(j)?;
                to_reply(&v, out, caller3, script3, errors, depth + 1)?;
            }
        }
        _ => resp::null(out, caller3),
    }
    Ok(())
}

fn line<'b>(buf: &'b [u8], pos: &mut usize) -> &'b [u8] {
    let start = *pos;
    let end = buf[start..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(buf.len(), |i| start + i);
    *pos = (end + 2).min(buf.len());
    &buf[start..end]
}

fn num(b: &[u8]) -> i64 {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A reply the command wrote, as a Lua value (script_lua.c `redisProtocolToLuaType`).
fn reply_to_lua(lua: &Lua, buf: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    if *pos >= buf.len() {
        return Ok(Value::Nil);
    }
    let tag = buf[*pos];
    *pos += 1;
    let mk = |k: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    Ok(match tag {
        b'+' => {
            let l = line(buf, pos);
            mk("ok", Value::String(lua.create_string(l)?))?
        }
        b'-' => {
            let l = line(buf, pos);
            Value::String(lua.create_string(l)?).into_table_err(lua)?
        }
        b':' => Value::Integer(num(line(buf, pos))),
        b'$' | b'=' => {
            let n = num(line(buf, pos));
            if n < 0 {
                Value::Boolean(false)
            } else {
                let n = n as usize;
                let s = &buf[*pos..(*pos + n).min(buf.len())];
                *pos = (*pos + n + 2).min(buf.len());
                if tag == b'=' {
                    let t = lua.create_table()?;
                    t.raw_set("format", lua.create_string(&s[..3.min(s.len())])?)?;
                    t.raw_set("string", lua.create_string(&s[4.min(s.len())..])?)?;
                    mk("verbatim_string", Value::Table(t))?
                } else {
                    Value::String(lua.create_string(s)?)
                }
            }
        }
        b'*' | b'>' | b'~' | b'%' => {
            let n = num(line(buf, pos));
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            match tag {
                b'%' => {
                    for _ in 0..n {
                        let k = reply_to_lua(lua, buf, pos)?;
                        let v = reply_to_lua(lua, buf, pos)?;
                        if !k.is_nil() {
                            t.raw_set(k, v)?;
                        }
                    }
                    mk("map", Value::Table(t))?
                }
                b'~' => {
                    for _ in 0..n {
                        let k = reply_to_lua(lua, buf, pos)?;
                        if !k.is_nil() {
                            t.raw_set(k, true)?;
                        }
                    }
                    mk("set", Value::Table(t))?
                }
                _ => {
                    for i in 0..n {
                        let v = reply_to_lua(lua, buf, pos)?;
                        t.raw_set(i + 1, v)?;
                    }
                    Value::Table(t)
                }
            }
        }
        b'_' => {
            line(buf, pos);
            Value::Nil
        }
        b',' => {
            let l = line(buf, pos);
            let s = String::from_utf8_lossy(l);
            let d = match &*s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                s => s.parse().unwrap_or(f64::NAN),
            };
            mk("double", Value::Number(d))?
        }
        b'#' => Value::Boolean(line(buf, pos) == b"t"),
        b'(' => {
            let l = line(buf, pos);
            mk("big_number", Value::String(lua.create_string(l)?))?
        }
        b'|' => {
            let n = num(line(buf, pos));
            for _ in 0..2 * n {
                reply_to_lua(lua, buf, pos)?;
            }
            reply_to_lua(lua, buf, pos)?
        }
        _ => {
            line(buf, pos);
            Value::Nil
        }
    })
}

trait IntoErrTable {
    fn into_table_err(self, lua: &Lua) -> mlua::Result<Value>;
}

impl IntoErrTable for Value {
    /// An error line (without its '-') as `{err = "CODE msg"}` (`luaPushErrorBuff`).
    fn into_table_err(self, lua: &Lua) -> mlua::Result<Value> {
        let text = match &self {
            Value::String(s) => s.to_string_lossy(),
            _ => String::new(),
        };
        let (code, msg) = match text.split_once(' ') {
            Some((c, m)) => (c.to_string(), m.to_string()),
            None => ("ERR".to_string(), text.clone()),
        };
        let msg = msg.trim_matches(['\r', '\n']);
        err_value(lua, &format!("{code} {msg}"), false)
    }
}

/// Run a bare Lua function for its side effects at load time (FUNCTION LOAD's library body)
/// with the error handler: Ok or the error's message.
pub fn call_loader(s: &Scripting, f: Function) -> Result<(), String> {
    let runner = s.runner.clone().expect("started");
    match runner.call::<(bool, Value)>((f, Value::Nil, Value::Nil)) {
        Ok((true, _)) => Ok(()),
        Ok((false, Value::Table(t))) => Err(t
            .raw_get::<String>("err")
            .unwrap_or_else(|_| "ERR unknown error".into())),
        Ok((false, _)) => Err("ERR unknown error".into()),
        Err(e) => Err(format!("ERR {}", lua_error_text(&e))),
    }
}
