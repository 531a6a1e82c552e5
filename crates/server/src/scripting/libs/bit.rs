//! The `bit` global of the scripting VM: LuaBitOp 1.0.2, the bitwise-operations library
//! Redis 7.0 bundles (`deps/lua/src/lua_bit.c`).
//!
//! Every operand is first normalised to a 32-bit pattern the way BitOp does it on a
//! double-based Lua: the number is added to 2^52 + 2^51 and the low 32 bits of the resulting
//! IEEE-754 pattern are taken. For any number below 2^51 in magnitude that means "round to
//! nearest (ties to even), then reduce modulo 2^32"; for larger magnitudes it yields whatever
//! the C trick yields, which is what we reproduce by doing exactly the same addition. Results
//! are always returned as the signed 32-bit interpretation of the pattern.
//!
//! Operands that are not numbers (nor strings Lua can convert to numbers) raise
//! `bad argument #N to 'name' (number expected, got TYPE)`, as `luaL_typerror` does.

use mlua::{Lua, MultiValue, Table, Value};

/// The 2^52 + 2^51 constant whose addition leaves the integer part of a double in the low
/// bits of its mantissa.
const NORMALISE_BIAS: f64 = 6_755_399_441_055_744.0;

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

/// Converts argument `index` (1-based) of function `name` to its 32-bit pattern.
fn bit_arg(lua: &Lua, args: &MultiValue, index: usize, name: &str) -> mlua::Result<u32> {
    let value = args.get(index - 1);
    let number = match value {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(v @ Value::String(_)) => lua.coerce_number(v.clone())?,
        _ => None,
    };
    match number {
        Some(n) => Ok(normalise(n)),
        None => {
            let got = value.map_or("no value", lua_type_name);
            Err(mlua::Error::RuntimeError(format!(
                "bad argument #{index} to '{name}' (number expected, got {got})"
            )))
        }
    }
}

/// BitOp's number-to-bits conversion: the low word of `n + 2^52 + 2^51`.
fn normalise(n: f64) -> u32 {
    // Truncating to the low 32 bits is the whole point of the trick.
    (n + NORMALISE_BIAS).to_bits() as u32
}

/// Every BitOp function returns the signed reading of the 32-bit result.
fn ret(bits: u32) -> f64 {
    f64::from(bits as i32)
}

/// The fold shared by `band`, `bor` and `bxor`. The C code reads the first argument and then
/// the others from the last one down, so that is the order in which a bad argument is found.
fn fold(lua: &Lua, args: &MultiValue, name: &str, op: fn(u32, u32) -> u32) -> mlua::Result<f64> {
    let mut acc = bit_arg(lua, args, 1, name)?;
    for index in (2..=args.len()).rev() {
        acc = op(acc, bit_arg(lua, args, index, name)?);
    }
    Ok(ret(acc))
}

/// The body shared by the shift and rotate functions: the count uses only its low five bits.
fn shift(lua: &Lua, args: &MultiValue, name: &str, op: fn(u32, u32) -> u32) -> mlua::Result<f64> {
    let bits = bit_arg(lua, args, 1, name)?;
    let count = bit_arg(lua, args, 2, name)? & 31;
    Ok(ret(op(bits, count)))
}

