//! The hot path of a script, on Lua's C API: a run (KEYS, ARGV, the protected call and its
//! result) and `redis.call`/`redis.pcall` (arguments, the command, its reply as a Lua
//! value).
//!
//! Through mlua's safe API each of these steps cost more than the script itself: a run
//! was a protected call of its own (a C closure made and thrown away per run, for the
//! collector to find), every argument of `redis.call` a registry reference, every reply
//! a decoded `Frame` converted again. `bench/instructions.sh --rows RELEASE` (pipelined
//! EVALSHA of the lock release) counted 16,111 instructions per request through mlua,
//! 11,953 after this file and the engine's collector budget (redis-server: 16,092).
//!
//! Why the raw calls here are sound:
//! - The VM's allocator (mlua's, with no memory limit set) aborts the process when an
//!   allocation fails, so the pushes below (strings, tables) never raise a Lua error: no
//!   `longjmp` can cross a Rust frame that still owns something. `lua_checkstack`
//!   reports a full stack instead of raising; tables are filled with `lua_rawset`,
//!   which runs no metamethod, and never with a nil key.
//! - The only raising calls are `lua_error` and `lua_call` in [`host_call`], made when
//!   every Rust value of the call has been dropped (its work is done in [`serve`], which
//!   returns plain data).
//! - `redis.call` reaches the run through a light userdata pointing into the engine's
//!   `Arc<ActiveRun>`, which the VM keeps alive as its app data.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use latch_protocol::{format_double_g17, Frame};
use mlua::{ffi, Function, Lua, Table, Value};

use super::engine::{ActiveRun, HostCall, HostReply};
use super::sandbox::error_text;

/// How a run ended. Scalars are copied out so the caller writes the reply; a table (or
/// an error, which the handler made a table) comes back as a Lua value.
pub enum Ran {
    Nil,
    Boolean(bool),
    Number(f64),
    String(Vec<u8>),
    Table(Value),
    Failed(Value),
}

/// Where a run finds its keys and arguments: an EVAL script in the globals `KEYS` and
/// `ARGV`, a library function as its two arguments.
pub enum Inputs<'a> {
    Globals {
        globals: &'a Table,
        lists: &'a mut ReusedLists,
    },
    Arguments,
}

/// The `KEYS` and `ARGV` tables of the last EVAL run, filled again by the next one when the
/// script left them as it found them. Redis makes two fresh tables per run; a script may
/// write to them (or give them a metatable), so one it changed is dropped and replaced.
/// `bench/instructions.sh --rows RELEASE`: 11,539 instructions per request with two new
/// tables per run, 10,505 with these (less to allocate, and less for the collector).
#[derive(Default)]
pub struct ReusedLists {
    keys: ReusedList,
    argv: ReusedList,
}

#[derive(Default)]
struct ReusedList {
    table: Option<Table>,
    /// The items the last run put in it (at 1..=len).
    len: usize,
}

