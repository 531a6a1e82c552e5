//! Listpacks: the compact sequence Redis 7 stores small hashes, sorted sets, list nodes and
//! stream nodes in, and which RDB files carry verbatim as strings.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 meaning "count them"), the
//! elements, and a 0xFF terminator. Each element is an encoding byte (which may carry an
//! integer or a string length), the payload, then the element's own length written
//! backwards ("backlen") so the list can be walked from the end.

use latch_keyspace::{parse_i64_strict, Elem};

const HEADER: usize = 6;
const END: u8 = 0xff;
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One element as stored: listpacks keep strings that read as integers as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Element<'a> {
    /// The element as a pack holds it (both keep canonical integers as integers).
    pub(crate) fn to_elem(self) -> latch_keyspace::Elem<'a> {
        match self {
            Element::Int(v) => latch_keyspace::Elem::Int(v),
            Element::Str(s) => latch_keyspace::Elem::Bytes(s),
        }
    }

    /// The element as the string a client would see.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        match self {
            Element::Int(v) => v.to_string().into_bytes(),
            Element::Str(s) => s.to_vec(),
        }
    }

    /// The element as an integer, when it is one or a string that reads as one (how Redis
    /// reads stream counters and flags).
    pub(crate) fn as_int(self) -> Option<i64> {
        match self {
            Element::Int(v) => Some(v),
            Element::Str(s) => parse_i64_strict(s),
        }
    }
}

