//! One stored key: its value, access time, deadline and bytes in a single allocation, which
//! a hash-table bucket reaches through one thin pointer.
//!
//! A bucket is then 8 bytes instead of the 64 a key, entry and hash took inline, so the
//! buckets a table keeps empty (it is 44-87.5% full) cost little, and a key costs one
//! allocation (plus its string value's) instead of two. The hash is not stored: the table
//! recomputes it from the key in the rare moments it needs it (growing, splitting, SCAN).
//! Room for a deadline is only made for keys that get one: a 16-byte key without a TTL takes
//! 48 bytes, one with a TTL 56.
//!
//! The allocation is a [`Header`], then the deadline (if there is room for one), then the
//! key's length (only for keys of 1 GiB and over), then the key's bytes. This module is the
//! only code that touches it through raw pointers.

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::fmt;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

use crate::clock::{Deadline, Now};
use crate::value::{Entry, Value};

/// What starts every key's allocation: 32 bytes.
#[repr(C)]
struct Header {
    value: Value,
    /// Seconds on the keyspace clock when the key was last read or written.
    access_s: u32,
    /// The key's length (up to [`SHORT_LEN_MASK`]) and the three flags below.
    meta: u32,
}

/// An `Option<Deadline>` follows the header.
const HAS_DEADLINE_ROOM: u32 = 1 << 31;
/// The key is too long for the meta bits: a `u64` length comes before its bytes.
const LONG_KEY: u32 = 1 << 30;
/// The string value was changed in place (APPEND, SETRANGE, SETBIT...): `OBJECT ENCODING`
/// says "raw" whatever its bytes, as Redis' string is then a plain sds. Cleared when the
/// value is replaced.
const RAW_STRING: u32 = 1 << 29;
const SHORT_LEN_MASK: u32 = RAW_STRING - 1;

const HEADER: usize = size_of::<Header>();
const DEADLINE: usize = size_of::<Option<Deadline>>();
const LENGTH: usize = size_of::<u64>();
/// The allocation of a 16-byte key without a deadline, the common case prefetches cover.
const SHORT_SLOT: usize = HEADER + 16;

/// Where the parts after the header sit, for one key's flags.
#[derive(Clone, Copy)]
struct Shape {
    meta: u32,
    key_len: usize,
}

impl Shape {
    fn new(key_len: usize, deadline_room: bool) -> Shape {
        let mut meta = if key_len <= SHORT_LEN_MASK as usize {
            key_len as u32
        } else {
            LONG_KEY
        };
        if deadline_room {
            meta |= HAS_DEADLINE_ROOM;
        }
        Shape { meta, key_len }
    }

    fn deadline_room(self) -> bool {
        self.meta & HAS_DEADLINE_ROOM != 0
    }

    fn length_at(self) -> usize {
        HEADER + if self.deadline_room() { DEADLINE } else { 0 }
    }

    fn key_at(self) -> usize {
        self.length_at() + if self.meta & LONG_KEY != 0 { LENGTH } else { 0 }
    }

    fn layout(self) -> Layout {
        let size = self
            .key_at()
            .checked_add(self.key_len)
            .expect("a key that exists fits the address space");
        Layout::from_size_align(size, align_of::<Header>())
            .expect("a key that exists has a layout")
            .pad_to_align()
    }
}

/// An owning thin pointer to a key's allocation, like a `Box` of it.
pub struct Slot(NonNull<Header>);

// SAFETY: a `Slot` owns its allocation exclusively, as a `Box<Header>` would; sending or
// sharing it is sending or sharing the `Value`, deadline and bytes inside, which are
// `Send + Sync`.
unsafe impl Send for Slot {}
// SAFETY: as above; `&Slot` only gives out shared references.
unsafe impl Sync for Slot {}

const _: () = {
    const fn is_send_and_sync<T: Send + Sync>() {}
    is_send_and_sync::<Value>();
};

impl Slot {
    pub(crate) fn new(key: &[u8], entry: Entry, access_s: u32) -> Slot {
        let shape = Shape::new(key.len(), entry.deadline.is_some());
        let base = allocate(shape);
        // SAFETY: `base` is a fresh allocation of `shape.layout()`, aligned for `Header`,
        // with room for every part `shape` places; nothing else refers to it yet.
        unsafe {
            base.cast::<Header>().as_ptr().write(Header {
                value: entry.value,
                access_s,
                meta: shape.meta,
            });
            write_tail(base, shape, entry.deadline, key);
        }
        Slot(base.cast())
    }

