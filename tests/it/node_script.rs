//! A browser script (`node tests/…/*.mjs`, playwright-core driving
//! Debian's chromium) run by a test: its output line by line, its stdin to
//! answer it, and the end it must reach (`done` as its last line, exit 0).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// How long a script may go without a line before the test fails.
const QUIET_LIMIT: Duration = Duration::from_secs(300);

/// `target/<name>`, created: where a script leaves its screenshots.
pub fn screenshots(name: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(name);
    std::fs::create_dir_all(&out).expect("screenshot folder");
    out
}

pub struct NodeScript {
    node: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub seen: Vec<String>,
    /// Prefix of its lines echoed to the test's output (`[ui] …`).
    label: &'static str,
    /// Its screenshot folder, named when it fails.
    out: PathBuf,
}

impl NodeScript {
    /// Start `script` (relative to the repository) with `env`; `OUT` is
    /// set to `out`.
    pub fn start(
        script: &str,
        label: &'static str,
        out: PathBuf,
        env: &[(&str, String)],
    ) -> NodeScript {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
            .env("OUT", &out)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut node = cmd
            .spawn()
            .expect("node (tests need Node.js and npm ci --prefix tests)");
        let stdout = node.stdout.take().expect("stdout");
        NodeScript {
            node,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
            label,
            out,
        }
    }

    /// The script's next line; `None` once it closed its output.
    pub async fn next_line(&mut self) -> Option<String> {
        let l = tokio::time::timeout(QUIET_LIMIT, self.lines.next_line())
            .await
            .expect("the browser script said nothing for 300 s")
            .ok()
            .flatten()?;
        eprintln!("[{}] {l}", self.label);
        self.seen.push(l.clone());
        Some(l)
    }

    /// Answer the script on its stdin.
    pub async fn say(&mut self, line: &str) {
        let stdin = self.node.stdin.as_mut().expect("stdin");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to the script");
    }

    /// Read the rest, wait for the exit and require success: exit 0 and
    /// `done` as the last line; otherwise fail with everything it said.
    pub async fn finish(mut self) {
        while self.next_line().await.is_some() {}
        let status = tokio::time::timeout(crate::support::WAIT, self.node.wait())
            .await
            .expect("the browser script did not exit")
            .expect("wait");
        let mut err = String::new();
        if let Some(mut e) = self.node.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        assert!(
            status.success() && self.seen.last().map(String::as_str) == Some("done"),
            "the {} script failed (screenshots in {}):\n{}\n{err}",
            self.label,
            self.out.display(),
            self.seen.join("\n")
        );
    }
}
