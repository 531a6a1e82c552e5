//! The `struct` global of the scripting VM: binary packing and unpacking of C-like records.
//!
//! Redis 7.0 bundles Roberto Ierusalimschy's `struct` library (`deps/lua/src/lua_struct.c`)
//! with the overflow guards Redis added on top of it. This module reimplements it in Rust and
//! keeps its observable behaviour: the same three functions (`struct.pack`, `struct.unpack`,
//! `struct.size`), the same format language, the same error texts, and the native sizes of a C
//! build on x86_64 Linux (`short` = 2, `int` = 4, `long` = 8, `size_t` = 8, native byte order
//! little endian, maximum alignment 8).
//!
//! The format language, one option per character:
//!
//! * `<` / `>` switch to little / big endian; ` ` (space) is ignored;
//! * `![n]` sets the maximum alignment to `n` (default 8), which must be a power of two;
//! * `x` is one byte of zero padding;
//! * `b`/`B`, `h`/`H`, `l`/`L` are signed/unsigned char, short and long; `T` is a `size_t`;
//! * `i[n]`/`I[n]` are signed/unsigned integers of `n` bytes (default 4, at most 32);
//! * `f` and `d` are a C float and double;
//! * `s` is a zero-terminated string;
//! * `c[n]` is `n` raw bytes (default 1). When packing, `c0` takes the whole string; when
//!   unpacking, `c0` takes its length from the value unpacked just before it.
//!
//! Where the C code relies on machine behaviour (size_t wrap-around, x86 conversions of
//! out-of-range doubles, x86 shift counts) this module reproduces the result the x86_64 build
//! gives, so that scripts see the same numbers and the same errors as on Redis.

use mlua::{Lua, MultiValue, Value};

/// Largest size, in bytes, accepted for `i[n]` and `I[n]`.
const MAX_INT_SIZE: usize = 32;

/// Default of `!` without a number: the alignment a double gets inside a C struct on x86_64.
const MAX_ALIGN: usize = 8;

/// Lua 5.1's limit on the number of stack slots a C function may use (`LUAI_MAXCSTACK`).
const LUA_MAX_C_STACK: usize = 8000;

/// Stack slots mlua's callback trampoline needs besides a callback's arguments and results.
const MLUA_RESERVED_SLOTS: usize = 23;

/// The error Lua 5.1 raises when a C function would need more stack than that.
const TOO_MANY_RESULTS: &str = "stack overflow (too many results)";

/// 2^63, the bound of the x86_64 double-to-integer conversions.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Byte order and maximum alignment, which format options can change midway through a format.
#[derive(Clone, Copy)]
struct Header {
    little_endian: bool,
    align: usize,
}

impl Default for Header {
    /// The x86_64 defaults: native (little endian) byte order and no alignment.
    fn default() -> Self {
        Header {
            little_endian: true,
            align: 1,
        }
    }
}

/// A cursor over a format string, which reads options and their optional numeric suffixes.
struct Format<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Format<'a> {
    /// The C library walks the format as a C string, so anything after a NUL byte is never seen.
    fn new(bytes: &'a [u8]) -> Self {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Format {
            bytes: &bytes[..end],
            at: 0,
        }
    }

    fn next_option(&mut self) -> Option<u8> {
        let opt = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(opt)
    }

    /// Reads the decimal number that may follow an option, or returns `default` when there is
    /// none. The value must fit in a C int; Redis turned the silent overflow of the original
    /// into an error.
    fn number(&mut self, default: usize) -> mlua::Result<usize> {
        if !self.peek_digit() {
            return Ok(default);
        }
        let mut value: i32 = 0;
        while self.peek_digit() {
            let digit = i32::from(self.bytes[self.at] - b'0');
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(digit))
                .ok_or_else(|| runtime("integral size overflow"))?;
            self.at += 1;
        }
        // A C int built from digits is never negative, so this conversion is lossless.
        Ok(value as usize)
    }

    fn peek_digit(&self) -> bool {
        self.bytes.get(self.at).is_some_and(u8::is_ascii_digit)
    }
}

/// Which of the three functions is running, for the argument error messages.
#[derive(Clone, Copy)]
enum Func {
    Pack,
    Unpack,
    Size,
}

impl Func {
    fn name(self) -> &'static str {
        match self {
            Func::Pack => "pack",
            Func::Unpack => "unpack",
            Func::Size => "size",
        }
    }
}

