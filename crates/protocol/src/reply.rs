//! Server-side reply writer.
//!
//! [`Reply`] appends encoded replies to an output buffer, choosing for each reply type
//! the RESP2 or RESP3 form according to the connection's protocol version (`HELLO`).

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

use crate::frame::Frame;

/// Protocol version spoken on a connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Resp {
    /// RESP2, the default for new connections.
    #[default]
    V2,
    /// RESP3, after `HELLO 3`.
    V3,
}

/// An output buffer of encoded replies for one connection.
#[derive(Debug)]
pub struct Reply {
    out: BytesMut,
    resp: Resp,
    error_count: u64,
    /// Where errors already counted elsewhere start in `out` (see
    /// [`Reply::error_counted_elsewhere`]).
    counted_elsewhere: Vec<usize>,
}

impl Reply {
    /// An empty reply buffer for the given protocol version.
    pub fn new(resp: Resp) -> Self {
        Reply {
            out: BytesMut::new(),
            resp,
            error_count: 0,
            counted_elsewhere: Vec::new(),
        }
    }

    /// The protocol version in use.
    pub fn resp(&self) -> Resp {
        self.resp
    }

    /// Switches the protocol version for the replies that follow.
    pub fn set_resp(&mut self, r: Resp) {
        self.resp = r;
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.out.put_slice(b"+OK\r\n");
    }

    /// A simple string `+s`; CR and LF in `s` are replaced by spaces.
    pub fn simple(&mut self, s: &[u8]) {
        self.out.put_u8(b'+');
        self.put_line_sanitized(s);
    }

    /// An error `-msg`, where `msg` starts with its code (`b"ERR syntax error"`). CR and
    /// LF are replaced by spaces. A leading `-` in `msg` is not doubled. Counts towards
    /// [`Reply::error_count`].
    pub fn error(&mut self, msg: &[u8]) {
        let msg = msg.strip_prefix(b"-").unwrap_or(msg);
        self.out.put_u8(b'-');
        self.put_line_sanitized(msg);
        self.error_count += 1;
    }

    /// An error whose error statistics were already recorded where it arose (a script
    /// relaying the error of a command it called, as Redis' `ignore_error_stats_update`).
    /// It still counts towards [`Reply::error_count`], which decides whether the command
    /// failed.
    pub fn error_counted_elsewhere(&mut self, msg: &[u8]) {
        self.counted_elsewhere.push(self.out.len());
        self.error(msg);
    }

