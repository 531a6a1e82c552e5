//! Replies as redis-cli prints them: readable at a terminal, raw when piped.

use latch_protocol::{format_double_g17, Frame};

pub use latch_protocol::quoted;

fn double_text(value: f64) -> Vec<u8> {
    let mut text = Vec::new();
    format_double_g17(value, &mut text);
    text
}

/// The readable form, each reply ending in a newline; nested aggregates are numbered and
/// indented under their parent's number.
pub fn readable(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    readable_into(frame, b"", &mut out);
    out
}

fn readable_into(frame: &Frame, prefix: &[u8], out: &mut Vec<u8>) {
    match frame {
        Frame::Error(text) | Frame::BulkError(text) => {
            out.extend_from_slice(b"(error) ");
            out.extend_from_slice(text);
            out.push(b'\n');
        }
        Frame::Simple(text) => {
            out.extend_from_slice(text);
            out.push(b'\n');
        }
        Frame::Integer(n) => out.extend_from_slice(format!("(integer) {n}\n").as_bytes()),
        Frame::Double(d) => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(&double_text(*d));
            out.push(b'\n');
        }
        Frame::Bulk(bytes) => {
            quoted(bytes, out);
            out.push(b'\n');
        }
        Frame::Verbatim { text, .. } => {
            out.extend_from_slice(text);
            out.push(b'\n');
        }
        Frame::BigNumber(digits) => {
            out.extend_from_slice(b"(big number) ");
            out.extend_from_slice(digits);
            out.push(b'\n');
        }
        Frame::Null => out.extend_from_slice(b"(nil)\n"),
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"(true)\n" } else { b"(false)\n" }),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            let (separator, empty): (u8, &[u8]) = match frame {
                Frame::Set(_) => (b'~', b"(empty set)\n"),
                Frame::Push(_) => (b')', b"(empty push)\n"),
                _ => (b')', b"(empty array)\n"),
            };
            if items.is_empty() {
                out.extend_from_slice(empty);
                return;
            }
            let width = items.len().to_string().len();
            let child_prefix = [prefix, &vec![b' '; width + 2]].concat();
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.extend_from_slice(prefix);
                }
                out.extend_from_slice(
                    format!("{:>width$}{} ", index + 1, separator as char).as_bytes(),
                );
                readable_into(item, &child_prefix, out);
            }
        }
        Frame::Map(pairs) => {
            if pairs.is_empty() {
                out.extend_from_slice(b"(empty hash)\n");
                return;
            }
            let width = pairs.len().to_string().len();
            let child_prefix = [prefix, &vec![b' '; width + 2]].concat();
            for (index, (key, value)) in pairs.iter().enumerate() {
                if index > 0 {
                    out.extend_from_slice(prefix);
                }
                out.extend_from_slice(format!("{:>width$}# ", index + 1).as_bytes());
                readable_into(key, &child_prefix, out);
                out.pop(); // the key's newline
                out.extend_from_slice(b" => ");
                if is_multiline(value) {
                    out.push(b'\n');
                    out.extend_from_slice(&child_prefix);
                }
                readable_into(value, &child_prefix, out);
            }
        }
    }
}

/// Whether a map value takes several lines (it then starts on its own line).
fn is_multiline(frame: &Frame) -> bool {
    match frame {
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => match items.as_slice() {
            [] => false,
            [only] => is_multiline(only),
            _ => true,
        },
        Frame::Map(pairs) => match pairs.as_slice() {
            [] => false,
            [(_, value)] => is_multiline(value),
            _ => true,
        },
        _ => false,
    }
}

/// The raw form of one reply, followed by a newline: strings as they are, aggregates one
/// element per line, map pairs as `key value`, nil as an empty line.
pub fn raw(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    raw_into(frame, &mut out);
    out.push(b'\n');
    out
}

fn raw_into(frame: &Frame, out: &mut Vec<u8>) {
    match frame {
        Frame::Null => {}
        Frame::Error(text) | Frame::BulkError(text) => {
            out.extend_from_slice(text);
            out.push(b'\n');
        }
        Frame::Simple(text) | Frame::Bulk(text) | Frame::Verbatim { text, .. } => {
            out.extend_from_slice(text)
        }
        Frame::BigNumber(digits) => out.extend_from_slice(digits),
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"(true)" } else { b"(false)" }),
        Frame::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Frame::Double(d) => out.extend_from_slice(&double_text(*d)),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b'\n');
                }
                raw_into(item, out);
            }
        }
        Frame::Map(pairs) => {
            for (index, (key, value)) in pairs.iter().enumerate() {
                if index > 0 {
                    out.push(b'\n');
                }
                raw_into(key, out);
                out.push(b' ');
                raw_into(value, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::from(s.to_string()))
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    // Expected texts are what redis-cli 7.0.15 --no-raw printed for the same replies.
    #[test]
    fn readable_like_redis_cli() {
        assert_eq!(text(readable(&Frame::Integer(3))), "(integer) 3\n");
        assert_eq!(text(readable(&Frame::Null)), "(nil)\n");
        assert_eq!(
            text(readable(&Frame::Bulk(Bytes::from_static(b"a\x01\xff")))),
            "\"a\\x01\\xff\"\n"
        );
        assert_eq!(
            text(readable(&bulk("a\"b\\c\n\t\r"))),
            "\"a\\\"b\\\\c\\n\\t\\r\"\n"
        );
        let nested = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![
                Frame::Integer(2),
                Frame::Array(vec![Frame::Integer(3), Frame::Array(vec![])]),
            ]),
            bulk("x"),
        ]);
        assert_eq!(
            text(readable(&nested)),
            "1) (integer) 1\n2) 1) (integer) 2\n   2) 1) (integer) 3\n      2) (empty array)\n3) \"x\"\n"
        );
        let map = Frame::Map(vec![(
            bulk("a"),
            Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)]),
        )]);
        assert_eq!(
            text(readable(&map)),
            "1# \"a\" => \n   1) (integer) 1\n   2) (integer) 2\n"
        );
        let flat = Frame::Map(vec![(bulk("f"), bulk("v")), (bulk("g"), bulk("w"))]);
        assert_eq!(
            text(readable(&flat)),
            "1# \"f\" => \"v\"\n2# \"g\" => \"w\"\n"
        );
        assert_eq!(text(readable(&Frame::Set(vec![]))), "(empty set)\n");
        assert_eq!(text(readable(&Frame::Set(vec![bulk("a")]))), "1~ \"a\"\n");
        assert_eq!(text(readable(&Frame::Double(1.5))), "(double) 1.5\n");
        assert_eq!(text(readable(&Frame::Boolean(false))), "(false)\n");
        let ten = Frame::Array((1..=10).map(Frame::Integer).collect());
        let printed = text(readable(&ten));
        assert!(printed.starts_with(" 1) (integer) 1\n 2)"), "{printed}");
        assert!(printed.ends_with("10) (integer) 10\n"), "{printed}");
    }

    #[test]
    fn raw_like_redis_cli() {
        let nested = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![Frame::Integer(2), bulk("x")]),
            Frame::Array(vec![]),
        ]);
        assert_eq!(text(raw(&nested)), "1\n2\nx\n\n");
        let map = Frame::Map(vec![(bulk("f"), bulk("v")), (bulk("g"), bulk("w"))]);
        assert_eq!(text(raw(&map)), "f v\ng w\n");
        assert_eq!(text(raw(&Frame::Null)), "\n");
        assert_eq!(
            text(raw(&Frame::Error(Bytes::from_static(b"ERR x")))),
            "ERR x\n\n"
        );
    }
}
