//! One hub per state dir: an exclusive, non-blocking `flock` on
//! `<stateDir>/toolhub.lock`, taken before the hub touches anything else in
//! that folder and held for the life of the process. The kernel drops the
//! lock when the process dies, however it dies (SIGKILL included), so a
//! stale lock file never blocks a restart. The file holds the owner's pid,
//! for the message a second instance prints.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "toolhub.lock";

/// The held lock; dropping it (at process exit) releases it.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    pub path: PathBuf,
}

/// Take the state dir's lock or say exactly who holds it.
pub fn acquire(state_dir: &Path) -> Result<StateLock, String> {
    crate::store::private::dir(state_dir)
        .map_err(|e| format!("cannot create state dir {}: {e}", state_dir.display()))?;
    let path = state_dir.join(LOCK_FILE);
    // No truncate: a second instance must not modify the holder's file.
    // std opens with O_CLOEXEC, so MCP servers and commands never inherit it.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot open lock file {}: {e}", path.display()))?;
    // SAFETY: flock on a valid, owned fd; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let pid = match holder.trim() {
                "" => "unknown".to_string(),
                p => p.chars().take(20).collect(),
            };
            return Err(format!(
                "another toolhub is running on state dir {} (pid {pid}, lock file {}); stop it first, or give this one another taskEngine.stateDir",
                state_dir.display(),
                path.display()
            ));
        }
        return Err(format!("cannot lock {}: {err}", path.display()));
    }
    let write_pid = |f: &mut File| -> std::io::Result<()> {
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        writeln!(f, "{}", std::process::id())?;
        f.flush()
    };
    write_pid(&mut file)
        .map_err(|e| format!("cannot write our pid into {}: {e}", path.display()))?;
    Ok(StateLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_dir_is_refused_with_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        let text = std::fs::read_to_string(&first.path).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file description, so a second
        // open in the same process conflicts just like another process.
        let e = acquire(dir.path()).unwrap_err();
        assert!(e.contains("another toolhub is running"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(e.contains(LOCK_FILE), "{e}");
        drop(first);
        assert!(acquire(dir.path()).is_ok(), "released on drop");
    }
}
