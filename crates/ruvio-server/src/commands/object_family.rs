//! OBJECT: how a key's value is stored. Only ENCODING (and HELP) are served; Ruvio keeps no access-time or
//! frequency data, so IDLETIME and FREQ are not offered.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::CommandSpec;
use super::context::Ctx;
use crate::keyspace::{CompactBytes, Data};

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec { name: "encoding", arity: 3, flags: READONLY | KEYS_NOT_READ, keys: (2, 2, 1), group: "generic", summary: "Returns the internal encoding of a Redis object.", handler: encoding, subcommands: &[] },
    CommandSpec { name: "help", arity: 2, flags: LOADING | STALE, keys: (0, 0, 0), group: "generic", summary: "Returns helpful text about the different subcommands.", handler: help, subcommands: &[] },
];

static MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec { name: "usage", arity: -3, flags: READONLY | KEYS_NOT_READ, keys: (2, 2, 1), group: "server", summary: "Estimates the memory usage of a key.", handler: memory_usage, subcommands: &[] },
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "object",
        arity: -2,
        flags: 0,
        keys: (0, 0, 0),
        group: "generic",
        summary: "A container for object introspection commands.",
        handler: super::server_family::container_help,
        subcommands: SUBCOMMANDS,
    },
    CommandSpec {
        name: "memory",
        arity: -2,
        flags: 0,
        keys: (0, 0, 0),
        group: "server",
        summary: "A container for memory diagnostics commands.",
        handler: super::server_family::container_help,
        subcommands: MEMORY_SUBCOMMANDS,
    },
];

/// MEMORY USAGE key [SAMPLES n]: an estimate in bytes of the key's slot, its name and its value (Ruvio always
/// measures the whole value, so SAMPLES is accepted and ignored).
fn memory_usage(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match args.len() {
        3 => {}
        5 if super::eq_ic(&args[3], "samples") && super::parse_i64(&args[4]).is_some_and(|n| n >= 0) => {}
        5 if super::eq_ic(&args[3], "samples") => return Value::error(crate::errors::ERR_NOT_INTEGER),
        _ => return Value::error(crate::errors::ERR_SYNTAX),
    }
    let Some(e) = ctx.db().get(&args[2], now) else { return Value::Nil };
    // The 40-byte table slot, the key's bytes beyond it, and what the value holds on the heap.
    let value = match &e.data {
        Data::Str(s) => s.heap_size(),
        Data::Hash(h) => h.heap_size(),
        Data::List(l) => crate::keyspace::list::heap_size(l) + 32,
        Data::Set(s) => s.heap_size() + 64,
        Data::ZSet(z) => z.heap_size() + 96,
        Data::Lease(_) => 16,
        Data::Semaphore(s) => 32 + s.holders.len() * 16,
    };
    let key_extra = if args[2].len() > 14 { args[2].len() + 8 } else { 0 };
    Value::Integer((40 + key_extra + value) as i64)
}

/// Redis's names: a string is `int` when it reads as a 64-bit integer, `embstr` up to 44 bytes, else `raw` (and
/// `raw` once APPEND or SETRANGE grew it in place); a hash is `listpack` or `hashtable`. Locks are Ruvio's own
/// types and answer their type name.
fn string_encoding(s: &CompactBytes) -> &'static str {
    if matches!(s, CompactBytes::Growing(_)) {
        "raw"
    } else if s.len() <= 20 && super::parse_i64(s).is_some() {
        "int"
    } else if s.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

fn encoding(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let Some(e) = ctx.db().get(&args[2], now) else { return Value::Nil };
    let name = match &e.data {
        Data::Str(s) => string_encoding(s),
        Data::Hash(h) => h.encoding(),
        Data::List(_) => "quicklist",
        Data::Set(s) => s.encoding(),
        Data::ZSet(z) => z.encoding(),
        Data::Lease(_) => "lease",
        Data::Semaphore(_) => "semaphore",
    };
    Value::Bulk(Bytes::from_static(name.as_bytes()))
}

fn help(_ctx: &mut Ctx) -> Value {
    let lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "HELP",
        "    Print this help.",
    ];
    Value::Array(lines.iter().map(|l| Value::simple(l)).collect())
}
