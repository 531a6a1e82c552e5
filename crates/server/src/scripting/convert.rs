//! Conversions between replies and Lua values, as Redis' `redisProtocolToLuaType` and
//! `luaReplyToRedisReply` do them.
//!
//! A command's reply reaches Lua (`raw.rs` pushes it) as: integer → number; bulk → string; array → table;
//! status → `{ok=...}`; error → `{err=...}`; null → false (RESP2) or nil (RESP3); and in
//! RESP3 map → `{map={...}}`, set → `{set={member=true}}`, double → `{double=n}`, boolean →
//! boolean, big number → `{big_number=...}`, verbatim → `{verbatim_string={...}}`.
//! A script's return value goes back the other way; a number is truncated to an integer, a
//! table is an array up to its first nil unless it has one of the fields above. A value too
//! deep (a table that contains itself) or too large (shared subtables, see `bound.rs`) is
//! answered with one error in its place.

use latch_protocol::Reply;
use mlua::{Function, Lua, LuaString, Table, Value};

use super::bound::{Budget, Memo, TooLarge, MAX_OUTPUT, MEASURE_DEPTH};

/// Deepest nesting of tables a reply may have (a table that contains itself would
/// otherwise never end). Redis' bound is the Lua stack (its error, "reached lua stack
/// limit", is the one given here), but it writes that error in place of the value and goes
/// on with its siblings: `t[1] = t t[2] = t` then takes 2^depth steps. Here the whole reply
/// is that one error.
const MAX_DEPTH: usize = 1000;

/// The error fields of a Lua error table (Redis' `luaExtractErrorInformation`).
#[derive(Debug, Default)]
pub struct ErrorInfo {
    pub message: Option<Vec<u8>>,
    pub source: Option<Vec<u8>>,
    pub line: Option<Vec<u8>>,
    pub ignore_stats: bool,
}

pub fn error_info(table: &Table) -> ErrorInfo {
    let text = |field: &str| -> Option<Vec<u8>> {
        match table.raw_get::<Value>(field).ok()? {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Integer(n) => Some(n.to_string().into_bytes()),
            Value::Number(n) => Some(super::sandbox::lua_number_text(n).into_bytes()),
            _ => None,
        }
    };
    ErrorInfo {
        message: text("err"),
        source: text("source"),
        line: text("line"),
        ignore_stats: matches!(
            table.raw_get::<Value>("ignore_error_stats_update"),
            Ok(Value::Boolean(true))
        ),
    }
}

/// Writes a script's return value as a reply. `script_resp` is the protocol the script
/// chose (it decides how booleans go out in RESP2). A value nested too deep, or whose reply
/// would pass `bound::MAX_OUTPUT`, is answered with a single error instead, whatever of it
/// was written dropped.
pub fn lua_to_reply(lua: &Lua, value: &Value, reply: &mut Reply, script_resp: u8) {
    if let Some(()) = write_scalar(value, reply, script_resp) {
        return;
    }
    let start = reply.len();
    let mut writer = Writer {
        lua,
        written: std::collections::HashMap::new(),
        next: None,
        reply,
        start,
        resp: script_resp,
        root: value,
        budget: Budget::default(),
    };
    if let Err(abort) = writer.write() {
        reply.truncate(start);
        reply.error(match abort {
            Abort::Depth => b"ERR reached lua stack limit",
            Abort::TooLarge => b"ERR reply exceeds the maximum size a script may return (512 MB)",
        });
    }
}

/// Why a reply was given up.
enum Abort {
    /// Nested past [`MAX_DEPTH`], or out of Lua references (as Redis runs out of Lua stack).
    Depth,
    TooLarge,
}

impl From<TooLarge> for Abort {
    fn from(_: TooLarge) -> Abort {
        Abort::TooLarge
    }
}

impl From<mlua::Error> for Abort {
    fn from(_: mlua::Error) -> Abort {
        Abort::Depth
    }
}

/// A table being written, and where its walk stands. The walk keeps these on a stack of
/// its own rather than recursing: a thousand levels of native recursion can overflow a
/// worker thread's stack (a debug build's frames are large). Each holds three Lua
/// references at most, well within mlua's limit (about 8000) at the deepest.
enum Open {
    /// Items `next..=len` are still to be written.
    Array {
        table: Table,
        next: usize,
        len: usize,
    },
    /// The entries after `key` (nil: all) are still to be written; `value` is the value of
    /// the entry whose key was just written.
    Map {
        table: Table,
        key: Value,
        value: Option<Value>,
    },
    Set {
        table: Table,
        key: Value,
    },
}

