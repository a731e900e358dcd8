//! The product post's LEASE example, verbatim. Needs a Ruvio server on 127.0.0.1:6379.

// `released` is only read by the post's comment.
#[allow(unused_variables)]
fn main() -> Result<(), ruvio_client::Error> {
    use ruvio_client::Client;

    let mut db = Client::connect("127.0.0.1", 6379)?;
    let token = db.lease("job:nightly-report", 30_000)?;
    // Some(token) -> you hold it
    // None     -> someone else holds it
    if let Some(token) = token {
        let released = db.release("job:nightly-report", token as u64)?;
        // 1 -> released (0 if the token no longer matches)
    }
    Ok(())
}
