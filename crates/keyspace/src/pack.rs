//! A run of small elements in one exact-size allocation: the compact form of small hashes,
//! sorted sets and lists (Redis calls its own format a listpack; this one is Latch's).
//!
//! A [`Pack`] is one thin pointer (8 bytes, so a value holding it stays small) to
//! `[u32 data length][u32 element count][data]`, allocated to exactly that size: jemalloc's
//! size classes already round it, and growing inside a class reallocates in place. Elements
//! are scanned from the front; the collections that use a pack keep it short (Redis'
//! `*-max-listpack-*` thresholds) and turn into their large form past that.
//!
//! Each element is a byte string, an integer or (for sorted-set scores) a double. A string
//! that is a canonical decimal integer (Redis' `string2ll` rules) is stored as the integer
//! and read back as the same bytes. The first byte says what follows:
//!
//! | first byte | element | size |
//! |---|---|---|
//! | `0x00..=0x7f` | the integer 0..=127 | 1 |
//! | `0x80..=0xbf` | a string of 0..=63 bytes | 1 + len |
//! | `0xc0..=0xdf` | a string of 64..=8255 bytes (13 bits of length - 64, two bytes) | 2 + len |
//! | `0xf0` | an `i16` | 3 |
//! | `0xf1` | an `i32` | 5 |
//! | `0xf2` | an `i64` | 9 |
//! | `0xf3` | an `f64` | 9 |
//! | `0xf4` | a string, `u32` length | 5 + len |
//!
//! Numbers are little-endian. This module is the only code that touches the allocation
//! through raw pointers.

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::fmt;
use std::ptr::NonNull;

use crate::value::parse_i64_strict;

/// One element, borrowed from a pack or about to be written into one.
#[derive(Clone, Copy, Debug)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    Float(f64),
}

impl<'a> Elem<'a> {
    /// The element as the bytes a client sees (integers in decimal; doubles as Rust prints
    /// them, which only sorted-set scores use, and those are read with [`Elem::as_f64`]).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Bytes(bytes) => bytes.to_vec(),
            Elem::Int(n) => n.to_string().into_bytes(),
            Elem::Float(x) => x.to_string().into_bytes(),
        }
    }

    /// Appends the element's bytes to `out` (no allocation for integers beyond `out`'s).
    pub fn append_to(self, out: &mut Vec<u8>) {
        match self {
            Elem::Bytes(bytes) => out.extend_from_slice(bytes),
            Elem::Int(n) => out.extend_from_slice(itoa_buf(n).as_slice()),
            Elem::Float(x) => out.extend_from_slice(x.to_string().as_bytes()),
        }
    }

    /// The bytes, when the element is a string.
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            Elem::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// The element as a number (integers and doubles; strings are not parsed).
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Elem::Bytes(_) => None,
            Elem::Int(n) => Some(n as f64),
            Elem::Float(x) => Some(x),
        }
    }

    /// The element as an integer, when it is stored as one.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Elem::Int(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the element reads as `other`.
    pub fn eq_bytes(self, other: &[u8]) -> bool {
        match self {
            Elem::Bytes(bytes) => bytes == other,
            // Only canonical integers are stored as integers, so a quick length bound
            // first: an i64 has at most 20 characters.
            Elem::Int(n) => other.len() <= 20 && parse_i64_strict(other) == Some(n),
            Elem::Float(_) => false,
        }
    }

    /// The bytes this element takes in a pack.
    pub fn encoded_len(self) -> usize {
        match Encoded::of(self) {
            Encoded::Small(_) => 1,
            Encoded::I16(_) => 3,
            Encoded::I32(_) => 5,
            Encoded::I64(_) | Encoded::F64(_) => 9,
            Encoded::Str(bytes) => header_len(bytes.len()) + bytes.len(),
        }
    }
}

/// A small stack buffer for an integer's decimal form.
struct DecimalBuf {
    bytes: [u8; 20],
    len: usize,
}

impl DecimalBuf {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[20 - self.len..]
    }
}

fn itoa_buf(n: i64) -> DecimalBuf {
    let mut buf = DecimalBuf {
        bytes: [0; 20],
        len: 0,
    };
    let negative = n < 0;
    let mut magnitude = n.unsigned_abs();
    loop {
        buf.len += 1;
        buf.bytes[20 - buf.len] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        buf.len += 1;
        buf.bytes[20 - buf.len] = b'-';
    }
    buf
}

