//! Reading values in RDB form: every encoding Redis 7.0 writes or still loads.
//!
//! Nothing read is trusted. Claimed lengths only cap pre-allocation (buffers grow as data
//! actually arrives), every loop consumes input, and each structure is checked the way
//! Redis' deep sanitization checks it, so a bad file gives an error, never a panic.

use std::io::{ErrorKind, Read};

use latch_keyspace::hash::DuplicateField;
use latch_keyspace::{compact, Elem, Hash, List, Pack, Set, SortedSet, Value};

use super::encode::{is_empty_collection, CONTAINER_PACKED, CONTAINER_PLAIN};
use super::listpack::{self, Element};
use super::{intset, stream, types, ziplist, RdbError};
use crate::{crc64::crc64, lzf};

/// Most elements reserved up front, whatever a file claims.
const MAX_PREALLOC: usize = 4096;
/// Most bytes reserved up front for one string.
const MAX_PREALLOC_BYTES: u64 = 1 << 16;

/// A byte source that counts what it consumed and checksums it.
pub(crate) struct Input<R> {
    inner: R,
    crc: u64,
    offset: u64,
}

/// A length field, or the marker of a specially encoded string.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<R: Read> Input<R> {
    pub(crate) fn new(inner: R) -> Input<R> {
        Input {
            inner,
            crc: 0,
            offset: 0,
        }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The checksum of everything read so far.
    pub(crate) fn crc(&self) -> u64 {
        self.crc
    }

    pub(crate) fn corrupt(&self, what: impl Into<String>) -> RdbError {
        RdbError::Corrupt {
            offset: self.offset,
            what: what.into(),
        }
    }

    /// A container that fails its check, named as Redis' loader names it in its log
    /// ("Ziplist integrity check failed."), with what was wrong after it.
    pub(crate) fn integrity(&self, container: &str, detail: impl std::fmt::Display) -> RdbError {
        self.corrupt(format!("{container} integrity check failed. ({detail})"))
    }

    fn io_error(&self, error: std::io::Error) -> RdbError {
        if error.kind() == ErrorKind::UnexpectedEof {
            RdbError::Truncated {
                offset: self.offset,
            }
        } else {
            RdbError::Io(error)
        }
    }

    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Result<(), RdbError> {
        self.inner.read_exact(buf).map_err(|e| self.io_error(e))?;
        self.crc = crc64(self.crc, buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut buf = [0u8; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.array::<1>()?[0])
    }

    /// Whether the input has nothing left (reads one byte to find out).
    pub(crate) fn at_end(&mut self) -> Result<bool, RdbError> {
        let mut buf = [0u8; 1];
        loop {
            match self.inner.read(&mut buf) {
                Ok(0) => return Ok(true),
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(RdbError::Io(e)),
            }
        }
    }

    /// `len` bytes; the buffer grows with the data, so a lying length costs nothing.
    pub(crate) fn bytes(&mut self, len: u64) -> Result<Vec<u8>, RdbError> {
        let mut buf = Vec::with_capacity(len.min(MAX_PREALLOC_BYTES) as usize);
        let got = (&mut self.inner)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|e| self.io_error(e))?;
        self.crc = crc64(self.crc, &buf);
        self.offset += got as u64;
        if (got as u64) < len {
            return Err(RdbError::Truncated {
                offset: self.offset,
            });
        }
        Ok(buf)
    }

    pub(crate) fn millis(&mut self) -> Result<i64, RdbError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn length(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain((first & 0x3f) as u64),
            1 => Length::Plain(((first as u64 & 0x3f) << 8) | self.byte()? as u64),
            3 => Length::Encoded(first & 0x3f),
            _ => match first {
                0x80 => Length::Plain(u32::from_be_bytes(self.array()?) as u64),
                0x81 => Length::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(self.corrupt(format!("unknown length encoding {first:#04x}"))),
            },
        })
    }

    /// A length, count or number stored as one.
    pub(crate) fn read_len(&mut self) -> Result<u64, RdbError> {
        match self.length()? {
            Length::Plain(len) => Ok(len),
            Length::Encoded(_) => Err(self.corrupt("encoded string where a length belongs")),
        }
    }

    /// A string in any of its encodings.
    pub(crate) fn read_string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.length()? {
            Length::Plain(len) => self.bytes(len),
            Length::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(2) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(3) => {
                let packed_len = self.read_len()?;
                let len = self.read_len()?;
                let packed = self.bytes(packed_len)?;
                usize::try_from(len)
                    .ok()
                    .and_then(|len| lzf::decompress(&packed, len))
                    .ok_or_else(|| self.corrupt("invalid LZF compressed string"))
            }
            Length::Encoded(other) => Err(self.corrupt(format!("unknown string encoding {other}"))),
        }
    }

    /// A double as text behind a length byte, with 253, 254 and 255 meaning NaN, +inf
    /// and -inf (the old sorted set encoding).
    fn read_text_double(&mut self) -> Result<f64, RdbError> {
        let len = self.byte()?;
        match len {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let text = self.bytes(len as u64)?;
                parse_double(&text).ok_or_else(|| self.corrupt("unparsable double"))
            }
        }
    }
}

