//! Redis 7 functions: libraries loaded with FUNCTION LOAD, each registering named functions
//! with `redis.register_function`, called with FCALL.
//!
//! Every library shares one environment (`private.fenv`). While a library's top level runs,
//! its globals are only the load API (`redis.register_function`, `redis.log`, the version);
//! once loaded, its functions see the same globals as EVAL scripts, as in Redis.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};

use super::engine::ScriptFlags;
use super::sandbox::{self, error_text, RaisedReply};

/// Longest a library's top level may run (Redis' `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT_MS: u128 = 500;

pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
    pub callback: Function,
}

pub struct Library {
    pub name: String,
    /// The whole FUNCTION LOAD payload, shebang included (FUNCTION LIST WITHCODE, DUMP).
    pub code: Bytes,
    pub functions: Vec<FunctionInfo>,
}

/// The loaded libraries and an index from function name to library.
#[derive(Default)]
pub struct Functions {
    pub libraries: BTreeMap<String, Library>,
    index: HashMap<String, String>,
}

impl Functions {
    /// Function and library names are case-insensitive, as in Redis: both maps are keyed by
    /// the lowercase name.
    pub fn function(&self, name: &[u8]) -> Option<&FunctionInfo> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let library = self.libraries.get(self.index.get(&name)?)?;
        library
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&name))
    }

    pub fn has_library(&self, name: &str) -> bool {
        self.libraries.contains_key(&name.to_ascii_lowercase())
    }

    pub fn function_count(&self) -> usize {
        self.index.len()
    }

    pub fn delete(&mut self, name: &[u8]) -> bool {
        let Ok(name) = std::str::from_utf8(name) else {
            return false;
        };
        match self.libraries.remove(&name.to_ascii_lowercase()) {
            Some(library) => {
                for function in &library.functions {
                    self.index.remove(&function.name.to_ascii_lowercase());
                }
                true
            }
            None => false,
        }
    }

    pub fn flush(&mut self) {
        self.libraries.clear();
        self.index.clear();
    }

    /// Adds a compiled library, replacing one of the same name when `replace`.
    fn insert(&mut self, library: Library, replace: bool) -> Result<(), Vec<u8>> {
        let key = library.name.to_ascii_lowercase();
        if self.libraries.contains_key(&key) && !replace {
            return Err(format!("ERR Library '{}' already exists", library.name).into_bytes());
        }
        for function in &library.functions {
            if let Some(owner) = self.index.get(&function.name.to_ascii_lowercase()) {
                if owner != &key {
                    return Err(
                        format!("ERR Function {} already exists", function.name).into_bytes()
                    );
                }
            }
        }
        self.delete(library.name.as_bytes());
        for function in &library.functions {
            self.index
                .insert(function.name.to_ascii_lowercase(), key.clone());
        }
        self.libraries.insert(key, library);
        Ok(())
    }
}