/// What [`Writer::open`] did with a table.
enum Opened {
    /// Wrote it whole (an error when `error`).
    Whole { error: bool },
    /// Wrote its header; its items are to be walked.
    Items(Open),
}

/// A table whose reply was written whole: where it is in the reply, how many levels below
/// it the walk went, and whether it holds an error (whose statistics a copy would miss).
/// Met again where it still fits under [`MAX_DEPTH`], its reply is the same bytes (nothing
/// runs during the walk that could change a table), which are copied: a table of shared
/// subtables then costs what its reply is, not a walk of every branch.
#[derive(Clone, Copy)]
struct Written {
    start: usize,
    end: usize,
    depth_below: usize,
    errors: bool,
}

impl Written {
    fn leaf(start: usize, end: usize, errors: bool) -> Written {
        Written {
            start,
            end,
            depth_below: 0,
            errors,
        }
    }
}

/// An open table's [`Written`] in the making.
struct Mark {
    table: *const std::ffi::c_void,
    start: usize,
    depth_below: usize,
    errors: bool,
}

impl Mark {
    /// A value below the innermost open table was written, whose walk went `depth_below`
    /// levels below it.
    fn child(marks: &mut [Mark], depth_below: usize, errors: bool) {
        if let Some(mark) = marks.last_mut() {
            mark.depth_below = mark.depth_below.max(depth_below + 1);
            mark.errors |= errors;
        }
    }
}

struct Writer<'a> {
    lua: &'a Lua,
    /// The tables written whole so far.
    written: std::collections::HashMap<*const std::ffi::c_void, Written>,
    /// Lua's own `next`, to walk maps and sets one entry at a time (got when first needed).
    next: Option<Function>,
    reply: &'a mut Reply,
    /// Where the reply starts in `reply`.
    start: usize,
    resp: u8,
    root: &'a Value,
    budget: Budget,
}

