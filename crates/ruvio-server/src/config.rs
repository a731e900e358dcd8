//! Configuration: the same names as redis.conf wherever the concept is the same. One parameter table serves the
//! config file, command-line flags (`--name value`), CONFIG GET and CONFIG SET.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("unknown configuration parameter '{0}'")]
    Unknown(String),
    #[error("invalid value for '{name}': {reason}")]
    Invalid { name: String, reason: String },
    #[error("'{0}' can only be set at start-up")]
    Immutable(String),
    #[error("reading config file {path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// A redis.conf directive Ruvio knows but whose value would change behaviour in a way it cannot honour.
    #[error("'{name} {value}' cannot be honoured by Ruvio: {reason}")]
    Refused { name: String, value: String, reason: String },
    /// Any of the above, with the file and line it came from.
    #[error("{location}: {err}")]
    At { location: String, err: Box<ConfigError> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    Always,
    EverySec,
    No,
}

/// `client-output-buffer-limit` for one class: hard limit, soft limit, soft seconds (bytes; 0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub dir: PathBuf,
    pub requirepass: Option<String>,
    pub databases: usize,
    pub maxclients: usize,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    pub protected_mode: bool,
    pub loglevel: String,
    pub appendonly: bool,
    pub appendfsync: AppendFsync,
    pub appendfilename: String,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// `replicaof host port` at start-up (empty: a primary).
    pub replicaof: String,
    /// Writes are refused unless this many replicas acknowledged within `min_replicas_max_lag` seconds (0 = off).
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    /// How long a durable write (CLIENT DURABILITY REPLICAS n) waits for its acknowledgements, in ms.
    pub durability_timeout: u64,
    /// Bytes of recent write-log records kept in memory for consumers that fall behind (replicas resuming).
    pub repl_backlog_size: u64,
    /// `repl-timeout`, seconds: a replica link that takes no part of a snapshot, or sends no acknowledgement, for
    /// this long is dropped (Redis's name and default).
    pub repl_timeout: u64,
    pub aof_load_truncated: bool,
    pub save: String,
    pub output_normal: OutputLimit,
    pub output_replica: OutputLimit,
    pub output_pubsub: OutputLimit,
    pub hz: u64,
    /// Threads serving connections (each runs its own event loop); see [`default_io_threads`].
    pub io_threads: usize,
    /// A hash stays packed (`listpack`) up to this many fields ...
    pub hash_max_listpack_entries: usize,
    /// ... none longer than this many bytes (see keyspace/hash.rs).
    pub hash_max_listpack_value: usize,
    /// A set is reported as `intset` up to this many integer members (see keyspace/set.rs).
    pub set_max_intset_entries: usize,
    /// A sorted set is reported as `listpack` up to this many members ...
    pub zset_max_listpack_entries: usize,
    /// ... none longer than this many bytes (see keyspace/zset.rs).
    pub zset_max_listpack_value: usize,
    /// Accepted and reported (CONFIG GET) for Redis compatibility; Ruvio's list layout does not use them.
    pub list_max_listpack_size: i64,
    pub list_compress_depth: i64,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    /// `notify-keyspace-events`, as class bits (see notify.rs).
    pub notify_keyspace_events: u32,
    /// `busy-reply-threshold` (alias `lua-time-limit`), ms: past it, a running script makes others get -BUSY.
    pub busy_reply_threshold: u64,
    /// `user <name> <rules...>` lines (ACL users defined in the config file; acl.rs), in order.
    pub users: Vec<String>,
    /// `aclfile`: where ACL LOAD/SAVE read and write users (empty: none).
    pub aclfile: String,
    /// `masteruser` / `masterauth`: how this node, as a replica, logs in to its primary.
    pub masteruser: Option<String>,
    pub masterauth: Option<String>,
    /// `coordinator-pass`: enables the built-in user `coordinator` (@coordination), which `ruvio coordinator` logs
    /// in as; without it no one may run the coordination commands (docs/coordinator.md).
    pub coordinator_pass: Option<String>,
    /// Bytes of used memory (resident set) past which commands flagged `denyoom` are refused with Redis's OOM
    /// error (0 = no limit). Only `maxmemory-policy noeviction` exists: Ruvio never evicts keys (a lock key evicted
    /// would be a lock granted twice).
    pub maxmemory: u64,
    /// Where the log goes: empty for stderr, else a file appended to (as redis.conf's `logfile`).
    pub logfile: String,
    /// A file the server writes its process id into at start-up and removes at exit (empty: none).
    pub pidfile: String,
    /// `text` (one human-readable line per event) or `json` (one JSON object per line).
    pub log_format: String,
    /// SLOWLOG: commands taking at least this many µs are logged (negative: never; 0: every command) ...
    pub slowlog_log_slower_than: i64,
    /// ... keeping the newest this many entries.
    pub slowlog_max_len: u64,
    /// The most entries ACL LOG keeps (Redis's `acllog-max-len`).
    pub acllog_max_len: u64,
    /// LATENCY: commands taking at least this many ms are sampled (0: off).
    pub latency_monitor_threshold: u64,
    /// `tls-port`: the port TLS clients connect to on every bind address (0 = none). `port 0` with a `tls-port`
    /// leaves TLS the only way in, as in Redis.
    pub tls_port: u16,
    /// `tls-cert-file` / `tls-key-file`: the server's certificate chain and key (PEM); also the client certificate a
    /// replica presents to its primary unless `tls-client-cert-file` / `tls-client-key-file` are set.
    pub tls_cert_file: String,
    pub tls_key_file: String,
    pub tls_client_cert_file: String,
    pub tls_client_key_file: String,
    /// `tls-ca-cert-file` / `tls-ca-cert-dir`: the CAs client certificates (and, for a replica, its primary's) must
    /// be signed by.
    pub tls_ca_cert_file: String,
    pub tls_ca_cert_dir: String,
    /// `tls-auth-clients yes|no|optional` (Redis's default: yes).
    pub tls_auth_clients: ruvio_tls::ClientAuth,
    /// `tls-replication yes`: this node, as a replica, connects to its primary over TLS (the primary's `tls-port`).
    pub tls_replication: bool,
    /// `tls-handshake-timeout` (ms, Ruvio's own): a connection on the TLS port that has not finished its handshake
    /// in this time is closed, so a peer that opens one and sends nothing holds nothing for long.
    pub tls_handshake_timeout: u64,
    /// TCP port of the Prometheus endpoint (`GET /metrics`) on the first bind address; 0 = off.
    pub metrics_port: u16,
    /// The configuration file the server was started with, as an absolute path (INFO server's `config_file`); not
    /// a parameter.
    pub config_file: String,
    /// redis.conf directives that were accepted but do not apply to Ruvio (see [`IGNORED`]), in the order met;
    /// logged once, in one warning, at start-up.
    pub ignored: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            dir: PathBuf::from("./ruvio-data"),
            requirepass: None,
            databases: 16,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            protected_mode: true,
            loglevel: "notice".into(),
            appendonly: true,
            appendfsync: AppendFsync::EverySec,
            appendfilename: "appendonly.aof".into(),
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            repl_backlog_size: 1024 * 1024,
            repl_timeout: 60,
            replicaof: String::new(),
            durability_timeout: 5000,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            aof_load_truncated: true,
            save: String::new(),
            output_normal: OutputLimit { hard: 0, soft: 0, soft_seconds: 0 },
            output_replica: OutputLimit { hard: 256 << 20, soft: 64 << 20, soft_seconds: 60 },
            output_pubsub: OutputLimit { hard: 32 << 20, soft: 8 << 20, soft_seconds: 60 },
            hz: 10,
            io_threads: default_io_threads(),
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            busy_reply_threshold: 5000,
            notify_keyspace_events: 0,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            users: Vec::new(),
            aclfile: String::new(),
            masteruser: None,
            masterauth: None,
            coordinator_pass: None,
            maxmemory: 0,
            logfile: String::new(),
            pidfile: String::new(),
            log_format: "text".into(),
            metrics_port: 0,
            tls_port: 0,
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            tls_client_cert_file: String::new(),
            tls_client_key_file: String::new(),
            tls_ca_cert_file: String::new(),
            tls_ca_cert_dir: String::new(),
            tls_auth_clients: ruvio_tls::ClientAuth::Required,
            tls_replication: false,
            tls_handshake_timeout: 10_000,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            acllog_max_len: 128,
            latency_monitor_threshold: 0,
            config_file: String::new(),
            ignored: Vec::new(),
        }
    }
}

