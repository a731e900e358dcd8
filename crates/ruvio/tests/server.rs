//! The binary as an operator meets it: configuration, start-up errors, graceful shutdown, protected mode.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bulk, is_ok, start, temp_dir};
use ruvio_protocol::Value;

fn ruvio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ruvio"))
}

#[test]
fn unknown_config_names_are_a_clear_start_up_error() {
    let dir = temp_dir("badflag");
    let out = ruvio().args(["--dir", dir.to_str().unwrap(), "--no-such-setting", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-setting"), "{err}");

    let conf = dir.join("bad.conf");
    std::fs::write(&conf, "port 7000\nmaxclients 10\nbogus-name yes\n").unwrap();
    let out = ruvio().args(["--config", conf.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bogus-name") && err.contains("bad.conf:3"), "{err}");
}

#[test]
fn config_file_is_read_and_flags_override_it() {
    let dir = temp_dir("conffile");
    let conf = dir.join("ruvio.conf");
    std::fs::write(&conf, "# a comment\nmaxclients 77\ntimeout 300\nhz 20\nappendfsync \"no\"\n").unwrap();
    let server = start(&dir, &["--config", conf.to_str().unwrap(), "--timeout", "42"]);
    let mut c = server.conn();
    let got = c.cmd(&["CONFIG", "GET", "maxclients"]);
    assert_eq!(got, Value::Array(vec![Value::bulk_str("maxclients"), Value::bulk_str("77")]));
    let got = c.cmd(&["CONFIG", "GET", "timeout"]);
    assert_eq!(got, Value::Array(vec![Value::bulk_str("timeout"), Value::bulk_str("42")]));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "hz", "50"])));
    let got = c.cmd(&["CONFIG", "GET", "h?"]);
    assert_eq!(got, Value::Array(vec![Value::bulk_str("hz"), Value::bulk_str("50")]));
    let err = c.cmd(&["CONFIG", "SET", "port", "1"]);
    assert!(matches!(&err, Value::Error(e) if e.starts_with(b"ERR CONFIG SET failed")), "{err:?}");
}

#[test]
fn help_and_version() {
    let out = ruvio().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ruvio "));
    let out = ruvio().arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("--requirepass"));
}

#[test]
fn sigterm_lets_in_flight_replies_out_and_exits_zero() {
    let dir = temp_dir("sigterm");
    let mut server = start(&dir, &[]);
    let mut c = server.conn();
    // A pipelined batch; the reply to all of it must arrive even though SIGTERM follows at once.
    let mut batch = Vec::new();
    for i in 0..2000 {
        batch.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$6\r\nk{i:05}\r\n$1\r\nv\r\n").as_bytes());
    }
    batch.extend_from_slice(b"*1\r\n$6\r\nDBSIZE\r\n");
    let port = server.port;
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(&batch).unwrap();
    // Wait for the first reply byte so the batch is known to be in the server's hands.
    let mut first = [0u8; 1];
    raw.read_exact(&mut first).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    assert!(rest.ends_with(b":2000\r\n"), "last reply missing; got {} bytes", rest.len());
    drop(c.try_cmd(&["PING"]));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "server did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(server.stderr().contains("ready to exit"), "{}", server.stderr());
}

#[test]
fn shutdown_command_stops_the_server() {
    let dir = temp_dir("shutdowncmd");
    let mut server = start(&dir, &[]);
    let mut c = server.conn();
    assert!(is_ok(&c.cmd(&["SET", "a", "1"])));
    let _ = c.try_cmd(&["SHUTDOWN"]);
    let started = Instant::now();
    while server.child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(10), "SHUTDOWN did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The write before SHUTDOWN survives a restart on the same folder.
    let server = start(&dir, &[]);
    assert_eq!(bulk(&server.conn().cmd(&["GET", "a"])).as_deref(), Some("1"));
}

/// Runs `args` inside network namespace `ns`.
fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("the `ip` tool (iproute2) is required for this test");
    assert!(st.success(), "ip {args:?} failed (this test needs root to create a network namespace)");
}

struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Protected mode: without a password, a client whose address is not loopback is refused with -DENIED; loopback
/// clients and, once a password is set, authenticated remote clients are served. The test builds a private network
/// namespace whose only interface, lo, also carries a documentation-range address (192.0.2.1): connections from it
/// are not loopback connections, and no traffic can leave the namespace.
#[test]
fn protected_mode_denies_non_loopback_clients_without_a_password() {
    let ns = Netns(format!("ruvio-pm-{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
    ip(&["-n", &ns.0, "addr", "add", "192.0.2.1/32", "dev", "lo"]);
    let dir = temp_dir("protected");
    let start_in_ns = |extra: &[&str]| {
        let mut args = vec![env!("CARGO_BIN_EXE_ruvio"), "--port", "6390", "--dir", dir.to_str().unwrap(), "--bind", "127.0.0.1", "192.0.2.1"];
        args.extend_from_slice(extra);
        in_ns(&ns.0, &args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
    };
    // A tiny client inside the namespace: connect from 192.0.2.1 (not loopback), send PING, print the reply.
    let probe = |host: &str, auth: Option<&str>| -> String {
        let script = format!(
            "import socket,time\nfor _ in range(100):\n  try:\n    s=socket.create_connection(('{host}',6390),timeout=2); break\n  except OSError: time.sleep(0.05)\n{}s.sendall(b'*1\\r\\n$4\\r\\nPING\\r\\n')\ntime.sleep(0.2)\nprint(s.recv(4096).decode(errors='replace'))",
            auth.map(|p| format!("s.sendall(b'*2\\r\\n$4\\r\\nAUTH\\r\\n${}\\r\\n{p}\\r\\n')\n", p.len())).unwrap_or_default()
        );
        let out = in_ns(&ns.0, &["python3", "-c", &script]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut server = start_in_ns(&[]);
    let remote = probe("192.0.2.1", None);
    assert!(remote.starts_with("-DENIED Redis is running in protected mode"), "{remote}");
    let local = probe("127.0.0.1", None);
    assert!(local.starts_with("+PONG"), "{local}");
    let _ = server.kill();
    let _ = server.wait();

    let mut server = start_in_ns(&["--requirepass", "pw"]);
    let remote = probe("192.0.2.1", Some("pw"));
    assert!(remote.contains("+OK") && remote.contains("+PONG"), "{remote}");
    let _ = server.kill();
    let _ = server.wait();
}

/// The coordinator's protected mode (docs/coordinator.md): bound to every interface with no `requirepass`, it
/// refuses clients from other hosts with Redis's DENIED text and serves loopback ones; other coordinators get in
/// by logging in with sentinel-user/sentinel-pass first; `requirepass`, a chosen `bind` list or `protected-mode
/// no` lift it. As the server's test above: a private network namespace whose lo also carries 192.0.2.1, so a
/// connection from that address is a real non-loopback TCP connection and nothing leaves the namespace.
#[test]
fn coordinator_protected_mode_denies_non_loopback_clients_without_a_password() {
    let ns = Netns(format!("ruvio-cpm-{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
    ip(&["-n", &ns.0, "addr", "add", "192.0.2.1/32", "dev", "lo"]);
    let dir = temp_dir("coordinator-protected");
    let start_in_ns = |conf_lines: &str| {
        let conf = dir.join("c.conf");
        std::fs::write(&conf, format!("port 26390\ndir {}\nsentinel monitor m 127.0.0.1 1 1\n{conf_lines}", dir.display())).unwrap();
        in_ns(&ns.0, &[env!("CARGO_BIN_EXE_ruvio"), "coordinator", "--config", conf.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // A client inside the namespace: connect to `host` (from that same address), send the commands, print what came
    // back (the connection's whole output within 0.3 s). A refused connection is closed by the server right after
    // DENIED, as Redis does, without reading what the client sent: if those bytes were still unread, the kernel ends
    // the connection with a reset instead of a FIN, so both count as closed.
    let probe = |host: &str, cmds: &[&[&str]]| -> String {
        let resp: String = cmds
            .iter()
            .map(|c| format!("*{}\\r\\n{}", c.len(), c.iter().map(|a| format!("${}\\r\\n{a}\\r\\n", a.len())).collect::<String>()))
            .collect();
        let script = format!(
            "import socket,time\nfor _ in range(100):\n  try:\n    s=socket.create_connection(('{host}',26390),timeout=2); break\n  except OSError: time.sleep(0.05)\ns.sendall(b'{resp}')\ntime.sleep(0.3)\nout=b''\ns.settimeout(0.5)\ntry:\n  while True:\n    d=s.recv(4096)\n    if not d: out+=b'<closed>'; break\n    out+=d\nexcept ConnectionResetError: out+=b'<closed>'\nexcept OSError: pass\nprint(out.decode(errors='replace'))"
        );
        let out = in_ns(&ns.0, &["python3", "-c", &script]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ping: &[&str] = &["PING"];

    // Every interface, no password: a remote client is refused (and disconnected), a loopback one served.
    let mut co = start_in_ns("bind 0.0.0.0\n");
    let remote = probe("192.0.2.1", &[ping]);
    assert!(remote.starts_with("-DENIED Redis is running in protected mode") && remote.contains("<closed>"), "{remote}");
    let local = probe("127.0.0.1", &[ping]);
    assert!(local.starts_with("+PONG"), "{local}");
    let _ = co.kill();
    let _ = co.wait();

    // With the coordinators' own login: a remote connection may log in as a coordinator, and nothing else.
    let mut co = start_in_ns("bind 0.0.0.0\nsentinel sentinel-user peer\nsentinel sentinel-pass peerpw\n");
    let remote = probe("192.0.2.1", &[ping]);
    assert!(remote.starts_with("-DENIED Redis is running in protected mode") && remote.contains("<closed>"), "{remote}");
    let remote = probe("192.0.2.1", &[&["AUTH", "peer", "wrong"], ping]);
    assert!(remote.starts_with("-WRONGPASS") && remote.contains("-DENIED") && remote.contains("<closed>"), "{remote}");
    let peer = probe("192.0.2.1", &[&["AUTH", "peer", "peerpw"], ping]);
    assert!(peer.starts_with("+OK\r\n+PONG"), "{peer}");
    let _ = co.kill();
    let _ = co.wait();

    // A client password, a chosen bind list, or protected-mode no: remote clients are served.
    for conf in ["bind 0.0.0.0\nrequirepass pw\n", "bind 127.0.0.1 192.0.2.1\n", "bind 0.0.0.0\nprotected-mode no\n"] {
        let mut co = start_in_ns(conf);
        let cmds: Vec<&[&str]> = if conf.contains("requirepass") { vec![&["AUTH", "pw"], ping] } else { vec![ping] };
        let remote = probe("192.0.2.1", &cmds);
        assert!(remote.contains("+PONG") && !remote.contains("DENIED"), "{conf}: {remote}");
        let _ = co.kill();
        let _ = co.wait();
    }
}
