//! OBJECT: how a key's value is stored. Only ENCODING (and HELP) are served; Ruvio keeps no access-time or
//! frequency data, so IDLETIME and FREQ are not offered.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::CommandSpec;
use super::context::Ctx;
use crate::keyspace::{CompactBytes, Data};

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec { name: "encoding", arity: 3, flags: READONLY, keys: (2, 2, 1), group: "generic", summary: "Returns the internal encoding of a Redis object.", handler: encoding, subcommands: &[] },
    CommandSpec { name: "help", arity: 2, flags: LOADING | STALE, keys: (0, 0, 0), group: "generic", summary: "Returns helpful text about the different subcommands.", handler: help, subcommands: &[] },
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "object",
    arity: -2,
    flags: 0,
    keys: (0, 0, 0),
    group: "generic",
    summary: "A container for object introspection commands.",
    handler: super::server_family::container_help,
    subcommands: SUBCOMMANDS,
}];

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
