//! The coordinator's configuration: sentinel.conf directives plus `coordinator-peers` and
//! `sentinel durability-replicas`.

use std::path::{Path, PathBuf};

/// One monitored group (Sentinel's "master").
#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    pub name: String,
    pub ip: String,
    pub port: u16,
    /// Coordinators that must see the primary down before it is objectively down.
    pub quorum: usize,
    pub down_after_ms: u64,
    /// Time budget of one failover attempt (and the pause before the next attempt after a failed one).
    pub failover_timeout_ms: u64,
    /// Accepted for sentinel.conf compatibility; replicas are re-pointed all at once.
    pub parallel_syncs: u64,
    /// The durability level n the failover rule assumes (0 = asynchronous replication).
    pub durability_replicas: u32,
    /// Password the coordinator sends (AUTH) to the group's nodes.
    pub auth_pass: Option<String>,
    /// The ACL user it logs in as (`sentinel auth-user`; Ruvio nodes: `coordinator`, enabled by their
    /// `coordinator-pass`).
    pub auth_user: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub dir: PathBuf,
    /// Every coordinator of the consensus group as host:port (this one included); empty = this one alone.
    pub peers: Vec<String>,
    /// The address the other coordinators and clients know this one by (default: first bind address + port).
    pub announce_ip: Option<String>,
    pub announce_port: Option<u16>,
    pub requirepass: Option<String>,
    /// How coordinators log in to each other (`sentinel sentinel-user` / `sentinel sentinel-pass`): only a
    /// connection that did may send `COORDINATOR ...` (raft, proposals, IS-DOWN).
    pub sentinel_user: Option<String>,
    pub sentinel_pass: Option<String>,
    pub loglevel: String,
    pub groups: Vec<GroupConfig>,
    /// `protected-mode yes` (the default): see [`Config::protected`].
    pub protected_mode: bool,
    /// TCP port of the Prometheus endpoint (`GET /metrics`) on the first bind address; 0 = off.
    pub metrics_port: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 26379,
            bind: vec!["127.0.0.1".into()],
            dir: PathBuf::from("./coordinator-data"),
            peers: Vec::new(),
            announce_ip: None,
            announce_port: None,
            requirepass: None,
            sentinel_user: None,
            sentinel_pass: None,
            loglevel: "notice".into(),
            groups: Vec::new(),
            metrics_port: 0,
            protected_mode: true,
        }
    }
}

fn parse_num<T: std::str::FromStr>(what: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{what}: '{v}' is not a valid number"))
}

