//! CLUSTER and its subcommands, and ASKING, READONLY and READWRITE, as Redis 7.0 declares
//! them. Latch has no cluster mode, so
//! every subcommand answers as Redis does when `cluster-enabled` is off: with one error,
//! whatever the arguments. The entries still matter: `COMMAND INFO`/`DOCS` describe them,
//! arity is checked before the handler runs, and the flags (NOSCRIPT on RESET) decide what
//! scripts and transactions may call.

use bytes::Bytes;

use super::Ctx;
use crate::spec::{acl, docflag, flag, Arg, CommandSpec, Group};

/// Redis' reply to every CLUSTER subcommand when cluster support is off.
const CLUSTER_DISABLED: &[u8] = b"ERR This instance has cluster support disabled";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "asking",
        group: Group::Cluster,
        summary: "Signals that a cluster client is following an -ASK redirect.",
        since: "3.0.0",
        arity: 1,
        flags: flag::FAST,
        acl: acl::CONNECTION,
        handler: Some(cluster_disabled),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "cluster",
        group: Group::Cluster,
        summary: "Groups the subcommands that inspect and manage a Redis Cluster node.",
        since: "3.0.0",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: CLUSTER_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "readonly",
        group: Group::Cluster,
        summary: "Lets a connection to a cluster replica run read-only queries.",
        since: "3.0.0",
        arity: 1,
        flags: flag::FAST | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(cluster_disabled),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "readwrite",
        group: Group::Cluster,
        summary: "Ends a connection's read-only mode on a cluster replica.",
        since: "3.0.0",
        arity: 1,
        flags: flag::FAST | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(cluster_disabled),
        ..CommandSpec::BASE
    },
];

/// What most subcommands that change the cluster's state share in Redis' JSON files.
const CHANGES_STATE: u32 = flag::NO_ASYNC_LOADING | flag::ADMIN | flag::STALE;

/// The fields every subcommand has in common. The lock plan stays `Keys`: no subcommand
/// declares a key spec, so nothing is locked, which is right for a handler that never
/// touches the keyspace.
const SUBCOMMAND_BASE: CommandSpec = CommandSpec {
    group: Group::Cluster,
    since: "3.0.0",
    complexity: "O(1)",
    flags: flag::STALE,
    handler: Some(cluster_disabled),
    ..CommandSpec::BASE
};

const SLOT_RANGES: &[Arg] = &[Arg::block(
    "start-slot_end-slot",
    &[Arg::integer("start-slot"), Arg::integer("end-slot")],
)
.multiple()];

const NODE_ID: &[Arg] = &[Arg::string("node-id")];

