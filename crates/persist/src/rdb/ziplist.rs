//! Ziplists and zipmaps: the compact encodings of Redis before 7.0, which RDB files from
//! older servers still carry (types 9, 10, 12, 13 and 14). Read only: Redis 7 never
//! writes them.
//!
//! A ziplist is total bytes (u32 LE), the offset of the last element (u32 LE), the count
//! (u16 LE, 65535 meaning "count them"), elements, and a 0xFF terminator. Each element
//! starts with the previous element's size (one byte, or 0xFE and a u32 LE), then an
//! encoding byte giving a string length (6, 14 or 32 bits) or an integer width.

use super::listpack::Element;

const HEADER: usize = 10;
const END: u8 = 0xff;
const BIG_PREVLEN: u8 = 0xfe;

/// Parses and validates a ziplist the way Redis' integrity check does.
pub(crate) fn parse(zl: &[u8]) -> Result<Vec<Element<'_>>, &'static str> {
    if zl.len() < HEADER + 1 {
        return Err("ziplist shorter than its header");
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let declared = u16::from_le_bytes([zl[8], zl[9]]);
    if total != zl.len() {
        return Err("ziplist size header does not match its length");
    }
    if zl[zl.len() - 1] != END {
        return Err("ziplist does not end with its terminator");
    }
    if tail > zl.len() - 1 {
        return Err("ziplist tail offset out of range");
    }
    let body = &zl[..zl.len() - 1];
    let mut elements = Vec::with_capacity((declared as usize).min(body.len()));
    let mut at = HEADER;
    let mut previous_size = 0usize;
    let mut last_start = None;
    while at < body.len() {
        let need = |n: usize| -> Result<&[u8], &'static str> {
            at.checked_add(n)
                .and_then(|end| body.get(at..end))
                .ok_or("ziplist element runs past the end")
        };
        let (prevlen, prevlen_size) = if body[at] < BIG_PREVLEN {
            (body[at] as usize, 1)
        } else {
            let b = need(5)?;
            (u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as usize, 5)
        };
        if prevlen != previous_size {
            return Err("ziplist previous-length mismatch");
        }
        let head = need(prevlen_size + 1)?;
        let encoding = head[prevlen_size];
        let (header_size, payload_size) = match encoding >> 6 {
            0 => (1, (encoding & 0x3f) as usize),
            1 => {
                let b = need(prevlen_size + 2)?;
                (
                    2,
                    ((encoding as usize & 0x3f) << 8) | b[prevlen_size + 1] as usize,
                )
            }
            2 if encoding == 0x80 => {
                let b = need(prevlen_size + 5)?;
                let p = &b[prevlen_size + 1..];
                (5, u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize)
            }
            2 => return Err("unknown ziplist encoding"),
            _ => match encoding {
                0xc0 => (1, 2),
                0xd0 => (1, 4),
                0xe0 => (1, 8),
                0xf0 => (1, 3),
                0xfe => (1, 1),
                0xf1..=0xfd => (1, 0),
                _ => return Err("unknown ziplist encoding"),
            },
        };
        let size = prevlen_size + header_size + payload_size;
        let entry = need(size)?;
        let payload = &entry[prevlen_size + header_size..];
        let element = if encoding >> 6 < 3 {
            Element::Str(payload)
        } else {
            let p = payload;
            Element::Int(match encoding {
                0xc0 => i16::from_le_bytes([p[0], p[1]]) as i64,
                0xd0 => i32::from_le_bytes([p[0], p[1], p[2], p[3]]) as i64,
                0xe0 => i64::from_le_bytes([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]]),
                0xf0 => (i32::from_le_bytes([0, p[0], p[1], p[2]]) >> 8) as i64,
                0xfe => p[0] as i8 as i64,
                _ => (encoding & 0x0f) as i64 - 1,
            })
        };
        elements.push(element);
        last_start = Some(at);
        previous_size = size;
        at += size;
    }
    if let Some(last) = last_start {
        if last != tail {
            return Err("ziplist tail offset does not point at the last element");
        }
    }
    if declared != u16::MAX && declared as usize != elements.len() {
        return Err("ziplist element count mismatch");
    }
    Ok(elements)
}

/// A field and its value.
pub(crate) type Pair<'a> = (&'a [u8], &'a [u8]);

