//! Finds the primary through `ruvio coordinator`s (the Sentinel protocol) and keeps taking durable leases across a
//! failover. Start a primary, two replicas and three coordinators as in docs/coordinator.md ("Set-up"), then
//! `cargo run -p ruvio-client --example failover` and `kill -9` the primary while it runs.

use std::time::Duration;

use ruvio_client::ClientBuilder;

fn main() -> Result<(), ruvio_client::Error> {
    let coordinators = [("127.0.0.1", 26379), ("127.0.0.1", 26380), ("127.0.0.1", 26381)];
    let mut db = ClientBuilder::sentinel(coordinators, "mymaster")
        .durability_replicas(1) // each grant is answered once a replica has it on disk: a failover keeps it
        .connect_timeout(Duration::from_secs(10)) // long enough to ride out a failover
        .connect()?;
    for i in 0..60 {
        let key = format!("job:{i}");
        match db.lease(&key, 30_000) {
            Ok(Some(token)) => println!("{key}: granted, token {token}"),
            Ok(None) => println!("{key}: held by someone else"),
            // Sent, then the connection failed: the grant may or may not have happened. Never sent again by the
            // client; here we move on (the lock frees itself at the end of its TTL if it was granted).
            Err(e) if e.is_io_error() => println!("{key}: unknown outcome ({e}); the next call finds the primary again"),
            Err(e) => println!("{key}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}
