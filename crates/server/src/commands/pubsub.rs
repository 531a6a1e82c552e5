//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, SSUBSCRIBE,
//! SUNSUBSCRIBE, SPUBLISH, PUBSUB. The subscriptions themselves live in `crate::pubsub`.

use bytes::Bytes;
use latch_protocol::Reply;

use super::client::{help_reply, subcommand_syntax_error};
use super::Ctx;
use crate::client::ReplyMode;
use crate::pubsub::Kind;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

const SUBSCRIBING: u32 = flag::PUBSUB | flag::NOSCRIPT | flag::LOADING | flag::STALE;
const PUBLISHING: u32 =
    flag::PUBSUB | flag::LOADING | flag::STALE | flag::FAST | flag::MAY_REPLICATE;
const SHARD_CHANNEL_ONE: &[KeySpec] = &[KeySpec::single(1, keyflag::NOT_KEY)];
const SHARD_CHANNELS: &[KeySpec] = &[KeySpec::to_end(1, 1, keyflag::NOT_KEY)];
const INTROSPECTION: u32 = flag::PUBSUB | flag::LOADING | flag::STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "subscribe",
        group: Group::Pubsub,
        summary: "Starts listening to messages published on the given channels.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of channels to subscribe to.",
        arity: -2,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        arguments: &[Arg::string("channel").multiple()],
        handler: Some(subscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "unsubscribe",
        group: Group::Pubsub,
        summary: "Stops listening to the given channels, or to every channel.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of clients already subscribed to a channel.",
        arity: -1,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        arguments: &[Arg::string("channel").optional().multiple()],
        handler: Some(unsubscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "psubscribe",
        group: Group::Pubsub,
        summary: "Starts listening to messages published on channels matching the given patterns.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
        arity: -2,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        arguments: &[Arg::block("pattern", &[Arg::new("pattern", ArgType::Pattern)]).multiple()],
        handler: Some(psubscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "punsubscribe",
        group: Group::Pubsub,
        summary: "Stops listening to the given patterns, or to every pattern.",
        since: "2.0.0",
        complexity: "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
        arity: -1,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        arguments: &[Arg::new("pattern", ArgType::Pattern).optional().multiple()],
        handler: Some(punsubscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "publish",
        group: Group::Pubsub,
        summary: "Sends a message to a channel's subscribers; replies how many received it.",
        since: "2.0.0",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        arity: 3,
        flags: PUBLISHING,
        acl: acl::PUBSUB,
        arguments: &[Arg::string("channel"), Arg::string("message")],
        handler: Some(publish),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "spublish",
        group: Group::Pubsub,
        summary: "Sends a message to a shard channel's subscribers; replies how many received it.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        arity: 3,
        flags: PUBLISHING,
        acl: acl::PUBSUB,
        key_specs: SHARD_CHANNEL_ONE,
        arguments: &[Arg::string("shardchannel"), Arg::string("message")],
        handler: Some(spublish),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "ssubscribe",
        group: Group::Pubsub,
        summary: "Starts listening to messages published on the given shard channels.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of shard channels to subscribe to.",
        arity: -2,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        key_specs: SHARD_CHANNELS,
        arguments: &[Arg::string("shardchannel").multiple()],
        handler: Some(ssubscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "sunsubscribe",
        group: Group::Pubsub,
        summary: "Stops listening to the given shard channels, or to every shard channel.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of clients already subscribed to a shard channel.",
        arity: -1,
        flags: SUBSCRIBING,
        acl: acl::PUBSUB,
        key_specs: SHARD_CHANNELS,
        arguments: &[Arg::string("shardchannel").optional().multiple()],
        handler: Some(sunsubscribe),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "pubsub",
        group: Group::Pubsub,
        summary: "Container for commands that inspect pub/sub subscriptions.",
        since: "2.8.0",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: &[
            CommandSpec {
                name: "channels",
                group: Group::Pubsub,
                summary: "Lists the channels that have subscribers, optionally those matching a pattern.",
                since: "2.8.0",
                complexity: "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
                arity: -2,
                flags: INTROSPECTION,
                acl: acl::PUBSUB,
                arguments: &[Arg::new("pattern", ArgType::Pattern).optional()],
                handler: Some(pubsub_channels),
                ..CommandSpec::BASE
            },
            CommandSpec {
                name: "help",
                group: Group::Pubsub,
                summary: "Describes the PUBSUB subcommands.",
                since: "6.2.0",
                complexity: "O(1)",
                arity: 2,
                flags: flag::LOADING | flag::STALE,
                acl: acl::PUBSUB,
                handler: Some(pubsub_help),
                ..CommandSpec::BASE
            },
            CommandSpec {
                name: "numpat",
                group: Group::Pubsub,
                summary: "Counts the distinct patterns clients subscribe to.",
                since: "2.8.0",
                complexity: "O(1)",
                arity: 2,
                flags: INTROSPECTION,
                acl: acl::PUBSUB,
                handler: Some(pubsub_numpat),
                ..CommandSpec::BASE
            },
            CommandSpec {
                name: "numsub",
                group: Group::Pubsub,
                summary: "Counts the subscribers of each given channel (pattern subscribers not included).",
                since: "2.8.0",
                complexity: "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
                arity: -2,
                flags: INTROSPECTION,
                acl: acl::PUBSUB,
                arguments: &[Arg::string("channel").optional().multiple()],
                handler: Some(pubsub_numsub),
                ..CommandSpec::BASE
            },
            CommandSpec {
                name: "shardchannels",
                group: Group::Pubsub,
                summary: "Lists the shard channels that have subscribers, optionally those matching a pattern.",
                since: "7.0.0",
                complexity: "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
                arity: -2,
                flags: INTROSPECTION,
                acl: acl::PUBSUB,
                arguments: &[Arg::new("pattern", ArgType::Pattern).optional()],
                handler: Some(pubsub_shardchannels),
                ..CommandSpec::BASE
            },
            CommandSpec {
                name: "shardnumsub",
                group: Group::Pubsub,
                summary: "Counts the subscribers of each given shard channel.",
                since: "7.0.0",
                complexity: "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
                arity: -2,
                flags: INTROSPECTION,
                acl: acl::PUBSUB,
                arguments: &[Arg::string("shardchannel").optional().multiple()],
                handler: Some(pubsub_shardnumsub),
                ..CommandSpec::BASE
            },
        ],
        ..CommandSpec::BASE
    },
];

/// Where the confirmations of (un)subscribing go. They are pushes: like published
/// messages they reach the client even while CLIENT REPLY is OFF or SKIP, so then they go
/// through the outbox (which the connection writes whatever the reply mode).
struct Confirmations {
    own: Option<Reply>,
}

impl Confirmations {
    fn new(ctx: &Ctx<'_, '_>) -> Confirmations {
        let own = (ctx.client.reply_mode != ReplyMode::On).then(|| Reply::new(ctx.reply.resp()));
        Confirmations { own }
    }

    fn reply<'a>(&'a mut self, ctx: &'a mut Ctx<'_, '_>) -> &'a mut Reply {
        match &mut self.own {
            Some(own) => own,
            None => ctx.reply,
        }
    }

    /// `[word, channel or null, count]`.
    fn write(&mut self, ctx: &mut Ctx<'_, '_>, word: &[u8], channel: Option<&[u8]>, count: usize) {
        let reply = self.reply(ctx);
        reply.push(3);
        reply.bulk(word);
        match channel {
            Some(channel) => reply.bulk(channel),
            None => reply.null(),
        }
        reply.integer(count as i64);
    }

    fn finish(self, ctx: &mut Ctx<'_, '_>) {
        if let Some(mut own) = self.own {
            ctx.client.shared.outbox.push_own(own.buffer());
        }
        let shared = &ctx.client.shared;
        shared.set_subscription_counts(&ctx.client.subscriptions);
    }
}

fn subscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    subscribe_to(ctx, args, Kind::Channel);
}

fn ssubscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    subscribe_to(ctx, args, Kind::Shard);
}

fn subscribe_to(ctx: &mut Ctx<'_, '_>, args: &[Bytes], kind: Kind) {
    if ctx.client.in_script {
        let name = String::from_utf8_lossy(&args[0]).to_uppercase();
        let message = format!("ERR {name} isn't allowed for a DENY BLOCKING client");
        ctx.reply.error(message.as_bytes());
        return;
    }
    let word: &[u8] = match kind {
        Kind::Channel => b"subscribe",
        Kind::Shard => b"ssubscribe",
    };
    let mut out = Confirmations::new(ctx);
    for channel in &args[1..] {
        if ctx
            .client
            .subscriptions
            .of_mut(kind)
            .insert(channel.clone())
        {
            ctx.server
                .pubsub
                .subscribe(kind, channel, &ctx.client.shared);
        }
        let count = ctx.client.subscriptions.count(kind);
        out.write(ctx, word, Some(channel), count);
    }
    out.finish(ctx);
}

fn unsubscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    unsubscribe_from(ctx, args, Kind::Channel);
}

