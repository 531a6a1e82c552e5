//! Scripts Latch runs without the Lua VM: the compare-and-delete lock release, as the
//! SETNX page, Redlock's clients and latch-lock write it (`if redis.call('get',
//! KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) ...`) and as redis-py's
//! `Lock` writes it (`local token = ... return 1`).
//!
//! A script is recognized by its tokens, so spacing, line breaks, quote style and the
//! case of the command names do not matter; anything more (a comment, a semicolon, one
//! more statement) and it runs in the VM as any script does. Only a script that
//! compiled is looked at, and only one without a shebang line.
//!
//! A recognized run makes the same two `redis.call`s the VM would, through the same
//! gatekeeper path (`gate::run_for_script`), so statistics, the slow log, MONITOR, the
//! AOF and WATCH see the same commands with the same arguments. What it skips is the VM's
//! own work: the KEYS and ARGV tables, interning the key and the token, the protected call
//! and the garbage. Before it runs anything it
//! makes sure the run can only end as the VM's would without an error: neither call may
//! be refused (`gate::script_admits`, the checks `redis.call` makes) and the key must
//! hold a string or nothing (GET's only error is WRONGTYPE). Otherwise it leaves the
//! whole run to the VM, whose error replies (with their line numbers) it does not copy.

use bytes::Bytes;
use latch_keyspace::Value;

use super::engine::CallRules;
use super::raw::Ran;
use super::RunState;
use crate::commands::Ctx;
use crate::gate;
use crate::table::Command;

/// A recognized release script.
#[derive(Clone, Debug)]
pub struct Idiom {
    /// The command names the script's two calls spell: MONITOR and the AOF show them as
    /// written.
    get: Bytes,
    del: Bytes,
    /// GET and DEL, found once in the command table (each run still makes every check
    /// `redis.call` makes before it calls them).
    get_command: &'static Command,
    del_command: &'static Command,
    answer: Answer,
}

/// Two idioms are the same when they spell the same names and answer alike (the commands
/// follow from the names).
impl PartialEq for Idiom {
    fn eq(&self, other: &Idiom) -> bool {
        self.get == other.get && self.del == other.del && self.answer == other.answer
    }
}

impl Eq for Idiom {}

/// What a release that deleted the key returns (one that did not returns 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// `return redis.call('del', KEYS[1])`: DEL's reply.
    DelReply,
    /// `redis.call('del', KEYS[1]) return 1`.
    One,
}

/// The spellings recognized, as [`tokens`] writes a script.
const FORMS: [(&str, Answer); 3] = [
    (
        "if redis . call ( 'get' , KEYS [ 1 ] ) == ARGV [ 1 ] then \
         return redis . call ( 'del' , KEYS [ 1 ] ) else return 0 end",
        Answer::DelReply,
    ),
    (
        "if redis . call ( 'get' , KEYS [ 1 ] ) == ARGV [ 1 ] then \
         return redis . call ( 'del' , KEYS [ 1 ] ) end return 0",
        Answer::DelReply,
    ),
    (
        "local token = redis . call ( 'get' , KEYS [ 1 ] ) \
         if not token or token ~= ARGV [ 1 ] then return 0 end \
         redis . call ( 'del' , KEYS [ 1 ] ) return 1",
        Answer::One,
    ),
];

/// Longest token line worth building: past it no form can match.
const MAX_TEXT: usize = 200;

/// The idiom a compiled script body (without a shebang) spells, if any.
pub fn recognize(body: &[u8]) -> Option<Idiom> {
    let (text, literals) = tokens(body)?;
    let answer = FORMS.iter().find(|(form, _)| *form == text)?.1;
    let [get, del] = <[Vec<u8>; 2]>::try_from(literals).ok()?;
    // With a key, both calls pass the arity check `redis.call` makes.
    let key = Bytes::from_static(b"key");
    let get = Bytes::from(get);
    let del = Bytes::from(del);
    let get_command = gate::command_for_script(&[get.clone(), key.clone()]).ok()?;
    let del_command = gate::command_for_script(&[del.clone(), key]).ok()?;
    Some(Idiom {
        get,
        del,
        get_command,
        del_command,
        answer,
    })
}

