//! SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE. All three save commands run the same compaction (a snapshot plus a fresh
//! log file; see [`crate::persistence::rewrite`]); SAVE waits for it, the others return at once.

use ruvio_protocol::Value;

use super::flags::*;
use super::CommandSpec;
use super::context::Ctx;
use crate::blocking::Block;
use crate::persistence::rewrite;
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "server", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("save", 1, ADMIN | NO_MULTI | NOSCRIPT, "Synchronously saves the database(s) to disk.", save),
    cmd!("bgsave", -1, ADMIN | NOSCRIPT, "Asynchronously saves the database(s) to disk.", bgsave),
    cmd!("bgrewriteaof", 1, ADMIN | NOSCRIPT, "Asynchronously rewrites the append-only file to disk.", bgrewriteaof),
    cmd!("lastsave", 1, FAST | LOADING | STALE, "Returns the Unix timestamp of the last successful save to disk.", lastsave),
];

fn save(ctx: &mut Ctx) -> Value {
    if ctx.in_exec {
        return Value::error(ERR_NOT_IN_MULTI);
    }
    // Register before starting so the completion cannot be missed; a rewrite already running also counts, as it
    // covers every write made before this command.
    let (tx, rx) = tokio::sync::oneshot::channel();
    ctx.shared.aof.rewrite_waiters.lock().push(tx);
    let _ = rewrite::start(ctx.shared);
    ctx.unlock();
    ctx.set_block(Block { rx, timeout: None, cancel: Box::new(|_| {}), abandon: None, timeout_reply: Value::error(ERR_SAVE_INTERRUPTED) });
    Value::Nil
}

fn bgsave(ctx: &mut Ctx) -> Value {
    if ctx.args.len() > 2 || ctx.args.get(1).is_some_and(|a| !super::eq_ic(a, "schedule")) {
        return Value::error(super::ERR_SYNTAX);
    }
    match rewrite::start(ctx.shared) {
        Ok(()) => Value::simple("Background saving started"),
        Err(_) if ctx.args.len() == 2 => Value::simple("Background saving scheduled"),
        Err(_) => Value::error(ERR_BGSAVE_IN_PROGRESS),
    }
}

fn bgrewriteaof(ctx: &mut Ctx) -> Value {
    match rewrite::start(ctx.shared) {
        Ok(()) => Value::simple("Background append only file rewriting started"),
        Err(_) => Value::error(ERR_REWRITE_IN_PROGRESS),
    }
}

fn lastsave(ctx: &mut Ctx) -> Value {
    Value::Integer(ctx.shared.aof.stats.lastsave.load(std::sync::atomic::Ordering::Relaxed))
}
