//! The `cjson` global of the scripting VM: JSON encoding and decoding for Lua scripts.
//!
//! Redis 7.0 bundles lua_cjson 2.1.0 (with its `strbuf` and `fpconv` helpers) and exposes it as
//! the global table `cjson`. This module reimplements that library in Rust and follows its
//! observable behaviour:
//!
//! * numbers are printed like C's `"%.14g"` (the precision is configurable from 1 to 14), and
//!   decoded like C's `strtod`, which also accepts `inf`, `nan` and hexadecimal numbers unless
//!   `decode_invalid_numbers` is switched off;
//! * strings are escaped byte by byte: control characters, `"`, `\`, `/` and DEL are escaped,
//!   everything else (including invalid UTF-8) is passed through untouched;
//! * a table is an array when every key is a positive integer, unless it is "excessively sparse";
//!   an empty table is the object `{}`;
//! * `cjson.null` is a NULL light userdata, which `decode` returns for JSON `null`;
//! * nesting limits, error messages and the character positions they report are the library's;
//!   like `luaL_error`, every error is prefixed with the calling script's "chunk:line: ", and
//!   argument errors name the function as the caller spelled it.
//!
//! Where the C code relies on x86-64 integer overflow (table keys beyond `INT_MAX` when telling
//! arrays from objects, out-of-range option values), the same results are produced on purpose.
//!
//! Deep structures are walked with an explicit stack instead of native recursion, so a script
//! that raises the depth limits cannot overflow the server thread's stack. The C library is also
//! bounded by Lua's limit of 8000 stack slots per C call; that bound is mirrored here so the same
//! inputs fail at the same depth with the same message.

use std::sync::Arc;

use mlua::{FromLua, Function, IntoLua, IntoLuaMulti, Lua, LuaString, Table, Value, Variadic};
use parking_lot::Mutex;

use crate::scripting::bound::{Budget, Memo, TooLarge, MAX_OUTPUT, MEASURE_DEPTH};

/// The module name reported as `cjson._NAME`.
const MODULE_NAME: &str = "cjson";
/// The library version reported as `cjson._VERSION`.
const MODULE_VERSION: &str = "2.1.0";

/// Lua 5.1 refuses to grow the stack of a C function beyond this many slots (`LUAI_MAXCSTACK`).
/// The C library fails with its nesting error once a structure would need more; the slot counts
/// below reproduce what the C code keeps on the Lua stack for every open container.
const LUAI_MAXCSTACK: usize = 8000;

/// The option names accepted by the boolean settings.
const BOOL_OPTIONS: &[&str] = &["off", "on"];
/// The option names accepted by `encode_invalid_numbers`; "null" is the third mode.
const INVALID_NUMBER_OPTIONS: &[&str] = &["off", "on", "null"];

/// How `encode` treats NaN and infinities: raise an error, write them out ("nan", "inf"), or
/// (any other value, set by the option "null") write `null` instead.
const INVALID_NUMBERS_ERROR: u8 = 0;
const INVALID_NUMBERS_ALLOW: u8 = 1;

/// The settings of one `cjson` table. Every table made by `cjson.new` has its own copy, shared
/// by the functions of that table only.
#[derive(Clone, Copy, Debug)]
struct Config {
    sparse_convert: u8,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    encode_invalid_numbers: u8,
    decode_invalid_numbers: u8,
    encode_keep_buffer: u8,
    encode_number_precision: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: INVALID_NUMBERS_ERROR,
            decode_invalid_numbers: 1,
            encode_keep_buffer: 1,
            encode_number_precision: 14,
        }
    }
}

type SharedConfig = Arc<Mutex<Config>>;

/// Creates the global `cjson` table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    // Resuming a table traversal from a given key is only possible through Lua's own `next`;
    // it is captured now so that later changes to the globals cannot affect encoding.
    let next: Function = lua.globals().raw_get("next")?;
    let module = new_module(lua, next)?;
    lua.globals().set(MODULE_NAME, module)
}

/// Builds one `cjson` table with a fresh configuration, as `luaopen_cjson` and `cjson.new` do.
fn new_module(lua: &Lua, next: Function) -> mlua::Result<Table> {
    let cfg: SharedConfig = Arc::new(Mutex::new(Config::default()));
    let module = lua.create_table()?;

    let c = cfg.clone();
    let encode_next = next.clone();
    let encode = library_function(lua, move |lua, args| {
        if args.len() != 1 {
            return Err(arg_error(lua, 1, "expected 1 argument"));
        }
        let mut encoder = Encoder {
            lua,
            cfg: *c.lock(),
            next: &encode_next,
            out: Vec::new(),
            root: &args[0],
            budget: Budget::default(),
            written: std::collections::HashMap::new(),
        };
        encoder.encode(args[0].clone())?;
        lua.create_string(&encoder.out)
    })?;
    module.set("encode", encode)?;

    let c = cfg.clone();
    let decode_fn = library_function(lua, move |lua, args| {
        if args.len() != 1 {
            return Err(arg_error(lua, 1, "expected 1 argument"));
        }
        let text = match lua.coerce_string(args[0].clone())? {
            Some(text) => text,
            None => return Err(type_error(lua, 1, "string", &args[0])),
        };
        let config = *c.lock();
        let bytes = text.as_bytes();
        decode(lua, config, &bytes)
    })?;
    module.set("decode", decode_fn)?;

    let c = cfg.clone();
    let sparse = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 3)?;
        let mut cfg = c.lock();
        let convert = enum_option(lua, &args[0], 1, &mut cfg.sparse_convert, BOOL_OPTIONS)?;
        let ratio = integer_option(lua, &args[1], 2, &mut cfg.sparse_ratio, 0, i32::MAX)?;
        let safe = integer_option(lua, &args[2], 3, &mut cfg.sparse_safe, 0, i32::MAX)?;
        Ok((convert, ratio, safe))
    })?;
    module.set("encode_sparse_array", sparse)?;

    let c = cfg.clone();
    let encode_depth = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        integer_option(lua, &args[0], 1, &mut cfg.encode_max_depth, 1, i32::MAX)
    })?;
    module.set("encode_max_depth", encode_depth)?;

    let c = cfg.clone();
    let decode_depth = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        integer_option(lua, &args[0], 1, &mut cfg.decode_max_depth, 1, i32::MAX)
    })?;
    module.set("decode_max_depth", decode_depth)?;

    let c = cfg.clone();
    let precision = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        integer_option(lua, &args[0], 1, &mut cfg.encode_number_precision, 1, 14)
    })?;
    module.set("encode_number_precision", precision)?;

    // The setting only decides whether C keeps its output buffer between calls; it is stored
    // and reported, but has no other effect here.
    let c = cfg.clone();
    let keep_buffer = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        enum_option(lua, &args[0], 1, &mut cfg.encode_keep_buffer, BOOL_OPTIONS)
    })?;
    module.set("encode_keep_buffer", keep_buffer)?;

    let c = cfg.clone();
    let encode_invalid = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        let setting = &mut cfg.encode_invalid_numbers;
        enum_option(lua, &args[0], 1, setting, INVALID_NUMBER_OPTIONS)
    })?;
    module.set("encode_invalid_numbers", encode_invalid)?;

    let c = cfg;
    let decode_invalid = library_function(lua, move |lua, args| {
        let args = option_args(lua, args, 1)?;
        let mut cfg = c.lock();
        enum_option(
            lua,
            &args[0],
            1,
            &mut cfg.decode_invalid_numbers,
            BOOL_OPTIONS,
        )
    })?;
    module.set("decode_invalid_numbers", decode_invalid)?;

    let new = library_function(lua, move |lua, _| new_module(lua, next.clone()))?;
    module.set("new", new)?;

    module.set("null", Value::NULL)?;
    module.set("_NAME", MODULE_NAME)?;
    module.set("_VERSION", MODULE_VERSION)?;
    Ok(module)
}

/// Wraps `body` as a Lua function. Errors it raises get the position of the calling Lua code
/// in front, as `luaL_error` does in C.
fn library_function<R, F>(lua: &Lua, body: F) -> mlua::Result<Function>
where
    R: IntoLuaMulti,
    F: Fn(&Lua, Variadic<Value>) -> mlua::Result<R> + 'static,
{
    lua.create_function(move |lua, args: Variadic<Value>| {
        body(lua, args).map_err(|error| match error {
            mlua::Error::RuntimeError(message) => {
                mlua::Error::RuntimeError(format!("{}{message}", caller_position(lua)))
            }
            other => other,
        })
    })
}

// ===== Errors and argument checking =====

fn runtime_error(message: String) -> mlua::Error {
    mlua::Error::RuntimeError(message)
}

/// `luaL_where(L, 1)`: "chunk:line: " for the Lua code that called the running function, or
/// nothing when the caller is not Lua code (for instance `pcall`).
fn caller_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |caller| {
        let line = caller.current_line().filter(|&line| line > 0)?;
        let source = caller.source().short_src?.into_owned();
        Some(format!("{source}:{line}: "))
    })
    .flatten()
    .unwrap_or_default()
}

/// The message of `luaL_argerror`, which names the running function the way the caller
/// referred to it ("?" when unknown) and does not count `self` in method calls.
fn arg_error(lua: &Lua, arg: usize, reason: &str) -> mlua::Error {
    let (name, method) = lua
        .inspect_stack(0, |running| {
            let names = running.names();
            let name = names.name.map(|name| name.into_owned());
            (name, names.name_what == Some("method"))
        })
        .unwrap_or((None, false));
    let name = name.unwrap_or_else(|| "?".to_string());
    let mut arg = arg;
    if method {
        arg -= 1;
        if arg == 0 {
            return runtime_error(format!("calling '{name}' on bad self ({reason})"));
        }
    }
    runtime_error(format!("bad argument #{arg} to '{name}' ({reason})"))
}

/// The message of `luaL_typerror`.
fn type_error(lua: &Lua, arg: usize, expected: &str, got: &Value) -> mlua::Error {
    let reason = format!("{expected} expected, got {}", lua_type_name(got));
    arg_error(lua, arg, &reason)
}

/// The name Lua's `type()` gives a value; light userdata is plain "userdata" in Lua 5.1.
fn lua_type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// Rejects surplus arguments and pads missing ones with nil, so that a setting is only changed
/// when its argument is present and not nil.
fn option_args(lua: &Lua, args: Variadic<Value>, count: usize) -> mlua::Result<Vec<Value>> {
    if args.len() > count {
        return Err(arg_error(lua, count + 1, "found too many arguments"));
    }
    let mut args: Vec<Value> = args.into_iter().collect();
    args.resize(count, Value::Nil);
    Ok(args)
}