/// Runs `function` under `handler` with `keys` and `args` as `inputs` says. Only the first
/// result counts, as in Redis.
///
/// Called from Rust (no Lua code of this VM is running), so mlua's current state is the
/// main one. `KEYS` and `ARGV` stay set after the run until the next one replaces them
/// (no script can see the difference: every EVAL sets both before its script starts).
#[allow(unsafe_code)]
pub fn run(
    lua: &Lua,
    handler: &Function,
    function: &Function,
    inputs: Inputs<'_>,
    keys: &[Bytes],
    args: &[Bytes],
) -> mlua::Result<Ran> {
    lua.exec_raw_lua(|raw| {
        // SAFETY: see the module's notes. The stack is put back to where it was however
        // this ends (`Restore`).
        unsafe {
            let state = raw.state();
            let _restore = Restore(state, ffi::lua_gettop(state));
            if ffi::lua_checkstack(state, 8) == 0 {
                return Err(mlua::Error::StackError);
            }
            let handler_at = ffi::lua_gettop(state) + 1;
            raw.push(handler)?;
            raw.push(function)?;
            let status = match inputs {
                Inputs::Globals { globals, lists } => {
                    raw.push(globals)?;
                    // A table filled again is the global already (scripts cannot assign
                    // globals); only a new one is set, which spares interning the name.
                    if push_reused(raw, state, &mut lists.keys, keys)? {
                        ffi::lua_setfield(state, -2, c"KEYS".as_ptr());
                    } else {
                        ffi::lua_pop(state, 1);
                    }
                    if push_reused(raw, state, &mut lists.argv, args)? {
                        ffi::lua_setfield(state, -2, c"ARGV".as_ptr());
                    } else {
                        ffi::lua_pop(state, 1);
                    }
                    ffi::lua_pop(state, 1);
                    let status = ffi::lua_pcall(state, 0, 1, handler_at);
                    drop_if_changed(raw, state, &mut lists.keys)?;
                    drop_if_changed(raw, state, &mut lists.argv)?;
                    status
                }
                Inputs::Arguments => {
                    push_list(state, keys);
                    push_list(state, args);
                    ffi::lua_pcall(state, 2, 1, handler_at)
                }
            };
            if status != 0 {
                return Ok(Ran::Failed(raw.pop::<Value>()?));
            }
            Ok(match ffi::lua_type(state, -1) {
                ffi::LUA_TSTRING => Ran::String(string_at(state, -1).to_vec()),
                ffi::LUA_TNUMBER => Ran::Number(ffi::lua_tonumber(state, -1)),
                ffi::LUA_TBOOLEAN => Ran::Boolean(ffi::lua_toboolean(state, -1) != 0),
                ffi::LUA_TTABLE => Ran::Table(raw.pop::<Value>()?),
                _ => Ran::Nil,
            })
        }
    })
}

/// Pushes `{items...}` in the list's table when it has one (what the last run put past
/// `items` is cleared), or in a new one it keeps. True when the table is new. Uses two
/// stack slots.
#[allow(unsafe_code)]
unsafe fn push_reused(
    raw: &mlua::state::RawLua,
    state: *mut ffi::lua_State,
    list: &mut ReusedList,
    items: &[Bytes],
) -> mlua::Result<bool> {
    let new = match &list.table {
        Some(table) => {
            raw.push(table)?;
            fill(state, items);
            for index in items.len()..list.len {
                ffi::lua_pushnil(state);
                ffi::lua_rawseti(state, -2, index as ffi::lua_Integer + 1);
            }
            false
        }
        None => {
            push_list(state, items);
            ffi::lua_pushvalue(state, -1);
            list.table = Some(raw.pop::<Table>()?);
            true
        }
    };
    list.len = items.len();
    Ok(new)
}

/// After a run: forgets the list's table unless it holds exactly what the run was given
/// the keys of (1 to `len`) and has no metatable, so the next run gets a fresh one. Values
/// are not compared: the next run writes every one of them again. Uses three stack slots.
#[allow(unsafe_code)]
unsafe fn drop_if_changed(
    raw: &mlua::state::RawLua,
    state: *mut ffi::lua_State,
    list: &mut ReusedList,
) -> mlua::Result<()> {
    let Some(table) = &list.table else {
        return Ok(());
    };
    raw.push(table)?;
    let at = ffi::lua_gettop(state);
    let mut unchanged = ffi::lua_getmetatable(state, at) == 0;
    if !unchanged {
        ffi::lua_pop(state, 1);
    }
    let mut count = 0usize;
    ffi::lua_pushnil(state);
    // Each key `lua_next` is given is one it returned: it raises no error.
    while unchanged && ffi::lua_next(state, at) != 0 {
        let index = ffi::lua_tonumber(state, -2);
        unchanged = ffi::lua_type(state, -2) == ffi::LUA_TNUMBER
            && index.fract() == 0.0
            && index >= 1.0
            && index <= list.len as f64;
        count += 1;
        ffi::lua_pop(state, 1);
    }
    ffi::lua_settop(state, at - 1);
    if !unchanged || count != list.len {
        list.table = None;
    }
    Ok(())
}

/// Sets the stack's top back when dropped.
struct Restore(*mut ffi::lua_State, c_int);

impl Drop for Restore {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the state outlives this guard (it lives in a `run` call).
        unsafe { ffi::lua_settop(self.0, self.1) }
    }
}

