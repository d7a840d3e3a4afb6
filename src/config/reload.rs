//! Watches config.json and signals when it has settled after a change; the
//! hub then calls `config::load` again and applies [`diff_servers`]. A failed
//! load must change nothing (the caller keeps the old Config).
//!
//! The PARENT folder is watched, not the file: editors that save by writing a
//! temp file and renaming it over the original (vim, VS Code, atomic writers)
//! or by delete-then-create replace the inode, which a watch on the file
//! itself would lose after the first save.

use std::path::PathBuf;
use std::time::Duration;

use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Config;

/// The default quiet period before a burst of events counts as one change.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(300);

/// A constant stream of writes still produces a signal this many debounce
/// periods after the first event (the protocol promises apply within 10 s).
const MAX_WAIT_FACTOR: u32 = 10;

/// Start watching `path`. The receiver yields one `()` per settled change
/// (trailing edge of a `debounce` quiet period); a change while a signal is
/// still unread is folded into it. The watcher lives in a task that ends
/// when the receiver is dropped. Must be called inside a tokio runtime.
pub fn spawn_watcher(
    path: PathBuf,
    debounce: Duration,
) -> Result<mpsc::Receiver<()>, notify::Error> {
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .map(|d| d.join(&path))
            .unwrap_or(path)
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();

    let (raw_tx, raw_rx) = mpsc::unbounded_channel::<()>();
    // Runs on notify's own thread; an unbounded send never blocks it.
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<Event>| {
        let hit = match res {
            Ok(ev) => relevant(&ev, &name),
            // A watcher error (e.g. queue overflow) may have hidden a change.
            Err(_) => true,
        };
        if hit {
            let _ = raw_tx.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;

    // Bounded so the deadline arithmetic below cannot overflow.
    let debounce = debounce.min(Duration::from_secs(60));
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        // Owning the watcher here keeps it alive exactly as long as the task.
        let _watcher = watcher;
        debounce_loop(raw_rx, tx, debounce).await;
    });
    Ok(rx)
}

/// True when `ev` may have changed the file called `name` in the watched
/// folder. Plain reads (including our own `load`) are Access events and are
/// ignored, except close-after-write which ends a write.
fn relevant(ev: &Event, name: &std::ffi::OsStr) -> bool {
    let kind_ok = match ev.kind {
        EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)) => {
            true
        }
        EventKind::Access(_) => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
        EventKind::Other => ev.need_rescan(),
    };
    kind_ok && (ev.need_rescan() || ev.paths.iter().any(|p| p.file_name() == Some(name)))
}

