//! Worst-case latency seen by a client: one connection sends `SET probe:N x` in a loop for SECONDS and prints
//! "max_ms p99_ms over_50ms count". bench/restart.sh runs it while a rewrite of 1M keys is in progress.
//!
//!     latency_probe PORT SECONDS

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args[1].parse().unwrap();
    let secs: u64 = args[2].parse().unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 256];
    let mut i = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        let key = format!("probe:{}", i % 1000);
        let cmd = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nx\r\n", key.len());
        let t = Instant::now();
        s.write_all(cmd.as_bytes()).unwrap();
        // The reply is "+OK\r\n" (or an error line): read until the line ends.
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        i += 1;
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let max = lat.last().copied().unwrap_or(0.0);
    let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
    let over = lat.iter().filter(|l| **l > 50.0).count();
    println!("{max:.1} {p99:.2} {over} {}", lat.len());
}