/// Parses a zipmap (Redis 2.4's small hashes): a count byte, then key and value pairs
/// each with a length (one byte, or 0xFE and a u32 LE), the value also followed by a
/// "free" byte and that many unused bytes, and a 0xFF terminator.
pub(crate) fn parse_zipmap(zm: &[u8]) -> Result<Vec<Pair<'_>>, &'static str> {
    if zm.len() < 2 || zm[zm.len() - 1] != END {
        return Err("zipmap without terminator");
    }
    let body = &zm[..zm.len() - 1];
    let mut at = 1;
    let mut pairs = Vec::new();
    let take = |at: &mut usize, n: usize| -> Result<&[u8], &'static str> {
        let end = at.checked_add(n).ok_or("zipmap length overflow")?;
        let s = body.get(*at..end).ok_or("zipmap entry runs past the end")?;
        *at = end;
        Ok(s)
    };
    let length = |at: &mut usize| -> Result<usize, &'static str> {
        let first = take(at, 1)?[0];
        match first {
            0..=253 => Ok(first as usize),
            254 => {
                let b = take(at, 4)?;
                Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            }
            _ => Err("zipmap length is the terminator"),
        }
    };
    while at < body.len() {
        let key_len = length(&mut at)?;
        let key = take(&mut at, key_len)?;
        let value_len = length(&mut at)?;
        let free = take(&mut at, 1)?[0] as usize;
        let value = take(&mut at, value_len)?;
        take(&mut at, free)?;
        pairs.push((key, value));
    }
    if pairs.is_empty() {
        return Err("empty zipmap");
    }
    if zm[0] != 254 && zm[0] as usize != pairs.len() {
        return Err("zipmap count mismatch");
    }
    Ok(pairs)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Builds a ziplist the way Redis does, for the tests.
    pub(crate) fn build(items: &[Element<'_>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut last = HEADER;
        for item in items {
            let start = body.len();
            last = HEADER + start;
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xfe);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match *item {
                Element::Str(s) if s.len() <= 0x3f => {
                    body.push(s.len() as u8);
                    body.extend_from_slice(s);
                }
                Element::Str(s) if s.len() <= 0x3fff => {
                    body.push(0x40 | (s.len() >> 8) as u8);
                    body.push(s.len() as u8);
                    body.extend_from_slice(s);
                }
                Element::Str(s) => {
                    body.push(0x80);
                    body.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    body.extend_from_slice(s);
                }
                Element::Int(v) if (0..=12).contains(&v) => body.push(0xf1 + v as u8),
                Element::Int(v) if i8::try_from(v).is_ok() => {
                    body.push(0xfe);
                    body.push(v as u8);
                }
                Element::Int(v) if i16::try_from(v).is_ok() => {
                    body.push(0xc0);
                    body.extend_from_slice(&(v as i16).to_le_bytes());
                }
                Element::Int(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                    body.push(0xf0);
                    body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                }
                Element::Int(v) if i32::try_from(v).is_ok() => {
                    body.push(0xd0);
                    body.extend_from_slice(&(v as i32).to_le_bytes());
                }
                Element::Int(v) => {
                    body.push(0xe0);
                    body.extend_from_slice(&v.to_le_bytes());
                }
            }
            prev = body.len() - start;
        }
        let total = HEADER + body.len() + 1;
        let mut zl = Vec::with_capacity(total);
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&(last as u32).to_le_bytes());
        zl.extend_from_slice(&(items.len().min(65535) as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(END);
        zl
    }

    #[test]
    fn every_encoding_round_trips() {
        let big = vec![b'b'; 300];
        let huge = vec![b'h'; 20_000];
        let items = [
            Element::Str(b"hello"),
            Element::Int(0),
            Element::Int(12),
            Element::Int(13),
            Element::Int(-100),
            Element::Int(30_000),
            Element::Int(-8_000_000),
            Element::Int(2_000_000_000),
            Element::Int(i64::MIN),
            Element::Str(&big),
            Element::Str(&huge),
            Element::Str(b""),
        ];
        let zl = build(&items);
        assert_eq!(parse(&zl).unwrap(), items.to_vec());
        for cut in 0..zl.len() {
            assert!(parse(&zl[..cut]).is_err());
        }
    }

    #[test]
    fn empty_ziplist() {
        assert_eq!(parse(&build(&[])).unwrap(), vec![]);
    }

    #[test]
    fn zipmap() {
        let zm = b"\x02\x03foo\x03\x00bar\x05hello\x05\x02worldxx\xff";
        assert_eq!(
            parse_zipmap(zm).unwrap(),
            vec![(&b"foo"[..], &b"bar"[..]), (&b"hello"[..], &b"world"[..])]
        );
        assert!(parse_zipmap(b"\x01\xff").is_err());
        assert!(parse_zipmap(b"\x01\x03fo\xff").is_err());
    }
}
