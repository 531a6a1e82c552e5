//! Generic RESP values: an incremental decoder and RESP3/RESP2 encoders.
//!
//! Used on the client side (tests, replication, tools) and for converting script
//! results. The decoder is hardened against hostile input: it never panics, limits
//! nesting to [`MAX_DEPTH`] without deep native recursion beyond that, and never
//! reserves memory from an announced length before the data is present.

use bytes::{BufMut, Bytes, BytesMut};

use crate::reply::format_double_g17;

/// Most nested aggregates (arrays, maps, sets, pushes, attributes) a decoded frame
/// may have.
pub const MAX_DEPTH: usize = 512;

/// A RESP2/RESP3 value.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+` simple string.
    Simple(Bytes),
    /// `-` simple error (the text includes the code, e.g. `ERR ...`).
    Error(Bytes),
    /// `:` integer.
    Integer(i64),
    /// `$` bulk string.
    Bulk(Bytes),
    /// Null: `$-1`, `*-1` or `_`.
    Null,
    /// `*` array.
    Array(Vec<Frame>),
    /// `%` map, as key/value pairs in wire order.
    Map(Vec<(Frame, Frame)>),
    /// `~` set.
    Set(Vec<Frame>),
    /// `>` out-of-band push.
    Push(Vec<Frame>),
    /// `,` double.
    Double(f64),
    /// `#` boolean.
    Boolean(bool),
    /// `(` big number: its decimal digits with an optional sign.
    BigNumber(Bytes),
    /// `=` verbatim string: a three byte format (`txt`, `mkd`) and the text.
    Verbatim {
        /// The format, e.g. `*b"txt"`.
        format: [u8; 3],
        /// The text after the `fmt:` prefix.
        text: Bytes,
    },
    /// `!` bulk error.
    BulkError(Bytes),
}

