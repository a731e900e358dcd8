//! `GET /locks` on the metrics port: a read-only HTML page with the locks at a glance (who holds what, since when,
//! for how long still, how many wait) and the recent grants and losses (`LockState::recent`). Rendered here on the
//! server, every value escaped (keys and client names are user input), no script and no external asset; the page
//! reloads itself every few seconds, and its Content-Security-Policy forbids scripts and loads of anything else.

use std::fmt::Write;

use bytes::Bytes;

use crate::locks::engine;
use crate::shared::Shared;

/// At most this many locks are listed (a page, not an export; LOCKS pages through all of them).
pub const MAX_ROWS: usize = 500;
/// Keys examined per store-lock acquisition while collecting, so a large keyspace never holds the lock long.
const SCAN_CHUNK: usize = 256;
/// Seconds between reloads.
pub const REFRESH_S: u32 = 2;

struct Holder {
    token: i64,
    remaining_ms: u64,
    granted_ms: i64,
    who: Option<crate::locks::Grantee>,
}

struct Row {
    db: usize,
    key: Bytes,
    kind: &'static str,
    limit: u32,
    waiters: usize,
    holders: Vec<Holder>,
}

struct Snapshot {
    rows: Vec<Row>,
    truncated: bool,
    recent: Vec<crate::locks::LockEvent>,
    is_replica: bool,
}

