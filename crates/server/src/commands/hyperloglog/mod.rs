//! HyperLogLog commands (Redis' "hyperloglog" group): PFADD, PFCOUNT, PFMERGE, and the
//! internal PFDEBUG and PFSELFTEST.
//!
//! A HyperLogLog is an ordinary string value in Redis' own layout, so GET/SET, DUMP/RESTORE
//! and the persistence files carry it, and values move between Latch and redis-server.
//!
//! - [`repr`] holds the bytes (header, dense registers, the sparse run-length code).
//! - [`estimate`] holds the element hash and the cardinality estimator.
//! - [`selftest`] runs PFSELFTEST.

mod estimate;
mod repr;
mod selftest;

use bytes::Bytes;
use latch_keyspace::Value;
use latch_protocol::Reply;

use self::estimate::{estimate, HISTOGRAM_LEN, REGISTERS};
use self::repr::{Corrupt, DENSE, HEADER_LEN, SPARSE};
use super::{err, is, Ctx};
use crate::spec::{acl, docflag, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub static COMMANDS: &[CommandSpec] = &[PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST];

const INVALID_OBJECT: &[u8] = b"INVALIDOBJ Corrupted HLL object detected";
const NOT_HLL: &[u8] = b"WRONGTYPE Key is not a valid HyperLogLog string value.";

pub const PFADD: CommandSpec = CommandSpec {
    name: "pfadd",
    group: Group::Hyperloglog,
    summary: "Adds elements to the HyperLogLog at a key (creating it when missing); returns 1 when its registers changed, else 0.",
    since: "2.8.9",
    complexity: "O(1) to add every element.",
    arity: -2,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HYPERLOGLOG,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::INSERT)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element").optional().multiple(),
    ],
    handler: Some(pfadd),
    ..CommandSpec::BASE
};

pub const PFCOUNT: CommandSpec = CommandSpec {
    name: "pfcount",
    group: Group::Hyperloglog,
    summary: "Estimates how many distinct elements were added to the HyperLogLog at a key, or to the union of several.",
    since: "2.8.9",
    complexity: "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
    arity: -2,
    // Read-only for ACL and clients, but counting one key stores the count in the value,
    // a change that is logged: hence MAY_REPLICATE and the RW key spec.
    flags: flag::READONLY | flag::MAY_REPLICATE,
    acl: acl::HYPERLOGLOG,
    key_specs: &[KeySpec {
        notes: Some(
            "RW because it may change the internal representation of the key, and propagate to replicas",
        ),
        ..KeySpec::to_end(1, 1, keyflag::RW | keyflag::ACCESS)
    }],
    arguments: &[Arg::key("key", 0).multiple()],
    handler: Some(pfcount),
    ..CommandSpec::BASE
};

pub const PFMERGE: CommandSpec = CommandSpec {
    name: "pfmerge",
    group: Group::Hyperloglog,
    summary:
        "Stores at a destination key the union of HyperLogLogs (the destination's own included).",
    since: "2.8.9",
    complexity: "O(N) to merge N HyperLogLogs, but with high constant times.",
    arity: -2,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::HYPERLOGLOG,
    key_specs: &[
        KeySpec::single(1, keyflag::RW | keyflag::ACCESS | keyflag::INSERT),
        KeySpec::to_end(2, 1, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: &[Arg::key("destkey", 0), Arg::key("sourcekey", 1).multiple()],
    handler: Some(pfmerge),
    ..CommandSpec::BASE
};

pub const PFDEBUG: CommandSpec = CommandSpec {
    name: "pfdebug",
    group: Group::Hyperloglog,
    summary: "Internal: shows or changes how the HyperLogLog at a key is stored (GETREG, DECODE, ENCODING, TODENSE).",
    since: "2.8.9",
    complexity: "N/A",
    arity: 3,
    flags: flag::WRITE | flag::DENYOOM | flag::ADMIN,
    acl: acl::HYPERLOGLOG,
    doc_flags: docflag::SYSCALL,
    key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::ACCESS)],
    arguments: &[Arg::string("subcommand"), Arg::key("key", 0)],
    handler: Some(pfdebug),
    ..CommandSpec::BASE
};

