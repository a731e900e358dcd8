//! The conformance corpus's error catalogue (`conformance/errors.json`) against the server's source of its error
//! texts, both ways, so the two cannot drift:
//!
//! 1. every catalogue text (or template) is a string literal of the server's source;
//! 2. every error text of the lock commands' source (literals and the string constants they use) is catalogued;
//! 3. every catalogued text that can be tested is expected by the scenario cases the catalogue names, and every
//!    error a scenario expects is catalogued.
//!
//! Today the texts are literals and constants in the server crate; [`lock_error_sources`] names the files that hold
//! the lock commands' texts. When they move into one catalogue module, point that function (only) at it.
//!
//! The corpus is read from `CONFORMANCE_DIR` when set, else from the repository the crate sits in; the server
//! source from the repository. A missing file fails the test: it never passes vacuously.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).expect("crates/ruvio-client is two levels below the repository root").to_path_buf()
}

fn corpus_dir() -> PathBuf {
    match std::env::var_os("CONFORMANCE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo_root().join("conformance"),
    }
}

fn server_src() -> PathBuf {
    repo_root().join("crates/ruvio-server/src")
}

/// The files holding the error texts of LEASE, RENEW, RELEASE, SEMAPHORE, IFGT and LOCKINFO (their handlers and
/// the lock engine). Repoint here when the texts move to one catalogue module.
fn lock_error_sources() -> Vec<PathBuf> {
    let src = server_src();
    // The lock commands' argument errors live in the typed commands both sides share.
    let protocol = repo_root().join("crates/ruvio-protocol/src/lock_args.rs");
    let mut files = vec![src.join("commands/lock_family.rs"), protocol];
    files.extend(rs_files(&src.join("locks")));
    files
}

/// Every `.rs` file under `dir`, sorted.
fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(rs_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A source file without its unit tests (they quote error texts with made-up arguments).
fn read_code(path: &Path) -> String {
    let text = read(path);
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The server crate's files plus the typed lock commands it parses requests with.
fn server_files() -> Vec<PathBuf> {
    let mut files = rs_files(&server_src());
    files.push(repo_root().join("crates/ruvio-protocol/src/lock_args.rs"));
    files
}

/// A token of Rust source that matters here: a string literal (unescaped) or an identifier.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Ident(String),
    Other(char),
}

/// A small Rust lexer: string literals (normal, byte, raw), identifiers, and skips comments and char literals.
fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if ch == 'r' && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#')) && !prev_is_ident(&c, i) {
            // Raw string r"..." / r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(Tok::Ident("r".to_string()));
                i += 1;
                continue;
            }
            j += 1;
            let start = j;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    break;
                }
                j += 1;
            }
            out.push(Tok::Str(c[start..j.min(c.len())].iter().collect()));
            i = j + 1 + hashes;
        } else if ch == '"' {
            let mut s = String::new();
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                    match c.get(i) {
                        Some('n') => s.push('\n'),
                        Some('r') => s.push('\r'),
                        Some('t') => s.push('\t'),
                        Some('0') => s.push('\0'),
                        Some('\n') => {
                            // Line continuation: skip the newline and the next line's leading whitespace.
                            while c.get(i + 1).is_some_and(|x| x.is_whitespace()) {
                                i += 1;
                            }
                        }
                        Some(other) => s.push(*other),
                        None => {}
                    }
                } else {
                    s.push(c[i]);
                }
                i += 1;
            }
            out.push(Tok::Str(s));
            i += 1;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '"') is skipped; a lifetime ('a) is not a literal.
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // b"..." byte strings: the `b` prefix is dropped, the literal follows.
            if word != "b" || c.get(i) != Some(&'"') {
                out.push(Tok::Ident(word));
            }
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Other(ch));
            }
            i += 1;
        }
    }
    out
}

