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
    // Redis: admin, noscript, loading, stale (so @admin @slow @dangerous in ACL terms).
    cmd!("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, "Listens for all requests received by the server in real-time.", monitor),
    cmd!("time", 1, FAST | LOADING | STALE, "Returns the server time.", time),
    CommandSpec { name: "slowlog", arity: -2, flags: 0, keys: (0, 0, 0), group: "server", summary: "A container for slow log commands.", handler: container_help, subcommands: SLOWLOG_SUBCOMMANDS },
    CommandSpec { name: "latency", arity: -2, flags: NOSCRIPT, keys: (0, 0, 0), group: "server", summary: "A container for latency diagnostics commands.", handler: container_help, subcommands: LATENCY_SUBCOMMANDS },
    cmd!("shutdown", -1, ADMIN | NOAUTH | LOADING | STALE | NO_MULTI | NOSCRIPT | ALLOW_BUSY, "Synchronously saves the database(s) to disk and shuts down the Redis server.", shutdown),
    cmd!("cluster", -2, NOSCRIPT, "A container for Redis Cluster commands (cluster support is disabled).", cluster_disabled),
    cmd!("readonly", 1, FAST | LOADING | STALE, "Enables read-only queries for a connection to a Redis Cluster replica node (cluster support is disabled).", cluster_disabled),
    cmd!("readwrite", 1, FAST | LOADING | STALE, "Enables read-write queries for a connection to a Reids Cluster replica node (cluster support is disabled).", cluster_disabled),
];

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("get", -3, ADMIN | LOADING | STALE, "Returns the effective values of configuration parameters.", config_get),
    cmd!("set", -4, ADMIN | LOADING | STALE, "Sets configuration parameters in-flight.", config_set),
    cmd!("resetstat", 2, ADMIN | LOADING | STALE, "Resets the server's statistics.", config_resetstat),
    cmd!("rewrite", 2, ADMIN | LOADING | STALE, "Persists the effective configuration to file.", config_rewrite),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", config_help),
];

static SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("get", -2, ADMIN | LOADING | STALE, "Returns the slow log's entries.", slowlog_get),
    cmd!("len", 2, ADMIN | LOADING | STALE, "Returns the number of entries in the slow log.", slowlog_len),
    cmd!("reset", 2, ADMIN | LOADING | STALE, "Clears all entries from the slow log.", slowlog_reset),
    cmd!("help", 2, LOADING | STALE, "Show helpful text about the different subcommands", slowlog_help),
];

static LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("latest", 2, ADMIN | LOADING | STALE, "Returns the latest latency samples for all events.", latency_latest),
    cmd!("history", 3, ADMIN | LOADING | STALE, "Returns timestamp-latency samples for an event.", latency_history),
    cmd!("reset", -2, ADMIN | LOADING | STALE, "Resets the latency data for one or more events.", latency_reset),
    cmd!("doctor", 2, ADMIN | LOADING | STALE, "Returns a human-readable latency analysis report.", latency_doctor),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", latency_help),
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
    // New TLS files (a renewed certificate) are loaded now, for the connections that follow; ones that do not
    // load are refused and the running configuration stays (Redis's text).
    let tls_changed = seen.iter().any(|n| n.starts_with("tls-") && !matches!(*n, "tls-replication" | "tls-handshake-timeout" | "tls-client-cert-file" | "tls-client-key-file"));
    let new_tls = if tls_changed {
        match next.tls_server() {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("CONFIG SET: the new TLS configuration does not load: {e}");
                let name = seen.iter().find(|n| n.starts_with("tls-")).copied().unwrap_or("tls-cert-file");
                return config_set_failed(name, "Unable to update TLS configuration. Check server logs.");
            }
        }
    } else {
        None
    };
    if let Some(tls) = new_tls {
        *ctx.shared.tls.write() = tls.map(ruvio_tls::TlsAcceptor::from);
    }
    ctx.shared.journal.set_backlog_limit(next.repl_backlog_size as usize);
    ctx.shared.metrics.slow.configure(&next);
    ctx.shared.acl.set_log_max(next.acllog_max_len);
    ctx.shared.replication.set_min_replicas(next.min_replicas_to_write, next.min_replicas_max_lag);
    let notify = next.notify_keyspace_events;
    let (old_pass, old_coord) = { let c = ctx.shared.config.read(); (c.requirepass.clone(), c.coordinator_pass.clone()) };
    if next.requirepass != old_pass {
        // As Redis: requirepass is the default user's password.
        ctx.shared.acl.set_default_password(next.requirepass.as_deref());
    }
    if next.coordinator_pass != old_coord {
        ctx.shared.acl.set_coordinator_password(next.coordinator_pass.as_deref());
    }
    let maxmemory_changed = next.maxmemory != ctx.shared.config.read().maxmemory;
    ctx.shared.stats.maxmemory.store(next.maxmemory, std::sync::atomic::Ordering::Relaxed);
    *ctx.shared.config.write() = next;
    if maxmemory_changed {
        // The sampled figure the limit is compared with is refreshed now, not at the next timer tick, so the very
        // next command sees the new limit applied (as in Redis, which measures on every command).
        ctx.shared.stats.used_memory.store(super::info::rss_bytes(), std::sync::atomic::Ordering::Relaxed);
    }
    let shared = ctx.shared;
    shared.set_notify_flags(ctx.store(), notify);
    Value::ok()
}

