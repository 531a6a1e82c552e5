//! Glob-style matching as Redis does it for KEYS, SCAN MATCH, CONFIG GET and friends:
//! `*`, `?`, `[abc]`, `[^abc]`, `[a-z]`, and `\` to take the next byte literally.

/// Whether `text` matches `pattern`. `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    // Iterative matcher with one backtrack point per `*` run: linear-ish, no recursion, so a
    // hostile pattern cannot blow the stack.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = match_class(pattern, p, text[t], nocase) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], text[t]) {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, text[t]) {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches one byte against the class starting at `pattern[start] == '['`. Returns whether
/// it matched and where the pattern continues. An unterminated class runs to the end of the
/// pattern, as in Redis.
fn match_class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut p = start + 1;
    let negate = p < pattern.len() && pattern[p] == b'^';
    if negate {
        p += 1;
    }
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let mut matched = false;
    loop {
        if p >= pattern.len() {
            // Redis treats a missing `]` as the end of the class.
            break;
        }
        if pattern[p] == b']' {
            p += 1;
            break;
        }
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            if fold(pattern[p + 1]) == c {
                matched = true;
            }
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
            let (mut lo, mut hi) = (fold(pattern[p]), fold(pattern[p + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if c >= lo && c <= hi {
                matched = true;
            }
            p += 3;
        } else {
            if fold(pattern[p]) == c {
                matched = true;
            }
            p += 1;
        }
    }
    Some((matched != negate, p))
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn basics() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"foo*", b"foobar", false));
        assert!(!glob_match(b"foo*", b"fobar", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"h\\*llo", b"hello", false));
        assert!(glob_match(b"*a*b*c", b"xxaxxbxxc", false));
        assert!(glob_match(b"MAXMEMORY*", b"maxmemory-policy", true));
        assert!(!glob_match(b"a", b"", false));
        assert!(glob_match(b"", b"", false));
        assert!(glob_match(b"a*", b"a", false));
    }

    #[test]
    fn hostile_pattern_is_fast() {
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let text = vec![b'a'; 5000];
        assert!(!glob_match(pattern, &text, false));
    }
}