/// Converts a number to a C `int` the way the x86-64 conversion instruction does: truncation
/// towards zero, and `INT_MIN` for anything out of range (NaN included).
fn double_to_c_int(number: f64) -> i32 {
    if number > -2_147_483_649.0 && number < 2_147_483_648.0 {
        number as i32
    } else {
        i32::MIN
    }
}

/// Converts a Lua number to a C `int` the way `luaL_checkinteger` followed by an assignment to
/// `int` does on x86-64: truncation to 64 bits (the minimum when out of range), then the low
/// 32 bits.
fn lua_integer_to_c_int(number: f64) -> i32 {
    let wide = if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&number) {
        number as i64
    } else {
        i64::MIN
    };
    wide as i32
}

/// Applies an integer setting when `value` is not nil and returns the (new) setting. As in C,
/// a non-number is reported against its own argument position, an out-of-range number always
/// against argument 1.
fn integer_option(
    lua: &Lua,
    value: &Value,
    arg: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> mlua::Result<Value> {
    if !value.is_nil() {
        let number = match lua.coerce_number(value.clone())? {
            Some(number) => number,
            None => return Err(type_error(lua, arg, "number", value)),
        };
        let wanted = lua_integer_to_c_int(number);
        if wanted < min || wanted > max {
            let reason = format!("expected integer between {min} and {max}");
            return Err(arg_error(lua, 1, &reason));
        }
        *setting = wanted;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// Applies an enumerated setting (a boolean or one of `options`) when `value` is not nil and
/// returns the setting: a boolean for "off"/"on", otherwise the option's name.
fn enum_option(
    lua: &Lua,
    value: &Value,
    arg: usize,
    setting: &mut u8,
    options: &[&str],
) -> mlua::Result<Value> {
    match value {
        Value::Nil => {}
        Value::Boolean(on) => *setting = u8::from(*on),
        other => {
            let name = match lua.coerce_string(other.clone())? {
                Some(name) => name,
                None => return Err(type_error(lua, arg, "string", other)),
            };
            let bytes = name.as_bytes();
            match options
                .iter()
                .position(|option| option.as_bytes() == &bytes[..])
            {
                Some(index) => *setting = index as u8,
                None => {
                    let reason = format!("invalid option '{}'", String::from_utf8_lossy(&bytes));
                    return Err(arg_error(lua, arg, &reason));
                }
            }
        }
    }
    Ok(match *setting {
        0 => Value::Boolean(false),
        1 => Value::Boolean(true),
        other => Value::String(lua.create_string(options[usize::from(other)])?),
    })
}

// ===== Encoding =====

/// How many levels of open containers keep their tables (and keys) as Rust references. mlua
/// keeps every reference on an auxiliary Lua stack that is limited to 8000 slots, like any C
/// call; deeper levels are therefore kept in a scratch Lua table instead (see `Spill`).
const HELD_LEVELS: usize = 200;

/// How many Lua references the encoder may keep in collected table entries at once (see
/// `Encoder::analyse`), which stays well below mlua's limit of 8000.
const COLLECT_BUDGET: usize = 2048;

/// Keeps the tables and keys of deeply nested open containers inside one Lua table, so that
/// their number does not count against mlua's reference limit. The container at depth `d`
/// uses slot `2d - 1` for its table and slot `2d` for its current key.
struct Spill<'a> {
    lua: &'a Lua,
    store: Option<Table>,
}

impl<'a> Spill<'a> {
    fn new(lua: &'a Lua) -> Self {
        Spill { lua, store: None }
    }

    fn table_slot(depth: usize) -> i64 {
        2 * depth as i64 - 1
    }

    fn key_slot(depth: usize) -> i64 {
        2 * depth as i64
    }

    fn put(&mut self, slot: i64, value: impl IntoLua) -> mlua::Result<()> {
        let store = match &self.store {
            Some(store) => store,
            None => self.store.insert(self.lua.create_table()?),
        };
        store.raw_set(slot, value)
    }

    fn get<V: FromLua>(&self, slot: i64) -> mlua::Result<V> {
        match &self.store {
            Some(store) => store.raw_get(slot),
            None => Err(runtime_error(
                "cjson: missing spilled container".to_string(),
            )),
        }
    }

    /// Runs `f` on the table of the container at `depth`, held either in `held` or here.
    fn with_table<R>(
        &self,
        held: &Option<Table>,
        depth: usize,
        f: impl FnOnce(&Table) -> mlua::Result<R>,
    ) -> mlua::Result<R> {
        match held {
            Some(table) => f(table),
            None => f(&self.get::<Table>(Self::table_slot(depth))?),
        }
    }
}

/// What a table encodes as, decided by one pass over its entries.
enum Shape {
    /// A JSON array of `len` elements (`t[1]` to `t[len]`, holes become null). `dense` holds
    /// those elements when they could be collected during the pass.
    Array { len: i64, dense: Option<Vec<Value>> },
    /// A JSON object; `nested` tells whether any value is a table. `entries` holds the key and
    /// value pairs in traversal order when they could be collected during the pass.
    Object {
        nested: bool,
        entries: Option<Vec<(Value, Value)>>,
    },
}

/// Whether a value pins a Lua reference in mlua (numbers, booleans and nil do not).
fn holds_reference(value: &Value) -> bool {
    !matches!(
        value,
        Value::Nil
            | Value::Boolean(_)
            | Value::Integer(_)
            | Value::Number(_)
            | Value::LightUserData(_)
    )
}

/// Where the elements or entries of an open container come from: collected during the shape
/// pass, or read from the table (the `Spill` holds the table and the current key when the
/// frame's own fields are `None`).
enum Frame {
    Array {
        table: Option<Table>,
        dense: Option<std::vec::IntoIter<Value>>,
        len: i64,
        index: i64,
        references: usize,
    },
    Object {
        table: Option<Table>,
        entries: Option<std::vec::IntoIter<(Value, Value)>>,
        /// The last key written (nil before the first) when the table is traversed with `next`.
        key: Option<Value>,
        first: bool,
        references: usize,
    },
}

impl Frame {
    /// The Lua stack slots the C encoder holds while it encodes a child of this container: the
    /// element for arrays, the key and the value for objects.
    fn slots(&self) -> usize {
        match self {
            Frame::Array { .. } => 1,
            Frame::Object { .. } => 2,
        }
    }

    fn references(&self) -> usize {
        match self {
            Frame::Array { references, .. } | Frame::Object { references, .. } => *references,
        }
    }
}

/// A table written whole: where its encoding is in the output, and how much deeper (in
/// levels, and in the Lua stack slots the C encoder would hold) its walk went below it.
/// Met again where the walk would not fail, it encodes to the same bytes (the settings are
/// fixed during an encode and nothing runs that could change a table), which are copied:
/// a table of shared subtables then costs what its output is, not a walk of every branch.
#[derive(Clone, Copy)]
struct Written {
    start: usize,
    end: usize,
    depth_below: usize,
    slots_below: usize,
}

impl Written {
    fn leaf(start: usize, end: usize) -> Written {
        Written {
            start,
            end,
            depth_below: 0,
            slots_below: 0,
        }
    }
}

/// An open container's [`Written`] in the making.
struct Mark {
    table: *const std::ffi::c_void,
    start: usize,
    depth_below: usize,
    slots_below: usize,
}

impl Mark {
    /// A table below the innermost open container (`stack`'s last) was written, whose walk
    /// went `depth_below` levels and `slots_below` slots below it.
    fn child(marks: &mut [Mark], stack: &[Frame], depth_below: usize, slots_below: usize) {
        if let (Some(mark), Some(frame)) = (marks.last_mut(), stack.last()) {
            mark.depth_below = mark.depth_below.max(depth_below + 1);
            mark.slots_below = mark.slots_below.max(slots_below + frame.slots());
        }
    }
}

struct Encoder<'a> {
    lua: &'a Lua,
    cfg: Config,
    next: &'a Function,
    out: Vec<u8>,
    /// The tables written whole so far (see [`Written`]).
    written: std::collections::HashMap<*const std::ffi::c_void, Written>,
    /// The value being encoded, for `measure`.
    root: &'a Value,
    budget: Budget,
}

impl Encoder<'_> {
    /// Called after each value written: an error once the output is (or, by `measure`,
    /// will be) larger than `bound::MAX_OUTPUT` (see `bound`).
    fn wrote(&mut self) -> mlua::Result<()> {
        let written = self.out.len();
        let mut budget = std::mem::take(&mut self.budget);
        let checked = budget.wrote(written, || self.measure(self.root, 1, &mut Memo::new()));
        self.budget = budget;
        checked.map_err(|TooLarge| too_large())
    }

    /// A lower bound of the size of `value`'s encoding at nesting `depth` (1 for the
    /// argument): a string is at least its bytes and two quotes, any other scalar a byte,
    /// a table its brackets, its commas, its elements (a hole of an array is "null"), and
    /// for an object each key with its colon. Each table is walked once (`memo`); a table
    /// the encoder would refuse (too deep, excessively sparse) counts for nothing.
    fn measure(&self, value: &Value, depth: usize, memo: &mut Memo) -> usize {
        let table = match value {
            Value::String(s) => return s.as_bytes().len().saturating_add(2),
            Value::Table(table) => table,
            _ => return 1,
        };
        let max_depth = usize::try_from(self.cfg.encode_max_depth).unwrap_or(0);
        if depth > max_depth || depth > MEASURE_DEPTH {
            return 0;
        }
        let key = (table.to_pointer(), 0);
        if let Some(&known) = memo.get(&key) {
            return known;
        }
        let Ok((shape, _)) = self.analyse(table, 0) else {
            return 0;
        };
        let mut size = 2usize;
        let mut count = 0usize;
        let array_len = match shape {
            Shape::Array { len, .. } => Some(usize::try_from(len).unwrap_or(0)),
            Shape::Object { .. } => None,
        };
        let _ = table.for_each::<Value, Value>(|key, value| {
            let key_size = match &key {
                Value::String(s) => s.as_bytes().len().saturating_add(3),
                // A number key: at least one digit, quoted, and the colon.
                _ => 4,
            };
            let inside = match array_len {
                // Only `t[1]` to `t[len]` are elements; none of the keys is written.
                Some(len) => {
                    matches!(key, Value::Integer(i) if i >= 1 && i as usize <= len)
                        || matches!(key, Value::Number(n) if n >= 1.0 && n <= len as f64)
                }
                None => true,
            };
            if inside {
                count += 1;
                let element = self.measure(&value, depth + 1, memo);
                let key_size = if array_len.is_some() { 0 } else { key_size };
                size = size.saturating_add(element).saturating_add(key_size);
            }
            Ok(())
        });
        let written = array_len.unwrap_or(count);
        // The commas, and the holes of an array ("null" each).
        size = size
            .saturating_add(written.saturating_sub(1))
            .saturating_add(written.saturating_sub(count).saturating_mul(4));
        memo.insert(key, size);
        size
    }

    fn encode(&mut self, root: Value) -> mlua::Result<()> {
        let mut stack: Vec<Frame> = Vec::new();
        // Beside each open container: where it starts and how far below it its walk went.
        let mut marks: Vec<Mark> = Vec::new();
        let mut spill = Spill::new(self.lua);
        // The argument of `encode` itself occupies the first slot.
        let mut slots = 1usize;
        // Lua references kept in collected entries of the open containers.
        let mut collected = 0usize;
        let mut pending = Some(root);
        loop {
            if let Some(value) = pending.take() {
                match value {
                    Value::Table(table) => {
                        let depth = stack.len() + 1;
                        let max_depth = usize::try_from(self.cfg.encode_max_depth).unwrap_or(0);
                        let pointer = table.to_pointer();
                        if let Some(&done) = self.written.get(&pointer) {
                            // Where the walk would not fail, the same bytes again.
                            if depth + done.depth_below <= max_depth
                                && slots + done.slots_below + 3 <= LUAI_MAXCSTACK
                            {
                                if self.out.len().saturating_add(done.end - done.start) > MAX_OUTPUT
                                {
                                    return Err(too_large());
                                }
                                self.out.extend_from_within(done.start..done.end);
                                Mark::child(&mut marks, &stack, done.depth_below, done.slots_below);
                                self.wrote()?;
                                continue;
                            }
                        }
                        if depth > max_depth || slots + 3 > LUAI_MAXCSTACK {
                            return Err(runtime_error(format!(
                                "Cannot serialise, excessive nesting ({depth})"
                            )));
                        }
                        let budget = COLLECT_BUDGET.saturating_sub(collected);
                        let (shape, references) = self.analyse(&table, budget)?;
                        if let Shape::Object {
                            nested: false,
                            entries,
                        } = shape
                        {
                            let start = self.out.len();
                            match entries {
                                Some(entries) => self.append_entries(entries)?,
                                None => self.append_flat_object(&table)?,
                            }
                            let end = self.out.len();
                            self.written.insert(pointer, Written::leaf(start, end));
                            Mark::child(&mut marks, &stack, 0, 0);
                            self.wrote()?;
                        } else {
                            marks.push(Mark {
                                table: pointer,
                                start: self.out.len(),
                                depth_below: 0,
                                slots_below: 0,
                            });
                            // Tables whose content was collected are not needed any more.
                            let collected_all = match &shape {
                                Shape::Array { dense, .. } => dense.is_some(),
                                Shape::Object { entries, .. } => entries.is_some(),
                            };
                            let table = if collected_all {
                                None
                            } else if depth <= HELD_LEVELS {
                                Some(table)
                            } else {
                                spill.put(Spill::table_slot(depth), table)?;
                                None
                            };
                            let frame = match shape {
                                Shape::Array { len, dense } => {
                                    self.out.push(b'[');
                                    Frame::Array {
                                        table,
                                        dense: dense.map(Vec::into_iter),
                                        len,
                                        index: 1,
                                        references,
                                    }
                                }
                                Shape::Object { entries, .. } => {
                                    self.out.push(b'{');
                                    let key = if table.is_some() || entries.is_some() {
                                        Some(Value::Nil)
                                    } else {
                                        spill.put(Spill::key_slot(depth), Value::Nil)?;
                                        None
                                    };
                                    Frame::Object {
                                        table,
                                        entries: entries.map(Vec::into_iter),
                                        key,
                                        first: true,
                                        references,
                                    }
                                }
                            };
                            slots += frame.slots();
                            collected += frame.references();
                            stack.push(frame);
                            self.wrote()?;
                        }
                    }
                    scalar => self.append_scalar(&scalar)?,
                }
            }

            let depth = stack.len();
            let Some(frame) = stack.last_mut() else {
                return Ok(());
            };
            let finished = match frame {
                Frame::Array {
                    table,
                    dense,
                    len,
                    index,
                    ..
                } => {
                    if *index > *len {
                        self.out.push(b']');
                        true
                    } else {
                        if *index > 1 {
                            self.out.push(b',');
                        }
                        let at = *index;
                        let element = match dense {
                            Some(dense) => dense.next().unwrap_or(Value::Nil),
                            None => spill.with_table(table, depth, |t| t.raw_get(at))?,
                        };
                        pending = Some(element);
                        *index += 1;
                        false
                    }
                }
                Frame::Object {
                    table,
                    entries,
                    key,
                    first,
                    ..
                } => {
                    let entry = match entries {
                        Some(entries) => entries.next(),
                        None => {
                            let previous = match key {
                                Some(key) => std::mem::take(key),
                                None => spill.get(Spill::key_slot(depth))?,
                            };
                            let (next_key, value): (Value, Value) =
                                spill
                                    .with_table(table, depth, |t| self.next.call((t, previous)))?;
                            (!next_key.is_nil()).then_some((next_key, value))
                        }
                    };
                    match entry {
                        None => {
                            self.out.push(b'}');
                            true
                        }
                        Some((entry_key, value)) => {
                            if !*first {
                                self.out.push(b',');
                            }
                            *first = false;
                            self.append_key(&entry_key)?;
                            if entries.is_none() {
                                match key {
                                    Some(key) => *key = entry_key,
                                    None => spill.put(Spill::key_slot(depth), entry_key)?,
                                }
                            }
                            pending = Some(value);
                            false
                        }
                    }
                }
            };
            if finished {
                if let Some(done) = stack.pop() {
                    slots -= done.slots();
                    collected -= done.references();
                }
                if let Some(mark) = marks.pop() {
                    let written = Written {
                        start: mark.start,
                        end: self.out.len(),
                        depth_below: mark.depth_below,
                        slots_below: mark.slots_below,
                    };
                    self.written.insert(mark.table, written);
                    Mark::child(&mut marks, &stack, mark.depth_below, mark.slots_below);
                }
            }
        }
    }

    /// Decides between array and object like `lua_array_length`: an array needs only positive
    /// integer keys and must not be excessively sparse (which is an error unless sparse arrays
    /// are set to be converted to objects).
    ///
    /// The same pass collects the entries, as long as they pin no more than `budget` Lua
    /// references, so that small tables need not be traversed again. It returns the number of
    /// references collected.
    ///
    /// The C code keeps the largest key and the sparseness arithmetic in `int`s; keys beyond
    /// `INT_MAX` (infinity included) overflow it. That is reproduced the way it behaves on
    /// x86-64, so such tables encode exactly as in Redis there.
    fn analyse(&self, table: &Table, budget: usize) -> mlua::Result<(Shape, usize)> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        let mut array = true;
        let mut nested = false;
        let mut entries = Some(Vec::new());
        let mut references = 0usize;
        table.for_each::<Value, Value>(|key, value| {
            nested |= matches!(value, Value::Table(_));
            if array {
                let index = match key {
                    Value::Integer(i) => i as f64,
                    Value::Number(n) => n,
                    _ => 0.0,
                };
                if index >= 1.0 && index.floor() == index {
                    if index > f64::from(max) {
                        max = double_to_c_int(index);
                    }
                    items = items.wrapping_add(1);
                } else {
                    array = false;
                }
            }
            if let Some(list) = &mut entries {
                references +=
                    usize::from(holds_reference(&key)) + usize::from(holds_reference(&value));
                if references > budget {
                    entries = None;
                } else {
                    list.push((key, value));
                }
            }
            Ok(())
        })?;
        if entries.is_none() {
            references = 0;
        }
        let object = |entries| Ok((Shape::Object { nested, entries }, references));
        if !array {
            return object(entries);
        }
        let ratio = self.cfg.sparse_ratio;
        if ratio > 0 && max > items.wrapping_mul(ratio) && max > self.cfg.sparse_safe {
            if self.cfg.sparse_convert == 0 {
                return Err(runtime_error(
                    "Cannot serialise table: excessively sparse array".to_string(),
                ));
            }
            return object(entries);
        }
        if max <= 0 {
            return object(entries);
        }
        let len = usize::try_from(max).unwrap_or(0);
        // Lay the collected elements out by index, unless holes would make that wasteful.
        let dense = entries
            .filter(|list| len <= list.len().saturating_mul(2) + 16)
            .map(|list| {
                let mut dense = vec![Value::Nil; len];
                for (key, value) in list {
                    let index = match key {
                        Value::Integer(i) => usize::try_from(i).unwrap_or(0),
                        Value::Number(n) => n as usize,
                        _ => 0,
                    };
                    if (1..=len).contains(&index) {
                        dense[index - 1] = value;
                    }
                }
                dense
            });
        let references = if dense.is_some() { references } else { 0 };
        Ok((
            Shape::Array {
                len: i64::from(max),
                dense,
            },
            references,
        ))
    }

    /// Writes an object none of whose values is a table from its collected entries.
    fn append_entries(&mut self, entries: Vec<(Value, Value)>) -> mlua::Result<()> {
        self.out.push(b'{');
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.append_key(key)?;
            self.append_scalar(value)?;
        }
        self.out.push(b'}');
        Ok(())
    }

    /// Writes an object none of whose values is a table in a single traversal.
    fn append_flat_object(&mut self, table: &Table) -> mlua::Result<()> {
        self.out.push(b'{');
        let mut first = true;
        table.for_each::<Value, Value>(|key, value| {
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.append_key(&key)?;
            self.append_scalar(&value)
        })?;
        self.out.push(b'}');
        Ok(())
    }

    /// Writes an object key followed by the colon. Numeric keys are written as strings.
    fn append_key(&mut self, key: &Value) -> mlua::Result<()> {
        match key {
            Value::String(s) => {
                append_string(&mut self.out, &s.as_bytes());
                self.out.push(b':');
            }
            Value::Integer(i) => {
                self.out.push(b'"');
                self.append_number(*i as f64)?;
                self.out.extend_from_slice(b"\":");
            }
            Value::Number(n) => {
                self.out.push(b'"');
                self.append_number(*n)?;
                self.out.extend_from_slice(b"\":");
            }
            other => {
                return Err(runtime_error(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    lua_type_name(other)
                )))
            }
        }
        Ok(())
    }

    /// Writes any value but a table.
    fn append_scalar(&mut self, value: &Value) -> mlua::Result<()> {
        match value {
            Value::String(s) => append_string(&mut self.out, &s.as_bytes()),
            Value::Integer(i) => self.append_number(*i as f64)?,
            Value::Number(n) => self.append_number(*n)?,
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(ud) if ud.0.is_null() => self.out.extend_from_slice(b"null"),
            other => {
                return Err(runtime_error(format!(
                    "Cannot serialise {}: type not supported",
                    lua_type_name(other)
                )))
            }
        }
        self.wrote()
    }

    fn append_number(&mut self, number: f64) -> mlua::Result<()> {
        match self.cfg.encode_invalid_numbers {
            INVALID_NUMBERS_ERROR => {
                if !number.is_finite() {
                    return Err(runtime_error(
                        "Cannot serialise number: must not be NaN or Inf".to_string(),
                    ));
                }
            }
            INVALID_NUMBERS_ALLOW => {
                // Written explicitly because printf may render a NaN as "-nan".
                if number.is_nan() {
                    self.out.extend_from_slice(b"nan");
                    return Ok(());
                }
            }
            _ => {
                if !number.is_finite() {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        let precision = usize::try_from(self.cfg.encode_number_precision).unwrap_or(14);
        format_g(&mut self.out, number, precision);
        Ok(())
    }
}

fn too_large() -> mlua::Error {
    runtime_error("Cannot serialise, output exceeds 512 MB".to_string())
}

/// Writes `bytes` as a quoted JSON string. Control characters, `"`, `\`, `/` and DEL are
/// escaped (the short forms where JSON has one, `\u00XX` otherwise); all other bytes are copied.
fn append_string(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut plain_from = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let short: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'/' => b"\\/",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f | 0x7f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[plain_from..i]);
        plain_from = i + 1;
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0x0f)]);
        } else {
            out.extend_from_slice(short);
        }
    }
    out.extend_from_slice(&bytes[plain_from..]);
    out.push(b'"');
}

