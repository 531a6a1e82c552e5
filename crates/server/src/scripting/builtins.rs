//! The base functions the sandbox replaces, on Lua's C API: `next`, `pairs`, `rawget`,
//! `rawset`, `setmetatable` and `getmetatable`.
//!
//! Redis patches Lua so that tables can be read-only; Latch shows scripts read-only proxies
//! instead (see `sandbox.rs`): empty tables whose metatable reads from the table behind them
//! and refuses writes. Lua 5.1 has no `__pairs`, so the stock functions would see the proxies
//! as the empty tables they are: `pairs(_G)` would list nothing, `rawget(string, 'len')` would
//! be nil. These versions look a proxy up in the `behind` table (proxy -> the table behind it)
//! and work on the table behind it, without ever handing that table to the script:
//! - `next`, `pairs` and `rawget` read through a proxy;
//! - `rawset` and `setmetatable` refuse one, with Redis' "Attempt to modify a readonly table"
//!   (without a position, as Redis raises it from inside the VM);
//! - `getmetatable` of a proxy answers a read-only view of the metatable of the table behind
//!   it (`meta_view`: table behind -> view), or nil when it has none.
//!
//! Everything else is the stock function's code, so argument errors read the same
//! ("bad argument #1 to 'pairs' (table expected, got nil)", named as the caller spelled it).
//! These are C functions rather than Lua wrappers for that reason (a Lua wrapper would put
//! its own line in front of the message) and because they cost no more than the originals.
//!
//! Their frames hold no Rust value with a destructor, so an error raised through them (an
//! argument error, `lua_next`'s "invalid key") jumps over nothing that needed dropping.

use std::ffi::c_int;

use mlua::{ffi, Function, Lua, Table, Value};

use super::raw::c_closure;

/// The replacements, made once per VM: `behind` and `meta_view` start empty and are filled by
/// the sandbox's prelude as it makes its proxies.
pub struct Builtins {
    pub behind: Table,
    pub meta_view: Table,
    pub next: Function,
    pub pairs: Function,
    pub rawget: Function,
    pub rawset: Function,
    pub setmetatable: Function,
    pub getmetatable: Function,
}

/// Makes the replacements. `next` is the stock `next` (what `pairs` returns for an ordinary
/// table, as the stock `pairs` does).
pub fn create(lua: &Lua, next: &Function) -> mlua::Result<Builtins> {
    let behind = lua.create_table()?;
    // Weak keys: a proxy nothing else holds goes, and its entry with it.
    let weak = lua.create_table()?;
    weak.raw_set("__mode", "k")?;
    behind.set_metatable(Some(weak))?;
    let meta_view = lua.create_table()?;
    let b = Value::Table(behind.clone());
    let see_through_next = c_closure(lua, sandbox_next, std::slice::from_ref(&b))?;
    let pairs = c_closure(
        lua,
        sandbox_pairs,
        &[
            b.clone(),
            Value::Function(next.clone()),
            Value::Function(see_through_next.clone()),
        ],
    )?;
    Ok(Builtins {
        rawget: c_closure(lua, sandbox_rawget, std::slice::from_ref(&b))?,
        rawset: c_closure(lua, sandbox_rawset, std::slice::from_ref(&b))?,
        setmetatable: c_closure(lua, sandbox_setmetatable, std::slice::from_ref(&b))?,
        getmetatable: c_closure(
            lua,
            sandbox_getmetatable,
            &[b, Value::Table(meta_view.clone())],
        )?,
        next: see_through_next,
        pairs,
        behind,
        meta_view,
    })
}

const READONLY: &std::ffi::CStr = c"Attempt to modify a readonly table";

/// When the value at `index` is a proxy, pushes the table behind it and returns true;
/// otherwise pushes nothing. The `behind` table is upvalue 1. Uses two stack slots.
#[allow(unsafe_code)]
unsafe fn push_behind(state: *mut ffi::lua_State, index: c_int) -> bool {
    if ffi::lua_type(state, index) != ffi::LUA_TTABLE {
        return false;
    }
    ffi::lua_pushvalue(state, index);
    if ffi::lua_rawget(state, ffi::lua_upvalueindex(1)) == ffi::LUA_TTABLE {
        true
    } else {
        ffi::lua_pop(state, 1);
        false
    }
}

/// `next(t [, k])`, through a proxy.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_next(state: *mut ffi::lua_State) -> c_int {
    // SAFETY (all these functions): called by Lua with the upvalues `create` gave them; Lua
    // guarantees LUA_MINSTACK free slots to a C function, and none uses more than four.
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(state, 2);
    if push_behind(state, 1) {
        ffi::lua_replace(state, 1);
    }
    if ffi::lua_next(state, 1) != 0 {
        2
    } else {
        ffi::lua_pushnil(state);
        1
    }
}

/// `pairs(t)`: the stock `next` for an ordinary table, the see-through one for a proxy (the
/// state stays the proxy: the table behind it never reaches the script).
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_pairs(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    let iterator = if push_behind(state, 1) {
        ffi::lua_pop(state, 1);
        3
    } else {
        2
    };
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(iterator));
    ffi::lua_pushvalue(state, 1);
    ffi::lua_pushnil(state);
    3
}

/// `rawget(t, k)`, through a proxy.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_rawget(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(state, 2);
    ffi::lua_settop(state, 2);
    if push_behind(state, 1) {
        ffi::lua_replace(state, 1);
    }
    ffi::lua_rawget(state, 1);
    1
}

/// Raises Redis' read-only error, without a position (as Redis raises it from the VM).
#[allow(unsafe_code)]
unsafe fn readonly(state: *mut ffi::lua_State) -> c_int {
    ffi::lua_pushstring(state, READONLY.as_ptr());
    ffi::lua_error(state)
}

/// `rawset(t, k, v)`, refusing a proxy.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_rawset(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(state, 2);
    ffi::luaL_checkany(state, 3);
    if push_behind(state, 1) {
        return readonly(state);
    }
    ffi::lua_settop(state, 3);
    ffi::lua_rawset(state, 1);
    1
}

/// `setmetatable(t, mt)`, refusing a proxy.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_setmetatable(state: *mut ffi::lua_State) -> c_int {
    let kind = ffi::lua_type(state, 2);
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    if kind != ffi::LUA_TNIL && kind != ffi::LUA_TTABLE {
        return ffi::luaL_argerror(state, 2, c"nil or table expected".as_ptr());
    }
    if push_behind(state, 1) {
        return readonly(state);
    }
    if ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr()) != ffi::LUA_TNIL {
        return ffi::luaL_error(state, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_settop(state, 2);
    ffi::lua_setmetatable(state, 1);
    1
}

/// `getmetatable(v)`: for a proxy, the view of the metatable behind it (upvalue 2 maps the
/// table behind to it), or nil.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn sandbox_getmetatable(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checkany(state, 1);
    if push_behind(state, 1) {
        ffi::lua_rawget(state, ffi::lua_upvalueindex(2));
        return 1;
    }
    if ffi::lua_getmetatable(state, 1) == 0 {
        ffi::lua_pushnil(state);
        return 1;
    }
    ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr());
    1
}
