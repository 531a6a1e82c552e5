//! `SCRIPT DEBUG SYNC`: Redis' Lua debugger (LDB), run over the debugging client's own
//! connection.
//!
//! A client that asked for it has its next EVAL run under a line hook. The hook stops the
//! script where the user asked (the first line, a breakpoint, `redis.breakpoint()`, a run
//! that went on past the busy threshold), sends what it has to say as an array of simple
//! strings, and reads debugger commands (`step`, `continue`, `list`, `print`, `eval`,
//! `redis`, ...) from the socket itself, with direct reads and writes on its descriptor:
//! the script is in the middle of a Lua call on this thread, so the connection's task
//! cannot be re-entered. When the script ends, an `<endsession>` line, then the EVAL reply,
//! and the connection is closed, as Redis does.
//!
//! `SCRIPT DEBUG YES` runs the same session and then undoes its writes
//! ([`super::rollback`]), where Redis forks the server and throws the child away. SYNC
//! keeps them in both.
//!
//! Unlike redis-server, whose sync session stops the whole server, Latch goes on serving
//! other clients meanwhile: they wait for the script as for any other (and after
//! `busy-reply-threshold` get BUSY, and may SCRIPT KILL it).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use latch_protocol::Frame;
use mlua::debug::{Debug, DebugEvent};
use mlua::{Function, Lua, MultiValue, Table, Value, VmState};

use super::RunState;

/// Breakpoints one session may hold.
const MAX_BREAKPOINTS: usize = 64;
/// Longest logged reply or value dump, until `maxlen` changes it.
const DEFAULT_MAXLEN: usize = 256;
/// Debugger input kept waiting for a complete command before the session gives up.
const MAX_INPUT: usize = 1 << 20;
/// Longest a log write waits for room in the socket.
const WRITE_TIMEOUT_MS: i32 = 5_000;
/// How often a session waiting for input looks at the kill flag.
const WAIT_SLICE_MS: i32 = 100;
/// Table nesting a value dump follows.
const MAX_DEPTH: usize = 10;
/// Where a busy threshold of 0 leaves the "infinite loop?" stop.
const DEFAULT_LOOP_STOP_MS: u64 = 5_000;

/// One debugging session: the state of Redis' `ldb` for the EVAL it debugs.
pub struct Session {
    fd: i32,
    lines: Vec<Vec<u8>>,
    logs: Vec<Vec<u8>>,
    input: Vec<u8>,
    /// Stop at the next line (and log `redis.call`s meanwhile).
    step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    lua_break: bool,
    breakpoints: Vec<usize>,
    /// 0: no limit.
    maxlen: usize,
    hint_sent: bool,
    current_line: usize,
    /// When the script last went on after a stop (for the "infinite loop?" stop).
    resumed: Instant,
}

/// The session in progress, if any, shared by the engine, the hook and the
/// `redis.debug`/`redis.breakpoint` functions. Borrows are kept short: Lua code that a
/// command runs may call back into it.
#[derive(Clone, Default)]
pub struct Debugger(Rc<RefCell<Option<Session>>>);

impl Debugger {
    fn with<R>(&self, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
        self.0.borrow_mut().as_mut().map(f)
    }

