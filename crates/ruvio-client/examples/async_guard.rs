//! The async lock guard: the work runs until it finishes or the lock is lost, whichever comes first. Needs a
//! Ruvio server on 127.0.0.1:6379; run with `--features tokio`.

use std::time::Duration;

use ruvio_client::{aio, LockOptions};

#[tokio::main]
async fn main() -> Result<(), ruvio_client::Error> {
    let mut db = aio::Client::connect("127.0.0.1", 6379).await?;
    let options = LockOptions::new(Duration::from_secs(3)).wait(Duration::from_secs(5));
    let Some(guard) = db.acquire("job:nightly-report", options).await? else {
        println!("someone else runs it");
        return Ok(());
    };
    let token = guard.token();
    let work = async {
        for step in 0..6 {
            db.ifgt("report:nightly", token, format!("step {step}")).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok::<_, ruvio_client::Error>(())
    };
    tokio::select! {
        done = work => {
            done?;
            println!("finished; released: {}", guard.release().await?);
        }
        reason = guard.lost() => println!("lost the lock ({reason:?}); stopped"),
    }
    Ok(())
}
