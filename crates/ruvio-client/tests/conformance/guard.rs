//! Guard cases (README section 4): the lock helper (`Client::acquire` and its `LockGuard`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ruvio_client::{Client, LockGuard, LockOptions, LossReason, Protocol, Value};
use serde_json::Value as Json;

use crate::matchers::{check, field, str_field};
use crate::scenario::Run;
use crate::server::{Addr, OwnServer};
use crate::Outcome;

struct Held {
    guard: Option<LockGuard>,
    /// When the runner called acquire (README: `sent`), and the TTL asked for.
    sent: Instant,
    ttl: Duration,
    /// When the loss signal was raised, as seen by a watcher thread started right after acquire.
    lost_at: Arc<Mutex<Option<(Instant, LossReason)>>>,
}

fn ms(step: &Json, name: &str) -> Result<u64, String> {
    str_field(step, name)?.parse().map_err(|_| format!("corpus: {name} is not an integer"))
}

pub fn run_case(case: &Json, shared: &Addr, bin: &Path, prefix: &str) -> Outcome {
    let own = match case.get("server").and_then(Json::as_str) {
        None => None,
        Some("own") => Some(OwnServer::start(bin)?),
        Some(other) => return Err(format!("corpus: unknown server {other:?}")),
    };
    let addr = own.as_ref().map_or_else(|| shared.clone(), |s| s.addr.clone());
    let mut run = Run::new(&addr, Protocol::Resp2, prefix);
    let mut guards: HashMap<String, Held> = HashMap::new();
    let mut acquirer: Option<Client> = None;
    let steps = field(case, "steps")?.as_array().ok_or("corpus: steps is not an array")?;
    let result = (|| -> Outcome {
        for (i, step) in steps.iter().enumerate() {
            let at = |why: String| format!("step {i} {step}: {why}");
            if run.common_step(step).map_err(at)? {
                continue;
            }
            match str_field(step, "do").map_err(at)? {
                "acquire" => {
                    let name = str_field(step, "guard").map_err(at)?.to_string();
                    let key = run.key(str_field(step, "key").map_err(at)?).map_err(at)?;
                    let ttl = Duration::from_millis(ms(step, "ttl_ms").map_err(at)?);
                    let mut options = LockOptions::new(ttl);
                    if step.get("max_hold_ms").is_some() {
                        options = options.max_hold(Duration::from_millis(ms(step, "max_hold_ms").map_err(at)?));
                    }
                    if acquirer.is_none() {
                        acquirer = Some(Client::connect(addr.host.clone(), addr.port).map_err(|e| at(format!("connect: {e}")))?);
                    }
                    let sent = Instant::now();
                    let guard = acquirer
                        .as_mut()
                        .expect("connected above")
                        .acquire(&key, options)
                        .map_err(|e| at(format!("acquire raised: {e}")))?
                        .ok_or_else(|| at("acquire was not granted".to_string()))?;
                    let lost_at = Arc::new(Mutex::new(None));
                    let (signal, record) = (guard.loss_signal(), lost_at.clone());
                    thread::spawn(move || {
                        let reason = signal.wait();
                        *record.lock().unwrap() = Some((Instant::now(), reason));
                    });
                    run.save(step, &Value::Integer(guard.token())).map_err(at)?;
                    guards.insert(name, Held { guard: Some(guard), sent, ttl, lost_at });
                }
                "expect_held" => {
                    let held = guards.get(str_field(step, "guard").map_err(at)?).ok_or_else(|| at("corpus: no such guard".into()))?;
                    if let Some((when, reason)) = *held.lost_at.lock().unwrap() {
                        return Err(at(format!("lost ({reason:?}) {:?} after acquire", when - held.sent)));
                    }
                    if held.guard.as_ref().is_some_and(|g| g.is_lost()) {
                        return Err(at("the guard says it is lost".to_string()));
                    }
                }
                "expect_lost" => {
                    let held = guards.get(str_field(step, "guard").map_err(at)?).ok_or_else(|| at("corpus: no such guard".into()))?;
                    let deadline = Instant::now() + Duration::from_millis(ms(step, "within_ms").map_err(at)?);
                    let (when, reason) = loop {
                        if let Some(l) = *held.lost_at.lock().unwrap() {
                            break l;
                        }
                        if Instant::now() > deadline {
                            return Err(at("no loss signal in time".to_string()));
                        }
                        thread::sleep(Duration::from_millis(5));
                    };
                    if reason == LossReason::Released {
                        return Err(at("the only loss signal was the release".to_string()));
                    }
                    if step.get("before_deadline").and_then(Json::as_bool) == Some(true) && when >= held.sent + held.ttl {
                        return Err(at(format!(
                            "loss ({reason:?}) signalled {:?} after acquire, not before the {:?} TTL",
                            when - held.sent,
                            held.ttl
                        )));
                    }
                }
                "release" => {
                    let held = guards.get_mut(str_field(step, "guard").map_err(at)?).ok_or_else(|| at("corpus: no such guard".into()))?;
                    let guard = held.guard.take().ok_or_else(|| at("corpus: guard already released".to_string()))?;
                    let n = guard.release().map_err(|e| at(format!("release raised: {e}")))?;
                    check(field(step, "expect").map_err(at)?, &Value::Integer(n), &run.saved).map_err(at)?;
                }
                "sigstop" | "sigcont" => {
                    let server = own.as_ref().ok_or_else(|| at("corpus: signals need \"server\": \"own\"".to_string()))?;
                    let sig = if str_field(step, "do").map_err(at)? == "sigstop" { libc::SIGSTOP } else { libc::SIGCONT };
                    server.signal(sig).map_err(at)?;
                }
                other => return Err(at(format!("corpus: unknown step {other:?}"))),
            }
        }
        Ok(())
    })();
    // Guards not released by the case stop renewing when dropped; the server (if own) goes after them.
    drop(guards);
    drop(own);
    result
}
