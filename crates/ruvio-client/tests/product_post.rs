//! The Rust snippets of the product post "A lock is not enough: fencing tokens with LEASE", run against a real
//! server. Each snippet is copied verbatim except for the port (the test server's instead of 6379); the lines
//! after it check that it behaved as its comments say. (`examples/lease.rs` and `examples/semaphore.rs` hold
//! the untouched snippets, compiled by `cargo test`.)

mod common;

use common::Server;
use ruvio_client::Client;

#[test]
#[allow(unused_variables)] // `released` is only read by the post's comment
fn lease_snippet() -> Result<(), ruvio_client::Error> {
    let server = Server::start();
    let port = server.port;
    let mut rival = server.client();

    // ---- verbatim, port aside ----
    let mut db = Client::connect("127.0.0.1", port)?;
    let token = db.lease("job:nightly-report", 30_000)?;
    // Some(token) -> you hold it
    // None     -> someone else holds it
    if let Some(token) = token {
        let released = db.release("job:nightly-report", token as u64)?;
        // 1 -> released (0 if the token no longer matches)
    }
    // ---- end of snippet ----
    let token = token.expect("the lock was free, so the snippet held it");
    assert_eq!(db.lock_info("job:nightly-report")?, None, "the snippet released it");
    assert_eq!(db.release("job:nightly-report", token as u64)?, 0, "0 if the token no longer matches");

    // The same steps with their answers checked: held -> Some, held by someone else -> None, release -> 1.
    let theirs = rival.lease("job:nightly-report", 30_000)?.expect("free again");
    assert!(theirs > token, "tokens only grow");
    assert_eq!(db.lease("job:nightly-report", 30_000)?, None, "someone else holds it");
    assert_eq!(db.release("job:nightly-report", theirs as u64 + 1)?, 0, "a token that does not match");
    assert_eq!(rival.renew("job:nightly-report", theirs, 30_000)?, 1, "RENEW moves the holder's deadline");
    assert_eq!(rival.release("job:nightly-report", theirs as u64)?, 1, "released");
    Ok(())
}

#[test]
fn semaphore_snippet() -> Result<(), ruvio_client::Error> {
    let server = Server::start();
    let port = server.port;
    let mut others = server.client();

    // ---- verbatim, port aside ----
    let mut db = Client::connect("127.0.0.1", port)?;
    let token = db.semaphore("upstream:billing", 8, 15_000)?;
    // Some(1700000000123) -> a slot, this is your token
    // None                -> all 8 slots are taken
    if let Some(token) = token {
        db.release("upstream:billing", token as u64)?;
    }
    // ---- end of snippet ----
    assert!(token.is_some_and(|t| t > 0));
    assert_eq!(db.lock_info("upstream:billing")?, None, "the key goes away when the last holder leaves");

    // All 8 slots taken: None.
    let held: Vec<i64> = (0..8).map(|_| others.semaphore("upstream:billing", 8, 15_000).map(Option::unwrap)).collect::<Result<_, _>>()?;
    assert!(held.windows(2).all(|w| w[1] > w[0]), "tokens only grow: {held:?}");
    assert_eq!(db.semaphore("upstream:billing", 8, 15_000)?, None);
    for t in held {
        assert_eq!(others.release("upstream:billing", t)?, 1);
    }
    Ok(())
}

/// README.md's first example is a whole program; its body is, line for line, the snippet `lease_snippet` runs above
/// (port aside), so the example a reader pastes is code this suite runs against a real server (and the doctest
/// compiles the README's text as written: no hidden `# ` lines).
#[test]
fn readme_first_example_is_the_snippet_lease_snippet_runs() {
    let readme = include_str!("../README.md");
    let block = readme.split("```rust").nth(1).expect("README.md has a rust example");
    let block = &block[block.find('\n').unwrap() + 1..block.find("```").unwrap()];
    assert!(!block.lines().any(|l| l.starts_with("# ")), "no rustdoc hidden lines in the README's text");
    let body = block
        .split_once("fn main() -> Result<(), ruvio_client::Error> {\n")
        .and_then(|(_, rest)| rest.split_once("    Ok(())\n}"))
        .expect("the first example is a whole `fn main`")
        .0;
    let source = include_str!("product_post.rs");
    let snippet = source
        .split_once("fn lease_snippet()")
        .and_then(|(_, rest)| rest.split_once("    // ---- verbatim, port aside ----\n"))
        .and_then(|(_, rest)| rest.split_once("    // ---- end of snippet ----"))
        .expect("lease_snippet's markers")
        .0;
    assert_eq!(body.replace("6379", "port"), snippet);
}
