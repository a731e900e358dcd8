//! Issue 11, items 5-8 and 13, against started `ruvio` processes: CLIENT KILL filters, maxclients against the
//! open files limit, a missing manifest, two servers on one data folder, and colourless logs when not on a terminal.

mod common;

use std::io::ErrorKind;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, is_ok, start, temp_dir, Conn, Server};
use ruvio_protocol::Value;

fn err_text(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        other => panic!("expected an integer reply, got {other:?}"),
    }
}

fn text(v: &Value) -> String {
    String::from_utf8_lossy(v.as_bytes().unwrap_or_else(|| panic!("expected a string reply, got {v:?}"))).into_owned()
}

/// The connection was closed by the server (EOF or reset), not merely silent.
fn assert_closed(c: &mut Conn, what: &str) {
    c.set_timeout(Duration::from_secs(20));
    match c.read_reply() {
        Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
        other => panic!("{what}: expected the server to close the connection, got {other:?}"),
    }
}

fn assert_alive(c: &mut Conn, what: &str) {
    let v = c.try_cmd(&["PING"]).unwrap_or_else(|e| panic!("{what}: connection is gone: {e}"));
    assert_eq!(v, Value::Simple("PONG".into()), "{what}");
}

fn client_field(c: &mut Conn, field: &str) -> String {
    let info = text(&c.cmd(&["CLIENT", "INFO"]));
    info.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{field}="))).unwrap_or_else(|| panic!("no {field} in {info}")).to_string()
}

fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- item 5: CLIENT KILL filters ----