/// `bit.tohex(x [, n])`: `n` hex digits of `x` (default 8, at most 8), upper case when `n` is
/// negative. Only an absent second argument means "default"; an explicit nil is an error.
fn tohex(lua: &Lua, args: &MultiValue) -> mlua::Result<String> {
    let mut bits = bit_arg(lua, args, 1, "tohex")?;
    let mut digits = if args.len() < 2 {
        8
    } else {
        bit_arg(lua, args, 2, "tohex")? as i32
    };
    let mut alphabet: &[u8; 16] = b"0123456789abcdef";
    if digits < 0 {
        // Negating i32::MIN overflows in C (undefined behaviour: a build of the C library
        // crashes on it); later BitOp releases treat it as the largest negative count, so
        // that is what we do: eight upper-case digits.
        digits = digits.checked_neg().unwrap_or(i32::MAX);
        alphabet = b"0123456789ABCDEF";
    }
    let digits = digits.min(8) as usize;
    let mut out = vec![0u8; digits];
    for slot in out.iter_mut().rev() {
        *slot = alphabet[(bits & 15) as usize];
        bits >>= 4;
    }
    // Only ASCII hex digits were written.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Creates the `bit` global table with BitOp's twelve functions.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let bit: Table = lua.create_table()?;

    bit.set(
        "tobit",
        lua.create_function(|lua, args: MultiValue| Ok(ret(bit_arg(lua, &args, 1, "tobit")?)))?,
    )?;
    bit.set(
        "bnot",
        lua.create_function(|lua, args: MultiValue| Ok(ret(!bit_arg(lua, &args, 1, "bnot")?)))?,
    )?;
    bit.set(
        "band",
        lua.create_function(|lua, args: MultiValue| fold(lua, &args, "band", |a, b| a & b))?,
    )?;
    bit.set(
        "bor",
        lua.create_function(|lua, args: MultiValue| fold(lua, &args, "bor", |a, b| a | b))?,
    )?;
    bit.set(
        "bxor",
        lua.create_function(|lua, args: MultiValue| fold(lua, &args, "bxor", |a, b| a ^ b))?,
    )?;
    bit.set(
        "lshift",
        lua.create_function(|lua, args: MultiValue| shift(lua, &args, "lshift", |b, n| b << n))?,
    )?;
    bit.set(
        "rshift",
        lua.create_function(|lua, args: MultiValue| shift(lua, &args, "rshift", |b, n| b >> n))?,
    )?;
    bit.set(
        "arshift",
        lua.create_function(|lua, args: MultiValue| {
            shift(lua, &args, "arshift", |b, n| ((b as i32) >> n) as u32)
        })?,
    )?;
    bit.set(
        "rol",
        lua.create_function(|lua, args: MultiValue| shift(lua, &args, "rol", u32::rotate_left))?,
    )?;
    bit.set(
        "ror",
        lua.create_function(|lua, args: MultiValue| shift(lua, &args, "ror", u32::rotate_right))?,
    )?;
    bit.set(
        "bswap",
        lua.create_function(|lua, args: MultiValue| {
            Ok(ret(bit_arg(lua, &args, 1, "bswap")?.swap_bytes()))
        })?,
    )?;
    bit.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| tohex(lua, &args))?,
    )?;

    lua.globals().set("bit", bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        register(&lua).unwrap();
        lua
    }

    fn eval_f64(lua: &Lua, code: &str) -> f64 {
        lua.load(code).eval::<f64>().unwrap()
    }

    fn eval_str(lua: &Lua, code: &str) -> String {
        lua.load(code).eval::<String>().unwrap()
    }

    fn error_of(lua: &Lua, code: &str) -> String {
        match lua.load(code).exec() {
            Ok(()) => panic!("{code} did not fail"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn redis_minimal_functionality() {
        let lua = lua();
        lua.load(
            "assert(bit.tobit(1) == 1);
             assert(bit.band(1) == 1);
             assert(bit.bxor(1,2) == 3);
             assert(bit.bor(1,2,4,8,16,32,64,128) == 255)",
        )
        .exec()
        .unwrap();
    }

    #[test]
    fn redis_version_extraction_from_functions_test() {
        let lua = lua();
        let s = eval_str(
            &lua,
            "local version = 0x070002
             return string.format('%d.%d.%d',
                 bit.band(bit.rshift(version, 16), 0x000000ff),
                 bit.band(bit.rshift(version, 8), 0x000000ff),
                 bit.band(version, 0x000000ff))",
        );
        assert_eq!(s, "7.0.2");
    }

    #[test]
    fn tobit_normalisation() {
        let lua = lua();
        assert_eq!(eval_f64(&lua, "return bit.tobit(0xffffffff)"), -1.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(0xffffffff + 1)"), 0.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(2^40 + 5)"), 5.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(-1)"), -1.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(2^31)"), -2147483648.0);
        // Fractions round to nearest, ties to even.
        assert_eq!(eval_f64(&lua, "return bit.tobit(1.5)"), 2.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(2.5)"), 2.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(-1.5)"), -2.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(0.4)"), 0.0);
        // Numeric strings are converted like Lua does.
        assert_eq!(eval_f64(&lua, "return bit.tobit('0x10')"), 16.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(' 12 ')"), 12.0);
        // Beyond 2^53 the trick keeps whatever lands in the low word.
        assert_eq!(eval_f64(&lua, "return bit.tobit(2^53)"), 0.0);
        assert_eq!(eval_f64(&lua, "return bit.tobit(1/0)"), 0.0);
    }

    #[test]
    fn logic_ops() {
        let lua = lua();
        assert_eq!(eval_f64(&lua, "return bit.bnot(0)"), -1.0);
        assert_eq!(eval_f64(&lua, "return bit.bnot(-1)"), 0.0);
        assert_eq!(eval_f64(&lua, "return bit.bnot(0x12345678)"), -305419897.0);
        assert_eq!(eval_f64(&lua, "return bit.band(0x12345678, 0xff)"), 120.0);
        assert_eq!(eval_f64(&lua, "return bit.band(-1, 0xf0, 0x3c)"), 48.0);
        assert_eq!(
            eval_f64(&lua, "return bit.bor(0x80000000, 1)"),
            -2147483647.0
        );
        assert_eq!(eval_f64(&lua, "return bit.bxor(0xff, 0x0f, 0x01)"), 241.0);
    }

    #[test]
    fn shifts_and_rotates() {
        let lua = lua();
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, 0)"), 1.0);
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, 8)"), 256.0);
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, 31)"), -2147483648.0);
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, 32)"), 1.0);
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, 40)"), 256.0);
        assert_eq!(eval_f64(&lua, "return bit.lshift(1, -1)"), -2147483648.0);
        assert_eq!(eval_f64(&lua, "return bit.rshift(256, 8)"), 1.0);
        assert_eq!(eval_f64(&lua, "return bit.rshift(-256, 8)"), 16777215.0);
        assert_eq!(eval_f64(&lua, "return bit.arshift(-256, 8)"), -1.0);
        assert_eq!(eval_f64(&lua, "return bit.arshift(256, 8)"), 1.0);
        assert_eq!(
            eval_f64(&lua, "return bit.rol(0x12345678, 12)"),
            1164411171.0
        );
        assert_eq!(
            eval_f64(&lua, "return bit.ror(0x12345678, 12)"),
            1736516421.0
        );
        assert_eq!(eval_f64(&lua, "return bit.rol(0x12345678, 0)"), 305419896.0);
        assert_eq!(
            eval_f64(&lua, "return bit.ror(0x12345678, 32)"),
            305419896.0
        );
        assert_eq!(eval_f64(&lua, "return bit.bswap(0x12345678)"), 2018915346.0);
        assert_eq!(eval_f64(&lua, "return bit.bswap(0x78563412)"), 305419896.0);
    }

    #[test]
    fn tohex_digits() {
        let lua = lua();
        assert_eq!(eval_str(&lua, "return bit.tohex(1)"), "00000001");
        assert_eq!(eval_str(&lua, "return bit.tohex(-1)"), "ffffffff");
        assert_eq!(eval_str(&lua, "return bit.tohex(0xffffffff)"), "ffffffff");
        assert_eq!(eval_str(&lua, "return bit.tohex(-1, -8)"), "FFFFFFFF");
        assert_eq!(eval_str(&lua, "return bit.tohex(0x21, 4)"), "0021");
        assert_eq!(eval_str(&lua, "return bit.tohex(0x87654321, 4)"), "4321");
        assert_eq!(eval_str(&lua, "return bit.tohex(0x87654321, -4)"), "4321");
        assert_eq!(eval_str(&lua, "return bit.tohex(0xabcdef, -6)"), "ABCDEF");
        assert_eq!(eval_str(&lua, "return bit.tohex(0xabcdef, 12)"), "00abcdef");
        assert_eq!(eval_str(&lua, "return bit.tohex(0xabcdef, 0)"), "");
        assert_eq!(
            eval_str(&lua, "return bit.tohex(0xabcdef, -0x80000000)"),
            "00ABCDEF"
        );
    }

    #[test]
    fn bad_arguments() {
        let lua = lua();
        assert!(error_of(&lua, "bit.tobit()")
            .contains("bad argument #1 to 'tobit' (number expected, got no value)"));
        assert!(error_of(&lua, "bit.band(1, {})")
            .contains("bad argument #2 to 'band' (number expected, got table)"));
        // The C loop visits the trailing arguments from the last one down.
        assert!(error_of(&lua, "bit.bor(1, 'x', 2, true)")
            .contains("bad argument #4 to 'bor' (number expected, got boolean)"));
        assert!(error_of(&lua, "bit.lshift(1)")
            .contains("bad argument #2 to 'lshift' (number expected, got no value)"));
        assert!(error_of(&lua, "bit.tohex(1, nil)")
            .contains("bad argument #2 to 'tohex' (number expected, got nil)"));
        assert!(error_of(&lua, "bit.bnot('zz')")
            .contains("bad argument #1 to 'bnot' (number expected, got string)"));
    }
}
