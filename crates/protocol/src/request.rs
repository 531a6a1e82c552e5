//! Server-side request parser.
//!
//! Clients send either multibulk requests (`*<n>\r\n` followed by `n` bulk strings
//! `$<len>\r\n<data>\r\n`) or inline requests (a single text line split on whitespace
//! with shell-like quoting). [`RequestParser`] handles both, keeps its state between
//! reads so that a large multibulk is never rescanned, and hands out arguments as
//! zero-copy [`Bytes`] split off the connection's read buffer.
//!
//! The error texts and the edge cases (where a line ends, when a header is "too big",
//! how numbers are read) follow Redis 7 so that clients see identical behaviour.

use bytes::{Buf, Bytes, BytesMut};

/// Limits applied while parsing requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest accepted bulk argument (`proto-max-bulk-len`). Default 512 MiB.
    pub max_bulk_len: u64,
    /// Largest inline request line, and the largest unterminated multibulk or bulk
    /// header that is waited for. Default 64 KiB.
    pub max_inline_len: usize,
    /// Largest accepted multibulk argument count. Default 1024 * 1024 * 1024.
    pub max_multibulk_len: u64,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_multibulk_len: 1024 * 1024 * 1024,
        }
    }
}

/// Most arguments an unauthenticated client may send in one multibulk request.
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Largest bulk argument an unauthenticated client may send.
pub const UNAUTHENTICATED_MAX_BULK: i64 = 16 * 1024;

/// A protocol error. The connection should reply `-ERR <Display text>` (or use
/// [`RequestError::error_reply`]) and then close.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No newline within `max_inline_len` bytes of an inline request.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// An inline request has an unterminated quote, or a closing quote followed by
    /// something other than whitespace.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// No `\r` within `max_inline_len` bytes of a multibulk count line.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    /// The multibulk count is not an integer or is too large.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// More than [`UNAUTHENTICATED_MAX_ARGS`] arguments before authentication.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// No `\r` within `max_inline_len` bytes of a bulk length line.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// A bulk header did not start with `$`; holds the byte found instead.
    #[error("Protocol error: expected '$', got '{}'", display_byte(*.0))]
    ExpectedDollar(u8),
    /// The bulk length is not an integer, is negative, or exceeds `max_bulk_len`.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A bulk over [`UNAUTHENTICATED_MAX_BULK`] bytes before authentication.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
}

/// How a byte appears inside an error reply: CR and LF become spaces (an error reply
/// is a single line); other bytes are shown as the Unicode code point of equal value.
fn display_byte(b: u8) -> char {
    match b {
        b'\r' | b'\n' => ' ',
        _ => char::from(b),
    }
}

impl RequestError {
    /// The exact error message bytes to send, including the `ERR ` prefix but not the
    /// leading `-` nor the trailing CRLF, e.g. `b"ERR Protocol error: invalid bulk length"`.
    ///
    /// Unlike the `Display` text this keeps a non-ASCII byte of
    /// [`RequestError::ExpectedDollar`] as the raw byte, as Redis does.
    pub fn error_reply(&self) -> Vec<u8> {
        let mut out = b"ERR ".to_vec();
        match *self {
            RequestError::ExpectedDollar(b) => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                out.push(if b == b'\r' || b == b'\n' { b' ' } else { b });
                out.push(b'\'');
            }
            other => out.extend_from_slice(other.to_string().as_bytes()),
        }
        out
    }

    /// Short reason for logs, as Redis writes it when it closes the connection.
    pub fn log_reason(&self) -> &'static str {
        match self {
            RequestError::TooBigInlineRequest => "too big inline request",
            RequestError::UnbalancedQuotes => "unbalanced quotes in inline request",
            RequestError::TooBigMbulkCount => "too big mbulk count string",
            RequestError::InvalidMultibulkLength => "invalid mbulk count",
            RequestError::UnauthenticatedMultibulkLength => "unauth mbulk count",
            RequestError::TooBigBulkCount => "too big bulk count string",
            RequestError::ExpectedDollar(_) => "expected $ but got something else",
            RequestError::InvalidBulkLength => "invalid bulk length",
            RequestError::UnauthenticatedBulkLength => "unauth bulk length",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between requests.
    Idle,
    /// Inside a multibulk: `remaining` arguments still to read; `bulk_len` is the
    /// length of the next argument once its header has been read.
    Multibulk {
        remaining: u64,
        bulk_len: Option<u64>,
    },
}