/// Creates the `struct` global table with `pack`, `unpack` and `size`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let table = lua.create_table()?;
    table.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| pack(lua, args))?,
    )?;
    table.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| unpack(lua, args))?,
    )?;
    table.set(
        "size",
        lua.create_function(|lua, args: MultiValue| size(lua, args))?,
    )?;
    lua.globals().set("struct", table)
}

/// `struct.pack(fmt, v1, v2, ...)`: returns the binary string holding the values.
fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt_bytes = check_string(lua, &args, 1, Func::Pack)?;
    let mut fmt = Format::new(&fmt_bytes);
    let mut header = Header::default();
    let mut out: Vec<u8> = Vec::new();
    // Arguments are numbered from 1 like Lua does; the format is argument 1.
    let mut arg = 2usize;
    // Mirrors the C running total, which drives alignment and may differ from the buffer
    // length only in how it wraps; both stay equal in practice.
    let mut total: usize = 0;
    while let Some(opt) = fmt.next_option() {
        let mut size = option_size(opt, &mut fmt)?;
        let pad = padding(total, &header, opt, size);
        total = total.wrapping_add(pad);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg, Func::Pack)?;
                arg += 1;
                put_integer(&mut out, n, header.little_endian, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = check_number(lua, &args, arg, Func::Pack)?;
                arg += 1;
                // The C cast to float rounds to nearest, exactly like `as f32`.
                let f = n as f32;
                if header.little_endian {
                    out.extend_from_slice(&f.to_le_bytes());
                } else {
                    out.extend_from_slice(&f.to_be_bytes());
                }
            }
            b'd' => {
                let n = check_number(lua, &args, arg, Func::Pack)?;
                arg += 1;
                if header.little_endian {
                    out.extend_from_slice(&n.to_le_bytes());
                } else {
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
            b'c' | b's' => {
                let s = check_string(lua, &args, arg, Func::Pack)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code has already advanced its argument counter when it checks the
                    // length, so the message names the argument after the string; Redis
                    // scripts see that number, hence it is kept.
                    return Err(arg_error(lua, arg, "string too short", Func::Pack));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => control_option(lua, opt, &mut fmt, &mut header, Func::Pack)?,
        }
        total = total.wrapping_add(size);
    }
    Ok(Value::String(lua.create_string(&out)?))
}

/// `struct.unpack(fmt, data [, pos])`: returns the values read from `data` starting at the
/// 1-based `pos`, followed by the position just after the last byte read.
fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt_bytes = check_string(lua, &args, 1, Func::Unpack)?;
    let data = check_string(lua, &args, 2, Func::Unpack)?;
    let len = data.len();
    let start = opt_integer(lua, &args, 3, 1, Func::Unpack)?;
    // C holds the position in a size_t, so a negative offset becomes a huge one: it passes
    // this check and then fails the bounds check of the first option (or, with an empty
    // format, comes back unchanged). Only zero is rejected here.
    let mut pos = start as u64 as usize;
    if pos == 0 {
        return Err(arg_error(
            lua,
            3,
            "offset must be 1 or greater",
            Func::Unpack,
        ));
    }
    pos -= 1;
    let mut fmt = Format::new(&fmt_bytes);
    let mut header = Header::default();
    let mut results: Vec<Value> = Vec::new();
    while let Some(opt) = fmt.next_option() {
        let mut size = option_size(opt, &mut fmt)?;
        pos = pos.wrapping_add(padding(pos, &header, opt, size));
        if !fits(size, pos, len) {
            return Err(arg_error(lua, 2, "data string too short", Func::Unpack));
        }
        // The C function keeps its arguments, every result and the next position on the Lua
        // stack, which Lua 5.1 bounds.
        if args.len() + results.len() + 2 > LUA_MAX_C_STACK {
            return Err(runtime(TOO_MANY_RESULTS));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                let n = get_integer(&data[pos..pos + size], header.little_endian, signed);
                results.push(Value::Number(n));
            }
            b'x' => {}
            b'f' => {
                let mut raw = [0u8; 4];
                raw.copy_from_slice(&data[pos..pos + 4]);
                let f = if header.little_endian {
                    f32::from_le_bytes(raw)
                } else {
                    f32::from_be_bytes(raw)
                };
                results.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(&data[pos..pos + 8]);
                let d = if header.little_endian {
                    f64::from_le_bytes(raw)
                } else {
                    f64::from_be_bytes(raw)
                };
                results.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    // The length is the previous result, which Lua accepts when it is a number
                    // or a string that converts to one.
                    let previous = match results.last() {
                        Some(v) => lua.coerce_number(v.clone())?,
                        None => None,
                    };
                    let Some(n) = previous else {
                        return Err(runtime("format 'c0' needs a previous size"));
                    };
                    results.pop();
                    size = c_double_to_u64(n) as usize;
                    if !fits(size, pos, len) {
                        return Err(arg_error(lua, 2, "data string too short", Func::Unpack));
                    }
                }
                results.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(nul) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(runtime("unfinished string in data"));
                };
                results.push(Value::String(lua.create_string(&data[pos..pos + nul])?));
                size = nul + 1;
            }
            _ => control_option(lua, opt, &mut fmt, &mut header, Func::Unpack)?,
        }
        pos = pos.wrapping_add(size);
    }
    // The next position goes back to Lua as a signed integer, so a wrapped size_t shows up as
    // a negative number exactly as in C.
    let next = pos.wrapping_add(1) as u64 as i64;
    results.push(Value::Number(next as f64));
    // mlua hands the results back through its own trampoline, which needs spare stack slots
    // that C does not: measured on mlua 0.12 with Lua 5.1, the first Rust callback of a VM
    // fails with an mlua stack error once arguments plus results exceed 8000 - 23. Stopping
    // there with the library's own message keeps the outcome deterministic; C only allows
    // about twenty more values.
    if args.len() + results.len() + MLUA_RESERVED_SLOTS > LUA_MAX_C_STACK {
        return Err(runtime(TOO_MANY_RESULTS));
    }
    Ok(MultiValue::from_iter(results))
}

