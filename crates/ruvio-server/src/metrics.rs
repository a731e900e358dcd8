//! The Prometheus endpoint (`metrics-port`, off by default): `GET /metrics` in the text exposition format (and the
//! read-only `/locks` page of locks_page.rs), every
//! name prefixed `ruvio_`. What is counted on the request path is kept in atomics here (per command: calls, errors,
//! a latency histogram; durable-write waits and NOTDURABLE answers); everything else is read from the server's own
//! state at scrape time (clients, memory, keys, the lock engine's counters, replication). prometheus-client encodes
//! it, axum serves it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::commands::{self, CommandSpec};
use crate::shared::Shared;

/// Upper bounds (µs) of the command latency histogram (exported in seconds).
const LATENCY_BUCKETS_US: [u64; 12] = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 100_000, 1_000_000];

/// One command's figures, as Redis's INFO commandstats keeps them: the times it ran (`failed` of those answered an
/// error), `rejected` the times it was refused before running (ACL, OOM, READONLY, a script's rules, ...). The
/// latency histogram and `sum_us` cover both, so the times it ran are the histogram's count less `rejected`: not
/// counted apart (each counter is a `lock`-prefixed add on the request path, a measurable share of a pipelined
/// command's CPU).
#[derive(Default)]
pub struct CommandStat {
    failed: AtomicU64,
    rejected: AtomicU64,
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
}

impl CommandStat {
    /// The times it ran or was refused: the histogram's count.
    fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }
}

/// How a command call ended, for [`Metrics::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It ran; `failed`: its reply was an error.
    Ran { failed: bool },
    /// It was refused before running.
    Rejected,
}

/// One line of INFO commandstats.
pub struct CommandStatLine {
    pub name: String,
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// One SLOWLOG entry, as Redis keeps it.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    pub id: u64,
    pub unix_s: i64,
    pub micros: u64,
    pub args: Vec<bytes::Bytes>,
    pub addr: String,
    pub name: bytes::Bytes,
}

/// LATENCY's record of one event (`command`, `fast-command`): up to 160 (time, ms) samples, and the max.
#[derive(Debug, Clone, Default)]
pub struct LatencyEvent {
    pub samples: std::collections::VecDeque<(i64, u64)>,
    pub max_ms: u64,
}

/// SLOWLOG and LATENCY state: cheap to skip (two atomics are read per command), kept under a mutex once an entry
/// is recorded.
#[derive(Default)]
pub struct Slow {
    /// `slowlog-log-slower-than` in µs (negative: off), mirrored from the config for the request path.
    pub slower_than_us: std::sync::atomic::AtomicI64,
    pub max_len: AtomicU64,
    /// `latency-monitor-threshold` in ms (0: off).
    pub latency_threshold_ms: AtomicU64,
    pub next_id: AtomicU64,
    pub log: parking_lot::Mutex<std::collections::VecDeque<SlowEntry>>,
    pub latency: parking_lot::Mutex<std::collections::BTreeMap<&'static str, LatencyEvent>>,
}

/// Redis's bounds for a SLOWLOG entry: at most 32 arguments (the last saying how many more), each at most 128
/// bytes (the rest replaced by "... (N more bytes)").
const SLOWLOG_MAX_ARGS: usize = 32;
const SLOWLOG_MAX_ARG_LEN: usize = 128;

impl Slow {
    pub fn configure(&self, c: &crate::config::Config) {
        self.slower_than_us.store(c.slowlog_log_slower_than, Ordering::Relaxed);
        self.max_len.store(c.slowlog_max_len, Ordering::Relaxed);
        self.latency_threshold_ms.store(c.latency_monitor_threshold, Ordering::Relaxed);
        let mut log = self.log.lock();
        while log.len() as u64 > c.slowlog_max_len {
            log.pop_back();
        }
    }