pub const PFSELFTEST: CommandSpec = CommandSpec {
    name: "pfselftest",
    group: Group::Hyperloglog,
    summary: "Internal: tests the HyperLogLog register packing and estimator.",
    since: "2.8.9",
    complexity: "N/A",
    arity: 1,
    flags: flag::ADMIN,
    acl: acl::HYPERLOGLOG,
    doc_flags: docflag::SYSCALL,
    handler: Some(pfselftest),
    ..CommandSpec::BASE
};

/// The HyperLogLog bytes of a value, after Redis' checks: WRONGTYPE for another type, the
/// HyperLogLog flavour of it for a string that is not one. `None` once the error is written.
fn hll_of<'v>(reply: &mut Reply, value: &'v mut Value) -> Option<&'v mut Vec<u8>> {
    let Value::Str(bytes) = value else {
        reply.error(err::WRONGTYPE);
        return None;
    };
    if !repr::looks_valid(bytes) {
        reply.error(NOT_HLL);
        return None;
    }
    Some(bytes)
}

fn max_bytes(ctx: &Ctx<'_, '_>) -> u64 {
    ctx.server.config.hll_sparse_max_bytes()
}

fn pfadd(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let elements = &args[2..];
    let max_bytes = max_bytes(ctx);
    // Redis counts each register raised, and the creation, as a change.
    // Redis makes its HyperLogLogs, and writes into its own copy of one: a plain sds.
    let changes = match ctx.keys.get_slot(db, key) {
        Some(slot) => {
            let Some(hll) = hll_of(ctx.reply, slot.value_mut()) else {
                return;
            };
            let added = add_all(hll, elements, max_bytes);
            slot.set_raw_string(true);
            added
        }
        None => {
            let mut hll = repr::new_sparse();
            // A new value cannot be corrupt.
            let raised = add_all(&mut hll, elements, max_bytes).unwrap_or(0);
            repr::mark_stale(&mut hll);
            ctx.keys.set(db, key, Value::Str(hll), None);
            ctx.keys.set_raw_string(db, key, true);
            Ok(raised + 1)
        }
    };
    match changes {
        // The registers raised before the corrupt part stay raised, unsignalled, as in
        // Redis.
        Err(Corrupt) => ctx.reply.error(INVALID_OBJECT),
        Ok(0) => ctx.reply.integer(0),
        Ok(changes) => {
            ctx.keys.signal_modified(db, key);
            if changes > 1 {
                ctx.keys.add_dirty(db, key, changes - 1);
            }
            ctx.notify(crate::pubsub::notify::STRING, "pfadd", key);
            ctx.reply.integer(1);
        }
    }
}

/// Adds `elements` to `hll`: how many of them raised a register. The cached count is
/// marked stale when any did.
fn add_all(hll: &mut Vec<u8>, elements: &[Bytes], max_bytes: u64) -> Result<u64, Corrupt> {
    let mut writer = repr::Writer::new(max_bytes);
    let mut raised = 0;
    for element in elements {
        if writer.add(hll, element)? {
            raised += 1;
        }
    }
    if raised > 0 {
        repr::mark_stale(hll);
    }
    Ok(raised)
}

fn pfcount(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    if args.len() > 2 {
        // The union's registers, one byte each; missing keys are empty HyperLogLogs.
        let mut max = Box::new([0u8; REGISTERS]);
        for key in &args[1..] {
            let Some(value) = ctx.keys.get(db, key) else {
                continue;
            };
            let Some(hll) = hll_of(ctx.reply, value) else {
                return;
            };
            if repr::merge_into(&mut max, hll).is_err() {
                ctx.reply.error(INVALID_OBJECT);
                return;
            }
        }
        let count = estimate(&repr::raw_histogram(&max));
        ctx.reply.integer(count as i64);
        return;
    }

    let key = &args[1][..];
    let Some(slot) = ctx.keys.get_slot(db, key) else {
        ctx.reply.integer(0);
        return;
    };
    let Some(hll) = hll_of(ctx.reply, slot.value_mut()) else {
        return;
    };
    let counted = match repr::cached_count(hll) {
        Some(count) => Some((count, false)),
        None => {
            let mut histogram = [0; HISTOGRAM_LEN];
            repr::histogram(hll, &mut histogram).ok().map(|()| {
                let count = estimate(&histogram);
                repr::store_count(hll, count);
                (count, true)
            })
        }
    };
    // Redis counts on its own copy of the value (it may cache the count in it): a plain sds.
    slot.set_raw_string(true);
    match counted {
        None => ctx.reply.error(INVALID_OBJECT),
        Some((count, stored)) => {
            if stored {
                // Storing the count changed the value: watchers see it, and the command
                // is logged as it came (the write flag it lacks would otherwise keep it
                // out of the log).
                ctx.keys.signal_modified(db, key);
                ctx.propagate(args.to_vec());
            }
            ctx.reply.integer(count as i64);
        }
    }
}