    pub fn is_active(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// Whether `redis.call` is logged now (a session stepping through lines).
    pub fn is_logging(&self) -> bool {
        self.0.borrow().as_ref().is_some_and(|s| s.step)
    }

    /// Starts a session over descriptor `fd` for a script with this body.
    pub fn start(&self, fd: i32, body: &[u8]) {
        let mut body = body;
        while let [rest @ .., b'\n' | b'\r'] = body {
            body = rest;
        }
        let lines = body.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        *self.0.borrow_mut() = Some(Session {
            fd,
            lines,
            logs: Vec::new(),
            input: Vec::new(),
            step: true,
            lua_break: false,
            breakpoints: Vec::new(),
            maxlen: DEFAULT_MAXLEN,
            hint_sent: false,
            current_line: 0,
            resumed: Instant::now(),
        });
    }

    /// Ends the session: what is left of the log and the `<endsession>` mark go out.
    pub fn end(&self) {
        if let Some(mut session) = self.0.borrow_mut().take() {
            session.log(b"<endsession>".to_vec());
            session.send_logs();
        }
    }

    /// Writes bytes ahead of the session's first log (replies still buffered).
    pub fn write_raw(&self, bytes: &[u8]) {
        self.with(|s| write_all(s.fd, bytes));
    }

    /// Logs a command `redis.call` is about to run.
    pub fn log_command(&self, args: &[Bytes]) {
        self.with(|s| {
            let mut line = b"<redis>".to_vec();
            for (index, arg) in args.iter().enumerate() {
                if index == 10 {
                    line.extend_from_slice(format!(" ... ({} more)", args.len() - 11).as_bytes());
                    break;
                }
                line.push(b' ');
                line.extend_from_slice(arg);
            }
            s.log(line);
        });
    }

    /// Logs a command's reply (its RESP bytes), in the debugger's notation.
    pub fn log_reply(&self, resp: &[u8], resp3: bool) {
        self.with(|s| {
            let mut line = b"<reply> ".to_vec();
            if let Ok(Some((frame, _))) = latch_protocol::frame::decode(resp) {
                human(&mut line, &frame, resp3);
            }
            s.log_trimmed(line);
        });
    }

    pub fn log_error(&self, message: &[u8]) {
        self.with(|s| {
            let mut line = b"<error> ".to_vec();
            line.extend_from_slice(message);
            s.log(line);
        });
    }
}

impl Session {
    fn log(&mut self, entry: Vec<u8>) {
        self.logs.push(entry);
    }

    /// Logs `entry` cut at `maxlen` (with a hint, the first time, that it can be lifted).
    fn log_trimmed(&mut self, mut entry: Vec<u8>) {
        let trimmed = self.maxlen > 0 && entry.len() > self.maxlen;
        if trimmed {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
        }
        self.log(entry);
        if trimmed && !self.hint_sent {
            self.hint_sent = true;
            self.log(b"<hint> The reply above was cut short: 'maxlen 0' turns that off.".to_vec());
        }
    }

    /// Sends the log as an array of simple strings (line breaks as spaces) and empties it.
    fn send_logs(&mut self) {
        let mut out = format!("*{}\r\n", self.logs.len()).into_bytes();
        for entry in self.logs.drain(..) {
            out.push(b'+');
            out.extend(entry.iter().map(|&b| match b {
                b'\r' | b'\n' => b' ',
                b => b,
            }));
            out.extend_from_slice(b"\r\n");
        }
        write_all(self.fd, &out);
    }

    fn source_line(&self, line: usize) -> &[u8] {
        match line.checked_sub(1).and_then(|index| self.lines.get(index)) {
            Some(text) => text,
            None => b"<out of range source code line>",
        }
    }

