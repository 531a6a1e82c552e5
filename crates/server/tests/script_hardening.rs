//! Scripts that try the sandbox's edges: the globals a script sees (exactly Redis 7.0.15's)
//! and their read-only protection; values whose reply or encoding never ends or is enormous;
//! and random scripts from a small grammar, after which the server must still answer and its
//! AOF must bring back what they wrote.

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

/// The peak resident memory of a process, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Values whose reply or encoding never ends (a table that contains itself) or is out of
/// all proportion to what the script holds (shared subtables, a repeated string, a sparse
/// array made dense): each gets a single error, in well under a second even in a debug
/// build, and the server neither stops nor grows.
#[test]
fn endless_and_enormous_values_get_one_error_and_leave_the_server_as_it_was() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    let dag = "local a = {} for i = 1, 40 do a = {a, a} end";
    let wide = "local a = {} for i = 1, 40 do a = {a, a, a, a, a, a, a, a} end";
    let keyed = "local a = {} for i = 1, 40 do a = {x = a, y = a} end";
    let mapped = "local a = {} for i = 1, 40 do a = {map = {x = a, y = a}} end";
    let looped = "local t = {} t[1] = t t[2] = t";
    let many = "local t = {} for i = 1, 100 do t[i] = t end";
    let strings = "local s = string.rep('x', 1000000) local t = {} for i = 1, 1000 do t[i] = s end";
    let reply_too_large = "-ERR reply exceeds the maximum size a script may return (512 MB)\r\n";
    let cases = [
        (
            format!("{looped} return t"),
            "-ERR reached lua stack limit\r\n",
        ),
        (
            format!("{many} return t"),
            "-ERR reached lua stack limit\r\n",
        ),
        (format!("{dag} return a"), reply_too_large),
        (format!("{mapped} return a"), reply_too_large),
        (format!("{strings} return t"), reply_too_large),
        (
            format!("{looped} return cjson.encode(t)"),
            "Cannot serialise, excessive nesting (1001)",
        ),
        (
            format!("{dag} return cjson.encode(a)"),
            "Cannot serialise, output exceeds 512 MB",
        ),
        (
            format!("{keyed} return cjson.encode(a)"),
            "Cannot serialise, output exceeds 512 MB",
        ),
        (
            format!("{strings} return cjson.encode(t)"),
            "Cannot serialise, output exceeds 512 MB",
        ),
        (
            "local json = cjson.new() json.encode_sparse_array(false, 0) \
             return json.encode({[1e9] = 1})"
                .to_string(),
            "Cannot serialise, output exceeds 512 MB",
        ),
        (
            format!("{wide} return cmsgpack.pack(a)"),
            "MessagePack pack output exceeds 512 MB",
        ),
        (
            format!("{many} return cmsgpack.pack(t)"),
            "MessagePack pack output exceeds 512 MB",
        ),
        (
            format!("{strings} return cmsgpack.pack(t)"),
            "MessagePack pack output exceeds 512 MB",
        ),
    ];
    for (script, expected) in &cases {
        let started = std::time::Instant::now();
        conn.send(&common::encode(&[b"EVAL", script.as_bytes(), b"0"]));
        let line = common::read_line(&mut conn);
        let took = started.elapsed();
        if expected.starts_with('-') {
            // The whole reply is the error: nothing of the value was sent before it.
            assert_eq!(line, *expected, "{script}");
        } else {
            assert!(
                line.starts_with("-ERR ") && line.contains(expected),
                "{script}: {line}"
            );
        }
        assert!(took.as_secs() < 5, "{script}: {took:?}");
        common::check(&mut conn, "PING", "+PONG\r\n");
    }
    // Values of the same shapes but within bounds still go out whole.
    let small_dag = "local a = {} for i = 1, 10 do a = {a, a} end";
    let mut client = server.client();
    let encoded: String =
        eval(&mut client, &format!("{small_dag} return cjson.encode(a)")).unwrap();
    assert_eq!(encoded.matches("{}").count(), 1024);
    let packed: i64 = eval(
        &mut client,
        &format!("{small_dag} return #cmsgpack.pack(a)"),
    )
    .unwrap();
    assert_eq!(packed, 2047);
    let reply: redis::Value = eval(&mut client, &format!("{small_dag} return a")).unwrap();
    fn leaves(value: &redis::Value) -> usize {
        match value {
            redis::Value::Array(items) if items.is_empty() => 1,
            redis::Value::Array(items) => items.iter().map(leaves).sum(),
            _ => 0,
        }
    }
    assert_eq!(leaves(&reply), 1024);
    // Wide and deep values within the bounds go out whole: every item of a table wider
    // than mlua's 8000 references (once cut short at 7976), a nesting of 1000.
    let wide: Vec<String> = eval(
        &mut client,
        "local t = {} for i = 1, 20000 do t[i] = 'v' .. i end return t",
    )
    .unwrap();
    assert_eq!(wide.len(), 20000);
    assert_eq!(wide[19999], "v20000");
    let map: Vec<String> = eval(
        &mut client,
        "local m = {} for i = 1, 10000 do m['k' .. i] = 'v' .. i end return {map = m}",
    )
    .unwrap();
    assert_eq!(map.len(), 20000);
    let deep = "local t = {'bottom'} for i = 1, 999 do t = {t} end return t";
    let expected = format!("{}$6\r\nbottom\r\n", "*1\r\n".repeat(1000));
    conn.expect(&[b"EVAL", deep.as_bytes(), b"0"], expected.as_bytes());
    // Nothing ballooned: the server's peak resident size stays far below the 512 MB any
    // of these would have reached.
    let peak = peak_rss_kib(server.pid());
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
}