/// Pushes `{items...}`. Uses one stack slot.
#[allow(unsafe_code)]
unsafe fn push_list(state: *mut ffi::lua_State, items: &[Bytes]) {
    ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
    fill(state, items);
}

/// Writes `items` as strings into the table on top of the stack, at 1 to n.
#[allow(unsafe_code)]
unsafe fn fill(state: *mut ffi::lua_State, items: &[Bytes]) {
    for (index, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
        ffi::lua_rawseti(state, -2, index as ffi::lua_Integer + 1);
    }
}

/// The bytes of the string at `index` (valid while it stays on the stack).
#[allow(unsafe_code)]
unsafe fn string_at<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let text = ffi::lua_tolstring(state, index, &mut len);
    if text.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(text.cast::<u8>(), len)
}

/// A C closure of `function` with `upvalues` (light userdata, booleans, tables, functions:
/// values whose push allocates nothing). The closure itself is made inside a protected call
/// (mlua makes the maker protected), so even an error of the collector while it is allocated
/// comes back as an `Err`.
#[allow(unsafe_code)]
pub(super) fn c_closure(
    lua: &Lua,
    function: ffi::lua_CFunction,
    upvalues: &[Value],
) -> mlua::Result<Function> {
    /// Makes `closure(upvalues...)` from its arguments: a pointer to the C function, then
    /// the upvalues.
    unsafe extern "C-unwind" fn make(state: *mut ffi::lua_State) -> c_int {
        // SAFETY: argument 1 is the pointer `c_closure` passed, to a function pointer that
        // lives on its stack until the protected call returns.
        let function = *(ffi::lua_touserdata(state, 1) as *const ffi::lua_CFunction);
        let count = ffi::lua_gettop(state) - 1;
        ffi::lua_pushcclosure(state, function, count);
        1
    }
    // SAFETY: `make` is a C function of the signature Lua expects.
    let maker = unsafe { lua.create_c_function(make)? };
    let count = c_int::try_from(upvalues.len()).map_err(|_| mlua::Error::StackError)?;
    lua.exec_raw_lua(|raw| {
        // SAFETY: the stack is checked first, and put back by `Restore`; the pushes are of
        // existing values (nothing is allocated); `lua_pcall` catches any error of `make`.
        unsafe {
            let state = raw.state();
            let _restore = Restore(state, ffi::lua_gettop(state));
            if ffi::lua_checkstack(state, count + 3) == 0 {
                return Err(mlua::Error::StackError);
            }
            raw.push(&maker)?;
            ffi::lua_pushlightuserdata(
                state,
                (&function as *const ffi::lua_CFunction).cast_mut().cast(),
            );
            for value in upvalues {
                raw.push(value)?;
            }
            if ffi::lua_pcall(state, count + 1, 1, 0) != 0 {
                let message = raw.pop::<Value>()?;
                return Err(mlua::Error::RuntimeError(format!(
                    "could not make a C closure: {message:?}"
                )));
            }
            raw.pop::<Function>()
        }
    })
}

/// Makes `redis.call` (`pcall` false) or `redis.pcall` for the runs of `active`. Outside a
/// run they call `idle` (which raises Redis' "only inside a script" error).
#[allow(unsafe_code)]
pub fn host_function(
    lua: &Lua,
    active: &Arc<ActiveRun>,
    pcall: bool,
    idle: &Function,
) -> mlua::Result<Function> {
    // The pointer below must stay valid as long as the VM can call the function.
    if lua.app_data_ref::<Arc<ActiveRun>>().is_none() {
        lua.set_app_data(Arc::clone(active));
    }
    let pointer = Arc::as_ptr(active).cast_mut().cast::<c_void>();
    lua.exec_raw_lua(|raw| {
        // SAFETY: three pushes after a stack check; the closure is taken off the stack
        // by `pop`, which keeps a reference to it.
        unsafe {
            let state = raw.state();
            if ffi::lua_checkstack(state, 3) == 0 {
                return Err(mlua::Error::StackError);
            }
            ffi::lua_pushlightuserdata(state, pointer);
            ffi::lua_pushboolean(state, c_int::from(pcall));
            raw.push(idle)?;
            ffi::lua_pushcclosure(state, host_call, 3);
            raw.pop::<Function>()
        }
    })
}

