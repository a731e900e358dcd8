//! Issue 33's "scripting and transactions, as Redis", against started `ruvio` processes over TCP: SCRIPT KILL and
//! FUNCTION KILL each stop only their own kind, MULTI and a transaction's commands while a script is busy
//! (EXECABORT), FUNCTION STATS of a running function, FUNCTION's argument errors (Redis 7.0's texts), COMMAND
//! GETKEYS for EVAL/FCALL, CLIENT REPLY ON/OFF/SKIP. Each test failed on the code before the change.

mod common;

use std::time::{Duration, Instant};

use common::{is_ok, start, temp_dir, Conn, Server};
use ruvio_protocol::Value;

fn text(v: &Value) -> String {
    match v {
        Value::Error(e) | Value::Simple(e) | Value::Bulk(e) => String::from_utf8_lossy(e).into_owned(),
        other => format!("{other:?}"),
    }
}

const BUSY_EVAL: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Waits until PING gets `-BUSY` (the script is past busy-reply-threshold).
fn wait_busy(c: &mut Conn) {
    let start = Instant::now();
    loop {
        let v = c.try_cmd(&["PING"]).expect("an answer while the script runs");
        if matches!(&v, Value::Error(e) if e.starts_with(b"BUSY")) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never got BUSY, last reply {v:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_pong(c: &mut Conn) {
    let start = Instant::now();
    loop {
        if c.cmd(&["PING"]) == Value::Simple("PONG".into()) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the script was not stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server(name: &str) -> Server {
    start(&temp_dir(name), &["--busy-reply-threshold", "50"])
}

#[test]
fn each_kill_command_stops_only_its_own_kind() {
    let server = server("compat-kill");
    let mut c = server.conn();
    let lib = "#!lua name=spin\nredis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)";
    assert_eq!(text(&c.cmd(&["FUNCTION", "LOAD", lib])), "spin");
    // A function: SCRIPT KILL answers the BUSY that names FUNCTION KILL; FUNCTION STATS names it and its command.
    let mut runner = server.conn();
    runner.send(&["FCALL", "SPIN", "0", "arg"]).unwrap();
    wait_busy(&mut c);
    assert_eq!(text(&c.cmd(&["SCRIPT", "KILL"])), BUSY_FUNCTION);
    let stats = format!("{:?}", c.cmd(&["FUNCTION", "STATS"]));
    assert!(stats.contains("\"spin\""), "FUNCTION STATS names the running function: {stats}");
    assert!(stats.contains("\"FCALL\"") && stats.contains("\"SPIN\"") && stats.contains("\"arg\"") && stats.contains("duration_ms"), "and its command: {stats}");
    assert!(is_ok(&c.cmd(&["FUNCTION", "KILL"])));
    wait_pong(&mut c);
    assert!(text(&runner.read_reply().unwrap()).contains("killed by user"));
    // EVAL: FUNCTION KILL answers the BUSY that names SCRIPT KILL.
    runner.send(&["EVAL", "local a = 1 while true do a = a + 1 end", "0"]).unwrap();
    wait_busy(&mut c);
    assert_eq!(text(&c.cmd(&["FUNCTION", "KILL"])), BUSY_EVAL);
    assert!(is_ok(&c.cmd(&["SCRIPT", "KILL"])));
    wait_pong(&mut c);
    assert!(text(&runner.read_reply().unwrap()).contains("killed by user"));
    assert_eq!(text(&c.cmd(&["SCRIPT", "KILL"])), "NOTBUSY No scripts in execution right now.");
}

#[test]
fn a_transaction_meeting_a_busy_script_is_discarded() {
    let server = server("compat-multi-busy");
    let mut c = server.conn();
    assert!(is_ok(&c.cmd(&["SET", "xx", "1"])));
    let mut runner = server.conn();
    let mut tx = server.conn();

    // Redis's "EXEC and script timeout": a command refused with BUSY inside MULTI fails the transaction, and EXEC
    // itself, refused, discards it with EXECABORT naming BUSY.
    assert!(is_ok(&tx.cmd(&["MULTI"])));
    assert_eq!(text(&tx.cmd(&["INCR", "xx"])), "QUEUED");
    runner.send(&["EVAL", "while true do end", "0"]).unwrap();
    wait_busy(&mut c);
    assert_eq!(text(&tx.cmd(&["INCR", "xx"])), BUSY_EVAL);
    assert_eq!(text(&tx.cmd(&["EXEC"])), format!("EXECABORT Transaction discarded because of: {BUSY_EVAL}"));
    assert!(is_ok(&c.cmd(&["SCRIPT", "KILL"])));
    wait_pong(&mut c);
    runner.read_reply().unwrap();
    assert_eq!(text(&c.cmd(&["GET", "xx"])), "1", "nothing of the transaction ran");
    assert_eq!(text(&tx.cmd(&["PING", "asdf"])), "asdf", "no longer in MULTI");

    // Redis's "MULTI and script timeout": MULTI may start during a busy script (allow_busy); a command refused
    // then still makes EXEC fail after the script is gone.
    runner.send(&["EVAL", "while true do end", "0"]).unwrap();
    wait_busy(&mut c);
    assert!(is_ok(&tx.cmd(&["MULTI"])));
    assert_eq!(text(&tx.cmd(&["INCR", "xx"])), BUSY_EVAL);
    assert!(is_ok(&c.cmd(&["SCRIPT", "KILL"])));
    wait_pong(&mut c);
    runner.read_reply().unwrap();
    assert_eq!(text(&tx.cmd(&["INCR", "xx"])), "QUEUED");
    assert_eq!(text(&tx.cmd(&["EXEC"])), "EXECABORT Transaction discarded because of previous errors.");
    assert_eq!(text(&c.cmd(&["GET", "xx"])), "1");

    // WATCH then DISCARD during a busy script: DISCARD does not wait for the script's store lock.
    assert!(is_ok(&tx.cmd(&["WATCH", "xx"])));
    assert!(is_ok(&tx.cmd(&["MULTI"])));
    runner.send(&["EVAL", "while true do end", "0"]).unwrap();
    wait_busy(&mut c);
    tx.set_timeout(Duration::from_secs(5));
    assert!(is_ok(&tx.try_cmd(&["DISCARD"]).expect("DISCARD answered during the busy script")));
    assert!(is_ok(&c.cmd(&["SCRIPT", "KILL"])));
    wait_pong(&mut c);
    runner.read_reply().unwrap();
    // The dropped WATCH no longer counts: a change to xx does not abort the next transaction.
    assert!(is_ok(&c.cmd(&["SET", "xx", "2"])));
    assert!(is_ok(&tx.cmd(&["MULTI"])));
    tx.cmd(&["INCR", "xx"]);
    assert_eq!(tx.cmd(&["EXEC"]), Value::Array(vec![Value::Integer(3)]));
}

#[test]
fn function_commands_answer_redis_argument_errors() {
    let server = server("compat-function-args");
    let mut c = server.conn();
    let lib = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    let cases: &[(&[&str], &str)] = &[
        (&["FUNCTION", "LOAD", "foo", "bar", lib], "ERR Unknown option given: foo"),
        (&["FCALL", "test", "bad_arg"], "ERR Bad number of keys provided"),
        (&["FUNCTION", "RESTORE", "a", "b", "c"], "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."),
        (&["FUNCTION", "FLUSH", "bad_arg"], "ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        (&["FUNCTION", "FLUSH", "sync", "extra"], "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP."),
        (&["FUNCTION", "LIST", "bad_argument"], "ERR Unknown argument bad_argument"),
        (&["FUNCTION", "LIST", "libraryname"], "ERR library name argument was not given"),
        (&["FUNCTION", "LIST", "withcode", "withcode"], "ERR Unknown argument withcode"),
        (&["FUNCTION", "LIST", "withcode", "libraryname", "foo", "libraryname", "foo"], "ERR Unknown argument libraryname"),
        (&["FUNCTION", "LOAD", "#! name=test\nredis.register_function('foo', function() return 1 end)"], "ERR Engine '' not found"),
        (&["FUNCTION", "LOAD", "#!lua name=a name=b\nredis.register_function('foo', function() return 1 end)"], "ERR Invalid metadata value, name argument was given multiple times"),
    ];
    for (args, want) in cases {
        assert_eq!(text(&c.cmd(args)), *want, "{args:?}");
    }
    // Function names are case-insensitive, as in Redis.
    assert_eq!(text(&c.cmd(&["FUNCTION", "LOAD", lib])), "test");
    assert_eq!(text(&c.cmd(&["FCALL", "TEST", "0"])), "hello");
    assert_eq!(text(&c.cmd(&["FUNCTION", "LOAD", "REPLACE", lib])), "test");
}

#[test]
fn command_getkeys_reads_the_key_count_of_scripts() {
    let server = server("compat-getkeys");
    let mut c = server.conn();
    let keys = |c: &mut Conn, args: &[&str]| c.cmd(args);
    let xk = Value::Array(vec![Value::Bulk("x".into()), Value::Bulk("y".into())]);
    assert_eq!(keys(&mut c, &["COMMAND", "GETKEYS", "FCALL", "test", "2", "x", "y", "foo"]), xk);
    assert_eq!(keys(&mut c, &["COMMAND", "GETKEYS", "FCALL_RO", "test", "2", "x", "y"]), xk);
    assert_eq!(keys(&mut c, &["COMMAND", "GETKEYS", "EVAL", "return 1", "2", "x", "y", "a"]), xk);
    assert_eq!(keys(&mut c, &["COMMAND", "GETKEYS", "EVALSHA_RO", "abc", "0", "a"]), Value::Array(vec![]));
    assert_eq!(keys(&mut c, &["COMMAND", "GETKEYS", "EVAL", "return 1", "5", "a"]), Value::Array(vec![]));
}

#[test]
fn client_reply_off_on_and_skip() {
    let server = server("compat-client-reply");
    let mut c = server.conn();
    c.send(&["CLIENT", "REPLY", "OFF"]).unwrap();
    c.send(&["SET", "k", "1"]).unwrap();
    c.send(&["CLIENT", "REPLY", "SKIP"]).unwrap();
    c.send(&["INCR", "k"]).unwrap();
    c.send(&["CLIENT", "REPLY", "ON"]).unwrap();
    // Nothing from OFF up to ON, which answers OK.
    assert!(is_ok(&c.read_reply().unwrap()));
    assert_eq!(text(&c.cmd(&["GET", "k"])), "2", "the commands ran");
    c.send(&["CLIENT", "REPLY", "SKIP"]).unwrap();
    c.send(&["INCR", "k"]).unwrap();
    assert_eq!(c.cmd(&["GET", "k"]), Value::Bulk("3".into()), "only the command after SKIP went unanswered");
    assert_eq!(text(&c.cmd(&["CLIENT", "REPLY", "maybe"])), "ERR syntax error");
}

#[test]
fn info_takes_several_sections() {
    let server = server("compat-info");
    let mut c = server.conn();
    let info = text(&c.cmd(&["INFO", "server", "CLIENTS"]));
    assert!(info.contains("# Server") && info.contains("# Clients"), "{info}");
    assert!(!info.contains("# Memory"), "{info}");
    // INFO errorstats counts error replies by code (a script's own code too); CONFIG RESETSTAT clears it.
    assert!(is_ok(&c.cmd(&["CONFIG", "RESETSTAT"])));
    assert_eq!(text(&c.cmd(&["EVAL", "return redis.error_reply('MY_ERR_CODE custom msg')", "0"])), "MY_ERR_CODE custom msg");
    c.cmd(&["INCR", "notanumber-but-missing"]);
    c.cmd(&["NOSUCHCOMMAND"]);
    c.cmd(&["GET"]);
    let stats = text(&c.cmd(&["INFO", "errorstats"]));
    assert!(stats.contains("# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_MY_ERR_CODE:count=1\r\n"), "{stats}");
    assert!(is_ok(&c.cmd(&["CONFIG", "RESETSTAT"])));
    assert!(!text(&c.cmd(&["INFO", "errorstats"])).contains("errorstat_"));
}

#[test]
fn libraries_load_with_redis_load_time_globals() {
    let server = server("compat-load-env");
    let mut c = server.conn();
    let load = |c: &mut Conn, code: &str| text(&c.cmd(&["FUNCTION", "LOAD", "REPLACE", &format!("#!lua name=lib\n{code}")]));
    // Only redis.register_function, redis.log and the version fields exist while the library's code runs.
    assert!(load(&mut c, "return math.random()").contains("Script attempted to access nonexistent global variable 'math'"));
    assert!(load(&mut c, "return redis.call('ping')").contains("nonexistent global variable 'call'"));
    assert!(load(&mut c, "mt = getmetatable(_G)").contains("nonexistent global variable 'getmetatable'"));
    assert!(load(&mut c, "a = 1").contains("Attempt to modify a readonly table"));
    // register_function's argument errors (Redis 7.0's texts).
    let cases = [
        ("redis.register_function('f1')", "calling redis.register_function with a single argument is only applicable to Lua table"),
        ("redis.register_function({}, function() end)", "first argument to redis.register_function must be a string"),
        ("redis.register_function('f1', 'x')", "second argument to redis.register_function must be a function"),
        ("redis.register_function('f 1', function() end)", "Library names can only contain letters, numbers, or underscores(_)"),
        ("redis.register_function{function_name=function() end, callback=function() end}", "function_name argument given to redis.register_function must be a string"),
        ("redis.register_function{function_name='f1', callback='bad'}", "callback argument given to redis.register_function must be a function"),
        ("redis.register_function{function_name='f1', callback=function() end, flags='x'}", "flags argument to redis.register_function must be a table representing function flags"),
        ("redis.register_function{function_name='f1', callback=function() end, flags={function() end}}", "unknown flag given"),
    ];
    for (code, want) in cases {
        let got = load(&mut c, code);
        assert!(got.contains(want), "{code}: {got}");
    }
    // The registered functions run with the full environment; register_function is not there any more.
    let lib = "local function seed() return math.floor(2.5) end\nredis.register_function('f1', function() return seed() end)\nredis.register_function('f2', function() redis.register_function('f3', function() end) end)";
    assert_eq!(load(&mut c, lib), "lib");
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), Value::Integer(2));
    assert!(text(&c.cmd(&["FCALL", "f2", "0"])).contains("attempt to call field 'register_function' (a nil value)"));
    // A quoted name in the shebang is read as Redis's argument splitter reads it.
    assert_eq!(text(&c.cmd(&["FUNCTION", "LOAD", "#!lua name=\"quoted\"\nredis.register_function('q', function() return 1 end)"])), "quoted");
    // After a load that failed, EVAL scripts see the normal globals.
    assert_eq!(c.cmd(&["EVAL", "return math.floor(7.9)", "0"]), Value::Integer(7));
}

#[test]
fn scripts_are_checked_against_their_flags_and_min_replicas() {
    let server = server("compat-flags");
    let mut c = server.conn();
    assert!(is_ok(&c.cmd(&["SET", "x", "v"])));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])));
    // A shebang without no-writes is refused up front, even if it only reads; no-writes and plain scripts read.
    assert_eq!(text(&c.cmd(&["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "x"])), "NOREPLICAS Not enough good replicas to write.");
    assert_eq!(text(&c.cmd(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "x"])), "v");
    assert_eq!(text(&c.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "x"])), "v");
    // A plain script's write meets min-replicas-to-write as a client's would.
    assert!(text(&c.cmd(&["EVAL", "return redis.call('set', KEYS[1], 'w')", "1", "x"])).starts_with("NOREPLICAS Not enough good replicas to write."));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"])));
    assert_eq!(text(&c.cmd(&["GET", "x"])), "v");
    // Over maxmemory a shebang script without allow-oom is refused; with it, it runs.
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "maxmemory", "1"])));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        text(&c.cmd(&["EVAL", "#!lua\nreturn 1", "0"])),
        "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"
    );
    assert_eq!(c.cmd(&["EVAL", "#!lua flags=allow-oom\nreturn 1", "0"]), Value::Integer(1));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "maxmemory", "0"])));
}