/// Parses a double the way Redis' `strtod` calls accept the text it writes.
fn parse_double(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// A list of a ziplist's or listpack's elements, in order.
fn list_of(elements: &[Element<'_>]) -> List {
    let mut list = List::new();
    list.push_node(pack_of(elements));
    list
}

/// One pack of these elements, written in one go (one allocation, not one per element).
fn pack_of(elements: &[Element<'_>]) -> Pack {
    let elems: Vec<Elem<'_>> = elements.iter().map(|e| e.to_elem()).collect();
    let mut pack = Pack::new();
    pack.insert_at(0, &elems);
    pack
}

/// A hash of separately read fields and values, in their order, checking their lengths
/// against the compact thresholds as Redis does for such encodings.
fn load_hash<'a, R: Read>(
    input: &Input<R>,
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Hash, RdbError> {
    let pairs: Vec<(Elem<'a>, Elem<'a>)> = pairs
        .map(|(field, value)| (Elem::Bytes(field), Elem::Bytes(value)))
        .collect();
    Hash::load(&pairs, true).map_err(|DuplicateField| input.corrupt("duplicate hash field"))
}

fn capacity(claimed: u64) -> usize {
    claimed.min(MAX_PREALLOC as u64) as usize
}

/// Reads the value of an object of type `kind`. `Ok(None)` stands for an empty collection,
/// which Redis skips when loading a file and refuses in `RESTORE`.
pub(crate) fn read_object<R: Read>(
    input: &mut Input<R>,
    kind: u8,
) -> Result<Option<Value>, RdbError> {
    let value = match kind {
        types::STRING => Value::Str(input.read_string()?),
        types::LIST => {
            let len = input.read_len()?;
            let mut list = List::new();
            for _ in 0..len {
                list.push_back(&input.read_string()?);
            }
            Value::List(list)
        }
        types::SET => {
            let len = input.read_len()?;
            // An intset when the members fit one, as Redis loads a set.
            let mut members = if len > latch_keyspace::compact::set_max_intset_entries() as u64 {
                Set::new_large(capacity(len))
            } else {
                Set::new()
            };
            for _ in 0..len {
                let member = input.read_string()?;
                if !members.insert(&member) {
                    return Err(input.corrupt("duplicate set member"));
                }
            }
            Value::Set(members)
        }
        types::ZSET | types::ZSET_2 => {
            let len = input.read_len()?;
            let mut set = SortedSet::new();
            for _ in 0..len {
                let member = input.read_string()?;
                let score = if kind == types::ZSET_2 {
                    f64::from_le_bytes(input.array()?)
                } else {
                    input.read_text_double()?
                };
                add_scored(input, &mut set, &member, score, false)?;
            }
            // Redis loads a set that fits the thresholds as a listpack.
            set.compact_if_fits();
            Value::ZSet(set)
        }
        types::HASH => {
            // As Redis' rdbLoadObject: too many entries for the compact form, and the hash
            // is large from the start; otherwise its lengths decide.
            let len = input.read_len()?;
            let hash = if len > compact::hash_max_entries() as u64 {
                let mut hash = Hash::for_large_load(capacity(len));
                for _ in 0..len {
                    let field = input.read_string()?;
                    let value = input.read_string()?;
                    hash.push_loaded(&field, &value)
                        .map_err(|DuplicateField| input.corrupt("duplicate hash field"))?;
                }
                hash
            } else {
                let mut pairs = Vec::with_capacity(capacity(len));
                for _ in 0..len {
                    pairs.push((input.read_string()?, input.read_string()?));
                }
                load_hash(input, pairs.iter().map(|(f, v)| (&f[..], &v[..])))?
            };
            Value::Hash(hash)
        }
        types::HASH_ZIPMAP => {
            let blob = input.read_string()?;
            let pairs = ziplist::parse_zipmap(&blob).map_err(|e| input.integrity("Zipmap", e))?;
            Value::Hash(load_hash(input, pairs.into_iter())?)
        }
        types::LIST_ZIPLIST => {
            let blob = input.read_string()?;
            let elements = ziplist::parse(&blob).map_err(|e| input.integrity("List ziplist", e))?;
            Value::List(list_of(&elements))
        }
        types::SET_INTSET => {
            let blob = input.read_string()?;
            intset::parse(&blob).map_err(|e| input.integrity("Intset", e))?;
            Value::Set(Set::from_intset_bytes(&blob).map_err(|e| input.integrity("Intset", e))?)
        }
        types::SET_LISTPACK => {
            let blob = input.read_string()?;
            let elements =
                listpack::parse(&blob).map_err(|e| input.integrity("Set listpack", e))?;
            let mut members = Set::new();
            for element in elements {
                if !members.insert(&element.to_bytes()) {
                    return Err(input.integrity("Set listpack", "duplicate member"));
                }
            }
            Value::Set(members)
        }
        types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            let blob = input.read_string()?;
            let container = if kind == types::ZSET_ZIPLIST {
                "Zset ziplist"
            } else {
                "Zset listpack"
            };
            let elements = if kind == types::ZSET_ZIPLIST {
                ziplist::parse(&blob)
            } else {
                listpack::parse(&blob)
            }
            .map_err(|e| input.integrity(container, e))?;
            if elements.len() % 2 != 0 {
                return Err(input.integrity(container, "a member but no score"));
            }
            let mut set = SortedSet::new();
            // Redis keeps a loaded listpack as one unless it has too many entries.
            let keep = elements.len() / 2 <= latch_keyspace::compact::zset_max_entries();
            for pair in elements.chunks_exact(2) {
                let score = match pair[1] {
                    Element::Int(v) => v as f64,
                    Element::Str(text) => {
                        parse_double(text).ok_or_else(|| input.corrupt("unparsable score"))?
                    }
                };
                let member = pair[0].to_bytes();
                add_scored(input, &mut set, &member, score, keep).map_err(|e| match e {
                    RdbError::Corrupt { what, .. } => input.integrity(container, what),
                    other => other,
                })?;
            }
            Value::ZSet(set)
        }
        types::HASH_ZIPLIST | types::HASH_LISTPACK => {
            let blob = input.read_string()?;
            let container = if kind == types::HASH_ZIPLIST {
                "Hash ziplist"
            } else {
                "Hash listpack"
            };
            let elements = if kind == types::HASH_ZIPLIST {
                ziplist::parse(&blob)
            } else {
                listpack::parse(&blob)
            }
            .map_err(|e| input.integrity(container, e))?;
            if elements.len() % 2 != 0 {
                return Err(input.integrity(container, "a field but no value"));
            }
            // Kept in the file's order; Redis checks only the entry count here.
            let pairs: Vec<(Elem<'_>, Elem<'_>)> = elements
                .chunks_exact(2)
                .map(|pair| (pair[0].to_elem(), pair[1].to_elem()))
                .collect();
            let hash = Hash::load(&pairs, false).map_err(|DuplicateField| {
                let form = if kind == types::HASH_ZIPLIST {
                    "ziplist"
                } else {
                    "listpack"
                };
                input.integrity(container, format!("{form} with dup elements"))
            })?;
            Value::Hash(hash)
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let nodes = input.read_len()?;
            let mut list = List::new();
            for _ in 0..nodes {
                let container = if kind == types::LIST_QUICKLIST_2 {
                    input.read_len()?
                } else {
                    CONTAINER_PACKED
                };
                if container != CONTAINER_PACKED && container != CONTAINER_PLAIN {
                    return Err(input.integrity("Quicklist", "unknown node container"));
                }
                let blob = input.read_string()?;
                if blob.is_empty() {
                    return Err(input.corrupt("empty quicklist node"));
                }
                if container == CONTAINER_PLAIN {
                    list.push_node(Pack::from_elems([Elem::Bytes(&blob)]));
                    continue;
                }
                let elements = if kind == types::LIST_QUICKLIST {
                    ziplist::parse(&blob).map_err(|e| input.integrity("Ziplist", e))
                } else {
                    listpack::parse(&blob).map_err(|e| input.integrity("Listpack", e))
                }?;
                list.push_node(pack_of(&elements));
            }
            Value::List(list)
        }
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(stream::read_stream(input, kind)?))
        }
        types::MODULE | types::MODULE_2 => {
            return Err(RdbError::ModuleUnsupported {
                code: kind,
                offset: input.offset(),
            })
        }
        _ => {
            return Err(RdbError::UnknownType {
                code: kind,
                offset: input.offset(),
            })
        }
    };
    Ok((!is_empty_collection(&value)).then_some(value))
}