    /// Takes the positions of errors written by [`Reply::error_counted_elsewhere`].
    pub fn take_counted_elsewhere(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.counted_elsewhere)
    }

    /// How many error replies were written so far.
    pub fn error_count(&self) -> u64 {
        self.error_count
    }

    /// An integer `:n`.
    pub fn integer(&mut self, n: i64) {
        self.header(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, b: &[u8]) {
        self.header(b'$', b.len() as i64);
        self.out.put_slice(b);
        self.out.put_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n`.
    pub fn bulk_integer(&mut self, n: i64) {
        let mut fmt = itoa::Buffer::new();
        self.bulk(fmt.format(n).as_bytes());
    }

    /// A null: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.resp {
            Resp::V2 => self.out.put_slice(b"$-1\r\n"),
            Resp::V3 => self.out.put_slice(b"_\r\n"),
        }
    }

    /// A null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.resp {
            Resp::V2 => self.out.put_slice(b"*-1\r\n"),
            Resp::V3 => self.out.put_slice(b"_\r\n"),
        }
    }

    /// An array header; `len` elements must follow.
    pub fn array(&mut self, len: usize) {
        self.header(b'*', len as i64);
    }

    /// A map header (`%n`); `pairs` key/value pairs must follow. In RESP2 a flat array
    /// of `2 * pairs` elements.
    pub fn map(&mut self, pairs: usize) {
        match self.resp {
            Resp::V2 => self.header(b'*', (pairs as i64).saturating_mul(2)),
            Resp::V3 => self.header(b'%', pairs as i64),
        }
    }

    /// A set header (`~n`); an array in RESP2.
    pub fn set(&mut self, len: usize) {
        let kind = if self.resp == Resp::V3 { b'~' } else { b'*' };
        self.header(kind, len as i64);
    }

    /// A push header (`>n`); an array in RESP2.
    pub fn push(&mut self, len: usize) {
        let kind = if self.resp == Resp::V3 { b'>' } else { b'*' };
        self.header(kind, len as i64);
    }

    /// A double formatted as C's `%.17g`: `,<x>` in RESP3, a bulk string in RESP2.
    pub fn double(&mut self, d: f64) {
        let mut text = Vec::with_capacity(24);
        format_double_g17(d, &mut text);
        match self.resp {
            Resp::V2 => self.bulk(&text),
            Resp::V3 => {
                self.out.put_u8(b',');
                self.out.put_slice(&text);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, b: bool) {
        let bytes: &[u8] = match (self.resp, b) {
            (Resp::V3, true) => b"#t\r\n",
            (Resp::V3, false) => b"#f\r\n",
            (Resp::V2, true) => b":1\r\n",
            (Resp::V2, false) => b":0\r\n",
        };
        self.out.put_slice(bytes);
    }

    /// A verbatim string (`=len\r\nfmt:text`) in RESP3; a plain bulk of `text` in RESP2.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) {
        match self.resp {
            Resp::V2 => self.bulk(text),
            Resp::V3 => {
                self.header(b'=', text.len() as i64 + 4);
                self.out.put_slice(format);
                self.out.put_u8(b':');
                self.out.put_slice(text);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    /// A big number (`(digits`) in RESP3; a bulk string of the digits in RESP2.
    pub fn big_number(&mut self, digits: &[u8]) {
        match self.resp {
            Resp::V2 => self.bulk(digits),
            Resp::V3 => {
                self.out.put_u8(b'(');
                self.put_line_sanitized(digits);
            }
        }
    }

    /// A complete [`Frame`], encoded for the connection's protocol version.
    pub fn frame(&mut self, frame: &Frame) {
        match self.resp {
            Resp::V2 => crate::frame::encode_resp2(frame, &mut self.out),
            Resp::V3 => crate::frame::encode(frame, &mut self.out),
        }
        self.error_count += count_errors(frame);
    }

    /// Pre-encoded protocol bytes, appended as they are.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.put_slice(bytes);
    }

    /// Number of buffered bytes.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// The buffer's allocation, in bytes.
    pub fn capacity(&self) -> usize {
        self.out.capacity()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Drops buffered bytes past `len` (to undo a partially written reply), and the marks
    /// of errors counted elsewhere that were among them.
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
        self.counted_elsewhere.retain(|&at| at < len);
    }

    /// The output buffer, for the connection to write out and clear.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    fn header(&mut self, kind: u8, n: i64) {
        let mut fmt = itoa::Buffer::new();
        self.out.put_u8(kind);
        self.out.put_slice(fmt.format(n).as_bytes());
        self.out.put_slice(b"\r\n");
    }

    fn put_line_sanitized(&mut self, s: &[u8]) {
        if s.iter().any(|&b| b == b'\r' || b == b'\n') {
            self.out.extend(
                s.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
        } else {
            self.out.put_slice(s);
        }
        self.out.put_slice(b"\r\n");
    }
}

fn count_errors(frame: &Frame) -> u64 {
    match frame {
        Frame::Error(_) | Frame::BulkError(_) => 1,
        _ => 0,
    }
}

/// A small fixed-size `fmt::Write` sink, so formatting needs no heap allocation.
struct StackBuf {
    buf: [u8; 40],
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends `d` formatted exactly as C's `printf("%.17g", d)` (glibc): 17 significant
/// digits, correctly rounded (ties to even) from the exact binary value, plain notation
/// when the decimal exponent is in -4..17 and exponent notation (`e+XX`, at least two
/// exponent digits) otherwise, trailing fractional zeros removed. Infinities print as
/// `inf`/`-inf` and NaN as `nan`.
pub fn format_double_g17(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if d == 0.0 {
        out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // Fast path: integers below 1e17 have at most 17 digits and print exactly.
    if d.fract() == 0.0 && d.abs() < 1e17 {
        out.extend_from_slice(itoa::Buffer::new().format(d as i64).as_bytes());
        return;
    }
    // The standard library's precision formatting is exact (correctly rounded from
    // the binary value, ties to even), which is what glibc's printf does. Take its 17
    // significant digits and decimal exponent, then lay them out as %g does.
    let mut sci = StackBuf {
        buf: [0; 40],
        len: 0,
    };
    if write!(sci, "{:.16e}", d.abs()).is_err() {
        // Cannot happen: the longest form is 24 bytes.
        out.extend_from_slice(b"nan");
        return;
    }
    let text = &sci.buf[..sci.len];
    let Some(e_pos) = text.iter().position(|&b| b == b'e') else {
        out.extend_from_slice(b"nan");
        return;
    };
    let mut digits = [0u8; 17];
    let mut n = 0;
    for &b in &text[..e_pos] {
        if b.is_ascii_digit() && n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    let exp: i32 = std::str::from_utf8(&text[e_pos + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Significant digits without trailing zeros (the first digit is never zero).
    let mut sig = n;
    while sig > 1 && digits[sig - 1] == b'0' {
        sig -= 1;
    }
    let digits = &digits[..sig];

    if d.is_sign_negative() {
        out.push(b'-');
    }
    if !(-4..17).contains(&exp) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(itoa::Buffer::new().format(abs).as_bytes());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.extend_from_slice(digits);
            out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
        out.extend_from_slice(digits);
    }
}

/// Bytes quoted the way redis-cli (and Redis' `sdscatrepr`) quotes them: `"..."` with
/// `\\ \" \n \r \t \a \b` escapes and `\xHH` for other unprintable bytes.
pub fn quoted(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g17(d: f64) -> String {
        let mut v = Vec::new();
        format_double_g17(d, &mut v);
        String::from_utf8(v).unwrap()
    }

    fn both(f: impl Fn(&mut Reply)) -> (Vec<u8>, Vec<u8>) {
        let mut r2 = Reply::new(Resp::V2);
        f(&mut r2);
        let mut r3 = Reply::new(Resp::V3);
        f(&mut r3);
        (r2.buffer().to_vec(), r3.buffer().to_vec())
    }

    fn check(f: impl Fn(&mut Reply), v2: &[u8], v3: &[u8]) {
        let (a, b) = both(f);
        assert_eq!(
            (a.as_slice(), b.as_slice()),
            (v2, v3),
            "\n got {:?} / {:?}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }

    #[test]
    fn truncate_forgets_the_errors_it_drops() {
        let mut reply = Reply::new(Resp::V2);
        reply.error_counted_elsewhere(b"ERR kept");
        let at = reply.len();
        reply.error_counted_elsewhere(b"ERR dropped");
        reply.truncate(at);
        assert_eq!(reply.take_counted_elsewhere(), vec![0]);
    }

    #[test]
    fn simple_types() {
        check(|r| r.ok(), b"+OK\r\n", b"+OK\r\n");
        check(|r| r.simple(b"PONG"), b"+PONG\r\n", b"+PONG\r\n");
        check(|r| r.simple(b"a\r\nb"), b"+a  b\r\n", b"+a  b\r\n");
        check(
            |r| r.error(b"ERR syntax error"),
            b"-ERR syntax error\r\n",
            b"-ERR syntax error\r\n",
        );
        check(
            |r| r.error(b"-WRONGTYPE x\ny"),
            b"-WRONGTYPE x y\r\n",
            b"-WRONGTYPE x y\r\n",
        );
        check(|r| r.integer(-42), b":-42\r\n", b":-42\r\n");
        check(
            |r| r.integer(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(
            |r| r.bulk(b"a\r\nb"),
            b"$4\r\na\r\nb\r\n",
            b"$4\r\na\r\nb\r\n",
        );
        check(|r| r.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
        check(|r| r.bulk_integer(-17), b"$3\r\n-17\r\n", b"$3\r\n-17\r\n");
        check(|r| r.null(), b"$-1\r\n", b"_\r\n");
        check(|r| r.null_array(), b"*-1\r\n", b"_\r\n");
        check(|r| r.raw(b":1\r\n"), b":1\r\n", b":1\r\n");
    }

    #[test]
    fn aggregates() {
        check(|r| r.array(3), b"*3\r\n", b"*3\r\n");
        check(|r| r.map(2), b"*4\r\n", b"%2\r\n");
        check(|r| r.set(5), b"*5\r\n", b"~5\r\n");
        check(|r| r.push(3), b"*3\r\n", b">3\r\n");
        check(
            |r| {
                r.map(1);
                r.bulk(b"k");
                r.integer(1);
            },
            b"*2\r\n$1\r\nk\r\n:1\r\n",
            b"%1\r\n$1\r\nk\r\n:1\r\n",
        );
    }

    #[test]
    fn resp3_types() {
        check(|r| r.double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
        check(
            |r| r.double(0.1),
            b"$19\r\n0.10000000000000001\r\n",
            b",0.10000000000000001\r\n",
        );
        check(|r| r.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
        check(
            |r| r.double(f64::NEG_INFINITY),
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        check(|r| r.double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
        check(|r| r.boolean(true), b":1\r\n", b"#t\r\n");
        check(|r| r.boolean(false), b":0\r\n", b"#f\r\n");
        check(
            |r| r.verbatim(b"txt", b"hello"),
            b"$5\r\nhello\r\n",
            b"=9\r\ntxt:hello\r\n",
        );
        check(
            |r| r.big_number(b"-12345678901234567890"),
            b"$21\r\n-12345678901234567890\r\n",
            b"(-12345678901234567890\r\n",
        );
    }

    #[test]
    fn frame_reply() {
        let f = Frame::Map(vec![(Frame::Bulk("a".into()), Frame::Boolean(true))]);
        check(
            |r| r.frame(&f),
            b"*2\r\n$1\r\na\r\n:1\r\n",
            b"%1\r\n$1\r\na\r\n#t\r\n",
        );
        let mut r = Reply::new(Resp::V3);
        r.frame(&Frame::Error("ERR x".into()));
        assert_eq!(r.error_count(), 1);
    }

    #[test]
    fn buffer_management_and_error_count() {
        let mut r = Reply::new(Resp::V2);
        assert!(r.is_empty());
        assert_eq!(r.resp(), Resp::V2);
        r.ok();
        let mark = r.len();
        r.array(2);
        r.bulk(b"x");
        r.truncate(mark);
        assert_eq!(r.buffer().as_ref(), b"+OK\r\n");
        r.error(b"ERR a");
        r.error(b"ERR b");
        assert_eq!(r.error_count(), 2);
        r.set_resp(Resp::V3);
        assert_eq!(r.resp(), Resp::V3);
        r.buffer().clear();
        r.null();
        assert_eq!(r.buffer().as_ref(), b"_\r\n");
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn g17_brief_cases() {
        assert_eq!(g17(0.1), "0.10000000000000001");
        assert_eq!(g17(1.0), "1");
        assert_eq!(g17(1.5), "1.5");
        // glibc prints 1e100 as "1e+100": %g drops trailing zeros.
        assert_eq!(g17(1e100), "1e+100");
        assert_eq!(g17(3.0e-5), "3.0000000000000001e-05");
        assert_eq!(g17(123456789.0), "123456789");
        assert_eq!(g17(-0.0), "-0");
        assert_eq!(g17(0.0), "0");
        assert_eq!(g17(1e17), "1e+17");
        assert_eq!(g17(1e16), "10000000000000000");
        assert_eq!(g17(f64::INFINITY), "inf");
        assert_eq!(g17(f64::NEG_INFINITY), "-inf");
        assert_eq!(g17(f64::NAN), "nan");
    }

    /// Expected strings produced by glibc's `printf("%.17g", x)`.
    #[test]
    fn g17_matches_glibc_printf() {
        let cases: &[(f64, &str)] = &[
            (5e-324, "4.9406564584124654e-324"),
            (2.2250738585072014e-308, "2.2250738585072014e-308"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.5, "0.5"),
            (2.5e-5, "2.5000000000000001e-05"),
            (1e-4, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (0.00012345, "0.00012344999999999999"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1.0 / 3.0, "0.33333333333333331"),
            (-2.0 / 3.0, "-0.66666666666666663"),
            (100.0, "100"),
            (1e15 + 0.3, "1000000000000000.2"),
            (9.999999999999999e16, "99999999999999984"),
            (99999999999999999.0, "1e+17"),
            (12.345678, "12.345677999999999"),
            (7.1, "7.0999999999999996"),
            (-1.5e-7, "-1.4999999999999999e-07"),
            (1e21, "1e+21"),
            (1.2e21, "1.2e+21"),
            (123.456, "123.456"),
            (0.3, "0.29999999999999999"),
            (2.0f64.powi(-25), "2.9802322387695312e-08"),
            (3.0 * 2.0f64.powi(-25), "8.9406967163085938e-08"),
            (2.0f64.powi(60), "1.152921504606847e+18"),
            (4503599627370495.5, "4503599627370495.5"),
            (9007199254740993.0, "9007199254740992"),
            (-1e-300, "-1e-300"),
            (12345.678, "12345.678"),
            (1e-10, "1e-10"),
            (6.02214076e23, "6.0221407599999999e+23"),
        ];
        for &(x, want) in cases {
            assert_eq!(g17(x), want, "{x:e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn g17_round_trips_and_has_17_digits(bits in proptest::prelude::any::<u64>()) {
            let d = f64::from_bits(bits);
            proptest::prop_assume!(d.is_finite());
            let s = g17(d);
            // 17 significant digits always identify the double.
            let back: f64 = s.parse().unwrap();
            proptest::prop_assert_eq!(back.to_bits(), d.to_bits(), "{}", s);
            let sig: Vec<u8> = s
                .bytes()
                .take_while(|&b| b != b'e')
                .filter(u8::is_ascii_digit)
                .skip_while(|&b| b == b'0')
                .collect();
            proptest::prop_assert!(sig.len() <= 17, "{}", s);
        }
    }
}