impl Writer<'_> {
    fn write(&mut self) -> Result<(), Abort> {
        let mut stack: Vec<Open> = Vec::new();
        // Beside each open table: where its reply starts and how far below it the walk went.
        let mut marks: Vec<Mark> = Vec::new();
        let mut pending = Some(self.root.clone());
        loop {
            if let Some(value) = pending.take() {
                let depth = stack.len();
                if depth > MAX_DEPTH {
                    return Err(Abort::Depth);
                }
                if write_scalar(&value, self.reply, self.resp).is_some() {
                    Mark::child(&mut marks, 0, false);
                } else if let Value::Table(table) = value {
                    let pointer = table.to_pointer();
                    let copied = match self.written.get(&pointer) {
                        Some(&done) if !done.errors && depth + done.depth_below <= MAX_DEPTH => {
                            self.copy(done.start, done.end)?;
                            Some(done.depth_below)
                        }
                        _ => None,
                    };
                    match copied {
                        Some(depth_below) => Mark::child(&mut marks, depth_below, false),
                        None => {
                            let start = self.reply.len();
                            match self.open(table)? {
                                Opened::Items(open) => {
                                    stack.push(open);
                                    marks.push(Mark {
                                        table: pointer,
                                        start,
                                        depth_below: 0,
                                        errors: false,
                                    });
                                }
                                Opened::Whole { error } => {
                                    let end = self.reply.len();
                                    self.written
                                        .insert(pointer, Written::leaf(start, end, error));
                                    Mark::child(&mut marks, 0, error);
                                }
                            }
                        }
                    }
                }
                let written = self.reply.len() - self.start;
                let root = self.root;
                self.budget
                    .wrote(written, || measure(root, 0, &mut Memo::new()))?;
            }
            let Some(top) = stack.last_mut() else {
                return Ok(());
            };
            pending = match top {
                Open::Array { table, next, len } => {
                    if *next > *len {
                        None
                    } else {
                        *next += 1;
                        Some(table.raw_get::<Value>(*next - 1)?)
                    }
                }
                Open::Map { table, key, value } => match value.take() {
                    Some(value) => Some(value),
                    None => {
                        let (k, v) = next_entry(self.lua, &mut self.next, table, key)?;
                        (!k.is_nil()).then(|| {
                            *value = Some(v);
                            *key = k.clone();
                            k
                        })
                    }
                },
                Open::Set { table, key } => {
                    let (k, _) = next_entry(self.lua, &mut self.next, table, key)?;
                    (!k.is_nil()).then(|| {
                        *key = k.clone();
                        k
                    })
                }
            };
            if pending.is_none() {
                stack.pop();
                if let Some(mark) = marks.pop() {
                    let done = Written {
                        start: mark.start,
                        end: self.reply.len(),
                        depth_below: mark.depth_below,
                        errors: mark.errors,
                    };
                    self.written.insert(mark.table, done);
                    Mark::child(&mut marks, mark.depth_below, mark.errors);
                }
            }
        }
    }

    /// Appends the reply's bytes `start..end` again (a table written before), if that keeps
    /// it within the bound.
    fn copy(&mut self, start: usize, end: usize) -> Result<(), Abort> {
        if (self.reply.len() - self.start).saturating_add(end - start) > MAX_OUTPUT {
            return Err(Abort::TooLarge);
        }
        let buffer = self.reply.buffer();
        buffer.reserve(end - start);
        let mut at = start;
        let mut piece = [0u8; 4096];
        while at < end {
            let len = piece.len().min(end - at);
            piece[..len].copy_from_slice(&buffer[at..at + len]);
            buffer.extend_from_slice(&piece[..len]);
            at += len;
        }
        Ok(())
    }

    /// Writes what a table is (or the header of its items, whose walk it returns).
    fn open(&mut self, table: Table) -> Result<Opened, Abort> {
        let reply = &mut *self.reply;
        Ok(match shape(&table) {
            Shape::Error => {
                let info = error_info(&table);
                let message = one_line(&info.message.unwrap_or_default());
                if info.ignore_stats {
                    reply.error_counted_elsewhere(&message);
                } else {
                    reply.error(&message);
                }
                Opened::Whole { error: true }
            }
            Shape::Status(text) => {
                reply.simple(&one_line(&text.as_bytes()));
                Opened::Whole { error: false }
            }
            Shape::Double(d) => {
                reply.double(d);
                Opened::Whole { error: false }
            }
            Shape::BigNumber(digits) => {
                reply.big_number(&one_line(&digits.as_bytes()));
                Opened::Whole { error: false }
            }
            Shape::Verbatim(format, text) => {
                reply.verbatim(&format, &text.as_bytes());
                Opened::Whole { error: false }
            }
            // The entries are counted for the header, then read one at a time as they are
            // written.
            Shape::Map(map) => {
                reply.map(count_pairs(&map)?);
                Opened::Items(Open::Map {
                    table: map,
                    key: Value::Nil,
                    value: None,
                })
            }
            Shape::Set(set) => {
                reply.set(count_pairs(&set)?);
                Opened::Items(Open::Set {
                    table: set,
                    key: Value::Nil,
                })
            }
            Shape::Array => {
                let len = array_len(&table)?;
                reply.array(len);
                Opened::Items(Open::Array {
                    table,
                    next: 1,
                    len,
                })
            }
        })
    }
}

/// The entry after `key` in `table` (a nil key when there is none), by Lua's `next`.
fn next_entry(
    lua: &Lua,
    next: &mut Option<Function>,
    table: &Table,
    key: &Value,
) -> mlua::Result<(Value, Value)> {
    let next = match next {
        Some(next) => next,
        None => next.insert(lua.globals().raw_get::<Function>("next")?),
    };
    next.call((table, key))
}

/// Writes any value but a table (`None` for a table).
fn write_scalar(value: &Value, reply: &mut Reply, script_resp: u8) -> Option<()> {
    match value {
        Value::String(text) => reply.bulk(&text.as_bytes()),
        Value::Boolean(b) => {
            if script_resp == 2 {
                if *b {
                    reply.integer(1);
                } else {
                    reply.null();
                }
            } else {
                reply.boolean(*b);
            }
        }
        Value::Integer(n) => reply.integer(*n),
        Value::Number(n) => reply.integer(c_truncate(*n)),
        Value::Table(_) => return None,
        _ => reply.null(),
    }
    Some(())
}

/// How a table goes out: as one of the special forms (`{err=...}`, `{ok=...}`...) or as
/// an array.
enum Shape {
    Error,
    Status(LuaString),
    Double(f64),
    BigNumber(LuaString),
    Verbatim([u8; 3], LuaString),
    Map(Table),
    Set(Table),
    Array,
}