/// The `name=` of a library's `#!lua name=...` line, and the code after that line.
fn parse_metadata(payload: &[u8]) -> Result<(String, usize), Vec<u8>> {
    if !payload.starts_with(b"#!") {
        return Err(b"ERR Missing library metadata".to_vec());
    }
    let Some(end) = payload.iter().position(|&b| b == b'\n') else {
        return Err(b"ERR Invalid library metadata".to_vec());
    };
    let mut parts = Vec::new();
    if !latch_protocol::request::split_args(&Bytes::copy_from_slice(&payload[..end]), &mut parts)
        || parts.is_empty()
    {
        return Err(b"ERR Invalid library metadata".to_vec());
    }
    let engine = &parts[0][2..];
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    b"ERR Invalid metadata value, name argument was given multiple times".to_vec(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        let mut message = b"ERR Invalid metadata value given: ".to_vec();
        message.extend_from_slice(part);
        return Err(message);
    }
    let Some(name) = name else {
        return Err(b"ERR Library name was not given".to_vec());
    };
    if !valid_name(&name) {
        return Err(b"ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".to_vec());
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        let mut message = b"ERR Engine '".to_vec();
        message.extend_from_slice(engine);
        message.extend_from_slice(b"' not found");
        return Err(message);
    }
    Ok((String::from_utf8_lossy(&name).into_owned(), end))
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The Lua tables a load works with (made by the sandbox prelude).
pub struct LoadApi {
    pub fenv: Table,
    pub fenv_meta: Table,
    pub load_api: Table,
    pub load_redis: Table,
    pub safe: Table,
    pub idle_register: Function,
}

/// FUNCTION LOAD: compiles the library, runs its top level to collect its functions, and
/// adds it. Returns the library name, or the error reply.
pub fn load(
    lua: &Lua,
    api: &LoadApi,
    functions: &mut Functions,
    payload: &Bytes,
    replace: bool,
) -> Result<String, Vec<u8>> {
    let (name, code_start) = parse_metadata(payload)?;
    if functions.has_library(&name) && !replace {
        return Err(format!("ERR Library '{name}' already exists").into_bytes());
    }
    let chunk = lua
        .load(&payload[code_start..])
        .set_name("@user_function")
        .set_environment(api.fenv.clone())
        .into_function()
        .map_err(|error| {
            let mut message = b"ERR Error compiling function: ".to_vec();
            message.extend_from_slice(sandbox::plain_message(&error).as_bytes());
            message
        })?;
    let registered: RefCell<Vec<FunctionInfo>> = RefCell::new(Vec::new());
    let started = std::time::Instant::now();
    let outcome = (|| -> mlua::Result<()> {
        api.fenv_meta.raw_set("__index", api.load_api.clone())?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(100_000),
            move |lua, _| {
                if started.elapsed().as_millis() > LOAD_TIMEOUT_MS {
                    let _ = lua.set_hook(HookTriggers::new().every_line(), |_, _| {
                        Err(mlua::Error::external(RaisedReply(error_text(
                            b"FUNCTION LOAD timeout",
                        ))))
                    });
                    return Err(mlua::Error::external(RaisedReply(error_text(
                        b"FUNCTION LOAD timeout",
                    ))));
                }
                Ok(VmState::Continue)
            },
        )?;
        lua.scope(|scope| {
            let register = scope.create_function(|_, args: MultiValue| {
                let info = read_registration(args).map_err(|message| {
                    mlua::Error::external(RaisedReply(error_text(message.as_bytes())))
                })?;
                let mut registered = registered.borrow_mut();
                if registered
                    .iter()
                    .any(|f| f.name.eq_ignore_ascii_case(&info.name))
                {
                    return Err(mlua::Error::external(RaisedReply(error_text(
                        b"Function already exists in the library",
                    ))));
                }
                registered.push(info);
                Ok(())
            })?;
            api.load_redis.raw_set("register_function", register)?;
            let result = chunk.call::<()>(());
            api.load_redis
                .raw_set("register_function", api.idle_register.clone())?;
            result
        })
    })();
    lua.remove_hook();
    let _ = api.fenv_meta.raw_set("__index", api.safe.clone());
    if let Err(error) = outcome {
        let text = match sandbox::raised_reply(&error) {
            Some(raised) => raised.0.clone(),
            None => {
                let mut text = b"ERR ".to_vec();
                text.extend_from_slice(sandbox::plain_message(&error).as_bytes());
                text
            }
        };
        let mut message = b"ERR Error registering functions: ".to_vec();
        message.extend_from_slice(&text);
        return Err(message);
    }
    let registered = registered.into_inner();
    if registered.is_empty() {
        return Err(b"ERR No functions registered".to_vec());
    }
    functions.insert(
        Library {
            name: name.clone(),
            code: payload.clone(),
            functions: registered,
        },
        replace,
    )?;
    Ok(name)
}