/// How an element is written: the smallest form that holds it.
enum Encoded<'a> {
    Small(u8),
    I16(i16),
    I32(i32),
    I64(i64),
    F64(f64),
    Str(&'a [u8]),
}

impl<'a> Encoded<'a> {
    fn of(elem: Elem<'a>) -> Encoded<'a> {
        match elem {
            Elem::Bytes(bytes) => match (bytes.len() <= 20)
                .then(|| parse_i64_strict(bytes))
                .flatten()
            {
                Some(n) => Encoded::int(n),
                None => Encoded::Str(bytes),
            },
            Elem::Int(n) => Encoded::int(n),
            Elem::Float(x) => Encoded::F64(x),
        }
    }

    fn int(n: i64) -> Encoded<'a> {
        if (0..=127).contains(&n) {
            Encoded::Small(n as u8)
        } else if let Ok(n) = i16::try_from(n) {
            Encoded::I16(n)
        } else if let Ok(n) = i32::try_from(n) {
            Encoded::I32(n)
        } else {
            Encoded::I64(n)
        }
    }

    fn write(&self, out: &mut [u8]) {
        match *self {
            Encoded::Small(n) => out[0] = n,
            Encoded::I16(n) => {
                out[0] = 0xf0;
                out[1..3].copy_from_slice(&n.to_le_bytes());
            }
            Encoded::I32(n) => {
                out[0] = 0xf1;
                out[1..5].copy_from_slice(&n.to_le_bytes());
            }
            Encoded::I64(n) => {
                out[0] = 0xf2;
                out[1..9].copy_from_slice(&n.to_le_bytes());
            }
            Encoded::F64(x) => {
                out[0] = 0xf3;
                out[1..9].copy_from_slice(&x.to_bits().to_le_bytes());
            }
            Encoded::Str(bytes) => {
                let len = bytes.len();
                let at = header_len(len);
                if len <= 63 {
                    out[0] = 0x80 | len as u8;
                } else if len <= LONG_STR_MAX {
                    let stored = len - 64;
                    out[0] = 0xc0 | (stored >> 8) as u8;
                    out[1] = stored as u8;
                } else {
                    out[0] = 0xf4;
                    out[1..5].copy_from_slice(&(len as u32).to_le_bytes());
                }
                out[at..at + len].copy_from_slice(bytes);
            }
        }
    }
}

/// The longest string with a two-byte header.
const LONG_STR_MAX: usize = 64 + 0x1fff;

fn header_len(len: usize) -> usize {
    if len <= 63 {
        1
    } else if len <= LONG_STR_MAX {
        2
    } else {
        5
    }
}

/// Reads the element at the start of `data`: the element and its encoded size.
fn decode(data: &[u8]) -> (Elem<'_>, usize) {
    let first = data[0];
    match first {
        0x00..=0x7f => (Elem::Int(first as i64), 1),
        0x80..=0xbf => {
            let len = (first & 0x3f) as usize;
            (Elem::Bytes(&data[1..1 + len]), 1 + len)
        }
        0xc0..=0xdf => {
            let len = ((((first & 0x1f) as usize) << 8) | data[1] as usize) + 64;
            (Elem::Bytes(&data[2..2 + len]), 2 + len)
        }
        0xf0 => (Elem::Int(i16::from_le_bytes([data[1], data[2]]) as i64), 3),
        0xf1 => (
            Elem::Int(i32::from_le_bytes(data[1..5].try_into().unwrap()) as i64),
            5,
        ),
        0xf2 => (
            Elem::Int(i64::from_le_bytes(data[1..9].try_into().unwrap())),
            9,
        ),
        0xf3 => (
            Elem::Float(f64::from_bits(u64::from_le_bytes(
                data[1..9].try_into().unwrap(),
            ))),
            9,
        ),
        0xf4 => {
            let len = u32::from_le_bytes(data[1..5].try_into().unwrap()) as usize;
            (Elem::Bytes(&data[5..5 + len]), 5 + len)
        }
        _ => unreachable!("a pack holds only bytes this module wrote"),
    }
}

/// The header before the data.
#[repr(C)]
struct Header {
    /// Bytes of data after the header.
    len: u32,
    /// Elements in the data.
    count: u32,
}

const HEADER: usize = std::mem::size_of::<Header>();
/// Bytes of the header before a pack's data.
pub const HEADER_BYTES: usize = HEADER;
/// The most data a pack holds: its offsets are `u32`s.
pub const MAX_DATA: usize = u32::MAX as usize - HEADER;

