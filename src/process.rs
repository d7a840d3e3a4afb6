//! Child processes that die with the hub, and only with the hub.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked a child exits, not
//! when the process does. Tokio worker threads come and go: a worker that
//! enters `block_in_place` (the journal writes) ends up in the blocking pool
//! and retires after `thread_keep_alive` (10 s) idle, and every child it
//! forked would be SIGKILLed with it. So every child is forked from one
//! thread that lives as long as the process ([`on_spawner`]); the parent-death
//! signal then means exactly "the hub died".
//!
//! [`ExitWatch`] notices a leader's exit through a pidfd without reaping it
//! (the owner of the `Child` still waits on it), so a wrapper (`npm exec`,
//! `sh -c`) that dies while its real server lives on in the group is seen.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

fn spawner() -> io::Result<mpsc::Sender<Job>> {
    if let Some(tx) = SPAWNER.get() {
        return tx
            .lock()
            .map(|g| g.clone())
            .map_err(|_| io::Error::other("the spawner thread's queue is poisoned"));
    }
    let (tx, rx) = mpsc::channel::<Job>();
    // The thread holds the receiver; the sender lives in a static and is
    // never dropped, so the thread runs until the process ends.
    std::thread::Builder::new()
        .name("toolhub-spawner".into())
        .spawn(move || {
            for job in rx {
                // A panicking job must not end this thread: every child it
                // forked would die with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        })?;
    // Two first callers racing: the loser's thread sees its sender dropped
    // and exits at once, before it forked anything.
    let _ = SPAWNER.set(Mutex::new(tx));
    SPAWNER
        .get()
        .ok_or_else(|| io::Error::other("the spawner thread did not start"))?
        .lock()
        .map(|g| g.clone())
        .map_err(|_| io::Error::other("the spawner thread's queue is poisoned"))
}

/// Run `f` (which forks) on the process-long spawner thread, inside the
/// caller's tokio runtime context, and return its result.
pub async fn on_spawner<T, F>(f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let handle = tokio::runtime::Handle::try_current().ok();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _guard = handle.as_ref().map(|h| h.enter());
        let _ = tx.send(f());
    });
    spawner()?
        .send(job)
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    rx.await
        .map_err(|_| io::Error::other("spawning panicked on the spawner thread"))
}

/// Make `cmd`'s child die when the hub process dies (Linux; SIGKILL), even
/// when the hub is SIGKILLed. Fork it with [`on_spawner`], or the child
/// dies with the forking thread instead.
pub fn set_parent_death_signal(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl and getppid are async-signal-safe; nothing else runs
        // between fork and exec.
        unsafe {
            let hub = libc::getpid();
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // The hub died between fork and prctl: no signal will come.
                if libc::getppid() != hub {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A descriptor that becomes readable when one process exits (a zombie
/// counts), without reaping it.
pub struct ExitWatch(OwnedFd);

impl ExitWatch {
    /// Open right after the fork, before anyone can reap the pid. `None`
    /// where pidfds are not available (kernel older than 5.3).
    pub fn open(pid: i32) -> Option<ExitWatch> {
        // SAFETY: a plain syscall; the descriptor it returns is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            tracing::debug!(pid, error = %io::Error::last_os_error(), "pidfd_open failed; leader exit is seen only when the transport closes");
            return None;
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Some(ExitWatch(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// A second handle on the same pidfd, to ask at any moment whether the
    /// process has exited (while [`ExitWatch::exited`] waits for it).
    pub fn probe(&self) -> Option<ExitProbe> {
        self.0.try_clone().ok().map(ExitProbe)
    }

    /// Resolves when the process has exited. Never resolves when the
    /// descriptor cannot be registered with the runtime.
    pub async fn exited(self) {
        // SAFETY: the AsyncFd owns the pidfd, which stays open and refers to
        // the same process for its whole life.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(self.0, tokio::io::Interest::READABLE)
        };
        match registered {
            Ok(afd) => {
                let _ = afd.readable().await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot watch a pidfd");
                std::future::pending::<()>().await
            }
        }
    }
}

/// Asks a pidfd, without waiting, whether its process has exited.
pub struct ExitProbe(OwnedFd);

impl ExitProbe {
    /// Has the process exited (a zombie counts)? One `poll` with no wait.
    pub fn has_exited(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut fd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd that lives across the call; no wait.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        ready > 0 && fd.revents & libc::POLLIN != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn on_spawner_returns_the_value_and_survives_a_panic() {
        let name = on_spawner(|| std::thread::current().name().map(String::from))
            .await
            .expect("spawner");
        assert_eq!(name.as_deref(), Some("toolhub-spawner"));
        let err = on_spawner(|| -> u8 { panic!("boom") }).await;
        assert!(err.is_err());
        let again = on_spawner(|| 7).await.expect("the thread lives on");
        assert_eq!(again, 7);
    }

    #[tokio::test]
    async fn exit_watch_fires_when_the_process_exits() {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("read x")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = child.id().expect("pid") as i32;
        let watch = ExitWatch::open(pid).expect("pidfd");
        let probe = watch.probe().expect("probe");
        assert!(!probe.has_exited());
        drop(child.stdin.take());
        tokio::time::timeout(std::time::Duration::from_secs(30), watch.exited())
            .await
            .expect("exit seen");
        assert!(probe.has_exited(), "the probe sees the exit the watch saw");
        let _ = child.wait().await;
    }
}
