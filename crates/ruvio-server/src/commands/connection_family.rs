//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use ruvio_protocol::{Protocol, Value};

use super::flags::*;
use super::{eq_ic, int_arg, CommandSpec, ERR_SYNTAX};
use super::context::Ctx;
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "connection", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("ping", -1, FAST | SUBSCRIBED_OK | STALE, "Returns the server's liveliness response.", ping),
    cmd!("echo", 2, FAST, "Returns the given string.", echo),
    cmd!("hello", -1, NOAUTH | FAST | LOADING | STALE | NO_QUEUE | NOSCRIPT | ALLOW_BUSY, "Handshakes with the Redis server.", hello),
    cmd!("auth", -2, NOAUTH | FAST | LOADING | STALE | NOSCRIPT | ALLOW_BUSY, "Authenticates the connection.", auth),
    cmd!("select", 2, FAST | LOADING | STALE, "Changes the selected database.", select),
    cmd!("quit", -1, NOAUTH | FAST | LOADING | STALE | SUBSCRIBED_OK | NO_QUEUE | NOSCRIPT | ALLOW_BUSY, "Closes the connection.", quit),
    cmd!("reset", 1, NOAUTH | FAST | LOADING | STALE | SUBSCRIBED_OK | NO_QUEUE | NOSCRIPT | ALLOW_BUSY, "Resets the connection.", reset),
    CommandSpec {
        name: "client",
        arity: -2,
        flags: NOSCRIPT,
        keys: (0, 0, 0),
        group: "connection",
        summary: "A container for client connection commands.",
        handler: super::server_family::container_help,
        subcommands: CLIENT_SUBCOMMANDS,
    },
];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("id", 2, FAST | LOADING | STALE, "Returns the unique client ID of the connection.", client_id),
    cmd!("setname", 3, FAST | LOADING | STALE, "Sets the connection name.", client_setname),
    cmd!("getname", 2, FAST | LOADING | STALE, "Returns the name of the connection.", client_getname),
    cmd!("setinfo", 4, FAST | LOADING | STALE, "Sets information specific to the client or connection.", client_setinfo),
    cmd!("info", 2, FAST | LOADING | STALE, "Returns information about the connection.", client_info),
    cmd!("list", -2, ADMIN | LOADING | STALE, "Lists open connections.", client_list),
    cmd!("kill", -3, ADMIN | LOADING | STALE, "Terminates open connections.", client_kill),
    cmd!("unblock", -3, ADMIN | LOADING | STALE, "Unblocks a client blocked by a blocking command from a different connection.", client_unblock),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", client_help),
    cmd!("reply", 3, LOADING | STALE, "Instructs the server whether to reply to commands.", client_reply),
    cmd!("no-evict", 3, ADMIN | LOADING | STALE, "Accepted for compatibility (ON|OFF); Ruvio does not evict.", client_on_off),
    cmd!("no-touch", 3, LOADING | STALE, "Accepted for compatibility (ON|OFF); Ruvio keeps no access times.", client_on_off),
    cmd!("durability", -2, FAST | LOADING | STALE, "Reads or sets how many replicas must fsync each write of this connection before it is answered (REPLICAS n).", client_durability),
    cmd!("maint_notifications", -3, LOADING | STALE, "Accepted for compatibility; Ruvio sends no maintenance notifications.", client_ok),
];

fn ping(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if args.len() > 2 {
        return super::wrong_arity("ping");
    }
    // RESP2 subscribers get PING as a pub/sub message, as in Redis.
    if ctx.client.proto == Protocol::Resp2 && ctx.client.subscribed() {
        let payload = args.get(1).cloned().unwrap_or_default();
        return Value::Array(vec![Value::bulk(Bytes::from_static(b"pong")), Value::Bulk(payload)]);
    }
    match args.get(1) {
        Some(m) => Value::Bulk(m.clone()),
        None => Value::simple("PONG"),
    }
}

fn echo(ctx: &mut Ctx) -> Value {
    Value::Bulk(ctx.args[1].clone())
}

