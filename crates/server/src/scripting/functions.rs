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
    let codes: Vec<&[u8]> = functions
        .libraries
        .values()
        .map(|library| &library.code[..])
        .collect();
    latch_persist::rdb::dump_functions(&codes)
}

/// The library payloads a FUNCTION DUMP holds, after checking its version and checksum.
pub fn read_dump(payload: &[u8]) -> Result<Vec<Bytes>, Vec<u8>> {
    use latch_persist::rdb::RdbError;
    match latch_persist::rdb::restore_functions(payload) {
        Ok(Ok(codes)) => Ok(codes.into_iter().map(Bytes::from).collect()),
        Ok(Err(_)) => Err(b"ERR given type is not a function".to_vec()),
        Err(RdbError::BadPayload) => {
            Err(b"ERR DUMP payload version or checksum are wrong".to_vec())
        }
        Err(_) => Err(b"ERR failed loading the given functions payload".to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_payloads_round_trip_and_refuse_damage() {
        let mut functions = Functions::default();
        assert_eq!(read_dump(&dump(&functions)).unwrap(), Vec::<Bytes>::new());
        let payload = latch_persist::rdb::dump_functions(&[&b"#!lua name=a\nreturn 1"[..]]);
        assert_eq!(
            read_dump(&payload).unwrap(),
            [Bytes::from_static(b"#!lua name=a\nreturn 1")]
        );
        let mut damaged = payload.clone();
        damaged[3] ^= 1;
        assert_eq!(
            read_dump(&damaged).unwrap_err(),
            b"ERR DUMP payload version or checksum are wrong"
        );
        functions.flush();
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