/// Resumable request parser; one per connection.
#[derive(Debug)]
pub struct RequestParser {
    state: State,
    /// Arguments of the multibulk in progress.
    partial: Vec<Bytes>,
    /// The bytes of `partial`'s arguments, added up.
    partial_bytes: usize,
    auth_required: bool,
    /// Where each argument of a whole multibulk lies (start, length), for the fast path.
    spans: Vec<(usize, usize)>,
}

/// Most arguments the one-pass path takes; a longer request takes the resumable path,
/// so that `spans` stays small.
const ONE_PASS_MAX_ARGS: usize = 1024;

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    /// A parser waiting for the start of a request.
    pub fn new() -> Self {
        RequestParser {
            state: State::Idle,
            partial: Vec::new(),
            partial_bytes: 0,
            auth_required: false,
            spans: Vec::new(),
        }
    }

    /// While set, multibulk requests are limited to [`UNAUTHENTICATED_MAX_ARGS`]
    /// arguments of at most [`UNAUTHENTICATED_MAX_BULK`] bytes each, as Redis does for
    /// connections that still have to `AUTH`. Off by default.
    pub fn set_auth_required(&mut self, required: bool) {
        self.auth_required = required;
    }

    /// True while in the middle of a multibulk request.
    pub fn in_progress(&self) -> bool {
        matches!(self.state, State::Multibulk { .. })
    }

    /// When waiting for the data of a bulk argument whose header was read: how many
    /// more bytes that bulk needs in total (data plus CRLF), counted from the start of
    /// the buffer. Lets the connection reserve room for a large argument at once.
    pub fn pending_bulk_len(&self) -> Option<u64> {
        match self.state {
            State::Multibulk {
                bulk_len: Some(n), ..
            } => Some(n + 2),
            _ => None,
        }
    }

    /// Drops any partial request, returning to the idle state.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.partial.clear();
        self.partial_bytes = 0;
    }

    /// Memory the unfinished request's arguments hold (already taken out of the input
    /// buffer): their bytes, as Redis' `argv-mem` counts them, and the slots they take.
    pub fn held_bytes(&self) -> usize {
        self.partial_bytes + self.partial.capacity() * std::mem::size_of::<Bytes>()
    }

    /// The bytes of the unfinished request's arguments alone (Redis' `argv-mem`).
    pub fn held_argument_bytes(&self) -> usize {
        self.partial_bytes
    }

    /// Parse at most one command from the front of `buf`, consuming its bytes.
    ///
    /// `Ok(true)`: one command was stored in `args` (cleared first). `Ok(false)`: more
    /// bytes are needed; a partially received multibulk is kept in the parser, and its
    /// bytes already consumed. Empty commands (`*0`, negative counts, blank inline lines)
    /// are consumed silently. After an error the parser state is unspecified; the
    /// connection is expected to close.
    pub fn parse(
        &mut self,
        buf: &mut BytesMut,
        limits: &RequestLimits,
        args: &mut Vec<Bytes>,
    ) -> Result<bool, RequestError> {
        loop {
            match self.state {
                State::Idle => {
                    let Some(&first) = buf.first() else {
                        return Ok(false);
                    };
                    if first == b'*' {
                        if self.parse_whole_multibulk(buf, limits, args) {
                            return Ok(true);
                        }
                        if !self.parse_multibulk_count(buf, limits)? {
                            return Ok(false);
                        }
                        // Either a multibulk started or an empty one was skipped.
                    } else {
                        match parse_inline(buf, limits, args)? {
                            None => return Ok(false),
                            Some(()) if args.is_empty() => {}
                            Some(()) => return Ok(true),
                        }
                    }
                }
                State::Multibulk { .. } => {
                    if !self.parse_bulks(buf, limits)? {
                        return Ok(false);
                    }
                    // Swapped, not appended: a huge request's argument list goes with the
                    // request instead of staying here at its peak size.
                    args.clear();
                    std::mem::swap(args, &mut self.partial);
                    self.partial_bytes = 0;
                    self.state = State::Idle;
                    return Ok(true);
                }
            }
        }
    }

    /// The common case in one pass: a multibulk that is wholly in `buf`, with nothing
    /// unusual about it, is read over the slice and its bytes taken out of the buffer
    /// once; each argument is a slice of them. False (nothing consumed) when the request
    /// is not all there yet, or is anything the resumable path must look at: an error,
    /// an empty or huge count, a number written oddly, a connection that must still
    /// AUTH. That path then reads it from the start, with Redis' checks and errors.
    fn parse_whole_multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: &RequestLimits,
        args: &mut Vec<Bytes>,
    ) -> bool {
        if self.auth_required {
            return false;
        }
        let bytes = &buf[..];
        let Some((count, mut at)) = plain_number_line(bytes, 1) else {
            return false;
        };
        if count == 0 || count > ONE_PASS_MAX_ARGS as u64 || count > limits.max_multibulk_len {
            return false;
        }
        self.spans.clear();
        for _ in 0..count {
            if bytes.get(at) != Some(&b'$') {
                return false;
            }
            let Some((len, data)) = plain_number_line(bytes, at + 1) else {
                return false;
            };
            if len > limits.max_bulk_len {
                return false;
            }
            // Both fit: `len` has at most 18 digits and the bytes are all in memory.
            let len = len as usize;
            let Some(end) = data.checked_add(len).filter(|&end| end + 2 <= bytes.len()) else {
                return false;
            };
            self.spans.push((data, len));
            // The two bytes after the data are the CRLF; skipped unchecked, as Redis does.
            at = end + 2;
        }
        // `count` is at least 1, so there is a last argument.
        let Some((&(last_start, last_len), others)) = self.spans.split_last() else {
            return false;
        };
        let mut request = buf.split_to(at).freeze();
        args.clear();
        args.extend(
            others
                .iter()
                .map(|&(start, len)| request.slice(start..start + len)),
        );
        // The last argument is the request itself, narrowed to it: each slice takes a
        // reference to the shared buffer and gives it back when dropped (two atomic
        // operations), and this saves one of those pairs per request.
        request.truncate(last_start + last_len);
        request.advance(last_start);
        args.push(request);
        true
    }

    /// Reads the `*<count>\r\n` line. Ok(false) when the line is incomplete.
    fn parse_multibulk_count(
        &mut self,
        buf: &mut BytesMut,
        limits: &RequestLimits,
    ) -> Result<bool, RequestError> {
        let Some(cr) = find_byte_before_nul(buf, b'\r') else {
            if buf.len() > limits.max_inline_len {
                return Err(RequestError::TooBigMbulkCount);
            }
            return Ok(false);
        };
        // The byte after '\r' (the '\n') must have arrived too; like Redis it is
        // skipped without being looked at.
        if cr + 1 >= buf.len() {
            return Ok(false);
        }
        let count = match string_to_i64(&buf[1..cr]) {
            Some(n) if n <= 0 || (n as u64) <= limits.max_multibulk_len => n,
            _ => return Err(RequestError::InvalidMultibulkLength),
        };
        if self.auth_required && count > UNAUTHENTICATED_MAX_ARGS {
            return Err(RequestError::UnauthenticatedMultibulkLength);
        }
        buf.advance(cr + 2);
        if count > 0 {
            let count = count as u64;
            self.partial.clear();
            self.partial_bytes = 0;
            self.partial.reserve(count.min(1024) as usize);
            self.state = State::Multibulk {
                remaining: count,
                bulk_len: None,
            };
        }
        Ok(true)
    }

    /// Reads bulk arguments until the multibulk is complete (Ok(true)) or the buffer
    /// runs out (Ok(false)).
    fn parse_bulks(
        &mut self,
        buf: &mut BytesMut,
        limits: &RequestLimits,
    ) -> Result<bool, RequestError> {
        let State::Multibulk {
            mut remaining,
            mut bulk_len,
        } = self.state
        else {
            return Ok(true);
        };
        let result = loop {
            if remaining == 0 {
                break Ok(true);
            }
            let len = match bulk_len {
                Some(len) => len,
                None => match read_bulk_header(buf, limits, self.auth_required) {
                    Ok(Some(len)) => {
                        bulk_len = Some(len);
                        len
                    }
                    Ok(None) => break Ok(false),
                    Err(e) => break Err(e),
                },
            };
            // `len` is at most max_bulk_len and fits in usize (checked by the header).
            let len = len as usize;
            if buf.len() < len.saturating_add(2) {
                break Ok(false);
            }
            self.partial.push(buf.split_to(len).freeze());
            self.partial_bytes += len;
            // The two bytes after the data are the CRLF; skipped unchecked, as Redis does.
            buf.advance(2);
            bulk_len = None;
            remaining -= 1;
        };
        self.state = State::Multibulk {
            remaining,
            bulk_len,
        };
        result
    }
}