/// A run of elements in one allocation. See the module documentation.
pub struct Pack {
    ptr: NonNull<Header>,
}

// SAFETY: a Pack owns its allocation outright (no sharing, no interior mutability), like
// a Box<[u8]>.
unsafe impl Send for Pack {}
// SAFETY: shared references only read the allocation.
unsafe impl Sync for Pack {}

fn layout(data_len: usize) -> Layout {
    assert!(data_len <= MAX_DATA, "a pack holds at most 4 GiB");
    Layout::from_size_align(HEADER + data_len, std::mem::align_of::<Header>()).expect("pack layout")
}

impl Pack {
    /// An empty pack (one 8-byte allocation).
    pub fn new() -> Pack {
        let layout = layout(0);
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) } as *mut Header;
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: freshly allocated with room and alignment for a Header.
        unsafe { ptr.as_ptr().write(Header { len: 0, count: 0 }) };
        Pack { ptr }
    }

    /// A pack of these elements, in order.
    pub fn from_elems<'a>(elems: impl IntoIterator<Item = Elem<'a>>) -> Pack {
        let mut pack = Pack::new();
        for elem in elems {
            pack.push_back(elem);
        }
        pack
    }

    /// A pack of `count` elements whose `len` encoded bytes `fill` writes (how a
    /// compressed list node comes back). The bytes must be ones a pack held: anything
    /// else makes later reads panic.
    pub fn from_encoded(len: usize, count: usize, fill: impl FnOnce(&mut [u8])) -> Pack {
        let mut pack = Pack::new();
        pack.resize(len, count);
        fill(pack.data_mut());
        pack
    }

    fn header(&self) -> &Header {
        // SAFETY: the pointer is to a live, initialised header this pack owns.
        unsafe { self.ptr.as_ref() }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.header().count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of encoded elements.
    pub fn data_len(&self) -> usize {
        self.header().len as usize
    }

    /// The bytes the allocation takes (before the allocator's rounding).
    pub fn heap_bytes(&self) -> usize {
        HEADER + self.data_len()
    }

    /// The encoded elements.
    pub fn data(&self) -> &[u8] {
        // SAFETY: `len` bytes after the header are initialised and owned by this pack.
        unsafe {
            std::slice::from_raw_parts(
                (self.ptr.as_ptr() as *const u8).add(HEADER),
                self.data_len(),
            )
        }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        let len = self.data_len();
        // SAFETY: as in `data`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut((self.ptr.as_ptr() as *mut u8).add(HEADER), len) }
    }

    /// Resizes the data to `new_len` bytes (new bytes are zero until written) and sets
    /// the element count.
    fn resize(&mut self, new_len: usize, count: usize) {
        let old_len = self.data_len();
        if new_len != old_len {
            let new_layout = layout(new_len);
            // SAFETY: the pointer was allocated with `layout(old_len)`; the new size is
            // non-zero and fits (checked by `layout`).
            let raw = unsafe {
                realloc(
                    self.ptr.as_ptr() as *mut u8,
                    layout(old_len),
                    new_layout.size(),
                )
            } as *mut Header;
            let Some(ptr) = NonNull::new(raw) else {
                handle_alloc_error(new_layout)
            };
            self.ptr = ptr;
            if new_len > old_len {
                // SAFETY: the bytes past the old length are inside the new allocation.
                unsafe {
                    std::ptr::write_bytes(
                        (ptr.as_ptr() as *mut u8).add(HEADER + old_len),
                        0,
                        new_len - old_len,
                    )
                };
            }
        }
        // SAFETY: the header is live and owned; `&mut self` makes the write exclusive.
        unsafe {
            let header = self.ptr.as_mut();
            header.len = new_len as u32;
            header.count = count as u32;
        }
    }

    /// The elements from the front.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            data: self.data(),
            at: 0,
        }
    }

    /// The elements with the byte offset each starts at.
    pub fn iter_offsets(&self) -> IterOffsets<'_> {
        IterOffsets {
            data: self.data(),
            at: 0,
        }
    }

    /// The element starting at byte `offset` and its encoded size.
    pub fn at(&self, offset: usize) -> (Elem<'_>, usize) {
        decode(&self.data()[offset..])
    }

    /// The element at `index`, counting from the front (a scan).
    pub fn get(&self, index: usize) -> Option<Elem<'_>> {
        self.iter().nth(index)
    }

    /// The byte offset of element `index` (`data_len()` for `index == len()`).
    pub fn offset_of(&self, index: usize) -> usize {
        if index >= self.len() {
            return self.data_len();
        }
        self.iter_offsets()
            .nth(index)
            .map_or(self.data_len(), |(at, _)| at)
    }

    /// Inserts elements before the element at byte `offset` (`data_len()` appends).
    pub fn insert_at(&mut self, offset: usize, elems: &[Elem<'_>]) {
        let encoded: Vec<Encoded<'_>> = elems.iter().map(|e| Encoded::of(*e)).collect();
        let added: usize = elems.iter().map(|e| e.encoded_len()).sum();
        let old_len = self.data_len();
        assert!(offset <= old_len);
        let count = self.len() + elems.len();
        self.resize(old_len + added, count);
        let data = self.data_mut();
        data.copy_within(offset..old_len, offset + added);
        let mut at = offset;
        for (elem, enc) in elems.iter().zip(&encoded) {
            let size = elem.encoded_len();
            enc.write(&mut data[at..at + size]);
            at += size;
        }
    }

    pub fn push_back(&mut self, elem: Elem<'_>) {
        self.insert_at(self.data_len(), &[elem]);
    }

    pub fn push_front(&mut self, elem: Elem<'_>) {
        self.insert_at(0, &[elem]);
    }

    /// Removes `count` elements starting at byte `offset`.
    pub fn remove_at(&mut self, offset: usize, count: usize) {
        let mut end = offset;
        for _ in 0..count {
            end += self.at(end).1;
        }
        self.remove_bytes(offset, end, count);
    }

    /// Removes the bytes `start..end`, which hold `count` whole elements.
    fn remove_bytes(&mut self, start: usize, end: usize, count: usize) {
        let old_len = self.data_len();
        self.data_mut().copy_within(end..old_len, start);
        let remaining = self.len() - count;
        self.resize(old_len - (end - start), remaining);
    }

    /// Replaces the element at byte `offset` with `elem`.
    pub fn replace_at(&mut self, offset: usize, elem: Elem<'_>) {
        let old_size = self.at(offset).1;
        let new_size = elem.encoded_len();
        let old_len = self.data_len();
        let count = self.len();
        if new_size > old_size {
            self.resize(old_len + new_size - old_size, count);
            self.data_mut()
                .copy_within(offset + old_size..old_len, offset + new_size);
        } else if new_size < old_size {
            self.data_mut()
                .copy_within(offset + old_size..old_len, offset + new_size);
            self.resize(old_len - (old_size - new_size), count);
        }
        Encoded::of(elem).write(&mut self.data_mut()[offset..offset + new_size]);
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.resize(0, 0);
    }

    /// Inserts one element before the element at byte `offset` (`data_len()` appends),
    /// without the temporary that [`Pack::insert_at`] builds.
    pub fn insert_one(&mut self, offset: usize, elem: Elem<'_>) {
        let size = elem.encoded_len();
        let old_len = self.data_len();
        assert!(offset <= old_len);
        let count = self.len() + 1;
        self.resize(old_len + size, count);
        let data = self.data_mut();
        data.copy_within(offset..old_len, offset + size);
        Encoded::of(elem).write(&mut data[offset..offset + size]);
    }

    /// The byte offset of the last element (a scan from the front), `None` when empty.
    pub fn last_offset(&self) -> Option<usize> {
        self.iter_offsets().last().map(|(at, _)| at)
    }

    /// Removes the bytes `start..end`, which hold `count` whole elements (offsets from
    /// [`Pack::iter_offsets`] or [`Pack::offset_of`]).
    pub fn remove_range(&mut self, start: usize, end: usize, count: usize) {
        assert!(start <= end && end <= self.data_len() && count <= self.len());
        self.remove_bytes(start, end, count);
    }

    /// Moves the elements from byte `offset` on (`index` of them before it) into a new
    /// pack, which it returns.
    pub fn split_off(&mut self, offset: usize, index: usize) -> Pack {
        let old_len = self.data_len();
        let count = self.len();
        assert!(offset <= old_len && index <= count);
        let mut tail = Pack::new();
        tail.resize(old_len - offset, count - index);
        tail.data_mut().copy_from_slice(&self.data()[offset..]);
        self.resize(offset, index);
        tail
    }

    /// Appends every element of `other`, in order.
    pub fn append(&mut self, other: &Pack) {
        let old_len = self.data_len();
        self.resize(old_len + other.data_len(), self.len() + other.len());
        self.data_mut()[old_len..].copy_from_slice(other.data());
    }

    /// Calls `f` with each element from byte `offset` on while it returns true; returns
    /// the offset it stopped at (after the element `f` refused, or the end).
    #[inline]
    pub fn for_each_from(&self, mut offset: usize, mut f: impl FnMut(Elem<'_>) -> bool) -> usize {
        let data = self.data();
        while offset < data.len() {
            let first = data[offset];
            // Short strings first: the common case, decoded inline.
            let (elem, size) = if first & 0xc0 == 0x80 {
                let len = (first & 0x3f) as usize;
                (Elem::Bytes(&data[offset + 1..offset + 1 + len]), 1 + len)
            } else {
                decode(&data[offset..])
            };
            offset += size;
            if !f(elem) {
                break;
            }
        }
        offset
    }

    /// Keeps the elements `keep` accepts, in order, and returns how many it removed.
    pub fn retain(&mut self, mut keep: impl FnMut(Elem<'_>) -> bool) -> usize {
        let (mut read, mut write, mut removed) = (0, 0, 0);
        let len = self.data_len();
        while read < len {
            let (kept, size) = {
                let (elem, size) = decode(&self.data()[read..]);
                (keep(elem), size)
            };
            if kept {
                if write != read {
                    self.data_mut().copy_within(read..read + size, write);
                }
                write += size;
            } else {
                removed += 1;
            }
            read += size;
        }
        if removed > 0 {
            let count = self.len() - removed;
            self.resize(write, count);
        }
        removed
    }
}

impl Default for Pack {
    fn default() -> Pack {
        Pack::new()
    }
}

impl Drop for Pack {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout; nothing refers to it after the drop.
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout(self.data_len())) }
    }
}