/// Bytes of the trailing length for an element whose encoding takes `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes an integer's encoding takes (without backlen).
fn int_encoding_size(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

fn str_encoding_size(len: usize) -> usize {
    if len < 64 {
        1 + len
    } else if len < 4096 {
        2 + len
    } else {
        5 + len
    }
}

/// Bytes `item` adds to a listpack, backlen included.
pub(crate) fn element_size(item: &[u8]) -> usize {
    let encoded = match parse_i64_strict(item) {
        Some(v) => int_encoding_size(v),
        None => str_encoding_size(item.len()),
    };
    encoded + backlen_size(encoded)
}

/// Bytes the integer `v` adds to a listpack, backlen included.
pub(crate) fn int_element_size(v: i64) -> usize {
    let encoded = int_encoding_size(v);
    encoded + backlen_size(encoded)
}

/// Builds a listpack element by element.
pub(crate) struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; HEADER]);
        Builder { buf, count: 0 }
    }

    /// Size of the finished listpack so far, terminator included.
    pub(crate) fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends a string, stored as an integer when it is the canonical form of one.
    pub(crate) fn push(&mut self, item: &[u8]) {
        match parse_i64_strict(item) {
            Some(v) => self.push_int(v),
            None => self.push_str(item),
        }
    }

    /// Appends an element of a Latch pack, which keeps canonical integers as integers
    /// already (so its strings need no second look); doubles go in as their text.
    pub(crate) fn push_elem(&mut self, elem: Elem<'_>) {
        match elem {
            Elem::Int(v) => self.push_int(v),
            Elem::Bytes(s) => self.push_str(s),
            Elem::Float(x) => self.push(super::encode::score_text(x).as_bytes()),
        }
    }

    pub(crate) fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let size = int_encoding_size(v);
        match size {
            1 => self.buf.push(v as u8),
            2 => {
                // 13-bit two's complement, high five bits in the encoding byte.
                let u = (v as u64) & 0x1fff;
                self.buf.push(0xc0 | (u >> 8) as u8);
                self.buf.push(u as u8);
            }
            3 => {
                self.buf.push(0xf1);
                self.buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            4 => {
                self.buf.push(0xf2);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            5 => {
                self.buf.push(0xf3);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                self.buf.push(0xf4);
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.finish_element(start);
    }

    /// Appends a string as a string (the caller knows it is no canonical integer).
    pub(crate) fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf.push(0xe0 | (len >> 8) as u8);
            self.buf.push(len as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_element(start);
    }

    /// Writes the backlen of the element that starts at `start`: most significant 7-bit
    /// group first, every byte but the first flagged with the high bit.
    fn finish_element(&mut self, start: usize) {
        let len = self.buf.len() - start;
        let groups = backlen_size(len);
        for k in (0..groups).rev() {
            let mut byte = ((len >> (7 * k)) & 0x7f) as u8;
            if k + 1 < groups {
                byte |= 0x80;
            }
            self.buf.push(byte);
        }
        self.count += 1;
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.push(END);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count)
            .ok()
            .filter(|&c| c != COUNT_UNKNOWN)
            .unwrap_or(COUNT_UNKNOWN);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Decodes the element at the start of `rest`: the element and its encoded size
/// (without backlen).
fn decode_element(rest: &[u8]) -> Result<(Element<'_>, usize), &'static str> {
    let first = *rest.first().ok_or("listpack element past the end")?;
    let need = |n: usize| -> Result<&[u8], &'static str> {
        rest.get(..n).ok_or("listpack element runs past the end")
    };
    let signed = |raw: u64, bits: u32| -> i64 {
        // Sign-extend a `bits`-wide two's complement value.
        let shift = 64 - bits;
        ((raw << shift) as i64) >> shift
    };
    match first {
        0x00..=0x7f => Ok((Element::Int(first as i64), 1)),
        0x80..=0xbf => {
            let len = (first & 0x3f) as usize;
            Ok((Element::Str(&need(1 + len)?[1..]), 1 + len))
        }
        0xc0..=0xdf => {
            let b = need(2)?;
            let raw = ((b[0] as u64 & 0x1f) << 8) | b[1] as u64;
            Ok((Element::Int(signed(raw, 13)), 2))
        }
        0xe0..=0xef => {
            let b = need(2)?;
            let len = ((b[0] as usize & 0x0f) << 8) | b[1] as usize;
            Ok((Element::Str(&need(2 + len)?[2..]), 2 + len))
        }
        0xf0 => {
            let b = need(5)?;
            let len = u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as usize;
            let end = len.checked_add(5).ok_or("listpack string too long")?;
            Ok((Element::Str(&need(end)?[5..]), end))
        }
        0xf1 => {
            let b = need(3)?;
            Ok((Element::Int(i16::from_le_bytes([b[1], b[2]]) as i64), 3))
        }
        0xf2 => {
            let b = need(4)?;
            let raw = u32::from_le_bytes([b[1], b[2], b[3], 0]) as u64;
            Ok((Element::Int(signed(raw, 24)), 4))
        }
        0xf3 => {
            let b = need(5)?;
            Ok((
                Element::Int(i32::from_le_bytes([b[1], b[2], b[3], b[4]]) as i64),
                5,
            ))
        }
        0xf4 => {
            let b = need(9)?;
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&b[1..9]);
            Ok((Element::Int(i64::from_le_bytes(raw)), 9))
        }
        _ => Err("unknown listpack encoding"),
    }
}

/// Reads the backlen stored at the end of `bytes`.
fn decode_backlen(bytes: &[u8]) -> Option<usize> {
    let mut value = 0usize;
    for (k, &byte) in bytes.iter().rev().enumerate() {
        value |= ((byte & 0x7f) as usize) << (7 * k);
        if byte & 0x80 == 0 {
            return (k + 1 == bytes.len()).then_some(value);
        }
    }
    None
}

/// Parses and fully validates a listpack, as Redis' deep sanitization does: the header
/// size matches, every element lies inside, every backlen agrees with its element, the
/// terminator is last and the count (when known) is right.
pub(crate) fn parse(lp: &[u8]) -> Result<Vec<Element<'_>>, &'static str> {
    if lp.len() < HEADER + 1 {
        return Err("listpack shorter than its header");
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err("listpack size header does not match its length");
    }
    if lp[lp.len() - 1] != END {
        return Err("listpack does not end with its terminator");
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    let body = &lp[..lp.len() - 1];
    let mut elements = Vec::with_capacity((declared as usize).min(body.len()));
    let mut at = HEADER;
    while at < body.len() {
        let (element, encoded) = decode_element(&body[at..])?;
        let back = backlen_size(encoded);
        let end = at
            .checked_add(encoded + back)
            .filter(|&e| e <= body.len())
            .ok_or("listpack element runs past the end")?;
        if decode_backlen(&body[at + encoded..end]) != Some(encoded) {
            return Err("listpack element length mismatch");
        }
        elements.push(element);
        at = end;
    }
    if declared != COUNT_UNKNOWN && declared as usize != elements.len() {
        return Err("listpack element count mismatch");
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_listpack() {
        let lp = Builder::new().finish();
        assert_eq!(lp, [7, 0, 0, 0, 0, 0, 0xff]);
        assert_eq!(parse(&lp), Ok(vec![]));
    }

    #[test]
    fn every_encoding_round_trips() {
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        let strings: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
            vec![b'v'; 20_000],
            b"-0".to_vec(),
            b"007".to_vec(),
        ];
        let mut b = Builder::new();
        for &v in &ints {
            b.push(v.to_string().as_bytes());
        }
        for s in &strings {
            b.push(s);
        }
        let before = b.bytes();
        let lp = b.finish();
        assert_eq!(lp.len(), before);
        let parsed = parse(&lp).unwrap();
        assert_eq!(parsed.len(), ints.len() + strings.len());
        for (e, &v) in parsed.iter().zip(&ints) {
            assert_eq!(*e, Element::Int(v));
        }
        for (e, s) in parsed[ints.len()..].iter().zip(&strings) {
            assert_eq!(*e, Element::Str(s));
        }
    }

    #[test]
    fn sizes_match_the_builder() {
        for item in [&b"1"[..], b"-5000", b"hello", &[b'q'; 200], &[b'r'; 5000]] {
            let mut b = Builder::new();
            let before = b.bytes();
            b.push(item);
            assert_eq!(b.bytes() - before, element_size(item), "{:?}", item.len());
        }
    }

    #[test]
    fn big_counts_are_unknown() {
        let mut b = Builder::new();
        for _ in 0..70_000 {
            b.push_int(1);
        }
        let lp = b.finish();
        assert_eq!(&lp[4..6], &[0xff, 0xff]);
        assert_eq!(parse(&lp).unwrap().len(), 70_000);
    }

    #[test]
    fn corruption_is_detected() {
        let mut b = Builder::new();
        b.push(b"hello");
        b.push(b"300");
        let lp = b.finish();
        for cut in 0..lp.len() {
            assert!(parse(&lp[..cut]).is_err());
        }
        let mut bad = lp.clone();
        bad[4] = 3;
        assert!(parse(&bad).is_err());
        let mut bad = lp.clone();
        bad[6 + 6] = 9; // the first element's backlen
        assert!(parse(&bad).is_err());
    }
}
