//! Redis 7.0's multi-part append-only file: a directory holding a manifest, one base file
//! (an RDB snapshot or a file of commands) and incr files of commands written since.
//!
//! - [`Manifest`]: parsing and writing `appendonly.aof.manifest` exactly as Redis does, and
//!   the bookkeeping Redis does on it when it opens incr files and finishes rewrites.
//! - File names ([`manifest_name`], [`base_name`], [`incr_name`], ...) and
//!   [`write_manifest`], which replaces the manifest atomically.
//! - [`encode_command`]: the bytes of one AOF entry.
//! - [`CommandReader`]: reading a command file, telling a torn end ([`AofReadError::Truncated`])
//!   from damage ([`AofReadError::Corrupt`]), transactions included.
//!
//! Loading order and policy stay with the server: read the manifest; load the base (with the
//! RDB reader if [`starts_with_rdb_preamble`], else with a `CommandReader`); then each incr
//! file in order. Redis accepts a truncated file only if it is the last one loaded and
//! `aof-load-truncated` is on, and then cuts it at `valid_up_to`; an empty file is fine.

mod encode;
mod manifest;
mod naming;
mod quote;
mod reader;
mod store;

#[cfg(test)]
mod manifest_tests;
#[cfg(test)]
mod reader_tests;

pub use encode::{encode_command, encode_select, encode_timestamp_annotation};
pub use manifest::{AofFile, FileKind, Manifest, ManifestError, MANIFEST_MAX_LINE};
pub use naming::{base_name, incr_name, manifest_name, temp_incr_name, temp_manifest_name};
pub use reader::{starts_with_rdb_preamble, AofReadError, CommandReader, ReadLimits};
pub use store::write_manifest;
