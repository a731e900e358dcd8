//! Server commands: INFO, CONFIG, COMMAND, TIME, SHUTDOWN, WAIT, and the cluster-mode refusals.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::{eq_ic, int_arg, CommandSpec, ERR_SYNTAX};
use crate::config::find_param;
use crate::context::Ctx;
use crate::keyspace::glob::glob_match;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "server", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("info", -1, LOADING | STALE, "Returns information and statistics about the server.", info),
    CommandSpec { name: "config", arity: -2, flags: 0, keys: (0, 0, 0), group: "server", summary: "A container for server configuration commands.", handler: container_help, subcommands: CONFIG_SUBCOMMANDS },
    CommandSpec { name: "command", arity: -1, flags: LOADING | STALE, keys: (0, 0, 0), group: "server", summary: "Returns detailed information about all commands.", handler: command_all, subcommands: &[] },
    cmd!("time", 1, FAST | LOADING | STALE, "Returns the server time.", time),
    cmd!("shutdown", -1, ADMIN | NOAUTH | LOADING | STALE | NO_MULTI, "Synchronously saves the database(s) to disk and shuts down the Redis server.", shutdown),
    cmd!("wait", 3, 0, "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", wait),
    cmd!("cluster", -2, 0, "A container for Redis Cluster commands (cluster support is disabled).", cluster_disabled),
    cmd!("readonly", 1, FAST | LOADING | STALE, "Enables read-only queries for a connection to a Redis Cluster replica node (cluster support is disabled).", cluster_disabled),
    cmd!("readwrite", 1, FAST | LOADING | STALE, "Enables read-write queries for a connection to a Reids Cluster replica node (cluster support is disabled).", cluster_disabled),
];

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("get", -3, ADMIN | LOADING | STALE, "Returns the effective values of configuration parameters.", config_get),
    cmd!("set", -4, ADMIN | LOADING | STALE, "Sets configuration parameters in-flight.", config_set),
    cmd!("resetstat", 2, ADMIN | LOADING | STALE, "Resets the server's statistics.", config_resetstat),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", config_help),
];

/// The handler of a container command; never reached because dispatch always picks a subcommand.
pub fn container_help(_ctx: &mut Ctx) -> Value {
    Value::error("ERR missing subcommand")
}

