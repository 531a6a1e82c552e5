//! Splitting a typed line into arguments, with redis-cli's quoting rules: double quotes with
//! `\n \r \t \b \a \\ \" \xHH` escapes, single quotes with only `\'`, a closing quote that must
//! end the argument.

/// The arguments of `line`, or None when a quote is unbalanced or followed by a non-space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let &byte = line.get(i)?; // unterminated quotes
                if byte == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok();
                    if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        current.push(value);
                        i += 4;
                        continue;
                    }
                }
                if byte == b'\\' && i + 1 < line.len() {
                    current.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if byte == b'"' {
                    // The closing quote must be followed by a space or the end.
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                current.push(byte);
                i += 1;
            } else if in_single {
                let &byte = line.get(i)?;
                if byte == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    current.push(b'\'');
                    i += 2;
                    continue;
                }
                if byte == b'\'' {
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                current.push(byte);
                i += 1;
            } else {
                match line.get(i) {
                    None => break,
                    Some(b) if b.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(&b) => current.push(b),
                }
                i += 1;
            }
        }
        args.push(current);
    }
}

#[cfg(test)]
mod tests {
    use super::split_args;

    fn split(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes()).map(|args| {
            args.into_iter()
                .map(|a| String::from_utf8_lossy(&a).into_owned())
                .collect()
        })
    }

    #[test]
    fn quoting_rules() {
        assert_eq!(
            split("  set a  b "),
            Some(vec!["set".into(), "a".into(), "b".into()])
        );
        assert_eq!(
            split(r#"set "a b" 'c d'"#),
            Some(vec!["set".into(), "a b".into(), "c d".into()])
        );
        assert_eq!(
            split(r#""\x41\n\"" 'it\'s'"#),
            Some(vec!["A\n\"".into(), "it's".into()])
        );
        assert_eq!(
            split(r#"'no \n escape'"#),
            Some(vec![r"no \n escape".into()])
        );
        assert_eq!(split(r#"get "a"#), None);
        assert_eq!(split(r#"get "a"b"#), None);
        assert_eq!(split("get 'a"), None);
        assert_eq!(split(r#"a"b c" x"#), Some(vec!["ab c".into(), "x".into()]));
        assert_eq!(split(r#"a"b c"d"#), None);
        assert_eq!(split(""), Some(vec![]));
        assert_eq!(split(r#""""#), Some(vec!["".into()]));
    }
}
