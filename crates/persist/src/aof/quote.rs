//! The manifest's quoting rules: splitting a line into fields the way Redis' `sdssplitargs`
//! does, and quoting a file name the way `sdscatrepr` does when `sdsneedsrepr` says it must.
//!
//! Redis runs these with the C locale's `ctype` tables, so only ASCII counts as printable or
//! as white space; every byte at or above 0x80 is escaped as `\xNN` when written.

/// `isspace` in the C locale.
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `isprint` in the C locale.
fn is_c_print(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits a line into fields with `sdssplitargs`' rules, or `None` where that function fails
/// (an unterminated quote, or a closing quote followed by something other than a space).
///
/// The line is treated as a C string: a NUL byte ends it, as the end of the slice does.
/// Unquoted fields end only at space, tab, CR, LF or the end, although vertical tab and
/// form feed are skipped between fields; a quote may open in the middle of a field.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Reading past the end yields NUL, which is how the C code sees the terminator.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut fields = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_c_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(fields);
        }
        let mut field = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        let mut done = false;
        while !done {
            let c = at(p);
            if in_double {
                let hex = (at(p + 1) == b'x')
                    .then(|| hex_value(at(p + 2)).zip(hex_value(at(p + 3))))
                    .flatten();
                if let (b'\\', Some((hi, lo))) = (c, hex) {
                    field.push(hi * 16 + lo);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    field.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    field.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    field.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    field.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => field.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        fields.push(field);
    }
}

/// Whether Redis writes this name quoted (`sdsneedsrepr`): anything that `split_args` would
/// not give back unchanged when written bare.
pub(crate) fn needs_repr(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| matches!(b, b'\\' | b'"') || !is_c_print(b) || is_c_space(b))
}

/// Appends `s` in double quotes with C escapes, as `sdscatrepr` does.
pub(crate) fn push_repr(out: &mut String, s: &[u8]) {
    out.push('"');
    for &b in s {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if is_c_print(b) => out.push(char::from(b)),
            b => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\x");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0f)]));
            }
        }
    }
    out.push('"');
}

/// `atoll` as glibc implements it: optional leading white space and sign, then as many
/// digits as there are; anything after them is ignored, no digits gives 0, and values out of
/// range saturate.
pub(crate) fn atoll(s: &[u8]) -> i64 {
    let mut i = 0;
    while s.get(i).is_some_and(|&b| is_c_space(b)) {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // Accumulating the magnitude in a wider type and saturating once it passes 2^63 keeps
    // both ends of the range exact, including i64::MIN.
    let mut magnitude: u64 = 0;
    while let Some(&d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        magnitude = magnitude
            .saturating_mul(10)
            .saturating_add(u64::from(d - b'0'))
            .min(1 << 63);
        i += 1;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).unwrap_or(i64::MIN)
    } else {
        i64::try_from(magnitude).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|v| {
            v.into_iter()
                .map(|f| String::from_utf8_lossy(&f).into_owned())
                .collect()
        })
    }

    #[test]
    fn splits_like_sdssplitargs() {
        assert_eq!(split("a b  c").unwrap(), ["a", "b", "c"]);
        assert_eq!(split("").unwrap(), Vec::<String>::new());
        assert_eq!(split(" \x0b ").unwrap(), Vec::<String>::new());
        // Vertical tab separates nothing once a field has started.
        assert_eq!(split("a\x0bb c").unwrap(), ["a\x0bb", "c"]);
        assert_eq!(split(r#""a b" c"#).unwrap(), ["a b", "c"]);
        assert_eq!(split(r#"x"a b" c"#).unwrap(), ["xa b", "c"]);
        assert_eq!(split(r#""\x41\x4a\x4" '\'q'"#).unwrap(), ["AJx4", "'q"]);
        assert_eq!(split(r#""\n\r\t\b\a\z\"""#).unwrap(), ["\n\r\t\x08\x07z\""]);
        assert_eq!(split(r#"'a\nb'"#).unwrap(), ["a\\nb"]);
        assert_eq!(split(r#""abc"#), None);
        assert_eq!(split(r#"'abc"#), None);
        assert_eq!(split(r#""abc\"#), None);
        assert_eq!(split(r#""a"b"#), None);
        assert_eq!(split(r#"'a'b"#), None);
        assert_eq!(split("\"a\"\x0bb").unwrap(), ["a", "b"]);
    }

    #[test]
    fn repr_matches_sdscatrepr() {
        let mut s = String::new();
        push_repr(&mut s, b"a \"\\\n\r\t\x07\x08\x0b\x7f\xc3\xa9~");
        assert_eq!(s, r#""a \"\\\n\r\t\a\b\x0b\x7f\xc3\xa9~""#);
        assert!(!needs_repr(b"appendonly.aof.1.base.rdb"));
        assert!(!needs_repr(b""));
        assert!(needs_repr(b"a b"));
        // A single quote is printable and not a space, so Redis writes it bare, although
        // splitting then reads it as an opening quote.
        assert!(!needs_repr(b"a'b"));
        assert!(needs_repr("é".as_bytes()));
        assert!(needs_repr(b"\x0c"));
    }

    #[test]
    fn repr_round_trips_through_split() {
        let all: Vec<u8> = (1..=255).collect();
        let mut s = String::new();
        push_repr(&mut s, &all);
        assert_eq!(split_args(s.as_bytes()).unwrap(), vec![all]);
    }

    #[test]
    fn atoll_like_glibc() {
        assert_eq!(atoll(b"12"), 12);
        assert_eq!(atoll(b" \t+12abc"), 12);
        assert_eq!(atoll(b"-7"), -7);
        assert_eq!(atoll(b"abc"), 0);
        assert_eq!(atoll(b""), 0);
        assert_eq!(atoll(b"- 1"), 0);
        assert_eq!(atoll(b"9223372036854775807"), i64::MAX);
        assert_eq!(atoll(b"9223372036854775808"), i64::MAX);
        assert_eq!(atoll(b"99999999999999999999999"), i64::MAX);
        assert_eq!(atoll(b"-9223372036854775808"), i64::MIN);
        assert_eq!(atoll(b"-99999999999999999999999"), i64::MIN);
    }
}