impl Clone for Pack {
    fn clone(&self) -> Pack {
        let mut copy = Pack::new();
        copy.resize(self.data_len(), self.len());
        copy.data_mut().copy_from_slice(self.data());
        copy
    }
}

impl PartialEq for Pack {
    fn eq(&self, other: &Pack) -> bool {
        self.len() == other.len() && self.data() == other.data()
    }
}

impl Eq for Pack {}

impl fmt::Debug for Pack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The elements of a pack, from the front.
pub struct Iter<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.at >= self.data.len() {
            return None;
        }
        let (elem, size) = decode(&self.data[self.at..]);
        self.at += size;
        Some(elem)
    }
}

/// The elements of a pack with their byte offsets.
pub struct IterOffsets<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Iterator for IterOffsets<'a> {
    type Item = (usize, Elem<'a>);

    fn next(&mut self) -> Option<(usize, Elem<'a>)> {
        if self.at >= self.data.len() {
            return None;
        }
        let start = self.at;
        let (elem, size) = decode(&self.data[start..]);
        self.at += size;
        Some((start, elem))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strings(pack: &Pack) -> Vec<Vec<u8>> {
        pack.iter().map(Elem::to_vec).collect()
    }

    #[test]
    fn integers_take_their_smallest_form() {
        for (text, size) in [
            (&b"0"[..], 1),
            (b"127", 1),
            (b"128", 3),
            (b"-1", 3),
            (b"-32768", 3),
            (b"32768", 5),
            (b"2147483648", 9),
            (b"-9223372036854775808", 9),
            (b"01", 3),
            (b"+1", 3),
            (b"-0", 3),
        ] {
            assert_eq!(Elem::Bytes(text).encoded_len(), size, "{text:?}");
            let pack = Pack::from_elems([Elem::Bytes(text)]);
            assert_eq!(pack.data_len(), size);
            assert_eq!(strings(&pack), vec![text.to_vec()]);
            assert!(pack.get(0).unwrap().eq_bytes(text));
        }
    }

    #[test]
    fn string_headers_grow_with_the_length() {
        for (len, header) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (LONG_STR_MAX, 2),
            (LONG_STR_MAX + 1, 5),
        ] {
            let text = vec![b'x'; len];
            let pack = Pack::from_elems([Elem::Bytes(&text), Elem::Bytes(b"after")]);
            assert_eq!(pack.data_len(), header + len + 6);
            assert_eq!(strings(&pack), vec![text.clone(), b"after".to_vec()]);
        }
    }

    #[test]
    fn floats_keep_every_bit() {
        for x in [0.5, -0.0, f64::INFINITY, f64::MIN_POSITIVE, 1e300] {
            let pack = Pack::from_elems([Elem::Float(x)]);
            assert_eq!(
                pack.get(0).unwrap().as_f64().unwrap().to_bits(),
                x.to_bits()
            );
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(usize, Vec<Vec<u8>>),
        Remove(usize, usize),
        Replace(usize, Vec<u8>),
    }

    fn element() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            (0i64..300).prop_map(|n| n.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(any::<u8>(), 8000..8400),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<usize>(), proptest::collection::vec(element(), 1..4))
                .prop_map(|(i, e)| Op::Insert(i, e)),
            (any::<usize>(), 1usize..3).prop_map(|(i, n)| Op::Remove(i, n)),
            (any::<usize>(), element()).prop_map(|(i, e)| Op::Replace(i, e)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn behaves_as_a_vector_of_strings(ops in proptest::collection::vec(op(), 1..40)) {
            let mut pack = Pack::new();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(i, elems) => {
                        let index = i % (model.len() + 1);
                        let offset = pack.offset_of(index);
                        let borrowed: Vec<Elem<'_>> =
                            elems.iter().map(|e| Elem::Bytes(e)).collect();
                        pack.insert_at(offset, &borrowed);
                        for (k, e) in elems.into_iter().enumerate() {
                            model.insert(index + k, e);
                        }
                    }
                    Op::Remove(i, n) if !model.is_empty() => {
                        let index = i % model.len();
                        let n = n.min(model.len() - index);
                        pack.remove_at(pack.offset_of(index), n);
                        model.drain(index..index + n);
                    }
                    Op::Replace(i, e) if !model.is_empty() => {
                        let index = i % model.len();
                        pack.replace_at(pack.offset_of(index), Elem::Bytes(&e));
                        model[index] = e;
                    }
                    _ => {}
                }
                prop_assert_eq!(pack.len(), model.len());
                prop_assert_eq!(strings(&pack), model.clone());
                let copy = pack.clone();
                prop_assert_eq!(&copy, &pack);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum SplitOp {
        InsertOne(usize, Vec<u8>),
        SplitAppend(usize),
        RemoveRange(usize, usize),
        RetainNot(Vec<u8>),
    }

    fn split_op() -> impl Strategy<Value = SplitOp> {
        prop_oneof![
            (any::<usize>(), element()).prop_map(|(i, e)| SplitOp::InsertOne(i, e)),
            any::<usize>().prop_map(SplitOp::SplitAppend),
            (any::<usize>(), 0usize..4).prop_map(|(i, n)| SplitOp::RemoveRange(i, n)),
            (0i64..4).prop_map(|n| SplitOp::RetainNot(n.to_string().into_bytes())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn split_append_retain_and_last_agree_with_a_vector(
            ops in proptest::collection::vec(split_op(), 1..40)
        ) {
            let mut pack = Pack::new();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for op in ops {
                match op {
                    SplitOp::InsertOne(i, e) => {
                        let index = i % (model.len() + 1);
                        pack.insert_one(pack.offset_of(index), Elem::Bytes(&e));
                        model.insert(index, e);
                    }
                    SplitOp::SplitAppend(i) => {
                        let index = i % (model.len() + 1);
                        let mut tail = pack.split_off(pack.offset_of(index), index);
                        prop_assert_eq!(pack.len(), index);
                        prop_assert_eq!(strings(&tail), model[index..].to_vec());
                        prop_assert_eq!(strings(&pack), model[..index].to_vec());
                        // Put it back together, the other way round once.
                        std::mem::swap(&mut pack, &mut tail);
                        let head = tail;
                        let mut joined = head;
                        joined.append(&pack);
                        pack = joined;
                    }
                    SplitOp::RemoveRange(i, n) => {
                        let index = i % (model.len() + 1);
                        let n = n.min(model.len() - index);
                        let start = pack.offset_of(index);
                        let end = pack.offset_of(index + n);
                        pack.remove_range(start, end, n);
                        model.drain(index..index + n);
                    }
                    SplitOp::RetainNot(unwanted) => {
                        let removed = pack.retain(|e| !e.eq_bytes(&unwanted));
                        let before = model.len();
                        model.retain(|e| *e != unwanted);
                        prop_assert_eq!(removed, before - model.len());
                    }
                }
                prop_assert_eq!(pack.len(), model.len());
                prop_assert_eq!(strings(&pack), model.clone());
                let last = pack.last_offset().map(|at| pack.at(at).0.to_vec());
                prop_assert_eq!(last, model.last().cloned());
            }
        }
    }
}
