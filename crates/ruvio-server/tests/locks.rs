//! Lock commands over TCP against a real in-process server: LEASE, RENEW, RELEASE, SEMAPHORE, IFGT, LOCKINFO,
//! waiting, expiry, interplay with other commands, transactions and the write-log records.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};
use ruvio_server::journal::format::{decode_command, RECORD_HEADER_LEN};
use ruvio_server::{Config, Shared};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ----- a server and a minimal client -----

struct Server {
    shared: Arc<Shared>,
    port: u16,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

fn data_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!("ruvio-locks-{}-{name}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn start_in(dir: PathBuf) -> Server {
    start_with(dir, true).await
}

async fn start_with(dir: PathBuf, appendonly: bool) -> Server {
    let mut config = Config::default();
    config.dir = dir;
    config.appendonly = appendonly;
    let shared = Shared::new(config);
    // An ephemeral port of the test's own (`port 0` means "no plain TCP" to the server, as in Redis).
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listeners = vec![ruvio_server::server::Listener { tcp, tls: false }];
    let done = tokio::spawn(ruvio_server::run_with(shared.clone(), listeners));
    Server { shared, port, done }
}

async fn start() -> Server {
    start_in(data_dir("t")).await
}

impl Server {
    async fn client(&self) -> Client {
        Client::connect(self.port).await
    }
    async fn stop(self) {
        self.shared.request_shutdown();
        tokio::time::timeout(Duration::from_secs(10), self.done).await.expect("server stops").unwrap().unwrap();
    }
}

struct Client {
    stream: TcpStream,
    buf: BytesMut,
}

impl Client {
    async fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream, buf: BytesMut::new() }
    }

    async fn send(&mut self, args: &[&str]) {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out).await.unwrap();
    }

    async fn send_many(&mut self, cmds: &[Vec<String>]) {
        let mut out = BytesMut::new();
        for c in cmds {
            encode_command(c, &mut out);
        }
        self.stream.write_all(&out).await.unwrap();
    }

    async fn read(&mut self) -> Value {
        loop {
            if let Some((v, used)) = decode_value(&self.buf, DecodeLimits::default()).unwrap() {
                let _ = self.buf.split_to(used);
                return v;
            }
            let n = tokio::time::timeout(Duration::from_secs(20), self.stream.read_buf(&mut self.buf))
                .await
                .expect("reply within 20 s")
                .unwrap();
            assert!(n > 0, "server closed the connection");
        }
    }

    async fn cmd(&mut self, args: &[&str]) -> Value {
        self.send(args).await;
        self.read().await
    }

    async fn int(&mut self, args: &[&str]) -> i64 {
        match self.cmd(args).await {
            Value::Integer(i) => i,
            other => panic!("{args:?} answered {other:?}"),
        }
    }

    /// A token, or None for nil.
    async fn token(&mut self, args: &[&str]) -> Option<i64> {
        match self.cmd(args).await {
            Value::Integer(i) => Some(i),
            Value::Nil => None,
            other => panic!("{args:?} answered {other:?}"),
        }
    }

    async fn error(&mut self, args: &[&str]) -> String {
        match self.cmd(args).await {
            Value::Error(e) => String::from_utf8(e.to_vec()).unwrap(),
            other => panic!("{args:?} answered {other:?}, expected an error"),
        }
    }

    async fn info(&mut self, key: &str) -> Option<LockInfo> {
        LockInfo::from_value(self.cmd(&["LOCKINFO", key]).await)
    }
}

#[derive(Debug, PartialEq)]
struct LockInfo {
    kind: String,
    limit: i64,
    /// (token, remaining ms)
    holders: Vec<(i64, i64)>,
    waiters: i64,
}

fn text(v: &Value) -> String {
    String::from_utf8(v.as_bytes().expect("a string").to_vec()).unwrap()
}

/// A RESP3 map or a RESP2 flat array of pairs, as a list of pairs.
fn pairs(v: Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m.into_iter().map(|(k, v)| (text(&k), v)).collect(),
        Value::Array(a) => a.chunks(2).map(|c| (text(&c[0]), c[1].clone())).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

impl LockInfo {
    fn from_value(v: Value) -> Option<LockInfo> {
        if v.is_nil() {
            return None;
        }
        let m: HashMap<String, Value> = pairs(v).into_iter().collect();
        let holders = match &m["holders"] {
            Value::Array(hs) => hs
                .iter()
                .map(|h| {
                    let h: HashMap<String, Value> = pairs(h.clone()).into_iter().collect();
                    (h["token"].as_i64().unwrap(), h["remaining_ms"].as_i64().unwrap())
                })
                .collect(),
            other => panic!("holders: {other:?}"),
        };
        Some(LockInfo {
            kind: text(&m["kind"]),
            limit: m["limit"].as_i64().unwrap(),
            holders,
            waiters: m["waiters"].as_i64().unwrap(),
        })
    }
    fn tokens(&self) -> Vec<i64> {
        self.holders.iter().map(|h| h.0).collect()
    }
}

/// Polls until `f` holds, for at most 5 s.
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for: {what}");
}