/// Reads a `$<len>\r\n` header, consuming it. Ok(None) when the line is incomplete.
fn read_bulk_header(
    buf: &mut BytesMut,
    limits: &RequestLimits,
    auth_required: bool,
) -> Result<Option<u64>, RequestError> {
    let Some(cr) = find_byte_before_nul(buf, b'\r') else {
        if buf.len() > limits.max_inline_len {
            return Err(RequestError::TooBigBulkCount);
        }
        return Ok(None);
    };
    if cr + 1 >= buf.len() {
        return Ok(None);
    }
    if buf[0] != b'$' {
        return Err(RequestError::ExpectedDollar(buf[0]));
    }
    let len = match string_to_i64(&buf[1..cr]) {
        Some(n)
            if n >= 0
                && (n as u64) <= limits.max_bulk_len
                && usize::try_from(n).is_ok_and(|n| n < usize::MAX - 2) =>
        {
            n
        }
        _ => return Err(RequestError::InvalidBulkLength),
    };
    if auth_required && len > UNAUTHENTICATED_MAX_BULK {
        return Err(RequestError::UnauthenticatedBulkLength);
    }
    buf.advance(cr + 2);
    Ok(Some(len as u64))
}

/// Parses one inline line into `args`. Ok(None) when no full line is buffered yet.
fn parse_inline(
    buf: &mut BytesMut,
    limits: &RequestLimits,
    args: &mut Vec<Bytes>,
) -> Result<Option<()>, RequestError> {
    let Some(newline) = find_byte_before_nul(buf, b'\n') else {
        if buf.len() > limits.max_inline_len {
            return Err(RequestError::TooBigInlineRequest);
        }
        return Ok(None);
    };
    let line_len = if newline > 0 && buf[newline - 1] == b'\r' {
        newline - 1
    } else {
        newline
    };
    let line = buf.split_to(newline + 1).freeze().slice(..line_len);
    args.clear();
    if !split_args(&line, args) {
        args.clear();
        return Err(RequestError::UnbalancedQuotes);
    }
    Ok(Some(()))
}

