//! Scripts that try the sandbox's edges: the globals a script sees (exactly Redis 7.0.15's) and
//! their read-only protection.

mod common;

use common::TestServer;

/// EVAL with no keys; the reply, or the error's text.
fn eval<T: redis::FromRedisValue>(conn: &mut redis::Connection, script: &str) -> Result<T, String> {
    redis::cmd("EVAL")
        .arg(script)
        .arg(0)
        .query(conn)
        .map_err(|error| error.to_string())
}

/// The error a script ends with (panics when it does not fail).
fn eval_error(conn: &mut redis::Connection, script: &str) -> String {
    match eval::<redis::Value>(conn, script) {
        Ok(value) => panic!("{script}: no error, {value:?}"),
        Err(error) => error,
    }
}

/// The sorted keys of what `expr` evaluates to, as a script lists them with `pairs`.
fn keys_of(conn: &mut redis::Connection, expr: &str) -> Vec<String> {
    let script = format!(
        "local t = {{}} for k in pairs({expr}) do t[#t + 1] = tostring(k) end table.sort(t) return t"
    );
    eval(conn, &script).unwrap()
}

/// What redis-server 7.0.15 (Debian's build) lists for `pairs(_G)` in EVAL.
const REDIS_GLOBALS: &str = "ARGV KEYS _G _VERSION __redis__err__handler assert bit cjson \
    cmsgpack collectgarbage coroutine error gcinfo getmetatable ipairs load loadstring math \
    next pairs pcall rawequal rawget rawset redis select setmetatable string struct table \
    tonumber tostring type unpack xpcall";

#[test]
fn a_script_sees_exactly_the_globals_of_redis_7_0() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    assert_eq!(keys_of(&mut conn, "_G").join(" "), REDIS_GLOBALS);
    for name in [
        "newproxy", "getfenv", "setfenv", "print", "os", "io", "debug", "require",
    ] {
        let error = eval_error(&mut conn, &format!("return {name}"));
        assert!(
            error.contains(&format!(
                "user_script:1: Script attempted to access nonexistent global variable '{name}'"
            )),
            "{name}: {error}"
        );
    }
    // What lies behind the read-only proxies is seen as Redis shows it.
    assert_eq!(
        keys_of(&mut conn, "string").join(" "),
        "byte char dump find format gfind gmatch gsub len lower match rep reverse sub upper"
    );
    assert_eq!(
        keys_of(&mut conn, "redis").join(" "),
        "LOG_DEBUG LOG_NOTICE LOG_VERBOSE LOG_WARNING REDIS_VERSION REDIS_VERSION_NUM REPL_ALL \
         REPL_AOF REPL_NONE REPL_REPLICA REPL_SLAVE acl_check_cmd breakpoint call debug \
         error_reply log pcall replicate_commands set_repl setresp sha1hex status_reply"
    );
    assert_eq!(keys_of(&mut conn, "getmetatable(_G)"), ["__index"]);
    assert_eq!(keys_of(&mut conn, "getmetatable('')"), ["__index"]);
    let probes: Vec<String> = eval(
        &mut conn,
        "return {type(rawget(_G, 'redis')), type(rawget(string, 'len')), tostring(next(_G) ~= nil), \
         tostring(getmetatable('').__index == string), tostring(getmetatable(string)), \
         tostring(_G._G == _G), tostring(#_G), type(getmetatable(_G).__index)}",
    )
    .unwrap();
    assert_eq!(
        probes,
        ["table", "function", "true", "true", "nil", "true", "0", "function"]
    );
    // Functions: at call time the same globals but KEYS, ARGV and the error handler, and a
    // `redis` without EVAL's debugging calls; while the library loads, only `redis`.
    let library = "#!lua name=probe\n\
        local function names(t) local r = {} for k in pairs(t) do r[#r + 1] = k end table.sort(r) return r end\n\
        redis.register_function('g', function() return names(_G) end)\n\
        redis.register_function('r', function() return names(redis) end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut conn)
        .unwrap();
    let globals: Vec<String> = redis::cmd("FCALL")
        .arg("g")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let expected: Vec<&str> = REDIS_GLOBALS
        .split_whitespace()
        .filter(|name| !["KEYS", "ARGV", "__redis__err__handler"].contains(name))
        .collect();
    assert_eq!(globals, expected);
    let api: Vec<String> = redis::cmd("FCALL")
        .arg("r")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        api.join(" "),
        "LOG_DEBUG LOG_NOTICE LOG_VERBOSE LOG_WARNING REDIS_VERSION REDIS_VERSION_NUM REPL_ALL \
         REPL_AOF REPL_NONE REPL_REPLICA REPL_SLAVE acl_check_cmd call error_reply log pcall \
         set_repl setresp sha1hex status_reply"
    );
    let loading = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=early\nlocal n = 0 for k in pairs(_G) do n = n + 1 end")
        .query::<String>(&mut conn)
        .unwrap_err()
        .to_string();
    assert!(
        loading.contains(
            "user_function:2: Script attempted to access nonexistent global variable 'pairs'"
        ) && !loading.contains("traceback"),
        "{loading}"
    );
}

