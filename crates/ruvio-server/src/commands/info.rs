//! INFO: one function per section, in Redis's format (`# Section` then `field:value` lines). Each subsystem
//! renders its own section from its own state (`persistence::info_section`, `replication::info_section`,
//! `locks::engine::info_section`); the adapters here pick those states out of the server.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::context::Ctx;

type Section = fn(&mut Ctx, &mut String);

/// Sections in output order; `default` prints all of these.
const SECTIONS: &[(&str, Section)] = &[
    ("server", server),
    ("clients", clients),
    ("memory", memory),
    ("persistence", persistence),
    ("stats", stats),
    ("replication", replication),
    ("cpu", cpu),
    ("locks", locks),
    ("ruvio", ruvio),
    ("commandstats", commandstats),
    ("errorstats", errorstats),
    ("keyspace", keyspace),
];

/// Sections `INFO` and `INFO default` leave out (printed when named, or by `all` / `everything`), as Redis does.
const NOT_DEFAULT: &[&str] = &["commandstats"];

pub fn render(ctx: &mut Ctx, wanted: &[String]) -> String {
    let every = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut out = String::new();
    for (name, f) in SECTIONS {
        if every || (default && !NOT_DEFAULT.contains(name)) || wanted.iter().any(|w| w == name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let mut title = name.to_string();
            title[..1].make_ascii_uppercase();
            let _ = write!(out, "# {title}\r\n");
            f(ctx, &mut out);
        }
    }
    out
}

fn server(ctx: &mut Ctx, out: &mut String) {
    let up = ctx.shared.started.elapsed().as_secs();
    let port = ctx.shared.bound_port.load(Ordering::Relaxed);
    let c = ctx.shared.config.read();
    let _ = write!(
        out,
        "redis_version:{}\r\nserver_name:ruvio\r\nruvio_version:{}\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nexecutable:{}\r\nconfig_file:{}\r\ndir:{}\r\nappendonly:{}\r\nappendfsync:{}\r\n",
        crate::REDIS_COMPAT_VERSION,
        crate::VERSION,
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        ctx.shared.run_id,
        port,
        up,
        up / 86400,
        c.hz,
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        c.config_file,
        std::path::absolute(&c.dir).unwrap_or_else(|_| c.dir.clone()).display(),
        if c.appendonly { "yes" } else { "no" },
        (crate::config::find_param("appendfsync").expect("a parameter").get)(&c),
    );
}

fn clients(ctx: &mut Ctx, out: &mut String) {
    let clients = ctx.shared.clients.lock();
    let blocked = clients.values().filter(|c| c.blocked.load(Ordering::Relaxed)).count();
    let pubsub = clients.values().filter(|c| c.is_pubsub()).count();
    let maxclients = ctx.shared.config.read().maxclients;
    let _ = write!(
        out,
        "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\npubsub_clients:{}\r\n",
        clients.len(),
        maxclients,
        blocked,
        pubsub
    );
}

/// Resident set size from /proc (Linux); 0 elsewhere.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

fn memory(ctx: &mut Ctx, out: &mut String) {
    let rss = rss_bytes();
    let maxmemory = ctx.shared.config.read().maxmemory;
    let _ = write!(out, "used_memory:{rss}\r\nused_memory_rss:{rss}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_policy:noeviction\r\n");
    out.push_str(&ctx.shared.scripts.info_memory());
}

fn persistence(ctx: &mut Ctx, out: &mut String) {
    let store = ctx.store();
    let (dirty, tokens) = (store.changes(), (store.locks.tokens.last(), store.locks.tokens.reserved_until()));
    let loading = ctx.shared.loading.load(Ordering::Relaxed);
    let figures = crate::persistence::InfoFigures { dirty, tokens, loading };
    crate::persistence::info_section(&ctx.shared.aof, &ctx.shared.journal, figures, out);
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..` per command (a subcommand
/// as `config|get`) called or refused since start or CONFIG RESETSTAT, including those scripts and EXEC ran.
fn commandstats(ctx: &mut Ctx, out: &mut String) {
    for l in ctx.shared.metrics.command_stats() {
        let per_call = if l.calls == 0 { 0.0 } else { l.usec as f64 / l.calls as f64 };
        let _ = write!(
            out,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            l.name, l.calls, l.usec, l.rejected, l.failed
        );
    }
}

/// `errorstat_<CODE>:count=<n>` per error code replied since start or CONFIG RESETSTAT (Redis's section).
fn errorstats(ctx: &mut Ctx, out: &mut String) {
    let mut codes: Vec<(String, u64)> = ctx.shared.stats.error_replies.lock().iter().map(|(k, v)| (k.clone(), *v)).collect();
    codes.sort();
    for (code, n) in codes {
        let _ = write!(out, "errorstat_{code}:count={n}\r\n");
    }
}

fn stats(ctx: &mut Ctx, out: &mut String) {
    // One pub/sub lock acquisition, released before formatting (the lock is not re-entrant).
    let (channels, patterns) = {
        let ps = ctx.shared.pubsub.lock();
        (ps.channels(None).len(), ps.numpat())
    };
    let expired_keys = ctx.store().expired_keys;
    let s = &ctx.shared.stats;
    let g = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let _ = write!(
        out,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\nclient_output_buffer_limit_disconnections:{}\r\nevicted_scripts:{}\r\ntotal_error_replies:{}\r\n",
        g(&s.connections_received),
        g(&s.commands_processed),
        g(&s.net_input_bytes),
        g(&s.net_output_bytes),
        g(&s.rejected_connections),
        expired_keys,
        g(&s.keyspace_hits),
        g(&s.keyspace_misses),
        channels,
        patterns,
        g(&s.pubsub_disconnects),
        g(&ctx.shared.scripts.evicted_scripts),
        g(&s.error_replies_total),
    );
}

fn replication(ctx: &mut Ctx, out: &mut String) {
    let epoch = ctx.store().locks.tokens.epoch();
    let shared = ctx.shared;
    let fsynced = if shared.aof.enabled() { shared.journal.durability.local() } else { 0 };
    let backlog_size = shared.config.read().repl_backlog_size;
    let figures = crate::replication::InfoFigures { epoch, fsynced, backlog_size };
    crate::replication::info_section(&shared.replication, &shared.journal, figures, out);
}

fn cpu(_ctx: &mut Ctx, out: &mut String) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    let _ = write!(out, "used_cpu_sys:{:.6}\r\nused_cpu_user:{:.6}\r\n", t(usage.ru_stime), t(usage.ru_utime));
}

fn locks(ctx: &mut Ctx, out: &mut String) {
    crate::locks::engine::info_section(ctx.store(), out);
}

fn ruvio(ctx: &mut Ctx, out: &mut String) {
    let threads = ctx.shared.config.read().io_threads;
    let epoch = ctx.store().locks.tokens.epoch();
    let _ = write!(out, "ruvio_version:{}\r\nio_threads:{threads}\r\nfencing_epoch:{epoch}\r\n", crate::VERSION);
}

fn keyspace(ctx: &mut Ctx, out: &mut String) {
    let store = ctx.store();
    for (i, db) in store.dbs.iter().enumerate() {
        if !db.is_empty() {
            let _ = write!(out, "db{i}:keys={},expires={},avg_ttl=0\r\n", db.len(), db.volatile_len());
        }
    }
}