/// Formats `number` like C's `printf("%.*g", precision, number)` with glibc, including "inf",
/// "-inf", "nan", "-nan" and "-0".
pub(crate) fn format_g(out: &mut Vec<u8>, number: f64, precision: usize) {
    use std::fmt::Write as _;
    use std::io::Write as _;

    let precision = precision.max(1);
    if number.is_nan() {
        let text: &[u8] = if number.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        };
        out.extend_from_slice(text);
        return;
    }
    if number.is_infinite() {
        let text: &[u8] = if number < 0.0 { b"-inf" } else { b"inf" };
        out.extend_from_slice(text);
        return;
    }
    if number == 0.0 {
        let text: &[u8] = if number.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        };
        out.extend_from_slice(text);
        return;
    }
    // Whole numbers with at most `precision` digits print as plain integers; they are by far
    // the most common numbers in scripts, so they skip the general path.
    if number.fract() == 0.0 && number.abs() < 10f64.powi(precision as i32) {
        let _ = write!(out, "{}", number as i64);
        return;
    }
    // Rust's exponent formatting rounds exactly like glibc (to nearest, ties to even on the
    // exact binary value), so it yields the significant digits and the decimal exponent that
    // %g chooses its style by; the fixed style shows the same digits.
    let mut scientific = FormatBuffer::default();
    let _ = write!(scientific, "{:.*e}", precision - 1, number);
    let Some((mantissa, exponent)) = scientific.as_str().split_once('e') else {
        return;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let mut digits = [0u8; 24];
    let mut count = 0;
    for digit in mantissa.bytes().filter(u8::is_ascii_digit) {
        if count < digits.len() {
            digits[count] = digit;
            count += 1;
        }
    }
    // %g drops trailing zeros of the fraction; the first digit is never zero.
    while count > 1 && digits[count - 1] == b'0' {
        count -= 1;
    }
    let digits = &digits[..count];
    out.extend_from_slice(sign.as_bytes());
    if exponent < -4 || exponent >= precision as i32 {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{exponent_sign}{:02}", exponent.unsigned_abs());
    } else if exponent < 0 {
        out.extend_from_slice(b"0.");
        for _ in 0..(-exponent - 1) {
            out.push(b'0');
        }
        out.extend_from_slice(digits);
    } else {
        let integer_digits = exponent as usize + 1;
        if digits.len() > integer_digits {
            out.extend_from_slice(&digits[..integer_digits]);
            out.push(b'.');
            out.extend_from_slice(&digits[integer_digits..]);
        } else {
            out.extend_from_slice(digits);
            for _ in digits.len()..integer_digits {
                out.push(b'0');
            }
        }
    }
}

