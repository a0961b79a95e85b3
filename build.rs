//! Names the commit the binary is built from, for `telltale --version` (`TELLTALE_COMMIT`).
//!
//! From `git rev-parse` in a checkout; a build from a source archive sets `TELLTALE_COMMIT`
//! itself, and without either the commit reads `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TELLTALE_COMMIT");
    let commit = std::env::var("TELLTALE_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // Built again when HEAD moves: HEAD changes on a checkout, the branch's ref (loose or
    // packed) on a commit. Only files that exist are named: cargo reruns a script that names a
    // missing one on every build.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
        watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for path in watched.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=TELLTALE_COMMIT={commit}");
}
