//! A long job under a renewing lock guard, fencing each write with the token and stopping if the lock is
//! lost. Needs a Ruvio server on 127.0.0.1:6379.

use std::thread;
use std::time::Duration;

use ruvio_client::{Client, LockOptions};

fn main() -> Result<(), ruvio_client::Error> {
    let mut db = Client::connect("127.0.0.1", 6379)?;
    let options = LockOptions::new(Duration::from_secs(3)) // short TTL: the guard renews about every second
        .wait(Duration::from_secs(5))
        .max_hold(Duration::from_secs(60));
    let Some(guard) = db.acquire("job:nightly-report", options)? else {
        println!("someone else runs it");
        return Ok(());
    };
    println!("holding job:nightly-report with token {}", guard.token());
    let lost = guard.loss_signal();
    for step in 0..10 {
        if let Some(reason) = lost.reason() {
            println!("lost the lock ({reason:?}); stopping at step {step}");
            return Ok(());
        }
        // The write only lands if no newer holder has written already.
        let written = db.ifgt("report:nightly", guard.token(), format!("step {step}"))?;
        println!("step {step}: written={written}");
        thread::sleep(Duration::from_millis(500));
    }
    println!("released: {}", guard.release()?);
    Ok(())
}