/// The arguments of `redis.register_function`: `(name, callback)` or one table of named
/// arguments. The error text (without "ERR") otherwise.
fn read_registration(args: MultiValue) -> Result<FunctionInfo, String> {
    let mut args = args.into_iter();
    let (first, second, more) = (args.next(), args.next(), args.next());
    if more.is_some() || first.is_none() {
        return Err("wrong number of arguments to redis.register_function".into());
    }
    let (name, callback, description, flags) = match (first, second) {
        (Some(first), None) => {
            let Value::Table(named) = first else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
            };
            let (mut name, mut callback, mut description, mut flags) =
                (None, None, None, ScriptFlags::default());
            for pair in named.pairs::<Value, Value>() {
                let (key, value) = pair.map_err(|e| e.to_string())?;
                let Value::String(key) = key else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                let key = key.to_string_lossy().to_ascii_lowercase();
                match key.as_str() {
                    "function_name" => match value {
                        Value::String(text) => name = Some(text.as_bytes().to_vec()),
                        _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                    },
                    "description" => match value {
                        Value::String(text) => description = Some(Bytes::copy_from_slice(&text.as_bytes())),
                        _ => return Err("description argument given to redis.register_function must be a string".into()),
                    },
                    "callback" => match value {
                        Value::Function(function) => callback = Some(function),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => match value {
                        Value::Table(list) => {
                            for item in list.sequence_values::<Value>() {
                                let ok = match item {
                                    Ok(Value::String(flag)) => flags.set(&flag.as_bytes()),
                                    _ => false,
                                };
                                if !ok {
                                    return Err("unknown flag given".into());
                                }
                            }
                        }
                        _ => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
                    },
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let Some(name) = name else {
                return Err("redis.register_function must get a function name argument".into());
            };
            let Some(callback) = callback else {
                return Err("redis.register_function must get a callback argument".into());
            };
            (name, callback, description, flags)
        }
        (Some(first), Some(second)) => {
            let Value::String(name) = first else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(callback) = second else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (
                name.as_bytes().to_vec(),
                callback,
                None,
                ScriptFlags::default(),
            )
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&name) {
        // Redis 7.0 words this error for libraries, function names included.
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok(FunctionInfo {
        name: String::from_utf8_lossy(&name).into_owned(),
        description,
        flags,
        callback,
    })
}

/// The flag names of a function, in Redis' order (FUNCTION LIST).
pub fn flag_names(flags: &ScriptFlags) -> Vec<&'static str> {
    let mut names = Vec::new();
    for (set, name) in [
        (flags.no_writes, "no-writes"),
        (flags.allow_oom, "allow-oom"),
        (flags.allow_stale, "allow-stale"),
        (flags.no_cluster, "no-cluster"),
        (flags.allow_cross_slot, "allow-cross-slot-keys"),
    ] {
        if set {
            names.push(name);
        }
    }
    names
}

/// FUNCTION DUMP's payload: each library as RDB's `FUNCTION2` record, then the RDB version
/// and a CRC64, as Redis lays it out (so its payloads restore here and ours there).
pub fn dump(functions: &Functions) -> Vec<u8> {
    let mut out = Vec::new();
    for library in functions.libraries.values() {
        out.push(RDB_OPCODE_FUNCTION2);
        write_rdb_string(&mut out, &library.code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

const RDB_OPCODE_FUNCTION2: u8 = 245;
const RDB_VERSION: u16 = 10;

/// The library payloads a FUNCTION DUMP holds, after checking its version and checksum.
pub fn read_dump(payload: &[u8]) -> Result<Vec<Bytes>, Vec<u8>> {
    const BAD: &[u8] = b"ERR DUMP payload version or checksum are wrong";
    if payload.len() < 10 {
        return Err(BAD.to_vec());
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().map_err(|_| BAD.to_vec())?);
    if version > RDB_VERSION || (crc != 0 && crc != crc64(0, &payload[..payload.len() - 8])) {
        return Err(BAD.to_vec());
    }
    let mut codes = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let opcode = body[at];
        at += 1;
        if opcode != RDB_OPCODE_FUNCTION2 {
            return Err(b"ERR given type is not a function".to_vec());
        }
        let code = read_rdb_string(body, &mut at)
            .ok_or_else(|| b"ERR failed loading the given functions payload".to_vec())?;
        codes.push(Bytes::from(code));
    }
    Ok(codes)
}

fn write_rdb_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(bytes);
}

/// An RDB length-prefixed string (plain or LZF-compressed).
fn read_rdb_string(data: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let first = *data.get(*at)?;
    *at += 1;
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let slice = data.get(*at..*at + n)?;
        *at += n;
        Some(slice)
    };
    let len = match first >> 6 {
        0 => usize::from(first & 0x3f),
        1 => (usize::from(first & 0x3f) << 8) | usize::from(*take(at, 1)?.first()?),
        2 if first == 0x80 => u32::from_be_bytes(take(at, 4)?.try_into().ok()?) as usize,
        2 if first == 0x81 => {
            usize::try_from(u64::from_be_bytes(take(at, 8)?.try_into().ok()?)).ok()?
        }
        3 if first & 0x3f == 3 => {
            let compressed_len = read_rdb_length(data, at)?;
            let plain_len = read_rdb_length(data, at)?;
            let compressed = take(at, compressed_len)?;
            return lzf_decompress(compressed, plain_len);
        }
        _ => return None,
    };
    take(at, len).map(<[u8]>::to_vec)
}

fn read_rdb_length(data: &[u8], at: &mut usize) -> Option<usize> {
    let first = *data.get(*at)?;
    *at += 1;
    match first >> 6 {
        0 => Some(usize::from(first & 0x3f)),
        1 => {
            let next = *data.get(*at)?;
            *at += 1;
            Some((usize::from(first & 0x3f) << 8) | usize::from(next))
        }
        2 if first == 0x80 => {
            let bytes = data.get(*at..*at + 4)?;
            *at += 4;
            Some(u32::from_be_bytes(bytes.try_into().ok()?) as usize)
        }
        2 if first == 0x81 => {
            let bytes = data.get(*at..*at + 8)?;
            *at += 8;
            usize::try_from(u64::from_be_bytes(bytes.try_into().ok()?)).ok()
        }
        _ => None,
    }
}

/// LZF decompression (the format Redis compresses RDB strings with): literal runs
/// (`000LLLLL`, L+1 bytes follow) and back references (`LLLooooo oooooooo`, with a length
/// byte more when L is 7).
fn lzf_decompress(input: &[u8], expected: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(expected);
    let mut i = 0;
    while i < input.len() {
        let control = usize::from(input[i]);
        i += 1;
        if control < 32 {
            let run = control + 1;
            out.extend_from_slice(input.get(i..i + run)?);
            i += run;
        } else {
            let mut len = control >> 5;
            if len == 7 {
                len += usize::from(*input.get(i)?);
                i += 1;
            }
            let offset = ((control & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let start = out.len().checked_sub(offset)?;
            for k in 0..len + 2 {
                let byte = out[start + k];
                out.push(byte);
            }
        }
        if out.len() > expected {
            return None;
        }
    }
    (out.len() == expected).then_some(out)
}

/// CRC-64 with the Jones polynomial (reflected), as Redis' `crc64`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u64; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut value = i as u64;
            for _ in 0..8 {
                value = if value & 1 == 1 {
                    (value >> 1) ^ POLY
                } else {
                    value >> 1
                };
            }
            *slot = value;
        }
        table
    });
    for &byte in data {
        crc = table[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_check_value() {
        // Redis' crc64 test vector: "123456789" -> 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn rdb_strings_round_trip() {
        for len in [0usize, 63, 64, 16383, 16384, 70000] {
            let text = vec![b'x'; len];
            let mut out = Vec::new();
            write_rdb_string(&mut out, &text);
            let mut at = 0;
            assert_eq!(read_rdb_string(&out, &mut at).as_deref(), Some(&text[..]));
            assert_eq!(at, out.len());
        }
    }

    #[test]
    fn lzf_back_references() {
        // "aaaaaaaaaa": literal "a", then a reference of length 9 at offset 1.
        let compressed = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(
            lzf_decompress(&compressed, 10).as_deref(),
            Some(&b"aaaaaaaaaa"[..])
        );
    }

    #[test]
    fn metadata_errors() {
        assert_eq!(
            parse_metadata(b"return 1").unwrap_err(),
            b"ERR Missing library metadata"
        );
        assert_eq!(
            parse_metadata(b"#!lua").unwrap_err(),
            b"ERR Invalid library metadata"
        );
        assert_eq!(
            parse_metadata(b"#!lua\n").unwrap_err(),
            b"ERR Library name was not given"
        );
        assert_eq!(
            parse_metadata(b"#!lua name=a foo=b\n").unwrap_err(),
            b"ERR Invalid metadata value given: foo=b"
        );
        assert_eq!(
            parse_metadata(b"#!js name=a\n").unwrap_err(),
            b"ERR Engine 'js' not found"
        );
        assert_eq!(
            parse_metadata(b"#!lua name=lib\nx").unwrap(),
            ("lib".to_string(), 14)
        );
    }
}
