//! ACL: users and what they may run (acl.rs holds the users; this is the command that manages them, Redis 6+
//! syntax: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG, SAVE, LOAD, GENPASS).

use std::sync::Arc;

use bytes::Bytes;
use ruvio_protocol::Value;

use super::context::Ctx;
use super::flags::*;
use super::CommandSpec;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "server", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    // As Redis: a script may not manage users.
    flags: NOSCRIPT,
    keys: (0, 0, 0),
    group: "server",
    summary: "A container for Access List Control commands.",
    handler: super::server_family::container_help,
    subcommands: ACL_SUBCOMMANDS,
}];

static ACL_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("setuser", -3, ADMIN | LOADING | STALE, "Creates and modifies an ACL user and its rules.", setuser),
    cmd!("getuser", 3, ADMIN | LOADING | STALE, "Lists the ACL rules of a user.", getuser),
    cmd!("deluser", -3, ADMIN | LOADING | STALE, "Deletes ACL users, and terminates their connections.", deluser),
    cmd!("list", 2, ADMIN | LOADING | STALE, "Dumps the effective rules in ACL file format.", list),
    cmd!("users", 2, ADMIN | LOADING | STALE, "Lists all ACL users.", users),
    cmd!("whoami", 2, LOADING | STALE, "Returns the authenticated username of the current connection.", whoami),
    cmd!("cat", -2, LOADING | STALE, "Lists the ACL categories, or the commands inside a category.", cat),
    cmd!("log", -2, ADMIN | LOADING | STALE, "Lists recent security events generated due to commands rejected by ACL rules.", log),
    cmd!("save", 2, ADMIN | LOADING | STALE, "Saves the effective ACL rules in the configured ACL file.", save),
    cmd!("load", 2, ADMIN | LOADING | STALE, "Reloads the rules from the configured ACL file.", load),
    cmd!("dryrun", -4, ADMIN | LOADING | STALE, "Simulates the execution of a command by a user, without executing the command.", dryrun),
    cmd!("genpass", -2, LOADING | STALE, "Generates a pseudorandom, secure password that can be used to identify ACL users.", genpass),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", help),
];

fn text(b: &Bytes) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn setuser(ctx: &mut Ctx) -> Value {
    let name = text(&ctx.args[2]);
    let rules: Vec<String> = ctx.args[3..].iter().map(text).collect();
    match ctx.shared.acl.set_user(&name, &rules) {
        Ok(()) => {
            kill_revoked_subscribers(ctx, &[name]);
            Value::ok()
        }
        Err(e) => Value::error(format!("ERR {e}")),
    }
}

/// Closes the connections of `names` subscribed to a channel or pattern their user may no longer access, as
/// Redis 7 does when channel permissions are taken away (ACL SETUSER resetchannels, ACL LOAD): a subscriber
/// must not keep receiving what it could not subscribe to now. Subscriptions still allowed are left alone.
fn kill_revoked_subscribers(ctx: &mut Ctx, names: &[String]) {
    let perms: Vec<(String, Arc<crate::acl::Perms>)> =
        names.iter().filter_map(|n| ctx.shared.acl.get(n).map(|u| (n.clone(), u.perms()))).filter(|(_, p)| !p.any_all_channels()).collect();
    if perms.is_empty() {
        return;
    }
    let mut doomed = Vec::new();
    ctx.shared.pubsub.lock().for_each_subscription(|name, pattern, client| {
        if doomed.iter().any(|c: &Arc<crate::client::ClientInfo>| c.id == client.id) {
            return;
        }
        let user = client.user.lock().clone();
        if perms.iter().any(|(n, p)| *n == user && !p.may_subscribe(name, pattern)) {
            doomed.push(client.clone());
        }
    });
    for c in doomed {
        if c.id == ctx.client.id() {
            ctx.client.close_after_reply = true;
        } else {
            c.kill();
        }
    }
}

