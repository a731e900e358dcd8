//! The Rust client's runner for the cross-language conformance corpus (`conformance/README.md` at the repository
//! root describes the files and this protocol).
//!
//! Launched by `conformance/runners/rust.sh` (through `scripts/conformance.sh`) as
//! `cargo test --release -p ruvio-client --test conformance`, with:
//!
//! - `CONFORMANCE_DIR`: the corpus folder, read at run time (the corpus is not part of the crate);
//! - `RUVIO_ADDR`: `host:port` of the shared server for scenario vectors;
//! - `RUVIO_BIN`: the server binary, for guard cases that start (and SIGSTOP) their own server;
//! - `CONFORMANCE_RESULTS`: the JSON-lines file this runner writes, one line per case it ran.
//!
//! It exits 0 when it ran every case (failed cases are reported in the results file, the script decides), and
//! non-zero when it could not run (a variable missing, an unreadable corpus file, an unknown file format).

mod guard;
mod matchers;
mod scenario;
mod server;
mod wire;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::Value as Json;

/// One case's result: `Ok` passed, `Err(why)` failed.
pub type Outcome = Result<(), String>;

fn required_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => {
            eprintln!("conformance runner (rust): {name} is not set; run it through `bash scripts/conformance.sh`");
            std::process::exit(2);
        }
    }
}

fn load(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| fatal(&format!("cannot read {}: {e}", path.display())));
    serde_json::from_str(&text).unwrap_or_else(|e| fatal(&format!("{} is not valid JSON: {e}", path.display())))
}

pub fn fatal(msg: &str) -> ! {
    eprintln!("conformance runner (rust): {msg}");
    std::process::exit(2);
}

/// The `*.json` files of `dir`, sorted by name.
fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| fatal(&format!("cannot list {}: {e}", dir.display())))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn cases(file: &Json, path: &Path) -> Vec<Json> {
    file.get("cases").and_then(Json::as_array).cloned().unwrap_or_else(|| fatal(&format!("{}: no \"cases\" array", path.display())))
}

/// A unit of work: a case id and the closure that runs it.
type Job = (String, Box<dyn FnOnce() -> Outcome + Send>);

/// Runs jobs on `threads` threads; results come back in job order.
fn run_parallel(jobs: Vec<Job>, threads: usize) -> Vec<(String, Outcome)> {
    let total = jobs.len();
    let queue = Arc::new(Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>().into_iter()));
    let results = Arc::new(Mutex::new(BTreeMap::new()));
    let workers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (queue, results) = (queue.clone(), results.clone());
            thread::spawn(move || loop {
                let next = queue.lock().unwrap().next();
                let Some((i, (id, job))) = next else { break };
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                    .unwrap_or_else(|p| Err(format!("runner panicked: {}", panic_text(&p))));
                results.lock().unwrap().insert(i, (id, outcome));
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker thread");
    }
    let results = std::mem::take(&mut *results.lock().unwrap());
    assert_eq!(results.len(), total, "every job reported");
    results.into_values().collect()
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// A random id for this run of the runner: scenario keys of different runs and languages never collide.
fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

fn main() {
    let dir = PathBuf::from(required_env("CONFORMANCE_DIR"));
    let results_path = PathBuf::from(required_env("CONFORMANCE_RESULTS"));
    let addr = required_env("RUVIO_ADDR");
    let bin = PathBuf::from(required_env("RUVIO_BIN"));
    if !bin.is_file() {
        fatal(&format!("RUVIO_BIN={} is not a file", bin.display()));
    }
    let addr = server::parse_addr(&addr).unwrap_or_else(|e| fatal(&e));
    let run = run_id();

    let mut jobs: Vec<Job> = Vec::new();
    for path in json_files(&dir.join("wire")) {
        let file = load(&path);
        let format = file.get("format").and_then(Json::as_str).unwrap_or_default().to_string();
        for case in cases(&file, &path) {
            let id = case_id(&case, &path);
            match format.as_str() {
                "wire-decode" => jobs.push((id, Box::new(move || wire::decode(&case)))),
                "wire-encode" => jobs.push((id, Box::new(move || wire::encode(&case)))),
                other => fatal(&format!("{}: unknown format {other:?}", path.display())),
            }
        }
    }
    let mut scenario_jobs: Vec<Job> = Vec::new();
    for path in json_files(&dir.join("scenarios")) {
        let file = load(&path);
        expect_format(&file, &path, "scenario");
        for case in cases(&file, &path) {
            let id = case_id(&case, &path);
            let protocols: Vec<String> = match case.get("protocols") {
                None => vec!["2".to_string()],
                Some(p) => p
                    .as_array()
                    .unwrap_or_else(|| fatal(&format!("{id}: protocols is not an array")))
                    .iter()
                    .map(|v| v.as_str().unwrap_or_else(|| fatal(&format!("{id}: a protocol is not a string"))).to_string())
                    .collect(),
            };
            for proto in protocols {
                let run_case_id = format!("{id}@resp{proto}");
                let (case, addr, prefix) = (case.clone(), addr.clone(), format!("cf:{run}:rust:{run_case_id}:"));
                scenario_jobs.push((run_case_id, Box::new(move || scenario::run_case(&case, &proto, &addr, &prefix))));
            }
        }
    }
    let mut guard_jobs: Vec<Job> = Vec::new();
    for path in json_files(&dir.join("guard")) {
        let file = load(&path);
        expect_format(&file, &path, "guard");
        for case in cases(&file, &path) {
            let id = case_id(&case, &path);
            let (addr, bin, prefix) = (addr.clone(), bin.clone(), format!("cf:{run}:rust:{id}:"));
            guard_jobs.push((id, Box::new(move || guard::run_case(&case, &addr, &bin, &prefix))));
        }
    }

    let mut results = run_parallel(jobs, 1);
    results.extend(run_parallel(scenario_jobs, 8));
    results.extend(run_parallel(guard_jobs, 5));

    let mut out = std::fs::File::create(&results_path)
        .unwrap_or_else(|e| fatal(&format!("cannot write {}: {e}", results_path.display())));
    let mut failed = 0;
    for (id, outcome) in &results {
        let line = match outcome {
            Ok(()) => serde_json::json!({"case": id, "result": "pass"}),
            Err(why) => {
                failed += 1;
                println!("FAIL {id}: {why}");
                serde_json::json!({"case": id, "result": "fail", "detail": why})
            }
        };
        writeln!(out, "{line}").expect("writing the results file");
    }
    println!("conformance runner (rust): {} cases, {} passed, {failed} failed", results.len(), results.len() - failed);
}

fn case_id(case: &Json, path: &Path) -> String {
    case.get("id").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| fatal(&format!("{}: a case has no id", path.display())))
}

fn expect_format(file: &Json, path: &Path, want: &str) {
    let got = file.get("format").and_then(Json::as_str).unwrap_or_default();
    if got != want {
        fatal(&format!("{}: format {got:?}, expected {want:?}", path.display()));
    }
}