/// Declared in alphabetical order, which is the order `COMMAND DOCS` lists them in.
static CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "addslots",
        summary: "Gives the receiving node ownership of the listed hash slots.",
        complexity: "O(N) where N is the total number of hash slot arguments",
        arity: -3,
        flags: CHANGES_STATE,
        arguments: &[Arg::integer("slot").multiple()],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "addslotsrange",
        summary: "Gives the receiving node ownership of every hash slot in the given ranges.",
        since: "7.0.0",
        complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        arity: -4,
        flags: CHANGES_STATE,
        arguments: SLOT_RANGES,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "bumpepoch",
        summary: "Raises the node's configuration epoch.",
        arity: 2,
        flags: CHANGES_STATE,
        tips: &["nondeterministic_output"],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "count-failure-reports",
        summary: "Counts the live failure reports other nodes have made about a node.",
        complexity: "O(N) where N is the number of failure reports",
        arity: 3,
        flags: flag::ADMIN | flag::STALE,
        tips: &["nondeterministic_output"],
        arguments: NODE_ID,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "countkeysinslot",
        summary: "Counts the keys this node holds in a hash slot.",
        arity: 3,
        arguments: &[Arg::integer("slot")],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "delslots",
        summary: "Makes the receiving node forget that it owns the listed hash slots.",
        complexity: "O(N) where N is the total number of hash slot arguments",
        arity: -3,
        flags: CHANGES_STATE,
        arguments: &[Arg::integer("slot").multiple()],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "delslotsrange",
        summary: "Makes the receiving node forget that it owns the hash slots in the given ranges.",
        since: "7.0.0",
        complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        arity: -4,
        flags: CHANGES_STATE,
        arguments: SLOT_RANGES,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "failover",
        summary: "Makes a replica take over from its master by hand.",
        arity: -2,
        flags: CHANGES_STATE,
        arguments: &[Arg::oneof(
            "options",
            &[
                Arg::token("force", "FORCE"),
                Arg::token("takeover", "TAKEOVER"),
            ],
        )
        .optional()],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "flushslots",
        summary: "Clears the node's record of the hash slots it owns.",
        arity: 2,
        flags: CHANGES_STATE,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "forget",
        summary: "Drops a node from this node's table of known nodes.",
        arity: 3,
        flags: CHANGES_STATE,
        arguments: NODE_ID,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "getkeysinslot",
        summary: "Lists up to a given number of the keys this node holds in a hash slot.",
        complexity: "O(log(N)) where N is the number of requested keys",
        arity: 4,
        tips: &["nondeterministic_output"],
        arguments: &[Arg::integer("slot"), Arg::integer("count")],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "help",
        summary: "Lists the CLUSTER subcommands with a short description of each.",
        since: "5.0.0",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "info",
        summary: "Reports the cluster's state as this node sees it.",
        arity: 2,
        tips: &["nondeterministic_output"],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "keyslot",
        summary: "Computes the hash slot a key name maps to.",
        complexity: "O(N) where N is the number of bytes in the key",
        arity: 3,
        arguments: &[Arg::string("key")],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "links",
        summary: "Lists the cluster bus connections between this node and its peers.",
        since: "7.0.0",
        complexity: "O(N) where N is the total number of Cluster nodes",
        arity: 2,
        tips: &["nondeterministic_output"],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "meet",
        summary: "Makes this node handshake with another node so that it joins the cluster.",
        arity: -4,
        flags: CHANGES_STATE,
        history: &[("4.0.0", "Added the optional `cluster_bus_port` argument.")],
        arguments: &[
            Arg::string("ip"),
            Arg::integer("port"),
            Arg::integer("cluster_bus_port").optional().since("4.0.0"),
        ],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "myid",
        summary: "Returns this node's ID.",
        arity: 2,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "nodes",
        summary: "Returns the cluster configuration as this node knows it, one line per node.",
        complexity: "O(N) where N is the total number of Cluster nodes",
        arity: 2,
        tips: &["nondeterministic_output"],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "replicas",
        summary: "Lists the replicas of a master node.",
        since: "5.0.0",
        arity: 3,
        flags: flag::ADMIN | flag::STALE,
        tips: &["nondeterministic_output"],
        arguments: NODE_ID,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "replicate",
        summary: "Turns this node into a replica of the given master.",
        arity: 3,
        flags: CHANGES_STATE,
        arguments: NODE_ID,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "reset",
        summary: "Returns the node to a blank cluster state, softly or hard.",
        complexity: "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
        arity: -2,
        // NOSCRIPT keeps scripts from calling it: a reset may flush the whole dataset.
        flags: flag::ADMIN | flag::STALE | flag::NOSCRIPT,
        arguments: &[Arg::oneof(
            "hard_soft",
            &[Arg::token("hard", "HARD"), Arg::token("soft", "SOFT")],
        )
        .optional()],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "saveconfig",
        summary: "Writes the node's cluster configuration to disk now.",
        arity: 2,
        flags: CHANGES_STATE,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "set-config-epoch",
        summary: "Sets the configuration epoch of a node that has none yet.",
        arity: 3,
        flags: CHANGES_STATE,
        arguments: &[Arg::integer("config-epoch")],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "setslot",
        summary: "Changes a hash slot's state on this node: importing, migrating, owned or stable.",
        arity: -4,
        flags: CHANGES_STATE,
        arguments: &[
            Arg::integer("slot"),
            Arg::oneof(
                "subcommand",
                &[
                    Arg::string("node-id").with_token("IMPORTING"),
                    Arg::string("node-id").with_token("MIGRATING"),
                    Arg::string("node-id").with_token("NODE"),
                    Arg::token("stable", "STABLE"),
                ],
            ),
        ],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "shards",
        summary: "Describes each shard of the cluster: its slot ranges and its nodes.",
        since: "7.0.0",
        complexity: "O(N) where N is the total number of cluster nodes",
        arity: 2,
        tips: &["nondeterministic_output"],
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "slaves",
        summary: "Lists the replicas of a master node; the old name of CLUSTER REPLICAS.",
        arity: 3,
        flags: flag::ADMIN | flag::STALE,
        tips: &["nondeterministic_output"],
        arguments: NODE_ID,
        doc_flags: docflag::DEPRECATED,
        deprecated_since: Some("5.0.0"),
        replaced_by: Some("`CLUSTER REPLICAS`"),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "slots",
        summary: "Maps ranges of hash slots to the nodes that serve them.",
        complexity: "O(N) where N is the total number of Cluster nodes",
        arity: 2,
        history: &[
            ("4.0.0", "Added node IDs."),
            ("7.0.0", "Added additional networking metadata field."),
        ],
        tips: &["nondeterministic_output"],
        doc_flags: docflag::DEPRECATED,
        deprecated_since: Some("7.0.0"),
        replaced_by: Some("`CLUSTER SHARDS`"),
        ..SUBCOMMAND_BASE
    },
];

/// Every subcommand, HELP included: Redis' clusterCommand checks `cluster_enabled` before
/// it looks at the subcommand at all.
fn cluster_disabled(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.error(CLUSTER_DISABLED);
}
