//! `redis.call` and `redis.pcall` as Lua C functions, as Redis's are. A Lua function in their
//! place would be replaced on the stack by a tail call (`return redis.call(...)`), and an
//! error it raised could not name the script's line (` script: <sha>, on @user_script:N.`);
//! Lua 5.1 runs a C function called in tail position as an ordinary call, so the script's
//! frame stays. Both call the Lua helper the interpreter keeps in its registry under
//! [`HELPER`] (`function(...) return bridge(select('#', ...), {...}) end`: is it an error,
//! and the reply as a Lua value); `redis.call` raises an error reply, `redis.pcall` returns it.
//! `redis.acl_check_cmd` is made the same way (the bridge checks permissions instead).
#![expect(
    unsafe_code,
    reason = "Lua C functions through mlua's ffi (a Lua function would be replaced by a tail call)"
)]

use mlua::ffi;
use std::ffi::{c_int, CStr};

/// The registry key of the helper `redis.call` and `redis.pcall` call.
pub const HELPER: &CStr = c"daisy.call_helper";
/// ... and of the one `redis.acl_check_cmd` calls (the bridge asked to check permissions).
pub const ACL_HELPER: &CStr = c"daisy.acl_check_helper";

/// `redis.call`, `redis.pcall` and `redis.acl_check_cmd` as Lua functions.
pub fn functions(lua: &mlua::Lua) -> mlua::Result<[mlua::Function; 3]> {
    // SAFETY: all are lua_CFunctions that keep Lua's stack discipline (see `call`).
    unsafe {
        Ok([
            lua.create_c_function(redis_call)?,
            lua.create_c_function(redis_pcall)?,
            lua.create_c_function(redis_acl_check_cmd)?,
        ])
    }
}

/// `redis.call`.
unsafe extern "C-unwind" fn redis_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this with a valid state (the contract of a lua_CFunction).
    unsafe { call(l, HELPER, true) }
}

/// `redis.pcall`.
unsafe extern "C-unwind" fn redis_pcall(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: as above.
    unsafe { call(l, HELPER, false) }
}

/// `redis.acl_check_cmd`.
unsafe extern "C-unwind" fn redis_acl_check_cmd(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: as above.
    unsafe { call(l, ACL_HELPER, true) }
}

/// The helper with this call's arguments; then the reply, or (when `raise`) the error raised.
/// Nothing here owns Rust values, so Lua's errors may unwind through it (longjmp).
unsafe fn call(l: *mut ffi::lua_State, helper: &CStr, raise: bool) -> c_int {
    // SAFETY: `l` is the calling state. The stack holds the n arguments; the helper is pushed
    // and moved below them (Lua guarantees LUA_MINSTACK free slots to a C function, and one
    // is used), then called with n arguments for 2 results, which replace them: the stack is
    // then exactly [is_error, value]. lua_error raises the value at the top; otherwise that
    // value is the one result.
    unsafe {
        let n = ffi::lua_gettop(l);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, helper.as_ptr());
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, 2);
        if raise && ffi::lua_toboolean(l, -2) != 0 {
            ffi::lua_error(l);
        }
    }
    1
}