fn info(ctx: &mut Ctx) -> Value {
    let sections: Vec<String> = ctx.args[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let text = crate::info::render(ctx, &sections);
    Value::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

fn config_get(ctx: &mut Ctx) -> Value {
    let config = ctx.shared.config.read();
    let mut pairs = Vec::new();
    for p in crate::config::PARAMS {
        if ctx.args[2..].iter().any(|pat| glob_match(pat, p.name.as_bytes(), true)) {
            pairs.push((Value::bulk_str(p.name), Value::bulk_str(&(p.get)(&config))));
        }
    }
    Value::Map(pairs)
}

fn config_set(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if (args.len() - 2) % 2 != 0 {
        return Value::error(ERR_SYNTAX);
    }
    // All or nothing: validate every pair on a copy, then swap it in.
    let mut next = ctx.shared.config.read().clone();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).into_owned();
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        let Some(param) = find_param(&name) else {
            return Value::error(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"));
        };
        if !param.mutable {
            return Value::error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"));
        }
        if let Err(reason) = (param.set)(&mut next, &value) {
            return Value::error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"));
        }
    }
    *ctx.shared.config.write() = next;
    Value::ok()
}

fn config_resetstat(ctx: &mut Ctx) -> Value {
    ctx.shared.stats.reset();
    let store = ctx.store();
    store.locks.stats = Default::default();
    store.expired_keys = 0;
    Value::ok()
}

fn config_help(_ctx: &mut Ctx) -> Value {
    let lines = [
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect::<Vec<_>>())
}

fn time(_ctx: &mut Ctx) -> Value {
    let us = crate::clock::wall_us();
    Value::Array(vec![Value::Bulk(Bytes::from((us / 1_000_000).to_string())), Value::Bulk(Bytes::from((us % 1_000_000).to_string()))])
}

fn shutdown(ctx: &mut Ctx) -> Value {
    for a in &ctx.args[1..] {
        if eq_ic(a, "abort") {
            // Ruvio's shutdown is immediate, so there is never one in progress to abort.
            return Value::error("ERR No shutdown in progress.");
        }
        if !(eq_ic(a, "nosave") || eq_ic(a, "save") || eq_ic(a, "now") || eq_ic(a, "force")) {
            return Value::error(ERR_SYNTAX);
        }
    }
    // Like Redis, a password-protected server only lets an authenticated client shut it down.
    if !ctx.client.authenticated {
        return Value::error("NOAUTH Authentication required.");
    }
    tracing::info!("SHUTDOWN requested by client {}", ctx.client.id());
    ctx.shared.request_shutdown();
    // Redis closes the connection without a reply on success.
    ctx.client.close_without_reply = true;
    Value::ok()
}

fn wait(ctx: &mut Ctx) -> Value {
    match (int_arg(&ctx.args[1]), int_arg(&ctx.args[2])) {
        (Ok(_), Ok(t)) if t < 0 => Value::error("ERR timeout is negative"),
        (Ok(_), Ok(_)) => Value::Integer(0),
        (Err(e), _) => e,
        (_, Err(_)) => Value::error("ERR timeout is not an integer or out of range"),
    }
}

fn cluster_disabled(_ctx: &mut Ctx) -> Value {
    Value::error("ERR This instance has cluster support disabled")
}

// ----- COMMAND -----

fn flag_set(spec: &CommandSpec) -> Value {
    Value::Set(NAMES.iter().filter(|(f, _)| spec.has(*f)).map(|(_, n)| Value::simple(n)).collect())
}

fn command_info(spec: &CommandSpec, full_name: &str) -> Value {
    let (first, last, step) = spec.keys;
    Value::Array(vec![
        Value::bulk_str(full_name),
        Value::Integer(spec.arity as i64),
        flag_set(spec),
        Value::Integer(first as i64),
        Value::Integer(last as i64),
        Value::Integer(step as i64),
        Value::Set(vec![Value::simple_owned(format!("@{}", spec.group))]),
        Value::Set(vec![]),
        Value::Array(vec![]),
        Value::Array(spec.subcommands.iter().map(|s| command_info(s, &format!("{full_name}|{}", s.name))).collect()),
    ])
}

fn command_docs(spec: &CommandSpec, full_name: &str) -> Value {
    let s = Value::bulk_str;
    let mut fields = vec![
        (s("summary"), s(spec.summary)),
        (s("since"), s("1.0.0")),
        (s("group"), s(spec.group)),
    ];
    if !spec.subcommands.is_empty() {
        fields.push((
            s("subcommands"),
            Value::Map(
                spec.subcommands
                    .iter()
                    .map(|sub| {
                        let name = format!("{full_name}|{}", sub.name);
                        (Value::bulk_str(&name), command_docs(sub, &name))
                    })
                    .collect(),
            ),
        ));
    }
    Value::Map(fields)
}

fn command_all(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if args.len() == 1 {
        return Value::Array(super::all().map(|s| command_info(s, s.name)).collect());
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "count" if args.len() == 2 => Value::Integer(super::all().count() as i64),
        "list" => Value::Array(super::all().map(|s| Value::bulk_str(s.name)).collect()),
        "info" => {
            if args.len() == 2 {
                return Value::Array(super::all().map(|s| command_info(s, s.name)).collect());
            }
            Value::Array(args[2..].iter().map(|n| super::lookup(n).map_or(Value::Nil, |s| command_info(s, s.name))).collect())
        }
        "docs" => {
            let specs: Vec<&CommandSpec> = if args.len() == 2 {
                super::all().collect()
            } else {
                args[2..].iter().filter_map(|n| super::lookup(n)).collect()
            };
            Value::Map(specs.into_iter().map(|s| (Value::bulk_str(s.name), command_docs(s, s.name))).collect())
        }
        "getkeys" if args.len() >= 3 => {
            let Ok(super::Resolved { spec, .. }) = super::resolve(&args[2..]) else { return Value::error("ERR Invalid command specified") };
            let idx = spec.key_indexes(args.len() - 2);
            if idx.is_empty() {
                return Value::error("ERR The command has no key arguments");
            }
            Value::Array(idx.into_iter().map(|i| Value::Bulk(args[2 + i].clone())).collect())
        }
        "help" => Value::Array(
            ["COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)", "    Return details about all commands.", "COUNT", "    Return the total number of commands in this server.", "LIST", "    Return a list of all commands in this server.", "INFO [<command-name> ...]", "    Return details about multiple commands.", "DOCS [<command-name> ...]", "    Return documentation details about multiple commands.", "GETKEYS <full-command>", "    Return the keys from a full command.", "HELP", "    Print this help."]
                .iter()
                .map(|l| Value::simple(l))
                .collect::<Vec<_>>(),
        ),
        _ => Value::error(format!("ERR unknown subcommand '{}'. Try COMMAND HELP.", String::from_utf8_lossy(&args[1]))),
    }
}
