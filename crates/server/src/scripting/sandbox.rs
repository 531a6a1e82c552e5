//! The Lua VM as Redis 7.0 sets it up: Lua 5.1 with base, table, string and math, the
//! libraries of `libs/`, the `redis` table, and a sandbox.
//!
//! Redis patches Lua to have read-only tables; Latch uses stock Lua 5.1 and gets the same
//! behaviour from proxies instead: empty tables whose metatable reads from the table behind
//! them and refuses every write. Scripts run with an environment (`env`, their `_G`) that is
//! such a proxy of `safe` (the allowed globals, each library behind a proxy of its own). So
//! `x = 1`, `redis = nil`, `redis.call = f` and `_G = {}` fail with "Attempt to modify a
//! readonly table", and reading an unknown global fails with "Script attempted to access
//! nonexistent global variable". The base functions that could see or change what is behind
//! a proxy (`next`, `pairs`, `rawget`, `rawset`, `setmetatable`, `getmetatable`) are replaced
//! by versions that see through it or refuse it (`builtins.rs`), so that `pairs(_G)`,
//! `rawget(string, 'len')` and `getmetatable(_G)` answer what they answer in Redis. The
//! strings' metatable shows scripts a read-only view too. `KEYS` and `ARGV` are placed into
//! `safe` before each run.
//!
//! The globals are exactly Redis 7.0.15's (as its Debian build, with the fixes of
//! CVE-2025-46817 and later, answers `pairs(_G)`): `getfenv`, `setfenv` and `newproxy` are
//! not among them (a userdata with a `__gc` of the script's would run script code inside
//! the collector, wherever an allocation triggers it).
//!
//! The `redis` functions that may raise a Redis error table are written in Lua over small
//! Rust helpers (a Rust callback can only raise Rust errors, which reach Lua as userdata);
//! `redis.call` and `redis.pcall` are Rust functions the engine installs, which reach the
//! running script's context for the duration of each run.

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};

use super::libs;

/// What the engine keeps from the setup.
pub struct Sandbox {
    /// Tables scripts cannot reach: `private.redis` (the real `redis` table), the host
    /// functions the engine installs (`private.set_resp`, `private.is_running`)...
    pub private: Table,
    /// The allowed globals (where KEYS and ARGV go).
    pub safe: Table,
    /// The environment of every script.
    pub env: Table,
    /// The error handler every run is called under (Redis' `__redis__err__handler`).
    pub handler: Function,
}

/// The version Redis scripts see in `redis.REDIS_VERSION` (and INFO reports).
pub const REDIS_VERSION: &str = "7.0.15";
const REDIS_VERSION_NUM: i64 = 0x0007_000f;

/// Builds a VM with everything scripts may use: EVAL's (`eval_vm`) or the functions' (whose
/// `redis` lacks `replicate_commands`, `breakpoint` and `debug`, and whose globals lack the
/// error handler, as in Redis).
pub fn build(logger: fn(u8, &str), eval_vm: bool) -> mlua::Result<(Lua, Sandbox)> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::new(),
    )?;
    libs::register_all(&lua)?;
    let raw = lua.create_table()?;
    raw.raw_set("sha1hex", lua.create_function(sha1hex)?)?;
    raw.raw_set("errmsg", lua.create_function(error_message)?)?;
    raw.raw_set("error_text", lua.create_function(error_text_lua)?)?;
    raw.raw_set(
        "log",
        lua.create_function(move |_, (level, text): (u8, mlua::LuaString)| {
            logger(level, &text.to_string_lossy());
            Ok(())
        })?,
    )?;
    let handler = lua.create_function(error_handler)?;
    let builtins = super::builtins::create(&lua, &lua.globals().raw_get("next")?)?;
    for (name, function) in [
        ("next", &builtins.next),
        ("pairs", &builtins.pairs),
        ("rawget", &builtins.rawget),
        ("rawset", &builtins.rawset),
        ("setmetatable", &builtins.setmetatable),
        ("getmetatable", &builtins.getmetatable),
    ] {
        raw.raw_set(name, function)?;
    }
    raw.raw_set("behind", builtins.behind)?;
    raw.raw_set("meta_view", builtins.meta_view)?;
    if eval_vm {
        raw.raw_set("handler", &handler)?;
    }
    let prelude = lua.load(PRELUDE).set_name("=latch").into_function()?;
    let (private, safe, env): (Table, Table, Table) =
        prelude.call((raw, REDIS_VERSION, REDIS_VERSION_NUM, eval_vm))?;
    super::engine::install_random(&lua)?;
    Ok((
        lua,
        Sandbox {
            private,
            safe,
            env,
            handler,
        },
    ))
}

