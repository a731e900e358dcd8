//! SORT and SORT_RO, as Redis 7.0 (`sort.c`): the elements of a list, set or sorted set, ordered numerically or
//! (ALPHA) bytewise, optionally by the values of other keys (`BY pattern`, `nosort` when the pattern has no `*`),
//! sliced (`LIMIT offset count`), projected (`GET pattern`, `#` for the element itself, `key->field` for a hash
//! field), and either returned or stored as a list (`STORE destination`, deleted when the result is empty).
//!
//! Work is bounded by the sorted key (its length) times the GET patterns (bounded by the command's arity); nothing
//! here recurses. The STORE destination is a key of the command (`STORE_KEY` in the table), so the ACL checks it and
//! the write log records the command as it came, through the normal write path.

use std::cmp::Ordering;

use bytes::Bytes;
use ruvio_protocol::Value;

use super::context::{Caller, Ctx};
use super::flags::*;
use super::{eq_ic, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::keyspace::{Data, Db, Entry, ListValue};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sort",
        arity: -2,
        flags: WRITE | DENYOOM | STORE_KEY | DANGEROUS | ON_COLLECTIONS,
        keys: (1, 1, 1),
        group: "generic",
        summary: "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
        handler: sort,
        subcommands: &[],
    },
    CommandSpec {
        name: "sort_ro",
        arity: -2,
        flags: READONLY | DANGEROUS | ON_COLLECTIONS,
        keys: (1, 1, 1),
        group: "generic",
        summary: "Returns the sorted elements of a list, a set, or a sorted set.",
        handler: sort_ro,
        subcommands: &[],
    },
];

pub const ERR_SCORES: &str = "ERR One or more scores can't be converted into double";
pub const ERR_BY_ACL: &str = "ERR BY option of SORT denied due to insufficient ACL permissions.";
pub const ERR_GET_ACL: &str = "ERR GET option of SORT denied due to insufficient ACL permissions.";

/// The index of SORT's destination key (the argument after the last `STORE`), skipping the arguments of the other
/// options as Redis's `sortGetKeys` does, so a pattern spelled `store` is not taken for the option.
pub fn store_key_index(args: &[Bytes]) -> Option<usize> {
    let mut found = None;
    let mut j = 2;
    while j < args.len() {
        let skip = if eq_ic(&args[j], "limit") {
            2
        } else if eq_ic(&args[j], "get") || eq_ic(&args[j], "by") {
            1
        } else if eq_ic(&args[j], "store") {
            if j + 1 < args.len() {
                found = Some(j + 1);
            }
            1
        } else {
            0
        };
        j += 1 + skip;
    }
    found
}

fn sort(ctx: &mut Ctx) -> Value {
    sort_generic(ctx, false)
}