fn shape(table: &Table) -> Shape {
    if let Value::String(_) = field(table, "err") {
        return Shape::Error;
    }
    if let Value::String(text) = field(table, "ok") {
        return Shape::Status(text);
    }
    match field(table, "double") {
        Value::Number(d) => return Shape::Double(d),
        Value::Integer(n) => return Shape::Double(n as f64),
        _ => {}
    }
    if let Value::String(digits) = field(table, "big_number") {
        return Shape::BigNumber(digits);
    }
    if let Value::Table(verbatim) = field(table, "verbatim_string") {
        if let (Value::String(format), Value::String(text)) =
            (field(&verbatim, "format"), field(&verbatim, "string"))
        {
            let mut ext = [b' '; 3];
            for (slot, byte) in ext.iter_mut().zip(format.as_bytes().iter()) {
                *slot = *byte;
            }
            return Shape::Verbatim(ext, text);
        }
    }
    if let Value::Table(map) = field(table, "map") {
        return Shape::Map(map);
    }
    if let Value::Table(set) = field(table, "set") {
        return Shape::Set(set);
    }
    Shape::Array
}

/// How many items a table sent as an array has: up to the first nil (counted without
/// holding a Lua reference to any of them).
fn array_len(table: &Table) -> mlua::Result<usize> {
    let mut len = 0;
    for item in table.sequence_values::<bool>() {
        item?;
        len += 1;
    }
    Ok(len)
}

/// How many entries a table has (counted without holding a Lua reference to any).
fn count_pairs(table: &Table) -> mlua::Result<usize> {
    let mut count = 0;
    table.for_each::<bool, bool>(|_, _| {
        count += 1;
        Ok(())
    })?;
    Ok(count)
}

/// A lower bound of the size of `value`'s reply (see `bound`): a bulk string is at least
/// its bytes and five more, any other value three bytes, an aggregate's header four. Each
/// table is walked once (`memo`); past `bound::MEASURE_DEPTH` nothing is counted.
fn measure(value: &Value, depth: usize, memo: &mut Memo) -> usize {
    if depth > MEASURE_DEPTH {
        return 0;
    }
    let table = match value {
        Value::String(text) => return text.as_bytes().len().saturating_add(5),
        Value::Table(table) => table,
        _ => return 3,
    };
    let key = (table.to_pointer(), 0);
    if let Some(&known) = memo.get(&key) {
        return known;
    }
    let mut size = 4usize;
    let mut add = |value: &Value, memo: &mut Memo| {
        size = size.saturating_add(measure(value, depth + 1, memo));
    };
    match shape(table) {
        Shape::Map(map) => {
            for (key, value) in map.pairs::<Value, Value>().map_while(Result::ok) {
                add(&key, memo);
                add(&value, memo);
            }
        }
        Shape::Set(set) => {
            for (member, _) in set.pairs::<Value, bool>().map_while(Result::ok) {
                add(&member, memo);
            }
        }
        Shape::Array => {
            for i in 1.. {
                match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => add(&item, memo),
                }
            }
        }
        _ => size = 3,
    }
    memo.insert(key, size);
    size
}

/// `(long long)` of a double as x86 does it: out of range (and NaN) gives the minimum.
fn c_truncate(n: f64) -> i64 {
    // 2^63: the first double past i64::MAX.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn field(table: &Table, name: &str) -> Value {
    table.raw_get::<Value>(name).unwrap_or(Value::Nil)
}

