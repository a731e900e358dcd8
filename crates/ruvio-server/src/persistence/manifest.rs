//! The manifest (`<appendfilename>.manifest`): which snapshot and which log files, in order, make up the data set.
//! It is replaced atomically (temporary file, fsync, rename, fsync of the folder), so a crash leaves either the old
//! list or the new one, each complete.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The snapshot file, if any.
    pub base: Option<String>,
    /// Log files, oldest first; records continue from one to the next without gaps.
    pub incrs: Vec<String>,
}

pub fn path(dir: &Path, appendfilename: &str) -> PathBuf {
    dir.join(format!("{appendfilename}.manifest"))
}

pub fn base_name(appendfilename: &str, gen: u64) -> String {
    format!("{appendfilename}.{gen}.base")
}

pub fn incr_name(appendfilename: &str, gen: u64) -> String {
    format!("{appendfilename}.{gen}.incr")
}

/// The generation number in a file name made by [`base_name`] or [`incr_name`].
pub fn gen_of(file: &str) -> u64 {
    file.rsplit('.').nth(1).and_then(|g| g.parse().ok()).unwrap_or(0)
}

/// The snapshot and log files in `dir` named like this server's (`<appendfilename>.<N>.base|incr`), listed or not,
/// with their sizes, sorted by name.
pub fn data_files(dir: &Path, appendfilename: &str) -> io::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(appendfilename).and_then(|r| r.strip_prefix('.')) else { continue };
        let Some((gen, kind)) = rest.split_once('.') else { continue };
        if (kind == "base" || kind == "incr") && !gen.is_empty() && gen.bytes().all(|b| b.is_ascii_digit()) {
            out.push((name.clone(), entry.metadata().map(|m| m.len()).unwrap_or(0)));
        }
    }
    out.sort();
    Ok(out)
}

impl Manifest {
    /// The highest generation any listed file has.
    pub fn max_gen(&self) -> u64 {
        self.base.iter().chain(self.incrs.iter()).map(|f| gen_of(f)).max().unwrap_or(0)
    }

    pub fn files(&self) -> impl Iterator<Item = &String> {
        self.base.iter().chain(self.incrs.iter())
    }

    /// Reads the manifest; `Ok(None)` if there is none.
    pub fn read(path: &Path) -> Result<Option<Manifest>, String> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("{} line {}: malformed manifest entry '{line}'", path.display(), n + 1);
            let (kind, file) = line.split_once(' ').ok_or_else(bad)?;
            if file.contains('/') || file.is_empty() {
                return Err(bad());
            }
            match kind {
                "base" if m.base.is_none() => m.base = Some(file.to_string()),
                "incr" => m.incrs.push(file.to_string()),
                _ => return Err(bad()),
            }
        }
        Ok(Some(m))
    }

    pub fn write(&self, path: &Path) -> io::Result<()> {
        let mut text = String::from("# Ruvio manifest v1: the snapshot and the log files to load, in order\n");
        if let Some(b) = &self.base {
            text.push_str(&format!("base {b}\n"));
        }
        for i in &self.incrs {
            text.push_str(&format!("incr {i}\n"));
        }
        let tmp = path.with_extension("manifest.tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        super::sync_dir(path.parent().unwrap_or(Path::new(".")))
    }
}
