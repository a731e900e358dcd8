//! The product post's SEMAPHORE example, verbatim. Needs a Ruvio server on 127.0.0.1:6379.

fn main() -> Result<(), ruvio_client::Error> {
    use ruvio_client::Client;

    let mut db = Client::connect("127.0.0.1", 6379)?;
    let token = db.semaphore("upstream:billing", 8, 15_000)?;
    // Some(1700000000123) -> a slot, this is your token
    // None                -> all 8 slots are taken
    if let Some(token) = token {
        db.release("upstream:billing", token as u64)?;
    }
    Ok(())
}