/// CR and LF become spaces, as Redis does for status and error lines.
fn one_line(text: &[u8]) -> Vec<u8> {
    text.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

#[cfg(test)]
mod tests {
    use latch_protocol::Resp;
    use mlua::Lua;

    use super::*;

    fn reply_of(lua: &Lua, code: &str, resp: Resp) -> Vec<u8> {
        let value: Value = lua.load(code).eval().unwrap();
        let mut reply = Reply::new(resp);
        lua_to_reply(
            lua,
            &value,
            &mut reply,
            if resp == Resp::V3 { 3 } else { 2 },
        );
        reply.buffer().to_vec()
    }

    #[test]
    fn the_measure_never_counts_more_than_the_reply() {
        let lua = Lua::new();
        for shape in [
            "1",
            "'abc'",
            "{}",
            "{1, 'two', true, false, {3.5}}",
            "{1, nil, 3}",
            "{err = 'ERR x'}",
            "{ok = 'fine'}",
            "{double = 1.5}",
            "{big_number = '123'}",
            "{verbatim_string = {format = 'txt', string = 'hello'}}",
            "{map = {a = 1, b = {1, 2}, [3] = 'c'}}",
            "{set = {a = true, b = true}}",
            "(function() local a = {1} return {a, a, {a, {a}}} end)()",
            "(function() local a = {} for i = 1, 12 do a = {a, a} end return a end)()",
            "(function() local a = {} for i = 1, 8 do a = {map = {x = a, y = a}} end return a end)()",
        ] {
            let value: Value = lua.load(format!("return {shape}")).eval().unwrap();
            let bound = measure(&value, 0, &mut Memo::new());
            for resp in [Resp::V2, Resp::V3] {
                let len = reply_of(&lua, &format!("return {shape}"), resp).len();
                assert!(bound <= len, "{shape} {resp:?}: {bound} > {len}");
            }
        }
    }

    #[test]
    fn a_reply_past_a_bound_is_one_error_in_place_of_the_value() {
        let lua = Lua::new();
        let looped = "local t = {} t[1] = t t[2] = t return t";
        let dag = "local a = {} for i = 1, 40 do a = {a, a} end return a";
        for resp in [Resp::V2, Resp::V3] {
            let mut reply = Reply::new(resp);
            reply.simple(b"before");
            let value: Value = lua.load(looped).eval().unwrap();
            lua_to_reply(&lua, &value, &mut reply, 2);
            let value: Value = lua.load(dag).eval().unwrap();
            lua_to_reply(&lua, &value, &mut reply, 2);
            assert_eq!(
                String::from_utf8_lossy(reply.buffer()),
                "+before\r\n-ERR reached lua stack limit\r\n\
                 -ERR reply exceeds the maximum size a script may return (512 MB)\r\n"
            );
        }
    }

    #[test]
    fn shared_tables_are_copied_as_the_walk_writes_them() {
        let lua = Lua::new();
        lua.load(
            "function clone(t)
               if type(t) ~= 'table' then return t end
               local c = {} for k, v in pairs(t) do c[k] = clone(v) end return c
             end
             function shared()
               local a = {'leaf', 1, true, {ok = 'fine'}, {double = 2.5}, {err = 'ERR e'}}
               for i = 1, 8 do a = {a, {a, 'x'}, {map = {k = a}}, {set = {m = true}}} end
               return a
             end
             function clean()
               local a = {'leaf'} for i = 1, 10 do a = {a, {a, i}} end return a
             end",
        )
        .exec()
        .unwrap();
        for (code, errors) in [("shared()", 3u64.pow(8)), ("clean()", 0)] {
            for resp in [Resp::V2, Resp::V3] {
                let mut copied = Reply::new(resp);
                let value: Value = lua.load(format!("return {code}")).eval().unwrap();
                lua_to_reply(&lua, &value, &mut copied, 3);
                let mut walked = Reply::new(resp);
                let value: Value = lua.load(format!("return clone({code})")).eval().unwrap();
                lua_to_reply(&lua, &value, &mut walked, 3);
                assert_eq!(copied.buffer(), walked.buffer(), "{code} {resp:?}");
                // Tables holding an error are walked, so each error is counted.
                assert_eq!(copied.error_count(), errors, "{code}");
                assert_eq!(walked.error_count(), errors, "{code}");
            }
        }
        // Copies stay within the depth limit: a table met again deeper is walked (and fails
        // where the walk fails).
        let ends = |code: &str| {
            let value: Value = lua.load(code).eval().unwrap();
            let mut reply = Reply::new(Resp::V2);
            lua_to_reply(&lua, &value, &mut reply, 2);
            let text = String::from_utf8_lossy(reply.buffer()).into_owned();
            text[text.len().saturating_sub(30)..].to_string()
        };
        let deep = "local a = {1} for i = 1, 997 do a = {a} end";
        assert!(ends(&format!("{deep} return {{a, {{a}}}}")).ends_with(":1\r\n"));
        let deeper = "local a = {1} for i = 1, 998 do a = {a} end";
        assert_eq!(
            ends(&format!("{deeper} return {{a, {{a}}}}")),
            "-ERR reached lua stack limit\r\n"
        );
    }
}