/// A small fixed buffer for formatting one number without allocating.
struct FormatBuffer {
    bytes: [u8; 48],
    len: usize,
}

impl Default for FormatBuffer {
    fn default() -> Self {
        FormatBuffer {
            bytes: [0; 48],
            len: 0,
        }
    }
}

impl FormatBuffer {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for FormatBuffer {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let end = self.len + text.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

// ===== Decoding =====

/// The kinds of token the JSON scanner produces.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TokenKind {
    ObjectBegin,
    ObjectEnd,
    ArrayBegin,
    ArrayEnd,
    /// A string; its decoded bytes are in the parser's scratch buffer.
    String,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A scanning error with its description.
    Error(&'static str),
}

impl TokenKind {
    /// The name used in "Expected ... but found ..." messages.
    fn describe(self) -> &'static str {
        match self {
            TokenKind::ObjectBegin => "T_OBJ_BEGIN",
            TokenKind::ObjectEnd => "T_OBJ_END",
            TokenKind::ArrayBegin => "T_ARR_BEGIN",
            TokenKind::ArrayEnd => "T_ARR_END",
            TokenKind::String => "T_STRING",
            TokenKind::Number(_) => "T_NUMBER",
            TokenKind::Boolean(_) => "T_BOOLEAN",
            TokenKind::Null => "T_NULL",
            TokenKind::Colon => "T_COLON",
            TokenKind::Comma => "T_COMMA",
            TokenKind::End => "T_END",
            TokenKind::Error(what) => what,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: TokenKind,
    /// Zero-based byte offset the token (or its error) was found at.
    index: usize,
}

/// A container whose decoding is in progress. `table` (and an object's `key`) is `None` when
/// it is kept in the `Spill`.
enum Open {
    Array {
        table: Option<Table>,
        len: i64,
    },
    /// `key` is the key of the value being decoded.
    Object {
        table: Option<Table>,
        key: Option<LuaString>,
    },
}

impl Open {
    /// The Lua stack slots the C decoder holds while it decodes a child of this container: the
    /// table, plus the pending key for objects.
    fn slots(&self) -> usize {
        match self {
            Open::Array { .. } => 1,
            Open::Object { .. } => 2,
        }
    }
}

/// The JSON scanner. The C library reads a NUL-terminated string, so a NUL byte anywhere in the
/// input acts as its end; `byte` returns 0 past the end to give the same behaviour.
struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
    invalid_numbers: bool,
    scratch: Vec<u8>,
}

fn decode(lua: &Lua, cfg: Config, data: &[u8]) -> mlua::Result<Value> {
    // JSON text must be UTF-8 (RFC 4627); any other Unicode encoding puts a NUL in one of the
    // first two bytes, since the first character is ASCII.
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(runtime_error(
            "JSON parser does not support UTF-16 or UTF-32".to_string(),
        ));
    }
    let mut scanner = Scanner {
        data,
        pos: 0,
        invalid_numbers: cfg.decode_invalid_numbers != 0,
        scratch: Vec::new(),
    };
    let max_depth = usize::try_from(cfg.decode_max_depth).unwrap_or(0);
    let mut stack: Vec<Open> = Vec::new();
    let mut spill = Spill::new(lua);
    // The JSON text argument occupies the first slot.
    let mut slots = 1usize;
    let mut token = scanner.next_token();
    loop {
        // `token` starts a value; scalars and empty containers complete at once, other
        // containers are opened and their first value is scanned next.
        let mut value = match token.kind {
            TokenKind::String => Value::String(lua.create_string(&scanner.scratch)?),
            TokenKind::Number(n) => Value::Number(n),
            TokenKind::Boolean(b) => Value::Boolean(b),
            TokenKind::Null => Value::NULL,
            TokenKind::ArrayBegin | TokenKind::ObjectBegin => {
                let object = token.kind == TokenKind::ObjectBegin;
                let depth = stack.len() + 1;
                let needed = if object { 3 } else { 2 };
                if depth > max_depth || slots + needed > LUAI_MAXCSTACK {
                    return Err(runtime_error(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        scanner.pos
                    )));
                }
                let table = lua.create_table()?;
                let first = scanner.next_token();
                let closer = if object {
                    TokenKind::ObjectEnd
                } else {
                    TokenKind::ArrayEnd
                };
                if first.kind == closer {
                    Value::Table(table)
                } else {
                    let held = depth <= HELD_LEVELS;
                    let table = if held {
                        Some(table)
                    } else {
                        spill.put(Spill::table_slot(depth), table)?;
                        None
                    };
                    let frame = if object {
                        let key = scanner.object_key(lua, first)?;
                        let key = if held {
                            Some(key)
                        } else {
                            spill.put(Spill::key_slot(depth), key)?;
                            None
                        };
                        token = scanner.next_token();
                        Open::Object { table, key }
                    } else {
                        token = first;
                        Open::Array { table, len: 0 }
                    };
                    slots += frame.slots();
                    stack.push(frame);
                    continue;
                }
            }
            _ => return Err(parse_error("value", token)),
        };

        // Store the completed value in its container; a closing bracket completes the
        // container in turn, a comma leads to the container's next value.
        loop {
            let depth = stack.len();
            let Some(open) = stack.last_mut() else {
                let last = scanner.next_token();
                if last.kind != TokenKind::End {
                    return Err(parse_error("the end", last));
                }
                return Ok(value);
            };
            match open {
                Open::Array { table, len } => {
                    *len += 1;
                    let at = *len;
                    spill.with_table(table, depth, |t| t.raw_set(at, value))?;
                    let after = scanner.next_token();
                    match after.kind {
                        TokenKind::ArrayEnd => {}
                        TokenKind::Comma => {
                            token = scanner.next_token();
                            break;
                        }
                        _ => return Err(parse_error("comma or array end", after)),
                    }
                }
                Open::Object { table, key } => {
                    spill.with_table(table, depth, |t| match key {
                        Some(key) => t.raw_set(&*key, value),
                        None => t.raw_set(spill.get::<LuaString>(Spill::key_slot(depth))?, value),
                    })?;
                    let after = scanner.next_token();
                    match after.kind {
                        TokenKind::ObjectEnd => {}
                        TokenKind::Comma => {
                            let next = scanner.next_token();
                            let next_key = scanner.object_key(lua, next)?;
                            match key {
                                Some(key) => *key = next_key,
                                None => spill.put(Spill::key_slot(depth), next_key)?,
                            }
                            token = scanner.next_token();
                            break;
                        }
                        _ => return Err(parse_error("comma or object end", after)),
                    }
                }
            }
            // The container is closed: it becomes the completed value of its parent.
            let Some(done) = stack.pop() else {
                return Err(runtime_error("cjson: decoder stack underflow".to_string()));
            };
            slots -= done.slots();
            let (Open::Array { table, .. } | Open::Object { table, .. }) = done;
            value = match table {
                Some(table) => Value::Table(table),
                None => Value::Table(spill.get(Spill::table_slot(depth))?),
            };
        }
    }
}

