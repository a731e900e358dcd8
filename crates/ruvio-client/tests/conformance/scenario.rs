//! Scenario vectors (README section 3) against the shared server, and the steps guard cases share with them.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ruvio_client::{Client, LockInfo, LockKind, Protocol, Value};
use serde_json::Value as Json;

use crate::matchers::{check, field, show, str_field, Saved};
use crate::server::Addr;
use crate::Outcome;

/// What a step got back: a reply, or the client's own failure (I/O, timeout, a reply it could not convert).
type Got = Result<Value, Fail>;

/// The client failed instead of answering; `dropped`: because the server closed or reset the connection.
#[derive(Debug)]
struct Fail {
    dropped: bool,
    text: String,
}

impl From<Fail> for String {
    fn from(f: Fail) -> String {
        f.text
    }
}

fn fail(text: impl Into<String>) -> Fail {
    Fail { dropped: false, text: text.into() }
}

fn client_failed(e: ruvio_client::Error) -> Fail {
    Fail { dropped: e.is_connection_dropped(), text: format!("the client failed: {e}") }
}

/// A command still running on its own thread (`"async"`), with the connection it borrowed.
struct Pending {
    conn: String,
    sent: Instant,
    done: mpsc::Receiver<(Client, Got, Instant)>,
}

/// The state of one run of one case: connections by name, saved integers, commands in flight.
pub struct Run {
    addr: Addr,
    protocol: Protocol,
    prefix: String,
    conns: HashMap<String, Client>,
    busy: HashMap<String, String>,
    pending: HashMap<String, Pending>,
    pub saved: Saved,
}

impl Run {
    pub fn new(addr: &Addr, protocol: Protocol, prefix: &str) -> Run {
        Run {
            addr: addr.clone(),
            protocol,
            prefix: prefix.to_string(),
            conns: HashMap::new(),
            busy: HashMap::new(),
            pending: HashMap::new(),
            saved: Saved::new(),
        }
    }

    /// `{p}` and `{tok:name}` replaced (README section 3, substitution).
    pub fn substitute(&self, s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s.replace("{p}", &self.prefix);
        while let Some(start) = rest.find("{tok:") {
            let end = rest[start..].find('}').ok_or_else(|| format!("corpus: unclosed {{tok: in {s:?}"))? + start;
            let name = &rest[start + 5..end];
            let value = self.saved.get(name).ok_or_else(|| format!("corpus: nothing saved as {name:?}"))?;
            out.push_str(&rest[..start]);
            out.push_str(value);
            rest = rest[end + 1..].to_string();
        }
        out.push_str(&rest);
        Ok(out)
    }

    fn client(&mut self, name: &str) -> Result<&mut Client, String> {
        if let Some(id) = self.busy.get(name) {
            return Err(format!("corpus: connection {name:?} is busy with async command {id:?}"));
        }
        if !self.conns.contains_key(name) {
            let client = Client::builder(self.addr.host.clone(), self.addr.port)
                .protocol(self.protocol)
                // Long enough for every WAIT in the corpus; the typed waiting calls add their wait on top.
                .command_timeout(Some(Duration::from_secs(60)))
                .connect()
                .map_err(|e| format!("connect {name:?}: {e}"))?;
            self.conns.insert(name.to_string(), client);
        }
        Ok(self.conns.get_mut(name).expect("inserted above"))
    }

    pub fn key(&self, s: &str) -> Result<String, String> {
        self.substitute(s)
    }

