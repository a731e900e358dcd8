//! Records the git commit the binary is built from (`ruvio --version`), or "unknown" outside a checkout (a source
//! tarball, `cargo install` from a copy). Only this small binary crate is rebuilt when the commit changes.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    let commit = std::env::var("RUVIO_GIT_COMMIT").ok().or_else(|| git(&["rev-parse", "--short=12", "HEAD"])).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RUVIO_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=RUVIO_GIT_COMMIT");
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it names (a commit), also in a worktree.
    if let (Some(git_dir), Some(common)) = (git(&["rev-parse", "--absolute-git-dir"]), git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        let common = std::path::Path::new(&common);
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
        println!("cargo:rerun-if-changed={}", common.join("packed-refs").display());
    }
}