fn config_resetstat(ctx: &mut Ctx) -> Value {
    ctx.shared.stats.reset();
    ctx.shared.metrics.reset();
    let store = ctx.store();
    store.locks.stats = Default::default();
    store.expired_keys = 0;
    Value::ok()
}

/// CONFIG REWRITE: the config file the server started with, each parameter's line set to its current value (the
/// first line of a parameter kept in place, its later lines dropped), parameters that differ from their defaults and
/// are not in the file appended; comments, blank lines and directives that are not parameters stay as they are.
/// Written to a temporary file, fsynced and renamed over the original, so a crash leaves one or the other.
fn config_rewrite(ctx: &mut Ctx) -> Value {
    let config = ctx.shared.config.read().clone();
    if config.config_file.is_empty() {
        return Value::error("ERR The server is running without a config file");
    }
    match rewrite_config_file(&config) {
        Ok(()) => Value::ok(),
        Err(e) => {
            tracing::warn!("CONFIG REWRITE failed: {e}");
            Value::error(format!("ERR Rewriting config file: {e}"))
        }
    }
}

fn rewrite_config_file(config: &crate::config::Config) -> std::io::Result<()> {
    use std::io::Write;
    let path = std::path::Path::new(&config.config_file);
    let text = std::fs::read_to_string(path)?;
    let line_of = |p: &crate::config::Param| {
        let v = (p.get)(config);
        if v.is_empty() { format!("{} \"\"", p.name) } else { format!("{} {v}", p.name) }
    };
    let mut written: Vec<&'static str> = Vec::new();
    let mut out = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        let name = line.split_whitespace().next().unwrap_or("");
        match (line.starts_with('#'), find_param(name)) {
            (false, Some(p)) => {
                if !written.contains(&p.name) {
                    written.push(p.name);
                    out.push_str(&line_of(p));
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(raw);
                out.push('\n');
            }
        }
    }
    let defaults = crate::config::Config::default();
    let mut header = false;
    for p in crate::config::PARAMS {
        if written.contains(&p.name) || (p.get)(config) == (p.get)(&defaults) {
            continue;
        }
        if !header {
            out.push_str("# Generated by CONFIG REWRITE\n");
            header = true;
        }
        out.push_str(&line_of(p));
        out.push('\n');
    }
    let tmp = path.with_extension(format!("rewrite-{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(out.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
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
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect::<Vec<_>>())
}

/// `SLOWLOG GET [count]`: newest first; count -1 = all (Redis's default count is 10).
fn slowlog_get(ctx: &mut Ctx) -> Value {
    let count = match ctx.args.get(2) {
        None => 10,
        Some(a) => match super::int_arg(a) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => n as usize,
            _ => return Value::error("ERR count should be greater than or equal to -1"),
        },
    };
    let log = ctx.shared.metrics.slow.log.lock();
    Value::Array(
        log.iter()
            .take(count)
            .map(|e| {
                Value::Array(vec![
                    Value::Integer(e.id as i64),
                    Value::Integer(e.unix_s),
                    Value::Integer(e.micros as i64),
                    Value::Array(e.args.iter().map(|a| Value::Bulk(a.clone())).collect()),
                    Value::bulk_str(&e.addr),
                    Value::Bulk(e.name.clone()),
                ])
            })
            .collect(),
    )
}

fn slowlog_len(ctx: &mut Ctx) -> Value {
    Value::Integer(ctx.shared.metrics.slow.log.lock().len() as i64)
}

fn slowlog_reset(ctx: &mut Ctx) -> Value {
    ctx.shared.metrics.slow.log.lock().clear();
    Value::ok()
}

fn help_lines(lines: &[&'static str]) -> Value {
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect::<Vec<_>>())
}

fn slowlog_help(_ctx: &mut Ctx) -> Value {
    help_lines(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Print this help.",
    ])
}

/// `LATENCY LATEST`: per event [name, time of the latest sample, its ms, the maximum ms].
fn latency_latest(ctx: &mut Ctx) -> Value {
    let lat = ctx.shared.metrics.slow.latency.lock();
    Value::Array(
        lat.iter()
            .filter_map(|(name, e)| {
                let (t, ms) = *e.samples.back()?;
                Some(Value::Array(vec![Value::bulk_str(name), Value::Integer(t), Value::Integer(ms as i64), Value::Integer(e.max_ms as i64)]))
            })
            .collect(),
    )
}