/// Adds a sorted set member, refusing NaN scores and duplicates as Redis does; with
/// `keep_form`, a listpack being loaded as one stays one.
fn add_scored<R: Read>(
    input: &Input<R>,
    set: &mut SortedSet,
    member: &[u8],
    score: f64,
    keep_form: bool,
) -> Result<(), RdbError> {
    if score.is_nan() {
        return Err(input.corrupt("sorted set score is NaN"));
    }
    let previous = if keep_form {
        set.insert_keep_form(member, score)
    } else {
        set.insert(member, score)
    };
    if previous.is_some() {
        return Err(input.corrupt("duplicate sorted set member"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(bytes: &[u8]) -> Input<&[u8]> {
        Input::new(bytes)
    }

    #[test]
    fn lengths_and_strings() {
        assert_eq!(input(&[0x41, 0x2c]).read_len().unwrap(), 300);
        assert_eq!(
            input(&[0x81, 0, 0, 0, 1, 0, 0, 0, 0]).read_len().unwrap(),
            1 << 32
        );
        assert!(input(&[0x82]).read_len().is_err());
        assert_eq!(input(&[0xc0, 0xff]).read_string().unwrap(), b"-1");
        assert_eq!(input(&[0xc1, 0x7f, 0xff]).read_string().unwrap(), b"-129");
        assert_eq!(
            input(&[0xc2, 0, 0, 0, 0x80]).read_string().unwrap(),
            b"-2147483648"
        );
        assert!(input(&[0xc4]).read_string().is_err());
        assert_eq!(input(b"\x03abc").read_string().unwrap(), b"abc");
        assert!(matches!(
            input(b"\x05abc").read_string(),
            Err(RdbError::Truncated { offset: 4 })
        ));
        // A claim of 4 GB over a few bytes of data fails without allocating it.
        assert!(input(&[0x80, 0xff, 0xff, 0xff, 0xff, 1, 2])
            .read_string()
            .is_err());
        // LZF: "aaaaaaaaaa".
        let lzf = [0xc3, 5, 10, 0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(input(&lzf).read_string().unwrap(), b"aaaaaaaaaa");
        let lying = [0xc3, 5, 11, 0x00, b'a', 0xe0, 0x00, 0x00];
        assert!(input(&lying).read_string().is_err());
    }

    #[test]
    fn text_doubles() {
        let mut i = input(b"\xfd\xfe\xff\x031.5\x04-inf");
        assert!(i.read_text_double().unwrap().is_nan());
        assert_eq!(i.read_text_double().unwrap(), f64::INFINITY);
        assert_eq!(i.read_text_double().unwrap(), f64::NEG_INFINITY);
        assert_eq!(i.read_text_double().unwrap(), 1.5);
        assert_eq!(i.read_text_double().unwrap(), f64::NEG_INFINITY);
    }

    #[test]
    fn empty_collections_are_none() {
        assert_eq!(read_object(&mut input(&[0]), types::LIST).unwrap(), None);
        assert_eq!(read_object(&mut input(&[0]), types::SET).unwrap(), None);
        assert_eq!(read_object(&mut input(&[0]), types::ZSET_2).unwrap(), None);
        assert_eq!(read_object(&mut input(&[0]), types::HASH).unwrap(), None);
        assert_eq!(
            read_object(&mut input(&[0]), types::LIST_QUICKLIST_2).unwrap(),
            None
        );
    }

    #[test]
    fn modules_are_unsupported() {
        assert!(matches!(
            read_object(&mut input(&[0]), types::MODULE_2),
            Err(RdbError::ModuleUnsupported { code: 7, .. })
        ));
        assert!(matches!(
            read_object(&mut input(&[0]), 8),
            Err(RdbError::UnknownType { code: 8, .. })
        ));
    }
}