/// `struct.size(fmt)`: the number of bytes `struct.pack(fmt, ...)` produces.
fn size(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt_bytes = check_string(lua, &args, 1, Func::Size)?;
    let mut fmt = Format::new(&fmt_bytes);
    let mut header = Header::default();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next_option() {
        let size = option_size(opt, &mut fmt)?;
        pos = pos.wrapping_add(padding(pos, &header, opt, size));
        if opt == b's' {
            return Err(arg_error(
                lua,
                1,
                "option 's' has no fixed size",
                Func::Size,
            ));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(
                lua,
                1,
                "option 'c0' has no fixed size",
                Func::Size,
            ));
        }
        // Only non-alphanumeric characters are validated here, so an unknown letter counts
        // as zero bytes instead of raising an error, as in the C library.
        if !opt.is_ascii_alphanumeric() {
            control_option(lua, opt, &mut fmt, &mut header, Func::Size)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Value::Number(pos as u64 as i64 as f64))
}

/// The size in bytes of the item an option stands for (0 for the options that are not items),
/// consuming the option's numeric suffix when it takes one.
fn option_size(opt: u8, fmt: &mut Format<'_>) -> mlua::Result<usize> {
    Ok(match opt {
        b'b' | b'B' => 1,
        b'h' | b'H' => 2,
        b'l' | b'L' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => fmt.number(1)?,
        b'i' | b'I' => {
            let size = fmt.number(4)?;
            if size > MAX_INT_SIZE {
                return Err(runtime(format!(
                    "integral size {size} is larger than limit of {MAX_INT_SIZE}"
                )));
            }
            size
        }
        _ => 0,
    })
}

/// The number of padding bytes needed before an item of `size` bytes at offset `at`.
///
/// The formula is the library's: it assumes the (capped) size is a power of two, and for sizes
/// such as `i3` it yields the same odd padding the C code does.
fn padding(at: usize, header: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(header.align);
    let mask = size.wrapping_sub(1);
    size.wrapping_sub(at & mask) & mask
}

/// Applies an option that is not an item: byte order, alignment, or an ignored space.
fn control_option(
    lua: &Lua,
    opt: u8,
    fmt: &mut Format<'_>,
    header: &mut Header,
    func: Func,
) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => header.little_endian = false,
        b'<' => header.little_endian = true,
        b'!' => {
            let align = fmt.number(MAX_ALIGN)?;
            if !align.is_power_of_two() {
                return Err(runtime(format!("alignment {align} is not a power of 2")));
            }
            header.align = align;
        }
        _ => {
            let shown = String::from_utf8_lossy(&[opt]).into_owned();
            return Err(arg_error(
                lua,
                1,
                &format!("invalid format option '{shown}'"),
                func,
            ));
        }
    }
    Ok(())
}

/// Whether `size` bytes starting at `pos` lie inside a string of `len` bytes, written so that
/// neither side can overflow (the guard Redis added to `unpack`).
fn fits(size: usize, pos: usize, len: usize) -> bool {
    size <= len && pos <= len - size
}

