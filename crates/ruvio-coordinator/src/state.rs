//! The replicated state (what the coordinators agree on through raft) and the commands that change it.
//! `apply` is pure: the raft state machine calls it for each committed entry, in log order, on every coordinator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A failover that has raised the epoch but not finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverInProgress {
    pub epoch: u64,
    pub from: String,
    pub reason: String,
    pub started_ms: u64,
}

/// The last completed failover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverRecord {
    pub epoch: u64,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub forced: bool,
    /// What the operator was told may be lost (forced failovers), or how the replica was chosen.
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    /// The current primary, host:port.
    pub primary: String,
    /// Every known replica (discovered from the primary, or demoted primaries), host:port.
    pub replicas: Vec<String>,
    /// The failover epoch the current primary works in.
    pub epoch: u64,
    /// The durability level n the failover rule assumes.
    pub durability_n: u32,
    /// D: the replicas that count for durability (each joined once it had caught up).
    pub durability_set: Vec<String>,
    /// The highest epoch each replica promised (REPLICATION PROMISE) during a failover.
    pub promises: BTreeMap<String, u64>,
    pub failover: Option<FailoverInProgress>,
    pub last_failover: Option<FailoverRecord>,
    /// Why the last failover attempt did not promote (cleared when one completes).
    pub waiting_reason: Option<String>,
    /// The highest epoch ever allocated to this group (failover attempts and re-adoptions), so an epoch is never
    /// handed out twice, even after an attempt was abandoned or forgotten (`SENTINEL RESET`).
    #[serde(default)]
    pub max_epoch: u64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterState {
    pub groups: BTreeMap<String, Group>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Starts monitoring a group from the configuration (ignored if it exists).
    AddGroup { name: String, primary: String, durability_n: u32 },
    /// Replicas discovered; `durable` are replicas that caught up and join D.
    AddReplicas { name: String, replicas: Vec<String>, durable: Vec<String> },
    /// Raises the epoch for a failover away from `from` (refused if `from` is no longer the primary).
    /// The new epoch is above the group's epoch, any unfinished attempt's, and `min_epoch`.
    BeginFailover { name: String, from: String, min_epoch: u64, reason: String, now_ms: u64 },
    RecordPromise { name: String, replica: String, epoch: u64 },
    /// Makes `to` the primary at `epoch` (which must be the epoch of the failover in progress).
    FinishFailover { name: String, epoch: u64, to: String, forced: bool, note: String, now_ms: u64 },
    SetWaiting { name: String, reason: Option<String> },
    /// The primary came back before a failover away from it promoted anyone: it stays the primary, at an epoch of
    /// its own above every promise (docs/coordinator.md, "An abandoned failover"). Refused unless `primary` is still
    /// the primary and the failover in progress is still the one abandoned (`abandon`: its epoch, None if none).
    /// `reuse`: the abandoned attempt's own epoch (only when no node was ever promoted at it); otherwise a fresh
    /// epoch above the group's, every allocated one and `min_epoch`.
    AdoptPrimary { name: String, primary: String, abandon: Option<u64>, reuse: bool, min_epoch: u64 },
    /// SENTINEL RESET: forget replicas and D (rediscovered from the primary), keep primary and epoch.
    Reset { name: String },
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    pub epoch: u64,
    pub message: String,
}

/// Something subscribers of the coordinator's pub/sub hear about, produced while applying.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub channel: &'static str,
    pub message: String,
}

fn addr_parts(a: &str) -> (&str, &str) {
    a.rsplit_once(':').unwrap_or((a, "0"))
}

/// `master <name> <ip> <port>` suffix Sentinel puts on instance events.
pub fn instance_desc(kind: &str, addr: &str, group: &str, primary: &str) -> String {
    let (ip, port) = addr_parts(addr);
    let (mip, mport) = addr_parts(primary);
    if kind == "master" {
        format!("master {group} {ip} {port}")
    } else {
        format!("{kind} {addr} {ip} {port} @ {group} {mip} {mport}")
    }
}