/// `redis.sha1hex`: the lowercase hex SHA1 of a string.
fn sha1hex(_: &Lua, text: mlua::LuaString) -> mlua::Result<String> {
    Ok(sha1_hex(&text.as_bytes()))
}

pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// The text of an error that reached Lua from Rust (a userdata): the message, without
/// mlua's wrapping and traceback.
fn error_message(lua: &Lua, value: Value) -> mlua::Result<Value> {
    match value {
        Value::Error(error) => Ok(Value::String(lua.create_string(plain_message(&error))?)),
        other => Ok(other),
    }
}

/// An error reply `redis.call` raises: Lua sees it as `{err=...}` (through the error
/// handler, or as the message through `pcall`).
#[derive(Debug)]
pub struct RaisedReply(pub Vec<u8>);

impl std::fmt::Display for RaisedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for RaisedReply {}

/// The reply `redis.call` raised, if that is what this error is.
pub fn raised_reply(error: &mlua::Error) -> Option<&RaisedReply> {
    match error {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            raised_reply(cause)
        }
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<RaisedReply>(),
        _ => None,
    }
}

/// The innermost message of an mlua error.
pub fn plain_message(error: &mlua::Error) -> String {
    if let Some(raised) = raised_reply(error) {
        return raised.to_string();
    }
    match error {
        mlua::Error::CallbackError { cause, .. } => plain_message(cause),
        // mlua appends a traceback to the errors of the calls it makes (FUNCTION LOAD's);
        // Redis' messages have none.
        mlua::Error::RuntimeError(message) => match message.find("\nstack traceback:") {
            Some(at) => message[..at].to_string(),
            None => message.clone(),
        },
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(message) => message.clone(),
        mlua::Error::WithContext { cause, .. } => plain_message(cause),
        other => other.to_string(),
    }
}

/// Redis' `luaPushErrorBuff`: "-CODE message" keeps its code, anything else gets "ERR";
/// CR and LF are trimmed from both ends of the message.
pub fn error_text(text: &[u8]) -> Vec<u8> {
    let (code, message) = error_parts(text);
    let mut out = Vec::with_capacity(code.len() + 1 + message.len());
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(message);
    out
}

/// The code and the message [`error_text`] joins with a space (borrowed from `text`).
pub fn error_parts(text: &[u8]) -> (&[u8], &[u8]) {
    match text.strip_prefix(b"-") {
        Some(rest) => reply_error_parts(rest),
        None => (b"ERR", trim_newlines(text)),
    }
}

/// The code and the message of an error reply's line (which starts with its code, after
/// the dash): what [`error_text`] gives for the line with its dash.
pub fn reply_error_parts(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&b| b == b' ') {
        Some(space) => (&line[..space], trim_newlines(&line[space + 1..])),
        None => (b"ERR", trim_newlines(line)),
    }
}

fn trim_newlines(text: &[u8]) -> &[u8] {
    let is_newline = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = text
        .iter()
        .position(|b| !is_newline(b))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !is_newline(b))
        .map_or(start, |i| i + 1);
    &text[start..end]
}

fn error_text_lua(lua: &Lua, text: mlua::LuaString) -> mlua::Result<mlua::LuaString> {
    lua.create_string(error_text(&text.as_bytes()))
}