/// Appends `n` as an integer of `size` bytes.
///
/// Like the C code, the number goes through a 64-bit unsigned value (through a signed one when
/// negative), so bytes beyond the eighth are always zero, even for negative numbers.
fn put_integer(out: &mut Vec<u8>, n: f64, little_endian: bool, size: usize) {
    let value = if n < 0.0 {
        c_double_to_i64(n) as u64
    } else {
        c_double_to_u64(n)
    };
    let byte = |i: usize| -> u8 {
        if i < 8 {
            (value >> (8 * i)) as u8
        } else {
            0
        }
    };
    if little_endian {
        out.extend((0..size).map(byte));
    } else {
        out.extend((0..size).rev().map(byte));
    }
}

/// Reads an integer of `bytes.len()` bytes as a Lua number.
///
/// Only the eight least significant bytes survive, and sign extension uses the x86 shift
/// semantics the C build has (the shift count is taken modulo 64), which matters for sizes
/// above 8 and for size 0.
fn get_integer(bytes: &[u8], little_endian: bool, signed: bool) -> f64 {
    let fold = |acc: u64, b: &u8| (acc << 8) | u64::from(*b);
    let value = if little_endian {
        bytes.iter().rev().fold(0u64, fold)
    } else {
        bytes.iter().fold(0u64, fold)
    };
    if !signed {
        return value as f64;
    }
    let shift = (bytes.len() as u32).wrapping_mul(8).wrapping_sub(1);
    let mask = u64::MAX.wrapping_shl(shift);
    let value = if value & mask != 0 {
        value | mask
    } else {
        value
    };
    value as i64 as f64
}

