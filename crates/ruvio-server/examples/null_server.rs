//! A server that does no work: one thread, one epoll loop (level-triggered, like Redis's), Ruvio's request parser,
//! and a canned reply per command (`+PONG` for PING, `+OK` for SET and MSET; `:1` for INCR, LEASE, RELEASE and
//! EVALSHA, enough for the lock-cycle driver; a 3-byte bulk for anything else). Used by bench/p1_ceiling.sh to measure the most any
//! server could serve with one request in flight per client on this machine, with the load generator on the same
//! cores: a ceiling for the request path, not a competitor.
//!
//! Usage: null_server PORT

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use bytes::BytesMut;
use ruvio_protocol::{RequestLimits, RequestParser};

struct Client {
    stream: TcpStream,
    inbuf: BytesMut,
    parser: RequestParser,
    out: Vec<u8>,
}

fn epoll_add(epfd: i32, fd: i32) {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
    // SAFETY: epfd and fd are open descriptors owned by this process; ev outlives the call.
    let rc = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    assert_eq!(rc, 0, "epoll_ctl");
}

fn reply_for(name: &[u8]) -> &'static [u8] {
    if name.eq_ignore_ascii_case(b"ping") {
        b"+PONG\r\n"
    } else if name.eq_ignore_ascii_case(b"set") || name.eq_ignore_ascii_case(b"mset") {
        b"+OK\r\n"
    } else if [&b"incr"[..], b"lease", b"release", b"evalsha"].iter().any(|n| name.eq_ignore_ascii_case(n)) {
        b":1\r\n"
    } else {
        b"$3\r\nxxx\r\n"
    }
}

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).expect("usage: null_server PORT");
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    listener.set_nonblocking(true).unwrap();
    // SAFETY: plain syscall; the descriptor is checked below.
    let epfd = unsafe { libc::epoll_create1(0) };
    assert!(epfd >= 0, "epoll_create1");
    let lfd = listener.as_raw_fd();
    epoll_add(epfd, lfd);
    let limits = RequestLimits::default();
    let mut clients: HashMap<i32, Client> = HashMap::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // SAFETY: `events` has room for the 256 entries epoll_wait may fill.
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            continue; // EINTR
        }
        for ev in &events[..n as usize] {
            let fd = ev.u64 as i32;
            if fd == lfd {
                while let Ok((stream, _)) = listener.accept() {
                    stream.set_nonblocking(true).unwrap();
                    stream.set_nodelay(true).unwrap();
                    let cfd = stream.as_raw_fd();
                    epoll_add(epfd, cfd);
                    clients.insert(cfd, Client { stream, inbuf: BytesMut::new(), parser: RequestParser::new(), out: Vec::new() });
                }
                continue;
            }
            let Some(c) = clients.get_mut(&fd) else { continue };
            let closed = match c.stream.read(&mut chunk) {
                Ok(0) => true,
                Ok(k) => {
                    c.inbuf.extend_from_slice(&chunk[..k]);
                    let mut bad = false;
                    loop {
                        match c.parser.parse(&mut c.inbuf, &limits) {
                            Ok(Some(args)) => c.out.extend_from_slice(reply_for(&args[0])),
                            Ok(None) => break,
                            Err(_) => {
                                bad = true;
                                break;
                            }
                        }
                    }
                    // Replies are a few bytes and the socket buffer is empty: one write takes them all.
                    bad || c.stream.write_all(&c.out).is_err() || {
                        c.out.clear();
                        false
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => false,
                Err(_) => true,
            };
            if closed {
                clients.remove(&fd); // closing the socket also takes it out of the epoll set
            }
        }
    }
}
