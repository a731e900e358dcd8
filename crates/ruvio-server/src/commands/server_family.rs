//! Server commands: INFO, CONFIG, COMMAND, TIME, SHUTDOWN, WAIT, and the cluster-mode refusals.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::{eq_ic, CommandSpec, ERR_SYNTAX};
use crate::config::find_param;
use super::context::Ctx;
use crate::keyspace::glob::glob_match;
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "server", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("info", -1, LOADING | STALE, "Returns information and statistics about the server.", info),
    CommandSpec { name: "config", arity: -2, flags: NOSCRIPT, keys: (0, 0, 0), group: "server", summary: "A container for server configuration commands.", handler: container_help, subcommands: CONFIG_SUBCOMMANDS },
    // With no subcommand COMMAND lists every command (see `resolve`); its subcommands check their own arity.
    CommandSpec { name: "command", arity: -1, flags: LOADING | STALE, keys: (0, 0, 0), group: "server", summary: "Returns detailed information about all commands.", handler: command_all, subcommands: COMMAND_SUBCOMMANDS },
    cmd!("time", 1, FAST | LOADING | STALE, "Returns the server time.", time),
    cmd!("shutdown", -1, ADMIN | NOAUTH | LOADING | STALE | NO_MULTI | NOSCRIPT, "Synchronously saves the database(s) to disk and shuts down the Redis server.", shutdown),
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

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("count", 2, LOADING | STALE, "Returns a count of commands.", command_count),
    cmd!("list", -2, LOADING | STALE, "Returns a list of command names.", command_list),
    cmd!("info", -2, LOADING | STALE, "Returns information about one, multiple or all commands.", command_info_sub),
    cmd!("docs", -2, LOADING | STALE, "Returns documentary information about one, multiple or all commands.", command_docs_sub),
    cmd!("getkeys", -4, LOADING | STALE, "Extracts the key names from an arbitrary command.", command_getkeys),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", command_help),
];

/// The handler of a container command; never reached because dispatch always picks a subcommand.
pub fn container_help(_ctx: &mut Ctx) -> Value {
    Value::error(ERR_MISSING_SUBCOMMAND)
}

fn info(ctx: &mut Ctx) -> Value {
    let sections: Vec<String> = ctx.args[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let text = super::info::render(ctx, &sections);
    Value::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

fn config_get(ctx: &mut Ctx) -> Value {
    let config = ctx.shared.config.read();
    let mut pairs = Vec::new();
    let names = crate::config::PARAMS.iter().map(|p| (p.name, p)).chain(
        crate::config::ALIASES.iter().filter_map(|(alias, name)| find_param(name).map(|p| (*alias, p))),
    );
    for (name, p) in names {
        if ctx.args[2..].iter().any(|pat| glob_match(pat, name.as_bytes(), true)) {
            pairs.push((Value::bulk_str(name), Value::bulk_str(&(p.get)(&config))));
        }
    }
    Value::Map(pairs)
}

fn config_set(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if !(args.len() - 2).is_multiple_of(2) {
        return Value::error(ERR_SYNTAX);
    }
    // All or nothing: validate every pair on a copy, then swap it in.
    let mut next = ctx.shared.config.read().clone();
    let mut seen: Vec<&'static str> = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).into_owned();
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        let Some(param) = find_param(&name) else {
            return config_set_unknown(&name);
        };
        // A parameter named twice (or by its old and new name) is refused, as in Redis 7.
        if seen.contains(&param.name) {
            return config_set_failed(&name, "duplicate parameter");
        }
        seen.push(param.name);
        if !param.mutable {
            return config_set_failed(&name, "can't set immutable config");
        }
        if let Err(reason) = (param.set)(&mut next, &value) {
            return config_set_failed(&name, &reason);
        }
    }
    // More clients need more file descriptors: refused, as in Redis, when the limit cannot be raised to fit them.
    let (old_max, io_threads) = { let c = ctx.shared.config.read(); (c.maxclients, c.io_threads) };
    let fits = if next.maxclients > old_max { crate::os::fit_fd_limit(next.maxclients, io_threads) } else { Ok((next.maxclients, None)) };
    if let Some(n) = fits.map_or(Some(0), |(n, _)| (n < next.maxclients).then_some(n)) {
        return config_set_failed("maxclients", &format!("The operating system is not able to handle the specified number of clients, try with {n}"));
    }
    ctx.shared.journal.set_backlog_limit(next.repl_backlog_size as usize);
    ctx.shared.replication.set_min_replicas(next.min_replicas_to_write, next.min_replicas_max_lag);
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
            return Value::error(ERR_NO_SHUTDOWN);
        }
        if !(eq_ic(a, "nosave") || eq_ic(a, "save") || eq_ic(a, "now") || eq_ic(a, "force")) {
            return Value::error(ERR_SYNTAX);
        }
    }
    // Like Redis, a password-protected server only lets an authenticated client shut it down.
    if !ctx.client.authenticated {
        return Value::error(ERR_NOAUTH);
    }
    tracing::info!("SHUTDOWN requested by client {}", ctx.client.id());
    ctx.shared.request_shutdown();
    // Redis closes the connection without a reply on success.
    ctx.client.close_without_reply = true;
    Value::ok()
}