/// ACL DRYRUN user command [arg ...]: whether `user` could run the command, without running it (Redis 7.0's
/// replies: OK, or a bulk string saying what is denied).
fn dryrun(ctx: &mut Ctx) -> Value {
    let name = text(&ctx.args[2]);
    let Some(user) = ctx.shared.acl.get(&name) else { return Value::error(format!("ERR User '{name}' not found")) };
    let args = &ctx.args[3..];
    let resolved = match super::resolve(args) {
        Ok(r) => r,
        // An unknown command or subcommand is "not found"; a known one with the wrong number of arguments gets
        // resolve's arity error, as in Redis.
        Err(e) => {
            let known = super::lookup_public(&args[0]).is_some_and(|spec| {
                !spec.arity_ok(args.len()) || spec.subcommands.is_empty() || spec.find_subcommand(&args[1]).is_some()
            });
            return if known { e } else { Value::error(format!("ERR Command '{}' not found", text(&args[0]))) };
        }
    };
    if resolved.parent.unwrap_or(resolved.spec).has(INTERNAL) {
        return Value::error(format!("ERR Command '{}' not found", text(&args[0])));
    }
    match user.perms().check(&resolved, args) {
        Ok(()) => Value::ok(),
        Err(d) => Value::bulk(Bytes::from(d.dryrun_text())),
    }
}

fn getuser(ctx: &mut Ctx) -> Value {
    let Some(user) = ctx.shared.acl.get(&text(&ctx.args[2])) else { return Value::Nil };
    let p = user.perms();
    let s = |v: &str| Value::bulk_str(v);
    let mut flags = vec![s(if p.enabled { "on" } else { "off" })];
    if p.nopass {
        flags.push(s("nopass"));
    }
    Value::Map(vec![
        (s("flags"), Value::Array(flags)),
        (s("passwords"), Value::Array(p.passwords.iter().map(|h| s(&hex::encode(h))).collect())),
        (s("commands"), s(&p.commands_text())),
        (s("keys"), s(&p.keys_text())),
        (s("channels"), s(&p.channels_text())),
        (
            s("selectors"),
            Value::Array(
                p.selectors
                    .iter()
                    .map(|sel| Value::Map(vec![(s("commands"), s(&sel.commands_text())), (s("keys"), s(&sel.keys_text())), (s("channels"), s(&sel.channels_text()))]))
                    .collect(),
            ),
        ),
    ])
}

/// Closes the connections logged in as any of `names` (their user no longer exists), as Redis does.
fn kill_clients_of(ctx: &mut Ctx, names: &[String]) {
    let clients: Vec<_> = ctx.shared.clients.lock().values().cloned().collect();
    for c in clients {
        if names.contains(&c.user.lock()) {
            if c.id == ctx.client.id() {
                ctx.client.close_after_reply = true;
            } else {
                c.kill();
            }
        }
    }
}

fn deluser(ctx: &mut Ctx) -> Value {
    let names: Vec<String> = ctx.args[2..].iter().map(text).collect();
    if names.iter().any(|n| n == "default") {
        return Value::error("ERR The 'default' user cannot be removed");
    }
    let deleted: Vec<String> = names.into_iter().filter(|n| ctx.shared.acl.delete(n)).collect();
    kill_clients_of(ctx, &deleted);
    Value::Integer(deleted.len() as i64)
}

fn list(ctx: &mut Ctx) -> Value {
    Value::Array(ctx.shared.acl.list().into_iter().map(|l| Value::bulk(Bytes::from(l))).collect())
}

fn users(ctx: &mut Ctx) -> Value {
    Value::Array(ctx.shared.acl.names().into_iter().map(|l| Value::bulk(Bytes::from(l))).collect())
}

fn whoami(ctx: &mut Ctx) -> Value {
    Value::bulk(Bytes::from(ctx.client.info.user.lock().clone()))
}

fn cat(ctx: &mut Ctx) -> Value {
    match ctx.args.get(2) {
        None => Value::Array(crate::acl::CATEGORIES.iter().map(|c| Value::bulk_str(c)).collect()),
        Some(_) if ctx.args.len() > 3 => Value::error("ERR unknown subcommand or wrong number of arguments for 'CAT'"),
        Some(c) => match crate::acl::commands_in(&text(c)) {
            Some(cmds) => Value::Array(cmds.into_iter().map(|c| Value::bulk(Bytes::from(c))).collect()),
            None => Value::error(format!("ERR Unknown category '{}'", text(c))),
        },
    }
}