/// Half the cores, at least one. Every I/O thread executes commands under the one store lock, so threads beyond
/// that mostly contend for it (and bounce its cache lines between cores), while the kernel's network processing and
/// the log writer thread need the other cores: on the 2-core machine, 2 I/O threads served about 25% fewer
/// pipelined requests than 1 (docs/benchmarks.md).
pub fn default_io_threads() -> usize {
    (std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) / 2).max(1)
}

/// Parses Redis memory units: `100`, `1k` (1000), `1kb` (1024), `5mb`, `1gb`.
pub fn parse_memory(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes".into() } else { "no".into() }
}

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &str) -> Result<(), String>;

/// One configuration parameter: its name, how to read and write it, and whether CONFIG SET may change it.
pub struct Param {
    pub name: &'static str,
    pub get: Getter,
    pub set: Setter,
    pub mutable: bool,
}

/// The largest proto-max-bulk-len: a key and its value, each at most this long, must fit one log record (whose
/// length field is 32 bits), so nothing acknowledged can be too large to reload (see persistence::format).
pub const MAX_PROTO_MAX_BULK_LEN: u64 = 2047 * 1024 * 1024;

/// An integer within Redis's bounds for the parameter, with Redis's texts.
/// The longest a durable write may wait for its acknowledgements (one hour). A lock grant waiting that long is
/// undone only when the wait ends, so a larger value (`99999999999999` was accepted) would hold a lock that no
/// client was ever told it got for as long as the value says.
pub const MAX_DURABILITY_TIMEOUT_MS: i64 = 3_600_000;

