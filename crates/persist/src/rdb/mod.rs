//! RDB, Redis' snapshot format, as Redis 7.0 writes it (version 10), and the `DUMP` /
//! `RESTORE` payloads built from the same value encoding.
//!
//! A file is the magic `REDIS0010`, then opcodes: aux fields, function libraries,
//! `SELECTDB`/`RESIZEDB` per database, keys (each optionally preceded by an expiry),
//! and `EOF` followed by a CRC-64 of everything before it.
//!
//! - [`Writer`] writes a file, choosing the encodings Redis 7.0 would for each value.
//! - [`Reader`] reads files from every Redis version up to 7.2 (RDB 1 to 11), yielding
//!   [`Item`]s.
//! - [`dump_payload`] and [`restore_payload`] handle single values.
//!
//! Inside: `encode`/`decode` hold the value encodings, `listpack`, `ziplist` and `intset`
//! the compact containers stored as strings, `stream` the stream layout.

mod decode;
mod encode;
mod error;
mod intset;
mod listpack;
mod payload;
mod reader;
mod stream;
mod writer;
mod ziplist;

#[cfg(test)]
mod tests;

pub use error::RdbError;
pub use payload::{
    dump_functions, dump_payload, restore_functions, restore_payload, restore_payload_checking,
};
pub use reader::{Access, Item, Reader};
pub use writer::Writer;

/// The RDB version written (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;

/// Object type bytes.
pub(crate) mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    /// Redis 7.2 (RDB 11).
    pub const SET_LISTPACK: u8 = 20;
    /// Redis 7.2 (RDB 11): consumers also carry an "active time".
    pub const STREAM_LISTPACKS_3: u8 = 21;

    /// Whether a byte names a value type rather than an opcode.
    pub fn is_object_type(code: u8) -> bool {
        code <= MODULE_2 || (HASH_ZIPMAP..=STREAM_LISTPACKS_3).contains(&code)
    }
}

/// Opcodes: the bytes in a file that are not value types.
pub(crate) mod opcodes {
    pub const FUNCTION2: u8 = 245;
    /// Functions as Redis 7.0's release candidates stored them.
    pub const FUNCTION: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}