/// Splits a config line into words; double quotes group words (`requirepass "a b"`).
fn split_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut had = false;
    for ch in line.chars() {
        match ch {
            '"' => {
                in_q = !in_q;
                had = true;
            }
            c if c.is_whitespace() && !in_q => {
                if had || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    had = false;
                }
            }
            c => cur.push(c),
        }
    }
    if had || !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Config {
    /// Whether protected mode applies (Redis's rule, as Sentinel had it): `protected-mode yes`, no client
    /// password (`requirepass`), and listening on every interface (a wildcard `bind` address: `*`, `0.0.0.0`,
    /// `::`). Clients from other hosts are then refused with Redis's DENIED text; loopback clients are served, and
    /// so are other coordinators that log in with `sentinel-user`/`sentinel-pass` first (server.rs). Binding to
    /// chosen addresses, or setting `requirepass`, is the operator saying who may connect.
    pub fn protected(&self) -> bool {
        self.protected_mode && self.requirepass.is_none() && self.bind.iter().any(|b| matches!(b.trim_start_matches('-'), "*" | "0.0.0.0" | "::" | "::*"))
    }

    pub fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = split_words(line);
            self.apply(&words).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        }
        Ok(())
    }

    fn group_mut(&mut self, name: &str) -> Result<&mut GroupConfig, String> {
        self.groups
            .iter_mut()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("no such master '{name}' (declare it with `sentinel monitor` first)"))
    }

    /// Applies one directive given as words (`["sentinel", "monitor", "mymaster", "127.0.0.1", "6379", "2"]`).
    pub fn apply(&mut self, words: &[String]) -> Result<(), String> {
        let Some(name) = words.first() else { return Ok(()) };
        let args = &words[1..];
        let one = || -> Result<&str, String> {
            if args.len() == 1 {
                Ok(args[0].as_str())
            } else {
                Err(format!("'{name}' takes exactly one argument"))
            }
        };
        match name.to_ascii_lowercase().as_str() {
            "port" => self.port = parse_num("port", one()?)?,
            "bind" => {
                if args.is_empty() {
                    return Err("'bind' needs at least one address".into());
                }
                self.bind = args.to_vec();
            }
            "dir" => self.dir = PathBuf::from(one()?),
            "requirepass" => self.requirepass = Some(one()?.to_string()).filter(|s| !s.is_empty()),
            "loglevel" => self.loglevel = one()?.to_string(),
            "metrics-port" => self.metrics_port = parse_num("metrics-port", one()?)?,
            "coordinator-peers" => self.peers = args.to_vec(),
            "protected-mode" => {
                self.protected_mode = match one()?.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    v => return Err(format!("protected-mode: '{v}' is not yes or no")),
                }
            }
            // Accepted and ignored: they change nothing for the coordinator.
            "logfile" | "pidfile" => {}
            "daemonize" => {
                if one()?.eq_ignore_ascii_case("yes") {
                    return Err("daemonize yes is not supported (run the coordinator under a supervisor)".into());
                }
            }
            "sentinel" => self.apply_sentinel(args)?,
            other => return Err(format!("unknown directive '{other}'")),
        }
        Ok(())
    }

    fn apply_sentinel(&mut self, args: &[String]) -> Result<(), String> {
        let Some(sub) = args.first() else { return Err("'sentinel' needs a sub-directive".into()) };
        let rest = &args[1..];
        let need = |n: usize| -> Result<(), String> {
            if rest.len() == n {
                Ok(())
            } else {
                Err(format!("'sentinel {sub}' takes {n} arguments"))
            }
        };
        match sub.to_ascii_lowercase().as_str() {
            "monitor" => {
                need(4)?;
                if self.groups.iter().any(|g| g.name == rest[0]) {
                    return Err(format!("duplicate master name '{}'", rest[0]));
                }
                let quorum: usize = parse_num("quorum", &rest[3])?;
                if quorum == 0 {
                    return Err("quorum must be 1 or more".into());
                }
                self.groups.push(GroupConfig {
                    name: rest[0].clone(),
                    ip: rest[1].clone(),
                    port: parse_num("port", &rest[2])?,
                    quorum,
                    down_after_ms: 30_000,
                    failover_timeout_ms: 180_000,
                    parallel_syncs: 1,
                    durability_replicas: 0,
                    auth_pass: None,
                    auth_user: None,
                });
            }
            "down-after-milliseconds" => {
                need(2)?;
                let v = parse_num("down-after-milliseconds", &rest[1])?;
                if v == 0 {
                    return Err("down-after-milliseconds must be positive".into());
                }
                self.group_mut(&rest[0])?.down_after_ms = v;
            }
            "failover-timeout" => {
                need(2)?;
                self.group_mut(&rest[0])?.failover_timeout_ms = parse_num("failover-timeout", &rest[1])?;
            }
            "parallel-syncs" => {
                need(2)?;
                self.group_mut(&rest[0])?.parallel_syncs = parse_num("parallel-syncs", &rest[1])?;
            }
            "durability-replicas" => {
                need(2)?;
                self.group_mut(&rest[0])?.durability_replicas = parse_num("durability-replicas", &rest[1])?;
            }
            "auth-pass" => {
                need(2)?;
                self.group_mut(&rest[0])?.auth_pass = Some(rest[1].clone());
            }
            "auth-user" => {
                need(2)?;
                self.group_mut(&rest[0])?.auth_user = Some(rest[1].clone());
            }
            "sentinel-user" => {
                need(1)?;
                self.sentinel_user = Some(rest[0].clone()).filter(|s| !s.is_empty());
            }
            "sentinel-pass" => {
                need(1)?;
                self.sentinel_pass = Some(rest[0].clone()).filter(|s| !s.is_empty());
            }
            "announce-ip" => {
                need(1)?;
                self.announce_ip = Some(rest[0].clone());
            }
            "announce-port" => {
                need(1)?;
                self.announce_port = Some(parse_num("announce-port", &rest[0])?);
            }
            // Written by Sentinel into its own file or harmless: accepted, ignored.
            "myid" | "config-epoch" | "leader-epoch" | "current-epoch" | "known-replica" | "known-slave"
            | "known-sentinel" | "resolve-hostnames" | "announce-hostnames" | "deny-scripts-reconfig" => {}
            other => return Err(format!("unknown sentinel directive '{other}'")),
        }
        Ok(())
    }

    /// The address this coordinator is known by (in `coordinator-peers` and `SENTINEL SENTINELS`).
    pub fn self_addr(&self) -> String {
        let ip = self.announce_ip.clone().unwrap_or_else(|| {
            let b = self.bind.first().cloned().unwrap_or_else(|| "127.0.0.1".into());
            if b == "0.0.0.0" || b == "*" {
                "127.0.0.1".into()
            } else {
                b.trim_start_matches('-').to_string()
            }
        });
        format!("{ip}:{}", self.announce_port.unwrap_or(self.port))
    }

    /// The consensus members, sorted (so every coordinator numbers them alike), and this one's node id.
    pub fn members(&self) -> Result<(Vec<String>, u64), String> {
        let me = self.self_addr();
        let mut peers = if self.peers.is_empty() { vec![me.clone()] } else { self.peers.clone() };
        peers.sort();
        peers.dedup();
        for p in &peers {
            if split_addr(p).is_none() {
                return Err(format!("coordinator-peers: '{p}' is not host:port"));
            }
        }
        if peers.len() > 1 && (self.sentinel_user.is_none() || self.sentinel_pass.is_none()) {
            // Without it any process that reaches a coordinator's port could send raft messages and proposals.
            return Err("a group of more than one coordinator needs `sentinel sentinel-user <user>` and `sentinel sentinel-pass <password>` (the same on every coordinator): coordinators authenticate to each other with them".into());
        }
        let idx = peers
            .iter()
            .position(|p| *p == me)
            .ok_or_else(|| format!("coordinator-peers does not list this coordinator's own address {me} (set bind/port or sentinel announce-ip/announce-port)"))?;
        Ok((peers, idx as u64 + 1))
    }
}