fn num_between(v: &str, lo: i64, hi: i64) -> Result<i64, String> {
    let n: i64 = num(v)?;
    if n < lo || n > hi {
        return Err(format!("argument must be between {lo} and {hi} inclusive"));
    }
    Ok(n)
}

/// A memory value within bounds (Redis words the bound the same way as for integers).
fn mem_between(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n = mem(v)?;
    if n < lo || n > hi {
        return Err(format!("argument must be between {lo} and {hi} inclusive"));
    }
    Ok(n)
}

/// `replicaof`: "host port", "no one" or empty.
fn replicaof_value(v: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(String::new()),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(String::new()),
        [host, port] if port.parse::<u16>().is_ok() => Ok(format!("{host} {port}")),
        _ => Err("argument must be 'host port' or 'no one'".into()),
    }
}

/// `save`: pairs of "seconds changes", seconds at least 1 and changes at least 0, or empty (Redis's rule).
fn save_points(v: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    let valid = words.len().is_multiple_of(2)
        && words.chunks(2).all(|p| p[0].parse::<i64>().is_ok_and(|s| s >= 1) && p[1].parse::<i64>().is_ok_and(|c| c >= 0));
    if !valid {
        return Err("Invalid save parameters".into());
    }
    Ok(words.join(" "))
}

fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim().parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn mem(v: &str) -> Result<u64, String> {
    parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())
}

fn boolean(v: &str) -> Result<bool, String> {
    parse_bool(v).ok_or_else(|| "argument must be 'yes' or 'no'".to_string())
}

fn format_output_limits(c: &Config) -> String {
    let f = |n: &str, l: &OutputLimit| format!("{n} {} {} {}", l.hard, l.soft, l.soft_seconds);
    format!("{} {} {}", f("normal", &c.output_normal), f("slave", &c.output_replica), f("pubsub", &c.output_pubsub))
}

fn set_output_limits(c: &mut Config, v: &str) -> Result<(), String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("wrong number of arguments".into());
    }
    for chunk in words.chunks(4) {
        let limit = OutputLimit { hard: mem(chunk[1])?, soft: mem(chunk[2])?, soft_seconds: num(chunk[3])? };
        match chunk[0].to_ascii_lowercase().as_str() {
            "normal" => c.output_normal = limit,
            "replica" | "slave" => c.output_replica = limit,
            "pubsub" => c.output_pubsub = limit,
            other => return Err(format!("unknown client class '{other}'")),
        }
    }
    Ok(())
}