async fn wait_for_waiters(c: &mut Client, key: &str, n: i64) {
    let start = Instant::now();
    loop {
        let w = c.info(key).await.map_or(0, |i| i.waiters);
        if w == n {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{key}: {w} waiters, expected {n}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn info_field(c: &mut Client, field: &str) -> i64 {
    let v = c.cmd(&["INFO", "locks"]).await;
    let s = text(&v);
    s.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).unwrap_or_else(|| panic!("{field} in {s}")).trim().parse().unwrap()
}

// ----- the tests -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_race_for_one_key() {
    let srv = start().await;
    let (mut a, mut b) = (srv.client().await, srv.client().await);
    for round in 0..200 {
        let key = format!("race:{round}");
        let cmd = ["LEASE", key.as_str(), "10000"];
        let (ra, rb) = tokio::join!(a.token(&cmd), b.token(&cmd));
        let winner = match (ra, rb) {
            (Some(t), None) | (None, Some(t)) => t,
            other => panic!("round {round}: both or neither got the lock: {other:?}"),
        };
        assert_eq!(a.info(&key).await.unwrap().tokens(), vec![winner]);
        // The loser's stale token guesses cannot release it.
        assert_eq!(b.int(&["RELEASE", &key, &(winner + 1).to_string()]).await, 0);
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_moves_the_deadline_and_never_revives_an_expired_lease() {
    let srv = start().await;
    let mut c = srv.client().await;
    let t = c.token(&["LEASE", "job", "100"]).await.unwrap();
    assert!(c.int(&["PTTL", "job"]).await <= 100);
    assert_eq!(c.int(&["RENEW", "job", &t.to_string(), "5000"]).await, 1);
    let pttl = c.int(&["PTTL", "job"]).await;
    assert!(pttl > 4000 && pttl <= 5000, "PTTL shows the lease's remaining time: {pttl}");
    assert_eq!(c.int(&["TTL", "job"]).await, 5);
    assert_eq!(c.int(&["RENEW", "job", &t.to_string(), "60"]).await, 1);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(c.int(&["RENEW", "job", &t.to_string(), "5000"]).await, 0);
    assert_eq!(c.info("job").await, None);
    assert_eq!(c.cmd(&["TYPE", "job"]).await, Value::simple("none"));
    assert_eq!(c.int(&["RELEASE", "job", &t.to_string()]).await, 0);
    assert!(info_field(&mut c, "lock_expirations").await >= 1);
    assert_eq!(info_field(&mut c, "lock_renewals").await, 2);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_release_answers_zero_and_the_lock_stays_with_its_new_holder() {
    let srv = start().await;
    let (mut old, mut new) = (srv.client().await, srv.client().await);
    let t1 = old.token(&["LEASE", "report", "50"]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let t2 = new.token(&["LEASE", "report", "10000"]).await.unwrap();
    assert!(t2 > t1);
    assert_eq!(old.int(&["RELEASE", "report", &t1.to_string()]).await, 0);
    assert_eq!(old.int(&["RENEW", "report", &t1.to_string(), "10000"]).await, 0);
    assert_eq!(old.info("report").await.unwrap().tokens(), vec![t2]);
    assert_eq!(new.int(&["RELEASE", "report", &t2.to_string()]).await, 1);
    assert_eq!(new.int(&["RELEASE", "report", &t2.to_string()]).await, 0, "release is idempotent");
    assert_eq!(new.info("report").await, None);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_never_exceeds_its_limit_under_concurrency_drops_and_expiry() {
    const LIMIT: usize = 3;
    let srv = start().await;
    // Grants the test knows are still valid on the server: sent at `sent` with `ttl`. The server counts whole
    // milliseconds from the millisecond it executes the grant in, so its deadline is at least `sent + ttl - 1 ms`
    // (docs/fencing.md, "Time"). At no moment may more than LIMIT of them be live.
    let live: Arc<parking_lot::Mutex<Vec<(i64, Instant)>>> = Arc::default();
    let granted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..12u64 {
        let (port, live, granted) = (srv.port, live.clone(), granted.clone());
        tasks.push(tokio::spawn(async move {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(w);
            let mut c = Client::connect(port).await;
            for _ in 0..40 {
                let ttl = rng.gen_range(10..60u64);
                let sent = Instant::now();
                let wait = rng.gen_bool(0.5);
                let args = if wait {
                    vec!["SEMAPHORE".to_string(), "sem".into(), LIMIT.to_string(), ttl.to_string(), "WAIT".into(), "50".into()]
                } else {
                    vec!["SEMAPHORE".to_string(), "sem".into(), LIMIT.to_string(), ttl.to_string()]
                };
                c.send_many(&[args]).await;
                let Value::Integer(token) = c.read().await else {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(0..5))).await;
                    continue;
                };
                granted.fetch_add(1, Ordering::Relaxed);
                let valid_until = sent + Duration::from_millis(ttl - 1);
                {
                    let mut l = live.lock();
                    let now = Instant::now();
                    l.retain(|(_, until)| *until > now);
                    if valid_until > now {
                        l.push((token, valid_until));
                    }
                    assert!(l.len() <= LIMIT, "more than {LIMIT} certainly-live holders: {l:?}");
                }
                match rng.gen_range(0..10) {
                    // Crash: drop the connection while holding; the slot frees when its own TTL ends.
                    0 => {
                        c = Client::connect(port).await;
                    }
                    // Let it expire.
                    1..=3 => tokio::time::sleep(Duration::from_millis(ttl + 5)).await,
                    _ => {
                        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..5))).await;
                        live.lock().retain(|(t, _)| *t != token);
                        c.int(&["RELEASE", "sem", &token.to_string()]).await;
                    }
                }
            }
        }));
    }
    let checker = {
        let port = srv.port;
        tokio::spawn(async move {
            let mut c = Client::connect(port).await;
            for _ in 0..300 {
                if let Some(i) = c.info("sem").await {
                    assert!(i.holders.len() <= LIMIT, "LOCKINFO shows {} holders", i.holders.len());
                    assert_eq!(i.limit, LIMIT as i64);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    checker.await.unwrap();
    assert!(granted.load(Ordering::Relaxed) > 50, "the semaphore was exercised");
    let mut c = srv.client().await;
    // Every remaining slot (released or dropped) is gone once the TTLs pass, and the key with it.
    eventually("all slots expired", || {
        let port = srv.port;
        async move { Client::connect(port).await.info("sem").await.is_none() }
    })
    .await;
    assert_eq!(c.cmd(&["EXISTS", "sem"]).await, Value::Integer(0));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_100k_grants_and_across_a_restart() {
    let dir = data_dir("restart");
    let srv = start_in(dir.clone()).await;
    let mut conns = Vec::new();
    for _ in 0..4 {
        conns.push(srv.client().await);
    }
    let mut tasks = Vec::new();
    for (n, mut c) in conns.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut tokens = Vec::with_capacity(25_000);
            for batch in 0..25 {
                let cmds: Vec<Vec<String>> = (0..1000)
                    .map(|i| vec!["LEASE".into(), format!("tok:{n}:{batch}:{i}"), "60000".into()])
                    .collect();
                c.send_many(&cmds).await;
                for _ in 0..1000 {
                    match c.read().await {
                        Value::Integer(t) => tokens.push(t),
                        other => panic!("{other:?}"),
                    }
                }
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let tokens = t.await.unwrap();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "each client sees increasing tokens");
        all.extend(tokens);
    }
    assert_eq!(all.len(), 100_000);
    assert!(all.iter().all(|t| *t > 0));
    let max = *all.iter().max().unwrap();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 100_000, "no token issued twice");
    let mut c = srv.client().await;
    assert_eq!(info_field(&mut c, "lock_grants").await, 100_000);
    srv.stop().await;

    let srv = start_in(dir).await;
    let mut c = srv.client().await;
    // The restarted server replays 100k records first; clients are told -LOADING meanwhile.
    while matches!(c.cmd(&["GET", "tok:probe"]).await, Value::Error(e) if e.starts_with(b"LOADING")) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = c.token(&["LEASE", "tok:after", "1000"]).await.unwrap();
    assert!(after > max, "a restarted server issues larger tokens: {after} <= {max}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let srv = start().await;
    let mut holder = srv.client().await;
    let mut t = holder.token(&["LEASE", "q", "10000"]).await.unwrap();
    let mut waiters = Vec::new();
    for i in 0..4 {
        let mut w = srv.client().await;
        w.send(&["LEASE", "q", "10000", "WAIT", "10000"]).await;
        wait_for_waiters(&mut holder, "q", i + 1).await;
        waiters.push(w);
    }
    for (i, w) in waiters.iter_mut().enumerate() {
        assert_eq!(holder.int(&["RELEASE", "q", &t.to_string()]).await, 1);
        let next = match w.read().await {
            Value::Integer(n) => n,
            other => panic!("{other:?}"),
        };
        assert!(next > t);
        let info = holder.info("q").await.unwrap();
        assert_eq!(info.tokens(), vec![next]);
        assert_eq!(info.waiters, 3 - i as i64);
        t = next;
    }
    assert_eq!(info_field(&mut holder, "lock_waits").await, 4);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_answers_nil_and_leaves_no_waiter() {
    let srv = start().await;
    let mut c = srv.client().await;
    c.token(&["LEASE", "busy", "10000"]).await.unwrap();
    let mut w = srv.client().await;
    let start = Instant::now();
    assert_eq!(w.token(&["LEASE", "busy", "1000", "WAIT", "100"]).await, None);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(95) && waited < Duration::from_secs(2), "{waited:?}");
    assert_eq!(c.info("busy").await.unwrap().waiters, 0);
    assert_eq!(info_field(&mut c, "lock_wait_timeouts").await, 1);
    // The same connection keeps working after a timed-out wait.
    assert_eq!(w.cmd(&["PING"]).await, Value::simple("PONG"));
    assert_eq!(w.error(&["LEASE", "busy", "1000", "WAIT", "-1"]).await, "ERR timeout is negative");
    assert_eq!(w.error(&["LEASE", "busy", "1000", "WAIT"]).await, "ERR syntax error");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_disconnects_is_never_granted() {
    let srv = start().await;
    let mut holder = srv.client().await;
    let t = holder.token(&["LEASE", "d", "10000"]).await.unwrap();
    let mut gone = srv.client().await;
    gone.send(&["LEASE", "d", "10000", "WAIT", "0"]).await;
    wait_for_waiters(&mut holder, "d", 1).await;
    let mut next = srv.client().await;
    next.send(&["LEASE", "d", "10000", "WAIT", "0"]).await;
    wait_for_waiters(&mut holder, "d", 2).await;
    drop(gone);
    // The server notices the closed socket while the client waits, not only at grant time.
    wait_for_waiters(&mut holder, "d", 1).await;
    assert_eq!(holder.int(&["RELEASE", "d", &t.to_string()]).await, 1);
    let granted = match next.read().await {
        Value::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    let info = holder.info("d").await.unwrap();
    assert_eq!(info.tokens(), vec![granted], "the lock went to the waiter that is still there");
    assert_eq!(info.waiters, 0);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_hands_the_lock_to_a_waiter_at_once() {
    let srv = start().await;
    let mut holder = srv.client().await;
    let t = holder.token(&["LEASE", "e", "150"]).await.unwrap();
    let granted_at = Instant::now();
    let mut w = srv.client().await;
    let next = w.token(&["LEASE", "e", "10000", "WAIT", "5000"]).await.unwrap();
    let waited = granted_at.elapsed();
    assert!(next > t);
    // hz-driven active expiry would take up to 100 ms more; the lock timer wakes at the deadline.
    assert!(waited >= Duration::from_millis(140) && waited < Duration::from_millis(230), "{waited:?}");
    // A semaphore slot that expires alone frees only itself and goes to the waiter.
    let s1 = holder.token(&["SEMAPHORE", "es", "2", "100"]).await.unwrap();
    let s2 = holder.token(&["SEMAPHORE", "es", "2", "10000"]).await.unwrap();
    let s3 = w.token(&["SEMAPHORE", "es", "2", "10000", "WAIT", "5000"]).await.unwrap();
    let mut tokens = holder.info("es").await.unwrap().tokens();
    tokens.sort();
    assert_eq!(tokens, vec![s2, s3]);
    assert!(s1 < s2 && s2 < s3);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_and_flush_of_a_held_lock_wake_a_waiter() {
    let srv = start().await;
    let mut admin = srv.client().await;
    let t = admin.token(&["LEASE", "stuck", "60000"]).await.unwrap();
    let mut w = srv.client().await;
    w.send(&["LEASE", "stuck", "60000", "WAIT", "5000"]).await;
    wait_for_waiters(&mut admin, "stuck", 1).await;
    assert_eq!(admin.int(&["DEL", "stuck"]).await, 1);
    let Value::Integer(t2) = w.read().await else { panic!("DEL should hand the lock over") };
    assert!(t2 > t);
    assert_eq!(admin.int(&["RELEASE", "stuck", &t.to_string()]).await, 0, "the broken holder cannot release");
    w.send(&["LEASE", "stuck", "60000", "WAIT", "5000"]).await;
    wait_for_waiters(&mut admin, "stuck", 1).await;
    assert_eq!(admin.cmd(&["FLUSHALL"]).await, Value::ok());
    let Value::Integer(t3) = w.read().await else { panic!("FLUSHALL should hand the lock over") };
    assert!(t3 > t2);
    admin.send(&["LEASE", "stuck", "60000", "WAIT", "5000"]).await;
    wait_for_waiters(&mut w, "stuck", 1).await;
    assert_eq!(w.int(&["UNLINK", "stuck"]).await, 1);
    assert!(matches!(admin.read().await, Value::Integer(t4) if t4 > t3));
    // SET never overwrites a lock (only DEL/UNLINK/FLUSH break one); the waiter keeps waiting and DEL serves it.
    w.send(&["LEASE", "stuck", "60000", "WAIT", "0"]).await;
    wait_for_waiters(&mut admin, "stuck", 1).await;
    assert_eq!(admin.cmd(&["SET", "stuck", "plain"]).await, Value::error("WRONGTYPE Operation against a key holding the wrong kind of value"));
    assert_eq!(admin.cmd(&["MSET", "other", "1", "stuck", "plain"]).await, Value::error("WRONGTYPE Operation against a key holding the wrong kind of value"));
    assert_eq!(admin.int(&["DEL", "stuck"]).await, 1);
    assert!(matches!(w.read().await, Value::Integer(_)), "DEL after a refused SET hands the lock over");
    srv.stop().await;
}

/// SWAPDB moves a held lock away from the index its waiter selected: the waiter is served at once (it stayed
/// blocked until an unrelated command ran), and the moved lease still ends on time in its new database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapdb_serves_waiters_and_moves_lock_deadlines() {
    let srv = start().await;
    let mut admin = srv.client().await;
    assert_eq!(admin.cmd(&["SELECT", "2"]).await, Value::ok());
    let t = admin.token(&["LEASE", "k", "1500"]).await.unwrap();
    let mut w = srv.client().await;
    assert_eq!(w.cmd(&["SELECT", "2"]).await, Value::ok());
    w.send(&["LEASE", "k", "60000", "WAIT", "0"]).await;
    wait_for_waiters(&mut admin, "k", 1).await;
    assert_eq!(admin.cmd(&["SWAPDB", "2", "3"]).await, Value::ok());
    let Value::Integer(t2) = w.read().await else { panic!("SWAPDB took the lock away: the waiter must be served") };
    assert!(t2 > t);
    // The old lease now lives in db 3 and still ends by its deadline (its timer entry followed it).
    assert_eq!(admin.cmd(&["SELECT", "3"]).await, Value::ok());
    assert!(matches!(admin.token(&["LEASE", "k", "100"]).await, None));
    let mut w3 = srv.client().await;
    assert_eq!(w3.cmd(&["SELECT", "3"]).await, Value::ok());
    w3.send(&["LEASE", "k", "60000", "WAIT", "10000"]).await;
    assert!(matches!(w3.read().await, Value::Integer(t3) if t3 > t2), "the moved lease never ended");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ifgt_rejects_a_lower_token_and_accepts_the_same_or_a_higher_one() {
    let srv = start().await;
    let mut c = srv.client().await;
    assert_eq!(c.int(&["IFGT", "row", "42", "v42"]).await, 1);
    assert_eq!(c.int(&["IFGT", "row", "41", "v41"]).await, 0);
    assert_eq!(c.cmd(&["GET", "row"]).await, Value::bulk_str("v42"));
    assert_eq!(c.int(&["IFGT", "row", "42", "v42b"]).await, 1, "the same holder may write again");
    assert_eq!(c.int(&["IFGT", "row", "43", "v43", "PX", "10000"]).await, 1);
    assert!(c.int(&["PTTL", "row"]).await > 9000);
    assert_eq!(c.cmd(&["GET", "row"]).await, Value::bulk_str("v43"));
    // The fence outlives the value: a stale writer cannot sneak in after a delete.
    assert_eq!(c.int(&["DEL", "row"]).await, 1);
    assert_eq!(c.int(&["IFGT", "row", "42", "late"]).await, 0);
    assert_eq!(c.cmd(&["GET", "row"]).await, Value::Nil);
    assert_eq!(c.int(&["IFGT", "row", "44", "v44", "PX", "30"]).await, 1);
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(c.cmd(&["GET", "row"]).await, Value::Nil);
    assert_eq!(c.int(&["IFGT", "row", "43", "late"]).await, 0, "the fence survives expiry too");
    // FLUSHALL forgets fences with the data.
    assert_eq!(c.cmd(&["FLUSHALL"]).await, Value::ok());
    assert_eq!(c.int(&["IFGT", "row", "1", "fresh"]).await, 1);
    // Real tokens from LEASE work as fences.
    let t = c.token(&["LEASE", "row-lock", "1000"]).await.unwrap();
    assert_eq!(c.int(&["IFGT", "row", &t.to_string(), "x"]).await, 1);
    assert_eq!(c.error(&["IFGT", "row-lock", &t.to_string(), "x"]).await, "WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(c.error(&["IFGT", "row", "0", "x"]).await, "ERR value is not an integer or out of range");
    assert_eq!(c.error(&["IFGT", "row", "5", "x", "PX", "0"]).await, "ERR invalid expire time in 'ifgt' command");
    assert_eq!(c.error(&["IFGT", "row", "5", "x", "EX", "1"]).await, "ERR syntax error");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_commands_inside_multi_exec_never_block() {
    let srv = start().await;
    let mut c = srv.client().await;
    let mut other = srv.client().await;
    let held = other.token(&["LEASE", "m:held", "10000"]).await.unwrap();
    assert_eq!(c.cmd(&["MULTI"]).await, Value::ok());
    for cmd in [
        vec!["LEASE", "m:a", "10000"],
        vec!["LEASE", "m:held", "10000", "WAIT", "0"],
        vec!["SEMAPHORE", "m:s", "2", "10000"],
        vec!["IFGT", "m:v", "7", "x"],
        vec!["LOCKINFO", "m:a"],
    ] {
        assert_eq!(c.cmd(&cmd).await, Value::simple("QUEUED"));
    }
    let start = Instant::now();
    let Value::Array(r) = c.cmd(&["EXEC"]).await else { panic!() };
    assert!(start.elapsed() < Duration::from_secs(1), "EXEC must not wait");
    let Value::Integer(ta) = r[0] else { panic!("{r:?}") };
    assert_eq!(r[1], Value::Nil, "a held lock answers nil inside EXEC instead of waiting");
    let Value::Integer(ts) = r[2] else { panic!("{r:?}") };
    assert_eq!(r[3], Value::Integer(1));
    assert_eq!(LockInfo::from_value(r[4].clone()).unwrap().tokens(), vec![ta]);
    assert!(ta > held && ts > ta);
    c.cmd(&["MULTI"]).await;
    c.cmd(&["RENEW", "m:a", &ta.to_string(), "20000"]).await;
    c.cmd(&["RELEASE", "m:s", &ts.to_string()]).await;
    c.cmd(&["RELEASE", "m:a", &ta.to_string()]).await;
    assert_eq!(c.cmd(&["EXEC"]).await, Value::Array(vec![Value::Integer(1), Value::Integer(1), Value::Integer(1)]));
    assert_eq!(c.info("m:a").await, None);
    assert_eq!(c.info("m:s").await, None);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_keys_and_other_commands() {
    let srv = start().await;
    let mut c = srv.client().await;
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    let t = c.token(&["LEASE", "l", "10000"]).await.unwrap();
    let s = c.token(&["SEMAPHORE", "s", "2", "10000"]).await.unwrap();
    assert_eq!(c.cmd(&["TYPE", "l"]).await, Value::simple("lease"));
    assert_eq!(c.cmd(&["TYPE", "s"]).await, Value::simple("semaphore"));
    for cmd in [
        vec!["GET", "l"],
        vec!["INCR", "l"],
        vec!["EXPIRE", "l", "100"],
        vec!["PERSIST", "l"],
        vec!["RENAME", "l", "l2"],
        vec!["GET", "s"],
        vec!["SEMAPHORE", "l", "2", "1000"],
        vec!["LEASE", "s", "1000"],
    ] {
        assert_eq!(c.error(&cmd).await, WRONGTYPE, "{cmd:?}");
    }
    c.cmd(&["SET", "str", "x"]).await;
    for cmd in [
        vec!["LEASE", "str", "1000"],
        vec!["SEMAPHORE", "str", "2", "1000"],
        vec!["RENEW", "str", "1", "1000"],
        vec!["RELEASE", "str", "1"],
        vec!["LOCKINFO", "str"],
    ] {
        assert_eq!(c.error(&cmd).await, WRONGTYPE, "{cmd:?}");
    }
    assert_eq!(
        c.error(&["SEMAPHORE", "s", "3", "1000"]).await,
        "ERR semaphore limit is 2, not 3; the limit can change only when the semaphore has no holders"
    );
    assert_eq!(c.int(&["RELEASE", "s", &s.to_string()]).await, 1);
    assert!(c.token(&["SEMAPHORE", "s", "3", "1000"]).await.is_some(), "a new limit once no holder is left");
    for bad in ["0", "-5", "abc", "1.5", "99999999999999999999"] {
        assert_eq!(c.error(&["RELEASE", "l", bad]).await, "ERR value is not an integer or out of range");
        assert_eq!(c.error(&["RENEW", "l", bad, "100"]).await, "ERR value is not an integer or out of range");
    }
    const BAD_TTL: &str = "ERR invalid ttl_ms: must be between 1 and 2592000000 (30 days)";
    assert_eq!(c.error(&["LEASE", "x", "0"]).await, BAD_TTL);
    assert_eq!(c.error(&["LEASE", "x", "2592000001"]).await, BAD_TTL);
    assert_eq!(c.error(&["RENEW", "l", &t.to_string(), "-1"]).await, BAD_TTL);
    assert_eq!(c.error(&["LEASE", "x", "ten"]).await, "ERR value is not an integer or out of range");
    assert_eq!(c.error(&["SEMAPHORE", "x", "0", "100"]).await, "ERR invalid limit: must be between 1 and 100000");
    assert_eq!(c.error(&["LEASE", "x"]).await, "ERR wrong number of arguments for 'lease' command");
    assert_eq!(c.cmd(&["LOCKINFO", "nothing"]).await, Value::Nil);
    // RESP3: LOCKINFO is a map, each holder a map.
    c.cmd(&["HELLO", "3"]).await;
    let v = c.cmd(&["LOCKINFO", "l"]).await;
    let Value::Map(m) = &v else { panic!("{v:?}") };
    assert_eq!(m.len(), 4);
    let i = LockInfo::from_value(v).unwrap();
    assert_eq!((i.kind.as_str(), i.limit, i.tokens(), i.waiters), ("lease", 1, vec![t], 0));
    assert!(i.holders[0].1 > 9000 && i.holders[0].1 <= 10000);
    let info = text(&c.cmd(&["INFO", "locks"]).await);
    for field in ["lock_lease_keys:1", "lock_semaphore_keys:1", "lock_holders:2", "lock_waiters:0"] {
        assert!(info.contains(field), "{field} in {info}");
    }
    srv.stop().await;
}

/// Every lock write reaches the write log as a deterministic record; replaying the records on a fresh server
/// through the normal command path rebuilds the same locks and fences, and the replayed server issues only larger
/// tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_the_write_log_rebuilds_lock_state() {
    // The append-only log would take the records this test reads; it stands in for the log's consumer instead.
    let a = start_with(data_dir("t"), false).await;
    // What persistence or replication turns on when they consume the log; this test reads the journal as a consumer.
    a.shared.store.lock().log_enabled = true;
    let cursor = a.shared.journal.subscribe(a.shared.journal.last_lsn() + 1, true).unwrap();
    let mut c = a.client().await;
    let l = c.token(&["LEASE", "r:lease", "30000"]).await.unwrap();
    c.int(&["RENEW", "r:lease", &l.to_string(), "40000"]).await;
    let s1 = c.token(&["SEMAPHORE", "r:sem", "3", "30000"]).await.unwrap();
    let s2 = c.token(&["SEMAPHORE", "r:sem", "3", "20000"]).await.unwrap();
    let s3 = c.token(&["SEMAPHORE", "r:sem", "3", "50"]).await.unwrap();
    c.int(&["RELEASE", "r:sem", &s1.to_string()]).await;
    let gone = c.token(&["LEASE", "r:gone", "30000"]).await.unwrap();
    c.int(&["RELEASE", "r:gone", &gone.to_string()]).await;
    c.int(&["IFGT", "r:row", "100", "hello", "PX", "30000"]).await;
    c.int(&["IFGT", "r:row", "99", "stale"]).await;
    c.token(&["LEASE", "r:short", "40"]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    // Let the lock timer remove the short lease and the expired slot (logged as DEL and LOCKDROP).
    assert_eq!(c.info("r:sem").await.unwrap().tokens(), vec![s2]);
    a.shared.commit_log(&mut a.shared.store.lock());
    let mut records: Vec<Vec<String>> = Vec::new();
    for seg in a.shared.journal.read(cursor).unwrap() {
        let mut at = 0;
        while at < seg.bytes.len() {
            let h = &seg.bytes[at..at + RECORD_HEADER_LEN];
            let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
            assert_eq!(u32::from_le_bytes(h[24..28].try_into().unwrap()), 0, "db");
            let args = decode_command(&seg.bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len]).unwrap();
            records.push(args.iter().map(|b| String::from_utf8(b.to_vec()).unwrap()).collect());
            at += RECORD_HEADER_LEN + len;
        }
    }
    let names: Vec<&str> = records.iter().map(|r| r[0].as_str()).collect();
    assert!(!names.iter().any(|n| ["LEASE", "RENEW", "RELEASE", "SEMAPHORE", "IFGT"].contains(n)), "{names:?}");
    assert!(names.contains(&"LOCKSET") && names.contains(&"LOCKDROP") && names.contains(&"FENCESET"));
    assert!(records.iter().any(|r| r[0] == "LOCKDROP" && r[2] == s3.to_string()), "expired slot logged: {records:?}");
    assert!(records.iter().any(|r| r[0] == "DEL" && r[1] == "r:short"), "expired lease logged: {records:?}");

    let b = start().await;
    let mut d = b.client().await;
    // Clients may not send internal records; a replayer (the loader's and, later, a replica's path) may.
    assert!(d.cmd(&["LOCKSET", "forged", "lease", "1", "999999999999", "0"]).await.is_error());
    let mut replayer = ruvio_server::dispatch::Replayer::new();
    for r in &records {
        let args: Vec<bytes::Bytes> = r.iter().map(|a| bytes::Bytes::from(a.clone())).collect();
        let mut guard = None;
        // Replayed right away, so "the instant it was logged" is now, give or take the test's own speed.
        let v = replayer.apply(&b.shared, &mut guard, 0, &args, ruvio_server::clock::wall_ms());
        assert!(!v.is_error(), "{r:?} -> {v:?}");
    }
    for key in ["r:lease", "r:sem", "r:gone", "r:short"] {
        let (x, y) = (c.info(key).await, d.info(key).await);
        assert_eq!(x.as_ref().map(|i| (&i.kind, i.limit, i.tokens())), y.as_ref().map(|i| (&i.kind, i.limit, i.tokens())), "{key}");
        if let (Some(x), Some(y)) = (x, y) {
            for (hx, hy) in x.holders.iter().zip(&y.holders) {
                assert!((hx.1 - hy.1).abs() < 200, "{key}: remaining {} vs {}", hx.1, hy.1);
            }
        }
    }
    assert_eq!(d.cmd(&["GET", "r:row"]).await, Value::bulk_str("hello"));
    assert_eq!(d.int(&["IFGT", "r:row", "99", "stale"]).await, 0, "the fence was replayed");
    let next = d.token(&["LEASE", "r:new", "1000"]).await.unwrap();
    assert!(next > s3, "the replayed server never issues a lower token");
    a.stop().await;
    b.stop().await;
}

/// The one execution path decides its gates by caller: a client that has not authenticated, or that sends an
/// internal record, is refused; the replay path (the loader, a replica's stream) runs both. MULTI queueing is the
/// same for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_path_applies_gates_by_caller() {
    use ruvio_server::client::{ClientInfo, ClientState};
    use ruvio_server::dispatch::{execute, Caller, Replayer};
    let srv = start().await;
    let args = |a: &[&str]| a.iter().map(|s| bytes::Bytes::from(s.to_string())).collect::<Vec<_>>();
    let now = ruvio_server::clock::mono_ms();
    let mut stranger = ClientState::new(Arc::new(ClientInfo::new(999_999, "test".into(), String::new())), false);
    let mut guard = None;
    let (reply, _) = execute(Caller::Client, now, &srv.shared, &mut stranger, &args(&["SET", "g", "1"]), &mut guard);
    assert_eq!(reply, Value::error("NOAUTH Authentication required."));
    let mut member = ClientState::new(Arc::new(ClientInfo::new(999_998, "test".into(), String::new())), true);
    let forged = args(&["LOCKSET", "g:lock", "lease", "1", "999999999999", "0"]);
    let (reply, _) = execute(Caller::Client, now, &srv.shared, &mut member, &forged, &mut guard);
    assert!(reply.is_error(), "a client forged an internal record: {reply:?}");
    drop(guard);

    let mut replayer = Replayer::new();
    let mut guard = None;
    let wall = ruvio_server::clock::wall_ms();
    let far = (wall + 600_000).to_string();
    let record = args(&["LOCKSET", "g:lock", "lease", "1", "999999999999", &far]);
    assert_eq!(replayer.apply(&srv.shared, &mut guard, 0, &record, wall), Value::ok());
    assert_eq!(replayer.apply(&srv.shared, &mut guard, 0, &args(&["MULTI"]), wall), Value::ok());
    assert_eq!(replayer.apply(&srv.shared, &mut guard, 0, &args(&["SET", "g", "2"]), wall), Value::simple("QUEUED"));
    assert!(replayer.abandon_transaction(), "the open MULTI is dropped");
    drop(guard);
    let mut c = srv.client().await;
    assert_eq!(c.token(&["LEASE", "g:lock", "1000"]).await, None, "the replayed lease holds the lock");
    assert_eq!(c.cmd(&["GET", "g"]).await, Value::Nil, "the abandoned transaction never ran");
    srv.stop().await;
}
