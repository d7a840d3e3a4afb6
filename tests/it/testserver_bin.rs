//! Where the test server's binary is. `toolhub-testserver` is a package of
//! its own in the workspace (testserver/), not a bin of toolhub's, so Cargo
//! gives tests and benches no `CARGO_BIN_EXE_` for it: it lands in the
//! profile folder above the test binary's (`target/<profile>/`).
//! `./scripts/test.sh` builds it with the tests (`cargo test --workspace`);
//! a plain `cargo test` or `cargo bench` that did not, or whose copy is older
//! than its sources, builds it here once, with the same cargo and profile
//! (`-p toolhub-testserver` alone resolves features apart from the tests'
//! build, so that first fallback compiles its dependencies again).
//! `TOOLHUB_TESTSERVER` names another binary (a bench pairing two builds).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The test server's path, built first when it is missing or stale.
pub fn path() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("TOOLHUB_TESTSERVER") {
            return p;
        }
        let exe = std::env::current_exe().expect("the test binary's own path");
        // target/<profile>/deps/<test>-<hash>, or target/<profile>/<bench>-<hash>
        let mut dir = exe.parent().expect("the test binary's folder").to_path_buf();
        if dir.file_name().is_some_and(|n| n == "deps") {
            dir.pop();
        }
        let bin = dir.join("toolhub-testserver");
        if stale(&bin) {
            build(&dir);
        }
        assert!(
            bin.exists(),
            "{} is missing after building it: run `cargo build -p toolhub-testserver` (./scripts/test.sh does)",
            bin.display()
        );
        bin.display().to_string()
    })
}

/// Missing, or older than what it is built from (testserver/src/ and its
/// Cargo.toml). Only those: cargo leaves a fresh binary's time alone, so a
/// newer file it does not build from (testserver/tests/) would otherwise
/// send every test run to cargo again.
fn stale(bin: &Path) -> bool {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return true;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testserver");
    let manifest = std::fs::metadata(root.join("Cargo.toml"))
        .and_then(|m| m.modified())
        .ok();
    newest(&root.join("src"))
        .max(manifest)
        .is_some_and(|t| t > built)
}

fn newest(dir: &Path) -> Option<SystemTime> {
    let mut latest = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest(&p)
        } else {
            e.metadata().and_then(|m| m.modified()).ok()
        };
        latest = latest.max(t);
    }
    latest
}

/// `cargo build -p toolhub-testserver` into the same target folder and
/// profile as the running test (its output shows, so a first build is seen).
fn build(profile_dir: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let target_dir = profile_dir.parent().expect("the target folder");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "toolhub-testserver",
        "--bin",
        "toolhub-testserver",
    ])
    .arg("--manifest-path")
    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
    .arg("--target-dir")
    .arg(target_dir);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
        None => {}
    }
    eprintln!("building toolhub-testserver for the tests: {cmd:?}");
    let status = cmd
        .status()
        .expect("running cargo to build toolhub-testserver");
    assert!(
        status.success(),
        "building toolhub-testserver failed ({status}): see cargo's output above"
    );
}