/// Every parameter Ruvio knows.
pub static PARAMS: &[Param] = &[
    Param { name: "bind", get: |c| c.bind.join(" "), set: |c, v| { c.bind = v.split_whitespace().map(String::from).collect(); Ok(()) }, mutable: false },
    Param { name: "port", get: |c| c.port.to_string(), set: |c, v| { c.port = num_between(v, 0, 65535)? as u16; Ok(()) }, mutable: false },
    Param { name: "dir", get: |c| c.dir.display().to_string(), set: |c, v| { c.dir = PathBuf::from(v); Ok(()) }, mutable: false },
    Param { name: "requirepass", get: |c| c.requirepass.clone().unwrap_or_default(), set: |c, v| { c.requirepass = (!v.is_empty()).then(|| v.to_string()); Ok(()) }, mutable: true },
    // ACL (acl.rs): `user` lines accumulate (one per user, as in redis.conf); CONFIG GET shows none of them.
    Param { name: "user", get: |_| String::new(), set: |c, v| { crate::acl::parse_user_line(&format!("user {v}"))?; c.users.push(v.to_string()); Ok(()) }, mutable: false },
    Param { name: "aclfile", get: |c| c.aclfile.clone(), set: |c, v| { c.aclfile = v.to_string(); Ok(()) }, mutable: false },
    Param { name: "masteruser", get: |c| c.masteruser.clone().unwrap_or_default(), set: |c, v| { c.masteruser = (!v.is_empty()).then(|| v.to_string()); Ok(()) }, mutable: true },
    Param { name: "masterauth", get: |c| c.masterauth.clone().unwrap_or_default(), set: |c, v| { c.masterauth = (!v.is_empty()).then(|| v.to_string()); Ok(()) }, mutable: true },
    Param { name: "coordinator-pass", get: |c| c.coordinator_pass.clone().unwrap_or_default(), set: |c, v| { c.coordinator_pass = (!v.is_empty()).then(|| v.to_string()); Ok(()) }, mutable: true },
    Param { name: "databases", get: |c| c.databases.to_string(), set: |c, v| { let n: usize = num(v)?; if n == 0 || n > 1024 { return Err("argument must be between 1 and 1024".into()) } c.databases = n; Ok(()) }, mutable: false },
    Param { name: "maxclients", get: |c| c.maxclients.to_string(), set: |c, v| { let n: i128 = num(v)?; if n < 1 || n > u32::MAX as i128 { return Err("argument must be between 1 and 4294967295 inclusive".into()) } c.maxclients = n as usize; Ok(()) }, mutable: true },
    Param { name: "timeout", get: |c| c.timeout.to_string(), set: |c, v| { c.timeout = num_between(v, 0, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "tcp-keepalive", get: |c| c.tcp_keepalive.to_string(), set: |c, v| { c.tcp_keepalive = num_between(v, 0, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "proto-max-bulk-len", get: |c| c.proto_max_bulk_len.to_string(), set: |c, v| { c.proto_max_bulk_len = mem_between(v, 1024 * 1024, MAX_PROTO_MAX_BULK_LEN)?; Ok(()) }, mutable: true },
    Param { name: "client-query-buffer-limit", get: |c| c.client_query_buffer_limit.to_string(), set: |c, v| { c.client_query_buffer_limit = mem_between(v, 1024 * 1024, i64::MAX as u64)?; Ok(()) }, mutable: true },
    Param { name: "protected-mode", get: |c| yes_no(c.protected_mode), set: |c, v| { c.protected_mode = boolean(v)?; Ok(()) }, mutable: true },
    Param { name: "loglevel", get: |c| c.loglevel.clone(), set: |c, v| { let l = v.to_ascii_lowercase(); if !["debug", "verbose", "notice", "warning", "nothing"].contains(&l.as_str()) { return Err("argument must be one of debug, verbose, notice, warning, nothing".into()) } c.loglevel = l; Ok(()) }, mutable: true },
    Param { name: "appendonly", get: |c| yes_no(c.appendonly), set: |c, v| { c.appendonly = boolean(v)?; Ok(()) }, mutable: false },
    Param { name: "appendfsync", get: |c| match c.appendfsync { AppendFsync::Always => "always", AppendFsync::EverySec => "everysec", AppendFsync::No => "no" }.into(), set: |c, v| { c.appendfsync = match v.to_ascii_lowercase().as_str() { "always" => AppendFsync::Always, "everysec" => AppendFsync::EverySec, "no" => AppendFsync::No, _ => return Err("argument must be one of always, everysec, no".into()) }; Ok(()) }, mutable: true },
    Param { name: "appendfilename", get: |c| c.appendfilename.clone(), set: |c, v| { c.appendfilename = v.to_string(); Ok(()) }, mutable: false },
    Param { name: "auto-aof-rewrite-percentage", get: |c| c.auto_aof_rewrite_percentage.to_string(), set: |c, v| { c.auto_aof_rewrite_percentage = num_between(v, 0, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "replicaof", get: |c| c.replicaof.clone(), set: |c, v| { c.replicaof = replicaof_value(v)?; Ok(()) }, mutable: false },
    Param { name: "min-replicas-to-write", get: |c| c.min_replicas_to_write.to_string(), set: |c, v| { c.min_replicas_to_write = num_between(v, 0, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "min-replicas-max-lag", get: |c| c.min_replicas_max_lag.to_string(), set: |c, v| { c.min_replicas_max_lag = num_between(v, 0, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "durability-timeout", get: |c| c.durability_timeout.to_string(), set: |c, v| { c.durability_timeout = num_between(v, 1, MAX_DURABILITY_TIMEOUT_MS)? as u64; Ok(()) }, mutable: true },
    Param { name: "repl-timeout", get: |c| c.repl_timeout.to_string(), set: |c, v| { c.repl_timeout = num_between(v, 1, i32::MAX as i64)? as u64; Ok(()) }, mutable: true },
    Param { name: "repl-backlog-size", get: |c| c.repl_backlog_size.to_string(), set: |c, v| { c.repl_backlog_size = mem_between(v, 16 * 1024, i64::MAX as u64)?; Ok(()) }, mutable: true },
    Param { name: "auto-aof-rewrite-min-size", get: |c| c.auto_aof_rewrite_min_size.to_string(), set: |c, v| { c.auto_aof_rewrite_min_size = mem(v)?; Ok(()) }, mutable: true },
    Param { name: "aof-load-truncated", get: |c| yes_no(c.aof_load_truncated), set: |c, v| { c.aof_load_truncated = boolean(v)?; Ok(()) }, mutable: true },
    Param { name: "save", get: |c| c.save.clone(), set: |c, v| { c.save = save_points(v)?; Ok(()) }, mutable: true },
    Param { name: "client-output-buffer-limit", get: format_output_limits, set: set_output_limits, mutable: true },
    Param { name: "io-threads", get: |c| c.io_threads.to_string(), set: |c, v| { let n: usize = num(v)?; if n == 0 || n > 128 { return Err("argument must be between 1 and 128".into()) } c.io_threads = n; Ok(()) }, mutable: false },
    Param { name: "busy-reply-threshold", get: |c| c.busy_reply_threshold.to_string(), set: |c, v| { c.busy_reply_threshold = num_between(v, 0, i64::MAX)? as u64; Ok(()) }, mutable: true },
    Param { name: "hz", get: |c| c.hz.to_string(), set: |c, v| { let n: u64 = num(v)?; c.hz = n.clamp(1, 500); Ok(()) }, mutable: true },
    // Accepted for compatibility with clients that read them; Ruvio has no such feature to tune.
    Param { name: "hash-max-listpack-entries", get: |c| c.hash_max_listpack_entries.to_string(), set: |c, v| { c.hash_max_listpack_entries = num_between(v, 0, i64::MAX)? as usize; Ok(()) }, mutable: true },
    Param { name: "hash-max-listpack-value", get: |c| c.hash_max_listpack_value.to_string(), set: |c, v| { c.hash_max_listpack_value = mem_between(v, 0, i64::MAX as u64)? as usize; Ok(()) }, mutable: true },
    Param { name: "notify-keyspace-events", get: |c| crate::notify::format(c.notify_keyspace_events), set: |c, v| { c.notify_keyspace_events = crate::notify::parse(v)?; Ok(()) }, mutable: true },
    Param { name: "set-max-intset-entries", get: |c| c.set_max_intset_entries.to_string(), set: |c, v| { c.set_max_intset_entries = num_between(v, 0, i64::MAX)? as usize; Ok(()) }, mutable: true },
    Param { name: "zset-max-listpack-entries", get: |c| c.zset_max_listpack_entries.to_string(), set: |c, v| { c.zset_max_listpack_entries = num_between(v, 0, i64::MAX)? as usize; Ok(()) }, mutable: true },
    Param { name: "zset-max-listpack-value", get: |c| c.zset_max_listpack_value.to_string(), set: |c, v| { c.zset_max_listpack_value = mem_between(v, 0, i64::MAX as u64)? as usize; Ok(()) }, mutable: true },
    Param { name: "list-max-listpack-size", get: |c| c.list_max_listpack_size.to_string(), set: |c, v| { c.list_max_listpack_size = num_between(v, i32::MIN as i64, i32::MAX as i64)?; Ok(()) }, mutable: true },
    Param { name: "list-compress-depth", get: |c| c.list_compress_depth.to_string(), set: |c, v| { c.list_compress_depth = num_between(v, 0, i32::MAX as i64)?; Ok(()) }, mutable: true },
    Param { name: "set-max-listpack-entries", get: |c| c.set_max_listpack_entries.to_string(), set: |c, v| { c.set_max_listpack_entries = num_between(v, 0, i64::MAX)? as usize; Ok(()) }, mutable: true },
    Param { name: "set-max-listpack-value", get: |c| c.set_max_listpack_value.to_string(), set: |c, v| { c.set_max_listpack_value = mem_between(v, 0, i64::MAX as u64)? as usize; Ok(()) }, mutable: true },
    Param { name: "replica-read-only", get: |_| "yes".into(), set: |_, _| Ok(()), mutable: true },
    Param { name: "maxmemory", get: |c| c.maxmemory.to_string(), set: |c, v| { c.maxmemory = mem(v)?; Ok(()) }, mutable: true },
    // Evicting a key could evict a lock, and a lock evicted is a lock granted twice: only `noeviction` (refuse
    // writes over maxmemory) is honoured.
    Param { name: "maxmemory-policy", get: |_| "noeviction".into(), set: |_, v| if v.eq_ignore_ascii_case("noeviction") { Ok(()) } else { Err("Ruvio never evicts keys (an evicted lock would be granted twice); only noeviction is accepted".into()) }, mutable: true },
    Param { name: "metrics-port", get: |c| c.metrics_port.to_string(), set: |c, v| { c.metrics_port = num_between(v, 0, 65535)? as u16; Ok(()) }, mutable: false },
    // TLS (docs/security.md). The files are read again by CONFIG SET (a renewed certificate takes effect for new
    // connections; one that does not load is refused and the old one stays).
    Param { name: "tls-port", get: |c| c.tls_port.to_string(), set: |c, v| { c.tls_port = num_between(v, 0, 65535)? as u16; Ok(()) }, mutable: false },
    Param { name: "tls-cert-file", get: |c| c.tls_cert_file.clone(), set: |c, v| { c.tls_cert_file = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-key-file", get: |c| c.tls_key_file.clone(), set: |c, v| { c.tls_key_file = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-client-cert-file", get: |c| c.tls_client_cert_file.clone(), set: |c, v| { c.tls_client_cert_file = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-client-key-file", get: |c| c.tls_client_key_file.clone(), set: |c, v| { c.tls_client_key_file = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-ca-cert-file", get: |c| c.tls_ca_cert_file.clone(), set: |c, v| { c.tls_ca_cert_file = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-ca-cert-dir", get: |c| c.tls_ca_cert_dir.clone(), set: |c, v| { c.tls_ca_cert_dir = v.to_string(); Ok(()) }, mutable: true },
    Param { name: "tls-auth-clients", get: |c| c.tls_auth_clients.as_str().into(), set: |c, v| { c.tls_auth_clients = ruvio_tls::ClientAuth::parse(v)?; Ok(()) }, mutable: true },
    Param { name: "tls-replication", get: |c| yes_no(c.tls_replication), set: |c, v| { c.tls_replication = boolean(v)?; Ok(()) }, mutable: true },
    Param { name: "tls-handshake-timeout", get: |c| c.tls_handshake_timeout.to_string(), set: |c, v| { c.tls_handshake_timeout = num_between(v, 1, 3_600_000)? as u64; Ok(()) }, mutable: true },
    Param { name: "slowlog-log-slower-than", get: |c| c.slowlog_log_slower_than.to_string(), set: |c, v| { c.slowlog_log_slower_than = num_between(v, -1, i64::MAX)?; Ok(()) }, mutable: true },
    Param { name: "acllog-max-len", get: |c| c.acllog_max_len.to_string(), set: |c, v| { c.acllog_max_len = num_between(v, 0, i64::MAX)? as u64; Ok(()) }, mutable: true },
    Param { name: "slowlog-max-len", get: |c| c.slowlog_max_len.to_string(), set: |c, v| { c.slowlog_max_len = num_between(v, 0, i64::MAX)? as u64; Ok(()) }, mutable: true },
    Param { name: "latency-monitor-threshold", get: |c| c.latency_monitor_threshold.to_string(), set: |c, v| { c.latency_monitor_threshold = num_between(v, 0, i64::MAX)? as u64; Ok(()) }, mutable: true },
    Param { name: "logfile", get: |c| c.logfile.clone(), set: |c, v| { c.logfile = v.to_string(); Ok(()) }, mutable: false },
    Param { name: "pidfile", get: |c| c.pidfile.clone(), set: |c, v| { c.pidfile = v.to_string(); Ok(()) }, mutable: false },
    Param { name: "log-format", get: |c| c.log_format.clone(), set: |c, v| { let f = v.to_ascii_lowercase(); if f != "text" && f != "json" { return Err("argument must be one of text, json".into()) } c.log_format = f; Ok(()) }, mutable: false },
    Param { name: "daemonize", get: |_| "no".into(), set: |_, v| if v.eq_ignore_ascii_case("no") { Ok(()) } else { Err("Ruvio does not daemonize; run it under a supervisor".into()) }, mutable: false },
];

/// A redis.conf directive that Ruvio accepts at start-up (config file or `--name value`) without acting on it,
/// because it tunes something Ruvio does not have or does its own way. `honoured(value)` says whether ignoring that
/// value leaves Ruvio behaving as the directive asks; when it does not, start-up is refused with `why`.
pub struct Ignored {
    pub name: &'static str,
    pub honoured: fn(&str) -> bool,
    pub why: &'static str,
}

const fn any(_: &str) -> bool {
    true
}

fn is_no(v: &str) -> bool {
    v.eq_ignore_ascii_case("no")
}

fn is_yes(v: &str) -> bool {
    v.eq_ignore_ascii_case("yes")
}

/// Every redis.conf directive Ruvio accepts and ignores (Debian's stock redis.conf uses most of them). One warning
/// at start-up lists the ones a configuration used. A parameter of [`PARAMS`] with the same name wins, so a
/// directive that becomes a real parameter only needs its entry here removed.
pub static IGNORED: &[Ignored] = &[
    // Networking and process details Ruvio handles its own way.
    Ignored { name: "tcp-backlog", honoured: any, why: "the listen backlog is the OS default" },
    Ignored { name: "always-show-logo", honoured: any, why: "Ruvio prints no logo" },
    Ignored { name: "set-proc-title", honoured: any, why: "Ruvio keeps its process title" },
    Ignored { name: "proc-title-template", honoured: any, why: "Ruvio keeps its process title" },
    Ignored { name: "oom-score-adj", honoured: is_no, why: "Ruvio does not change its OOM score; set OOMScoreAdjust= in the systemd unit" },
    Ignored { name: "oom-score-adj-values", honoured: any, why: "Ruvio does not change its OOM score" },
    Ignored { name: "disable-thp", honoured: any, why: "Ruvio never forks, so huge pages cost it no copy-on-write: it asks for them for blocks of 2 MiB and more, and the OS's setting decides" },
    Ignored { name: "jemalloc-bg-thread", honoured: any, why: "Ruvio does not use jemalloc" },
    Ignored { name: "activerehashing", honoured: any, why: "Ruvio's segmented tables grow without a long rehash" },
    Ignored { name: "dynamic-hz", honoured: any, why: "hz is fixed" },
    Ignored { name: "syslog-enabled", honoured: is_no, why: "Ruvio logs to stderr or logfile (journald picks up stderr)" },
    Ignored { name: "supervised", honoured: any, why: "Ruvio always tells systemd it is ready when NOTIFY_SOCKET is set" },
    Ignored { name: "io-threads-do-reads", honoured: any, why: "Ruvio's I/O threads always read and write" },
    // RDB snapshots: Ruvio persists through its own log with compaction (docs/persistence.md).
    Ignored { name: "stop-writes-on-bgsave-error", honoured: any, why: "no RDB snapshots; a failing log refuses writes (MISCONF)" },
    Ignored { name: "rdbcompression", honoured: any, why: "no RDB snapshots" },
    Ignored { name: "rdbchecksum", honoured: any, why: "no RDB snapshots; every log record has a CRC" },
    Ignored { name: "dbfilename", honoured: any, why: "no RDB snapshots" },
    Ignored { name: "rdb-del-sync-files", honoured: any, why: "no RDB snapshots" },
    Ignored { name: "rdb-save-incremental-fsync", honoured: any, why: "no RDB snapshots" },
    Ignored { name: "appenddirname", honoured: any, why: "the log files live in dir" },
    Ignored { name: "no-appendfsync-on-rewrite", honoured: is_no, why: "Ruvio keeps its fsync policy while compacting" },
    Ignored { name: "aof-use-rdb-preamble", honoured: any, why: "compaction writes Ruvio's own snapshot format" },
    Ignored { name: "aof-timestamp-enabled", honoured: is_no, why: "the log has no timestamp annotations" },
    Ignored { name: "aof-rewrite-incremental-fsync", honoured: any, why: "compaction fsyncs as it sees fit" },
    // Replication details of Redis's own protocol.
    Ignored { name: "replica-serve-stale-data", honoured: is_yes, why: "a replica always answers reads, even with its link down" },
    Ignored { name: "repl-diskless-sync", honoured: any, why: "snapshots for replicas are streamed as Ruvio sees fit" },
    Ignored { name: "repl-diskless-sync-delay", honoured: any, why: "snapshots for replicas start at once" },
    Ignored { name: "repl-diskless-sync-max-replicas", honoured: any, why: "snapshots for replicas start at once" },
    Ignored { name: "repl-diskless-load", honoured: any, why: "a replica loads its snapshot its own way" },
    Ignored { name: "repl-disable-tcp-nodelay", honoured: is_no, why: "the replication stream is always sent without delay" },
    Ignored { name: "replica-priority", honoured: any, why: "ruvio coordinator picks the replica holding every durable write" },
    Ignored { name: "replica-lazy-flush", honoured: any, why: "no lazy freeing" },
    // Memory management of Redis's allocator.
    Ignored { name: "lazyfree-lazy-eviction", honoured: any, why: "no lazy freeing" },
    Ignored { name: "lazyfree-lazy-expire", honoured: any, why: "no lazy freeing" },
    Ignored { name: "lazyfree-lazy-server-del", honoured: any, why: "no lazy freeing" },
    Ignored { name: "lazyfree-lazy-user-del", honoured: any, why: "no lazy freeing" },
    Ignored { name: "lazyfree-lazy-user-flush", honoured: any, why: "no lazy freeing" },
    Ignored { name: "maxmemory-samples", honoured: any, why: "Ruvio never evicts" },
    Ignored { name: "maxmemory-eviction-tenacity", honoured: any, why: "Ruvio never evicts" },
    Ignored { name: "active-expire-effort", honoured: any, why: "active expiry works to its own budget" },
    // Observability Ruvio does not have (yet).
    Ignored { name: "latency-tracking", honoured: any, why: "no latency tracking" },
    // Encodings of data types Ruvio does not store (hashes are real parameters).
    Ignored { name: "hll-sparse-max-bytes", honoured: any, why: "no HyperLogLogs" },
    Ignored { name: "stream-node-max-bytes", honoured: any, why: "no streams" },
    Ignored { name: "stream-node-max-entries", honoured: any, why: "no streams" },
];

pub fn find_ignored(name: &str) -> Option<&'static Ignored> {
    IGNORED.iter().find(|i| i.name.eq_ignore_ascii_case(name))
}

/// Redis's old names still accepted for a parameter: (alias, name). CONFIG GET answers under whichever it matched.
pub const ALIASES: &[(&str, &str)] = &[
    ("slave-read-only", "replica-read-only"),
    ("slaveof", "replicaof"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

pub fn find_param(name: &str) -> Option<&'static Param> {
    let lname = name.to_ascii_lowercase();
    let lname = ALIASES.iter().find(|(alias, _)| *alias == lname).map_or(lname.as_str(), |(_, name)| name);
    PARAMS.iter().find(|p| p.name == lname)
}

impl Config {
    /// The TLS server configuration these parameters describe (`None` without a `tls-port`).
    pub fn tls_server(&self) -> Result<Option<std::sync::Arc<ruvio_tls::rustls::ServerConfig>>, String> {
        if self.tls_port == 0 {
            return Ok(None);
        }
        let files = ruvio_tls::ServerFiles {
            cert_file: self.tls_cert_file.clone(),
            key_file: self.tls_key_file.clone(),
            ca_cert_file: self.tls_ca_cert_file.clone(),
            ca_cert_dir: self.tls_ca_cert_dir.clone(),
            auth_clients: self.tls_auth_clients,
        };
        ruvio_tls::server_config(&files).map(Some)
    }

    /// How a replica connects to its primary with `tls-replication yes`: trusting `tls-ca-cert-*`, presenting
    /// `tls-client-cert-file` (or, as Redis, `tls-cert-file`). Only the chain is checked, not the primary's name
    /// (as Redis does: replicas follow addresses, often bare IPs).
    pub fn tls_replica_client(&self) -> Result<std::sync::Arc<ruvio_tls::rustls::ClientConfig>, String> {
        let (cert, key) = if self.tls_client_cert_file.is_empty() {
            (self.tls_cert_file.clone(), self.tls_key_file.clone())
        } else {
            (self.tls_client_cert_file.clone(), self.tls_client_key_file.clone())
        };
        let files = ruvio_tls::ClientFiles {
            ca_cert_file: self.tls_ca_cert_file.clone(),
            ca_cert_dir: self.tls_ca_cert_dir.clone(),
            cert_file: cert,
            key_file: key,
            verify_hostname: false,
        };
        ruvio_tls::client_config(&files)
    }

    /// When a packed hash becomes a table (`hash-max-listpack-entries`, `hash-max-listpack-value`).
    pub fn hash_limits(&self) -> crate::keyspace::hash::Limits {
        crate::keyspace::hash::Limits { max_entries: self.hash_max_listpack_entries, max_value: self.hash_max_listpack_value }
    }

    /// Encoding limits of sets and sorted sets (what OBJECT ENCODING reports; see keyspace/set.rs, zset.rs).
    pub fn collection_limits(&self) -> crate::keyspace::CollectionLimits {
        crate::keyspace::CollectionLimits {
            set: crate::keyspace::set::Limits { max_intset_entries: self.set_max_intset_entries },
            zset: crate::keyspace::zset::Limits { max_entries: self.zset_max_listpack_entries, max_value: self.zset_max_listpack_value },
        }
    }

    /// Applies one `name value` directive (from a file, a flag or CONFIG SET).
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let p = find_param(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
        (p.set)(self, value).map_err(|reason| ConfigError::Invalid { name: name.to_string(), reason })
    }

    /// Applies one directive given at start-up (a config file line or a `--name value` flag): a parameter, or a
    /// redis.conf directive of [`IGNORED`], recorded in `ignored` when its value leaves behaviour as asked and
    /// refused otherwise.
    pub fn apply_startup(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        if find_param(name).is_some() {
            return self.apply(name, value);
        }
        let Some(ignored) = find_ignored(name) else {
            return Err(ConfigError::Unknown(name.to_string()));
        };
        if !(ignored.honoured)(value) {
            return Err(ConfigError::Refused { name: ignored.name.into(), value: value.into(), reason: ignored.why.into() });
        }
        if !self.ignored.iter().any(|n| n == ignored.name) {
            self.ignored.push(ignored.name.to_string());
        }
        Ok(())
    }

    /// Reads a redis.conf-style file: one `name value...` per line, `#` comments, quoted values allowed. Records
    /// the file as `config_file`.
    pub fn load_file(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Io { path: path.display().to_string(), err })?;
        self.config_file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let value = rest.trim();
            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
            self.apply_startup(name, value)
                .map_err(|err| ConfigError::At { location: format!("{}:{}", path.display(), n + 1), err: Box::new(err) })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_params() {
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("512mb"), Some(512 << 20));
        let mut c = Config::default();
        c.apply("client-output-buffer-limit", "pubsub 1mb 512kb 0").unwrap();
        assert_eq!(c.output_pubsub.hard, 1 << 20);
        assert!(c.apply("no-such-thing", "1").is_err());
        assert!(c.apply("appendfsync", "sometimes").is_err());
        c.apply("APPENDFSYNC", "always").unwrap();
        assert_eq!(c.appendfsync, AppendFsync::Always);
    }
}
