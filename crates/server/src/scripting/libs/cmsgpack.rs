//! The `cmsgpack` global of the scripting VM: MessagePack encoding and decoding as done by
//! lua-cmsgpack 0.4.0, the library Redis 7.0 bundles (`deps/lua/src/lua_cmsgpack.c`).
//!
//! Behaviour that scripts can observe and that we reproduce:
//!
//! * `pack(...)` encodes every argument and concatenates the encodings. A number that is an
//!   exact 64-bit integer becomes the smallest msgpack integer that holds it; any other number
//!   becomes a float32 when that round-trips exactly, else a float64. Strings always use the
//!   str formats (fixstr, str8, str16, str32), never bin. A table whose keys are exactly
//!   `1..n` is an array (an empty table is an empty array), any other table is a map in `next`
//!   order. Tables nested sixteen levels deep, and values msgpack cannot express (functions,
//!   userdata, threads), are encoded as nil; the depth cap is what lets cyclic tables encode.
//! * `unpack(s)` returns every value in `s`; `unpack_one(s [, offset])` and
//!   `unpack_limit(s, limit [, offset])` return the offset of the first undecoded byte (or -1
//!   when the input is used up) followed by at most one / `limit` values. As in the C code,
//!   `unpack_limit(s, 0)` with a zero offset decodes everything and returns no offset.
//! * Decoding errors use the library's texts ("Missing bytes in input.", "Bad data format in
//!   input.", ...). bin, ext and fixext values are not supported by this version of the library
//!   and are a "Bad data format". uint64 values above 2^63-1 wrap to negative numbers, exactly
//!   as the C code's signed conversion does.
//! * The C decoder grows the Lua stack while it works and fails with Lua's `stack overflow
//!   (...)` errors once 8000 slots (`LUAI_MAXCSTACK`) would be exceeded. We count the slots it
//!   would use and fail at the same point with the same messages.
//!
//! Decoding is done in two passes: the input is first parsed into a plain Rust tree (which is
//! where every error is detected), and only then turned into Lua values. Neither pass
//! recurses, so hostile input cannot exhaust the native stack, and the second one holds only a
//! handful of mlua handles however big or deep the data is (mlua can hold only about 8000 at
//! once; see `build_lua`).

use std::collections::HashMap;
use std::ffi::c_void;

use mlua::{Function, Lua, MultiValue, Table, Value};

use crate::scripting::bound::{Budget, Memo, TooLarge, MAX_OUTPUT};

/// Tables at this nesting level (the top level being 0) are encoded as nil.
const MAX_NESTING: usize = 16;

/// Lua 5.1's `LUAI_MAXCSTACK`: the most stack slots a C function may use.
const LUA_STACK_LIMIT: i64 = 8000;

const MSG_EOF: &str = "Missing bytes in input.";
const MSG_BAD_FORMAT: &str = "Bad data format in input.";
const MSG_TOO_MANY_VALUES: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
const MSG_ARRAY_STACK: &str = "stack overflow (in function mp_decode_to_lua_array)";
const MSG_UNPACK_STACK: &str = "stack overflow (in function mp_unpack_full)";

fn runtime_error(text: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

/// The Lua 5.1 name of a value's type, as `luaL_typename` prints it.
fn lua_type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        // Light userdata, full userdata and anything mlua wraps itself are all "userdata"
        // to Lua 5.1.
        _ => "userdata",
    }
}

/// `luaL_argerror`'s message for argument `index` of function `name`.
fn arg_error(index: usize, name: &str, message: &str) -> mlua::Error {
    runtime_error(format!("bad argument #{index} to '{name}' ({message})"))
}

/// `luaL_typerror`'s message: argument `index` is missing or has the wrong type.
fn type_error(args: &MultiValue, index: usize, name: &str, expected: &str) -> mlua::Error {
    let got = args.get(index - 1).map_or("no value", lua_type_name);
    arg_error(index, name, &format!("{expected} expected, got {got}"))
}

// ------------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------------

/// Appends a str header for `len` bytes followed by the bytes.
fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(bytes);
}

