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
//! - In Lua 5.1 any call that allocates (a string, a table, a closure, a bigger stack) may
//!   run the collector, which runs `__gc` finalizers, and a finalizer's error, or a failed
//!   allocation, is raised from there as a `longjmp`. So every push that allocates happens
//!   inside a protected call, in a C function whose frames own nothing with a destructor:
//!   [`start`] fills KEYS and ARGV (or the arguments of a function) and calls the script,
//!   all under the run's `lua_pcall`; [`push_value`] pushes a command's reply under a
//!   `lua_pcall` of its own, made by [`serve`], which owns the reply and the decoded
//!   `Frame` and drops them normally whatever the push did. An error there becomes an
//!   ordinary script error (raised to the script by [`host_call`]); no Rust destructor is
//!   skipped. Both C functions are made once per VM ([`c_closure`], itself protected) and
//!   take their data through a light userdata pointing to a Rust value that outlives the
//!   protected call.
//! - What runs outside a protected call allocates no Lua object: pushes of existing
//!   values (mlua's references, light userdata, booleans, numbers, nil), `lua_next`
//!   over keys it returned, `lua_getmetatable`, `lua_settop`. `lua_checkstack` reports a
//!   full stack instead of raising; growing the stack runs no collector, and its
//!   allocation cannot fail with a Lua error (mlua's allocator, with no memory limit set,
//!   aborts the process instead). Tables are filled with `lua_rawset`/`lua_rawseti`, which
//!   run no metamethod, and never with a nil key.
//! - The only other raising calls are `lua_error` and `lua_call` in [`host_call`], made when
//!   every Rust value of the call has been dropped (its work is done in [`serve`], which
//!   returns plain data), and `lua_call` of the script in [`start`], whose frame holds only
//!   borrowed pointers.
//! - `redis.call` reaches the run through a light userdata pointing into the engine's
//!   `Arc<ActiveRun>`, which the VM keeps alive as its app data.

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use latch_protocol::{format_double_g17, Frame};
use mlua::{ffi, Function, LightUserData, Lua, Table, Value};

use super::engine::{ActiveRun, HostCall, HostReply};
use super::sandbox::{error_parts, reply_error_parts};

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
/// `ARGV` (set in this table), a library function as its two arguments.
pub enum Inputs<'a> {
    Globals(&'a Table),
    Arguments,
}

/// What a VM keeps for its runs: [`start`], made once, and the KEYS and ARGV tables.
pub struct Runner {
    start: Function,
    lists: ReusedLists,
}

impl Runner {
    pub fn new(lua: &Lua) -> mlua::Result<Runner> {
        Ok(Runner {
            start: c_closure(lua, start, &[])?,
            lists: ReusedLists::default(),
        })
    }
}

/// The `KEYS` and `ARGV` tables of the last EVAL run, filled again by the next one when the
/// script left them as it found them. Redis makes two fresh tables per run; a script may
/// write to them (or give them a metatable), so one it changed is dropped and replaced.
/// `bench/instructions.sh --rows RELEASE`: 11,539 instructions per request with two new
/// tables per run, 10,505 with these (less to allocate, and less for the collector).
#[derive(Default)]
struct ReusedLists {
    keys: ReusedList,
    argv: ReusedList,
}

#[derive(Default)]
struct ReusedList {
    table: Option<Table>,
    /// The items the last run put in it (at 1..=len).
    len: usize,
}

