//! The general-purpose surface of the blocking client against a real server: connecting with every option,
//! the typed methods, arbitrary commands, conversions, pipelines, transactions and error reporting.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::Server;
use ruvio_client::{cmd, pipe, Client, ClientBuilder, Cmd, ErrorKind, Pipeline, Protocol, Value, DEFAULT_COMMAND_TIMEOUT};

#[test]
fn connect_with_defaults_and_basic_methods() {
    let server = Server::start();
    let mut db = Client::connect("127.0.0.1", server.port).unwrap();
    assert!(db.is_connected());
    assert_eq!(db.protocol(), Protocol::Resp2);
    assert_eq!(db.command_timeout(), Some(DEFAULT_COMMAND_TIMEOUT));
    db.ping().unwrap();

    assert_eq!(db.get::<String>("k").unwrap(), None);
    db.set("k", "v").unwrap();
    assert_eq!(db.get::<String>("k").unwrap(), Some("v".to_string()));
    assert_eq!(db.get::<Vec<u8>>("k").unwrap(), Some(b"v".to_vec()));
    assert!(db.exists("k").unwrap());
    assert_eq!(db.del("k").unwrap(), 1);
    assert_eq!(db.del("k").unwrap(), 0);
    assert!(!db.exists("k").unwrap());

    assert_eq!(db.incr("n", 5).unwrap(), 5);
    assert_eq!(db.incr("n", -2).unwrap(), 3);
    assert_eq!(db.get::<i64>("n").unwrap(), Some(3));

    db.set_px("short", 1, 50).unwrap();
    let pttl: i64 = cmd("PTTL").arg("short").query(&mut db).unwrap();
    assert!(pttl > 0 && pttl <= 50, "pttl {pttl}");
    let bounded = std::time::Instant::now() + Duration::from_secs(2);
    while db.exists("short").unwrap() {
        assert!(std::time::Instant::now() < bounded, "key with PX 50 did not expire");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn builder_options_password_user_db_name_protocol() {
    let server = Server::start_with(&["--requirepass", "s3cret"]);

    // Without a password a RESP2 connection opens, and the server answers NOAUTH to commands.
    let mut anonymous = server.client();
    assert_eq!(anonymous.ping().unwrap_err().code(), Some("NOAUTH"));

    let e = server.builder().password("wrong").connect().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(e.code(), Some("WRONGPASS"));

    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut db = server
            .builder()
            .username("default")
            .password("s3cret")
            .db(3)
            .client_name("billing-worker")
            .protocol(protocol)
            .connect()
            .unwrap();
        assert_eq!(db.protocol(), protocol);
        db.set("where", "db3").unwrap();
        let name: String = cmd("CLIENT").arg("GETNAME").query(&mut db).unwrap();
        assert_eq!(name, "billing-worker");
        let hello: Value = cmd("HELLO").query(&mut db).unwrap();
        let fields: HashMap<String, Value> = ruvio_client::FromValue::from_value(hello.clone()).unwrap();
        assert_eq!(fields["proto"], Value::Integer(if protocol == Protocol::Resp3 { 3 } else { 2 }));
        match protocol {
            Protocol::Resp3 => assert!(matches!(hello, Value::Map(_)), "{hello:?}"),
            Protocol::Resp2 => assert!(matches!(hello, Value::Array(_)), "{hello:?}"),
        }
    }

    let shown = format!("{:?}", server.builder().password("s3cret").connect().unwrap());
    assert!(!shown.contains("s3cret") && shown.contains("<redacted>"), "Debug must not show the password: {shown}");

    // Database 3 has the key, database 0 does not; the password alone (no user) also works.
    let mut db0 = server.builder().password("s3cret").connect().unwrap();
    assert_eq!(db0.get::<String>("where").unwrap(), None);
    let mut db3 = server.builder().password("s3cret").db(3).connect().unwrap();
    assert_eq!(db3.get::<String>("where").unwrap().as_deref(), Some("db3"));

    let e = server.builder().password("s3cret").db(99_999).connect().unwrap_err();
    assert!(e.is_server_error(), "{e}");
}

#[test]
fn arbitrary_commands_and_conversions() {
    let server = Server::start();
    let mut db = server.client();

    assert_eq!(db.command(&["SET", "k", "42"]).unwrap(), Value::Simple("OK".into()));
    assert_eq!(db.command(&["GET", "k"]).unwrap(), Value::Bulk("42".into()));
    assert_eq!(db.command(&["GET", "nope"]).unwrap(), Value::Nil);
    // Error replies stay values here.
    assert!(db.command(&["NOSUCHCOMMAND"]).unwrap().is_error());
    assert!(db.command::<&str>(&[]).is_err());

    let k = cmd("GET").arg("k");
    assert_eq!(k.parts().len(), 2);
    assert_eq!(k.query::<i64>(&mut db).unwrap(), 42);
    assert_eq!(db.query::<u64>(&k).unwrap(), 42);
    assert_eq!(db.query::<String>(&k).unwrap(), "42");
    assert_eq!(db.query::<f64>(&k).unwrap(), 42.0);
    assert_eq!(db.query::<Option<i32>>(&cmd("GET").arg("nope")).unwrap(), None);
    assert!(db.query::<bool>(&cmd("SET").arg("flag").arg(1)).unwrap());

    let e = db.query::<i64>(&cmd("GET").arg("nope")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);

    // Binary-safe arguments and replies.
    let blob: Vec<u8> = (0..=255).collect();
    cmd("SET").arg("blob").arg(&blob[..]).query::<()>(&mut db).unwrap();
    assert_eq!(db.get::<Vec<u8>>("blob").unwrap(), Some(blob));
    assert_eq!(db.get::<bytes::Bytes>("k").unwrap().as_deref(), Some(&b"42"[..]));

    // Large replies: one 3 MB value, and 20 000 small ones in one array.
    let big = "x".repeat(3 * 1024 * 1024);
    db.set("big", &big).unwrap();
    assert_eq!(db.get::<String>("big").unwrap().map(|v| v.len()), Some(big.len()));
    let keys: Vec<String> = (0..20_000).map(|i| format!("many:{i}")).collect();
    let many: Vec<Option<String>> = cmd("MGET").args(&keys).query(&mut db).unwrap();
    assert_eq!(many.len(), keys.len());

    cmd("MSET").args(["a", "1", "b", "2"]).query::<()>(&mut db).unwrap();
    let both: Vec<Option<i64>> = cmd("MGET").args(["a", "b", "c"]).query(&mut db).unwrap();
    assert_eq!(both, vec![Some(1), Some(2), None]);
    let pair: (String, String) = cmd("MGET").args(["a", "b"]).query(&mut db).unwrap();
    assert_eq!(pair, ("1".to_string(), "2".to_string()));

    let hello: HashMap<String, Value> = cmd("HELLO").query(&mut db).unwrap();
    assert_eq!(hello["server"], Value::Bulk("ruvio".into()));
}

#[test]
fn server_errors_carry_their_code() {
    let server = Server::start();
    let mut db = server.client();
    db.set("s", "text").unwrap();
    let e = db.incr("s", 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert!(e.is_server_error() && !e.is_io_error() && !e.is_timeout() && !e.is_connection_dropped());
    assert_eq!(e.code(), Some("ERR"));
    assert!(e.detail().contains("not an integer"), "{e}");

    let e = db.query::<Value>(&cmd("SET").arg("s")).map(|v| v.error_code().map(str::to_string));
    assert_eq!(e.unwrap().as_deref(), Some("ERR"), "Value keeps error replies as values");
    let e = db.query::<Option<String>>(&cmd("NOSUCHCOMMAND")).unwrap_err();
    assert_eq!(e.code(), Some("ERR"));
    assert!(e.to_string().starts_with("server error: ERR unknown command"), "{e}");
    // The connection stays usable after error replies.
    db.ping().unwrap();
}

#[test]
fn pipelines_and_transactions() {
    let server = Server::start();
    let mut db = server.client();

    let empty: Vec<Value> = Pipeline::new().query(&mut db).unwrap();
    assert!(empty.is_empty());

    let p = pipe().cmd("SET").arg("a").arg(1).ignore().cmd("INCR").arg("a").cmd("GET").arg("missing");
    assert_eq!(p.len(), 3);
    assert!(!p.is_empty());
    let (a, missing): (i64, Option<String>) = p.query(&mut db).unwrap();
    assert_eq!((a, missing), (2, None));

    // Per-command errors: visible as values, or the first one as Err.
    let p = pipe().cmd("INCR").arg("a").cmd("NOSUCHCOMMAND").cmd("INCR").arg("a");
    let all: Vec<Value> = p.query(&mut db).unwrap();
    assert_eq!(all[0], Value::Integer(3));
    assert!(all[1].is_error());
    assert_eq!(all[2], Value::Integer(4));
    assert!(p.query::<Vec<i64>>(&mut db).is_err());

    // MULTI/EXEC.
    let done: Option<(i64, i64)> =
        pipe().atomic().cmd("INCR").arg("x").add_command(cmd("INCRBY").arg("x").arg(10)).query(&mut db).unwrap();
    assert_eq!(done, Some((1, 11)));

    // A command refused while queueing aborts the whole transaction and reports why.
    let e = pipe().atomic().cmd("INCR").arg("x").cmd("NOSUCHCOMMAND").query::<Value>(&mut db).unwrap_err();
    assert!(e.is_server_error(), "{e}");
    assert_eq!(db.get::<i64>("x").unwrap(), Some(11));

    // A WATCHed key changed by someone else: EXEC answers nil.
    let mut other = server.client();
    cmd("WATCH").arg("x").query::<()>(&mut db).unwrap();
    other.set("x", 100).unwrap();
    let aborted: Option<(i64,)> = pipe().atomic().cmd("INCR").arg("x").query(&mut db).unwrap();
    assert_eq!(aborted, None);
    assert_eq!(db.get::<i64>("x").unwrap(), Some(100));

    // Raw MULTI/EXEC through cmd works as well.
    cmd("MULTI").query::<()>(&mut db).unwrap();
    let queued: String = cmd("INCR").arg("x").query(&mut db).unwrap();
    assert_eq!(queued, "QUEUED");
    let exec: Vec<i64> = cmd("EXEC").query(&mut db).unwrap();
    assert_eq!(exec, vec![101]);
}

#[test]
fn disconnect_and_command_timeout_setting() {
    let server = Server::start();
    let mut db = server.client();
    db.disconnect();
    assert!(!db.is_connected());
    db.ping().unwrap();
    assert!(db.is_connected());
    db.set_command_timeout(Some(Duration::from_millis(300)));
    assert_eq!(db.command_timeout(), Some(Duration::from_millis(300)));
    db.set_command_timeout(None);
    assert_eq!(db.command_timeout(), None);
    db.ping().unwrap();
    let replies: Vec<String> = db.query_pipeline(&Pipeline::new().add_command(Cmd::new("ECHO").arg("x"))).unwrap();
    assert_eq!(replies, vec!["x".to_string()]);
    ClientBuilder::new("127.0.0.1", server.port).connect().unwrap().ping().unwrap();
    // A second client from the same options reaches the same server.
    let mut twin = db.options().clone().connect().unwrap();
    twin.ping().unwrap();
}