/// Appends the smallest msgpack integer encoding of `n` (unsigned formats for non-negative
/// values, signed ones for negative values).
fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 0x7f {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a float32 when `d` survives the trip through single precision, else a float64.
fn encode_double(out: &mut Vec<u8>, d: f64) {
    let single = d as f32;
    // NaN never compares equal, so it always takes the float64 branch, as in C.
    if f64::from(single) == d {
        out.push(0xca);
        out.extend_from_slice(&single.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

/// Lua 5.1 numbers are doubles: one that holds an exact int64 value is sent as an integer.
fn encode_number(out: &mut Vec<u8>, n: f64) {
    // The C test is `(int64_t)n == n`; the explicit range keeps values the cast cannot
    // represent (2^63 and above, NaN, infinities) on the float path as they are there.
    if n.trunc() == n && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        encode_int(out, n as i64);
    } else {
        encode_double(out, n);
    }
}

/// Returns `Some(n)` when the table's keys are exactly `1..=n` (so it is sent as an array),
/// `None` when it must be sent as a map. Like the C code, a key only counts as an index when
/// it is a positive integral number that fits a C `int`.
fn array_length(table: &Table) -> mlua::Result<Option<usize>> {
    let mut count: usize = 0;
    let mut max: f64 = 0.0;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let n = match key {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        // `n > 0.0` is false for NaN, which is thereby rejected too.
        if !(n > 0.0 && n.trunc() == n && n <= f64::from(i32::MAX)) {
            return Ok(None);
        }
        max = max.max(n);
        count += 1;
    }
    // Keys are distinct, so `count` positive integers whose maximum is `count` are 1..count.
    Ok((max == count as f64).then_some(count))
}

/// `pack`'s output and its bounds (see `bound`).
struct Packer<'a> {
    out: Vec<u8>,
    /// Every argument, for `measure`.
    args: &'a MultiValue,
    budget: Budget,
    /// Where each table already packed at a level is in `out`: met again at that level, it
    /// packs the same (nothing runs in between that could change it), and is copied. A
    /// table that contains itself packs to a tree 16 levels deep, whose branches are all
    /// the same few tables: copying makes that cost what its output is, not a walk of
    /// every branch (`t = {t, t, t}` is 3^16 branches, 172 MB).
    packed: HashMap<(*const c_void, usize), (usize, usize)>,
}

impl Packer<'_> {
    fn table(&mut self, table: &Table, level: usize) -> mlua::Result<()> {
        let key = (table.to_pointer(), level);
        if let Some(&(start, end)) = self.packed.get(&key) {
            if self.out.len().saturating_add(end - start) > MAX_OUTPUT {
                return Err(too_large());
            }
            self.out.extend_from_within(start..end);
            return self.wrote();
        }
        let start = self.out.len();
        self.table_entries(table, level)?;
        self.packed.insert(key, (start, self.out.len()));
        Ok(())
    }

    fn table_entries(&mut self, table: &Table, level: usize) -> mlua::Result<()> {
        if let Some(len) = array_length(table)? {
            encode_container_header(&mut self.out, len, 0x90, 0xdc);
            self.wrote()?;
            for index in 1..=len {
                let item: Value = table.raw_get(index as i64)?;
                self.value(&item, level + 1)?;
            }
        } else {
            // The entry count is needed before the entries, so the table is walked twice, as
            // in C; collecting the entries instead would pin a handle per string in the table.
            let mut len: usize = 0;
            for pair in table.pairs::<Value, Value>() {
                pair?;
                len += 1;
            }
            encode_container_header(&mut self.out, len, 0x80, 0xde);
            self.wrote()?;
            for pair in table.pairs::<Value, Value>() {
                let (key, value) = pair?;
                self.value(&key, level + 1)?;
                self.value(&value, level + 1)?;
            }
        }
        Ok(())
    }

    fn value(&mut self, value: &Value, level: usize) -> mlua::Result<()> {
        let out = &mut self.out;
        match value {
            Value::String(s) => encode_bytes(out, &s.as_bytes()),
            Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
            Value::Integer(i) => encode_int(out, *i),
            Value::Number(n) => encode_number(out, *n),
            Value::Table(t) if level < MAX_NESTING => return self.table(t, level),
            // Nil, tables past the nesting cap, and every type msgpack has no form for.
            _ => out.push(0xc0),
        }
        self.wrote()
    }

    /// Called after each value written: an error once the output is (or, by `measure`,
    /// will be) larger than `bound::MAX_OUTPUT`.
    fn wrote(&mut self) -> mlua::Result<()> {
        let args = self.args;
        self.budget
            .wrote(self.out.len(), || {
                let mut memo = Memo::new();
                args.iter()
                    .map(|value| measure(value, 0, &mut memo))
                    .fold(0, usize::saturating_add)
            })
            .map_err(|TooLarge| too_large())
    }
}

fn too_large() -> mlua::Error {
    runtime_error("MessagePack pack output exceeds 512 MB")
}

/// A lower bound of the size of `value`'s encoding at nesting `level`: a string is at
/// least its bytes and a byte of header, any other value a byte, a table its header byte
/// and its elements (and keys, for a map). Each table is walked once per level (`memo`:
/// how a table encodes depends on its level, tables at [`MAX_NESTING`] being nil).
fn measure(value: &Value, level: usize, memo: &mut Memo) -> usize {
    let table = match value {
        Value::String(s) => return s.as_bytes().len().saturating_add(1),
        Value::Table(table) if level < MAX_NESTING => table,
        _ => return 1,
    };
    let key = (table.to_pointer(), level);
    if let Some(&known) = memo.get(&key) {
        return known;
    }
    let (mut values, mut keys, mut count, mut max) = (0usize, 0usize, 0usize, 0f64);
    let mut array = true;
    let _ = table.for_each::<Value, Value>(|key, value| {
        let n = match key {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => 0.0,
        };
        // As `array_length`: keys exactly 1..count make an array.
        array &= n > 0.0 && n.trunc() == n && n <= f64::from(i32::MAX);
        max = max.max(n);
        count += 1;
        values = values.saturating_add(measure(&value, level + 1, memo));
        keys = keys.saturating_add(measure(&key, level + 1, memo));
        Ok(())
    });
    let is_array = array && max == count as f64;
    let size = 1usize
        .saturating_add(values)
        .saturating_add(if is_array { 0 } else { keys });
    memo.insert(key, size);
    size
}

/// Appends an array or map header: the fix form for up to 15 entries, then the 16- and
/// 32-bit forms (`wide16` + 1 is the 32-bit opcode).
fn encode_container_header(out: &mut Vec<u8>, len: usize, fix: u8, wide16: u8) {
    if len <= 15 {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(wide16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(wide16 + 1);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// `cmsgpack.pack(...)`. The glue in `GLUE_SOURCE` has already refused calls with more
/// arguments than the C function accepts.
fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.is_empty() {
        return Err(arg_error(0, "pack", "MessagePack pack needs input."));
    }
    let mut packer = Packer {
        out: Vec::new(),
        args: &args,
        budget: Budget::default(),
        packed: HashMap::new(),
    };
    for value in args.iter() {
        packer.value(value, 0)?;
    }
    lua.create_string(packer.out)
}

// ------------------------------------------------------------------------------------------
// Decoding, pass one: bytes to a Rust tree
// ------------------------------------------------------------------------------------------

/// A decoded value before it becomes a Lua value.
enum Node {
    Nil,
    Bool(bool),
    Num(f64),
    /// A string, as the start and length of its bytes in the input.
    Str(usize, usize),
    Array(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    fn is_table(&self) -> bool {
        matches!(self, Node::Array(_) | Node::Map(_))
    }
}

/// A container whose elements are still being parsed.
enum OpenContainer {
    Array {
        items: Vec<Node>,
        remaining: usize,
    },
    Map {
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
        remaining: usize,
    },
}

/// Why parsing stopped: the two cursor errors of the C code, or a Lua error it would raise.
enum ParseError {
    Eof,
    BadFormat,
    Lua(&'static str),
}

impl From<ParseError> for mlua::Error {
    fn from(err: ParseError) -> Self {
        runtime_error(match err {
            ParseError::Eof => MSG_EOF,
            ParseError::BadFormat => MSG_BAD_FORMAT,
            ParseError::Lua(text) => text,
        })
    }
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    /// How many Lua stack slots the C decoder would be using at this point.
    top: i64,
}

impl Parser<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, len: usize) -> Result<(), ParseError> {
        if self.left() < len {
            Err(ParseError::Eof)
        } else {
            Ok(())
        }
    }

    /// `luaL_checkstack(L, 1, ...)` against the slot count we are tracking.
    fn check_stack(&self, message: &'static str) -> Result<(), ParseError> {
        if self.top + 1 > LUA_STACK_LIMIT {
            Err(ParseError::Lua(message))
        } else {
            Ok(())
        }
    }

    /// The big-endian unsigned number in the `len` bytes after the type byte.
    fn be_uint(&self, len: usize) -> u64 {
        self.data[self.pos + 1..self.pos + 1 + len]
            .iter()
            .fold(0, |acc, &b| (acc << 8) | u64::from(b))
    }

    /// A fixed-size scalar: `len` payload bytes after the type byte, turned into a node.
    fn scalar(&mut self, len: usize, make: impl FnOnce(u64) -> Node) -> Result<Node, ParseError> {
        self.need(1 + len)?;
        let node = make(self.be_uint(len));
        self.pos += 1 + len;
        Ok(node)
    }

    /// A string whose length occupies `len_size` bytes after the type byte.
    fn string(&mut self, len_size: usize) -> Result<Node, ParseError> {
        self.need(1 + len_size)?;
        let len = self.be_uint(len_size) as usize;
        self.pos += 1 + len_size;
        self.need(len)?;
        let node = Node::Str(self.pos, len);
        self.pos += len;
        Ok(node)
    }

    /// The element count of an array or map whose count occupies `len_size` bytes.
    fn container_len(&mut self, len_size: usize) -> Result<usize, ParseError> {
        self.need(1 + len_size)?;
        let len = self.be_uint(len_size) as usize;
        self.pos += 1 + len_size;
        Ok(len)
    }

    /// Parses one complete top-level value.
    fn parse_value(&mut self) -> Result<Node, ParseError> {
        let mut open: Vec<OpenContainer> = Vec::new();
        loop {
            self.need(1)?;
            self.check_stack(MSG_TOO_MANY_VALUES)?;
            let byte = self.data[self.pos];
            let mut node = match byte {
                0x00..=0x7f => self.scalar(0, |_| Node::Num(f64::from(byte)))?,
                0xe0..=0xff => self.scalar(0, |_| Node::Num(f64::from(byte as i8)))?,
                0xc0 => self.scalar(0, |_| Node::Nil)?,
                0xc2 => self.scalar(0, |_| Node::Bool(false))?,
                0xc3 => self.scalar(0, |_| Node::Bool(true))?,
                0xcc => self.scalar(1, |v| Node::Num(v as f64))?,
                0xcd => self.scalar(2, |v| Node::Num(v as f64))?,
                0xce => self.scalar(4, |v| Node::Num(v as f64))?,
                // The C code hands the uint64 to Lua as a signed 64-bit integer.
                0xcf => self.scalar(8, |v| Node::Num(v as i64 as f64))?,
                0xd0 => self.scalar(1, |v| Node::Num(f64::from(v as u8 as i8)))?,
                0xd1 => self.scalar(2, |v| Node::Num(f64::from(v as u16 as i16)))?,
                0xd2 => self.scalar(4, |v| Node::Num(f64::from(v as u32 as i32)))?,
                0xd3 => self.scalar(8, |v| Node::Num(v as i64 as f64))?,
                0xca => self.scalar(4, |v| Node::Num(f64::from(f32::from_bits(v as u32))))?,
                0xcb => self.scalar(8, |v| Node::Num(f64::from_bits(v)))?,
                0xa0..=0xbf => {
                    let len = usize::from(byte & 0x1f);
                    self.need(1 + len)?;
                    self.pos += 1;
                    let node = Node::Str(self.pos, len);
                    self.pos += len;
                    node
                }
                0xd9 => self.string(1)?,
                0xda => self.string(2)?,
                0xdb => self.string(4)?,
                0x90..=0x9f | 0xdc | 0xdd => {
                    let len = match byte {
                        0xdc => self.container_len(2)?,
                        0xdd => self.container_len(4)?,
                        // The fix forms carry the count in the type byte itself.
                        _ => self.container_len(0)? | usize::from(byte & 0x0f),
                    };
                    // The new table, then room for the index pushed before each element.
                    self.top += 1;
                    self.check_stack(MSG_ARRAY_STACK)?;
                    if len == 0 {
                        Node::Array(Vec::new())
                    } else {
                        self.top += 1;
                        open.push(OpenContainer::Array {
                            items: Vec::with_capacity(len.min(self.left())),
                            remaining: len,
                        });
                        continue;
                    }
                }
                0x80..=0x8f | 0xde | 0xdf => {
                    let len = match byte {
                        0xde => self.container_len(2)?,
                        0xdf => self.container_len(4)?,
                        _ => self.container_len(0)? | usize::from(byte & 0x0f),
                    };
                    self.top += 1;
                    if len == 0 {
                        Node::Map(Vec::new())
                    } else {
                        open.push(OpenContainer::Map {
                            entries: Vec::with_capacity(len.min(self.left() / 2)),
                            key: None,
                            remaining: len,
                        });
                        continue;
                    }
                }
                // 0xc1 (never used) and the bin, ext and fixext families.
                _ => return Err(ParseError::BadFormat),
            };
            if !node.is_table() {
                self.top += 1;
            }

            // Hand the finished value to its container, closing every container it completes.
            loop {
                match open.last_mut() {
                    None => return Ok(node),
                    Some(OpenContainer::Array { items, remaining }) => {
                        // The element is stored: the index and the value leave the stack.
                        self.top -= 2;
                        items.push(node);
                        *remaining -= 1;
                        if *remaining > 0 {
                            self.top += 1;
                            break;
                        }
                    }
                    Some(OpenContainer::Map {
                        entries,
                        key,
                        remaining,
                    }) => {
                        let Some(k) = key.take() else {
                            *key = Some(node);
                            break;
                        };
                        // Storing the pair is where Lua itself would reject the key.
                        match k {
                            Node::Nil => return Err(ParseError::Lua("table index is nil")),
                            Node::Num(n) if n.is_nan() => {
                                return Err(ParseError::Lua("table index is NaN"))
                            }
                            _ => {}
                        }
                        self.top -= 2;
                        entries.push((k, node));
                        *remaining -= 1;
                        if *remaining > 0 {
                            break;
                        }
                    }
                }
                node = match open.pop() {
                    Some(OpenContainer::Array { items, .. }) => Node::Array(items),
                    Some(OpenContainer::Map { entries, .. }) => Node::Map(entries),
                    None => unreachable!("a container was just inspected"),
                };
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Decoding, pass two: the Rust tree to Lua values
// ------------------------------------------------------------------------------------------

/// What a map being built is waiting for.
enum PendingKey {
    /// Nothing: between entries.
    None,
    /// A non-table key, converted once its value is built.
    Scalar(Node),
    /// A table key is being built; this is the value that comes after it.
    TableKeyFor(Node),
    /// A table key is built (and parked in the spill table); its value is being built.
    Built,
}

/// A table being filled: what is left to build for it.
enum BuildFrame {
    Array {
        items: std::vec::IntoIter<Node>,
        next_index: i64,
    },
    Map {
        entries: std::vec::IntoIter<(Node, Node)>,
        key: PendingKey,
    },
}

fn scalar_to_lua(lua: &Lua, data: &[u8], node: Node) -> mlua::Result<Value> {
    Ok(match node {
        Node::Nil => Value::Nil,
        Node::Bool(b) => Value::Boolean(b),
        Node::Num(n) => Value::Number(n),
        Node::Str(start, len) => Value::String(lua.create_string(&data[start..start + len])?),
        Node::Array(_) | Node::Map(_) => unreachable!("tables are built by build_lua"),
    })
}

/// Starts a map entry: returns what the map then waits for and the node to build first.
fn start_entry(key: Node, value: Node) -> (PendingKey, Node) {
    if key.is_table() {
        (PendingKey::TableKeyFor(value), key)
    } else {
        (PendingKey::Scalar(key), value)
    }
}

/// Where `spill` keeps the table of the frame at `depth` (1-based).
fn table_slot(depth: usize) -> i64 {
    2 * depth as i64 - 1
}

/// Where `spill` keeps the built table key of the frame at `depth` (1-based).
fn key_slot(depth: usize) -> i64 {
    2 * depth as i64
}

/// Turns a parsed tree into a Lua value. Tables are created before their contents and filled
/// in input order, so they end up laid out (and iterate) exactly as the C decoder's.
///
/// mlua can only hold about 8000 values at once (its handles live on an auxiliary Lua stack
/// with Lua's own stack limit), and the input may nest thousands of tables deep. So only the
/// innermost unfinished table is held here; the outer ones, and table keys waiting for their
/// value, are parked in the Lua table `spill` and fetched back when they are needed again.
fn build_lua(lua: &Lua, data: &[u8], spill: &Table, root: Node) -> mlua::Result<Value> {
    let mut frames: Vec<BuildFrame> = Vec::new();
    // The table of the innermost frame; `Some` exactly when `frames` is not empty.
    let mut innermost: Option<Table> = None;
    let mut current = root;
    loop {
        let mut value = match current {
            Node::Array(items) => {
                let table = lua.create_table()?;
                let mut items = items.into_iter();
                match items.next() {
                    Some(first) => {
                        frames.push(BuildFrame::Array {
                            items,
                            next_index: 1,
                        });
                        spill.raw_set(table_slot(frames.len()), &table)?;
                        innermost = Some(table);
                        current = first;
                        continue;
                    }
                    None => Value::Table(table),
                }
            }
            Node::Map(entries) => {
                let table = lua.create_table()?;
                let mut entries = entries.into_iter();
                match entries.next() {
                    Some((k, v)) => {
                        let (key, first) = start_entry(k, v);
                        frames.push(BuildFrame::Map { entries, key });
                        spill.raw_set(table_slot(frames.len()), &table)?;
                        innermost = Some(table);
                        current = first;
                        continue;
                    }
                    None => Value::Table(table),
                }
            }
            scalar => scalar_to_lua(lua, data, scalar)?,
        };

        // Store the finished value in its parent; climb while parents are complete.
        loop {
            let depth = frames.len();
            let (Some(frame), Some(table)) = (frames.last_mut(), innermost.as_ref()) else {
                return Ok(value);
            };
            let next = match frame {
                BuildFrame::Array { items, next_index } => {
                    table.raw_set(*next_index, value)?;
                    *next_index += 1;
                    items.next()
                }
                BuildFrame::Map { entries, key } => {
                    let stored_key = match std::mem::replace(key, PendingKey::None) {
                        PendingKey::TableKeyFor(pending_value) => {
                            spill.raw_set(key_slot(depth), value)?;
                            *key = PendingKey::Built;
                            current = pending_value;
                            break;
                        }
                        PendingKey::Scalar(k) => scalar_to_lua(lua, data, k)?,
                        PendingKey::Built => spill.raw_get(key_slot(depth))?,
                        PendingKey::None => unreachable!("a map value without a key"),
                    };
                    table.raw_set(stored_key, value)?;
                    entries.next().map(|(k, v)| {
                        let (pending, first) = start_entry(k, v);
                        *key = pending;
                        first
                    })
                }
            };
            match next {
                Some(node) => {
                    current = node;
                    break;
                }
                None => {
                    frames.pop();
                    value = innermost.take().map_or(Value::Nil, Value::Table);
                    if !frames.is_empty() {
                        innermost = Some(spill.raw_get(table_slot(frames.len()))?);
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The unpack functions
// ------------------------------------------------------------------------------------------

/// Lua 5.1's number-to-`lua_Integer` cast on x86-64: truncation, with NaN and out-of-range
/// values giving the "integer indefinite" value.
fn number_to_integer(n: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

fn arg_to_number(lua: &Lua, value: Option<&Value>) -> mlua::Result<Option<f64>> {
    Ok(match value {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(v @ Value::String(_)) => lua.coerce_number(v.clone())?,
        _ => None,
    })
}

/// `luaL_checkinteger`.
fn check_integer(lua: &Lua, args: &MultiValue, index: usize, name: &str) -> mlua::Result<i64> {
    match arg_to_number(lua, args.get(index - 1))? {
        Some(n) => Ok(number_to_integer(n)),
        None => Err(type_error(args, index, name, "number")),
    }
}

/// `luaL_optinteger` with a default of 0.
fn opt_integer(lua: &Lua, args: &MultiValue, index: usize, name: &str) -> mlua::Result<i64> {
    match args.get(index - 1) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => check_integer(lua, args, index, name),
    }
}

/// `luaL_checklstring`: strings, and numbers converted the way Lua prints them.
fn check_string(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    name: &str,
) -> mlua::Result<mlua::LuaString> {
    let converted = match args.get(index - 1) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => lua.coerce_string(v.clone())?,
        _ => None,
    };
    converted.ok_or_else(|| type_error(args, index, name, "string"))
}

/// The shared body of the three unpack functions (`mp_unpack_full`). `stack_top` is how many
/// arguments the C function still has on its stack when it starts decoding. Returns a table
/// holding the results (the next offset first, unless everything was decoded) and their count.
fn unpack_full(
    lua: &Lua,
    args: &MultiValue,
    name: &str,
    limit: i64,
    offset: i64,
    stack_top: i64,
) -> mlua::Result<(Table, i64)> {
    let input = check_string(lua, args, 1, name)?;
    let data = input.as_bytes();
    let len = data.len();
    let decode_all = limit == 0 && offset == 0;

    // The casts to C `int` (and printing the length as the "limit") mirror the C messages.
    if offset < 0 || limit < 0 {
        return Err(runtime_error(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    if offset as u64 > len as u64 {
        return Err(runtime_error(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };

    let mut parser = Parser {
        data: &data,
        pos: offset as usize,
        top: stack_top,
    };
    let mut nodes = Vec::new();
    while parser.left() > 0 && (nodes.len() as i64) < limit {
        nodes.push(parser.parse_value()?);
    }

    let results = lua.create_table()?;
    let mut count: i64 = 0;
    if !decode_all {
        if parser.top + 1 > LUA_STACK_LIMIT {
            return Err(runtime_error(MSG_UNPACK_STACK));
        }
        let next = if parser.left() == 0 {
            -1
        } else {
            parser.pos as i64
        };
        count += 1;
        results.raw_set(count, next)?;
    }
    let spill = lua.create_table()?;
    for node in nodes {
        count += 1;
        results.raw_set(count, build_lua(lua, &data, &spill, node)?)?;
    }
    Ok((results, count))
}

/// Lua glue around the Rust functions. The unpack functions get their results from Rust as
/// (table, count) and spread them with the base library's `unpack`, so no Rust-side handle is
/// needed per returned value (mlua cannot hold as many as Lua can return). `pack` counts its
/// arguments before mlua converts them, for the same reason.
const GLUE_SOURCE: &str = r#"
local unpack, select, pack, too_many, decode_all, decode_one, decode_limit = ...
-- t[i..n]. One unpack call has room for about 7997 results besides its three arguments,
-- while the decoder may return up to 7999, so long ranges first peel values off one by one.
local function range(t, i, n)
  if n - i < 7000 then return unpack(t, i, n) end
  return t[i], range(t, i + 1, n)
end
local function spread(t, n) return range(t, 1, n) end
return function(...)
    if select('#', ...) > 4000 then return too_many() end
    return pack(...)
  end,
  function(...) return spread(decode_all(...)) end,
  function(...) return spread(decode_one(...)) end,
  function(...) return spread(decode_limit(...)) end
"#;

/// Creates the `cmsgpack` global table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let module = lua.create_table()?;

    let decode_all = lua.create_function(|lua, args: MultiValue| {
        // `mp_unpack` decodes with all of its arguments still on the stack.
        unpack_full(lua, &args, "unpack", 0, 0, args.len() as i64)
    })?;
    let decode_one = lua.create_function(|lua, args: MultiValue| {
        let offset = opt_integer(lua, &args, 2, "unpack_one")?;
        unpack_full(lua, &args, "unpack_one", 1, offset, 1)
    })?;
    let decode_limit = lua.create_function(|lua, args: MultiValue| {
        let limit = check_integer(lua, &args, 2, "unpack_limit")?;
        let offset = opt_integer(lua, &args, 3, "unpack_limit")?;
        unpack_full(lua, &args, "unpack_limit", limit, offset, 1)
    })?;
    // The C function wants room for a copy of every argument on top of the arguments
    // themselves, which Lua refuses beyond half of its stack limit.
    let too_many = lua.create_function(|_, ()| -> mlua::Result<()> {
        Err(arg_error(
            0,
            "pack",
            "Too many arguments for MessagePack pack.",
        ))
    })?;
    let globals = lua.globals();
    let base_unpack: Function = globals.get("unpack")?;
    let base_select: Function = globals.get("select")?;
    // "=latch" marks Latch's own Lua, which the sandbox's error handler skips when it looks
    // for the script line to blame, as Redis blames the line that called the C function.
    let (pack, unpack, unpack_one, unpack_limit): (Function, Function, Function, Function) =
        lua.load(GLUE_SOURCE).set_name("=latch").call((
            base_unpack,
            base_select,
            lua.create_function(pack)?,
            too_many,
            decode_all,
            decode_one,
            decode_limit,
        ))?;
    module.set("pack", pack)?;
    module.set("unpack", unpack)?;
    module.set("unpack_one", unpack_one)?;
    module.set("unpack_limit", unpack_limit)?;

    module.set("_NAME", "cmsgpack")?;
    module.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    module.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    module.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;

    lua.globals().set("cmsgpack", module)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        register(&lua).unwrap();
        lua.load(
            "function hex(s)
                 local h = ''
                 for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end
                 return h
             end
             function unhex(h)
                 return (h:gsub('..', function(x) return string.char(tonumber(x, 16)) end))
             end",
        )
        .exec()
        .unwrap();
        lua
    }

    fn eval<T: mlua::FromLuaMulti>(lua: &Lua, code: &str) -> T {
        lua.load(code).eval::<T>().unwrap()
    }

    fn packed(lua: &Lua, expr: &str) -> String {
        eval(lua, &format!("return hex(cmsgpack.pack({expr}))"))
    }

    fn error_of(lua: &Lua, code: &str) -> String {
        match lua.load(code).exec() {
            Ok(()) => panic!("{code} did not fail"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn redis_pack_double() {
        assert_eq!(packed(&lua(), "0.1"), "cb3fb999999999999a");
    }

    #[test]
    fn redis_pack_negative_int64() {
        assert_eq!(packed(&lua(), "-1099511627776"), "d3ffffff0000000000");
    }

    #[test]
    fn redis_smoke_test() {
        lua()
            .load(
                r#"
                local str_lt_32 = string.rep("x", 30)
                local str_lt_255 = string.rep("x", 250)
                local str_lt_65535 = string.rep("x", 65530)
                local str_long = string.rep("x", 100000)
                local array_lt_15 = {1, 2, 3, 4, 5}
                local array_lt_65535 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
                local array_big = {}
                for i=1, 100000 do
                    array_big[i] = i
                end
                local map_lt_15 = {a=1, b=2}
                local map_big = {}
                for i=1, 100000 do
                    map_big[tostring(i)] = i
                end
                local some_map = {
                    s1=str_lt_32,
                    s2=str_lt_255,
                    s3=str_lt_65535,
                    s4=str_long,
                    d1=0.1,
                    i1=1,
                    i2=250,
                    i3=65530,
                    i4=100000,
                    i5=2^40,
                    i6=-1,
                    i7=-120,
                    i8=-32000,
                    i9=-100000,
                    i10=-3147483648,
                    a1=array_lt_15,
                    a2=array_lt_65535,
                    a3=array_big,
                    m1=map_lt_15,
                    m2=map_big,
                    b1=false,
                    b2=true,
                    n=nil
                }
                local encoded = cmsgpack.pack(some_map)
                local decoded = cmsgpack.unpack(encoded)
                assert(table.concat(some_map) == table.concat(decoded))
                local offset, decoded_one = cmsgpack.unpack_one(encoded, 0)
                assert(table.concat(some_map) == table.concat(decoded_one))
                assert(offset == -1)

                local encoded_multiple = cmsgpack.pack(str_lt_32, str_lt_255, str_lt_65535, str_long)
                local offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, 0)
                assert(obj == str_lt_32)
                offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
                assert(obj == str_lt_255)
                offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
                assert(obj == str_lt_65535)
                offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
                assert(obj == str_long)
                assert(offset == -1)

                -- Beyond the Redis test: the decoded data really matches.
                for k, v in pairs(some_map) do
                    if type(v) ~= "table" then assert(decoded[k] == v, k) end
                end
                for i = 1, 100000 do
                    assert(decoded.a3[i] == i)
                    assert(decoded.m2[tostring(i)] == i)
                end
                assert(#decoded.a3 == 100000 and #decoded.a2 == 18)
                assert(decoded.m1.a == 1 and decoded.m1.b == 2)
            "#,
            )
            .exec()
            .unwrap();
    }

    #[test]
    fn redis_circular_references() {
        let lua = lua();
        let (h, deep_ok, y_ok): (String, bool, bool) = eval(
            &lua,
            r#"local a = {x=nil,y=5}
                local b = {x=a}
                a['x'] = b
                local encoded = cmsgpack.pack(a)
                local h = hex(encoded)
                local re = cmsgpack.unpack(encoded)
                assert(re)
                assert(re.x)
                assert(re.x.x.y == re.y)
                assert(re.x.x.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.x.x.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil)
                return h, re.x.x.x.x.x.x.x.x.y == re.y, re.y == 5"#,
        );
        assert_eq!(
            h,
            "82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a1\
             7881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0"
        );
        assert!(deep_ok && y_ok);
    }

    #[test]
    fn integer_encodings() {
        let lua = lua();
        let cases = [
            ("0", "00"),
            ("1", "01"),
            ("127", "7f"),
            ("128", "cc80"),
            ("255", "ccff"),
            ("256", "cd0100"),
            ("65535", "cdffff"),
            ("65536", "ce00010000"),
            ("4294967295", "ceffffffff"),
            ("4294967296", "cf0000000100000000"),
            ("2^53", "cf0020000000000000"),
            ("-1", "ff"),
            ("-32", "e0"),
            ("-33", "d0df"),
            ("-128", "d080"),
            ("-129", "d1ff7f"),
            ("-32768", "d18000"),
            ("-32769", "d2ffff7fff"),
            ("-2147483648", "d280000000"),
            ("-2147483649", "d3ffffffff7fffffff"),
            ("-2^63", "d38000000000000000"),
            ("-0.0", "00"),
        ];
        for (expr, hex) in cases {
            assert_eq!(packed(&lua, expr), hex, "{expr}");
        }
    }

    #[test]
    fn float_encodings() {
        let lua = lua();
        let cases = [
            ("1.5", "ca3fc00000"),
            ("-0.25", "cabe800000"),
            ("0.1", "cb3fb999999999999a"),
            // 2^63 is integral but out of int64 range, so it is a float (and fits float32).
            ("2^63", "ca5f000000"),
            ("2^64", "ca5f800000"),
            ("2^64 + 2^20", "cb43f0000000000100"),
            ("1/0", "ca7f800000"),
            ("-1/0", "caff800000"),
            ("1e300", "cb7e37e43c8800759c"),
        ];
        for (expr, hex) in cases {
            assert_eq!(packed(&lua, expr), hex, "{expr}");
        }
        // NaN never equals itself, so it is always a float64.
        assert!(packed(&lua, "0/0").starts_with("cb"));
        assert!(eval::<bool>(
            &lua,
            "local n = cmsgpack.unpack(cmsgpack.pack(0/0)) return n ~= n"
        ));
    }

    #[test]
    fn string_encodings() {
        let lua = lua();
        assert_eq!(packed(&lua, "''"), "a0");
        assert_eq!(packed(&lua, "'abc'"), "a3616263");
        let header = |n: usize| -> String {
            let h = packed(&lua, &format!("string.rep('x', {n})"));
            assert_eq!(h.len(), 2 * n + h.len() - 2 * n);
            h[..h.len() - 2 * n].to_string()
        };
        assert_eq!(header(31), "bf");
        assert_eq!(header(32), "d920");
        assert_eq!(header(255), "d9ff");
        assert_eq!(header(256), "da0100");
        assert_eq!(header(65535), "daffff");
        assert_eq!(header(65536), "db00010000");
        // Binary data round-trips unchanged.
        assert!(eval::<bool>(
            &lua,
            "local s = '\\0\\1\\255abc' return cmsgpack.unpack(cmsgpack.pack(s)) == s"
        ));
    }

    #[test]
    fn other_type_encodings() {
        let lua = lua();
        assert_eq!(packed(&lua, "true"), "c3");
        assert_eq!(packed(&lua, "false"), "c2");
        assert_eq!(packed(&lua, "nil"), "c0");
        assert_eq!(packed(&lua, "print"), "c0");
        assert_eq!(packed(&lua, "coroutine.create(function() end)"), "c0");
        assert_eq!(packed(&lua, "1, 'a', nil, true"), "01a161c0c3");
    }

    #[test]
    fn table_encodings() {
        let lua = lua();
        assert_eq!(packed(&lua, "{}"), "90");
        assert_eq!(packed(&lua, "{1, 2, 'a'}"), "930102a161");
        assert_eq!(packed(&lua, "{a = 1}"), "81a16101");
        assert_eq!(packed(&lua, "{[1] = 1, [3] = 3}").get(..2), Some("82"));
        assert_eq!(packed(&lua, "{[0] = 1}"), "810001");
        assert_eq!(packed(&lua, "{[1.5] = 1}"), "81ca3fc0000001");
        assert_eq!(packed(&lua, "{[2^31] = 1}"), "81ce8000000001");
        assert_eq!(packed(&lua, "{[true] = false}"), "81c3c2");
        assert_eq!(packed(&lua, "{print}"), "91c0");
        let sixteen: String = packed(
            &lua,
            "(function() local t = {} for i = 1, 16 do t[i] = i end return t end)()",
        );
        assert!(sixteen.starts_with("dc0010"));
        let map16: String = packed(
            &lua,
            "(function() local t = {} for i = 1, 16 do t['k'..i] = i end return t end)()",
        );
        assert!(map16.starts_with("de0010"));
        let big: String = packed(
            &lua,
            "(function() local t = {} for i = 1, 65536 do t[i] = 0 end return t end)()",
        );
        assert!(big.starts_with("dd00010000"));
        // Sixteen nested tables are kept; the seventeenth becomes nil.
        let nested = "(function() local t = {} for i = 1, 20 do t = {t} end return t end)()";
        assert_eq!(packed(&lua, nested), format!("{}c0", "91".repeat(16)));
        // Keys count towards the depth too.
        let keyed = "(function() local t = 1 for i = 1, 17 do t = {[t] = true} end return t end)()";
        assert_eq!(
            packed(&lua, keyed),
            format!("{}c0{}", "81".repeat(16), "c3".repeat(16))
        );
    }

    #[test]
    fn decoding_formats() {
        let lua = lua();
        let cases: [(&str, f64); 16] = [
            ("00", 0.0),
            ("7f", 127.0),
            ("ff", -1.0),
            ("e0", -32.0),
            ("cc80", 128.0),
            ("cdffff", 65535.0),
            ("ceffffffff", 4294967295.0),
            ("cf0000000100000000", 4294967296.0),
            // uint64 values above 2^63-1 wrap, as the C code pushes them as signed.
            ("cfffffffffffffffff", -1.0),
            ("d080", -128.0),
            ("d1ff7f", -129.0),
            ("d2ffff7fff", -32769.0),
            ("d3ffffff0000000000", -1099511627776.0),
            ("ca3fc00000", 1.5),
            ("cb3fb999999999999a", 0.1),
            ("d1 0102", 258.0),
        ];
        for (hex, expected) in cases {
            let hex = hex.replace(' ', "");
            let got: f64 = eval(&lua, &format!("return cmsgpack.unpack(unhex('{hex}'))"));
            assert_eq!(got, expected, "{hex}");
        }
        let strings: [(&str, &str); 4] = [
            ("a3616263", "abc"),
            ("d903616263", "abc"),
            ("da0003616263", "abc"),
            ("db00000003616263", "abc"),
        ];
        for (hex, expected) in strings {
            let got: String = eval(&lua, &format!("return cmsgpack.unpack(unhex('{hex}'))"));
            assert_eq!(got, expected, "{hex}");
        }
        lua.load(
            "local a, b, c, d = cmsgpack.unpack(unhex('c0c3c2'))
             assert(a == nil and b == true and c == false and d == nil)
             local t = cmsgpack.unpack(unhex('dc0003010203'))
             assert(#t == 3 and t[3] == 3)
             t = cmsgpack.unpack(unhex('dd00000002c001'))
             assert(t[1] == nil and t[2] == 1)
             t = cmsgpack.unpack(unhex('de0001a16101'))
             assert(t.a == 1)
             t = cmsgpack.unpack(unhex('df00000002a16101a162c0'))
             assert(t.a == 1 and t.b == nil)
             -- Later duplicates win, and a nil value removes the key.
             t = cmsgpack.unpack(unhex('82a16101a16102'))
             assert(t.a == 2)
             t = cmsgpack.unpack(unhex('82a16101a161c0'))
             assert(next(t) == nil)
             -- Table keys.
             t = cmsgpack.unpack(unhex('8191a16101'))
             local k, v = next(t)
             assert(type(k) == 'table' and k[1] == 'a' and v == 1)
             -- Number input is converted to its string form ('5' is the fixnum 0x35).
             assert(cmsgpack.unpack(5) == 0x35)
             assert(select('#', cmsgpack.unpack('')) == 0)",
        )
        .exec()
        .unwrap();
    }

    #[test]
    fn round_trips() {
        lua()
            .load(
                "local values = {0, 1, -1, 127, 128, -33, 65536, 2^32, -2^31, 2^53, -2^53,
                                 1.5, 0.1, -1e300, 1/0, -1/0, 'x', '', true, false}
                 for _, v in ipairs(values) do
                     local r = cmsgpack.unpack(cmsgpack.pack(v))
                     assert(r == v, tostring(v))
                 end
                 local t = {1, 2, {a = {b = {3, 4}}, c = 'd'}, {}, true}
                 local r = cmsgpack.unpack(cmsgpack.pack(t))
                 assert(r[1] == 1 and r[2] == 2 and r[3].a.b[2] == 4 and r[3].c == 'd')
                 assert(type(r[4]) == 'table' and next(r[4]) == nil and r[5] == true)
                 local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, 'two', {3}))
                 assert(a == 1 and b == 'two' and c[1] == 3)",
            )
            .exec()
            .unwrap();
    }

    #[test]
    fn unpack_one_and_limit() {
        lua()
            .load(
                "local s = cmsgpack.pack(1, 'two', {3}, nil, 5)
                 local off, v = cmsgpack.unpack_one(s)
                 assert(off == 1 and v == 1)
                 off, v = cmsgpack.unpack_one(s, off)
                 assert(off == 5 and v == 'two')
                 off, v = cmsgpack.unpack_one(s, '5')
                 assert(off == 7 and v[1] == 3)
                 local n = select('#', cmsgpack.unpack_one(s, off))
                 assert(n == 2)
                 off, v = cmsgpack.unpack_one(s, 8)
                 assert(off == -1 and v == 5)
                 -- At the end of the input only the offset comes back.
                 n, off = select('#', cmsgpack.unpack_one(s, #s)), cmsgpack.unpack_one(s, #s)
                 assert(n == 1 and off == -1)
                 local a, b, c, d = cmsgpack.unpack_limit(s, 2)
                 assert(a == 5 and b == 1 and c == 'two' and d == nil)
                 a, b, c = cmsgpack.unpack_limit(s, 2, 5)
                 assert(a == 8 and b[1] == 3 and c == nil)
                 a, b = cmsgpack.unpack_limit(s, 10, 7)
                 assert(a == -1)
                 assert(select('#', cmsgpack.unpack_limit(s, 10, 7)) == 3)
                 -- A zero limit with a non-zero offset decodes nothing.
                 assert(select('#', cmsgpack.unpack_limit(s, 0, 1)) == 1)
                 assert(cmsgpack.unpack_limit(s, 0, 1) == 1)
                 -- A zero limit and offset decodes everything and returns no offset.
                 assert(select('#', cmsgpack.unpack_limit(s, 0)) == 5)
                 assert(cmsgpack.unpack_limit(s, 0) == 1)
                 -- Fractional arguments are truncated like lua_tointeger does.
                 a, b = cmsgpack.unpack_limit(s, 1.9, 1.9)
                 assert(a == 5 and b == 'two')
                 -- Values with trailing nils keep their count.
                 assert(select('#', cmsgpack.unpack(unhex('01c0c0'))) == 3)",
            )
            .exec()
            .unwrap();
    }

    #[test]
    fn module_fields() {
        let lua = lua();
        let fields: (String, String, String, String) = eval(
            &lua,
            "return cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION",
        );
        assert_eq!(
            fields,
            (
                "cmsgpack".to_string(),
                "lua-cmsgpack 0.4.0".to_string(),
                "Copyright (C) 2012, Salvatore Sanfilippo".to_string(),
                "MessagePack C implementation for Lua".to_string()
            )
        );
    }

    #[test]
    fn errors() {
        let lua = lua();
        let cases = [
            (
                "cmsgpack.pack()",
                "bad argument #0 to 'pack' (MessagePack pack needs input.)",
            ),
            ("cmsgpack.unpack(unhex('92'))", "Missing bytes in input."),
            ("cmsgpack.unpack(unhex('9201'))", "Missing bytes in input."),
            ("cmsgpack.unpack(unhex('cd01'))", "Missing bytes in input."),
            (
                "cmsgpack.unpack(unhex('a36162'))",
                "Missing bytes in input.",
            ),
            (
                "cmsgpack.unpack(unhex('db0000000561'))",
                "Missing bytes in input.",
            ),
            (
                "cmsgpack.unpack(unhex('81a161'))",
                "Missing bytes in input.",
            ),
            ("cmsgpack.unpack(unhex('c1'))", "Bad data format in input."),
            (
                "cmsgpack.unpack(unhex('c40161'))",
                "Bad data format in input.",
            ),
            (
                "cmsgpack.unpack(unhex('d40100'))",
                "Bad data format in input.",
            ),
            (
                "cmsgpack.unpack(unhex('9101c1'))",
                "Bad data format in input.",
            ),
            ("cmsgpack.unpack(unhex('81c001'))", "table index is nil"),
            (
                "cmsgpack.unpack(unhex('81cbfff800000000000001'))",
                "table index is NaN",
            ),
            // The missing value is noticed before the nil key.
            ("cmsgpack.unpack(unhex('81c0'))", "Missing bytes in input."),
            (
                "cmsgpack.unpack_one('abc', -1)",
                "Invalid request to unpack with offset of -1 and limit of 3.",
            ),
            (
                "cmsgpack.unpack_limit('abcd', -1)",
                "Invalid request to unpack with offset of 0 and limit of 4.",
            ),
            (
                "cmsgpack.unpack_one('abc', 4)",
                "Start offset 4 greater than input length 3.",
            ),
            (
                "cmsgpack.unpack()",
                "bad argument #1 to 'unpack' (string expected, got no value)",
            ),
            (
                "cmsgpack.unpack({})",
                "bad argument #1 to 'unpack' (string expected, got table)",
            ),
            (
                "cmsgpack.unpack_one(nil, 'x')",
                "bad argument #2 to 'unpack_one' (number expected, got string)",
            ),
            (
                "cmsgpack.unpack_one(nil)",
                "bad argument #1 to 'unpack_one' (string expected, got nil)",
            ),
            (
                "cmsgpack.unpack_limit('a')",
                "bad argument #2 to 'unpack_limit' (number expected, got no value)",
            ),
            (
                "cmsgpack.unpack_limit('a', 1, {})",
                "bad argument #3 to 'unpack_limit' (number expected, got table)",
            ),
        ];
        for (code, message) in cases {
            let err = error_of(&lua, code);
            assert!(err.contains(message), "{code}: {err}");
        }
    }

    #[test]
    fn lua_stack_limits() {
        let lua = lua();
        // With one argument on the stack, 7999 values fit and 8000 do not.
        assert_eq!(
            eval::<i64>(
                &lua,
                "return select('#', cmsgpack.unpack(string.rep('\\160', 7999)))"
            ),
            7999
        );
        assert_eq!(
            eval::<i64>(
                &lua,
                "return select('#', cmsgpack.unpack(string.rep('\\161x', 7999)))"
            ),
            7999
        );
        let err = error_of(&lua, "cmsgpack.unpack(string.rep('\\1', 8000))");
        assert!(err.contains(MSG_TOO_MANY_VALUES), "{err}");
        // Extra arguments to unpack stay on the C stack and take room.
        let err = error_of(&lua, "cmsgpack.unpack(string.rep('\\1', 7999), 1)");
        assert!(err.contains(MSG_TOO_MANY_VALUES), "{err}");
        // unpack_limit needs one more slot for the offset.
        assert_eq!(
            eval::<i64>(
                &lua,
                "return select('#', cmsgpack.unpack_limit(string.rep('\\1', 7998), 10000))"
            ),
            7999
        );
        let err = error_of(
            &lua,
            "cmsgpack.unpack_limit(string.rep('\\1', 7999), 10000)",
        );
        assert!(err.contains(MSG_UNPACK_STACK), "{err}");
        // All-nil results cannot be counted by the length operator, and still all come back.
        assert_eq!(
            eval::<i64>(
                &lua,
                "return select('#', cmsgpack.unpack(string.rep('\\192', 7999)))"
            ),
            7999
        );
        // Nested arrays take two slots per level (the figures match the C library's).
        let deep = |levels: usize| {
            format!(
                "local t = cmsgpack.unpack(string.rep('\\145', {levels}) .. '\\1')
                 for i = 1, {levels} do t = t[1] end
                 return t"
            )
        };
        assert_eq!(eval::<i64>(&lua, &deep(3999)), 1);
        let err = error_of(&lua, &deep(4000));
        assert!(err.contains(MSG_ARRAY_STACK), "{err}");
        let err = error_of(&lua, "cmsgpack.unpack(string.rep('\\145', 5000))");
        assert!(err.contains(MSG_ARRAY_STACK), "{err}");
        // Maps nested through their keys take one slot per level. Building them does not run
        // out of mlua handles either.
        let keyed = |levels: usize| {
            format!(
                "local t = cmsgpack.unpack(string.rep('\\129', {levels}) .. '\\1'
                                           .. string.rep('\\1', {levels}))
                 for i = 1, {levels} do t = next(t) end
                 return t"
            )
        };
        assert_eq!(eval::<i64>(&lua, &keyed(7997)), 1);
        let err = error_of(&lua, &keyed(7998));
        assert!(err.contains(MSG_TOO_MANY_VALUES), "{err}");
        // Maps nested through their values, under table keys.
        let valued = |levels: usize| {
            format!(
                "local t = cmsgpack.unpack(string.rep('\\129\\144', {levels}) .. '\\1')
                 for i = 1, {levels} do local _, v = next(t) t = v end
                 return t"
            )
        };
        assert_eq!(eval::<i64>(&lua, &valued(3999)), 1);
        let err = error_of(&lua, &valued(4000));
        assert!(err.contains(MSG_TOO_MANY_VALUES), "{err}");
        // pack refuses more arguments than the C function has stack room for.
        let many = |n: usize| {
            format!(
                "local t = {{}} for i = 1, {n} do t[i] = {{i}} end
                 return #cmsgpack.pack(unpack(t))"
            )
        };
        assert_eq!(
            eval::<i64>(&lua, &many(4000)),
            2 * 127 + 3 * 128 + 4 * (4000 - 255)
        );
        let err = error_of(&lua, &many(4001));
        assert!(
            err.contains("bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)"),
            "{err}"
        );
        // A huge declared length with no data is just missing bytes.
        let err = error_of(&lua, "cmsgpack.unpack('\\221\\255\\255\\255\\255')");
        assert!(err.contains(MSG_EOF), "{err}");
    }

    #[test]
    fn the_measure_never_counts_more_than_the_encoding() {
        let lua = lua();
        for shape in [
            "1",
            "'abc'",
            "{}",
            "{1, 2, 3}",
            "{1, nil, 3}",
            "{a = 1, [2.5] = 'x', [3] = true}",
            "{[{}] = {1}, x = {y = {z = {}}}}",
            "(function() local a = {1} return {a, a, {a, {a}}} end)()",
            "(function() local t = {} t[1] = t t[2] = t return t end)()",
            "(function() local a = {} for i = 1, 12 do a = {a, a, x = a} end return a end)()",
            "(function() local t = {} for i = 1, 300 do t[i] = string.rep('y', i) end return t end)()",
        ] {
            let value: Value = lua.load(format!("return {shape}")).eval().unwrap();
            let bound = measure(&value, 0, &mut Memo::new());
            let len: usize = eval(&lua, &format!("return #cmsgpack.pack({shape})"));
            assert!(bound <= len, "{shape}: {bound} > {len}");
        }
    }

    #[test]
    fn packs_past_the_bound_fail_fast() {
        let lua = lua();
        for shape in [
            "(function() local a = {} for i = 1, 40 do a = {a, a, a, a, a, a, a, a} end return a end)()",
            "(function() local t = {} for i = 1, 100 do t[i] = t end return t end)()",
            "(function() local s = string.rep('x', 1000000) local t = {} \
             for i = 1, 1000 do t[i] = s end return t end)()",
        ] {
            let started = std::time::Instant::now();
            let error = error_of(&lua, &format!("cmsgpack.pack({shape})"));
            assert!(error.contains("MessagePack pack output exceeds 512 MB"), "{error}");
            assert!(started.elapsed().as_secs() < 5);
        }
    }

    #[test]
    fn a_table_that_contains_itself_packs_in_time_with_its_output() {
        let lua = lua();
        let started = std::time::Instant::now();
        // 3^16 branches: walked one by one, minutes in a debug build.
        let len: usize = eval(
            &lua,
            "local t = {} for i = 1, 3 do t[i] = t end return #cmsgpack.pack(t)",
        );
        // What redis-server 7.0.15 answers.
        assert_eq!(len, 64_570_081);
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
        // The copies are the bytes a walk writes: what redis-server 7.0.15 packs.
        for (code, sha) in [
            (
                "local t = {} for i = 1, 2 do t[i] = t end return cmsgpack.pack(t)",
                "c07b19cac957ac215c188434a1528e5c18f0c231",
            ),
            (
                "local t = {} t[1] = {t, 'x'} t[2] = t[1] t.k = t[1] return cmsgpack.pack(t, t[1])",
                "8e649f05011d3767e3f3fa37988dac83716acba6",
            ),
        ] {
            let packed: mlua::LuaString = eval(&lua, code);
            assert_eq!(
                crate::scripting::sandbox::sha1_hex(&packed.as_bytes()),
                sha,
                "{code}"
            );
        }
    }
}
