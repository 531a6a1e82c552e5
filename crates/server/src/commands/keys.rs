//! Generic keyspace commands (Redis' "generic" group), by theme:
//!
//! - [`basic`]: DEL, UNLINK, EXISTS, TYPE, TOUCH.
//! - [`expire`]: EXPIRE and friends, TTL and friends, PERSIST.
//! - [`scan`]: KEYS, SCAN, RANDOMKEY.
//! - [`rename`]: RENAME, RENAMENX, COPY, MOVE.
//! - [`object`]: OBJECT and its subcommands.
//! - [`dump`]: DUMP and RESTORE (Redis' serialized values).
//! - [`migrate`]: MIGRATE (DUMP here, RESTORE on another server).
//!
//! Each theme declares its specs as constants; `COMMANDS` lists them for the table.

mod basic;
mod dump;
mod expire;
pub(crate) mod migrate;
mod object;
mod rename;
pub(crate) mod scan;

use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    basic::DEL,
    basic::UNLINK,
    basic::EXISTS,
    basic::TYPE,
    basic::TOUCH,
    expire::EXPIRE,
    expire::PEXPIRE,
    expire::EXPIREAT,
    expire::PEXPIREAT,
    expire::TTL,
    expire::PTTL,
    expire::EXPIRETIME,
    expire::PEXPIRETIME,
    expire::PERSIST,
    scan::KEYS,
    scan::SCAN,
    scan::RANDOMKEY,
    rename::RENAME,
    rename::RENAMENX,
    rename::COPY,
    rename::MOVE,
    object::OBJECT,
    dump::DUMP,
    dump::RESTORE,
    dump::RESTORE_ASKING,
    migrate::MIGRATE,
];
