//! Load driver for bench/lock_cycle.sh: N clients each run acquire + release cycles on random keys for a fixed
//! time, one request in flight per client (the way a worker uses a lock), and report cycles per second and cycle
//! latency percentiles.
//!
//! `--mode ruvio`: `LEASE key ttl` then, when granted, `RELEASE key token`.
//! `--mode redis`: `SET key token NX PX ttl` then, when set, `EVALSHA <compare-and-delete> 1 key token`.
//!
//! `--durable N` (bench/replication.sh): Ruvio connections send `CLIENT DURABILITY REPLICAS N` first, so both the
//! grant and the release are answered once N replicas fsynced them; Redis connections send `WAIT N 0` after the SET
//! and after the compare-and-delete (the closest Redis 7.0 has: replicas received it, not fsynced).
//!
//! Usage: lock_cycle --port P --mode ruvio|redis [--clients 50] [--keys 10000] [--seconds 10] [--ttl 10000] [--durable 0]

use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `--tls-dir DIR` (bench/tls.sh): connect over TLS trusting DIR/ca.crt and presenting DIR/client.crt.
fn tls_config(dir: &str) -> std::sync::Arc<ruvio_tls::rustls::ClientConfig> {
    let files = ruvio_tls::ClientFiles {
        ca_cert_file: format!("{dir}/ca.crt"),
        cert_file: format!("{dir}/client.crt"),
        key_file: format!("{dir}/client.key"),
        verify_hostname: true,
        ..Default::default()
    };
    ruvio_tls::client_config(&files).expect("TLS files")
}

const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct Conn {
    stream: ruvio_tls::Stream,
    buf: BytesMut,
    out: BytesMut,
}

impl Conn {
    async fn connect(port: u16, tls: Option<std::sync::Arc<ruvio_tls::rustls::ClientConfig>>) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        let stream = match tls {
            Some(config) => ruvio_tls::connect(config, "127.0.0.1", stream, std::time::Duration::from_secs(10)).await.expect("TLS handshake"),
            None => ruvio_tls::Stream::Plain(stream),
        };
        Conn { stream, buf: BytesMut::with_capacity(4096), out: BytesMut::with_capacity(256) }
    }

    async fn cmd(&mut self, args: &[&[u8]]) -> Value {
        self.out.clear();
        encode_command(args, &mut self.out);
        self.stream.write_all(&self.out).await.expect("write");
        self.stream.flush().await.expect("write");
        loop {
            if let Some((v, used)) = decode_value(&self.buf, DecodeLimits::default()).expect("valid RESP") {
                let _ = self.buf.split_to(used);
                return v;
            }
            let n = self.stream.read_buf(&mut self.buf).await.expect("read");
            assert!(n > 0, "server closed the connection");
        }
    }
}

#[derive(Clone)]
struct Opts {
    port: u16,
    redis: bool,
    clients: usize,
    keys: u64,
    seconds: u64,
    ttl: u64,
    durable: u64,
    tls_dir: Option<String>,
}

fn parse() -> Opts {
    let mut o = Opts { port: 6379, redis: false, clients: 50, keys: 10_000, seconds: 10, ttl: 10_000, durable: 0, tls_dir: None };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let v = pair.get(1).expect("every option takes a value");
        match pair[0].as_str() {
            "--port" => o.port = v.parse().unwrap(),
            "--mode" => o.redis = v == "redis",
            "--clients" => o.clients = v.parse().unwrap(),
            "--keys" => o.keys = v.parse().unwrap(),
            "--seconds" => o.seconds = v.parse().unwrap(),
            "--ttl" => o.ttl = v.parse().unwrap(),
            "--durable" => o.durable = v.parse().unwrap(),
            "--tls-dir" => o.tls_dir = Some(v.clone()),
            other => panic!("unknown option {other}"),
        }
    }
    o
}

/// One client: cycles until `end`; returns (latencies in µs of completed cycles, acquire attempts refused).
async fn worker(o: Opts, id: usize, sha: String, end: Instant) -> (Vec<u32>, u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(id as u64);
    let mut c = Conn::connect(o.port, o.tls_dir.as_deref().map(tls_config)).await;
    let ttl = o.ttl.to_string();
    let durable = o.durable.to_string();
    if o.durable > 0 && !o.redis {
        let r = c.cmd(&[b"CLIENT", b"DURABILITY", b"REPLICAS", durable.as_bytes()]).await;
        assert!(matches!(r, Value::Simple(_)), "CLIENT DURABILITY answered {r:?}");
    }
    let mut lat = Vec::with_capacity(200_000);
    let mut refused = 0;
    let mut n: u64 = 0;
    while Instant::now() < end {
        let key = format!("lock:{}", rng.gen_range(0..o.keys));
        let start = Instant::now();
        if o.redis {
            n += 1;
            let token = format!("{id}-{n}");
            match c.cmd(&[b"SET", key.as_bytes(), token.as_bytes(), b"NX", b"PX", ttl.as_bytes()]).await {
                Value::Simple(_) => {
                    if o.durable > 0 {
                        let w = c.cmd(&[b"WAIT", durable.as_bytes(), b"0"]).await;
                        assert!(matches!(w, Value::Integer(n) if n as u64 >= o.durable), "WAIT answered {w:?}");
                    }
                    let r = c.cmd(&[b"EVALSHA", sha.as_bytes(), b"1", key.as_bytes(), token.as_bytes()]).await;
                    assert_eq!(r, Value::Integer(1), "compare-and-delete");
                    if o.durable > 0 {
                        c.cmd(&[b"WAIT", durable.as_bytes(), b"0"]).await;
                    }
                }
                Value::Nil => refused += 1,
                other => panic!("SET answered {other:?}"),
            }
        } else {
            match c.cmd(&[b"LEASE", key.as_bytes(), ttl.as_bytes()]).await {
                Value::Integer(token) => {
                    let r = c.cmd(&[b"RELEASE", key.as_bytes(), token.to_string().as_bytes()]).await;
                    assert_eq!(r, Value::Integer(1), "release");
                }
                Value::Nil => refused += 1,
                other => panic!("LEASE answered {other:?}"),
            }
        }
        lat.push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    (lat, refused)
}

fn main() {
    let o = parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let sha = if o.redis {
            let mut c = Conn::connect(o.port, o.tls_dir.as_deref().map(tls_config)).await;
            let v = c.cmd(&[b"SCRIPT", b"LOAD", COMPARE_AND_DELETE.as_bytes()]).await;
            String::from_utf8(v.as_bytes().expect("a SHA").to_vec()).unwrap()
        } else {
            String::new()
        };
        let start = Instant::now();
        let end = start + Duration::from_secs(o.seconds);
        let tasks: Vec<_> = (0..o.clients).map(|i| tokio::spawn(worker(o.clone(), i, sha.clone(), end))).collect();
        let mut all = Vec::new();
        let mut refused = 0;
        for t in tasks {
            let (lat, r) = t.await.unwrap();
            all.extend(lat);
            refused += r;
        }
        let elapsed = start.elapsed().as_secs_f64();
        all.sort_unstable();
        let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
        println!(
            "cycles={} cycles_per_sec={:.0} refused={} p50_us={} p99_us={} p999_us={}",
            all.len(),
            all.len() as f64 / elapsed,
            refused,
            pct(0.50),
            pct(0.99),
            pct(0.999)
        );
    });
}
