//! The coordinator's Prometheus endpoint (`metrics-port`, off by default): `GET /metrics` in the text format, names
//! prefixed `ruvio_coordinator_`: its raft role and term, and per group the epoch, the primary, the replicas, and
//! the last failover. Read from the coordinator's state at scrape time; prometheus-client encodes, axum serves.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::Coordinator;

#[derive(Debug, Default)]
struct Scrape {
    role: String,
    term: u64,
    is_leader: bool,
    members: u64,
    clients: u64,
    uptime_s: u64,
    /// Per group: name, primary, epoch, replicas, durability set size, last failover (epoch, ended at ms, took ms).
    groups: Vec<(String, String, u64, u64, u64, Option<(u64, u64, u64)>)>,
}

fn gauges(e: &mut DescriptorEncoder, name: &str, help: &str, rows: &[(Vec<(&str, String)>, i64)]) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ConstGauge::new(*v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        gauges(&mut e, "ruvio_coordinator_raft_role", "1 for this coordinator's raft role (leader, follower, candidate, learner).", &[(vec![("role", self.role.clone())], 1)])?;
        gauges(&mut e, "ruvio_coordinator_is_leader", "1 on the raft leader (the coordinator that acts).", &[(vec![], self.is_leader as i64)])?;
        gauges(&mut e, "ruvio_coordinator_raft_term", "The raft term.", &[(vec![], self.term as i64)])?;
        gauges(&mut e, "ruvio_coordinator_members", "Coordinators in the consensus group.", &[(vec![], self.members as i64)])?;
        gauges(&mut e, "ruvio_coordinator_connected_clients", "Client connections.", &[(vec![], self.clients as i64)])?;
        gauges(&mut e, "ruvio_coordinator_uptime_seconds", "Seconds since the coordinator started.", &[(vec![], self.uptime_s as i64)])?;
        let g = |f: &dyn Fn(&(String, String, u64, u64, u64, Option<(u64, u64, u64)>)) -> Option<i64>| -> Vec<(Vec<(&str, String)>, i64)> {
            self.groups.iter().filter_map(|x| f(x).map(|v| (vec![("group", x.0.clone())], v))).collect()
        };
        gauges(&mut e, "ruvio_coordinator_epoch", "The group's failover epoch (raised by every failover).", &g(&|x| Some(x.2 as i64)))?;
        let primary: Vec<_> = self.groups.iter().map(|x| (vec![("group", x.0.clone()), ("primary", x.1.clone())], 1)).collect();
        gauges(&mut e, "ruvio_coordinator_primary", "1 for the group's primary, by address.", &primary)?;
        gauges(&mut e, "ruvio_coordinator_replicas", "Replicas the group knows.", &g(&|x| Some(x.3 as i64)))?;
        gauges(&mut e, "ruvio_coordinator_durability_set", "Replicas in the group's durability set.", &g(&|x| Some(x.4 as i64)))?;
        gauges(&mut e, "ruvio_coordinator_last_failover_epoch", "The epoch of the group's last failover.", &g(&|x| x.5.map(|f| f.0 as i64)))?;
        gauges(&mut e, "ruvio_coordinator_last_failover_timestamp_seconds", "When the group's last failover ended (Unix s).", &g(&|x| x.5.map(|f| (f.1 / 1000) as i64)))?;
        gauges(&mut e, "ruvio_coordinator_last_failover_duration_milliseconds", "How long the group's last failover took.", &g(&|x| x.5.map(|f| f.2 as i64)))?;
        Ok(())
    }
}

fn scrape(co: &Coordinator) -> Scrape {
    let (state, term, _) = co.raft_status();
    let cluster = co.cluster_view();
    Scrape {
        role: format!("{state:?}").to_ascii_lowercase(),
        term,
        is_leader: co.is_leader(),
        members: co.members.len() as u64,
        clients: co.connected_clients.load(Ordering::Relaxed) as u64,
        uptime_s: co.started.elapsed().as_secs(),
        groups: cluster
            .groups
            .values()
            .map(|g| {
                let last = g.last_failover.as_ref().map(|f| (f.epoch, f.ended_ms, f.ended_ms.saturating_sub(f.started_ms)));
                (g.name.clone(), g.primary.clone(), g.epoch, g.replicas.len() as u64, g.durability_set.len() as u64, last)
            })
            .collect(),
    }
}

pub fn render(co: &Coordinator) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape(co)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}

/// Serves `GET /metrics` on `port` of the first bind address, when `metrics-port` is set.
pub async fn start(co: Arc<Coordinator>) -> Result<(), String> {
    let port = co.cfg.metrics_port;
    if port == 0 {
        return Ok(());
    }
    let host = co.cfg.bind.first().map(|b| b.trim_start_matches('-').to_string()).unwrap_or_else(|| "127.0.0.1".into());
    let host = if host == "*" { "0.0.0.0".to_string() } else { host };
    let addr = format!("{host}:{port}");
    let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| format!("metrics-port: could not bind {addr}: {e}"))?;
    tracing::info!("Prometheus metrics on http://{addr}/metrics");
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(|axum::extract::State(co): axum::extract::State<Arc<Coordinator>>| async move {
                ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], render(&co))
            }),
        )
        .with_state(co);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}