    /// After a client's command: a SLOWLOG entry and a LATENCY sample when it was slow enough.
    pub fn observe(&self, spec: &'static CommandSpec, took: Duration, args: &[bytes::Bytes], client: &crate::client::ClientInfo) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        let threshold = self.slower_than_us.load(Ordering::Relaxed);
        if threshold >= 0 && us >= threshold as u64 && self.max_len.load(Ordering::Relaxed) > 0 {
            let mut kept: Vec<bytes::Bytes> = Vec::with_capacity(args.len().min(SLOWLOG_MAX_ARGS));
            for (i, a) in args.iter().enumerate() {
                if i == SLOWLOG_MAX_ARGS - 1 && args.len() > SLOWLOG_MAX_ARGS {
                    kept.push(bytes::Bytes::from(format!("... ({} more arguments)", args.len() - i)));
                    break;
                }
                if a.len() > SLOWLOG_MAX_ARG_LEN {
                    let mut v = a[..SLOWLOG_MAX_ARG_LEN].to_vec();
                    v.extend_from_slice(format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_ARG_LEN).as_bytes());
                    kept.push(bytes::Bytes::from(v));
                } else {
                    kept.push(a.clone());
                }
            }
            let entry = SlowEntry {
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                unix_s: crate::clock::wall_ms() / 1000,
                micros: us,
                args: kept,
                addr: client.addr.clone(),
                name: client.name.lock().clone(),
            };
            let mut log = self.log.lock();
            log.push_front(entry);
            while log.len() as u64 > self.max_len.load(Ordering::Relaxed) {
                log.pop_back();
            }
        }
        let lt = self.latency_threshold_ms.load(Ordering::Relaxed);
        let ms = us / 1000;
        if lt > 0 && ms >= lt {
            let event = if spec.has(commands::flags::FAST) { "fast-command" } else { "command" };
            let now = crate::clock::wall_ms() / 1000;
            let mut lat = self.latency.lock();
            let e = lat.entry(event).or_default();
            // One sample per second (the worst), as Redis does.
            match e.samples.back_mut() {
                Some(last) if last.0 == now => last.1 = last.1.max(ms),
                _ => e.samples.push_back((now, ms)),
            }
            while e.samples.len() > 160 {
                e.samples.pop_front();
            }
            e.max_ms = e.max_ms.max(ms);
        }
    }
}

/// Counters the request path updates.
pub struct Metrics {
    /// SLOWLOG and LATENCY.
    pub slow: Slow,
    /// Per command (subcommands as `config|get`), keyed by the address of its static table entry: a lookup costs
    /// one integer multiply ([`commands::SpecAddrHasher`]), and the map never changes after start-up.
    commands: commands::SpecAddrMap<(String, CommandStat)>,
    /// Durable writes (CLIENT DURABILITY REPLICAS n) that waited for their acknowledgements ...
    pub durable_waits: AtomicU64,
    /// ... and those answered NOTDURABLE.
    pub not_durable: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut commands = commands::SpecAddrMap::default();
        for spec in commands::all() {
            commands.insert(spec as *const CommandSpec as usize, (spec.name.to_string(), CommandStat::default()));
            for sub in spec.subcommands {
                commands.insert(sub as *const CommandSpec as usize, (format!("{}|{}", spec.name, sub.name), CommandStat::default()));
            }
        }
        Metrics { slow: Slow::default(), commands, durable_waits: AtomicU64::new(0), not_durable: AtomicU64::new(0) }
    }
}

