//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB, and sharded pub/sub (SSUBSCRIBE,
//! SUNSUBSCRIBE, SPUBLISH).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::CommandSpec;
use crate::client::ClientState;
use super::context::Ctx;
use crate::pubsub::PubSub;
use crate::shared::{Shared, Stats};
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "pubsub", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("subscribe", -2, CHANNEL_SUBSCRIBE | PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Listens for messages published to channels.", subscribe),
    cmd!("unsubscribe", -1, PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Stops listening to messages posted to channels.", unsubscribe),
    cmd!("psubscribe", -2, PATTERN_SUBSCRIBE | PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Listens for messages published to channels that match one or more patterns.", psubscribe),
    cmd!("punsubscribe", -1, PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Stops listening to messages published to channels that match one or more patterns.", punsubscribe),
    cmd!("publish", 3, CHANNEL_PUBLISH | PUBSUB | LOADING | STALE | FAST, "Posts a message to a channel.", publish),
    // Sharded pub/sub (Redis 7): without a cluster, shard channels are a namespace of their own.
    cmd!("ssubscribe", -2, CHANNEL_SUBSCRIBE | PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Listens for messages published to shard channels.", ssubscribe),
    cmd!("sunsubscribe", -1, PUBSUB | LOADING | STALE | SUBSCRIBED_OK | NOSCRIPT, "Stops listening to messages posted to shard channels.", sunsubscribe),
    cmd!("spublish", 3, CHANNEL_PUBLISH | PUBSUB | LOADING | STALE | FAST, "Post a message to a shard channel", spublish),
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "A container for Pub/Sub commands.",
        handler: super::server_family::container_help,
        subcommands: PUBSUB_SUBCOMMANDS,
    },
];

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("channels", -2, PUBSUB | LOADING | STALE, "Returns the active channels.", pubsub_channels),
    cmd!("numsub", -2, PUBSUB | LOADING | STALE, "Returns a count of subscribers to channels.", pubsub_numsub),
    cmd!("shardchannels", -2, PUBSUB | LOADING | STALE, "Returns the active shard channels.", pubsub_shardchannels),
    cmd!("shardnumsub", -2, PUBSUB | LOADING | STALE, "Returns the count of subscribers of shard channels.", pubsub_shardnumsub),
    cmd!("numpat", 2, PUBSUB | LOADING | STALE, "Returns a count of unique pattern subscriptions.", pubsub_numpat),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", pubsub_help),
];

/// Which namespace a (un)subscription is in.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Channel,
    Pattern,
    /// Shard channels (SSUBSCRIBE): counted apart, as Redis's confirmations count them.
    Shard,
}

impl Kind {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }

    fn set(self, client: &mut ClientState) -> &mut std::collections::HashSet<Bytes> {
        match self {
            Kind::Channel => &mut client.channels,
            Kind::Pattern => &mut client.patterns,
            Kind::Shard => &mut client.shard_channels,
        }
    }

    /// The count a confirmation carries: channels and patterns together, shard channels on their own (Redis 7.0).
    fn count(self, client: &ClientState) -> usize {
        match self {
            Kind::Shard => client.shard_channels.len(),
            _ => client.channels.len() + client.patterns.len(),
        }
    }
}

fn update_counters(client: &ClientState) {
    client.info.subscriptions.store(client.channels.len(), Ordering::Relaxed);
    client.info.psubscriptions.store(client.patterns.len(), Ordering::Relaxed);
    client.info.ssubscriptions.store(client.shard_channels.len(), Ordering::Relaxed);
}

/// Sends every confirmation but the last through `extra_replies` and returns the last.
fn replies(ctx: &mut Ctx, mut all: Vec<Value>) -> Value {
    let last = all.pop().expect("at least one confirmation");
    ctx.client.extra_replies.extend(all);
    last
}

fn subscribe_generic(ctx: &mut Ctx, kind: Kind) -> Value {
    // The ACL's channel rules were checked on the way in (dispatch.rs, from the table's channel flags).
    let args = ctx.args;
    let info = ctx.client.info.clone();
    let mut out = Vec::new();
    {
        let mut ps = ctx.shared.pubsub.lock();
        for name in &args[1..] {
            match kind {
                Kind::Channel => ps.subscribe(name.clone(), &info),
                Kind::Pattern => ps.psubscribe(name.clone(), &info),
                Kind::Shard => ps.ssubscribe(name.clone(), &info),
            };
            kind.set(ctx.client).insert(name.clone());
            out.push(PubSub::confirmation(kind.names().0, Some(name.clone()), kind.count(ctx.client), ctx.client.proto));
        }
    }
    update_counters(ctx.client);
    replies(ctx, out)
}

