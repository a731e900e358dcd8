//! Driver for bench/failover.sh: the time from `kill -9` of a primary to the first durable grant answered by the
//! new primary, found the way a client finds it: by asking the Sentinel-protocol servers (`ruvio coordinator`s or
//! redis-sentinels) `SENTINEL get-master-addr-by-name`.
//!
//! `--mode ruvio`: a durable grant is `CLIENT DURABILITY REPLICAS 1` + `LEASE key ttl` answered with a token.
//! `--mode redis`: `SET key v NX PX ttl` answered `OK`, then `WAIT 1 200` answered >= 1.
//!
//! Before the kill it makes one durable grant on the current primary (the set-up is ready); then it sends SIGKILL to
//! `--kill PID`, starts the clock, and polls the sentinels (rotating, every 10 ms) until one names another node and a
//! durable grant there succeeds. Prints `discover_ms=` (first time a sentinel named the new primary), `grant_ms=`
//! (the measure), `new=host:port` and the reply.
//!
//! Usage: failover_time --sentinels 26379,26380,26381 --name mymaster --mode ruvio|redis --kill PID [--timeout-ms 60000]

use std::time::{Duration, Instant};

use ruvio_coordinator::node::{text, Conn};
use ruvio_protocol::Value;

const TTL: &str = "30000";

struct Opts {
    sentinels: Vec<String>,
    name: String,
    redis: bool,
    kill: i32,
    timeout: Duration,
}

fn opts() -> Opts {
    let mut o = Opts { sentinels: vec![], name: "mymaster".into(), redis: false, kill: 0, timeout: Duration::from_secs(60) };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--sentinels" => o.sentinels = v.split(',').map(|p| if p.contains(':') { p.to_string() } else { format!("127.0.0.1:{p}") }).collect(),
            "--name" => o.name = v,
            "--mode" => o.redis = v == "redis",
            "--kill" => o.kill = v.parse().expect("--kill PID"),
            "--timeout-ms" => o.timeout = Duration::from_millis(v.parse().expect("--timeout-ms")),
            _ => panic!("unknown flag {k}"),
        }
    }
    assert!(!o.sentinels.is_empty() && o.kill > 0, "usage: failover_time --sentinels P,P,P --mode ruvio|redis --kill PID");
    o
}

const LIMIT: Duration = Duration::from_millis(300);

async fn master_addr(sentinel: &str, name: &str) -> Option<String> {
    let mut c = Conn::connect(sentinel, None, LIMIT).await.ok()?;
    match c.cmd(&["SENTINEL", "get-master-addr-by-name", name], LIMIT).await.ok()? {
        Value::Array(v) if v.len() == 2 => Some(format!("{}:{}", text(&v[0]), text(&v[1]))),
        _ => None,
    }
}

/// One durable grant attempt on `c` for `key`: Ok(reply text) when granted durably, Err(why) otherwise.
async fn grant(c: &mut Conn, redis: bool, key: &str) -> Result<String, String> {
    let limit = Duration::from_secs(10);
    let v = if redis {
        c.cmd(&["SET", key, "1", "NX", "PX", TTL], limit).await.map_err(|e| e.to_string())?
    } else {
        c.cmd(&["LEASE", key, TTL], limit).await.map_err(|e| e.to_string())?
    };
    if v.is_error() || matches!(v, Value::Nil) {
        return Err(format!("grant: {}", text(&v)));
    }
    if !redis {
        return match v {
            Value::Integer(t) => Ok(format!("token={t}")),
            other => Err(format!("LEASE answered {other:?}")),
        };
    }
    match c.cmd(&["WAIT", "1", "200"], limit).await.map_err(|e| e.to_string())? {
        Value::Integer(n) if n >= 1 => Ok(format!("wait={n}")),
        other => Err(format!("WAIT answered {}", text(&other))),
    }
}

async fn connect_for_grants(addr: &str, redis: bool) -> Result<Conn, String> {
    let mut c = Conn::connect(addr, None, LIMIT).await.map_err(|e| e.to_string())?;
    if !redis {
        let v = c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"], LIMIT).await.map_err(|e| e.to_string())?;
        if v.is_error() {
            return Err(text(&v));
        }
    }
    Ok(c)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = opts();
    let run = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    // The current primary, and one durable grant on it (the set-up is ready).
    let ready = Instant::now();
    let old = loop {
        let mut found = None;
        for s in &o.sentinels {
            if let Some(a) = master_addr(s, &o.name).await {
                found = Some(a);
                break;
            }
        }
        if let Some(a) = found {
            if let Ok(mut c) = connect_for_grants(&a, o.redis).await {
                if grant(&mut c, o.redis, &format!("failover-bench:{run}:before")).await.is_ok() {
                    break a;
                }
            }
        }
        assert!(ready.elapsed() < o.timeout, "no durable grant on the primary before the kill");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // SAFETY: sending a signal to a pid given on the command line.
    let rc = unsafe { libc::kill(o.kill, libc::SIGKILL) };
    let t0 = Instant::now();
    assert_eq!(rc, 0, "kill -9 {} failed", o.kill);

    let mut discovered: Option<Duration> = None;
    let mut conn: Option<(String, Conn)> = None;
    let mut last_err = String::new();
    let mut i = 0usize;
    loop {
        assert!(t0.elapsed() < o.timeout, "no durable grant on a new primary within {:?}; last error: {last_err}", o.timeout);
        let s = &o.sentinels[i % o.sentinels.len()];
        i += 1;
        if let Some(a) = master_addr(s, &o.name).await.filter(|a| *a != old) {
            discovered.get_or_insert(t0.elapsed());
            if conn.as_ref().is_none_or(|(ca, _)| *ca != a) {
                conn = match connect_for_grants(&a, o.redis).await {
                    Ok(c) => Some((a.clone(), c)),
                    Err(e) => {
                        last_err = e;
                        None
                    }
                };
            }
            if let Some((_, c)) = conn.as_mut() {
                match grant(c, o.redis, &format!("failover-bench:{run}:{i}")).await {
                    Ok(r) => {
                        let ms = t0.elapsed().as_secs_f64() * 1000.0;
                        let d = discovered.unwrap().as_secs_f64() * 1000.0;
                        println!("grant_ms={ms:.0} discover_ms={d:.0} old={old} new={a} {r}");
                        return;
                    }
                    Err(e) => {
                        last_err = e;
                        if last_err.contains("timed out") || last_err.contains("closed") || last_err.contains("EOF") {
                            conn = None;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