/// Turn raw events into settled signals. Ends when either side closes.
async fn debounce_loop(
    mut raw: mpsc::UnboundedReceiver<()>,
    out: mpsc::Sender<()>,
    debounce: Duration,
) {
    loop {
        // Idle: wait for the first event of a burst (or for the hub to go).
        tokio::select! {
            ev = raw.recv() => if ev.is_none() { return },
            _ = out.closed() => return,
        }
        let hard_deadline = Instant::now() + debounce.saturating_mul(MAX_WAIT_FACTOR);
        let mut deadline = Instant::now() + debounce;
        loop {
            tokio::select! {
                ev = raw.recv() => match ev {
                    Some(()) => deadline = (Instant::now() + debounce).min(hard_deadline),
                    None => return,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = out.closed() => return,
            }
        }
        // Full means a signal is already pending; the reload it triggers will
        // read the latest content anyway.
        if let Err(mpsc::error::TrySendError::Closed(())) = out.try_send(()) {
            return;
        }
    }
}

/// Which servers a reload must start, stop, restart or leave alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// In both, with a different ServerSpec: restart.
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl ServerDiff {
    /// True when no server needs to be touched.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compare the servers of two configs by name and [`super::ServerSpec`]
/// equality. Names come out sorted.
pub fn diff_servers(old: &Config, new: &Config) -> ServerDiff {
    let mut d = ServerDiff::default();
    for (name, spec) in &new.mcp_servers {
        match old.mcp_servers.get(name) {
            None => d.added.push(name.clone()),
            Some(o) if !o.needs_restart(spec) => d.unchanged.push(name.clone()),
            Some(_) => d.changed.push(name.clone()),
        }
    }
    d.removed = old
        .mcp_servers
        .keys()
        .filter(|n| !new.mcp_servers.contains_key(*n))
        .cloned()
        .collect();
    d
}

/// The keys read only at start-up. A reload cannot apply them: they keep
/// the value the hub started with (so the config in force says what the hub
/// does) and are named as needing a restart.
pub const RESTART_KEYS: [&str; 7] = [
    "server.listen",
    "server.mcpEndpoint",
    "server.handshakeTimeout",
    "taskEngine.stateDir",
    "taskEngine.durability",
    "server.mcpSessionIdle",
    "server.workerThreads",
];

/// Set the start-up-only keys of `new` back to their values in `started`;
/// returns the keys whose value differed (in [`RESTART_KEYS`] order).
pub fn keep_restart_keys(started: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut differ = Vec::new();
    let (s, n) = (&started.server, &mut new.server);
    if s.listen != n.listen {
        n.listen = s.listen;
        differ.push(RESTART_KEYS[0]);
    }
    if s.mcp_endpoint != n.mcp_endpoint {
        n.mcp_endpoint = s.mcp_endpoint;
        differ.push(RESTART_KEYS[1]);
    }
    if s.handshake_timeout != n.handshake_timeout {
        n.handshake_timeout = s.handshake_timeout;
        differ.push(RESTART_KEYS[2]);
    }
    let (s, n) = (&started.task_engine, &mut new.task_engine);
    if s.state_dir != n.state_dir {
        n.state_dir = s.state_dir.clone();
        differ.push(RESTART_KEYS[3]);
    }
    if s.durability != n.durability {
        n.durability = s.durability;
        differ.push(RESTART_KEYS[4]);
    }
    let (s, n) = (&started.server, &mut new.server);
    if s.mcp_session_idle != n.mcp_session_idle {
        n.mcp_session_idle = s.mcp_session_idle;
        differ.push(RESTART_KEYS[5]);
    }
    if s.worker_threads != n.worker_threads {
        n.worker_threads = s.worker_threads;
        differ.push(RESTART_KEYS[6]);
    }
    differ
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    const WAIT: Duration = Duration::from_secs(10);

    async fn expect_signal(rx: &mut mpsc::Receiver<()>) {
        let got = tokio::time::timeout(WAIT, rx.recv()).await;
        assert_eq!(got, Ok(Some(())), "no reload signal within {WAIT:?}");
    }

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "{}").unwrap();
        (dir, path)
    }

    #[tokio::test]
    async fn in_place_write_signals() {
        let (_dir, path) = setup();
        let mut rx = spawn_watcher(path.clone(), Duration::from_millis(50)).unwrap();
        std::fs::write(&path, r#"{"server": {}}"#).unwrap();
        expect_signal(&mut rx).await;
    }

    #[tokio::test]
    async fn rename_over_signals() {
        let (dir, path) = setup();
        let mut rx = spawn_watcher(path.clone(), Duration::from_millis(50)).unwrap();
        let tmp = dir.path().join(".config.json.swp");
        std::fs::write(&tmp, r#"{"server": {}}"#).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        expect_signal(&mut rx).await;
        // The watch survives the inode change: a second save is seen too.
        std::fs::write(&tmp, "{}").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        expect_signal(&mut rx).await;
    }

    #[tokio::test]
    async fn delete_then_create_signals() {
        let (_dir, path) = setup();
        let mut rx = spawn_watcher(path.clone(), Duration::from_millis(50)).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "{}").unwrap();
        expect_signal(&mut rx).await;
    }

    #[test]
    fn events_for_other_files_and_reads_are_ignored() {
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
        let name = std::ffi::OsStr::new("config.json");
        let ev = |kind, p: &str| Event::new(kind).add_path(PathBuf::from(p));
        assert!(relevant(
            &ev(EventKind::Modify(ModifyKind::Any), "/d/config.json"),
            name
        ));
        assert!(relevant(
            &ev(EventKind::Create(CreateKind::File), "/d/config.json"),
            name
        ));
        assert!(!relevant(
            &ev(EventKind::Modify(ModifyKind::Any), "/d/other.json"),
            name
        ));
        assert!(!relevant(
            &ev(
                EventKind::Access(AccessKind::Open(AccessMode::Any)),
                "/d/config.json"
            ),
            name
        ));
        assert!(relevant(
            &ev(
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                "/d/config.json"
            ),
            name
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_becomes_one_trailing_signal() {
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let (tx, mut rx) = mpsc::channel(1);
        let task = tokio::spawn(debounce_loop(raw_rx, tx, Duration::from_millis(300)));
        for _ in 0..5 {
            raw_tx.send(()).unwrap();
            tokio::task::yield_now().await; // let the loop see it at this instant
            tokio::time::advance(Duration::from_millis(100)).await;
        }
        assert!(rx.try_recv().is_err(), "signalled before the burst settled");
        tokio::time::advance(Duration::from_millis(250)).await;
        tokio::task::yield_now().await;
        assert_eq!(rx.recv().await, Some(()));
        assert!(rx.try_recv().is_err(), "a burst gave more than one signal");
        drop(rx);
        task.await.unwrap(); // the loop ends once the receiver is gone
    }

    #[tokio::test(start_paused = true)]
    async fn endless_writes_still_signal_within_max_wait() {
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let (tx, mut rx) = mpsc::channel(1);
        tokio::spawn(debounce_loop(raw_rx, tx, Duration::from_millis(100)));
        let start = Instant::now();
        while rx.try_recv().is_err() {
            raw_tx.send(()).unwrap();
            tokio::time::advance(Duration::from_millis(50)).await;
            assert!(
                start.elapsed() <= Duration::from_millis(1200),
                "no signal under constant writes"
            );
        }
    }

    #[test]
    fn diff_sorts_servers_into_four_groups() {
        let p = Path::new("/tmp/x/config.json");
        let old = parse(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}, "c": {"url": "http://h/mcp"}}}"#,
            p,
        )
        .unwrap()
        .config;
        let new = parse(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "args": ["1"]}, "d": {"command": "z"}}}"#,
            p,
        )
        .unwrap()
        .config;
        let d = diff_servers(&old, &new);
        assert_eq!(d.added, vec!["d"]);
        assert_eq!(d.removed, vec!["c"]);
        assert_eq!(d.changed, vec!["b"]);
        assert_eq!(d.unchanged, vec!["a"]);
        assert!(!d.is_empty());
        assert!(diff_servers(&new, &new).is_empty());
    }
}