/// A C `(int64_t)d` conversion as x86_64 performs it: truncation, with NaN and out-of-range
/// values becoming the "integer indefinite" value `i64::MIN`.
fn c_double_to_i64(d: f64) -> i64 {
    // NaN is outside every range, so it takes the indefinite value too.
    if (-TWO_POW_63..TWO_POW_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// A C `(uint64_t)d` conversion as GCC compiles it for x86_64: values below 2^63 (and NaN) go
/// through the signed conversion, larger ones are offset by 2^63 first.
fn c_double_to_u64(d: f64) -> u64 {
    if d >= TWO_POW_63 {
        (c_double_to_i64(d - TWO_POW_63) as u64) ^ (1u64 << 63)
    } else {
        c_double_to_i64(d) as u64
    }
}

/// `luaL_checklstring`: the argument as bytes, accepting numbers as Lua does.
fn check_string(lua: &Lua, args: &[Value], narg: usize, func: Func) -> mlua::Result<Vec<u8>> {
    let value = args.get(narg - 1).cloned().unwrap_or(Value::Nil);
    match lua.coerce_string(value)? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(type_error(lua, args, narg, "string", func)),
    }
}

/// `luaL_checknumber`: the argument as a number, accepting numeric strings as Lua does.
fn check_number(lua: &Lua, args: &[Value], narg: usize, func: Func) -> mlua::Result<f64> {
    let value = args.get(narg - 1).cloned().unwrap_or(Value::Nil);
    match lua.coerce_number(value)? {
        Some(n) => Ok(n),
        None => Err(type_error(lua, args, narg, "number", func)),
    }
}

/// `luaL_optinteger`: `default` when the argument is absent or nil, otherwise the number
/// truncated to an integer the way Lua 5.1 does on x86_64.
fn opt_integer(
    lua: &Lua,
    args: &[Value],
    narg: usize,
    default: i64,
    func: Func,
) -> mlua::Result<i64> {
    match args.get(narg - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => Ok(c_double_to_i64(check_number(lua, args, narg, func)?)),
    }
}

/// The "X expected, got Y" argument error, with Lua's names for the types.
fn type_error(lua: &Lua, args: &[Value], narg: usize, expected: &str, func: Func) -> mlua::Error {
    let got = match args.get(narg - 1) {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    };
    arg_error(lua, narg, &format!("{expected} expected, got {got}"), func)
}

/// `luaL_argerror`: "bad argument #n to 'name' (msg)".
///
/// Like Lua, the function is named after how the script called it (`struct.pack(...)` gives
/// `pack`, a local alias gives the local's name, an anonymous call gives `?`), and a method
/// call (`struct:pack(...)`) shifts the argument numbers by one because of the implicit self.
fn arg_error(lua: &Lua, narg: usize, msg: &str, func: Func) -> mlua::Error {
    let names = lua.inspect_stack(0, |debug| {
        let names = debug.names();
        (
            names.name.map(|n| n.into_owned()),
            names.name_what.map(str::to_owned),
        )
    });
    let (name, what) = match names {
        Some((name, what)) => (name, what),
        // Without stack information fall back to the library's own name for the function.
        None => (Some(func.name().to_owned()), None),
    };
    let name = name.unwrap_or_else(|| "?".to_owned());
    let mut narg = narg;
    if what.as_deref() == Some("method") {
        narg -= 1;
        if narg == 0 {
            return runtime(format!("calling '{name}' on bad self ({msg})"));
        }
    }
    runtime(format!("bad argument #{narg} to '{name}' ({msg})"))
}

fn runtime(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> Lua {
        let lua = Lua::new();
        register(&lua).unwrap();
        lua
    }

    /// Runs a chunk that must succeed and returns its single result.
    fn eval<T: mlua::FromLuaMulti>(lua: &Lua, code: &str) -> T {
        lua.load(code).eval().unwrap()
    }

    /// The message of the error the chunk raises, stripped of mlua's wrapping.
    fn error_of(lua: &Lua, code: &str) -> String {
        let mut err = lua.load(code).exec().unwrap_err();
        loop {
            match err {
                mlua::Error::CallbackError { cause, .. } => err = (*cause).clone(),
                mlua::Error::RuntimeError(msg) => return msg,
                other => panic!("unexpected error {other:?}"),
            }
        }
    }

    fn bytes(lua: &Lua, code: &str) -> Vec<u8> {
        eval::<mlua::LuaString>(lua, code).as_bytes().to_vec()
    }

    #[test]
    fn registers_the_three_functions() {
        let lua = vm();
        let kinds: String = eval(
            &lua,
            "return type(struct.pack)..type(struct.unpack)..type(struct.size)",
        );
        assert_eq!(kinds, "functionfunctionfunction");
    }

    #[test]
    fn packs_integers_with_native_sizes_and_byte_orders() {
        let lua = vm();
        assert_eq!(bytes(&lua, "return struct.pack('b', -1)"), [0xff]);
        assert_eq!(bytes(&lua, "return struct.pack('>h', 258)"), [1, 2]);
        assert_eq!(bytes(&lua, "return struct.pack('<h', 258)"), [2, 1]);
        assert_eq!(bytes(&lua, "return struct.pack('i', 1)"), [1, 0, 0, 0]);
        assert_eq!(
            bytes(&lua, "return struct.pack('>l', 1)"),
            [0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(bytes(&lua, "return struct.pack('T', 1)").len(), 8);
        assert_eq!(
            bytes(&lua, "return struct.pack('>i3', 0x010203)"),
            [1, 2, 3]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('<I2', 65535)"),
            [0xff, 0xff]
        );
        // Values wider than the slot are truncated to their low bytes.
        assert_eq!(bytes(&lua, "return struct.pack('B', 256 + 7)"), [7]);
        // Above 8 bytes the upper bytes stay zero, even for negative numbers.
        assert_eq!(
            bytes(&lua, "return struct.pack('<i10', -1)"),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]
        );
        assert_eq!(bytes(&lua, "return struct.pack('i0', 5)"), Vec::<u8>::new());
        // Numeric strings are accepted as numbers.
        assert_eq!(bytes(&lua, "return struct.pack('b', '12')"), [12]);
    }

    #[test]
    fn unpacks_integers() {
        let lua = vm();
        let (a, b, next): (f64, f64, f64) =
            eval(&lua, "return struct.unpack('>hH', '\\255\\254\\255\\254')");
        assert_eq!((a, b, next), (-2.0, 65534.0, 5.0));
        let (v, next): (f64, f64) = eval(&lua, "return struct.unpack('<i3', '\\1\\2\\128')");
        assert_eq!((v, next), (f64::from(0x0080_0201 - 0x0100_0000), 4.0));
        let (v, _): (f64, f64) = eval(&lua, "return struct.unpack('L', struct.pack('L', 2^53))");
        assert_eq!(v, 2f64.powi(53));
        let (v, _): (f64, f64) = eval(&lua, "return struct.unpack('l', struct.pack('l', -5))");
        assert_eq!(v, -5.0);
        let (v, next): (f64, f64) = eval(&lua, "return struct.unpack('i0', '')");
        assert_eq!((v, next), (0.0, 1.0));
        // Wide integers keep only their eight low bytes.
        let (v, _): (f64, f64) = eval(
            &lua,
            "return struct.unpack('>I10', '\\9\\9\\0\\0\\0\\0\\0\\0\\1\\0')",
        );
        assert_eq!(v, 256.0);
        let (v, _): (f64, f64) = eval(
            &lua,
            "return struct.unpack('<i16', struct.pack('<i16', -3))",
        );
        assert_eq!(v, -3.0);
    }

    #[test]
    fn round_trips_floats_and_doubles() {
        let lua = vm();
        let (f, d, next): (f64, f64, f64) = eval(
            &lua,
            "return struct.unpack('>fd', struct.pack('>fd', 1.5, 0.1))",
        );
        assert_eq!((f, d, next), (1.5, 0.1, 13.0));
        let (f, _): (f64, f64) = eval(&lua, "return struct.unpack('<f', struct.pack('<f', 0.1))");
        assert_eq!(f, f64::from(0.1f32));
        assert_eq!(
            bytes(&lua, "return struct.pack('>d', 1)"),
            [0x3f, 0xf0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('<f', 1)"),
            [0, 0, 0x80, 0x3f]
        );
    }

    #[test]
    fn handles_strings() {
        let lua = vm();
        assert_eq!(bytes(&lua, "return struct.pack('s', 'ab')"), b"ab\0");
        assert_eq!(bytes(&lua, "return struct.pack('c0', 'hello')"), b"hello");
        assert_eq!(bytes(&lua, "return struct.pack('c3', 'hello')"), b"hel");
        assert_eq!(bytes(&lua, "return struct.pack('c', 'hello')"), b"h");
        assert_eq!(bytes(&lua, "return struct.pack('s', 12)"), b"12\0");
        let (a, b, next): (String, String, f64) =
            eval(&lua, "return struct.unpack('sc2', 'ab\\0cde')");
        assert_eq!((a.as_str(), b.as_str(), next), ("ab", "cd", 6.0));
        // 'c0' takes its length from the value before it, which it replaces.
        let (s, next): (String, f64) = eval(&lua, "return struct.unpack('Bc0', '\\3abcd')");
        assert_eq!((s.as_str(), next), ("abc", 5.0));
        let (s, next): (String, f64) = eval(&lua, "return struct.unpack('c1c0', '2abc')");
        assert_eq!((s.as_str(), next), ("ab", 4.0));
        let n: usize = eval(&lua, "return select('#', struct.unpack('Bc0', '\\0'))");
        assert_eq!(n, 2);
    }

    #[test]
    fn aligns_and_pads() {
        let lua = vm();
        assert_eq!(
            bytes(&lua, "return struct.pack('!<bi', 1, 2)"),
            [1, 0, 0, 0, 2, 0, 0, 0]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('!2<bi', 1, 2)"),
            [1, 0, 2, 0, 0, 0]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('<bi', 1, 2)"),
            [1, 2, 0, 0, 0]
        );
        assert_eq!(bytes(&lua, "return struct.pack('bxb', 1, 2)"), [1, 0, 2]);
        assert_eq!(bytes(&lua, "return struct.pack(' b  b ', 1, 2)"), [1, 2]);
        // Strings are never aligned.
        assert_eq!(
            bytes(&lua, "return struct.pack('!bc2', 1, 'ab')"),
            b"\x01ab"
        );
        let (a, b, next): (f64, f64, f64) = eval(
            &lua,
            "return struct.unpack('!<bd', struct.pack('!<bd', 7, 2.5))",
        );
        assert_eq!((a, b, next), (7.0, 2.5, 17.0));
        let n: f64 = eval(&lua, "return struct.size('!bd')");
        assert_eq!(n, 16.0);
        let n: f64 = eval(&lua, "return struct.size('!4bd')");
        assert_eq!(n, 12.0);
        // A size that is not a power of two gets the library's own padding.
        let n: f64 = eval(&lua, "return struct.size('!bi3')");
        assert_eq!(n, 6.0);
    }

    #[test]
    fn sizes() {
        let lua = vm();
        let n: f64 = eval(&lua, "return struct.size('bBhHlLTiIfdxc5i7')");
        assert_eq!(
            n,
            (1 + 1 + 2 + 2 + 8 + 8 + 8 + 4 + 4 + 4 + 8 + 1 + 5 + 7) as f64
        );
        let n: f64 = eval(&lua, "return struct.size('')");
        assert_eq!(n, 0.0);
        // Unknown letters are not validated by size, as in C.
        let n: f64 = eval(&lua, "return struct.size('yb')");
        assert_eq!(n, 1.0);
        let n: f64 = eval(&lua, "return struct.size('c2147483647c2147483647')");
        assert_eq!(n, 4294967294.0);
    }

    #[test]
    fn unpack_positions() {
        let lua = vm();
        let (v, next): (f64, f64) = eval(&lua, "return struct.unpack('b', 'abc', 2)");
        assert_eq!((v, next), (98.0, 3.0));
        let (v, next): (f64, f64) = eval(&lua, "return struct.unpack('b', 'abc', 3.9)");
        assert_eq!((v, next), (99.0, 4.0));
        let next: f64 = eval(&lua, "return struct.unpack('', 'abc', 10)");
        assert_eq!(next, 10.0);
        let next: f64 = eval(&lua, "return struct.unpack('b', 'abc', nil)");
        assert_eq!(next, 97.0);
        assert_eq!(
            error_of(&lua, "struct.unpack('b', 'abc', 0)"),
            "bad argument #3 to 'unpack' (offset must be 1 or greater)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('b', 'abc', -1)"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        let next: f64 = eval(&lua, "return struct.unpack('', 'abc', -5)");
        assert_eq!(next, -5.0);
        assert_eq!(
            error_of(&lua, "struct.unpack('b', 'abc', 4)"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('b', 'abc', 'x')"),
            "bad argument #3 to 'unpack' (number expected, got string)"
        );
    }

    #[test]
    fn overflow_guards() {
        let lua = vm();
        assert_eq!(
            error_of(&lua, "struct.pack('i2147483648', 1)"),
            "integral size overflow"
        );
        assert_eq!(
            error_of(&lua, "struct.size('c99999999999')"),
            "integral size overflow"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('!4294967296', '')"),
            "integral size overflow"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('c2147483647', 'abc')"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('bc2147483647', 'abc')"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        // A previous value that is huge or negative cannot make 'c0' read out of bounds.
        assert_eq!(
            error_of(&lua, "struct.unpack('dc0', struct.pack('d', 2^63) .. 'x')"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('bc0', '\\255xx')"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        // Padding produces no values, so it never fills the stack.
        let next: f64 = eval(
            &lua,
            "return struct.unpack(string.rep('x', 9000), string.rep('a', 9000))",
        );
        assert_eq!(next, 9001.0);
    }

    /// The largest number of values `unpack` can return with `extra` arguments after the data,
    /// found by running `n` 'b' items for growing `n` in a fresh VM, where mlua needs the
    /// most stack of its own.
    fn unpack_limit(lua: &Lua, extra: &str) -> usize {
        let call =
            |n: usize| format!("struct.unpack(string.rep('b', {n}), string.rep('a', {n}){extra})");
        let mut n = 7900;
        while lua
            .load(format!("return select('#', {})", call(n + 1)))
            .eval::<usize>()
            .is_ok()
        {
            n += 1;
        }
        assert_eq!(
            error_of(lua, &call(n + 1)),
            "stack overflow (too many results)"
        );
        n + 1
    }

    #[test]
    fn result_count_limit() {
        // The very first callback of a VM, and the first after an error, take the path where
        // mlua needs the most room.
        let lua = vm();
        let first =
            "return select('#', struct.unpack(string.rep('b', 7974), string.rep('a', 7974)))";
        assert_eq!(eval::<usize>(&lua, first), 7975);
        assert!(!error_of(&lua, "struct.size('s')").is_empty());
        assert_eq!(eval::<usize>(&lua, first), 7975);
        // The position counts as a result, and every argument takes a stack slot too.
        assert_eq!(unpack_limit(&vm(), ""), 7975);
        assert_eq!(unpack_limit(&vm(), ", 1, 0"), 7973);
        // A VM that has already run Rust callbacks behaves the same.
        let lua = vm();
        let _: f64 = eval(&lua, "return struct.size('b')");
        assert_eq!(unpack_limit(&lua, ""), 7975);
        // 'c0' replaces the length it consumes, and padding yields nothing.
        let lua = vm();
        let n: usize = eval(
            &lua,
            "return select('#', struct.unpack(string.rep('b', 7973) .. 'bc0x', string.rep('a', 7973) .. '\\1zz'))",
        );
        assert_eq!(n, 7975);
        // A huge format fails fast instead of collecting values first.
        assert_eq!(
            error_of(
                &lua,
                "struct.unpack(string.rep('b', 100000), string.rep('a', 100000))"
            ),
            "stack overflow (too many results)"
        );
    }

    #[test]
    fn error_messages() {
        let lua = vm();
        assert_eq!(
            error_of(&lua, "struct.pack('i33', 1)"),
            "integral size 33 is larger than limit of 32"
        );
        assert_eq!(
            error_of(&lua, "struct.size('I64')"),
            "integral size 64 is larger than limit of 32"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('!3b', 1)"),
            "alignment 3 is not a power of 2"
        );
        assert_eq!(
            error_of(&lua, "struct.size('!0')"),
            "alignment 0 is not a power of 2"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('y', 1)"),
            "bad argument #1 to 'pack' (invalid format option 'y')"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('=b', 1)"),
            "bad argument #1 to 'pack' (invalid format option '=')"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('q', 'abc')"),
            "bad argument #1 to 'unpack' (invalid format option 'q')"
        );
        assert_eq!(
            error_of(&lua, "struct.size('%')"),
            "bad argument #1 to 'size' (invalid format option '%')"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('i', 'abc')"),
            "bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('s', 'abc')"),
            "unfinished string in data"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('c0', 'abc')"),
            "format 'c0' needs a previous size"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('c1c0', 'abc')"),
            "format 'c0' needs a previous size"
        );
        // The C library names the argument after the string it measured.
        assert_eq!(
            error_of(&lua, "struct.pack('c5', 'abc')"),
            "bad argument #3 to 'pack' (string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.size('s')"),
            "bad argument #1 to 'size' (option 's' has no fixed size)"
        );
        assert_eq!(
            error_of(&lua, "struct.size('bc0')"),
            "bad argument #1 to 'size' (option 'c0' has no fixed size)"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('bb', 1)"),
            "bad argument #3 to 'pack' (number expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('b', {})"),
            "bad argument #2 to 'pack' (number expected, got table)"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('s', nil)"),
            "bad argument #2 to 'pack' (string expected, got nil)"
        );
        assert_eq!(
            error_of(&lua, "struct.pack()"),
            "bad argument #1 to 'pack' (string expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('b')"),
            "bad argument #2 to 'unpack' (string expected, got no value)"
        );
        // Lua names the function after the call site.
        assert_eq!(
            error_of(&lua, "local p = struct.pack; p('y')"),
            "bad argument #1 to 'p' (invalid format option 'y')"
        );
        assert_eq!(
            error_of(&lua, "local ok, e = pcall(struct.pack, 'y'); error(e)"),
            "bad argument #1 to '?' (invalid format option 'y')"
        );
        assert_eq!(
            error_of(&lua, "struct:pack('b')"),
            "calling 'pack' on bad self (string expected, got table)"
        );
    }

    #[test]
    fn reproduces_x86_64_conversions() {
        let lua = vm();
        // Out-of-range doubles convert the way the x86_64 build does.
        assert_eq!(bytes(&lua, "return struct.pack('<L', 2^64)"), [0; 8]);
        assert_eq!(
            bytes(&lua, "return struct.pack('<l', -2^70)"),
            [0, 0, 0, 0, 0, 0, 0, 0x80]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('>L', 2^63 + 2^11)"),
            [0x80, 0, 0, 0, 0, 0, 0x08, 0]
        );
        assert_eq!(
            bytes(&lua, "return struct.pack('<i', 2^32 + 5)"),
            [5, 0, 0, 0]
        );
        assert_eq!(bytes(&lua, "return struct.pack('<b', 3.9)"), [3]);
        assert_eq!(bytes(&lua, "return struct.pack('<b', -3.9)"), [0xfd]);
        let (v, _): (f64, f64) = eval(
            &lua,
            "return struct.unpack('>l', '\\128' .. ('\\0'):rep(7))",
        );
        assert_eq!(v, -(2f64.powi(63)));
        let (v, _): (f64, f64) = eval(&lua, "return struct.unpack('>L', ('\\255'):rep(8))");
        assert_eq!(v, 2f64.powi(64));
        // For sizes above 8 the sign mask comes from a shift taken modulo 64, as on x86.
        let (v, _): (f64, f64) = eval(
            &lua,
            "return struct.unpack('<i9', '\\128' .. ('\\0'):rep(8))",
        );
        assert_eq!(v, -128.0);
        // A numeric format is used as its string form.
        let n: f64 = eval(&lua, "return struct.size(12)");
        assert_eq!(n, 0.0);
        assert_eq!(
            error_of(&lua, "struct.pack(5)"),
            "bad argument #1 to 'pack' (invalid format option '5')"
        );
    }

    #[test]
    fn format_stops_at_nul() {
        let lua = vm();
        assert_eq!(bytes(&lua, "return struct.pack('b\\0b', 1, 2)"), [1]);
    }
}