fn sunsubscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    unsubscribe_from(ctx, args, Kind::Shard);
}

fn unsubscribe_from(ctx: &mut Ctx<'_, '_>, args: &[Bytes], kind: Kind) {
    let word: &[u8] = match kind {
        Kind::Channel => b"unsubscribe",
        Kind::Shard => b"sunsubscribe",
    };
    let mut out = Confirmations::new(ctx);
    let channels: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ctx.client.subscriptions.of(kind).iter().cloned().collect()
    };
    if channels.is_empty() {
        let count = ctx.client.subscriptions.count(kind);
        out.write(ctx, word, None, count);
    }
    for channel in &channels {
        if ctx.client.subscriptions.of_mut(kind).remove(channel) {
            let id = ctx.client.id;
            ctx.server.pubsub.unsubscribe(kind, channel, id);
        }
        let count = ctx.client.subscriptions.count(kind);
        out.write(ctx, word, Some(channel), count);
    }
    out.finish(ctx);
}

fn psubscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if ctx.client.in_script {
        ctx.reply
            .error(b"ERR PSUBSCRIBE isn't allowed for a DENY BLOCKING client");
        return;
    }
    let mut out = Confirmations::new(ctx);
    for pattern in &args[1..] {
        if ctx.client.subscriptions.patterns.insert(pattern.clone()) {
            ctx.server.pubsub.psubscribe(pattern, &ctx.client.shared);
        }
        let count = ctx.client.subscriptions.count(Kind::Channel);
        out.write(ctx, b"psubscribe", Some(pattern), count);
    }
    out.finish(ctx);
}

