//! Keyspace notifications (`notify-keyspace-events`), as Redis 7.0 sends them: for each change, a message on
//! `__keyspace@<db>__:<key>` carrying the event name (class `K`) and one on `__keyevent@<db>__:<event>` carrying
//! the key (class `E`), when the event's class is enabled.
//!
//! Events are derived from the command that made the change (one table, [`events_of`]), once the command is known
//! to have changed something, so no handler publishes anything itself; a key a command left empty (a list popped
//! dry) also gets `del`; expiries are `expired` (class `x`). **Ruvio:** the lock commands' events are class `L`
//! (`lease`, `semaphore`, `renew`, `release`, `ifgt`), not part of `A`, so a Redis application that asks for `A`
//! sees what Redis would send.

/// Class bits, Redis's letters.
pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const MODULE: u32 = 1 << 12; // d
pub const NEW: u32 = 1 << 13; // n
pub const LOCK: u32 = 1 << 14; // L (Ruvio)
/// `A`: every Redis class but m and n (as Redis).
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

const LETTERS: &[(char, u32)] = &[
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('m', KEY_MISS),
    ('d', MODULE),
    ('n', NEW),
    ('L', LOCK),
];

/// Parses a `notify-keyspace-events` value.
pub fn parse(v: &str) -> Result<u32, String> {
    let mut flags = 0;
    for c in v.chars() {
        flags |= match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            _ => LETTERS.iter().find(|(l, _)| *l == c).map(|(_, f)| *f).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdnL'.".to_string()
            })?,
        };
    }
    Ok(flags)
}

/// The value CONFIG GET shows (Redis's order: `A` when all of it, then the other classes, then K and E).
pub fn format(flags: u32) -> String {
    let mut out = String::new();
    let all = flags & ALL == ALL;
    if all {
        out.push('A');
    }
    for (c, f) in LETTERS {
        if flags & f != 0 && !(all && ALL & f != 0) {
            out.push(*c);
        }
    }
    if flags & KEYSPACE != 0 {
        out.push('K');
    }
    if flags & KEYEVENT != 0 {
        out.push('E');
    }
    out
}

/// Whether any event would be sent at all (a class, and K or E).
pub fn active(flags: u32) -> bool {
    flags & (KEYSPACE | KEYEVENT) != 0 && flags & !(KEYSPACE | KEYEVENT) != 0
}

/// The events a write command that changed something sends: (class, event, index of the key argument).
pub fn events_of(name: &str, args: &[bytes::Bytes]) -> Vec<(u32, &'static str, usize)> {
    use crate::commands::eq_ic;
    let one = |class, event| vec![(class, event, 1)];
    let every_key = |class, event, from: usize, step: usize| (from..args.len()).step_by(step).map(|i| (class, event, i)).collect();
    match name {
        "set" => {
            // SET ... EX/PX/EXAT/PXAT also sets a deadline: `set`, then `expire`, as Redis sends them.
            let ttl = args.iter().skip(3).any(|a| ["ex", "px", "exat", "pxat"].iter().any(|o| eq_ic(a, o)));
            if ttl { vec![(STRING, "set", 1), (GENERIC, "expire", 1)] } else { one(STRING, "set") }
        }
        "setex" | "psetex" => vec![(STRING, "set", 1), (GENERIC, "expire", 1)],
        "setnx" | "getset" => one(STRING, "set"),
        "mset" | "msetnx" => every_key(STRING, "set", 1, 2),
        "getdel" | "del" | "unlink" => {
            if name == "getdel" {
                one(GENERIC, "del")
            } else {
                every_key(GENERIC, "del", 1, 1)
            }
        }
        "getex" => one(GENERIC, if args.len() > 2 && eq_ic(&args[2], "persist") { "persist" } else { "expire" }),
        "expire" | "pexpire" | "expireat" | "pexpireat" => one(GENERIC, "expire"),
        "persist" => one(GENERIC, "persist"),
        "rename" | "renamenx" => vec![(GENERIC, "rename_from", 1), (GENERIC, "rename_to", 2)],
        "copy" => vec![(GENERIC, "copy_to", 2)],
        "move" => vec![(GENERIC, "move_from", 1)],
        "incr" | "decr" | "incrby" | "decrby" => one(STRING, "incrby"),
        "incrbyfloat" => one(STRING, "incrbyfloat"),
        "append" => one(STRING, "append"),
        "setrange" => one(STRING, "setrange"),
        "setbit" | "bitfield" => one(STRING, "setbit"),
        "bitop" => vec![(STRING, "set", 2)],
        "hset" | "hmset" | "hsetnx" => one(HASH, "hset"),
        "hdel" => one(HASH, "hdel"),
        "hincrby" => one(HASH, "hincrby"),
        "hincrbyfloat" => one(HASH, "hincrbyfloat"),
        "lpush" | "lpushx" => one(LIST, "lpush"),
        "rpush" | "rpushx" => one(LIST, "rpush"),
        "lpop" | "blpop" => one(LIST, "lpop"),
        "rpop" | "brpop" => one(LIST, "rpop"),
        "linsert" => one(LIST, "linsert"),
        "lset" => one(LIST, "lset"),
        "lrem" => one(LIST, "lrem"),
        "ltrim" => one(LIST, "ltrim"),
        "rpoplpush" | "brpoplpush" => vec![(LIST, "rpop", 1), (LIST, "lpush", 2)],
        "lmove" | "blmove" => {
            let end = |i: usize, l: &'static str, r: &'static str| if args.len() > i && eq_ic(&args[i], "left") { l } else { r };
            vec![(LIST, end(3, "lpop", "rpop"), 1), (LIST, end(4, "lpush", "rpush"), 2)]
        }
        "sadd" => one(SET, "sadd"),
        "srem" => one(SET, "srem"),
        "spop" => one(SET, "spop"),
        "smove" => vec![(SET, "srem", 1), (SET, "sadd", 2)],
        "sinterstore" | "sunionstore" | "sdiffstore" => vec![(SET, static_name(name), 1)],
        "zadd" => one(ZSET, if args.iter().skip(2).any(|a| eq_ic(a, "incr")) { "zincr" } else { "zadd" }),
        "zincrby" => one(ZSET, "zincr"),
        "zrem" => one(ZSET, "zrem"),
        "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex" | "zpopmin" | "zpopmax" => one(ZSET, static_name(name)),
        "bzpopmin" => one(ZSET, "zpopmin"),
        "bzpopmax" => one(ZSET, "zpopmax"),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" => vec![(ZSET, static_name(name), 1)],
        "lease" | "semaphore" | "renew" | "release" | "ifgt" => one(LOCK, static_name(name)),
        _ => Vec::new(),
    }
}

fn static_name(name: &str) -> &'static str {
    // The command table's names are static; find the one equal to `name`.
    crate::commands::lookup(name.as_bytes()).map_or("", |s| s.name)
}