    fn base(&self) -> *mut u8 {
        self.0.as_ptr().cast()
    }

    fn header(&self) -> &Header {
        // SAFETY: the pointer is to a live, initialised header that this slot owns.
        unsafe { self.0.as_ref() }
    }

    fn header_mut(&mut self) -> &mut Header {
        // SAFETY: as in `header`, and `&mut self` makes the access exclusive.
        unsafe { self.0.as_mut() }
    }

    fn shape(&self) -> Shape {
        let meta = self.header().meta;
        let key_len = if meta & LONG_KEY == 0 {
            (meta & SHORT_LEN_MASK) as usize
        } else {
            let probe = Shape { meta, key_len: 0 };
            // SAFETY: a LONG_KEY allocation holds the key's length at `length_at`, written
            // by `write_tail`.
            unsafe { self.base().add(probe.length_at()).cast::<u64>().read() as usize }
        };
        Shape { meta, key_len }
    }

    pub fn key(&self) -> &[u8] {
        let shape = self.shape();
        // SAFETY: `write_tail` copied `key_len` bytes to `key_at`; they live as long as the
        // slot and are never changed.
        unsafe { std::slice::from_raw_parts(self.base().add(shape.key_at()), shape.key_len) }
    }

    pub fn value(&self) -> &Value {
        &self.header().value
    }

    pub fn value_mut(&mut self) -> &mut Value {
        &mut self.header_mut().value
    }

    pub fn deadline(&self) -> Option<Deadline> {
        if self.header().meta & HAS_DEADLINE_ROOM == 0 {
            return None;
        }
        // SAFETY: an allocation with deadline room holds an initialised `Option<Deadline>`
        // right after the header (aligned: the header is 32 bytes, aligned to 8).
        unsafe { self.base().add(HEADER).cast::<Option<Deadline>>().read() }
    }

    /// Whether the key's deadline has passed at `now`.
    pub fn is_passed(&self, now: Now) -> bool {
        self.deadline().is_some_and(|d| d.is_passed(now))
    }

    /// Sets or clears the deadline, moving the key to a larger allocation the first time it
    /// gets one. Callers keep the table's count of keys with deadlines.
    pub(crate) fn set_deadline(&mut self, deadline: Option<Deadline>) {
        let shape = self.shape();
        if !shape.deadline_room() {
            if deadline.is_none() {
                return;
            }
            self.move_to(Shape::new(shape.key_len, true));
        }
        // SAFETY: there is room for the deadline now (checked or just made), as in
        // `deadline`; `&mut self` makes the write exclusive.
        unsafe {
            self.base()
                .add(HEADER)
                .cast::<Option<Deadline>>()
                .write(deadline)
        }
    }

    /// Moves the key into a fresh allocation of `shape` (same key, with deadline room).
    fn move_to(&mut self, shape: Shape) {
        let old = self.shape();
        let base = allocate(shape);
        // SAFETY: the header is moved bit for bit into the new allocation (its value is not
        // dropped: the old allocation is freed without running drops), the key copied from
        // the old allocation, which is then freed once with the layout it was made with.
        unsafe {
            ptr::copy_nonoverlapping(self.base(), base.as_ptr(), HEADER);
            (*base.cast::<Header>().as_ptr()).meta = shape.meta | (old.meta & RAW_STRING);
            let key = std::slice::from_raw_parts(self.base().add(old.key_at()), old.key_len);
            write_tail(base, shape, None, key);
            dealloc(self.base(), old.layout());
        }
        self.0 = base.cast();
    }