/// The message of a syntax error; positions are reported one-based.
fn parse_error(expected: &str, token: Token) -> mlua::Error {
    runtime_error(format!(
        "Expected {expected} but found {} at character {}",
        token.kind.describe(),
        token.index + 1
    ))
}

impl Scanner<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.data.get(at).copied().unwrap_or(0)
    }

    fn rest_starts_with(&self, prefix: &[u8]) -> bool {
        self.data
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(prefix))
    }

    fn error_at(&self, what: &'static str, index: usize) -> Token {
        Token {
            kind: TokenKind::Error(what),
            index,
        }
    }

    /// Checks that `token` is an object key followed by a colon, and returns the key.
    fn object_key(&mut self, lua: &Lua, token: Token) -> mlua::Result<LuaString> {
        if token.kind != TokenKind::String {
            return Err(parse_error("object key string", token));
        }
        let key = lua.create_string(&self.scratch)?;
        let colon = self.next_token();
        if colon.kind != TokenKind::Colon {
            return Err(parse_error("colon", colon));
        }
        Ok(key)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.byte(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let single = match self.byte(start) {
            b'{' => Some(TokenKind::ObjectBegin),
            b'}' => Some(TokenKind::ObjectEnd),
            b'[' => Some(TokenKind::ArrayBegin),
            b']' => Some(TokenKind::ArrayEnd),
            b',' => Some(TokenKind::Comma),
            b':' => Some(TokenKind::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return Token { kind, index: start };
        }
        match self.byte(start) {
            0 => Token {
                kind: TokenKind::End,
                index: start,
            },
            b'"' => self.string_token(start),
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && self.is_invalid_number() {
                    self.error_at("invalid number", start)
                } else {
                    self.number_token(start)
                }
            }
            b't' | b'f' | b'n' | b'i' | b'I' | b'N' | b'+' => {
                // The keywords must be lowercase and are matched as prefixes; whatever follows
                // them is scanned as the next token.
                let keywords: [(&[u8], TokenKind); 3] = [
                    (b"true", TokenKind::Boolean(true)),
                    (b"false", TokenKind::Boolean(false)),
                    (b"null", TokenKind::Null),
                ];
                for (word, kind) in keywords {
                    if self.rest_starts_with(word) {
                        self.pos += word.len();
                        return Token { kind, index: start };
                    }
                }
                if self.invalid_numbers && self.is_invalid_number() {
                    self.number_token(start)
                } else {
                    self.error_at("invalid token", start)
                }
            }
            _ => self.error_at("invalid token", start),
        }
    }

    /// Whether the text at the scan position is a number `strtod` may accept but strict JSON
    /// does not: a leading '+', a leading zero, hexadecimal, infinity or NaN.
    fn is_invalid_number(&self) -> bool {
        let mut at = self.pos;
        match self.byte(at) {
            b'+' => return true,
            b'-' => at += 1,
            _ => {}
        }
        let first = self.byte(at);
        if first == b'0' {
            let second = self.byte(at + 1);
            return second | 0x20 == b'x' || second.is_ascii_digit();
        }
        if first <= b'9' {
            return false;
        }
        let rest = self.data.get(at..).unwrap_or_default();
        starts_with_ignore_case(rest, b"inf") || starts_with_ignore_case(rest, b"nan")
    }

    fn number_token(&mut self, start: usize) -> Token {
        match parse_c_double(self.data, start) {
            Some((number, end)) => {
                self.pos = end;
                Token {
                    kind: TokenKind::Number(number),
                    index: start,
                }
            }
            None => self.error_at("invalid number", start),
        }
    }

    /// Scans a string starting at the opening quote into the scratch buffer. Bytes are copied
    /// as they are (control characters and invalid UTF-8 included); escapes are translated.
    fn string_token(&mut self, start: usize) -> Token {
        self.scratch.clear();
        self.pos = start + 1;
        loop {
            let rest = self.data.get(self.pos..).unwrap_or_default();
            let run = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b == 0)
                .unwrap_or(rest.len());
            self.scratch.extend_from_slice(&rest[..run]);
            self.pos += run;
            match self.byte(self.pos) {
                b'"' => break,
                0 => return self.error_at("unexpected end of string", self.pos),
                _ => {}
            }
            // A backslash: the position stays on it when an escape is rejected.
            let translated = match self.byte(self.pos + 1) {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b't' => b'\t',
                b'n' => b'\n',
                b'f' => 0x0c,
                b'r' => b'\r',
                b'u' => {
                    if !self.unicode_escape() {
                        return self.error_at("invalid unicode escape code", self.pos);
                    }
                    continue;
                }
                _ => return self.error_at("invalid escape code", self.pos),
            };
            self.scratch.push(translated);
            self.pos += 2;
        }
        self.pos += 1;
        Token {
            kind: TokenKind::String,
            index: start,
        }
    }

    /// Four hex digits at `at` as a UTF-16 code unit.
    fn hex4(&self, at: usize) -> Option<u32> {
        (at..at + 4).try_fold(0u32, |acc, i| {
            let digit = char::from(self.byte(i)).to_digit(16)?;
            Some(acc << 4 | digit)
        })
    }

    /// Translates the `\uXXXX` escape at the scan position (or a `\uXXXX\uXXXX` surrogate pair)
    /// to UTF-8 and moves past it. A lone or reversed surrogate is an error.
    fn unicode_escape(&mut self) -> bool {
        let Some(unit) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut length = 6;
        let mut code_point = unit;
        if unit & 0xf800 == 0xd800 {
            if unit & 0x400 != 0 {
                return false;
            }
            if self.byte(self.pos + 6) != b'\\' || self.byte(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xfc00 != 0xdc00 {
                return false;
            }
            code_point = (((unit & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
            length = 12;
        }
        push_utf8(&mut self.scratch, code_point);
        self.pos += length;
        true
    }
}

/// Appends the UTF-8 encoding of a code point up to U+10FFFF.
fn push_utf8(out: &mut Vec<u8>, code_point: u32) {
    // Only surrogates are not chars, and `unicode_escape` never produces one; this writes the
    // same generic three-byte form for them anyway.
    match char::from_u32(code_point) {
        Some(c) => {
            let mut buffer = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        }
        None => out.extend_from_slice(&[
            0xe0 | (code_point >> 12) as u8,
            0x80 | ((code_point >> 6) & 0x3f) as u8,
            0x80 | (code_point & 0x3f) as u8,
        ]),
    }
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Parses a number at `start` the way glibc's `strtod` does (without skipping white space,
/// which the scanner has already done): decimal and hexadecimal floating point, "inf",
/// "infinity", "nan" and "nan(...)", all with an optional sign. Returns the value and the
/// offset just past the number, or `None` if nothing could be converted. Out-of-range values
/// become infinity or zero, as `strtod`'s results do (the C library ignores `errno`).
fn parse_c_double(data: &[u8], start: usize) -> Option<(f64, usize)> {
    let byte = |at: usize| data.get(at).copied().unwrap_or(0);
    let mut at = start;
    let negative = match byte(at) {
        b'-' => {
            at += 1;
            true
        }
        b'+' => {
            at += 1;
            false
        }
        _ => false,
    };
    let signed = |value: f64| if negative { -value } else { value };
    let rest = data.get(at..).unwrap_or_default();

    if starts_with_ignore_case(rest, b"inf") {
        let length = if starts_with_ignore_case(rest, b"infinity") {
            8
        } else {
            3
        };
        return Some((signed(f64::INFINITY), at + length));
    }
    if starts_with_ignore_case(rest, b"nan") {
        let mut end = at + 3;
        if byte(end) == b'(' {
            let mut close = end + 1;
            while byte(close).is_ascii_alphanumeric() || byte(close) == b'_' {
                close += 1;
            }
            if byte(close) == b')' {
                end = close + 1;
            }
        }
        return Some((signed(f64::NAN), end));
    }
    if byte(at) == b'0' && byte(at + 1) | 0x20 == b'x' {
        if let Some((value, end)) = parse_hex_double(data, at + 2) {
            return Some((signed(value), end));
        }
        // "0x" without hex digits is the number 0 followed by an 'x'.
    }

    let mut end = at;
    let mut digits = 0usize;
    while byte(end).is_ascii_digit() {
        end += 1;
        digits += 1;
    }
    if byte(end) == b'.' {
        end += 1;
        while byte(end).is_ascii_digit() {
            end += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if byte(end) | 0x20 == b'e' {
        let mut exponent_end = end + 1;
        if matches!(byte(exponent_end), b'+' | b'-') {
            exponent_end += 1;
        }
        if byte(exponent_end).is_ascii_digit() {
            while byte(exponent_end).is_ascii_digit() {
                exponent_end += 1;
            }
            end = exponent_end;
        }
    }
    // The slice is plain ASCII in the syntax Rust's parser accepts, and Rust rounds correctly
    // like glibc does.
    let text = std::str::from_utf8(&data[start..end]).ok()?;
    let value: f64 = text.parse().ok()?;
    Some((value, end))
}

/// Parses the digits of a hexadecimal float after "0x": hex digits with an optional point and
/// an optional binary exponent ("p-3"). Returns the unsigned value and the end offset, or
/// `None` when there is no hex digit. The result is rounded to nearest, ties to even.
fn parse_hex_double(data: &[u8], start: usize) -> Option<(f64, usize)> {
    let byte = |at: usize| data.get(at).copied().unwrap_or(0);
    let hex = |at: usize| char::from(byte(at)).to_digit(16);
    let mut mantissa: u64 = 0;
    let mut exponent: i64 = 0;
    // Set when non-zero digits had to be dropped because the mantissa is full.
    let mut sticky = false;
    let mut any_digit = false;
    let mut at = start;
    let mut after_point = false;
    loop {
        if let Some(digit) = hex(at) {
            any_digit = true;
            if mantissa >> 60 == 0 {
                mantissa = mantissa << 4 | u64::from(digit);
                if after_point {
                    exponent -= 4;
                }
            } else {
                sticky |= digit != 0;
                if !after_point {
                    exponent += 4;
                }
            }
        } else if byte(at) == b'.' && !after_point {
            after_point = true;
        } else {
            break;
        }
        at += 1;
    }
    if !any_digit {
        return None;
    }
    if byte(at) | 0x20 == b'p' {
        let mut exp_at = at + 1;
        let negative = match byte(exp_at) {
            b'-' => {
                exp_at += 1;
                true
            }
            b'+' => {
                exp_at += 1;
                false
            }
            _ => false,
        };
        if byte(exp_at).is_ascii_digit() {
            let mut value: i64 = 0;
            while byte(exp_at).is_ascii_digit() {
                // Anything this large already overflows or underflows completely.
                value = (value * 10 + i64::from(byte(exp_at) - b'0')).min(1 << 20);
                exp_at += 1;
            }
            exponent += if negative { -value } else { value };
            at = exp_at;
        }
    }
    Some((scale_binary(mantissa, exponent, sticky), at))
}

/// Computes `mantissa * 2^exponent` rounded to the nearest double (ties to even), where
/// `sticky` says that the true mantissa has further non-zero bits below the ones given.
fn scale_binary(mantissa: u64, exponent: i64, sticky: bool) -> f64 {
    if mantissa == 0 {
        return 0.0;
    }
    let bits = i64::from(64 - mantissa.leading_zeros());
    // The exponent of the leading bit decides how many bits a double can keep: 53 for
    // normal numbers, fewer for subnormals.
    let top = exponent + bits - 1;
    if top > 1023 {
        return f64::INFINITY;
    }
    let keep = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep < 0 {
        return 0.0;
    }
    let drop = bits - keep;
    let (mut kept, mut scale) = (mantissa, exponent);
    if drop > 0 {
        let drop_u = drop as u32;
        kept = if drop_u >= 64 { 0 } else { mantissa >> drop_u };
        let remainder = if drop_u >= 64 {
            mantissa
        } else {
            mantissa & ((1u64 << drop_u) - 1)
        };
        let half = 1u128 << (drop_u - 1);
        let remainder = u128::from(remainder);
        let round_up = remainder > half || (remainder == half && (sticky || kept & 1 == 1));
        if round_up {
            kept += 1;
        }
        scale += drop;
    }
    // `kept` has at most 54 bits, so it converts exactly, and multiplying by powers of two
    // in steps is exact until the final, already rounded, result.
    let mut value = kept as f64;
    while scale != 0 {
        let step = scale.clamp(-1000, 1000);
        value *= f64::from_bits(((1023 + step) as u64) << 52);
        scale -= step;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        register(&lua).unwrap();
        lua
    }

    fn eval_string(lua: &Lua, code: &str) -> Vec<u8> {
        let value: LuaString = lua.load(code).eval().unwrap();
        value.as_bytes().to_vec()
    }

    fn encode(lua: &Lua, expr: &str) -> String {
        let bytes = eval_string(lua, &format!("return cjson.encode({expr})"));
        String::from_utf8(bytes).unwrap()
    }

    /// The message of the innermost error raised by `code`, with its position.
    fn located_error_of(lua: &Lua, code: &str) -> String {
        let mut error = lua.load(code).set_name("=t").exec().unwrap_err();
        while let mlua::Error::CallbackError { cause, .. } = error {
            error = (*cause).clone();
        }
        match error {
            mlua::Error::RuntimeError(message) => message,
            other => panic!("unexpected error {other:?}"),
        }
    }

    /// The message of the innermost error raised by `code` (a one-line chunk).
    fn error_of(lua: &Lua, code: &str) -> String {
        let message = located_error_of(lua, code);
        match message.strip_prefix("t:1: ") {
            Some(rest) => rest.to_string(),
            None => panic!("no position in {message:?}"),
        }
    }

    fn decode_error(lua: &Lua, json: &str) -> String {
        lua.globals().set("input", json).unwrap();
        error_of(lua, "cjson.decode(input)")
    }

    #[test]
    fn errors_carry_the_callers_position_and_name() {
        let lua = lua();
        assert_eq!(
            located_error_of(&lua, "\n\ncjson.encode({[true] = 1})"),
            "t:3: Cannot serialise boolean: table key must be a number or string"
        );
        // Called from C (pcall), there is no Lua position, and no name for the function.
        assert_eq!(
            located_error_of(&lua, "local ok, e = pcall(cjson.decode, '[') error(e, 0)"),
            "Expected value but found T_END at character 2"
        );
        assert_eq!(
            located_error_of(&lua, "local ok, e = pcall(cjson.encode) error(e, 0)"),
            "bad argument #1 to '?' (expected 1 argument)"
        );
        assert_eq!(
            error_of(&lua, "local json = cjson json.encode_max_depth(0)"),
            "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"
        );
        assert_eq!(
            error_of(&lua, "cjson:encode(1)"),
            "calling 'encode' on bad self (expected 1 argument)"
        );
    }

    #[test]
    fn module_fields() {
        let lua = lua();
        assert_eq!(eval_string(&lua, "return cjson._NAME"), b"cjson");
        assert_eq!(eval_string(&lua, "return cjson._VERSION"), b"2.1.0");
        let null: Value = lua.load("return cjson.null").eval().unwrap();
        assert_eq!(null, Value::NULL);
    }

    #[test]
    fn encodes_scalars() {
        let lua = lua();
        assert_eq!(encode(&lua, "nil"), "null");
        assert_eq!(encode(&lua, "cjson.null"), "null");
        assert_eq!(encode(&lua, "true"), "true");
        assert_eq!(encode(&lua, "false"), "false");
        assert_eq!(encode(&lua, "'abc'"), "\"abc\"");
        assert_eq!(encode(&lua, "{}"), "{}");
    }

    #[test]
    fn formats_numbers_like_printf() {
        let lua = lua();
        let cases = [
            ("100", "100"),
            ("-5", "-5"),
            ("0.1", "0.1"),
            ("1/3", "0.33333333333333"),
            ("-2/3", "-0.66666666666667"),
            ("1e15", "1e+15"),
            ("1e14", "1e+14"),
            ("99999999999999", "99999999999999"),
            ("2^53", "9.007199254741e+15"),
            ("0.0001", "0.0001"),
            ("0.00001", "1e-05"),
            ("123456.789", "123456.789"),
            ("1e300", "1e+300"),
            ("3.14159265358979", "3.1415926535898"),
            ("5e-324", "4.9406564584125e-324"),
        ];
        for (expr, want) in cases {
            assert_eq!(encode(&lua, expr), want, "{expr}");
        }
        let mut out = Vec::new();
        format_g(&mut out, -0.0, 14);
        assert_eq!(out, b"-0");
        for (number, precision, want) in [
            (2.5, 1, "2"),
            (0.125, 2, "0.12"),
            (1234.5, 3, "1.23e+03"),
            (f64::INFINITY, 14, "inf"),
            (f64::NEG_INFINITY, 14, "-inf"),
        ] {
            let mut out = Vec::new();
            format_g(&mut out, number, precision);
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }

    #[test]
    fn number_precision_option() {
        let lua = lua();
        let old: i64 = lua
            .load("return cjson.encode_number_precision()")
            .eval()
            .unwrap();
        assert_eq!(old, 14);
        let set: i64 = lua
            .load("return cjson.encode_number_precision(3)")
            .eval()
            .unwrap();
        assert_eq!(set, 3);
        assert_eq!(encode(&lua, "3.14159"), "3.14");
        assert_eq!(encode(&lua, "{[2.5]=1}"), "{\"2.5\":1}");
        assert_eq!(encode(&lua, "12345"), "1.23e+04");
        assert_eq!(
            error_of(&lua, "cjson.encode_number_precision(15)"),
            "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_number_precision({})"),
            "bad argument #1 to 'encode_number_precision' (number expected, got table)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_number_precision(1, 2)"),
            "bad argument #2 to 'encode_number_precision' (found too many arguments)"
        );
    }

    #[test]
    fn escapes_strings() {
        let lua = lua();
        let encoded = eval_string(
            &lua,
            r#"return cjson.encode("a/b\"c\\d\n\r\t\b\f\0\1\31\127é ~")"#,
        );
        assert_eq!(
            String::from_utf8(encoded).unwrap(),
            r#""a\/b\"c\\d\n\r\t\b\f\u0000\u0001\u001f\u007fé ~""#
        );
        // Bytes that are not UTF-8 pass through unchanged.
        assert_eq!(
            eval_string(&lua, r#"return cjson.encode("\255\128")"#),
            b"\"\xff\x80\""
        );
        assert_eq!(
            eval_string(&lua, r#"return cjson.encode("\11")"#),
            b"\"\\u000b\""
        );
    }

    #[test]
    fn encodes_arrays_and_objects() {
        let lua = lua();
        assert_eq!(
            encode(&lua, "{1,2,3,'sss',{foo='bar'}}"),
            r#"[1,2,3,"sss",{"foo":"bar"}]"#
        );
        assert_eq!(encode(&lua, "{{{}}}"), "[[{}]]");
        assert_eq!(encode(&lua, "{[1]=1,[3]=3}"), "[1,null,3]");
        assert_eq!(encode(&lua, "{[1]=cjson.null}"), "[null]");
        assert_eq!(
            encode(&lua, "{a={b={c={1,2}}}}"),
            r#"{"a":{"b":{"c":[1,2]}}}"#
        );
        assert_eq!(encode(&lua, "{[1.5]='x'}"), r#"{"1.5":"x"}"#);
        assert_eq!(encode(&lua, "{[0]='x'}"), r#"{"0":"x"}"#);
        assert_eq!(encode(&lua, "{[-1]='x'}"), r#"{"-1":"x"}"#);
        assert_eq!(encode(&lua, "{[3e9]='x'}"), r#"{"3000000000":"x"}"#);
        // Mixed keys make an object; the key order is the table's traversal order.
        let round: bool = lua
            .load(
                r#"
                local t = cjson.decode(cjson.encode({10, 20, x = {1}, y = "z"}))
                return t["1"] == 10 and t["2"] == 20 and t.x[1] == 1 and t.y == "z"
                "#,
            )
            .eval()
            .unwrap();
        assert!(round);
        // The order of a nested object matches Lua's own `pairs`.
        let same: bool = lua
            .load(
                r#"
                local t = {}
                for i = 1, 50 do t["k" .. i] = (i % 3 == 0) and {i} or i end
                local parts = {}
                for k, v in pairs(t) do
                    parts[#parts + 1] = '"' .. k .. '":' .. (type(v) == "table" and "[" .. v[1] .. "]" or v)
                end
                return cjson.encode(t) == "{" .. table.concat(parts, ",") .. "}"
                "#,
            )
            .eval()
            .unwrap();
        assert!(same);
    }

    #[test]
    fn encode_errors() {
        let lua = lua();
        assert_eq!(
            error_of(&lua, "cjson.encode({[true]=1})"),
            "Cannot serialise boolean: table key must be a number or string"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode({a=print})"),
            "Cannot serialise function: type not supported"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode(coroutine.create(function() end))"),
            "Cannot serialise thread: type not supported"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode()"),
            "bad argument #1 to 'encode' (expected 1 argument)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode(1, 2)"),
            "bad argument #1 to 'encode' (expected 1 argument)"
        );
    }

    #[test]
    fn sparse_arrays() {
        let lua = lua();
        assert_eq!(
            error_of(&lua, "cjson.encode({[1]=1,[20]=2})"),
            "Cannot serialise table: excessively sparse array"
        );
        // Up to `safe` (10) any index is fine.
        assert_eq!(
            encode(&lua, "{[10]=1}"),
            "[null,null,null,null,null,null,null,null,null,1]"
        );
        // At most `ratio` times as many slots as items is fine.
        assert_eq!(
            encode(&lua, "{[1]=1,[2]=2,[3]=3,[4]=4,[5]=5,[6]=6,[12]=12}"),
            "[1,2,3,4,5,6,null,null,null,null,null,12]"
        );
        let (convert, ratio, safe): (bool, i64, i64) = lua
            .load("return cjson.encode_sparse_array()")
            .eval()
            .unwrap();
        assert_eq!((convert, ratio, safe), (false, 2, 10));
        let (convert, ratio, safe): (bool, i64, i64) = lua
            .load("return cjson.encode_sparse_array(true)")
            .eval()
            .unwrap();
        assert_eq!((convert, ratio, safe), (true, 2, 10));
        assert_eq!(encode(&lua, "{[20]=2}"), r#"{"20":2}"#);
        lua.load("cjson.encode_sparse_array(false, 0)")
            .exec()
            .unwrap();
        assert_eq!(encode(&lua, "{[12]=1}").len(), "[".len() + 11 * 5 + 1 + 1);
        assert_eq!(
            error_of(&lua, "cjson.encode_sparse_array(false, -1)"),
            "bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_sparse_array('maybe')"),
            "bad argument #1 to 'encode_sparse_array' (invalid option 'maybe')"
        );
    }

    #[test]
    fn encode_depth_limits() {
        let lua = lua();
        let nested = |depth: usize| {
            format!("local t = {{}} local c = t for i = 2, {depth} do c[1] = {{}} c = c[1] end")
        };
        let ok: String = lua
            .load(format!("{} return cjson.encode(t)", nested(1000)))
            .eval()
            .unwrap();
        assert_eq!(ok.len(), 999 * 2 + 2);
        assert_eq!(
            error_of(&lua, &format!("{} cjson.encode(t)", nested(1001))),
            "Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(
            error_of(&lua, "local t = {} t[1] = t cjson.encode(t)"),
            "Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(
            error_of(&lua, "local t = {} t.a = t cjson.encode(t)"),
            "Cannot serialise, excessive nesting (1001)"
        );
        // With the limit raised, Lua's C stack limit takes over: an object level holds two
        // stack slots and an array level one.
        lua.load("cjson.encode_max_depth(100000)").exec().unwrap();
        assert_eq!(
            error_of(&lua, "local t = {} t.a = t cjson.encode(t)"),
            "Cannot serialise, excessive nesting (4000)"
        );
        assert_eq!(
            error_of(&lua, "local t = {} t[1] = t cjson.encode(t)"),
            "Cannot serialise, excessive nesting (7998)"
        );
        lua.load("cjson.encode_max_depth(1)").exec().unwrap();
        assert_eq!(encode(&lua, "{1}"), "[1]");
        assert_eq!(
            error_of(&lua, "cjson.encode({{}})"),
            "Cannot serialise, excessive nesting (2)"
        );
    }

    #[test]
    fn invalid_numbers_when_encoding() {
        let lua = lua();
        assert_eq!(
            error_of(&lua, "cjson.encode({num1=0/0})"),
            "Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode({[1/0]=1})"),
            "Cannot serialise number: must not be NaN or Inf"
        );
        let on: bool = lua
            .load("return cjson.encode_invalid_numbers(true)")
            .eval()
            .unwrap();
        assert!(on);
        assert_eq!(encode(&lua, "{0/0, 1/0, -1/0}"), "[nan,inf,-inf]");
        let mode: String = lua
            .load("return cjson.encode_invalid_numbers('null')")
            .eval()
            .unwrap();
        assert_eq!(mode, "null");
        assert_eq!(encode(&lua, "{0/0, 1/0, -1/0, 1}"), "[null,null,null,1]");
        let off: bool = lua
            .load("return cjson.encode_invalid_numbers('off')")
            .eval()
            .unwrap();
        assert!(!off);
    }

    #[test]
    fn decodes_values() {
        let lua = lua();
        let joined: String = lua
            .load(r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#)
            .eval()
            .unwrap();
        assert_eq!(joined, "0 -5000 -1 0.0003 1023.2 0");
        let (a, b): (String, String) = lua
            .load(r#"local d = cjson.decode('{"keya": "a", "keyb": "b"}') return d.keya, d.keyb"#)
            .eval()
            .unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("a", "b"));
        let ok: bool = lua
            .load(
                r#"
                local t = cjson.decode('[1,2,3,"sss",{"foo":"bar"}]')
                return #t == 5 and t[1] == 1 and t[4] == "sss" and t[5].foo == "bar"
                    and cjson.decode("null") == cjson.null
                    and cjson.decode(" true ") == true and cjson.decode("false") == false
                    and cjson.decode('{"a":null}').a == cjson.null
                    and next(cjson.decode("{}")) == nil and next(cjson.decode("[ ]")) == nil
                    and cjson.decode('{"a":1,"a":2}').a == 2
                    and cjson.decode(123) == 123
                    and cjson.decode("[[[1]]]")[1][1][1] == 1
                    and cjson.decode('"\\"\\\\\\/\\b\\f\\n\\r\\t"') == "\"\\/\b\f\n\r\t"
                "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
        // Control characters and arbitrary bytes inside strings are accepted as they are.
        assert_eq!(
            eval_string(&lua, "return cjson.decode('\"a\\1\\255\"')"),
            b"a\x01\xff"
        );
        // A NUL byte ends the text like the C string it is in the library.
        assert_eq!(
            eval_string(&lua, "return cjson.encode(cjson.decode('[1]\\0junk'))"),
            b"[1]"
        );
    }

    #[test]
    fn decodes_unicode_escapes() {
        let lua = lua();
        assert_eq!(
            eval_string(
                &lua,
                r#"return cjson.decode('"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\u0000"')"#
            ),
            "Aé€😀\0".as_bytes()
        );
        assert_eq!(
            decode_error(&lua, r#""\ud800""#),
            "Expected value but found invalid unicode escape code at character 2"
        );
        assert_eq!(
            decode_error(&lua, r#""ab\udc00\ud800""#),
            "Expected value but found invalid unicode escape code at character 4"
        );
        assert_eq!(
            decode_error(&lua, r#""\ud800\u0041""#),
            "Expected value but found invalid unicode escape code at character 2"
        );
        assert_eq!(
            decode_error(&lua, r#""\u12""#),
            "Expected value but found invalid unicode escape code at character 2"
        );
        assert_eq!(
            decode_error(&lua, r#"["\x"]"#),
            "Expected value but found invalid escape code at character 3"
        );
    }

    #[test]
    fn decode_errors() {
        let lua = lua();
        let cases = [
            ("", "Expected value but found T_END at character 1"),
            ("x", "Expected value but found invalid token at character 1"),
            (
                "  nil",
                "Expected value but found invalid token at character 3",
            ),
            ("[1,]", "Expected value but found T_ARR_END at character 4"),
            (
                "[1 2]",
                "Expected comma or array end but found T_NUMBER at character 4",
            ),
            (
                "[truex]",
                "Expected comma or array end but found invalid token at character 6",
            ),
            (
                "{\"a\" 1}",
                "Expected colon but found T_NUMBER at character 6",
            ),
            (
                "{1:2}",
                "Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "{\"a\":1,}",
                "Expected object key string but found T_OBJ_END at character 8",
            ),
            (
                "{\"a\":1 ]",
                "Expected comma or object end but found T_ARR_END at character 8",
            ),
            (
                "\"abc",
                "Expected value but found unexpected end of string at character 5",
            ),
            (
                "[1] x",
                "Expected the end but found invalid token at character 5",
            ),
            (
                "[1] [",
                "Expected the end but found T_ARR_BEGIN at character 5",
            ),
            (
                "-",
                "Expected value but found invalid number at character 1",
            ),
            (
                "-x",
                "Expected value but found invalid number at character 1",
            ),
            (
                "1.5.3",
                "Expected the end but found invalid token at character 4",
            ),
            (
                "1e",
                "Expected the end but found invalid token at character 2",
            ),
            (":", "Expected value but found T_COLON at character 1"),
        ];
        for (json, want) in cases {
            assert_eq!(decode_error(&lua, json), want, "{json}");
        }
        assert_eq!(
            decode_error(&lua, "[\0\0]"),
            "JSON parser does not support UTF-16 or UTF-32"
        );
        assert_eq!(
            error_of(&lua, "cjson.decode()"),
            "bad argument #1 to 'decode' (expected 1 argument)"
        );
        assert_eq!(
            error_of(&lua, "cjson.decode({})"),
            "bad argument #1 to 'decode' (string expected, got table)"
        );
    }

    #[test]
    fn decode_depth_limits() {
        let lua = lua();
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        lua.globals().set("input", deep(1000)).unwrap();
        lua.load("cjson.decode(input)").exec().unwrap();
        assert_eq!(
            decode_error(&lua, &deep(1001)),
            "Found too many nested data structures (1001) at character 1001"
        );
        lua.load("cjson.decode_max_depth(1)").exec().unwrap();
        assert_eq!(
            decode_error(&lua, r#"{"obj": {"array": [1,2,3,4]}}"#),
            "Found too many nested data structures (2) at character 9"
        );
        lua.load("cjson.decode_max_depth(1000000)").exec().unwrap();
        // Lua's C stack limit: an array level holds one slot, an object level two.
        assert_eq!(
            decode_error(&lua, &deep(9000)),
            "Found too many nested data structures (7999) at character 7999"
        );
        let objects = r#"{"a":"#.repeat(5000);
        assert_eq!(
            decode_error(&lua, &objects),
            "Found too many nested data structures (4000) at character 19996"
        );
    }

    #[test]
    fn decodes_numbers_like_strtod() {
        let lua = lua();
        let check = |json: &str, want: f64| {
            lua.globals().set("input", json).unwrap();
            let got: f64 = lua.load("return cjson.decode(input)").eval().unwrap();
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{json}: {got} != {want}"
            );
        };
        check("0", 0.0);
        check("-0.5", -0.5);
        check("1E3", 1000.0);
        check("2.", 2.0);
        check("-.5", -0.5);
        check("007", 7.0);
        check("1e400", f64::INFINITY);
        check("-1e400", f64::NEG_INFINITY);
        check("1e-400", 0.0);
        check("0.1", 0.1);
        check("123456789012345678901234567890", 1.2345678901234568e29);
        check("0x10", 16.0);
        check("-0X1f", -31.0);
        check("0x1.8p1", 3.0);
        check("0x.8", 0.5);
        check("0x1p-1074", 5e-324);
        check("0x1p-1075", 0.0);
        check("0x1.8p-1074", 1e-323);
        check("0x1fffffffffffff", 9007199254740991.0);
        check("0x20000000000001", 9007199254740992.0);
        check("0x20000000000003", 9007199254740996.0);
        check("0x1p1024", f64::INFINITY);
        check("+1", 1.0);
        check("inf", f64::INFINITY);
        check("-Infinity", f64::NEG_INFINITY);
        check("NaN", f64::NAN);
        check("nan(123)", f64::NAN);
        assert_eq!(
            decode_error(&lua, "[0x]"),
            "Expected comma or array end but found invalid token at character 3"
        );
        assert_eq!(
            decode_error(&lua, "[infinit]"),
            "Expected comma or array end but found invalid token at character 5"
        );
        let on: bool = lua
            .load("return cjson.decode_invalid_numbers(false)")
            .eval()
            .unwrap();
        assert!(!on);
        for (json, want) in [
            (
                "0x10",
                "Expected value but found invalid number at character 1",
            ),
            (
                "-inf",
                "Expected value but found invalid number at character 1",
            ),
            (
                "01",
                "Expected value but found invalid number at character 1",
            ),
            (
                "+1",
                "Expected value but found invalid token at character 1",
            ),
            (
                "nan",
                "Expected value but found invalid token at character 1",
            ),
            (
                "Infinity",
                "Expected value but found invalid token at character 1",
            ),
        ] {
            assert_eq!(decode_error(&lua, json), want, "{json}");
        }
        check("-0.25e1", -2.5);
    }

    #[test]
    fn new_makes_independent_tables() {
        let lua = lua();
        let ok: bool = lua
            .load(
                r#"
                local other = cjson.new()
                other.encode_max_depth(1)
                local a = pcall(other.encode, {{}})
                local b = pcall(cjson.encode, {{}})
                return a == false and b == true and other.null == cjson.null
                    and other._VERSION == "2.1.0" and other.new ~= nil
                "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    #[test]
    fn keep_buffer_option() {
        let lua = lua();
        let ok: bool = lua
            .load(
                r#"
                return cjson.encode_keep_buffer() == true
                    and cjson.encode_keep_buffer(false) == false
                    and cjson.encode({1}) == "[1]"
                    and cjson.encode_keep_buffer("on") == true
                "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    /// The "EVAL - JSON smoke test" script from Redis' test suite.
    #[test]
    fn redis_smoke_test() {
        let lua = lua();
        lua.load(
            r#"
            local some_map = {
                s1="Some string",
                n1=100,
                a1={"Some","String","Array"},
                nil1=nil,
                b1=true,
                b2=false}
            local encoded = cjson.encode(some_map)
            local decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))

            cjson.encode_keep_buffer(false)
            encoded = cjson.encode(some_map)
            decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))

            -- Table with numeric keys
            local table1 = {one="one", [1]="one"}
            encoded = cjson.encode(table1)
            decoded = cjson.decode(encoded)
            assert(decoded["one"] == table1["one"])
            assert(decoded["1"] == table1[1])

            -- Array
            local array1 = {[1]="one", [2]="two"}
            encoded = cjson.encode(array1)
            decoded = cjson.decode(encoded)
            assert(table.concat(array1) == table.concat(decoded))

            -- Invalid keys
            local invalid_map = {}
            invalid_map[false] = "false"
            local ok, encoded = pcall(cjson.encode, invalid_map)
            assert(ok == false)

            -- Max depth
            cjson.encode_max_depth(1)
            ok, encoded = pcall(cjson.encode, some_map)
            assert(ok == false)

            cjson.decode_max_depth(1)
            ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
            assert(ok == false)

            -- Invalid numbers
            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == false)
            cjson.encode_invalid_numbers(true)
            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == true)

            -- Restore defaults
            cjson.decode_max_depth(1000)
            cjson.encode_max_depth(1000)
            cjson.encode_invalid_numbers(false)
            "#,
        )
        .exec()
        .unwrap();
    }

    #[test]
    fn round_trips() {
        let lua = lua();
        let ok: bool = lua
            .load(
                r#"
                local s = ""
                for i = 0, 255 do s = s .. string.char(i) end
                local value = {s, 1.5, -3, {x = {true, false, cjson.null}}, "/\\\""}
                local back = cjson.decode(cjson.encode(value))
                return back[1] == s and back[2] == 1.5 and back[3] == -3
                    and back[4].x[1] == true and back[4].x[2] == false
                    and back[4].x[3] == cjson.null and back[5] == "/\\\""
                "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    /// Values of every shape the encoder knows, for the bound checks below.
    const SHAPES: &[&str] = &[
        "1",
        "'a\\n\"/'",
        "{}",
        "{1, 2, 3}",
        "{1, nil, 3}",
        "{[1] = 1, [4] = 4}",
        "{[20] = 1}",
        "{a = 1, [2.5] = 'x', [3] = true}",
        "{x = {1, {y = {}}}, z = 'long string \\1'}",
        "(function() local a = {1} return {a, a, {a, {a}}} end)()",
        "(function() local a = {} for i = 1, 12 do a = {a, a} end return a end)()",
        "(function() local a = {} for i = 1, 12 do a = {x = a, y = a} end return a end)()",
        "(function() local t = {} for i = 1, 300 do t[i] = i * 1.5 end return t end)()",
    ];

    #[test]
    fn the_measure_never_counts_more_than_the_encoding() {
        let lua = lua();
        let next: Function = lua.globals().raw_get("next").unwrap();
        for sparse in [
            "",
            "cjson.encode_sparse_array(true)",
            "cjson.encode_sparse_array(false, 0)",
        ] {
            lua.load(sparse).exec().unwrap();
            let cfg = Config {
                sparse_convert: u8::from(!sparse.is_empty() && sparse.contains("true")),
                sparse_ratio: if sparse.contains(", 0") { 0 } else { 2 },
                ..Config::default()
            };
            for shape in SHAPES {
                let value: Value = lua.load(format!("return {shape}")).eval().unwrap();
                let encoder = Encoder {
                    written: std::collections::HashMap::new(),
                    lua: &lua,
                    cfg,
                    next: &next,
                    out: Vec::new(),
                    root: &value,
                    budget: Budget::default(),
                };
                let bound = encoder.measure(&value, 1, &mut Memo::new());
                let encoded: Option<LuaString> = lua
                    .load(format!(
                        "local ok, s = pcall(cjson.encode, {shape}) return ok and s or nil"
                    ))
                    .eval()
                    .unwrap();
                if let Some(encoded) = encoded {
                    let len = encoded.as_bytes().len();
                    assert!(bound <= len, "{sparse} {shape}: {bound} > {len}");
                    assert!(bound > 0, "{shape}");
                }
            }
        }
        lua.load("cjson.encode_sparse_array(false, 2, 10)")
            .exec()
            .unwrap();
    }

    #[test]
    fn encodings_past_the_bound_fail_fast() {
        let lua = lua();
        for shape in [
            "(function() local a = {} for i = 1, 40 do a = {a, a} end return a end)()",
            "(function() local a = {} for i = 1, 40 do a = {x = a, y = a} end return a end)()",
            "(function() local s = string.rep('x', 1000000) local t = {} \
             for i = 1, 1000 do t[i] = s end return t end)()",
        ] {
            let started = std::time::Instant::now();
            assert_eq!(
                error_of(&lua, &format!("cjson.encode({shape})")),
                "Cannot serialise, output exceeds 512 MB"
            );
            assert!(started.elapsed().as_secs() < 5);
        }
        lua.load("cjson.encode_sparse_array(false, 0)")
            .exec()
            .unwrap();
        assert_eq!(
            error_of(&lua, "cjson.encode({[1e9] = 1})"),
            "Cannot serialise, output exceeds 512 MB"
        );
    }

    #[test]
    fn shared_tables_are_copied_as_the_walk_writes_them() {
        let lua = lua();
        lua.load(
            "function clone(t)
               if type(t) ~= 'table' then return t end
               local c = {} for k, v in pairs(t) do c[k] = clone(v) end return c
             end
             function shared()
               local a = {'leaf', 1.5, true, {k = 'v'}}
               for i = 1, 9 do a = {a, {a, 'x'}, {k = a}} end
               return a
             end",
        )
        .exec()
        .unwrap();
        assert_eq!(encode(&lua, "shared()"), encode(&lua, "clone(shared())"));
        // 2^20 copies of a table, as redis-server 7.0.15 encodes them, in well under a second
        // (walked one by one: ten seconds in a debug build).
        let started = std::time::Instant::now();
        let json = eval_string(
            &lua,
            "local a = {} for i = 1, 20 do a = {a, {a, 'x'}} end return cjson.encode(a)",
        );
        assert_eq!(json.len(), 11_534_327);
        assert_eq!(
            crate::scripting::sandbox::sha1_hex(&json),
            "7157f0e8e499022295b05440080bccee4716fc31"
        );
        assert!(started.elapsed().as_secs() < 2, "{:?}", started.elapsed());
        // A table met again deeper is only copied where its walk would not fail.
        let deep = |levels: usize| {
            format!("(function() local a = {{}} for i = 1, {levels} do a = {{a}} end return {{a, {{a}}}} end)()")
        };
        assert_eq!(encode(&lua, &deep(997)).len(), 3997);
        assert_eq!(
            error_of(&lua, &format!("cjson.encode({})", deep(998))),
            "Cannot serialise, excessive nesting (1001)"
        );
    }
}