/// Why a byte stream is not valid RESP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The first byte of a frame is not a known type marker.
    #[error("invalid frame type byte {0:#04x}")]
    InvalidType(u8),
    /// A line contains a bare CR or LF.
    #[error("invalid line terminator")]
    InvalidLine,
    /// An integer line is not a valid 64-bit integer.
    #[error("invalid integer")]
    InvalidInteger,
    /// A length or element count is negative or too large.
    #[error("invalid length")]
    InvalidLength,
    /// A double line is not a number, `inf`, `-inf` or `nan`.
    #[error("invalid double")]
    InvalidDouble,
    /// A boolean line is not `t` or `f`.
    #[error("invalid boolean")]
    InvalidBoolean,
    /// A `_` null line has content.
    #[error("invalid null")]
    InvalidNull,
    /// A big number line is not an optionally signed run of digits.
    #[error("invalid big number")]
    InvalidBigNumber,
    /// A verbatim string lacks its `fmt:` prefix.
    #[error("invalid verbatim string")]
    InvalidVerbatim,
    /// Bulk data is not followed by CRLF.
    #[error("bulk data not terminated by CRLF")]
    MissingCrlf,
    /// Aggregates nested deeper than [`MAX_DEPTH`].
    #[error("frames nested too deeply")]
    TooDeep,
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` holds only part of a frame, otherwise the frame and
/// the number of bytes it used. Attributes (`|`) are read and dropped; the frame that
/// follows is returned and the consumed count includes the attribute.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    decode_at(buf, 0, 0)
}

type Step<T> = Result<Option<T>, FrameError>;

/// Reads the line starting at `pos`; returns it and the position after its CRLF.
fn read_line(buf: &[u8], pos: usize) -> Step<(&[u8], usize)> {
    let Some(rest) = buf.get(pos..) else {
        return Ok(None);
    };
    let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
        return Ok(None);
    };
    if rest[end] == b'\n' {
        return Err(FrameError::InvalidLine);
    }
    match rest.get(end + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&rest[..end], pos + end + 2))),
        Some(_) => Err(FrameError::InvalidLine),
    }
}

fn parse_i64(line: &[u8]) -> Result<i64, FrameError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(FrameError::InvalidInteger)
}

fn parse_f64(line: &[u8]) -> Result<f64, FrameError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(FrameError::InvalidDouble)
}

fn is_big_number(line: &[u8]) -> bool {
    let digits = match line {
        [b'-' | b'+', rest @ ..] => rest,
        _ => line,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

fn decode_at(buf: &[u8], mut pos: usize, depth: usize) -> Step<(Frame, usize)> {
    // Attributes are skipped in this loop; everything else returns.
    loop {
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        if !matches!(
            kind,
            b'+' | b'-'
                | b':'
                | b'$'
                | b'!'
                | b'='
                | b'*'
                | b'~'
                | b'>'
                | b'%'
                | b'|'
                | b'_'
                | b','
                | b'#'
                | b'('
        ) {
            return Err(FrameError::InvalidType(kind));
        }
        let Some((line, next)) = read_line(buf, pos + 1)? else {
            return Ok(None);
        };
        let frame = match kind {
            b'+' => Frame::Simple(Bytes::copy_from_slice(line)),
            b'-' => Frame::Error(Bytes::copy_from_slice(line)),
            b':' => Frame::Integer(parse_i64(line)?),
            b'_' if line.is_empty() => Frame::Null,
            b'_' => return Err(FrameError::InvalidNull),
            b',' => Frame::Double(parse_f64(line)?),
            b'#' => match line {
                b"t" => Frame::Boolean(true),
                b"f" => Frame::Boolean(false),
                _ => return Err(FrameError::InvalidBoolean),
            },
            b'(' if is_big_number(line) => Frame::BigNumber(Bytes::copy_from_slice(line)),
            b'(' => return Err(FrameError::InvalidBigNumber),
            b'$' | b'!' | b'=' => {
                let len = parse_i64(line)?;
                if len == -1 && kind == b'$' {
                    return Ok(Some((Frame::Null, next)));
                }
                let len = usize::try_from(len).map_err(|_| FrameError::InvalidLength)?;
                let end = next
                    .checked_add(len)
                    .and_then(|e| e.checked_add(2))
                    .ok_or(FrameError::InvalidLength)?;
                if buf.len() < end {
                    return Ok(None);
                }
                if &buf[end - 2..end] != b"\r\n" {
                    return Err(FrameError::MissingCrlf);
                }
                let data = &buf[next..end - 2];
                let frame = match kind {
                    b'$' => Frame::Bulk(Bytes::copy_from_slice(data)),
                    b'!' => Frame::BulkError(Bytes::copy_from_slice(data)),
                    _ => match data {
                        [a, b, c, b':', text @ ..] => Frame::Verbatim {
                            format: [*a, *b, *c],
                            text: Bytes::copy_from_slice(text),
                        },
                        _ => return Err(FrameError::InvalidVerbatim),
                    },
                };
                return Ok(Some((frame, end)));
            }
            _ => {
                // Aggregates: * ~ > % |
                let count = parse_i64(line)?;
                if count == -1 && kind == b'*' {
                    return Ok(Some((Frame::Null, next)));
                }
                let count = usize::try_from(count).map_err(|_| FrameError::InvalidLength)?;
                let paired = matches!(kind, b'%' | b'|');
                let items = if paired {
                    count.checked_mul(2).ok_or(FrameError::InvalidLength)?
                } else {
                    count
                };
                if depth >= MAX_DEPTH {
                    return Err(FrameError::TooDeep);
                }
                // Every element takes at least 3 bytes (e.g. `_\r\n`): if they cannot
                // all be there yet, don't bother parsing them.
                if (buf.len() - next) / 3 < items {
                    return Ok(None);
                }
                let mut elems = Vec::with_capacity(items.min(1024));
                let mut p = next;
                for _ in 0..items {
                    match decode_at(buf, p, depth + 1)? {
                        None => return Ok(None),
                        Some((f, np)) => {
                            elems.push(f);
                            p = np;
                        }
                    }
                }
                if kind == b'|' {
                    // An attribute: drop it and read the frame it annotates.
                    pos = p;
                    continue;
                }
                let frame = match kind {
                    b'*' => Frame::Array(elems),
                    b'~' => Frame::Set(elems),
                    b'>' => Frame::Push(elems),
                    _ => {
                        let mut pairs = Vec::with_capacity(count.min(1024));
                        let mut it = elems.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            pairs.push((k, v));
                        }
                        Frame::Map(pairs)
                    }
                };
                return Ok(Some((frame, p)));
            }
        };
        return Ok(Some((frame, next)));
    }
}

fn put_header(out: &mut BytesMut, kind: u8, n: usize) {
    out.put_u8(kind);
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

/// Writes a line's content with CR and LF replaced by spaces, then CRLF.
fn put_line(out: &mut BytesMut, kind: u8, s: &[u8]) {
    out.put_u8(kind);
    out.extend(
        s.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.put_slice(b"\r\n");
}

fn put_bulk(out: &mut BytesMut, kind: u8, data: &[u8]) {
    put_header(out, kind, data.len());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// Appends the shortest decimal form that reads back as exactly `d`.
fn put_double_shortest(out: &mut BytesMut, d: f64) {
    if d.is_nan() {
        out.put_slice(b"nan");
    } else if d.is_infinite() {
        out.put_slice(if d > 0.0 { b"inf" } else { b"-inf" });
    } else {
        out.put_slice(ryu::Buffer::new().format_finite(d).as_bytes());
    }
}

/// Appends the canonical RESP3 encoding of `frame` (nulls as `_`, doubles in their
/// shortest exact form). CR and LF inside simple strings, errors and big numbers are
/// replaced by spaces so the output is always well-formed.
pub fn encode(frame: &Frame, out: &mut BytesMut) {
    match frame {
        Frame::Simple(s) => put_line(out, b'+', s),
        Frame::Error(s) => put_line(out, b'-', s),
        Frame::Integer(n) => {
            out.put_u8(b':');
            out.put_slice(itoa::Buffer::new().format(*n).as_bytes());
            out.put_slice(b"\r\n");
        }
        Frame::Bulk(b) => put_bulk(out, b'$', b),
        Frame::Null => out.put_slice(b"_\r\n"),
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
            let kind = match frame {
                Frame::Array(_) => b'*',
                Frame::Set(_) => b'~',
                _ => b'>',
            };
            put_header(out, kind, v.len());
            for f in v {
                encode(f, out);
            }
        }
        Frame::Map(pairs) => {
            put_header(out, b'%', pairs.len());
            for (k, v) in pairs {
                encode(k, out);
                encode(v, out);
            }
        }
        Frame::Double(d) => {
            out.put_u8(b',');
            put_double_shortest(out, *d);
            out.put_slice(b"\r\n");
        }
        Frame::Boolean(b) => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Frame::BigNumber(n) => put_line(out, b'(', n),
        Frame::Verbatim { format, text } => {
            put_header(out, b'=', text.len() + 4);
            out.put_slice(format);
            out.put_u8(b':');
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        Frame::BulkError(b) => put_bulk(out, b'!', b),
    }
}

/// Appends the RESP2 encoding of `frame`, converting RESP3-only types as Redis does:
/// null as `$-1`, maps as flat arrays, sets and pushes as arrays, doubles as bulk
/// strings (`%.17g`), booleans as `:1`/`:0`, big numbers and verbatim strings as bulk
/// strings, bulk errors as simple errors.
pub fn encode_resp2(frame: &Frame, out: &mut BytesMut) {
    match frame {
        Frame::Null => out.put_slice(b"$-1\r\n"),
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
            put_header(out, b'*', v.len());
            for f in v {
                encode_resp2(f, out);
            }
        }
        Frame::Map(pairs) => {
            put_header(out, b'*', pairs.len().saturating_mul(2));
            for (k, v) in pairs {
                encode_resp2(k, out);
                encode_resp2(v, out);
            }
        }
        Frame::Double(d) => {
            let mut text = Vec::with_capacity(24);
            format_double_g17(*d, &mut text);
            put_bulk(out, b'$', &text);
        }
        Frame::Boolean(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        Frame::BigNumber(n) => put_bulk(out, b'$', n),
        Frame::Verbatim { text, .. } => put_bulk(out, b'$', text),
        Frame::BulkError(b) => put_line(out, b'-', b),
        Frame::Simple(_) | Frame::Error(_) | Frame::Integer(_) | Frame::Bulk(_) => {
            encode(frame, out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: &Frame) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(f, &mut out);
        out.to_vec()
    }

    fn enc2(f: &Frame) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode_resp2(f, &mut out);
        out.to_vec()
    }

    fn one(input: &[u8]) -> Frame {
        let (f, n) = decode(input).unwrap().expect("complete frame");
        assert_eq!(n, input.len(), "consumed length for {input:?}");
        f
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn decode_each_type() {
        assert_eq!(one(b"+OK\r\n"), Frame::Simple(b("OK")));
        assert_eq!(one(b"-ERR x\r\n"), Frame::Error(b("ERR x")));
        assert_eq!(one(b":-5\r\n"), Frame::Integer(-5));
        assert_eq!(one(b"$3\r\na\r\n\r\n"), Frame::Bulk(b("a\r\n")));
        assert_eq!(one(b"$0\r\n\r\n"), Frame::Bulk(b("")));
        assert_eq!(one(b"$-1\r\n"), Frame::Null);
        assert_eq!(one(b"*-1\r\n"), Frame::Null);
        assert_eq!(one(b"_\r\n"), Frame::Null);
        assert_eq!(
            one(b"*2\r\n:1\r\n+a\r\n"),
            Frame::Array(vec![Frame::Integer(1), Frame::Simple(b("a"))])
        );
        assert_eq!(
            one(b"%1\r\n+k\r\n#t\r\n"),
            Frame::Map(vec![(Frame::Simple(b("k")), Frame::Boolean(true))])
        );
        assert_eq!(
            one(b"~1\r\n#f\r\n"),
            Frame::Set(vec![Frame::Boolean(false)])
        );
        assert_eq!(
            one(b">2\r\n+message\r\n_\r\n"),
            Frame::Push(vec![Frame::Simple(b("message")), Frame::Null])
        );
        assert_eq!(one(b",1.5\r\n"), Frame::Double(1.5));
        assert_eq!(one(b",-2.5e-3\r\n"), Frame::Double(-0.0025));
        assert_eq!(one(b",1E10\r\n"), Frame::Double(1e10));
        assert_eq!(one(b",10\r\n"), Frame::Double(10.0));
        assert_eq!(one(b",inf\r\n"), Frame::Double(f64::INFINITY));
        assert_eq!(one(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert!(matches!(one(b",nan\r\n"), Frame::Double(d) if d.is_nan()));
        assert_eq!(
            one(b"(-123456789012345678901234567890\r\n"),
            Frame::BigNumber(b("-123456789012345678901234567890"))
        );
        assert_eq!(
            one(b"=9\r\ntxt:hello\r\n"),
            Frame::Verbatim {
                format: *b"txt",
                text: b("hello")
            }
        );
        assert_eq!(one(b"!5\r\nERR x\r\n"), Frame::BulkError(b("ERR x")));
    }

    #[test]
    fn decode_reports_consumed_and_leaves_rest() {
        let (f, n) = decode(b":1\r\n:2\r\n").unwrap().unwrap();
        assert_eq!((f, n), (Frame::Integer(1), 4));
    }

    #[test]
    fn attributes_are_skipped() {
        let input = b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:1\r\n|1\r\n+x\r\n+y\r\n:2\r\n";
        assert_eq!(
            one(input),
            Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)])
        );
        // An attribute alone is incomplete.
        assert_eq!(decode(b"|1\r\n+a\r\n+b\r\n").unwrap(), None);
    }

    #[test]
    fn incomplete_input_is_none() {
        let full = enc(&Frame::Array(vec![
            Frame::Bulk(b("hello")),
            Frame::Map(vec![(Frame::Integer(1), Frame::Double(2.5))]),
            Frame::Verbatim {
                format: *b"mkd",
                text: b("# x"),
            },
        ]));
        for cut in 0..full.len() {
            assert_eq!(decode(&full[..cut]), Ok(None), "prefix of {cut} bytes");
        }
        assert_eq!(decode(&full).unwrap().unwrap().1, full.len());
        // Huge announced sizes with no data: incomplete, nothing reserved.
        assert_eq!(decode(b"*9223372036854775807\r\n"), Ok(None));
        assert_eq!(decode(b"$9223372036854775000\r\nabc"), Ok(None));
        assert_eq!(decode(b"%4611686018427387903\r\n"), Ok(None));
    }

    #[test]
    fn decode_errors() {
        let cases: &[(&[u8], FrameError)] = &[
            (b"?\r\n", FrameError::InvalidType(b'?')),
            (b"x", FrameError::InvalidType(b'x')),
            (b"+a\nb\r\n", FrameError::InvalidLine),
            (b"+a\rb\r\n", FrameError::InvalidLine),
            (b":x\r\n", FrameError::InvalidInteger),
            (b":\r\n", FrameError::InvalidInteger),
            (b":99999999999999999999\r\n", FrameError::InvalidInteger),
            (b"$-2\r\n", FrameError::InvalidLength),
            (b"!-1\r\n", FrameError::InvalidLength),
            (b"*-2\r\n", FrameError::InvalidLength),
            (b"%-1\r\n", FrameError::InvalidLength),
            (b"~-3\r\n", FrameError::InvalidLength),
            (b"$1\r\nab\r\n", FrameError::MissingCrlf),
            (b",abc\r\n", FrameError::InvalidDouble),
            (b",\r\n", FrameError::InvalidDouble),
            (b"#x\r\n", FrameError::InvalidBoolean),
            (b"_x\r\n", FrameError::InvalidNull),
            (b"(12a\r\n", FrameError::InvalidBigNumber),
            (b"(\r\n", FrameError::InvalidBigNumber),
            (b"=3\r\ntxt\r\n", FrameError::InvalidVerbatim),
            (b"=4\r\ntxt-\r\n", FrameError::InvalidVerbatim),
            (b"*1\r\n?\r\n", FrameError::InvalidType(b'?')),
        ];
        for (input, want) in cases {
            assert_eq!(decode(input).as_ref(), Err(want), "{input:?}");
        }
    }

    #[test]
    fn nesting_limit() {
        let nested = |levels: usize| {
            let mut v = b"*1\r\n".repeat(levels);
            v.extend_from_slice(b":1\r\n");
            v
        };
        assert!(decode(&nested(MAX_DEPTH)).unwrap().is_some());
        assert_eq!(decode(&nested(MAX_DEPTH + 1)), Err(FrameError::TooDeep));
        assert_eq!(decode(&b"*1\r\n".repeat(100_000)), Err(FrameError::TooDeep));
        assert_eq!(decode(&b"|1\r\n".repeat(100_000)), Err(FrameError::TooDeep));
    }

    #[test]
    fn long_attribute_chain_does_not_recurse() {
        let mut v = b"|0\r\n".repeat(100_000);
        v.extend_from_slice(b"+x\r\n");
        assert_eq!(one(&v), Frame::Simple(b("x")));
    }

    #[test]
    fn encode_resp3() {
        let cases: Vec<(Frame, &[u8])> = vec![
            (Frame::Simple(b("OK")), b"+OK\r\n"),
            (Frame::Simple(b("a\r\nb")), b"+a  b\r\n"),
            (Frame::Error(b("ERR x")), b"-ERR x\r\n"),
            (Frame::Integer(i64::MIN), b":-9223372036854775808\r\n"),
            (Frame::Bulk(b("ab")), b"$2\r\nab\r\n"),
            (Frame::Null, b"_\r\n"),
            (
                Frame::Array(vec![Frame::Null, Frame::Integer(1)]),
                b"*2\r\n_\r\n:1\r\n",
            ),
            (
                Frame::Map(vec![(Frame::Bulk(b("k")), Frame::Bulk(b("v")))]),
                b"%1\r\n$1\r\nk\r\n$1\r\nv\r\n",
            ),
            (Frame::Set(vec![Frame::Integer(2)]), b"~1\r\n:2\r\n"),
            (Frame::Push(vec![]), b">0\r\n"),
            (Frame::Double(0.1), b",0.1\r\n"),
            (Frame::Double(1.0), b",1.0\r\n"),
            (Frame::Double(1e100), b",1e100\r\n"),
            (Frame::Double(f64::NEG_INFINITY), b",-inf\r\n"),
            (Frame::Double(f64::NAN), b",nan\r\n"),
            (Frame::Boolean(true), b"#t\r\n"),
            (Frame::BigNumber(b("123")), b"(123\r\n"),
            (
                Frame::Verbatim {
                    format: *b"txt",
                    text: b("hi"),
                },
                b"=6\r\ntxt:hi\r\n",
            ),
            (Frame::BulkError(b("ERR a")), b"!5\r\nERR a\r\n"),
        ];
        for (f, want) in cases {
            assert_eq!(enc(&f), want, "{f:?}");
        }
    }

    #[test]
    fn encode_resp2_conversions() {
        let cases: Vec<(Frame, &[u8])> = vec![
            (Frame::Null, b"$-1\r\n"),
            (
                Frame::Map(vec![(Frame::Bulk(b("k")), Frame::Integer(1))]),
                b"*2\r\n$1\r\nk\r\n:1\r\n",
            ),
            (Frame::Set(vec![Frame::Integer(2)]), b"*1\r\n:2\r\n"),
            (Frame::Push(vec![Frame::Null]), b"*1\r\n$-1\r\n"),
            (Frame::Double(0.1), b"$19\r\n0.10000000000000001\r\n"),
            (Frame::Double(f64::INFINITY), b"$3\r\ninf\r\n"),
            (Frame::Boolean(true), b":1\r\n"),
            (Frame::Boolean(false), b":0\r\n"),
            (Frame::BigNumber(b("-7")), b"$2\r\n-7\r\n"),
            (
                Frame::Verbatim {
                    format: *b"txt",
                    text: b("hi"),
                },
                b"$2\r\nhi\r\n",
            ),
            (Frame::BulkError(b("ERR a\nb")), b"-ERR a b\r\n"),
            (Frame::Simple(b("OK")), b"+OK\r\n"),
            (Frame::Error(b("ERR e")), b"-ERR e\r\n"),
            (Frame::Integer(3), b":3\r\n"),
            (Frame::Bulk(b("x")), b"$1\r\nx\r\n"),
        ];
        for (f, want) in cases {
            assert_eq!(enc2(&f), want, "{f:?}");
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            FrameError::InvalidType(b'?').to_string(),
            "invalid frame type byte 0x3f"
        );
    }
}