/// The script as one line of tokens separated by single spaces, each string literal
/// written as `'its text in lower case'`, and the literals as written. `None` for anything
/// outside the bit of Lua the forms use (comments, escapes, long brackets, other
/// operators) or longer than any form.
fn tokens(body: &[u8]) -> Option<(String, Vec<Vec<u8>>)> {
    let mut text = String::new();
    let mut literals = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let byte = body[at];
        if byte.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        if text.len() > MAX_TEXT {
            return None;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        let start = at;
        if byte.is_ascii_alphabetic() || byte == b'_' {
            while at < body.len() && (body[at].is_ascii_alphanumeric() || body[at] == b'_') {
                at += 1;
            }
            text.push_str(std::str::from_utf8(&body[start..at]).ok()?);
        } else if byte.is_ascii_digit() {
            while at < body.len() && body[at].is_ascii_digit() {
                at += 1;
            }
            text.push_str(std::str::from_utf8(&body[start..at]).ok()?);
        } else if byte == b'\'' || byte == b'"' {
            let length = body[at + 1..].iter().position(|&b| b == byte)?;
            let literal = &body[at + 1..at + 1 + length];
            if literal.iter().any(|&b| matches!(b, b'\\' | b'\n' | b'\r')) {
                return None;
            }
            text.push('\'');
            text.push_str(std::str::from_utf8(&literal.to_ascii_lowercase()).ok()?);
            text.push('\'');
            literals.push(literal.to_vec());
            at += length + 2;
        } else {
            let operator = match (byte, body.get(at + 1)) {
                (b'=', Some(b'=')) => "==",
                (b'~', Some(b'=')) => "~=",
                (b'=', _) => "=",
                (b'(', _) => "(",
                (b')', _) => ")",
                (b'[', Some(b'[' | b'=')) => return None,
                (b'[', _) => "[",
                (b']', _) => "]",
                (b',', _) => ",",
                (b'.', _) => ".",
                _ => return None,
            };
            text.push_str(operator);
            at += operator.len();
        }
    }
    Some((text, literals))
}

impl Idiom {
    /// Runs the release for `keys` and `args` as the VM would, or returns `None` having
    /// done nothing when it cannot be sure the run ends without an error (see the module's
    /// notes). The calls' replies are read in RESP2, a run's protocol until it calls
    /// `redis.setresp`, which these scripts do not.
    pub fn run(
        &self,
        ctx: &mut Ctx<'_, '_>,
        keys: &[Bytes],
        args: &[Bytes],
        rules: CallRules,
        run: &RunState,
    ) -> Option<Ran> {
        // Without KEYS[1] the VM's `redis.call` raises "arguments must be strings".
        let key = keys.first()?;
        let get_args = [self.get.clone(), key.clone()];
        let del_args = [self.del.clone(), key.clone()];
        if !gate::script_admits(ctx, self.get_command, &get_args, rules, run)
            || !gate::script_admits(ctx, self.del_command, &del_args, rules, run)
        {
            return None;
        }
        let (get, del) = (self.get_command, self.del_command);
        let db = ctx.client.db;
        if ctx
            .keys
            .peek(db, key)
            .is_some_and(|value| !matches!(value, Value::Str(_)))
        {
            return None;
        }
        let mut reply = gate::run_for_script(ctx, get, &get_args, 2, run);
        // `redis.call` gives the value as a string and a missing key as false, which
        // equals no token; a missing ARGV[1] (nil) equals no value either.
        let held = matches!(
            (bulk(reply.buffer()), args.first()),
            (Some(value), Some(token)) if value == token.as_ref()
        );
        if !held {
            return Some(Ran::Number(0.0));
        }
        let mut reply = gate::run_for_script(ctx, del, &del_args, 2, run);
        Some(match self.answer {
            Answer::DelReply => Ran::Number(integer(reply.buffer()) as f64),
            Answer::One => Ran::Number(1.0),
        })
    }
}

/// The string of a RESP2 bulk reply; `None` for the null bulk (or anything else, which GET
/// of a string or of nothing never answers).
fn bulk(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"$")?;
    let line_end = rest.iter().position(|&b| b == b'\r')?;
    let length: usize = std::str::from_utf8(&rest[..line_end]).ok()?.parse().ok()?;
    rest.get(line_end + 2..line_end + 2 + length)
}

