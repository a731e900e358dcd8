//! Talking to a data node (Ruvio or redis-server) or another coordinator: a small async RESP connection, and the
//! parsed form of `INFO replication`.

use std::time::Duration;

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};
use ruvio_tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Conn {
    stream: Stream,
    buf: BytesMut,
}

/// With `tls-replication yes`, every connection this coordinator opens (to nodes and to the other coordinators)
/// is TLS with this configuration. Set once at start-up: one coordinator per process.
static TLS_CLIENT: std::sync::OnceLock<std::sync::Arc<ruvio_tls::rustls::ClientConfig>> = std::sync::OnceLock::new();

/// Makes every later [`Conn::connect`] use TLS (`tls-replication yes`).
pub fn use_tls(config: std::sync::Arc<ruvio_tls::rustls::ClientConfig>) {
    let _ = TLS_CLIENT.set(config);
}

fn timeout_err(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{what} timed out"))
}

impl Conn {
    /// Connects and, when `auth` is set (an optional ACL user name and a password), authenticates.
    pub async fn connect(addr: &str, auth: Option<(Option<&str>, &str)>, limit: Duration) -> std::io::Result<Conn> {
        let started = std::time::Instant::now();
        let tcp = tokio::time::timeout(limit, TcpStream::connect(addr)).await.map_err(|_| timeout_err("connect"))??;
        tcp.set_nodelay(true)?;
        let stream = match TLS_CLIENT.get() {
            Some(config) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                let left = limit.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
                ruvio_tls::connect(config.clone(), host, tcp, left).await.map_err(|e| std::io::Error::new(e.kind(), format!("TLS handshake with {addr}: {e}")))?
            }
            None => Stream::Plain(tcp),
        };
        let mut c = Conn { stream, buf: BytesMut::new() };
        if let Some((user, pass)) = auth {
            let v = match user {
                Some(u) => c.cmd(&["AUTH", u, pass], limit).await?,
                None => c.cmd(&["AUTH", pass], limit).await?,
            };
            if v.is_error() {
                return Err(std::io::Error::other(format!("AUTH refused by {addr}: {}", text(&v))));
            }
        }
        Ok(c)
    }

    pub async fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A], limit: Duration) -> std::io::Result<Value> {
        tokio::time::timeout(limit, self.cmd_inner(args)).await.map_err(|_| timeout_err("reply"))?
    }

    async fn cmd_inner<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<Value> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out).await?;
        self.stream.flush().await?;
        loop {
            let limits = DecodeLimits::default();
            if let Some((v, n)) = decode_value(&self.buf, limits).map_err(|e| std::io::Error::other(e.to_string()))? {
                let _ = self.buf.split_to(n);
                return Ok(v);
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(64 * 1024);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// A reply's text (string-like values; errors included).
pub fn text(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => other.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default(),
    }
}

/// One `slaveN:` line of a primary's INFO replication.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlaveLine {
    pub ip: String,
    pub port: u16,
    pub state: String,
    pub offset: u64,
    pub lag: u64,
    pub fsynced_lsn: Option<u64>,
}

impl SlaveLine {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// Ruvio's own INFO replication fields (absent on redis-server).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RuvioFields {
    pub epoch: u64,
    pub promised_epoch: u64,
    pub lsn: u64,
    pub fsynced_lsn: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplInfo {
    pub is_master: bool,
    pub run_id: String,
    pub master_host: String,
    pub master_port: u16,
    pub link_up: bool,
    /// master_repl_offset on a primary, slave_repl_offset on a replica.
    pub offset: u64,
    pub slave_priority: u64,
    /// A replica in the middle of a full sync (its data set is not usable).
    pub sync_in_progress: bool,
    /// Seconds since the replica's link went down (None: link up, or not reported); -1 = never up.
    pub link_down_since_secs: Option<i64>,
    pub slaves: Vec<SlaveLine>,
    pub ruvio: Option<RuvioFields>,
}

impl ReplInfo {
    pub fn master_addr(&self) -> String {
        format!("{}:{}", self.master_host, self.master_port)
    }
}

/// Parses `INFO` text (any sections; replication and server fields are read).
pub fn parse_info(t: &str) -> ReplInfo {
    let mut r = ReplInfo { slave_priority: 100, ..Default::default() };
    let mut ruvio = RuvioFields::default();
    let mut is_ruvio = false;
    let mut master_offset = 0;
    let mut slave_offset = None;
    for line in t.lines() {
        let Some((k, v)) = line.trim_end().split_once(':') else { continue };
        let num = || v.parse::<u64>().unwrap_or(0);
        match k {
            "role" => r.is_master = v == "master",
            "run_id" => r.run_id = v.to_string(),
            "master_host" => r.master_host = v.to_string(),
            "master_port" => r.master_port = v.parse().unwrap_or(0),
            "master_link_status" => r.link_up = v == "up",
            "master_repl_offset" => master_offset = num(),
            "slave_repl_offset" => slave_offset = Some(num()),
            "slave_priority" | "replica_priority" => r.slave_priority = num(),
            "master_sync_in_progress" => r.sync_in_progress = v == "1",
            "master_link_down_since_seconds" => r.link_down_since_secs = v.parse().ok(),
            "ruvio_epoch" => {
                is_ruvio = true;
                ruvio.epoch = num();
            }
            "ruvio_promised_epoch" => ruvio.promised_epoch = num(),
            "ruvio_lsn" => ruvio.lsn = num(),
            "ruvio_fsynced_lsn" => ruvio.fsynced_lsn = num(),
            k if k.starts_with("slave") && k[5..].chars().all(|c| c.is_ascii_digit()) && k.len() > 5 => {
                let mut s = SlaveLine::default();
                for kv in v.split(',') {
                    let Some((a, b)) = kv.split_once('=') else { continue };
                    match a {
                        "ip" => s.ip = b.to_string(),
                        "port" => s.port = b.parse().unwrap_or(0),
                        "state" => s.state = b.to_string(),
                        "offset" => s.offset = b.parse().unwrap_or(0),
                        "lag" => s.lag = b.parse().unwrap_or(0),
                        "fsynced_lsn" => s.fsynced_lsn = b.parse().ok(),
                        _ => {}
                    }
                }
                if s.port != 0 {
                    r.slaves.push(s);
                }
            }
            _ => {}
        }
    }
    r.offset = if r.is_master { master_offset } else { slave_offset.unwrap_or(master_offset) };
    if is_ruvio {
        r.ruvio = Some(ruvio);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_and_ruvio_fields() {
        let p = parse_info("# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0,fsynced_lsn=40\r\nmaster_repl_offset:42\r\nruvio_epoch:3\r\nruvio_fsynced_lsn:41\r\n");
        assert!(p.is_master);
        assert_eq!(p.offset, 42);
        assert_eq!(p.slaves[0].addr(), "127.0.0.1:7001");
        assert_eq!(p.slaves[0].fsynced_lsn, Some(40));
        assert_eq!(p.ruvio.unwrap().epoch, 3);
        let s = parse_info("role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\nmaster_link_status:up\r\nslave_repl_offset:17\r\nmaster_repl_offset:17\r\n");
        assert!(!s.is_master && s.link_up && s.offset == 17 && s.ruvio.is_none());
        assert_eq!(s.master_addr(), "127.0.0.1:7000");
    }
}