/// Logs the connection in as `user` if `pass` is right (ACL users; `requirepass` is the default user's password).
/// A failure is recorded in ACL LOG (reason `auth`).
fn check_password(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> Result<(), Value> {
    match ctx.shared.acl.authenticate(user, pass) {
        Some(u) => {
            ctx.client.login(u);
            Ok(())
        }
        None => {
            let name = String::from_utf8_lossy(user).into_owned();
            ctx.shared.acl.log_denial("auth", "toplevel", "AUTH".into(), &name, ctx.client.info.describe());
            Err(Value::error(ERR_WRONGPASS))
        }
    }
}

fn auth(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    // Every argument (user and password) is hidden from MONITOR, as in Redis.
    for i in 1..args.len() {
        ctx.redact(i);
    }
    let (user, pass) = match args.len() {
        2 => {
            if ctx.shared.acl.get("default").is_none_or(|u| u.perms().nopass) {
                return Value::error(ERR_AUTH_NO_PASSWORD);
            }
            (&b"default"[..], &args[1][..])
        }
        3 => (&args[1][..], &args[2][..]),
        _ => return Value::error(ERR_SYNTAX),
    };
    match check_password(ctx, user, pass) {
        Ok(()) => Value::ok(),
        Err(e) => e,
    }
}

fn hello(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let mut proto = ctx.client.proto;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        match super::parse_i64(v) {
            Some(2) => proto = Protocol::Resp2,
            Some(3) => proto = Protocol::Resp3,
            Some(_) => return Value::error(ERR_NOPROTO),
            None => return Value::error(ERR_PROTO_VERSION),
        }
        i = 2;
    }
    let mut setname = None;
    while i < args.len() {
        if eq_ic(&args[i], "auth") && i + 2 < args.len() {
            // The user and password are hidden from MONITOR, as in Redis.
            ctx.redact(i + 1);
            ctx.redact(i + 2);
            if let Err(e) = check_password(ctx, &args[i + 1], &args[i + 2]) {
                return e;
            }
            i += 3;
        } else if eq_ic(&args[i], "setname") && i + 1 < args.len() {
            if let Err(e) = valid_name(&args[i + 1]) {
                return e;
            }
            setname = Some(args[i + 1].clone());
            i += 2;
        } else {
            return crate::errors::hello_syntax(&args[i]);
        }
    }
    if !ctx.client.authenticated {
        return Value::error(ERR_HELLO_NOAUTH);
    }
    if let Some(name) = setname {
        *ctx.client.info.name.lock() = name;
    }
    ctx.client.proto = proto;
    ctx.client.info.resp.store(if proto == Protocol::Resp3 { 3 } else { 2 }, Ordering::Relaxed);
    let s = |v: &str| Value::bulk_str(v);
    Value::Map(vec![
        (s("server"), s("ruvio")),
        (s("version"), s(crate::REDIS_COMPAT_VERSION)),
        (s("proto"), Value::Integer(if proto == Protocol::Resp3 { 3 } else { 2 })),
        (s("id"), Value::Integer(ctx.client.id() as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Value::Array(vec![])),
        (s("ruvio_version"), s(crate::VERSION)),
    ])
}

fn select(ctx: &mut Ctx) -> Value {
    let n = match int_arg(&ctx.args[1]) {
        Ok(n) => n,
        Err(_) => return Value::error(ERR_NOT_INTEGER),
    };
    let count = ctx.shared.config.read().databases as i64;
    if n < 0 || n >= count {
        return Value::error(ERR_DB_INDEX_RANGE);
    }
    ctx.client.db = n as usize;
    ctx.client.info.db.store(n as usize, Ordering::Relaxed);
    Value::ok()
}

fn quit(ctx: &mut Ctx) -> Value {
    ctx.client.close_after_reply = true;
    Value::ok()
}

fn reset(ctx: &mut Ctx) -> Value {
    super::transaction_family::discard_state(ctx);
    super::transaction_family::unwatch_ctx(ctx);
    super::pubsub_family::unsubscribe_all(ctx.shared, ctx.client);
    ctx.client.db = 0;
    ctx.client.info.db.store(0, Ordering::Relaxed);
    ctx.client.proto = Protocol::Resp2;
    ctx.client.info.resp.store(2, Ordering::Relaxed);
    *ctx.client.info.name.lock() = Bytes::new();
    ctx.client.logout(&ctx.shared.acl);
    // CLIENT DURABILITY is connection state too: a pooled connection handed on after RESET must not keep making
    // the next user's writes wait for replicas (or fail with NOTDURABLE).
    ctx.client.durability_replicas = 0;
    ctx.shared.monitors.remove(&ctx.client.info);
    ctx.client.reply_mode = crate::client::ReplyMode::On;
    Value::simple("RESET")
}

fn valid_name(name: &[u8]) -> Result<(), Value> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(Value::error(ERR_CLIENT_NAME));
    }
    Ok(())
}