/// The value of a RESP integer reply (DEL's), 0 if it is not one.
fn integer(reply: &[u8]) -> i64 {
    reply
        .strip_prefix(b":")
        .and_then(|rest| {
            let line_end = rest.iter().position(|&b| b == b'\r')?;
            std::str::from_utf8(&rest[..line_end]).ok()?.parse().ok()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETNX_PAGE: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1]\nthen\n    \
                              return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend\n";
    const LATCH_LOCK: &str = "\nif redis.call('GET', KEYS[1]) == ARGV[1] then\n    \
                              return redis.call('DEL', KEYS[1])\nend\nreturn 0\n";
    const REDIS_PY: &str = "\n        local token = redis.call('get', KEYS[1])\n        \
                            if not token or token ~= ARGV[1] then\n            return 0\n        \
                            end\n        redis.call('del', KEYS[1])\n        return 1\n    ";

    fn names(idiom: &Idiom) -> (&[u8], &[u8]) {
        (&idiom.get, &idiom.del)
    }

    #[test]
    fn the_release_is_recognized_as_its_users_write_it() {
        let page = recognize(SETNX_PAGE.as_bytes()).expect("the SETNX page's script");
        assert_eq!(names(&page), (&b"get"[..], &b"del"[..]));
        assert_eq!(page.answer, Answer::DelReply);
        let ours = recognize(LATCH_LOCK.as_bytes()).expect("latch-lock's release");
        assert_eq!(names(&ours), (&b"GET"[..], &b"DEL"[..]));
        assert_eq!(ours.answer, Answer::DelReply);
        let one_line = "if redis.call('get', KEYS[1]) == ARGV[1] then return \
                        redis.call('del', KEYS[1]) else return 0 end";
        assert_eq!(recognize(one_line.as_bytes()), Some(page.clone()));
        assert!(FORMS.iter().all(|(form, _)| form.len() < MAX_TEXT));
        let py = recognize(REDIS_PY.as_bytes()).expect("redis-py's release");
        assert_eq!(py.answer, Answer::One);
        assert_eq!(names(&py), (&b"get"[..], &b"del"[..]));
    }

    #[test]
    fn anything_more_or_different_is_left_to_the_vm() {
        for script in [
            // a comment, a semicolon, one more statement
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end -- done",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end;",
            "redis.log(redis.LOG_NOTICE, 'x') if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            // other commands, keys, arguments, answers, operators
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('unlink', KEYS[1]) else return 0 end",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[2]) else return 0 end",
            "if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 1 end",
            "if redis.call('get', KEYS[1]) ~= ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.pcall('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.call('get', keys[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0x0 end",
            // strings the forms never hold
            "if redis.call('g\\et', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.call([[get]], KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end end end end end end end end end end end end end end end end end end end end end end end end",
            "",
        ] {
            assert_eq!(recognize(script.as_bytes()), None, "{script}");
        }
    }

    #[test]
    fn tokens_keep_what_lua_tells_apart() {
        let (text, literals) = tokens(b"a=b==c ~= 'X y'\n\t\"Z\"").unwrap();
        assert_eq!(text, "a = b == c ~= 'x y' 'z'");
        assert_eq!(literals, vec![b"X y".to_vec(), b"Z".to_vec()]);
        assert_eq!(tokens(b"return0").unwrap().0, "return0");
        assert_eq!(tokens(b"'unclosed"), None);
        assert_eq!(tokens(b"a;b"), None);
    }

    #[test]
    fn replies_are_read_as_resp2() {
        assert_eq!(bulk(b"$5\r\ntoken\r\n"), Some(&b"token"[..]));
        assert_eq!(bulk(b"$0\r\n\r\n"), Some(&b""[..]));
        assert_eq!(bulk(b"$-1\r\n"), None);
        assert_eq!(bulk(b"-WRONGTYPE x\r\n"), None);
        assert_eq!(integer(b":1\r\n"), 1);
        assert_eq!(integer(b":0\r\n"), 0);
    }
}