/// What [`host_call`] does once [`serve`] is done.
enum Step {
    /// The reply is on the stack.
    Return,
    /// Raise the error table on the stack (`redis.call` and an error reply).
    Raise,
    /// No run in progress: call the idle function with the arguments.
    Idle,
}

#[allow(unsafe_code)]
unsafe extern "C-unwind" fn host_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the upvalues are those `host_function` set. No Rust value is alive when
    // `lua_call` or `lua_error` may jump out of this frame.
    let active = ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const ActiveRun;
    let pcall = ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) != 0;
    match serve(state, &*active, pcall) {
        Step::Return => 1,
        Step::Raise => ffi::lua_error(state),
        Step::Idle => {
            let count = ffi::lua_gettop(state);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
            ffi::lua_insert(state, 1);
            ffi::lua_call(state, count, ffi::LUA_MULTRET);
            ffi::lua_gettop(state)
        }
    }
}

/// Runs the command a script asked for and leaves its reply (or error table) on the
/// stack.
#[allow(unsafe_code)]
unsafe fn serve(state: *mut ffi::lua_State, active: &ActiveRun, pcall: bool) -> Step {
    let kind = if pcall {
        HostCall::PCall
    } else {
        HostCall::Call
    };
    let resp = active.resp.load(Ordering::Relaxed);
    let outcome = match arguments(state) {
        Ok(args) => match active.dispatch(kind, &args) {
            Some(outcome) => outcome,
            None => return Step::Idle,
        },
        Err(message) => HostReply::Refused {
            message: message.to_vec(),
            counted: false,
        },
    };
    // The arguments were copied: their slots go (a call may take thousands, up to the
    // stack's limit, and the reply needs room).
    ffi::lua_settop(state, 0);
    let is_error = match outcome {
        HostReply::Reply(mut reply) => match push_reply(state, reply.buffer(), resp) {
            Some(is_error) => is_error,
            None => {
                push_error_table(state, b"ERR the command gave no reply", true);
                true
            }
        },
        // An error of the call's own (its arguments) is counted when the script's reply
        // carries it; the gatekeeper's refusals were counted already.
        HostReply::Refused { message, counted } => {
            push_error_table(state, &error_text(&message), counted);
            true
        }
        HostReply::Allowed(_) => {
            ffi::lua_pushnil(state);
            false
        }
    };
    if is_error && !pcall {
        Step::Raise
    } else {
        Step::Return
    }
}

/// Redis' complaint about a `redis.call` (or `redis.acl_check_cmd`) without arguments.
pub const NO_ARGUMENTS: &[u8] = b"Please specify at least one argument for this redis lib call";
/// ... and about an argument that is neither a string nor a number.
pub const BAD_ARGUMENT: &[u8] = b"Lua redis lib command arguments must be strings or integers";

/// A number argument as Redis passes it to a command (`%.17g`, not Lua's `%.14g`, which
/// loses digits).
pub fn number_arg(n: f64) -> Bytes {
    let mut text = Vec::with_capacity(24);
    format_double_g17(n, &mut text);
    Bytes::from(text)
}

/// The arguments of a `redis.call`, as the command gets them: strings as they are,
/// numbers as [`number_arg`] writes them.
#[allow(unsafe_code)]
unsafe fn arguments(state: *mut ffi::lua_State) -> Result<Vec<Bytes>, &'static [u8]> {
    let count = ffi::lua_gettop(state);
    if count == 0 {
        return Err(NO_ARGUMENTS);
    }
    let mut args = Vec::with_capacity(count as usize);
    for index in 1..=count {
        match ffi::lua_type(state, index) {
            ffi::LUA_TSTRING => args.push(Bytes::copy_from_slice(string_at(state, index))),
            ffi::LUA_TNUMBER => args.push(number_arg(ffi::lua_tonumber(state, index))),
            _ => return Err(BAD_ARGUMENT),
        }
    }
    Ok(args)
}