/// The error handler of every run (Redis' `__redis__err__handler`): turns the error into a
/// table `{err=..., source=..., line=...}` naming the script line it came from.
fn error_handler(lua: &Lua, error: Value) -> mlua::Result<Table> {
    let table = match error {
        Value::Table(table) => table,
        Value::Error(error) if raised_reply(&error).is_some() => {
            let table = lua.create_table()?;
            if let Some(raised) = raised_reply(&error) {
                table.raw_set("err", lua.create_string(&raised.0)?)?;
            }
            table.raw_set("ignore_error_stats_update", true)?;
            table
        }
        other => {
            let message = match other {
                Value::Error(error) => plain_message(&error).into_bytes(),
                Value::String(text) => text.as_bytes().to_vec(),
                Value::Nil => b"nil".to_vec(),
                Value::Boolean(b) => b.to_string().into_bytes(),
                Value::Integer(n) => n.to_string().into_bytes(),
                Value::Number(n) => lua_number_text(n).into_bytes(),
                other => other.type_name().as_bytes().to_vec(),
            };
            let table = lua.create_table()?;
            let mut text = b"ERR ".to_vec();
            text.extend_from_slice(&message);
            table.raw_set("err", lua.create_string(text)?)?;
            table
        }
    };
    // The first frame that is neither C nor Latch's own Lua: the user's line.
    for level in 1..16 {
        let found = lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let what = source.what;
            let name = source.source.as_deref().unwrap_or("").to_string();
            (what.to_string(), name, debug.current_line())
        });
        let Some((what, source, line)) = found else {
            break;
        };
        if what == "C" || source == "=latch" {
            continue;
        }
        table.raw_set("source", source)?;
        if let Some(line) = line {
            table.raw_set("line", line as i64)?;
        }
        break;
    }
    Ok(table)
}

/// How Lua 5.1 prints a number (`%.14g`), with cjson's glibc-exact formatter.
pub fn lua_number_text(n: f64) -> String {
    let mut out = Vec::with_capacity(24);
    super::libs::cjson::format_g(&mut out, n, 14);
    String::from_utf8_lossy(&out).into_owned()
}

/// The Lua side of the setup, run once per VM with the Rust helpers (and the replaced base
/// functions, `builtins.rs`) as arguments.
const PRELUDE: &str = r#"
local raw, version, version_num, eval_vm = ...
local G = _G
local type, tostring, error, select, tonumber = type, tostring, error, select, tonumber
local raw_setmetatable, raw_getmetatable, raw_setfenv = setmetatable, getmetatable, setfenv
local raw_pcall, raw_loadstring, string_byte = pcall, loadstring, string.byte
local behind, meta_view = raw.behind, raw.meta_view

local private = {}

-- Read-only proxies: `behind` maps each to the table it shows (see builtins.rs).
local function refuse() error('Attempt to modify a readonly table', 2) end
local function protect(t)
  local proxy = raw_setmetatable({}, { __index = t, __newindex = refuse, __metatable = false })
  behind[proxy] = t
  return proxy