/// A line of plain decimal digits from `at` (no sign, no leading zero unless the number
/// is 0, at most 18 digits) ended by `\r` and one more byte: the number and where the
/// next line starts. None for anything else, complete or not.
fn plain_number_line(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let digits = bytes.get(at..)?;
    let mut value: u64 = 0;
    for (i, &b) in digits.iter().enumerate().take(19) {
        match b {
            b'0'..=b'9' => {
                if i == 1 && value == 0 {
                    return None;
                }
                value = value * 10 + u64::from(b - b'0');
            }
            b'\r' if i > 0 => {
                // The byte after '\r' must have arrived; like Redis, it is not looked at.
                let next = at + i + 2;
                return (next <= bytes.len()).then_some((value, next));
            }
            _ => return None,
        }
    }
    None
}

/// Position of the first `needle` in `buf`, or None if there is none or a NUL byte
/// comes first. (Redis scans its NUL-terminated buffer with `strchr`, which stops at
/// the first NUL; matching that keeps edge-case behaviour identical.)
fn find_byte_before_nul(buf: &[u8], needle: u8) -> Option<usize> {
    let pos = buf.iter().position(|&b| b == needle || b == 0)?;
    (buf[pos] == needle).then_some(pos)
}

/// Strict decimal parse of a signed 64-bit integer as Redis' `string2ll`: an optional
/// `-`, no `+`, no leading zeros (a lone `0` is fine, `-0` is not), no spaces, no
/// overflow.
pub fn string_to_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [] => return None,
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            return None;
        }
        Some((value as i64).wrapping_neg())
    } else {
        i64::try_from(value).ok()
    }
}

