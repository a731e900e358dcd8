//! Durability, recovery and failure handling, against the real binary: kill -9 under concurrent writes with each
//! `appendfsync` policy, torn and corrupted files, `check-aof`, a full disk, and compaction under load.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

const WRITERS: usize = 8;

/// Kill -9 cycles per test; bench/kill9-soak.sh raises it (RUVIO_KILL9_CYCLES=500) for long manual runs.
fn cycles() -> usize {
    std::env::var("RUVIO_KILL9_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(20).max(20)
}

/// What writer `t` got acknowledged in one run: SETs of `c{cycle}:t{t}:{i}` for i < sets, the last INCR reply,
/// and the fencing tokens of leases `l{cycle}:t{t}:{i}` for i < tokens.len().
#[derive(Default, Clone)]
struct Acked {
    sets: u64,
    counter: Option<i64>,
    tokens: Vec<i64>,
}

/// Runs WRITERS clients doing SET (new key each time) + INCR until the server dies; returns what each got
/// acknowledged.
fn write_until_killed(server: &mut Server, cycle: usize, run_for: Duration) -> Vec<Acked> {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WRITERS)
        .map(|t| {
            let port = server.port;
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut acked = Acked::default();
                let Ok(mut c) = Conn::try_connect(port) else { return acked };
                let cnt = format!("cnt:{t}");
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("c{cycle}:t{t}:{}", acked.sets);
                    match c.try_cmd(&["SET", &key, &format!("v{}", acked.sets)]) {
                        Ok(v) if is_ok(&v) => acked.sets += 1,
                        _ => break,
                    }
                    match c.try_cmd(&["INCR", &cnt]) {
                        Ok(Value::Integer(n)) => acked.counter = Some(n),
                        _ => break,
                    }
                    let lease = format!("l{cycle}:t{t}:{}", acked.tokens.len());
                    match c.try_cmd(&["LEASE", &lease, "600000"]) {
                        Ok(Value::Integer(token)) => acked.tokens.push(token),
                        _ => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(run_for);
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// How many of `c{cycle}:t{t}:0..` exist, asserting they form a prefix (no holes, values right).
fn present_prefix(c: &mut Conn, cycle: usize, t: usize, upto: u64) -> u64 {
    let mut present = 0;
    let mut ended = false;
    let mut i = 0;
    while i < upto {
        let end = (i + 500).min(upto);
        let keys: Vec<String> = (i..end).map(|j| format!("c{cycle}:t{t}:{j}")).collect();
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(|s| s.as_str()));
        let Value::Array(vals) = c.cmd(&args) else { panic!("MGET") };
        for (j, v) in (i..end).zip(vals) {
            match bulk(&v) {
                Some(s) => {
                    assert!(!ended, "cycle {cycle} writer {t}: key {j} present after a missing one (log order broken)");
                    assert_eq!(s, format!("v{j}"));
                    present += 1;
                }
                None => ended = true,
            }
        }
        i = end;
    }
    present
}

/// Every acknowledged lease of a run is held after a restart (under `always`).
fn assert_leases_held(c: &mut Conn, cycle: usize, t: usize, n: usize) {
    for i in 0..n {
        c.send(&["TYPE", &format!("l{cycle}:t{t}:{i}")]).unwrap();
    }
    for i in 0..n {
        let v = c.read_reply().unwrap();
        assert_eq!(v, Value::Simple("lease".into()), "cycle {cycle} writer {t}: acknowledged lease {i} lost");
    }
}

/// No token was issued twice, and every run's tokens exceed every token acknowledged in earlier runs.
fn assert_tokens_never_repeat(history: &[Vec<Acked>]) {
    let mut all = Vec::new();
    let mut max_before = 0;
    for (cycle, run) in history.iter().enumerate() {
        let tokens: Vec<i64> = run.iter().flat_map(|a| a.tokens.iter().copied()).collect();
        if let Some(min) = tokens.iter().min() {
            assert!(*min > max_before, "run {cycle} issued token {min}, not above {max_before} from before the restart");
            max_before = max_before.max(*tokens.iter().max().unwrap());
        }
        all.extend(tokens);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a token was issued twice");
    assert!(n > 100, "too few grants to mean anything ({n})");
}

fn counter(c: &mut Conn, t: usize) -> i64 {
    bulk(&c.cmd(&["GET", &format!("cnt:{t}")])).map_or(0, |s| s.parse().unwrap())
}

#[test]
fn kill9_under_load_with_always_loses_no_acknowledged_write() {
    kill9_loses_nothing_acknowledged("always", "1");
}

/// The same with two I/O workers: the writers' connections are spread over both, so groups are committed by
/// either worker and one worker's group may cover the other's writes.
#[test]
fn kill9_under_load_with_always_and_two_io_threads_loses_no_acknowledged_write() {
    kill9_loses_nothing_acknowledged("always", "2");
}

/// Under the default `everysec` a reply leaves only once its records are written to the log file (handed to the
/// kernel, as Redis does): a kill -9 of the process alone loses nothing acknowledged, lock grants included. Only an
/// OS crash may lose the last second.
#[test]
fn kill9_under_load_with_everysec_loses_no_acknowledged_write() {
    kill9_loses_nothing_acknowledged("everysec", "1");
}

/// The same with two I/O workers (either one's group write may cover the other's replies).
#[test]
fn kill9_under_load_with_everysec_and_two_io_threads_loses_no_acknowledged_write() {
    kill9_loses_nothing_acknowledged("everysec", "2");
}

/// `no` writes before it replies too (it only never fsyncs).
#[test]
fn kill9_under_load_with_no_loses_no_acknowledged_write() {
    kill9_loses_nothing_acknowledged("no", "1");
}

fn kill9_loses_nothing_acknowledged(policy: &str, io_threads: &str) {
    let dir = temp_dir(&format!("{policy}-io{io_threads}"));
    let cycles = cycles();
    let mut history: Vec<Vec<Acked>> = Vec::new();
    let mut counters = vec![0i64; WRITERS];
    let mut reserved_before = 0i64;
    for cycle in 0..cycles {
        let mut server = start(&dir, &["--appendfsync", policy, "--io-threads", io_threads]);
        let reserved: i64 = server.info_field("fencing_token_reserved_until").parse().unwrap();
        assert!(reserved > reserved_before, "token reservation went from {reserved_before} to {reserved}");
        reserved_before = reserved;
        let mut c = server.conn();
        // Everything acknowledged in the previous run is there; what was not acknowledged is at most one more write.
        if let Some(prev) = history.last() {
            for (t, a) in prev.iter().enumerate() {
                let present = present_prefix(&mut c, cycle - 1, t, a.sets + 2);
                assert!(present == a.sets || present == a.sets + 1, "cycle {}: writer {t} had {} SETs acknowledged, {present} survived", cycle - 1, a.sets);
                let v = counter(&mut c, t);
                let acked = a.counter.unwrap_or(counters[t]);
                assert!(v == acked || v == acked + 1, "cycle {}: counter {t} acknowledged at {acked}, {v} after restart", cycle - 1);
                counters[t] = v;
                assert_leases_held(&mut c, cycle - 1, t, a.tokens.len());
            }
        }
        let run_for = Duration::from_millis(150 + (cycle as u64 * 37) % 200);
        history.push(write_until_killed(&mut server, cycle, run_for));
    }
    // And nothing from any earlier run went missing later.
    let server = start(&dir, &["--appendfsync", policy]);
    let mut c = server.conn();
    for (cycle, run) in history.iter().enumerate() {
        for (t, a) in run.iter().enumerate() {
            let present = present_prefix(&mut c, cycle, t, a.sets + 2);
            assert!(present >= a.sets, "cycle {cycle} writer {t}: {present} of {} acknowledged SETs left", a.sets);
        }
    }
    let total: u64 = history.iter().flatten().map(|a| a.sets).sum();
    assert!(total > 1000, "the load was too light to mean anything ({total} writes)");
    assert_tokens_never_repeat(&history);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn fill(server: &Server, n: usize) {
    let mut c = server.conn();
    for i in 0..n {
        c.send(&["SET", &format!("k{i}"), &format!("v{i}")]).unwrap();
    }
    for _ in 0..n {
        assert!(is_ok(&c.read_reply().unwrap()));
    }
}

#[test]
fn truncated_tail_is_trimmed_with_a_warning_or_refused_when_configured() {
    let dir = temp_dir("truncated");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    fill(&server, 100);
    server.stop();
    let log = incr_files(&dir).pop().unwrap();
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(len - 7).unwrap();

    let mut refused = spawn(&dir, &["--aof-load-truncated", "no"]);
    let status = refused.child.wait().unwrap();
    assert!(!status.success());
    assert!(refused.stderr().contains("aof-load-truncated"), "{}", refused.stderr());

    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(bulk(&c.cmd(&["GET", "k98"])).as_deref(), Some("v98"));
    assert_eq!(c.cmd(&["GET", "k99"]), Value::Nil);
    assert!(server.stderr().contains("short read"), "{}", server.stderr());
    // The trimmed log takes new records cleanly.
    assert!(is_ok(&c.cmd(&["SET", "after", "1"])));
    drop(c);
    let mut server = server;
    server.stop();
    let server = start(&dir, &[]);
    assert_eq!(bulk(&server.conn().cmd(&["GET", "after"])).as_deref(), Some("1"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The log file is kept ahead of its records with zeros (so an fsync flushes data only): after kill -9 the zeros are
/// still there, the restart reads up to the last record, new records go right after it, and a record torn in the
/// zeros is trimmed like any torn tail. A graceful shutdown leaves no zeros behind.
#[test]
fn preallocated_log_survives_kill9_and_continues_after_its_last_record() {
    let dir = temp_dir("prealloc");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    fill(&server, 100);
    server.kill9();
    let log = incr_files(&dir).pop().unwrap();
    let bytes = std::fs::read(&log).unwrap();
    let data_end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    assert!(bytes.len() >= data_end + 1024 * 1024, "the log was not preallocated: {} bytes, data ends at {data_end}", bytes.len());

    // A record written only in part into the zeros: cut, with the usual warning.
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    {
        use std::os::unix::fs::FileExt;
        f.write_all_at(&[200, 0, 0, 0, 1, 2, 3, 4, 101], data_end as u64).unwrap();
    }
    drop(f);
    let mut server = start(&dir, &["--appendfsync", "always"]);
    assert!(server.stderr().contains("short read"), "{}", server.stderr());
    let mut c = server.conn();
    assert_eq!(bulk(&c.cmd(&["GET", "k99"])).as_deref(), Some("v99"));
    assert!(is_ok(&c.cmd(&["SET", "after", "1"])));
    drop(c);
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(bulk(&c.cmd(&["GET", "k0"])).as_deref(), Some("v0"));
    assert_eq!(bulk(&c.cmd(&["GET", "after"])).as_deref(), Some("1"), "a record written after the preallocated data was lost");
    drop(c);
    let mut server = server;
    server.stop();
    let bytes = std::fs::read(incr_files(&dir).pop().unwrap()).unwrap();
    assert_ne!(bytes.last(), Some(&0), "a graceful shutdown must cut the unused zeros off");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flips one byte in the payload of the record in the middle of the log; returns the file and that record's
/// offset as the server should report it.
fn corrupt_middle(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let log = incr_files(dir).pop().unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    // Walk the framing: 32-byte header, then [len u32][crc u32][lsn][wall][db][kind] + payload.
    let mut off = 32usize;
    let mut offsets = vec![];
    while off < bytes.len() {
        offsets.push(off);
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
        off += 29 + len;
    }
    let target = offsets[offsets.len() / 2];
    bytes[target + 29 + 2] ^= 0x20;
    std::fs::write(&log, &bytes).unwrap();
    (log, target as u64)
}

#[test]
fn corruption_in_the_middle_refuses_to_start_naming_file_and_offset() {
    let dir = temp_dir("corrupt");
    let mut server = start(&dir, &[]);
    fill(&server, 50);
    server.stop();
    let (log, offset) = corrupt_middle(&dir);
    let mut refused = spawn(&dir, &[]);
    let status = refused.child.wait().unwrap();
    assert!(!status.success(), "started on a corrupted log");
    let err = refused.stderr();
    assert!(err.contains(&log.display().to_string()) && err.contains(&format!("offset {offset}")), "message must name the file and offset: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_aof_reports_and_fix_truncates() {
    let dir = temp_dir("checkaof");
    let mut server = start(&dir, &[]);
    fill(&server, 50);
    server.stop();
    let manifest = dir.join("appendonly.aof.manifest");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ruvio")).arg("check-aof").args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(&[manifest.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("is valid"));

    let (log, offset) = corrupt_middle(&dir);
    let (code, out) = run(&[log.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("corrupted at offset {offset}")), "{out}");
    let (code, out) = run(&["--fix", log.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Successfully truncated"), "{out}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), offset);
    let (code, out) = run(&[log.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    // The server starts on the fixed file with the records before the damage.
    let server = start(&dir, &[]);
    assert_eq!(bulk(&server.conn().cmd(&["GET", "k0"])).as_deref(), Some("v0"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

struct Tmpfs(std::path::PathBuf);
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn full_disk_refuses_writes_with_misconf_keeps_reads_and_recovers() {
    let dir = temp_dir("fulldisk");
    let mounted = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir.to_str().unwrap()]).status();
    assert!(
        mounted.map(|s| s.success()).unwrap_or(false),
        "THIS TEST NEEDS ROOT: could not mount a 2 MB tmpfs at {} to simulate a full disk",
        dir.display()
    );
    let _unmount = Tmpfs(dir.clone());
    let server = start(&dir, &["--appendfsync", "always", "--auto-aof-rewrite-percentage", "0"]);
    let mut c = server.conn();
    assert!(is_ok(&c.cmd(&["SET", "before", "1"])));
    // Fill the disk.
    let filler = dir.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![7u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.write_all(&[7u8; 512]);
        let _ = f.sync_all();
    }
    // A write that cannot reach the disk is not acknowledged; it waits (a separate client).
    let big = "x".repeat(64 * 1024);
    let port = server.port;
    let pending = std::thread::spawn(move || {
        let mut c = Conn::connect(port);
        c.set_timeout(Duration::from_secs(60));
        let r = c.cmd(&["SET", "during", &big]);
        (Instant::now(), r)
    });
    let start_wait = Instant::now();
    let misconf = loop {
        // A probe that got in before the failure was noticed is itself unacknowledged and waits (on its own
        // connection, abandoned here); later ones must be refused.
        let mut p = Conn::connect(server.port);
        p.set_timeout(Duration::from_millis(500));
        if let Ok(Value::Error(e)) = p.try_cmd(&["SET", "probe", "1"]) {
            break String::from_utf8_lossy(&e).into_owned();
        }
        assert!(start_wait.elapsed() < Duration::from_secs(10), "writes never failed on a full disk");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(misconf.starts_with("MISCONF Errors writing to the AOF file: No space left on device"), "{misconf}");
    let mut c = server.conn();
    assert_eq!(bulk(&c.cmd(&["GET", "before"])).as_deref(), Some("1"), "reads must go on");
    assert!(!pending.is_finished(), "a write was acknowledged although it could not be written");
    assert!(server.info_field("aof_last_write_status") == "err");
    // Free space: writes resume, the pending write is acknowledged.
    let freed_at = Instant::now();
    std::fs::remove_file(&filler).unwrap();
    let (acked_at, r) = pending.join().unwrap();
    assert!(is_ok(&r), "{r:?}");
    assert!(acked_at >= freed_at);
    let resume = Instant::now();
    loop {
        if is_ok(&c.cmd(&["SET", "after", "1"])) {
            break;
        }
        assert!(resume.elapsed() < Duration::from_secs(10), "writes did not resume after the disk recovered");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.info_field("aof_last_write_status"), "ok");
    drop(c);
    let mut server = server;
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    for k in ["before", "during", "after"] {
        assert!(c.cmd(&["EXISTS", k]) == Value::Integer(1), "{k} lost after recovery and restart");
    }
    drop(c);
    drop(server);
}

#[test]
fn rewrite_under_concurrent_writes_is_consistent_and_compacts() {
    let dir = temp_dir("rewrite");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let n = 50_000;
    {
        let mut c = server.conn();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            for i in chunk {
                c.send(&["SET", &format!("key:{i}"), "0"]).unwrap();
            }
            for _ in chunk {
                c.read_reply().unwrap();
            }
        }
        // Some keys with deadlines, some already gone by the time we restart.
        assert!(is_ok(&c.cmd(&["SET", "ttl:long", "x", "EX", "1000"])));
        assert!(is_ok(&c.cmd(&["SET", "ttl:short", "x", "PX", "300"])));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (port, stop, ops) = (server.port, stop.clone(), ops.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(port);
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("key:{}", (i * 7919) % n);
                    c.cmd(&["INCR", &k]);
                    if i % 10 == 0 {
                        c.cmd(&["DEL", &format!("key:{}", (i * 104729) % n)]);
                    }
                    i += 4;
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = server.conn();
    assert_eq!(c.cmd(&["BGREWRITEAOF"]), Value::Simple("Background append only file rewriting started".into()));
    let t = Instant::now();
    while server.info_field("aof_rewrite_in_progress") == "1" {
        assert!(t.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.info_field("aof_last_bgrewrite_status"), "ok");
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|w| w.join().unwrap());
    assert!(ops.load(Ordering::Relaxed) > 100, "writers must have run during the rewrite");
    // SAVE waits for a full snapshot.
    assert!(is_ok(&c.cmd(&["SAVE"])));
    let expected: Vec<Value> = {
        let keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(|s| s.as_str()));
        let Value::Array(v) = c.cmd(&args) else { panic!() };
        v
    };
    let files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files.iter().filter(|f| f.ends_with(".base")).count(), 1, "{files:?}");
    assert_eq!(files.iter().filter(|f| f.ends_with(".incr")).count(), 1, "old log files must be gone: {files:?}");
    drop(c);
    std::thread::sleep(Duration::from_millis(400));
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(|s| s.as_str()));
    let Value::Array(after) = c.cmd(&args) else { panic!() };
    let diff = expected.iter().zip(&after).filter(|(a, b)| a != b).count();
    assert_eq!(diff, 0, "{diff} keys differ after snapshot + log replay");
    assert_eq!(c.cmd(&["EXISTS", "ttl:long"]), Value::Integer(1));
    assert_eq!(c.cmd(&["EXISTS", "ttl:short"]), Value::Integer(0), "an expired key came back");
    let ttl = c.cmd(&["TTL", "ttl:long"]);
    assert!(matches!(ttl, Value::Integer(t) if t > 990 && t <= 1000), "{ttl:?}");
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clients_get_loading_while_a_big_log_loads() {
    let dir = temp_dir("loading");
    let mut server = start(&dir, &["--appendfsync", "no"]);
    {
        let mut c = server.conn();
        let n = 300_000;
        for chunk in (0..n).collect::<Vec<_>>().chunks(5000) {
            for i in chunk {
                c.send(&["SET", &format!("k{i}"), "some value here"]).unwrap();
            }
            for _ in chunk {
                c.read_reply().unwrap();
            }
        }
    }
    server.stop();
    let server = spawn(&dir, &[]);
    let mut saw_loading = false;
    let t = Instant::now();
    loop {
        if let Ok(mut c) = Conn::try_connect(server.port) {
            match c.try_cmd(&["GET", "k1"]) {
                Ok(Value::Error(e)) => {
                    assert_eq!(&e[..], b"LOADING Redis is loading the dataset in memory");
                    saw_loading = true;
                    // INFO works meanwhile.
                    let info = c.cmd(&["INFO", "persistence"]);
                    assert!(bulk(&info).unwrap().contains("loading:"));
                }
                Ok(v) => {
                    assert_eq!(bulk(&v).as_deref(), Some("some value here"));
                    break;
                }
                Err(_) => {}
            }
        }
        assert!(t.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(2));
    }
    let load_ms: u64 = server.info_field("loading_time_ms").parse().unwrap();
    // Clients are let in once loading has taken 200 ms; a load well past that must have answered -LOADING.
    assert!(saw_loading || load_ms < 400, "loading took {load_ms} ms but no client was told LOADING");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A transaction that moves between databases (SELECT inside MULTI) reloads into the databases it wrote: the log
/// wraps its records with the SELECTs a replay needs (before, they all replayed into the database EXEC ended in).
#[test]
fn a_transaction_across_databases_reloads_into_the_databases_it_wrote() {
    let dir = temp_dir("persist-multi-select");
    let mut server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    for args in [&["MULTI"][..], &["SET", "a", "1"], &["SELECT", "2"], &["SET", "b", "2"], &["SELECT", "0"], &["SET", "c", "3"]] {
        c.cmd(args);
    }
    assert!(matches!(c.cmd(&["EXEC"]), Value::Array(r) if r.len() == 5));
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["EVAL", "redis.call('SET', 'd', '4'); redis.call('SELECT', '3'); redis.call('SET', 'e', '5')", "0"]);
    let expect = |c: &mut Conn| {
        let mut seen = Vec::new();
        for (db, key) in [("0", "a"), ("2", "b"), ("0", "c"), ("0", "d"), ("3", "e"), ("2", "a"), ("0", "b"), ("3", "d")] {
            c.cmd(&["SELECT", db]);
            seen.push(format!("{db}:{key}={:?}", c.cmd(&["GET", key])));
        }
        seen
    };
    let before = expect(&mut c);
    assert_eq!(before.iter().filter(|s| !s.ends_with("=Nil")).count(), 5, "{before:?}");
    server.kill9();
    let server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    assert_eq!(expect(&mut server.conn()), before);
}