/// Random scripts from a small grammar of Lua, for the property test: a few locals (`t` a
/// table, `s` a string, `n` a number, `r` a result), then statements that rebuild them
/// (tables that contain themselves or share subtables), loop a bounded number of times,
/// work on strings, call `pcall`/`error`/`setmetatable` (on the protected globals too),
/// encode and decode with cjson and cmsgpack, run commands through `redis.call` and
/// `redis.pcall` (writes among them, errors included), switch RESP, and stop with an error;
/// then a value of any kind is returned. Seeded (`rand`; proptest is not among this crate's
/// dev-dependencies), so a failure names the seed that reproduces it: set
/// `LATCH_SCRIPT_SEED` to run another series.
struct ScriptGen {
    rng: rand::rngs::StdRng,
}

impl ScriptGen {
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        use rand::Rng;
        choices[self.rng.gen_range(0..choices.len())]
    }

    fn below(&mut self, n: u32) -> u32 {
        use rand::Rng;
        self.rng.gen_range(0..n)
    }

    fn key(&mut self) -> String {
        format!("'k{}'", self.below(6))
    }

    /// A string or number to pass to a command.
    fn word(&mut self) -> String {
        match self.below(8) {
            0 => "s".into(),
            1 => "n".into(),
            2 => "tostring(n)".into(),
            3 => format!("{}", self.below(1000)),
            4 => "3.25".into(),
            _ => self
                .pick(&[
                    "'a'", "'hello'", "''", "'x\\0y'", "'42'", "'-7'", "'3.5'", "'\\r\\n'",
                ])
                .into(),
        }
    }

    /// The arguments of a `redis.call`: a command of the keyspace's kinds, writes included.
    fn command(&mut self) -> String {
        let key = self.key();
        let (w1, w2) = (self.word(), self.word());
        match self.below(22) {
            0 | 1 => format!("'SET', {key}, {w1}"),
            2 => format!("'GET', {key}"),
            3 | 4 => format!("'INCR', {key}"),
            5 => format!("'INCRBY', {key}, {}", self.below(100)),
            6 => format!("'DEL', {key}, {}", self.key()),
            7 | 8 => format!("'LPUSH', {key}, {w1}, {w2}"),
            9 => format!("'RPOP', {key}"),
            10 => format!("'LRANGE', {key}, 0, -1"),
            11 => format!("'HSET', {key}, {w1}, {w2}"),
            12 => format!("'HGETALL', {key}"),
            13 => format!("'SADD', {key}, {w1}, {w2}"),
            14 => format!("'SMEMBERS', {key}"),
            15 => format!("'APPEND', {key}, {w1}"),
            16 => format!("'EXPIRE', {key}, 100000"),
            17 => format!("'PERSIST', {key}"),
            18 => format!("'ZADD', {key}, {}, {w1}", self.below(50)),
            19 => format!("'HINCRBY', {key}, 'f', {}", self.below(9)),
            20 => format!("'TYPE', {key}"),
            _ => self
                .pick(&["'PING'", "'NOSUCHCOMMAND'", "'GET'", "'SET', 'k1'"])
                .into(),
        }
    }

    /// A table constructor (nested up to `depth`).
    fn table(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self
                .pick(&["{}", "{1, 2, 3}", "{'a', true, 2.5}", "{x = 1}"])
                .into();
        }
        match self.below(9) {
            0 => "{}".into(),
            1 => format!("{{{}, {}}}", self.value(depth - 1), self.value(depth - 1)),
            2 => format!(
                "{{a = {}, b = {}}}",
                self.value(depth - 1),
                self.value(depth - 1)
            ),
            3 => format!("{{[{}] = {}}}", 1 + self.below(40), self.value(depth - 1)),
            4 => "(function() local u = {1} u[2] = u return u end)()".into(),
            5 => format!(
                "(function() local a = {{}} for i = 1, {} do a = {{a, a}} end return a end)()",
                self.below(12)
            ),
            6 => format!("{{map = {{k = {}}}}}", self.value(depth - 1)),
            7 => format!("{{set = {{m = true, [{}] = true}}}}", self.below(5)),
            _ => format!("{{t, {}, s}}", self.value(depth - 1)),
        }
    }

    /// Any expression.
    fn value(&mut self, depth: u32) -> String {
        match self.below(10) {
            0 => "t".into(),
            1 => "s".into(),
            2 => "n".into(),
            3 => "r".into(),
            4 => self
                .pick(&["nil", "true", "false", "0.5", "-3", "1e300"])
                .into(),
            5 => self
                .pick(&[
                    "{err = 'ERR made up'}",
                    "{ok = 'FINE'}",
                    "{double = 2.5}",
                    "{big_number = '1234'}",
                ])
                .into(),
            6 => format!("redis.pcall({})", self.command()),
            _ => self.table(depth),
        }
    }

    fn statement(&mut self, depth: u32) -> String {
        let simple = depth > 1;
        match self.below(if simple { 14 } else { 18 }) {
            0 => format!("t = {}", self.table(2)),
            1 => format!("t[{}] = {}", 1 + self.below(5), self.value(1)),
            2 => "t[#t + 1] = t".into(),
            3 => self
                .pick(&[
                    "s = (string.rep(s, 2) .. tostring(n)):sub(1, 64)",
                    "s = string.format('%s:%d', s:sub(1, 16), n % 1000)",
                    "s = s:upper():reverse()",
                    "s = tostring(#s) .. s:sub(2, 9)",
                    "s = string.char(65 + n % 26) .. s:sub(1, 30)",
                ])
                .into(),
            4 => self
                .pick(&[
                    "n = n + 1",
                    "n = #t",
                    "n = (tonumber(s) or n) % 100000",
                    "n = n * 2 - 3",
                ])
                .into(),
            5 => format!("r = redis.pcall({})", self.command()),
            6 => format!("pcall(redis.call, {})", self.command()),
            7 => format!("r = redis.call({})", self.command()),
            8 => self
                .pick(&[
                    "pcall(error, 'boom')",
                    "pcall(function() error({err = 'ERR inner'}) end)",
                    "pcall(setmetatable, _G, {})",
                    "pcall(rawset, string, 'len', nil)",
                    "pcall(function() redis.call = nil end)",
                    "pcall(function() x = 1 end)",
                ])
                .into(),
            9 => "setmetatable(t, {__index = function(_, k) return k end})".into(),
            // (A packed self-referencing table can be 100 MB: decoding that would make
            // millions of tables, a test of Lua's allocator rather than of the server.)
            10 => "do local ok, j = pcall(cjson.encode, t) \
                   if ok and #j < 100000 then r = cjson.decode(j) end end"
                .into(),
            11 => "do local ok, p = pcall(cmsgpack.pack, t, s, n) \
                   if ok and #p < 100000 then r = cmsgpack.unpack(p) end end"
                .into(),
            12 => format!("redis.setresp({})", 2 + self.below(2)),
            13 => format!(
                "if n % 7 == {} then error('stop ' .. s:sub(1, 8)) end",
                self.below(7)
            ),
            14 | 15 => format!(
                "for i = 1, {} do {} end",
                1 + self.below(20),
                self.statement(depth + 1)
            ),
            _ => format!(
                "if n > {} then {} else {} end",
                self.below(10),
                self.statement(depth + 1),
                self.statement(depth + 1)
            ),
        }
    }

    fn script(&mut self) -> String {
        let mut lines = vec!["local t, s, n, r = {}, 'x', 0, nil".to_string()];
        for _ in 0..3 + self.below(10) {
            lines.push(self.statement(0));
        }
        lines.push(format!("return {}", self.value(2)));
        lines.join("\n")
    }
}