end
-- Reading a global that does not exist (level 2: the script's line, as in Redis).
local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end

-- The redis table.
local redis = {}
local function raise(text) error({ err = raw.error_text(text) }) end
local function not_running(what)
  raise(what .. ' can only be called inside a script invocation')
end
-- The engine puts the running script's own call/pcall here for each run.
redis.call = function() not_running('redis.call/pcall') end
redis.pcall = redis.call
private.redis = redis
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then raise('wrong number of arguments') end
  return raw.sha1hex((...))
end
redis.error_reply = function(...)
  local text = ...
  if select('#', ...) ~= 1 or type(text) ~= 'string' then
    return { err = raw.error_text('wrong number or type of arguments') }
  end
  if text:sub(1, 1) ~= '-' then text = '-' .. text end
  return { err = raw.error_text(text) }
end
redis.status_reply = function(...)
  local text = ...
  if select('#', ...) ~= 1 or type(text) ~= 'string' then
    return { err = raw.error_text('wrong number or type of arguments') }
  end
  return { ok = text }
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.log = function(...)
  local n = select('#', ...)
  if n < 2 then raise('redis.log() requires two arguments or more.') end
  local level = ...
  if type(level) ~= 'number' and not (type(level) == 'string' and tonumber(level)) then
    raise('First argument must be a number (log level).')
  end
  level = tonumber(level)
  if level < 0 or level > 3 then raise('Invalid debug level.') end
  local parts = {}
  for i = 2, n do
    local v = select(i, ...)
    if type(v) == 'string' or type(v) == 'number' then parts[#parts + 1] = tostring(v) end
  end
  raw.log(level, table.concat(parts, ' '))
end
redis.setresp = function(...)
  if not private.is_running() then not_running('redis.setresp') end
  if select('#', ...) ~= 1 then raise('redis.setresp() requires one argument.') end
  local resp = tonumber((...))
  if resp ~= 2 and resp ~= 3 then raise('RESP version must be 2 or 3.') end
  private.set_resp(resp)
end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.set_repl = function(...)
  if not private.is_running() then not_running('redis.set_repl') end
  if select('#', ...) ~= 1 then raise('redis.set_repl() requires two arguments.') end
  local flags = tonumber((...)) or 0
  if flags < 0 or flags > 3 or flags ~= math.floor(flags) then
    raise('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
  private.set_repl(flags)
end
-- EVAL's only (Redis 7.0 adds them in eval.c, not for functions).
if eval_vm then
  redis.replicate_commands = function() return true end
  redis.breakpoint = function() return false end
  redis.debug = function() end
end
redis.acl_check_cmd = function(...)
  if not private.is_running() then not_running('redis.acl_check_cmd') end
  if select('#', ...) == 0 then raise('Please specify at least one argument for this redis lib call') end
  local allowed = private.acl_check(...)
  if allowed == nil then raise('Invalid command passed to redis.acl_check_cmd()') end
  return allowed
end
redis.REDIS_VERSION = version
redis.REDIS_VERSION_NUM = version_num
G.redis = redis

-- The allowed globals: Redis 7.0.15's list, no more (no getfenv, setfenv, newproxy).
local safe = {}
for _, name in G.ipairs({ 'xpcall', 'tostring', 'assert', 'tonumber', 'rawequal',
    'collectgarbage', 'pcall', 'type', 'select', 'unpack', 'gcinfo', 'ipairs', '_VERSION',
    'error' }) do
  safe[name] = G[name]
end
for _, name in G.ipairs({ 'next', 'pairs', 'rawget', 'rawset', 'setmetatable',
    'getmetatable' }) do
  safe[name] = raw[name]
end
for _, name in G.ipairs({ 'string', 'math', 'table', 'coroutine', 'cjson', 'bit', 'cmsgpack',
    'struct', 'redis' }) do
  if G[name] ~= nil then safe[name] = protect(G[name]) end
end
local env = raw_setmetatable({}, { __index = safe, __newindex = refuse, __metatable = false })
behind[env] = safe
safe._G = env
if eval_vm then safe.__redis__err__handler = raw.handler end
raw_setmetatable(safe, { __index = missing })
-- Strings index the real string table (as fast as ever), but scripts see a read-only view
-- of their metatable, whose __index is the `string` they know.
raw_getmetatable('').__metatable = protect({ __index = safe.string })

local function sandboxed(f, message)
  if f then raw_setfenv(f, env) end
  return f, message
end
safe.loadstring = function(text, name)
  if type(text) == 'string' and string_byte(text, 1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  return sandboxed(raw_loadstring(text, name))
end
safe.load = function(reader, name)
  local chunks = {}
  if type(reader) == 'function' then
    while true do
      local piece = reader()
      if piece == nil or piece == '' then break end
      chunks[#chunks + 1] = piece
    end
    reader = table.concat(chunks)
  end
  return safe.loadstring(reader, name)
end
-- Redis' pcall: an error table caught by pcall becomes its message.
local function settle(ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == 'userdata' then e = raw.errmsg(e) end
  if type(e) == 'table' then
    local message = G.rawget(e, 'err')
    if type(message) == 'string' or type(message) == 'number' then e = message end
  end
  return false, e
end
safe.pcall = function(...) return settle(raw_pcall(...)) end

-- Functions: one environment for every library. While a library's top level runs its
-- globals are only the load API; afterwards they are the same as EVAL's.
local load_redis = {
  log = redis.log, LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = version, REDIS_VERSION_NUM = version_num,
}
load_redis.register_function = function()
  raise('redis.register_function can only be called on FUNCTION LOAD command')
end
-- A name the load API lacks (globals, or redis.call and the like) is an error, as in Redis.
raw_setmetatable(load_redis, { __index = missing })
local load_api = raw_setmetatable({ redis = protect(load_redis) }, { __index = missing })
local fenv_meta = { __index = safe, __newindex = refuse, __metatable = false }
local fenv = raw_setmetatable({}, fenv_meta)
private.fenv, private.fenv_meta, private.load_api, private.load_redis = fenv, fenv_meta, load_api, load_redis
private.idle_register = load_redis.register_function

-- What getmetatable shows of a proxy: a read-only view of the metatable behind it.
local with_meta = {}
for _, t in G.pairs(behind) do
  if raw_getmetatable(t) ~= nil then with_meta[#with_meta + 1] = t end
end
for _, t in G.ipairs(with_meta) do meta_view[t] = protect(raw_getmetatable(t)) end

G.print, G.dofile, G.loadfile, G.debug = nil, nil, nil, nil
return private, safe, env
"#;