fn cluster_disabled(_ctx: &mut Ctx) -> Value {
    Value::error(ERR_NO_CLUSTER)
}

// ----- COMMAND -----

fn flag_set(spec: &CommandSpec) -> Value {
    Value::Set(NAMES.iter().filter(|(f, _)| spec.has(*f)).map(|(_, n)| Value::simple(n)).collect())
}

/// The ACL categories COMMAND INFO reports and `COMMAND LIST FILTERBY ACLCAT` matches: Redis's names, derived from the
/// command's family and flags.
fn acl_categories(spec: &CommandSpec) -> Vec<&'static str> {
    let family = match spec.group {
        "generic" => "keyspace",
        "transactions" => "transaction",
        "server" => "",
        other => other,
    };
    let by_flag = [(WRITE, "write"), (READONLY, "read"), (ADMIN, "admin"), (ADMIN, "dangerous"), (BLOCKING, "blocking")];
    let mut cats: Vec<&'static str> = by_flag.iter().filter(|(f, _)| spec.has(*f)).map(|(_, c)| *c).collect();
    cats.push(if spec.has(FAST) { "fast" } else { "slow" });
    if !family.is_empty() && !cats.contains(&family) {
        cats.push(family);
    }
    cats
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
        Value::Set(acl_categories(spec).into_iter().map(|c| Value::simple_owned(format!("@{c}"))).collect()),
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

fn command_all(_ctx: &mut Ctx) -> Value {
    Value::Array(super::public().map(|s| command_info(s, s.name)).collect())
}

fn command_count(_ctx: &mut Ctx) -> Value {
    Value::Integer(super::public().count() as i64)
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]`.
fn command_list(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let keep: Box<dyn Fn(&CommandSpec) -> bool> = match &args[2..] {
        [] => Box::new(|_| true),
        [filterby, kind, value] if eq_ic(filterby, "filterby") => {
            let value = value.clone();
            if eq_ic(kind, "pattern") {
                Box::new(move |s| glob_match(&value, s.name.as_bytes(), true))
            } else if eq_ic(kind, "aclcat") {
                let value = String::from_utf8_lossy(&value).to_ascii_lowercase();
                Box::new(move |s| acl_categories(s).contains(&value.as_str()))
            } else if eq_ic(kind, "module") {
                Box::new(|_| false) // no modules
            } else {
                return Value::error(ERR_SYNTAX);
            }
        }
        _ => return Value::error(ERR_SYNTAX),
    };
    Value::Array(super::public().filter(|s| keep(s)).map(|s| Value::bulk_str(s.name)).collect())
}

fn command_info_sub(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if args.len() == 2 {
        return command_all(ctx);
    }
    Value::Array(args[2..].iter().map(|n| super::lookup_public(n).map_or(Value::Nil, |s| command_info(s, s.name))).collect())
}

fn command_docs_sub(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let specs: Vec<&CommandSpec> =
        if args.len() == 2 { super::public().collect() } else { args[2..].iter().filter_map(|n| super::lookup_public(n)).collect() };
    Value::Map(specs.into_iter().map(|s| (Value::bulk_str(s.name), command_docs(s, s.name))).collect())
}

fn command_getkeys(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let inner = &args[2..];
    let Some(spec) = super::lookup_public(&inner[0]) else { return Value::error(ERR_GETKEYS_UNKNOWN) };
    if !spec.arity_ok(inner.len()) {
        return Value::error(ERR_GETKEYS_ARITY);
    }
    let spec = match spec.find_subcommand(&inner[1]) {
        Some(sub) if sub.arity_ok(inner.len()) => sub,
        Some(_) => return Value::error(ERR_GETKEYS_ARITY),
        None => spec,
    };
    let idx = spec.key_indexes(inner.len());
    if idx.is_empty() {
        return Value::error(ERR_GETKEYS_NO_KEYS);
    }
    Value::Array(idx.into_iter().map(|i| Value::Bulk(inner[i].clone())).collect())
}

fn command_help(_ctx: &mut Ctx) -> Value {
    Value::Array(
        ["COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)", "    Return details about all commands.", "COUNT", "    Return the total number of commands in this server.", "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "    Return a list of all commands in this server.", "INFO [<command-name> ...]", "    Return details about multiple commands.", "DOCS [<command-name> ...]", "    Return documentation details about multiple commands.", "GETKEYS <full-command>", "    Return the keys from a full command.", "HELP", "    Print this help."]
            .iter()
            .map(|l| Value::simple(l))
            .collect::<Vec<_>>(),
    )
}
