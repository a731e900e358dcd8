//! Load driver for bench/collections.sh: the sorted-set sliding-window rate limiter. N clients each, for a fixed time,
//! pick a user at random and send one transaction, as an application checks a request against its window:
//!
//!   MULTI; ZADD rl:<user> <now µs> <now µs>-<client>-<n>; ZREMRANGEBYSCORE rl:<user> -inf <now µs - window>;
//!   ZCARD rl:<user>; EXEC
//!
//! written at once (one round trip per check, the usual client pipelining of a transaction). Every reply is checked
//! (QUEUED x3 and an EXEC array of three). Reports checks per second and latency percentiles. The same bytes go to
//! Ruvio and to redis-server.
//!
//! Usage: rate_limiter --port P [--clients 50] [--users 1000] [--seconds 10] [--window-ms 1000]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone)]
struct Opts {
    port: u16,
    clients: usize,
    users: u64,
    seconds: u64,
    window_ms: u64,
}

fn parse() -> Opts {
    let mut o = Opts { port: 6379, clients: 50, users: 1000, seconds: 10, window_ms: 1000 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let v = pair.get(1).expect("every option takes a value");
        match pair[0].as_str() {
            "--port" => o.port = v.parse().unwrap(),
            "--clients" => o.clients = v.parse().unwrap(),
            "--users" => o.users = v.parse().unwrap(),
            "--seconds" => o.seconds = v.parse().unwrap(),
            "--window-ms" => o.window_ms = v.parse().unwrap(),
            other => panic!("unknown option {other}"),
        }
    }
    o
}

async fn worker(o: Opts, id: usize, end: Instant) -> Vec<u32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(id as u64);
    let mut stream = TcpStream::connect(("127.0.0.1", o.port)).await.expect("connect");
    stream.set_nodelay(true).unwrap();
    let (mut buf, mut out) = (BytesMut::with_capacity(4096), BytesMut::with_capacity(512));
    let mut lat = Vec::with_capacity(100_000);
    let mut n: u64 = 0;
    while Instant::now() < end {
        n += 1;
        let key = format!("rl:{}", rng.gen_range(0..o.users));
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
        let (score, member, cutoff) = (now_us.to_string(), format!("{now_us}-{id}-{n}"), (now_us - o.window_ms * 1000).to_string());
        out.clear();
        encode_command(&[&b"MULTI"[..]], &mut out);
        encode_command(&[b"ZADD", key.as_bytes(), score.as_bytes(), member.as_bytes()], &mut out);
        encode_command(&[b"ZREMRANGEBYSCORE", key.as_bytes(), b"-inf", cutoff.as_bytes()], &mut out);
        encode_command(&[b"ZCARD", key.as_bytes()], &mut out);
        encode_command(&[&b"EXEC"[..]], &mut out);
        let start = Instant::now();
        stream.write_all(&out).await.expect("write");
        let mut replies = Vec::with_capacity(5);
        while replies.len() < 5 {
            if let Some((v, used)) = decode_value(&buf, DecodeLimits::default()).expect("valid RESP") {
                let _ = buf.split_to(used);
                replies.push(v);
                continue;
            }
            let got = stream.read_buf(&mut buf).await.expect("read");
            assert!(got > 0, "server closed the connection");
        }
        match &replies[4] {
            Value::Array(r) if r.len() == 3 && matches!(r[2], Value::Integer(c) if c >= 1) => {}
            other => panic!("EXEC answered {other:?} (replies {replies:?})"),
        }
        lat.push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    lat
}

fn main() {
    let o = parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let end = start + Duration::from_secs(o.seconds);
        let tasks: Vec<_> = (0..o.clients).map(|i| tokio::spawn(worker(o.clone(), i, end))).collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let elapsed = start.elapsed().as_secs_f64();
        all.sort_unstable();
        let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
        println!("checks={} checks_per_sec={:.0} p50_us={} p99_us={}", all.len(), all.len() as f64 / elapsed, pct(0.50), pct(0.99));
    });
}