/// A key, its type, its content and whether it expires.
type KeyState = (Vec<u8>, String, Vec<Vec<u8>>, bool);

/// Every key with its type, content and whether it expires, read the same way whatever
/// the server's internal order.
fn keyspace(conn: &mut redis::Connection) -> Vec<KeyState> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
            let mut read = |command: &str, extra: &[&str]| -> Vec<Vec<u8>> {
                let mut cmd = redis::cmd(command);
                cmd.arg(&key);
                for arg in extra {
                    cmd.arg(*arg);
                }
                cmd.query(conn).unwrap()
            };
            let mut content = match kind.as_str() {
                "string" => read("MGET", &[]),
                "list" => read("LRANGE", &["0", "-1"]),
                "hash" => {
                    let flat = read("HGETALL", &[]);
                    let mut pairs: Vec<Vec<u8>> =
                        flat.chunks(2).map(|pair| pair.concat()).collect();
                    pairs.sort();
                    pairs
                }
                "set" => read("SMEMBERS", &[]),
                "zset" => read("ZRANGE", &["0", "-1", "WITHSCORES"]),
                other => panic!("unexpected type {other}"),
            };
            if kind == "set" {
                content.sort();
            }
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            (key, kind, content, ttl > 0)
        })
        .collect()
}

/// Random scripts (tables that contain themselves, shared subtables, loops, string work,
/// pcall and error, metatables, cjson and cmsgpack, writes through redis.call and
/// redis.pcall, RESP3, every kind of return value) never take the server down, and what
/// they wrote comes back whole from the AOF after a crash.
#[test]
fn random_scripts_leave_the_server_up_and_the_aof_whole() {
    use rand::SeedableRng;
    let seed = std::env::var("LATCH_SCRIPT_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x5eed_2021_u64);
    let cases = 200;
    let mut generator = ScriptGen {
        rng: rand::rngs::StdRng::seed_from_u64(seed),
    };
    let options = ["--appendonly", "yes", "--save", ""];
    let server = TestServer::start(&options);
    let mut conn = server.client();
    // A script that never ends fails the test instead of hanging it.
    conn.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let (mut answered, mut failed) = (0, 0);
    let started = std::time::Instant::now();
    for case in 0..cases {
        let script = generator.script();
        assert!(script.len() < 4096, "{script}");
        let outcome = redis::cmd("EVAL")
            .arg(&script)
            .arg(0)
            .query::<redis::Value>(&mut conn);
        match outcome {
            Ok(_) => answered += 1,
            // An error reply is an outcome like any other; a dropped connection, a timeout
            // or a reply that does not parse is not.
            Err(error) if !error.is_io_error() && error.kind() != redis::ErrorKind::ParseError => {
                failed += 1
            }
            Err(error) => panic!("seed {seed}, case {case}: {error}\n{script}"),
        }
        let pong: String = redis::cmd("PING")
            .query(&mut conn)
            .unwrap_or_else(|error| panic!("seed {seed}, case {case}: {error}\n{script}"));
        assert_eq!(pong, "PONG");
    }
    // The grammar gives both outcomes, and writes.
    assert!(
        answered > cases / 5 && failed > cases / 10,
        "{answered} answered, {failed} failed"
    );
    let before = keyspace(&mut conn);
    assert!(!before.is_empty());
    let dir = server.kill_keep_files();
    let server = TestServer::start_in(Some(&dir), &options);
    let mut conn = server.client();
    assert_eq!(keyspace(&mut conn), before, "seed {seed}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}