fn punsubscribe(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut out = Confirmations::new(ctx);
    let patterns: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ctx.client.subscriptions.patterns.iter().cloned().collect()
    };
    if patterns.is_empty() {
        let count = ctx.client.subscriptions.count(Kind::Channel);
        out.write(ctx, b"punsubscribe", None, count);
    }
    for pattern in &patterns {
        if ctx.client.subscriptions.patterns.remove(pattern) {
            let id = ctx.client.id;
            ctx.server.pubsub.punsubscribe(pattern, id);
        }
        let count = ctx.client.subscriptions.count(Kind::Channel);
        out.write(ctx, b"punsubscribe", Some(pattern), count);
    }
    out.finish(ctx);
}

fn publish(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let receivers = ctx
        .server
        .pubsub
        .publish(ctx.server, Kind::Channel, &args[1], &args[2]);
    ctx.propagate_to_replicas(args);
    ctx.reply.integer(receivers as i64);
}

fn spublish(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let receivers = ctx
        .server
        .pubsub
        .publish(ctx.server, Kind::Shard, &args[1], &args[2]);
    ctx.propagate_to_replicas(args);
    ctx.reply.integer(receivers as i64);
}

fn list_channels(ctx: &mut Ctx<'_, '_>, args: &[Bytes], kind: Kind) {
    let pattern = args.get(2).map(|p| &p[..]);
    if args.len() > 3 {
        subcommand_syntax_error(ctx, args);
        return;
    }
    let channels = ctx.server.pubsub.channels(kind, pattern);
    ctx.reply.array(channels.len());
    for channel in &channels {
        ctx.reply.bulk(channel);
    }
}

fn count_subscribers(ctx: &mut Ctx<'_, '_>, args: &[Bytes], kind: Kind) {
    ctx.reply.array((args.len() - 2) * 2);
    for channel in &args[2..] {
        ctx.reply.bulk(channel);
        let count = ctx.server.pubsub.subscriber_count(kind, channel);
        ctx.reply.integer(count as i64);
    }
}

fn pubsub_channels(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    list_channels(ctx, args, Kind::Channel);
}

fn pubsub_shardchannels(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    list_channels(ctx, args, Kind::Shard);
}

fn pubsub_numsub(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    count_subscribers(ctx, args, Kind::Channel);
}

fn pubsub_shardnumsub(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    count_subscribers(ctx, args, Kind::Shard);
}

fn pubsub_numpat(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let count = ctx.server.pubsub.pattern_count();
    ctx.reply.integer(count as i64);
}

const HELP_LINES: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    List the channels that have at least one subscriber, those matching <pattern> if given.",
    "NUMPAT",
    "    Count the distinct patterns that clients subscribe to.",
    "NUMSUB [<channel> ...]",
    "    Count the subscribers of each <channel> (pattern subscriptions not included).",
    "SHARDCHANNELS [<pattern>]",
    "    List the shard channels that have at least one subscriber, those matching <pattern> if given.",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Count the subscribers of each <shardchannel>.",
];

fn pubsub_help(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let command = String::from_utf8_lossy(&args[0]);
    help_reply(ctx.reply, &command, HELP_LINES);
}