/// `LATENCY HISTORY event`: [[time, ms], ...], oldest first.
fn latency_history(ctx: &mut Ctx) -> Value {
    let name = String::from_utf8_lossy(&ctx.args[2]).to_ascii_lowercase();
    let lat = ctx.shared.metrics.slow.latency.lock();
    let samples = lat.get(name.as_str()).map(|e| e.samples.iter().map(|(t, ms)| Value::Array(vec![Value::Integer(*t), Value::Integer(*ms as i64)])).collect());
    Value::Array(samples.unwrap_or_default())
}

/// `LATENCY RESET [event ...]`: the number of events reset.
fn latency_reset(ctx: &mut Ctx) -> Value {
    let mut lat = ctx.shared.metrics.slow.latency.lock();
    if ctx.args.len() == 2 {
        let n = lat.len();
        lat.clear();
        return Value::Integer(n as i64);
    }
    let mut n = 0;
    for a in &ctx.args[2..] {
        let name = String::from_utf8_lossy(a).to_ascii_lowercase();
        if lat.remove(name.as_str()).is_some() {
            n += 1;
        }
    }
    Value::Integer(n)
}

/// `LATENCY DOCTOR`: a short report in words (Redis's is longer; the figures are the same).
fn latency_doctor(ctx: &mut Ctx) -> Value {
    let threshold = ctx.shared.config.read().latency_monitor_threshold;
    let lat = ctx.shared.metrics.slow.latency.lock();
    let mut out = String::new();
    if threshold == 0 {
        out.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Ruvio instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it.\n");
    } else if lat.is_empty() {
        out.push_str("Dave, no latency spike was observed during the lifetime of this Ruvio instance, not in the slightest bit.\n");
    } else {
        out.push_str(&format!("Latency spikes above {threshold} ms were observed:\n\n"));
        for (i, (name, e)) in lat.iter().enumerate() {
            let avg = e.samples.iter().map(|s| s.1).sum::<u64>() / e.samples.len().max(1) as u64;
            out.push_str(&format!(
                "{}. {name}: {} latency spikes (average {avg}ms, max {}ms). Check SLOWLOG GET for the commands, and INFO for the load.\n",
                i + 1,
                e.samples.len(),
                e.max_ms
            ));
        }
    }
    Value::Verbatim { format: *b"txt", text: Bytes::from(out) }
}

fn latency_help(_ctx: &mut Ctx) -> Value {
    help_lines(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "HISTORY <event>",
        "    Return latency samples for the specified event.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "HELP",
        "    Prints this help.",
    ])
}

/// MONITOR: from now on this client is shown every command run (monitor.rs); its lines arrive through its outbox.
fn monitor(ctx: &mut Ctx) -> Value {
    if ctx.in_exec {
        // Redis's text: a transaction expects one reply per command, which a monitor stream is not.
        return Value::error(ERR_MONITOR_DENY_BLOCKING);
    }
    ctx.shared.monitors.add(&ctx.client.info);
    Value::ok()
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
    // During a busy script (SHUTDOWN may run then: `allow_busy`) only NOSAVE ends the server, as in Redis; the
    // script is stopped where it is and what it wrote dropped from the write log (it never completed).
    let run = &ctx.shared.scripts.run;
    if !ctx.in_exec && run.busy(ctx.shared.config.read().busy_reply_threshold) {
        if !ctx.args[1..].iter().any(|a| eq_ic(a, "nosave")) {
            return crate::scripting::host::busy_error(ctx.shared);
        }
        run.kill.store(crate::scripting::KILL_SHUTDOWN, std::sync::atomic::Ordering::Release);
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
    let by_flag = [
        (WRITE, "write"),
        (READONLY, "read"),
        (ON_COLLECTIONS, "set"),
        (ON_COLLECTIONS, "sortedset"),
        (ON_COLLECTIONS, "list"),
        (ADMIN, "admin"),
        (ADMIN | DANGEROUS, "dangerous"),
        (BLOCKING, "blocking"),
    ];
    let mut cats: Vec<&'static str> = by_flag.iter().filter(|(f, _)| spec.has(*f)).map(|(_, c)| *c).collect();
    cats.push(if spec.has(FAST) { "fast" } else { "slow" });
    if !family.is_empty() && !cats.contains(&family) && !spec.has(ON_COLLECTIONS) {
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
    let counted = spec.counted_keys(inner);
    if spec.has(RUNS_SCRIPT) {
        // `<script|function> numkeys key... arg...`: a count that is not one, or more keys than given, names no keys
        // (an empty list, as Redis answers, not an error).
        let keys = match counted {
            Some(Ok(range)) => &inner[range],
            _ => &[],
        };
        return Value::Array(keys.iter().map(|k| Value::Bulk(k.clone())).collect());
    }
    // Elsewhere a count the command would refuse, or one that names no key, is Redis's "invalid arguments".
    if matches!(counted, Some(Err(_))) {
        return Value::error(ERR_GETKEYS_INVALID);
    }
    let idx = spec.key_indexes_in(inner);
    if idx.is_empty() {
        return Value::error(if counted.is_some() { ERR_GETKEYS_INVALID } else { ERR_GETKEYS_NO_KEYS });
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