fn client_id(ctx: &mut Ctx) -> Value {
    Value::Integer(ctx.client.id() as i64)
}

fn client_setname(ctx: &mut Ctx) -> Value {
    if let Err(e) = valid_name(&ctx.args[2]) {
        return e;
    }
    *ctx.client.info.name.lock() = ctx.args[2].clone();
    Value::ok()
}

fn client_getname(ctx: &mut Ctx) -> Value {
    let name = ctx.client.info.name.lock().clone();
    if name.is_empty() { Value::Nil } else { Value::Bulk(name) }
}

fn client_setinfo(ctx: &mut Ctx) -> Value {
    let (attr, value) = (&ctx.args[2], &ctx.args[3]);
    let is_name = eq_ic(attr, "lib-name");
    if !is_name && !eq_ic(attr, "lib-ver") {
        return crate::errors::setinfo_unrecognized(attr);
    }
    // As Redis 7.2: the option is echoed as given.
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return crate::errors::setinfo_bad_value(attr);
    }
    let text = String::from_utf8_lossy(value).into_owned();
    if is_name {
        *ctx.client.info.lib_name.lock() = text;
    } else {
        *ctx.client.info.lib_ver.lock() = text;
    }
    Value::ok()
}

fn verbatim(text: String) -> Value {
    Value::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

fn client_info(ctx: &mut Ctx) -> Value {
    verbatim(format!("{}\n", ctx.client.info.describe()))
}

fn client_list(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let mut ids: Option<Vec<u64>> = None;
    let mut type_filter: Option<String> = None;
    if args.len() > 2 {
        if eq_ic(&args[2], "id") && args.len() > 3 {
            let mut v = Vec::new();
            for a in &args[3..] {
                match super::parse_i64(a) {
                    Some(n) if n > 0 => v.push(n as u64),
                    _ => return Value::error(ERR_INVALID_CLIENT_ID),
                }
            }
            ids = Some(v);
        } else if eq_ic(&args[2], "type") && args.len() == 4 {
            let t = String::from_utf8_lossy(&args[3]).to_ascii_lowercase();
            if !["normal", "master", "replica", "slave", "pubsub"].contains(&t.as_str()) {
                return crate::errors::unknown_client_type(&String::from_utf8_lossy(&args[3]));
            }
            type_filter = Some(t);
        } else {
            return Value::error(ERR_SYNTAX);
        }
    }
    let mut clients: Vec<_> = ctx.shared.clients.lock().values().cloned().collect();
    clients.sort_by_key(|c| c.id);
    let mut out = String::new();
    let type_ok = |c: &crate::client::ClientInfo| {
        let pubsub = c.is_pubsub();
        match type_filter.as_deref() {
            None => true,
            Some("pubsub") => pubsub,
            Some("normal") => !pubsub,
            // No replication links yet: no master or replica clients.
            Some(_) => false,
        }
    };
    // A killed client is gone for everyone else already (Redis frees it at once); its task is only closing it.
    for c in clients.iter().filter(|c| !c.is_killed() && ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) && type_ok(c)) {
        out.push_str(&c.describe());
        out.push('\n');
    }
    verbatim(out)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends the wait of a client blocked on keys (BLPOP, BZPOPMIN, ...), which then
/// answers as on its timeout, or with the UNBLOCKED error. 1 if there was such a wait, else 0.
fn client_unblock(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let Some(id) = super::parse_i64(&args[2]) else { return Value::error(crate::errors::ERR_NOT_INTEGER) };
    let error = match args.get(3) {
        None => false,
        Some(a) if super::eq_ic(a, "timeout") => false,
        Some(a) if super::eq_ic(a, "error") => true,
        Some(_) => return Value::error(ERR_CLIENT_UNBLOCK_REASON),
    };
    if args.len() > 4 {
        return Value::error(ERR_SYNTAX);
    }
    let client = ctx.shared.clients.lock().get(&(id as u64)).cloned();
    let Some(c) = client else { return Value::Integer(0) };
    if !c.unblockable.swap(false, std::sync::atomic::Ordering::AcqRel) {
        return Value::Integer(0);
    }
    if error {
        *c.unblock_with.lock() = Some(Value::error(ERR_UNBLOCKED));
    }
    c.unblock_notify.notify_one();
    Value::Integer(1)
}

fn client_kill(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let clients: Vec<_> = ctx.shared.clients.lock().values().cloned().collect();
    // Old form: CLIENT KILL addr:port
    if args.len() == 3 {
        let addr = String::from_utf8_lossy(&args[2]);
        return match clients.iter().find(|c| c.addr == addr) {
            Some(c) => {
                if c.id == ctx.client.id() {
                    ctx.client.close_after_reply = true;
                } else {
                    c.kill();
                }
                Value::ok()
            }
            None => Value::error(ERR_NO_SUCH_CLIENT),
        };
    }
    // New form: filters, AND-ed, as Redis 7 (networking.c clientKillCommand): each one only narrows the kill.
    if !args.len().is_multiple_of(2) {
        return Value::error(ERR_SYNTAX);
    }
    let mut by_id = None;
    let mut by_addr = None;
    let mut by_laddr = None;
    let mut by_type: Option<&'static str> = None;
    let mut by_user: Option<String> = None;
    let mut max_age: Option<u64> = None;
    let mut skipme = true;
    for pair in args[2..].chunks(2) {
        let v = String::from_utf8_lossy(&pair[1]).into_owned();
        match String::from_utf8_lossy(&pair[0]).to_ascii_lowercase().as_str() {
            "id" => match super::parse_i64(&pair[1]) {
                Some(n) if n > 0 => by_id = Some(n as u64),
                _ => return Value::error(ERR_CLIENT_ID_POSITIVE),
            },
            "maxage" => match super::parse_i64(&pair[1]) {
                Some(n) if n > 0 => max_age = Some(n as u64),
                Some(_) => return Value::error(ERR_MAXAGE_POSITIVE),
                None => return Value::error(ERR_MAXAGE_NOT_INTEGER),
            },
            "type" => match client_type_by_name(&v) {
                Some(t) => by_type = Some(t),
                None => return crate::errors::unknown_client_type(&v),
            },
            "addr" => by_addr = Some(v),
            "laddr" => by_laddr = Some(v),
            "user" => {
                if ctx.shared.acl.get(&v).is_none() {
                    return crate::errors::no_such_user(&v);
                }
                by_user = Some(v);
            }
            "skipme" => match v.to_ascii_lowercase().as_str() {
                "yes" => skipme = true,
                "no" => skipme = false,
                _ => return Value::error(ERR_SYNTAX),
            },
            _ => return Value::error(ERR_SYNTAX),
        }
    }
    let mut killed = 0;
    for c in &clients {
        if by_id.is_some_and(|id| id != c.id)
            || by_addr.as_ref().is_some_and(|a| a != &c.addr)
            || by_laddr.as_ref().is_some_and(|a| a != &c.laddr)
            || by_type.is_some_and(|t| t != client_type(c))
            || by_user.as_ref().is_some_and(|u| *u != *c.user.lock())
            // Redis kills only connections strictly older than MAXAGE seconds.
            || max_age.is_some_and(|age| c.created.elapsed().as_secs() <= age)
        {
            continue;
        }
        if c.id == ctx.client.id() {
            if skipme {
                continue;
            }
            // The caller gets its reply first, then the connection closes (as in Redis).
            ctx.client.close_after_reply = true;
        } else {
            c.kill();
        }
        killed += 1;
    }
    Value::Integer(killed)
}

/// A client class name as CLIENT KILL/LIST TYPE take it (`slave` is `replica`); None if unknown.
fn client_type_by_name(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "normal" => Some("normal"),
        "replica" | "slave" => Some("replica"),
        "pubsub" => Some("pubsub"),
        "master" => Some("master"),
        _ => None,
    }
}

