//! Conversions between replies and Lua values, as Redis' `redisProtocolToLuaType` and
//! `luaReplyToRedisReply` do them.
//!
//! A command's reply reaches Lua (`raw.rs` pushes it) as: integer → number; bulk → string; array → table;
//! status → `{ok=...}`; error → `{err=...}`; null → false (RESP2) or nil (RESP3); and in
//! RESP3 map → `{map={...}}`, set → `{set={member=true}}`, double → `{double=n}`, boolean →
//! boolean, big number → `{big_number=...}`, verbatim → `{verbatim_string={...}}`.
//! A script's return value goes back the other way; a number is truncated to an integer, a
//! table is an array up to its first nil unless it has one of the fields above.

use latch_protocol::Reply;
use mlua::{Table, Value};

/// Deepest nesting of tables a reply may have (a table that contains itself would
/// otherwise never end).
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
/// chose (it decides how booleans go out in RESP2).
pub fn lua_to_reply(value: &Value, reply: &mut Reply, script_resp: u8) {
    write_value(value, reply, script_resp, 0);
}

fn write_value(value: &Value, reply: &mut Reply, script_resp: u8, depth: usize) {
    if depth > MAX_DEPTH {
        reply.error(b"ERR reached lua stack limit");
        return;
    }
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
        Value::Table(table) => write_table(table, reply, script_resp, depth),
        _ => reply.null(),
    }
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

fn write_table(table: &Table, reply: &mut Reply, script_resp: u8, depth: usize) {
    if let Value::String(_) = field(table, "err") {
        let info = error_info(table);
        let message = one_line(&info.message.unwrap_or_default());
        if info.ignore_stats {
            reply.error_counted_elsewhere(&message);
        } else {
            reply.error(&message);
        }
        return;
    }
    if let Value::String(text) = field(table, "ok") {
        reply.simple(&one_line(&text.as_bytes()));
        return;
    }
    if let Value::Number(_) | Value::Integer(_) = field(table, "double") {
        let d = match field(table, "double") {
            Value::Number(d) => d,
            Value::Integer(n) => n as f64,
            _ => 0.0,
        };
        reply.double(d);
        return;
    }
    if let Value::String(digits) = field(table, "big_number") {
        reply.big_number(&one_line(&digits.as_bytes()));
        return;
    }
    if let Value::Table(verbatim) = field(table, "verbatim_string") {
        if let (Value::String(format), Value::String(text)) =
            (field(&verbatim, "format"), field(&verbatim, "string"))
        {
            let format = format.as_bytes();
            let mut ext = [b' '; 3];
            for (slot, byte) in ext.iter_mut().zip(format.iter()) {
                *slot = *byte;
            }
            reply.verbatim(&ext, &text.as_bytes());
            return;
        }
    }
    if let Value::Table(map) = field(table, "map") {
        let pairs: Vec<(Value, Value)> =
            map.pairs::<Value, Value>().filter_map(Result::ok).collect();
        reply.map(pairs.len());
        for (key, value) in &pairs {
            write_value(key, reply, script_resp, depth + 1);
            write_value(value, reply, script_resp, depth + 1);
        }
        return;
    }
    if let Value::Table(set) = field(table, "set") {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(member, _)| member)
            .collect();
        reply.set(members.len());
        for member in &members {
            write_value(member, reply, script_resp, depth + 1);
        }
        return;
    }
    let mut items = Vec::new();
    for i in 1.. {
        match table.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(value) => items.push(value),
        }
    }
    reply.array(items.len());
    for item in &items {
        write_value(item, reply, script_resp, depth + 1);
    }
}

/// CR and LF become spaces, as Redis does for status and error lines.
fn one_line(text: &[u8]) -> Vec<u8> {
    text.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}