impl Metrics {
    /// A client's command (or one a script or EXEC ran for it) ran or was refused, in `took`.
    pub fn record(&self, spec: &'static CommandSpec, took: Duration, outcome: Outcome) {
        let Some((_, s)) = self.commands.get(&(spec as *const CommandSpec as usize)) else { return };
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        match outcome {
            Outcome::Ran { failed: false } => {}
            Outcome::Ran { failed: true } => {
                s.failed.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Rejected => {
                s.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
        let i = LATENCY_BUCKETS_US.iter().position(|b| us <= *b).unwrap_or(LATENCY_BUCKETS_US.len());
        s.buckets[i].fetch_add(1, Ordering::Relaxed);
        // Most commands take under a microsecond: nothing to add.
        if us > 0 {
            s.sum_us.fetch_add(us, Ordering::Relaxed);
        }
    }

    /// INFO commandstats: the commands called or refused since start or CONFIG RESETSTAT, by name.
    pub fn command_stats(&self) -> Vec<CommandStatLine> {
        let mut lines: Vec<CommandStatLine> = self
            .commands
            .values()
            .map(|(name, s)| CommandStatLine {
                name: name.clone(),
                calls: s.count().saturating_sub(s.rejected.load(Ordering::Relaxed)),
                usec: s.sum_us.load(Ordering::Relaxed),
                rejected: s.rejected.load(Ordering::Relaxed),
                failed: s.failed.load(Ordering::Relaxed),
            })
            .filter(|l| l.calls > 0 || l.rejected > 0)
            .collect();
        lines.sort_by(|a, b| a.name.cmp(&b.name));
        lines
    }

    /// CONFIG RESETSTAT: every command's figures back to zero (Prometheus sees a counter reset, as after a
    /// restart, and its rate functions handle that).
    pub fn reset(&self) {
        for (_, s) in self.commands.values() {
            for c in [&s.failed, &s.rejected, &s.sum_us].into_iter().chain(s.buckets.iter()) {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Everything one scrape reports, read once (the store lock is taken once, briefly).
#[derive(Debug, Default)]
struct Scrape {
    commands: Vec<(String, u64, u64, Vec<u64>, u64)>,
    connected_clients: u64,
    memory_rss: u64,
    maxmemory: u64,
    keys: Vec<(String, u64)>,
    lock_kinds: [crate::locks::KindCounts; 2],
    lock_expirations: u64,
    lock_wait_timeouts: u64,
    wait_buckets: Vec<u64>,
    wait_sum_ms: u64,
    lock_waiters: u64,
    durable_waits: u64,
    not_durable: u64,
    is_replica: bool,
    epoch: u64,
    replicas: Vec<(String, u64, u64)>,
    uptime_s: u64,
}

fn scrape(shared: &Shared) -> Scrape {
    let m = &shared.metrics;
    let mut commands: Vec<_> = m
        .commands
        .values()
        .map(|(name, s)| {
            let buckets: Vec<u64> = s.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
            // The endpoint's calls and errors count refusals too (an error reply), as they always have.
            let rejected = s.rejected.load(Ordering::Relaxed);
            let calls = buckets.iter().sum();
            (name.clone(), calls, s.failed.load(Ordering::Relaxed) + rejected, buckets, s.sum_us.load(Ordering::Relaxed))
        })
        .filter(|c| c.1 > 0)
        .collect();
    commands.sort();
    let connected_clients = shared.clients.lock().len() as u64;
    let mut out = Scrape {
        commands,
        connected_clients,
        memory_rss: crate::commands::info::rss_bytes(),
        maxmemory: shared.config.read().maxmemory,
        durable_waits: m.durable_waits.load(Ordering::Relaxed),
        not_durable: m.not_durable.load(Ordering::Relaxed),
        is_replica: shared.replication.is_replica(),
        uptime_s: shared.started.elapsed().as_secs(),
        ..Default::default()
    };
    {
        let store = shared.store.lock();
        out.keys = store.dbs.iter().enumerate().filter(|(_, d)| !d.is_empty()).map(|(i, d)| (format!("db{i}"), d.len() as u64)).collect();
        let st = &store.locks.stats;
        out.lock_kinds = st.by_kind;
        out.lock_expirations = st.expirations;
        out.lock_wait_timeouts = st.wait_timeouts;
        out.wait_buckets = st.wait_ms_buckets.to_vec();
        out.wait_sum_ms = st.wait_ms_sum;
        out.lock_waiters = store.locks.total_live_waiters() as u64;
        out.epoch = store.locks.tokens.epoch() as u64;
    }
    out.replicas = shared
        .replication
        .downstream()
        .iter()
        .map(|d| (format!("{}:{}", d.ip, d.port), d.last_ack.elapsed().as_millis() as u64, d.fsynced))
        .collect();
    out
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

/// A labelled family of counters or gauges: one descriptor, one sample per (label value, value).
fn family(e: &mut DescriptorEncoder, name: &str, help: &str, kind: MetricType, label: &str, rows: &[(String, u64)]) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, kind)?;
    for (l, v) in rows {
        let labels = [(label, l.as_str())];
        let f = m.encode_family(&labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*v).encode(f)?,
            _ => ConstGauge::new(*v as i64).encode(f)?,
        }
    }
    Ok(())
}

/// Histogram buckets as prometheus-client takes them: per-bucket counts (it accumulates them), the last bucket's
/// bound `f64::MAX` (written `+Inf`); `bounds` scaled to the exported unit. Returns the total count too.
fn buckets(counts: &[u64], bounds: &[f64]) -> (u64, Vec<(f64, u64)>) {
    let out: Vec<(f64, u64)> = counts.iter().enumerate().map(|(i, c)| (bounds.get(i).copied().unwrap_or(f64::MAX), *c)).collect();
    (counts.iter().sum(), out)
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let kinds = ["lease", "semaphore"];
        let calls: Vec<_> = self.commands.iter().map(|c| (c.0.clone(), c.1)).collect();
        family(&mut e, "ruvio_commands", "Commands run (or refused), per command.", MetricType::Counter, "cmd", &calls)?;
        let errors: Vec<_> = self.commands.iter().map(|c| (c.0.clone(), c.2)).collect();
        family(&mut e, "ruvio_command_errors", "Commands answered with an error, per command.", MetricType::Counter, "cmd", &errors)?;
        {
            let bounds: Vec<f64> = LATENCY_BUCKETS_US.iter().map(|us| *us as f64 / 1e6).collect();
            let mut m = e.encode_descriptor(
                "ruvio_command_duration_seconds",
                "Time to run a command, per command (excluding the time a blocked command waits).",
                None,
                MetricType::Histogram,
            )?;
            for (name, _, _, counts, sum_us) in &self.commands {
                let (count, b) = buckets(counts, &bounds);
                let labels = [("cmd", name.as_str())];
                m.encode_family(&labels)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(*sum_us as f64 / 1e6, count, &b, None)?;
            }
        }
        gauge(&mut e, "ruvio_connected_clients", "Client connections.", self.connected_clients as i64)?;
        gauge(&mut e, "ruvio_memory_rss_bytes", "Resident set size of the process.", self.memory_rss as i64)?;
        gauge(&mut e, "ruvio_maxmemory_bytes", "The maxmemory setting (0: none).", self.maxmemory as i64)?;
        family(&mut e, "ruvio_keys", "Keys per non-empty database.", MetricType::Gauge, "db", &self.keys)?;
        let per_kind = |f: fn(&crate::locks::KindCounts) -> u64| -> Vec<(String, u64)> {
            kinds.iter().zip(self.lock_kinds.iter()).map(|(k, c)| (k.to_string(), f(c))).collect()
        };
        family(&mut e, "ruvio_lock_grants", "Lock grants (LEASE, SEMAPHORE slots), per kind.", MetricType::Counter, "kind", &per_kind(|c| c.grants))?;
        family(&mut e, "ruvio_lock_renewals", "Successful RENEWs, per kind.", MetricType::Counter, "kind", &per_kind(|c| c.renewals))?;
        family(&mut e, "ruvio_lock_releases", "Successful RELEASEs, per kind.", MetricType::Counter, "kind", &per_kind(|c| c.releases))?;
        family(&mut e, "ruvio_lock_waits", "Clients that queued with WAIT, per kind.", MetricType::Counter, "kind", &per_kind(|c| c.waits))?;
        counter(&mut e, "ruvio_lock_expirations", "Holders whose TTL ran out while holding (all kinds).", self.lock_expirations)?;
        counter(&mut e, "ruvio_lock_wait_timeouts", "Waits that ended without a grant.", self.lock_wait_timeouts)?;
        gauge(&mut e, "ruvio_lock_waiters", "Clients waiting for a lock now.", self.lock_waiters as i64)?;
        {
            let bounds: Vec<f64> = crate::locks::WAIT_BUCKETS_MS.iter().map(|ms| *ms as f64 / 1e3).collect();
            let (count, b) = buckets(&self.wait_buckets, &bounds);
            let m = e.encode_descriptor("ruvio_lock_wait_seconds", "How long granted waiters waited.", None, MetricType::Histogram)?;
            let mut m = m;
            m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(self.wait_sum_ms as f64 / 1e3, count, &b, None)?;
        }
        counter(&mut e, "ruvio_durable_waits", "Durable writes (CLIENT DURABILITY REPLICAS n) that waited for replicas.", self.durable_waits)?;
        counter(&mut e, "ruvio_not_durable", "Durable writes answered NOTDURABLE.", self.not_durable)?;
        gauge(&mut e, "ruvio_is_primary", "1 on a primary, 0 on a replica.", (!self.is_replica) as i64)?;
        gauge(&mut e, "ruvio_fencing_epoch", "The failover epoch in this node's tokens (raised by every failover).", self.epoch as i64)?;
        let lag: Vec<_> = self.replicas.iter().map(|(a, lag, _)| (a.clone(), *lag)).collect();
        family(&mut e, "ruvio_replica_ack_age_milliseconds", "Time since each replica last acknowledged (replication lag).", MetricType::Gauge, "replica", &lag)?;
        let fsynced: Vec<_> = self.replicas.iter().map(|(a, _, f)| (a.clone(), *f)).collect();
        family(&mut e, "ruvio_replica_fsynced_lsn", "The last log record each replica reported fsynced.", MetricType::Gauge, "replica", &fsynced)?;
        gauge(&mut e, "ruvio_uptime_seconds", "Seconds since the server started.", self.uptime_s as i64)?;
        Ok(())
    }
}

/// The text exposition of one scrape.
pub fn render(shared: &Shared) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape(shared)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}

/// Binds the metrics listener on the first bind address (a leading '-' dropped, `*` for all IPv4), when
/// `metrics-port` is set.
pub async fn bind(shared: &Shared) -> std::io::Result<Option<tokio::net::TcpListener>> {
    let (port, bind) = {
        let c = shared.config.read();
        (c.metrics_port, c.bind.first().cloned().unwrap_or_else(|| "127.0.0.1".into()))
    };
    if port == 0 {
        return Ok(None);
    }
    let host = bind.trim_start_matches('-');
    let host = if host == "*" { "0.0.0.0" } else { host };
    let ip: std::net::IpAddr = host.parse().map_err(|_| std::io::Error::other(format!("bad bind address {host} for metrics-port")))?;
    let addr = SocketAddr::new(ip, port);
    let l = tokio::net::TcpListener::bind(addr).await.map_err(|e| std::io::Error::new(e.kind(), format!("metrics-port: could not bind {addr}: {e}")))?;
    tracing::info!("Prometheus metrics on http://{addr}/metrics");
    Ok(Some(l))
}

/// Serves `GET /metrics` until shutdown.
pub async fn serve(shared: Arc<Shared>, listener: tokio::net::TcpListener) {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(|axum::extract::State(s): axum::extract::State<Arc<Shared>>| async move {
                ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], render(&s))
            }),
        )
        .route(
            "/locks",
            get(|axum::extract::State(s): axum::extract::State<Arc<Shared>>| async move {
                (
                    [
                        (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
                        // Defence in depth behind the escaping: no script runs, nothing is loaded from anywhere.
                        (axum::http::header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'"),
                        (axum::http::header::CACHE_CONTROL, "no-store"),
                    ],
                    crate::locks_page::render(&s),
                )
            }),
        )
        .with_state(shared.clone());
    let mut shutdown = shared.shutdown.subscribe();
    let stop = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
        tracing::warn!("metrics endpoint stopped: {e}");
    }
}