#[test]
fn client_kill_filters_narrow_and_never_widen() {
    let dir = temp_dir("kill-filters");
    let server = start(&dir, &[]);
    let mut admin = server.conn();
    let mut normal = server.conn();
    let mut holder = server.conn();
    assert!(matches!(holder.cmd(&["LEASE", "kf:lock", "60000"]), Value::Integer(t) if t > 0));
    let mut sub = server.conn();
    sub.send(&["SUBSCRIBE", "kf:chan"]).unwrap();
    assert!(matches!(sub.read_reply().unwrap(), Value::Array(_) | Value::Push(_)));

    // Errors, in Redis's words; nobody is killed by a refused command.
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "TYPE", "bogus"])), "ERR Unknown client type 'bogus'");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "USER", "nobody"])), "ERR No such user 'nobody'");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "MAXAGE", "0"])), "ERR maxage should be greater than 0");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "MAXAGE", "-5"])), "ERR maxage should be greater than 0");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "MAXAGE", "soon"])), "ERR maxage is not an integer or out of range");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "ID", "0"])), "ERR client-id should be greater than 0");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "ID", "abc"])), "ERR client-id should be greater than 0");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "COLOR", "red"])), "ERR syntax error");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "SKIPME", "maybe"])), "ERR syntax error");
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub", "ID"])), "ERR syntax error");
    // The old form names one address and answers OK or an error.
    assert_eq!(err_text(&admin.cmd(&["CLIENT", "KILL", "127.0.0.1:1"])), "ERR No such client");

    // No connection is older than an hour: nobody goes.
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "MAXAGE", "3600"])), 0);
    // Filters are AND-ed: the normal client is not a pub/sub one.
    let normal_id = int(&normal.cmd(&["CLIENT", "ID"])).to_string();
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "ID", &normal_id, "TYPE", "pubsub"])), 0);
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "TYPE", "master"])), 0);
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "TYPE", "replica"])), 0);
    assert_alive(&mut normal, "after filters that match nobody");
    assert_alive(&mut holder, "lock holder after filters that match nobody");

    // TYPE pubsub takes the subscriber only: the lock holder and the normal client stay.
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])), 1);
    assert_closed(&mut sub, "subscriber after KILL TYPE pubsub");
    assert_alive(&mut normal, "normal client after KILL TYPE pubsub");
    assert_alive(&mut holder, "lock holder after KILL TYPE pubsub");
    assert_alive(&mut admin, "caller after KILL TYPE pubsub");

    // USER default (every connection's user) AND an id: just that one.
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "USER", "default", "ID", &normal_id])), 1);
    assert_closed(&mut normal, "KILL USER default ID");
    assert_alive(&mut holder, "lock holder after KILL USER default ID");

    // LADDR AND ID.
    let mut by_laddr = server.conn();
    let laddr = client_field(&mut by_laddr, "laddr");
    let laddr_id = int(&by_laddr.cmd(&["CLIENT", "ID"])).to_string();
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "LADDR", &laddr, "ID", &laddr_id])), 1);
    assert_closed(&mut by_laddr, "KILL LADDR ID");

    // ADDR, with TYPE normal AND-ed.
    let mut by_addr = server.conn();
    let addr = client_field(&mut by_addr, "addr");
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "ADDR", &addr, "TYPE", "pubsub"])), 0);
    assert_eq!(int(&admin.cmd(&["CLIENT", "KILL", "ADDR", &addr, "TYPE", "normal"])), 1);
    assert_closed(&mut by_addr, "KILL ADDR TYPE normal");

    // MAXAGE: only connections strictly older than the age (whole seconds) go. The holder is 2 s old, a new one
    // is not.
    std::thread::sleep(Duration::from_millis(2500));
    let mut young = server.conn();
    assert_alive(&mut young, "young client");
    let mut admin2 = server.conn();
    assert_eq!(int(&admin2.cmd(&["CLIENT", "KILL", "MAXAGE", "1"])), 2, "the holder and the first caller are over 1 s old");
    assert_closed(&mut holder, "lock holder after KILL MAXAGE 1");
    assert_closed(&mut admin, "old caller after KILL MAXAGE 1");
    assert_alive(&mut young, "young client after KILL MAXAGE 1");

    // TYPE normal with the default SKIPME yes spares the caller; SKIPME no takes it too, after its reply.
    assert_eq!(int(&admin2.cmd(&["CLIENT", "KILL", "TYPE", "normal"])), 1);
    assert_closed(&mut young, "KILL TYPE normal");
    assert_alive(&mut admin2, "caller with SKIPME yes");
    assert_eq!(int(&admin2.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"])), 1);
    assert_closed(&mut admin2, "caller with SKIPME no");
}

// ---- item 6: maxclients and the open files limit ----

#[test]
fn config_set_maxclients_refuses_zero_and_absurd_values() {
    let dir = temp_dir("maxclients-set");
    let server = start(&dir, &[]);
    let mut c = server.conn();
    for bad in ["0", "-1", "4294967296", "99999999999"] {
        assert_eq!(
            err_text(&c.cmd(&["CONFIG", "SET", "maxclients", bad])),
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive",
            "maxclients {bad}"
        );
    }
    assert!(err_text(&c.cmd(&["CONFIG", "SET", "maxclients", "lots"])).contains("argument couldn't be parsed into an integer"));
    // Within the type's range but far past what the kernel allows (fs.nr_open is at most 2^30).
    let e = err_text(&c.cmd(&["CONFIG", "SET", "maxclients", "4294967295"]));
    assert!(
        e.starts_with("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with "),
        "{e}"
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxclients"]), Value::Array(vec![Value::bulk_str("maxclients"), Value::bulk_str("10000")]));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "maxclients", "500"])));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "maxclients", "10000"])));
    // A start-up value of 0 is refused too.
    let out = Command::new(env!("CARGO_BIN_EXE_ruvio")).args(["--dir", dir.to_str().unwrap(), "--port", &free_port().to_string(), "--maxclients", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 1 and 4294967295"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Starts ruvio with RLIMIT_NOFILE set to `soft`/`hard` (as `ulimit -n` in a shell wrapper would).
fn spawn_with_nofile(dir: &Path, soft: u64, hard: u64, extra: &[&str]) -> Server {
    let port = free_port();
    let stderr_path = dir.join(format!("stderr-{port}.log"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ruvio"));
    cmd.args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()]).args(extra).stdout(Stdio::null()).stderr(std::fs::File::create(&stderr_path).unwrap());
    // SAFETY: only an async-signal-safe setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let l = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawning ruvio");
    Server { child, port, dir: dir.to_path_buf(), stderr_path }
}

fn nofile_soft_limit(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn maxclients_is_fitted_to_the_open_files_limit_and_extra_clients_are_told() {
    // A hard limit of 64 descriptors that no process can raise past (maxclients is far above fs.nr_open, so even
    // root cannot make room): maxclients is lowered at start with Redis's warning.
    let dir = temp_dir("maxclients-ulimit");
    let server = spawn_with_nofile(&dir, 64, 64, &["--maxclients", "2000000", "--io-threads", "1"]);
    server.wait_ready(Duration::from_secs(60));
    let mut first = server.conn();
    let got = first.cmd(&["CONFIG", "GET", "maxclients"]);
    let Value::Array(items) = &got else { panic!("{got:?}") };
    let max: usize = text(&items[1]).parse().unwrap();
    assert!((1..64).contains(&max), "maxclients must be lowered under 'ulimit -n 64', is {max}");
    let log = server.stderr();
    assert!(log.contains(&format!("maxclients has been reduced to {max}")), "{log}");

    // Fill every slot (the first connection holds one), then the next one is told and closed, many times over.
    let mut held = vec![first];
    while held.len() < max {
        let mut c = server.conn();
        assert_alive(&mut c, &format!("client {} of {max}", held.len() + 1));
        held.push(c);
    }
    for i in 0..100 {
        let mut extra = server.conn();
        extra.set_timeout(Duration::from_secs(20));
        match extra.read_reply() {
            Ok(v) => assert_eq!(err_text(&v), "ERR max number of clients reached", "extra connection {i}"),
            Err(e) => panic!("extra connection {i}: no answer ({e})"),
        }
        assert_closed(&mut extra, &format!("extra connection {i}"));
    }
    // Room again once one leaves.
    drop(held.pop());
    let start_wait = Instant::now();
    loop {
        let mut c = server.conn();
        if let Ok(Value::Simple(s)) = c.try_cmd(&["PING"]) {
            assert_eq!(&s[..], b"PONG");
            break;
        }
        assert!(start_wait.elapsed() < Duration::from_secs(20), "a freed slot was never reused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_alive(&mut held[0], "a client admitted before the limit");
    let rejected = {
        let info = text(&held[0].cmd(&["INFO", "stats"]));
        info.lines().find_map(|l| l.strip_prefix("rejected_connections:")).unwrap().trim().parse::<u64>().unwrap()
    };
    assert!(rejected >= 100, "rejected_connections {rejected}");
    let log = server.stderr();
    assert!(log.matches("accept").count() <= 2, "accept failures flood the log: {log}");
}

#[test]
fn a_low_soft_limit_is_raised_to_fit_maxclients() {
    let dir = temp_dir("maxclients-raise");
    let server = spawn_with_nofile(&dir, 64, 4096, &["--maxclients", "1000", "--io-threads", "1"]);
    server.wait_ready(Duration::from_secs(60));
    let mut c = server.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxclients"]), Value::Array(vec![Value::bulk_str("maxclients"), Value::bulk_str("1000")]));
    assert!(nofile_soft_limit(server.child.id()) >= 1000, "soft limit not raised: {}", nofile_soft_limit(server.child.id()));
    // CONFIG SET raises it again when it can, and says what fits when it cannot.
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "maxclients", "3000"])));
    assert!(nofile_soft_limit(server.child.id()) >= 3000);
}

// ---- item 7: a missing manifest ----

#[test]
fn a_missing_manifest_never_costs_the_log_files() {
    let dir = temp_dir("no-manifest");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..200 {
        assert!(is_ok(&c.cmd(&["SET", &format!("nm:{i}"), &"v".repeat(100)])));
    }
    drop(c);
    server.stop();
    let incrs = common::incr_files(&dir);
    assert_eq!(incrs.len(), 1, "{incrs:?}");
    let before = std::fs::read(&incrs[0]).unwrap();
    assert!(before.len() > 20_000);
    let manifest = dir.join("appendonly.aof.manifest");
    let saved = std::fs::read(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();

    // Refuses to start, names the files, and leaves them as they were.
    let mut second = common::spawn(&dir, &[]);
    let st = wait_exit(&mut second.child, Duration::from_secs(60));
    assert!(!st.success(), "started without its manifest");
    let log = second.stderr();
    let fname = incrs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(log.contains(&fname) && log.contains("appendonly.aof.manifest") && log.contains("missing"), "{log}");
    assert_eq!(std::fs::read(&incrs[0]).unwrap(), before, "the log file was changed");
    assert!(!manifest.exists(), "a manifest was written over the missing one");

    // With the manifest back, everything is there.
    std::fs::write(&manifest, &saved).unwrap();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(200));
    assert_eq!(text(&c.cmd(&["GET", "nm:199"])), "v".repeat(100));
}

#[test]
fn new_log_files_never_land_on_leftover_files() {
    let dir = temp_dir("leftover-gen");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    assert!(is_ok(&server.conn().cmd(&["SET", "lg:a", "1"])));
    server.stop();
    // A file of the next generation, unlisted (a crash between creating a file and listing it).
    let leftover = dir.join("appendonly.aof.2.incr");
    std::fs::write(&leftover, b"not ours to overwrite").unwrap();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let v = c.cmd(&["BGREWRITEAOF"]);
    assert!(matches!(v, Value::Simple(_)), "{v:?}");
    let start_wait = Instant::now();
    while server.info_field("aof_rewrite_in_progress") != "0" || server.info_field("aof_rewrites") == "0" {
        assert!(start_wait.elapsed() < Duration::from_secs(60), "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.info_field("aof_last_bgrewrite_status"), "ok");
    assert_eq!(std::fs::read(&leftover).unwrap(), b"not ours to overwrite");
    let m = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    assert!(!m.contains("appendonly.aof.2."), "{m}");
    assert!(is_ok(&c.cmd(&["SET", "lg:b", "2"])));
    assert_eq!(text(&c.cmd(&["GET", "lg:a"])), "1");
}

// ---- item 8: one server per data folder ----

#[test]
fn a_second_server_on_the_same_dir_refuses_to_start() {
    let dir = temp_dir("dir-lock");
    let mut first = start(&dir, &["--appendfsync", "always"]);
    let mut c = first.conn();
    assert!(is_ok(&c.cmd(&["SET", "dl:k", "1"])));

    let mut second = common::spawn(&dir, &[]);
    let st = wait_exit(&mut second.child, Duration::from_secs(60));
    assert!(!st.success(), "a second server started on the same --dir");
    let log = second.stderr();
    assert!(log.contains(dir.to_str().unwrap()) && log.contains("in use"), "{log}");
    assert!(log.contains(&format!("pid {}", first.child.id())), "{log}");
    // The first one is unharmed.
    assert_eq!(text(&c.cmd(&["GET", "dl:k"])), "1");
    assert!(is_ok(&c.cmd(&["SET", "dl:k", "2"])));

    // The lock dies with its process, even after kill -9: the next server starts.
    first.kill9();
    let third = start(&dir, &[]);
    assert_eq!(text(&third.conn().cmd(&["GET", "dl:k"])), "2");
}

// ---- item 13: no colour codes unless on a terminal ----

#[test]
fn logs_to_a_file_carry_no_colour_codes() {
    let dir = temp_dir("no-ansi");
    let port = free_port();
    let log_path = dir.join("ruvio.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap(), "--loglevel", "verbose"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let start_wait = Instant::now();
    let mut c = loop {
        if let Ok(mut c) = Conn::try_connect(port) {
            if c.try_cmd(&["PING"]).is_ok() {
                break c;
            }
        }
        assert!(start_wait.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(is_ok(&c.cmd(&["SET", "na:k", "v"])));
    drop(c);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(wait_exit(&mut child, Duration::from_secs(60)).success());
    let bytes = std::fs::read(&log_path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("ready to accept connections") && text.contains("INFO"), "{text}");
    assert!(!bytes.contains(&0x1b), "ESC bytes in a log written to a file: {text:?}");
}