#[test]
fn sandbox_and_library_details_as_redis() {
    let server = server("compat-sandbox");
    let mut c = server.conn();
    let eval = |c: &mut Conn, body: &str| c.cmd(&["EVAL", body, "0"]);
    assert!(text(&eval(&mut c, "setmetatable(_G, {})")).contains("Attempt to modify a readonly table"));
    assert!(text(&eval(&mut c, "local g = getmetatable(_G) g.__index = {}")).contains("Attempt to modify a readonly table"));
    assert!(text(&eval(&mut c, "return loadstring(string.dump(function() return 1 end))()")).contains("attempt to call a nil value"));
    assert_eq!(eval(&mut c, "return loadstring('return 5')()"), Value::Integer(5));
    assert!(text(&eval(&mut c, "redis.sha1hex()")).starts_with("ERR wrong number of arguments"));
    assert!(text(&eval(&mut c, "redis.call('cluster', 'reset', 'hard')")).contains("This Redis command is not allowed from script"));
    // cjson's depth and invalid-number settings take effect (and are put back by the script).
    let json = "cjson.encode_max_depth(1) local ok = pcall(cjson.encode, {a = {1}}) cjson.encode_max_depth(1000) \
                cjson.decode_max_depth(1) local ok2 = pcall(cjson.decode, '{\"a\": {\"b\": 1}}') cjson.decode_max_depth(1000) \
                local ok3 = pcall(cjson.encode, {n = 0/0}) cjson.encode_invalid_numbers(true) local ok4, s = pcall(cjson.encode, {0/0}) \
                cjson.encode_invalid_numbers(false) return {tostring(ok), tostring(ok2), tostring(ok3), tostring(ok4), s}";
    let want: Vec<Value> = ["false", "false", "false", "true", "[NaN]"].iter().map(|s| Value::Bulk(s.to_string().into())).collect();
    assert_eq!(eval(&mut c, json), Value::Array(want));
    // A stream of small scripts keeps the Lua state near its base size (garbage is collected in steps).
    assert!(is_ok(&c.cmd(&["SCRIPT", "FLUSH"])));
    for _ in 0..3000 {
        c.cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "n"]);
    }
    let lua: u64 = server.info_in("memory", "used_memory_lua").parse().unwrap();
    assert!(lua < 100 * 1024, "used_memory_lua {lua}");
}
