//! Scripts persist as their effects: a script's writes reach the log as the commands it ran (wrapped in MULTI ...
//! EXEC), never as the script, so a restart after kill -9 (appendfsync always) holds exactly what the script left,
//! including values a script made up from random numbers or the clock, and functions loaded with FUNCTION LOAD.

mod common;

use common::*;
use ruvio_protocol::Value;

fn text(v: &Value) -> String {
    bulk(v).unwrap_or_else(|| format!("{v:?}"))
}

#[test]
fn script_writes_survive_kill9() {
    let dir = temp_dir("scripting-kill9");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    let script = "redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', KEYS[2]); redis.call('incr', KEYS[2]); \
                  local n = redis.call('get', KEYS[2]); redis.call('select', 3); redis.call('set', KEYS[1], 'in-db-3'); return n";
    assert_eq!(c.cmd(&["EVAL", script, "2", "s:a", "s:n", "hello"]), Value::Bulk("2".into()));
    // Random and time-dependent values: the log must carry the value the script produced, not the script.
    let random = "local v = tostring(math.random()) .. ':' .. redis.call('time')[1] .. ':' .. redis.call('time')[2]; \
                  redis.call('set', KEYS[1], v); redis.call('pexpire', KEYS[1], 600000); return v";
    let made = text(&c.cmd(&["EVAL", random, "1", "s:random"]));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let made2 = text(&c.cmd(&["EVAL", random, "1", "s:random2"]));
    assert_ne!(made, made2, "time-dependent values differ between runs");
    // A script that failed half-way keeps (and logs) what it wrote before the error, as Redis does.
    let failing = "redis.call('set', KEYS[1], 'before'); redis.call('incr', KEYS[1]); return 1";
    let reply = c.cmd(&["EVAL", failing, "1", "s:half"]);
    assert!(matches!(&reply, Value::Error(e) if e.starts_with(b"ERR value is not an integer")), "{reply:?}");
    // A lock taken and fenced from inside a script.
    let fenced = "local t = redis.call('lease', KEYS[1], 60000); redis.call('ifgt', KEYS[2], t, 'fenced-write'); return t";
    let token = c.cmd(&["EVAL", fenced, "2", "s:lock", "s:fenced"]);
    // Inside a script the token is an exact decimal string (docs/scripting.md).
    assert!(matches!(&token, Value::Bulk(t) if std::str::from_utf8(t).unwrap().parse::<i64>().unwrap() > 0), "{token:?}");
    assert_eq!(bulk(&c.cmd(&["FUNCTION", "LOAD", "#!lua name=plib\nredis.register_function('pget', function(keys) return redis.call('get', keys[1]) end)"])), Some("plib".into()));
    server.kill9();

    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["GET", "s:a"])), "hello");
    assert_eq!(text(&c.cmd(&["GET", "s:n"])), "2");
    assert_eq!(text(&c.cmd(&["GET", "s:random"])), made);
    assert_eq!(text(&c.cmd(&["GET", "s:random2"])), made2);
    assert!(matches!(c.cmd(&["PTTL", "s:random"]), Value::Integer(ms) if ms > 500_000 && ms <= 600_000));
    assert_eq!(text(&c.cmd(&["GET", "s:half"])), "before");
    assert_eq!(text(&c.cmd(&["GET", "s:fenced"])), "fenced-write");
    let info = c.cmd(&["LOCKINFO", "s:lock"]);
    assert!(format!("{info:?}").contains("lease"), "{info:?}");
    assert_eq!(c.cmd(&["FCALL", "pget", "1", "s:a"]), Value::Bulk("hello".into()));
    assert!(is_ok(&c.cmd(&["SELECT", "3"])));
    assert_eq!(text(&c.cmd(&["GET", "s:a"])), "in-db-3");
}

#[test]
fn functions_survive_log_compaction_and_restart() {
    let dir = temp_dir("scripting-functions-compaction");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    let lib = "#!lua name=clib\nredis.register_function('cget', function(keys) return redis.call('get', keys[1]) end)";
    assert_eq!(bulk(&c.cmd(&["FUNCTION", "LOAD", lib])), Some("clib".into()));
    assert!(is_ok(&c.cmd(&["SET", "ck", "cv"])));
    assert!(is_ok(&c.cmd(&["SAVE"])));
    server.kill9();
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["FCALL", "cget", "1", "ck"]), Value::Bulk("cv".into()));
    // A library deleted after the compaction stays deleted.
    assert!(is_ok(&c.cmd(&["FUNCTION", "DELETE", "clib"])));
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert!(matches!(c.cmd(&["FCALL", "cget", "1", "ck"]), Value::Error(_)));
}

#[test]
fn log_holds_effects_in_multi_exec_never_the_script() {
    let dir = temp_dir("scripting-effects");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    let script = "redis.call('set', 'e:1', ARGV[1]); redis.call('set', 'e:2', 'y'); return 'done-marker'";
    // Twelve runs, each logged the same way.
    for i in 0..12 {
        assert_eq!(text(&c.cmd(&["EVAL", script, "0", &format!("x{i}")])), "done-marker");
    }
    // One write: no MULTI needed.
    assert!(matches!(c.cmd(&["EVAL", "return redis.call('set', 'e:3', 'z')", "0"]), Value::Simple(_)));
    server.kill9();
    let mut log = Vec::new();
    for f in incr_files(&dir) {
        log.extend(std::fs::read(f).unwrap());
    }
    let log = String::from_utf8_lossy(&log);
    assert!(!log.contains("EVAL") && !log.contains("done-marker"), "the script itself reached the log");
    let multi = log.find("MULTI").expect("MULTI record");
    let e1 = log.find("e:1").unwrap();
    let e2 = log.find("e:2").unwrap();
    let exec = log.find("EXEC").expect("EXEC record");
    assert!(multi < e1 && e1 < e2 && e2 < exec, "records out of order");
    assert_eq!(log.matches("MULTI").count(), 12, "one MULTI per two-write script; a single write is not wrapped");
    assert_eq!(log.matches("EXEC").count(), 12);
    assert!(log.contains("x11"));
}

#[test]
fn shutdown_nosave_during_a_busy_script_keeps_none_of_it() {
    let dir = temp_dir("scripting-busy-shutdown");
    let server = start(&dir, &["--appendfsync", "always", "--busy-reply-threshold", "200"]);
    let port = server.port;
    let mut runner = server.conn();
    runner.send(&["EVAL", "redis.call('set', 'partial', '1'); while true do end", "0"]).unwrap();
    let mut other = Conn::connect(port);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = other.cmd(&["GET", "x"]);
        if matches!(&r, Value::Error(e) if e.starts_with(b"BUSY")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never got BUSY: {r:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let kill = other.cmd(&["SCRIPT", "KILL"]);
    assert!(matches!(&kill, Value::Error(e) if e.starts_with(b"UNKILLABLE")), "{kill:?}");
    let _ = other.try_cmd(&["SHUTDOWN", "NOSAVE"]);
    let mut server = server;
    let start_wait = std::time::Instant::now();
    while server.child.try_wait().unwrap().is_none() {
        assert!(start_wait.elapsed() < std::time::Duration::from_secs(60), "server did not exit");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["GET", "partial"]), Value::Nil, "a script stopped by SHUTDOWN NOSAVE left a write in the log");
}