    /// Runs a `command`, `await`, `sleep` or `close` step; `Ok(false)` when `do` is not one of them.
    pub fn common_step(&mut self, step: &Json) -> Result<bool, String> {
        match str_field(step, "do")? {
            "command" => self.command(step).map(|_| true),
            "await" => self.await_step(step).map(|_| true),
            "sleep" => {
                let ms: u64 = str_field(step, "ms")?.parse().map_err(|_| "corpus: sleep ms is not an integer")?;
                sleep_at_least(Duration::from_millis(ms));
                Ok(true)
            }
            "close" => {
                let name = str_field(step, "conn")?;
                if self.busy.contains_key(name) {
                    return Err(format!("corpus: close of busy connection {name:?}"));
                }
                self.conns.remove(name);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn command(&mut self, step: &Json) -> Result<(), String> {
        let args: Vec<String> = field(step, "args")?
            .as_array()
            .ok_or("corpus: args is not an array")?
            .iter()
            .map(|a| a.as_str().ok_or_else(|| "corpus: an argument is not a string".to_string()).and_then(|a| self.substitute(a)))
            .collect::<Result<_, _>>()?;
        let conn = step.get("conn").and_then(Json::as_str).unwrap_or("a").to_string();
        let typed = step.get("typed").and_then(Json::as_bool) == Some(true);
        if let Some(id) = step.get("async").and_then(Json::as_str) {
            self.client(&conn)?;
            let mut client = self.conns.remove(&conn).expect("connected above");
            let (tx, rx) = mpsc::channel();
            let sent = Instant::now();
            thread::spawn(move || {
                let got = send(&mut client, &args, typed);
                let _ = tx.send((client, got, Instant::now()));
            });
            self.busy.insert(conn.clone(), id.to_string());
            self.pending.insert(id.to_string(), Pending { conn, sent, done: rx });
            return Ok(());
        }
        let expect = field(step, "expect")?;
        let until = match step.get("until_ms") {
            None => None,
            Some(ms) => Some(Instant::now() + Duration::from_millis(ms.as_str().and_then(|s| s.parse().ok()).ok_or("corpus: bad until_ms")?)),
        };
        loop {
            let client = self.client(&conn)?;
            let got = send(client, &args, typed)?;
            match check(expect, &got, &self.saved) {
                Ok(()) => return self.save(step, &got),
                Err(why) => match until {
                    Some(deadline) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                    Some(_) => return Err(format!("still not matching after until_ms: {why}")),
                    None => return Err(why),
                },
            }
        }
    }

    fn await_step(&mut self, step: &Json) -> Result<(), String> {
        let id = str_field(step, "id")?;
        let p = self.pending.remove(id).ok_or_else(|| format!("corpus: no async command {id:?}"))?;
        let (client, got, at) = p.done.recv_timeout(Duration::from_secs(30)).map_err(|_| format!("no reply to {id:?} within 30 s"))?;
        self.busy.remove(&p.conn);
        self.conns.insert(p.conn.clone(), client);
        let expect = field(step, "expect")?;
        if str_field(expect, "match")? == "dropped" {
            // The server closed this connection while the command waited: the client must say so, not answer.
            self.conns.remove(&p.conn);
            return match got {
                Err(Fail { dropped: true, .. }) => Ok(()),
                Err(f) => Err(format!("expected a dropped connection, the client failed otherwise: {}", f.text)),
                Ok(v) => Err(format!("expected a dropped connection, got {}", show(&v))),
            };
        }
        let got = got?;
        check(expect, &got, &self.saved)?;
        if let Some(min) = step.get("min_elapsed_ms") {
            let min: u64 = min.as_str().and_then(|s| s.parse().ok()).ok_or("corpus: bad min_elapsed_ms")?;
            let took = at.duration_since(p.sent);
            if took < Duration::from_millis(min) {
                return Err(format!("the reply came after {took:?}, before the {min} ms it must not precede"));
            }
        }
        self.save(step, &got)
    }

    pub fn save(&mut self, step: &Json, got: &Value) -> Result<(), String> {
        if let Some(name) = step.get("save").and_then(Json::as_str) {
            match got {
                Value::Integer(i) => {
                    self.saved.insert(name.to_string(), i.to_string());
                }
                other => return Err(format!("save {name:?}: got {}, not an integer", show(other))),
            }
        }
        Ok(())
    }
}

pub fn sleep_at_least(d: Duration) {
    let until = Instant::now() + d;
    while let Some(left) = until.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) {
        thread::sleep(left);
    }
}

/// Sends a step's command: raw through the generic command API, or through the typed lock method.
fn send(client: &mut Client, args: &[String], typed: bool) -> Got {
    if !typed {
        return client.command(args).map_err(client_failed);
    }
    let result = typed_call(client, args).map_err(fail)?;
    match result {
        Ok(v) => Ok(v),
        // A server error raised by a typed call is matched against the corpus as the error reply it was.
        Err(e) if e.is_server_error() => Ok(Value::Error(e.detail().as_bytes().to_vec().into())),
        Err(e) => Err(client_failed(e)),
    }
}

fn num<T: std::str::FromStr>(args: &[String], i: usize) -> Result<T, String> {
    args.get(i).and_then(|a| a.parse().ok()).ok_or_else(|| format!("corpus: typed step argument {i} of {args:?} is not a number"))
}

fn token(v: Option<i64>) -> Value {
    v.map_or(Value::Nil, Value::Integer)
}

/// A lock info object back in the LOCKINFO shape (README section 3), so one matcher checks raw and typed calls.
fn info_value(info: LockInfo) -> Value {
    let kind = match info.kind {
        LockKind::Lease => "lease".to_string(),
        LockKind::Semaphore => "semaphore".to_string(),
        LockKind::Other(name) => name,
        other => format!("{other:?}"),
    };
    let holders = info
        .holders
        .into_iter()
        .map(|h| {
            Value::Map(vec![
                (Value::bulk_str("token"), Value::Integer(h.token)),
                (Value::bulk_str("remaining_ms"), Value::Integer(h.remaining_ms)),
            ])
        })
        .collect();
    Value::Map(vec![
        (Value::bulk_str("kind"), Value::bulk_str(&kind)),
        (Value::bulk_str("limit"), Value::Integer(info.limit)),
        (Value::bulk_str("holders"), Value::Array(holders)),
        (Value::bulk_str("waiters"), Value::Integer(info.waiters)),
    ])
}

/// The typed method for a lock command (README section 6: token `i64`, nil `None`, 0/1 `i64`).
fn typed_call(c: &mut Client, a: &[String]) -> Result<ruvio_client::Result<Value>, String> {
    let name = a.first().map(|s| s.to_ascii_uppercase()).unwrap_or_default();
    let wait_opt = |at: usize, word: &str| -> Result<Option<u64>, String> {
        match a.len() {
            n if n == at => Ok(None),
            n if n == at + 2 && a[at].eq_ignore_ascii_case(word) => num(a, at + 1).map(Some),
            _ => Err(format!("corpus: typed step {a:?} has unexpected arguments")),
        }
    };
    let key = a.get(1).ok_or("corpus: typed step without a key")?.as_str();
    Ok(match name.as_str() {
        "LEASE" => {
            let ttl: u64 = num(a, 2)?;
            match wait_opt(3, "WAIT")? {
                None => c.lease(key, ttl).map(token),
                Some(w) => c.lease_wait(key, ttl, w).map(token),
            }
        }
        "SEMAPHORE" => {
            let (limit, ttl): (u64, u64) = (num(a, 2)?, num(a, 3)?);
            match wait_opt(4, "WAIT")? {
                None => c.semaphore(key, limit, ttl).map(token),
                Some(w) => c.semaphore_wait(key, limit, ttl, w).map(token),
            }
        }
        "RENEW" if a.len() == 4 => c.renew(key, num::<i64>(a, 2)?, num(a, 3)?).map(Value::Integer),
        "RELEASE" if a.len() == 3 => c.release(key, num::<i64>(a, 2)?).map(Value::Integer),
        "IFGT" => {
            let (tok, value): (i64, &str) = (num(a, 2)?, a.get(3).ok_or("corpus: IFGT without a value")?);
            match wait_opt(4, "PX")? {
                None => c.ifgt(key, tok, value).map(Value::Integer),
                Some(px) => c.ifgt_px(key, tok, value, px).map(Value::Integer),
            }
        }
        "LOCKINFO" if a.len() == 2 => c.lock_info(key).map(|i| i.map_or(Value::Nil, info_value)),
        _ => return Err(format!("corpus: {a:?} cannot be a typed step")),
    })
}

/// One run of a scenario case in one protocol.
pub fn run_case(case: &Json, proto: &str, addr: &Addr, prefix: &str) -> Outcome {
    let protocol = match proto {
        "2" => Protocol::Resp2,
        "3" => Protocol::Resp3,
        other => return Err(format!("corpus: unknown protocol {other:?}")),
    };
    let mut run = Run::new(addr, protocol, prefix);
    let steps = field(case, "steps")?.as_array().ok_or("corpus: steps is not an array")?;
    for (i, step) in steps.iter().enumerate() {
        match run.common_step(step) {
            Ok(true) => {}
            Ok(false) => return Err(format!("step {i}: corpus: unknown step {step}")),
            Err(why) => return Err(format!("step {i} {step}: {why}")),
        }
    }
    if let Some(id) = run.pending.keys().next() {
        return Err(format!("corpus: async command {id:?} never awaited"));
    }
    Ok(())
}
