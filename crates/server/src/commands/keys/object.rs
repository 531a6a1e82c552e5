//! OBJECT ENCODING | FREQ | IDLETIME | REFCOUNT | HELP: how a value is stored.
//!
//! These look keys up without refreshing their access time (Redis' `LOOKUP_NOTOUCH`), so
//! asking about a key's idle time does not reset it.

use bytes::Bytes;
use latch_keyspace::{lfu, Slot, Value};

use crate::commands::Ctx;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, KeySpec};

const SUBCOMMAND_KEY: &[KeySpec] = &[KeySpec::single(2, keyflag::RO)];

pub(super) const OBJECT: CommandSpec = CommandSpec {
    name: "object",
    summary: "Container for commands that inspect how a value is stored.",
    since: "2.2.3",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: &[
        CommandSpec {
            name: "encoding",
            summary: "Names the internal representation of a key's value.",
            since: "2.2.3",
            arity: 3,
            flags: flag::READONLY,
            acl: acl::KEYSPACE,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0)],
            tips: &["nondeterministic_output"],
            handler: Some(encoding),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "freq",
            summary: "Reports a key's logarithmic access-frequency counter (LFU policies only).",
            since: "4.0.0",
            arity: 3,
            flags: flag::READONLY,
            acl: acl::KEYSPACE,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0)],
            tips: &["nondeterministic_output"],
            handler: Some(freq),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "help",
            summary: "Describes the OBJECT subcommands.",
            since: "6.2.0",
            arity: 2,
            flags: flag::LOADING | flag::STALE,
            acl: acl::KEYSPACE,
            handler: Some(help),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "idletime",
            summary: "Reports the seconds since a key was last read or written.",
            since: "2.2.3",
            arity: 3,
            flags: flag::READONLY,
            acl: acl::KEYSPACE,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0)],
            tips: &["nondeterministic_output"],
            handler: Some(idletime),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "refcount",
            summary: "Reports how many references the server holds to a key's value.",
            since: "2.2.3",
            arity: 3,
            flags: flag::READONLY,
            acl: acl::KEYSPACE,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0)],
            tips: &["nondeterministic_output"],
            handler: Some(refcount),
            ..CommandSpec::BASE
        },
    ],
    ..CommandSpec::BASE
};

/// Redis' refcount for values it shares between keys (small integers).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers below this.
const SHARED_INTEGERS: i64 = 10_000;

const LFU_NOT_SELECTED: &[u8] = b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const LFU_SELECTED: &[u8] = b"ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// What OBJECT reports about a value (gathered without copying the value).
struct ObjectInfo {
    encoding: &'static str,
    access_s: u32,
    /// An integer Redis would share between keys rather than allocate.
    small_integer: bool,
}

impl ObjectInfo {
    fn of(slot: &Slot) -> ObjectInfo {
        let value = slot.value();
        let small_integer = match value {
            Value::Str(bytes) => {
                slot.encoding() == "int"
                    && latch_keyspace::parse_i64_strict(bytes)
                        .is_some_and(|n| (0..SHARED_INTEGERS).contains(&n))
            }
            _ => false,
        };
        ObjectInfo {
            encoding: slot.encoding(),
            access_s: slot.access_s(),
            small_integer,
        }
    }
}

/// Runs `answer` on the key named by `args[2]`, or replies nil when there is none.
fn with_entry(ctx: &mut Ctx<'_, '_>, args: &[Bytes], answer: fn(&mut Ctx<'_, '_>, &ObjectInfo)) {
    let db = ctx.db();
    // OBJECT's lookup reports no miss (Redis' LOOKUP_NONOTIFY).
    ctx.lookups_read(false);
    let Some(info) = ctx
        .keys
        .get_slot_untouched(db, &args[2])
        .map(|slot| ObjectInfo::of(slot))
    else {
        ctx.reply.null();
        return;
    };
    answer(ctx, &info);
}

fn lfu_policy(ctx: &Ctx<'_, '_>) -> bool {
    ctx.server
        .config
        .get("maxmemory-policy")
        .is_some_and(|policy| policy.to_ascii_lowercase().contains("lfu"))
}

/// Whether the policy stops Redis from sharing integers (it needs a clock per value).
fn no_shared_integers(ctx: &Ctx<'_, '_>) -> bool {
    let policy = ctx
        .server
        .config
        .get("maxmemory-policy")
        .unwrap_or_default()
        .to_ascii_lowercase();
    ctx.server.config.get_i64("maxmemory") != 0
        && (policy.contains("lru") || policy.contains("lfu"))
}

fn encoding(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    with_entry(ctx, args, |ctx, info| {
        ctx.reply.bulk(info.encoding.as_bytes())
    });
}

fn freq(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    with_entry(ctx, args, |ctx, info| {
        let Some(params) = ctx.server.keyspace.lfu().filter(|_| lfu_policy(ctx)) else {
            ctx.reply.error(LFU_NOT_SELECTED);
            return;
        };
        // The counter after its decay, as the next access would see it.
        let minute = lfu::minutes(ctx.now().wall_s());
        let counter = lfu::decayed(info.access_s, minute, params.decay_minutes);
        ctx.reply.integer(i64::from(counter));
    });
}

fn idletime(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    with_entry(ctx, args, |ctx, info| {
        if lfu_policy(ctx) {
            ctx.reply.error(LFU_SELECTED);
            return;
        }
        // Access times are whole seconds of the access clock (`Now::access_s`).
        let idle_s = ctx.now().access_s().saturating_sub(info.access_s);
        ctx.reply.integer(i64::from(idle_s));
    });
}

fn refcount(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    with_entry(ctx, args, |ctx, info| {
        let shared = info.small_integer && !no_shared_integers(ctx);
        ctx.reply.integer(if shared { SHARED_REFCOUNT } else { 1 });
    });
}

const HELP_LINES: &[&str] = &[
    "ENCODING <key>",
    "    Name the internal representation of the value stored at <key>.",
    "FREQ <key>",
    "    Report the logarithmic access-frequency counter of <key> (LFU policies only).",
    "IDLETIME <key>",
    "    Report the approximate number of seconds since <key> was last read or written.",
    "REFCOUNT <key>",
    "    Report how many references are held to the value stored at <key>.",
];

fn help(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let command = String::from_utf8_lossy(&args[0]);
    crate::commands::client::help_reply(ctx.reply, &command, HELP_LINES);
}