    /// What `OBJECT ENCODING` reports: the value's own encoding, or "raw" for a string
    /// changed in place since it was set.
    pub fn encoding(&self) -> &'static str {
        match self.value() {
            Value::Str(_) if self.header().meta & RAW_STRING != 0 => "raw",
            value => value.encoding(),
        }
    }

    /// Whether the value is a string changed in place since it was set.
    pub fn is_raw_string(&self) -> bool {
        matches!(self.value(), Value::Str(_)) && self.header().meta & RAW_STRING != 0
    }

    /// Marks the string value as changed in place (`raw`), or, with false, as set whole.
    pub fn set_raw_string(&mut self, raw: bool) {
        let header = self.header_mut();
        if raw {
            header.meta |= RAW_STRING;
        } else {
            header.meta &= !RAW_STRING;
        }
    }

    /// Seconds on the keyspace clock when the key was last read or written.
    pub fn access_s(&self) -> u32 {
        self.header().access_s
    }

    pub(crate) fn set_access_s(&mut self, access_s: u32) {
        self.header_mut().access_s = access_s;
    }

    /// Puts `entry` in place of the key's value and deadline; returns the ones it had.
    pub(crate) fn replace(&mut self, entry: Entry) -> Entry {
        let deadline = self.deadline();
        self.set_deadline(entry.deadline);
        self.set_raw_string(false);
        let value = std::mem::replace(self.value_mut(), entry.value);
        Entry { value, deadline }
    }

    /// Starts loading the header and a short key (a hint; never waits). The allocation
    /// may straddle two cache lines: its 48th byte is prefetched too.
    #[inline]
    pub(crate) fn prefetch(&self) {
        let base = self.base().cast_const();
        crate::table::prefetch_address(base);
        crate::table::prefetch_address(base.wrapping_add(SHORT_SLOT - 1));
    }

    /// The value and deadline, taken out; the allocation is freed.
    pub(crate) fn into_entry(self) -> Entry {
        let deadline = self.deadline();
        let layout = self.shape().layout();
        let base = self.base();
        std::mem::forget(self);
        // SAFETY: `self` is forgotten, so the value is read out exactly once and the
        // allocation (of `layout`, from `allocate`) freed exactly once, after the read.
        unsafe {
            let value = ptr::addr_of!((*base.cast::<Header>()).value).read();
            dealloc(base, layout);
            Entry { value, deadline }
        }
    }
}