#[test]
fn globals_libraries_and_the_string_metatable_stay_read_only() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let readonly = "Attempt to modify a readonly table";
    for script in [
        "x = 1",
        "redis = nil",
        "string = nil",
        "_G = {}",
        "_G.redis = 1",
        "string.len = nil",
        "redis.call = function() return 1 end",
        "cjson.encode = nil",
        "getmetatable(_G).__index = {}",
        "getmetatable('').__index = nil",
        "getmetatable('').__index.upper = nil",
        "getmetatable('').__gc = 1",
        "rawset(_G, 'x', 1)",
        "rawset(_G, 'redis', 1)",
        "rawset(string, 'len', nil)",
        "rawset(redis, 'call', nil)",
        "rawset(getmetatable(''), '__index', {})",
        "rawset(getmetatable(_G), '__index', {})",
        "setmetatable(_G, {})",
        "setmetatable(string, nil)",
        "setmetatable(getmetatable(''), {})",
        "for k, v in pairs(_G) do \
         if type(v) == 'table' and k ~= 'KEYS' and k ~= 'ARGV' then rawset(v, 'x', 1) end end",
    ] {
        let error = eval_error(&mut conn, script);
        assert!(error.contains(readonly), "{script}: {error}");
    }
    // Nothing of the above took: the next scripts see the libraries as they were.
    let after: Vec<String> = eval(
        &mut conn,
        "return {('abc'):upper(), string.len('abcd') .. '', type(redis.call), \
         tostring(rawget(_G, 'x')), cjson.encode({1})}",
    )
    .unwrap();
    assert_eq!(after, ["ABC", "4", "function", "nil", "[1]"]);
    // `rawset` refuses without a position, as Redis (its check is inside the VM).
    let error = eval_error(&mut conn, "rawset(_G, 'x', 1)");
    assert!(
        error.contains("Attempt to modify a readonly table script:")
            && !error.contains("user_script:1: Attempt"),
        "{error}"
    );
    // Argument errors read as the stock functions': named as called, at the script's line.
    for (script, message) in [
        (
            "return pairs(nil)",
            "user_script:1: bad argument #1 to 'pairs' (table expected, got nil)",
        ),
        (
            "return next(1)",
            "user_script:1: bad argument #1 to 'next' (table expected, got number)",
        ),
        (
            "return rawget(nil, 1)",
            "user_script:1: bad argument #1 to 'rawget' (table expected, got nil)",
        ),
        (
            "return setmetatable({}, 1)",
            "user_script:1: bad argument #2 to 'setmetatable' (nil or table expected)",
        ),
        (
            "return getmetatable()",
            "user_script:1: bad argument #1 to 'getmetatable' (value expected)",
        ),
    ] {
        let error = eval_error(&mut conn, script);
        assert!(error.contains(message), "{script}: {error}");
    }
    // Ordinary tables are untouched by the replacements.
    let plain: Vec<i64> = eval(
        &mut conn,
        "local t = setmetatable({}, {__index = function() return 5 end}) rawset(t, 'a', 1) \
         local n = 0 for _ in pairs(t) do n = n + 1 end \
         return {rawget(t, 'a'), t.zz, n, getmetatable(t) ~= nil and 1 or 0}",
    )
    .unwrap();
    assert_eq!(plain, [1, 5, 1, 1]);
}