/// Pushes a command's reply (RESP in `bytes`) as the Lua value `redis.call` returns
/// (see `convert`'s table). `Some(true)` when it is an error; `None` when `bytes` holds
/// no complete reply.
#[allow(unsafe_code)]
unsafe fn push_reply(state: *mut ffi::lua_State, bytes: &[u8], resp: u8) -> Option<bool> {
    // The replies most scripts get, read in place.
    if let Some(line_end) = bytes.iter().position(|&b| b == b'\r').filter(|&at| at > 0) {
        let line = &bytes[1..line_end];
        match bytes[0] {
            b':' => {
                if let Some(n) = std::str::from_utf8(line)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok())
                {
                    ffi::lua_pushnumber(state, n as f64);
                    return Some(false);
                }
            }
            b'$' => {
                if line == b"-1" {
                    push_null(state, resp);
                    return Some(false);
                }
                let len = std::str::from_utf8(line)
                    .ok()
                    .and_then(|text| text.parse::<usize>().ok());
                let start = line_end + 2;
                if let Some(body) = len.and_then(|len| bytes.get(start..start + len)) {
                    ffi::lua_pushlstring(state, body.as_ptr().cast(), body.len());
                    return Some(false);
                }
            }
            _ => {}
        }
    }
    let (frame, _) = latch_protocol::frame::decode(bytes).ok()??;
    push_frame(state, &frame, resp, 0);
    Some(matches!(frame, Frame::Error(_) | Frame::BulkError(_)))
}

/// Deepest reply nesting pushed (ours stay far below it).
const MAX_DEPTH: usize = 64;

/// Pushes `frame` as a Lua value (one slot); past [`MAX_DEPTH`], or when the stack cannot
/// grow, nil.
#[allow(unsafe_code)]
unsafe fn push_frame(state: *mut ffi::lua_State, frame: &Frame, resp: u8, depth: usize) {
    if depth > MAX_DEPTH || ffi::lua_checkstack(state, 4) == 0 {
        ffi::lua_pushnil(state);
        return;
    }
    match frame {
        Frame::Simple(text) => {
            ffi::lua_createtable(state, 0, 1);
            push_bytes(state, text);
            set_field(state, c"ok");
        }
        Frame::Error(text) | Frame::BulkError(text) => {
            let mut dashed = Vec::with_capacity(text.len() + 1);
            dashed.push(b'-');
            dashed.extend_from_slice(text);
            push_error_table(state, &error_text(&dashed), true);
        }
        Frame::Integer(n) => ffi::lua_pushnumber(state, *n as f64),
        Frame::Bulk(bytes) => push_bytes(state, bytes),
        Frame::Null => push_null(state, resp),
        Frame::Array(items) | Frame::Push(items) => {
            ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
            for (index, item) in items.iter().enumerate() {
                push_frame(state, item, resp, depth + 1);
                ffi::lua_rawseti(state, -2, index as ffi::lua_Integer + 1);
            }
        }
        Frame::Map(pairs) => {
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, c_int::try_from(pairs.len()).unwrap_or(0));
            for (key, value) in pairs {
                push_frame(state, key, resp, depth + 1);
                push_frame(state, value, resp, depth + 1);
                raw_set_pair(state);
            }
            set_field(state, c"map");
        }
        Frame::Set(items) => {
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, c_int::try_from(items.len()).unwrap_or(0));
            for item in items {
                push_frame(state, item, resp, depth + 1);
                ffi::lua_pushboolean(state, 1);
                raw_set_pair(state);
            }
            set_field(state, c"set");
        }
        Frame::Double(d) => {
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_pushnumber(state, *d);
            set_field(state, c"double");
        }
        Frame::Boolean(b) => ffi::lua_pushboolean(state, c_int::from(*b)),
        Frame::BigNumber(digits) => {
            ffi::lua_createtable(state, 0, 1);
            push_bytes(state, digits);
            set_field(state, c"big_number");
        }
        Frame::Verbatim { format, text } => {
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, text);
            set_field(state, c"string");
            push_bytes(state, format);
            set_field(state, c"format");
            set_field(state, c"verbatim_string");
        }
    }
}

/// Null: false in RESP2, nil in RESP3 (as Redis converts it).
#[allow(unsafe_code)]
unsafe fn push_null(state: *mut ffi::lua_State, resp: u8) {
    if resp == 2 {
        ffi::lua_pushboolean(state, 0);
    } else {
        ffi::lua_pushnil(state);
    }
}

#[allow(unsafe_code)]
unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
}

