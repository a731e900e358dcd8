//! `ruvio check-aof [--fix] PATH`: verifies a log file, a snapshot, or every file a manifest lists; with `--fix`,
//! cuts a damaged file back to its last good record (what a crash mid-write needs; for damage in the middle it
//! drops everything after the damage too, so it asks for a backup first in the message).

use std::path::{Path, PathBuf};

use crate::journal::format::{decode_command, open_reader, FileKind, ReadError, RecordKind};
use super::manifest::Manifest;

/// What checking one file found.
#[derive(Debug)]
pub struct FileReport {
    pub path: PathBuf,
    pub size: u64,
    pub records: u64,
    /// Everything before this offset is good.
    pub ok_up_to: u64,
    pub problem: Option<ReadError>,
}

/// Checks every record's framing and checksum, and that command payloads parse.
pub fn check_file(path: &Path) -> Result<FileReport, String> {
    let size = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len();
    let mut r = match open_reader(path).map_err(|e| format!("{}: {e}", path.display()))? {
        Ok(r) => r,
        Err(e) => return Ok(FileReport { path: path.into(), size, records: 0, ok_up_to: 0, problem: Some(e) }),
    };
    let kind = r.header.kind;
    let mut records = 0;
    let mut expected = r.header.lsn;
    let problem = loop {
        match r.next_record() {
            Ok(None) => break None,
            Ok(Some(rec)) => {
                if kind == FileKind::Log {
                    if rec.kind != RecordKind::Command {
                        break Some(ReadError::Corrupt { offset: rec.offset, reason: "a snapshot record inside a log file".into() });
                    }
                    if let Err(e) = decode_command(&rec.payload) {
                        break Some(ReadError::Corrupt { offset: rec.offset, reason: e });
                    }
                    if rec.lsn != expected {
                        break Some(ReadError::Corrupt { offset: rec.offset, reason: format!("record number {} where {expected} was expected", rec.lsn) });
                    }
                    expected += 1;
                }
                records += 1;
            }
            Err(e) => break Some(e),
        }
    };
    Ok(FileReport { path: path.into(), size, records, ok_up_to: r.offset, problem })
}

/// Runs the subcommand; returns the process exit code (0 = valid or fixed, 1 = damaged, 2 = cannot check).
pub fn run(path: &Path, fix: bool) -> i32 {
    let files: Vec<PathBuf> = if path.extension().is_some_and(|e| e == "manifest") {
        match Manifest::read(path) {
            Ok(Some(m)) => {
                let dir = path.parent().unwrap_or(Path::new("."));
                m.files().map(|f| dir.join(f)).collect()
            }
            Ok(None) => {
                eprintln!("Cannot open {}: no such file", path.display());
                return 2;
            }
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        }
    } else {
        vec![path.to_path_buf()]
    };
    let mut code = 0;
    for f in files {
        let report = match check_file(&f) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("Cannot check {e}");
                return 2;
            }
        };
        println!(
            "AOF analyzed: filename={}, size={}, records={}, ok_up_to={}, diff={}",
            f.display(),
            report.size,
            report.records,
            report.ok_up_to,
            report.size - report.ok_up_to
        );
        let Some(problem) = &report.problem else {
            println!("AOF {} is valid", f.display());
            continue;
        };
        let what = match problem {
            ReadError::Truncated { .. } => "truncated",
            ReadError::Corrupt { .. } => "corrupted",
        };
        println!("AOF {} is {what} at offset {}: {}", f.display(), problem.offset(), problem.reason());
        if !fix {
            println!("AOF {} is not valid. Use the --fix option to try fixing it.", f.display());
            code = 1;
            continue;
        }
        if report.ok_up_to == 0 {
            println!("The file header itself is damaged; nothing to keep. Not touching {}", f.display());
            code = 1;
            continue;
        }
        if matches!(problem, ReadError::Corrupt { .. }) {
            println!("This will drop {} bytes after the damage, including any good records there (keep a copy of the file if they matter).", report.size - report.ok_up_to);
        }
        let done = std::fs::OpenOptions::new().write(true).open(&f).and_then(|h| {
            h.set_len(report.ok_up_to)?;
            h.sync_all()
        });
        match done {
            Ok(()) => println!("Successfully truncated AOF {} to {} bytes", f.display(), report.ok_up_to),
            Err(e) => {
                println!("Failed to truncate AOF {}: {e}", f.display());
                code = 1;
            }
        }
    }
    code
}