fn sort_ro(ctx: &mut Ctx) -> Value {
    sort_generic(ctx, true)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is replaced by the element and
/// the key read as a string, or with `->field` after the `*`, as that hash field. Anything else (no `*`, a missing
/// key, another type) is nothing.
fn lookup_by_pattern(db: &mut Db, pattern: &[u8], elem: &[u8], now: u64) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let rest = &pattern[star + 1..];
    let arrow = rest.windows(2).position(|w| w == b"->").filter(|&i| i + 2 < rest.len());
    let (suffix, field) = match arrow {
        Some(i) => (&rest[..i], Some(&rest[i + 2..])),
        None => (rest, None),
    };
    let mut key = Vec::with_capacity(star + elem.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(suffix);
    match (&db.get(&key, now)?.data, field) {
        (Data::Str(s), None) => Some(s.to_vec()),
        (Data::Hash(h), Some(f)) => h.get(f).map(|v| v.to_vec()),
        _ => None,
    }
}

/// C's `strtod` as Redis uses it for SORT weights: leading blanks skipped, the whole rest must parse; an empty
/// string is 0 (strtod consumes nothing and stops at the terminator); NaN and overflow are errors.
fn weight(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if s.is_empty() {
        return Some(0.0);
    }
    let v: f64 = s.parse().ok()?;
    (!v.is_nan() && (v.is_finite() || s.to_ascii_lowercase().contains("inf"))).then_some(v)
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    cmp: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx, readonly: bool) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let (mut desc, mut alpha) = (false, false);
    let (mut start, mut count) = (0i64, -1i64);
    let mut sortby: Option<&[u8]> = None;
    let mut dontsort = false;
    let mut store: Option<&Bytes> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let full_keys = ctx.client.user.as_ref().is_none_or(|u| u.perms().any_reads_all_keys());
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if eq_ic(a, "asc") {
            desc = false;
        } else if eq_ic(a, "desc") {
            desc = true;
        } else if eq_ic(a, "alpha") {
            alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            match (parse_i64(&args[j + 1]), parse_i64(&args[j + 2])) {
                (Some(s), Some(c)) => (start, count) = (s, c),
                _ => return Value::error(ERR_NOT_INTEGER),
            }
            j += 2;
        } else if eq_ic(a, "store") && left >= 1 && !readonly {
            store = Some(&args[j + 1]);
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            let p = &args[j + 1][..];
            sortby = Some(p);
            // A pattern without `*` names the same key for every element: nothing to sort by.
            if !p.contains(&b'*') {
                dontsort = true;
            } else if !full_keys {
                // The keys a pattern reads cannot be checked against the user's key rules beforehand.
                return Value::error(ERR_BY_ACL);
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            if !full_keys {
                return Value::error(ERR_GET_ACL);
            }
            gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Value::error(ERR_SYNTAX);
        }
        j += 1;
    }
    let in_script = matches!(ctx.caller, Caller::Script);
    let db = ctx.db();
    #[derive(PartialEq)]
    enum Kind {
        List,
        Set,
        ZSet,
    }
    let kind = match db.get(&args[1], now) {
        None => Kind::List,
        Some(Entry { data: Data::List(_), .. }) => Kind::List,
        Some(Entry { data: Data::Set(_), .. }) => Kind::Set,
        Some(Entry { data: Data::ZSet(_), .. }) => Kind::ZSet,
        Some(_) => return Value::error(ERR_WRONGTYPE),
    };
    // A set's own order is not the same on a replica or after a reload: when the result is stored (replicated as
    // the command) or seen by a script, Redis sorts it bytewise instead.
    if dontsort && kind == Kind::Set && (store.is_some() || in_script) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    let len = match db.get(&args[1], now).map(|e| &e.data) {
        Some(Data::List(l)) => l.len(),
        Some(Data::Set(s)) => s.len(),
        Some(Data::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;
    // Redis's clamping of LIMIT to the vector: a start past the end selects nothing.
    let mut start = start.max(0);
    let mut end = if count < 0 { len - 1 } else { start.saturating_add(count - 1) };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    // Load the elements: with `nosort` a list or sorted set keeps its order (reversed by DESC) and only the
    // selected range is read.
    let mut elems: Vec<Vec<u8>> = Vec::new();
    match db.get(&args[1], now).map(|e| &e.data) {
        Some(Data::List(l)) if dontsort => {
            if end >= start {
                let n = (end - start + 1) as usize;
                let it: Box<dyn Iterator<Item = &[u8]>> = if desc { Box::new(l.iter().rev()) } else { Box::new(l.iter()) };
                elems = it.skip(start as usize).take(n).map(|e| e.to_vec()).collect();
            }
            end -= start;
            start = 0;
        }
        Some(Data::ZSet(z)) if dontsort => {
            if end >= start {
                let n = (end - start + 1) as usize;
                // Rank-based starts: O(log n) to the first element, as Redis's zslGetElementByRank.
                let start = start as usize;
                let it = if desc { z.iter_down_from(z.len().saturating_sub(1 + start)) } else { z.iter_from(start) };
                let n = if start < z.len() { n } else { 0 };
                elems = it.take(n).map(|(m, _)| m.to_vec()).collect();
            }
            end -= start;
            start = 0;
        }
        Some(Data::List(l)) => elems = l.iter().map(|e| e.to_vec()).collect(),
        Some(Data::Set(s)) => elems = s.iter().map(|e| e.to_vec()).collect(),
        Some(Data::ZSet(z)) => elems = z.iter().map(|(m, _)| m.to_vec()).collect(),
        _ => {}
    }
    let mut items: Vec<Item> = elems.into_iter().map(|elem| Item { elem, score: 0.0, cmp: None }).collect();
    if !dontsort {
        let mut bad = false;
        for it in items.iter_mut() {
            let byval = match sortby {
                Some(p) => match lookup_by_pattern(db, p, &it.elem, now) {
                    Some(v) => Some(v),
                    None => continue,
                },
                None => None,
            };
            if alpha {
                it.cmp = byval;
            } else {
                match weight(byval.as_deref().unwrap_or(&it.elem)) {
                    Some(s) => it.score = s,
                    None => bad = true,
                }
            }
        }
        if bad {
            return Value::error(ERR_SCORES);
        }
        let by = sortby.is_some();
        items.sort_by(|a, b| {
            let c = if !alpha {
                // Equal weights fall back to the elements, so the result does not depend on the sort's stability.
                a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.elem.cmp(&b.elem))
            } else if by {
                match (&a.cmp, &b.cmp) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.elem.cmp(&b.elem)
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let selected: &[Item] = if end >= start { &items[start as usize..=(end as usize).min(items.len().saturating_sub(1))] } else { &[] };
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(selected.len() * gets.len().max(1));
    for it in selected {
        if gets.is_empty() {
            out.push(Some(it.elem.clone()));
        }
        for g in &gets {
            out.push(lookup_by_pattern(db, g, &it.elem, now));
        }
    }
    match store {
        None => Value::Array(out.into_iter().map(|v| v.map_or(Value::Nil, |b| Value::Bulk(Bytes::from(b)))).collect()),
        Some(dest) => {
            let n = out.len();
            db.remove(dest, now);
            if n > 0 {
                let mut l = ListValue::new();
                // A missing GET value is stored as an empty string, as Redis does.
                for v in out {
                    l.push_back(&v.unwrap_or_default());
                }
                db.insert(dest, Entry::new(Data::List(Box::new(l))));
            }
            Value::Integer(n as i64)
        }
    }
}