fn unsubscribe_generic(ctx: &mut Ctx, kind: Kind) -> Value {
    let args = ctx.args;
    let names: Vec<Bytes> = if args.len() > 1 { args[1..].to_vec() } else { kind.set(ctx.client).iter().cloned().collect() };
    let id = ctx.client.id();
    let mut out = Vec::new();
    {
        let mut ps = ctx.shared.pubsub.lock();
        for name in names {
            match kind {
                Kind::Channel => ps.unsubscribe(&name, id),
                Kind::Pattern => ps.punsubscribe(&name, id),
                Kind::Shard => ps.sunsubscribe(&name, id),
            };
            kind.set(ctx.client).remove(&name);
            out.push(PubSub::confirmation(kind.names().1, Some(name), kind.count(ctx.client), ctx.client.proto));
        }
    }
    if out.is_empty() {
        out.push(PubSub::confirmation(kind.names().1, None, kind.count(ctx.client), ctx.client.proto));
    }
    update_counters(ctx.client);
    replies(ctx, out)
}

fn subscribe(ctx: &mut Ctx) -> Value {
    subscribe_generic(ctx, Kind::Channel)
}
fn psubscribe(ctx: &mut Ctx) -> Value {
    subscribe_generic(ctx, Kind::Pattern)
}
fn ssubscribe(ctx: &mut Ctx) -> Value {
    subscribe_generic(ctx, Kind::Shard)
}
fn unsubscribe(ctx: &mut Ctx) -> Value {
    unsubscribe_generic(ctx, Kind::Channel)
}
fn punsubscribe(ctx: &mut Ctx) -> Value {
    unsubscribe_generic(ctx, Kind::Pattern)
}
fn sunsubscribe(ctx: &mut Ctx) -> Value {
    unsubscribe_generic(ctx, Kind::Shard)
}

/// Drops every subscription of a client (RESET, disconnect).
pub fn unsubscribe_all(shared: &Shared, client: &mut ClientState) {
    if !client.subscribed() {
        return;
    }
    let mut ps = shared.pubsub.lock();
    for c in client.channels.drain() {
        ps.unsubscribe(&c, client.info.id);
    }
    for p in client.patterns.drain() {
        ps.punsubscribe(&p, client.info.id);
    }
    for c in client.shard_channels.drain() {
        ps.sunsubscribe(&c, client.info.id);
    }
    drop(ps);
    update_counters(client);
}

fn publish(ctx: &mut Ctx) -> Value {
    let limit = ctx.shared.config.read().output_pubsub;
    let (delivered, dropped) = ctx.shared.pubsub.lock().publish(&ctx.args[1], &ctx.args[2], &limit);
    if dropped > 0 {
        Stats::add(&ctx.shared.stats.pubsub_disconnects, dropped);
        tracing::warn!("disconnected {dropped} subscriber(s) over client-output-buffer-limit pubsub");
    }
    Value::Integer(delivered)
}

/// SPUBLISH: to the shard channel's subscribers (SSUBSCRIBE) only.
fn spublish(ctx: &mut Ctx) -> Value {
    let limit = ctx.shared.config.read().output_pubsub;
    let (delivered, dropped) = ctx.shared.pubsub.lock().spublish(&ctx.args[1], &ctx.args[2], &limit);
    if dropped > 0 {
        Stats::add(&ctx.shared.stats.pubsub_disconnects, dropped);
        tracing::warn!("disconnected {dropped} subscriber(s) over client-output-buffer-limit pubsub");
    }
    Value::Integer(delivered)
}

fn pubsub_shardchannels(ctx: &mut Ctx) -> Value {
    if ctx.args.len() > 3 {
        return Value::error(ERR_PUBSUB_SHARDCHANNELS_ARITY);
    }
    let pattern = ctx.args.get(2).map(|p| p.as_ref());
    let chans = ctx.shared.pubsub.lock().shard_channels(pattern);
    Value::Array(chans.into_iter().map(Value::Bulk).collect())
}

fn pubsub_shardnumsub(ctx: &mut Ctx) -> Value {
    let ps = ctx.shared.pubsub.lock();
    let mut out = Vec::new();
    for c in &ctx.args[2..] {
        out.push(Value::Bulk(c.clone()));
        out.push(Value::Integer(ps.shard_numsub(c) as i64));
    }
    Value::Array(out)
}

fn pubsub_channels(ctx: &mut Ctx) -> Value {
    let pattern = ctx.args.get(2).map(|p| p.as_ref());
    if ctx.args.len() > 3 {
        return Value::error(ERR_PUBSUB_CHANNELS_ARITY);
    }
    let chans = ctx.shared.pubsub.lock().channels(pattern);
    Value::Array(chans.into_iter().map(Value::Bulk).collect())
}

fn pubsub_numsub(ctx: &mut Ctx) -> Value {
    let ps = ctx.shared.pubsub.lock();
    let mut out = Vec::new();
    for c in &ctx.args[2..] {
        out.push(Value::Bulk(c.clone()));
        out.push(Value::Integer(ps.numsub(c) as i64));
    }
    Value::Array(out)
}

fn pubsub_numpat(ctx: &mut Ctx) -> Value {
    Value::Integer(ctx.shared.pubsub.lock().numpat() as i64)
}

fn pubsub_help(_ctx: &mut Ctx) -> Value {
    let lines = [
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding pattern subscriptions.",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect::<Vec<_>>())
}