/// `table[name] = value`, the value on top and the table below it; pops the value.
#[allow(unsafe_code)]
unsafe fn set_field(state: *mut ffi::lua_State, name: &std::ffi::CStr) {
    ffi::lua_pushstring(state, name.as_ptr());
    ffi::lua_insert(state, -2);
    ffi::lua_rawset(state, -3);
}

/// `table[key] = value` for the key and value on top (the table below them), skipping a
/// nil or NaN key (a Lua error); pops both.
#[allow(unsafe_code)]
unsafe fn raw_set_pair(state: *mut ffi::lua_State) {
    let key_type = ffi::lua_type(state, -2);
    let nan = key_type == ffi::LUA_TNUMBER && ffi::lua_tonumber(state, -2).is_nan();
    if key_type == ffi::LUA_TNIL || nan {
        ffi::lua_pop(state, 2);
    } else {
        ffi::lua_rawset(state, -3);
    }
}

/// Pushes `{err=text}`, with `ignore_error_stats_update=true` when `counted`.
#[allow(unsafe_code)]
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8], counted: bool) {
    ffi::lua_createtable(state, 0, 2);
    push_bytes(state, text);
    set_field(state, c"err");
    if counted {
        ffi::lua_pushboolean(state, 1);
        set_field(state, c"ignore_error_stats_update");
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use latch_protocol::{Reply, Resp};

    use super::*;
    use crate::scripting::engine::Dispatch;

    /// A VM with `rcall`/`rpcall` (redis.call and redis.pcall) from [`host_function`] as globals, and a handler that
    /// returns the error as it is.
    fn vm() -> (Lua, Arc<ActiveRun>, Function) {
        let lua = Lua::new();
        let active = Arc::new(ActiveRun::default());
        let idle = lua
            .load("return function(...) return 'idle', select('#', ...) end")
            .eval::<Function>()
            .unwrap();
        for (pcall, name) in [(false, "rcall"), (true, "rpcall")] {
            let function = host_function(&lua, &active, pcall, &idle).unwrap();
            lua.globals().set(name, function).unwrap();
        }
        let handler = lua.load("return function(e) return e end").eval().unwrap();
        (lua, active, handler)
    }

    /// The reply each made-up command gets.
    fn reply_to(args: &[Bytes]) -> HostReply {
        let resp = if args.len() > 1 && &args[1][..] == b"3" {
            Resp::V3
        } else {
            Resp::V2
        };
        let mut reply = Reply::new(resp);
        match &args[0][..] {
            b"int" => reply.integer(-42),
            b"bulk" => reply.bulk(b"a\0b"),
            b"null" => reply.null(),
            b"status" => reply.simple(b"OK"),
            b"error" => reply.error(b"WRONGTYPE no"),
            b"nested" => {
                reply.array(3);
                reply.integer(1);
                reply.array(1);
                reply.bulk(b"x");
                reply.error(b"ERR inner");
            }
            b"map" => {
                reply.map(1);
                reply.bulk(b"k");
                reply.double(1.5);
            }
            b"set" => {
                reply.set(1);
                reply.bulk(b"m");
            }
            b"bool" => reply.boolean(true),
            b"big" => reply.big_number(b"123456789012345678901234567890"),
            b"verbatim" => reply.verbatim(b"txt", b"hello"),
            b"echo" => {
                reply.array(args.len() - 1);
                for arg in &args[1..] {
                    reply.bulk(arg);
                }
            }
            b"refused" => {
                return HostReply::Refused {
                    message: b"-NOPERM no".to_vec(),
                    counted: true,
                }
            }
            b"panic" => panic!("a command panicked"),
            _ => reply.null(),
        }
        HostReply::Reply(reply)
    }

    /// Runs `script` as a run of `active` whose commands get [`reply_to`]; the first
    /// result, as a string Lua made of it.
    fn run_script(lua: &Lua, active: &ActiveRun, handler: &Function, script: &str) -> Ran {
        let function = lua.load(script).into_function().unwrap();
        // A script that passes '3' to its commands converts their replies as RESP3.
        let resp = if script.contains("'3'") { 3 } else { 2 };
        active.resp.store(resp, Ordering::Relaxed);
        let mut commands = |_kind: HostCall, args: &[Bytes]| reply_to(args);
        let mut dispatch: &mut Dispatch<'_> = &mut commands;
        let _entered = active.enter(&mut dispatch);
        let globals = lua.globals();
        let inputs = Inputs::Globals {
            globals: &globals,
            lists: &mut ReusedLists::default(),
        };
        run(lua, handler, &function, inputs, &[], &[]).unwrap()
    }

    fn text(ran: Ran) -> String {
        match ran {
            Ran::String(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Ran::Failed(Value::String(s)) => format!("failed: {}", s.to_string_lossy()),
            Ran::Failed(Value::Table(t)) => format!("failed: {}", t.get::<String>("err").unwrap()),
            Ran::Number(n) => format!("number {n}"),
            Ran::Boolean(b) => format!("boolean {b}"),
            Ran::Nil => "nil".into(),
            Ran::Table(_) => "table".into(),
            Ran::Failed(_) => "failed".into(),
        }
    }

    #[test]
    fn replies_become_the_lua_values_redis_gives() {
        let (lua, active, handler) = vm();
        let cases = [
            ("return rcall('int')", "number -42"),
            ("return rcall('bulk')", "a\0b"),
            ("return type(rcall('null'))", "boolean"),
            ("return type(rcall('null', '3'))", "nil"),
            ("return rcall('status').ok", "OK"),
            ("return rpcall('error').err", "WRONGTYPE no"),
            (
                "return tostring(rpcall('error').ignore_error_stats_update)",
                "true",
            ),
            ("return rcall('error')", "failed: WRONGTYPE no"),
            (
                "local r = rcall('nested') return r[1] .. r[2][1] .. r[3].err",
                "1xERR inner",
            ),
            ("return rcall('map', '3').map.k.double", "number 1.5"),
            ("return tostring(rcall('set', '3').set.m)", "true"),
            ("return tostring(rcall('bool', '3'))", "true"),
            (
                "return rcall('big', '3').big_number",
                "123456789012345678901234567890",
            ),
            (
                "local v = rcall('verbatim', '3').verbatim_string return v.format .. v.string",
                "txthello",
            ),
            ("return rpcall('refused').err", "NOPERM no"),
            (
                "return tostring(rpcall('refused').ignore_error_stats_update)",
                "true",
            ),
            (
                "return table.concat(rcall('echo', 'x', 7, 0.1, -2.5e300), ' ')",
                "x 7 0.10000000000000001 -2.5000000000000001e+300",
            ),
            (
                "return rpcall({}).err",
                "ERR Lua redis lib command arguments must be strings or integers",
            ),
            (
                "return rpcall().err",
                "ERR Please specify at least one argument for this redis lib call",
            ),
            ("return type(rpcall().ignore_error_stats_update)", "nil"),
        ];
        for (script, expected) in cases {
            let got = text(run_script(&lua, &active, &handler, script));
            assert_eq!(got, expected, "{script}");
        }
        // Thousands of arguments: they leave the stack before the reply is pushed.
        let many =
            "local a = {} for i = 1, 7990 do a[i] = 'w' end return #rcall('echo', unpack(a))";
        assert_eq!(
            text(run_script(&lua, &active, &handler, many)),
            "number 7990"
        );
    }

    #[test]
    fn outside_a_run_the_idle_function_answers() {
        let (lua, _active, _handler) = vm();
        let (what, count): (String, i64) = lua.load("return rcall('get', 'k')").eval().unwrap();
        assert_eq!((what.as_str(), count), ("idle", 2));
    }

    #[test]
    fn a_command_that_panics_unwinds_after_lua_is_done() {
        let (lua, active, handler) = vm();
        let script = "local ok, e = pcall(rcall, 'panic') return tostring(ok)";
        let ran = run_script(&lua, &active, &handler, script);
        // The script saw an error and went on; the panic waits for the run's end.
        assert_eq!(text(ran), "false");
        let resumed = catch_unwind(AssertUnwindSafe(|| active.resume_panic()));
        assert!(resumed.is_err());
        active.resume_panic();
        // The VM is as good as before.
        assert_eq!(
            text(run_script(&lua, &active, &handler, "return rcall('int')")),
            "number -42"
        );
    }
}