impl Config {
    /// How this coordinator logs in to the other coordinators.
    pub fn peer_auth(&self) -> Option<(Option<&str>, &str)> {
        self.sentinel_pass.as_deref().map(|p| (self.sentinel_user.as_deref(), p))
    }
}

impl GroupConfig {
    /// How this coordinator logs in to the group's nodes.
    pub fn node_auth(&self) -> Option<(Option<&str>, &str)> {
        self.auth_pass.as_deref().map(|p| (self.auth_user.as_deref(), p))
    }
}

pub fn split_addr(a: &str) -> Option<(String, u16)> {
    let (h, p) = a.rsplit_once(':')?;
    Some((h.to_string(), p.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        split_words(s)
    }

    #[test]
    fn parses_sentinel_directives() {
        let mut c = Config::default();
        for l in [
            "port 26380",
            "dir /tmp/x",
            "coordinator-peers 127.0.0.1:26381 127.0.0.1:26380",
            "sentinel sentinel-user peer",
            "sentinel sentinel-pass s3cret",
            "sentinel monitor mymaster 127.0.0.1 6379 2",
            "sentinel down-after-milliseconds mymaster 1000",
            "sentinel failover-timeout mymaster 5000",
            "sentinel parallel-syncs mymaster 1",
            "sentinel durability-replicas mymaster 1",
            "sentinel auth-user mymaster coordinator",
        ] {
            c.apply(&w(l)).unwrap();
        }
        let g = &c.groups[0];
        assert_eq!((g.name.as_str(), g.ip.as_str(), g.port, g.quorum), ("mymaster", "127.0.0.1", 6379, 2));
        assert_eq!((g.down_after_ms, g.failover_timeout_ms, g.durability_replicas), (1000, 5000, 1));
        let (peers, id) = c.members().unwrap();
        assert_eq!(peers, vec!["127.0.0.1:26380".to_string(), "127.0.0.1:26381".into()]);
        assert_eq!(id, 1);
        assert!(c.apply(&w("sentinel down-after-milliseconds other 10")).is_err());
        assert!(c.apply(&w("bogus 1")).is_err());
        assert_eq!(c.groups[0].node_auth(), None, "auth-user alone sends no AUTH");
        let mut open = c.clone();
        open.sentinel_pass = None;
        assert!(open.members().unwrap_err().contains("sentinel-pass"), "a group without peer authentication must not start");
        c.apply(&w("coordinator-peers 127.0.0.1:1 127.0.0.1:2")).unwrap();
        assert!(c.members().is_err(), "own address missing from the peers must be refused");
    }
}