    fn log_source_line(&mut self, line: usize) {
        let prefix = match (line == self.current_line, self.breakpoints.contains(&line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = format!("{prefix}{line:<3} ").into_bytes();
        entry.extend_from_slice(self.source_line(line));
        self.log(entry);
    }

    /// The source around line `around` (`context` lines each side); all of it for 0.
    fn list(&mut self, around: usize, context: usize) {
        for line in 1..=self.lines.len() {
            if around == 0 || line.abs_diff(around) <= context {
                self.log_source_line(line);
            }
        }
    }

    fn breakpoints(&mut self, args: &[Vec<u8>]) {
        if args.len() == 1 {
            if self.breakpoints.is_empty() {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.breakpoints.len()).into_bytes());
                for line in self.breakpoints.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &args[1..] {
            let Some(line) = std::str::from_utf8(arg)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            else {
                let mut entry = b"Invalid argument:'".to_vec();
                entry.extend_from_slice(arg);
                entry.push(b'\'');
                self.log(entry);
                continue;
            };
            if line == 0 {
                self.breakpoints.clear();
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                let line = line as usize;
                if self.breakpoints.len() == MAX_BREAKPOINTS {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if line <= self.lines.len() {
                    if !self.breakpoints.contains(&line) {
                        self.breakpoints.push(line);
                    }
                    self.list(line, 1);
                } else {
                    self.log(b"Wrong line number.".to_vec());
                }
            } else {
                let line = line.unsigned_abs() as usize;
                if let Some(at) = self.breakpoints.iter().position(|&b| b == line) {
                    self.breakpoints.remove(at);
                    self.log(b"Breakpoint removed.".to_vec());
                } else {
                    self.log(b"No breakpoint in the specified line.".to_vec());
                }
            }
        }
    }

    fn maxlen(&mut self, args: &[Vec<u8>]) {
        if args.len() == 2 {
            let wanted = leading_int(&args[1]);
            self.hint_sent = true;
            self.maxlen = match wanted {
                0 => 0,
                n if n <= 60 => 60,
                n => n as usize,
            };
        }
        let text = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.log(text.into_bytes());
    }

    fn help(&mut self) {
        const HELP: &[&str] = &[
            "Lua debugger commands (Latch, as Redis' LDB):",
            "[h]elp               This list.",
            "[s]tep, [n]ext       Run the current line, stop at the next one.",
            "[c]ontinue           Run until a breakpoint (or the end).",
            "[l]ist [line] [ctx]  Source around the current line, or around [line]",
            "                     (0: the current one), [ctx] lines each side (5).",
            "[w]hole              All the source.",
            "[p]rint              Every local variable of the current frame.",
            "[p]rint <var>        One variable, local or (KEYS, ARGV) global.",
            "[b]reak              The breakpoints.",
            "[b]reak <line>       Add one at <line>.",
            "[b]reak -<line>      Remove the one at <line>.",
            "[b]reak 0            Remove them all.",
            "[t]race              The call stack.",
            "[e]val <code>        Run Lua code, in a call frame of its own.",
            "[r]edis <cmd>        Run a command, as redis.call would.",
            "[m]axlen [len]       Cut logged replies and values at len bytes (0: never).",
            "[a]bort              Stop the script with an error (SYNC mode: what it",
            "                     wrote stays written).",
            "",
            "From the script: redis.debug(...) logs its arguments here;",
            "redis.breakpoint() stops at the next line, as a breakpoint would.",
        ];
        for line in HELP {
            self.log(line.as_bytes().to_vec());
        }
    }
}

/// What the hook needs besides the session.
pub struct HookContext {
    pub debugger: Debugger,
    pub run: Arc<RunState>,
    /// The environment EVAL scripts run in (for `eval`).
    pub env: Table,
    /// The globals behind it (KEYS, ARGV for `print`).
    pub safe: Table,
    /// `redis.call` itself (for `redis`).
    pub call: Function,
    /// Lua's `debug` library, kept out of the scripts' reach (locals and frames).
    pub debug_lib: Table,
    /// The busy threshold as the run started with it.
    pub threshold_ms: u64,
}

enum After {
    Resume,
    /// The client went away: the script runs on without stops.
    Closed,
}

/// The session's hook, on every line and every `HOOK_EVERY` instructions.
pub fn hook(lua: &Lua, debug: &Debug, cx: &HookContext) -> mlua::Result<VmState> {
    let counted = matches!(debug.event(), DebugEvent::Count);
    if counted {
        cx.run.step_aside_after(super::engine::STEP_ASIDE_AFTER_US);
        super::engine::check_run(lua, &cx.run, cx.threshold_ms)?;
    }
    let in_script = debug
        .source()
        .short_src
        .is_some_and(|source| source.contains("user_script"));
    if !in_script {
        return Ok(VmState::Continue);
    }
    let line = debug.current_line().unwrap_or(0);
    let loop_stop_ms = if cx.threshold_ms > 0 {
        cx.threshold_ms
    } else {
        DEFAULT_LOOP_STOP_MS
    };
    let stop = cx.debugger.with(|s| {
        s.current_line = line;
        // A breakpoint stops the line once, at its line event.
        let at_break = s.lua_break || (!counted && s.breakpoints.contains(&line));
        if at_break {
            Some(if s.lua_break {
                "redis.breakpoint() called"
            } else {
                "break point"
            })
        } else if s.step && !counted {
            Some("step over")
        } else if counted && !s.step && s.resumed.elapsed().as_millis() as u64 >= loop_stop_ms {
            Some("timeout reached, infinite loop?")
        } else {
            None
        }
    });
    // No session, or no reason to stop here.
    let Some(reason) = stop.flatten() else {
        return Ok(VmState::Continue);
    };
    let timed_out = counted && reason.starts_with("timeout");
    cx.debugger.with(|s| {
        s.step = false;
        s.lua_break = false;
        s.log(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
        s.log_source_line(line);
        s.send_logs();
    });
    // Waiting for a person: let the runtime serve the other connections meanwhile.
    cx.run.step_aside_after(0);
    let after = repl(lua, cx)?;
    if matches!(after, After::Closed) && timed_out {
        return Err(mlua::Error::RuntimeError(
            "timeout during Lua debugging with client closing connection".into(),
        ));
    }
    cx.debugger.with(|s| s.resumed = Instant::now());
    Ok(VmState::Continue)
}

/// Reads and runs debugger commands until one lets the script go on.
fn repl(lua: &Lua, cx: &HookContext) -> mlua::Result<After> {
    loop {
        let args = loop {
            match cx.debugger.with(|s| parse_command(&s.input)) {
                Some(Parsed::Command(args)) => break args,
                Some(Parsed::Invalid) => {
                    return Err(mlua::Error::RuntimeError("protocol error".into()))
                }
                Some(Parsed::Incomplete) => {}
                None => return Ok(After::Closed),
            }
            let fd = cx.debugger.with(|s| s.fd).unwrap_or(-1);
            match read_some(lua, cx, fd)? {
                Some(bytes) => {
                    let over = cx
                        .debugger
                        .with(|s| {
                            s.input.extend_from_slice(&bytes);
                            let over = s.input.len() > MAX_INPUT;
                            if over {
                                s.input = Vec::new();
                            }
                            over
                        })
                        .unwrap_or(false);
                    if over {
                        return Err(mlua::Error::RuntimeError(
                            "max client buffer reached".into(),
                        ));
                    }
                }
                None => {
                    cx.debugger.with(|s| {
                        s.step = false;
                        s.breakpoints.clear();
                    });
                    return Ok(After::Closed);
                }
            }
        };
        // A command takes the whole input with it, as in Redis.
        cx.debugger.with(|s| s.input.clear());
        let name = args[0].to_ascii_lowercase();
        match name.as_slice() {
            b"s" | b"step" | b"n" | b"next" => {
                cx.debugger.with(|s| s.step = true);
                return Ok(After::Resume);
            }
            b"c" | b"continue" => return Ok(After::Resume),
            b"a" | b"abort" => {
                return Err(mlua::Error::RuntimeError(
                    "script aborted for user request".into(),
                ))
            }
            b"h" | b"help" => {
                cx.debugger.with(Session::help);
            }
            b"t" | b"trace" => trace(cx),
            b"m" | b"maxlen" => {
                cx.debugger.with(|s| s.maxlen(&args));
            }
            b"b" | b"break" => {
                cx.debugger.with(|s| s.breakpoints(&args));
            }
            b"e" | b"eval" => eval(lua, cx, &args),
            b"r" | b"redis" if args.len() > 1 => redis(lua, cx, &args),
            b"p" | b"print" => {
                if args.len() == 2 {
                    print(cx, &args[1]);
                } else {
                    print_all(cx);
                }
            }
            b"l" | b"list" => {
                cx.debugger.with(|s| {
                    let mut around = s.current_line;
                    if let Some(arg) = args.get(1) {
                        let wanted = leading_int(arg);
                        if wanted > 0 {
                            around = wanted as usize;
                        }
                    }
                    let context = args
                        .get(2)
                        .map_or(5, |arg| leading_int(arg).max(0) as usize);
                    s.list(around, context);
                });
            }
            b"w" | b"whole" => {
                cx.debugger.with(|s| s.list(0, 0));
            }
            _ => {
                cx.debugger.with(|s| {
                    s.log(
                        b"<error> Unknown Redis Lua debugger command or wrong number of arguments."
                            .to_vec(),
                    )
                });
            }
        }
        cx.debugger.with(Session::send_logs);
    }
}

enum Parsed {
    Command(Vec<Vec<u8>>),
    Incomplete,
    Invalid,
}

/// One command in RESP multibulk form (`*N` then N bulk strings of 1 to 1024 bytes, at
/// most 1024 of them), as LDB reads it: whatever comes before the `*` is skipped.
fn parse_command(input: &[u8]) -> Parsed {
    if input.is_empty() {
        return Parsed::Incomplete;
    }
    let Some(star) = input.iter().position(|&b| b == b'*') else {
        return Parsed::Invalid;
    };
    let mut at = star + 1;
    let Some(count) = line_number(input, &mut at) else {
        return Parsed::Incomplete;
    };
    if !(1..=1024).contains(&count) {
        return Parsed::Invalid;
    }
    let mut args = Vec::with_capacity(count as usize);
    while args.len() < count as usize {
        match input.get(at) {
            None => return Parsed::Incomplete,
            Some(b'$') => at += 1,
            Some(_) => return Parsed::Invalid,
        }
        let Some(len) = line_number(input, &mut at) else {
            return Parsed::Incomplete;
        };
        if !(1..=1024).contains(&len) {
            return Parsed::Invalid;
        }
        let len = len as usize;
        if input.len() < at + len + 2 {
            return Parsed::Incomplete;
        }
        args.push(input[at..at + len].to_vec());
        at += len;
        if &input[at..at + 2] != b"\r\n" {
            return Parsed::Invalid;
        }
        at += 2;
    }
    Parsed::Command(args)
}

/// The number on the line starting at `at` (moved past its CRLF); `None` when the line is
/// not complete yet. A line that is no number reads as 0 (so it is refused by the caller).
fn line_number(input: &[u8], at: &mut usize) -> Option<i64> {
    let rest = &input[*at..];
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *at += end + 2;
    Some(leading_int(&rest[..end]))
}

/// C's `atoi`: an optional sign and the digits that follow, 0 without any.
fn leading_int(text: &[u8]) -> i64 {
    let text = text.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut n: i64 = 0;
    for &b in digits.iter().take_while(|b| b.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -n
    } else {
        n
    }
}

/// Waits for input on `fd` and reads what is there; `None` once the client is gone. While
/// it waits, the run's kill flag and busy threshold are watched as the count hook would.
#[allow(unsafe_code)]
fn read_some(lua: &Lua, cx: &HookContext, fd: i32) -> mlua::Result<Option<Vec<u8>>> {
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the call's duration.
        let ready = unsafe { libc::poll(&mut poll, 1, WAIT_SLICE_MS) };
        if ready == 0 {
            super::engine::check_run(lua, &cx.run, cx.threshold_ms)?;
            continue;
        }
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Ok(None);
        }
        let mut buffer = vec![0u8; 16 * 1024];
        // SAFETY: the buffer is valid for writes of its length.
        let n = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        if n > 0 {
            buffer.truncate(n as usize);
            return Ok(Some(buffer));
        }
        if n < 0 {
            let error = std::io::Error::last_os_error();
            if matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                continue;
            }
        }
        return Ok(None);
    }
}

/// Writes all of `bytes` to the (non-blocking) socket, waiting up to `WRITE_TIMEOUT_MS`
/// for room at a time. A failure is left for the next read to find.
#[allow(unsafe_code)]
fn write_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the slice is valid for reads of its length.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        if n > 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock => {
                let mut poll = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, for the call's duration.
                if unsafe { libc::poll(&mut poll, 1, WRITE_TIMEOUT_MS) } <= 0 {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// The frames of the script's Lua functions, innermost first, as levels for `debug`.
fn script_levels(cx: &HookContext) -> Vec<(i64, Table)> {
    let Ok(getinfo) = cx.debug_lib.raw_get::<Function>("getinfo") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for level in 1..200 {
        match getinfo.call::<Option<Table>>((level, "Snl")) {
            Ok(Some(info)) => {
                let source: String = info.raw_get("short_src").unwrap_or_default();
                if source.contains("user_script") {
                    found.push((level, info));
                }
            }
            _ => break,
        }
    }
    found
}

/// The named locals of the frame at `level`.
fn locals(cx: &HookContext, level: i64) -> Vec<(String, Value)> {
    let Ok(getlocal) = cx.debug_lib.raw_get::<Function>("getlocal") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for index in 1.. {
        match getlocal.call::<(Option<String>, Value)>((level, index)) {
            Ok((Some(name), value)) => found.push((name, value)),
            _ => break,
        }
    }
    found
}

fn print(cx: &HookContext, name: &[u8]) {
    for (level, _) in script_levels(cx) {
        // The level of each frame shifts by none: getlocal is called from here as getinfo was.
        if let Some((_, value)) = locals(cx, level)
            .into_iter()
            .find(|(local, _)| local.as_bytes() == name)
        {
            log_value(cx, b"<value> ".to_vec(), &value);
            return;
        }
    }
    if name == b"KEYS" || name == b"ARGV" {
        let value = cx
            .safe
            .raw_get::<Value>(String::from_utf8_lossy(name).as_ref())
            .unwrap_or(Value::Nil);
        log_value(cx, b"<value> ".to_vec(), &value);
    } else {
        cx.debugger.with(|s| s.log(b"No such variable.".to_vec()));
    }
}

fn print_all(cx: &HookContext) {
    let mut shown = 0;
    if let Some((level, _)) = script_levels(cx).first() {
        for (name, value) in locals(cx, *level) {
            if name.contains("(*temporary)") {
                continue;
            }
            log_value(cx, format!("<value> {name} = ").into_bytes(), &value);
            shown += 1;
        }
    }
    if shown == 0 {
        cx.debugger
            .with(|s| s.log(b"No local variables in the current context.".to_vec()));
    }
}

fn trace(cx: &HookContext) {
    let levels = script_levels(cx);
    if levels.is_empty() {
        cx.debugger
            .with(|s| s.log(b"<error> Can't retrieve Lua stack.".to_vec()));
        return;
    }
    for (index, (_, info)) in levels.iter().enumerate() {
        let name: Option<String> = info.raw_get("name").ok().flatten();
        let line: i64 = info.raw_get("currentline").unwrap_or(0);
        cx.debugger.with(|s| {
            let place = if index == 0 { "In" } else { "From" };
            let name = name.as_deref().unwrap_or("top level");
            s.log(format!("{place} {name}:").into_bytes());
            s.log_source_line(line.max(0) as usize);
        });
    }
}

fn eval(lua: &Lua, cx: &HookContext, args: &[Vec<u8>]) {
    let code = args[1..].join(&b' ');
    let mut expression = b"return ".to_vec();
    expression.extend_from_slice(&code);
    let compile = |text: &[u8]| {
        lua.load(text)
            .set_name("@ldb_eval")
            .set_environment(cx.env.clone())
            .into_function()
    };
    let function = match compile(&expression).or_else(|_| compile(&code)) {
        Ok(function) => function,
        Err(error) => {
            let message = super::sandbox::plain_message(&error);
            cx.debugger
                .with(|s| s.log(format!("<error> {message}").into_bytes()));
            return;
        }
    };
    match function.call::<MultiValue>(()) {
        Ok(values) => {
            let first = values.into_iter().next().unwrap_or(Value::Nil);
            log_value(cx, b"<retval> ".to_vec(), &first);
        }
        Err(error) => {
            let message = super::sandbox::plain_message(&error);
            cx.debugger
                .with(|s| s.log(format!("<error> {message}").into_bytes()));
        }
    }
}

/// `redis <command>`: runs it through `redis.call` with logging on, so that the command
/// and its reply (or error) show in the log.
fn redis(lua: &Lua, cx: &HookContext, args: &[Vec<u8>]) {
    let mut words = MultiValue::new();
    for arg in &args[1..] {
        match lua.create_string(arg) {
            Ok(word) => words.push_back(Value::String(word)),
            Err(_) => return,
        }
    }
    let was_stepping = cx.debugger.with(|s| std::mem::replace(&mut s.step, true));
    let _ = cx.call.call::<Value>(words);
    cx.debugger.with(|s| s.step = was_stepping.unwrap_or(false));
}

/// `redis.debug(...)`: logs its arguments with the current line.
pub fn debug_function(lua: &Lua, debugger: Debugger) -> mlua::Result<Function> {
    lua.create_function(move |_, values: MultiValue| {
        if !debugger.is_active() {
            return Ok(());
        }
        let line = debugger.with(|s| s.current_line).unwrap_or(0);
        let mut entry = format!("<debug> line {line}: ").into_bytes();
        for (index, value) in values.iter().enumerate() {
            if index > 0 {
                entry.extend_from_slice(b", ");
            }
            represent(&mut entry, value, 0);
        }
        debugger.with(|s| s.log(entry));
        Ok(())
    })
}

/// `redis.breakpoint()`: in a session, stop at the next line (true); else false.
pub fn breakpoint_function(lua: &Lua, debugger: Debugger) -> mlua::Result<Function> {
    lua.create_function(move |_, ()| {
        Ok(debugger
            .with(|s| {
                s.lua_break = true;
            })
            .is_some())
    })
}

fn log_value(cx: &HookContext, mut entry: Vec<u8>, value: &Value) {
    represent(&mut entry, value, 0);
    cx.debugger.with(|s| s.log_trimmed(entry));
}

/// A Lua value as the debugger shows it: strings quoted and escaped, tables as
/// `{a; b}` (arrays) or `{[k]=v; ...}`.
fn represent(out: &mut Vec<u8>, value: &Value, depth: usize) {
    if depth == MAX_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    match value {
        Value::String(text) => quote(out, &text.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => format_g(out, *n as f64),
        Value::Number(n) => format_g(out, *n),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(table) => {
            let mut array = Vec::new();
            let mut full = Vec::new();
            let mut is_array = true;
            let mut expected = 1.0;
            for pair in table.clone().pairs::<Value, Value>() {
                let Ok((key, item)) = pair else { break };
                let index = match key {
                    Value::Integer(n) => Some(n as f64),
                    Value::Number(n) => Some(n),
                    _ => None,
                };
                if index != Some(expected) {
                    is_array = false;
                }
                expected += 1.0;
                represent(&mut array, &item, depth + 1);
                array.extend_from_slice(b"; ");
                full.push(b'[');
                represent(&mut full, &key, depth + 1);
                full.extend_from_slice(b"]=");
                represent(&mut full, &item, depth + 1);
                full.extend_from_slice(b"; ");
            }
            let chosen = if is_array { &mut array } else { &mut full };
            chosen.truncate(chosen.len().saturating_sub(2));
            out.push(b'{');
            out.extend_from_slice(chosen);
            out.push(b'}');
        }
        other => {
            let kind = match other {
                Value::Function(_) => "function",
                Value::Thread(_) => "thread",
                Value::LightUserData(_) => "light-userdata",
                _ => "userdata",
            };
            out.extend_from_slice(format!("\"{kind}@{:p}\"", other.to_pointer()).as_bytes());
        }
    }
}

/// C's `%g`.
#[allow(unsafe_code)]
fn format_g(out: &mut Vec<u8>, n: f64) {
    let mut buffer = [0u8; 64];
    // SAFETY: the format takes one double; snprintf writes at most the buffer's length.
    let len =
        unsafe { libc::snprintf(buffer.as_mut_ptr().cast(), buffer.len(), c"%g".as_ptr(), n) };
    if len > 0 {
        out.extend_from_slice(&buffer[..(len as usize).min(buffer.len() - 1)]);
    }
}

/// A string in double quotes, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` and `\xHH`
/// for other unprintable bytes (as redis-cli shows strings).
fn quote(out: &mut Vec<u8>, text: &[u8]) {
    latch_protocol::quoted(text, out);
}

/// A reply in the debugger's notation: integers bare, strings quoted, `[a,b]` arrays,
/// `~(a,b)` sets, `{k => v}` maps, `NULL` (RESP2) or `(null)` (RESP3), `#true`,
/// `(double) 1.5`; status and error lines quoted with their `+` or `-`.
fn human(out: &mut Vec<u8>, frame: &Frame, resp3: bool) {
    let list = |out: &mut Vec<u8>, items: &[Frame], open: &[u8], close: u8| {
        out.extend_from_slice(open);
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            human(out, item, resp3);
        }
        out.push(close);
    };
    match frame {
        Frame::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Frame::Bulk(text) => quote(out, text),
        Frame::Simple(text) => quote(out, &[b"+".as_slice(), text].concat()),
        Frame::Error(text) | Frame::BulkError(text) => {
            quote(out, &[b"-".as_slice(), text].concat())
        }
        Frame::Null if resp3 => out.extend_from_slice(b"(null)"),
        Frame::Null => out.extend_from_slice(b"NULL"),
        Frame::Array(items) | Frame::Push(items) => list(out, items, b"[", b']'),
        Frame::Set(items) => list(out, items, b"~(", b')'),
        Frame::Map(pairs) => {
            out.push(b'{');
            for (index, (key, value)) in pairs.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                human(out, key, resp3);
                out.extend_from_slice(b" => ");
                human(out, value, resp3);
            }
            out.push(b'}');
        }
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"#true" } else { b"#false" }),
        Frame::Double(d) => {
            out.extend_from_slice(b"(double) ");
            latch_protocol::format_double_g17(*d, out);
        }
        Frame::BigNumber(digits) => out.extend_from_slice(digits),
        Frame::Verbatim { text, .. } => quote(out, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
        out
    }

    #[test]
    fn parses_commands_and_waits_for_the_rest() {
        let whole = command(&["list", "3", "2"]);
        match parse_command(&whole) {
            Parsed::Command(args) => {
                assert_eq!(args, vec![b"list".to_vec(), b"3".to_vec(), b"2".to_vec()])
            }
            _ => panic!("not parsed"),
        }
        for cut in 0..whole.len() {
            assert!(
                matches!(parse_command(&whole[..cut]), Parsed::Incomplete),
                "cut at {cut}"
            );
        }
        let nul = command(&["'hello\0world'"]);
        assert!(
            matches!(parse_command(&nul), Parsed::Command(args) if args[0] == b"'hello\0world'")
        );
    }

    #[test]
    fn refuses_what_ldb_refuses() {
        assert!(matches!(parse_command(b"PING\r\n"), Parsed::Invalid));
        assert!(matches!(parse_command(b"*0\r\n"), Parsed::Invalid));
        assert!(matches!(parse_command(b"*1025\r\n"), Parsed::Invalid));
        assert!(matches!(
            parse_command(b"*1\r\n$0\r\n\r\n"),
            Parsed::Invalid
        ));
        assert!(matches!(parse_command(b"*1\r\n:1\r\n"), Parsed::Invalid));
        assert!(matches!(
            parse_command(b"*1\r\n$2\r\nabc\r\n"),
            Parsed::Invalid
        ));
        let long = "x".repeat(1025);
        assert!(matches!(parse_command(&command(&[&long])), Parsed::Invalid));
    }

    #[test]
    fn shows_values_and_replies() {
        let mut out = Vec::new();
        quote(&mut out, b"a\"b\n\x01");
        assert_eq!(out, br#""a\"b\n\x01""#);
        let mut out = Vec::new();
        format_g(&mut out, 0.1);
        format_g(&mut out, 100000000.0);
        assert_eq!(out, b"0.11e+08");
        let frame = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Bulk(Bytes::from_static(b"x")),
            Frame::Simple(Bytes::from_static(b"OK")),
            Frame::Null,
        ]);
        let mut out = Vec::new();
        human(&mut out, &frame, false);
        assert_eq!(out, br#"[1,"x","+OK",NULL]"#);
        assert_eq!(leading_int(b" -12x"), -12);
        assert_eq!(leading_int(b"abc"), 0);
    }
}