fn pfmerge(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let mut max = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    // The destination takes part in the union as a source. These lookups are reads (a
    // missing key is a `keymiss` event), the destination's second one a write.
    ctx.lookups_read(true);
    for key in &args[1..] {
        let Some(value) = ctx.keys.get(db, key) else {
            continue;
        };
        let Some(hll) = hll_of(ctx.reply, value) else {
            return;
        };
        any_dense |= repr::encoding(hll) == DENSE;
        if repr::merge_into(&mut max, hll).is_err() {
            ctx.reply.error(INVALID_OBJECT);
            return;
        }
    }

    ctx.lookups_read(false);
    let key = &args[1][..];
    let max_bytes = max_bytes(ctx);
    let mut created = None;
    let hll = match ctx.keys.get(db, key) {
        // Already checked above.
        Some(Value::Str(hll)) => hll,
        // Checked above as a source: never here.
        Some(_) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        None => created.insert(repr::new_sparse()),
    };
    // A dense source makes a dense destination straight away, rather than growing a
    // sparse one into it.
    if any_dense && repr::to_dense(hll).is_err() {
        ctx.reply.error(INVALID_OBJECT);
        return;
    }
    let mut writer = repr::Writer::new(max_bytes);
    for (index, value) in max.iter().enumerate() {
        if *value != 0 {
            // The destination was read whole above: its code is sound.
            let _ = writer.raise(hll, index, *value);
        }
    }
    repr::mark_stale(hll);
    if let Some(hll) = created {
        ctx.keys.set(db, key, Value::Str(hll), None);
    }
    ctx.keys.set_raw_string(db, key, true);
    ctx.keys.signal_modified(db, key);
    // Redis reports a merge as an add.
    ctx.notify(crate::pubsub::notify::STRING, "pfadd", key);
    ctx.reply.ok();
}

fn pfdebug(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let subcommand = &args[1][..];
    let key = &args[2][..];
    let Some(slot) = ctx.keys.get_slot(db, key) else {
        ctx.reply.error(b"ERR The specified key does not exist");
        return;
    };
    if hll_of(ctx.reply, slot.value_mut()).is_none() {
        return;
    }
    // Redis works on its own copy of the value: a plain sds.
    slot.set_raw_string(true);
    let Value::Str(hll) = slot.value_mut() else {
        unreachable!("checked just above");
    };
    if is(subcommand, "GETREG") {
        let converted = repr::encoding(hll) == SPARSE;
        if repr::to_dense(hll).is_err() {
            ctx.reply.error(INVALID_OBJECT);
            return;
        }
        let regs = &hll[HEADER_LEN..];
        ctx.reply.array(REGISTERS);
        for index in 0..REGISTERS {
            ctx.reply
                .integer(i64::from(repr::get_register(regs, index)));
        }
        if converted {
            // A change that is logged, as Redis counts it, though watchers are not told.
            ctx.keys.add_dirty(db, key, 1);
        }
    } else if is(subcommand, "DECODE") {
        if repr::encoding(hll) != SPARSE {
            ctx.reply.error(b"ERR HLL encoding is not sparse");
            return;
        }
        let text = repr::decode(hll);
        ctx.reply.bulk(text.as_bytes());
    } else if is(subcommand, "ENCODING") {
        let name: &[u8] = if repr::encoding(hll) == DENSE {
            b"dense"
        } else {
            b"sparse"
        };
        ctx.reply.simple(name);
    } else if is(subcommand, "TODENSE") {
        let converted = repr::encoding(hll) == SPARSE;
        if repr::to_dense(hll).is_err() {
            ctx.reply.error(INVALID_OBJECT);
            return;
        }
        if converted {
            ctx.keys.add_dirty(db, key, 1);
        }
        ctx.reply.integer(i64::from(converted));
    } else {
        let message = format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(subcommand)
        );
        ctx.reply.error(message.as_bytes());
    }
}

fn pfselftest(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    match selftest::run(max_bytes(ctx)) {
        Ok(()) => ctx.reply.ok(),
        Err(message) => ctx.reply.error(format!("ERR {message}").as_bytes()),
    }
}