fn log(ctx: &mut Ctx) -> Value {
    let n = match ctx.args.get(2) {
        None => 10,
        Some(a) if super::eq_ic(a, "reset") && ctx.args.len() == 3 => {
            ctx.shared.acl.log_reset();
            return Value::ok();
        }
        Some(a) if ctx.args.len() == 3 => match super::parse_i64(a) {
            Some(n) if n >= 0 => n as usize,
            _ => return Value::error("ERR value is out of range, must be positive"),
        },
        Some(_) => return Value::error(crate::errors::ERR_SYNTAX),
    };
    let s = |v: &str| Value::bulk_str(v);
    let now = std::time::Instant::now();
    Value::Array(
        ctx.shared
            .acl
            .log_entries(n)
            .into_iter()
            .map(|e| {
                Value::Map(vec![
                    (s("count"), Value::Integer(e.count as i64)),
                    (s("reason"), s(e.reason)),
                    (s("context"), s(e.context)),
                    (s("object"), s(&e.object)),
                    (s("username"), s(&e.username)),
                    (s("age-seconds"), Value::Double(now.duration_since(e.created).as_secs_f64())),
                    (s("client-info"), s(&e.client_info)),
                    (s("entry-id"), Value::Integer(e.entry_id as i64)),
                    (s("timestamp-created"), Value::Integer(e.created_ms as i64)),
                    (s("timestamp-last-updated"), Value::Integer(e.updated_ms as i64)),
                ])
            })
            .collect(),
    )
}

const ERR_NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn save(ctx: &mut Ctx) -> Value {
    let path = ctx.shared.config.read().aclfile.clone();
    if path.is_empty() {
        return Value::error(ERR_NO_ACLFILE);
    }
    // The built-in coordinator user comes from `coordinator-pass`, not from the file.
    let lines: Vec<String> = ctx.shared.acl.list().into_iter().filter(|l| !l.starts_with(&format!("user {} ", crate::acl::COORDINATOR_USER))).collect();
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        for l in &lines {
            writeln!(f, "{l}")?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    match written {
        Ok(()) => Value::ok(),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Value::error(format!("ERR There was an error trying to save the ACLs. Please check the server logs for more information ({e})"))
        }
    }
}

fn load(ctx: &mut Ctx) -> Value {
    let (path, coord) = {
        let c = ctx.shared.config.read();
        (c.aclfile.clone(), c.coordinator_pass.clone())
    };
    if path.is_empty() {
        return Value::error(ERR_NO_ACLFILE);
    }
    let lines = match crate::acl::read_acl_file(&path) {
        Ok(l) => l,
        Err(e) => return Value::error(format!("ERR {e}")),
    };
    match ctx.shared.acl.replace_all(&lines, &["default"]) {
        Ok(gone) => {
            ctx.shared.acl.set_coordinator_password(coord.as_deref());
            let gone: Vec<String> = gone.into_iter().filter(|n| ctx.shared.acl.get(n).is_none()).collect();
            kill_clients_of(ctx, &gone);
            let names = ctx.shared.acl.names();
            kill_revoked_subscribers(ctx, &names);
            Value::ok()
        }
        Err(e) => Value::error(format!("ERR {e}")),
    }
}

fn genpass(ctx: &mut Ctx) -> Value {
    let bits = match ctx.args.get(2) {
        None => 256,
        Some(a) => match super::parse_i64(a) {
            Some(n) if (1..=4096).contains(&n) => n as usize,
            _ => return Value::error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
        },
    };
    use rand::RngCore;
    let mut bytes = vec![0u8; bits.div_ceil(8)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut h = hex::encode(bytes);
    h.truncate(bits.div_ceil(4));
    Value::bulk(Bytes::from(h))
}

fn help(_ctx: &mut Ctx) -> Value {
    let lines = [
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect())
}
