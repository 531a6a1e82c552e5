//! Redis 7.0's persistence formats, without I/O policy: the server decides when to write
//! and fsync; this crate says what the bytes are.
//!
//! - [`rdb`]: RDB version 10 snapshots (writer and reader) and `DUMP`/`RESTORE` payloads.
//! - [`aof`]: the append-only directory's manifest, and reading command files.
//! - [`crc64`], [`lzf`]: the checksum and the string compression both formats use.

pub mod aof;
pub mod crc64;
pub mod lzf;
pub mod rdb;
