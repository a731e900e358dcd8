//! Fencing tokens inside Lua scripts (issue 34, item 15): Lua 5.1 numbers are doubles, and every token of epoch 1
//! and above is beyond 2^53, where a double rounds it. Lock commands called from a script give the token to Lua as
//! an exact decimal string and take it back as a string (or as a number a double holds exactly); a larger Lua number
//! is refused. Checked at epochs 0, 1, 7 and 1023 (raised with `REPLICAOF NO ONE EPOCH e [FORCE]` as the built-in
//! coordinator user, the operators' and coordinators' path), against the real binary.

mod common;

use common::*;
use ruvio_protocol::Value;

/// The token a script returned: a bulk string of decimal digits (never an integer reply).
fn token_string(v: &Value) -> i64 {
    match v {
        Value::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap_or_else(|_| panic!("not a token: {v:?}")),
        other => panic!("expected the token as a bulk string, got {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn err(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn epoch_of(token: i64) -> i64 {
    token >> 53
}

/// The holder tokens LOCKINFO shows a plain client (RESP2: integers).
fn holders(c: &mut Conn, key: &str) -> Vec<i64> {
    let Value::Array(fields) = c.cmd(&["LOCKINFO", key]) else { return Vec::new() };
    let Value::Array(hs) = &fields[5] else { panic!("LOCKINFO {fields:?}") };
    hs.iter()
        .map(|h| match h {
            Value::Array(h) => int(&h[1]),
            other => panic!("holder {other:?}"),
        })
        .collect()
}

/// docs/scripting.md's "lease + fenced write" script.
const LEASE_AND_FENCED_WRITE: &str = "local t = redis.call('lease', KEYS[1], 30000); if not t then return false end; redis.call('ifgt', KEYS[2], t, ARGV[1]); return t";

/// `t1 = LEASE; RELEASE t1; t2 = LEASE; IFGT data t2 'new'; IFGT data t1 'stale'` in one script.
const TWO_HOLDERS: &str = "local t1 = redis.call('LEASE', KEYS[1], 30000) \
    local r = redis.call('RELEASE', KEYS[1], t1) \
    local t2 = redis.call('LEASE', KEYS[1], 30000) \
    local new = redis.call('IFGT', KEYS[2], t2, 'new') \
    local stale = redis.call('IFGT', KEYS[2], t1, 'stale') \
    return {t1, r, t2, new, stale}";

/// Every lock command inside a script, at one epoch.
fn check_epoch(c: &mut Conn, e: i64) {
    let p = format!("e{e}");
    // LEASE answers the token as a bulk string, exactly the one the lock holds.
    let t = token_string(&c.cmd(&["EVAL", "return redis.call('LEASE', KEYS[1], 30000)", "1", &format!("{p}:k")]));
    assert_eq!(epoch_of(t), e, "token {t} is not of epoch {e}");
    assert_eq!(holders(c, &format!("{p}:k")), vec![t]);
    // Outside scripts a token stays an integer.
    assert!(int(&c.cmd(&["LEASE", &format!("{p}:plain"), "30000"])) > t);

    // The docs' lease + fenced write, many times: the returned token, the holder and the fence all agree exactly.
    for i in 0..50 {
        let (lock, data) = (format!("{p}:job:{i}"), format!("{p}:data:{i}"));
        let t = token_string(&c.cmd(&["EVAL", LEASE_AND_FENCED_WRITE, "2", &lock, &data, "payload"]));
        assert_eq!(holders(c, &lock), vec![t], "round {i}: the script returned another token than the lock holds");
        assert_eq!(bulk(&c.cmd(&["GET", &data])).as_deref(), Some("payload"));
        assert_eq!(int(&c.cmd(&["IFGT", &data, &(t - 1).to_string(), "older"])), 0, "round {i}: the fence is below the token");
        assert_eq!(int(&c.cmd(&["IFGT", &data, &t.to_string(), "same"])), 1, "round {i}: the fence is above the token");
    }

    // RENEW, LOCKINFO, RELEASE inside one script, with the token LEASE gave it.
    let reply = c.cmd(&[
        "EVAL",
        "local t = redis.call('LEASE', KEYS[1], 30000) \
         local info = redis.call('LOCKINFO', KEYS[1]) \
         return {t, redis.call('RENEW', KEYS[1], t, 60000), info[6][1][2], redis.call('RELEASE', KEYS[1], t), redis.call('RELEASE', KEYS[1], t)}",
        "1",
        &format!("{p}:cycle"),
    ]);
    let Value::Array(r) = reply else { panic!("{reply:?}") };
    let t = token_string(&r[0]);
    assert_eq!(epoch_of(t), e);
    assert_eq!(int(&r[1]), 1, "RENEW of the script's own token");
    assert_eq!(token_string(&r[2]), t, "LOCKINFO's token in a script");
    assert_eq!((int(&r[3]), int(&r[4])), (1, 0), "RELEASE, then RELEASE again");
    assert_eq!(c.cmd(&["EXISTS", &format!("{p}:cycle")]), Value::Integer(0));

    // A token from a client, passed in ARGV (a string), works in RENEW and RELEASE.
    let held = int(&c.cmd(&["LEASE", &format!("{p}:argv"), "30000"]));
    let renew = "return redis.call('RENEW', KEYS[1], ARGV[1], 30000)";
    assert_eq!(int(&c.cmd(&["EVAL", renew, "1", &format!("{p}:argv"), &held.to_string()])), 1);
    assert_eq!(int(&c.cmd(&["EVAL", renew, "1", &format!("{p}:argv"), &(held + 1).to_string()])), 0, "a neighbouring token must not renew");

    // SEMAPHORE: each slot's token as a string; RELEASE of one slot frees only it.
    let reply = c.cmd(&[
        "EVAL",
        "local a = redis.call('SEMAPHORE', KEYS[1], 2, 30000) local b = redis.call('SEMAPHORE', KEYS[1], 2, 30000) \
         return {a, b, redis.call('RELEASE', KEYS[1], a)}",
        "1",
        &format!("{p}:sem"),
    ]);
    let Value::Array(r) = reply else { panic!("{reply:?}") };
    let (a, b) = (token_string(&r[0]), token_string(&r[1]));
    assert!(b > a && epoch_of(a) == e && epoch_of(b) == e);
    assert_eq!(int(&r[2]), 1);
    assert_eq!(holders(c, &format!("{p}:sem")), vec![b]);

    // Two grants one after the other never collapse into one value: the stale holder's fenced write is refused.
    let reply = c.cmd(&["EVAL", TWO_HOLDERS, "2", &format!("{p}:two:lock"), &format!("{p}:two:data")]);
    let Value::Array(r) = reply else { panic!("{reply:?}") };
    let (t1, t2) = (token_string(&r[0]), token_string(&r[2]));
    assert!(t2 > t1, "t2 {t2} is not above t1 {t1}");
    assert_eq!((int(&r[1]), int(&r[3]), int(&r[4])), (1, 1, 0), "RELEASE t1, IFGT t2, IFGT t1");
    assert_eq!(bulk(&c.cmd(&["GET", &format!("{p}:two:data")])).as_deref(), Some("new"));

    // A token as a Lua number: exact below 2^53, refused from 2^53 on (a double there may be another token).
    let by_number = "return redis.call('IFGT', KEYS[1], tonumber(ARGV[1]), 'n')";
    let exact = (1i64 << 53) - 1;
    assert_eq!(int(&c.cmd(&["EVAL", by_number, "1", &format!("{p}:num"), &exact.to_string()])), 1);
    assert_eq!(int(&c.cmd(&["IFGT", &format!("{p}:num"), &(exact - 1).to_string(), "x"])), 0, "the fence must be exactly 2^53 - 1");
    let release_by_number = "return redis.call('RELEASE', KEYS[1], tonumber(ARGV[1]))";
    let held = int(&c.cmd(&["LEASE", &format!("{p}:numlock"), "30000"]));
    let reply = c.cmd(&["EVAL", release_by_number, "1", &format!("{p}:numlock"), &held.to_string()]);
    if held < (1i64 << 53) {
        assert_eq!(int(&reply), 1, "epoch 0 tokens are exact as numbers");
    } else {
        assert!(err(&reply).contains("2^53"), "a token of epoch {e} as a number must be refused, got {reply:?}");
        assert_eq!(holders(c, &format!("{p}:numlock")), vec![held], "nothing released");
    }
    for n in ["9007199254740993", "9007199254740992", "1e300"] {
        let reply = c.cmd(&["EVAL", "return redis.call('RENEW', KEYS[1], tonumber(ARGV[1]), 1000)", "1", &format!("{p}:numlock"), n]);
        assert!(err(&reply).contains("2^53"), "{n}: {reply:?}");
    }
    let reply = c.cmd(&["EVAL", "return redis.call('RELEASE', KEYS[1], 1.5)", "1", &format!("{p}:numlock")]);
    assert!(err(&reply).contains("ERR value is not an integer or out of range"), "{reply:?}");

    // A function (FCALL) gets the same strings.
    let t = token_string(&c.cmd(&["FCALL", "lease_fenced", "2", &format!("{p}:f:lock"), &format!("{p}:f:data"), "v"]));
    assert_eq!(epoch_of(t), e);
    assert_eq!(holders(c, &format!("{p}:f:lock")), vec![t]);
    assert_eq!(int(&c.cmd(&["IFGT", &format!("{p}:f:data"), &(t - 1).to_string(), "older"])), 0);
}

#[test]
fn lock_commands_in_scripts_keep_tokens_exact_at_every_epoch() {
    let dir = temp_dir("script-tokens");
    // Raising the epoch is a coordination command: only the built-in coordinator user may (coordinator-pass).
    let server = start(&dir, &["--coordinator-pass", COORD_PASS]);
    let mut c = server.conn();
    let mut coordinator = Conn::as_coordinator(server.port);
    let library = format!("#!lua name=fenced\nredis.register_function('lease_fenced', function(keys, args) {} end)", LEASE_AND_FENCED_WRITE.replace("KEYS[", "keys[").replace("ARGV[", "args["));
    assert!(matches!(c.cmd(&["FUNCTION", "LOAD", &library]), Value::Bulk(_)));
    for e in [0i64, 1, 7, 1023] {
        if e > 0 {
            // The last epoch leaves no room for another failover, so it takes FORCE.
            let epoch = e.to_string();
            let mut raise = vec!["REPLICAOF", "NO", "ONE", "EPOCH", epoch.as_str()];
            if e == 1023 {
                raise.push("FORCE");
            }
            assert!(is_ok(&coordinator.cmd(&raise)), "raising the epoch to {e}");
        }
        assert_eq!(server.info_in("ruvio", "fencing_epoch"), e.to_string());
        check_epoch(&mut c, e);
    }
    // The tokens a script got are the log's: after a restart the same holders are there.
    let before = holders(&mut c, "e1023:k");
    drop(c);
    let mut server = server;
    server.stop();
    let server = start(&dir, &[]);
    assert_eq!(holders(&mut server.conn(), "e1023:k"), before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