fn prev_is_ident(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// `{anything}` placeholders (format arguments, catalogue placeholders) made alike.
fn normalize(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        match rest[open..].find('}') {
            Some(close) => {
                out.push_str(&rest[..open]);
                out.push_str("{}");
                rest = &rest[open + close + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// An error reply's text: an upper-case code, a space, a message.
fn is_error_text(s: &str) -> bool {
    let code: String = s.chars().take_while(|c| c.is_ascii_uppercase()).collect();
    code.len() >= 3 && s[code.len()..].starts_with(' ') && s.len() > code.len() + 1
}

struct Entry {
    id: String,
    /// Exact text, or the template with `{placeholders}`.
    text: String,
    template: bool,
    untestable: bool,
    cases: Vec<String>,
}

impl Entry {
    /// Does an expected error text of a scenario come from this entry?
    fn produces(&self, text: &str) -> bool {
        if !self.template {
            return self.text == text;
        }
        // Each placeholder stands for one or more characters.
        let norm = normalize(&self.text);
        let parts: Vec<&str> = norm.split("{}").collect();
        let mut rest = text;
        for (i, part) in parts.iter().enumerate() {
            if i == 0 {
                let Some(r) = rest.strip_prefix(part) else { return false };
                rest = r;
            } else if i == parts.len() - 1 {
                return rest.len() > part.len() && rest.ends_with(part);
            } else {
                match rest.get(1..).and_then(|r| r.find(part)) {
                    Some(at) => rest = &rest[1 + at + part.len()..],
                    None => return false,
                }
            }
        }
        rest.is_empty()
    }
}

fn catalogue() -> Vec<Entry> {
    let path = corpus_dir().join("errors.json");
    let file: Json = serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(file["format"], "error-catalogue", "{}: format", path.display());
    let errors = file["errors"].as_array().unwrap_or_else(|| panic!("{}: no errors array", path.display()));
    assert!(!errors.is_empty(), "the catalogue is empty");
    let mut ids = BTreeSet::new();
    errors
        .iter()
        .map(|e| {
            let id = e["id"].as_str().expect("every entry has an id").to_string();
            assert!(ids.insert(id.clone()), "duplicate catalogue id {id}");
            let (text, template) = match (e.get("text").and_then(Json::as_str), e.get("template").and_then(Json::as_str)) {
                (Some(t), None) => (t.to_string(), false),
                (None, Some(t)) => (t.to_string(), true),
                _ => panic!("{id}: needs exactly one of text and template"),
            };
            let cases = e["cases"].as_array().unwrap_or_else(|| panic!("{id}: no cases array"));
            let cases = cases.iter().map(|c| c.as_str().expect("case ids are strings").to_string()).collect();
            Entry { id, text, template, untestable: e.get("untestable").is_some(), cases }
        })
        .collect()
}

/// Every step of every scenario case that expects an error: case id -> expected texts.
fn scenario_errors() -> BTreeMap<String, Vec<String>> {
    let dir = corpus_dir().join("scenarios");
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        match path.extension() {
            Some(x) if x == "json" => {}
            _ => continue,
        }
        files += 1;
        let file: Json = serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for case in file["cases"].as_array().expect("cases") {
            let id = case["id"].as_str().expect("case id").to_string();
            let texts = out.entry(id).or_default();
            for step in case["steps"].as_array().expect("steps") {
                let expect = &step["expect"];
                if expect["match"] == "error" {
                    texts.push(expect["text"].as_str().expect("error text").to_string());
                }
            }
        }
    }
    assert!(files > 0, "no scenario files in {}", dir.display());
    out
}

#[test]
fn every_catalogued_text_is_in_the_server_source() {
    let mut literals = BTreeSet::new();
    let files = server_files();
    assert!(files.len() > 10, "the server source was not found at {}", server_src().display());
    for f in files {
        for t in lex(&read_code(&f)) {
            if let Tok::Str(s) = t {
                literals.insert(normalize(&s));
            }
        }
    }
    let missing: Vec<String> =
        catalogue().iter().filter(|e| !literals.contains(&normalize(&e.text))).map(|e| format!("{}: {:?}", e.id, e.text)).collect();
    assert!(missing.is_empty(), "catalogue texts the server source does not contain (changed or removed?):\n{}", missing.join("\n"));
}

#[test]
fn every_lock_error_of_the_server_source_is_catalogued() {
    // String constants of the whole server crate, for the names the lock sources use.
    let mut consts = BTreeMap::new();
    for f in server_files() {
        let toks = lex(&read_code(&f));
        for i in 0..toks.len().saturating_sub(6) {
            if let [Tok::Ident(k), Tok::Ident(name), Tok::Other(':'), Tok::Other('&'), Tok::Ident(ty), Tok::Other('='), Tok::Str(s)] =
                &toks[i..i + 7]
            {
                if k == "const" && ty == "str" {
                    consts.insert(name.clone(), s.clone());
                }
            }
        }
    }
    assert!(consts.contains_key("ERR_WRONGTYPE"), "the server's ERR_WRONGTYPE constant was not found");
    let catalogued: BTreeSet<String> = catalogue().iter().map(|e| normalize(&e.text)).collect();
    let mut found = 0;
    let mut missing = BTreeSet::new();
    for f in lock_error_sources() {
        for t in lex(&read_code(&f)) {
            let text = match t {
                Tok::Str(s) => s,
                Tok::Ident(name) => match consts.get(&name) {
                    Some(s) => s.clone(),
                    None => continue,
                },
                Tok::Other(_) => continue,
            };
            if is_error_text(&text) {
                found += 1;
                if !catalogued.contains(&normalize(&text)) {
                    missing.insert(format!("{}: {text:?}", f.display()));
                }
            }
        }
    }
    assert!(found >= 8, "only {found} error texts found in the lock sources: has the source moved? (see lock_error_sources)");
    assert!(missing.is_empty(), "lock error texts missing from conformance/errors.json:\n{}", missing.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn catalogue_and_scenarios_agree() {
    let entries = catalogue();
    let scenarios = scenario_errors();
    for e in &entries {
        if e.untestable {
            assert!(e.cases.is_empty(), "{}: untestable but lists cases", e.id);
            continue;
        }
        assert!(!e.cases.is_empty(), "{}: no scenario case expects it (add one, or say why it is untestable)", e.id);
        for case in &e.cases {
            let texts = scenarios.get(case).unwrap_or_else(|| panic!("{}: names case {case}, which does not exist", e.id));
            assert!(texts.iter().any(|t| e.produces(t)), "{}: case {case} expects no error matching {:?}", e.id, e.text);
        }
    }
    for (case, texts) in &scenarios {
        for t in texts {
            let entry = entries.iter().find(|e| e.produces(t));
            let entry = entry.unwrap_or_else(|| panic!("case {case} expects {t:?}, which the catalogue does not list"));
            assert!(entry.cases.contains(case), "{}: case {case} expects it but is not listed in its cases", entry.id);
        }
    }
}

#[test]
fn template_matching_works() {
    let e = |text: &str, template| Entry { id: "t".into(), text: text.into(), template, untestable: false, cases: vec![] };
    let mismatch = e("ERR semaphore limit is {current}, not {asked}; the limit can change", true);
    assert!(mismatch.produces("ERR semaphore limit is 3, not 4; the limit can change"));
    assert!(!mismatch.produces("ERR semaphore limit is 3, not 4; the limit may change"));
    assert!(!mismatch.produces("ERR semaphore limit is , not 4; the limit can change"));
    assert!(e("MISCONF cannot reserve: {why}", true).produces("MISCONF cannot reserve: disk full"));
    assert!(!e("MISCONF cannot reserve: {why}", true).produces("MISCONF cannot reserve: "));
    assert!(e("ERR syntax error", false).produces("ERR syntax error"));
    assert!(!e("ERR syntax error", false).produces("ERR syntax error "));
    let src = r##"let a = "x\"y"; // "no"
        const B: &str = "ERR a \
            b"; let c = '"'; let d = r#"raw"#; /* "no" */ let e = b"bytes";"##;
    let strings: Vec<String> = lex(src).into_iter().filter_map(|t| if let Tok::Str(s) = t { Some(s) } else { None }).collect();
    assert_eq!(strings, ["x\"y", "ERR a b", "raw", "bytes"]);
}