impl ClusterState {
    pub fn apply(&mut self, cmd: &Command, events: &mut Vec<Event>) -> Response {
        let ok = |epoch: u64, m: &str| Response { ok: true, epoch, message: m.to_string() };
        let refuse = |epoch: u64, m: String| Response { ok: false, epoch, message: m };
        match cmd {
            Command::AddGroup { name, primary, durability_n } => {
                if let Some(g) = self.groups.get_mut(name) {
                    // The durability level follows the configuration; everything else is the agreed state.
                    g.durability_n = *durability_n;
                    return ok(g.epoch, "exists");
                }
                self.groups.insert(
                    name.clone(),
                    Group { name: name.clone(), primary: primary.clone(), durability_n: *durability_n, ..Default::default() },
                );
                events.push(Event { channel: "+monitor", message: format!("{} quorum", instance_desc("master", primary, name, primary)) });
                ok(0, "added")
            }
            Command::AddReplicas { name, replicas, durable } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                for r in replicas {
                    if *r != g.primary && !g.replicas.contains(r) {
                        g.replicas.push(r.clone());
                        events.push(Event { channel: "+slave", message: instance_desc("slave", r, name, &g.primary) });
                    }
                }
                for r in durable {
                    if *r != g.primary && g.replicas.contains(r) && !g.durability_set.contains(r) {
                        g.durability_set.push(r.clone());
                    }
                }
                ok(g.epoch, "")
            }
            Command::BeginFailover { name, from, min_epoch, reason, now_ms } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                if g.primary != *from {
                    return refuse(g.epoch, format!("{from} is no longer the primary of {name} (now {})", g.primary));
                }
                let epoch = g.epoch.max(g.max_epoch).max(g.failover.as_ref().map_or(0, |f| f.epoch)).max(min_epoch.saturating_sub(1)) + 1;
                g.max_epoch = epoch;
                g.failover = Some(FailoverInProgress { epoch, from: from.clone(), reason: reason.clone(), started_ms: *now_ms });
                events.push(Event { channel: "+new-epoch", message: epoch.to_string() });
                ok(epoch, "")
            }
            Command::RecordPromise { name, replica, epoch } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                let e = g.promises.entry(replica.clone()).or_insert(0);
                *e = (*e).max(*epoch);
                ok(*epoch, "")
            }
            Command::FinishFailover { name, epoch, to, forced, note, now_ms } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                let Some(f) = g.failover.clone().filter(|f| f.epoch == *epoch) else {
                    return refuse(g.epoch, format!("no failover in progress at epoch {epoch}"));
                };
                // Validated here, where every coordinator applies it alike: a failover ends only on a known replica
                // of the group, and with a durability level (not forced) only on one that promised this epoch.
                if !g.replicas.contains(to) {
                    return refuse(g.epoch, format!("{to} is not a known replica of {name}"));
                }
                if g.durability_n >= 1 && !*forced && g.promises.get(to).is_none_or(|p| *p < *epoch) {
                    return refuse(g.epoch, format!("{to} did not promise epoch {epoch}"));
                }
                let old = std::mem::replace(&mut g.primary, to.clone());
                g.replicas.retain(|r| r != to);
                if !g.replicas.contains(&old) {
                    g.replicas.push(old.clone());
                }
                g.durability_set.retain(|r| r != to);
                g.epoch = *epoch;
                g.max_epoch = g.max_epoch.max(*epoch);
                g.failover = None;
                g.waiting_reason = None;
                g.last_failover = Some(FailoverRecord {
                    epoch: *epoch,
                    from: old.clone(),
                    to: to.clone(),
                    reason: f.reason,
                    started_ms: f.started_ms,
                    ended_ms: *now_ms,
                    forced: *forced,
                    note: note.clone(),
                });
                let (oip, oport) = addr_parts(&old);
                let (nip, nport) = addr_parts(to);
                events.push(Event { channel: "+failover-end", message: instance_desc("master", &old, name, &old) });
                events.push(Event { channel: "+switch-master", message: format!("{name} {oip} {oport} {nip} {nport}") });
                ok(*epoch, "")
            }
            Command::AdoptPrimary { name, primary, abandon, reuse, min_epoch } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                if g.primary != *primary {
                    return refuse(g.epoch, format!("{primary} is no longer the primary of {name} (now {})", g.primary));
                }
                let current = g.failover.as_ref().map(|f| f.epoch);
                if current != *abandon {
                    return refuse(g.epoch, format!("the failover in progress changed (now {current:?}, expected {abandon:?})"));
                }
                let epoch = match (*reuse, current) {
                    (true, Some(e)) if e > g.epoch => e,
                    (true, _) => return refuse(g.epoch, "the abandoned attempt's epoch cannot be reused".into()),
                    (false, _) => g.epoch.max(g.max_epoch).max(current.unwrap_or(0)).max(min_epoch.saturating_sub(1)) + 1,
                };
                g.epoch = epoch;
                g.max_epoch = g.max_epoch.max(epoch);
                g.failover = None;
                g.waiting_reason = None;
                events.push(Event { channel: "+new-epoch", message: epoch.to_string() });
                ok(epoch, "")
            }
            Command::SetWaiting { name, reason } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                g.waiting_reason = reason.clone();
                ok(g.epoch, "")
            }
            Command::Reset { name } => {
                let Some(g) = self.groups.get_mut(name) else { return refuse(0, format!("no group {name}")) };
                g.replicas.clear();
                g.durability_set.clear();
                g.promises.clear();
                g.failover = None;
                g.waiting_reason = None;
                events.push(Event { channel: "+reset-master", message: instance_desc("master", &g.primary.clone(), name, &g.primary) });
                ok(g.epoch, "")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_raises_epoch_and_swaps_roles() {
        let mut s = ClusterState::default();
        let mut ev = Vec::new();
        s.apply(&Command::AddGroup { name: "m".into(), primary: "h:1".into(), durability_n: 0 }, &mut ev);
        s.apply(&Command::AddReplicas { name: "m".into(), replicas: vec!["h:2".into(), "h:3".into()], durable: vec![] }, &mut ev);
        let r = s.apply(&Command::BeginFailover { name: "m".into(), from: "h:1".into(), min_epoch: 5, reason: "odown".into(), now_ms: 1 }, &mut ev);
        assert!(r.ok);
        assert_eq!(r.epoch, 5);
        // A second attempt (the first never finished) gets a higher epoch.
        let r2 = s.apply(&Command::BeginFailover { name: "m".into(), from: "h:1".into(), min_epoch: 0, reason: "odown".into(), now_ms: 2 }, &mut ev);
        assert_eq!(r2.epoch, 6);
        // Finishing the stale attempt is refused.
        assert!(!s.apply(&Command::FinishFailover { name: "m".into(), epoch: 5, to: "h:2".into(), forced: false, note: String::new(), now_ms: 3 }, &mut ev).ok);
        ev.clear();
        assert!(s.apply(&Command::FinishFailover { name: "m".into(), epoch: 6, to: "h:2".into(), forced: false, note: String::new(), now_ms: 3 }, &mut ev).ok);
        let g = &s.groups["m"];
        assert_eq!(g.primary, "h:2");
        assert_eq!(g.replicas, vec!["h:3".to_string(), "h:1".into()]);
        assert_eq!(g.epoch, 6);
        assert!(ev.iter().any(|e| e.channel == "+switch-master" && e.message == "m h 1 h 2"));
        // The old primary can no longer be failed over from.
        assert!(!s.apply(&Command::BeginFailover { name: "m".into(), from: "h:1".into(), min_epoch: 0, reason: "x".into(), now_ms: 4 }, &mut ev).ok);
    }

    #[test]
    fn finish_only_to_a_known_replica_that_promised() {
        let mut s = ClusterState::default();
        let mut ev = Vec::new();
        s.apply(&Command::AddGroup { name: "m".into(), primary: "h:1".into(), durability_n: 1 }, &mut ev);
        s.apply(&Command::AddReplicas { name: "m".into(), replicas: vec!["h:2".into()], durable: vec!["h:2".into()] }, &mut ev);
        let e = begin(&mut s, 0).epoch;
        let finish = |s: &mut ClusterState, to: &str, forced: bool| {
            s.apply(&Command::FinishFailover { name: "m".into(), epoch: e, to: to.into(), forced, note: String::new(), now_ms: 2 }, &mut Vec::new())
        };
        // An address that is not a member (a forged proposal) is never made the primary, forced or not.
        assert!(!finish(&mut s, "evil:6666", true).ok);
        // A member that did not promise this epoch is not promoted unless forced.
        assert!(!finish(&mut s, "h:2", false).ok);
        s.apply(&Command::RecordPromise { name: "m".into(), replica: "h:2".into(), epoch: e }, &mut ev);
        assert!(finish(&mut s, "h:2", false).ok);
        assert_eq!(s.groups["m"].primary, "h:2");
    }

    fn begin(s: &mut ClusterState, min_epoch: u64) -> Response {
        s.apply(&Command::BeginFailover { name: "m".into(), from: "h:1".into(), min_epoch, reason: "odown".into(), now_ms: 1 }, &mut Vec::new())
    }

    fn adopt(s: &mut ClusterState, abandon: Option<u64>, reuse: bool, min_epoch: u64) -> Response {
        s.apply(&Command::AdoptPrimary { name: "m".into(), primary: "h:1".into(), abandon, reuse, min_epoch }, &mut Vec::new())
    }

    fn group_at(epoch: u64) -> ClusterState {
        let mut s = ClusterState::default();
        s.apply(&Command::AddGroup { name: "m".into(), primary: "h:1".into(), durability_n: 1 }, &mut Vec::new());
        s.groups.get_mut("m").unwrap().epoch = epoch;
        s
    }

    #[test]
    fn an_abandoned_attempt_readopts_the_primary_at_its_own_epoch_or_a_fresh_one() {
        // Reuse: the primary takes the abandoned attempt's epoch; the next attempt goes above it.
        let mut s = group_at(19);
        assert_eq!(begin(&mut s, 0).epoch, 20);
        let r = adopt(&mut s, Some(20), true, 21);
        assert!(r.ok && r.epoch == 20, "{r:?}");
        let g = &s.groups["m"];
        assert_eq!((g.primary.as_str(), g.epoch, g.failover.clone(), g.waiting_reason.clone()), ("h:1", 20, None, None));
        assert_eq!(begin(&mut s, 0).epoch, 21);

        // Fresh: above the group's epoch, the attempt's and every promise reported (min_epoch).
        let mut s = group_at(19);
        begin(&mut s, 0);
        let r = adopt(&mut s, Some(20), false, 23);
        assert!(r.ok && r.epoch == 23, "{r:?}");
        assert_eq!(begin(&mut s, 0).epoch, 24);
        let mut s = group_at(19);
        begin(&mut s, 0);
        assert_eq!(adopt(&mut s, Some(20), false, 0).epoch, 21);

        // Refused when the failover in progress is not the one abandoned (a newer attempt began meanwhile, or none
        // is left), or the primary changed.
        let mut s = group_at(19);
        begin(&mut s, 0);
        begin(&mut s, 0);
        assert!(!adopt(&mut s, Some(20), true, 0).ok);
        assert!(!adopt(&mut s, None, false, 0).ok);
        assert!(adopt(&mut s, Some(21), true, 0).ok);
        assert!(!adopt(&mut s, Some(21), true, 0).ok, "nothing left to abandon");
        assert!(!adopt(&mut s, None, true, 0).ok, "reuse needs an abandoned attempt");
        let mut ev = Vec::new();
        s.apply(&Command::AddReplicas { name: "m".into(), replicas: vec!["h:2".into()], durable: vec![] }, &mut ev);
        let e = begin(&mut s, 0).epoch;
        s.apply(&Command::FinishFailover { name: "m".into(), epoch: e, to: "h:2".into(), forced: false, note: String::new(), now_ms: 2 }, &mut ev);
        assert!(!adopt(&mut s, None, false, 0).ok, "h:1 is no longer the primary");
    }

    #[test]
    fn an_epoch_is_never_allocated_twice_even_after_reset() {
        // SENTINEL RESET forgets the attempt in progress, not the epochs handed out.
        let mut s = group_at(4);
        assert_eq!(begin(&mut s, 0).epoch, 5);
        s.apply(&Command::Reset { name: "m".into() }, &mut Vec::new());
        assert_eq!(begin(&mut s, 0).epoch, 6);
        s.apply(&Command::Reset { name: "m".into() }, &mut Vec::new());
        assert_eq!(adopt(&mut s, None, false, 0).epoch, 7);
        // A state saved before max_epoch existed reads as 0 and still works.
        let old = r#"{"groups":{"m":{"name":"m","primary":"h:1","replicas":[],"epoch":3,"durability_n":1,"durability_set":[],"promises":{},"failover":null,"last_failover":null,"waiting_reason":null}}}"#;
        let mut s: ClusterState = serde_json::from_str(old).unwrap();
        assert_eq!(s.groups["m"].max_epoch, 0);
        assert_eq!(begin(&mut s, 0).epoch, 4);
    }
}