fn collect(shared: &Shared) -> Snapshot {
    let mut rows = Vec::new();
    let mut truncated = false;
    let dbs = shared.store.lock().dbs.len();
    'dbs: for db in 0..dbs {
        let mut cursor = 0;
        loop {
            let store = shared.store.lock();
            let c = store.dbs[db].lock_counts();
            if c.leases + c.semaphores == 0 {
                break;
            }
            let now = crate::clock::mono_ms();
            let (next, keys) = store.dbs[db].scan(cursor, SCAN_CHUNK, now, |_, e| e.data.is_lock());
            for key in keys {
                let Ok(Some(info)) = engine::peek_info(&store, db, &key, now) else { continue };
                if rows.len() == MAX_ROWS {
                    truncated = true;
                    break 'dbs;
                }
                let holders = info
                    .holders
                    .iter()
                    .map(|h| {
                        let (granted_ms, who) = engine::holder_grant(&store, db, &key, h.token);
                        Holder { token: h.token, remaining_ms: h.remaining_ms, granted_ms, who: who.cloned() }
                    })
                    .collect();
                rows.push(Row { db, key: Bytes::copy_from_slice(&key), kind: info.kind, limit: info.limit, waiters: info.waiters, holders });
            }
            drop(store);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    rows.sort_by(|a, b| (a.db, &a.key).cmp(&(b.db, &b.key)));
    let recent = shared.store.lock().locks.recent.iter().rev().cloned().collect();
    Snapshot { rows, truncated, recent, is_replica: shared.replication.is_replica() }
}

/// HTML-escapes `s` (text and attribute values alike).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A key or name as text: UTF-8 shown as is (escaped), other bytes as `\xHH`.
fn show(b: &[u8]) -> String {
    let mut s = String::new();
    for chunk in b.utf8_chunks() {
        s.push_str(chunk.valid());
        for x in chunk.invalid() {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
    esc(&s)
}

fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Unix ms as `HH:MM:SS.mmm` UTC.
fn clock(ms: i64) -> String {
    let day_ms = ms.rem_euclid(86_400_000);
    format!("{:02}:{:02}:{:02}.{:03}", day_ms / 3_600_000, (day_ms / 60_000) % 60, (day_ms / 1000) % 60, day_ms % 1000)
}

fn who_cells(who: Option<&crate::locks::Grantee>) -> String {
    match who {
        Some(w) => format!(
            "<td class=\"client-id\">{}</td><td class=\"client-name\">{}</td><td class=\"client-addr\">{}</td>",
            w.client_id,
            show(&w.name),
            esc(&w.addr)
        ),
        None => "<td class=\"client-id\">?</td><td class=\"client-name\"></td><td class=\"client-addr\">not granted by this node</td>".into(),
    }
}

fn render_snapshot(s: &Snapshot, wall_now: i64) -> String {
    let mut h = String::with_capacity(4096 + s.rows.len() * 400);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"{REFRESH_S}\">\
<title>Ruvio locks</title><style>\
body{{font-family:sans-serif;margin:1em 2em;color:#222}}table{{border-collapse:collapse;margin-bottom:1.5em}}\
th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:14px}}th{{background:#eee}}\
td.key{{font-family:monospace;white-space:pre-wrap;word-break:break-all}}.lost{{color:#a00}}.granted{{color:#070}}\
.note{{color:#666;font-size:13px}}</style></head><body>\n<h1>Locks</h1>\n<p class=\"note\">{} &middot; {} lock(s){} &middot; \
as of {} UTC &middot; reloads every {REFRESH_S} s</p>\n",
        if s.is_replica { "replica" } else { "primary" },
        s.rows.len(),
        if s.truncated { format!(" (the first {MAX_ROWS})") } else { String::new() },
        clock(wall_now)
    );
    h.push_str(
        "<table id=\"locks\"><thead><tr><th>db</th><th>key</th><th>kind</th><th>holders / limit</th><th>waiting</th>\
<th>token</th><th>client id</th><th>client name</th><th>client address</th><th>held for</th><th>held since (UTC)</th>\
<th>remaining</th></tr></thead><tbody>\n",
    );
    if s.rows.is_empty() {
        h.push_str("<tr class=\"empty\"><td colspan=\"12\">No lock is held.</td></tr>\n");
    }
    for r in &s.rows {
        let span = r.holders.len().max(1);
        let lock_cells = format!(
            "<td rowspan=\"{span}\">{}</td><td rowspan=\"{span}\" class=\"key\">{}</td><td rowspan=\"{span}\" class=\"kind\">{}</td>\
<td rowspan=\"{span}\" class=\"count\">{} / {}</td><td rowspan=\"{span}\" class=\"waiters\">{}</td>",
            r.db,
            show(&r.key),
            r.kind,
            r.holders.len(),
            r.limit,
            r.waiters
        );
        if r.holders.is_empty() {
            let _ = writeln!(h, "<tr class=\"lock\">{lock_cells}<td colspan=\"7\">(no holder)</td></tr>");
        }
        for (i, ho) in r.holders.iter().enumerate() {
            let _ = writeln!(
                h,
                "<tr class=\"holder\" data-token=\"{}\">{}<td class=\"token\">{}</td>{}<td class=\"held\">{}</td><td>{}</td><td class=\"remaining\">{}</td></tr>",
                ho.token,
                if i == 0 { lock_cells.as_str() } else { "" },
                ho.token,
                who_cells(ho.who.as_ref()),
                duration(wall_now - ho.granted_ms),
                clock(ho.granted_ms),
                duration(ho.remaining_ms as i64)
            );
        }
    }
    h.push_str("</tbody></table>\n<h2>Recent grants and losses</h2>\n<table id=\"recent\"><thead><tr><th>time (UTC)</th><th>event</th>\
<th>db</th><th>key</th><th>kind</th><th>token</th><th>client id</th><th>client name</th><th>client address</th></tr></thead><tbody>\n");
    if s.recent.is_empty() {
        h.push_str("<tr class=\"empty\"><td colspan=\"9\">Nothing yet.</td></tr>\n");
    }
    for e in &s.recent {
        let class = if e.what == crate::locks::EventKind::Granted { "granted" } else { "lost" };
        let _ = writeln!(
            h,
            "<tr class=\"event {class}\" data-event=\"{}\" data-token=\"{}\"><td>{}</td><td class=\"what\">{}</td><td>{}</td><td class=\"key\">{}</td><td>{}</td><td class=\"token\">{}</td>{}</tr>",
            e.what.name(),
            e.token,
            clock(e.wall_ms),
            e.what.name(),
            e.db,
            show(&e.key),
            e.kind,
            e.token,
            who_cells(e.who.as_ref())
        );
    }
    let _ = write!(
        h,
        "</tbody></table>\n<p class=\"note\">The last {} grants and losses (release, expiry) this node made, newest first; \
a lock DEL or UNLINK removed is listed as deleted; one overwritten by another command (SET, FLUSHALL) is not listed.</p>\n</body></html>\n",
        crate::locks::RECENT_EVENTS
    );
    h
}

/// The page.
pub fn render(shared: &Shared) -> String {
    render_snapshot(&collect(shared), crate::clock::wall_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_input_is_escaped() {
        assert_eq!(show(b"<img src=x onerror='a'>&\"\xff"), "&lt;img src=x onerror=&#39;a&#39;&gt;&amp;&quot;\\xff");
        assert_eq!(clock(3_723_004), "01:02:03.004");
        assert_eq!(duration(61_000), "1m 01s");
    }
}