/// A client's class, as Redis's getClientType: `pubsub` while it has subscriptions, else `normal` (Ruvio has no
/// replication links yet, so never `master` or `replica`).
fn client_type(c: &crate::client::ClientInfo) -> &'static str {
    if c.is_pubsub() {
        "pubsub"
    } else {
        "normal"
    }
}

fn client_help(_ctx: &mut Ctx) -> Value {
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ID",
        "    Return the ID of the current connection.",
        "GETNAME",
        "    Return the name of the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <LIB-NAME|LIB-VER> <value>",
        "    Set client library name or version.",
        "INFO",
        "    Return information about the current client connection.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]",
        "    Return information about client connections.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "    * ID <client-id>",
        "      Kill connections by client id.",
        "    * MAXAGE <maxage>",
        "      Kill connections older than the specified age.",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect::<Vec<_>>())
}

fn client_on_off(ctx: &mut Ctx) -> Value {
    if eq_ic(&ctx.args[2], "on") || eq_ic(&ctx.args[2], "off") {
        Value::ok()
    } else {
        Value::error(ERR_SYNTAX)
    }
}

/// CLIENT REPLY ON|OFF|SKIP: the connection leaves out replies (all from OFF until ON, or the next command's after
/// SKIP). OFF and SKIP are not answered themselves; ON answers OK. Pub/sub messages still go out, as in Redis.
fn client_reply(ctx: &mut Ctx) -> Value {
    use crate::client::ReplyMode;
    let mode = &ctx.args[2];
    ctx.client.reply_mode = if eq_ic(mode, "on") {
        ReplyMode::On
    } else if eq_ic(mode, "off") {
        ReplyMode::Off
    } else if eq_ic(mode, "skip") {
        // SKIP while OFF changes nothing (Redis).
        if ctx.client.reply_mode == ReplyMode::Off { ReplyMode::Off } else { ReplyMode::SkipNext }
    } else {
        return Value::error(ERR_SYNTAX);
    };
    if ctx.client.reply_mode != ReplyMode::On {
        // This command's own reply is left out too.
        ctx.client.reply_skip_current = true;
    }
    Value::ok()
}

fn client_ok(_ctx: &mut Ctx) -> Value {
    Value::ok()
}

/// CLIENT DURABILITY [REPLICAS n]: with n > 0 every write of this connection, lock grants included, is answered only
/// once it is fsynced here and n replicas acknowledged it fsynced (docs/replication.md).
fn client_durability(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    match args.len() {
        2 => Value::Array(vec![Value::bulk(Bytes::from_static(b"replicas")), Value::Integer(ctx.client.durability_replicas as i64)]),
        4 if super::eq_ic(&args[2], "replicas") => {
            let n = match super::int_arg(&args[3]) {
                Ok(n) if n >= 0 => n as usize,
                Ok(_) => return Value::error(crate::errors::ERR_VALUE_OUT_OF_RANGE),
                Err(e) => return e,
            };
            if n > 0 && !ctx.shared.aof.enabled() {
                return Value::error(crate::errors::ERR_DURABILITY_NO_AOF);
            }
            ctx.client.durability_replicas = n;
            Value::ok()
        }
        _ => Value::error(crate::errors::ERR_SYNTAX),
    }
}
