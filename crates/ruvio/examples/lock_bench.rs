//! Lock throughput: C clients each loop "acquire, release" for D seconds and the total rate is printed.
//!
//!     lock_bench ruvio PORT CLIENTS SECONDS   # LEASE key ttl -> token; RELEASE key token
//!     lock_bench redis PORT CLIENTS SECONDS   # SET key rand NX PX ttl; EVAL compare-and-delete (the Redis idiom)
//!
//! Used by bench/persistence.sh; each client uses its own keys so no acquire waits.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};

const RELEASE_LUA: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct Conn {
    s: TcpStream,
    buf: BytesMut,
}

impl Conn {
    fn cmd(&mut self, args: &[&str]) -> Value {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.s.write_all(&out).unwrap();
        loop {
            if let Some((v, n)) = decode_value(&self.buf, DecodeLimits::default()).unwrap() {
                let _ = self.buf.split_to(n);
                return v;
            }
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (kind, port, clients, secs) = (args[1].clone(), args[2].parse::<u16>().unwrap(), args[3].parse::<usize>().unwrap(), args[4].parse::<u64>().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let (kind, stop, done) = (kind.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_nodelay(true).unwrap();
                let mut c = Conn { s, buf: BytesMut::new() };
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("lockbench:{t}:{}", i % 1000);
                    if kind == "ruvio" {
                        let Value::Integer(token) = c.cmd(&["LEASE", &key, "30000"]) else { panic!("LEASE failed") };
                        let r = c.cmd(&["RELEASE", &key, &token.to_string()]);
                        assert_eq!(r, Value::Integer(1));
                    } else {
                        let me = format!("{t}-{i}");
                        assert!(!c.cmd(&["SET", &key, &me, "NX", "PX", "30000"]).is_nil());
                        let r = c.cmd(&["EVAL", RELEASE_LUA, "1", &key, &me]);
                        assert_eq!(r, Value::Integer(1));
                    }
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let n = done.load(Ordering::Relaxed);
    let rate = n as f64 / start.elapsed().as_secs_f64();
    threads.into_iter().for_each(|t| t.join().unwrap());
    println!("{rate:.0}");
}