fn allocate(shape: Shape) -> NonNull<u8> {
    let layout = shape.layout();
    // SAFETY: the layout has a non-zero size (the header alone is 32 bytes).
    let raw = unsafe { alloc(layout) };
    NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Writes what follows the header: the deadline (if `shape` has room), the long key's
/// length, the key.
///
/// # Safety
/// `base` must be an allocation of `shape.layout()` that nothing else is using.
unsafe fn write_tail(base: NonNull<u8>, shape: Shape, deadline: Option<Deadline>, key: &[u8]) {
    let base = base.as_ptr();
    // SAFETY: the caller guarantees `base` spans `shape.layout()`, which has room at
    // `HEADER` (deadline), `length_at` (long length) and `key_at` (`key.len()` bytes).
    unsafe {
        if shape.deadline_room() {
            base.add(HEADER).cast::<Option<Deadline>>().write(deadline);
        }
        if shape.meta & LONG_KEY != 0 {
            base.add(shape.length_at())
                .cast::<u64>()
                .write(key.len() as u64);
        }
        ptr::copy_nonoverlapping(key.as_ptr(), base.add(shape.key_at()), key.len());
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let layout = self.shape().layout();
        // SAFETY: the header is initialised and owned by this slot; its value is dropped in
        // place once, then the allocation made with `layout` is freed.
        unsafe {
            ptr::drop_in_place(ptr::addr_of_mut!((*self.0.as_ptr()).value));
            dealloc(self.base(), layout);
        }
    }
}

impl Clone for Slot {
    fn clone(&self) -> Slot {
        let entry = Entry {
            value: self.value().clone(),
            deadline: self.deadline(),
        };
        let mut copy = Slot::new(self.key(), entry, self.access_s());
        copy.header_mut().meta |= self.header().meta & RAW_STRING;
        copy
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", self.value())
            .field("deadline", &self.deadline())
            .field("access_s", &self.access_s())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline(ms: i64) -> Option<Deadline> {
        let now = Now {
            mono_ms: 1000,
            wall_ms: 1_700_000_000_000,
            wall_offset_us: (1_700_000_000_000 - 1000) * 1000,
            loading: false,
            keep_passed: false,
        };
        Deadline::after(now, ms)
    }

    #[test]
    fn a_short_key_without_a_deadline_takes_48_bytes() {
        assert_eq!(size_of::<Header>(), 32);
        assert_eq!(size_of::<Slot>(), 8);
        assert_eq!(size_of::<Option<Slot>>(), 8);
        assert_eq!(Shape::new(16, false).layout().size(), 48);
        assert_eq!(Shape::new(16, true).layout().size(), 56);
        assert_eq!(Shape::new(17, false).layout().size(), 56);
    }

    #[test]
    fn keys_values_deadlines_and_access_times_round_trip() {
        for len in [0usize, 1, 7, 8, 16, 100, 5000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for start in [None, deadline(10)] {
                let entry = Entry {
                    value: Value::Str(b"v".to_vec()),
                    deadline: start,
                };
                let mut slot = Slot::new(&key, entry.clone(), 7);
                assert_eq!(slot.key(), &key[..]);
                assert_eq!(slot.value(), &entry.value);
                assert_eq!(slot.deadline(), start);
                assert_eq!(slot.access_s(), 7);
                slot.set_access_s(9);
                *slot.value_mut() = Value::List(crate::List::from(vec![b"a".to_vec()]));
                // Gaining a deadline may move the key; everything else stays.
                slot.set_deadline(deadline(20));
                assert_eq!(slot.deadline(), deadline(20));
                assert_eq!(slot.key(), &key[..]);
                assert_eq!(slot.access_s(), 9);
                slot.set_deadline(None);
                assert_eq!(slot.deadline(), None);
                let copy = slot.clone();
                assert_eq!(copy.key(), &key[..]);
                assert_eq!(copy.access_s(), 9);
                assert_eq!(copy.value(), slot.value());
                let old = slot.replace(Entry {
                    value: Value::Str(b"w".to_vec()),
                    deadline: deadline(30),
                });
                assert!(matches!(old.value, Value::List(_)));
                assert_eq!(old.deadline, None);
                assert_eq!(slot.deadline(), deadline(30));
                assert_eq!(slot.value(), &Value::Str(b"w".to_vec()));
                drop(slot);
                assert_eq!(copy.key(), &key[..]);
                let taken = copy.into_entry();
                assert!(matches!(taken.value, Value::List(_)));
                assert_eq!(taken.deadline, None);
            }
        }
    }

    #[test]
    fn a_raw_string_stays_raw_until_replaced() {
        let entry = |bytes: &[u8]| Entry {
            value: Value::Str(bytes.to_vec()),
            deadline: None,
        };
        let mut slot = Slot::new(b"key", entry(b"1234"), 1);
        assert_eq!(slot.encoding(), "int");
        slot.set_raw_string(true);
        assert_eq!(slot.encoding(), "raw");
        // Moving to a larger allocation (a first deadline) and copying keep the mark.
        slot.set_deadline(deadline(10));
        assert_eq!(slot.encoding(), "raw");
        assert_eq!(slot.key(), b"key");
        assert_eq!(slot.clone().encoding(), "raw");
        slot.replace(entry(b"5678"));
        assert_eq!(slot.encoding(), "int");
        // The mark is not part of the key's length.
        let long = vec![b'k'; 100_000];
        let mut slot = Slot::new(&long, entry(b"x"), 1);
        slot.set_raw_string(true);
        assert_eq!(slot.key(), &long[..]);
        assert_eq!(slot.encoding(), "raw");
    }

    #[test]
    fn long_keys_keep_their_length_before_their_bytes() {
        // The u64 length path, through `Shape` (a 1 GiB key is not allocated here).
        assert_eq!(
            Shape::new(SHORT_LEN_MASK as usize + 1, false).meta & LONG_KEY,
            LONG_KEY
        );
        assert_eq!(
            Shape::new(SHORT_LEN_MASK as usize, false).meta & LONG_KEY,
            0
        );
        let long = LONG_KEY as usize + 5;
        let plain = Shape::new(long, false);
        let timed = Shape::new(long, true);
        assert_eq!(plain.key_at(), HEADER + LENGTH);
        assert_eq!(timed.key_at(), HEADER + DEADLINE + LENGTH);
        assert!(timed.layout().size() >= timed.key_at() + long);
        assert_eq!(Shape::new(10, true).key_at(), HEADER + DEADLINE);
    }
}