/// C `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline request line into arguments with Redis' quoting rules. Returns
/// false on unbalanced quotes. Arguments without quotes are zero-copy slices of `line`.
///
/// - Arguments are separated by whitespace.
/// - Inside double quotes: `\xHH` (two hex digits), `\n`, `\r`, `\t`, `\b`, `\a`, and
///   a backslash before any other byte stands for that byte.
/// - Inside single quotes only `\'` is an escape.
/// - A quote may start in the middle of an argument (`a"b c"` is `ab c`), but a closing
///   quote must be followed by whitespace or the end of the line.
pub fn split_args(line: &Bytes, out: &mut Vec<Bytes>) -> bool {
    #[derive(PartialEq)]
    enum Mode {
        Plain,
        Double,
        Single,
    }
    let s = &line[..];
    let mut i = 0;
    loop {
        while i < s.len() && is_c_space(s[i]) {
            i += 1;
        }
        if i >= s.len() {
            return true;
        }
        let start = i;
        // Becomes Some once a quote is seen, from then on the argument is built here.
        let mut owned: Option<Vec<u8>> = None;
        let mut mode = Mode::Plain;
        loop {
            let c = s.get(i).copied();
            match mode {
                Mode::Double => {
                    let arg = owned.get_or_insert_with(Vec::new);
                    match c {
                        None => return false,
                        Some(b'\\') => {
                            let escaped = s.get(i + 1).copied();
                            let hex = match (escaped, s.get(i + 2), s.get(i + 3)) {
                                (Some(b'x'), Some(&h), Some(&l)) => {
                                    hex_value(h).zip(hex_value(l)).map(|(h, l)| h * 16 + l)
                                }
                                _ => None,
                            };
                            if let Some(byte) = hex {
                                arg.push(byte);
                                i += 4;
                            } else if let Some(e) = escaped {
                                arg.push(match e {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => b'\x08',
                                    b'a' => b'\x07',
                                    other => other,
                                });
                                i += 2;
                            } else {
                                // A trailing backslash: the quote cannot be closed.
                                return false;
                            }
                        }
                        Some(b'"') => {
                            if s.get(i + 1).is_some_and(|&n| !is_c_space(n)) {
                                return false;
                            }
                            i += 1;
                            break;
                        }
                        Some(other) => {
                            arg.push(other);
                            i += 1;
                        }
                    }
                }
                Mode::Single => {
                    let arg = owned.get_or_insert_with(Vec::new);
                    match c {
                        None => return false,
                        Some(b'\\') if s.get(i + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            if s.get(i + 1).is_some_and(|&n| !is_c_space(n)) {
                                return false;
                            }
                            i += 1;
                            break;
                        }
                        Some(other) => {
                            arg.push(other);
                            i += 1;
                        }
                    }
                }
                Mode::Plain => match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t' | 0) => break,
                    Some(q @ (b'"' | b'\'')) => {
                        if owned.is_none() {
                            owned = Some(s[start..i].to_vec());
                        }
                        mode = if q == b'"' {
                            Mode::Double
                        } else {
                            Mode::Single
                        };
                        i += 1;
                    }
                    Some(other) => {
                        if let Some(arg) = owned.as_mut() {
                            arg.push(other);
                        }
                        i += 1;
                    }
                },
            }
        }
        out.push(match owned {
            Some(v) => Bytes::from(v),
            None => line.slice(start..i),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<RequestError>, BytesMut) {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut args = Vec::new();
        let mut out = Vec::new();
        loop {
            match parser.parse(&mut buf, &RequestLimits::default(), &mut args) {
                Ok(true) => out.push(args.iter().map(|a| a.to_vec()).collect()),
                Ok(false) => return (out, None, buf),
                Err(e) => return (out, Some(e), buf),
            }
        }
    }

    fn cmds(input: &[u8]) -> Vec<Vec<Vec<u8>>> {
        let (out, err, _) = parse_all(input);
        assert_eq!(err, None, "unexpected error for {input:?}");
        out
    }

    fn err(input: &[u8]) -> RequestError {
        parse_all(input).1.expect("expected an error")
    }

    fn v(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.to_vec()).collect()
    }

    #[test]
    fn multibulk_basic_and_pipelined() {
        assert_eq!(
            cmds(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n"),
            vec![v(&[b"SET", b"k", b""]), v(&[b"PING"])]
        );
    }

    #[test]
    fn binary_safe_bulk() {
        assert_eq!(
            cmds(b"*1\r\n$6\r\na\r\n\0\xffb\r\n"),
            vec![v(&[b"a\r\n\0\xffb"])]
        );
    }

    #[test]
    fn empty_commands_are_skipped() {
        assert_eq!(
            cmds(b"*0\r\n*-1\r\n*-7\r\n\r\n\n   \r\n*1\r\n$1\r\nx\r\n"),
            vec![v(&[b"x"])]
        );
        let (out, e, buf) = parse_all(b"*0\r\n\n");
        assert!(out.is_empty() && e.is_none() && buf.is_empty());
    }

    #[test]
    fn an_unfinished_request_counts_the_arguments_it_holds() {
        let mut parser = RequestParser::new();
        let limits = RequestLimits::default();
        let mut args = Vec::new();
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$10\r\n0123"[..]);
        assert!(!parser.parse(&mut buf, &limits, &mut args).unwrap());
        assert_eq!(parser.held_argument_bytes(), 8);
        assert!(parser.held_bytes() >= 8 + 2 * std::mem::size_of::<Bytes>());
        buf.extend_from_slice(b"456789\r\n");
        assert!(parser.parse(&mut buf, &limits, &mut args).unwrap());
        assert_eq!(args.len(), 3);
        assert_eq!(parser.held_argument_bytes(), 0);
        // A long argument list leaves with its request.
        let mut long = b"*2000\r\n".to_vec();
        for _ in 0..2000 {
            long.extend_from_slice(b"$1\r\nx\r\n");
        }
        let mut buf = BytesMut::from(&long[..]);
        assert!(parser.parse(&mut buf, &limits, &mut args).unwrap());
        assert_eq!(args.len(), 2000);
        assert!(parser.held_bytes() < 2000 * std::mem::size_of::<Bytes>());
    }

    #[test]
    fn partial_multibulk_is_resumed_without_rescanning() {
        let mut p = RequestParser::new();
        let lim = RequestLimits::default();
        let mut args = Vec::new();
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhel"[..]);
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(false));
        assert!(p.in_progress());
        // Everything up to the incomplete bulk's data has been consumed.
        assert_eq!(&buf[..], b"hel");
        assert_eq!(p.pending_bulk_len(), Some(7));
        buf.extend_from_slice(b"lo\r");
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(false));
        buf.extend_from_slice(b"\n*1\r\n$1\r\nx");
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(true));
        assert_eq!(args, vec![&b"SET"[..], b"k", b"hello"]);
        assert!(!p.in_progress());
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(false));
        assert!(p.in_progress());
        assert_eq!(&buf[..], b"x");
        buf.extend_from_slice(b"\r\n");
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(true));
        assert_eq!(args, vec![&b"x"[..]]);
        assert!(!p.in_progress());
        assert!(buf.is_empty());
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(false));
    }

    #[test]
    fn count_line_needs_the_byte_after_cr() {
        let (out, e, buf) = parse_all(b"*1\r");
        assert!(out.is_empty() && e.is_none());
        assert_eq!(&buf[..], b"*1\r");
    }

    #[test]
    fn args_are_zero_copy() {
        let mut buf = BytesMut::from(&b"*1\r\n$5\r\nhello\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let mut args = Vec::new();
        assert_eq!(
            RequestParser::new().parse(&mut buf, &RequestLimits::default(), &mut args),
            Ok(true)
        );
        assert_eq!(args[0].as_ptr() as usize, base + 8);
        // Several arguments: the last one is the request narrowed, the others slices.
        let mut buf =
            BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n*1\r\n$4\r\nPING\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let mut parser = RequestParser::new();
        assert_eq!(
            parser.parse(&mut buf, &RequestLimits::default(), &mut args),
            Ok(true)
        );
        assert_eq!(args, [&b"SET"[..], b"k", b"vv"]);
        let offsets: Vec<usize> = args.iter().map(|a| a.as_ptr() as usize - base).collect();
        assert_eq!(offsets, [8, 17, 24]);
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            parser.parse(&mut buf, &RequestLimits::default(), &mut args),
            Ok(true)
        );
        assert_eq!(args, [&b"PING"[..]]);
    }

    #[test]
    fn oversized_bulk_refused_from_header_alone() {
        let lim = RequestLimits::default();
        let over = format!("*1\r\n${}\r\n", lim.max_bulk_len + 1);
        assert_eq!(err(over.as_bytes()), RequestError::InvalidBulkLength);
        let at = format!("*1\r\n${}\r\n", lim.max_bulk_len);
        let (_, e, buf) = parse_all(at.as_bytes());
        assert_eq!(e, None);
        assert!(buf.is_empty());
        let small = RequestLimits {
            max_bulk_len: 3,
            ..RequestLimits::default()
        };
        let mut buf = BytesMut::from(&b"*1\r\n$4\r\n"[..]);
        assert_eq!(
            RequestParser::new().parse(&mut buf, &small, &mut Vec::new()),
            Err(RequestError::InvalidBulkLength)
        );
    }

    #[test]
    fn error_too_big_inline_request() {
        let mut input = vec![b'a'; 64 * 1024 + 1];
        assert_eq!(err(&input), RequestError::TooBigInlineRequest);
        input.truncate(64 * 1024);
        assert_eq!(parse_all(&input).1, None);
        // A NUL hides any newline after it, as in Redis.
        let mut hidden = b"PING\0\n".to_vec();
        hidden.resize(70 * 1024, b'x');
        assert_eq!(err(&hidden), RequestError::TooBigInlineRequest);
        assert_eq!(
            err(&hidden).to_string(),
            "Protocol error: too big inline request"
        );
    }

    #[test]
    fn error_unbalanced_quotes() {
        for input in [
            &b"set \"a\n"[..],
            b"set 'a\n",
            b"set \"a\"b\n",
            b"set 'a'b\n",
            b"set \"a\\\"\n",
            b"get \"abc\\\n",
            b"get 'x\\'\n",
        ] {
            assert_eq!(err(input), RequestError::UnbalancedQuotes, "{input:?}");
        }
        assert_eq!(
            RequestError::UnbalancedQuotes.to_string(),
            "Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn error_too_big_mbulk_count_string() {
        let mut input = b"*".to_vec();
        input.resize(64 * 1024 + 1, b'1');
        assert_eq!(err(&input), RequestError::TooBigMbulkCount);
        input.truncate(64 * 1024);
        assert_eq!(parse_all(&input).1, None);
        assert_eq!(
            RequestError::TooBigMbulkCount.to_string(),
            "Protocol error: too big mbulk count string"
        );
    }

    #[test]
    fn error_invalid_multibulk_length() {
        for input in [
            &b"*x\r\n"[..],
            b"*\r\n",
            b"*+1\r\n",
            b"*01\r\n",
            b"*-0\r\n",
            b"*1 \r\n",
            b"*1\n\r\n",
            b"*1073741825\r\n",
            b"*99999999999999999999\r\n",
        ] {
            assert_eq!(
                err(input),
                RequestError::InvalidMultibulkLength,
                "{input:?}"
            );
        }
        // The limit itself is accepted (and waits for data).
        assert_eq!(parse_all(b"*1073741824\r\n").1, None);
        assert_eq!(
            RequestError::InvalidMultibulkLength.to_string(),
            "Protocol error: invalid multibulk length"
        );
    }

    #[test]
    fn error_too_big_bulk_count_string() {
        let mut input = b"*1\r\n$".to_vec();
        input.resize(4 + 64 * 1024 + 1, b'1');
        assert_eq!(err(&input), RequestError::TooBigBulkCount);
        assert_eq!(
            RequestError::TooBigBulkCount.to_string(),
            "Protocol error: too big bulk count string"
        );
    }

    #[test]
    fn error_expected_dollar() {
        assert_eq!(err(b"*1\r\n:1\r\n"), RequestError::ExpectedDollar(b':'));
        assert_eq!(
            err(b"*1\r\n:1\r\n").to_string(),
            "Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            err(b"*2\r\n$1\r\na\r\nfoo\r\n").to_string(),
            "Protocol error: expected '$', got 'f'"
        );
        // Only checked once the whole header line is there.
        assert_eq!(parse_all(b"*1\r\nX").1, None);
        // CR/LF are shown as a space.
        let e = err(b"*1\r\n\r\n");
        assert_eq!(e.to_string(), "Protocol error: expected '$', got ' '");
        assert_eq!(
            RequestError::ExpectedDollar(0xff).error_reply(),
            b"ERR Protocol error: expected '$', got '\xff'".to_vec()
        );
    }

    #[test]
    fn error_invalid_bulk_length() {
        for input in [
            &b"*1\r\n$-1\r\n"[..],
            b"*1\r\n$x\r\n",
            b"*1\r\n$\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$536870913\r\n",
            b"*1\r\n$99999999999999999999\r\n",
        ] {
            assert_eq!(err(input), RequestError::InvalidBulkLength, "{input:?}");
        }
        assert_eq!(
            RequestError::InvalidBulkLength.to_string(),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            RequestError::InvalidBulkLength.error_reply(),
            b"ERR Protocol error: invalid bulk length".to_vec()
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let lim = RequestLimits::default();
        let mut p = RequestParser::new();
        p.set_auth_required(true);
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        let e = p.parse(&mut buf, &lim, &mut Vec::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Protocol error: unauthenticated multibulk length"
        );
        let mut p = RequestParser::new();
        p.set_auth_required(true);
        let mut buf = BytesMut::from(&b"*1\r\n$16385\r\n"[..]);
        let e = p.parse(&mut buf, &lim, &mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "Protocol error: unauthenticated bulk length");
        // Invalid wins over unauthenticated.
        let mut p = RequestParser::new();
        p.set_auth_required(true);
        let mut buf = BytesMut::from(&b"*1\r\n$-1\r\n"[..]);
        assert_eq!(
            p.parse(&mut buf, &lim, &mut Vec::new()),
            Err(RequestError::InvalidBulkLength)
        );
        // At the limits it is fine.
        let mut p = RequestParser::new();
        p.set_auth_required(true);
        let mut input = b"*10\r\n".to_vec();
        for _ in 0..9 {
            input.extend_from_slice(b"$1\r\na\r\n");
        }
        input.extend_from_slice(b"$16384\r\n");
        input.resize(input.len() + 16384, b'x');
        input.extend_from_slice(b"\r\n");
        let mut buf = BytesMut::from(&input[..]);
        let mut args = Vec::new();
        assert_eq!(p.parse(&mut buf, &lim, &mut args), Ok(true));
        assert_eq!(args.len(), 10);
        assert_eq!(args[9].len(), 16384);
    }

    #[test]
    fn inline_plain() {
        assert_eq!(cmds(b"PING\r\n"), vec![v(&[b"PING"])]);
        assert_eq!(cmds(b"PING\n"), vec![v(&[b"PING"])]);
        assert_eq!(
            cmds(b"  set   k \t v  \r\nget k\n"),
            vec![v(&[b"set", b"k", b"v"]), v(&[b"get", b"k"])]
        );
        // Only one CR before the LF is stripped; an inner CR separates arguments.
        assert_eq!(cmds(b"a\rb\r\r\n"), vec![v(&[b"a", b"b"])]);
        // No newline yet: wait.
        let (out, e, buf) = parse_all(b"PING");
        assert!(out.is_empty() && e.is_none());
        assert_eq!(&buf[..], b"PING");
    }

    #[test]
    fn inline_quoting() {
        assert_eq!(
            cmds(b"set \"a b\" 'c d'\r\n"),
            vec![v(&[b"set", b"a b", b"c d"])]
        );
        assert_eq!(cmds(b"\"\\x41\"\n"), vec![v(&[b"A"])]);
        assert_eq!(cmds(b"\"\\x4a\\x4B\"\n"), vec![v(&[b"JK"])]);
        // \x without two hex digits is an ordinary escape of 'x'.
        assert_eq!(cmds(b"\"\\x4g\"\n"), vec![v(&[b"x4g"])]);
        assert_eq!(
            cmds(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\z\"\n"),
            vec![v(&[b"\n\r\t\x08\x07\\\"z"])]
        );
        assert_eq!(cmds(b"'it\\'s' 'a\\b'\n"), vec![v(&[b"it's", b"a\\b"])]);
        assert_eq!(cmds(b"\"\" ''\n"), vec![v(&[b"", b""])]);
        assert_eq!(cmds(b"a\"b c\"\n"), vec![v(&[b"ab c"])]);
        assert_eq!(cmds(b"\"a\"\tb\n"), vec![v(&[b"a", b"b"])]);
        assert_eq!(cmds(b"'a'\x0bb\n"), vec![v(&[b"a", b"b"])]);
        // \v is whitespace between arguments but not a separator inside one.
        assert_eq!(cmds(b"a\x0bb\n"), vec![v(&[b"a\x0bb"])]);
        assert_eq!(cmds(b"\"a\r\"\r\n"), vec![v(&[b"a\r"])]);
    }

    #[test]
    fn string_to_i64_matches_string2ll() {
        assert_eq!(string_to_i64(b"0"), Some(0));
        assert_eq!(string_to_i64(b"-1"), Some(-1));
        assert_eq!(string_to_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string_to_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"-9223372036854775809",
        ] {
            assert_eq!(string_to_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn log_reasons() {
        assert_eq!(
            RequestError::ExpectedDollar(b'x').log_reason(),
            "expected $ but got something else"
        );
        assert_eq!(
            RequestError::TooBigInlineRequest.log_reason(),
            "too big inline request"
        );
    }
}
