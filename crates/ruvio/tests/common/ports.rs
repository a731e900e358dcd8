//! Loopback ports for test servers; also used by crates/ruvio-client/tests (included by path).

/// A loopback port that no other call in this test process returned. The kernel may give the port of a socket just
/// closed to the next `bind(0)`: three calls in a row once gave two replicas of one test the same port, and the
/// second failed to bind while the first answered for both.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
    panic!("no loopback port this process has not used in 1000 tries");
}