/// What [`start`] is given, through a light userdata: the run's inputs, and where it says
/// that it has set them (and is about to call the script).
struct Start<'a> {
    eval: bool,
    keys: &'a [Bytes],
    args: &'a [Bytes],
    /// The items the reused KEYS and ARGV tables hold now (cleared past the new items).
    keys_len: usize,
    args_len: usize,
    inputs_set: Cell<bool>,
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
    runner: &mut Runner,
    handler: &Function,
    function: &Function,
    inputs: Inputs<'_>,
    keys: &[Bytes],
    args: &[Bytes],
) -> mlua::Result<Ran> {
    let lists = &mut runner.lists;
    let job = Start {
        eval: matches!(inputs, Inputs::Globals(_)),
        keys,
        args,
        keys_len: lists.keys.len,
        args_len: lists.argv.len,
        inputs_set: Cell::new(false),
    };
    lua.exec_raw_lua(|raw| {
        // SAFETY: see the module's notes: nothing below allocates in Lua outside the
        // protected call of `start`. The stack is put back to where it was however this
        // ends (`Restore`).
        unsafe {
            let state = raw.state();
            let _restore = Restore(state, ffi::lua_gettop(state));
            if ffi::lua_checkstack(state, 8) == 0 {
                return Err(mlua::Error::StackError);
            }
            let handler_at = ffi::lua_gettop(state) + 1;
            raw.push(handler)?;
            raw.push(&runner.start)?;
            ffi::lua_pushlightuserdata(state, (&job as *const Start<'_>).cast_mut().cast());
            match inputs {
                Inputs::Globals(globals) => {
                    raw.push(globals)?;
                    push_or_nil(raw, state, &lists.keys.table)?;
                    push_or_nil(raw, state, &lists.argv.table)?;
                }
                Inputs::Arguments => {
                    for _ in 0..3 {
                        ffi::lua_pushnil(state);
                    }
                }
            }
            raw.push(function)?;
            let status = ffi::lua_pcall(state, 5, ffi::LUA_MULTRET, handler_at);
            if status == 0 && ffi::lua_gettop(state) == handler_at + 3 {
                // `start` made new KEYS and ARGV tables and returned them after the result.
                keep_new(raw, state, &mut lists.argv)?;
                keep_new(raw, state, &mut lists.keys)?;
            }
            if job.eval {
                if status == 0 || job.inputs_set.get() {
                    lists.keys.len = keys.len();
                    lists.argv.len = args.len();
                } else {
                    // Stopped while filling them: their content is unknown.
                    lists.keys.table = None;
                    lists.argv.table = None;
                }
                drop_if_changed(raw, state, &mut lists.keys)?;
                drop_if_changed(raw, state, &mut lists.argv)?;
            }
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

/// Pushes the list's table, or nil when it has none. Uses one stack slot.
#[allow(unsafe_code)]
unsafe fn push_or_nil(
    raw: &mlua::state::RawLua,
    state: *mut ffi::lua_State,
    table: &Option<Table>,
) -> mlua::Result<()> {
    match table {
        Some(table) => raw.push(table),
        None => {
            ffi::lua_pushnil(state);
            Ok(())
        }
    }
}

/// Pops the table `start` returned for a list: kept when the list had none (the run made
/// it), dropped otherwise (it is the list's own).
#[allow(unsafe_code)]
unsafe fn keep_new(
    raw: &mlua::state::RawLua,
    state: *mut ffi::lua_State,
    list: &mut ReusedList,
) -> mlua::Result<()> {
    if list.table.is_none() && ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
        list.table = Some(raw.pop::<Table>()?);
    } else {
        ffi::lua_pop(state, 1);
    }
    Ok(())
}

/// The run, under the run's protected call: `(start, globals, keys, argv, function)` with
/// `start`'s [`Start`] as a light userdata. For EVAL (`globals` a table) fills `keys` and
/// `argv` (each the list's table, or nil for a new one, which is also set as a global) and
/// calls the script; for a function, calls it with two new tables. Returns the script's
/// first result, followed by the KEYS and ARGV tables when either is new.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn start(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `run` passes a pointer to a `Start` that outlives its protected call of this
    // function, and the four values above; Lua guarantees LUA_MINSTACK (20) free slots and
    // this uses at most four more. The frame owns nothing: a `longjmp` may skip it.
    let job = &*(ffi::lua_touserdata(state, 1) as *const Start<'_>);
    if !job.eval {
        job.inputs_set.set(true);
        push_list(state, job.keys);
        push_list(state, job.args);
        ffi::lua_call(state, 2, 1);
        return 1;
    }
    let new =
        ffi::lua_type(state, 3) != ffi::LUA_TTABLE || ffi::lua_type(state, 4) != ffi::LUA_TTABLE;
    set_list(state, 3, job.keys, job.keys_len, c"KEYS");
    set_list(state, 4, job.args, job.args_len, c"ARGV");
    job.inputs_set.set(true);
    ffi::lua_call(state, 0, 1);
    if !new {
        return 1;
    }
    ffi::lua_pushvalue(state, 3);
    ffi::lua_pushvalue(state, 4);
    3
}

/// Puts `items` in the table at `slot` (clearing what it held past them, up to `held`), or,
/// when that slot is nil, in a new table that replaces it and becomes the global `name` of
/// the table at slot 2. Uses two stack slots.
#[allow(unsafe_code)]
unsafe fn set_list(
    state: *mut ffi::lua_State,
    slot: c_int,
    items: &[Bytes],
    held: usize,
    name: &std::ffi::CStr,
) {
    if ffi::lua_type(state, slot) == ffi::LUA_TTABLE {
        for (index, item) in items.iter().enumerate() {
            push_bytes(state, item);
            ffi::lua_rawseti(state, slot, index as ffi::lua_Integer + 1);
        }
        for index in items.len()..held {
            ffi::lua_pushnil(state);
            ffi::lua_rawseti(state, slot, index as ffi::lua_Integer + 1);
        }
    } else {
        push_list(state, items);
        ffi::lua_replace(state, slot);
        // A table filled again is the global already (scripts cannot assign globals);
        // only a new one is set.
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_pushvalue(state, slot);
        ffi::lua_rawset(state, 2);
    }
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

/// Pushes `{items...}`. Uses two stack slots.
#[allow(unsafe_code)]
unsafe fn push_list(state: *mut ffi::lua_State, items: &[Bytes]) {
    ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
    for (index, item) in items.iter().enumerate() {
        push_bytes(state, item);
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

/// Makes `redis.call` and `redis.pcall` for the runs of `active`. Outside a run they call
/// `idle` (which raises Redis' "only inside a script" error).
pub fn host_functions(
    lua: &Lua,
    active: &Arc<ActiveRun>,
    idle: &Function,
) -> mlua::Result<(Function, Function)> {
    // The pointer below must stay valid as long as the VM can call the functions.
    if lua.app_data_ref::<Arc<ActiveRun>>().is_none() {
        lua.set_app_data(Arc::clone(active));
    }
    let pointer = Value::LightUserData(LightUserData(Arc::as_ptr(active).cast_mut().cast()));
    let pusher = Value::Function(c_closure(lua, push_value, &[])?);
    let make = |pcall: bool| {
        let upvalues = [
            pointer.clone(),
            Value::Boolean(pcall),
            Value::Function(idle.clone()),
            pusher.clone(),
        ];
        c_closure(lua, host_call, &upvalues)
    };
    Ok((make(false)?, make(true)?))
}

/// What [`host_call`] does once [`serve`] is done.
enum Step {
    /// The reply is on the stack.
    Return,
    /// Raise the error on the stack (`redis.call` and an error reply, or an error raised
    /// while the reply was pushed).
    Raise,
    /// No run in progress: call the idle function with the arguments.
    Idle,
}

#[allow(unsafe_code)]
unsafe extern "C-unwind" fn host_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the upvalues are those `host_functions` set. No Rust value is alive when
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

/// Runs the command a script asked for and leaves its reply (or error table, or the error
/// raised while pushing it) on the stack.
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
    let pushed = match outcome {
        HostReply::Reply(mut reply) => push_reply(state, reply.buffer(), resp),
        // An error of the call's own (its arguments) is counted when the script's reply
        // carries it; the gatekeeper's refusals were counted already.
        HostReply::Refused { message, counted } => {
            let (code, message) = error_parts(&message);
            let push = Push::Error {
                code,
                message,
                counted,
            };
            protected_push(state, &push).map(|()| true)
        }
        HostReply::Allowed(_) => {
            ffi::lua_pushnil(state);
            Ok(false)
        }
    };
    match pushed {
        Err(()) => Step::Raise,
        Ok(true) if !pcall => Step::Raise,
        Ok(_) => Step::Return,
    }
}

/// A value [`push_value`] pushes.
enum Push<'a> {
    Bulk(&'a [u8]),
    Frame(&'a Frame, u8),
    Error {
        code: &'a [u8],
        message: &'a [u8],
        counted: bool,
    },
}

/// Pushes `push` under a protected call of [`push_value`] (upvalue 4 of the running
/// `host_call`): `Err` when that raised, whose error is then on the stack instead.
#[allow(unsafe_code)]
unsafe fn protected_push(state: *mut ffi::lua_State, push: &Push<'_>) -> Result<(), ()> {
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(4));
    ffi::lua_pushlightuserdata(state, (push as *const Push<'_>).cast_mut().cast());
    if ffi::lua_pcall(state, 1, 1, 0) == 0 {
        Ok(())
    } else {
        Err(())
    }
}

/// Pushes the [`Push`] its light userdata points to. Its frames (and those of the
/// functions it calls) own nothing: the data is borrowed from [`serve`]'s.
#[allow(unsafe_code)]
unsafe extern "C-unwind" fn push_value(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `protected_push` passes a pointer to a `Push` that outlives the call.
    let push = &*(ffi::lua_touserdata(state, 1) as *const Push<'_>);
    match *push {
        Push::Bulk(bytes) => push_bytes(state, bytes),
        Push::Frame(frame, resp) => push_frame(state, frame, resp, 0),
        Push::Error {
            code,
            message,
            counted,
        } => push_error_table(state, code, message, counted),
    }
    1
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
/// (see `convert`'s table): `Ok(true)` when it is an error, `Err` when pushing it raised
/// (the error is on the stack then).
#[allow(unsafe_code)]
unsafe fn push_reply(state: *mut ffi::lua_State, bytes: &[u8], resp: u8) -> Result<bool, ()> {
    // The replies most scripts get, read in place. Numbers, booleans and nil allocate
    // nothing and are pushed directly.
    if let Some(line_end) = bytes.iter().position(|&b| b == b'\r').filter(|&at| at > 0) {
        let line = &bytes[1..line_end];
        match bytes[0] {
            b':' => {
                if let Some(n) = std::str::from_utf8(line)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok())
                {
                    ffi::lua_pushnumber(state, n as f64);
                    return Ok(false);
                }
            }
            b'$' => {
                if line == b"-1" {
                    push_null(state, resp);
                    return Ok(false);
                }
                let len = std::str::from_utf8(line)
                    .ok()
                    .and_then(|text| text.parse::<usize>().ok());
                let start = line_end + 2;
                if let Some(body) = len.and_then(|len| bytes.get(start..start + len)) {
                    return protected_push(state, &Push::Bulk(body)).map(|()| false);
                }
            }
            _ => {}
        }
    }
    match latch_protocol::frame::decode(bytes) {
        Ok(Some((frame, _))) => {
            let is_error = matches!(frame, Frame::Error(_) | Frame::BulkError(_));
            protected_push(state, &Push::Frame(&frame, resp)).map(|()| is_error)
        }
        _ => {
            let push = Push::Error {
                code: b"ERR",
                message: b"the command gave no reply",
                counted: true,
            };
            protected_push(state, &push).map(|()| true)
        }
    }
}

/// Deepest reply nesting pushed (ours stay far below it).
const MAX_DEPTH: usize = 64;

/// Pushes `frame` as a Lua value (one slot); past [`MAX_DEPTH`], or when the stack cannot
/// grow, nil. Allocates nothing in Rust (it runs under [`push_value`]).
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
            let (code, message) = reply_error_parts(text);
            push_error_table(state, code, message, true);
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

/// Pushes `{err="<code> <message>"}`, with `ignore_error_stats_update=true` when
/// `counted`. Uses four stack slots.
#[allow(unsafe_code)]
unsafe fn push_error_table(state: *mut ffi::lua_State, code: &[u8], message: &[u8], counted: bool) {
    ffi::lua_createtable(state, 0, 2);
    push_bytes(state, code);
    push_bytes(state, b" ");
    push_bytes(state, message);
    ffi::lua_concat(state, 3);
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
        let (call, pcall) = host_functions(&lua, &active, &idle).unwrap();
        lua.globals().set("rcall", call).unwrap();
        lua.globals().set("rpcall", pcall).unwrap();
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
            // A MiB, as a bulk string and as an array (decoded into a `Frame`).
            b"large" => reply.bulk(&vec![b'x'; 1 << 20]),
            b"large_array" => {
                reply.array(1024);
                for _ in 0..1024 {
                    reply.bulk(&[b'y'; 1024]);
                }
            }
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
        let mut runner = Runner::new(lua).unwrap();
        let inputs = Inputs::Globals(&globals);
        run(lua, &mut runner, handler, &function, inputs, &[], &[]).unwrap()
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

    /// Bytes this thread holds from the allocator (allocated minus freed), counted by the
    /// test binary's allocator: what a skipped destructor leaks shows here.
    mod counted {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local! {
            static LIVE: Cell<isize> = const { Cell::new(0) };
        }

        fn add(bytes: isize) {
            let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
        }

        pub fn live() -> isize {
            LIVE.with(Cell::get)
        }

        struct Counting;

        // SAFETY: every call is passed on to `System` as it came.
        #[allow(unsafe_code)]
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                let pointer = System.alloc(layout);
                if !pointer.is_null() {
                    add(layout.size() as isize);
                }
                pointer
            }

            unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
                let pointer = System.alloc_zeroed(layout);
                if !pointer.is_null() {
                    add(layout.size() as isize);
                }
                pointer
            }

            unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
                System.dealloc(pointer, layout);
                add(-(layout.size() as isize));
            }

            unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, size: usize) -> *mut u8 {
                let moved = System.realloc(pointer, layout, size);
                if !moved.is_null() {
                    add(size as isize - layout.size() as isize);
                }
                moved
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;
    }

    /// Makes every allocation run a whole collection cycle and leaves a userdata whose
    /// `__gc` raises for the next one to find (made through the test VM's own `newproxy`,
    /// which the sandbox does not have). As Lua code, to run in the VM's main chunk or a
    /// script.
    const ARM_FAILING_FINALIZER: &str = "
        collectgarbage('setpause', 0)
        collectgarbage('setstepmul', 0)
        collectgarbage('collect')
        local function arm()
          local p = newproxy(true)
          getmetatable(p).__gc = function() error('finalizer raised') end
        end
        arm()";
    const DISARM: &str = "collectgarbage('setpause', 200) collectgarbage('setstepmul', 200)";

    #[test]
    #[allow(unsafe_code)]
    fn a_finalizer_that_raises_while_keys_are_pushed_fails_the_run() {
        let (lua, active, handler) = vm();
        let function = lua.load("return #KEYS + #ARGV").into_function().unwrap();
        let mut runner = Runner::new(&lua).unwrap();
        let globals = lua.globals();
        let keys: Vec<Bytes> = (0..64).map(|i| Bytes::from(format!("key:{i}"))).collect();
        let args: Vec<Bytes> = (0..64).map(|i| Bytes::from(format!("arg:{i}"))).collect();
        let mut commands = |_kind: HostCall, args: &[Bytes]| reply_to(args);
        let mut dispatch: &mut Dispatch<'_> = &mut commands;
        let _entered = active.enter(&mut dispatch);
        // The userdata stays in `holder` until just before the run: mlua allocates after a
        // chunk returns, and would meet the finalizer first.
        let holder = lua.create_table().unwrap();
        let arm = lua
            .load(
                "local holder = ...
                collectgarbage('setpause', 0)
                collectgarbage('setstepmul', 0)
                collectgarbage('collect')
                holder[1] = newproxy(true)
                getmetatable(holder[1]).__gc = function() error('finalizer raised') end",
            )
            .into_function()
            .unwrap();
        for inputs in [Inputs::Globals(&globals), Inputs::Arguments] {
            arm.call::<()>(&holder).unwrap();
            // SAFETY: a push of an existing table, and a store over an existing key: nothing
            // is allocated, and the stack is as it was after.
            lua.exec_raw_lua(|raw| unsafe {
                raw.push(&holder).unwrap();
                ffi::lua_pushnil(raw.state());
                ffi::lua_rawseti(raw.state(), -2, 1);
                ffi::lua_pop(raw.state(), 1);
            });
            // The first table or string `start` makes runs the collector, whose finalizer
            // raises: outside a protected call, that was Lua's panic (the process exits).
            let ran = run(&lua, &mut runner, &handler, &function, inputs, &keys, &args);
            lua.load(DISARM).exec().unwrap();
            match ran {
                Ok(Ran::Failed(Value::String(message))) => {
                    assert!(
                        message.to_string_lossy().ends_with("finalizer raised"),
                        "{}",
                        message.to_string_lossy()
                    );
                }
                _ => panic!("the run did not fail with the finalizer's error"),
            }
        }
        // The next runs are whole again (the list tables made then are the ones reused).
        for _ in 0..2 {
            let ran = run(
                &lua,
                &mut runner,
                &handler,
                &function,
                Inputs::Globals(&globals),
                &keys,
                &args,
            );
            assert!(matches!(ran, Ok(Ran::Number(n)) if n == 128.0));
        }
    }

    #[test]
    fn a_finalizer_that_raises_while_a_reply_is_pushed_is_a_script_error_and_leaks_nothing() {
        let (lua, active, handler) = vm();
        for command in ["large", "large_array"] {
            let script = format!(
                "{ARM_FAILING_FINALIZER}
                local ok, e = pcall(rcall, '{command}')
                {DISARM}
                return tostring(ok) .. ' ' .. tostring(e)"
            );
            let once = || {
                let ran = text(run_script(&lua, &active, &handler, &script));
                assert!(
                    ran.starts_with("false ") && ran.ends_with("finalizer raised"),
                    "{command}: {ran}"
                );
            };
            once();
            lua.gc_collect().unwrap();
            let before = counted::live();
            for _ in 0..8 {
                once();
            }
            lua.gc_collect().unwrap();
            lua.gc_collect().unwrap();
            // Each reply is over a MiB: a destructor the error jumped over would leave
            // eight of them behind.
            let grown = counted::live() - before;
            assert!(
                grown < 1 << 20,
                "{command}: {grown} bytes more after 8 runs"
            );
            // And the same command, without the trap, still answers.
            let ran = run_script(
                &lua,
                &active,
                &handler,
                &format!("return #rcall('{command}')"),
            );
            let expected = if command == "large" { 1 << 20 } else { 1024 };
            assert_eq!(text(ran), format!("number {expected}"));
        }
    }
}
